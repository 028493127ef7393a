# SPDX-License-Identifier: Apache-2.0
"""infiniband's logic: inputs, the port checks over SIMULATED trees, NCCL_IB_HCA and UCX_NET_DEVICES as NCCL
and UCX read them, and the environment of every InfiniBand catalog profile held against its own hardware."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree
from tests.conftest import image_nic_names, recorded_facts

ib = module_utils("infiniband")
hw_facts = module_utils("hw_facts")
ib_filter = _import_plugins("filter", "infiniband")
fabric_plan = plugin_utils("fabric_plan")
fabric_nics = module_utils("fabric_nics")
catalog = plugin_utils("fabric_catalog").load_catalog()

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "infiniband"
IB_PROFILES = [name for name in catalog.names() if catalog.get(name)["fabric"] == "infiniband"]
NEBIUS = "nebius/gpu-h100-sxm"
AZURE = "azure/Standard_ND96isr_H100_v5"
BAREMETAL = "baremetal/hgx-h100-ib-ndr"
MLX5 = [f"mlx5_{i}" for i in range(8)]


def catalog_plan(name: str) -> dict[str, Any]:
    return fabric_plan.plan_host({"gpufabric_profile": name}, catalog)


def plan_for(name: str = NEBIUS, os_family: str = "Debian", **settings: Any) -> dict[str, Any]:
    """ib.plan as the role's one task calls it: the settings, gpufabric_plan and ansible_facts."""
    return ib.plan(settings, catalog_plan(name), {"os_family": os_family})


def facts_for(name: str, tmp_path: Path, faults: Faults | None = None, image: str | None = None) -> dict[str, Any]:
    """Facts of a SIMULATED host of profile ``name``, its NICs named as ``image`` names them (None: the kernel)."""
    root = tmp_path / "tree"
    write_tree(catalog.get(name), root, faults, nic_names=image_nic_names(name, image) if image else None)
    return hw_facts.gather(str(root))


def port(facts: dict[str, Any], device: str) -> dict[str, Any]:
    (found,) = [d for d in facts["rdma_devices"] if d["name"] == device]
    return found["ports"][0]


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "partition"),
    [
        ("0x8001", 0x0001),
        ("0x0001", 0x0001),
        ("0X7FFF", 0x7FFF),
        ("0xffff", 0x7FFF),
        (" 0x8002 ", 0x0002),
        (0x8001, 0x0001),  # YAML reads an unquoted 0x8001 as 32769
        (5, 5),
        ("", None),
        (None, None),
    ],
)
def test_pkey_accepts_hex_strings_and_integers(value, partition):
    assert ib.parse_pkey(value) == (partition, None)


@pytest.mark.parametrize("value", ["8001", "0x0000", "0x8000", "0x10000", 0, 0x8000, 0x10000, -1, True, "0xzz", "pkey"])
def test_pkey_refuses_what_the_kernel_refuses_and_ambiguous_decimals(value):
    number, error = ib.parse_pkey(value)
    assert number is None
    assert error.startswith(f"infiniband_pkey {value!r} is not a partition key; accepted: a quoted hex string")


def test_membership_picks_the_table_entries():
    assert ib.required_pkeys(0x0001, "full") == ["0x8001"]
    assert ib.required_pkeys(0x0001, "limited") == ["0x0001"]
    assert ib.required_pkeys(0x7FFF, "any") == ["0xffff", "0x7fff"]


def test_plan_of_a_nebius_host():
    plan = plan_for(pkey="0x0001", ipoib=True)
    assert plan["errors"] == []
    assert plan["devices"] == MLX5
    assert plan["speed_gbit_s"] == 400
    assert plan["count"] == 8
    assert plan["pkey"] == {
        "partition": "0x0001",
        "child": "0x8001",
        "suffix": "8001",
        "membership": "full",
        "table_entries": ["0x8001"],
    }
    assert plan["env"]["NCCL_IB_HCA"] == "mlx5"
    assert plan["topo_file"] == ""
    assert plan["sharp_packages"] == []


def test_plan_names_an_unknown_profile_and_a_foreign_fabric():
    unknown = plan_for("nebius/gpu-h999")
    assert unknown["errors"] == [
        "profile 'nebius/gpu-h999' from host var gpufabric_profile is not in the catalog; "
        "`gpufabric catalog list` shows the accepted names"
    ]
    efa = plan_for("aws/p5.48xlarge")
    assert efa["errors"][0].startswith("profile 'aws/p5.48xlarge' is a efa profile; this role serves fabric infiniband")


def test_the_filter_takes_the_settings_piped_and_the_plan_and_facts_by_keyword():
    plan = ib_filter.FilterModule().filters()["infiniband_plan"](
        {"pkey": "0x8001"}, plan=catalog_plan(NEBIUS), facts={"os_family": "Debian"}
    )
    assert plan == plan_for(pkey="0x8001")
    with pytest.raises(
        AnsibleFilterError, match=r"infiniband_plan: facts= is NoneType None; accepted: ansible_facts \(a dictionary\)"
    ):
        ib_filter.FilterModule().filters()["infiniband_plan"]({}, plan=catalog_plan(NEBIUS))


def test_plan_refuses_bad_input_each_with_its_variable():
    plan = plan_for(
        devices=["mlx5_0", "bad name"],
        rate_gbit_s=-1,
        pkey="8001",
        pkey_membership="partial",
        ipoib_wait_s=0,
        env_extra={"nccl_ib_hca": "x", "NCCL_IB_DISABLE": True},
    )
    variables = [error.split(" ")[0].rstrip(":") for error in plan["errors"]]
    assert variables == [
        "infiniband_devices",
        "infiniband_rate_gbit_s",
        "infiniband_pkey_membership",
        "infiniband_pkey",
        "infiniband_ipoib_wait_s",
        "infiniband_env_extra",
    ]
    assert "'bad name'" in plan["errors"][0]


def test_overrides_replace_the_profile_devices_and_rate():
    plan = plan_for(devices=["mlx5_2", "mlx5_3"], rate_gbit_s=200)
    assert plan["devices"] == ["mlx5_2", "mlx5_3"]
    assert plan["speed_gbit_s"] == 200


def test_env_extra_overrides_and_drops_catalog_variables():
    plan = plan_for(AZURE, env_extra={"NCCL_IB_HCA": "=mlx5_ib0", "NCCL_TOPO_FILE": None, "NCCL_IB_TIMEOUT": 22})
    assert plan["env"]["NCCL_IB_HCA"] == "=mlx5_ib0"
    assert plan["env"]["NCCL_IB_TIMEOUT"] == "22"
    assert "NCCL_TOPO_FILE" not in plan["env"]
    assert plan["topo_file"] == ""


def test_azure_topology_file_is_explained():
    plan = plan_for(AZURE)
    assert plan["topo_file"] == "/opt/microsoft/ndv5/topo.xml"
    assert "Azure/azhpc-images topology/ndv5-topo.xml" in plan["topo_file_hint"]
    assert "customizations/ndv5.sh" in plan["topo_file_hint"]
    assert ib.topo_file_hint("/opt/site/topo.xml").startswith("the catalog profile's sources")


def test_bake_needs_hca_names_for_the_pkey_unit_where_the_profile_has_none():
    plan = plan_for(BAREMETAL, bake=True, ipoib=True, pkey="0x8001")
    assert len(plan["errors"]) == 1
    assert "set infiniband_devices" in plan["errors"][0]
    assert plan_for(BAREMETAL, bake=True, ipoib=True, pkey="0x8001", devices=MLX5)["errors"] == []
    # Live, the HCAs found on the host are used instead.
    assert plan_for(BAREMETAL, ipoib=True, pkey="0x8001")["errors"] == []


@pytest.mark.parametrize(("os_family", "spec"), [("Debian", "sharp=3.9.0-1"), ("RedHat", "sharp-3.9.0-1")])
def test_sharp_packages_are_pinned_in_the_package_manager_syntax(os_family, spec):
    plan = plan_for(sharp=True, sharp_packages={"sharp": "3.9.0-1"}, os_family=os_family)
    assert plan["errors"] == []
    assert plan["sharp_packages"] == [{"name": "sharp", "version": "3.9.0-1", "spec": spec}]
    pin = {"name": "sharp", "version": "3.9.0-1", "hold": True, "repository": ""}  # vendor_packages' layout
    assert plan["sharp_install"] == [pin]
    assert plan["supply"] == [
        {"keys": [], "repositories": [], "packages": [pin], "preferences": "", "pin_priority": 1001, "release": []}
    ]


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/infiniband no longer runs on (it runs the Ubuntu 22.04 identity image), and both Ubuntu releases.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_sharp_plan_over_recorded_facts(target):
    facts = recorded_facts(target)
    plan = ib.plan({"sharp": True, "sharp_packages": {"sharp": "3.9.0-1"}}, catalog_plan(NEBIUS), facts)
    assert plan["errors"] == []
    assert plan["sharp_packages"] == [{"name": "sharp", "version": "3.9.0-1", "spec": "sharp=3.9.0-1"}]


def test_sharp_needs_packages_with_versions_and_a_known_os():
    assert "infiniband_sharp_packages is empty" in plan_for(sharp=True)["errors"][0]
    assert "every package needs an exact version" in plan_for(sharp=True, sharp_packages={"sharp": ""})["errors"][0]
    assert "OS family 'Suse'" in plan_for(sharp=True, sharp_packages={"sharp": "1"}, os_family="Suse")["errors"][0]
    # Packages are ignored, not checked, while SHARP is off.
    assert plan_for(sharp=False, sharp_packages={"sharp": ""})["errors"] == []


# ---------------------------------------------------------------------------
# Ports over SIMULATED trees
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", IB_PROFILES)
def test_every_infiniband_profile_matches_its_simulated_hardware(name, tmp_path):
    facts = facts_for(name, tmp_path)
    # As the role gets it: the plan's NIC placeholders filled from the host (fabric_facts).
    plan = ib.plan({"pkey": "0xffff"}, fabric_nics.resolve(catalog_plan(name), facts), {"os_family": "Debian"})
    hcas = ib.gpu_hcas(facts, plan)
    assert hcas["problems"] == []
    assert len(hcas["names"]) == catalog.get(name)["nics"]["gpu"]["count"]
    assert ib.port_findings(facts, plan, hcas["names"]) == []
    assert ib.env_findings(facts, plan["env"], hcas["names"]) == []


@pytest.mark.parametrize("name", IB_PROFILES)
def test_no_subnet_manager_names_every_hca(name, tmp_path):
    facts = facts_for(name, tmp_path, Faults(no_subnet_manager=True))
    plan = plan_for(name)
    names = ib.gpu_hcas(facts, plan)["names"]
    assert ib.port_findings(facts, plan, names) == [
        f"no subnet manager has configured {', '.join(names)} (LID 0): "
        "start opensm/UFM on the fabric or check the switch"
    ]


def test_one_port_without_subnet_manager_reads_as_the_operator_expects(tmp_path):
    facts = facts_for(NEBIUS, tmp_path)
    port(facts, "mlx5_3").update(lid=0, sm_lid=0, state="INIT")
    assert ib.port_findings(facts, plan_for(), MLX5) == [
        "no subnet manager has configured mlx5_3 (LID 0): start opensm/UFM on the fabric or check the switch"
    ]


def test_link_down_and_slow_port(tmp_path):
    facts = facts_for(NEBIUS, tmp_path, Faults(nic_down=1, ib_port_rate_gbit_s=(5, 200)))
    assert ib.port_findings(facts, plan_for(), MLX5) == [
        "mlx5_1 has no physical link (Disabled): check the cable, the transceiver and the switch port",
        "mlx5_5 runs at 200 Gb/s; expected 400 Gb/s (check the cable and the switch port speed)",
    ]
    # A site with HDR switches lowers the expectation.
    assert ib.port_findings(facts, plan_for(rate_gbit_s=200), MLX5)[1:] == []


def test_armed_port_with_lid_is_not_active(tmp_path):
    facts = facts_for(NEBIUS, tmp_path)
    port(facts, "mlx5_2")["state"] = "ARMED"
    assert ib.port_findings(facts, plan_for(), MLX5) == ["mlx5_2 is ARMED (LinkUp); expected ACTIVE"]


def test_ethernet_port_named_as_gpu_hca(tmp_path):
    facts = facts_for(AZURE, tmp_path)
    findings = ib.port_findings(facts, plan_for(AZURE), ["mlx5_an0", "mlx5_ib0"])
    assert findings == ["mlx5_an0 is Ethernet, not InfiniBand (it cannot carry this fabric)"]


def test_multi_port_hca_is_named_with_its_port(tmp_path):
    facts = facts_for(NEBIUS, tmp_path)
    device = next(d for d in facts["rdma_devices"] if d["name"] == "mlx5_0")
    second = copy.deepcopy(device["ports"][0])
    second.update(port=2, lid=0, sm_lid=0)
    device["ports"].append(second)
    assert ib.port_findings(facts, plan_for(), ["mlx5_0"]) == [
        "no subnet manager has configured mlx5_0 port 2 (LID 0): start opensm/UFM on the fabric or check the switch"
    ]


@pytest.mark.parametrize(
    ("table", "membership", "ok"),
    [
        (["0xffff", "0x8001"], "full", True),
        (["0xffff", "0x0001"], "full", False),
        (["0xffff", "0x0001"], "limited", True),
        (["0xffff", "0x8001"], "limited", False),
        (["0xffff", "0x0001"], "any", True),
        (["0xffff", "0x8001"], "any", True),
        (["0xffff"], "any", False),
    ],
)
def test_partition_membership(tmp_path, table, membership, ok):
    facts = facts_for(NEBIUS, tmp_path)
    for name in MLX5[:2]:
        port(facts, name)["pkeys"] = table
    findings = ib.port_findings(facts, plan_for(pkey="0x8001", pkey_membership=membership), MLX5)
    if ok:
        # The other six ports hold the default partition only.
        assert findings == [findings[0]] and "mlx5_0" not in findings[0] and "mlx5_2 (0xffff)" in findings[0]
    else:
        assert findings[0].startswith(f"partition 0x0001 ({membership} membership, P_Key ")
        assert f"mlx5_0 ({', '.join(table)}), mlx5_1" in findings[0]
        assert findings[0].endswith(
            "add these ports' GUIDs to the partition on the subnet manager (opensm partitions.conf or UFM)"
        )


def test_default_partition_passes_on_simulated_ports(tmp_path):
    facts = facts_for(NEBIUS, tmp_path)
    assert ib.port_findings(facts, plan_for(pkey="0xffff"), MLX5) == []
    assert ib.port_findings(facts, plan_for(pkey="0x7fff", pkey_membership="limited"), MLX5)[0].startswith(
        "partition 0x7fff (limited membership, P_Key 0x7fff) is not in the P_Key table of mlx5_0 (0xffff)"
    )


def test_named_hcas_missing_from_the_host(tmp_path):
    facts = facts_for(NEBIUS, tmp_path, Faults(nics_missing=2))
    assert ib.gpu_hcas(facts, plan_for()) == {
        "names": MLX5[:6],
        "problems": [
            "GPU-network HCAs mlx5_6, mlx5_7 are missing (no /sys/class/infiniband entry; found: "
            "mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5)"
        ],
    }


def test_bare_metal_finds_its_hcas_and_counts_them(tmp_path):
    facts = facts_for(BAREMETAL, tmp_path, Faults(nics_missing=1))
    assert ib.gpu_hcas(facts, plan_for(BAREMETAL)) == {
        "names": MLX5[:7],
        "problems": [
            "found 7 ConnectX InfiniBand HCAs (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6) of the "
            "profile's 8; name them in infiniband_devices if the GPU network is on other devices"
        ],
    }


def test_bare_metal_does_not_count_sriov_virtual_functions_as_hcas(tmp_path):
    """After the sriov role carved VFs for pods, their RDMA devices (mlx5_8 and up) are not the host's HCAs."""
    facts = facts_for(BAREMETAL, tmp_path)
    vfs = []
    for number, device in enumerate(facts["rdma_devices"]):
        vf = copy.deepcopy(device)
        vf.update(name=f"mlx5_{8 + number}", is_virtual_function=True)
        vfs.append(vf)
    facts["rdma_devices"] = facts["rdma_devices"] + vfs
    assert ib.gpu_hcas(facts, plan_for(BAREMETAL)) == {"names": MLX5, "problems": []}


# ---------------------------------------------------------------------------
# NCCL_IB_HCA and UCX_NET_DEVICES
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "exclude", "exact", "entries"),
    [
        (None, False, False, []),
        ("", False, False, []),
        ("mlx5", False, False, [("mlx5", None)]),
        ("=mlx5_0:1,mlx5_1:1", False, True, [("mlx5_0", 1), ("mlx5_1", 1)]),
        ("^=mlx5_1,mlx5_4", True, True, [("mlx5_1", None), ("mlx5_4", None)]),
        ("^mlx5_1", True, False, [("mlx5_1", None)]),
        ("mlx5_0:1:0:1", False, False, [("mlx5_0", 1)]),  # NCCL 2.27+ rail and plane after the port
        ("mlx5_0,,mlx5_1:", False, False, [("mlx5_0", None), ("mlx5_1", None)]),
        ("=^mlx5", False, True, [("^mlx5", None)]),  # "^" only counts first, as in net_ib.cc
    ],
)
def test_nccl_ib_hca_parses_as_nccl_does(value, exclude, exact, entries):
    spec = ib.parse_nccl_ib_hca(value)
    assert (spec["exclude"], spec["exact"]) == (exclude, exact)
    assert [(e["name"], e["port"]) for e in spec["entries"]] == entries
    assert spec["errors"] == []


def test_nccl_ib_hca_typos_are_reported():
    spec = ib.parse_nccl_ib_hca(":1,mlx5_0:x,mlx5_1:0,mlx5_2")
    assert [(e["name"], e["port"]) for e in spec["entries"]] == [("mlx5_2", None)]
    assert spec["errors"] == [
        "entry ':1' has no device name (NCCL ignores it)",
        "entry 'mlx5_0:x' has port 'x', which is not a port number (NCCL matches no port)",
        "entry 'mlx5_1:0' has port '0', which is not a port number (NCCL matches no port)",
    ]


@pytest.mark.parametrize(
    ("value", "device", "port", "selected"),
    [
        (None, "mlx5_an0", 1, True),
        ("mlx5", "mlx5_7", 1, True),
        ("mlx5_1", "mlx5_10", 1, True),  # a prefix: mlx5_1 also takes mlx5_10..mlx5_17
        ("=mlx5_1", "mlx5_10", 1, False),
        ("=mlx5_1", "mlx5_1", 1, True),
        ("mlx5_0:1", "mlx5_0", 2, False),
        ("mlx5_0:2", "mlx5_0", 2, True),
        ("^mlx5_an", "mlx5_an0", 1, False),
        ("^mlx5_an", "mlx5_ib0", 1, True),
        ("^=mlx5_1", "mlx5_10", 1, True),
        ("^", "mlx5_0", 1, False),  # "^" with an empty list excludes everything, as in NCCL
        ("mlx5_ib", "mlx5_an0", 1, False),
    ],
)
def test_nccl_selection(value, device, port, selected):
    assert ib.nccl_selects(ib.parse_nccl_ib_hca(value), device, port) is selected


@pytest.mark.parametrize(
    ("value", "everything", "entries", "errors"),
    [
        (None, True, [], []),
        ("all", True, [], []),
        ("mlx5_0:1,all", True, [("mlx5_0", 1)], []),
        ("mlx5_0:1,mlx5_1:1", False, [("mlx5_0", 1), ("mlx5_1", 1)], []),
        ("eth0,mlx5_0", False, [("eth0", None), ("mlx5_0", None)], []),
        ("mlx5_0:one", False, [], ["entry 'mlx5_0:one' has port 'one', which is not a port number"]),
    ],
)
def test_ucx_net_devices_parse(value, everything, entries, errors):
    spec = ib.parse_ucx_net_devices(value)
    assert spec["all"] is everything
    assert [(e["name"], e["port"]) for e in spec["entries"]] == entries
    assert spec["errors"] == errors


@pytest.mark.parametrize(
    ("image", "rails"),
    [("ubuntu-hpc", [f"mlx5_ib{i}" for i in range(8)]), (None, MLX5)],
    ids=["azure-hpc-image-naming", "kernel-naming"],
)
def test_azure_names_its_rails_as_the_host_does_and_leaves_accelerated_networking_out(image, rails, tmp_path):
    facts = facts_for(AZURE, tmp_path, image=image)
    plan = fabric_nics.resolve(catalog_plan(AZURE), facts)
    found = plan["nic_names"]["gpu_rdma"]  # in PCI order (the SIMULATED kernel names do not follow it)
    assert sorted(found) == sorted(rails)
    assert plan["env"]["NCCL_IB_HCA"] == "=" + ",".join(found)
    assert plan["env"]["UCX_NET_DEVICES"] == ",".join(f"{name}:1" for name in found)
    rails_found = ib.gpu_hcas(facts, ib.plan({}, plan, {"os_family": "Debian"}))["names"]
    assert ib.env_findings(facts, plan["env"], rails_found) == []


def test_azure_prefix_keeps_the_accelerated_networking_port_out(tmp_path):
    facts = facts_for(AZURE, tmp_path, image="ubuntu-hpc")
    hcas = [f"mlx5_ib{i}" for i in range(8)]
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5_ib"}, hcas) == []
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5"}, hcas) == [
        "NCCL_IB_HCA=mlx5 also selects mlx5_an0 port 1 (Ethernet), which is not InfiniBand: "
        "NCCL would use it as a rail; narrow the value (a prefix that excludes it, an =exact list, or ^name)"
    ]
    assert ib.env_findings(facts, {}, hcas)[0].startswith(
        "NCCL_IB_HCA (not set: every port) also selects mlx5_an0 port 1"
    )
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "^mlx5_an"}, hcas) == []


def test_nccl_names_a_missing_hca_and_leaves_rails_out(tmp_path):
    facts = facts_for(NEBIUS, tmp_path)
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_9:1"}, MLX5) == [
        "NCCL_IB_HCA==mlx5_0:1,mlx5_9:1 names device mlx5_9 port 1, which matches no RDMA port on this host "
        "(found: mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7)",
        "NCCL_IB_HCA==mlx5_0:1,mlx5_9:1 leaves out the GPU-network HCAs mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, "
        "mlx5_6, mlx5_7",
    ]
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5_ib"}, MLX5)[0].startswith(
        "NCCL_IB_HCA=mlx5_ib names device name prefix mlx5_ib, which matches no RDMA port"
    )
    # Excluding a device that does not exist is harmless, excluding a rail is not.
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "^=mlx5_9"}, MLX5) == []
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "^=mlx5_7"}, MLX5) == [
        "NCCL_IB_HCA=^=mlx5_7 leaves out the GPU-network HCA mlx5_7"
    ]
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5_0:x"}, MLX5)[0] == (
        "NCCL_IB_HCA=mlx5_0:x: entry 'mlx5_0:x' has port 'x', which is not a port number (NCCL matches no port)"
    )


def test_ucx_net_devices_against_the_host(tmp_path):
    facts = facts_for(AZURE, tmp_path, image="ubuntu-hpc")
    hcas = [f"mlx5_ib{i}" for i in range(8)]
    full = ",".join(f"{name}:1" for name in hcas)
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5_ib", "UCX_NET_DEVICES": full}, hcas) == []
    assert ib.env_findings(facts, {"NCCL_IB_HCA": "mlx5_ib", "UCX_NET_DEVICES": "all"}, hcas) == []
    findings = ib.env_findings(
        facts,
        {"NCCL_IB_HCA": "mlx5_ib", "UCX_NET_DEVICES": "mlx5_ib0:1,mlx5_ib9:1,mlx5_ib1:2,eth0,mlx5_ib2,mlx5_an0:1"},
        hcas,
    )
    label = "UCX_NET_DEVICES=mlx5_ib0:1,mlx5_ib9:1,mlx5_ib1:2,eth0,mlx5_ib2,mlx5_an0:1"
    assert findings == [
        f"{label} names mlx5_ib9:1, which is missing on this host (there is no RDMA device mlx5_ib9)",
        f"{label} names mlx5_ib1:2, which is missing on this host (mlx5_ib1 has no port 2)",
        f"{label} names eth0, which is not an InfiniBand port (UCX would use it as a TCP netdev, if at all)",
        f"{label} names mlx5_ib2 without a port; UCX names InfiniBand devices mlx5_ib2:<port>, e.g. mlx5_ib2:1",
        f"{label} names mlx5_an0:1, which is Ethernet, not InfiniBand",
        f"{label} leaves out the GPU-network HCAs mlx5_ib2, mlx5_ib3, mlx5_ib4, mlx5_ib5, mlx5_ib6, mlx5_ib7",
    ]


# ---------------------------------------------------------------------------
# Role data
# ---------------------------------------------------------------------------


def test_defaults_pretend_no_versions_and_no_partition():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    assert defaults["infiniband_sharp_packages"] == {}
    assert defaults["infiniband_sharp"] is False
    assert defaults["infiniband_ipoib"] is False
    assert defaults["infiniband_pkey"] == ""
    assert defaults["infiniband_pkey_membership"] == "full"
    assert "infiniband_profile" not in defaults, "the profile comes from gpufabric_plan"
    assert plan_for(NEBIUS, **{k.removeprefix("infiniband_"): v for k, v in defaults.items()})["errors"] == []
    readme = (ROLE / "README.md").read_text(encoding="utf-8")
    assert "infiniband_sharp_packages" in readme and "no default" in readme


@pytest.mark.parametrize(("family", "manager"), [("Debian", "apt"), ("RedHat", "dnf")])
def test_os_family_vars(family, manager):
    data = yaml.safe_load((ROLE / "vars" / f"{family}.yml").read_text(encoding="utf-8"))
    assert data == {"infiniband__package_manager": manager}
    assert (ROLE / "tasks" / f"sharp-{manager}.yml").is_file()
