# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan --probe` against simulated hosts, through the real CLI and ansible-runner.

Each host is this machine (connection local) with `gpufabric_hw_root`
pointing the fabric_facts module at a simulated sysfs tree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

catalog = plugin_utils("fabric_catalog").load_catalog()


def inventory(tmp_path: Path, hosts: dict[str, str]) -> Path:
    path = tmp_path / "hosts.ini"
    lines = ["[sim]", *(f"{name} {variables}" for name, variables in hosts.items())]
    lines += ["[sim:vars]", "ansible_connection=local", f"ansible_python_interpreter={sys.executable}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# The names Google's Ubuntu images give a3-mega's NICs (tests/fixtures/nic_names.yml); the catalog names none.
UBUNTU_MEGA = {
    "management": ["enp0s12"],
    "gpu": ["enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0"],
}


def tree(tmp_path: Path, name: str, profile: str, faults: Faults | None = None, nic_names: dict | None = None) -> Path:
    return write_tree(catalog.get(profile), tmp_path / name, faults, nic_names=nic_names)


def test_probe_reports_findings_per_host_and_suggests_a_profile_for_bare_metal(gpufabric, tmp_path):
    ubuntu = tree(tmp_path, "a", "gcp/a3-megagpu-8g", nic_names=UBUNTU_MEGA)
    hosts = {
        "mega-ok": f"gpufabric_profile=gcp/a3-megagpu-8g gpufabric_hw_root={ubuntu}",
        "mega-cos": f"gpufabric_profile=gcp/a3-megagpu-8g gpufabric_hw_root={tree(tmp_path, 'd', 'gcp/a3-megagpu-8g')}",
        "mega-bad": "gpufabric_profile=gcp/a3-megagpu-8g "
        f"gpufabric_hw_root={tree(tmp_path, 'b', 'gcp/a3-megagpu-8g', Faults(nics_missing=2, nic_down=0))}",
        "hgx-unlabelled": f"gpufabric_hw_root={tree(tmp_path, 'c', 'baremetal/hgx-h100-ib-ndr')}",
    }
    result = gpufabric("plan", "--probe", "--json", "-i", str(inventory(tmp_path, hosts)))
    assert result.returncode == 1, result.stderr
    plan = json.loads(result.stdout)["hosts"]

    # Each host's environment with its own names: Google's Ubuntu image's, the kernel's (COS, net.ifnames=0).
    assert plan["mega-ok"]["probe"]["findings"] == [] and plan["mega-cos"]["probe"]["findings"] == []
    assert plan["mega-ok"]["nic_names"] == UBUNTU_MEGA
    assert plan["mega-ok"]["env"]["NCCL_FASTRAK_IFNAME"] == ",".join(UBUNTU_MEGA["gpu"])
    assert plan["mega-cos"]["env"]["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    assert plan["mega-cos"]["env"]["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    bad = plan["mega-bad"]["probe"]["findings"]
    assert {f["check"] for f in bad} == {"nic_count", "link_down", "nic_names"}
    assert "found 6 of 8 GPU-network NICs (gvnic); found: eth1, " in " ".join(f["message"] for f in bad)
    (names,) = [f["message"] for f in bad if f["check"] == "nic_names"]
    assert names.startswith("profile gcp/a3-megagpu-8g: NCCL_FASTRAK_IFNAME needs {nics.gpu}, but the host has 6 of 8")
    assert plan["mega-bad"]["env"]["NCCL_FASTRAK_IFNAME"] == "{nics.gpu}"  # left as the catalog says

    # A suggestion, not a plan: apply and drift go by the inventory, so the host stays not managed.
    unlabelled = plan["hgx-unlabelled"]
    assert unlabelled["suggested_profile"]["name"] == "baremetal/hgx-h100-ib-ndr"
    assert unlabelled["suggested_profile"]["reason"].startswith("inferred from hardware")
    assert unlabelled["profile"] == "unknown" and unlabelled["unmanaged"]["code"] == "no_profile"
    assert unlabelled["probe"]["findings"] == [], "held against the suggested profile"
    assert any("set gpufabric_profile: baremetal/hgx-h100-ib-ndr" in w for w in unlabelled["warnings"])


def test_probe_table_and_clean_exit_when_all_match(gpufabric, tmp_path):
    root = tree(tmp_path, "a", "aws/p5.48xlarge")
    hosts = {"p5-0": f"gpufabric_cloud=aws gpufabric_instance_type=p5.48xlarge gpufabric_hw_root={root}"}
    result = gpufabric("plan", "--probe", "-i", str(inventory(tmp_path, hosts)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "matches profile" in result.stdout
    assert "every probed host matches its profile" in result.stdout


def test_probe_reports_unreachable_host(gpufabric, tmp_path):
    path = tmp_path / "hosts.ini"
    # Port 9 on loopback: nothing listens, so SSH fails at once.
    path.write_text(
        "gone ansible_host=127.0.0.1 ansible_port=9 ansible_connection=ssh gpufabric_profile=aws/p5.48xlarge\n",
        encoding="utf-8",
    )
    result = gpufabric("plan", "--probe", "-i", str(path))
    assert result.returncode == 1
    assert "unreachable" in result.stdout
