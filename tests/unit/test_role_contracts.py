# SPDX-License-Identifier: Apache-2.0
"""House rules every role keeps: argspec and defaults agree, variables carry the role prefix, sibling roles name a
shared concept alike, the verify entry point has one shape, and production defaults hold no test knobs."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric.collection import plugin_utils

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml"))
BIN = Path(sys.executable).parent


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


@pytest.mark.parametrize("role", ROLES)
def test_argspec_and_defaults_agree(role):
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    optional = {name: spec for name, spec in options.items() if not spec.get("required")}
    assert set(defaults) == set(optional), "defaults/main.yml must hold exactly the optional options"
    for name, spec in optional.items():
        assert spec.get("default") == defaults[name], f"{name}: argspec default differs from defaults/main.yml"
    for name, spec in options.items():
        assert name.startswith(f"{role}_"), f"{name} lacks the {role}_ prefix"
        assert spec.get("description"), f"{name} has no description"
        if spec.get("required"):
            assert name not in defaults, f"{name} is required and must not get a default"


# Roles that only read, proven by real ansible-playbook on this machine over SIMULATED trees instead of a molecule
# scenario (CI's time budget): the test file that runs each.
WITHOUT_MOLECULE = {"health": "tests/integration/test_health_role.py"}


@pytest.mark.parametrize("role", ROLES)
def test_role_has_a_molecule_scenario(role):
    if role in WITHOUT_MOLECULE:
        assert (REPO / WITHOUT_MOLECULE[role]).is_file()
        assert not (REPO / "molecule" / role).exists(), f"{role} has a scenario now: drop it from WITHOUT_MOLECULE"
        return
    assert (REPO / "molecule" / role / "molecule.yml").is_file()


def ubuntu_releases(role: str) -> set[str]:
    """The Ubuntu identity images the role's molecule scenarios (molecule/<role> and molecule/<role>_*) run on."""
    scenarios = [REPO / "molecule" / role, *(REPO / "molecule").glob(f"{role}_*")]
    inventories = [path for scenario in scenarios for path in (scenario / "inventory").rglob("*.yml")]
    text = "".join(path.read_text(encoding="utf-8") for path in inventories)
    return set(re.findall(r"gpufabric-ubuntu-identity(?:-[a-z-]+)?:(\d\d\.\d\d)", text))


@pytest.mark.parametrize("role", ROLES)
def test_a_role_tested_on_one_ubuntu_release_reads_the_release_only_in_its_plan(role):
    """The Ubuntu identity images are Debian userlands (12 under 22.04, 13 under 24.04) with Ubuntu's os-release
    (scripts/build-images): a second release in a scenario runs the same tasks with other facts, and Debian's
    binaries either way. Those facts reach a role only through its plan filter (facts=ansible_facts), which the
    unit tests run over both releases' recorded facts (tests/fixtures/os_release). A role that reads the release in
    its tasks, templates or vars runs both releases in molecule; every role but sriov, nccl_tests, plan and gds does
    (docs/testing.md, "Both Ubuntu releases")."""
    if ubuntu_releases(role) >= {"22.04", "24.04"}:
        return
    role_dir = REPO / "roles" / role
    files = [path for part in ("tasks", "templates", "vars", "defaults") for path in (role_dir / part).rglob("*")]
    readers = [
        str(path.relative_to(REPO))
        for path in files
        if path.is_file() and re.search(r"distribution_(release|version|major_version)", path.read_text("utf-8"))
    ]
    assert readers == [], f"{role} reads the release outside its plan; run molecule/{role} on 22.04 and 24.04"


def test_lookup_documentation_renders(ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "lookup", "gpufabric.cluster.fabric_plan"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "catalog_files" in result.stdout


@pytest.mark.parametrize("role", ROLES)
def test_role_documentation_renders(role, ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "role", f"gpufabric.cluster.{role}"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"{role}_" in result.stdout


# ---------------------------------------------------------------- sibling roles speak alike

# One name per concept shared by roles (the suffix after "<role>_"), and the other spellings it once had. No
# role may use another spelling; docs/fabric-roles.md ("Conventions every role keeps") lists the same names.
ONE_NAME = {
    "rxdm_driver_libraries": ("rxdm_nvidia_libraries",),
    "rxdm_driver_lib_dir": ("rxdm_nvidia_lib_dir",),
    "driver_lib_link": ("nvidia_lib_link",),
    "container_run_args": ("podman_run_options", "container_run_options", "run_args"),
    "firewall_extra_interfaces": ("firewall_interfaces", "extra_firewall_interfaces"),
    "repo_key_url": ("key_url",),
    "repo_key_src": ("key_src",),
    "repo_key_checksum": ("key_checksum",),
    "repo_key_fingerprints": ("key_fingerprints",),
    "repo_keyring": ("keyring",),
    "ar_transport_version": ("transport_version",),
    "ar_transport_repo_url": ("transport_repo_url",),
    "ar_transport_repo_suite": ("transport_repo_suite",),
    "ar_transport_key_url": ("transport_key_url",),
    "ar_transport_keyring": ("transport_keyring",),
    "roce_version": ("roce_mode",),
}
SIBLINGS = ("gcp_tcpx", "gcp_tcpxo", "gcp_gpudirect_rdma")


def options(role: str) -> dict:
    return load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("role", ROLES)
def test_shared_concepts_have_one_name(role):
    suffixes = {name.removeprefix(f"{role}_") for name in options(role)}
    for name, others in ONE_NAME.items():
        used = suffixes & set(others)
        assert not used, f"{role} names {sorted(used)} what the roles call {name}"
    # "mode" named a RoCE version in one role and a verify switch in another: no role option is a bare mode.
    assert "mode" not in suffixes, f"{role}_mode: name the option for what it selects"


def test_sibling_roles_give_a_shared_name_one_type():
    types: dict[str, set] = {}
    for role in SIBLINGS:
        for name, spec in options(role).items():
            types.setdefault(name.removeprefix(f"{role}_"), set()).add((spec.get("type"), spec.get("elements")))
    assert {name: found for name, found in types.items() if len(found) > 1} == {}


def test_the_siblings_use_the_shared_names():
    present = {role: {name.removeprefix(f"{role}_") for name in options(role)} for role in SIBLINGS}
    assert {"rxdm_driver_libraries", "rxdm_driver_lib_dir", "container_run_args", "firewall_extra_interfaces"} <= (
        present["gcp_tcpx"] & present["gcp_tcpxo"]
    )
    shared_repo = {"repo_url", "repo_suite", "repo_key_url", "repo_key_fingerprints", "repo_keyring"}
    shared_transport = {"ar_transport_version", "ar_transport_repo_url", "ar_transport_key_url", "ar_transport_keyring"}
    assert shared_repo | shared_transport <= present["gcp_tcpxo"] & present["gcp_gpudirect_rdma"]


# ---------------------------------------------------------------- one verify entry point

# Modules a verify file may call: they read, or they only include the next file.
READ_ONLY = {
    "ansible.builtin.assert",
    "ansible.builtin.debug",
    "ansible.builtin.fail",
    "ansible.builtin.find",
    "ansible.builtin.include_role",
    "ansible.builtin.include_tasks",
    "ansible.builtin.package_facts",
    "ansible.builtin.service_facts",
    "ansible.builtin.set_fact",
    "ansible.builtin.setup",
    "ansible.builtin.slurp",
    "ansible.builtin.stat",
    "ansible.builtin.wait_for",
    "gpufabric.cluster.fabric_facts",
}
TASK_KEYWORDS = {
    "name",
    "when",
    "vars",
    "register",
    "loop",
    "loop_control",
    "changed_when",
    "failed_when",
    "check_mode",
    "until",
    "retries",
    "delay",
    "block",
    "rescue",
    "always",
    "tags",
    "no_log",
    "ignore_errors",
    "environment",
    "become",
    "delegate_to",
    "run_once",
    "notify",
    "listen",
}


def tasks_of(items: list) -> list[dict]:
    out = []
    for task in items or []:
        out.append(task)
        for key in ("block", "rescue", "always"):
            out += tasks_of(task.get(key))
    return out


def module_of(task: dict) -> str:
    (module,) = [key for key in task if key not in TASK_KEYWORDS] or ["block"]
    return module


def verify_roles() -> list[str]:
    return [role for role in ROLES if (REPO / "roles" / role / "tasks" / "verify.yml").is_file()]


@pytest.mark.parametrize("role", ROLES)
def test_verify_has_one_file_name_and_no_mode_switch(role):
    tasks = REPO / "roles" / role / "tasks"
    others = [
        path.name for path in tasks.glob("*.yml") if re.search(r"verify|ready", path.stem) and path.stem != "verify"
    ]
    assert others == [], f"{role}: a read-only check of the host is tasks/verify.yml, not {others}"
    for path in tasks.glob("*.yml"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"==\s*'verify'|_mode\s*==", text), f"{path}: verify is an entry point, not a mode"


@pytest.mark.parametrize("role", verify_roles())
def test_verify_runs_alone_and_only_reads(role):
    tasks = REPO / "roles" / role / "tasks"
    verify = load(tasks / "verify.yml")
    steps = tasks_of(verify)
    if (tasks / "plan.yml").is_file():
        first = tasks_of(verify[0].get("block") or [])[:2] + steps[:1]
        assert any(step.get("ansible.builtin.include_tasks") == "plan.yml" for step in first), (
            f"{role}: verify.yml must plan first (include_tasks: plan.yml) so that tasks_from: verify runs alone"
        )
    for step in steps:
        module = module_of(step)
        if module == "block":
            continue
        if module in ("ansible.builtin.command", "ansible.builtin.shell"):
            assert step.get("changed_when") is False, f"{role} verify: {step.get('name')!r} must be changed_when: false"
        elif module == "ansible.builtin.systemd_service":
            assert set(step[module]) == {"name"}, f"{role} verify: {step.get('name')!r} may only read the unit"
        else:
            assert module in READ_ONLY, f"{role} verify: {step.get('name')!r} calls {module}, which can change the host"


def test_verify_is_reached_only_as_tasks_from_verify():
    files = [*REPO.glob("roles/*/tasks/*.yml"), *REPO.glob("molecule/**/*.yml"), *REPO.glob("playbooks/*.yml")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"^\s*tasks_from:\s*(\S+)", text, re.M):
            if "verify" in target:
                assert target.strip("\"'") == "verify", f"{path}: tasks_from: {target}; the entry point is verify"
        assert not re.search(r"^\s*\w+_mode:\s*verify\b", text, re.M), f"{path}: verify is tasks_from: verify"
        assert not re.search(r"tasks_from:\s*\S*ready", text), f"{path}: readiness is part of tasks_from: verify"


def test_the_verify_roles_are_documented():
    text = (REPO / "docs" / "fabric-roles.md").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.strip().startswith("Roles with a verify entry point:")]
    assert sorted(re.findall(r"`(\w+)`", line)) == verify_roles()


# ---------------------------------------------------------------- production defaults hold no test knobs


@pytest.mark.parametrize("role", ROLES)
def test_production_defaults_do_not_mention_molecule(role):
    for path in (
        REPO / "roles" / role / "defaults" / "main.yml",
        REPO / "roles" / role / "meta" / "argument_specs.yml",
    ):
        assert "molecule" not in path.read_text(encoding="utf-8").lower(), (
            f"{path}: a production default names no test harness; set test values in the molecule inventory"
        )


def test_the_labs_container_knobs_are_role_options():
    from gpufabric import lab_files

    for role, variable, value, _why in lab_files.CONTAINER_KNOBS:
        spec = options(role).get(variable)
        assert spec is not None, f"lab_files.CONTAINER_KNOBS sets {variable}, which {role} does not have"
        assert spec.get("default") != value, f"{variable}: the lab's value must differ from the production default"


# ---------------------------------------------------------------- one calling convention for the plan helpers

# docs/architecture.md, "The roles' plan helpers": a role's plan comes from one filter, <role>_plan, fed the role's
# settings and given the host's plan and facts by keyword. Roles that do not read the catalog omit plan=.
PLAN_CALL = re.compile(r"gpufabric\.cluster\.(?P<role>[a-z_]+?)_plan\((?P<args>[^)]*)\)")
PLAN_ARGS = {"plan=gpufabric_plan, facts=ansible_facts", "facts=ansible_facts"}


def role_texts() -> dict[Path, str]:
    return {
        path: path.read_text(encoding="utf-8")
        for path in sorted((REPO / "roles").glob("*/*/*"))
        if path.suffix in (".yml", ".j2") and path.parent.name in ("tasks", "templates", "handlers", "vars")
    }


def plan_filters() -> set[str]:
    """The roles whose plan comes from a filter named after them; each is made by plugin_utils.role_plan."""
    roles = set()
    plugin_utils("role_plan")  # makes ansible_collections.gpufabric.cluster importable
    for path in (REPO / "plugins" / "filter").glob("*.py"):
        module = importlib.import_module(f"ansible_collections.gpufabric.cluster.plugins.filter.{path.stem}")
        for name, function in module.FilterModule().filters().items():
            role = name.removesuffix("_plan")
            if role in ROLES:
                assert function.__module__.endswith("plugin_utils.role_plan"), f"{name}: make it with role_plan_filter"
                roles.add(role)
    return roles


def test_every_plan_helper_is_called_one_way():
    calls = []
    for path, text in role_texts().items():
        for match in PLAN_CALL.finditer(text):
            role = match["role"]
            if role not in ROLES:
                continue  # another helper whose name ends in _plan (sriov_firmware_plan reads the sriov plan)
            where = f"{path.relative_to(REPO)}: {match[0]}"
            calls.append(role)
            assert path.parts[-3] == role, f"{where}: only the role {role} calls its plan helper"
            before = text[: match.start()]
            assert re.search(rf"\b{role}__settings\s*\|\s*$", before), f"{where}: the input is {role}__settings"
            assert match["args"] in PLAN_ARGS, f"{where}: the arguments are plan=gpufabric_plan and facts=ansible_facts"
    assert set(calls) == plan_filters(), "every role with a plan filter plans through it"


def test_no_role_helper_dispatches_by_string_or_reads_the_catalog():
    for path, text in role_texts().items():
        where = path.relative_to(REPO)
        assert not re.search(r"gpufabric\.cluster\.[a-z_]+\(\s*['\"]", text), f"{where}: a filter chosen by a string"
        if path.parts[-3] != "plan":
            assert not re.search(r"catalog_files\s*=", text), (
                f"{where}: roles read the catalog's data from gpufabric_plan"
            )


@pytest.mark.parametrize("role", plugin_utils("fabric_catalog").ADOPTING_ROLES)
def test_a_role_an_image_can_name_under_adopt_has_the_provision_switch_site_yml_sets(role):
    """catalog images' `adopt:` names the roles site.yml switches to <role>_provision: adopt."""
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert options[f"{role}_provision"]["choices"] == ["install", "adopt"]
    assert f"{role}_provision:" in (REPO / "playbooks" / "site.yml").read_text()
