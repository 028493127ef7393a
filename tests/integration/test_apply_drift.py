# SPDX-License-Identifier: Apache-2.0
"""`gpufabric drift` and `gpufabric apply` end to end against two podman containers.

The containers (localhost/gpufabric-debian:12) are reached with the containers.podman.podman
connection, as molecule/nccl_env does. A catalog override narrows gcp/a3-megagpu-8g's roles to
nccl_env (it writes /etc/nccl.conf and a profile.d script), so site.yml runs whole and fast. The
scenario: drift on fresh hosts (2), apply (0), drift (0), a hand edit on one host, drift (2, that
host and role only, the three reports), drift --remediate (0; the clean host never in the apply),
and a host whose container does not exist (unreachable, 1, never clean).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

IMAGE = "localhost/gpufabric-debian:12"
PROFILE = "gcp/a3-megagpu-8g"


def _podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


def _podman_ready() -> bool:
    return shutil.which("podman") is not None and _podman("image", "exists", IMAGE, check=False).returncode == 0


# Marked lab: it needs the images, so scripts/test runs it with the lab tests, after the images stage.
pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(not _podman_ready(), reason=f"podman with {IMAGE} (scripts/build-images) is needed"),
]


@dataclass
class Fleet:
    hosts: list[str]
    missing: str  # in the inventory, no container
    inventory: Path
    directory: Path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    directory = tmp_path_factory.mktemp("apply-drift")
    prefix = f"gpufabric-opstest-{os.getpid()}"
    hosts = [f"{prefix}-1", f"{prefix}-2"]
    catalog = directory / "catalog.yml"
    catalog.write_text(yaml.safe_dump({"profiles": {PROFILE: {"tiers": {"best": {"roles": ["nccl_env"]}}}}}))
    inventory = directory / "inventory.yml"
    missing = f"{prefix}-missing"
    inventory.write_text(
        yaml.safe_dump(
            {
                "opstest": {
                    "hosts": {name: {} for name in [*hosts, missing]},
                    "vars": {
                        "ansible_connection": "containers.podman.podman",
                        "ansible_python_interpreter": "/usr/bin/python3",
                        "gpufabric_profile": PROFILE,
                        "gpufabric_catalog_files": [str(catalog)],
                    },
                }
            }
        )
    )
    try:
        for name in hosts:
            # No systemd needed: nccl_env writes files only. A container that sleeps starts at once.
            _podman("run", "-d", "--name", name, "--hostname", name, IMAGE, "sleep", "infinity")
        yield Fleet(hosts, missing, inventory, directory)
    finally:
        for name in hosts:
            _podman("rm", "-f", "-t", "0", name, check=False)


@pytest.fixture
def run(fleet: Fleet, gpufabric: Any, tmp_path: Path):
    """The real command; its state directory and (unless given) its artifacts in the test's directories."""
    runs = iter(range(1, 100))

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        artifacts = [] if "--artifacts" in args else ["--artifacts", str(tmp_path / f"run-{next(runs)}")]
        env = {"XDG_STATE_HOME": str(fleet.directory / "state")}
        return gpufabric(*args, *artifacts, "-i", str(fleet.inventory), env=env)

    return command


def only_real_hosts(fleet: Fleet) -> list[str]:
    return ["--limit", ",".join(fleet.hosts)]


def job_events(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((directory / "job_events").glob("*.json"))]


def test_drift_apply_edit_and_remediate(fleet: Fleet, run: Any, tmp_path: Path) -> None:
    first, second = fleet.hosts

    fresh = run("drift", *only_real_hosts(fleet))
    assert fresh.returncode == 2, fresh.stdout + fresh.stderr
    assert fresh.stdout.count("DRIFTED") == 2
    assert "[check] 2/2 hosts done, 2 changed, 0 failed, 0 unreachable" in fresh.stderr, "plain progress lines"

    applied = run("apply", *only_real_hosts(fleet), "--artifacts", str(tmp_path / "apply"))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    table = [line for line in applied.stdout.splitlines() if first in line or second in line]
    assert len(table) == 2 and all("CHANGED" in line and " no " in line for line in table), applied.stdout
    assert f"artifacts: {tmp_path / 'apply' / 'apply'}" in applied.stdout
    assert (tmp_path / "apply" / "apply" / "job_events").is_dir()

    clean = run("drift", *only_real_hosts(fleet))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "2 clean, 0 drifted, 0 failed, 0 unreachable (exit 0)" in clean.stdout

    _podman("exec", second, "sh", "-c", "echo NCCL_DEBUG=INFO >> /etc/nccl.conf")
    reports = {"--json": tmp_path / "drift.json", "--junit": tmp_path / "drift.xml", "--prom": tmp_path / "drift.prom"}
    flags = [item for option, path in reports.items() for item in (option, str(path))]
    edited = run("drift", *only_real_hosts(fleet), *flags, "--diff")
    assert edited.returncode == 2, edited.stdout + edited.stderr
    drift_lines = [line for line in edited.stdout.splitlines() if line.startswith("drift ")]
    assert drift_lines == [f"drift {second} nccl_env: Write the NCCL configuration file"]
    assert "-NCCL_DEBUG=INFO" in edited.stdout, "the diff shows the hand edit going away"

    report = json.loads(reports["--json"].read_text())
    assert report["exit_code"] == 2 and report["hosts_by_state"] == {
        "unreachable": 0,
        "failed": 0,
        "drifted": 1,
        "clean": 1,
    }
    assert report["hosts"][first]["state"] == "clean"
    assert report["hosts"][second]["drifted_roles"] == ["nccl_env"]
    (change,) = report["hosts"][second]["roles"]["nccl_env"]["changes"]
    assert "-NCCL_DEBUG=INFO" in change["diffs"][0]["unified"]
    junit = ET.parse(reports["--junit"]).getroot()
    failures = [case for case in junit.iter("testcase") if case.find("failure") is not None]
    assert [(case.get("classname"), case.get("name")) for case in failures] == [(second, "nccl_env")]
    assert junit.get("failures") == "1" and junit.get("errors") == "0"
    prom = reports["--prom"].read_text()
    assert f'gpufabric_drift_host_drifted{{host="{second}"}} 1' in prom
    assert f'gpufabric_drift_host_drifted{{host="{first}"}} 0' in prom
    assert "gpufabric_drift_exit_code 2" in prom

    artifacts = tmp_path / "remediate"
    fixed = run(
        "drift", *only_real_hosts(fleet), "--remediate", "--artifacts", str(artifacts), "--json", str(reports["--json"])
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    for header in ("step 1/3: check 2 host(s)", f"step 2/3: remediate 1 drifted host(s): {second}", "step 3/3"):
        assert header in fixed.stdout
    assert json.loads(reports["--json"].read_text())["state"] == "clean", "the reports describe the final check"
    touched = {event["event_data"].get("host") for event in job_events(artifacts / "remediate")} - {None}
    assert touched == {second}, "the clean host is not in the remediation run"
    assert sorted(path.name for path in artifacts.iterdir()) == ["check", "final-check", "remediate"]
    conf = _podman("exec", second, "cat", "/etc/nccl.conf").stdout
    assert "NCCL_DEBUG=INFO" not in conf and "NCCL_FASTRAK_CTRL_DEV=eth0" in conf


def test_a_host_without_its_container_is_unreachable_never_clean(fleet: Fleet, run: Any, tmp_path: Path) -> None:
    report = tmp_path / "drift.json"
    result = run("drift", "--limit", f"{fleet.hosts[0]},{fleet.missing}", "--json", str(report))
    assert result.returncode == 1, result.stdout + result.stderr
    hosts = json.loads(report.read_text())["hosts"]
    assert hosts[fleet.missing]["state"] == "unreachable"
    assert hosts[fleet.hosts[0]]["state"] in ("clean", "drifted")
    assert f"unreachable {fleet.missing}" in result.stdout
