# SPDX-License-Identifier: Apache-2.0
"""The README's main command and the faults an ops team meets, on one lab fleet over real SSH.

`gpufabric demo --keep` runs first (lab up, plan, apply, drift clean, tamper, drift --remediate: caught on that
host only, applied there only, clean again) and leaves its two hosts converged. On them: the tamper suite
(every kind of hand change drift must catch, with the untouched host reported clean), then a host stopped in
the middle of apply (the other, the tampered one, finishes and is repaired, the summary names the stopped one,
a rerun limited to the stopped one converges it and a check finds no drift on either). One lab for all,
because every site.yml run is the slow part: each one here proves something no other does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpufabric import apply as fleet_apply
from gpufabric import drift as fleet_drift
from gpufabric import lab

pytestmark = pytest.mark.lab

LAB_NAME = "gpufabric-labtest-fleet"
REPO = Path(__file__).resolve().parents[2]
PF0 = "0000:17:00.0"  # the first ConnectX physical function of the SIMULATED tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """Run the README's main command (with --keep); yield its output and the lab it left up."""
    output = tmp_path_factory.mktemp("demo")
    lab_dir = tmp_path_factory.mktemp("lab")
    command = [
        sys.executable, "-m", "gpufabric", "demo", "--keep",
        "--name", LAB_NAME, "--dir", str(lab_dir), "-o", str(output),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), check=False)
        sys.stdout.write(done.stdout[-20000:])
        sys.stderr.write(done.stderr[-20000:])
        yield done, lab.load(LAB_NAME, directory=lab_dir), output
    finally:
        lab.down(LAB_NAME, directory=lab_dir, progress=lambda line: None)


def test_demo_runs_every_step(demo) -> None:
    done, fleet, output = demo
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for step in ("lab up", "plan", "apply", "drift", "tamper", "remediate"):
        assert step in done.stdout
    # The reports are the remediate run's final check: the fleet clean again.
    reports = output / "drift-remediate"
    assert json.loads((reports / "drift.json").read_text())["state"] == "clean"
    assert (reports / "drift.junit.xml").is_file()
    assert "gpufabric_drift_hosts" in (reports / "gpufabric_drift.prom").read_text()
    assert len(fleet.hosts) == 2


def _sh(fleet: lab.Lab, host: str, script: str) -> None:
    done = lab.podman_exec(fleet, host, ["sh", "-ec", script])
    assert done.returncode == 0, f"{host}: {script}: {done.stderr}"


# Each case: what a person does by hand, and the role and task in which drift must show it.
TAMPERS = {
    "file edited": (
        "echo mlx4_ib >> /etc/modules-load.d/gpufabric-rdma.conf",
        "rdma_stack",
        "Persist the kernel modules the fabric needs",
    ),
    "package unheld": ("apt-mark unhold rdma-core", "rdma_stack", "Install the pinned packages and hold them"),
    "unit disabled": ("systemctl disable gpufabric-sriov.service", "sriov", "Enable the boot unit"),
    "env key changed": (
        "sed -i 's/^NCCL_IB_HCA=.*/NCCL_IB_HCA=mlx5/' /etc/nccl.conf",
        "nccl_env",
        "Write the NCCL configuration file",
    ),
    "VF count changed": (
        # Through 0, as the kernel demands: wait until the VFs are gone before asking for 4.
        f"pf=/simulated-hw/sys/bus/pci/devices/{PF0}; echo 0 > $pf/sriov_numvfs; "
        "while [ -e $pf/virtfn0 ]; do sleep 0.05; done; echo 4 > $pf/sriov_numvfs",
        "sriov",
        "Create and configure the VFs of each physical function",
    ),
}


# Each case as the fast check names it: the role and the recorded item that moved.
FAST_FINDINGS = {
    "file edited": ("rdma_stack", "files /etc/modules-load.d/gpufabric-rdma.conf"),
    "package unheld": ("rdma_stack", "packages rdma-core"),
    "unit disabled": ("sriov", "units gpufabric-sriov.service"),
    "env key changed": ("nccl_env", "files /etc/nccl.conf"),
    "VF count changed": ("sriov", f"contents /simulated-hw/sys/bus/pci/devices/{PF0}/sriov_numvfs"),
}


# The desired state moved for one host: the inventory gives it a setting of a role (not part of the plan).
SETTING = ("nccl_env_extra", "{NCCL_NET_GDR_LEVEL: PHB}")
SETTING_FINDING = ("nccl_env", f"settings {SETTING[0]}")


def _with_host_setting(inventory: Path, host: str) -> str:
    """The lab's inventory with SETTING for `host` only (after its ansible_port line); the original text."""
    original = inventory.read_text()
    lines = original.splitlines(keepends=True)
    at = lines.index(f"    {host}:\n") + 2  # the host's line, then its ansible_port
    lines.insert(at, f"      {SETTING[0]}: {SETTING[1]}\n")
    inventory.write_text("".join(lines))
    return original


def test_tamper_suite_catches_every_case_and_only_there(demo, tmp_path: Path) -> None:
    """Every hand change, and a setting the inventory now gives one host, on that host only: the default (fast)
    check and the thorough one both catch each case, and both find the untouched host clean."""
    done, fleet, _output = demo
    assert done.returncode == 0, "the demo must leave a converged lab"
    tampered, untouched = fleet.hosts[0].name, fleet.hosts[1].name
    for script, _role, _task in TAMPERS.values():
        _sh(fleet, tampered, script)
    original = _with_host_setting(fleet.inventory, tampered)
    try:
        thorough = fleet_drift.check(
            fleet_drift.DriftOptions(inventory=str(fleet.inventory), artifacts=tmp_path / "check", fast=False),
            lambda line: None,
        )
        fast = fleet_drift.check(
            fleet_drift.DriftOptions(inventory=str(fleet.inventory), artifacts=tmp_path / "fast"), lambda line: None
        )
    finally:
        fleet.inventory.write_text(original)
    for result in (thorough, fast):
        assert result.exit_code == 2
        assert result.hosts[untouched].state == "clean", result.hosts[untouched].changes
        assert result.hosts[tampered].state == "drifted"
    changes = [(change.role, change.task) for change in thorough.hosts[tampered].changes]
    missed = [
        case for case, (_script, role, task) in TAMPERS.items() if not any(r == role and task in t for r, t in changes)
    ]
    assert missed == [], f"the thorough check missed {missed}; it saw {changes}"
    # The fast check (the record of the last apply) names each case by its item.
    found = {(change.role, item) for change in fast.hosts[tampered].changes for item in change.items}
    fast_missed = [case for case, (role, item) in FAST_FINDINGS.items() if (role, item) not in found]
    assert fast_missed == [], f"the fast check missed {fast_missed}; it found {sorted(found)}"
    assert SETTING_FINDING in found, f"the fast check missed the new setting; it found {sorted(found)}"
    assert {change.role for change in fast.hosts[tampered].changes} == {"rdma_stack", "sriov", "nccl_env"}
    # No remediation here: the demo remediated its own edit, and the next test's apply repairs every case of
    # this one (its final check finds the fleet clean).


@pytest.fixture(scope="module")
def wheel_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gpufabric` from `pip install gpufabric` without extras: the wheel built from this checkout in a new
    virtual environment with the pinned versions of its own dependencies only (uv, as scripts/bootstrap-venv)."""
    work = tmp_path_factory.mktemp("wheel")
    python = Path(sys.executable)
    subprocess.run(
        [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", work, REPO],
        check=True,
        capture_output=True,
    )
    (wheel,) = work.glob("gpufabric-*.whl")
    uv = python.with_name("uv")
    subprocess.run([uv, "venv", "-q", "--python", python, work / "venv"], check=True, capture_output=True)
    venv_python = work / "venv" / "bin" / "python"
    install = [uv, "pip", "install", "-q", "--python", venv_python, "-c", REPO / "constraints.txt", wheel]
    subprocess.run(install, check=True, capture_output=True)
    # No extras: no plotting library (verify says how to get the plot), and no test tooling.
    probe = "import importlib.util as u; print(u.find_spec('matplotlib') is None, u.find_spec('pytest') is None)"
    assert subprocess.run([venv_python, "-c", probe], capture_output=True, text=True, check=True).stdout.split() == [
        "True",
        "True",
    ]
    return work / "venv" / "bin" / "gpufabric"


def test_host_stopped_in_the_middle_of_apply(demo, wheel_cli: Path, tmp_path: Path) -> None:
    done, fleet, _output = demo
    assert done.returncode == 0, "the demo must leave a converged lab"
    survivor, victim = fleet.hosts[0].name, fleet.hosts[1].name
    # Give apply real work on both hosts, so the victim is stopped while the play is busy.
    for host in (survivor, victim):
        _sh(fleet, host, TAMPERS["env key changed"][0])
    stopped = threading.Event()

    def progress(line: str) -> None:
        # Stop the victim once the play is inside the roles, from another thread (podman stop takes seconds).
        if not stopped.is_set() and "rdma_stack" in line:
            stopped.set()
            threading.Thread(target=lab.stop_host, args=(fleet, victim), daemon=True).start()

    options = fleet_apply.ApplyOptions(inventory=str(fleet.inventory), artifacts=tmp_path / "apply")
    result = fleet_apply.execute(options, progress)
    assert stopped.is_set()
    assert result.exit_code == 1
    assert result.hosts[survivor].failed == 0 and result.hosts[survivor].unreachable == 0
    assert result.hosts[victim].unreachable > 0 or result.hosts[victim].failed > 0

    lab.start_host(fleet, victim)
    # The rerun is the README's install for users: the wheel without extras, in a virtual environment of its own.
    # It repairs the stopped host only: the survivor finished above, and the check below covers both.
    rerun = subprocess.run(
        [str(wheel_cli), "apply", "-i", str(fleet.inventory), "-l", victim, "--artifacts", str(tmp_path / "rerun")],
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")},
        check=False,
    )
    assert rerun.returncode == 0, rerun.stdout[-5000:] + rerun.stderr[-5000:]
    clean = fleet_drift.check(
        fleet_drift.DriftOptions(inventory=str(fleet.inventory), artifacts=tmp_path / "check"), lambda line: None
    )
    assert clean.exit_code == 0, [h.state for h in clean.hosts.values()]
