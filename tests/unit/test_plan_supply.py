# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan`'s supply chain: the keys, repositories and packages each host's roles will configure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpufabric import os_targets, supply
from tests.conftest import BIN, REPO

RECORDED = REPO / "tests" / "fixtures" / "os_release"
# gpufabric_os value -> the directory of its recorded facts.
RECORDINGS = {
    "ubuntu-22.04": "ubuntu2204",
    "ubuntu-24.04": "ubuntu2404",
    "debian-12": "debian12",
    "debian-13": "debian13",
    "rhel-9": "rhel9",
}
TCPXO_HOST = {
    "gpufabric_profile": "gcp/a3-megagpu-8g",
    # This machine has no gVNICs for the plan role to read: the names Google's Ubuntu images give a3-mega's.
    "gpufabric_nic_names": {
        "management": ["enp0s12"],
        "gpu": ["enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0"],
    },
    "gcp_tcpxo_import_helper_version": "1.0.6-1",
    "gcp_tcpxo_ar_transport_version": "0.4.1",
    # Some tests plan on this machine, whose kernel may be 6.13 or later (6.18 on the build machine), where the
    # role refuses dmabuf-import-helper's DKMS build (tests/unit/test_gcp_tcpxo_logic.py covers the refusal).
    "gcp_tcpxo_import_helper_kernel_check": False,
}


def test_every_target_has_the_facts_ansible_gathers_there():
    assert set(os_targets.OS_TARGETS) == set(RECORDINGS)
    for name, directory in RECORDINGS.items():
        recorded = json.loads((RECORDED / directory / "facts.json").read_text())
        assert os_targets.OS_TARGETS[name] == {
            key: recorded[f"ansible_{key}"] for key in os_targets.OS_TARGETS[name]
        }, name


@pytest.mark.parametrize(
    ("os_release", "target"),
    [
        ({"id": "ubuntu", "version_id": "22.04"}, "ubuntu-22.04"),
        ({"id": "ubuntu", "version_id": "24.04"}, "ubuntu-24.04"),
        ({"id": "debian", "version_id": "12"}, "debian-12"),
        ({"id": "rocky", "version_id": "9.4"}, "rhel-9"),
        ({"id": "ubuntu", "version_id": "20.04"}, None),
        ({"id": "fedora", "version_id": "41"}, None),
        ({}, None),
    ],
)
def test_a_probed_os_release_names_its_target(os_release, target):
    assert os_targets.target_of(os_release) == target


def write_inventory(tmp_path: Path, hosts: dict) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return path


def test_plan_json_shows_each_hosts_repositories_and_packages(gpufabric, tmp_path):
    inventory = write_inventory(
        tmp_path,
        {
            "a3m-1": {**TCPXO_HOST, "gpufabric_os": "ubuntu-22.04"},
            "a3m-2": dict(TCPXO_HOST),  # no OS named: not computed, and the plan says how to get it
        },
    )
    result = gpufabric("plan", "-i", str(inventory), "--json")
    assert result.returncode == 0, result.stderr
    hosts = json.loads(result.stdout)["hosts"]
    chain = hosts["a3m-1"]["supply"]
    assert (chain["os"], chain["os_from"]) == ("ubuntu-22.04", "gpufabric_os")
    steps = chain["roles"]["gcp_tcpxo"]
    repositories = [repository for step in steps for repository in step["repositories"]]
    assert [(r["name"], r["uris"][0], r["suites"][0]) for r in repositories] == [
        ("gpufabric-gcp-ar-transport", "https://packages.cloud.google.com/apt",
         "apt-transport-artifact-registry-stable"),
        ("gpufabric-gcp-tcpxo", "ar+https://us-apt.pkg.dev/projects/gce-ai-infra", "gpudirect-tcpxo-apt"),
    ]  # fmt: skip
    keys = {key["repository"]: key for step in steps for key in step["keys"]}
    assert all(keys[r["name"]]["dest"] == r["signed_by"] and keys[r["name"]]["fingerprints"] for r in repositories)
    packages = {pin["name"]: pin for step in steps for pin in step["packages"]}
    assert packages["dmabuf-import-helper"] == {
        "name": "dmabuf-import-helper", "version": "1.0.6-1", "hold": True, "repository": "gpufabric-gcp-tcpxo"
    }  # fmt: skip
    assert packages["apt-transport-artifact-registry"]["version"] == "0.4.1"
    assert packages["podman"]["repository"] == ""  # the distribution's own
    # Fetched outside package repositories: the images by digest, the nccl-tests tarball by its SHA256.
    images = chain["artifacts"]["gcp_tcpxo"]
    assert [(image["kind"], image["name"].split()[0]) for image in images] == [("image", "rxdm"), ("image", "plugin")]
    assert all(image["source"].endswith("@" + image["checksum"]) for image in images)
    (tarball,) = chain["artifacts"]["nccl_tests"]
    assert tarball["source"].startswith("https://github.com/NVIDIA/nccl-tests/archive/v")
    assert tarball["checksum"].startswith("sha256:") and len(tarball["checksum"]) == len("sha256:") + 64
    # A role whose required variables are missing says so instead of guessing.
    assert "nvidia_driver: 'nvidia_driver_branch' is undefined" in chain["errors"]
    assert hosts["a3m-2"]["supply"] == supply.unknown_os(
        "set host variable gpufabric_os or gpufabric_image, or run with --probe"
    )

    table = gpufabric("plan", "-i", str(inventory))
    assert table.returncode == 0, table.stderr
    assert "supply chain of a3m-1 (ubuntu-22.04, from gpufabric_os): repositories" in table.stdout
    assert "dmabuf-import-helper" in table.stdout and "gpufabric-gcp-tcpxo" in table.stdout
    assert "supply chain of a3m-1 (ubuntu-22.04, from gpufabric_os): fetched outside package" in table.stdout
    assert (
        "supply chain of a3m-2: not computed (set host variable gpufabric_os or gpufabric_image, or run with --probe)"
        in table.stdout
    )


def test_an_unknown_os_is_refused_naming_host_value_and_accepted(gpufabric, tmp_path):
    inventory = write_inventory(tmp_path, {"a3m-1": {**TCPXO_HOST, "gpufabric_os": "ubuntu-20.04"}})
    result = gpufabric("plan", "-i", str(inventory), "--json")
    assert result.returncode == 1 and result.stdout == ""  # the CLI's code for bad input
    assert result.stderr.strip() == (
        "error: host a3m-1: host variable gpufabric_os 'ubuntu-20.04' is not accepted; accepted: "
        "ubuntu-22.04, ubuntu-24.04, debian-12, debian-13, rhel-9"
    )


def test_the_supply_chain_is_what_the_role_computes(ansible_env, tmp_path):
    """One code path: the role's own plan task, run by ansible-playbook on this host, gives the same steps."""
    inventory = write_inventory(tmp_path, {"a3m-1": {**TCPXO_HOST, "ansible_connection": "local"}})
    out = tmp_path / "role.json"
    playbook = tmp_path / "plan.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Plan as the role does",
                            "ansible.builtin.include_role": {
                                "name": "gpufabric.cluster.gcp_tcpxo",
                                "tasks_from": "plan",
                            },
                        },
                        {
                            "name": "Write what the role planned",
                            "ansible.builtin.copy": {
                                "dest": str(out),
                                "content": "{{ {'plan': gpufabric_plan, 'supply': gcp_tcpxo__plan.supply,"
                                " 'facts': ansible_facts} | to_json }}",
                                "mode": "0600",
                            },
                        },
                    ],
                }
            ]
        )
    )
    run = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)],
        env={**ansible_env, "ANSIBLE_PYTHON_INTERPRETER": str(BIN / "python")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    role = json.loads(out.read_text())
    hostvars = yaml.safe_load(Path(inventory).read_text())["all"]["hosts"]["a3m-1"]
    chain = supply.host_supply(role["plan"], hostvars, role["facts"], "debian-12", "probe")
    assert chain["roles"]["gcp_tcpxo"] == role["supply"]
    assert any(pin["name"].startswith("linux-headers-") for pin in role["supply"][0]["packages"])


def test_a_probe_reads_the_os_and_kernel_from_the_host(gpufabric, tmp_path):
    """This machine, probed over a local connection: its os-release picks the target, its kernel the headers."""
    host = {**TCPXO_HOST, "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}
    inventory = write_inventory(tmp_path, {"here": {**host, "gpufabric_os": "rhel-9"}})  # the probe wins
    result = gpufabric("plan", "-i", str(inventory), "--probe", "--json")
    chain = json.loads(result.stdout)["hosts"]["here"]["supply"]
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    expected = os_targets.target_of({"id": release["ID"], "version_id": release.get("VERSION_ID", "").strip('"')})
    assert (chain["os"], chain["os_from"], chain["note"]) == (expected, "probe", "")
    packages = [pin["name"] for step in chain["roles"]["gcp_tcpxo"] for pin in step["packages"]]
    assert f"linux-headers-{os.uname().release}" in packages
