# SPDX-License-Identifier: Apache-2.0
"""roce's logic: TC -> DSCP -> priority, device selection, GID table, settings refused, read-back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree
from tests.conftest import recorded_facts

roce = module_utils("roce")
hw_facts = module_utils("hw_facts")
roce_filter = _import_plugins("filter", "roce")
fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles" / "roce" / "defaults" / "main.yml").read_text(encoding="utf-8"))
CATALOG = fabric_catalog.load_catalog()
OCI = "oci/BM.GPU.H100.8"


# BM.GPU.H100.8's rails as Oracle lists them (catalog/oci.yml).
OCI_RAILS = [f"mlx5_{index}" for index in (0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17)]


def catalog_plan(profile: str) -> dict:
    return fabric_plan.plan_host({"gpufabric_profile": profile}, CATALOG, tier="best", tier_source="test")


def settings(profile: str = OCI, **overrides) -> dict:
    """The role's defaults without the prefix, plus overrides, with the host plan under ``catalog`` and the
    facts' ``os_family`` beside them (``run`` hands them to roce.plan apart, as tasks/plan.yml does)."""
    values = {key.removeprefix("roce_"): value for key, value in DEFAULTS.items()}
    values.update(catalog=catalog_plan(profile), os_family="Debian")
    values.update(overrides)
    return values


def run(values: dict) -> dict:
    """roce.plan as the roce_plan filter calls it: settings piped, plan=gpufabric_plan, facts=ansible_facts."""
    role_vars = {key: value for key, value in values.items() if key not in ("catalog", "os_family")}
    return roce.plan(role_vars, values["catalog"], {"os_family": values["os_family"]})


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/roce no longer runs on (it runs the Ubuntu 24.04 identity image), and both Ubuntu releases.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_plan_over_recorded_facts(target):
    values = settings()
    role_vars = {key: value for key, value in values.items() if key not in ("catalog", "os_family")}
    plan = roce.plan(role_vars, values["catalog"], recorded_facts(target))
    assert plan["errors"] == []
    assert plan["qos_tool_package"] == roce.QOS_TOOL_PACKAGES["Debian"]
    assert "apt install mlnx-tools" in plan["qos_tool_package"]


@pytest.fixture(scope="module")
def oci_facts(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("oci") / "tree"
    write_tree(CATALOG.get(OCI), root)
    return hw_facts.gather(str(root))


# ---------------------------------------------------------------------------
# Traffic class, DSCP, priority
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tc", "dscp", "ecn"),
    [(41, 10, 1), (105, 26, 1), (106, 26, 2), (52, 13, 0), (84, 21, 0), (0, 0, 0), (255, 63, 3)],
)
def test_traffic_class_is_dscp_shifted_by_two_plus_ecn_bits(tc, dscp, ecn):
    assert roce.tc_to_dscp(tc) == dscp
    assert roce.tc_ecn(tc) == ecn
    assert (dscp << 2) | ecn == tc


def test_default_dscp_to_priority_is_dscp_shifted_by_three():
    assert [roce.default_priority(d) for d in (0, 7, 8, 10, 26, 46, 63)] == [0, 0, 1, 1, 3, 5, 7]


def test_role_defaults_on_oci_follow_the_catalog():
    plan = run(settings())
    assert plan["errors"] == []
    assert plan["gid_index"] == 3
    assert (plan["catalog_tc"], plan["dscp"], plan["ecn_bits"]) == (41, 10, 1)
    # DSCP trust with the NIC's default map: DSCP 10 lands on priority 1.
    assert plan["priority"] == 1
    assert plan["priority_basis"] == "NCCL_IB_TC 41 = DSCP 10, mapped to priority 1 by the default DSCP >> 3 mapping"
    assert (plan["traffic_class"], plan["default_tos"], plan["roce_version"]) == (41, 41, "RoCE v2")
    assert (plan["trust"], plan["pfc"], plan["ecn"], plan["dscp2prio"]) == ("dscp", [], [], [])
    # Oracle's 16 rails by name: the prefix mlx5 would also take the front-end ports mlx5_2 and mlx5_11.
    # The management NIC is left out by the name the plan read from the host (nics.management.interfaces); OCI's VNIC
    # has no identity fabric_nics reads, so the default route's interface stands for it (none in these facts).
    assert (plan["include"], plan["exclude"], plan["exclude_netdevs"]) == (OCI_RAILS, [], [])
    assert plan["expect_devices"] == 16
    assert plan["needs_qos_tool"] is True
    assert plan["warnings"] == []


def test_the_filter_takes_the_settings_piped_and_the_plan_and_facts_by_keyword():
    values = settings()
    role_vars = {key: value for key, value in values.items() if key not in ("catalog", "os_family")}
    assert roce_filter.FilterModule().filters()["roce_plan"](
        role_vars, plan=values["catalog"], facts={"os_family": "Debian"}
    ) == run(values)
    with pytest.raises(
        AnsibleFilterError,
        match=r"roce_plan: plan= is NoneType None; accepted: gpufabric_plan, the host's plan \(a dictionary\)",
    ):
        roce_filter.FilterModule().filters()["roce_plan"](role_vars, facts={"os_family": "Debian"})


@pytest.mark.parametrize("profile", sorted(name for name, p in CATALOG.profiles.items() if p["fabric"] == "roce"))
def test_role_defaults_are_accepted_for_every_roce_profile(profile):
    assert run(settings(profile))["errors"] == []


def test_profile_without_nccl_ib_tc_leaves_the_traffic_class_alone():
    plan = run(settings("baremetal/hgx-h100-roce-400g"))
    assert plan["errors"] == []
    assert (plan["catalog_tc"], plan["traffic_class"], plan["default_tos"]) == (None, None, None)
    # NCCL then sends TC 0: DSCP 0, priority 0.
    assert (plan["dscp"], plan["priority"]) == (0, 0)
    assert plan["warnings"] == [
        "the catalog sets no NCCL_IB_TC: NCCL sends traffic class 0, and the traffic class is left alone"
    ]
    assert plan["expect_devices"] == 8
    assert plan["exclude_netdevs"] == []


def test_oci_scripts_mapping_puts_nccl_on_a_lossless_priority():
    # oci-cn-auth's ifup_rdma.py for GPU shapes: dscp2prio set,10,0 and PFC 1,0,0,0,0,1,0,0.
    plan = run(settings(dscp2prio={10: 0}, pfc_priorities=[5, 0], ecn_priorities=[0]))
    assert plan["errors"] == []
    assert plan["priority"] == 0
    assert plan["pfc"] == [0, 5]
    assert plan["dscp2prio"] == [[10, 0]]
    assert plan["priority_basis"].endswith("mapped to priority 0 by roce_dscp2prio")


def test_pfc_that_misses_nccls_priority_is_refused():
    plan = run(settings(pfc_priorities=[3]))
    assert plan["errors"] == [
        "NCCL_IB_TC 41 = DSCP 10, mapped to priority 1 by the default DSCP >> 3 mapping, which is not in "
        "roce_pfc_priorities [3]: NCCL's traffic would be lossy. Add 1 to roce_pfc_priorities or map DSCP 10 "
        "with roce_dscp2prio"
    ]
    assert run(settings(pfc_priorities=[3], dscp2prio={"10": "3"}))["errors"] == []


def test_ecn_that_misses_nccls_priority_is_refused():
    (error,) = run(settings(ecn_priorities=[3]))["errors"]
    assert "not in roce_ecn_priorities [3]" in error
    assert "Add 1 to roce_ecn_priorities" in error


def test_pcp_trust_uses_the_service_level():
    values = settings(trust="pcp", pfc_priorities=[0])
    assert run(values)["priority"] == 0
    values["catalog"] = dict(values["catalog"], env=dict(values["catalog"]["env"], NCCL_IB_SL="3"))
    plan = run(values)
    assert plan["priority"] == 3
    assert plan["errors"][0].startswith("NCCL_IB_SL 3 = priority 3 under PCP trust, which is not in")


def test_trust_none_without_pfc_needs_no_mlnx_qos():
    plan = run(settings(trust="none"))
    assert plan["errors"] == []
    assert plan["priority"] is None
    assert plan["needs_qos_tool"] is False
    assert run(settings(trust="none", pfc_priorities=[1]))["needs_qos_tool"] is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"trust": "cos"}, "roce_trust is 'cos'; accepted: dscp, pcp, none"),
        ({"version": "2"}, "roce_version is '2'; accepted: v2, v1, none"),
        ({"pfc_priorities": [1, 8]}, "roce_pfc_priorities entry is 8; accepted: an integer from 0 to 7"),
        ({"pfc_priorities": "3"}, "roce_pfc_priorities is '3'; accepted: a list of priorities 0-7"),
        ({"ecn_priorities": [True]}, "roce_ecn_priorities entry is True; accepted: an integer from 0 to 7"),
        ({"dscp2prio": {64: 1}}, "roce_dscp2prio key 64 is 64; accepted: an integer from 0 to 63"),
        ({"dscp2prio": {10: 9}}, "roce_dscp2prio[10] is 9; accepted: an integer from 0 to 7"),
        ({"dscp2prio": {10: 1}, "trust": "pcp"}, "roce_dscp2prio is set but roce_trust is 'pcp'"),
        (
            {"traffic_class": 300},
            "roce_traffic_class is 300; accepted: auto (the catalog's NCCL_IB_TC), none, or 0-255",
        ),
        ({"default_tos": "high"}, "roce_default_tos is 'high'; accepted: auto"),
        ({"wait_seconds": -1}, "roce_wait_seconds is -1; accepted: an integer from 0 to 3600"),
        ({"devices": ["mlx5_0", ""]}, "roce_devices is ['mlx5_0', '']; accepted: a list of RDMA device names"),
    ],
)
def test_bad_settings_are_refused_naming_value_variable_and_accepted(overrides, message):
    errors = run(settings(**overrides))["errors"]
    assert any(error.startswith(message) for error in errors), errors


def test_explicit_traffic_class_and_tos_and_their_warnings():
    plan = run(settings(traffic_class=106, default_tos="none", version="none"))
    assert (plan["traffic_class"], plan["default_tos"], plan["roce_version"]) == (106, None, "")
    assert plan["warnings"] == [
        "roce_traffic_class 106 differs from the catalog's NCCL_IB_TC 41; the driver's global traffic class "
        "overrides the value NCCL asks for on every QP"
    ]
    values = settings()
    values["catalog"] = dict(values["catalog"], env=dict(values["catalog"]["env"], NCCL_IB_FIFO_TC="84"))
    assert any("NCCL_IB_FIFO_TC 84" in warning for warning in run(values)["warnings"])


def test_bad_catalog_values_are_errors():
    values = settings()
    values["catalog"] = dict(values["catalog"], env={"NCCL_IB_TC": "4l", "NCCL_IB_GID_INDEX": "x"})
    errors = run(values)["errors"]
    assert "the catalog's NCCL_IB_TC is '4l'; accepted: an integer from 0 to 255" in errors
    assert "the catalog's NCCL_IB_GID_INDEX is 'x'; accepted: an integer from 0 to 255" in errors


def test_gid_index_minus_one_lets_nccl_choose():
    values = settings()
    values["catalog"] = dict(values["catalog"], env=dict(values["catalog"]["env"], NCCL_IB_GID_INDEX="-1"))
    assert run(values)["gid_index"] is None


@pytest.mark.parametrize(
    ("family", "tool"), [("Debian", "apt install mlnx-tools"), ("RedHat", "dnf install mlnx-tools")]
)
def test_the_package_named_for_mlnx_qos_follows_the_os_family(family, tool):
    assert tool in run(settings(os_family=family))["qos_tool_package"]


# ---------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "include", "exclude"),
    [
        ("mlx5", ["mlx5*"], []),
        ("", ["*"], []),
        ("=mlx5_0,mlx5_1", ["mlx5_0", "mlx5_1"], []),
        ("mlx5_0:1,mlx5_1:1", ["mlx5_0*", "mlx5_1*"], []),
        ("^mlx5_2", ["*"], ["mlx5_2*"]),
        ("^=mlx5_2,mlx5_11", ["*"], ["mlx5_2", "mlx5_11"]),
    ],
)
def test_nccl_ib_hca_becomes_device_patterns(value, include, exclude):
    assert roce.hca_patterns(value) == (include, exclude)


def test_device_patterns_prefer_the_explicit_list_then_the_catalog_names():
    plan = catalog_plan(OCI)
    assert roce.device_patterns(["mlx5_3"], plan) == (["mlx5_3"], [], "roce_devices")
    named = dict(plan, nics={"gpu": {"rdma_devices": ["mlx5_0", "mlx5_1"]}})
    assert roce.device_patterns([], named) == (["mlx5_0", "mlx5_1"], [], "the catalog's nics.gpu.rdma_devices")
    assert roce.device_patterns([], plan) == (OCI_RAILS, [], "the catalog's nics.gpu.rdma_devices")
    unnamed = dict(plan, nics={"gpu": {}})
    assert roce.device_patterns([], unnamed) == (OCI_RAILS, [], "the catalog's NCCL_IB_HCA")  # '=' names exactly
    prefix = dict(unnamed, env={**plan["env"], "NCCL_IB_HCA": "mlx5"})
    assert roce.device_patterns([], prefix) == (["mlx5*"], [], "the catalog's NCCL_IB_HCA")
    assert run(settings(devices=["mlx5_0", "mlx5_1"]))["expect_devices"] == 2
    assert run(settings(devices=["mlx5_*"]))["expect_devices"] == 16


def test_select_devices_on_the_simulated_oci_host(oci_facts):
    devices = roce.select_devices(oci_facts, ["mlx5*"], [], ["eth0"])
    assert len(devices) == 16
    assert all(device["netdev"] for device in devices)
    exact = roce.select_devices(oci_facts, ["mlx5_0", "mlx5_1"], [], [])
    assert [device["name"] for device in exact] == ["mlx5_0", "mlx5_1"]
    assert len(roce.select_devices(oci_facts, ["*"], ["mlx5_1*"], [])) == 16 - 8  # mlx5_1, mlx5_10, mlx5_12 .. mlx5_17
    netdev = exact[0]["netdev"]
    assert [d["name"] for d in roce.select_devices(oci_facts, ["mlx5_0"], [], [netdev])] == []


def test_infiniband_devices_are_never_selected(tmp_path):
    write_tree(CATALOG.get("baremetal/hgx-h100-ib-ndr"), tmp_path / "ib")
    assert roce.select_devices(hw_facts.gather(str(tmp_path / "ib")), ["*"], [], []) == []


# ---------------------------------------------------------------------------
# GID table
# ---------------------------------------------------------------------------


def test_gid_index_three_is_roce_v2_on_ipv4_on_every_simulated_port(oci_facts):
    devices = roce.select_devices(oci_facts, ["mlx5*"], [], [])
    assert roce.gid_errors(devices, 3, True) == []
    assert roce.gid_errors(devices, None, True) == []


def test_an_empty_gid_index_names_device_index_and_table(oci_facts):
    (device,) = roce.select_devices(oci_facts, ["mlx5_0"], [], [])
    netdev = device["netdev"]
    (error,) = roce.gid_errors([device], 5, True)
    assert error == (
        "mlx5_0 port 1: GID index 5 is empty; NCCL_IB_GID_INDEX=5 needs a RoCE v2 GID on an IPv4 address there. "
        f"The table has: 0 fe80::200:ff:fe00:1 (IB/RoCE v1, {netdev}); 1 fe80::200:ff:fe00:1 (RoCE v2, {netdev}); "
        f"2 ::ffff:10.0.0.1 (IB/RoCE v1, {netdev}); 3 ::ffff:10.0.0.1 (RoCE v2, {netdev})"
    )


def test_a_roce_v1_or_link_local_gid_is_refused(oci_facts):
    devices = roce.select_devices(oci_facts, ["mlx5_0"], [], [])
    (v1,) = roce.gid_errors(devices, 2, True)
    assert v1.startswith("mlx5_0 port 1: GID index 2 is IB/RoCE v1 (::ffff:10.0.0.1); NCCL_IB_GID_INDEX=2 needs")
    (link_local,) = roce.gid_errors(devices, 1, True)
    assert "GID index 1 is RoCE v2 on fe80::200:ff:fe00:1, not an IPv4 address" in link_local
    assert roce.gid_errors(devices, 1, False) == []


def test_without_an_index_any_roce_v2_ipv4_gid_will_do():
    ports = [{"port": 1, "gids": [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2"}]}]
    device = {"name": "mlx5_4", "netdev": "rdma2", "ports": ports}
    (error, unaddressed) = roce.gid_errors([device], None, True)
    assert error == (
        "mlx5_4 port 1 has no RoCE v2 GID on an IPv4 address for NCCL to pick; the table has: 0 fe80::1 (RoCE v2)"
    )
    assert unaddressed.startswith("no IPv4 address on rdma2 (mlx5_4): a RoCE v2 GID on IPv4 exists only once")
    assert roce.gid_errors([device], None, False) == []
    assert roce.gid_errors([{"name": "mlx5_5", "ports": [{"port": 1, "gids": []}]}], 3, True) == [
        "mlx5_5 port 1: GID index 3 is empty; NCCL_IB_GID_INDEX=3 needs a RoCE v2 GID on an IPv4 address there. "
        "The table has: no valid GID",
        "no IPv4 address on no interface (mlx5_5): a RoCE v2 GID on IPv4 exists only once the interface has one, "
        "so configure their addresses first",
    ]


def test_rails_without_an_ipv4_address_are_named_with_what_addresses_them_on_oci(oci_facts):
    """A Canonical image on OCI: no Oracle RDMA setup, so the rails have only their link-local GIDs (0 and 1)."""
    devices = roce.select_devices(oci_facts, ["mlx5_0", "mlx5_1", "mlx5_3"], [], [])
    for device in devices[1:]:
        for port in device["ports"]:
            port["gids"] = [gid for gid in port["gids"] if not roce.is_ipv4_mapped(gid["gid"])]
    plan = run(settings())
    assert "oci-rdma-configure" in plan["address_setup"]
    errors = roce.gid_errors(devices, plan["gid_index"], True, plan["address_setup"])
    assert [error.split(":")[0] for error in errors[:-1]] == ["mlx5_1 port 1", "mlx5_3 port 1"]
    assert errors[-1] == (
        f"no IPv4 address on {devices[1]['netdev']} (mlx5_1), {devices[2]['netdev']} (mlx5_3): a RoCE v2 GID on IPv4 "
        f"exists only once the interface has one, so configure their addresses first; {roce.ADDRESS_SETUP['oci']}"
    )
    assert run(settings("baremetal/hgx-h100-roce-400g"))["address_setup"] == ""


def test_gid_text():
    assert roce.gid_text("0000:0000:0000:0000:0000:ffff:c0a8:0a01") == "::ffff:192.168.10.1"
    assert roce.gid_text("fe80:0000:0000:0000:0200:00ff:fe00:0001") == "fe80::200:ff:fe00:1"
    assert roce.gid_text("not-a-gid") == "not-a-gid"
    assert roce.is_ipv4_mapped("0000:0000:0000:0000:0000:FFFF:0A00:0001")
    assert not roce.is_ipv4_mapped("fe80:0000:0000:0000:0200:00ff:fe00:0001")


# ---------------------------------------------------------------------------
# Read-back
# ---------------------------------------------------------------------------

DEVICES = [{"name": "mlx5_0", "netdev": "ens1np0"}, {"name": "mlx5_1", "netdev": "ens2np0"}]


def test_expected_files_cover_ecn_per_priority_and_the_traffic_class():
    plan = {"traffic_class": 41, "ecn": [0, 5]}
    expected = roce.expected_files(DEVICES, plan, "/tmp/sim/")
    assert len(expected) == 2 * (1 + 2 * 8)
    assert expected["/tmp/sim/sys/class/infiniband/mlx5_1/tc/1/traffic_class"] == "41"
    assert expected["/tmp/sim/sys/class/net/ens1np0/ecn/roce_rp/enable/5"] == "1"
    assert expected["/tmp/sim/sys/class/net/ens1np0/ecn/roce_np/enable/3"] == "0"
    assert set(roce.expected_files(DEVICES, plan, "/")) == {path.removeprefix("/tmp/sim") for path in expected}
    assert roce.expected_files(DEVICES, {"traffic_class": None, "ecn": []}) == {}


def test_readback_matches_and_names_each_mismatch():
    expected = roce.expected_files(DEVICES, {"traffic_class": 41, "ecn": [0]})
    good = [
        f"{path}\t{'Global tclass=41' if path.endswith('traffic_class') else value}" for path, value in expected.items()
    ]
    assert roce.readback_errors(good, expected) == []
    bad = [
        line.replace("\t1", "\t0") if "ens2np0/ecn/roce_np/enable/0" in line else line
        for line in good
        if "mlx5_0/tc" not in line
    ]
    bad.append("/sys/class/infiniband/mlx5_0/tc/1/traffic_class\tGlobal tclass=106")
    assert roce.readback_errors(bad, expected) == [
        "mlx5_0: traffic class reads 'Global tclass=106'; expected 41",
        "ens2np0 ECN roce_np priority 0: /sys/class/net/ens2np0/ecn/roce_np/enable/0 reads '0'; expected 1",
    ]


def test_readback_skips_a_missing_traffic_class_but_not_missing_ecn():
    expected = roce.expected_files(DEVICES[:1], {"traffic_class": 41, "ecn": [0]})
    lines = [f"{path}\t<absent>" for path in expected]
    errors = roce.readback_errors(lines, expected)
    assert len(errors) == 16
    assert errors[0] == (
        "ens1np0 ECN roce_np priority 0: /sys/class/net/ens1np0/ecn/roce_np/enable/0 does not exist "
        "(ECN needs the MLNX_OFED/DOCA mlx5 driver); expected 1"
    )
    empty = [f"{path}\t" for path in expected]
    assert "mlx5_0: traffic class reads ''; expected 41" in roce.readback_errors(empty, expected)


@pytest.mark.parametrize(
    ("text", "value"), [("Global tclass=106\n", 106), ("41", 41), ("", None), ("Global tclass=", None)]
)
def test_parse_traffic_class(text, value):
    assert roce.parse_traffic_class(text) == value


def test_the_default_routes_interface_is_never_configured_whatever_the_patterns():
    """OCI bare metal's primary VNIC is a front-end ConnectX port on the rails' driver (mlx5_2 beside BM.GPU.H100.8's
    rails): roce_devices mlx5_* would take it, but the default route's interface is the management NIC's."""
    port = {"port": 1, "link_layer": "Ethernet"}
    hardware = {
        "nics": [{"name": "rdma0"}, {"name": "enp45s0f0np0"}],
        "default_routes": ["enp45s0f0np0"],
        "rdma_devices": [
            {"name": "mlx5_0", "netdev": "rdma0", "ports": [port]},
            {"name": "mlx5_2", "netdev": "enp45s0f0np0", "ports": [port]},
        ],
    }
    selected = roce.select_devices(hardware, ["mlx5_*"], [], [])
    assert [device["name"] for device in selected] == ["mlx5_0"]
    # The plan takes the management NIC's names from the host's plan (fabric_nics), not from ansible facts.
    values = settings()
    role_vars = {key: value for key, value in values.items() if key not in ("catalog", "os_family")}
    named = {
        **values["catalog"],
        "nics": {**values["catalog"]["nics"], "management": {"kind": "vnic", "interfaces": ["eth0"]}},
    }
    assert roce.plan(role_vars, named, {"os_family": "Debian"})["exclude_netdevs"] == ["eth0"]


@pytest.mark.parametrize("profile", ["oci/BM.GPU.H200.8", "oci/BM.GPU.B200.8"])
def test_ocis_hgx_h200_and_b200_take_oracles_eight_rails_and_gid_index_3(profile):
    """oci-hpc's nccl.conf templates h200 and b200: the same 8 rails, NCCL_IB_GID_INDEX=3, NCCL_IB_TC=41."""
    values = settings(profile)
    plan = run(values)
    rails = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert plan["errors"] == []
    assert (plan["include"], plan["expect_devices"], plan["gid_index"], plan["catalog_tc"]) == (rails, 8, 3, 41)
    assert values["catalog"]["env"]["NCCL_IB_HCA"] == "=" + ",".join(rails)
