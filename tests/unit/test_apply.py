# SPDX-License-Identifier: Apache-2.0
"""gpufabric.apply without running Ansible: option validation, extra variables, and per-host
summaries from REAL ansible-runner events (tests/fixtures/runner_events) with site.yml's last
task added where a test needs it (the fixtures' playbook does not have it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpufabric import apply, runs
from gpufabric.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runner_events"
ODD_HOST = 'rack"7\\node'


def fixture_events(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def with_summary_task(events: list[dict[str, Any]], reboot: dict[str, bool]) -> list[dict[str, Any]]:
    """The events with site.yml's last task (set_fact gpufabric_reboot_required) on the given hosts,
    placed before playbook_on_stats as Ansible emits it."""
    edited = copy.deepcopy(events)
    stats = edited.pop()
    assert stats["event"] == "playbook_on_stats"
    counter = stats["counter"]
    for host, value in reboot.items():
        edited.append(
            {
                "event": "runner_on_ok",
                "counter": counter,
                "event_data": {
                    "host": host,
                    "task": "Summarize whether the host needs a reboot",
                    "res": {"changed": False, "ansible_facts": {runs.REBOOT_FACT: value}},
                },
            }
        )
        counter += 1
        stats["event_data"]["ok"][host] = stats["event_data"]["ok"].get(host, 0) + 1
    stats["counter"] = counter
    edited.append(stats)
    return edited


def playbook_run(events: list[dict[str, Any]], hosts: list[str], rc: int = 0) -> runs.PlaybookRun:
    return runs.PlaybookRun(rc, "successful" if rc == 0 else "failed", events, Path("/runs/apply"), 1.0, hosts)


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [("1", 1), ("25", 25), ("10%", "10%"), ("100%", "100%"), (" 5 ", 5)])
def test_serial_accepts_hosts_or_a_percentage(given: str, expected: int | str) -> None:
    assert apply.parse_serial(given) == expected


@pytest.mark.parametrize("given", ["0", "0%", "101%", "-1", "ten", "5.5", "%", "", "100001", "99999999999999999999"])
def test_serial_rejects_the_rest(given: str) -> None:
    with pytest.raises(UserError, match=r"--serial .*number of hosts per batch \(1 to 100,000\) or a percentage"):
        apply.parse_serial(given)


@pytest.mark.parametrize(("given", "expected"), [("0%", 0), ("10%", 10), ("100%", 100), ("25", 25)])
def test_max_fail_accepts_0_to_100_percent(given: str, expected: int) -> None:
    assert apply.parse_max_fail(given) == expected


@pytest.mark.parametrize("given", ["101%", "-5%", "half", "", "1.5%"])
def test_max_fail_rejects_the_rest(given: str) -> None:
    with pytest.raises(UserError, match=r"--max-fail .*percentage from 0% to 100%"):
        apply.parse_max_fail(given)


def test_tier_and_limit() -> None:
    assert apply.parse_tier(None) is None and apply.parse_tier("standard") == "standard"
    with pytest.raises(UserError, match=r"unknown --tier 'gold'; accepted: best, standard"):
        apply.parse_tier("gold")
    assert apply.parse_limit(None) is None
    assert apply.parse_limit("rack7:!gpu-3") == ["rack7:!gpu-3"]
    with pytest.raises(UserError, match="--limit"):
        apply.parse_limit(" ")


def test_extra_vars_carry_only_what_was_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUFABRIC_CATALOG", raising=False)
    # No catalog override given: the inventory's own gpufabric_catalog_files must survive.
    assert apply.extra_vars(None, []) == {}
    override = tmp_path / "site.yml"
    override.write_text("profiles: {}\n")
    assert apply.extra_vars("standard", [override], "10%", 0) == {
        "gpufabric_tier": "standard",
        "gpufabric_serial": "10%",
        "gpufabric_max_fail_percentage": 0,
        "gpufabric_catalog_files": [str(override)],
    }


def test_bad_options_fail_before_anything_runs(tmp_path: Path) -> None:
    for options, message in (
        (apply.ApplyOptions("inv", serial="0"), "--serial"),
        (apply.ApplyOptions("inv", max_fail="200%"), "--max-fail"),
        (apply.ApplyOptions("inv", tier="gold"), "--tier"),
    ):
        with pytest.raises(UserError, match=message):
            apply.execute(options, artifacts_dir=tmp_path / "never")
        assert not (tmp_path / "never").exists()


# ---------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------


def test_mixed_run_states_counts_and_first_errors() -> None:
    hosts = ["gpu-clean-1", "gpu-dark-1", "gpu-drift-1", "gpu-failed-1", ODD_HOST]
    events = with_summary_task(fixture_events("mixed"), {"gpu-clean-1": False, "gpu-drift-1": True, ODD_HOST: False})
    result = apply.summarize(playbook_run(events, hosts, rc=4))
    states = {name: host.state for name, host in result.hosts.items()}
    assert states == {
        "gpu-clean-1": "ok",
        "gpu-dark-1": "unreachable",
        "gpu-drift-1": "changed",
        "gpu-failed-1": "failed",
        ODD_HOST: "changed",
    }
    drift = result.hosts["gpu-drift-1"]
    assert (drift.changed, drift.failed, drift.reboot_required, drift.error) == (3, 0, True, None)
    assert drift.ok == 8 and drift.skipped == 1
    assert result.hosts["gpu-clean-1"].reboot_required is False
    failed = result.hosts["gpu-failed-1"]
    assert failed.failed == 1 and failed.reboot_required is None
    assert failed.error and failed.error.startswith("Copy a file that may be missing: ")
    dark = result.hosts["gpu-dark-1"]
    assert dark.unreachable == 1 and dark.error
    assert result.exit_code == 1
    assert result.problems == [], "a failing host explains the exit code"


def test_all_fine_exits_0() -> None:
    events = with_summary_task(fixture_events("clean"), {"gpu-clean-1": False, "gpu-clean-2": False})
    result = apply.summarize(playbook_run(events, ["gpu-clean-1", "gpu-clean-2"]))
    assert {host.state for host in result.hosts.values()} == {"ok"}
    assert result.exit_code == 0


def test_a_host_that_never_ran_or_did_not_finish_is_not_fine() -> None:
    events = fixture_events("clean")  # no summary task: the hosts did not reach site.yml's end
    result = apply.summarize(playbook_run(events, ["gpu-clean-1", "gpu-clean-2", "gpu-late"]))
    assert result.hosts["gpu-late"].state == "stopped"
    assert "never ran" in str(result.hosts["gpu-late"].error)
    assert result.hosts["gpu-clean-1"].state == "stopped"
    assert "did not finish" in str(result.hosts["gpu-clean-1"].error)
    assert result.exit_code == 1


def test_a_stopped_play_names_why() -> None:
    events = fixture_events("clean")
    stats = events.pop()
    events.append({"event": "playbook_on_no_hosts_remaining", "counter": stats["counter"], "event_data": {}})
    events.append(stats)
    result = apply.summarize(playbook_run(events, ["gpu-clean-1", "gpu-clean-2"]))
    assert "--max-fail" in str(result.hosts["gpu-clean-1"].error)


def unmanaged_event(host: str, code: str, counter: int) -> dict[str, Any]:
    """site.yml's "Record why the host is not managed" task on one host."""
    verdict = {"code": code, "reason": f"{code} reason"}
    return {
        "event": "runner_on_ok",
        "counter": counter,
        "event_data": {
            "host": host,
            "task": "Record why the host is not managed",
            "res": {"ansible_facts": {"gpufabric_unmanaged": verdict}, "changed": False},
        },
    }


@pytest.mark.parametrize(("code", "exit_code"), [("unknown_profile", 1), ("no_profile", 1), ("excluded", 0)])
def test_a_host_site_yml_left_alone_fails_the_run_unless_excluded(code: str, exit_code: int) -> None:
    events = with_summary_task(fixture_events("clean"), {"gpu-clean-1": False})
    stats = events.pop()
    events.append(unmanaged_event("gpu-clean-2", code, stats["counter"]))
    events.append(stats)
    result = apply.summarize(playbook_run(events, ["gpu-clean-1", "gpu-clean-2"]))
    host = result.hosts["gpu-clean-2"]
    assert host.state == "unmanaged"
    assert host.unmanaged == {"code": code, "reason": f"{code} reason"}
    assert host.as_dict()["unmanaged"]["code"] == code
    assert result.exit_code == exit_code


def test_a_broken_run_with_no_host_to_blame_is_a_problem() -> None:
    result = apply.summarize(playbook_run([], ["gpu-1"], rc=4))
    assert result.hosts["gpu-1"].state == "stopped"
    assert any("ansible-playbook ended failed (exit 4)" in problem for problem in result.problems)
    assert result.exit_code == 1


def test_render_shows_each_host_and_the_artifacts() -> None:
    hosts = ["gpu-clean-1", "gpu-dark-1", "gpu-drift-1", "gpu-failed-1", ODD_HOST]
    events = with_summary_task(fixture_events("mixed"), {"gpu-clean-1": False, "gpu-drift-1": True, ODD_HOST: False})
    console = Console(record=True, width=240)
    apply.render(apply.summarize(playbook_run(events, hosts, rc=4)), console)
    text = console.export_text()
    assert "gpufabric apply" in text
    for host in hosts:
        assert host in text
    assert "UNREACHABLE" in text and "FAILED" in text and "CHANGED" in text and "YES" in text
    assert "1 ok, 2 changed, 1 failed, 1 unreachable; 1 need a reboot (exit 1)" in text
    assert "artifacts: /runs/apply" in text


def test_render_cuts_long_errors_in_the_table() -> None:
    events = fixture_events("failed")
    for event in events:
        if event["event"] == "runner_on_failed":
            event["event_data"]["res"]["msg"] = "first line " + "x" * 400 + "\nsecond line"
    result = apply.summarize(playbook_run(events, ["gpu-failed-1"], rc=2))
    console = Console(record=True, width=400)
    apply.render(result, console)
    text = console.export_text()
    assert "second line" not in text and "..." in text
    assert "second line" in str(result.hosts["gpu-failed-1"].error), "the summary keeps the whole message"
