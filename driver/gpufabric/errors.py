# SPDX-License-Identifier: Apache-2.0
"""Errors the CLI turns into one line on stderr and an exit code, never a traceback; the exit codes themselves.

One scheme for every command, as `terraform plan -detailed-exitcode` has it (docs/operations.md, "Exit codes"):
0 success; 1 failure of any kind, bad input and usage errors included; 2 only from a command that detects changes
or findings (`gpufabric drift`, `gpufabric health`), when it found some. A scheduler can then count 2 as an answer
without ever mistaking a mistyped option for a drifted fleet or an unhealthy host.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a host failed or was unreachable, a check failed, bad input, a usage error
EXIT_CHANGES = 2  # drift: the fleet differs from what apply would make it; health: a host failed a check


class UserError(Exception):
    """Bad input: the message names the value, where it came from and what is accepted."""

    exit_code = EXIT_FAILED
