# SPDX-License-Identifier: Apache-2.0
"""NICs by identity (issue 41): the catalog names no interface; each host's own names fill the environment.

Each SIMULATED tree is written with the names a real image gives the profile's NICs (tests/fixtures/nic_names.yml,
each with its source): Google's Ubuntu images (enp0s12, enp6s0, ...) and Container-Optimized OS / net.ifnames=0
(eth0, eth1, ...). The facts come from the real reader, hw_facts.gather; the mapping from fabric_nics.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree
from tests.conftest import image_nic_names, recorded_nic_names

catalog = plugin_utils("fabric_catalog").load_catalog()
fabric_plan = plugin_utils("fabric_plan")
hw_facts = module_utils("hw_facts")
fabric_nics = module_utils("fabric_nics")
fabric_findings = module_utils("fabric_findings")
nccl_env = module_utils("nccl_env")

IMAGES = recorded_nic_names()
CASES = [(profile, image) for profile, images in IMAGES.items() for image in images]


names_of = image_nic_names


def host(tmp_path: Path, profile: str, image: str | None, faults: Faults | None = None) -> dict[str, Any]:
    names = names_of(profile, image) if image else None
    return hw_facts.gather(
        str(write_tree(catalog.get(profile), tmp_path / (image or "kernel"), faults, nic_names=names))
    )


def plan_for(profile: str, tier: str = "best") -> dict[str, Any]:
    return fabric_plan.plan_host({"gpufabric_profile": profile}, catalog, tier=tier)


def test_every_fixture_says_where_its_names_come_from():
    for profile, image in CASES:
        entry = IMAGES[profile][image]
        assert catalog.get(profile), profile
        assert entry["source"] and entry["description"], (profile, image)


@pytest.mark.parametrize(("profile", "image"), CASES)
def test_the_host_names_each_nic_group_in_pci_order(tmp_path, profile, image):
    facts = host(tmp_path, profile, image)
    plan = plan_for(profile)
    found = fabric_nics.host_nics(facts, plan["hardware"])
    for group, names in names_of(profile, image).items():
        assert found[group] == names, group
    assert fabric_findings.findings(facts, plan["hardware"]) == []


@pytest.mark.parametrize(("profile", "image"), CASES)
def test_every_placeholder_is_filled_with_the_hosts_names(tmp_path, profile, image):
    facts = host(tmp_path, profile, image)
    for tier in ("best", "standard"):
        plan = plan_for(profile, tier)
        resolved = fabric_nics.resolve(plan, facts)
        assert list(resolved["env"]) == list(plan["env"])  # nccl.conf order kept
        for key, value in resolved["env"].items():
            assert "{" not in value, (tier, key, value)
            if key not in plan["nic_placeholders"]:
                assert value == plan["env"][key]
        names = names_of(profile, image)
        if "management" in names and "NCCL_SOCKET_IFNAME" in plan["nic_placeholders"]:
            assert resolved["env"]["NCCL_SOCKET_IFNAME"] == ",".join(names["management"])
        assert resolved["nic_names"]["management"] == resolved["nics"]["management"]["interfaces"]


def _shape(env: dict[str, str], names: dict[str, list[str]]) -> dict[str, str]:
    """The env with each host name put back as its placeholder: the same for any image."""
    out = {}
    for key, value in env.items():
        for group in ("gpu", "management"):
            for index, name in enumerate(names[group]):
                value = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", f"<{group}{index}>", value)
        out[key] = value
    return out


@pytest.mark.parametrize("profile", ["gcp/a3-highgpu-8g", "gcp/a3-megagpu-8g"])
def test_an_ubuntu_host_and_an_eth_host_get_the_same_env_with_their_own_names(tmp_path, profile):
    plan = plan_for(profile)
    ubuntu = fabric_nics.resolve(plan, host(tmp_path, profile, "ubuntu"))
    cos = fabric_nics.resolve(plan, host(tmp_path, profile, "cos"))
    assert ubuntu["env"] != cos["env"]
    assert _shape(ubuntu["env"], ubuntu["nic_names"]) == _shape(cos["env"], cos["nic_names"])


def test_a3_high_on_ubuntu_gets_the_names_of_googles_nccl_tests_runner(tmp_path):
    env = fabric_nics.resolve(plan_for("gcp/a3-highgpu-8g"), host(tmp_path, "gcp/a3-highgpu-8g", "ubuntu"))["env"]
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "enp6s0,enp12s0,enp134s0,enp140s0"
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    # The bindings' CPU ranges follow the bus: the first two data NICs on NUMA node 0, the last two on node 1.
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] == (
        "enp6s0:8-21,112-125;enp12s0:8-21,112-125;enp134s0:60-73,164-177;enp140s0:60-73,164-177"
    )
    assert env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"] == (
        "enp6s0:22-35,126-139;enp12s0:22-35,126-139;enp134s0:74-87,178-191;enp140s0:74-87,178-191"
    )


def test_a3_high_on_cos_gets_the_rxdm_presets_names(tmp_path):
    env = fabric_nics.resolve(plan_for("gcp/a3-highgpu-8g"), host(tmp_path, "gcp/a3-highgpu-8g", "cos"))["env"]
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"].startswith("eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73")


def test_the_kernels_names_are_the_default_of_a_simulated_host(tmp_path):
    """Without an image's names, a simulated gVNIC host has the kernel's: the same as COS."""
    facts = host(tmp_path, "gcp/a3-megagpu-8g", None)
    assert fabric_nics.host_nics(facts, plan_for("gcp/a3-megagpu-8g")["hardware"]) == names_of(
        "gcp/a3-megagpu-8g", "cos"
    )


def test_a_host_without_the_nics_is_refused_naming_placeholder_profile_and_what_it_has(tmp_path):
    facts = host(tmp_path, "gcp/a3-highgpu-8g", "ubuntu", Faults(nics_missing=2))
    with pytest.raises(ValueError) as caught:
        fabric_nics.resolve(plan_for("gcp/a3-highgpu-8g"), facts)
    message = str(caught.value)
    assert message.startswith("profile gcp/a3-highgpu-8g: NCCL_GPUDIRECTTCPX_SOCKET_IFNAME needs {nics.gpu}; ")
    # A group the host has fewer NICs of than the profile is missing whole: which of them is which is unknown.
    assert "NCCL_GPUDIRECTTCPX_TX_BINDINGS needs {nics.gpu[0]}, {nics.gpu[1]}, {nics.gpu[2]}, {nics.gpu[3]}" in message
    assert (
        "but the host has 2 of 4 gpu NICs (gvnic): enp6s0, enp12s0; 1 of 1 management NICs (gvnic): enp0s12" in message
    )


def test_the_management_nic_is_first_on_the_bus_without_pcie_switch_facts(tmp_path):
    """On a VM that shows no PCIe switches, the control gVNIC is the first gVNIC on the bus (enp0s12 < enp6s0)."""
    facts = host(tmp_path, "gcp/a3-highgpu-8g", "ubuntu")
    for item in facts["nics"] + facts["gpus"]:
        item["pcie_switch"] = None
    found = fabric_nics.host_nics(facts, plan_for("gcp/a3-highgpu-8g")["hardware"])
    assert found == names_of("gcp/a3-highgpu-8g", "ubuntu")


def test_a_plan_without_placeholders_or_profile_is_left_as_it_is(tmp_path):
    facts = host(tmp_path, "gcp/a3-highgpu-8g", "cos")
    unknown = fabric_plan.plan_host({}, catalog)
    assert fabric_nics.resolve(unknown, facts) == unknown
    assert plan_for("aws/p5.48xlarge")["nic_placeholders"] == []


def test_nccl_env_refuses_a_placeholder_the_plan_did_not_fill():
    plan = plan_for("gcp/a3-megagpu-8g")
    result = nccl_env.plan({"extra": {}, "path_variables": []}, plan, {})
    assert result["error"].startswith(
        "NCCL_FASTRAK_CTRL_DEV, NCCL_FASTRAK_IFNAME, NCCL_SOCKET_IFNAME of profile gcp/a3-megagpu-8g name NICs by "
        "placeholder"
    )
    named = fabric_plan.plan_host(
        {"gpufabric_profile": "gcp/a3-megagpu-8g", "gpufabric_nic_names": names_of("gcp/a3-megagpu-8g", "ubuntu")},
        catalog,
    )
    result = nccl_env.plan({"extra": {}, "path_variables": []}, named, {})
    assert result["error"] == ""
    assert result["nccl_conf"]["NCCL_FASTRAK_CTRL_DEV"] == "enp0s12"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{nics.gpu}", []),
        ("{nics.gpu[3]}:1;{nics.management}", []),
        ("{nics.gpu[4]}", ["placeholder {nics.gpu[4]}: nics.gpu has 4 NICs (count)"]),
        ("{nics.gpus}", ["placeholder {nics.gpus} is not accepted; accepted: {nics.gpu}, {nics.gpu[N]}, "]),
        ("{ nics.gpu }", ["placeholder { nics.gpu } is not accepted"]),
        ("^lo,docker", []),
    ],
)
def test_placeholders_are_checked_against_the_profiles_nics(value, says):
    errors = fabric_nics.placeholder_errors(value, catalog.get("gcp/a3-highgpu-8g")["nics"])
    assert len(errors) == len(says)
    for error, start in zip(errors, says, strict=True):
        assert error.startswith(start)


@pytest.mark.parametrize(
    ("profile", "value", "says"),
    [
        ("azure/Standard_ND96isr_H100_v5", "={nics.gpu_rdma}", []),
        ("azure/Standard_ND96isr_H100_v5", "{nics.gpu_rdma:1},{nics.gpu_rdma[7]:2}", []),
        ("azure/Standard_ND96isr_H100_v5", "{nics.gpu_rdma[8]}", ["placeholder {nics.gpu_rdma[8]}: nics.gpu_rdma"]),
        ("azure/Standard_ND96isr_H100_v5", "{nics.gpu_rdma:0}", ["placeholder {nics.gpu_rdma:0}: a port suffix"]),
        ("azure/Standard_ND96isr_H100_v5", "{nics.gpu:1}", ["placeholder {nics.gpu:1}: a port suffix"]),
        ("gcp/a3-highgpu-8g", "{nics.gpu_rdma}", ["placeholder {nics.gpu_rdma}: gvnic GPU NICs are not ConnectX"]),
        ("aws/p5.48xlarge", "{nics.gpu_rdma}", ["placeholder {nics.gpu_rdma}: efa GPU NICs are not ConnectX"]),
    ],
)
def test_rdma_device_placeholders_are_for_connectx_gpu_nics(profile, value, says):
    errors = fabric_nics.placeholder_errors(value, catalog.get(profile)["nics"])
    assert len(errors) == len(says), errors
    for error, start in zip(errors, says, strict=True):
        assert error.startswith(start)


def test_rdma_device_names_fill_with_their_port_and_a_bake_gives_them(tmp_path):
    nics = catalog.get("azure/Standard_ND96isr_H100_v5")["nics"]
    names = {"gpu_rdma": [f"mlx5_{i}" for i in range(8)]}
    assert fabric_nics.render("{nics.gpu_rdma[2]}:{nics.gpu_rdma[3]:1}", names, nics) == ("mlx5_2:mlx5_3:1", [])
    baked = fabric_plan.plan_host(
        {
            "gpufabric_profile": "azure/Standard_ND96isr_H100_v5",
            "gpufabric_nic_names": names_of("azure/Standard_ND96isr_H100_v5", "ubuntu-hpc"),
        },
        catalog,
    )
    assert baked["env"]["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_ib{i}" for i in range(8))
    with pytest.raises(fabric_plan.PlanError, match=r"gpufabric_nic_names.gpu_rdma\[0\] 'mlx5 0' is not an RDMA"):
        fabric_plan.plan_host(
            {"gpufabric_profile": "azure/Standard_ND96isr_H100_v5", "gpufabric_nic_names": {"gpu_rdma": ["mlx5 0"]}},
            catalog,
        )


@pytest.mark.parametrize("profile", [name for name in catalog.names() if name.startswith("oci/")])
def test_ocis_management_nic_is_the_default_routes_interface_whatever_its_name(tmp_path, profile):
    """OCI's primary VNIC has no PCI identity of its own (on bare metal a front-end ConnectX port): the default route
    finds it, under Oracle's name (eth0) or a PCI-path name."""
    for image, name in (("oracle", "eth0"), ("pci-path", "enp45s0f0np0")):
        facts = hw_facts.gather(
            str(write_tree(catalog.get(profile), tmp_path / image, nic_names={"management": [name]}))
        )
        assert facts["default_routes"] == [name]
        resolved = fabric_nics.resolve(plan_for(profile), facts)
        assert resolved["env"]["NCCL_SOCKET_IFNAME"] == name
    facts["default_routes"] = []
    with pytest.raises(
        ValueError, match=r"NCCL_SOCKET_IFNAME needs \{nics.management\}.*0 of 1 management NICs \(vnic\)"
    ):
        fabric_nics.resolve(plan_for(profile), facts)


def test_the_default_routes_are_read_lowest_metric_first(tmp_path):
    route = tmp_path / "proc" / "net" / "route"
    route.parent.mkdir(parents=True)
    route.write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth1\t00000000\t0101000A\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
        "eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        "rdma0\t0000A8C0\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "eth2\t00000000\t0100000A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n",
        encoding="utf-8",
    )
    assert hw_facts.gather(str(tmp_path))["default_routes"] == ["eth0", "eth1"]
    assert hw_facts.gather(str(tmp_path / "bare"))["default_routes"] == []


def test_a_default_route_on_a_bond_still_names_ocis_management_nic(tmp_path):
    """hw_facts lists no virtual netdev; a bond or VLAN carrying the default route is still the one to name."""
    facts = host(tmp_path, "oci/BM.GPU.H200.8", "oracle-gpu")
    facts["default_routes"] = ["bond0"]
    assert fabric_nics.resolve(plan_for("oci/BM.GPU.H200.8"), facts)["env"]["NCCL_SOCKET_IFNAME"] == "bond0"
