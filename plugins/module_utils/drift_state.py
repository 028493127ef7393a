# SPDX-License-Identifier: Apache-2.0
"""The live state of what a role manages on a host, and how it is compared with a record of it.

The fast drift path (docs/drift.md, "The fast path"): at the end of `apply` each role lists what it
manages and drift_record reads that back from the host, right after the role converged, into the
host's record file; `gpufabric drift` runs drift_check, which reads the same items again and compares.
Both modules read through `read_state` here, so what is recorded and what is compared come from one
reader and differ only when the host changed.

Kinds of item:
- files: an absolute path -> sha256 of the content, mode, owner and group (or absent), and the text of a small
  world-readable UTF-8 file (a configuration file, a unit), so that a drift report shows what changed in it;
- contents: a small text file such as /proc/sys/net/core/rmem_max or a PF's sriov_numvfs -> its text;
- packages: a package name -> version and whether it is held (dpkg; rpm: version only);
- units: a systemd unit -> UnitFileState (enabled, ...) and ActiveState (active, ...);
- kernel_modules: a module name -> whether /sys/module/<name> exists (loaded or built in).

Besides the state, each role's entry holds the digest of the host's plan and the digest of each of the role's
settings that the inventory or the command line sets (``role_settings``), so a desired state that moved is
drift even where the host did not.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import pwd
import shutil
import stat
from collections.abc import Callable, Mapping
from typing import Any

KINDS = ("files", "contents", "packages", "units", "kernel_modules")
RECORD_FORMAT = 1
ABSENT: dict[str, Any] = {"present": False}
# A contents item is a value the kernel or a role keeps in a small file; a larger one is a file.
MAX_CONTENT_BYTES = 4096
# A managed file up to this size, UTF-8 and readable by every user, is recorded with its text: the report shows the
# edit, and the record (0644) reveals nothing the file itself does not.
MAX_TEXT_BYTES = 64 * 1024

# run(argv) -> (rc, stdout, stderr): AnsibleModule.run_command, or a stand-in in the unit tests.
Runner = Callable[[list[str]], tuple[int, str, str]]


class DriftStateError(Exception):
    """A state that cannot be read (a command missing, a file unreadable); the message says which."""


def _name(lookup: Callable[[int], Any], number: int) -> str:
    try:
        return str(lookup(number)[0])
    except KeyError:
        return str(number)


def read_file(path: str) -> dict[str, Any]:
    """sha256, mode, owner and group of a regular file (a link is followed), with its text when it is small,
    world-readable and UTF-8 (MAX_TEXT_BYTES); ABSENT when missing."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return dict(ABSENT)
    except OSError as problem:
        raise DriftStateError(f"files: cannot read {path}: {problem.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        return {"type": "not a regular file"}
    digest = hashlib.sha256()
    small = bytearray()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                if len(small) <= MAX_TEXT_BYTES:
                    small += block
    except OSError as problem:
        raise DriftStateError(f"files: cannot read {path}: {problem.strerror}") from None
    read: dict[str, Any] = {
        "sha256": digest.hexdigest(),
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "owner": _name(pwd.getpwuid, info.st_uid),
        "group": _name(grp.getgrgid, info.st_gid),
    }
    if len(small) <= MAX_TEXT_BYTES and info.st_mode & stat.S_IROTH:
        with contextlib.suppress(UnicodeDecodeError):  # a keyring, a library: the checksum says it changed
            read["text"] = bytes(small).decode("utf-8")
    return read


def read_content(path: str) -> dict[str, Any]:
    """The text of a small file (a sysctl under /proc/sys, a sysfs attribute), stripped; ABSENT when missing."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONTENT_BYTES + 1)
    except FileNotFoundError:
        return dict(ABSENT)
    except OSError as problem:
        raise DriftStateError(f"contents: cannot read {path}: {problem.strerror}") from None
    if len(data) > MAX_CONTENT_BYTES:
        raise DriftStateError(f"contents: {path} holds over {MAX_CONTENT_BYTES} bytes; list it under files")
    return {"value": " ".join(data.decode("utf-8", "replace").split())}


def read_packages(names: list[str], run: Runner) -> dict[str, dict[str, Any]]:
    """Each package's installed version and hold: one dpkg-query (or rpm) call for all of them."""
    if not names:
        return {}
    found: dict[str, dict[str, Any]] = {}
    if shutil.which("dpkg-query"):
        # db:Status-Abbrev is "ii " for installed, "hi " for installed and held (the first letter is the selection).
        _rc, out, _err = run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n", *names])
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[2][1:2] == "i":
                found[parts[0]] = {"version": parts[1], "held": parts[2][:1] == "h"}
    elif shutil.which("rpm"):
        _rc, out, _err = run(["rpm", "-q", "--qf", "%{NAME}\t%{EPOCH}:%{VERSION}-%{RELEASE}\n", *names])
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == 2:
                found[parts[0]] = {"version": parts[1].replace("(none):", "")}
    else:
        raise DriftStateError("packages: neither dpkg-query nor rpm is on this host")
    return {name: found.get(name, dict(ABSENT)) for name in names}


def read_units(names: list[str], run: Runner) -> dict[str, dict[str, Any]]:
    """Each unit's UnitFileState and ActiveState: one `systemctl show` call for all of them."""
    if not names:
        return {}
    rc, out, err = run(["systemctl", "show", "-p", "Id", "-p", "UnitFileState", "-p", "ActiveState", "--", *names])
    if rc != 0:
        raise DriftStateError(f"units: systemctl show failed (exit {rc}): {err.strip() or out.strip()}")
    # One block per unit, in the order asked, each "Key=value" lines, blocks separated by a blank line.
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line) for block in out.split("\n\n")]
    blocks = [block for block in blocks if block]
    if len(blocks) != len(names):
        raise DriftStateError(f"units: systemctl show answered {len(blocks)} block(s) for {len(names)} unit(s)")
    return {
        name: {"enabled": block.get("UnitFileState", ""), "active": block.get("ActiveState", "")}
        for name, block in zip(names, blocks, strict=False)  # as many as names: checked above
    }


def read_kernel_modules(names: list[str], sys_root: str = "/sys") -> dict[str, dict[str, Any]]:
    """Whether each module is loaded (or built in): /sys/module/<name>, with - and _ alike as the kernel has them."""
    return {name: {"loaded": os.path.isdir(os.path.join(sys_root, "module", name.replace("-", "_")))} for name in names}


def read_state(items: Mapping[str, list[str]], run: Runner) -> dict[str, dict[str, Any]]:
    """The live state of every listed item, by kind (only the kinds given)."""
    state: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        names = list(dict.fromkeys(items.get(kind) or []))
        if not names:
            continue
        if kind == "files":
            state[kind] = {path: read_file(path) for path in names}
        elif kind == "contents":
            state[kind] = {path: read_content(path) for path in names}
        elif kind == "packages":
            state[kind] = read_packages(names, run)
        elif kind == "units":
            state[kind] = read_units(names, run)
        else:
            state[kind] = read_kernel_modules(names)
    return state


def plan_digest(plan: Any) -> str:
    """sha256 of the host's plan (gpufabric_plan) in canonical JSON: the desired state, as the catalog and
    the inventory make it. Recorded by every role and compared by drift_check, so a catalog or inventory
    change that moves the plan is drift even when the host is untouched."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def role_settings(roles: list[str], settings: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The settings (variable name -> digest of its value) of each role: a variable is a role's when its name
    starts with the role's name and "_"; the longest such name wins (gcp_tcpxo_x is gcp_tcpxo's, not gcp_tcpx's).
    Variables of no role given are left out."""
    owned: dict[str, dict[str, str]] = {role: {} for role in roles}
    for name, digest in settings.items():
        owners = [role for role in roles if name.startswith(role + "_")]
        if owners:
            owned[max(owners, key=len)][name] = digest
    return owned


def role_entry(plan: str, state: Mapping[str, Any], settings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What one role leaves in the record: the digest of the plan it applied, the digests of the settings it
    was given and the state it left."""
    return {"plan": plan, "settings": dict(settings or {}), "state": dict(state)}


def load_record(path: str) -> tuple[dict[str, Any], str | None]:
    """The record file as {"format", "roles"}, and a problem when it is missing or unreadable (then empty)."""
    empty: dict[str, Any] = {"format": RECORD_FORMAT, "roles": {}}
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return empty, f"{path} does not exist"
    except (OSError, ValueError) as problem:
        return empty, f"{path} cannot be read as a record: {problem}"
    if (
        not isinstance(record, dict)
        or record.get("format") != RECORD_FORMAT
        or not isinstance(record.get("roles"), dict)
    ):
        return empty, f"{path} is not a format {RECORD_FORMAT} record"
    return record, None


def dump_record(record: Mapping[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def compare(
    role: str, entry: Mapping[str, Any] | None, plan: str, run: Runner, settings: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """What differs between a role's recorded entry and the host now, between the plan digest it applied
    and ``plan``, the digest of the plan it would apply now, and between the settings it was given and
    ``settings``, the role's settings now (name -> digest; a name missing on one side is None there).

    Each finding: role, kind (a kind of item, "plan", "settings" or "record"), item, recorded, live. No entry
    (the role never recorded on this host) is one finding: a host is never clean on a record it does not have.
    """
    if not isinstance(entry, Mapping) or not isinstance(entry.get("state"), Mapping):
        return [{"role": role, "kind": "record", "item": role, "recorded": None, "live": "no record of this role"}]
    findings = []
    if entry.get("plan") != plan:
        findings.append({"role": role, "kind": "plan", "item": "plan", "recorded": entry.get("plan"), "live": plan})
    was_set, now_set = entry.get("settings") or {}, settings or {}
    for name in sorted(set(was_set) | set(now_set)):
        if was_set.get(name) != now_set.get(name):
            was, now = was_set.get(name), now_set.get(name)
            findings.append({"role": role, "kind": "settings", "item": name, "recorded": was, "live": now})
    recorded = entry["state"]
    items = {kind: list(recorded.get(kind) or {}) for kind in KINDS}
    live = read_state(items, run)
    for kind in KINDS:
        for item, was in (recorded.get(kind) or {}).items():
            now = live.get(kind, {}).get(item)
            if now != was:
                findings.append({"role": role, "kind": kind, "item": item, "recorded": was, "live": now})
    return findings
