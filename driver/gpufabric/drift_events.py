# SPDX-License-Identifier: Apache-2.0
"""Read a check+diff run's ansible-runner job events into a `DriftResult` (gpufabric.drift_report).

Pure functions over the job events (``Runner.events`` or an artifacts directory's job_events):
no Ansible runs here. `summarize` turns the events into a `DriftResult`; `read_artifacts` reads the
events of an earlier run back from its artifacts directory.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.drift_report import (
    COUNT_KEYS,
    PLAYBOOK_ROLE,
    DriftResult,
    FileDiff,
    HostDrift,
    TaskChange,
    TaskError,
)
from gpufabric.errors import UserError
from gpufabric.runs import event_counter

# The module of the fast check (playbooks/drift_check.yml), whose one result names each drifted role.
RECORD_CHECK_ACTION = "gpufabric.cluster.drift_check"
# The kind of its finding for a role the host's record has no entry for (drift_state.compare).
NO_RECORD_KIND = "record"
# The fact site.yml sets on a host it leaves alone: the plan's {"code", "reason"} verdict.
UNMANAGED_FACT = "gpufabric_unmanaged"
# The fact the plan role sets: the host's plan, whose roles a --tags selection may leave unchecked.
PLAN_FACT = "gpufabric_plan"
# The task Ansible adds before each role's first task; tagged always, so it says nothing of what ran.
VALIDATE_ACTION = "ansible.builtin.validate_argument_spec"
# A diff side is cut after this many lines or characters: a report must stay readable and a
# JUnit/JSON file small even when a task would rewrite a large file.
MAX_DIFF_LINES = 200
MAX_DIFF_CHARS = 16 * 1024
# The play recap (playbook_on_stats: what ansible-runner's Runner.stats returns), per host: its key -> count key.
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


# What Ansible says of a loop with a failed item (the failure itself is in the item's result).
LOOP_FAILED = "One or more items failed"


def _message(res: Mapping[str, Any]) -> str:
    """The one-line-ish reason of a failed result: msg, else stderr, else the failed loop items'."""
    items = [item for item in res.get("results") or [] if isinstance(item, Mapping) and item.get("failed")]
    for key in ("msg", "stderr", "reason", "exception"):
        value = res.get(key)
        # A loop's own msg only says that an item failed; the items say why.
        if isinstance(value, str) and value.strip() and not (items and value == LOOP_FAILED):
            return value.strip()
    if items:
        return "; ".join(f"{item.get('_ansible_item_label', item.get('item'))}: {_message(item)}" for item in items)
    return "no message"


class _Host:
    """Per-host accumulation while reading the events."""

    def __init__(self, name: str) -> None:
        self.drift = HostDrift(name)
        self.unreachable_events = 0
        self.event_counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
        self.plan_roles: list[str] = []  # the roles of the host's plan, from the plan role's result

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
        # Ansible tags a role's argument validation always: it runs for a role that --tags left out.
        if data.get("resolved_action") != VALIDATE_ACTION:
            host.saw_role(role)
        if kind == "runner_on_ok":
            host.event_counts["ok"] += 1
            verdict = _unmanaged_verdict(res)
            if verdict is not None:
                host.drift.unmanaged = verdict
            host.plan_roles = _plan_roles(res) or host.plan_roles
            side = side_diffs.get((host.drift.host, str(data.get("task_uuid"))), [])
            # An emptied result (over ansible-runner's MAX_EVENT_RES) keeps no `changed`: a real
            # difference in its file_diff events is the evidence left.
            emptied = not res and any(_diffs(diff) for diff in side)
            if _is_record_check(data, res):
                # The fast check's one task speaks for every role of the plan: each is reported as its own.
                for checked in res["roles"]:
                    host.saw_role(str(checked))
            if _is_changed(res) or emptied:
                host.event_counts["changed"] += 1
                host.drift.changes.extend(_changes(task, role, data, res, side))
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
            missing.drift.in_run = False
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
        if host.drift.state != "unmanaged":
            host.drift.not_checked = [role for role in host.plan_roles if role not in host.drift.roles]
        if not host.drift.roles:
            host.saw_role(PLAYBOOK_ROLE)
        result_hosts[name] = host.drift
    return DriftResult(result_hosts, started, finished, playbook, problems)


def _plan_roles(res: Mapping[str, Any]) -> list[str]:
    """The roles of the plan the plan role set in this result (gpufabric_plan), else none."""
    facts = res.get("ansible_facts")
    plan = facts.get(PLAN_FACT) if isinstance(facts, Mapping) else None
    roles = plan.get("roles") if isinstance(plan, Mapping) else None
    return [str(role) for role in roles] if isinstance(roles, list) else []


def _unmanaged_verdict(res: Mapping[str, Any]) -> dict[str, str] | None:
    """site.yml's gpufabric_unmanaged fact in a task result, as {"code", "reason"}."""
    facts = res.get("ansible_facts")
    verdict = facts.get(UNMANAGED_FACT) if isinstance(facts, Mapping) else None
    if not isinstance(verdict, Mapping):
        return None
    return {"code": str(verdict.get("code") or "unknown_profile"), "reason": str(verdict.get("reason") or "")}


def _is_record_check(data: Mapping[str, Any], res: Mapping[str, Any]) -> bool:
    """A result of drift_check (playbooks/drift_check.yml): the roles it checked and those that drifted."""
    action = str(data.get("resolved_action") or data.get("task_action") or "")
    return (
        action == RECORD_CHECK_ACTION and isinstance(res.get("roles"), list) and isinstance(res.get("drifted"), Mapping)
    )


def _changes(
    task: str, role: str, data: Mapping[str, Any], res: Mapping[str, Any], side: list[Any]
) -> list[TaskChange]:
    """A changed task's TaskChange; for drift_check, one per drifted role, its findings as items and diffs."""
    if not _is_record_check(data, res):
        return [_change(task, role, data, res, side)]
    action = str(data.get("resolved_action") or data.get("task_action"))
    raw_diffs = res.get("diff")
    diffs: list[Any] = raw_diffs if isinstance(raw_diffs, list) else []
    changes = []
    for drifted_role, findings in res["drifted"].items():
        change = TaskChange(task, str(drifted_role), action)
        for finding in findings if isinstance(findings, list) else []:
            if isinstance(finding, Mapping):
                change.items.append(f"{finding.get('kind')} {finding.get('item')}")
        mine = [entry for entry in diffs if isinstance(entry, Mapping) and entry.get("role") == drifted_role]
        change.diffs.extend(_diffs(mine))
        changes.append(change)
    return changes


def hosts_without_record(result: DriftResult) -> list[str]:
    """The hosts the fast check found without a record of some role of their plan: they need the thorough check."""
    return [
        name
        for name, host in result.hosts.items()
        if any(
            change.action == RECORD_CHECK_ACTION and item.split(" ", 1)[0] == NO_RECORD_KIND
            for change in host.changes
            for item in change.items
        )
    ]


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
    """Each host's counts: the play recap when the run reached it, else the tally of the events.

    The recap is ansible-runner's own stats (Runner.stats is the data of this same event; it is read
    here from the events since a report is also made from an artifacts directory, with no Runner), and
    where the two differ it is the right answer: it knows a failure a rescue block handled, and counts
    a changed task whose event lost its result (too large for an event). The tally is kept for the one
    run it cannot answer: one that ended before its summary (killed, crashed: Runner.stats is None).
    """
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
    events.sort(key=event_counter)
    return events
