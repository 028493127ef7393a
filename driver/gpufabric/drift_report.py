# SPDX-License-Identifier: Apache-2.0
"""`gpufabric drift` reports: what a check+diff run's ansible-runner events say about each host.

Pure functions over the job events (``Runner.events`` or an artifacts directory's job_events):
no Ansible runs here. `summarize` turns the events into a `DriftResult`; the writers render it as
JSON, JUnit XML and a Prometheus textfile-collector file; `render` prints a table. The formats and
the exit code rule are documented in docs/drift.md.

Per host the state is one of (worst first):
  unreachable  a task could not reach it (or it was expected and never appeared): never clean
  failed       a task failed (ignored failures do not count; with the run's stats, rescued ones don't)
  unmanaged    site.yml left it alone: no profile, a profile the catalog does not know, or excluded
               on purpose (gpufabric_managed: false); its code and reason come from the plan
  drifted      at least one task would change it
  clean        it ran and nothing would change
Exit code: 1 when any host is failed, unreachable or unmanaged (but excluded on purpose) or the run
itself is incomplete (the drift picture is not whole: that wins over drift), else 2 when any host
drifted, else 0.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric.errors import UserError

REPORT_VERSION = 1
# Worst first: a host's state, and the order of every per-state listing.
STATES = ("unreachable", "failed", "unmanaged", "drifted", "clean")
STATE_STYLE = {
    "clean": "green",
    "drifted": "yellow",
    "unmanaged": "bold magenta",
    "failed": "bold red",
    "unreachable": "bold red",
}
# The fact site.yml sets on a host it leaves alone: the plan's {"code", "reason"} verdict.
UNMANAGED_FACT = "gpufabric_unmanaged"
# The one unmanaged code that is the operator's choice: it does not make a run fail. The plan's
# fabric_plan.EXCLUDED; written out here so that reading reports loads no collection code.
EXCLUDED = "excluded"
EXIT_CLEAN, EXIT_ERROR, EXIT_DRIFT = 0, 1, 2
# Tasks outside any role (pre_tasks, tasks, handlers of the playbook itself) are grouped here.
PLAYBOOK_ROLE = "playbook"
# A diff side is cut after this many lines or characters: a report must stay readable and a
# JUnit/JSON file small even when a task would rewrite a large file.
MAX_DIFF_LINES = 200
MAX_DIFF_CHARS = 16 * 1024
COUNT_KEYS = ("ok", "changed", "failed", "unreachable", "skipped", "ignored", "rescued")
# playbook_on_stats key -> count key
_STATS_KEYS = {
    "ok": "ok",
    "changed": "changed",
    "failures": "failed",
    "dark": "unreachable",
    "skipped": "skipped",
    "ignored": "ignored",
    "rescued": "rescued",
}
# ansible's diff keys that say the content was left out (binary or over max_diff_size).
_DIFF_NOTES = {
    "src_binary": "the new content is binary: not shown",
    "dst_binary": "the current content is binary: not shown",
    "src_larger": "the new content is larger than max_diff_size ({} bytes): not shown",
    "dst_larger": "the current content is larger than max_diff_size ({} bytes): not shown",
}
# Characters XML 1.0 cannot carry at all (even escaped): control characters but tab, LF, CR.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass
class FileDiff:
    """One diff of a task result: the two sides (cut to size) and the unified diff of the full texts."""

    header: str
    before: str
    after: str
    unified: str
    truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "header": self.header,
            "before": self.before,
            "after": self.after,
            "unified": self.unified,
            "truncated": self.truncated,
            "notes": list(self.notes),
        }


@dataclass
class TaskChange:
    """A task that would change the host (check mode said changed), with its diffs if it gave any."""

    task: str
    role: str
    action: str
    diffs: list[FileDiff] = field(default_factory=list)
    items: list[str] = field(default_factory=list)  # the loop items that would change

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "role": self.role,
            "action": self.action,
            "items": list(self.items),
            "diffs": [diff.as_dict() for diff in self.diffs],
        }


@dataclass
class TaskError:
    """A task that failed or could not reach the host."""

    task: str
    role: str
    kind: str  # "failed" | "unreachable"
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "role": self.role, "kind": self.kind, "message": self.message}


@dataclass
class HostDrift:
    host: str
    state: str = "clean"
    roles: list[str] = field(default_factory=list)  # every role that ran a task here, in order
    changes: list[TaskChange] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    unmanaged: dict[str, str] | None = None  # {"code", "reason"} when site.yml left the host alone

    @property
    def excluded(self) -> bool:
        """Left alone because the operator said so: reported, but it does not fail the run."""
        return self.state == "unmanaged" and self.unmanaged is not None and self.unmanaged["code"] == EXCLUDED

    def drifted_roles(self) -> list[str]:
        return _unique(change.role for change in self.changes)

    def changes_in(self, role: str) -> list[TaskChange]:
        return [change for change in self.changes if change.role == role]

    def errors_in(self, role: str) -> list[TaskError]:
        return [error for error in self.errors if error.role == role]

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "unmanaged": dict(self.unmanaged) if self.unmanaged else None,
            "counts": dict(self.counts),
            "changed_tasks": len(self.changes),
            "drifted_roles": self.drifted_roles(),
            "roles": {
                role: {
                    "changes": [change.as_dict() for change in self.changes_in(role)],
                    "errors": [error.as_dict() for error in self.errors_in(role)],
                }
                for role in self.roles
            },
        }


@dataclass
class DriftResult:
    hosts: dict[str, HostDrift]
    started: datetime | None
    finished: datetime | None
    playbook: str | None = None
    # Run-level problems: the run ended before its summary, no host was checked.
    problems: list[str] = field(default_factory=list)

    def hosts_in(self, state: str) -> list[str]:
        return [name for name, host in self.hosts.items() if host.state == state]

    def state_counts(self) -> dict[str, int]:
        return {state: len(self.hosts_in(state)) for state in STATES}

    @property
    def state(self) -> str:
        """The worst state of the hosts that count ("clean" for none); "failed" when the run itself has a problem."""
        if self.problems and not (self.hosts_in("unreachable") or self.hosts_in("failed")):
            return "failed"
        counted = {host.state for host in self.hosts.values() if not host.excluded}
        return next((state for state in STATES if state in counted), "clean")

    @property
    def exit_code(self) -> int:
        return exit_code(self)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _parse_time(value: Any) -> datetime | None:
    """An event's ISO 8601 `created` time, always timezone-aware (ansible-runner writes UTC)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def role_name(event_data: Mapping[str, Any]) -> str:
    """The task's role, short name (a collection role's FQCN loses its namespace.collection)."""
    role = event_data.get("role")
    if not isinstance(role, str) or not role:
        return PLAYBOOK_ROLE
    # Role names cannot hold dots, so a dotted name is namespace.collection.role.
    return role.rsplit(".", 1)[-1]


def _cut(text: str) -> tuple[str, bool]:
    """Text cut to MAX_DIFF_LINES lines and MAX_DIFF_CHARS characters, with a marker; and whether it was cut."""
    lines = text.splitlines(keepends=True)
    kept = "".join(lines[:MAX_DIFF_LINES])
    if len(kept) > MAX_DIFF_CHARS:
        kept = kept[:MAX_DIFF_CHARS]
    if kept == text:
        return text, False
    left = len(lines) - len(kept.splitlines())
    newline = "" if kept.endswith("\n") else "\n"
    return f"{kept}{newline}... ({left} more lines, {len(text) - len(kept)} more characters not shown)\n", True


def _side_text(value: Any) -> str:
    """One side of a diff as text: strings as they are, structured state (file module) as sorted JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def _file_diff(entry: Mapping[str, Any]) -> FileDiff | None:
    """One ansible diff dict as a FileDiff; None when it shows no difference (a path-only diff)."""
    header = str(entry.get("after_header") or entry.get("before_header") or "")
    notes = [text.format(entry[key]) for key, text in _DIFF_NOTES.items() if entry.get(key)]
    prepared = entry.get("prepared")
    if isinstance(prepared, str) and prepared:
        # Modules that render their own diff (apt, some template plugins) put it in `prepared`.
        unified, cut = _cut(prepared)
        return FileDiff(header, "", "", unified, cut, notes)
    before, after = _side_text(entry.get("before")), _side_text(entry.get("after"))
    if before == after and not notes:
        return None
    full = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"before: {entry.get('before_header') or header}".rstrip(),
            tofile=f"after: {entry.get('after_header') or header}".rstrip(),
        )
    )
    unified, cut_unified = _cut(full)
    before_cut, cut_before = _cut(before)
    after_cut, cut_after = _cut(after)
    return FileDiff(header, before_cut, after_cut, unified, cut_unified or cut_before or cut_after, notes)


def _diffs(value: Any) -> list[FileDiff]:
    """The FileDiffs of a result's `diff` (a dict or a list of dicts, as modules return it)."""
    entries = value if isinstance(value, list) else [value]
    found = [_file_diff(entry) for entry in entries if isinstance(entry, Mapping)]
    return [diff for diff in found if diff is not None]


def _is_changed(res: Mapping[str, Any]) -> bool:
    return res.get("changed") is True


def _message(res: Mapping[str, Any]) -> str:
    """The one-line-ish reason of a failed result: msg, else stderr, else the failed loop items'."""
    for key in ("msg", "stderr", "reason", "exception"):
        value = res.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    items = [item for item in res.get("results") or [] if isinstance(item, Mapping) and item.get("failed")]
    if items:
        return "; ".join(f"{item.get('_ansible_item_label', item.get('item'))}: {_message(item)}" for item in items)
    return "no message"


class _Host:
    """Per-host accumulation while reading the events."""

    def __init__(self, name: str) -> None:
        self.drift = HostDrift(name)
        self.failed_events = 0
        self.unreachable_events = 0
        self.event_counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)

    def saw_role(self, role: str) -> None:
        if role not in self.drift.roles:
            self.drift.roles.append(role)


def summarize(
    events: Iterable[Mapping[str, Any]],
    *,
    expected_hosts: Iterable[str] = (),
) -> DriftResult:
    """The drift of every host in a check+diff run's job events.

    expected_hosts: hosts the inventory holds (after --limit); one that never appears in the
    events is reported unreachable, since nothing shows it was checked.
    """
    hosts: dict[str, _Host] = {}
    # Diffs from runner_on_file_diff, per (host, task uuid): the only copy left when ansible-runner
    # empties a result over MAX_EVENT_RES.
    side_diffs: dict[tuple[str, str], list[Any]] = {}
    stats: dict[str, Any] | None = None
    started = finished = None
    playbook: str | None = None

    def host_of(data: Mapping[str, Any]) -> _Host | None:
        name = data.get("host")
        if not isinstance(name, str) or not name:
            return None
        return hosts.setdefault(name, _Host(name))

    for event in events:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("event")
        created = _parse_time(event.get("created"))
        if created is not None:
            started = created if started is None else min(started, created)
            finished = created if finished is None else max(finished, created)
        data = event.get("event_data")
        if not isinstance(data, Mapping):
            data = {}
        if playbook is None and isinstance(data.get("playbook"), str):
            playbook = data["playbook"]
        if kind == "playbook_on_stats":
            stats = dict(data)
            continue
        if not isinstance(kind, str) or not kind.startswith("runner_on_"):
            continue
        host = host_of(data)
        if host is None:
            continue
        role, task = role_name(data), str(data.get("task") or data.get("name") or "(unnamed task)")
        res = data.get("res") if isinstance(data.get("res"), Mapping) else {}
        assert isinstance(res, Mapping)
        if kind == "runner_on_file_diff":
            side_diffs.setdefault((host.drift.host, str(data.get("task_uuid"))), []).append(data.get("diff"))
            continue
        if kind == "runner_on_start":
            continue
        host.saw_role(role)
        if kind == "runner_on_ok":
            host.event_counts["ok"] += 1
            verdict = _unmanaged_verdict(res)
            if verdict is not None:
                host.drift.unmanaged = verdict
            side = side_diffs.get((host.drift.host, str(data.get("task_uuid"))), [])
            # An emptied result (over ansible-runner's MAX_EVENT_RES) keeps no `changed`: a real
            # difference in its file_diff events is the evidence left.
            emptied = not res and any(_diffs(diff) for diff in side)
            if _is_changed(res) or emptied:
                host.event_counts["changed"] += 1
                host.drift.changes.append(_change(task, role, data, res, side))
        elif kind == "runner_on_skipped":
            host.event_counts["skipped"] += 1
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                host.event_counts["ignored"] += 1
                continue
            host.event_counts["failed"] += 1
            host.drift.errors.append(TaskError(task, role, "failed", _message(res)))
        elif kind == "runner_on_unreachable":
            if data.get("ignore_unreachable"):
                continue
            host.event_counts["unreachable"] += 1
            host.drift.errors.append(TaskError(task, role, "unreachable", _message(res)))

    problems: list[str] = []
    if stats is None and (hosts or started is not None):
        problems.append("the run ended before its summary (no playbook_on_stats event): the results are incomplete")
    _apply_stats(hosts, stats)
    for name in expected_hosts:
        if name not in hosts:
            missing = hosts.setdefault(name, _Host(name))
            missing.unreachable_events += 1
            missing.saw_role(PLAYBOOK_ROLE)
            missing.drift.errors.append(
                TaskError("(no task)", PLAYBOOK_ROLE, "unreachable", "the host is in the inventory but not in the run")
            )
    if not hosts:
        problems.append("no host was checked (the pattern or --limit matched none): nothing shows the fleet is clean")
    result_hosts = {}
    for name in sorted(hosts):
        host = hosts[name]
        host.drift.state = _state(host, stats)
        if not host.drift.roles:
            host.saw_role(PLAYBOOK_ROLE)
        result_hosts[name] = host.drift
    return DriftResult(result_hosts, started, finished, playbook, problems)


def _unmanaged_verdict(res: Mapping[str, Any]) -> dict[str, str] | None:
    """site.yml's gpufabric_unmanaged fact in a task result, as {"code", "reason"}."""
    facts = res.get("ansible_facts")
    verdict = facts.get(UNMANAGED_FACT) if isinstance(facts, Mapping) else None
    if not isinstance(verdict, Mapping):
        return None
    return {"code": str(verdict.get("code") or "unknown_profile"), "reason": str(verdict.get("reason") or "")}


def _change(task: str, role: str, data: Mapping[str, Any], res: Mapping[str, Any], side: list[Any]) -> TaskChange:
    change = TaskChange(task, role, str(data.get("resolved_action") or data.get("task_action") or ""))
    results = res.get("results")
    if isinstance(results, list) and results:
        # A loop: the task counts once; its changed items and their diffs are listed.
        for item in results:
            if isinstance(item, Mapping) and _is_changed(item):
                change.items.append(str(item.get("_ansible_item_label", item.get("item"))))
                change.diffs.extend(_diffs(item.get("diff")))
    elif "diff" in res:
        change.diffs.extend(_diffs(res.get("diff")))
    else:
        # The result was emptied (too large for an event); the file_diff events kept the diffs.
        for diff in side:
            change.diffs.extend(_diffs(diff))
    return change


def _apply_stats(hosts: dict[str, _Host], stats: Mapping[str, Any] | None) -> None:
    """Counts from playbook_on_stats when the run reached it (it knows rescues), else from the events."""
    for host in hosts.values():
        host.drift.counts = dict(host.event_counts)
    if stats is None:
        return
    for key in ("processed", *_STATS_KEYS):
        per_host = stats.get(key)
        for name in per_host if isinstance(per_host, Mapping) else {}:
            hosts.setdefault(str(name), _Host(str(name)))
    for name, host in hosts.items():
        for key, count_key in _STATS_KEYS.items():
            per_host = stats.get(key)
            count = per_host.get(name, 0) if isinstance(per_host, Mapping) else 0
            host.drift.counts[count_key] = count if isinstance(count, int) and not isinstance(count, bool) else 0


def _state(host: _Host, stats: Mapping[str, Any] | None) -> str:
    unseen = host.drift.counts["changed"] - len(host.drift.changes)
    if stats is not None and unseen > 0:
        # The stats count changes whose events lost their result (too large): still drift.
        host.drift.changes.append(
            TaskChange(f"({unseen} task(s) whose result was too large for an event)", PLAYBOOK_ROLE, "")
        )
        host.saw_role(PLAYBOOK_ROLE)
    failed = host.drift.counts["failed"] > 0
    if stats is not None and not failed:
        # The stats know what the events cannot: a failure a rescue block handled is not a failure.
        host.drift.errors = [error for error in host.drift.errors if error.kind != "failed"]
    if host.drift.counts["unreachable"] > 0 or host.unreachable_events > 0:
        return "unreachable"
    if failed:
        return "failed"
    if host.drift.unmanaged is not None:
        return "unmanaged"
    return "drifted" if host.drift.changes else "clean"


def exit_code(result: DriftResult) -> int:
    """0 clean, 2 drifted, 1 when a host failed, was unreachable or is unmanaged (not excluded on purpose)
    or the run is incomplete (wins over 2)."""
    unmanaged = [name for name in result.hosts_in("unmanaged") if not result.hosts[name].excluded]
    if result.problems or result.hosts_in("failed") or result.hosts_in("unreachable") or unmanaged:
        return EXIT_ERROR
    if result.hosts_in("drifted"):
        return EXIT_DRIFT
    return EXIT_CLEAN


def _counter(event: Mapping[str, Any]) -> int:
    counter = event.get("counter")
    return counter if isinstance(counter, int) else 0


def read_artifacts(directory: Path) -> list[dict[str, Any]]:
    """The events of an ansible-runner artifacts directory (<dir>/job_events/*.json), in counter order."""
    events_dir = directory / "job_events" if (directory / "job_events").is_dir() else directory
    if not events_dir.is_dir():
        raise UserError(
            f"{directory}: not a directory; give an ansible-runner artifacts directory "
            "(artifacts/<ident>, holding job_events/) or its job_events directory"
        )
    events: list[dict[str, Any]] = []
    for path in events_dir.glob("*.json"):
        try:
            event = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path}: not a readable ansible-runner job event ({exc})") from exc
        if isinstance(event, dict):
            events.append(event)
    if not events:
        raise UserError(f"{events_dir}: holds no job event (*.json); is it an ansible-runner artifacts directory?")
    events.sort(key=_counter)
    return events


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _duration(result: DriftResult) -> float | None:
    if result.started is None or result.finished is None:
        return None
    return round((result.finished - result.started).total_seconds(), 3)


def as_dict(result: DriftResult) -> dict[str, Any]:
    return {
        "report_version": REPORT_VERSION,
        "playbook": result.playbook,
        "started": _iso(result.started),
        "finished": _iso(result.finished),
        "duration_seconds": _duration(result),
        "state": result.state,
        "exit_code": result.exit_code,
        "problems": list(result.problems),
        "hosts_by_state": result.state_counts(),
        "hosts": {name: host.as_dict() for name, host in result.hosts.items()},
    }


def to_json(result: DriftResult) -> str:
    return json.dumps(as_dict(result), indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    """Text XML 1.0 can carry: control characters (ANSI escapes in a diff) become \\xNN."""
    return _XML_INVALID.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def _change_text(change: TaskChange) -> str:
    lines = [f"task: {change.task}" + (f" ({change.action})" if change.action else "")]
    if change.items:
        lines.append(f"items: {', '.join(change.items)}")
    for diff in change.diffs:
        lines.extend(f"note: {note}" for note in diff.notes)
        if diff.unified:
            lines.append(diff.unified.rstrip("\n"))
    if not change.diffs:
        lines.append("(the task gave no diff: it would change, but does not say what)")
    return "\n".join(lines)


def _headline(text: str, limit: int = 200) -> str:
    """The first line of a message, cut for an attribute (the element's text keeps it whole)."""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _testcase(host: HostDrift, role: str) -> tuple[ET.Element, str]:
    """One host+role test case and its outcome: "passed", "failure" (drift) or "error"."""
    case = ET.Element("testcase", {"classname": _xml_text(host.host), "name": _xml_text(role), "time": "0"})
    changes, errors = host.changes_in(role), host.errors_in(role)
    drift_text = "\n\n".join(_change_text(change) for change in changes)
    if errors:
        # JUnit allows one of failure/error per case: an error hides nothing, its text has the drift too.
        kinds = _unique(error.kind for error in errors)
        element = ET.SubElement(
            case,
            "error",
            {
                "type": "/".join(kinds),
                "message": _xml_text(_headline(f"{errors[0].kind}: {errors[0].task}: {errors[0].message}")),
            },
        )
        text = "\n\n".join(f"{error.kind}: {error.task}\n{error.message}" for error in errors)
        element.text = _xml_text(text + (f"\n\nwould also change:\n{drift_text}" if drift_text else ""))
        return case, "error"
    if changes:
        names = ", ".join(change.task for change in changes)
        element = ET.SubElement(
            case, "failure", {"type": "drift", "message": _xml_text(f"{len(changes)} task(s) would change: {names}")}
        )
        element.text = _xml_text(drift_text)
        return case, "failure"
    return case, "passed"


def _unmanaged_testcase(host: HostDrift) -> tuple[ET.Element, str]:
    """The one test case of a host site.yml left alone: a failure, skipped when excluded on purpose."""
    verdict = host.unmanaged
    assert verdict is not None  # the state is "unmanaged" only with a verdict
    case = ET.Element("testcase", {"classname": _xml_text(host.host), "name": "managed", "time": "0"})
    message = _xml_text(_headline(f"NOT MANAGED ({verdict['code']}): {verdict['reason']}"))
    if host.excluded:
        ET.SubElement(case, "skipped", {"message": message})
        return case, "skipped"
    element = ET.SubElement(case, "failure", {"type": "unmanaged", "message": message})
    element.text = _xml_text(
        f"{verdict['reason']}\ngpufabric did not check this host: give it a catalog profile "
        "(gpufabric_profile, or gpufabric_cloud with gpufabric_instance_type), or exclude it on purpose "
        "with gpufabric_managed: false"
    )
    return case, "failure"


def to_junit(result: DriftResult) -> str:
    """JUnit XML: one testsuite per host, one testcase per host and role (classname host, name role)."""
    root = ET.Element("testsuites", {"name": "gpufabric drift"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    timestamp = (result.started or result.finished or datetime.now(UTC)).replace(microsecond=0)
    for name, host in result.hosts.items():
        suite = ET.SubElement(root, "testsuite", {"name": _xml_text(name)})
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        cases = [_unmanaged_testcase(host)] if host.state == "unmanaged" else [_testcase(host, r) for r in host.roles]
        for case, outcome in cases:
            suite.append(case)
            counts["tests"] += 1
            if outcome == "failure":
                counts["failures"] += 1
            elif outcome == "error":
                counts["errors"] += 1
            elif outcome == "skipped":
                counts["skipped"] += 1
        properties = ET.Element("properties")
        ET.SubElement(properties, "property", {"name": "state", "value": host.state})
        if host.unmanaged:
            ET.SubElement(properties, "property", {"name": "unmanaged", "value": host.unmanaged["code"]})
        suite.insert(0, properties)
        suite.attrib.update({key: str(value) for key, value in counts.items()})
        suite.attrib.update({"time": "0", "timestamp": timestamp.isoformat()})
        for key in totals:
            totals[key] += counts[key]
    if result.problems:
        # A run-level problem must fail the build too, even with no host to hang it on.
        suite = ET.SubElement(
            root,
            "testsuite",
            {"name": "run", "tests": "1", "failures": "0", "errors": "1", "skipped": "0", "time": "0"},
        )
        case = ET.SubElement(suite, "testcase", {"classname": "gpufabric drift", "name": "run", "time": "0"})
        error = ET.SubElement(case, "error", {"type": "run", "message": _xml_text(result.problems[0])})
        error.text = _xml_text("\n".join(result.problems))
        totals["tests"] += 1
        totals["errors"] += 1
    root.attrib.update({key: str(value) for key, value in totals.items()})
    root.attrib["time"] = str(_duration(result) or 0)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# ---------------------------------------------------------------------------
# Prometheus textfile collector
# ---------------------------------------------------------------------------


def escape_label(value: str) -> str:
    """A label value per the text exposition format: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metric(lines: list[str], name: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} gauge")
    for labels, value in samples:
        rendered = ",".join(f'{key}="{escape_label(label)}"' for key, label in labels.items())
        number = repr(float(value)) if not float(value).is_integer() else str(int(value))
        lines.append(f"{name}{{{rendered}}} {number}" if rendered else f"{name} {number}")


def to_prometheus(result: DriftResult, *, now: datetime | None = None) -> str:
    """The textfile-collector file (node_exporter --collector.textfile.directory): gauges only."""
    finished = result.finished or result.started or now or datetime.now(UTC)
    lines: list[str] = []
    counts = result.state_counts()
    _metric(
        lines,
        "gpufabric_drift_hosts",
        "Hosts per state in the last gpufabric drift run (clean, drifted, unmanaged, failed, unreachable).",
        [({"state": state}, counts[state]) for state in STATES],
    )
    _metric(
        lines,
        "gpufabric_drift_host_drifted",
        "1 when at least one task would change the host in the last gpufabric drift run, else 0.",
        [({"host": name}, 1 if host.changes else 0) for name, host in result.hosts.items()],
    )
    _metric(
        lines,
        "gpufabric_drift_host_changed_tasks",
        "Tasks that would change the host in the last gpufabric drift run.",
        [({"host": name}, len(host.changes)) for name, host in result.hosts.items()],
    )
    _metric(
        lines,
        "gpufabric_drift_host_state",
        "1 for the host's state in the last gpufabric drift run, 0 for the other states.",
        [
            ({"host": name, "state": state}, 1 if host.state == state else 0)
            for name, host in result.hosts.items()
            for state in STATES
        ],
    )
    _metric(
        lines,
        "gpufabric_drift_host_unmanaged",
        "1 for a host the last gpufabric drift run did not check, by why (no_profile, unknown_profile, excluded).",
        [({"host": name, "code": host.unmanaged["code"]}, 1) for name, host in result.hosts.items() if host.unmanaged],
    )
    _metric(
        lines,
        "gpufabric_drift_exit_code",
        "Exit code of the last gpufabric drift run: 0 clean, 2 drifted, 1 failed, unreachable, unmanaged, incomplete.",
        [({}, result.exit_code)],
    )
    duration = _duration(result)
    if duration is not None and math.isfinite(duration):
        _metric(
            lines,
            "gpufabric_drift_last_run_duration_seconds",
            "Wall time of the last gpufabric drift run.",
            [({}, duration)],
        )
    _metric(
        lines,
        "gpufabric_drift_last_run_timestamp_seconds",
        "Unix time the last gpufabric drift run finished.",
        [({}, round(finished.timestamp(), 3))],
    )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Table
# ---------------------------------------------------------------------------


def table(result: DriftResult) -> Table:
    title = "gpufabric drift" + (f": {result.playbook}" if result.playbook else "")
    output = Table(title=escape(title), title_justify="left")
    output.add_column("host")
    output.add_column("state")
    output.add_column("drifted roles")
    output.add_column("changed tasks", justify="right")
    for name, host in result.hosts.items():
        state = host.state.upper() + (f" ({host.unmanaged['code']})" if host.unmanaged else "")
        output.add_row(
            Text(name),
            Text(state, style=STATE_STYLE[host.state]),
            Text(", ".join(host.drifted_roles()) or "-"),
            Text(str(len(host.changes))),
        )
    return output


def render(result: DriftResult, console: Console, *, diffs: bool = False) -> None:
    """The per-host table, then what would change (with the diffs when asked), errors and run problems."""
    if result.hosts:
        console.print(table(result))
    for name, host in result.hosts.items():
        for change in host.changes:
            items = f" [{', '.join(change.items)}]" if change.items else ""
            console.print(
                f"[yellow]drift[/yellow] {escape(name)} {escape(change.role)}: {escape(change.task)}{escape(items)}",
                highlight=False,
            )
            if diffs:
                for diff in change.diffs:
                    for note in diff.notes:
                        console.print(f"  {escape(note)}", highlight=False)
                    if diff.unified:
                        console.print(Text(diff.unified.rstrip("\n")))
        for error in host.errors:
            console.print(
                f"[red]{error.kind}[/red] {escape(name)} {escape(error.role)}: {escape(error.task)}: "
                f"{escape(error.message)}",
                highlight=False,
            )
        if host.state == "unmanaged" and host.unmanaged:
            how = "excluded on purpose, not counted" if host.excluded else "not checked: the run fails"
            console.print(
                f"[magenta]not managed[/magenta] {escape(name)} ({escape(host.unmanaged['code'])}, {how}): "
                f"{escape(host.unmanaged['reason'])}",
                highlight=False,
            )
    for problem in result.problems:
        console.print(f"[red]error[/red]: {escape(problem)}", highlight=False)
    counts = result.state_counts()
    shown = ", ".join(f"{counts[state]} {state}" for state in reversed(STATES) if counts[state])
    console.print(f"{shown or 'no host'} (exit {result.exit_code})", highlight=False)
