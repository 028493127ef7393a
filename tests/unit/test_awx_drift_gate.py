# SPDX-License-Identifier: Apache-2.0
"""playbooks/awx/drift.yml: in check mode a host that would change fails (so the AWX job fails), a clean
one passes, a Run job is never gated; with ansible.builtin.junit's JUNIT_FAIL_ON_CHANGE the change is a
JUnit failure. playbooks/awx/drift_fast.yml: a host that drifted from its record, or has none, fails, in a
Run and a Check job. Real ansible-playbook over local connections; the gates' own files, a stand-in site.yml
and drift_check.yml (the real modules, each host's record under the test's directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpufabric.collection import collection_root, collections_path

AWX = collection_root() / "playbooks" / "awx"
# Writes one file per host: a host whose file is there already is clean, the other would change.
STAND_IN_SITE = """
- name: Stand-in for site.yml
  hosts: all
  gather_facts: false
  tasks:
    - name: Write the host's file
      ansible.builtin.copy:
        content: "hello {{ inventory_hostname }}\\n"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        mode: "0644"
"""


def playbook(
    playbook: Path, inventory: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "JUNIT_"))}
    base.update(ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1", **(env or {}))
    command = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), *args, str(playbook)]
    return subprocess.run(command, capture_output=True, text=True, env=base, check=False, timeout=120)


# The real drift_check module, as playbooks/drift_check.yml calls it, over a record file per host.
STAND_IN_DRIFT_CHECK = """
- name: Stand-in for drift_check.yml
  hosts: all
  gather_facts: false
  tasks:
    - name: Compare the host with the record of its last apply
      gpufabric.cluster.drift_check:
        roles: [nccl_env]
        plan: {profile: lab}
        path: "{{ out_dir }}/{{ inventory_hostname }}.json"
      register: gpufabric_drift_found
"""


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The gate's directory beside a stand-in site.yml, an inventory of two local hosts, their files."""
    shutil.copytree(AWX, tmp_path / "awx", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "site.yml").write_text(STAND_IN_SITE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu-1.txt").write_text("hello gpu-1\n")
    inventory = tmp_path / "hosts.ini"
    host = f"ansible_connection=local ansible_python_interpreter={sys.executable} out_dir={out}"
    inventory.write_text(f"gpu-1 {host}\ngpu-2 {host}\n")
    return tmp_path / "awx" / "drift.yml", inventory, out


def test_a_check_job_fails_the_drifted_host_only_and_junit_counts_the_change(project, tmp_path: Path) -> None:
    gate, inventory, out = project
    junit = tmp_path / "junit"
    env = {
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit",
        "JUNIT_OUTPUT_DIR": str(junit),
        "JUNIT_FAIL_ON_CHANGE": "true",
    }
    checked = playbook(gate, inventory, "--check", env=env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "DRIFT on gpu-2: 1 task(s) would change: Write the host's file" in checked.stdout
    assert "DRIFT on gpu-1" not in checked.stdout
    recap = {line.split()[0]: line for line in checked.stdout.splitlines() if " : ok=" in line}
    assert "failed=0" in recap["gpu-1"] and "failed=1" in recap["gpu-2"]
    assert not (out / "gpu-2.txt").exists(), "check mode changed nothing"
    (report,) = junit.glob("*.xml")
    failures = [
        case.get("name") for case in ET.parse(report).getroot().iter("testcase") if case.find("failure") is not None
    ]
    assert any("Write the host's file" in name and "gpu-2" in name for name in failures), failures
    assert not [name for name in failures if "gpu-1" in name]

    applied = playbook(gate, inventory)
    assert applied.returncode == 0, applied.stdout + applied.stderr  # a Run job changes and is not gated
    assert (out / "gpu-2.txt").is_file()
    clean = playbook(gate, inventory, "--check")
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_without_its_callback_the_gate_fails_rather_than_pass(project) -> None:
    gate, inventory, _out = project
    shutil.rmtree(gate.parent / "callback_plugins")
    run = playbook(gate, inventory, "--check")
    assert run.returncode == 2
    assert "the drift_gate callback did not load" in run.stdout


def test_the_real_playbook_passes_a_host_left_alone_on_purpose(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"gpu-1 ansible_connection=local ansible_python_interpreter={sys.executable} gpufabric_managed=false\n"
    )
    run = playbook(AWX / "drift.yml", inventory, "--check")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_fast_gate_fails_a_drifted_host_and_one_without_a_record(project, tmp_path: Path) -> None:
    gate, inventory, out = project
    (tmp_path / "drift_check.yml").write_text(STAND_IN_DRIFT_CHECK)
    managed = out / "nccl.conf"
    managed.write_text("NCCL_DEBUG=WARN\n")
    record = [
        str(Path(sys.executable).with_name("ansible")), "localhost", "-c", "local",
        "-e", f"ansible_python_interpreter={sys.executable}", "-m", "gpufabric.cluster.drift_record",
        "-a", f'{{"roles": [{{"name": "nccl_env", "files": ["{managed}"]}}], "plan": {{"profile": "lab"}}, '
        f'"path": "{out / "gpu-1.json"}"}}',
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    done = subprocess.run(
        record,
        capture_output=True,
        text=True,
        check=False,
        env={**env, "ANSIBLE_COLLECTIONS_PATH": str(collections_path())},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    fast_gate = gate.with_name("drift_fast.yml")
    for mode in ((), ("--check",)):  # a Run and a Check job gate alike: the check only reads
        run = playbook(fast_gate, inventory, *mode)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "DRIFT on gpu-1" not in run.stdout
        assert "DRIFT on gpu-2: nccl_env: record nccl_env. No record: run the apply job template once" in run.stdout
    managed.write_text("NCCL_DEBUG=INFO\n")
    run = playbook(fast_gate, inventory)
    assert f"DRIFT on gpu-1: nccl_env: files {managed}" in run.stdout, run.stdout
