# SPDX-License-Identifier: Apache-2.0
"""Errors the CLI turns into one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

EXIT_USAGE = 2  # bad input: unknown tier, malformed catalog, unreadable inventory


class UserError(Exception):
    """Bad input: the message names the value, where it came from and what is accepted."""

    exit_code = EXIT_USAGE
