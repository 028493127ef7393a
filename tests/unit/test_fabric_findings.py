# SPDX-License-Identifier: Apache-2.0
"""Findings from simulated hardware: none for a healthy host of any profile, exactly one per fault.

The trees come from gpufabric.simulated_hw (simulated sysfs/procfs, see
docs/simulated-hardware.md); the facts from the real reader, hw_facts.gather.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpufabric import simulated_hw
from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

catalog = plugin_utils("fabric_catalog").load_catalog()
hw_facts = module_utils("hw_facts")
fabric_findings = module_utils("fabric_findings")

PROFILES = catalog.names()
RDMA_KINDS = ("connectx_ib", "connectx_roce", "efa")


def facts_for(name: str, tmp_path: Path, faults: Faults | None = None) -> dict:
    return hw_facts.gather(str(write_tree(catalog.get(name), tmp_path / "sim", faults)))


def checks(name: str, facts: dict) -> list[str]:
    return sorted(finding["check"] for finding in fabric_findings.findings(facts, catalog.get(name)))


def one_nic_per_switch(name: str) -> bool:
    return catalog.get(name)["nics"]["gpu"]["count"] <= catalog.get(name)["gpu"]["count"] // 2


@pytest.mark.parametrize("name", PROFILES)
def test_healthy_simulated_host_has_no_findings(name, tmp_path):
    assert fabric_findings.findings(facts_for(name, tmp_path), catalog.get(name)) == []


@pytest.mark.parametrize("name", PROFILES)
def test_missing_gpu(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(gpus_missing=1))
    assert checks(name, facts) == ["gpu_count"]
    (finding,) = fabric_findings.findings(facts, catalog.get(name))
    count = catalog.get(name)["gpu"]["count"]
    assert finding["message"].startswith(f"found {count - 1} of {count} GPUs")


@pytest.mark.parametrize("name", PROFILES)
def test_missing_nic(name, tmp_path):
    expected = ["nic_count"]
    if one_nic_per_switch(name):  # the dropped NIC was the only one on its switch: two GPUs lose their NIC
        expected += ["gpu_nic_affinity", "gpu_nic_affinity"]
    assert checks(name, facts_for(name, tmp_path, Faults(nics_missing=1))) == sorted(expected)


@pytest.mark.parametrize("name", PROFILES)
def test_nic_down(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(nic_down=0))
    assert checks(name, facts) == ["link_down"]
    (finding,) = fabric_findings.findings(facts, catalog.get(name))
    assert finding["subject"] in finding["message"]


@pytest.mark.parametrize("name", [n for n in PROFILES if catalog.get(n)["nics"]["gpu"]["kind"] in RDMA_KINDS])
def test_port_at_lower_rate(name, tmp_path):
    slow = int(catalog.get(name)["nics"]["gpu"]["speed_gbit_s"] // 2)
    facts = facts_for(name, tmp_path, Faults(ib_port_rate_gbit_s=(0, slow)))
    assert checks(name, facts) == ["link_rate"]
    assert f"runs at {slow} Gb/s" in fabric_findings.findings(facts, catalog.get(name))[0]["message"]


@pytest.mark.parametrize("name", [n for n in PROFILES if catalog.get(n)["nics"]["gpu"]["kind"] == "connectx_ib"])
def test_no_subnet_manager_is_named_per_port(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(no_subnet_manager=True))
    found = fabric_findings.findings(facts, catalog.get(name))
    assert {finding["check"] for finding in found} == {"subnet_manager"}
    assert len(found) == catalog.get(name)["nics"]["gpu"]["count"]
    assert all("no subnet manager has configured" in finding["message"] for finding in found)
    assert all(finding["subject"] in finding["message"] for finding in found)


@pytest.mark.parametrize("name", [n for n in PROFILES if catalog.get(n)["nics"]["gpu"].get("mtu")])
def test_mtu_below_profile(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(mtu=(0, 1460)))
    assert checks(name, facts) == ["mtu"]
    assert "MTU 1460 is below" in fabric_findings.findings(facts, catalog.get(name))[0]["message"]


@pytest.mark.parametrize("name", PROFILES)
def test_missing_kernel_module(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(modules_missing=("nvidia",)))
    assert checks(name, facts) == ["module"]
    assert fabric_findings.findings(facts, catalog.get(name))[0]["severity"] == "warning"


def test_slow_netdev_link_on_a_gvnic_fabric(tmp_path):
    root = write_tree(catalog.get("gcp/a3-megagpu-8g"), tmp_path / "sim")
    (root / "sys/class/net/eth3/speed").write_text("100000\n", encoding="utf-8")
    findings = fabric_findings.findings(hw_facts.gather(str(root)), catalog.get("gcp/a3-megagpu-8g"))
    assert [(f["check"], f["subject"]) for f in findings] == [("link_rate", "eth3")]
    assert "eth3 links at 100 Gb/s; the profile expects 200 Gb/s" in findings[0]["message"]


def test_wrong_gpu_model(tmp_path):
    h200 = catalog.get("nebius/gpu-h200-sxm")
    facts = hw_facts.gather(str(write_tree(h200, tmp_path / "sim")))
    findings = fabric_findings.findings(facts, catalog.get("nebius/gpu-h100-sxm"))
    assert {f["check"] for f in findings} == {"gpu_model"}
    assert len(findings) == h200["gpu"]["count"]


def test_real_machine_without_gpus_reports_and_does_not_crash():
    facts = hw_facts.gather("/")
    found = checks("baremetal/hgx-h100-ib-ndr", facts)
    assert "gpu_count" in found and "nic_count" in found


@pytest.mark.parametrize("name", [n for n in PROFILES if n.startswith("baremetal/") and "sriov" not in catalog.get(n)])
def test_bare_metal_profile_is_inferred_from_hardware(name, tmp_path):
    inferred, reason = fabric_findings.infer_profile(facts_for(name, tmp_path), catalog)
    assert inferred == name
    gpu = catalog.get(name)["gpu"]
    assert reason.startswith(f"inferred from hardware: {gpu['count']}x {gpu['model']}")


def test_a_profile_with_virtual_functions_is_never_inferred(tmp_path):
    # VFs for pods are a site's choice the hardware does not show: the same HCAs infer the plain profile.
    inferred, _reason = fabric_findings.infer_profile(facts_for("baremetal/hgx-h100-ib-ndr-sriov", tmp_path), catalog)
    assert inferred == "baremetal/hgx-h100-ib-ndr"


def test_virtual_functions_do_not_count_as_gpu_nics_where_the_profile_carves_them(tmp_path):
    profile = catalog.get("baremetal/hgx-h100-ib-ndr-sriov")
    facts = facts_for("baremetal/hgx-h100-ib-ndr-sriov", tmp_path)
    physical = fabric_findings.gpu_network(facts, profile)
    vf = dict(physical[0]["rdma"], name="mlx5_8", pci_address="0000:aa:00.1", is_virtual_function=True)
    facts["rdma_devices"].append(vf)
    assert [item["name"] for item in fabric_findings.gpu_network(facts, profile)] == [i["name"] for i in physical]
    # GCP passes VFs through as its GPU NICs: there they are the network.
    gcp = catalog.get("gcp/a3-ultragpu-8g")
    gcp_facts = facts_for("gcp/a3-ultragpu-8g", tmp_path / "gcp")
    assert len(fabric_findings.gpu_network(gcp_facts, gcp)) == gcp["nics"]["gpu"]["count"]


def test_inference_says_why_nothing_matches(tmp_path):
    facts = facts_for("aws/p5.48xlarge", tmp_path)  # EFA hardware: no bare-metal profile has it
    inferred, reason = fabric_findings.infer_profile(facts, catalog)
    assert inferred is None
    assert reason.startswith("no baremetal profile matches this hardware: 8 GPUs (10de:2330), 32 RDMA devices")


@pytest.mark.parametrize("name", PROFILES)
def test_the_filter_compares_with_the_hardware_of_the_hosts_plan(name, tmp_path):
    """The role's filter reads no catalog: the plan's hardware gives the findings the whole profile gives."""
    from ansible.errors import AnsibleFilterError

    from ansible_collections.gpufabric.cluster.plugins.filter.fabric_findings import fabric_findings as the_filter
    from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_plan import plan_host

    plan = plan_host({"gpufabric_profile": name}, catalog)
    facts = facts_for(name, tmp_path, Faults(nics_missing=1, modules_missing=("nvidia",)))
    found = the_filter(facts, plan)
    assert found == fabric_findings.findings(facts, catalog.get(name))
    assert {"nic_count", "module"} <= {finding["check"] for finding in found}
    with pytest.raises(AnsibleFilterError, match=r"profile 'unknown' of gpufabric_plan has no hardware"):
        the_filter(facts, plan_host({}, catalog))
    with pytest.raises(AnsibleFilterError, match=r"expects the host's plan gpufabric_plan \(a dictionary\), got str"):
        the_filter(facts, name)


# --- Rails on bare metal: chosen by link layer, GPU affinity and rate, not by name ------------------------------------

# A DGX-style HGX H100: the compute HCAs are mlx5_0,3,4,5,6,9,10,11 (Oracle lists exactly these for BM.GPU.H200.8 and
# BM.GPU.B200.8, oci-hpc playbooks/roles/nccl-conf/templates), with storage and BlueField ports numbered between them.
DGX_RAILS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
BARE_METAL_IB = "baremetal/hgx-h100-ib-ndr"


def _extra_connectx(tree, name: str, link_layer: str, gbit_s: int, numa: int, vpd: bytes | None = None) -> None:
    """One more ConnectX function on a CPU root port (no GPU's PCIe switch), with its netdev and RDMA device."""
    parent, bus = tree.root_port(numa_node=numa)
    infiniband = link_layer == "InfiniBand"
    pci_class = simulated_hw.INFINIBAND_CLASS if infiniband else simulated_hw.ETHERNET_CLASS
    address = f"0000:{bus:02x}:00.0"
    device = tree.pci_function(parent, address, simulated_hw.CONNECTX_ID, pci_class, numa, "mlx5_core")
    if vpd is not None:
        tree.file(f"{device}/vpd", vpd)
    netdev = f"ibp{bus}s0" if infiniband else f"enp{bus}s0np0"
    tree.netdev(device, netdev, 4092 if infiniband else 1500, gbit_s * 1000, True, infiniband=infiniband)
    rate = simulated_hw.rate_string(gbit_s, "connectx")
    tree.rdma_device(device, name, link_layer, rate, True, None if infiniband else netdev, subnet_manager=True)


def dgx_style_host(tmp_path: Path, faults: Faults | None = None) -> dict:
    """SIMULATED: the profile's 8 rails under DGX names, plus 200G InfiniBand storage HCAs (mlx5_1, mlx5_2) and
    BlueField Ethernet ports (mlx5_7, mlx5_8) on CPU root ports."""
    named = copy.deepcopy(catalog.get(BARE_METAL_IB))
    named["nics"]["gpu"]["rdma_devices"] = DGX_RAILS  # names the simulated rails; the profile itself names none
    root = write_tree(named, tmp_path / "sim", faults)
    tree = simulated_hw._Tree(root)
    tree.next_bus = 0xA0  # clear of the buses write_tree used
    for name in ("mlx5_1", "mlx5_2"):
        _extra_connectx(tree, name, "InfiniBand", 200, numa=0)
    for name in ("mlx5_7", "mlx5_8"):
        _extra_connectx(tree, name, "Ethernet", 200, numa=1)
    return hw_facts.gather(str(root))


def test_bare_metal_rails_are_the_hcas_on_the_gpus_switches_not_a_name_range(tmp_path):
    facts = dgx_style_host(tmp_path)
    profile = catalog.get(BARE_METAL_IB)
    assert "rdma_devices" not in profile["nics"]["gpu"]
    assert sorted(item["name"] for item in fabric_findings.gpu_network(facts, profile)) == sorted(DGX_RAILS)
    # The 200G storage HCAs are InfiniBand too, but no GPU shares their switch: named, not failed on.
    found = fabric_findings.findings(facts, profile)
    assert [(f["severity"], f["check"], f["subject"]) for f in found] == [
        ("info", "rails", "mlx5_1"),
        ("info", "rails", "mlx5_2"),
    ]
    assert "mlx5_1 is not counted as a GPU-network rail (no GPU on its PCIe switch)" in found[0]["message"]


def test_a_slow_rail_stays_a_rail_and_is_reported(tmp_path):
    facts = dgx_style_host(tmp_path, Faults(ib_port_rate_gbit_s=(1, 200)))  # mlx5_3 trained at 200G
    errors = [f for f in fabric_findings.findings(facts, catalog.get(BARE_METAL_IB)) if f["severity"] == "error"]
    assert [(f["check"], f["subject"]) for f in errors] == [("link_rate", "mlx5_3")]


def test_rails_fall_back_to_rate_without_pcie_switch_facts():
    """A VM shows no PCIe switches: the rails are then the devices at the profile's rate, if enough are."""
    spec = {"count": 2, "speed_gbit_s": 400}

    def device(name: str, rate: float) -> dict:
        return {"name": name, "pcie_switch": None, "ports": [{"rate_gbit_s": rate}]}

    candidates = [device("mlx5_0", 400), device("mlx5_1", 200), device("mlx5_2", 400)]
    rails = fabric_findings.choose_rails(candidates, {"gpus": [{"pcie_switch": None}]}, spec)
    assert [rail["name"] for rail in rails] == ["mlx5_0", "mlx5_2"]
    # Too few at the rate: none is dropped, so the slow one is reported rather than missing.
    assert fabric_findings.choose_rails(candidates[:2], {"gpus": []}, spec) == candidates[:2]


def test_named_rails_keep_the_profiles_order(tmp_path):
    facts = facts_for("oci/BM.GPU.H100.8", tmp_path)
    names = [item["name"] for item in fabric_findings.gpu_network(facts, catalog.get("oci/BM.GPU.H100.8"))]
    assert names == catalog.get("oci/BM.GPU.H100.8")["nics"]["gpu"]["rdma_devices"]
    assert "mlx5_2" not in names and "mlx5_11" not in names  # Oracle's front-end ports


# --- HGX B200: NVSwitches behind ConnectX-7 bridge functions, not on PCI --------------------------------------------

# The bridge functions' VPD as lspci shows it carries SMDL=SW_MNG (NVIDIA Fabric Manager User Guide, quoted in
# siderolabs/extensions nvidia-fabricmanager-wrapper/nvswitch.go). SIMULATED bytes around the marker.
BRIDGE_VPD = b"\x82\x10ConnectX-7 bridge\x90\x20PN:SIMULATED V3:SMDL=SW_MNG\x78"
NIC_VPD = b"\x82\x0fConnectX-7 NIC\x90\x10PN:SIMULATED\x78"


def b200_host(tmp_path: Path, bridges: int = 4, faults: Faults | None = None, vpd: bytes = BRIDGE_VPD) -> dict:
    """SIMULATED HGX B200 with 8 NDR rails: no PCI NVSwitch, ``bridges`` NVSwitch bridge functions instead."""
    profile = b200_profile()
    root = write_tree({**profile, "gpu": {**profile["gpu"], "nvswitch": False}}, tmp_path / "sim", faults)
    tree = simulated_hw._Tree(root)
    tree.next_bus = 0xA0
    for index in range(bridges):
        _extra_connectx(tree, f"mlx5_{8 + index}", "InfiniBand", 100, numa=index % 2, vpd=vpd)
    return hw_facts.gather(str(root))


def b200_profile() -> dict:
    profile = copy.deepcopy(catalog.get(BARE_METAL_IB))
    profile["gpu"].update(model="B200-SXM-180GB", pci_id="10de:2901")
    return profile


def test_b200_nvswitches_are_found_through_their_bridges(tmp_path):
    facts = b200_host(tmp_path)
    assert facts["nvswitches"] == []
    bridges = [dev["name"] for dev in facts["rdma_devices"] if dev["nvswitch_bridge"]]
    assert bridges == ["mlx5_10", "mlx5_11", "mlx5_8", "mlx5_9"]
    # The bridges are InfiniBand devices, yet neither rails nor "left out" rails.
    assert fabric_findings.findings(facts, b200_profile()) == []
    assert len(fabric_findings.gpu_network(facts, b200_profile())) == 8


def test_b200_without_bridges_or_pci_nvswitches_has_no_nvswitch(tmp_path):
    found = fabric_findings.findings(b200_host(tmp_path, bridges=0), b200_profile())
    assert [f["check"] for f in found] == ["nvswitch"]
    assert "nor NVSwitch bridge functions (ConnectX-7 with VPD SMDL=SW_MNG, HGX B200)" in found[0]["message"]


def test_connectx_vpd_without_the_marker_is_no_bridge(tmp_path):
    facts = b200_host(tmp_path, vpd=NIC_VPD)
    assert {dev["nvswitch_bridge"] for dev in facts["rdma_devices"]} == {False}
    assert [f["check"] for f in fabric_findings.findings(facts, b200_profile())] == ["nvswitch"] + ["rails"] * 4


def test_unreadable_vpd_is_said_in_the_nvswitch_finding(tmp_path):
    facts = b200_host(tmp_path, bridges=1)
    address = next(dev["pci_address"] for dev in facts["rdma_devices"] if dev["nvswitch_bridge"])
    vpd = Path(facts["root"]) / "sys/bus/pci/devices" / address / "vpd"
    vpd.unlink()
    vpd.mkdir()  # reading it fails as VPD does for a non-root reader
    facts = hw_facts.gather(facts["root"])
    assert [dev["nvswitch_bridge"] for dev in facts["rdma_devices"] if dev["pci_address"] == address] == [None]
    found = fabric_findings.findings(facts, b200_profile())
    nvswitch = next(f for f in found if f["check"] == "nvswitch")
    assert "the VPD of mlx5_8 could not be read: run fabric_facts as root" in nvswitch["message"]
    assert any(f["check"] == "unreadable" and f["subject"].endswith(f"{address}/vpd") for f in found)


def test_nvlsm_needs_ib_umad_whatever_the_fabric(tmp_path):
    found = fabric_findings.findings(b200_host(tmp_path, faults=Faults(modules_missing=("ib_umad",))), b200_profile())
    assert [(f["check"], f["subject"]) for f in found] == [("module", "ib_umad")]
    assert "NVLSM reaches the NVSwitches through mlx5_10, mlx5_11, mlx5_8, mlx5_9" in found[0]["message"]


def test_vpd_is_read_only_where_nvswitch_bridges_can_be(tmp_path):
    """A host with PCI NVSwitches (HGX H100) has no bridges: VPD, slow to read and root-only, is left alone."""
    root = write_tree(catalog.get(BARE_METAL_IB), tmp_path / "sim")
    tree = simulated_hw._Tree(root)
    tree.next_bus = 0xA0
    _extra_connectx(tree, "mlx5_8", "InfiniBand", 100, numa=0, vpd=BRIDGE_VPD)
    facts = hw_facts.gather(str(root))
    assert len(facts["nvswitches"]) == 4
    assert {dev["nvswitch_bridge"] for dev in facts["rdma_devices"]} == {False}
