# SPDX-License-Identifier: Apache-2.0
"""`gpufabric drift`: the check -> remediate -> final check flow and the reports, with the playbook
runs replaced by REAL recorded ansible-runner events (tests/fixtures/runner_events); the command
line through typer's CliRunner; and usage errors through the real `gpufabric` command (exit 1, never
drift's 2; one line, no traceback). tests/lab/test_fleet_life.py runs all of it on a lab fleet over SSH."""

from __future__ import annotations

import copy
import json
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml
from rich.console import Console
from typer.testing import CliRunner

from gpufabric import cli, drift, drift_events, drift_report, runs
from gpufabric.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runner_events"
HOSTS = ["gpu-clean-1", "gpu-clean-2", "gpu-drift-1"]


def fixture_events(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def merged(*runs_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several recorded runs as one: their host events, then one playbook_on_stats adding theirs up."""
    events: list[dict[str, Any]] = []
    stats: dict[str, Any] = {}
    for recorded in runs_events:
        for event in copy.deepcopy(recorded):
            if event["event"] == "playbook_on_stats":
                for key, per_host in event["event_data"].items():
                    if isinstance(per_host, dict):
                        stats.setdefault(key, {}).update(per_host)
            else:
                events.append(event)
    events.append({"event": "playbook_on_stats", "counter": len(events) + 1, "event_data": stats})
    return events


def without_changes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A recorded run as it reads once nothing would change any more."""
    edited = copy.deepcopy(events)
    for event in edited:
        res = event.get("event_data", {}).get("res")
        if isinstance(res, dict):
            res["changed"] = False
            for item in res.get("results", []):
                item["changed"] = False
        if event["event"] == "playbook_on_stats":
            event["event_data"]["changed"] = {}
    return edited


def with_reboot_fact(events: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    edited = copy.deepcopy(events)
    stats = edited.pop()
    summary = {"host": host, "task": "Summarize", "res": {"changed": False, "ansible_facts": {runs.REBOOT_FACT: False}}}
    edited += [{"event": "runner_on_ok", "counter": stats["counter"], "event_data": summary}, stats]
    return edited


def fast_check(events: list[dict[str, Any]], host: str, kind: str) -> list[dict[str, Any]]:
    """A recorded run as drift_check.yml's would read: `host`'s one drift_check result with a finding of `kind`
    in nccl_env (kind "record": the host's record has no entry for the role)."""
    edited = without_changes(events)
    finding = {"role": "nccl_env", "kind": kind, "item": "nccl_env", "recorded": None, "live": "no record of this role"}
    data = next(e["event_data"] for e in edited if e["event"] == "runner_on_ok" and e["event_data"].get("host") == host)
    data.update(task="Compare the host with the record of its last apply", role=None)
    data["resolved_action"] = "gpufabric.cluster.drift_check"
    data["res"] = {"changed": True, "roles": ["nccl_env"], "drifted": {"nccl_env": [finding]}}
    return edited


DRIFTED = merged(fixture_events("clean"), fixture_events("drifted"))
REMEDIATED = with_reboot_fact(fixture_events("drifted"), "gpu-drift-1")
CLEAN = merged(fixture_events("clean"), without_changes(fixture_events("drifted")))


class FakeRuns:
    """Stands in for runs.run_playbook, runs.inventory_hosts and runs.hosts_outside_quarantine; records every
    call."""

    def __init__(self, replies: list[list[dict[str, Any]]], inventory: dict[str, list[str]] | None = None) -> None:
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []
        self.inventory = inventory or {}

    def inventory_hosts(self, inventory: str, limit: list[str] | None = None) -> list[str]:
        key = ",".join(limit) if limit else ""
        if key in self.inventory:
            return self.inventory[key]
        # Ansible's patterns, as far as these tests use them: names and globs, comma-separated.
        return [host for host in HOSTS if not key or any(fnmatch(host, part) for part in key.split(","))]

    def hosts_outside_quarantine(
        self, inventory: str, limit: list[str] | None = None
    ) -> tuple[list[str], list[str] | None, list[str]]:
        return self.inventory_hosts(inventory, limit), limit, []

    def run_playbook(self, playbook: Path, inventory: str, **kwargs: Any) -> runs.PlaybookRun:
        self.calls.append({"playbook": playbook, "inventory": inventory, **kwargs})
        kwargs["artifacts_dir"].mkdir(parents=True)
        events = self.replies.pop(0)
        return runs.PlaybookRun(0, "successful", events, kwargs["artifacts_dir"], 1.0, kwargs["hosts"])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRuns:
    replies = FakeRuns([])
    monkeypatch.setattr(runs, "run_playbook", replies.run_playbook)
    monkeypatch.setattr(runs, "inventory_hosts", replies.inventory_hosts)
    monkeypatch.setattr(runs, "hosts_outside_quarantine", replies.hosts_outside_quarantine)
    monkeypatch.delenv("GPUFABRIC_CATALOG", raising=False)
    return replies


def options(tmp_path: Path, **kwargs: Any) -> drift.DriftOptions:
    """The thorough check unless `fast` is given: the flow (remediate, reports, exit codes) is the same for both,
    and the thorough check's recorded runs have a change per task."""
    return drift.DriftOptions("fleet.yml", artifacts=tmp_path / "runs", **{"fast": False, **kwargs})


# ---------------------------------------------------------------------------
# the flow
# ---------------------------------------------------------------------------


def test_one_check_reports_drift_and_exits_2(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [DRIFTED]
    console = Console(record=True, width=200)
    report = tmp_path / "drift.json"
    outcome = drift.execute(options(tmp_path, json_path=report, tier="standard"), None, console)
    assert outcome.exit_code == 2
    assert outcome.first is outcome.final and outcome.remediation is None
    (call,) = fake.calls
    assert call["check"] and call["diff"] and call["limit"] is None and call["hosts"] == HOSTS
    assert call["extravars"] == {"gpufabric_tier": "standard"}
    assert call["playbook"].name == "site.yml"
    assert call["artifacts_dir"] == tmp_path / "runs" / "check"
    written = json.loads(report.read_text())
    assert written["exit_code"] == 2 and written["hosts_by_state"]["drifted"] == 1
    text = console.export_text()
    assert "step 1/" not in text, "one check needs no step headers"
    assert f"wrote {report}" in text and f"artifacts: {tmp_path / 'runs'}" in text


def test_the_fast_check_is_the_default_and_checks_hosts_without_a_record_thoroughly(
    fake: FakeRuns, tmp_path: Path
) -> None:
    assert drift.DriftOptions("fleet.yml").fast is True
    fake.replies = [merged(fixture_events("clean"), fast_check(fixture_events("drifted"), "gpu-drift-1", "record"))]
    fake.replies.append(without_changes(fixture_events("drifted")))  # the thorough check: that host is clean
    lines: list[str] = []
    outcome = drift.execute(drift.DriftOptions("fleet.yml", artifacts=tmp_path / "runs"), lines.append)
    fast, thorough = fake.calls
    assert fast["playbook"].name == "drift_check.yml" and fast["hosts"] == HOSTS
    assert thorough["playbook"].name == "site.yml" and thorough["check"] and thorough["diff"]
    assert thorough["hosts"] == ["gpu-drift-1"], "only the host without a record"
    assert thorough["artifacts_dir"] == tmp_path / "runs" / "check-thorough"
    assert any("1 host(s) without a full record" in line and "gpu-drift-1" in line for line in lines)
    assert outcome.exit_code == 0 and [host.state for host in outcome.final.hosts.values()] == ["clean"] * 3
    assert list(outcome.final.hosts) == HOSTS


def test_the_fast_checks_own_findings_need_no_thorough_check(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [merged(fixture_events("clean"), fast_check(fixture_events("drifted"), "gpu-drift-1", "files"))]
    outcome = drift.execute(drift.DriftOptions("fleet.yml", artifacts=tmp_path / "runs"))
    assert len(fake.calls) == 1 and outcome.exit_code == 2
    assert outcome.final.hosts_in("drifted") == ["gpu-drift-1"]


def test_fast_runs_drift_check_yml_for_every_check(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [DRIFTED, REMEDIATED, CLEAN]
    outcome = drift.execute(options(tmp_path, fast=True, remediate=True), None, Console(quiet=True))
    assert outcome.exit_code == 0
    check, remedy, final = fake.calls
    assert check["playbook"].name == final["playbook"].name == "drift_check.yml"
    assert check["check"] and check["diff"]
    assert remedy["playbook"].name == "site.yml" and not remedy["check"]  # the apply writes the record anew


def test_remediate_applies_to_the_drifted_hosts_only_then_checks_again(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [DRIFTED, REMEDIATED, CLEAN]
    console = Console(record=True, width=200)
    paths = {"json_path": tmp_path / "d.json", "junit_path": tmp_path / "d.xml", "prom_path": tmp_path / "d.prom"}
    outcome = drift.execute(options(tmp_path, remediate=True, limit="gpu-*", **paths), None, console)
    check, remedy, final = fake.calls
    assert (check["check"], remedy["check"], final["check"]) == (True, False, True)
    assert remedy["limit"] == ["gpu-drift-1"], "never a clean host"
    assert remedy["hosts"] == ["gpu-drift-1"]
    assert check["limit"] == final["limit"] == ["gpu-*"]
    assert [call["artifacts_dir"].name for call in fake.calls] == ["check", "remediate", "final-check"]
    assert outcome.first.hosts_in("drifted") == ["gpu-drift-1"]
    assert outcome.remediation is not None and outcome.remediation.exit_code == 0
    assert outcome.final.state == "clean" and outcome.exit_code == 0
    # The reports describe the final check.
    assert json.loads(paths["json_path"].read_text())["state"] == "clean"
    assert "gpufabric_drift_exit_code 0" in paths["prom_path"].read_text()
    junit = JUnitXml.fromfile(str(paths["junit_path"]))
    assert junit.tests > 0 and (junit.failures, junit.errors) == (0, 0)
    text = console.export_text()
    for header in ("step 1/3: check 3 host(s)", "step 2/3: remediate 1 drifted host(s): gpu-drift-1", "step 3/3"):
        assert header in text
    assert text.index("DRIFTED") < text.index("gpufabric apply") < text.rindex("CLEAN")


def test_remediate_with_nothing_drifted_runs_once(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [CLEAN]
    console = Console(record=True, width=200)
    outcome = drift.execute(options(tmp_path, remediate=True), None, console)
    assert len(fake.calls) == 1 and outcome.exit_code == 0 and outcome.remediation is None
    assert "nothing to apply" in console.export_text()


def test_remediation_that_would_select_a_clean_host_is_refused(fake: FakeRuns, tmp_path: Path) -> None:
    # A drifted host named like a pattern that also matches a clean host.
    fake.inventory = {"gpu-drift-1": ["gpu-clean-1", "gpu-drift-1"]}
    fake.replies = [DRIFTED]
    outcome = drift.execute(options(tmp_path, remediate=True), None, Console(quiet=True))
    assert len(fake.calls) == 1, "no remediation ran"
    assert outcome.exit_code == 2
    assert outcome.problems == ["remediation not run: a --limit of the drifted hosts would also select gpu-clean-1"]


def test_a_host_that_never_answered_is_unreachable(fake: FakeRuns, tmp_path: Path) -> None:
    fake.inventory = {"": [*HOSTS, "gpu-gone"]}
    fake.replies = [CLEAN]
    outcome = drift.execute(options(tmp_path), None, Console(quiet=True))
    assert outcome.final.hosts["gpu-gone"].state == "unreachable"
    assert outcome.exit_code == 1


def test_no_host_to_check_runs_nothing_and_is_an_error(fake: FakeRuns, tmp_path: Path) -> None:
    fake.inventory = {"nobody": []}
    outcome = drift.execute(options(tmp_path, limit="nobody"), None, Console(quiet=True))
    assert fake.calls == []
    assert outcome.exit_code == 1
    assert outcome.final.problems == [
        "no host was checked (the pattern or --limit matched none): nothing shows the fleet is clean"
    ]


def test_a_broken_run_is_a_problem_not_clean(fake: FakeRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(playbook: Path, inventory: str, **kwargs: Any) -> runs.PlaybookRun:
        kwargs["artifacts_dir"].mkdir(parents=True)
        return runs.PlaybookRun(4, "failed", CLEAN, kwargs["artifacts_dir"], 1.0, kwargs["hosts"])

    monkeypatch.setattr(runs, "run_playbook", broken)
    outcome = drift.execute(options(tmp_path), None, Console(quiet=True))
    assert outcome.exit_code == 1
    assert outcome.final.problems[0].startswith("ansible-playbook ended failed (exit 4) with no host failing")


def test_report_paths_are_checked_before_running(fake: FakeRuns, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--junit .*its directory .*missing does not exist"):
        drift.execute(options(tmp_path, junit_path=tmp_path / "missing" / "d.xml"))
    with pytest.raises(UserError, match=r"--prom .*is a directory"):
        drift.execute(options(tmp_path, prom_path=tmp_path))
    assert fake.calls == []


def test_check_alone_returns_the_result(fake: FakeRuns, tmp_path: Path) -> None:
    fake.replies = [DRIFTED]
    result = drift.check(options(tmp_path))
    assert isinstance(result, drift_report.DriftResult) and result.exit_code == 2


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def test_cli_passes_the_options_and_exits_with_the_outcome(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def execute(options: drift.DriftOptions, progress: Any, console: Any, *, watch: Any = None) -> drift.DriftOutcome:
        seen["options"], seen["watch"] = options, watch
        progress("a progress line")
        result = drift_events.summarize(DRIFTED, expected_hosts=HOSTS)
        return drift.DriftOutcome(result, None, result, result.exit_code)

    monkeypatch.setattr(drift, "execute", execute)
    args = ["drift", "-i", "fleet.yml", "--tier", "best", "-l", "gpu-*", "--remediate", "--diff"]
    args += [
        "--json-file",
        "d.json",
        "--junit",
        "d.xml",
        "--prom",
        "d.prom",
        "--artifacts",
        str(tmp_path),
        "--settings",
        "stock",
    ]
    args += ["--catalog", "site.yml"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert seen["options"] == drift.DriftOptions(
        inventory="fleet.yml",
        tier="best",
        limit="gpu-*",
        catalog_files=[Path("site.yml")],
        remediate=True,
        json_path=Path("d.json"),
        junit_path=Path("d.xml"),
        prom_path=Path("d.prom"),
        artifacts=tmp_path,
        settings="stock",
        diffs=True,
    )
    assert seen["watch"] is None, "not a terminal: plain lines"
    assert "a progress line" in result.output


def test_cli_json_prints_the_report_on_stdout_and_the_tables_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """--json means what it means in plan, verify and catalog: JSON on stdout; the file is --json-file."""
    consoles: list[Any] = []

    def execute(options: drift.DriftOptions, progress: Any, console: Any, *, watch: Any = None) -> drift.DriftOutcome:
        consoles.append(console)
        console.print("the drift table")
        result = drift_events.summarize(DRIFTED, expected_hosts=HOSTS)
        return drift.DriftOutcome(result, None, result, result.exit_code)

    monkeypatch.setattr(drift, "execute", execute)
    result = CliRunner().invoke(cli.app, ["drift", "-i", "fleet.yml", "--json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    assert report["exit_code"] == 2 and report["state"] == "drifted"
    assert "the drift table" in result.stderr and consoles == [cli.stderr]


def test_cli_bad_input_exits_1_in_one_line(gpufabric: Any, tmp_path: Path) -> None:
    """For drift, 2 means "drifted" (a scheduler reads it as a result): bad input is an error, exit 1."""
    inventory = tmp_path / "hosts"
    inventory.write_text("gpu-1\n")
    cases = [
        (["drift", "-i", str(inventory), "--tier", "gold"], "unknown --tier 'gold'; accepted: best, standard"),
        (
            ["drift", "-i", str(inventory), "--settings", "fast"],
            "unknown Ansible settings 'fast'; accepted: stock, tuned",
        ),
        (["drift", "-i", str(inventory), "--json-file", str(tmp_path / "no" / "d.json")], "does not exist"),
        (["drift", "-i", str(tmp_path / "missing.yml"), "--artifacts", str(tmp_path / "a")], "cannot read inventory"),
        (["drift", "-i", str(inventory), "-t", "nccl"], "which only the thorough check runs: add --thorough"),
    ]
    for args, message in cases:
        result = gpufabric(*args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert result.stderr.strip().count("\n") == 0, result.stderr
        assert message in result.stderr, result.stderr
    # A usage error (click's own: an unknown option) exits 1 too, never 2 like a drifted fleet.
    usage = gpufabric("drift", "--bogus")
    assert usage.returncode == 1 and "No such option: --bogus" in usage.stderr, usage.stderr
    assert "Traceback" not in usage.stdout + usage.stderr
