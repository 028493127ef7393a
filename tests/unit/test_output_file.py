# SPDX-License-Identifier: Apache-2.0
"""gpufabric.output_file: the one atomic writer and the checks of file and directory targets."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gpufabric import output_file
from gpufabric.errors import UserError


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_write_replaces_a_regular_file_atomically_and_readably(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n")
    output_file.write_atomically(target, "new\n", option="--json")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert listing(tmp_path) == ["report.json"], "no temporary file left"
    output_file.write_atomically(target, "private\n", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_write_into_a_missing_directory_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^-o .*/new/hosts.yml: its directory .*/new does not exist"):
        output_file.write_atomically(tmp_path / "new" / "hosts.yml", "x\n", option="-o")
    assert listing(tmp_path) == []
    output_file.write_atomically(tmp_path / "state" / "lab.json", "{}\n", make_parents=True)
    assert (tmp_path / "state" / "lab.json").read_text() == "{}\n"


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


def _directory(path: Path) -> None:
    path.mkdir()


def _link_elsewhere(path: Path) -> None:
    (path.parent / "elsewhere.json").write_text("theirs\n")
    path.symlink_to(path.parent / "elsewhere.json")


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere")


NOT_A_REGULAR_FILE: list[tuple[str, Callable[[Path], None], str]] = [
    ("directory", _directory, "is a directory; give a file name"),
    ("fifo", _fifo, r"is a FIFO \(named pipe\), not a regular file"),
    ("socket", _socket, "is a socket, not a regular file"),
    ("symlink", _link_elsewhere, r"is a symbolic link \(to .*elsewhere.json\); .*give the real path"),
    ("dangling-symlink", _dangling_link, "is a symbolic link"),
]


@pytest.mark.parametrize(
    ("make", "message"), [(m, s) for _name, m, s in NOT_A_REGULAR_FILE], ids=[i for i, *_rest in NOT_A_REGULAR_FILE]
)
def test_a_path_that_is_not_a_regular_file_is_refused_and_untouched(
    tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    target = tmp_path / "out.prom"
    make(target)
    before = (listing(tmp_path), target.lstat().st_mode, target.lstat().st_ino)
    for check in (
        lambda: output_file.check_file(target, "--prom"),
        lambda: output_file.write_atomically(target, "x\n", option="--prom"),
    ):
        with pytest.raises(UserError, match=rf"^--prom {target}: {message}"):
            check()
        assert (listing(tmp_path), target.lstat().st_mode, target.lstat().st_ino) == before
    if target.is_symlink() and target.exists():
        assert target.read_text() == "theirs\n"


def test_a_device_is_refused_dev_null_too() -> None:
    with pytest.raises(UserError, match=r"^--json /dev/null: is a character device, not a regular file; .*leave"):
        output_file.check_file(Path("/dev/null"), "--json")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_file_under_a_file_or_in_a_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    with pytest.raises(UserError, match=rf"^--junit {tmp_path}/plain/out.xml: {tmp_path}/plain is a file"):
        output_file.check_file(tmp_path / "plain" / "out.xml", "--junit")
    with pytest.raises(UserError, match=rf"{tmp_path}/plain is a file, not a directory"):
        output_file.check_file(tmp_path / "plain" / "deeper" / "out.xml", "--junit")
    with pytest.raises(UserError, match=r"its directory .*/a/b does not exist \(nearest existing: .*\)"):
        output_file.check_file(tmp_path / "a" / "b" / "out.xml", "--junit")
    assert listing(tmp_path) == ["plain"]


def test_a_directory_that_takes_no_file_is_refused() -> None:
    # Root ignores mode bits; /proc takes no new file whoever asks.
    with pytest.raises(UserError, match=r"^-o /proc/hosts.yml: cannot create a file in /proc \("):
        output_file.check_file(Path("/proc/hosts.yml"), "-o")


def test_check_file_accepts_new_and_regular_files_and_leaves_nothing(tmp_path: Path) -> None:
    output_file.check_file(tmp_path / "new.json", "--json")
    (tmp_path / "old.json").write_text("old\n")
    output_file.check_file(tmp_path / "old.json", "--json")
    assert listing(tmp_path) == ["old.json"]
    assert (tmp_path / "old.json").read_text() == "old\n"
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        output_file.check_file(Path("relative.json"), "--json")
    finally:
        os.chdir(cwd)


def test_the_write_checks_again_a_target_that_changed_after_the_check(tmp_path: Path) -> None:
    target = tmp_path / "drift.json"
    output_file.check_file(target, "--json")
    os.mkfifo(target)  # appeared during the long run
    with pytest.raises(UserError, match="FIFO"):
        output_file.write_atomically(target, "{}\n", option="--json")
    assert stat.S_ISFIFO(target.lstat().st_mode)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "hosts.yml"
    target.write_text("old\n")

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(UserError, match=r"^-o .*hosts.yml: No space left on device; nothing was written"):
        output_file.write_atomically(target, "new\n", option="-o")
    assert target.read_text() == "old\n"
    assert listing(tmp_path) == ["hosts.yml"]


# --- directories --------------------------------------------------------------------------------------------


def test_check_directory_accepts_absent_empty_and_linked_directories(tmp_path: Path) -> None:
    output_file.check_directory(tmp_path / "a" / "b", "--artifacts")  # created later, with its parents
    (tmp_path / "empty").mkdir()
    output_file.check_directory(tmp_path / "empty", "--artifacts")
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    output_file.check_directory(tmp_path / "link", "--artifacts")  # written into: a link to a directory is fine
    assert listing(tmp_path) == ["empty", "link"]
    assert listing(tmp_path / "empty") == []


@pytest.mark.parametrize(
    ("make", "path", "message"),
    [
        (lambda tmp: (tmp / "file").write_text("x"), "file", "not a directory"),
        (lambda tmp: (tmp / "file").write_text("x"), "file/runs", "file is a file, not a directory"),
        (lambda tmp: os.mkfifo(tmp / "fifo"), "fifo", "not a directory"),
        (lambda tmp: (tmp / "link").symlink_to(tmp / "nowhere"), "link", "not a directory"),
    ],
    ids=["file", "under-a-file", "fifo", "dangling-link"],
)
def test_check_directory_refuses(tmp_path: Path, make: Callable[[Path], None], path: str, message: str) -> None:
    make(tmp_path)
    before = listing(tmp_path)
    with pytest.raises(UserError, match=rf"^--artifacts {tmp_path}/{path}: .*{message}"):
        output_file.check_directory(tmp_path / path, "--artifacts")
    assert listing(tmp_path) == before


def test_a_replaced_directory_must_not_be_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UserError, match=r"^-o .*/link: is a symbolic link \(to .*real\); .*replaces this directory"):
        output_file.check_directory(tmp_path / "link", "-o", replaced=True)


def test_a_place_that_takes_no_directory_is_refused() -> None:
    with pytest.raises(UserError, match=r"^--artifacts /proc/runs: cannot create a directory in /proc \("):
        output_file.check_directory(Path("/proc/runs"), "--artifacts")
    with pytest.raises(UserError, match=r"^-o /proc/self: cannot create a directory in /proc/self"):
        output_file.check_directory(Path("/proc/self"), "-o")


def test_refuse_clobbers_compares_files_not_names(tmp_path: Path) -> None:
    """Same inode through a relative name, a symbolic link or a hard link; absent outputs by real path;
    inputs that name no file (a host list) and options not given are skipped."""
    (tmp_path / "inv.yml").write_text("all: {}\n")
    (tmp_path / "link.yml").symlink_to(tmp_path / "inv.yml")
    os.link(tmp_path / "inv.yml", tmp_path / "hard.yml")
    (tmp_path / "dir-link").symlink_to(tmp_path)
    inputs = [("-i", str(tmp_path / "link.yml")), ("--catalog", None), ("-i", "gpu-1,gpu-2,")]
    for output in (tmp_path / "inv.yml", tmp_path / "hard.yml", tmp_path / "dir-link" / "inv.yml"):
        with pytest.raises(UserError, match=r"^--json-file and -i name the same file .*the input it reads"):
            output_file.refuse_clobbers([("--json-file", output)], inputs)
    with pytest.raises(UserError, match=r"^--prom and --junit name the same file .*another of its outputs"):
        output_file.refuse_clobbers([("--junit", tmp_path / "new"), ("--prom", tmp_path / "dir-link" / "new")])
    output_file.refuse_clobbers([("--json-file", tmp_path / "new"), ("--junit", None)], inputs)
