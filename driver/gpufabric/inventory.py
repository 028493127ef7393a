# SPDX-License-Identifier: Apache-2.0
"""Read any inventory Ansible reads, through `ansible-inventory --list` run by ansible-runner; its errors keep
their cause.

ansible-inventory tries every enabled plugin on a source and ends with one line that fits every failure
("No inventory was parsed"); the cause is in the plugins' warnings before it. `read` names that cause:
a missing file, bytes that are not UTF-8, or what the plugin for that kind of file said.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_runner.interface import init_command_config

from gpufabric.errors import UserError

# "[WARNING]: Failed to parse inventory with 'yaml' plugin: <the cause>"
_PLUGIN_FAILURE = re.compile(r"^\[WARNING\]: Failed to parse inventory with '([\w.]+)' plugin: (.+)$", re.MULTILINE)
# Which plugin's complaint is the one to show, by the file's suffix (the others failed only because
# the file was not theirs: the ini plugin always objects to a YAML file).
_PLUGIN_FOR_SUFFIX = {".yml": ("yaml", "auto"), ".yaml": ("yaml", "auto"), ".json": ("yaml", "auto"), ".ini": ("ini",)}
# What the yaml plugin says of a file that names an inventory plugin (`plugin: ...`): the file was not its own, and
# the cause is what the plugin the file names said, through the auto plugin (or by its own name where enabled).
_NOT_YAML_INVENTORY = "Plugin configuration YAML file, not YAML inventory"
# How long ansible-inventory may take (an inventory script or plugin that never ends would hang every command).
TIMEOUT_ENV = "GPUFABRIC_INVENTORY_TIMEOUT"
DEFAULT_TIMEOUT_S = 300
MAX_TIMEOUT_S = 86_400
# Ansible's own last words, shown only when nothing better was said.
_ERROR_LINE = re.compile(r"^\[ERROR\]: (.+)$", re.MULTILINE)


def source(inventory: str) -> str:
    """An existing file or directory as an absolute path (ansible-runner would read a relative one as
    inventory text); anything else (a host list, a plugin source) as it is."""
    return str(Path(inventory).resolve()) if Path(inventory).exists() else inventory


def _cause(inventory: str, stderr: str, returncode: int) -> str:
    """Why ansible-inventory could not read the source, in its own words where it gave them."""
    path = Path(inventory)
    if "," not in inventory and not path.exists():
        # Ansible reads a source without a comma as a path: a lone host name lands here too.
        return "no such file or directory (a list of hosts needs a comma, e.g. 'gpu-1,' or 'gpu-1,gpu-2')"
    if path.is_file():
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        except OSError as exc:
            return f"cannot read it: {exc.strerror or exc}"
    failures = dict(_PLUGIN_FAILURE.findall(stderr))
    if failures.get("yaml") == _NOT_YAML_INVENTORY and len(failures) > 1:
        failures.pop("yaml")
        failures.pop("ini", None)  # the ini plugin objects to every YAML file
    for plugin in _PLUGIN_FOR_SUFFIX.get(path.suffix.lower(), ("ini", "yaml", "auto")):
        if plugin in failures:
            return f"{failures[plugin]} ({plugin} inventory plugin)"
    if failures:
        plugin, message = next(iter(failures.items()))
        return f"{message} ({plugin} inventory plugin)"
    errors: list[str] = _ERROR_LINE.findall(stderr)
    if errors:
        return errors[-1]
    return stderr.strip().splitlines()[-1] if stderr.strip() else f"ansible-inventory exit {returncode}"


def _ansible_inventory(env: Mapping[str, str]) -> str:
    """The ansible-inventory beside this Python (a venv's, even when the venv is not on PATH), else the run's PATH."""
    beside = Path(sys.executable).with_name("ansible-inventory")
    found = str(beside) if beside.exists() else shutil.which("ansible-inventory", path=env.get("PATH"))
    if not found:
        raise UserError("ansible-inventory not found; install gpufabric with its dependencies (ansible-core)")
    return found


def _refuse_special_file(inventory: str) -> None:
    """An inventory path must be a file or a directory (of inventory files): ansible-inventory would wait
    forever on a FIFO without a writer, or read a device such as /dev/zero until memory runs out."""
    try:
        mode = os.stat(inventory).st_mode
    except (OSError, ValueError):  # absent, a host list, a plugin source: ansible-inventory says what is wrong
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    raise UserError(
        f"-i {inventory}: is {kind}, not a file; accepted: an inventory file, a directory of them, "
        "or a host list such as 'gpu-1,gpu-2'"
    )


def timeout() -> int:
    """$GPUFABRIC_INVENTORY_TIMEOUT: seconds ansible-inventory may take (default DEFAULT_TIMEOUT_S)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    if not re.fullmatch(r"[0-9]{1,6}", text) or not 1 <= int(text) <= MAX_TIMEOUT_S:
        raise UserError(
            f"{TIMEOUT_ENV}={text!r} (environment): not a timeout; accepted: whole seconds from 1 to {MAX_TIMEOUT_S} "
            f"(default {DEFAULT_TIMEOUT_S})"
        )
    return int(text)


def read(inventory: str, limit: list[str] | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`ansible-inventory --list` of the source (after --limit patterns): groups and _meta.hostvars.

    Run by ansible-runner with ``env`` (gpufabric.runs.base_env(): the collections, the user's ansible.cfg, the
    Ansible beside this Python), so the inventory plugins and settings are the ones a run loads."""
    _refuse_special_file(inventory)
    if env is None:
        from gpufabric.runs import base_env  # runs imports this module

        env = base_env()
    env = {**env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}
    # ansible-runner's command runner, not its get_inventory: get_inventory takes no --limit, gives no exit code and
    # looks ansible-inventory up on this process's PATH only (a pipx or cron gpufabric has no venv there).
    # Our own private data directory: ansible-runner would leave its temporary one behind. The inventory goes to a
    # file there, not to stdout: ansible-runner turns every line of stdout into an event it writes to disk, which
    # cost more than ansible-inventory itself on a large fleet (bench/plan_scale.py).
    timeout_s = timeout()
    with tempfile.TemporaryDirectory(prefix="gpufabric-inventory-") as private_dir:
        listing = Path(private_dir) / "inventory.json"
        arguments = ["--list", "--output", str(listing), "-i", source(inventory)]
        runner = init_command_config(
            _ansible_inventory(env),
            cmdline_args=arguments + (["--limit", ",".join(limit)] if limit else []),
            envvars=env,
            private_data_dir=private_dir,
            runner_mode="subprocess",
            quiet=True,
            timeout=timeout_s,
        )
        runner.run()
        with runner.stderr as stderr:
            errors, rc = stderr.read(), runner.rc
        out = listing.read_text(encoding="utf-8") if rc == 0 and listing.is_file() else ""
    if runner.timed_out:
        raise UserError(
            f"cannot read inventory {inventory!r}: ansible-inventory did not finish within {timeout_s} s "
            f"(an inventory script or plugin that hangs?); {TIMEOUT_ENV} sets the limit in seconds"
        )
    if rc != 0:
        raise UserError(f"cannot read inventory {inventory!r}: {_cause(inventory, errors or '', rc)}")
    try:
        data = json.loads(out)
    except json.JSONDecodeError as exc:
        raise UserError(f"cannot read inventory {inventory!r}: ansible-inventory printed no JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"cannot read inventory {inventory!r}: ansible-inventory printed no inventory")
    return data


def hosts(data: dict[str, Any]) -> set[str]:
    """Every host of an `ansible-inventory --list` result, in any group."""
    found: set[str] = set()
    for group, body in data.items():
        if group != "_meta" and isinstance(body, dict):
            found.update(body.get("hosts", []))
    return found


def host_vars(inventory: str, env: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Every host of the inventory with its merged variables (group_vars included)."""
    data = read(inventory, env=env)
    hostvars: dict[str, dict[str, Any]] = data.get("_meta", {}).get("hostvars", {})
    for name in hosts(data):
        hostvars.setdefault(name, {})
    return hostvars


def as_play_sees(value: Any, text: Callable[[str], Any] = str) -> Any:
    """Host vars as a play sees them. ansible-inventory --list prints an unsafe value (`!unsafe`, every value an
    inventory plugin sets) as {"__ansible_unsafe": text}: that is its text, never a template; every other string
    goes through ``text`` (supply.py marks them templates, as a play's inventory strings are)."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: as_play_sees(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [as_play_sees(item, text) for item in value]
    if isinstance(value, str):
        return text(value)
    return value
