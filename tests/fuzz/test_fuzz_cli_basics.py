# SPDX-License-Identifier: Apache-2.0
"""Bad command-line values: refused at once with one line naming the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.harness import Case, run

CASES = [
    Case("plan-tier-unknown", ("plan", "-i", "localhost,", "--tier", "gold"), names="'gold'"),
    Case("catalog-show-unknown", ("catalog", "show", "nope/none"), names="'nope/none'"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
