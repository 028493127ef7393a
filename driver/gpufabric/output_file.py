# SPDX-License-Identifier: Apache-2.0
"""Where gpufabric writes what a command asked for: the one atomic writer and the checks before it.

Two kinds of output target, each checked before any work (so `drift --json-file X` fails at once, not
after an hour of Ansible):

- a FILE (`inventory build -o`, `drift --json-file/--junit/--prom`): written as a regular file, through a
  temporary file in the target's own directory, fsync'd and renamed into place (a reader sees the old
  file or the new one, never half of one). An existing path must be a regular file. A symbolic link
  is refused (the rename would replace the link itself, not the file it points to), and so is a
  directory, a FIFO, a socket or a device, /dev/null included (to discard a report, leave its option
  out). Its directory must exist and accept a new file: gpufabric creates no directory for a file.
- a DIRECTORY (`--artifacts`, `verify -o`, `k8s manifests -o`): written into, created with its parents
  when absent. An existing path must be a directory; the nearest existing ancestor of an absent one
  must be a directory (not a file) that accepts a new entry. A directory that gpufabric replaces by a
  rename (`k8s manifests -o`) must not be a symbolic link, for the same reason as a file; one that it
  only writes into may be a link to a directory.

An output must not be an input of the same run, nor another of its outputs: refuse_clobbers compares
them as files (the same inode, so through symbolic links and hard links too), before any work.

"Accepts a new entry" is tried, not guessed from mode bits (root ignores them; /proc and read-only
mounts do not): a temporary entry is created there and removed.

Every refusal is a UserError naming the option and the path: "--json /x/y.json: is a directory; ...".
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from gpufabric.errors import UserError

_SPECIAL = {
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "FIFO (named pipe)",
    stat.S_IFSOCK: "socket",
}


def _where(path: Path, option: str | None) -> str:
    return f"{option} {path}" if option else f"cannot write {path}"


def _lstat(path: Path) -> os.stat_result | None:
    """The path's own status (a link is not followed); None when absent. A parent that is a file
    ("under a file") is reported by _nearest_existing, so it reads as absent here."""
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _nearest_existing(path: Path) -> Path:
    """The closest ancestor of an absent path that exists (the path itself made absolute first)."""
    for ancestor in path.absolute().parents:
        if _lstat(ancestor) is not None:
            return ancestor
    return Path("/")


def _refuse_under_a_file(path: Path, option: str | None) -> Path:
    """The nearest existing ancestor of an absent path, which must be a directory."""
    ancestor = _nearest_existing(path)
    if not ancestor.is_dir():
        raise UserError(f"{_where(path, option)}: {ancestor} is a file, not a directory")
    return ancestor


def _try_create_in(directory: Path, path: Path, option: str | None, entry: str) -> None:
    """Create and remove a temporary entry in directory: the one honest test that it accepts one."""
    try:
        if entry == "file":
            descriptor, probe = tempfile.mkstemp(dir=directory, prefix=".gpufabric-probe-")
            os.close(descriptor)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=directory, prefix=".gpufabric-probe-"))
    except OSError as exc:
        raise UserError(
            f"{_where(path, option)}: cannot create a {entry} in {directory} ({exc.strerror or exc})"
        ) from None


def _refuse_existing(path: Path, option: str | None) -> bool:
    """Refuse an existing path that is not a regular file; True when a regular file is there."""
    status = _lstat(path)
    if status is None:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise UserError(
            f"{_where(path, option)}: is a symbolic link (to {os.readlink(path)}); gpufabric renames a new file "
            "into place, which would replace the link, not its target: give the real path"
        )
    if stat.S_ISDIR(status.st_mode):
        raise UserError(f"{_where(path, option)}: is a directory; give a file name")
    kind = _SPECIAL.get(stat.S_IFMT(status.st_mode))
    if kind is not None:
        raise UserError(
            f"{_where(path, option)}: is a {kind}, not a regular file; gpufabric writes regular files only "
            "(to discard a report, leave its option out)"
        )
    return True


def check_file(path: Path, option: str | None = None) -> None:
    """Refuse, before any work, a file target that write_atomically could not write as a regular file."""
    _refuse_existing(path, option)
    directory = path.absolute().parent
    if _lstat(directory) is None:
        ancestor = _refuse_under_a_file(directory, option)
        raise UserError(
            f"{_where(path, option)}: its directory {directory} does not exist (nearest existing: {ancestor}); "
            "the directory must exist and be writable"
        )
    if not directory.is_dir():
        raise UserError(f"{_where(path, option)}: {directory} is a file, not a directory")
    _try_create_in(directory, path, option, "file")


def check_directory(path: Path, option: str, *, replaced: bool = False) -> None:
    """Refuse, before any work, a directory target gpufabric could not create or write into.

    replaced: gpufabric swaps the whole directory by a rename (k8s manifests): a symbolic link is
    refused, and its parent must accept the staging directory too.
    """
    status = _lstat(path)
    if status is None:
        _try_create_in(_refuse_under_a_file(path, option), path, option, "directory")
        return
    if stat.S_ISLNK(status.st_mode) and replaced:
        raise UserError(
            f"{option} {path}: is a symbolic link (to {os.readlink(path)}); gpufabric replaces this directory "
            "by a rename, which would replace the link, not its target: give the real path"
        )
    if not path.is_dir():
        raise UserError(f"{option} {path}: not a directory; give a new or empty directory")
    _try_create_in(path, path, option, "directory")
    if replaced:
        _try_create_in(path.absolute().parent, path, option, "directory")


def write_atomically(
    path: Path, text: str, *, mode: int = 0o644, option: str | None = None, make_parents: bool = False
) -> None:
    """Write text (UTF-8) to path as a regular file, atomically: a temporary file in the same directory
    (a rename is atomic only within one file system), fsync'd, given `mode`, renamed into place.

    The target is checked again here, just before the write: it may have changed since check_file.
    make_parents: create a missing directory (gpufabric's own state, e.g. a lab's files); a file the
    user named never gets one.
    """
    _refuse_existing(path, option)
    directory = path.absolute().parent
    if make_parents:
        _refuse_under_a_file(directory, option)
        directory.mkdir(parents=True, exist_ok=True)
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        check_file(path, option)  # the clearest reason: a missing directory, one under a file
        raise UserError(
            f"{_where(path, option)}: {exc.strerror or exc} (the directory {directory} must exist and be writable)"
        ) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file 0600; report readers (node_exporter, CI) often run as another user.
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise UserError(f"{_where(path, option)}: {exc.strerror or exc}; nothing was written") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


Named = Iterable[tuple[str, "Path | str | None"]]


def _identity(path: Path) -> tuple[int, int] | str:
    """What makes two paths one file: its device and inode when it exists (links followed), else its
    real path (two absent outputs named through different links still collide)."""
    try:
        status = path.stat()
    except OSError:
        return os.path.realpath(path)
    return (status.st_dev, status.st_ino)


def refuse_clobbers(outputs: Named, inputs: Named = (), replaced: Named = ()) -> None:
    """Refuse, before any work, an output that is an input of the same run or another output of it: the
    one would overwrite the file the run reads, the other would keep only the last of two reports.

    outputs and inputs are (option, path) pairs; a None path (an option not given) is skipped, and so is
    an input that names no existing path (an inventory may be a host list, "a,b,"). replaced names the
    directories the run replaces whole (k8s manifests -o): no input may be one of them or lie inside one.
    """
    present = [(option, Path(given)) for option, given in inputs if given and Path(given).exists()]
    for option, given in replaced:
        if given is None or not Path(given).exists():
            continue
        directory = Path(os.path.realpath(given))
        for input_option, path in present:
            real = Path(os.path.realpath(path))
            if real == directory or directory in real.parents:
                raise UserError(
                    f"{option} {given} holds {input_option} {path}, which the run reads; gpufabric replaces "
                    f"{given} whole: give {option} a directory of its own"
                )
    seen: dict[tuple[int, int] | str, tuple[str, Path, str]] = {}
    for option, path in present:
        seen.setdefault(_identity(path), (option, path, "the input it reads"))
    for option, given in outputs:
        if given is None:
            continue
        path = Path(given)
        identity = _identity(path)
        if identity in seen:
            other_option, other, what = seen[identity]
            same = str(path) if str(path) == str(other) else f"{path} and {other}"
            raise UserError(
                f"{option} and {other_option} name the same file ({same}); gpufabric would overwrite {what}: "
                f"give {option} a path of its own"
            )
        seen[identity] = (option, path, "another of its outputs")
