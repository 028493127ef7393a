# SPDX-License-Identifier: Apache-2.0
"""Text from outside reaches the terminal inert: control characters, escape sequences and bidi controls
are shown as escapes (gpufabric.terminal), in tables, errors and progress lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.terminal import sanitize

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "cuda_failure.txt"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1bc\x9b31m\u202eexe.txt"


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("plain host-1 ü", "plain host-1 ü"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"),
        ("bell\x07 cr\r del\x7f csi\x9b", "bell\\x07 cr\\x0d del\\x7f csi\\x9b"),
        ("\u202eevil\u2066\u200f\u2028", "\\u202eevil\\u2066\\u200f\\u2028"),
    ],
)
def test_sanitize_escapes_controls_and_bidi(given: str, shown: str) -> None:
    assert sanitize(given) == shown


def test_the_cli_prints_a_files_escape_sequences_inert(gpufabric, tmp_path: Path) -> None:
    """An error line of nccl-tests output (text of a file from a host) with an OSC title, a screen clear,
    a terminal reset, a C1 CSI and a bidi override: printed as escapes, the rest of the line intact."""
    text = FIXTURE.read_text().replace("an illegal memory access was encountered", HOSTILE)
    (tmp_path / "out.txt").write_text(text)
    result = gpufabric("nccl", "parse", str(tmp_path / "out.txt"))
    assert result.returncode == 1
    for stream in (result.stdout, result.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream and "\u202e" not in stream and "\x07" not in stream
    # (the parser drops the CSI screen clear itself; what is left is shown, not obeyed)
    assert "common.cu:892 '\\x1b]0;pwned" in result.stdout
    assert "\\x1bc\\x9b31m\\u202eexe.txt'" in result.stdout
