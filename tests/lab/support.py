# SPDX-License-Identifier: Apache-2.0
"""What the lab tests share: the lab under test, and ansible-runner runs over its inventory."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner

from gpufabric import lab as local_lab
from gpufabric.collection import collections_path


@dataclass
class LabUnderTest:
    lab: local_lab.Lab
    up_seconds: float
    progress: list[str] = field(default_factory=list)


def ansible_env(host_key_checking_off: bool = False) -> dict[str, str]:
    """This collection and the ansible beside this Python (ansible-runner adds them to this environment)."""
    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path()),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
        # Root over SSH without sudo prompts: pipelining saves a round trip per task (about 20% here).
        "ANSIBLE_PIPELINING": "True",
    }
    if host_key_checking_off:
        env["ANSIBLE_HOST_KEY_CHECKING"] = "False"  # what ansible-runner sets when nothing does
    return env


@dataclass
class Run:
    rc: int
    status: str
    seconds: float
    stats: dict[str, Any]
    changed: list[str]  # "host: task" of every changed result
    failed: list[str]  # "host: task: message" of every failed or unreachable result
    output: str


def run_ansible(inventory: Path, artifacts: Path, **kwargs: Any) -> Run:
    """ansible-runner over the lab inventory; kwargs go to ansible_runner.run (playbook or module)."""
    changed: list[str] = []
    failed: list[str] = []

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        where = f"{data.get('host')}: {data.get('task')}"
        result = data.get("res") if isinstance(data.get("res"), dict) else {}
        if event.get("event") == "runner_on_ok" and result.get("changed"):
            changed.append(where)
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            failed.append(f"{where}: {result.get('msg', '')}")
        return True

    kwargs.setdefault("envvars", ansible_env())
    artifacts.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpufabric-labtest-runner-") as private_dir:
        runner = ansible_runner.run(
            private_data_dir=private_dir,
            artifact_dir=str(artifacts),
            inventory=str(inventory),
            quiet=True,
            event_handler=handle,
            **kwargs,
        )
        output = runner.stdout.read()
        stats = runner.stats or {}
    return Run(runner.rc, runner.status, time.monotonic() - start, stats, changed, failed, output)
