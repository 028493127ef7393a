# SPDX-License-Identifier: Apache-2.0
"""`gpufabric apply`: run playbooks/site.yml over an inventory and summarize every host.

The run goes through gpufabric.runs (ansible-runner, the inventory's own connections, the tuned
Ansible settings, artifacts kept). The per-host summary comes from the run's events: the task
counts of the play recap, the first error, and `gpufabric_reboot_required`, which site.yml's last
task sets on every host that finished the play. Exit 0 when every host ran to its end (or was
excluded on purpose: gpufabric_managed: false), 1 when one failed, was unreachable, was left alone
for want of a catalog profile (unmanaged), or never got to run (the play stopped first: --max-fail,
or a whole --serial batch failed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import ansible_settings, drift_events, drift_report, runs
from gpufabric import catalog as fabric_catalog
from gpufabric.errors import EXIT_FAILED, EXIT_OK, UserError
from gpufabric.playbook_args import PlaybookArgs

TIERS = ("best", "standard")
REPORT_VERSION = 1  # of `gpufabric apply --json`
# Per-host states, worst first.
STATES = ("unreachable", "failed", "stopped", "unmanaged", "changed", "ok")
STATE_STYLE = {
    "unreachable": "bold red",
    "failed": "bold red",
    "stopped": "bold red",
    "unmanaged": "bold magenta",
    "changed": "yellow",
    "ok": "green",
}
BAD_STATES = ("unreachable", "failed", "stopped")
_SERIAL = re.compile(r"^\s*(\d{1,12})\s*(%?)\s*$")
# Ansible's batching slows down with the serial number itself (at 10**20 it never ends), and no fleet
# is this large: a batch of more hosts than the inventory holds is the whole inventory anyway.
MAX_SERIAL = 100_000


@dataclass
class ApplyOptions:
    inventory: str
    tier: str | None = None
    limit: str | None = None
    check: bool = False
    serial: str | None = None
    max_fail: str | None = None
    catalog_files: list[Path] = field(default_factory=list)
    artifacts: Path | None = None
    settings: str = ansible_settings.TUNED
    args: PlaybookArgs = field(default_factory=PlaybookArgs)


@dataclass
class HostSummary:
    """One host after the run: task counts from the recap, state, reboot need and first error."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    reboot_required: bool | None = None  # None: the host did not reach site.yml's last task
    error: str | None = None
    state: str = "ok"
    unmanaged: dict[str, str] | None = None  # {"code", "reason"}: site.yml left the host alone

    @property
    def bad(self) -> bool:
        """Counts against the run: failed, unreachable, stopped, or unmanaged but not excluded on purpose."""
        if self.state == "unmanaged":
            return self.unmanaged is None or self.unmanaged["code"] != drift_report.EXCLUDED
        return self.state in BAD_STATES

    def as_dict(self) -> dict[str, Any]:
        """The host in `gpufabric apply --json` (docs/apply.md, "JSON")."""
        return {
            "state": self.state,
            "counts": {
                "ok": self.ok,
                "changed": self.changed,
                "failed": self.failed,
                "unreachable": self.unreachable,
                "skipped": self.skipped,
            },
            "reboot_required": self.reboot_required,
            "error": self.error,
            "unmanaged": dict(self.unmanaged) if self.unmanaged else None,
        }


@dataclass
class ApplyResult:
    hosts: dict[str, HostSummary]
    run: runs.PlaybookRun
    check: bool = False
    problems: list[str] = field(default_factory=list)  # run-level: the playbook broke, no recap

    @property
    def exit_code(self) -> int:
        bad = any(host.bad for host in self.hosts.values())
        return EXIT_FAILED if bad or self.problems else EXIT_OK

    def hosts_in(self, state: str) -> list[str]:
        return [name for name, host in self.hosts.items() if host.state == state]


def parse_tier(tier: str | None) -> str | None:
    if tier is not None and tier not in TIERS:
        raise UserError(f"unknown --tier {tier!r}; accepted: {', '.join(TIERS)}")
    return tier


def parse_serial(value: str | None) -> int | str | None:
    """--serial N (hosts per batch, 1 to MAX_SERIAL) or P% (1-100) -> Ansible's serial keyword value."""
    if value is None:
        return None
    match = _SERIAL.match(value)
    if match:
        number, percent = int(match.group(1)), match.group(2)
        if percent and 1 <= number <= 100:
            return f"{number}%"
        if not percent and 1 <= number <= MAX_SERIAL:
            return number
    raise UserError(
        f"--serial {value!r}: give a number of hosts per batch (1 to {MAX_SERIAL:,}) or a percentage (1%-100%)"
    )


def parse_max_fail(value: str | None) -> int | None:
    """--max-fail P% (0-100): stop the play when more than P% of a batch failed."""
    if value is None:
        return None
    match = _SERIAL.match(value)
    if match and 0 <= int(match.group(1)) <= 100:
        return int(match.group(1))
    raise UserError(f"--max-fail {value!r}: give a percentage from 0% to 100%, e.g. 10%")


def parse_limit(value: str | None) -> list[str] | None:
    if value is None:
        return None
    if not value.strip():
        raise UserError("--limit '': give a host pattern, e.g. gpu-node-1 or rack7 or 'gpu*'")
    return [value]


def extra_vars(
    tier: str | None, catalog_files: list[Path], serial: int | str | None = None, max_fail: int | None = None
) -> dict[str, Any]:
    """site.yml's extra variables (they win over the inventory's); only what was asked for."""
    variables: dict[str, Any] = {}
    if tier is not None:
        variables["gpufabric_tier"] = tier
    if serial is not None:
        variables["gpufabric_serial"] = serial
    if max_fail is not None:
        variables["gpufabric_max_fail_percentage"] = max_fail
    files = [str(path.resolve()) for path in fabric_catalog.override_files(catalog_files)]
    if files:
        # Only when given: an inventory's own gpufabric_catalog_files must not be overwritten with nothing.
        variables["gpufabric_catalog_files"] = files
    return variables


def _reboot_facts(events: list[dict[str, Any]]) -> tuple[dict[str, bool], bool]:
    """(reboot fact per host that finished, whether the play was stopped)."""
    reboot: dict[str, bool] = {}
    stopped = False
    for event in events:
        kind = event.get("event")
        data = runs.as_mapping(event.get("event_data"))
        host = data.get("host")
        if kind == "playbook_on_no_hosts_remaining":
            stopped = True
        if kind != "runner_on_ok" or not isinstance(host, str):
            continue
        res = runs.as_mapping(data.get("res"))
        facts = runs.as_mapping(res.get("ansible_facts"))
        if runs.REBOOT_FACT in facts:
            reboot[host] = facts[runs.REBOOT_FACT] in (True, "True", "true")
    return reboot, stopped


def summarize(run: runs.PlaybookRun, check: bool = False) -> ApplyResult:
    """Per-host summaries of a site.yml run (every host the run was meant to cover is listed)."""
    seen = drift_events.summarize(run.events, expected_hosts=run.hosts)
    reboot, stopped = _reboot_facts(run.events)
    hosts: dict[str, HostSummary] = {}
    problems: list[str] = []
    for name, drift in seen.hosts.items():
        counts = drift.counts
        summary = HostSummary(
            ok=counts["ok"],
            changed=counts["changed"],
            failed=counts["failed"],
            unreachable=counts["unreachable"],
            skipped=counts["skipped"],
            reboot_required=reboot.get(name),
        )
        if drift.errors:
            summary.error = f"{drift.errors[0].task}: {drift.errors[0].message}"
        if not drift.in_run:
            summary.state = "stopped"
            summary.error = "the host never ran: the play stopped before its batch, or the run broke"
        elif drift.state in ("unreachable", "failed"):
            summary.state = drift.state
        elif drift.unmanaged is not None:
            summary.state, summary.unmanaged = "unmanaged", drift.unmanaged
            summary.error = f"not managed ({drift.unmanaged['code']}): {drift.unmanaged['reason']}"
        elif name in reboot:
            summary.state = "changed" if summary.changed else "ok"
        else:
            summary.state = "stopped"
            summary.error = (
                "the play stopped before this host finished (--max-fail, or a whole --serial batch failed)"
                if stopped
                else "the host did not finish the play (no summary task ran on it)"
            )
        hosts[name] = summary
    if run.rc != 0 and not any(host.state in ("failed", "unreachable") for host in hosts.values()):
        problems.append(
            f"ansible-playbook ended {run.status} (exit {run.rc}) with no host failing; "
            f"its output: {run.artifacts_dir / 'stdout'}"
        )
    problems.extend(problem for problem in seen.problems if problem not in problems)
    return ApplyResult(hosts, run, check, problems)


def execute(
    options: ApplyOptions,
    progress: runs.Progress | None = None,
    *,
    watch: Callable[[runs.Tally], None] | None = None,
    artifacts_dir: Path | None = None,
    label: str = "apply",
) -> ApplyResult:
    """Validate the options, run site.yml and summarize it.

    artifacts_dir: this run's own artifact directory (gpufabric drift --remediate gives one);
    without it, <--artifacts or <state>/runs/apply-<time>>/apply.
    """
    tier = parse_tier(options.tier)
    ansible_settings.parse_name(options.settings)
    serial = parse_serial(options.serial)
    max_fail = parse_max_fail(options.max_fail)
    limit = parse_limit(options.limit)
    # A missing or invalid --catalog is refused here, before any host is touched (as `plan` does).
    fabric_catalog.load(options.catalog_files)
    if options.artifacts is not None:
        runs.check_artifacts(options.artifacts)
    # The inventory before a default run directory is made: a bad one is refused with nothing written.
    # Hosts `gpufabric health --quarantine` put in the gpufabric_quarantine group are left out (docs/health.md).
    hosts, limit, quarantined = runs.hosts_outside_quarantine(options.inventory, limit)
    if not hosts:
        where = f" matching --limit {options.limit!r}" if options.limit else ""
        left_out = f" outside the {runs.QUARANTINE_GROUP} group ({', '.join(quarantined)})" if quarantined else ""
        raise UserError(f"inventory {options.inventory!r} has no host{where}{left_out}")
    if artifacts_dir is None:
        base = options.artifacts or runs.default_artifacts("apply")
        runs.check_artifacts(base)
        artifacts_dir = base / "apply"
    run = runs.run_playbook(
        runs.site_playbook(),
        options.inventory,
        check=options.check,
        diff=options.check,
        limit=limit,
        extravars=extra_vars(tier, options.catalog_files, serial, max_fail),
        settings=options.settings,
        artifacts_dir=artifacts_dir,
        progress=progress,
        hosts=hosts,
        watch=watch,
        label=label,
        args=options.args,
    )
    return summarize(run, options.check)


def as_dict(result: ApplyResult) -> dict[str, Any]:
    """`gpufabric apply --json`: what the table shows, whole (docs/apply.md, "JSON")."""
    return {
        "report_version": REPORT_VERSION,
        "check": result.check,
        "exit_code": result.exit_code,
        "artifacts": str(result.run.artifacts_dir),
        "duration_seconds": round(result.run.duration_s, 3),
        "problems": list(result.problems),
        "hosts_by_state": {state: len(result.hosts_in(state)) for state in STATES},
        "hosts": {name: host.as_dict() for name, host in result.hosts.items()},
    }


def _short(text: str | None, limit: int = 160) -> str:
    """The first line of an error, cut for a table cell (the summary keeps it whole)."""
    if not text:
        return "-"
    line = text.strip().splitlines()[0]
    return line if len(line) <= limit and line == text.strip() else line[: limit - 3].rstrip() + "..."


def _count(value: int) -> Text:
    return Text(str(value), style="" if value else "dim")


def table(result: ApplyResult) -> Table:
    mode = " (check mode: nothing was changed)" if result.check else ""
    output = Table(title=f"gpufabric apply{mode}", title_justify="left")
    # A host's name is never cut (the error column gives way on a narrow terminal).
    output.add_column("host", overflow="fold")
    output.add_column("state")
    for column in ("ok", "changed", "failed", "unreachable"):
        output.add_column(column, justify="right")
    output.add_column("reboot required")
    output.add_column("first error")
    for name, host in result.hosts.items():
        reboot = "-" if host.reboot_required is None else ("YES" if host.reboot_required else "no")
        output.add_row(
            Text(name),
            Text(host.state.upper(), style=STATE_STYLE[host.state]),
            _count(host.ok),
            _count(host.changed),
            _count(host.failed),
            _count(host.unreachable),
            Text(reboot, style="bold yellow" if host.reboot_required else ""),
            Text(_short(host.error)),
        )
    return output


def render(result: ApplyResult, console: Console) -> None:
    """The per-host table, run problems, a closing line with the exit code, and the artifacts path."""
    console.print(table(result))
    for problem in result.problems:
        console.print(f"[red]error[/red]: {escape(problem)}", highlight=False)
    counts = {state: len(result.hosts_in(state)) for state in STATES}
    shown = ", ".join(f"{counts[state]} {state}" for state in reversed(STATES) if counts[state])
    reboots = sum(1 for host in result.hosts.values() if host.reboot_required)
    if reboots:
        shown += f"; {reboots} need a reboot"
    console.print(f"{shown or 'no host'} (exit {result.exit_code})", highlight=False)
    console.print(f"artifacts: {escape(str(result.run.artifacts_dir))}", highlight=False)
