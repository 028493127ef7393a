# SPDX-License-Identifier: Apache-2.0
"""Rack-scale NVLink (GB200 NVL72) through the real CLI: `catalog list` shows the rack-scale profiles with their
architecture, domain and sources; `plan` over inventories/sample-nvl72 groups the hosts into NVLink domains, takes
the arm64 (sbsa) repositories, and exits 1 on a domain error."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

RACK_SCALE = (
    "aws/p6e-gb200.36xlarge",
    "azure/Standard_ND128isr_NDR_GB200_v6",
    "azure/Standard_ND128isr_GB300_v6",
    "gcp/a4x-highgpu-4g",
    "oci/BM.GPU.GB200.4",
    "baremetal/gb200-nvl72-ib-ndr",
)


def test_catalog_list_shows_the_rack_scale_profiles_with_their_sources(gpufabric):
    result = gpufabric("catalog", "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["profiles"]}
    for name in RACK_SCALE:
        assert rows[name]["architecture"] == "arm64", name
        assert rows[name]["nvlink_domain"] == "72 GPUs, 18 hosts", name
        assert rows[name]["sources"], name
    assert rows["aws/p5.48xlarge"]["architecture"] == "amd64"
    assert rows["aws/p5.48xlarge"]["nvlink_domain"] == "-"


def test_plan_groups_the_sample_nvl72_fleet_into_its_domains(gpufabric):
    result = gpufabric("plan", "-i", "inventories/sample-nvl72", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    domains = plan["nvlink"]["domains"]
    rack = domains["azure-rack0"]
    assert len(rack["members"]) == 18 and rack["gpus"] == 72 and rack["hosts_per_domain"] == 18
    assert rack["findings"] == []
    partial = domains["ocid1.computegpumemoryfabric.oc1.iad.example1"]
    assert [f["severity"] for f in partial["findings"]] == ["warning"]
    host = plan["hosts"]["ndgb200-r0-00"]
    assert host["architecture"] == "arm64"
    assert host["nvlink"]["domain"] == "azure-rack0"
    assert "imex" in host["roles"] and host["roles_unavailable"] == []
    steps = host["supply"]["roles"]["nvidia_driver"]
    urls = {uri for step in steps for repo in step["repositories"] for uri in repo["uris"]}
    assert "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/" in urls

    table = gpufabric("plan", "-i", "inventories/sample-nvl72")
    assert table.returncode == 0, table.stderr
    assert "NVLink domains" in table.stdout
    assert "18 of 18" in table.stdout and "4 of 18" in table.stdout


def _inventory(tmp_path: Path, hosts: dict[str, dict[str, str]]) -> str:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"vars": {"gpufabric_os": "ubuntu-24.04"}, "hosts": hosts}}))
    return str(path)


def test_plan_exits_1_on_a_host_without_a_domain_and_on_mixed_profiles(gpufabric, tmp_path):
    azure = {"gpufabric_cloud": "azure", "gpufabric_instance_type": "Standard_ND128isr_NDR_GB200_v6"}
    oci = {"gpufabric_cloud": "oci", "gpufabric_instance_type": "BM.GPU.GB200.4"}
    no_domain = _inventory(tmp_path, {"gb-0": {**azure, "gpufabric_nvlink_domain": "rack0"}, "gb-1": azure})
    result = gpufabric("plan", "-i", no_domain)
    assert result.returncode == 1
    assert "gb-1: profile azure/Standard_ND128isr_NDR_GB200_v6 spans NVLink domains" in " ".join(result.stdout.split())
    assert "Traceback" not in result.stderr

    mixed = _inventory(
        tmp_path,
        {"gb-0": {**azure, "gpufabric_nvlink_domain": "rack0"}, "gb-1": {**oci, "gpufabric_nvlink_domain": "rack0"}},
    )
    result = gpufabric("plan", "-i", mixed, "--json")
    assert result.returncode == 1
    findings = json.loads(result.stdout)["nvlink"]["domains"]["rack0"]["findings"]
    assert any(f["severity"] == "error" and "azure/Standard_ND128isr_NDR_GB200_v6" in f["message"] for f in findings)
