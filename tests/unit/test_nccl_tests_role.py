# SPDX-License-Identifier: Apache-2.0
"""The nccl_tests role's defaults agree with the published pin and the README, playbooks/verify.yml feeds the
role, its filters check their inputs, and the molecule test double's synthetic outputs are judged as the scenario
expects."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric.collection import module_utils, plugin_utils

run = module_utils("nccl_tests_run")
parser = module_utils("nccl_output")
judge = module_utils("nccl_judge")
catalog = plugin_utils("fabric_catalog").load_catalog()
fabric_plan = plugin_utils("fabric_plan")

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "nccl_tests"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
ARGSPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
OPTIONS = ARGSPEC["argument_specs"]["main"]["options"]
README = (ROLE / "README.md").read_text(encoding="utf-8")
VERIFY = yaml.safe_load((REPO / "playbooks" / "verify.yml").read_text(encoding="utf-8"))
# A profile with bandwidth thresholds; the role takes its profile from gpufabric_plan.
PROFILE = "baremetal/hgx-h100-ib-ndr"


def test_default_version_and_checksum_are_the_published_pin_and_documented():
    version, sha256 = DEFAULTS["nccl_tests_version"], DEFAULTS["nccl_tests_sha256"]
    assert run.PUBLISHED_SHA256[version] == sha256 == run.PUBLISHED_SHA256[run.DEFAULT_VERSION]
    assert DEFAULTS["nccl_tests_base_url"] == run.DEFAULT_BASE_URL
    assert run.tarball_url(DEFAULTS["nccl_tests_base_url"], version) == (
        "https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz"
    )
    for fact in (version, sha256, run.CHECKSUM_SOURCE, run.tarball_url(run.DEFAULT_BASE_URL, version)):
        assert fact in README, f"README does not state {fact}"
    assert run.plan({**_install_settings(), "version": version, "sha256": sha256}, None, FACTS)["errors"] == []


FACTS = {"os_family": "Debian", "architecture": "x86_64"}


def _install_settings():
    return {
        "install": DEFAULTS["nccl_tests_install"],
        "base_url": DEFAULTS["nccl_tests_base_url"],
        "url": DEFAULTS["nccl_tests_url"],
        "prefix": DEFAULTS["nccl_tests_prefix"],
        "work_dir": DEFAULTS["nccl_tests_work_dir"],
        "collectives": DEFAULTS["nccl_tests_collectives"],
        "mpi_home": DEFAULTS["nccl_tests_mpi_home"],
        "cuda_home": DEFAULTS["nccl_tests_cuda_home"],
        # What the role finds on a host with a CUDA toolkit (the default cuda_home is empty: found on the host).
        "nvcc_homes": ["/usr/local/cuda"],
        "nccl_home": DEFAULTS["nccl_tests_nccl_home"],
        "make_jobs": DEFAULTS["nccl_tests_make_jobs"],
        "make_args": DEFAULTS["nccl_tests_make_args"],
    }


def test_the_role_has_no_profile_or_tier_of_its_own():
    # The profile and tier come from gpufabric_plan (the plan role), never from a default of the role.
    assert not {"nccl_tests_profile", "nccl_tests_tier", "nccl_tests_catalog_files"} & set(DEFAULTS)
    assert catalog.get(PROFILE)["bandwidth"]["thresholds"]


def test_choices_in_the_argspec_are_the_ones_the_logic_accepts():
    assert OPTIONS["nccl_tests_install"]["choices"] == list(run.INSTALL_METHODS)
    assert OPTIONS["nccl_tests_algo"]["choices"] == list(run.ALGOS)
    assert OPTIONS["nccl_tests_fail_on"]["choices"] == list(run.FAIL_ON)
    described = " ".join(OPTIONS["nccl_tests_collectives"]["description"])
    for collective in run.COLLECTIVES:
        assert collective in described


def test_default_sizes_parse_and_defaults_make_a_valid_run():
    plan = run.run_plan(
        {
            "collectives": DEFAULTS["nccl_tests_collectives"],
            "algo": DEFAULTS["nccl_tests_algo"],
            "fail_on": DEFAULTS["nccl_tests_fail_on"],
            "run_id": "x",
            "gpus_per_node": 8,
            "iters": DEFAULTS["nccl_tests_iters"],
            "warmup": DEFAULTS["nccl_tests_warmup_iters"],
            "nccl_timeout": DEFAULTS["nccl_tests_nccl_timeout"],
            "timeout": DEFAULTS["nccl_tests_timeout"],
            "nodes": DEFAULTS["nccl_tests_nodes"],
            "min_bytes": DEFAULTS["nccl_tests_min_bytes"],
            "max_bytes": DEFAULTS["nccl_tests_max_bytes"],
            "hosts": ["a"],
            "bin_dir": "/opt/nccl-tests/2.17.6/build",
            "bandwidth": catalog.get(PROFILE)["bandwidth"],
        }
    )
    assert plan["error"] == ""


# The profile, tier and catalog files reach the role in gpufabric_plan, which verify.yml resolves first.
VERIFY_INPUTS = ("bake", "hw_root", "hardware_check", "run", "collectives", "nodes")


def test_verify_playbook_runs_the_role_with_the_plan():
    (play,) = VERIFY
    assert play["hosts"] == "{{ gpufabric_verify_hosts | default('all') }}"
    resolve, include = [task for task in play["tasks"] if "ansible.builtin.include_role" in task]
    assert resolve["ansible.builtin.include_role"]["name"] == "gpufabric.cluster.plan"
    assert resolve["vars"]["gpufabric_tier"] == "{{ gpufabric__verify_tier }}"
    assert include["ansible.builtin.include_role"]["name"] == "gpufabric.cluster.nccl_tests"
    for name in VERIFY_INPUTS:
        assert f"nccl_tests_{name}" in include["vars"], f"verify.yml does not pass nccl_tests_{name}"
        assert f"nccl_tests_{name}" in OPTIONS
    assert include["vars"]["nccl_tests_run"] is True
    assert include["vars"]["nccl_tests_bake"] is False
    assert "nccl_tests_results_dir" in include["vars"]


def _filters():
    spec = importlib.util.spec_from_file_location("nccl_tests_filters", REPO / "plugins/filter/nccl_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()


def test_the_filters_read_the_plan_not_the_catalog_and_refuse_what_is_not_their_input():
    filters = _filters()
    host_plan = fabric_plan.plan_host({"gpufabric_profile": PROFILE}, catalog)
    settings = {
        **_install_settings(),
        "version": DEFAULTS["nccl_tests_version"],
        "sha256": DEFAULTS["nccl_tests_sha256"],
    }
    install = filters["nccl_tests_plan"](settings, plan=host_plan, facts=FACTS)
    assert install == run.plan(settings, host_plan, FACTS)
    assert install["errors"] == []
    assert filters["nccl_tests_verdict"]({"status": "pass", "reasons": []}, exit_code=7)["status"] == "fail"
    assert filters["nccl_tests_verdict"]({"status": "pass", "reasons": []})["exit_code"] is None
    assert (
        "nccl_tests_plan: its input is str 'install'; accepted: nccl_tests__settings, the role's variables"
        in _error(lambda: filters["nccl_tests_plan"]("install"))
    )
    assert "expects the host's plan gpufabric_plan as plan= (a dictionary), got str" in _error(
        lambda: filters["nccl_tests_run_plan"]({}, install, ["a"], ["a"], plan=PROFILE)
    )
    assert "expects hosts as a list, got str" in _error(
        lambda: filters["nccl_tests_run_plan"]({}, install, "a", ["a"], plan=host_plan)
    )
    assert "exit_code must be an integer, got 'x'" in _error(lambda: filters["nccl_tests_verdict"]({}, exit_code="x"))
    # nccl_judge takes the host plan: the tier's thresholds and the GPU count.
    assert "expects the host's plan gpufabric_plan" in _error(lambda: filters["nccl_judge"]({}, PROFILE, 1))


def _error(call) -> str:
    try:
        call()
    except Exception as exc:  # AnsibleFilterError
        return str(exc)
    return ""


@pytest.fixture(scope="module")
def test_double(tmp_path_factory):
    sys.path.insert(0, str(REPO / "molecule" / "nccl_tests"))
    try:
        import build_nccl_tests
    finally:
        sys.path.pop(0)
    out = tmp_path_factory.mktemp("tarballs")
    tarball = build_nccl_tests.build(out, "0.0.0-test")
    return build_nccl_tests, tarball


def test_test_double_tarball_is_named_so_and_its_checksum_file_matches(test_double):
    _build, tarball = test_double
    assert tarball.name == "TEST-DOUBLE-nccl-tests-0.0.0-test.tar.gz"
    recorded = (tarball.parent / f"{tarball.name}.sha256").read_text(encoding="utf-8").split()[0]
    assert recorded == hashlib.sha256(tarball.read_bytes()).hexdigest()
    assert "0.0.0-test" not in run.PUBLISHED_SHA256


@pytest.mark.parametrize(("wrong_at", "status"), [(None, "pass"), (2 * 1024**3, "fail")])
def test_test_double_replays_are_judged_as_the_scenario_expects(test_double, wrong_at, status):
    build, _tarball = test_double
    (parsed,) = parser.parse_runs(build.replay(wrong_at))
    assert parsed["complete"] and parsed["nranks"] == 8 and parsed["errors"] == []
    assert parsed["rows"][-1]["size"] == 17179869184
    # As the role judges it: against the host's plan (the tier's thresholds, the GPU count).
    host_plan = fabric_plan.plan_host({"gpufabric_profile": PROFILE}, catalog)
    verdict = _filters()["nccl_judge"](parsed, host_plan, 1, "default")
    assert verdict == judge.judge(parsed, catalog.get(PROFILE), 1, "default")
    assert verdict["status"] == status
    assert verdict["measured_busbw"] > 460
    if wrong_at:
        assert any("wrong" in reason for reason in verdict["reasons"])
