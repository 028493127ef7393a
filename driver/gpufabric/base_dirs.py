# SPDX-License-Identifier: Apache-2.0
"""The user's base directories ($HOME, $XDG_CACHE_HOME, $XDG_STATE_HOME), checked before gpufabric uses them.

A variable that is set must name an absolute path to a directory, or to an absent path whose nearest
existing ancestor is a directory (gpufabric creates the rest). The XDG Base Directory specification
calls a relative path invalid and says to ignore it; gpufabric refuses it instead, with one line naming
the variable: silently falling back would put the fact cache, runs and labs somewhere the user did not
ask for. An unset or empty variable takes its default, as the specification says.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpufabric.errors import UserError


def _checked(variable: str, value: str, default: str) -> Path:
    path = Path(value)
    accepted = f"accepted: an absolute directory (unset: {default})"
    if not path.is_absolute():
        raise UserError(f"{variable} {value!r} (environment): a relative path; {accepted}")
    # The path itself, or else its nearest existing ancestor (following links), must be a directory.
    for candidate in (path, *path.parents):
        try:
            exists = candidate.exists()
        except OSError:  # e.g. a path through a file: NotADirectoryError on some systems
            exists = False
        if exists:
            if not candidate.is_dir():
                what = "is a file" if candidate == path else f"is under {candidate}, a file"
                raise UserError(f"{variable} {value!r} (environment): {what}, not a directory; {accepted}")
            return path
    return path


def home() -> Path:
    """$HOME, checked; unset or empty: the account's home directory from the password database."""
    value = os.environ.get("HOME")
    if value:
        return _checked("HOME", value, "the account's home directory")
    return Path.home()


def cache_home() -> Path:
    """$XDG_CACHE_HOME, checked; unset or empty: ~/.cache."""
    value = os.environ.get("XDG_CACHE_HOME")
    if value:
        return _checked("XDG_CACHE_HOME", value, "~/.cache")
    return home() / ".cache"


def state_home() -> Path | None:
    """$XDG_STATE_HOME, checked; None when unset or empty (each caller has its own default)."""
    value = os.environ.get("XDG_STATE_HOME")
    return _checked("XDG_STATE_HOME", value, "~/.local/state, /var/lib/gpufabric for root") if value else None
