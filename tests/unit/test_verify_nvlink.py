# SPDX-License-Identifier: Apache-2.0
"""`gpufabric verify --nvlink`: the hosts of a run within one NVLink domain and of a run across domains, the
refusals, the playbook's extra variables, and the report judging each scope by its own thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufabric import report, verify
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

domains = plugin_utils("nvlink_domains")
fabric_catalog = plugin_utils("fabric_catalog")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
PROFILE = "azure/Standard_ND128isr_NDR_GB200_v6"


def grouped(sizes: dict[str, int]) -> dict:
    return {
        name: {"members": [f"{name}-{index:02d}" for index in range(size)], "profiles": [PROFILE]}
        for name, size in sizes.items()
    }


def test_within_takes_the_largest_domain_and_across_one_host_of_each():
    fleet = grouped({"rack-b": 3, "rack-a": 18, "rack-c": 18})
    assert domains.scope_hosts(fleet, "within") == [f"rack-a-{index:02d}" for index in range(18)]
    assert domains.scope_hosts(fleet, "within", nodes=2) == ["rack-a-00", "rack-a-01"]
    assert domains.scope_hosts(fleet, "across") == ["rack-a-00", "rack-b-00", "rack-c-00"]
    assert domains.scope_hosts(fleet, "across", nodes=2) == ["rack-a-00", "rack-b-00"]


@pytest.mark.parametrize(
    ("fleet", "scope", "nodes", "message"),
    [
        ({}, "within", None, "--nvlink within: no host of the inventory is in an NVLink domain"),
        (grouped({"rack-a": 18}), "across", None, "needs two hosts or more, and the inventory has 1 NVLink domain(s)"),
        (grouped({"rack-a": 1, "rack-b": 1}), "within", None, "needs two hosts or more, and domain rack-a has 1"),
        (grouped({"rack-a": 18}), "within", 1, "domain rack-a has 18 host(s) (--nodes 1)"),
        (grouped({"rack-a": 18}), "around", None, "--nvlink 'around' is not a scope; accepted: within, across"),
    ],
)
def test_a_fleet_that_cannot_hold_the_run_is_refused_naming_why(fleet, scope, nodes, message):
    with pytest.raises(ValueError) as error:
        domains.scope_hosts(fleet, scope, nodes)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("value", "scopes"), [("within", ["within"]), ("across,within", ["within", "across"]), (None, [])]
)
def test_the_option_takes_either_scope_or_both(value, scopes):
    assert verify.parse_nvlink(value) == scopes


@pytest.mark.parametrize("value", ["", "within,within", "both", "within,,around"])
def test_the_option_refuses_anything_else(value):
    with pytest.raises(UserError, match="accepted: within, across or within,across"):
        verify.parse_nvlink(value)


def inventory(tmp_path: Path, racks: dict[str, int], instance_type: str = "Standard_ND128isr_NDR_GB200_v6") -> Path:
    lines = ["all:", "  children:"]
    for rack, size in racks.items():
        lines += [
            f"    {rack.replace('-', '_')}:",
            "      vars:",
            "        gpufabric_cloud: azure",
            f"        gpufabric_instance_type: {instance_type}",
            f"        gpufabric_nvlink_domain: {rack}",
            "      hosts:",
        ]
        lines += [f"        {rack}-{index:02d}: {{}}" for index in range(size)]
    path = tmp_path / "hosts.yml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_runs_come_from_the_inventorys_domains_and_become_extra_variables(tmp_path):
    options = verify.Options(
        inventory=str(inventory(tmp_path, {"rack-a": 4, "rack-b": 2})), nvlink=["within", "across"]
    )
    runs = verify.nvlink_runs(options, ["best"])
    assert runs == [
        ("within", ["rack-a-00", "rack-a-01", "rack-a-02", "rack-a-03"]),
        ("across", ["rack-a-00", "rack-b-00"]),
    ]
    variables = verify.extra_vars(options, "best", tmp_path / "out", "across", runs[1][1])
    assert (
        variables["gpufabric_verify_hosts"] == "rack-a-00,rack-b-00" and variables["gpufabric_verify_scope"] == "across"
    )
    assert "gpufabric_verify_nodes" not in variables


def test_nvlink_runs_tier_best_only_and_one_profile(tmp_path):
    options = verify.Options(inventory=str(inventory(tmp_path, {"rack-a": 2})), nvlink=["within"], compare=True)
    with pytest.raises(UserError, match="give it without --tier or --compare"):
        verify.nvlink_runs(options, ["standard", "best"])
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    path = inventory(mixed, {"rack-a": 2})
    text = path.read_text() + "\n".join(
        ["    gb300:", "      vars:", "        gpufabric_cloud: azure",
         "        gpufabric_instance_type: Standard_ND128isr_GB300_v6", "        gpufabric_nvlink_domain: rack-z",
         "      hosts:", "        gb300-00: {}", "        gb300-01: {}"]
    ) + "\n"  # fmt: skip
    path.write_text(text)
    with pytest.raises(UserError, match="of several profiles"):
        verify.nvlink_runs(verify.Options(inventory=str(path), nvlink=["across"]), ["best"])


def test_a_run_within_a_domain_is_judged_by_the_nvlink_thresholds_and_labelled(tmp_path):
    catalog = fabric_catalog.load_catalog()
    directory = tmp_path / "best-within-domain" / "r1"
    directory.mkdir(parents=True)
    (directory / "all_reduce-2n.txt").write_bytes((FIXTURES / "v2_13_all_reduce_2node.txt").read_bytes())
    record = {"profile": PROFILE, "tier": "best", "scope": "within", "nodes": 2, "collectives": ["all_reduce"]}
    (directory / "run.json").write_text(json.dumps(record))
    built = report.build(tmp_path, catalog)
    (run,) = built["tiers"]["best-within-domain"]["runs"]
    nvlink = catalog.get(PROFILE)["nvlink"]["thresholds"]
    assert run["threshold"] in nvlink and run["threshold"] not in catalog.get(PROFILE)["bandwidth"]["thresholds"]
    record["scope"] = "sideways"
    (directory / "run.json").write_text(json.dumps(record))
    with pytest.raises(UserError, match="'scope' is 'sideways', not one of within, across"):
        report.build(tmp_path, catalog)
