# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan` shows each host's SR-IOV virtual function layout (JSON and table)."""

from __future__ import annotations

import json

from rich.console import Console

from gpufabric.plan import render, sriov_rows

LAB = "inventories/sriov-lab"


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
