# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the repo root, the collection on ANSIBLE_COLLECTIONS_PATH, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.collection import collections_path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def ansible_env() -> dict[str, str]:
    """Environment for ansible-* commands that finds this collection and nothing stale."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "GPUFABRIC_"))}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections_path()),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


@pytest.fixture
def gpufabric(ansible_env: dict[str, str]):
    """Run the real CLI in a subprocess; returns CompletedProcess with text output."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "gpufabric"), *args],
            capture_output=True,
            text=True,
            env={**ansible_env, "COLUMNS": "200", **(env or {})},
            cwd=REPO,
            check=False,
        )

    return run
