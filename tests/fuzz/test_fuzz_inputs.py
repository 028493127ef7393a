# SPDX-License-Identifier: Apache-2.0
"""The generated suite: every input path of tests/fuzz/input_paths.py tried with every bad value of its kind.

Each case must end as every bad input does (tests/fuzz/harness.py): exit 1, no traceback, one line naming the
option or the value, nothing written, within the harness's time limit (a FIFO must not hang it). Commands that
would start containers find a podman that refuses to run, so a value accepted by mistake cannot start a lab.
The suite also fails for an option or environment variable of the driver that the table does not list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import typer

from gpufabric import cli
from tests.fuzz import harness, input_paths, test_fuzz_outputs
from tests.fuzz.harness import Case, run

REPO = harness.REPO


def _write(name: str, content: bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / name).write_bytes(content)

    return setup


def _directory(tmp: Path) -> None:
    (tmp / "bad").mkdir()


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "bad")


def _loop(tmp: Path) -> None:
    (tmp / "bad").symlink_to(tmp / "bad")


# (id, setup, the value, what the error line names besides the option)
Value = tuple[str, Callable[[Path], None] | None, str]
MISSING: Value = ("missing", None, "{tmp}/bad")
DIRECTORY: Value = ("directory", _directory, "{tmp}/bad")
FIFO: Value = ("fifo", _fifo, "{tmp}/bad")
NOT_UTF8: Value = ("not-utf8", _write("bad", b"profiles: \xff\xfe\n"), "{tmp}/bad")
LOOP: Value = ("symlink-loop", _loop, "{tmp}/bad")
A_FILE: Value = ("a-file", _write("bad", b"a file\n"), "{tmp}/bad")
ESCAPE = "\x1b[31mred"
BAD_VALUES: dict[str, list[Value]] = {
    "file": [MISSING, DIRECTORY, FIFO, NOT_UTF8, LOOP],
    "path": [MISSING, DIRECTORY, FIFO, LOOP],
    "directory": [MISSING, A_FILE, FIFO],
    "inventory": [MISSING, FIFO, NOT_UTF8],
    "count": [(value, None, value) for value in ("abc", "-1", "²", "1e3", "99999999999999999999")],
    "choice": [("unknown", None, "no-such-value"), ("empty", None, ""), ("escape", None, ESCAPE)],
    "cidr": [(value, None, value) for value in ("not-a-range", "10.0.0.0/33", "300.1.2.0/24")],
}


def _no_podman(tmp: Path) -> None:
    """A podman first on PATH that refuses to run: a lab or bake that was not refused stops here."""
    (tmp / "bin").mkdir(exist_ok=True)
    (tmp / "bin" / "podman").write_text("#!/bin/sh\necho 'fuzz: podman must not run' >&2\nexit 125\n")
    (tmp / "bin" / "podman").chmod(0o755)


def _fleet(tmp: Path) -> None:
    (tmp / "fleet.yml").write_text("hosts:\n  - name: gpu-1\n    address: 10.0.0.1\n    instance_type: p5.48xlarge\n")


def _setup(*steps: Callable[[Path], None] | None) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for step in steps:
            if step is not None:
                step(tmp)

    return setup


def _cases() -> list[Case]:
    cases = []
    for (command, option), kind in sorted(input_paths.OPTIONS.items()):
        for value_id, value_setup, value in BAD_VALUES.get(kind, []) if isinstance(kind, str) else []:
            given = [value] if option.isidentifier() and not option.startswith("-") else [option, value]
            # A positional argument's value goes where the base command line names it, else last.
            argv = (*command.split(), *input_paths.BASE[command], *given)
            if command == "catalog show" and option == "name":
                argv = (*command.split(), value)
            cases.append(
                Case(
                    f"{command.replace(' ', '-')}{option}-{value_id}",
                    argv,
                    names="",  # the check below: the option or the value, as the message quotes it
                    setup=_setup(_no_podman, _fleet, value_setup),
                    untouched=(harness.STATE, "bad"),
                    env={"PATH": f"{{tmp}}/bin{os.pathsep}{os.environ.get('PATH', '')}"},
                    expect=_names(option, value),
                    timeout=30.0,
                )
            )
    for variable, kind in sorted(input_paths.ENVIRONMENT.items()):
        for value_id, value_setup, value in BAD_VALUES.get(kind, []) if isinstance(kind, str) else []:
            cases.append(
                Case(
                    f"env-{variable}-{value_id}",
                    ("catalog", "list"),
                    setup=value_setup,
                    untouched=(harness.STATE, "bad"),
                    env={variable: value},
                    expect=_names(variable, value),
                    timeout=30.0,
                )
            )
    return cases


def _names(option: str, value: str) -> Callable[[harness.Result], None]:
    """The one error line (or click's usage box) names the option or the value, and no escape sequence from the
    value reaches the terminal raw."""

    def check(result: harness.Result) -> None:
        shown = value.replace("{tmp}", str(result.tmp))
        text = " ".join((result.stderr + result.stdout).split())
        assert "\x1b" not in result.stderr + result.stdout, text
        named = [option, shown, shown.encode("unicode_escape").decode(), repr(shown)[1:-1]]
        assert any(name and name in text for name in named) or (not shown and "''" in text), text

    return check


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_value_on_every_input_path(case: Case, tmp_path: Path) -> None:
    run(Case(**{**case.__dict__, "error_line": False}), tmp_path)


def _options() -> set[tuple[str, str]]:
    """Every (command, option) of the command line, as click sees it: the first spelling of each option."""
    found = set()

    def walk(command: object, path: list[str]) -> None:
        commands = getattr(command, "commands", None)
        if commands:
            for name, sub in commands.items():
                walk(sub, [*path, name])
            return
        for param in command.params:  # type: ignore[attr-defined]
            if param.name != "help":
                found.add((" ".join(path), param.opts[0] if param.opts[0].startswith("-") else param.name))

    walk(typer.main.get_command(cli.app), [])
    return found


def test_every_option_is_an_input_path_of_the_table():
    flags = {(command, option) for (command, option), kind in input_paths.OPTIONS.items() if kind == "flag"}
    listed = set(input_paths.OPTIONS)
    options = _options()
    boolean = {
        (command, option)
        for command, option in options
        if option in ("--json", "--probe", "--check", "--remediate", "--diff", "--fast", "--show-settings", "-K")
        or option in ("--keep", "--force", "--public", "--include-non-gpu", "--include-stopped", "--gatekeeper")
    }
    assert options - boolean - listed == set(), "options missing from tests/fuzz/input_paths.py"
    assert listed - options == set(), "rows of tests/fuzz/input_paths.py that name no option"
    assert flags <= options
    outputs = {(command, option) for (command, option), kind in input_paths.OPTIONS.items() if kind == "output"}
    fuzzed = {
        (" ".join(argv[: 2 if argv[0] in ("k8s", "inventory") else 1]), option)
        for _id, argv, option, _code in test_fuzz_outputs.FILE_OPTIONS + test_fuzz_outputs.DIRECTORY_OPTIONS
    }
    # demo and lab directories are fuzzed by the lab's own tests (tests/unit/test_lab_files.py)
    labs = {("demo", "--dir"), ("demo", "-o")} | {
        (command, "--dir") for command in ("lab up", "lab down", "lab status")
    }
    assert outputs - fuzzed - labs == set()


def test_every_environment_variable_the_driver_reads_is_in_the_table():
    read = set()
    for path in (REPO / "driver" / "gpufabric").glob("*.py"):
        read.update(re.findall(r"\b(GPUFABRIC_[A-Z_]+)\b", path.read_text()))
    assert read == set(input_paths.ENVIRONMENT)
