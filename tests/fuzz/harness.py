# SPDX-License-Identifier: Apache-2.0
"""The bad-input suite's one harness: a case is a `gpufabric` command line run in a subprocess.

Each case gets its own scratch directory (the working directory of the command), built by `setup`;
its command line may name files there as {tmp}. The harness asserts what every bad input must give:
the expected exit code, no traceback, exactly one `error:` line on stderr and that it names the
input (`names`), and that the paths in `untouched` are exactly as they were before (content, type,
link target, or absence). A case that is not an error (a warning, a non-zero drift state) sets
`error_line=False` and checks the rest in `expect`.

Count the cases and how many give a clear error: `python -m pytest tests/fuzz -q -p no:randomly`.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str
    tmp: Path


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    names: str = ""  # text the one error line must contain: the bad value or the file that holds it
    exit_code: int = 1  # bad input, as every command exits on it (gpufabric.errors.EXIT_FAILED)
    setup: Callable[[Path], None] | None = None
    untouched: tuple[str, ...] = ()  # paths under tmp that the command must leave exactly as they were
    error_line: bool = True
    expect: Callable[[Result], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    timeout: float = 60.0


def _snapshot(path: Path) -> tuple[str, object]:
    """What `untouched` compares: the kind of the path and its content or link target."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return ("absent", None)
    if stat.S_ISLNK(mode):
        return ("symlink", os.readlink(path))
    if stat.S_ISDIR(mode):
        return ("directory", sorted(p.name for p in path.iterdir()))
    if stat.S_ISREG(mode):
        return ("file", path.read_bytes())
    return ("special", stat.S_IFMT(mode))


STATE = "state"


def run(case: Case, tmp: Path, in_process: bool = True) -> Result:
    """Run the case's command line and assert what every bad input must give. ``in_process``: call the CLI's
    main() in this process (a second instead of a Python start per case, for the generated suite's many cases
    that end before any subprocess); the environment, working directory and standard streams are the case's for
    the call, and a case that runs past its time limit fails instead of hanging the suite."""
    if case.setup is not None:
        case.setup(tmp)
    before = {name: _snapshot(tmp / name) for name in case.untouched}
    argv = [arg.replace("{tmp}", str(tmp)) for arg in case.argv]
    # Nothing from the caller's ANSIBLE_* or GPUFABRIC_* settings leaks in; ansible-* found beside python.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "GPUFABRIC_"))}
    env.update(NO_COLOR="1", COLUMNS="200", PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    # gpufabric's state directory (default run artifacts, fact cache) inside the case's directory.
    env["XDG_STATE_HOME"] = str(tmp / STATE)
    env.update(case.env)
    env = {key: value.replace("{tmp}", str(tmp)) for key, value in env.items()}
    if in_process and case.stdin is None:
        done = _in_process(argv, tmp, env, case.timeout)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "gpufabric", *argv],
            cwd=tmp,
            env=env,
            input=case.stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=case.timeout,
            check=False,
        )
    result = Result(done.returncode, done.stdout, done.stderr, tmp)
    shown = (
        f"$ gpufabric {' '.join(argv)}\n--- exit {done.returncode}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, shown
    assert done.returncode == case.exit_code, shown
    if case.error_line:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, shown
        assert case.names.replace("{tmp}", str(tmp)) in errors[0], shown
    for name, snapshot in before.items():
        assert _snapshot(tmp / name) == snapshot, f"{name} was changed\n{shown}"
    if case.expect is not None:
        case.expect(result)
    return result


class _TimedOut(Exception):
    pass


def _in_process(argv: list[str], tmp: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    from gpufabric import cli

    def expire(_signum: int, _frame: object) -> None:
        raise _TimedOut(f"gpufabric {' '.join(argv)} ran past {timeout:g} s")

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    code: int | str | None = 0
    try:
        os.chdir(tmp)
        with (
            mock.patch.dict(os.environ, env, clear=True),
            mock.patch.object(sys, "argv", ["gpufabric", *argv]),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(argv, returncode, out.getvalue(), err.getvalue())
