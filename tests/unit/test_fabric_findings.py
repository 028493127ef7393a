# SPDX-License-Identifier: Apache-2.0
"""Findings from simulated hardware: none for a healthy host of any profile, exactly one per fault.

The trees come from gpufabric.simulated_hw (simulated sysfs/procfs, see
docs/simulated-hardware.md); the facts from the real reader, hw_facts.gather.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
    (root / "sys/class/net/enp13s0/speed").write_text("100000\n", encoding="utf-8")
    findings = fabric_findings.findings(hw_facts.gather(str(root)), catalog.get("gcp/a3-megagpu-8g"))
    assert [(f["check"], f["subject"]) for f in findings] == [("link_rate", "enp13s0")]
    assert "enp13s0 links at 100 Gb/s; the profile expects 200 Gb/s" in findings[0]["message"]


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
    assert reason.startswith("inferred from hardware: 8x H100")


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
