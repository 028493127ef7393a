# SPDX-License-Identifier: Apache-2.0
"""The health role on this machine over SIMULATED sysfs trees and a canned kernel log: a healthy host passes, a
faulty one fails only when asked, and check mode changes nothing.

It stands in for a molecule scenario (tests/unit/test_role_contracts.py names it): the role only reads, so real
ansible-playbook on localhost over a simulated tree runs every task it has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

catalog = plugin_utils("fabric_catalog").load_catalog()
BIN = Path(sys.executable).parent
PROFILE = "baremetal/hgx-h100-ib-ndr"

PLAY = """
- name: Judge the host's health
  hosts: all
  gather_facts: false
  vars:
    gpufabric_profile: {profile}
  roles:
    - role: gpufabric.cluster.health
      health_root: {root}
      health_fail_on: {fail_on}
      health_kernel_log_file: {log}
      health_previous_counters: {previous}
  post_tasks:
    - name: Show the verdicts
      ansible.builtin.debug:
        msg: "VERDICTS {{{{ health_verdicts | to_json }}}}"
"""


def run_role(tmp_path: Path, ansible_env, root: Path, log: str, fail_on: str = "fail", *args: str, previous=None):
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text(log, encoding="utf-8")
    if previous is None:
        previous = {f"mlx5_{index}/1": {"link_downed": 0, "symbol_error": 0} for index in range(8)}
    play = tmp_path / "play.yml"
    text = PLAY.format(profile=PROFILE, root=root, fail_on=fail_on, log=kernel_log, previous=json.dumps(previous))
    play.write_text(text, encoding="utf-8")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"sim ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(play), *args],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_healthy_host_passes_and_changes_nothing(tmp_path, ansible_env, check_mode):
    root = write_tree(catalog.get(PROFILE), tmp_path / "sim")
    result = run_role(tmp_path, ansible_env, root, "kernel: Linux version 6.1\n", "fail", *(["--check"] * check_mode))
    assert result.returncode == 0, result.stdout
    # No nvidia-smi or systemd answers for a SIMULATED root: those checks are listed as unknown, never passed.
    assert "GPU memory not judged: no answer from nvidia-smi (not asked: root is not /" in result.stdout
    assert "nvidia-fabricmanager: systemctl could not be asked" in result.stdout
    assert "changed=0" in result.stdout


def test_a_faulty_host_fails_only_when_asked(tmp_path, ansible_env):
    root = write_tree(catalog.get(PROFILE), tmp_path / "sim", Faults(nic_down=0))
    log = "kernel: NVRM: Xid (PCI:0000:1c:00): 79, GPU has fallen off the bus.\n"
    failed = run_role(tmp_path, ansible_env, root, log)
    assert failed.returncode != 0
    assert "sim is unhealthy (isolate)" in failed.stdout  # the strongest action: the port outranks the Xid
    assert "mlx5_0/1 is DOWN (Disabled); expected ACTIVE" in failed.stdout
    assert "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in failed.stdout

    reported = run_role(tmp_path, ansible_env, root, log, "never")
    assert reported.returncode == 0, reported.stdout
    line = next(line for line in reported.stdout.splitlines() if "VERDICTS" in line)
    verdicts = json.loads(json.loads("{" + line.strip().rstrip(",") + "}")["msg"].removeprefix("VERDICTS "))
    assert sorted((item["check"], item["action"]) for item in verdicts if item["status"] == "fail") == [
        ("fabric_port", "isolate"),
        ("xid", "reboot"),
    ]
