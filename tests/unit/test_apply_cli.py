# SPDX-License-Identifier: Apache-2.0
"""`gpufabric apply` on the command line: options reach ApplyOptions (typer's CliRunner, the run
replaced by a summary of REAL recorded events), the exit code is the result's, and usage errors
from the real command exit 1 in one line without a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric import apply, cli
from tests.unit.test_apply import ODD_HOST, fixture_events, playbook_run, with_summary_task


def fake_execute(seen: dict[str, Any], events: list[dict[str, Any]], hosts: list[str], rc: int):
    def execute(options: apply.ApplyOptions, progress: Any, *, watch: Any = None) -> apply.ApplyResult:
        seen["options"], seen["watch"] = options, watch
        progress("[apply] 0/1 hosts done")
        return apply.summarize(playbook_run(events, hosts, rc))

    return execute


def test_cli_passes_the_options_and_prints_the_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    events = with_summary_task(fixture_events("clean"), {"gpu-clean-1": True, "gpu-clean-2": False})
    monkeypatch.setattr(apply, "execute", fake_execute(seen, events, ["gpu-clean-1", "gpu-clean-2"], 0))
    args = ["apply", "-i", "fleet.yml", "--tier", "standard", "--limit", "rack7", "--check", "--serial", "10%"]
    args += ["--max-fail", "5%", "--artifacts", str(tmp_path), "--catalog", "site.yml"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert seen["options"] == apply.ApplyOptions(
        inventory="fleet.yml",
        tier="standard",
        limit="rack7",
        check=True,
        serial="10%",
        max_fail="5%",
        catalog_files=[Path("site.yml")],
        artifacts=tmp_path,
        settings="tuned",
    )
    assert seen["watch"] is None
    assert "gpu-clean-1" in result.output and "YES" in result.output
    assert "2 ok; 1 need a reboot (exit 0)" in result.output
    assert "artifacts: /runs/apply" in result.output


def test_cli_exits_1_when_a_host_failed_or_was_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = ["gpu-clean-1", "gpu-dark-1", "gpu-drift-1", "gpu-failed-1", ODD_HOST]
    events = with_summary_task(fixture_events("mixed"), {"gpu-clean-1": False, "gpu-drift-1": False, ODD_HOST: False})
    monkeypatch.setattr(apply, "execute", fake_execute({}, events, hosts, 4))
    result = CliRunner().invoke(cli.app, ["apply", "-i", "fleet.yml"])
    assert result.exit_code == 1, result.output
    assert "UNREACHABLE" in result.output and "FAILED" in result.output


def test_cli_usage_errors_exit_2_in_one_line(gpufabric: Any, tmp_path: Path) -> None:
    inventory = tmp_path / "hosts"
    inventory.write_text("gpu-1\n")
    used = tmp_path / "used"
    used.mkdir()
    (used / "apply").mkdir()
    cases = [
        (["--serial", "0"], "--serial '0': give a number of hosts per batch (1 to 100,000) or a percentage (1%-100%)"),
        (["--serial", "150%"], "--serial '150%'"),
        (["--max-fail", "101%"], "--max-fail '101%': give a percentage from 0% to 100%"),
        (["--tier", "gold"], "unknown --tier 'gold'"),
        (["--artifacts", str(used)], "already holds files"),
        (["--limit", "nobody"], "has no host matching --limit 'nobody'"),
    ]
    for extra, message in cases:
        result = gpufabric("apply", "-i", str(inventory), *extra)
        assert result.returncode == 1, (extra, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert result.stderr.strip().count("\n") == 0, result.stderr
        assert message in " ".join(result.stderr.split()), result.stderr


def test_cli_json_prints_the_result_on_stdout_and_the_table_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = ["gpu-clean-1", "gpu-dark-1", "gpu-drift-1", "gpu-failed-1", ODD_HOST]
    events = with_summary_task(fixture_events("mixed"), {"gpu-clean-1": True, "gpu-drift-1": False, ODD_HOST: False})
    monkeypatch.setattr(apply, "execute", fake_execute({}, events, hosts, 4))
    result = CliRunner().invoke(cli.app, ["apply", "-i", "fleet.yml", "--json"])
    assert result.exit_code == 1, result.output
    shown = json.loads(result.stdout)
    assert shown["exit_code"] == 1 and shown["check"] is False and shown["artifacts"] == "/runs/apply"
    by_state = {"unreachable": 1, "failed": 1, "stopped": 0, "unmanaged": 0, "changed": 2, "ok": 1}
    assert shown["hosts_by_state"] == by_state
    assert set(shown["hosts"]) == set(hosts)
    clean = shown["hosts"]["gpu-clean-1"]
    assert clean["state"] == "ok" and clean["reboot_required"] is True and clean["error"] is None
    assert set(clean["counts"]) == {"ok", "changed", "failed", "unreachable", "skipped"}
    dark = shown["hosts"]["gpu-dark-1"]
    assert dark["state"] == "unreachable" and dark["reboot_required"] is None and dark["error"]
    assert dark["unmanaged"] is None and dark["counts"]["unreachable"] == 1
    # The progress and the table went to stderr: stdout is the JSON alone.
    assert "[apply] 0/1 hosts done" in result.stderr and "1 unreachable; 1 need a reboot (exit 1)" in result.stderr


SHOW_SETTINGS = {
    "apply": ["apply", "-i", "fleet.yml"],
    "drift": ["drift", "-i", "fleet.yml"],
    "verify": ["verify", "-i", "fleet.yml"],
    "bake": ["bake", "--profile", "aws/p5.48xlarge", "--tag", "localhost/x:1"],
}


@pytest.mark.parametrize("command", sorted(SHOW_SETTINGS))
def test_show_settings_json_on_every_command_that_has_it(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.setattr(cli.playbook_runs, "inventory_hosts", lambda inventory, limit=None: ["gpu-1", "gpu-2"])
    result = CliRunner().invoke(cli.app, [*SHOW_SETTINGS[command], "--show-settings", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == {"config_file", "settings_set", "hosts", "settings", "always"}
    assert shown["settings_set"] == ("stock" if command == "verify" else "tuned")
    assert shown["hosts"] == {"apply": 2, "drift": 2, "verify": 0, "bake": 1}[command]
    assert {"setting", "env", "value", "source"} == set(shown["settings"][0])
    assert "ANSIBLE_COLLECTIONS_PATH" in {row["env"] for row in shown["settings"]}
