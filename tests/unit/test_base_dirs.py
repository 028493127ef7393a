# SPDX-License-Identifier: Apache-2.0
"""$HOME, $XDG_CACHE_HOME and $XDG_STATE_HOME: one clear error for a file or a relative path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufabric import ansible_settings, base_dirs, collection, lab_files
from gpufabric.errors import UserError


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    (tmp_path / "a-file").write_text("x\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_good_and_default_directories(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert base_dirs.cache_home() == base / "home" / ".cache"
    assert base_dirs.state_home() is None
    monkeypatch.setenv("XDG_STATE_HOME", "")  # empty: unset, as the XDG specification says
    assert base_dirs.state_home() is None
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "new" / "state"))  # absent: gpufabric creates it
    assert ansible_settings.state_dir() == base / "new" / "state" / "gpufabric"
    assert lab_files.default_directory("lab") == base / "new" / "state" / "gpufabric" / "lab" / "lab"
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    assert base_dirs.cache_home() == base


@pytest.mark.parametrize("variable", ["HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"])
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{base}/a-file", "is a file, not a directory"),
        ("{base}/a-file/under", "is under {base}/a-file, a file, not a directory"),
        ("relative/dir", "a relative path"),
        ("~/dir", "a relative path"),  # the shell expands ~; a literal one is not a path
    ],
)
def test_a_file_or_a_relative_path_is_one_clear_error(
    variable: str, value: str, reason: str, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, reason = value.format(base=base), reason.format(base=base)
    monkeypatch.setenv(variable, value)
    message = rf"^{variable} '{re.escape(value)}' \(environment\): {re.escape(reason)}; accepted: an absolute directory"
    with pytest.raises(UserError, match=message):
        if variable == "XDG_CACHE_HOME" or variable == "HOME":
            base_dirs.cache_home()
        else:
            ansible_settings.state_dir()
    if variable != "XDG_STATE_HOME":
        with pytest.raises(UserError, match=message):
            collection._cache_dir()
    if variable != "XDG_CACHE_HOME":
        with pytest.raises(UserError, match=message):
            lab_files.default_directory("lab")
