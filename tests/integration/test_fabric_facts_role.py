# SPDX-License-Identifier: Apache-2.0
"""The fabric_facts role on this machine over simulated trees: passes healthy hardware, stops faulty hardware."""

from __future__ import annotations

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
- name: Hold the host to its profile
  hosts: all
  gather_facts: false
  vars:
    gpufabric_profile: {profile}
  roles:
    - role: gpufabric.cluster.fabric_facts
      fabric_facts_root: {root}
      fabric_facts_fail_on: {fail_on}
"""


def run_role(tmp_path: Path, ansible_env, root: Path, fail_on: str = "error", *args: str):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(profile=PROFILE, root=root, fail_on=fail_on), encoding="utf-8")
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
def test_healthy_hardware_passes(tmp_path, ansible_env, check_mode):
    root = write_tree(catalog.get(PROFILE), tmp_path / "sim")
    result = run_role(tmp_path, ansible_env, root, "error", *(["--check"] if check_mode else []))
    assert result.returncode == 0, result.stdout
    assert f"matches {PROFILE}" in result.stdout
    assert "changed=0" in result.stdout


def test_faulty_hardware_fails_with_sentences_naming_the_devices(tmp_path, ansible_env):
    root = write_tree(catalog.get(PROFILE), tmp_path / "sim", Faults(nics_missing=1, ib_port_rate_gbit_s=(0, 200)))
    result = run_role(tmp_path, ansible_env, root)
    assert result.returncode != 0
    assert f"sim does not have the hardware of {PROFILE}" in result.stdout
    assert "found 7 of 8 GPU-network NICs (connectx_ib)" in result.stdout
    assert "port 1 runs at 200 Gb/s; the profile expects 400 Gb/s" in result.stdout


def test_warnings_fail_only_when_asked(tmp_path, ansible_env):
    root = write_tree(catalog.get(PROFILE), tmp_path / "sim", Faults(modules_missing=("nvidia_peermem",)))
    assert run_role(tmp_path, ansible_env, root, "error").returncode == 0
    assert run_role(tmp_path, ansible_env, root, "never").returncode == 0
    failed = run_role(tmp_path, ansible_env, root, "warning")
    assert failed.returncode != 0
    assert "kernel module nvidia_peermem is not loaded" in failed.stdout
