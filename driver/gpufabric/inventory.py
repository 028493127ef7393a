# SPDX-License-Identifier: Apache-2.0
"""Read any inventory Ansible reads, through `ansible-inventory --list`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpufabric.collection import collections_path
from gpufabric.errors import UserError


def _ansible_inventory() -> str:
    # Prefer the one installed beside this Python (a venv), then PATH.
    beside = Path(sys.executable).with_name("ansible-inventory")
    found = str(beside) if beside.exists() else shutil.which("ansible-inventory")
    if not found:
        raise UserError("ansible-inventory not found; install gpufabric with its dependencies (ansible-core)")
    return found


def host_vars(inventory: str) -> dict[str, dict[str, Any]]:
    """Every host of the inventory with its merged variables (group_vars included)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_INVENTORY_UNPARSED_FAILED="true")
    command = [_ansible_inventory(), "-i", inventory, "--list"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        reason = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        raise UserError(f"cannot read inventory {inventory!r}: {reason}")
    data = json.loads(result.stdout)
    hostvars: dict[str, dict[str, Any]] = data.get("_meta", {}).get("hostvars", {})
    for name in _all_hosts(data):
        hostvars.setdefault(name, {})
    return hostvars


def _all_hosts(data: dict[str, Any]) -> set[str]:
    hosts: set[str] = set()
    for group, body in data.items():
        if group != "_meta" and isinstance(body, dict):
            hosts.update(body.get("hosts", []))
    return hosts
