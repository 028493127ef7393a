# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan` shows each host's SR-IOV virtual function layout (JSON and table); the plan, k8s manifests and
the sriov role check the SR-IOV host vars with one check; host vars of the wrong type; impossible IP ranges."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from gpufabric import k8s
from gpufabric.collection import module_utils, plugin_utils
from gpufabric.plan import render, sriov_rows
from gpufabric.simulated_hw import write_tree
from gpufabric.supply import unknown_os

sriov_role = module_utils("sriov_role")
fabric_plan = plugin_utils("fabric_plan")
hw_facts = module_utils("hw_facts")
catalog = plugin_utils("fabric_catalog").load_catalog()

LAB = "inventories/sriov-lab"
SRIOV_PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
ROLE_DEFAULTS = Path(__file__).resolve().parents[2] / "roles" / "sriov" / "defaults" / "main.yml"


def _role_settings() -> dict[str, Any]:
    """The role's defaults as its filter gets them (no sriov_ prefix)."""
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text(encoding="utf-8"))
    return {name.removeprefix("sriov_"): value for name, value in defaults.items()}


def test_plan_json_carries_the_vf_layout(gpufabric):
    result = gpufabric("plan", "-i", LAB, "--json")
    assert result.returncode == 0, result.stderr
    hosts = json.loads(result.stdout)["hosts"]
    assert sorted(hosts) == ["hgx-sriov-0", "hgx-sriov-1"]
    for plan in hosts.values():
        assert plan["profile"] == "baremetal/hgx-h100-ib-ndr-sriov"
        assert "sriov" in plan["roles"]
        assert plan["sriov"] == {
            "vfs_per_nic": 8,
            "nics": 8,
            "vfs": 64,
            "link_type": "infiniband",
            "physical_functions": [],
            "address_scheme": "derived",
        }


def test_plan_table_shows_the_vf_layout(gpufabric):
    result = gpufabric("plan", "-i", LAB)
    assert result.returncode == 0, result.stderr
    assert "SR-IOV virtual functions" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ hgx-sriov-")]
    vf_rows = [row for row in rows if "infiniband" in row and "derived" in row]
    assert len(vf_rows) == 2
    cells = [cell.strip() for cell in vf_rows[0].strip("│").split("│")]
    assert cells == ["hgx-sriov-0", "8 GPU-network NICs (by PCI id)", "8", "64", "infiniband", "derived"]


def test_standard_tier_and_other_fleets_show_no_vf_table(gpufabric):
    standard = gpufabric("plan", "-i", LAB, "--tier", "standard")
    assert standard.returncode == 0, standard.stderr
    assert "SR-IOV virtual functions" not in standard.stdout
    assert all(
        plan["sriov"] is None
        for plan in json.loads(gpufabric("plan", "-i", LAB, "--tier", "standard", "--json").stdout)["hosts"].values()
    )
    sample = gpufabric("plan", "-i", "inventories/sample")
    assert "SR-IOV virtual functions" not in sample.stdout


def _host(sriov):
    return {
        "profile": "p/x",
        "fabric": "infiniband",
        "tier": "best",
        "roles": ["sriov"],
        "roles_unavailable": [],
        "env": {},
        "sriov": sriov,
        "warnings": [],
        "resolved_by": "host var gpufabric_profile",
        "supply": unknown_os("set host variable gpufabric_os or gpufabric_image, or run with --probe"),
    }


def test_named_physical_functions_are_listed():
    layout = {
        "vfs_per_nic": 4,
        "nics": 2,
        "vfs": 8,
        "link_type": "ethernet",
        "physical_functions": ["ens1", "ens2"],
        "address_scheme": "explicit",
    }
    plan = {"hosts": {"a": _host(layout), "b": _host(None)}}
    assert sriov_rows(plan) == [("a", "ens1, ens2", "4", "8", "ethernet", "explicit")]
    console = Console(record=True, width=200)
    render(plan, console)
    text = console.export_text()
    assert "SR-IOV virtual functions" in text
    assert "ens1, ens2" in text


def test_no_vf_table_without_layouts():
    console = Console(record=True, width=200)
    render({"hosts": {"b": _host(None)}}, console)
    assert "SR-IOV" not in console.export_text()


# --- one check of the SR-IOV host vars for the role, plan and k8s manifests -------------------------------------

BAD_SRIOV_VARS = [
    ("num_vfs", "abc", "sriov_num_vfs 'abc' is not a VF count; accepted: an integer >= 0"),
    ("num_vfs", -1, "sriov_num_vfs -1 is not a VF count"),
    ("num_vfs", 2.5, "sriov_num_vfs 2.5 is not a VF count"),
    ("num_vfs", True, "sriov_num_vfs True is not a VF count"),
    ("physical_functions", 3, "sriov_physical_functions 3 is not a list of names"),
    ("physical_functions", {"a": 1}, "sriov_physical_functions {'a': 1} is not a list of names"),
    ("physical_functions", ["ibp23s0", 7], "sriov_physical_functions ['ibp23s0', 7] is not a list of names"),
    ("address_scheme", "random", "sriov_address_scheme 'random' is not a scheme; accepted: derived, explicit, kernel"),
    ("address_scheme", ["derived"], "sriov_address_scheme ['derived'] is not a scheme"),
]


@pytest.mark.parametrize(("key", "value", "error"), BAD_SRIOV_VARS)
def test_role_and_plan_refuse_the_same_sriov_vars(tmp_path, key, value, error):
    """The role's filter and the plan (so k8s manifests too) give the very same sentence for a bad value."""
    catalog_plan = fabric_plan.plan_host({"gpufabric_profile": SRIOV_PROFILE}, catalog)
    root = tmp_path / "tree"
    write_tree(catalog.get(SRIOV_PROFILE), root)
    settings = _role_settings()
    role = sriov_role.plan({**settings, key: value}, catalog_plan, {"gpufabric_hardware": hw_facts.gather(str(root))})
    assert any(message.startswith(error) for message in role["errors"]), role["errors"]
    with pytest.raises(fabric_plan.PlanError, match=re.escape(f"host var {error}")):
        fabric_plan.plan_host({"gpufabric_profile": SRIOV_PROFILE, f"sriov_{key}": value}, catalog)


def test_a_string_names_one_physical_function(tmp_path):
    plan = fabric_plan.plan_host({"gpufabric_profile": SRIOV_PROFILE, "sriov_physical_functions": "ibp23s0"}, catalog)
    assert (plan["sriov"]["physical_functions"], plan["sriov"]["nics"], plan["sriov"]["vfs"]) == (["ibp23s0"], 1, 8)
    root = tmp_path / "tree"
    write_tree(catalog.get(SRIOV_PROFILE), root)
    settings = _role_settings()
    facts = {"gpufabric_hardware": hw_facts.gather(str(root))}
    role = sriov_role.plan({**settings, "physical_functions": "ibp23s0"}, plan, facts)
    assert role["errors"] == []
    assert [pf["netdev"] for pf in role["pfs"]] == ["ibp23s0"]


@pytest.mark.parametrize(
    ("variables", "error"),
    [
        ({"gpufabric_profile": [SRIOV_PROFILE]}, "host var gpufabric_profile ['baremetal/"),
        ({"gpufabric_profile": {"a": 1}}, "host var gpufabric_profile {'a': 1} is a mapping, not text"),
        ({"gpufabric_tier": 3}, "host var gpufabric_tier 3 is a number, not text; accepted: one of best, standard"),
        ({"gpufabric_cloud": True}, "host var gpufabric_cloud True is a boolean, not text"),
        ({"gpufabric_instance_type": ["p5"]}, "host var gpufabric_instance_type ['p5'] is a list"),
    ],
)
def test_host_vars_of_the_wrong_type_are_refused(variables, error):
    with pytest.raises(fabric_plan.PlanError, match=re.escape(error)):
        fabric_plan.plan_host({"gpufabric_cloud": "baremetal", **variables}, catalog)


def test_null_tier_is_the_default_and_empty_is_refused():
    assert (
        fabric_plan.plan_host({"gpufabric_profile": SRIOV_PROFILE, "gpufabric_tier": None}, catalog)["tier"] == "best"
    )
    with pytest.raises(fabric_plan.PlanError, match="unknown tier ''"):
        fabric_plan.plan_host({"gpufabric_profile": SRIOV_PROFILE, "gpufabric_tier": ""}, catalog)


def _network(profile: str, ranges: list[str], vfs: int) -> k8s.ProfileNetwork:
    rails = [k8s.Rail(f"r{n}", f"{profile}-rail{n}", None, subnet, vfs) for n, subnet in enumerate(ranges)]
    return k8s.ProfileNetwork(profile, profile, "t", "infiniband", ["h"], len(rails), 8, ["101e"], 8, rails)


def test_range_warnings_count_a_shared_pool_and_overlaps():
    options = k8s.Options(ipam_range="10.0.0.0/24")
    # The same range in two profiles is one whereabouts pool: 200 + 100 VFs for 254 addresses.
    shared = k8s.range_warnings([_network("a", ["10.0.0.0/24"], 200), _network("b", ["10.0.0.0/24"], 100)], options)
    assert shared == [
        "--ipam-range gives a-rail0, b-rail0 the range 10.0.0.0/24: 254 addresses for 300 VFs; give a larger range"
    ]
    # Rails of two profiles split differently overlap without being the same pool.
    split = k8s.range_warnings(
        [_network("a", ["10.0.0.0/25"], 1), _network("b", ["10.0.0.0/26", "10.0.0.64/26"], 1)], options
    )
    assert [warning.split(":")[0] for warning in split] == [
        "10.0.0.0/25 (a-rail0) overlaps 10.0.0.0/26 (b-rail0)",
        "10.0.0.0/25 (a-rail0) overlaps 10.0.0.64/26 (b-rail1)",
    ]
    assert k8s.range_warnings([_network("a", ["10.0.0.0/24"], 254)], options) == []
