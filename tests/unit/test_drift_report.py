# SPDX-License-Identifier: Apache-2.0
"""gpufabric.drift_events, drift_formats and drift_console over REAL ansible-runner events
(tests/fixtures/runner_events, recorded by record_fixtures.py from check+diff runs on localhost) and
small edits of them for the rarer shapes."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from gpufabric import drift_console, drift_events, drift_formats, drift_report
from gpufabric.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runner_events"
ODD_HOST = 'rack"7\\node'


def events(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def summary(name: str, **kwargs: Any) -> drift_report.DriftResult:
    return drift_events.summarize(events(name), **kwargs)


# ---------------------------------------------------------------------------
# summarize: host states, roles, diffs, counts
# ---------------------------------------------------------------------------


def test_clean_hosts_are_clean_and_exit_0() -> None:
    result = summary("clean")
    assert list(result.hosts) == ["gpu-clean-1", "gpu-clean-2"]
    assert {host.state for host in result.hosts.values()} == {"clean"}
    assert result.exit_code == 0 and result.state == "clean" and not result.problems
    host = result.hosts["gpu-clean-1"]
    assert host.roles == ["playbook", "drift_demo"]
    assert host.changes == [] and host.errors == []
    assert host.counts["ok"] == 6 and host.counts["skipped"] == 2 and host.counts["changed"] == 0


def test_drifted_host_lists_changed_tasks_per_role_with_diffs() -> None:
    result = summary("drifted")
    host = result.hosts["gpu-drift-1"]
    assert host.state == "drifted" and result.exit_code == 2
    assert host.drifted_roles() == ["drift_demo"]
    assert [change.task for change in host.changes_in("drift_demo")] == [
        "Write the fabric env file",
        "Write the unit drop-in without showing it",
        "Write the per-device files",
    ]
    assert host.changes_in("playbook") == []  # the motd matched: ok, not changed
    env = host.changes[0]
    assert env.action == "ansible.builtin.copy"
    (diff,) = env.diffs
    assert diff.header.endswith("gpu_drift_1.env")
    assert "NCCL_SOCKET_IFNAME=eth9" in diff.before and "NCCL_SOCKET_IFNAME=eth0" in diff.after
    assert "-NCCL_SOCKET_IFNAME=eth9\n" in diff.unified and "+NCCL_SOCKET_IFNAME=eth0\n" in diff.unified
    assert "-NCCL_DEBUG=INFO\n" in diff.unified and not diff.truncated


def test_check_mode_change_without_diff_is_drift_with_no_diffs() -> None:
    """`diff: false` on a task: changed, `diff: []`: it still counts, with nothing to show."""
    change = summary("drifted").hosts["gpu-drift-1"].changes[1]
    assert change.task == "Write the unit drop-in without showing it"
    assert change.diffs == []
    junit = drift_formats.to_junit(summary("drifted"))
    assert "the task gave no diff" in junit


def test_loop_task_counts_once_with_its_changed_items() -> None:
    change = summary("drifted").hosts["gpu-drift-1"].changes[2]
    assert change.items == ["mlx5_1"]  # mlx5_0 matched
    (diff,) = change.diffs
    assert "-mlx5_7\n" in diff.unified and "+mlx5_1\n" in diff.unified


def test_skipped_tasks_and_ignored_failures_are_not_drift_or_failure() -> None:
    host = summary("drifted").hosts["gpu-drift-1"]
    assert host.counts["skipped"] == 1 and host.counts["ignored"] == 1 and host.counts["failed"] == 0
    assert host.errors == []
    tasks = [change.task for change in host.changes]
    assert "Copy the optional tuning file" not in tasks and "Copy a file whose failure is ignored" not in tasks


def test_failed_host_exits_1_with_the_message() -> None:
    result = summary("failed")
    host = result.hosts["gpu-failed-1"]
    assert host.state == "failed" and result.exit_code == 1
    (error,) = host.errors
    assert error.kind == "failed" and error.role == "playbook" and error.task == "Copy a file that may be missing"
    assert "/nonexistent/gpufabric.src" in error.message


def test_unreachable_host_is_never_clean() -> None:
    result = summary("unreachable")
    host = result.hosts["gpu-dark-1"]
    assert host.state == "unreachable" and host.changes == [] and result.exit_code == 1
    assert host.errors[0].kind == "unreachable" and "temporary directory" in host.errors[0].message
    assert host.roles == ["playbook"]


def test_mixed_fleet_failure_wins_over_drift() -> None:
    result = summary("mixed")
    assert result.state_counts() == {"unreachable": 1, "failed": 1, "unmanaged": 0, "drifted": 2, "clean": 1}
    assert result.hosts_in("drifted") == ["gpu-drift-1", ODD_HOST]
    assert result.exit_code == 1 and result.state == "unreachable"
    assert result.started is not None and result.finished is not None and result.started < result.finished
    assert result.playbook == "drift.yml"


def test_empty_run_is_not_clean() -> None:
    result = summary("empty")
    assert result.hosts == {}
    assert result.exit_code == 1 and result.state == "failed"
    assert "no host was checked" in result.problems[0]


def test_no_events_at_all_is_not_clean() -> None:
    result = drift_events.summarize([])
    assert result.exit_code == 1 and result.started is None and result.finished is None


def test_run_without_stats_is_incomplete() -> None:
    cut = [event for event in events("drifted") if event["event"] != "playbook_on_stats"]
    result = drift_events.summarize(cut)
    assert result.hosts["gpu-drift-1"].state == "drifted"
    assert result.exit_code == 1 and "incomplete" in result.problems[0]
    # Without stats the counts come from the events (a loop task and its include count once).
    assert result.hosts["gpu-drift-1"].counts["changed"] == 3


def test_expected_host_missing_from_the_run_is_unreachable() -> None:
    result = summary("clean", expected_hosts=["gpu-clean-1", "gpu-clean-2", "gpu-ghost"])
    ghost = result.hosts["gpu-ghost"]
    assert ghost.state == "unreachable" and "not in the run" in ghost.errors[0].message
    assert result.exit_code == 1
    # apply tells a host that never ran (stopped) from one that did.
    assert not ghost.in_run and result.hosts["gpu-clean-1"].in_run


def test_rescued_failure_is_not_a_failure() -> None:
    """A failure a rescue block handled: the event says failed, the stats say rescued."""
    edited = copy.deepcopy(events("failed"))
    stats = edited[-1]["event_data"]
    stats["failures"], stats["rescued"] = {}, {"gpu-failed-1": 1}
    result = drift_events.summarize(edited)
    host = result.hosts["gpu-failed-1"]
    assert host.state == "clean" and host.errors == [] and host.counts["rescued"] == 1
    assert result.exit_code == 0


def test_result_emptied_for_size_falls_back_to_file_diff_events() -> None:
    """ansible-runner empties `res` over MAX_EVENT_RES; runner_on_file_diff still holds the diff."""
    edited = copy.deepcopy(events("drifted"))
    for event in edited:
        data = event["event_data"]
        if event["event"] == "runner_on_ok" and data.get("task") == "Write the fabric env file":
            data["res"] = {}
    change = drift_events.summarize(edited).hosts["gpu-drift-1"].changes[0]
    assert change.task == "Write the fabric env file"
    assert "+NCCL_SOCKET_IFNAME=eth0\n" in change.diffs[0].unified


def test_changes_only_the_stats_know_still_make_drift() -> None:
    """A loop whose final result was emptied: no event says changed, the stats do."""
    edited = copy.deepcopy(events("drifted"))
    for event in edited:
        if event["event"] == "runner_on_ok" and event["event_data"]["res"].get("changed"):
            event["event_data"]["res"] = {}
        if event["event"] == "runner_on_file_diff":
            event["event_data"]["diff"] = []
    host = drift_events.summarize(edited).hosts["gpu-drift-1"]
    assert host.state == "drifted"
    assert host.changes[0].task.startswith("(3 task(s) whose result was too large")


def test_large_diff_is_truncated_with_a_marker() -> None:
    edited = copy.deepcopy(events("drifted"))
    long_before = "".join(f"line {number}\n" for number in range(5000))
    for event in edited:
        data = event["event_data"]
        if event["event"] == "runner_on_ok" and data.get("task") == "Write the fabric env file":
            data["res"]["diff"][0]["before"] = long_before
    (diff,) = drift_events.summarize(edited).hosts["gpu-drift-1"].changes[0].diffs
    assert diff.truncated
    assert len(diff.before.splitlines()) == drift_events.MAX_DIFF_LINES + 1
    assert diff.before.endswith("more characters not shown)\n")
    assert len(diff.unified) < drift_events.MAX_DIFF_CHARS + 200


def test_binary_and_oversized_diffs_say_so() -> None:
    (diff,) = drift_events._diffs({"before": "", "after": "", "dst_larger": 104448, "after_header": "/etc/big"})
    assert diff.notes == ["the current content is larger than max_diff_size (104448 bytes): not shown"]
    assert drift_events._diffs({"before": {"path": "/a"}, "after": {"path": "/a"}}) == []
    (state,) = drift_events._diffs(
        {"before": {"path": "/a", "state": "absent"}, "after": {"path": "/a", "state": "file"}}
    )
    assert '-  "state": "absent"' in state.unified and '+  "state": "file"' in state.unified
    (prepared,) = drift_events._diffs({"prepared": "The following packages will be upgraded:\n  rdma-core\n"})
    assert prepared.unified.startswith("The following packages")


@pytest.mark.parametrize(
    ("role", "expected"),
    [(None, "playbook"), ("", "playbook"), ("nccl_env", "nccl_env"), ("gpufabric.cluster.nccl_env", "nccl_env")],
)
def test_role_name(role: str | None, expected: str) -> None:
    assert drift_events.role_name({"role": role}) == expected


def test_garbage_events_are_skipped() -> None:
    mixed: list[Any] = [None, "text", {"event": "runner_on_ok"}, {"event": "runner_on_ok", "event_data": "x"}]
    result = drift_events.summarize([*mixed, *events("clean")])
    assert result.exit_code == 0 and list(result.hosts) == ["gpu-clean-1", "gpu-clean-2"]


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def test_json_report() -> None:
    report = json.loads(drift_formats.to_json(summary("mixed")))
    assert report["report_version"] == 1 and report["exit_code"] == 1 and report["state"] == "unreachable"
    assert report["hosts_by_state"] == {"unreachable": 1, "failed": 1, "unmanaged": 0, "drifted": 2, "clean": 1}
    drifted = report["hosts"][ODD_HOST]
    assert (
        drifted["state"] == "drifted" and drifted["changed_tasks"] == 3 and drifted["drifted_roles"] == ["drift_demo"]
    )
    changes = drifted["roles"]["drift_demo"]["changes"]
    assert changes[2]["items"] == ["mlx5_1"] and changes[0]["diffs"][0]["after"].startswith("NCCL_IB_HCA")
    assert report["hosts"]["gpu-failed-1"]["roles"]["playbook"]["errors"][0]["kind"] == "failed"
    assert report["started"].endswith("+00:00") and report["duration_seconds"] > 0


# ---------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------


def parse_junit(text: str) -> ET.Element:
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        failures = [case for case in cases if case.find("failure") is not None]
        errors = [case for case in cases if case.find("error") is not None]
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == len(failures)
        assert int(suite.get("errors", "-1")) == len(errors)
        for case in cases:
            assert case.get("classname") and case.get("name")
            assert len([child for child in case if child.tag in ("failure", "error")]) <= 1
        totals["tests"] += len(cases)
        totals["failures"] += len(failures)
        totals["errors"] += len(errors)
    assert {key: int(root.get(key, "-1")) for key in totals} == totals
    return root


def cases(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    return {(case.get("classname", ""), case.get("name", "")): case for case in root.iter("testcase")}


def test_junit_one_case_per_host_and_role() -> None:
    root = parse_junit(drift_formats.to_junit(summary("mixed")))
    found = cases(root)
    assert set(found) == {
        ("gpu-clean-1", "playbook"),
        ("gpu-clean-1", "drift_demo"),
        ("gpu-dark-1", "playbook"),
        ("gpu-drift-1", "playbook"),
        ("gpu-drift-1", "drift_demo"),
        ("gpu-failed-1", "playbook"),
        (ODD_HOST, "playbook"),
        (ODD_HOST, "drift_demo"),
    }
    assert root.get("tests") == "8" and root.get("failures") == "2" and root.get("errors") == "2"
    drift = found[("gpu-drift-1", "drift_demo")].find("failure")
    assert drift is not None and drift.get("type") == "drift"
    assert "Write the fabric env file" in (drift.get("message") or "")
    assert "+NCCL_SOCKET_IFNAME=eth0" in (drift.text or "")
    dark = found[("gpu-dark-1", "playbook")].find("error")
    assert dark is not None and dark.get("type") == "unreachable"
    failed = found[("gpu-failed-1", "playbook")].find("error")
    assert failed is not None and "/nonexistent/gpufabric.src" in (failed.text or "")
    assert len(failed.get("message") or "") <= 200
    assert found[("gpu-clean-1", "drift_demo")].find("failure") is None


def test_junit_clean_run_has_no_failures() -> None:
    root = parse_junit(drift_formats.to_junit(summary("clean")))
    assert root.get("tests") == "4" and root.get("failures") == "0" and root.get("errors") == "0"


def test_junit_empty_run_is_an_error() -> None:
    root = parse_junit(drift_formats.to_junit(summary("empty")))
    assert root.get("tests") == "1" and root.get("errors") == "1"
    error = root.find("testsuite/testcase/error")
    assert error is not None and "no host was checked" in (error.get("message") or "")


def test_junit_drift_and_error_in_one_role_is_one_error() -> None:
    edited = copy.deepcopy(events("drifted"))
    stats = edited[-1]
    failure = copy.deepcopy(next(event for event in edited if event["event"] == "runner_on_failed"))
    failure["event_data"].update(role="drift_demo", ignore_errors=None, task="Break the role")
    stats["event_data"]["failures"] = {"gpu-drift-1": 1}
    edited.insert(len(edited) - 1, failure)
    root = parse_junit(drift_formats.to_junit(drift_events.summarize(edited)))
    case = cases(root)[("gpu-drift-1", "drift_demo")]
    (error,) = [child for child in case if child.tag in ("failure", "error")]
    assert error.tag == "error" and "would also change" in (error.text or "")


def test_junit_carries_control_characters_as_text() -> None:
    """An ANSI escape in a diff is not allowed in XML 1.0: it becomes \\x1b, the file still parses."""
    edited = copy.deepcopy(events("drifted"))
    for event in edited:
        data = event["event_data"]
        if event["event"] == "runner_on_ok" and data.get("task") == "Write the fabric env file":
            data["res"]["diff"][0]["before"] = "\x1b[31mred\x1b[0m\x00\n"
    text = drift_formats.to_junit(drift_events.summarize(edited))
    parse_junit(text)
    assert "\\x1b[31mred" in text and "\x1b" not in text


def test_junit_escapes_odd_host_names() -> None:
    root = parse_junit(drift_formats.to_junit(summary("mixed")))
    assert any(suite.get("name") == ODD_HOST for suite in root.findall("testsuite"))


# ---------------------------------------------------------------------------
# Prometheus textfile collector
# ---------------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?\}})? (\S+)$")


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda match: {"n": "\n", "\\": "\\", '"': '"'}[match.group(1)], value)


def parse_exposition(text: str) -> dict[str, dict[str, Any]]:
    """A strict reader of the text exposition format (gauges): HELP and TYPE before the samples."""
    assert text.endswith("\n")
    metrics: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _sep, help_text = line[7:].partition(" ")
            assert name not in metrics, f"{name} declared twice"
            metrics[name] = {"help": help_text, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _sep, kind = line[7:].partition(" ")
            assert name == current and kind == "gauge"
            metrics[name]["type"] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name = match.group(1)
            assert name == current and metrics[name]["type"] == "gauge"
            labels = {key: _unescape(value) for key, value in re.findall(_LABEL, match.group(2) or "")}
            metrics[name]["samples"].append((labels, float(match.group(match.lastindex or 0))))
    return metrics


def test_prometheus_textfile() -> None:
    result = summary("mixed")
    metrics = parse_exposition(drift_formats.to_prometheus(result))
    hosts = {labels["state"]: value for labels, value in metrics["gpufabric_drift_hosts"]["samples"]}
    assert hosts == {"clean": 1, "drifted": 2, "unmanaged": 0, "failed": 1, "unreachable": 1}
    drifted = {labels["host"]: value for labels, value in metrics["gpufabric_drift_host_drifted"]["samples"]}
    assert drifted == {"gpu-clean-1": 0, "gpu-dark-1": 0, "gpu-drift-1": 1, "gpu-failed-1": 0, ODD_HOST: 1}
    changed = {labels["host"]: value for labels, value in metrics["gpufabric_drift_host_changed_tasks"]["samples"]}
    assert changed[ODD_HOST] == 3 and changed["gpu-clean-1"] == 0
    states = {
        (labels["host"], labels["state"]) for labels, value in metrics["gpufabric_drift_host_state"]["samples"] if value
    }
    assert ("gpu-dark-1", "unreachable") in states and len(states) == 5
    assert metrics["gpufabric_drift_host_unmanaged"]["samples"] == []
    ((_labels, stamp),) = metrics["gpufabric_drift_last_run_timestamp_seconds"]["samples"]
    assert result.finished is not None and stamp == pytest.approx(result.finished.timestamp(), abs=0.001)
    ((_labels, code),) = metrics["gpufabric_drift_exit_code"]["samples"]
    assert code == 1
    assert all(metric["help"] for metric in metrics.values())


def test_prometheus_label_escaping_and_the_librarys_own_reading() -> None:
    text = drift_formats.to_prometheus(summary("mixed"))
    assert 'gpufabric_drift_host_drifted{host="rack\\"7\\\\node"} 1.0\n' in text
    # prometheus_client's parser (what a Prometheus server's text reader follows) reads it back whole.
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert {sample.labels["host"] for sample in families["gpufabric_drift_host_drifted"].samples} >= {ODD_HOST}
    assert all(family.type == "gauge" for family in families.values())


def test_prometheus_empty_run_has_all_states_at_zero() -> None:
    from datetime import UTC, datetime

    now = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)
    metrics = parse_exposition(drift_formats.to_prometheus(drift_events.summarize([]), now=now))
    assert [value for _labels, value in metrics["gpufabric_drift_hosts"]["samples"]] == [0, 0, 0, 0, 0]
    assert metrics["gpufabric_drift_host_drifted"]["samples"] == []
    assert metrics["gpufabric_drift_last_run_timestamp_seconds"]["samples"] == [({}, now.timestamp())]


# ---------------------------------------------------------------------------
# Table and artifacts
# ---------------------------------------------------------------------------


def test_render_table_and_details() -> None:
    console = Console(record=True, width=200, color_system=None)
    drift_console.render(summary("mixed"), console, diffs=True)
    text = console.export_text()
    for expected in ("gpu-clean-1", "CLEAN", "UNREACHABLE", "FAILED", "DRIFTED", ODD_HOST, "drift_demo"):
        assert expected in text
    assert "+NCCL_SOCKET_IFNAME=eth0" in text
    assert "1 clean, 2 drifted, 1 failed, 1 unreachable (exit 1)" in text


def test_render_empty_run_names_the_problem() -> None:
    console = Console(record=True, width=200, color_system=None)
    drift_console.render(summary("empty"), console)
    assert "no host was checked" in console.export_text()


def test_read_artifacts_in_counter_order(tmp_path: Path) -> None:
    job_events = tmp_path / "job_events"
    job_events.mkdir()
    for event in reversed(events("drifted")):
        (job_events / f"{event['counter']}-{event['uuid']}.json").write_text(json.dumps(event))
    loaded = drift_events.read_artifacts(tmp_path)
    assert [event["counter"] for event in loaded] == sorted(event["counter"] for event in events("drifted"))
    assert drift_events.summarize(loaded).exit_code == 2


def test_read_artifacts_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a directory"):
        drift_events.read_artifacts(tmp_path / "nope")
    with pytest.raises(UserError, match="holds no job event"):
        drift_events.read_artifacts(tmp_path)
    (tmp_path / "1-x.json").write_text("{broken")
    with pytest.raises(UserError, match=r"1-x\.json: not a readable ansible-runner job event"):
        drift_events.read_artifacts(tmp_path)


def test_fixtures_are_real_runner_shapes() -> None:
    """The recorded events hold every shape the summary reads, as ansible-runner 2.4 writes them."""
    kinds = {event["event"] for event in events("mixed")}
    assert {
        "playbook_on_start",
        "playbook_on_task_start",
        "runner_on_ok",
        "runner_on_failed",
        "runner_on_unreachable",
        "runner_on_skipped",
        "runner_on_file_diff",
        "runner_item_on_ok",
        "playbook_on_stats",
    } <= kinds
    assert all({"uuid", "counter", "created", "event_data"} <= set(event) for event in events("mixed"))


# ---------------------------------------------------------------------------
# hosts site.yml left alone: never clean
# ---------------------------------------------------------------------------


def with_unmanaged(code: str, host: str = "gpu-clean-2") -> list[dict[str, Any]]:
    """The clean fixture, with `host` left alone as site.yml does it (its fact recorded, nothing run)."""
    recorded = [event for event in events("clean") if event.get("event_data", {}).get("host") != host]
    stats = recorded.pop()
    verdict = {"code": code, "reason": f"why {code}"}
    recorded.append(
        {
            "event": "runner_on_ok",
            "counter": stats["counter"],
            "event_data": {
                "host": host,
                "task": "Record why the host is not managed",
                "res": {"ansible_facts": {"gpufabric_unmanaged": verdict}, "changed": False},
            },
        }
    )
    recorded.append(stats)
    return recorded


@pytest.mark.parametrize("code", ["unknown_profile", "no_profile"])
def test_a_host_left_alone_is_unmanaged_in_every_format_and_fails_the_run(code: str) -> None:
    result = drift_events.summarize(with_unmanaged(code), expected_hosts=["gpu-clean-1", "gpu-clean-2"])
    host = result.hosts["gpu-clean-2"]
    assert host.state == "unmanaged" and host.unmanaged == {"code": code, "reason": f"why {code}"}
    assert result.exit_code == 1 and result.state == "unmanaged"

    report = json.loads(drift_formats.to_json(result))
    assert report["exit_code"] == 1 and report["hosts_by_state"]["unmanaged"] == 1
    assert report["hosts"]["gpu-clean-2"]["unmanaged"] == {"code": code, "reason": f"why {code}"}

    suites = {suite.get("name"): suite for suite in ET.fromstring(drift_formats.to_junit(result))}
    failure = suites["gpu-clean-2"].find("testcase/failure")
    assert failure is not None and failure.get("type") == "unmanaged" and f"why {code}" in failure.get("message", "")

    metrics = parse_exposition(drift_formats.to_prometheus(result))
    assert metrics["gpufabric_drift_host_unmanaged"]["samples"] == [({"host": "gpu-clean-2", "code": code}, 1)]
    ((_labels, exit_code),) = metrics["gpufabric_drift_exit_code"]["samples"]
    assert exit_code == 1


def test_a_host_excluded_on_purpose_is_reported_but_not_counted() -> None:
    result = drift_events.summarize(with_unmanaged("excluded"), expected_hosts=["gpu-clean-1", "gpu-clean-2"])
    assert result.hosts["gpu-clean-2"].state == "unmanaged" and result.hosts["gpu-clean-2"].excluded
    assert result.exit_code == 0 and result.state == "clean"
    suites = {suite.get("name"): suite for suite in ET.fromstring(drift_formats.to_junit(result))}
    assert suites["gpu-clean-2"].find("testcase/skipped") is not None
    assert suites["gpu-clean-2"].get("skipped") == "1" and suites["gpu-clean-2"].get("failures") == "0"


def test_a_failed_loop_is_reported_by_its_failed_items() -> None:
    from gpufabric.drift_events import _message

    loop = {
        "msg": "One or more items failed",
        "results": [
            {"failed": False, "msg": "", "_ansible_item_label": "/etc/apt/keyrings/a.gpg"},
            {"failed": True, "msg": "the key did not match the pinned checksum", "_ansible_item_label": "/etc/b.gpg"},
        ],
    }
    assert _message(loop) == "/etc/b.gpg: the key did not match the pinned checksum"
    assert _message({"msg": "One or more items failed"}) == "One or more items failed"


def test_the_fast_checks_one_task_reports_each_drifted_role() -> None:
    """drift_check's result (playbooks/drift_check.yml) names the roles it checked and the drifted ones."""
    edited = copy.deepcopy(events("drifted"))
    finding = {"role": "sriov", "kind": "units", "item": "gpufabric-sriov.service", "recorded": {}, "live": {}}
    for event in edited:
        data = event["event_data"]
        if event["event"] == "runner_on_ok" and data.get("task") == "Write the fabric env file":
            data.update(task="Compare the host with the record of its last apply", role=None)
            data["resolved_action"] = "gpufabric.cluster.drift_check"
            data["res"] = {
                "changed": True,
                "roles": ["fabric_facts", "sriov", "nccl_env"],
                "drifted": {"sriov": [finding], "nccl_env": [{**finding, "role": "nccl_env", "kind": "plan"}]},
                "diff": [
                    {"role": "sriov", "before_header": "a", "after_header": "b", "before": "x\n", "after": "y\n"},
                    {"role": "nccl_env", "before_header": "c", "after_header": "d", "before": "1\n", "after": "2\n"},
                ],
            }
    host = drift_events.summarize(edited).hosts["gpu-drift-1"]
    assert host.state == "drifted"
    assert {"fabric_facts", "sriov", "nccl_env"} <= set(host.roles)
    changes = {change.role: change for change in host.changes}
    assert changes["sriov"].items == ["units gpufabric-sriov.service"]
    assert changes["nccl_env"].items == ["plan gpufabric-sriov.service"]
    assert [diff.unified for diff in changes["sriov"].diffs] == ["--- before: a\n+++ after: b\n@@ -1 +1 @@\n-x\n+y\n"]
    assert [diff.header for diff in changes["nccl_env"].diffs] == ["d"]


def test_roles_of_the_plan_that_ran_no_task_are_not_checked_never_clean_by_silence() -> None:
    edited = events("clean")
    first_ok = next(
        event for event in edited if event["event"] == "runner_on_ok" and event["event_data"]["host"] == "gpu-clean-1"
    )
    first_ok["event_data"]["res"]["ansible_facts"] = {"gpufabric_plan": {"roles": ["drift_demo", "nccl_env"]}}
    # Ansible's argument validation of a role is tagged always: it runs for a role --tags left out.
    validation = copy.deepcopy(first_ok)
    validation["event_data"].update(
        role="gpufabric.cluster.nccl_env", resolved_action="ansible.builtin.validate_argument_spec"
    )
    validation["event_data"]["res"] = {"changed": False}
    edited.insert(edited.index(first_ok) + 1, validation)
    result = drift_events.summarize(edited)
    host = result.hosts["gpu-clean-1"]
    assert host.state == "clean" and host.not_checked == ["nccl_env"] and "nccl_env" not in host.roles
    assert result.hosts["gpu-clean-2"].not_checked == []
    assert json.loads(drift_formats.to_json(result))["hosts"]["gpu-clean-1"]["not_checked"] == ["nccl_env"]
    skipped = cases(parse_junit(drift_formats.to_junit(result)))[("gpu-clean-1", "nccl_env")]
    assert skipped.find("skipped") is not None
    console = Console(record=True, width=200)
    drift_console.render(result, console)
    assert "not checked gpu-clean-1: nccl_env (not selected by --tags / --skip-tags" in console.export_text()
