# SPDX-License-Identifier: Apache-2.0
"""The sriov role's logic: inputs, physical functions found on SIMULATED trees, the boot configuration,
mstconfig query parsing (real mstflint layout) and the firmware plan, address conflicts, verify-mode drift."""

from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpufabric.collection import collections_path, module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree

sys.path.insert(0, str(collections_path()))
role_filter = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.sriov")
sriov_role = module_utils("sriov_role")
firmware = module_utils("sriov_firmware")
hw_facts = module_utils("hw_facts")
fabric_plan = plugin_utils("fabric_plan")
catalog = plugin_utils("fabric_catalog").load_catalog()

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sriov"
PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
PFS = [
    "0000:17:00.0",
    "0000:18:00.0",
    "0000:1e:00.0",
    "0000:1f:00.0",
    "0000:25:00.0",
    "0000:26:00.0",
    "0000:2c:00.0",
    "0000:2d:00.0",
]


def catalog_plan(name: str = PROFILE) -> dict[str, Any]:
    return fabric_plan.plan_host({"gpufabric_profile": name}, catalog)


@pytest.fixture(scope="module")
def facts(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sriov") / "tree"
    write_tree(catalog.get(PROFILE), root)
    return hw_facts.gather(str(root))


def defaults() -> dict[str, Any]:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))


def settings(**overrides: Any) -> dict[str, Any]:
    values = {key.removeprefix("sriov_"): value for key, value in defaults().items()}
    values.update(overrides)
    return values


def plan_for(facts: dict[str, Any], name: str = PROFILE, **overrides: Any) -> dict[str, Any]:
    return sriov_role.plan(settings(**overrides), catalog_plan(name), {"gpufabric_hardware": facts})


def with_vf(facts: dict[str, Any]) -> dict[str, Any]:
    """The same host with one VF of the first PF (as fabric_facts reports it after the VFs exist)."""
    changed = copy.deepcopy(facts)
    changed["nics"].append(
        {
            "name": "ibp23s0v0",
            "pci_address": "0000:17:00.1",
            "pci_id": "15b3:101e",
            "kind": "connectx",
            "sriov_totalvfs": None,
            "sriov_numvfs": None,
            "is_virtual_function": True,
        }
    )
    return changed


# ---------------------------------------------------------------------------
# Defaults and argument spec
# ---------------------------------------------------------------------------


def test_defaults_follow_the_interface():
    values = defaults()
    assert "sriov_profile" not in values, "the profile comes from gpufabric_plan"
    assert "sriov_mode" not in values  # verify is the entry point tasks_from: verify, not a mode
    assert values["sriov_num_vfs"] is None
    assert values["sriov_address_scheme"] == "derived"
    assert values["sriov_firmware"] is False
    assert values["sriov_config_path"] == "/etc/gpufabric/sriov.json"


def test_unit_template_orders_before_the_network_and_kubelet():
    unit = (ROLE / "templates" / "gpufabric-sriov.service.j2").read_text(encoding="utf-8")
    lines = unit.splitlines()
    assert "Type=oneshot" in lines
    assert "RemainAfterExit=yes" in lines
    assert "DefaultDependencies=no" in lines
    assert "After=systemd-udev-settle.service network-pre.target openibd.service" in lines
    assert "Wants=network-pre.target" in lines
    assert any(
        line.startswith("Before=network.target NetworkManager.service systemd-networkd.service kubelet.service")
        for line in lines
    )
    assert "WantedBy=multi-user.target" in lines


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------


def test_live_plan_finds_the_profiles_physical_functions(facts):
    plan = plan_for(facts)
    assert plan["errors"] == []
    assert plan["link_type"] == "infiniband"
    assert plan["num_vfs"] == 8
    assert [pf["pf"] for pf in plan["pfs"]] == PFS
    assert plan["pfs"][0]["netdev"] == "ibp23s0"
    assert plan["pfs"][0]["rdma_device"] == "mlx5_0"
    config = plan["config"]
    assert config["sysfs_root"] == "/"
    assert config["select"] is None
    assert config["physical_functions"][0] == {
        "pf": "0000:17:00.0",
        "num_vfs": 8,
        "address_scheme": "derived",
        "trust": None,
        "spoofchk": None,
        "vlan": None,
        "rebind": True,
        "timeout": 30,
        "vfs": [],
    }
    assert plan["summary"][0] == "0000:17:00.0 (ibp23s0): 8 VFs, addresses derived from the PF"
    assert plan["firmware"] == {"SRIOV_EN": True, "NUM_OF_VFS": 8, "LINK_TYPE": "IB"}


def test_virtual_functions_are_never_physical_functions(facts):
    plan = plan_for(with_vf(facts))
    assert [pf["pf"] for pf in plan["pfs"]] == PFS
    refused = plan_for(with_vf(facts), physical_functions=["ibp23s0v0"])
    (error,) = refused["errors"]
    assert error.startswith(
        "sriov_physical_functions names 'ibp23s0v0' (0000:17:00.1), which is a virtual function; accepted: "
        "physical functions such as"
    )


@pytest.mark.parametrize("name", ["ibp24s0", "rdma", "0000:18:00.0", "18:00.0"])
def test_physical_functions_by_any_name(facts, name):
    if name == "rdma":
        (name,) = [device["name"] for device in facts["rdma_devices"] if device["pci_address"] == "0000:18:00.0"]
    plan = plan_for(facts, physical_functions=[name], num_vfs=4)
    assert plan["errors"] == []
    assert [pf["pf"] for pf in plan["pfs"]] == ["0000:18:00.0"]
    assert plan["config"]["physical_functions"][0]["num_vfs"] == 4


def test_unknown_physical_function_is_named(facts):
    plan = plan_for(facts, physical_functions=["ibp99s0"])
    (error,) = plan["errors"]
    assert error.startswith(
        "sriov_physical_functions names 'ibp99s0', which is neither a network device, an RDMA device nor a PCI "
        "function of this host (read under /); SR-IOV capable physical functions here: "
    )


def test_same_physical_function_twice_is_refused(facts):
    plan = plan_for(facts, physical_functions=["ibp23s0", "mlx5_0"])
    assert plan["errors"] == ["sriov_physical_functions names 0000:17:00.0 twice (ibp23s0, mlx5_0)"]


def test_explicit_vfs_by_pf_name(facts):
    vfs = {"mlx5_0": [{"index": 0, "guid": "02:00:00:00:00:00:00:01"}]}
    plan = plan_for(facts, physical_functions=["ibp23s0"], num_vfs=1, address_scheme="explicit", vfs=vfs)
    assert plan["errors"] == []
    assert plan["config"]["physical_functions"][0]["vfs"] == vfs["mlx5_0"]


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"num_vfs": -1}, "sriov_num_vfs -1 is not a VF count; accepted: an integer >= 0"),
        ({"num_vfs": "8"}, "sriov_num_vfs '8' is not a VF count"),
        (
            {"address_scheme": "random"},
            "sriov_address_scheme 'random' is not a scheme; accepted: derived, explicit, kernel",
        ),
        ({"trust": True}, "sriov_trust True applies to Ethernet VFs only and the profile's NICs are InfiniBand"),
        ({"vlan": 5}, "sriov_vlan 5 applies to Ethernet VFs only"),
        (
            {"verify": True, "bake": True},
            "sriov's verify entry point (tasks_from: verify) reads the live host and cannot run with sriov_bake",
        ),
        ({"timeout": 0}, "sriov_timeout 0 is not a number of seconds"),
        ({"vfs": {"ibp99s0": [{"index": 0}]}}, "sriov_vfs names 'ibp99s0', which is not one of the physical functions"),
        ({"vfs": {"ibp23s0": [{"index": 0, "gid": "x"}]}}, "sriov_vfs['ibp23s0'] has unknown key(s) gid"),
        ({"firmware_num_vfs": 4}, "sriov_firmware_num_vfs 4 is not a firmware VF count for 8 VFs"),
        ({"config_path": "sriov.json"}, "sriov_config_path 'sriov.json' is not an absolute file path"),
    ],
)
def test_bad_input_is_named(facts, overrides, error):
    plan = plan_for(facts, **overrides)
    assert any(message.startswith(error) for message in plan["errors"]), plan["errors"]


def test_the_filter_takes_the_settings_piped_and_the_plan_and_facts_by_keyword(facts):
    found = role_filter.FilterModule().filters()["sriov_plan"](
        settings(), plan=catalog_plan(), facts={"gpufabric_hardware": facts}
    )
    assert found == plan_for(facts)
    with pytest.raises(
        AnsibleFilterError,
        match=r"sriov_plan: plan= is NoneType None; accepted: gpufabric_plan, the host's plan \(a dictionary\)",
    ):
        role_filter.FilterModule().filters()["sriov_plan"](settings(), facts={})


def test_profile_without_sriov_is_refused(facts):
    plan = sriov_role.plan(settings(), catalog_plan("baremetal/hgx-h100-ib-ndr"), {"gpufabric_hardware": facts})
    (error,) = plan["errors"]
    assert error.startswith("profile 'baremetal/hgx-h100-ib-ndr' declares no virtual functions")


def test_unknown_profile_is_refused(facts):
    plan = sriov_role.plan(settings(), catalog_plan("nowhere/none"), {"gpufabric_hardware": facts})
    assert plan["errors"] == [
        "profile 'nowhere/none' from host var gpufabric_profile is not in the catalog; "
        "accepted: a profile of `gpufabric catalog list`"
    ]


def test_host_without_the_nics_is_refused():
    plan = sriov_role.plan(settings(), catalog_plan(), {"gpufabric_hardware": {"nics": [], "rdma_devices": []}})
    (error,) = plan["errors"]
    assert error.startswith("no ConnectX physical function with pci_id in ['15b3:1021'] was found under /")


def test_bake_selects_at_boot_by_pci_id():
    plan = sriov_role.plan(settings(bake=True), catalog_plan(), {})
    assert plan["errors"] == []
    assert plan["config"]["physical_functions"] == []
    assert plan["config"]["select"] == {
        "pci_ids": ["15b3:1021"],
        "settings": {
            "num_vfs": 8,
            "address_scheme": "derived",
            "trust": None,
            "spoofchk": None,
            "vlan": None,
            "rebind": True,
            "timeout": 30,
            "vfs": [],
        },
    }
    assert plan["summary"] == [
        "at boot, every physical function with pci_id in 15b3:1021: 8 VFs, addresses derived from the PF"
    ]


def test_bake_with_named_physical_functions():
    plan = sriov_role.plan(settings(bake=True, physical_functions=["17:00.0", "ibp24s0"]), catalog_plan(), {})
    assert plan["errors"] == []
    assert [entry["pf"] for entry in plan["config"]["physical_functions"]] == ["0000:17:00.0", "ibp24s0"]
    assert plan["config"]["select"] is None
    refused = sriov_role.plan(settings(bake=True, physical_functions=["mlx5_0"]), catalog_plan(), {})
    assert refused["errors"][0].startswith("sriov_physical_functions entry 'mlx5_0' is an RDMA device name")


def test_hw_root_goes_into_the_boot_configuration(facts):
    plan = plan_for(facts, hw_root="/simulated-hw")
    assert plan["config"]["sysfs_root"] == "/simulated-hw"
    assert plan["boot_config"]["sysfs_root"] == "/simulated-hw"


def test_live_host_boots_from_the_file_a_bake_writes(facts):
    """PFs from the profile: the boot file selects by PCI id, so a host from a baked image shows no drift."""
    live = plan_for(facts)
    baked = sriov_role.plan(settings(bake=True), catalog_plan(), {})
    assert [entry["pf"] for entry in live["config"]["physical_functions"]] == PFS
    assert live["boot_config"] == baked["boot_config"] == baked["config"]
    assert live["boot_config"]["physical_functions"] == []
    assert live["boot_summary"] == baked["boot_summary"] == baked["summary"]
    assert live["boot_pf_count"] == baked["boot_pf_count"] == 8  # the unit's start timeout counts them


def test_named_physical_functions_stay_named_at_boot(facts):
    named = plan_for(facts, physical_functions=["ibp23s0"], num_vfs=4)
    assert named["boot_config"] == named["config"]
    assert named["boot_summary"] == named["summary"]
    assert named["boot_pf_count"] == 1
    assert named["boot_config"]["select"] is None
    vfs = {"mlx5_0": [{"index": 0, "guid": "02:00:00:00:00:00:00:01"}]}
    with_vf_list = plan_for(facts, num_vfs=1, vfs=vfs)
    assert with_vf_list["errors"] == []
    assert with_vf_list["boot_config"] == with_vf_list["config"]


# ---------------------------------------------------------------------------
# mstconfig
# ---------------------------------------------------------------------------

# The layout of `mstconfig -e -d <pci> q` (mstflint 4.x), as sriov-network-operator's tests hold it
# (pkg/vendors/mellanox/mellanox_test.go), cut to the lines that matter plus neighbours.
QUERY = """
Device #1:
----------

Device type:        ConnectX7
Name:               MCX75310AAS-NEAT_Ax
Description:        NVIDIA ConnectX-7 HHHL Adapter Card; 400GbE / NDR IB (default mode); Single-port OSFP
Device:             0000:17:00.0

Configurations:                                     Default              Current              Next Boot
        MEMIC_BAR_SIZE                              0                    0                    0
        NUM_OF_VL_P1                                _4_VLs(3)            _4_VLs(3)            _4_VLs(3)
*       NUM_OF_VFS                                  8                    16                   16
        NUM_OF_PF                                   1                    1                    1
        SRIOV_EN                                    True(1)              True(1)              True(1)
        LINK_TYPE_P1                                IB(1)                IB(1)                IB(1)
        SRIOV_IB_ROUTING_MODE_P1                    LID(1)               LID(1)               LID(1)
The '*' shows parameters with next value different from default/current value.
"""

# Without -e, only the Next Boot column (mstflint's default query).
QUERY_NEXT_ONLY = """
Device #1:
----------

Device type:    ConnectX6DX
Device:         0000:3b:00.0

Configurations:                              Next Boot
         SRIOV_EN                            False(0)
         NUM_OF_VFS                          0
         LINK_TYPE_P1                        ETH(2)
         LINK_TYPE_P2                        ETH(2)
"""


def test_query_parses_the_three_columns():
    parsed = firmware.parse_query(QUERY, "0000:17:00.0")
    assert set(parsed) == {"NUM_OF_VFS", "SRIOV_EN", "LINK_TYPE_P1"}
    assert parsed["NUM_OF_VFS"]["current"]["number"] == 16
    assert parsed["NUM_OF_VFS"]["default"]["number"] == 8
    assert parsed["SRIOV_EN"]["next"] == {"text": "True(1)", "name": "TRUE", "number": 1}
    assert parsed["LINK_TYPE_P1"]["next"]["name"] == "IB"


def test_query_parses_the_next_boot_column_alone():
    parsed = firmware.parse_query(QUERY_NEXT_ONLY, "0000:3b:00.0")
    assert parsed["SRIOV_EN"]["current"] is None
    assert parsed["SRIOV_EN"]["next"]["number"] == 0
    assert parsed["LINK_TYPE_P2"]["next"]["name"] == "ETH"


def test_query_without_a_table_is_an_error():
    with pytest.raises(firmware.FirmwareError, match="printed no 'Configurations:' table"):
        firmware.parse_query("-E- Failed to open the device\n", "0000:17:00.0")


@pytest.mark.parametrize(
    ("text", "name", "number"),
    [("True(1)", "TRUE", 1), ("16", None, 16), ("ETH", "ETH", None), ("IB(1)", "IB", 1), ("_4_VLs(3)", "_4_VLS", 3)],
)
def test_values(text, name, number):
    value = firmware.parse_value(text)
    assert (value["name"], value["number"]) == (name, number)


def test_firmware_plan_sets_only_what_differs_and_needs_a_reboot():
    entry = firmware.plan("0000:17:00.0", firmware.parse_query(QUERY), firmware.desired(8, None, "IB"))
    assert entry["set_args"] == ["NUM_OF_VFS=8"]
    assert entry["differences"] == ["NUM_OF_VFS 16 -> 8 (next boot)"]
    assert entry["pending"] == ["NUM_OF_VFS 16 now, 8 after a reboot"]
    assert entry["reboot_required"] is True
    assert entry["errors"] == []


def test_firmware_already_set_but_not_rebooted_still_needs_the_reboot():
    text = QUERY.replace("8                    16                   16", "8                    16                   8")
    entry = firmware.plan("0000:17:00.0", firmware.parse_query(text), firmware.desired(8, None, "IB"))
    assert entry["set_args"] == []
    assert entry["reboot_required"] is True


def test_firmware_matching_needs_nothing():
    entry = firmware.plan("0000:17:00.0", firmware.parse_query(QUERY), firmware.desired(8, 16, "IB"))
    assert entry == {
        "device": "0000:17:00.0",
        "set_args": [],
        "differences": [],
        "pending": [],
        "reboot_required": False,
        "errors": [],
    }


def test_firmware_enables_sriov_and_switches_both_ports():
    entry = firmware.plan("0000:3b:00.0", firmware.parse_query(QUERY_NEXT_ONLY), firmware.desired(4, None, "IB"))
    assert entry["set_args"] == ["SRIOV_EN=1", "NUM_OF_VFS=4", "LINK_TYPE_P1=IB", "LINK_TYPE_P2=IB"]
    assert entry["pending"] == []  # Current unknown without -e
    assert entry["reboot_required"] is True


def test_firmware_keep_link_type_and_zero_vfs():
    assert firmware.desired(0, None, "IB") == {}
    assert firmware.desired(4, None, "keep") == {"SRIOV_EN": True, "NUM_OF_VFS": 4}


def test_firmware_without_the_setting_is_an_error():
    text = "\n".join(line for line in QUERY.splitlines() if "SRIOV_EN" not in line)
    entry = firmware.plan("0000:17:00.0", firmware.parse_query(text), firmware.desired(8, None, "IB"))
    assert entry["set_args"] == []
    assert entry["errors"][0].startswith("mstconfig query of 0000:17:00.0 shows no SRIOV_EN")


def test_firmware_plan_over_registered_results(facts):
    plan = plan_for(facts, physical_functions=["ibp23s0", "ibp24s0"], firmware=True)
    pf0, pf1 = plan["pfs"]
    results = [
        {"item": pf0, "rc": 0, "stdout": QUERY, "stderr": ""},
        {"item": pf1, "rc": 3, "stdout": "", "stderr": "-E- Failed to open the device"},
    ]
    out = role_filter.firmware_plan(results, plan)
    assert out["errors"] == ["mstconfig -e -d 0000:18:00.0 q failed (rc 3): -E- Failed to open the device"]
    assert out["reboot_required"] is True
    assert out["report"] == ["0000:17:00.0: NUM_OF_VFS 16 now, 8 after a reboot"]
    assert out["drift"] == [
        "0000:17:00.0: firmware NUM_OF_VFS 16 -> 8 (next boot)",
        "0000:17:00.0: firmware NUM_OF_VFS 16 now, 8 after a reboot",
    ]
    # The running firmware already carves 16 VFs (sriov_totalvfs): the 8 VFs need not wait for the reboot.
    assert pf0["totalvfs"] == 16
    assert out["waiting"] == []
    starved = role_filter.firmware_plan([{**results[0], "item": {**pf0, "totalvfs": None}}], plan)
    assert starved["waiting"] == ["0000:17:00.0"]


# ---------------------------------------------------------------------------
# Across physical functions, and verify mode
# ---------------------------------------------------------------------------


def test_address_conflicts_across_physical_functions():
    guid = "02:00:00:00:00:00:00:01"
    results = [
        {"pf": {"pci_address": "0000:17:00.0"}, "after": {"vfs": [{"index": 0, "node_guid": guid, "port_guid": guid}]}},
        {"pf": {"pci_address": "0000:18:00.0"}, "after": {"vfs": [{"index": 3, "node_guid": guid, "port_guid": guid}]}},
        {"pf": {"pci_address": "0000:1e:00.0"}, "after": {"vfs": [{"index": 0, "mac": "02:00:00:00:00:01"}]}},
    ]
    assert role_filter.address_conflicts(results) == [
        f"two VFs would get one address: {key} {guid} on 0000:17:00.0 VF 0, 0000:18:00.0 VF 3; accepted: one "
        "address per VF across all physical functions"
        for key in ("node_guid", "port_guid")
    ]
    assert role_filter.address_conflicts(results[:1] + results[2:]) == []


def test_drift_lists_count_changes_and_sums_up_vf_settings():
    results = [
        {
            "actions": [
                "0000:17:00.0: sriov_numvfs 4 -> 0 -> 8",
                "0000:17:00.0: vf 0 node_guid 02:03:00:12:00:01:00:01",
                "0000:17:00.0: vf 0 port_guid 02:03:00:12:00:01:00:01",
                "0000:17:00.0: vf 0 rebind 0000:17:00.1 so the new GUIDs take effect",
            ],
            "changed": False,
        },
        {"actions": ["0000:18:00.0: vf 3 node_guid 02:03:00:12:00:02:00:04"], "changed": False},
        {"actions": [], "changed": False},
    ]
    assert role_filter.drift(results) == [
        "0000:17:00.0: sriov_numvfs 4 -> 0 -> 8",
        "0000:17:00.0: vf 0 node_guid 02:03:00:12:00:01:00:01 and 2 more",
        "0000:18:00.0: vf 3 node_guid 02:03:00:12:00:02:00:04",
    ]
