# SPDX-License-Identifier: Apache-2.0
"""Simulated hardware trees: every catalog profile reads back as its profile says, and each fault
switch changes exactly the fact it names."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, management_interface, write_tree

hw_facts = module_utils("hw_facts")
catalog = plugin_utils("fabric_catalog").load_catalog()

RDMA_FABRICS = ("infiniband", "roce", "gpudirect_rdma")
LINK_LAYER = {"connectx_ib": "InfiniBand", "connectx_roce": "Ethernet", "efa": "Unspecified"}
FACT_KIND = {"gvnic": "gvnic", "connectx_ib": "connectx", "connectx_roce": "connectx", "efa": "efa"}


def gpu_network(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices that carry the profile's GPU network, found the way a consumer of the facts finds them:
    netdevs for gVNIC (less the management NIC), RDMA devices for ConnectX and EFA."""
    kind = profile["nics"]["gpu"]["kind"]
    if kind == "gvnic":
        management = management_interface(profile)
        return [nic for nic in facts["nics"] if nic["kind"] == "gvnic" and nic["name"] != management]
    if kind == "ethernet":
        rdma_netdevs = {device["netdev"] for device in facts["rdma_devices"]}
        skip = rdma_netdevs | {management_interface(profile)}
        return [nic for nic in facts["nics"] if nic["name"] not in skip]
    return [
        device
        for device in facts["rdma_devices"]
        if device["kind"] == FACT_KIND[kind]
        and device["ports"]
        and device["ports"][0]["link_layer"] == LINK_LAYER[kind]
    ]


def build(tmp_path: Path, name: str, faults: Faults | None = None, where: str = "tree") -> dict[str, Any]:
    root = write_tree(catalog.get(name), tmp_path / where, faults)
    return hw_facts.gather(str(root))


def by_name(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(item for item in items if item["name"] == name)


def without(facts: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """``facts`` as if the NICs and RDMA devices ``names`` were not there."""
    expected = copy.deepcopy(facts)
    expected["nics"] = [nic for nic in expected["nics"] if nic["name"] not in names]
    expected["rdma_devices"] = [device for device in expected["rdma_devices"] if device["name"] not in names]
    for entry in expected["affinity"]:
        entry["same_switch"] = [item for item in entry["same_switch"] if item not in names]
        entry["same_numa"] = [item for item in entry["same_numa"] if item not in names]
    return expected


# ---------------------------------------------------------------------------
# Every profile
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", catalog.names())
def test_profile_reads_back(tmp_path, name):
    profile = catalog.get(name)
    facts = build(tmp_path, name)
    gpu, nics = profile["gpu"], profile["nics"]["gpu"]

    assert facts["unreadable"] == []
    assert len(facts["gpus"]) == gpu["count"]
    assert {g["pci_id"] for g in facts["gpus"]} == {gpu.get("pci_id", "10de:2330")}
    if "pci_id" in gpu:  # a profile without one (GB300: no public id) gets the default id's GPU
        assert {g["model"] for g in facts["gpus"]} == {gpu["model"].split("-")[0]}  # H100-SXM-80GB -> H100
    assert {g["driver"] for g in facts["gpus"]} == {"nvidia"}
    assert [g["numa_node"] for g in facts["gpus"]] == sorted(g["numa_node"] for g in facts["gpus"])
    assert len(facts["nvswitches"]) == (4 if gpu["nvswitch"] else 0)
    assert {s["pci_id"] for s in facts["nvswitches"]} <= {"10de:22a3"}

    fabric = gpu_network(facts, profile)
    assert len(fabric) == nics["count"]
    assert {device["kind"] for device in fabric} == {FACT_KIND[nics["kind"]]}
    if nics.get("rdma_devices"):
        # The facts list devices sorted by name (mlx5_10 before mlx5_3), the profile in its own order.
        assert sorted(device["name"] for device in fabric) == sorted(nics["rdma_devices"])

    if nics["kind"] == "gvnic":
        netdevs = fabric
    else:
        for device in fabric:
            (port,) = device["ports"]
            assert port["state"] == "ACTIVE"
            assert port["phys_state"] == "LinkUp"
            assert port["rate_gbit_s"] == nics["speed_gbit_s"]
            assert port["link_layer"] == LINK_LAYER[nics["kind"]]
            assert port["gid_count"] >= 1
        netdev_names = [device["netdev"] for device in fabric]
        if nics["kind"] == "efa":
            assert netdev_names == [None] * nics["count"]
        else:
            assert None not in netdev_names
        netdevs = [nic for nic in facts["nics"] if nic["name"] in netdev_names]
        assert len(netdevs) == len([name for name in netdev_names if name])
    if nics.get("interfaces"):
        assert sorted(nic["name"] for nic in netdevs) == sorted(nics["interfaces"])
    for nic in netdevs:
        assert nic["speed_mbps"] == nics["speed_gbit_s"] * 1000
        assert nic["operstate"] == "up"
        expected_mtu = nics.get("mtu") or (4092 if nics["kind"] == "connectx_ib" else 1500)
        assert nic["mtu"] == expected_mtu
        assert nic["is_virtual_function"] == (profile["cloud"] == "gcp" and nics["kind"] == "connectx_roce")

    fabric_names = {device["name"] for device in fabric}
    assert [entry["gpu"] for entry in facts["affinity"]] == [g["pci_address"] for g in facts["gpus"]]
    for entry in facts["affinity"]:
        assert fabric_names & set(entry["same_switch"]), f"GPU {entry['gpu']} has no GPU NIC on its PCIe switch"
        assert fabric_names & set(entry["same_numa"])

    host = facts["host"]
    assert host["kernel"].startswith("6.1.0-")
    assert host["os"]["id"] == "debian"
    assert host["secure_boot"] is False
    assert host["nvidia_driver_version"]
    modules = host["modules"]
    assert modules["nvidia"] and modules["nvidia_uvm"]
    assert modules["gve"] == (profile["cloud"] == "gcp")
    assert modules["efa"] == (profile["fabric"] == "efa")
    assert modules["nvidia_peermem"] == modules["mlx5_ib"] == (profile["fabric"] in RDMA_FABRICS)
    assert (host["mlx5_core_version"] is not None) == modules["mlx5_core"]


def test_azure_has_its_accelnet_device_outside_the_fabric(tmp_path):
    facts = build(tmp_path, "azure/Standard_ND96isr_H100_v5")
    accelnet = by_name(facts["rdma_devices"], "mlx5_an0")
    assert accelnet["kind"] == "connectx"
    assert accelnet["ports"][0]["link_layer"] == "Ethernet"
    assert accelnet["netdev"] == "eth0"
    assert accelnet["pcie_switch"] is None


def test_gcp_rdma_nics_are_virtual_functions_of_a_present_physical_function(tmp_path):
    root = write_tree(catalog.get("gcp/a3-ultragpu-8g"), tmp_path / "tree")
    facts = hw_facts.gather(str(root))
    device = by_name(facts["rdma_devices"], "mlx5_0")
    assert device["pci_id"] == "15b3:101e"
    physfn = root / "sys/bus/pci/devices" / device["pci_address"] / "physfn"
    assert (physfn / "sriov_numvfs").read_text().strip() == "1"


# ---------------------------------------------------------------------------
# The tree itself
# ---------------------------------------------------------------------------


def test_tree_says_it_is_simulated(tmp_path):
    root = write_tree(catalog.get("aws/p5.48xlarge"), tmp_path / "tree", Faults(nic_down=3))
    text = (root / "SIMULATED").read_text()
    assert "aws/p5.48xlarge" in text
    assert "nic_down" in text


def test_symlinks_are_relative_and_resolve_inside_the_tree(tmp_path):
    root = write_tree(catalog.get("gcp/a3-ultragpu-8g"), tmp_path / "tree")
    links = [Path(top) / name for top, dirs, files in os.walk(root) for name in dirs + files]
    links = [path for path in links if path.is_symlink()]
    assert len(links) > 100
    for link in links:
        assert not os.path.isabs(os.readlink(link)), link
        assert link.resolve().is_relative_to(root.resolve()), link
        assert link.exists(), f"dangling: {link}"


def test_tree_can_be_moved(tmp_path):
    root = write_tree(catalog.get("nebius/gpu-h100-sxm"), tmp_path / "tree")
    before = hw_facts.gather(str(root))
    moved = tmp_path / "elsewhere" / "deeper"
    moved.parent.mkdir()
    shutil.move(root, moved)
    after = hw_facts.gather(str(moved))
    assert {**after, "root": before["root"]} == before


def test_refuses_a_non_empty_root(tmp_path):
    (tmp_path / "keep").write_text("mine")
    with pytest.raises(FileExistsError):
        write_tree(catalog.get("aws/p5.48xlarge"), tmp_path)


@pytest.mark.parametrize(
    ("name", "faults"),
    [
        ("gcp/a3-megagpu-8g", Faults(nic_down=8)),
        ("gcp/a3-megagpu-8g", Faults(mtu=(-1, 1500))),
        ("gcp/a3-megagpu-8g", Faults(ib_port_rate_gbit_s=(0, 100))),
        ("aws/p5.48xlarge", Faults(mtu=(0, 1500))),
        ("aws/p5.48xlarge", Faults(gpus_missing=-1)),
    ],
)
def test_refuses_faults_the_profile_cannot_have(tmp_path, name, faults):
    with pytest.raises(ValueError):
        write_tree(catalog.get(name), tmp_path / "tree", faults)


# ---------------------------------------------------------------------------
# Fault switches: each changes exactly its fact
# ---------------------------------------------------------------------------


@pytest.fixture
def baseline(tmp_path):
    def read(name: str) -> dict[str, Any]:
        facts = build(tmp_path, name, where="baseline")
        facts["root"] = str(tmp_path / "tree")
        return facts

    return read


def test_gpus_missing(tmp_path, baseline):
    expected = copy.deepcopy(baseline("gcp/a3-megagpu-8g"))
    gone = {gpu["pci_address"] for gpu in expected["gpus"][-2:]}
    expected["gpus"] = expected["gpus"][:-2]
    expected["affinity"] = [entry for entry in expected["affinity"] if entry["gpu"] not in gone]
    assert build(tmp_path, "gcp/a3-megagpu-8g", Faults(gpus_missing=2)) == expected


def test_nics_missing_drops_netdev_and_rdma_device(tmp_path, baseline):
    base = baseline("nebius/gpu-h100-sxm")
    last = by_name(base["rdma_devices"], "mlx5_7")
    expected = without(base, {"mlx5_7", last["netdev"]})
    facts = build(tmp_path, "nebius/gpu-h100-sxm", Faults(nics_missing=1))
    assert facts == expected
    # The GPU whose switch held that NIC still has another one there.
    assert all(entry["same_switch"] for entry in facts["affinity"])


def test_nics_missing_can_leave_a_gpu_switch_without_nic(tmp_path, baseline):
    base = baseline("gcp/a3-highgpu-8g")  # 4 NICs, one per switch
    facts = build(tmp_path, "gcp/a3-highgpu-8g", Faults(nics_missing=1))
    assert facts == without(base, {"eth4"})
    assert [entry["same_switch"] for entry in facts["affinity"]].count([]) == 2


def test_nic_down_gvnic(tmp_path, baseline):
    expected = copy.deepcopy(baseline("gcp/a3-megagpu-8g"))
    # GPU NIC 1 sits on the second PCIe switch: third on the bus, so eth3 by the kernel's names (eth0: management).
    nic = by_name(expected["nics"], "eth3")
    nic.update(operstate="down", speed_mbps=None)
    assert build(tmp_path, "gcp/a3-megagpu-8g", Faults(nic_down=1)) == expected


def test_nic_down_infiniband(tmp_path, baseline):
    expected = copy.deepcopy(baseline("azure/Standard_ND96isr_H100_v5"))
    device = by_name(expected["rdma_devices"], "mlx5_0")
    device["ports"][0].update(state="DOWN", phys_state="Disabled", lid=0, sm_lid=0)
    by_name(expected["nics"], device["netdev"]).update(operstate="down", speed_mbps=None)
    assert build(tmp_path, "azure/Standard_ND96isr_H100_v5", Faults(nic_down=0)) == expected


def test_infiniband_ports_have_lids_and_the_default_partition(tmp_path, baseline):
    facts = baseline("nebius/gpu-h100-sxm")
    for device in facts["rdma_devices"]:
        (port,) = device["ports"]
        assert port["lid"] > 1 and port["sm_lid"] == 1
        assert port["pkeys"] == ["0xffff"]
        assert [gid["type"] for gid in port["gids"]] == [None]


def test_no_subnet_manager_leaves_ports_init_without_lids(tmp_path):
    facts = build(tmp_path, "nebius/gpu-h100-sxm", Faults(no_subnet_manager=True))
    for device in facts["rdma_devices"]:
        (port,) = device["ports"]
        assert (port["state"], port["phys_state"], port["lid"], port["sm_lid"]) == ("INIT", "LinkUp", 0, 0)


def test_roce_gid_index_3_is_roce_v2_over_ipv4(tmp_path, baseline):
    facts = baseline("oci/BM.GPU.H100.8")
    for device in facts["rdma_devices"]:
        if device["ports"][0]["link_layer"] != "Ethernet":
            continue
        gids = device["ports"][0]["gids"]
        assert [gid["type"] for gid in gids] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
        assert gids[3]["gid"].startswith("0000:0000:0000:0000:0000:ffff:")
        assert gids[3]["netdev"] == device["netdev"]


def test_nic_down_efa_has_only_a_port(tmp_path, baseline):
    base = baseline("aws/p5.48xlarge")
    facts = build(tmp_path, "aws/p5.48xlarge", Faults(nic_down=5))
    (down,) = [device for device in facts["rdma_devices"] if device["ports"][0]["state"] != "ACTIVE"]
    expected = copy.deepcopy(base)
    by_name(expected["rdma_devices"], down["name"])["ports"][0].update(state="DOWN", phys_state="Disabled")
    assert facts == expected


def test_ib_port_rate(tmp_path, baseline):
    expected = copy.deepcopy(baseline("nebius/gpu-h100-sxm"))
    port = by_name(expected["rdma_devices"], "mlx5_3")["ports"][0]
    port.update(rate="200 Gb/sec (4X HDR)", rate_gbit_s=200.0)
    assert build(tmp_path, "nebius/gpu-h100-sxm", Faults(ib_port_rate_gbit_s=(3, 200))) == expected


def test_mtu(tmp_path, baseline):
    expected = copy.deepcopy(baseline("gcp/a3-highgpu-8g"))
    by_name(expected["nics"], "eth1")["mtu"] = 1460
    assert build(tmp_path, "gcp/a3-highgpu-8g", Faults(mtu=(0, 1460))) == expected


def test_mtu_of_a_roce_netdev(tmp_path, baseline):
    base = baseline("gcp/a4-highgpu-8g")
    expected = copy.deepcopy(base)
    by_name(expected["nics"], by_name(base["rdma_devices"], "mlx5_2")["netdev"])["mtu"] = 1500
    assert build(tmp_path, "gcp/a4-highgpu-8g", Faults(mtu=(2, 1500))) == expected


def test_modules_missing_peermem(tmp_path, baseline):
    expected = copy.deepcopy(baseline("baremetal/hgx-h100-ib-ndr"))
    expected["host"]["modules"]["nvidia_peermem"] = False
    assert build(tmp_path, "baremetal/hgx-h100-ib-ndr", Faults(modules_missing=("nvidia_peermem",))) == expected


def test_modules_missing_nvidia_takes_its_version_along(tmp_path, baseline):
    expected = copy.deepcopy(baseline("gcp/a3-megagpu-8g"))
    expected["host"]["modules"]["nvidia"] = False
    expected["host"]["nvidia_driver_version"] = None
    assert build(tmp_path, "gcp/a3-megagpu-8g", Faults(modules_missing=("nvidia",))) == expected
