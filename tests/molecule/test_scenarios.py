# SPDX-License-Identifier: Apache-2.0
"""Run every molecule scenario step by step and hold each step to its promise.

`molecule test` runs check mode but does not look at what it reported. Here
each step is its own molecule command, its output streams to the terminal (so
CI logs show containers being created, converged and destroyed), and the play
recaps are read:
- check on a fresh host: no failure, changes announced (none for read-only
  scenarios), and nothing written;
- converge, then molecule's idempotence step;
- check on the converged host: zero changes (this is what drift detection relies on);
- verify, then destroy, also when a step failed.
Needs podman, the images from scripts/build-images and CONTAINERS_CONF: scripts/test sets them up.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))
RECAP = re.compile(r"^\W*(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# What a check-mode pass on a fresh host must leave untouched: file -> content from prepare.yml.
FRESH_FILES = {
    "nccl_env": {"/etc/nccl.conf": "NCCL_NET=gIB\n", "/etc/profile.d/gpufabric-nccl.sh": None},
    "roce": {"/etc/gpufabric/roce-qos.conf": None},
    "sriov": {
        "/etc/gpufabric/sriov.json": None,
        "/etc/systemd/system/gpufabric-sriov.service": None,
        # SIMULATED tree, bind-mounted writable: check mode must not create VFs.
        "/simulated-hw/sys/bus/pci/devices/0000:17:00.0/sriov_numvfs": "0\n",
    },
}
# Scenarios that only read (facts modules): no step may ever report a change.
READ_ONLY = {"fabric_facts"}


def molecule(step: str, scenario: str, env: dict[str, str]) -> dict[str, dict[str, int]]:
    """Run one molecule step, stream its output, return the last recap per host."""
    command = [str(Path(sys.executable).with_name("molecule")), step, "-s", scenario]
    print(f"\n=== molecule {step} -s {scenario}", file=sys.__stdout__, flush=True)
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        sys.__stdout__.write(line)
        lines.append(ANSI.sub("", line))
    sys.__stdout__.flush()
    assert process.wait() == 0, f"molecule {step} -s {scenario} failed"
    recap: dict[str, dict[str, int]] = {}
    for host, ok, changed, unreachable, failed in RECAP.findall("".join(lines)):
        recap[host] = {"ok": int(ok), "changed": int(changed), "unreachable": int(unreachable), "failed": int(failed)}
    return recap


def container_file(host: str, path: str, env: dict[str, str]) -> str | None:
    result = subprocess.run(["podman", "exec", host, "cat", path], capture_output=True, text=True, env=env, check=False)
    return result.stdout if result.returncode == 0 else None


@pytest.fixture(scope="module")
def molecule_env() -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", COLUMNS="250")
    env.setdefault("CONTAINERS_CONF", str(REPO / ".ci" / "containers.conf"))
    return env


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(scenario: str, molecule_env: dict[str, str]) -> None:
    molecule("destroy", scenario, molecule_env)
    try:
        molecule("create", scenario, molecule_env)

        fresh = molecule("check", scenario, molecule_env)
        assert fresh, "check printed no recap"
        for host, counts in fresh.items():
            assert counts["failed"] == counts["unreachable"] == 0, f"{host}: check failed on a fresh host"
            if scenario in READ_ONLY:
                assert counts["changed"] == 0, f"{host}: a read-only scenario reported a change"
            else:
                assert counts["changed"] > 0, f"{host}: check on a fresh host announced no change"
            for path, content in FRESH_FILES.get(scenario, {}).items():
                assert container_file(host, path, molecule_env) == content, f"{host}: check mode touched {path}"

        molecule("converge", scenario, molecule_env)
        molecule("idempotence", scenario, molecule_env)

        converged = molecule("check", scenario, molecule_env)
        for host, counts in converged.items():
            assert counts == {**counts, "changed": 0, "failed": 0, "unreachable": 0}, f"{host}: drift after converge"

        molecule("verify", scenario, molecule_env)
    finally:
        molecule("destroy", scenario, molecule_env)
