# SPDX-License-Identifier: Apache-2.0
"""The container_image module through real ``ansible``, against a stand-in runtime first on PATH.

The stand-in keeps a store of references in a directory and logs its command lines, so check mode, the
diff, the options before the subcommand and the failures are seen as a user would see them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import ansible_module

RXDM = "registry.example/rxdm@sha256:" + "1" * 64
PLUGIN = "registry.example/plugin@sha256:" + "2" * 64

STAND_IN = f"""#!{sys.executable}
import hashlib, os, pathlib, sys
store = pathlib.Path(os.environ["STAND_IN_STORE"])
args = sys.argv[1:]
with open(store / "calls", "a") as log:
    log.write(" ".join(args) + "\\n")
entry = store / hashlib.sha256(args[-1].encode()).hexdigest()
if "inspect" in args:
    sys.exit(0 if entry.exists() else 125)
if "pull" in args:
    if "unreachable" in args[-1]:
        sys.exit("Error: initializing source: connection refused")
    entry.write_text(args[-1])
    sys.exit(0)
sys.exit("unexpected command")
"""


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    runtime = tmp_path / "bin" / "podman"
    runtime.write_text(STAND_IN)
    runtime.chmod(0o755)
    (tmp_path / "store").mkdir()
    return tmp_path / "store"


def ansible(ansible_env: dict[str, str], store: Path, args: dict[str, Any], *extra: str) -> dict[str, Any]:
    env = {"PATH": f"{store.parent / 'bin'}{os.pathsep}{ansible_env['PATH']}", "STAND_IN_STORE": str(store)}
    return ansible_module.run(ansible_env, "container_image", "-a", json.dumps(args), *extra, env=env)


def calls(store: Path) -> list[str]:
    log = store / "calls"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_check_pull_idempotent(store, ansible_env):
    # The runtime by its full path, as the roles give it.
    runtime = str(store.parent / "bin" / "podman")
    args = {"references": [RXDM, PLUGIN], "runtime": runtime, "runtime_options": ["--runtime", "crun"]}
    ansible(ansible_env, store, {"references": [RXDM]})
    calls(store)

    checked = ansible(ansible_env, store, args, "--check", "--diff")
    assert "failed" not in checked
    assert (checked["changed"], checked["present"], checked["pulled"]) == (True, [RXDM], [PLUGIN])
    assert checked["diff"] == {
        "before": f"{RXDM}: present\n{PLUGIN}: absent\n",
        "after": f"{RXDM}: present\n{PLUGIN}: present\n",
    }
    # Options go before the subcommand; check mode only asks.
    assert calls(store) == [
        f"--runtime crun image inspect --format {{{{.Id}}}} {RXDM}",
        f"--runtime crun image inspect --format {{{{.Id}}}} {PLUGIN}",
    ]

    pulled = ansible(ansible_env, store, args)
    assert (pulled["changed"], pulled["pulled"]) == (True, [PLUGIN])
    assert calls(store)[-1] == f"--runtime crun pull --quiet {PLUGIN}"

    again = ansible(ansible_env, store, args)
    assert (again["changed"], again["present"], again["pulled"]) == (False, [RXDM, PLUGIN], [])
    assert not any(" pull " in line for line in calls(store))


def test_a_runtime_not_installed_yet_is_an_empty_store_in_check_mode_only(store, ansible_env):
    args = {"references": [RXDM], "runtime": "no-such-runtime"}
    checked = ansible(ansible_env, store, args, "--check")
    assert "failed" not in checked
    assert (checked["changed"], checked["present"], checked["pulled"]) == (True, [], [RXDM])

    applied = ansible(ansible_env, store, args)
    assert applied["failed"] is True
    assert applied["msg"] == (
        f"option runtime 'no-such-runtime' is not installed (not found on PATH); install it before pulling {RXDM}."
    )


def test_a_failed_pull_names_the_reference_and_the_runtime_error(store, ansible_env):
    unreachable = "unreachable.example/rxdm@sha256:" + "3" * 64
    failed = ansible(ansible_env, store, {"references": [RXDM, unreachable]})
    assert failed["failed"] is True
    assert failed["msg"] == (
        f"podman could not pull {unreachable} (exit 1): Error: initializing source: connection refused"
    )
    # What came before the failure is in the store, and said so.
    assert failed["pulled"] == [RXDM]
    assert ansible(ansible_env, store, {"references": [RXDM]})["changed"] is False
