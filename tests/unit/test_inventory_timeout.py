# SPDX-License-Identifier: Apache-2.0
"""An inventory that never finishes (a script or plugin that hangs) ends every command with one clear error
after $GPUFABRIC_INVENTORY_TIMEOUT seconds, instead of hanging it; a bad value of the variable is refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from unit.test_cli import assert_clean_error


def _hanging_script(tmp_path: Path) -> Path:
    script = tmp_path / "inventory.sh"
    script.write_text("#!/bin/sh\nexec sleep 30\n")  # what a script waiting on a dead API looks like
    script.chmod(0o755)
    return script


def test_an_inventory_that_never_ends_times_out(gpufabric, tmp_path: Path) -> None:
    script = _hanging_script(tmp_path)
    start = time.monotonic()
    result = gpufabric("plan", "-i", str(script), env={"GPUFABRIC_INVENTORY_TIMEOUT": "2"})
    assert time.monotonic() - start < 25
    assert_clean_error(
        result,
        f"cannot read inventory '{script}': ansible-inventory did not finish within 2 s",
        "GPUFABRIC_INVENTORY_TIMEOUT sets the limit in seconds",
    )


@pytest.mark.parametrize("value", ["0", "abc", "1.5", "-3", "\u00b2", "86401"])
def test_a_bad_inventory_timeout_is_refused(gpufabric, tmp_path: Path, value: str) -> None:
    result = gpufabric("plan", "-i", "localhost,", env={"GPUFABRIC_INVENTORY_TIMEOUT": value})
    assert_clean_error(
        result, f"GPUFABRIC_INVENTORY_TIMEOUT={value!r} (environment): not a timeout", "whole seconds from 1 to 86400"
    )
