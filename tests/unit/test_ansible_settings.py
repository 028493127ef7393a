# SPDX-License-Identifier: Apache-2.0
"""The stock and tuned Ansible settings sets, and examples/ansible.cfg holding the tuned one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufabric import ansible_settings
from gpufabric.errors import UserError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "ansible.cfg"
BIN = Path(sys.executable).parent


def test_stock_changes_nothing() -> None:
    assert ansible_settings.settings("stock", 1000) == []
    assert ansible_settings.environment(ansible_settings.stock()) == {}


def test_stock_takes_only_what_is_asked() -> None:
    chosen = ansible_settings.environment(ansible_settings.stock(forks=7, strategy="free"))
    assert chosen == {"ANSIBLE_FORKS": "7", "ANSIBLE_STRATEGY": "free"}


def test_tuned_set(tmp_path: Path) -> None:
    env = ansible_settings.environment(ansible_settings.tuned(20, state=tmp_path))
    assert env == {
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=300s",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp"),
        "ANSIBLE_FORKS": "20",
        "ANSIBLE_CACHE_PLUGIN": "jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp_path / "facts"),
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "3600",
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_STRATEGY": "linear",
    }
    # Host key checking is not a tuning: no set may touch it.
    assert "ANSIBLE_HOST_KEY_CHECKING" not in env


def test_every_setting_says_why(tmp_path: Path) -> None:
    for setting in ansible_settings.tuned(3, state=tmp_path):
        assert setting.env.startswith("ANSIBLE_") and setting.key and setting.section
        assert len(setting.why) > 20, setting


@pytest.mark.parametrize(("hosts", "forks"), [(0, 5), (1, 5), (5, 5), (6, 6), (49, 49), (50, 50), (4000, 50)])
def test_forks_follow_the_run_within_bounds(hosts: int, forks: int) -> None:
    assert ansible_settings.forks_for(hosts) == forks
    env = ansible_settings.environment(ansible_settings.tuned(hosts, state=Path("/s")))
    assert env["ANSIBLE_FORKS"] == str(forks)


def test_forks_and_strategy_can_be_chosen() -> None:
    env = ansible_settings.environment(ansible_settings.tuned(1000, state=Path("/s"), forks=200, strategy="free"))
    assert env["ANSIBLE_FORKS"] == "200"
    assert env["ANSIBLE_STRATEGY"] == "free"


def test_unknown_names_are_user_errors() -> None:
    with pytest.raises(UserError, match=r"unknown Ansible settings 'fast'; accepted: stock, tuned"):
        ansible_settings.settings("fast", 1)
    with pytest.raises(UserError, match=r"unknown Ansible strategy 'mitogen'"):
        ansible_settings.tuned(1, state=Path("/s"), strategy="mitogen")


def test_state_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert ansible_settings.state_dir() == tmp_path / "gpufabric"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ansible_settings.os, "geteuid", lambda: 1000)
    assert ansible_settings.state_dir() == tmp_path / "home" / ".local" / "state" / "gpufabric"
    monkeypatch.setattr(ansible_settings.os, "geteuid", lambda: 0)
    assert ansible_settings.state_dir() == Path("/var/lib/gpufabric"), "root: the FHS place, systemd's StateDirectory"


def test_a_control_directory_too_long_for_a_socket_is_left_to_ansible() -> None:
    long = ansible_settings.tuned(2, state=Path("/" + "d" * 80))
    kept = ansible_settings.environment(ansible_settings.without_long_control_dir(long))
    assert "ANSIBLE_SSH_CONTROL_PATH_DIR" not in kept
    assert len(kept) == len(long) - 1
    short = ansible_settings.tuned(2, state=Path("/var/lib/gpufabric/.local/state/gpufabric"))
    assert ansible_settings.without_long_control_dir(short) == short


def test_prepare_makes_private_directories(tmp_path: Path) -> None:
    ansible_settings.prepare(ansible_settings.tuned(2, state=tmp_path / "state"))
    for name in ("cp", "facts"):
        assert (tmp_path / "state" / name).stat().st_mode & 0o777 == 0o700


def test_example_ansible_cfg_is_the_tuned_set() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == ansible_settings.ansible_cfg(ansible_settings.example()), (
        "examples/ansible.cfg differs from the tuned set: regenerate it with "
        "python -c 'from gpufabric import ansible_settings as a; print(a.ansible_cfg(a.example()), end=\"\")'"
    )


def _dump(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """What Ansible itself reads from the environment given: every changed setting, plugins' too."""
    clean = {key: value for key, value in env.items() if not key.startswith("ANSIBLE_")}
    result = subprocess.run(
        [str(BIN / "ansible-config"), "dump", "--only-changed", "-t", "all", "--format", "json"],
        capture_output=True,
        text=True,
        env={**clean, "HOME": str(cwd), **{k: v for k, v in env.items() if k.startswith("ANSIBLE_")}},
        cwd=cwd,
        check=True,
    )
    values: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, prefix)
        elif isinstance(node, dict) and "name" in node and "value" in node:
            if node["name"] != "CONFIG_FILE":
                values[prefix + node["name"]] = node["value"]
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}/")

    walk(json.loads(result.stdout), "")
    return values


def test_ansible_reads_the_example_file_as_it_reads_the_tuned_environment(tmp_path: Path) -> None:
    """Not only the same text: Ansible's own view of both is the same, every setting changed."""
    from_env = _dump({**os.environ, **ansible_settings.environment(ansible_settings.example())}, tmp_path)
    from_file = _dump({**os.environ, "ANSIBLE_CONFIG": str(EXAMPLE)}, tmp_path)
    assert from_file == from_env
    assert from_env["DEFAULT_FORKS"] == ansible_settings.FORKS_MAX
    assert from_env["ANSIBLE_PIPELINING"] is True
    assert from_env["DEFAULT_GATHERING"] == "smart"
    connection = {key: value for key, value in from_env.items() if key.startswith("CONNECTION_PLUGINS/ssh/")}
    assert connection["CONNECTION_PLUGINS/ssh/ssh_args"] == "-C -o ControlMaster=auto -o ControlPersist=300s"
    assert connection["CONNECTION_PLUGINS/ssh/control_path_dir"] == "~/.local/state/gpufabric/cp"
