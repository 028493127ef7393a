# SPDX-License-Identifier: Apache-2.0
"""Run every molecule scenario with `molecule test`, exactly as a role author runs one.

Each scenario's sequence (.config/molecule/config.yml) is: destroy, create, prepare, check on
the fresh host, converge, idempotence, check on the converged host, verify, destroy. The check-mode
contract is judged inside molecule's own run (molecule/resources/callback_plugins/check_contract.py),
so this wrapper only runs the command, keeps its output and times it:
- the whole output goes to test-results/molecule/<scenario>.log, each line after its second since the start;
  a failure shows its tail;
- the time of each scenario goes to test-results/molecule-times.tsv, which scripts/test prints.
Scenarios run side by side under pytest-xdist (scripts/test passes -n), the slowest first; their
container names are the inventory's host names, unique per scenario.
Needs podman, the images from scripts/build-images and .ci/containers.conf (the shared config sets it).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(os.environ.get("GPUFABRIC_TEST_RESULTS", REPO / "test-results"))
# Longest first, so the parallel run does not end waiting on one slow scenario started last (the order of the
# CI run of 2026-12-07 in test-results/molecule-times.tsv, with image_doubles' fifth double and the hosts since
# dropped from nvidia_driver_cuda and nccl_env counted in); the others follow by name.
SLOWEST = [
    "image_doubles", "sriov", "nvidia_driver_cuda", "gcp_tcpxo", "nvidia_driver", "gcp_gpudirect_rdma", "nccl_tests",
    "aws_efa", "rdma_stack", "host_tuning", "nccl_env", "gcp_tcpx", "imex", "roce", "rdma_stack_doca", "gds",
]  # fmt: skip
FOUND = sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))
SCENARIOS = [name for name in SLOWEST if name in FOUND] + [name for name in FOUND if name not in SLOWEST]
TAIL_LINES = 150
# molecule runs `ansible-playbook --version` before each playbook it runs (molecule 26.10,
# AnsiblePlaybook._validate_backend; it only checks the exit status): 8 to 10 times a scenario, 0.9 s of CPU
# each. Scenarios run with a stand-in first on PATH that answers exactly `--version` with what the real one
# printed once and hands every other command line to the real one (docs/testing.md).
VERSION_SHIM = """#!/bin/sh
if [ "$#" -eq 1 ] && [ "$1" = --version ]; then cat "$(dirname "$0")/version.txt"; exit 0; fi
exec {real} "$@"
"""


@pytest.fixture(scope="session")
def playbook_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the `ansible-playbook` stand-in for molecule's version checks."""
    real = Path(sys.executable).with_name("ansible-playbook")
    shim = tmp_path_factory.mktemp("ansible-playbook-shim")
    version = subprocess.run([real, "--version"], capture_output=True, text=True, check=True).stdout
    (shim / "version.txt").write_text(version, encoding="utf-8")
    (shim / "ansible-playbook").write_text(VERSION_SHIM.format(real=shlex.quote(str(real))), encoding="utf-8")
    (shim / "ansible-playbook").chmod(0o755)
    return shim


def record_time(scenario: str, outcome: str, seconds: float) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / "molecule-times.tsv").open("a", encoding="utf-8") as table:
        table.write(f"{scenario}\t{outcome}\t{seconds:.0f}\n")


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(scenario: str, playbook_shim: Path) -> None:
    log = RESULTS / "molecule" / f"{scenario}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NO_COLOR="1", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", COLUMNS="250")
    env["PATH"] = f"{playbook_shim}{os.pathsep}{env.get('PATH', '')}"
    molecule = str(Path(sys.executable).with_name("molecule"))
    start = time.monotonic()
    # Each line of the log starts with the seconds since the start, so the log says which action took how long.
    with log.open("w", encoding="utf-8") as output:
        # The wall clock too, so that a slow action can be matched with what ran beside it.
        output.write(f"[{0:6.0f}s] started {time.strftime('%H:%M:%S')}\n")
        with subprocess.Popen(
            [molecule, "test", "-s", scenario],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                output.write(f"[{time.monotonic() - start:6.0f}s] {line}")
        returncode = process.returncode
    seconds = time.monotonic() - start
    record_time(scenario, "ok" if returncode == 0 else "FAILED", seconds)
    if returncode != 0:
        tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)[-TAIL_LINES:])
        pytest.fail(f"molecule test -s {scenario} exited {returncode} after {seconds:.0f}s; {log}:\n{tail}")
