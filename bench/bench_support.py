# SPDX-License-Identifier: Apache-2.0
"""What several benches share: a baseline revision checked out beside the working tree, the collection of a tree
made importable, and the CPU time of a child process."""

from __future__ import annotations

import resource
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def baseline_worktree(revision: str, where: Path) -> Iterator[Path]:
    """``revision`` checked out at ``where`` (a temporary `git worktree`), removed on the way out."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(where), revision], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], check=False)


def link_collection(tree: Path, where: Path) -> Path:
    """A directory usable as ANSIBLE_COLLECTIONS_PATH holding ``tree`` as gpufabric.cluster."""
    link = where / "ansible_collections" / "gpufabric" / "cluster"
    link.parent.mkdir(parents=True)
    link.symlink_to(tree, target_is_directory=True)
    return where


def cpu_seconds(command: list[str], env: dict[str, str]) -> float:
    """User and system CPU seconds of ``command`` and every process it waited for; its output is dropped."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
