# SPDX-License-Identifier: Apache-2.0
"""A `DriftResult` (gpufabric.drift_report) as a file: JSON, JUnit XML, a Prometheus textfile.

Each writer returns the file's text; gpufabric.drift writes it atomically where the option says.
The formats are documented in docs/drift.md.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import junitparser
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from gpufabric.drift_report import REPORT_VERSION, STATES, DriftResult, HostDrift, TaskChange, unique

# What a JUnit test case's outcome element can be.
_Outcome = junitparser.Failure | junitparser.Error | junitparser.Skipped

# Characters XML 1.0 cannot carry at all (even escaped): control characters but tab, LF, CR.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

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
# JUnit XML (written by junitparser: the element names, attributes and counts of the JUnit format)
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


def _outcome(kind: type[_Outcome], type_: str | None, message: str, text: str = "") -> _Outcome:
    """A <failure>, <error> or <skipped> element: its type, its one-line message and, in its text, the whole."""
    outcome = kind(_xml_text(message), type_)
    if text:
        outcome.text = _xml_text(text)
    return outcome


def _case(host: str, name: str, *outcomes: _Outcome) -> junitparser.TestCase:
    case = junitparser.TestCase(_xml_text(name), _xml_text(host), 0)
    # JUnit allows one of failure/error/skipped per case.
    case.result = list(outcomes)
    return case


def _testcase(host: HostDrift, role: str) -> junitparser.TestCase:
    """One host+role test case: passed, a failure (drift) or an error."""
    changes, errors = host.changes_in(role), host.errors_in(role)
    drift_text = "\n\n".join(_change_text(change) for change in changes)
    if errors:
        # An error hides nothing: its text has the drift too.
        text = "\n\n".join(f"{error.kind}: {error.task}\n{error.message}" for error in errors)
        error = _outcome(
            junitparser.Error,
            "/".join(unique(error.kind for error in errors)),
            _headline(f"{errors[0].kind}: {errors[0].task}: {errors[0].message}"),
            text + (f"\n\nwould also change:\n{drift_text}" if drift_text else ""),
        )
        return _case(host.host, role, error)
    if changes:
        names = ", ".join(change.task for change in changes)
        message = f"{len(changes)} task(s) would change: {names}"
        return _case(host.host, role, _outcome(junitparser.Failure, "drift", message, drift_text))
    return _case(host.host, role)


def _unmanaged_testcase(host: HostDrift) -> junitparser.TestCase:
    """The one test case of a host site.yml left alone: a failure, skipped when excluded on purpose."""
    verdict = host.unmanaged
    assert verdict is not None  # the state is "unmanaged" only with a verdict
    message = _headline(f"NOT MANAGED ({verdict['code']}): {verdict['reason']}")
    if host.excluded:
        return _case(host.host, "managed", _outcome(junitparser.Skipped, None, message))
    text = (
        f"{verdict['reason']}\ngpufabric did not check this host: give it a catalog profile "
        "(gpufabric_profile, or gpufabric_cloud with gpufabric_instance_type), or exclude it on purpose "
        "with gpufabric_managed: false"
    )
    return _case(host.host, "managed", _outcome(junitparser.Failure, "unmanaged", message, text))


def _not_checked_testcase(host: HostDrift, role: str) -> junitparser.TestCase:
    """A role of the plan that ran no task: skipped, never passed."""
    skipped = _outcome(junitparser.Skipped, None, "not checked: not selected by --tags / --skip-tags")
    return _case(host.host, role, skipped)


def to_junit(result: DriftResult) -> str:
    """JUnit XML: one testsuite per host, one testcase per host and role (classname host, name role)."""
    report = junitparser.JUnitXml("gpufabric drift")
    timestamp = (result.started or result.finished or datetime.now(UTC)).replace(microsecond=0)
    for name, host in result.hosts.items():
        suite = junitparser.TestSuite(_xml_text(name))
        # Properties first: the JUnit schema wants them before the test cases.
        suite.add_property("state", host.state)
        if host.unmanaged:
            suite.add_property("unmanaged", host.unmanaged["code"])
        cases = [_unmanaged_testcase(host)] if host.state == "unmanaged" else [_testcase(host, r) for r in host.roles]
        suite.add_testcases(cases + [_not_checked_testcase(host, role) for role in host.not_checked])
        suite.timestamp = timestamp.isoformat()
        report.add_testsuite(suite)
    if result.problems:
        # A run-level problem must fail the build too, even with no host to hang it on.
        suite = junitparser.TestSuite("run")
        error = _outcome(junitparser.Error, "run", result.problems[0], "\n".join(result.problems))
        suite.add_testcase(_case("gpufabric drift", "run", error))
        report.add_testsuite(suite)
    # tests, failures, errors, skipped and time of every suite and of the whole (junitparser has no annotations here)
    report.update_statistics()  # type: ignore[no-untyped-call]
    report.time = _duration(result) or 0
    written = io.BytesIO()
    report.write(written, pretty=True)  # with the XML declaration, indented as before
    return written.getvalue().decode("utf-8")


# ---------------------------------------------------------------------------
# Prometheus textfile collector
# ---------------------------------------------------------------------------


class _Gauges:
    """A prometheus_client collector of the gauges of one drift result, added in order."""

    def __init__(self) -> None:
        self.families: list[GaugeMetricFamily] = []

    def add(self, name: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        labels = list(samples[0][0]) if samples else []
        family = GaugeMetricFamily(name, help_text, labels=labels)
        for values, value in samples:
            family.add_metric([values[label] for label in labels], value)
        self.families.append(family)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(self.families)


def to_prometheus(result: DriftResult, *, now: datetime | None = None) -> str:
    """The textfile-collector file (node_exporter --collector.textfile.directory): gauges only."""
    finished = result.finished or result.started or now or datetime.now(UTC)
    gauges = _Gauges()
    counts = result.state_counts()
    gauges.add(
        "gpufabric_drift_hosts",
        "Hosts per state in the last gpufabric drift run (clean, drifted, unmanaged, failed, unreachable).",
        [({"state": state}, counts[state]) for state in STATES],
    )
    gauges.add(
        "gpufabric_drift_host_drifted",
        "1 when at least one task would change the host in the last gpufabric drift run, else 0.",
        [({"host": name}, 1 if host.changes else 0) for name, host in result.hosts.items()],
    )
    gauges.add(
        "gpufabric_drift_host_changed_tasks",
        "Tasks that would change the host in the last gpufabric drift run.",
        [({"host": name}, len(host.changes)) for name, host in result.hosts.items()],
    )
    gauges.add(
        "gpufabric_drift_host_state",
        "1 for the host's state in the last gpufabric drift run, 0 for the other states.",
        [
            ({"host": name, "state": state}, 1 if host.state == state else 0)
            for name, host in result.hosts.items()
            for state in STATES
        ],
    )
    gauges.add(
        "gpufabric_drift_host_unmanaged",
        "1 for a host the last gpufabric drift run did not check, by why (no_profile, unknown_profile, excluded).",
        [({"host": name, "code": host.unmanaged["code"]}, 1) for name, host in result.hosts.items() if host.unmanaged],
    )
    gauges.add(
        "gpufabric_drift_exit_code",
        "Exit code of the last gpufabric drift run: 0 clean, 2 drifted, 1 failed, unreachable, unmanaged, incomplete.",
        [({}, result.exit_code)],
    )
    duration = _duration(result)
    if duration is not None and math.isfinite(duration):
        gauges.add(
            "gpufabric_drift_last_run_duration_seconds",
            "Wall time of the last gpufabric drift run.",
            [({}, duration)],
        )
    gauges.add(
        "gpufabric_drift_last_run_timestamp_seconds",
        "Unix time the last gpufabric drift run finished.",
        [({}, round(finished.timestamp(), 3))],
    )
    # prometheus_client's own exposition (escaping, number format); drift.py writes it atomically like the
    # JSON and JUnit reports (write_to_textfile's temp-file-and-rename, with gpufabric's checks and messages).
    registry = CollectorRegistry(auto_describe=False)
    registry.register(gauges)
    return generate_latest(registry).decode("utf-8")
