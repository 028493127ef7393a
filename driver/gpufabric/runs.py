# SPDX-License-Identifier: Apache-2.0
"""Run a playbook through ansible-runner for `gpufabric apply`, `drift`, `verify` and `bake`.

ansible-runner starts ansible-playbook over the inventory's own connections (SSH, podman, local:
the inventory's variables apply as they are) with this collection on ANSIBLE_COLLECTIONS_PATH and
one of the named Ansible settings sets (gpufabric.ansible_settings). Host key checking is the user's:
their environment, then their ansible.cfg, else on (Ansible's default). ansible-runner turns it off
whenever the variable is unset, so every run gets it set, and an unattended drift run never trusts a
key it has not seen unless the user said so. Every run keeps ansible-runner's artifact directory
(job_events/, stdout, command, rc, status) where the caller says; its events are collected, and
a `Tally` of them gives the progress lines.

Secrets at rest: ansible-playbook needs the cloud credentials of its environment (an inventory
plugin, a module) and the extra variables, so both reach it unchanged; what stays on disk does not
keep them. ansible-runner writes the whole environment into the artifacts' `command` file: gpufabric
rewrites it, every secret value replaced, before ansible-playbook starts and again at its end. The
extra variables go through env/extravars in the private data directory (a temporary directory,
removed after the run), never on the command line, each string marked `!unsafe` (data, never a template: a
catalog path holding `{{` stays a path); gpufabric-run.json holds them redacted. A
secret is a variable whose name contains one of SECRET_NAME_PARTS (any case), or one named in
$GPUFABRIC_SECRET_VARS (comma-separated). A task that prints a secret must say `no_log: true`.

The user's Ansible: the ansible.cfg ansible-playbook would read in the user's directory
(gpufabric.ansible_config) is every run's ANSIBLE_CONFIG, and a setting it sets (or the environment
exports) wins over gpufabric's set; the ansible-playbook options the user gave (gpufabric.playbook_args)
go on its command line, and reach the artifacts only redacted.

Retention: runs land in the state directory, never the current one: each default run directory
(<state>/runs/<kind>-<UTC time>, <state> as gpufabric.ansible_settings.state_dir says) prunes the
oldest of its kind, keeping $GPUFABRIC_KEEP_RUNS (default 20; 0 keeps every run); nothing else is ever
removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gpufabric import ansible_config, ansible_settings, output_file, playbook_args
from gpufabric import inventory as inventory_source
from gpufabric.collection import bundled_path, collection_root, collections_path, require_collections
from gpufabric.errors import UserError

Progress = Callable[[str], None]
# The fact site.yml's last task sets on every host that finished the play.
REBOOT_FACT = "gpufabric_reboot_required"
RUNS_DIR = "runs"
KEEP_RUNS_ENV = "GPUFABRIC_KEEP_RUNS"
DEFAULT_KEEP_RUNS = 20
# A directory default_artifacts names: <kind>-<UTC time>, with -N when two runs share a second.
RUN_NAME = re.compile(r"^(?P<kind>[a-z][a-z-]*)-(?P<stamp>\d{8}T\d{6}Z)(?:-(?P<number>[1-9]\d*))?$")
SECRET_VARS_ENV = "GPUFABRIC_SECRET_VARS"
# Name parts of a secret (environment and extra variables, any case): AWS_SECRET_ACCESS_KEY,
# AWS_SESSION_TOKEN, GOOGLE_APPLICATION_CREDENTIALS, AZURE_CLIENT_SECRET, NEBIUS_IAM_TOKEN, an OCI
# key passphrase or key content, GCP_SERVICE_ACCOUNT_CONTENTS, any *_PASSWORD.
SECRET_NAME_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASS_PHRASE",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "KEY_CONTENT",
    "API_KEY",
    "SERVICE_ACCOUNT_CONTENTS",
)
REDACTED = "<redacted by gpufabric>"


@dataclass
class PlaybookRun:
    """One ansible-playbook run: its exit, events (counter order) and where its artifacts are kept."""

    rc: int
    status: str
    events: list[dict[str, Any]]
    artifacts_dir: Path
    duration_s: float
    hosts: list[str] = field(default_factory=list)  # the inventory's hosts the run was meant to cover
    settings: dict[str, str] = field(default_factory=dict)  # the Ansible settings it ran with


@contextlib.contextmanager
def runner_signals() -> Iterator[None]:
    """Around an ansible_runner.run: this process's SIGINT and SIGTERM handlers as they were, afterwards.

    ansible-runner replaces both with a handler that only sets its cancel flag, and never puts them back: after one
    run, a Ctrl-C (or a service manager's stop) would no longer interrupt gpufabric between runs (drift
    --remediate's steps, a bake's commit and clean-up)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # ansible-runner sets handlers on the main thread only
        return
    kept = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in kept.items():
            if handler is not None:
                signal.signal(number, handler)


def site_playbook() -> Path:
    return collection_root() / "playbooks" / "site.yml"


def drift_check_playbook() -> Path:
    """The fast drift check: each host against the record site.yml left at its last apply."""
    return collection_root() / "playbooks" / "drift_check.yml"


def base_env() -> dict[str, str]:
    """What every run needs: this collection first, then the user's collections, then the ones the wheel bundles
    (so a collection the user installed wins, and the bundle wins over Python's sys.path); the user's callback plugins
    (ansible-runner adds its own after them); the Ansible beside this Python, no colour codes, the user's
    ansible.cfg, and host key checking as the user's configuration decides it (on by default)."""
    config = ansible_config.user_config()
    collections = ansible_config.path_list("ANSIBLE_COLLECTIONS_PATH", config).paths
    callbacks = ansible_config.path_list("ANSIBLE_CALLBACK_PLUGINS", config).paths
    bundled = [str(path)] if (path := bundled_path()) else []
    env = {
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(dict.fromkeys([str(collections_path()), *collections, *bundled])),
        # Set, so that ansible-runner appends its event callback to the user's list instead of replacing it.
        "ANSIBLE_CALLBACK_PLUGINS": os.pathsep.join(callbacks),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
    }
    if config is not None:
        # Found from the user's directory: ansible-playbook, started elsewhere, would miss ./ansible.cfg.
        env["ANSIBLE_CONFIG"] = str(config.path)
    # Always set: ansible-runner sets False whenever the variable is missing, and that would outrank the
    # host_key_checking of the user's ansible.cfg.
    env["ANSIBLE_HOST_KEY_CHECKING"] = ansible_settings.host_key_checking(config).value
    return env


def inventory_hosts(inventory: str, limit: list[str] | None = None) -> list[str]:
    """The inventory's hosts matching the --limit patterns (sorted), read with `ansible-inventory --list`."""
    return sorted(inventory_source.hosts(inventory_source.read(inventory, limit, base_env())))


# The group `gpufabric health --quarantine FILE` writes (docs/health.md): apply and verify leave its hosts out.
QUARANTINE_GROUP = "gpufabric_quarantine"


def hosts_outside_quarantine(
    inventory: str, limit: list[str] | None = None
) -> tuple[list[str], list[str] | None, list[str]]:
    """(the inventory's hosts matching --limit but not in QUARANTINE_GROUP, sorted; the limit that leaves the
    group out, for the playbook run; the quarantined hosts left out, sorted), from one `ansible-inventory --list`.
    An inventory without the group keeps its limit as given."""
    data = inventory_source.read(inventory, limit, base_env())
    group = data.get(QUARANTINE_GROUP)
    quarantined = set(group.get("hosts", [])) if isinstance(group, dict) else set()
    found = inventory_source.hosts(data)
    skipped = sorted(found & quarantined)
    if not skipped:
        return sorted(found), limit, []
    pattern = ",".join(limit) if limit else "all"
    return sorted(found - quarantined), [f"{pattern}:!{QUARANTINE_GROUP}"], skipped


def keep_runs() -> int:
    """$GPUFABRIC_KEEP_RUNS: how many default run directories of a kind to keep (0: all)."""
    text = os.environ.get(KEEP_RUNS_ENV, "")
    if not text.strip():
        return DEFAULT_KEEP_RUNS
    # ASCII digits only: str.isdigit() also accepts "²" and other digits int() refuses.
    if not re.fullmatch(r"[0-9]{1,7}", text.strip()) or int(text) > 1_000_000:
        raise UserError(
            f"{KEEP_RUNS_ENV}={text!r} (environment): not a count; accepted: the number of runs of each "
            f"command to keep in {runs_root()} (a whole number), or 0 to keep every run"
        )
    return int(text)


def _run_key(path: Path) -> tuple[str, int]:
    match = RUN_NAME.match(path.name)
    assert match is not None
    return match["stamp"], int(match["number"] or 1)


def prune_runs(runs_dir: Path, kind: str, keep: int) -> list[Path]:
    """Remove the oldest run directories of `kind` in runs_dir, leaving the newest `keep`.

    Only gpufabric's own: real directories (no link) directly in runs_dir named as default_artifacts
    names them; any other entry, and anything under an --artifacts the user gave, is never touched.
    """
    if keep < 0 or not runs_dir.is_dir() or runs_dir.is_symlink():
        return []
    ours = []
    for entry in runs_dir.iterdir():
        match = RUN_NAME.match(entry.name)
        if match and match["kind"] == kind and entry.is_dir() and not entry.is_symlink():
            ours.append(entry)
    ours.sort(key=_run_key)
    removed = ours[: max(0, len(ours) - keep)]
    for old in removed:
        # One that cannot be removed (another user's, busy) stays; the next run tries again.
        shutil.rmtree(old, ignore_errors=True)
    return removed


def runs_root() -> Path:
    """Where runs land by default: <state directory>/runs (a read-only working directory is fine)."""
    return ansible_settings.state_dir() / RUNS_DIR


def default_artifacts(kind: str) -> Path:
    """<state>/runs/<kind>-<UTC time>/, a new directory made here (a suffix when two runs share a second).

    Made with an exclusive mkdir, not chosen by a test for existence: two runs started in the same second
    would both find the name free, share the directory and interleave their job events.
    The oldest runs of the kind go first, so that with this one $GPUFABRIC_KEEP_RUNS are left.
    """
    keep = keep_runs()
    runs_dir = runs_root()
    if keep:  # 0 keeps every run; 1 leaves none of the old ones, only the new run.
        prune_runs(runs_dir, kind, keep - 1)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = runs_dir / f"{kind}-{stamp}"
    path, number = base, 1
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                path.mkdir()
                return path
            except FileExistsError:
                number += 1
                path = base.with_name(f"{base.name}-{number}")
    except OSError:
        return path  # cannot be made: check_artifacts names the reason


def check_artifacts(path: Path, option: str = "--artifacts") -> None:
    """A run's artifact directory: one gpufabric can create or write into (not a file, nor under one),
    and new or empty: old job events would be read as this run's."""
    output_file.check_directory(path, option)
    if path.is_dir() and any(path.iterdir()):
        raise UserError(f"{option} {path}: already holds files; give a new or empty directory")


def secret_names() -> set[str]:
    """The names $GPUFABRIC_SECRET_VARS marks secret, besides the SECRET_NAME_PARTS rule."""
    return {name.strip() for name in os.environ.get(SECRET_VARS_ENV, "").split(",") if name.strip()}


def is_secret(name: str, marked: set[str] | None = None) -> bool:
    upper = name.upper()
    return name in (secret_names() if marked is None else marked) or any(part in upper for part in SECRET_NAME_PARTS)


def redact(value: Any, marked: set[str] | None = None) -> Any:
    """value with the value of every secret key replaced, at any depth (extra variables nest)."""
    marked = secret_names() if marked is None else marked
    if isinstance(value, Mapping):
        return {key: REDACTED if is_secret(str(key), marked) else redact(item, marked) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, marked) for item in value]
    return value


def redact_args(args: list[str]) -> list[str]:
    """An ansible-playbook command line with the secrets of every inline -e redacted."""
    marked = secret_names()
    return playbook_args.redact_cmdline(args, lambda name: is_secret(name, marked), REDACTED)


def scrub_command_file(artifacts_dir: Path) -> None:
    """Rewrite ansible-runner's `command` file (command line, cwd, the whole environment) with every
    secret of its environment and of the command line's -e redacted. Nothing there to scrub yet is fine."""
    path = artifacts_dir / "command"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(data, dict):
        return
    if isinstance(data.get("env"), dict):
        data["env"] = redact(data["env"])
    if isinstance(data.get("command"), list):
        data["command"] = redact_args([str(arg) for arg in data["command"]])
    output_file.write_atomically(path, json.dumps(data, ensure_ascii=False), mode=0o600)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """An event field as a mapping (events come from JSON: anything may be missing)."""
    return value if isinstance(value, Mapping) else {}


def event_counter(event: Mapping[str, Any]) -> int:
    """An event's place in its run (ansible-runner's counter; 0 when missing), to sort events by."""
    counter = event.get("counter")
    return counter if isinstance(counter, int) else 0


class Tally:
    """What a run's events say so far: hosts done, changed, failed, unreachable, and the current task."""

    def __init__(self, hosts: list[str], label: str = "") -> None:
        self.total = len(hosts)
        self.label = label
        self.task = ""
        self.changed: set[str] = set()
        self.failed: set[str] = set()
        self.unreachable: set[str] = set()
        self.finished: set[str] = set()  # reached site.yml's last task
        self.over = False

    @property
    def done(self) -> int:
        if self.over:
            return self.total
        return len(self.finished | self.failed | self.unreachable)

    def feed(self, event: Mapping[str, Any]) -> bool:
        """Take one event; True when a new task started (the moment for a progress line)."""
        kind = event.get("event")
        data = as_mapping(event.get("event_data"))
        host = data.get("host")
        res = as_mapping(data.get("res"))
        if kind == "playbook_on_task_start":
            role = str(data.get("role") or "").rsplit(".", 1)[-1]
            task = str(data.get("task", ""))
            if task.startswith("Validating arguments"):
                # Ansible names a role's argument check after the spec's whole description: keep the first part.
                task = task.split(" - ", 1)[0]
            self.task = f"{role} : {task}" if role else task
            return True
        if kind == "playbook_on_stats":
            self.over = True
        elif kind == "runner_on_ok" and host:
            if res.get("changed") is True:
                self.changed.add(host)
            if REBOOT_FACT in as_mapping(res.get("ansible_facts")):
                self.finished.add(host)
        elif kind == "runner_on_failed" and host and not data.get("ignore_errors"):
            self.failed.add(host)
        elif kind == "runner_on_unreachable" and host and not data.get("ignore_unreachable"):
            self.unreachable.add(host)
        return False

    def line(self) -> str:
        counts = (
            f"{self.done}/{self.total} hosts done, {len(self.changed)} changed, {len(self.failed)} failed, "
            f"{len(self.unreachable)} unreachable"
        )
        prefix = f"[{self.label}] " if self.label else ""
        return f"{prefix}{counts}" + (f" | {self.task}" if self.task and not self.over else "")


class _Unsafe(str):
    """Text Ansible must never template (YAML ``!unsafe``)."""


class _ExtravarsDumper(yaml.SafeDumper):
    pass


_ExtravarsDumper.add_representer(_Unsafe, lambda dumper, text: dumper.represent_scalar("!unsafe", str(text)))


def _as_unsafe(value: Any) -> Any:
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, Mapping):
        return {key: _as_unsafe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_unsafe(item) for item in value]
    return value


def write_extravars(private_dir: Path, extravars: Mapping[str, Any]) -> None:
    """ansible-runner's env/extravars (0600), every string marked ``!unsafe``: the extra variables gpufabric passes
    (catalog paths, tiers, directories) are data, and a path holding ``{{`` must not be rendered as a template (or
    run a lookup) by Ansible, which templates the strings of an extra-vars file."""
    target = private_dir / "env" / "extravars"
    target.parent.mkdir(mode=0o700, exist_ok=True)
    text = yaml.dump(_as_unsafe(dict(extravars)), Dumper=_ExtravarsDumper, default_flow_style=False, sort_keys=False)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def run_playbook(
    playbook: Path,
    inventory: str,
    *,
    check: bool = False,
    diff: bool = False,
    limit: list[str] | None = None,
    extravars: dict[str, Any] | None = None,
    settings: str = ansible_settings.TUNED,
    forks: int | None = None,
    strategy: str | None = None,
    artifacts_dir: Path,
    progress: Progress | None = None,
    hosts: list[str] | None = None,
    watch: Callable[[Tally], None] | None = None,
    label: str = "",
    args: playbook_args.PlaybookArgs | None = None,
    environment: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], object] | None = None,
) -> PlaybookRun:
    """Run the playbook; its artifacts stay in artifacts_dir (ansible-runner's artifact directory).

    limit: host patterns (joined with ","); an empty list is refused, since no --limit runs every
    host. hosts: the inventory's hosts the run covers, when the caller listed them already (sizes
    forks and the progress count). progress gets a line at the start, per task and at the end;
    with watch (a live display, given the Tally after every event) the per-task lines are left out.
    args: the ansible-playbook options the user gave, passed through. environment: variables ansible-playbook
    gets besides this process's and the Ansible settings (what a connection plugin's own tool needs). on_event
    (gpufabric verify's per-host lines) gets every event as it comes, in place of the per-task lines and watch.
    """
    import ansible_runner

    if limit is not None and not limit:
        raise ValueError("an empty limit would run every host; give None for no limit")
    check_artifacts(artifacts_dir)
    # A role's missing collection would otherwise fail mid-play, after other roles changed hosts.
    require_collections(base_env()["ANSIBLE_COLLECTIONS_PATH"])
    covered = hosts if hosts is not None else inventory_hosts(inventory, limit)
    args = args or playbook_args.PlaybookArgs()
    config = ansible_config.user_config()
    chosen = ansible_settings.settings(settings, len(covered), forks=forks, strategy=strategy)
    applied = ansible_settings.without_long_control_dir(ansible_settings.ours(ansible_settings.layer(chosen, config)))
    ansible_settings.prepare(applied)
    env = {**(environment or {}), **ansible_settings.environment(applied), **base_env()}
    tally = Tally(covered, label)
    events: list[dict[str, Any]] = []
    say = progress or (lambda line: None)
    mode = " in check mode" if check else ""
    where = f", config {config.path}" if config else ""
    say(f"{label + ': ' if label else ''}{playbook.name}{mode} on {len(covered)} host(s), settings {settings}{where}")

    def handle_event(event: dict[str, Any]) -> bool:
        events.append(event)
        new_task = tally.feed(event)
        if on_event is not None:
            on_event(event)
        elif watch is not None:
            watch(tally)
        elif new_task:
            say(tally.line())
        return True

    def on_status(data: dict[str, Any], **_: Any) -> None:
        # ansible-runner says "running" once it has written `command` (the whole environment), before it
        # starts ansible-playbook (whose environment is in memory: the file is not read again).
        if data.get("status") == "running":
            scrub_command_file(artifacts_dir)

    flags = [flag for flag, wanted in (("--check", check), ("--diff", diff)) if wanted]
    cmdline = shlex.join(flags + args.cmdline())
    started = time.monotonic()
    artifacts_dir.parent.mkdir(parents=True, exist_ok=True)
    # The private data directory holds ansible-runner's copies of the inputs (env/extravars, given
    # to ansible-playbook as -e @FILE, so never on its command line) for the run only, 0700, removed
    # after it; the artifacts go to artifacts_dir itself (artifact_dir/ident).
    with tempfile.TemporaryDirectory(prefix="gpufabric-run-") as private_dir, runner_signals():
        write_extravars(Path(private_dir), extravars or {})
        try:
            runner = ansible_runner.run(
                private_data_dir=private_dir,
                artifact_dir=str(artifacts_dir.parent.resolve()),
                ident=artifacts_dir.name,
                playbook=str(playbook.resolve()),
                inventory=inventory_source.source(inventory),
                limit=",".join(limit) if limit else None,
                # In env/extravars already (write_extravars): ansible-runner reads that file, as -e @FILE.
                envvars=env,
                cmdline=cmdline or None,
                passwords=playbook_args.passwords(args),
                # Not ansible-runner's per-run cache in the artifacts: the settings set decides.
                fact_cache_type="none",
                quiet=True,
                event_handler=handle_event,
                status_handler=on_status,
            )
        finally:
            scrub_command_file(artifacts_dir)  # a run that never reached "running" wrote it too
        rc, status = int(runner.rc if runner.rc is not None else -1), str(runner.status)
    duration = time.monotonic() - started
    events.sort(key=event_counter)
    tally.over = True
    say(tally.line() + f" ({duration:.1f}s, exit {rc})")
    ansible_env = redact({key: value for key, value in env.items() if key.startswith("ANSIBLE_")})
    record = {
        "settings": settings,
        "ansible_config": str(config.path) if config else None,
        "ansible_env": ansible_env,
        "ansible_args": redact_args(args.cmdline()),
        "limit": limit,
        "extravars": redact(extravars or {}),
    }
    output_file.write_atomically(artifacts_dir / "gpufabric-run.json", json.dumps(record, indent=2) + "\n")
    return PlaybookRun(rc, status, events, artifacts_dir, duration, list(covered), ansible_env)
