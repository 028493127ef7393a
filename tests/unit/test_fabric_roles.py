# SPDX-License-Identifier: Apache-2.0
"""Every catalog profile's best tier names its fabric's role, that role exists, and site.yml feeds it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufabric.collection import plugin_utils

fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

REPO = Path(__file__).resolve().parents[2]
FABRIC_ROLE = {
    "tcpx": "gcp_tcpx",
    "tcpxo": "gcp_tcpxo",
    "gpudirect_rdma": "gcp_gpudirect_rdma",
    "infiniband": "infiniband",
    "efa": "aws_efa",
    "roce": "roce",
}
# What every fabric role takes from site.yml, so one playbook drives all of them the same way. The catalog's data
# (profile, tier, env, NICs) is not among them: it comes in gpufabric_plan, resolved once per host.
SITE_INPUTS = ("bake", "hw_root", "hardware_check")
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml"))
CATALOG = fabric_catalog.load_catalog()
PROFILES = sorted(CATALOG.profiles)


@pytest.mark.parametrize("name", PROFILES)
def test_best_tier_reads_the_hardware_first_then_runs_its_fabric_role(name):
    plan = fabric_plan.plan_host({"gpufabric_profile": name}, CATALOG)
    role = FABRIC_ROLE[plan["fabric"]]
    assert plan["roles"][0] == "fabric_facts", "nothing may be installed before the hardware was read"
    assert role in plan["roles"]
    assert role not in plan["roles_unavailable"], f"{role} is in the catalog but not written"
    # The fabric role comes after the host stack and before the environment that points into it.
    assert plan["roles"].index(role) > plan["roles"].index("nvidia_driver")
    assert plan["roles"].index(role) < plan["roles"].index("nccl_env")


@pytest.mark.parametrize("name", PROFILES)
def test_standard_tier_runs_no_fabric_role(name):
    plan = fabric_plan.plan_host({"gpufabric_profile": name, "gpufabric_tier": "standard"}, CATALOG)
    assert not set(plan["roles"]) & set(FABRIC_ROLE.values())


@pytest.mark.parametrize("name", [name for name in PROFILES if "sriov" in CATALOG.get(name)])
def test_virtual_functions_are_carved_after_the_fabric_is_up_and_before_the_environment(name):
    plan = fabric_plan.plan_host({"gpufabric_profile": name}, CATALOG)
    roles = plan["roles"]
    assert roles.index(FABRIC_ROLE[plan["fabric"]]) < roles.index("sriov") < roles.index("nccl_env")
    assert plan["sriov"]["vfs"] == plan["sriov"]["vfs_per_nic"] * plan["nics"]["gpu"]["count"]


@pytest.mark.parametrize("role", [*sorted(FABRIC_ROLE.values()), "sriov", "nccl_tests"])
def test_site_playbook_passes_the_fabric_inputs(role):
    site = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text(encoding="utf-8"))
    (include,) = [task for task in site[0]["tasks"] if task.get("ansible.builtin.include_role") and "loop" in task]
    options = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    options = options["argument_specs"]["main"]["options"]
    for name in SITE_INPUTS:
        assert f"{role}_{name}" in include["vars"], f"site.yml does not pass {role}_{name}"
        assert f"{role}_{name}" in options, f"{role} does not declare {role}_{name}"


@pytest.mark.parametrize("role", ROLES)
def test_no_role_resolves_the_catalog_itself_or_defaults_a_profile(role):
    """gpufabric_plan is the contract: only the plan role runs the lookup, and no role has a profile of its own."""
    tasks = "".join(path.read_text(encoding="utf-8") for path in (REPO / "roles" / role / "tasks").glob("*.yml"))
    assert ("gpufabric.cluster.fabric_plan" in tasks) == (role == "plan")
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8")) or {}
    for name in ("profile", "catalog_files", "tier"):
        assert f"{role}_{name}" not in defaults, f"{role}_{name}: the plan (gpufabric_plan) carries it"
    if "gpufabric_plan" in tasks and role != "plan":
        assert "name: gpufabric.cluster.plan" in tasks, f"{role} reads gpufabric_plan but never resolves it"


def test_site_playbook_resolves_the_plan_with_the_plan_role():
    # site.yml and the fast drift check start alike: playbooks/tasks/plan.yml, which includes the plan role.
    for playbook in ("site.yml", "drift_check.yml"):
        plays = yaml.safe_load((REPO / "playbooks" / playbook).read_text(encoding="utf-8"))
        assert plays[0]["tasks"][0]["ansible.builtin.import_tasks"] == "tasks/plan.yml", playbook
    tasks = yaml.safe_load((REPO / "playbooks" / "tasks" / "plan.yml").read_text(encoding="utf-8"))
    (resolve,) = [task for task in tasks if "plan" in task["name"] and "Resolve" in task["name"]]
    assert resolve["ansible.builtin.include_role"]["name"] == "gpufabric.cluster.plan"
