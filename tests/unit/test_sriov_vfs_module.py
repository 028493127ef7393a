# SPDX-License-Identifier: Apache-2.0
"""The sriov_vfs module run by real ``ansible`` against a SIMULATED tree.

The logic is tested in-process in test_sriov_logic.py; here argument parsing, check mode, the diff and
failures go through Ansible. A watch-mode simulated kernel reacts to the module's writes and an ``ip``
stand-in first on PATH answers for the tree's devices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufabric import simulated_sriov
from gpufabric.collection import plugin_utils
from tests.fixtures import ansible_module

catalog = plugin_utils("fabric_catalog").load_catalog()
BIN = Path(sys.executable).parent
PF, NETDEV = "0000:17:00.0", "ibp23s0"


@pytest.fixture
def tree(sriov_tree: Path) -> Path:
    return sriov_tree


def ansible(ansible_env: dict[str, str], tree: Path, args: dict[str, Any], *extra: str) -> dict[str, Any]:
    # The simulated kernel's `ip` stand-in first on PATH.
    path = {"PATH": f"{tree.parent / 'bin'}{os.pathsep}{ansible_env['PATH']}"}
    return ansible_module.run(ansible_env, "sriov_vfs", "-a", json.dumps(args), *extra, env=path)


def test_check_apply_idempotent(tree, ansible_env):
    args = {"pf": NETDEV, "num_vfs": 3, "sysfs_root": str(tree)}
    checked = ansible(ansible_env, tree, args, "--check", "--diff")
    assert checked["changed"] is True
    assert checked["actions"][0] == f"{PF}: sriov_numvfs 0 -> 3"
    assert (tree / f"sys/bus/pci/devices/{PF}/sriov_numvfs").read_text().strip() == "0"
    assert "num_vfs: 0\nvfs: []\n" in checked["diff"]["before"]
    assert "  - index: 2\n    pci_address: 0000:17:00.3\n" in checked["diff"]["after"]

    applied = ansible(ansible_env, tree, args, "--diff")
    assert applied["changed"] is True
    assert [line.split(" (was")[0] for line in applied["actions"]] == checked["actions"]
    assert applied["pf"]["pf_guid"] == "b8:ce:f6:03:00:12:00:01"
    assert [vf["node_guid"] for vf in applied["after"]["vfs"]] == [f"02:03:00:12:00:01:00:0{n}" for n in (1, 2, 3)]
    assert applied["diff"]["after"] == checked["diff"]["after"].replace("trust: null", "trust: false").replace(
        "spoofchk: null", "spoofchk: false"
    ).replace("vlan: null", "vlan: 0")

    again = ansible(ansible_env, tree, args)
    assert (again["changed"], again["actions"]) == (False, [])
    assert again["before"] == again["after"] == applied["after"]

    resized = ansible(ansible_env, tree, {**args, "num_vfs": 5})
    assert resized["actions"][0] == f"{PF}: sriov_numvfs 3 -> 0 -> 5"
    assert not (tree / simulated_sriov.REFUSALS_LOG).exists()


def test_errors_fail_the_task_and_change_nothing(tree, ansible_env):
    above = ansible(ansible_env, tree, {"pf": PF, "num_vfs": 17, "sysfs_root": str(tree)})
    assert above["failed"] is True
    assert above["msg"] == (
        f"option num_vfs 17 is above sriov_totalvfs 16 of {PF} ({NETDEV}); give 0..16 "
        "(or raise NUM_OF_VFS in firmware with mstconfig, then reboot)."
    )
    guid = ansible(
        ansible_env,
        tree,
        {"pf": PF, "num_vfs": 1, "sysfs_root": str(tree), "vfs": [{"index": 0, "guid": "xyz"}]},
    )
    assert guid["msg"].startswith("option vfs[0].guid 'xyz' is not a GUID")
    typo = ansible(ansible_env, tree, {"pf": PF, "num_vfs": 1, "sysfs_root": str(tree), "colour": 1})
    assert "colour" in typo["msg"]
    assert (tree / f"sys/bus/pci/devices/{PF}/sriov_numvfs").read_text().strip() == "0"


def test_module_documentation_renders(ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "gpufabric.cluster.sriov_vfs"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "address_scheme" in result.stdout
    assert "sriov_numvfs 4 -> 0 -> 8" in result.stdout
