# SPDX-License-Identifier: Apache-2.0
"""A `DriftResult` (gpufabric.drift_report) as a file: JSON, JUnit XML, a Prometheus textfile.

Each writer returns the file's text; gpufabric.drift writes it atomically where the option says.
The formats are documented in docs/drift.md.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from gpufabric.drift_report import REPORT_VERSION, STATES, DriftResult, HostDrift, TaskChange, unique

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
        kinds = unique(error.kind for error in errors)
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


def _not_checked_testcase(host: HostDrift, role: str) -> tuple[ET.Element, str]:
    """A role of the plan that ran no task: skipped, never passed."""
    case = ET.Element("testcase", {"classname": _xml_text(host.host), "name": _xml_text(role), "time": "0"})
    ET.SubElement(case, "skipped", {"message": "not checked: not selected by --tags / --skip-tags"})
    return case, "skipped"


def to_junit(result: DriftResult) -> str:
    """JUnit XML: one testsuite per host, one testcase per host and role (classname host, name role)."""
    root = ET.Element("testsuites", {"name": "gpufabric drift"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    timestamp = (result.started or result.finished or datetime.now(UTC)).replace(microsecond=0)
    for name, host in result.hosts.items():
        suite = ET.SubElement(root, "testsuite", {"name": _xml_text(name)})
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        cases = [_unmanaged_testcase(host)] if host.state == "unmanaged" else [_testcase(host, r) for r in host.roles]
        cases += [_not_checked_testcase(host, role) for role in host.not_checked]
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
