# SPDX-License-Identifier: Apache-2.0
"""nccl_tests' logic that molecule cannot reach: the pinned release and its published checksum, the MPI build's
make arguments per distribution, sizes, the algorithm and the largest size a catalog threshold needs, the
environment every rank gets, the hostfile and the mpirun argument vector for one and several nodes."""

from __future__ import annotations

import pytest

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import recorded_facts

run = module_utils("nccl_tests_run")
catalog = plugin_utils("fabric_catalog").load_catalog()
fabric_plan = plugin_utils("fabric_plan")
NDR = catalog.get("baremetal/hgx-h100-ib-ndr")
SHA = "a" * 64


def install_inputs(**changes):
    inputs = {
        "install": "source",
        "version": "2.17.6",
        "sha256": run.PUBLISHED_SHA256["2.17.6"],
        "base_url": run.DEFAULT_BASE_URL,
        "url": "",
        "prefix": "/opt/nccl-tests",
        "work_dir": "/var/cache/gpufabric/nccl-tests",
        "bin_dir": "",
        "collectives": ["all_reduce", "all_gather"],
        "mpi_home": "",
        "cuda_home": "/usr/local/cuda",
        "nccl_home": "/usr",
        "make_jobs": 8,
        "make_args": [],
        "os_family": "Debian",
        "architecture": "x86_64",
    }
    return {**inputs, **changes}


def install_plan(**changes):
    """The install plan of the role's settings; the distribution comes from the facts, as in the role."""
    settings = install_inputs(**changes)
    facts = {key: settings.pop(key) for key in ("os_family", "architecture")}
    return run.plan(settings, None, facts)


def run_inputs(**changes):
    inputs = {
        "collectives": ["all_reduce"],
        "algo": "auto",
        "fail_on": "fail",
        "run_id": "20260101T000000Z",
        "gpus_per_node": 8,
        "iters": 20,
        "warmup": 5,
        "nccl_timeout": 0,
        "timeout": 1800,
        "nodes": 0,
        "min_bytes": "8M",
        "max_bytes": "",
        "env_extra": {},
        "current_env": {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "HOME": "/root"},
        "path_variables": ["LD_LIBRARY_PATH", "PATH"],
        "hosts": ["node-a"],
        "addresses": ["10.0.0.1"],
        "bin_dir": "/opt/nccl-tests/2.17.6/build",
        "output_dir": "/var/lib/gpufabric/nccl-tests",
        "mpirun": "mpirun",
        "mpirun_args": [],
        "bandwidth": NDR["bandwidth"],
        "timeout_flag": True,
        "version": "2.17.6",
    }
    return {**inputs, **changes}


# --- install ------------------------------------------------------------------------------------------------


def test_default_release_is_spacks_published_pin():
    plan = install_plan()
    assert plan["errors"] == plan["warnings"] == []
    assert plan["url"] == "https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz"
    assert plan["sha256"] == "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
    assert plan["install_dir"] == "/opt/nccl-tests/2.17.6"
    assert plan["current_link"] == "/opt/nccl-tests/current"
    assert plan["binaries"] == [
        "/opt/nccl-tests/2.17.6/build/all_reduce_perf",
        "/opt/nccl-tests/2.17.6/build/all_gather_perf",
    ]
    assert plan["tarball"] == "/var/cache/gpufabric/nccl-tests/nccl-tests-2.17.6.tar.gz"
    assert plan["timeout_flag"] is True


@pytest.mark.parametrize(
    ("os_family", "architecture", "mpi_home"),
    [
        ("Debian", "x86_64", "/usr/lib/x86_64-linux-gnu/openmpi"),
        ("Debian", "aarch64", "/usr/lib/aarch64-linux-gnu/openmpi"),
    ],
)
def test_make_argv_is_an_mpi_build_with_the_distributions_open_mpi(os_family, architecture, mpi_home):
    plan = install_plan(os_family=os_family, architecture=architecture)
    assert plan["make_argv"] == [
        "make",
        "-j",
        "8",
        "MPI=1",
        f"MPI_HOME={mpi_home}",
        "CUDA_HOME=/usr/local/cuda",
        "NCCL_HOME=/usr",
    ]
    assert plan["prerequisites"][0]["path"] == f"{mpi_home}/include/mpi.h"


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/nccl_tests no longer runs on (it runs the Ubuntu 24.04 identity image), and both Ubuntu releases:
# libopenmpi-dev puts Open MPI under /usr/lib/<multiarch>/openmpi on each.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_mpi_home_over_recorded_facts(target):
    settings = install_inputs()
    for key in ("os_family", "architecture"):  # the distribution comes from the recorded facts only
        del settings[key]
    plan = run.plan(settings, None, recorded_facts(target))
    assert plan["errors"] == []
    assert "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi" in plan["make_argv"]


def test_explicit_mpi_home_and_extra_make_args():
    plan = install_plan(mpi_home="/opt/hpcx/ompi/", make_args=["NVCC_GENCODE=-gencode=x"])
    assert plan["make_argv"][4] == "MPI_HOME=/opt/hpcx/ompi"
    assert plan["make_argv"][-1] == "NVCC_GENCODE=-gencode=x"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"install": "apt"}, "nccl_tests_install 'apt' is not an install method; accepted: source, path"),
        ({"version": "latest"}, "nccl_tests_version 'latest' is not a release version; accepted: X.Y.Z"),
        ({"version": "2.18.0", "sha256": ""}, "nccl_tests_sha256 is empty for nccl-tests 2.18.0"),
        ({"sha256": "abc"}, "nccl_tests_sha256 'abc' is not a SHA256; accepted: 64 hexadecimal digits"),
        ({"sha256": SHA}, "is not the published SHA256 of nccl-tests 2.17.6 (38974e70"),
        ({"collectives": ["allreduce"]}, "nccl_tests_collectives has allreduce; accepted: all_reduce, all_gather"),
        ({"collectives": []}, "nccl_tests_collectives [] must be a non-empty list"),
        ({"collectives": ["all_reduce", "all_reduce"]}, "names a collective twice"),
        ({"make_args": ["MPI_HOME=/x"]}, "nccl_tests_make_args sets MPI_HOME, which the role sets itself"),
        ({"make_jobs": 0}, "nccl_tests_make_jobs '0' must be a whole number of 1 or more"),
        ({"os_family": "Suse"}, "nccl_tests_mpi_home is empty and no Open MPI prefix is known for Suse"),
        ({"os_family": "RedHat"}, "no Open MPI prefix is known for RedHat x86_64; set it to the directory holding"),
    ],
)
def test_bad_install_input_names_the_value_the_variable_and_what_is_accepted(changes, message):
    plan = install_plan(**changes)
    (error,) = plan["errors"]
    assert message in error
    assert set(plan) == {"errors", "warnings", "install"}


def test_every_bad_install_setting_has_its_own_message():
    errors = install_plan(version="latest", make_jobs=0, make_args=["MPI=0", "CUDA_HOME=/x"], os_family="Suse")[
        "errors"
    ]
    assert [error.split(" ", 1)[0] for error in errors] == [
        "nccl_tests_version",
        "nccl_tests_make_jobs",
        "nccl_tests_make_args",
        "nccl_tests_make_args",
        "nccl_tests_mpi_home",
    ]
    assert install_plan(install="apt", collectives=[])["errors"] == [
        "nccl_tests_install 'apt' is not an install method; accepted: source, path",
        "nccl_tests_collectives [] must be a non-empty list; accepted: " + ", ".join(run.COLLECTIVES),
    ]


def test_a_mirror_may_serve_the_release_under_its_own_checksum():
    """A site's own tarball of a published version (another URL) is taken on its checksum."""
    plan = install_plan(sha256=SHA, url="https://mirror.example/nccl-tests-2.17.6.tar.gz")
    assert plan["errors"] == []
    assert plan["url"] == "https://mirror.example/nccl-tests-2.17.6.tar.gz"


def test_a_test_double_version_and_old_releases_know_about_the_timeout_flag():
    assert install_plan(version="0.0.0-test", sha256=SHA)["timeout_flag"] is False
    assert install_plan(version="2.13.6", sha256=run.PUBLISHED_SHA256["2.13.6"])["timeout_flag"] is False


# --- the CUDA compiler -------------------------------------------------------------------------------------------

NCCL_DEB = [{"name": "libnccl-dev", "version": "2.28.7-1+cuda12.9", "source": "apt"}]
# NVIDIA's RPMs carry the CUDA release in the release field (libnccl-devel-2.28.7-1+cuda12.9).
NCCL_RPM = [{"name": "libnccl-devel", "version": "2.28.7", "release": "1+cuda12.9", "source": "rpm"}]


@pytest.mark.parametrize(
    ("homes", "cuda_home"),
    [
        (["/usr/local/cuda", "/usr/local/cuda-12.9", "/usr"], "/usr/local/cuda"),
        (["/usr/local/cuda-12.10", "/usr/local/cuda-12.9", "/usr"], "/usr/local/cuda-12.10"),
        (["/usr/local/cuda-13.0", "/usr/local/cuda-12.9"], "/usr/local/cuda-13.0"),
        (["/usr"], "/usr"),
    ],
)
def test_an_empty_cuda_home_takes_the_hosts_compiler(homes, cuda_home):
    plan = install_plan(cuda_home="", nvcc_homes=homes, nccl_dev=NCCL_DEB)
    assert (plan["cuda_home"], plan["cuda_packages"]) == (cuda_home, [])
    assert f"CUDA_HOME={cuda_home}" in plan["make_argv"]
    assert {"path": f"{cuda_home}/bin/nvcc", "what": "the CUDA compiler", "variable": "nccl_tests_cuda_home"} in plan[
        "prerequisites"
    ]


@pytest.mark.parametrize("nccl_dev", [NCCL_DEB, NCCL_RPM])
def test_without_a_compiler_the_role_installs_the_one_of_nccls_cuda_release(nccl_dev):
    plan = install_plan(cuda_home="", nvcc_homes=[], nccl_dev=nccl_dev)
    assert plan["cuda_packages"] == ["cuda-nvcc-12-9", "cuda-cudart-dev-12-9"]
    assert plan["cuda_home"] == "/usr/local/cuda-12.9"
    # The packages bring nvcc: it is not a prerequisite the build could fail on first.
    assert [p["variable"] for p in plan["prerequisites"]] == ["nccl_tests_mpi_home", "nccl_tests_nccl_home"]


def test_a_host_not_read_plans_the_download_and_leaves_the_compiler_to_the_role():
    plan = install_plan(cuda_home="", nvcc_homes=None)
    assert plan["errors"] == [] and (plan["cuda_home"], plan["cuda_packages"]) == ("", [])
    assert plan["artifacts"][0]["source"] == plan["url"]


def test_an_explicit_cuda_home_wins_over_what_the_host_has():
    plan = install_plan(cuda_home="/opt/cuda/", nvcc_homes=["/usr/local/cuda"], nccl_dev=NCCL_DEB)
    assert (plan["cuda_home"], plan["cuda_packages"]) == ("/opt/cuda", [])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "NCCL's development package (libnccl-dev / libnccl-devel, not installed) names no CUDA release"),
        ({"nccl_dev": [{"version": "2.18.3-1"}]}, "NCCL's development package (version 2.18.3-1) names no CUDA"),
        (
            {"nccl_dev": NCCL_DEB, "cuda_install": False},
            "install cuda-nvcc-12-9 and cuda-cudart-dev-12-9 from NVIDIA's CUDA repository (the CUDA release of "
            "NCCL 2.28.7-1+cuda12.9), set nccl_tests_cuda_home, or set nccl_tests_cuda_install true",
        ),
    ],
)
def test_no_compiler_and_nothing_to_install_fails_before_any_change(changes, message):
    (error,) = install_plan(cuda_home="", nvcc_homes=[], **changes)["errors"]
    assert error.startswith("no CUDA compiler to build nccl-tests with (/usr/local/cuda, /usr/local/cuda-X.Y and /usr")
    assert message in error


def test_path_install_checks_the_given_directory():
    plan = install_plan(install="path", bin_dir="/usr/local/bin/")
    assert plan["binaries"] == ["/usr/local/bin/all_reduce_perf", "/usr/local/bin/all_gather_perf"]
    (error,) = install_plan(install="path")["errors"]
    assert "nccl_tests_bin_dir '' must be the absolute directory" in error


# --- sizes and thresholds ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"), [("8M", 8 * 1024**2), ("16G", 17179869184), ("1k", 1024), (4096, 4096), ("512", 512)]
)
def test_sizes_are_powers_of_1024_as_nccl_tests_parses_them(text, size):
    assert run.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "16T", "-1", "0", "lots", True])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError):
        run.parse_size(text)


@pytest.mark.parametrize(
    ("nodes", "algo", "max_bytes"),
    [
        (1, "default", 17179869184),  # single node NVLink threshold at 16 GiB
        (2, "default", 8589934592),  # two-node default-algorithm threshold at 8 GiB
        (3, "ring", 1073741824),  # three nodes: only the ring threshold applies
        (16, "ring", 1073741824),
    ],
)
def test_auto_algorithm_and_largest_size_follow_the_catalog(nodes, algo, max_bytes):
    thresholds = NDR["bandwidth"]["thresholds"]
    assert run.choose_algo(thresholds, "all_reduce", nodes) == algo
    assert run.auto_max_bytes(thresholds, "all_reduce", nodes, algo) == max_bytes


def test_explicit_algorithm_wins_and_unknown_collectives_fall_back():
    thresholds = NDR["bandwidth"]["thresholds"]
    assert run.choose_algo(thresholds, "all_reduce", 2, "ring") == "ring"
    assert run.choose_algo(thresholds, "alltoall", 2) == "default"
    assert run.auto_max_bytes(thresholds, "alltoall", 2, "default") == run.FALLBACK_MAX_BYTES


# --- environment, hostfile, argv -----------------------------------------------------------------------------


def test_launch_env_forwards_only_the_runs_own_variables_and_forces_rings():
    env = run.launch_env(
        {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": None, "NCCL_IB_QPS_PER_CONNECTION": 4, "LD_LIBRARY_PATH": "/opt/dbg"},
        "ring",
        {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"},
        ["LD_LIBRARY_PATH"],
    )
    # A null override forwards an empty value: NCCL leaves /etc/nccl.conf's value unapplied (it never replaces
    # a variable the process has).
    assert env == {
        "LD_LIBRARY_PATH": "/opt/dbg:/usr/local/cuda/lib64",
        "NCCL_ALGO": "Ring",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "",
        "NCCL_IB_QPS_PER_CONNECTION": "4",
    }


def test_launch_env_does_not_repeat_a_directory_already_on_the_path():
    env = run.launch_env({"PATH": "/opt/bin"}, "default", {"PATH": "/opt/bin:/usr/bin"}, ["PATH"])
    assert env == {"PATH": "/opt/bin"}


def test_a_run_forwards_none_of_the_fabrics_environment():
    """The ranks read the fabric's environment from the host's files (nccl_env), as a job does: no -x for it."""
    host_plan = fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog)
    assert host_plan["env"]["FI_PROVIDER"] == "efa" and "LD_LIBRARY_PATH" in host_plan["env"]
    settings = {key: run_inputs()[key] for key in run.RUN_SETTINGS if key != "warmup_iters"}
    settings.update(warmup_iters=5, gpus_per_node=0, nodes=2, algo="ring")
    install = install_plan(collectives=["all_reduce"])
    planned = run.run(settings, install, ["a", "b"], ["10.0.0.1", "10.0.0.2"], host_plan, {"env": {}})
    (ring,) = planned["runs"]
    assert ring["env"] == {"NCCL_ALGO": "Ring"}
    forwarded = [ring["argv"][i + 1] for i, arg in enumerate(ring["argv"]) if arg == "-x"]
    assert forwarded == ["NCCL_ALGO"]
    assert not set(host_plan["env"]) & set(ring["argv"])


def test_single_node_run_plan():
    plan = run.run_plan(run_inputs())
    assert plan["error"] == ""
    assert plan["hostfile"] == "10.0.0.1 slots=8\n"
    assert plan["hostfile_path"] == "/var/lib/gpufabric/nccl-tests/20260101T000000Z/hostfile"
    (only,) = plan["runs"]
    assert only["file"] == "all_reduce-1n.txt"
    assert only["output"] == "/var/lib/gpufabric/nccl-tests/20260101T000000Z/all_reduce-1n.txt"
    assert only["algo"] == "default"
    assert only["env"] == {}
    assert only["argv"] == [
        "timeout",
        "--kill-after=30",
        "1800s",
        "mpirun",
        "--allow-run-as-root",
        "--hostfile",
        "/var/lib/gpufabric/nccl-tests/20260101T000000Z/hostfile",
        "-np",
        "8",
        "--map-by",
        "ppr:8:node",
        "--bind-to",
        "none",
        "/opt/nccl-tests/2.17.6/build/all_reduce_perf",
        "-b",
        "8388608",
        "-e",
        "17179869184",
        "-f",
        "2",
        "-g",
        "1",
        "-c",
        "1",
        "-n",
        "20",
        "-w",
        "5",
    ]


def test_four_node_run_takes_the_first_nodes_uses_rings_and_nccls_timeout():
    plan = run.run_plan(
        run_inputs(
            hosts=["a", "b", "c", "d", "e"],
            addresses=["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"],
            nodes=4,
            nccl_timeout=600,
            collectives=["all_reduce", "all_gather"],
            mpirun_args=["--mca", "oob_tcp_if_include", "eth0"],
        )
    )
    assert plan["error"] == ""
    assert plan["hosts"] == ["a", "b", "c", "d"]
    assert plan["hostfile"].splitlines() == [f"10.0.0.{i} slots=8" for i in range(1, 5)]
    reduce, gather = plan["runs"]
    assert reduce["file"] == "all_reduce-4n.txt"
    assert reduce["algo"] == "ring"
    assert reduce["env"]["NCCL_ALGO"] == "Ring"
    assert reduce["argv"][7:18] == [
        "-np",
        "32",
        "--map-by",
        "ppr:8:node",
        "--bind-to",
        "none",
        "--mca",
        "oob_tcp_if_include",
        "eth0",
        "-x",
        "NCCL_ALGO",
    ]
    assert reduce["argv"][-6:] == ["-n", "20", "-w", "5", "-T", "600"]
    assert reduce["max_bytes"] == 1073741824
    # No all_gather threshold in this profile: NCCL's own algorithm, the fallback size.
    assert gather["algo"] == "default"
    assert gather["max_bytes"] == 8 * 1024**3
    assert "NCCL_ALGO" not in gather["env"]


def test_standard_tier_is_judged_without_the_fabric_thresholds():
    # The host plan's bandwidth holds the tier's thresholds (tests/unit/test_fabric_plan.py): none for standard.
    standard = fabric_plan.plan_host({"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"}, catalog, tier="standard")
    assert standard["bandwidth"]["thresholds"] == run.tier_thresholds(NDR["bandwidth"], "standard") == []
    assert run.tier_thresholds(NDR["bandwidth"], "best") == NDR["bandwidth"]["thresholds"]
    plan = run.run_plan(run_inputs(bandwidth=standard["bandwidth"]))
    assert plan["runs"][0]["max_bytes"] == run.FALLBACK_MAX_BYTES
    assert run.run_plan(run_inputs())["runs"][0]["max_bytes"] == 16 * 1024**3


def test_the_role_plans_its_runs_from_its_settings_the_install_and_the_host_plan():
    """run(): what the role passes (settings, install plan, nodes, host plan, facts) reaches run_plan()."""
    host_plan = fabric_plan.plan_host({"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"}, catalog)
    inputs = run_inputs()
    settings = {key: inputs[key] for key in run.RUN_SETTINGS if key != "warmup_iters"}
    settings.update(warmup_iters=inputs["warmup"], gpus_per_node=0)
    install = install_plan(collectives=["all_reduce"])
    planned = run.run(settings, install, ["node-a"], ["10.0.0.1"], host_plan, {"env": inputs["current_env"]})
    expected = run.run_plan({**inputs, "bandwidth": host_plan["bandwidth"], "bin_dir": install["bin_dir"]})
    assert planned == expected
    assert planned["error"] == "" and planned["gpus_per_node"] == host_plan["gpus"]["count"] == 8
    assert run.run({**settings, "gpus_per_node": 4}, install, ["node-a"], ["10.0.0.1"], host_plan)["gpus_per_node"] == 4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo": "tree"}, "nccl_tests_algo 'tree' is not an algorithm choice; accepted: auto, default, ring"),
        ({"fail_on": "warn"}, "nccl_tests_fail_on 'warn' is not accepted; accepted: fail, never"),
        ({"run_id": "../x"}, "nccl_tests_run_id '../x' must be letters, digits"),
        ({"nodes": 3}, "nccl_tests_nodes 3 asks for more nodes than the play has (1: node-a)"),
        ({"iters": 0}, "nccl_tests_iters '0' must be a whole number of 1 or more"),
        ({"timeout": "soon"}, "nccl_tests_timeout 'soon' must be a whole number of 1 or more"),
        ({"min_bytes": "huge"}, "nccl_tests_min_bytes 'huge' is not a size"),
        ({"max_bytes": "4M"}, "nccl_tests_max_bytes (4194304) is below nccl_tests_min_bytes (8388608)"),
        ({"env_extra": {"NCCL DEBUG": "INFO"}}, "nccl_tests_env_extra"),
        ({"env_extra": {"NCCL_NVLS_ENABLE": True}}, "quote true/false"),
        ({"hosts": []}, "no host to run on"),
        ({"nccl_timeout": 60, "timeout_flag": False, "version": "2.13.6"}, "needs nccl-tests 2.13.9 or newer (-T)"),
    ],
)
def test_bad_run_input_is_refused_before_anything_runs(changes, message):
    assert message in run.run_plan(run_inputs(**changes))["error"]


def test_a_nonzero_exit_fails_a_passing_verdict_and_says_why():
    verdict = {"status": "pass", "reasons": ["busbw ok"], "collective": "all_reduce"}
    assert run.verdict_line(verdict, 0) == {**verdict, "exit_code": 0}
    timed_out = run.verdict_line(verdict, 124)
    assert timed_out["status"] == "fail"
    assert timed_out["reasons"][-1] == "mpirun exited 124 (the wall-clock timeout (nccl_tests_timeout) fired)"
    assert run.verdict_line({"status": "warn", "reasons": []}, None)["status"] == "warn"


def test_a_standard_tier_run_forwards_the_baseline_which_wins_over_the_hosts_files():
    """--compare standard,best: the TCP baseline is the run's choice, so its variables go with -x (they win over
    /etc/nccl.conf, which holds the best tier); the operator's overrides win over them."""
    host_plan = fabric_plan.plan_host({"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"}, catalog, tier="standard")
    settings = {key: run_inputs()[key] for key in run.RUN_SETTINGS if key != "warmup_iters"}
    settings.update(warmup_iters=5, gpus_per_node=0, env_extra={"NCCL_SOCKET_IFNAME": "eth0"})
    install = install_plan(collectives=["all_reduce"])
    (only,) = run.run(settings, install, ["a"], ["10.0.0.1"], host_plan, {"env": {}})["runs"]
    assert only["env"] == {"NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "eth0"}
    forwarded = [only["argv"][i + 1] for i, arg in enumerate(only["argv"]) if arg == "-x"]
    assert forwarded == ["NCCL_IB_DISABLE", "NCCL_NET", "NCCL_SOCKET_IFNAME"]
