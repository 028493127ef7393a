# SPDX-License-Identifier: Apache-2.0
"""The installer_run module through real ``ansible``, with a stand-in installer that logs its runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import ansible_module

# Writes the files named after `--write` into the current directory and logs each run; `--fail` exits 3.
STAND_IN = f"""#!{sys.executable}
import pathlib, sys
args = sys.argv[1:]
with open("runs", "a") as log:
    log.write(" ".join(args) + "\\n")
if "--fail" in args:
    print("unpacking"); print("error: no space left", file=sys.stderr); sys.exit(3)
for name in args[args.index("--write") + 1:]:
    pathlib.Path(name).write_text("installed\\n")
"""


@pytest.fixture
def host(tmp_path: Path) -> Path:
    installer = tmp_path / "install.sh"
    installer.write_text(STAND_IN)
    installer.chmod(0o755)
    (tmp_path / "lib").mkdir()
    return tmp_path


def args(host: Path, stamp: str = "registry/x@sha256:1", *extra: str) -> dict[str, Any]:
    return {
        "argv": [str(host / "install.sh"), *extra, "--write", "a.so", "b.so"],
        "chdir": str(host / "lib"),
        "stamp_file": str(host / "stamp"),
        "stamp": stamp,
        "creates": [str(host / "lib" / "a.so"), str(host / "lib" / "b.so")],
        "replaces": [str(host / "lib" / "old.so")],
    }


def ansible(ansible_env: dict[str, str], task_args: dict[str, Any], *extra: str) -> dict[str, Any]:
    return ansible_module.run(ansible_env, "installer_run", "-a", json.dumps(task_args), *extra)


def runs(host: Path) -> list[str]:
    log = host / "lib" / "runs"
    return log.read_text().splitlines() if log.exists() else []


def test_check_run_idempotent_and_a_moved_pin(host, ansible_env):
    (host / "lib" / "old.so").write_text("previous release\n")
    checked = ansible(ansible_env, args(host), "--check", "--diff")
    assert "failed" not in checked and "rc" not in checked
    assert (checked["changed"], checked["reason"]) == (True, "no stamp yet")
    assert checked["diff"] == {"before": "", "after": "registry/x@sha256:1\n"}
    assert runs(host) == [] and not (host / "stamp").exists() and (host / "lib" / "old.so").exists()

    ran = ansible(ansible_env, args(host), "--diff")
    assert (ran["changed"], ran["rc"]) == (True, 0)
    assert len(runs(host)) == 1 and not (host / "lib" / "old.so").exists()
    assert (host / "stamp").read_text() == "registry/x@sha256:1\n"
    assert oct((host / "stamp").stat().st_mode & 0o777) == "0o644"

    again = ansible(ansible_env, args(host), "--check", "--diff")
    assert "failed" not in again
    assert (again["changed"], again["reason"]) == (False, "")
    assert again["diff"]["before"] == again["diff"]["after"]
    assert ansible(ansible_env, args(host))["changed"] is False
    assert len(runs(host)) == 1

    moved = ansible(ansible_env, args(host, "registry/x@sha256:2"), "--check")
    assert moved["reason"] == "stamp records 'registry/x@sha256:1', not 'registry/x@sha256:2'"
    assert ansible(ansible_env, args(host, "registry/x@sha256:2"))["changed"] is True
    assert len(runs(host)) == 2 and (host / "stamp").read_text() == "registry/x@sha256:2\n"


def test_a_missing_file_runs_the_installer_again(host, ansible_env):
    ansible(ansible_env, args(host))
    (host / "lib" / "b.so").unlink()
    assert ansible(ansible_env, args(host), "--check")["reason"] == f"{host}/lib/b.so missing"
    assert ansible(ansible_env, args(host))["changed"] is True
    assert len(runs(host)) == 2 and (host / "lib" / "b.so").exists()


def test_a_failed_installer_writes_no_stamp(host, ansible_env):
    failed = ansible(ansible_env, args(host, "registry/x@sha256:1", "--fail"))
    assert failed["failed"] is True
    assert failed["msg"] == (
        f"`{host}/install.sh --fail --write a.so b.so (in {host}/lib)` exited with rc 3; the stamp is not written, "
        "so the next run runs it again. Last lines: unpacking | error: no space left"
    )
    assert not (host / "stamp").exists()


def test_an_installer_that_leaves_a_file_out_writes_no_stamp(host, ansible_env):
    task_args = args(host)
    task_args["argv"] = task_args["argv"][:-1]
    failed = ansible(ansible_env, task_args)
    assert failed["msg"] == (
        f"{host}/lib/b.so missing after `{host}/install.sh --write a.so (in {host}/lib)`; the stamp is not "
        "written, so the next run runs it again."
    )
    assert not (host / "stamp").exists()


def test_without_a_stamp_the_created_paths_alone_decide(host, ansible_env):
    task_args = {key: value for key, value in args(host).items() if key not in ("stamp_file", "stamp")}
    checked = ansible(ansible_env, task_args, "--check", "--diff")
    assert (checked["changed"], checked["reason"]) == (True, f"{host}/lib/a.so, {host}/lib/b.so missing")
    assert checked["diff"]["before"] == f"{host}/lib/a.so: absent\n{host}/lib/b.so: absent\n"
    assert ansible(ansible_env, task_args)["changed"] is True
    assert ansible(ansible_env, task_args)["changed"] is False
    assert len(runs(host)) == 1 and not (host / "stamp").exists()

    failed = ansible(ansible_env, {**task_args, "argv": [*task_args["argv"], "--fail"], "creates": [str(host / "c")]})
    assert failed["msg"] == (
        f"`{host}/install.sh --write a.so b.so --fail (in {host}/lib)` exited with rc 3. "
        "Last lines: unpacking | error: no space left"
    )
    neither = ansible(ansible_env, {"argv": ["true"]})
    assert neither["msg"] == "give stamp_file and stamp, or creates: without either nothing tells whether it ran"
