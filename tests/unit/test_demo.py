# SPDX-License-Identifier: Apache-2.0
"""`gpufabric demo` refuses what its steps cannot do before a container starts (the run itself: tests/lab)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpufabric import demo
from gpufabric.errors import UserError


def test_the_default_profile_can_be_tampered_with() -> None:
    demo.check(demo.Options())


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("aws/p5.48xlarge", "its environment sets no NCCL_IB_HCA, which the demo's tamper step edits"),
        ("nowhere/none", "not in the fabric catalog"),
    ],
)
def test_a_profile_the_demo_cannot_use_is_refused(profile: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        demo.check(demo.Options(profile=profile))


def test_cli_refuses_in_one_line_with_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpufabric", "demo", "--profile", "gcp/a3-megagpu-8g"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "sets no NCCL_IB_HCA" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
