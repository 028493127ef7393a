# SPDX-License-Identifier: Apache-2.0
"""The real `gpufabric k8s manifests` command: files written, progress, refusals with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from unit.test_cli import assert_clean_error
from unit.test_k8s_manifests import RAILS, assert_device_plugin_config, assert_nad

LAB = "inventories/sriov-lab"


def test_manifests_for_the_lab_fleet(gpufabric, tmp_path):
    out = tmp_path / "manifests"
    result = gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out), "--storage-interface", "eth1", "--gatekeeper")
    assert result.returncode == 0, result.stderr
    names = sorted(path.name for path in out.iterdir() if path.name != ".gpufabric-manifests")
    assert names == [
        "00-sriovdp-config.yaml",
        "10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml",
        "20-nad-storage-ipvlan.yaml",
        "30-admission-policy.yaml",
        "31-gatekeeper-template.yaml",
        "32-gatekeeper-constraint.yaml",
        "README.md",
    ]
    for name in names:  # progress: one line per file written
        assert f"wrote {out / name}" in result.stdout
    assert "placeholders" in result.stderr  # no --ipam-range: said, not silent
    [configmap] = list(yaml.safe_load_all((out / "00-sriovdp-config.yaml").read_text()))
    assert_device_plugin_config(configmap)
    for name in ("10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml", "20-nad-storage-ipvlan.yaml"):
        for document in yaml.safe_load_all((out / name).read_text()):
            assert_nad(document)
    readme = (out / "README.md").read_text()
    assert "hgx-sriov-0" in readme and "hgx-sriov-1" in readme


def test_non_empty_directory_needs_force_and_keeps_unrelated_files(gpufabric, tmp_path):
    out = tmp_path / "manifests"
    out.mkdir()
    (out / "stale.yaml").write_text("stale: true\n")
    for force in ([], ["--force"]):  # a file gpufabric did not write is never removed
        result = gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out), *force)
        assert_clean_error(result, "not empty", "stale.yaml", "gpufabric did not write", "--force")
        assert [path.name for path in out.iterdir()] == ["stale.yaml"]
    (out / "stale.yaml").unlink()
    assert gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out)).returncode == 0
    assert_clean_error(gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out)), "not empty", "--force")
    result = gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out), "--force", "--ipam-range", "10.40.0.0/16")
    assert result.returncode == 0, result.stderr
    assert "placeholders" not in result.stderr
    assert "10.40.0.0/16" in (out / "10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml").read_text()


def test_fleet_without_sriov_profile(gpufabric, tmp_path):
    out = tmp_path / "manifests"
    result = gpufabric("k8s", "manifests", "-i", "inventories/sample", "-o", str(out))
    assert_clean_error(result, "inventory 'inventories/sample'", "sriov:", "tier best")
    assert not out.exists()


def test_bad_option_before_anything_is_read(gpufabric, tmp_path):
    out = tmp_path / "manifests"
    result = gpufabric("k8s", "manifests", "-i", LAB, "-o", str(out), "--ipam-range", "10.0.0.300/16")
    assert_clean_error(result, "--ipam-range '10.0.0.300/16'")
    assert not out.exists()


def test_host_var_naming_pfs_gives_rails(gpufabric, tmp_path):
    """The catalog names no interface: the hosts' PF netdevs come from the host var gpufabric_nic_names."""
    hosts = {
        name: {"ansible_connection": "local", "gpufabric_profile": "baremetal/hgx-h100-ib-ndr-sriov"}
        | {"gpufabric_nic_names": {"gpu": RAILS}}
        for name in ("node-0", "node-1")
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    out = tmp_path / "manifests"
    args = ("k8s", "manifests", "-i", str(inventory), "-o", str(out), "--ipam-range", "10.8.0.0/16")
    result = gpufabric(*args, "--resource-prefix", "example.org", "--namespace", "ml", "--json")
    assert result.returncode == 0, result.stderr
    # --json: what was written, on stdout as JSON; the progress lines went to stderr.
    shown = json.loads(result.stdout)
    assert shown["output"] == str(out) and shown["namespace"] == "ml" and shown["placeholder_ranges"] is False
    assert sorted(Path(path).name for path in shown["files"]) == [
        "00-sriovdp-config.yaml",
        "10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml",
        "30-admission-policy.yaml",
        "README.md",
    ]
    admission = shown["admission"]
    assert admission["label"] == "gpufabric.io/fabric-access=true" and admission["gatekeeper"] is False
    assert len(admission["resources"]) == 8 and all(name.startswith("example.org/") for name in admission["resources"])
    assert all(Path(path).is_file() for path in shown["files"]) and shown["storage"] is None
    [profile] = shown["profiles"]
    assert profile["profile"] == "baremetal/hgx-h100-ib-ndr-sriov" and len(profile["hosts"]) == shown["hosts"] == 2
    assert len(profile["rails"]) == 8 and profile["rails"][0]["resource"].startswith("example.org/")
    assert profile["rails"][0]["physical_function"] == RAILS[0]
    assert f"wrote {out / 'README.md'}" in result.stderr
    [configmap] = list(yaml.safe_load_all((out / "00-sriovdp-config.yaml").read_text()))
    config = json.loads(configmap["data"]["config.json"])
    assert len(config["resourceList"]) == 8
    assert {resource["resourcePrefix"] for resource in config["resourceList"]} == {"example.org"}
    nads = list(yaml.safe_load_all((out / "10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml").read_text()))
    assert {nad["metadata"]["namespace"] for nad in nads} == {"ml"}


def test_help_lists_the_command(gpufabric):
    result = gpufabric("k8s", "manifests", "--help")
    assert result.returncode == 0
    for option in ("--inventory", "--output", "--tier", "--resource-prefix", "--namespace", "--storage-interface"):
        assert option in result.stdout
