# SPDX-License-Identifier: Apache-2.0
"""Plan resolution: profile by name or by cloud + instance type, tiers, unknown hosts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest

from gpufabric.collection import plugin_utils

fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def catalog():
    return fabric_catalog.load_catalog()


ALL_ROLES = set(fabric_catalog.KNOWN_ROLES)


def test_profile_by_cloud_and_instance_type(catalog):
    plan = fabric_plan.plan_host(
        {"gpufabric_cloud": "gcp", "gpufabric_instance_type": "a3-megagpu-8g"}, catalog, roles_present=ALL_ROLES
    )
    assert plan["profile"] == "gcp/a3-megagpu-8g"
    assert plan["fabric"] == "tcpxo"
    assert plan["tier"] == "best"
    assert plan["env"] == catalog.get("gcp/a3-megagpu-8g")["tiers"]["best"]["env"]
    assert plan["roles_unavailable"] == []
    assert plan["warnings"] == []
    assert plan["gpus"] == {"model": "H100-SXM-80GB", "count": 8, "nvswitch": True}


def test_the_plan_carries_the_hardware_and_the_tiers_bandwidth_so_no_role_reads_the_catalog(catalog):
    name = "baremetal/hgx-h100-ib-ndr-sriov"
    profile = catalog.get(name)
    best = fabric_plan.plan_host({"gpufabric_profile": name}, catalog)
    assert best["hardware"] == {key: profile[key] for key in ("fabric", "gpu", "nics", "sriov")}
    assert best["bandwidth"] == profile["bandwidth"] and best["bandwidth"]["thresholds"]
    # A copy: a role's change to its plan never reaches the catalog.
    best["hardware"]["gpu"]["count"] = 0
    assert catalog.get(name)["gpu"]["count"] == 8
    # The catalog's thresholds measure the fabric (tier best); a baseline tier is judged without them.
    standard = fabric_plan.plan_host({"gpufabric_profile": name}, catalog, tier="standard")
    assert standard["bandwidth"] == {**profile["bandwidth"], "thresholds": []}
    assert "sriov" not in fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog)["hardware"]


def test_the_plan_carries_the_profiles_host_tuning_where_its_tier_runs_the_role(catalog):
    name = "baremetal/gb200-nvl72-ib-ndr"
    best = fabric_plan.plan_host({"gpufabric_profile": name}, catalog)
    assert best["host_tuning"] == catalog.get(name)["host_tuning"]
    assert best["host_tuning"]["irqbalance"] == "disabled" and "acs" not in best["host_tuning"]
    # The standard tier does not run host_tuning; a cloud VM has no section at all.
    assert fabric_plan.plan_host({"gpufabric_profile": name}, catalog, tier="standard")["host_tuning"] is None
    assert fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog)["host_tuning"] is None


def test_explicit_profile_wins_over_cloud_and_type(catalog):
    hostvars = {
        "gpufabric_profile": "baremetal/hgx-h100-ib-ndr",
        "gpufabric_cloud": "aws",
        "gpufabric_instance_type": "p5.48xlarge",
    }
    assert fabric_plan.plan_host(hostvars, catalog)["profile"] == "baremetal/hgx-h100-ib-ndr"


def test_tier_from_host_var_and_command_line_wins(catalog):
    hostvars = {"gpufabric_profile": "aws/p5.48xlarge", "gpufabric_tier": "standard"}
    assert fabric_plan.plan_host(hostvars, catalog)["tier"] == "standard"
    assert fabric_plan.plan_host(hostvars, catalog, tier="best")["tier"] == "best"


@pytest.mark.parametrize(
    ("hostvars", "tier", "message"),
    [
        ({"gpufabric_tier": "gold"}, None, "unknown tier 'gold' (host var gpufabric_tier); accepted: best, standard"),
        ({}, "fast", "unknown tier 'fast' (--tier); accepted: best, standard"),
    ],
)
def test_unknown_tier_is_an_error(catalog, hostvars, tier, message):
    with pytest.raises(fabric_plan.PlanError) as caught:
        fabric_plan.plan_host(hostvars, catalog, tier=tier)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("hostvars", "warning"),
    [
        ({"gpufabric_cloud": "gcp", "gpufabric_instance_type": "n2-standard-8"}, "no catalog profile for gcp"),
        ({"gpufabric_profile": "gcp/a9-hyper"}, "'gcp/a9-hyper' from host var gpufabric_profile is not in"),
        ({}, "neither gpufabric_profile nor"),
    ],
)
def test_unknown_host_is_shown_as_unknown_with_a_warning(catalog, hostvars, warning):
    plan = fabric_plan.plan_host(hostvars, catalog)
    assert plan["profile"] == "unknown"
    assert plan["roles"] == []
    assert warning in plan["warnings"][0]
    assert "apply and drift leave this host alone and report it NOT MANAGED" in plan["warnings"][0]
    assert plan["unmanaged"] == {"code": "unknown_profile" if hostvars else "no_profile", "reason": ANY}
    assert plan["unmanaged"]["reason"] in plan["warnings"][0]
    assert (plan["hardware"], plan["bandwidth"]) == ({}, {})


@pytest.mark.parametrize("flag", [False, "false", "no"])
def test_a_host_excluded_on_purpose_keeps_its_profile_and_says_why(catalog, flag):
    plan = fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge", "gpufabric_managed": flag}, catalog)
    assert plan["profile"] == "aws/p5.48xlarge"
    assert plan["unmanaged"]["code"] == "excluded"
    assert "gpufabric_managed: false" in plan["warnings"][0]


def test_a_managed_host_has_no_verdict_and_a_bad_flag_is_refused(catalog):
    assert fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog)["unmanaged"] is None
    with pytest.raises(fabric_plan.PlanError, match=r"gpufabric_managed is 'maybe'; accepted: true or false"):
        fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge", "gpufabric_managed": "maybe"}, catalog)


def test_roles_not_written_yet_are_reported(catalog):
    plan = fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog, roles_present={"nccl_env"})
    assert "nccl_env" in plan["roles"]
    assert "nccl_env" not in plan["roles_unavailable"]
    assert "aws_efa" in plan["roles_unavailable"]
    assert "not written yet" in plan["warnings"][0]


def test_available_roles_reads_the_collection(repo):
    assert "nccl_env" in fabric_plan.available_roles()
    assert repo / "roles" == fabric_plan.ROLES_DIR


def test_the_vf_layout_follows_the_sriov_role_variables_of_the_host():
    catalog = fabric_catalog.load_catalog()
    name = "baremetal/hgx-h100-ib-ndr-sriov"
    default = fabric_plan.plan_host({"gpufabric_profile": name}, catalog)["sriov"]
    assert (default["vfs_per_nic"], default["vfs"], default["address_scheme"]) == (8, 64, "derived")
    hostvars = {
        "gpufabric_profile": name,
        "sriov_num_vfs": 4,
        "sriov_physical_functions": ["ibp12s0", "ibp13s0"],
        "sriov_address_scheme": "explicit",
    }
    chosen = fabric_plan.plan_host(hostvars, catalog)["sriov"]
    assert chosen == {
        "vfs_per_nic": 4,
        "nics": 2,
        "vfs": 8,
        "link_type": "infiniband",
        "physical_functions": ["ibp12s0", "ibp13s0"],
        "address_scheme": "explicit",
    }
    assert fabric_plan.plan_host({"gpufabric_profile": name, "gpufabric_tier": "standard"}, catalog)["sriov"] is None


def lookup_plan(ansible_env, **options: object) -> subprocess.CompletedProcess[str]:
    """The fabric_plan lookup as the role plan runs it, on the controller (localhost)."""
    arguments = ", ".join(f"{name}={value!r}" for name, value in options.items())
    return subprocess.run(
        [
            str(BIN / "ansible"),
            "localhost",
            "-m",
            "ansible.builtin.debug",
            "-a",
            f"msg={{{{ lookup('gpufabric.cluster.fabric_plan', {arguments}) | to_json }}}}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )


def test_the_lookup_gives_an_unknown_host_the_opted_in_profile_or_refuses_it(ansible_env):
    opted_in = lookup_plan(
        ansible_env, cloud="gcp", instance_type="n2-standard-8", unknown_hosts_profile="oci/BM.GPU.H100.8"
    )
    assert opted_in.returncode == 0, opted_in.stdout + opted_in.stderr
    assert '\\"profile\\": \\"oci/BM.GPU.H100.8\\"' in opted_in.stdout
    refused = lookup_plan(ansible_env, cloud="gcp", instance_type="n2-standard-8", unknown_hosts_profile="gcp/a9-hyper")
    assert refused.returncode != 0
    assert (
        "gpufabric_unknown_hosts_profile 'gcp/a9-hyper' is not in the fabric catalog; "
        "`gpufabric catalog list` shows the accepted names." in refused.stdout
    )


def test_the_lookup_refuses_a_host_without_profile_when_one_is_required(ansible_env):
    result = lookup_plan(ansible_env, profile="gcp/a9-hyper", require_profile=True, host="node-7")
    assert result.returncode != 0
    assert (
        "node-7 has no fabric plan: profile 'gcp/a9-hyper' from host var gpufabric_profile is not in the catalog."
        in result.stdout
    )
