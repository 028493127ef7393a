# SPDX-License-Identifier: Apache-2.0
"""What gpufabric prints to a terminal: text from outside made inert.

Host names, cloud tags, NVLink domains, file contents, nccl output and error text come from outside: a
control character or escape sequence in them (OSC 8/52, ESC c, a cursor move, a bidi override) would be
obeyed by the terminal, hiding or forging what the operator reads. `sanitize` shows each as an escape
(``\\x1b``, ``\\u202e``) instead. SafeConsole applies it to every piece of text it prints, in tables,
errors and progress lines alike, and leaves alone the styles and cursor controls rich itself emits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

# C0 controls but tab and newline, DEL, C1 controls; bidi embeddings, overrides, isolates and marks;
# the Unicode line and paragraph separators.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def sanitize(text: str) -> str:
    """text with every control character and bidi control shown as an escape; tab and newline kept."""
    return UNSAFE.sub(_escape, text)


class SafeConsole(Console):
    """A rich Console whose printed text goes through sanitize (rich's own control segments do not)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(sanitize(segment.text), segment.style, segment.control)
            for segment in buffer
        )
