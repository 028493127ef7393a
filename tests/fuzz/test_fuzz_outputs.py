# SPDX-License-Identifier: Apache-2.0
"""Output targets that must be refused at once, before any Ansible run, and left exactly as they were.

File targets (written as a regular file, atomically): inventory build -o, drift --json-file/--junit/--prom.
Directory targets (created or written into): k8s manifests -o, apply/drift/bake --artifacts, verify -o.
Each against a directory, a FIFO, a symlink to somewhere else, a path under a file, a place that
takes no new entry (/proc: root ignores mode bits, /proc refuses even root), a missing parent
(files only: a directory target is created with its parents), and /dev/null (files only).

drift's bad input exits 1, not 2: 2 means "drift found" to a scheduler (docs/drift.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fuzz.harness import Case, run

# One exit code for bad input in every command (gpufabric.errors): 2 is drift's "changes found" only.
USAGE = DRIFT_USAGE = 1
PROFILE = "aws/p5.48xlarge"

# A file option: (id, the command line before the target, the option, the exit code of bad input).
FILE_OPTIONS = [
    ("inventory-o", ("inventory", "build", "--source", "static", "--file", "{tmp}/fleet.yml"), "-o", USAGE),
    ("drift-json", ("drift", "-i", "localhost,"), "--json-file", DRIFT_USAGE),
    ("drift-junit", ("drift", "-i", "localhost,"), "--junit", DRIFT_USAGE),
    ("drift-prom", ("drift", "-i", "localhost,"), "--prom", DRIFT_USAGE),
    ("health-quarantine", ("health", "-i", "localhost,"), "--quarantine", USAGE),
    ("health-junit", ("health", "-i", "localhost,"), "--junit", USAGE),
]
DIRECTORY_OPTIONS = [
    ("k8s-o", ("k8s", "manifests", "-i", "localhost,"), "-o", USAGE),
    ("apply-artifacts", ("apply", "-i", "localhost,"), "--artifacts", USAGE),
    ("drift-artifacts", ("drift", "-i", "localhost,"), "--artifacts", DRIFT_USAGE),
    ("health-artifacts", ("health", "-i", "localhost,"), "--artifacts", USAGE),
    ("bake-artifacts", ("bake", "--profile", PROFILE, "--tag", "localhost/fuzz:1"), "--artifacts", USAGE),
    ("verify-o", ("verify", "-i", "localhost,"), "-o", USAGE),
]


def _directory(tmp: Path) -> None:
    (tmp / "target").mkdir()
    (tmp / "target" / "keep.txt").write_text("the operator's\n")


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "target")


def _symlink_to_a_file(tmp: Path) -> None:
    (tmp / "elsewhere").write_text("someone else's file\n")
    (tmp / "target").symlink_to(tmp / "elsewhere")


def _symlink_to_a_directory(tmp: Path) -> None:
    (tmp / "elsewhere").mkdir()
    (tmp / "target").symlink_to(tmp / "elsewhere")


def _a_file(tmp: Path) -> None:
    (tmp / "target").write_text("a file, not a directory\n")


def _foreign_files(tmp: Path) -> None:
    (tmp / "target").mkdir()
    (tmp / "target" / "mine.yaml").write_text("kind: ConfigMap\n")


# (id, setup, the target on the command line, what the error line names, paths that must stay as they were)
Target = tuple[str, Callable[[Path], None] | None, str, str, tuple[str, ...]]
FILE_TARGETS: list[Target] = [
    ("directory", _directory, "{tmp}/target", "{tmp}/target: is a directory", ("target",)),
    ("fifo", _fifo, "{tmp}/target", "{tmp}/target: is a FIFO", ("target",)),
    ("symlink", _symlink_to_a_file, "{tmp}/target", "{tmp}/target: is a symbolic link", ("target", "elsewhere")),
    (
        "under-a-file",
        _a_file,
        "{tmp}/target/out",
        "{tmp}/target/out: {tmp}/target is a file, not a directory",
        ("target",),
    ),
    ("unwritable", None, "/proc/gpufabric-out", "/proc/gpufabric-out: cannot create a file in /proc", ()),
    (
        "missing-parent",
        None,
        "{tmp}/missing/out",
        "{tmp}/missing/out: its directory {tmp}/missing does not exist",
        ("missing",),
    ),
    ("dev-null", None, "/dev/null", "/dev/null: is a character device", ()),
]
DIRECTORY_TARGETS: list[Target] = [
    ("file", _a_file, "{tmp}/target", "{tmp}/target: not a directory", ("target",)),
    ("fifo", _fifo, "{tmp}/target", "{tmp}/target: not a directory", ("target",)),
    ("symlink", _symlink_to_a_file, "{tmp}/target", "{tmp}/target: ", ("target", "elsewhere")),
    (
        "under-a-file",
        _a_file,
        "{tmp}/target/out",
        "{tmp}/target/out: {tmp}/target is a file, not a directory",
        ("target",),
    ),
    ("unwritable", None, "/proc/gpufabric-out", "/proc/gpufabric-out: cannot create a directory in /proc", ()),
]


def _cases() -> list[Case]:
    """Every output option against every bad target of its kind (file or directory)."""
    return [
        Case(
            f"{option_id}-{target_id}",
            (*argv, option, target),
            names=f"{option} {names}",
            exit_code=code,
            setup=setup,
            untouched=untouched,
        )
        for options, targets in ((FILE_OPTIONS, FILE_TARGETS), (DIRECTORY_OPTIONS, DIRECTORY_TARGETS))
        for option_id, argv, option, code in options
        for target_id, setup, target, names, untouched in targets
    ]


CASES = [
    *_cases(),
    # k8s manifests replaces its directory by a rename: a link to a directory is refused too.
    Case(
        "k8s-o-symlink-to-a-directory",
        ("k8s", "manifests", "-i", "localhost,", "-o", "{tmp}/target"),
        names="-o {tmp}/target: is a symbolic link",
        setup=_symlink_to_a_directory,
        untouched=("target", "elsewhere"),
    ),
    # --force replaces only files gpufabric wrote (listed in .gpufabric-manifests), never the operator's.
    Case(
        "k8s-o-force-foreign-file",
        ("k8s", "manifests", "-i", "localhost,", "-o", "{tmp}/target", "--force"),
        names="-o {tmp}/target: directory is not empty and holds mine.yaml, which gpufabric did not write",
        setup=_foreign_files,
        untouched=("target", "target/mine.yaml"),
    ),
    Case(
        "apply-artifacts-used",
        ("apply", "-i", "localhost,", "--artifacts", "{tmp}/target"),
        names="--artifacts {tmp}/target: already holds files",
        setup=_directory,
        untouched=("target", "target/keep.txt"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_output_target(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
