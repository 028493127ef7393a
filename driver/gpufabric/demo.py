# SPDX-License-Identifier: Apache-2.0
"""`gpufabric demo`: the life of a fleet on a local lab, one step after the other.

lab up -> plan --probe -> apply -> drift (clean) -> tamper one host -> drift --remediate (caught on that
host only, applied there only, then clean) -> lab down. Every step is the code behind the command it names (no
demo-only shortcuts), prints what it ran and its outcome, and the demo ends with one table of the steps.
It exits 0 only when every step did what it should; a step that did not stops the demo (the lab is still
taken down unless --keep).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import apply as fleet_apply
from gpufabric import catalog as fabric_catalog
from gpufabric import drift as fleet_drift
from gpufabric import drift_console, drift_report, lab, lab_files, runs
from gpufabric import plan as fleet_plan
from gpufabric.errors import UserError
from gpufabric.lab_files import CATALOG_OVERRIDE

Progress = Callable[[str], None]

# The tamper: the classic hand edit on a host with SR-IOV VFs. The prefix "mlx5" also matches the VFs
# (mlx5_8 and up), so NCCL would spread over the pods' VFs; the profile names the PFs exactly.
TAMPER_FILE = "/etc/nccl.conf"
TAMPER_KEY = "NCCL_IB_HCA"
TAMPER_VALUE = "mlx5"
TAMPER_ROLE = "nccl_env"  # the role that writes TAMPER_FILE


@dataclass
class Options:
    """What the command line asked for."""

    profile: str = lab.DEFAULT_PROFILE
    nodes: int = lab.DEFAULT_NODES
    name: str = lab.DEFAULT_NAME
    directory: Path | None = None  # the lab's directory (default: lab's own)
    keep: bool = False
    output: Path | None = None


@dataclass
class Step:
    """One step of the demo: what an operator would type, what should happen, what did."""

    title: str
    command: str
    expected: str
    outcome: str = "not run"
    ok: bool = False
    seconds: float = 0.0


@dataclass
class Demo:
    """Steps run so far, and where their reports and ansible-runner artifacts are."""

    options: Options
    console: Console
    progress: Progress
    output: Path
    steps: list[Step] = field(default_factory=list)
    fleet: lab.Lab | None = None

    def step(self, title: str, command: str, expected: str, action: Callable[[], tuple[bool, str]]) -> bool:
        """Run one step; a UserError is its outcome (the demo stops), anything else propagates."""
        step = Step(title, command, expected)
        self.steps.append(step)
        self.console.rule(f"[bold]{len(self.steps)}. {escape(title)}[/bold]  $ {escape(command)}")
        started = time.monotonic()
        try:
            step.ok, step.outcome = action()
        except UserError as exc:
            step.ok, step.outcome = False, str(exc)
        step.seconds = time.monotonic() - started
        mark = "[green]ok[/green]" if step.ok else "[bold red]NOT AS EXPECTED[/bold red]"
        self.console.print(f"{mark} {escape(step.outcome)} ({step.seconds:.0f} s)", highlight=False)
        return step.ok

    @property
    def inventory(self) -> str:
        assert self.fleet is not None, "lab up runs first"
        return str(self.fleet.inventory)

    @property
    def catalog_override(self) -> Path:
        assert self.fleet is not None, "lab up runs first"
        return self.fleet.directory / CATALOG_OVERRIDE

    def drift_options(self, label: str, *, remediate: bool = False) -> fleet_drift.DriftOptions:
        reports = self.output / label
        reports.mkdir(parents=True, exist_ok=True)  # drift writes reports into existing directories only
        return fleet_drift.DriftOptions(
            inventory=self.inventory,
            remediate=remediate,
            diffs=True,  # the caught edit shown as its diff, as `gpufabric drift --diff` shows it
            json_path=reports / "drift.json",
            junit_path=reports / "drift.junit.xml",
            prom_path=reports / "gpufabric_drift.prom",
            artifacts=reports / "runs",
        )


def check(options: Options) -> None:
    """Refuse, before anything starts, a host count lab up would refuse and a profile the tamper step cannot
    tamper with."""
    lab_files.check_nodes(options.nodes)
    profile = fabric_catalog.load().get(options.profile)
    if profile is None:
        raise UserError(
            f"--profile {options.profile!r}: not in the fabric catalog; `gpufabric catalog list` shows the names"
        )
    if TAMPER_KEY not in profile["tiers"]["best"].get("env", {}):
        raise UserError(
            f"--profile {options.profile}: its environment sets no {TAMPER_KEY}, which the demo's tamper step edits; "
            "accepted: a profile that sets it (InfiniBand and RoCE ones, e.g. the default "
            f"{lab.DEFAULT_PROFILE})"
        )


def run(options: Options, console: Console, progress: Progress) -> int:
    """Run every step; 0 when each did what it should, 1 otherwise."""
    check(options)
    # Like every run: under the state directory, never the current one (which may be read-only).
    output = options.output or runs.default_artifacts("demo")
    demo = Demo(options, console, progress, output)
    try:
        _steps(demo)
    finally:
        if demo.fleet is not None and not options.keep:
            demo.step(
                "lab down",
                f"gpufabric lab down --name {options.name}",
                "containers and lab directory removed",
                lambda: _lab_down(demo),
            )
    console.print(summary(demo.steps))
    console.print(f"reports and ansible-runner artifacts: {output}", markup=False, highlight=False)
    if demo.fleet is not None and options.keep:
        console.print(
            f"the lab is still up: gpufabric lab status --name {options.name}; inventory {demo.fleet.inventory}",
            markup=False,
            highlight=False,
        )
    return 0 if demo.steps and all(step.ok for step in demo.steps) else 1


def _steps(demo: Demo) -> None:
    options = demo.options
    if not demo.step(
        "lab up",
        f"gpufabric lab up --profile {options.profile} --nodes {options.nodes} --name {options.name}",
        f"{options.nodes} podman hosts with systemd, SSH and the profile's SIMULATED hardware",
        lambda: _lab_up(demo),
    ):
        return
    if not demo.step(
        "plan",
        f"gpufabric plan -i {demo.inventory} --catalog {demo.catalog_override} --probe",
        "every host resolved to its profile; its hardware matches",
        lambda: _plan(demo),
    ):
        return
    if not demo.step("apply", f"gpufabric apply -i {demo.inventory}", "every host converged", lambda: _apply(demo)):
        return
    if not demo.step(
        "drift",
        f"gpufabric drift -i {demo.inventory}",
        "no drift (exit 0)",
        lambda: _drift_clean(demo, "drift-clean"),
    ):
        return
    first = demo.fleet.hosts[0].name if demo.fleet else ""
    if not demo.step(
        "tamper",
        f"sed -i 's/^{TAMPER_KEY}=.*/{TAMPER_KEY}={TAMPER_VALUE}/' {TAMPER_FILE}   (on {first})",
        f"{TAMPER_KEY} on {first} now also matches the VFs",
        lambda: _tamper(demo, first),
    ):
        return
    # One remediate run is the whole loop an operator runs nightly: its first check must catch the edit on that
    # host only, its apply touch that host only, and its final check find the fleet clean.
    demo.step(
        "remediate",
        f"gpufabric drift -i {demo.inventory} --remediate",
        f"drift on {first} only, in {TAMPER_ROLE}; apply on {first} only; then no drift (exit 0)",
        lambda: _remediate(demo, first),
    )


def _lab_up(demo: Demo) -> tuple[bool, str]:
    options = demo.options
    demo.fleet = lab.up(
        options.name, options.profile, options.nodes, directory=options.directory, progress=demo.progress
    )
    left_out = ", ".join(demo.fleet.left_out) or "none"
    return True, (
        f"{len(demo.fleet.hosts)} hosts; roles in the lab: {', '.join(demo.fleet.roles)}; left out: {left_out}"
    )


def _lab_down(demo: Demo) -> tuple[bool, str]:
    lab.down(demo.options.name, demo.options.directory, progress=demo.progress)
    return True, "removed"


def _plan(demo: Demo) -> tuple[bool, str]:
    # The roles a lab host runs: the lab's catalog override (apply reads it from the inventory, plan from --catalog).
    result = fleet_plan.fleet_plan(demo.inventory, None, [demo.catalog_override], probe=True)
    fleet_plan.render(result, demo.console)
    if fleet_plan.has_problems(result, probed=True):
        return False, "a host is unreachable, its hardware differs from its profile, or an NVLink domain is wrong"
    return True, f"{len(result['hosts'])} hosts on {demo.options.profile}; hardware as the profile says"


def _apply(demo: Demo) -> tuple[bool, str]:
    options = fleet_apply.ApplyOptions(inventory=demo.inventory, artifacts=demo.output / "apply")
    result = fleet_apply.execute(options, demo.progress)
    fleet_apply.render(result, demo.console)
    changed = sum(host.changed for host in result.hosts.values())
    return result.exit_code == 0, f"exit {result.exit_code}; {len(result.hosts)} hosts, {changed} changed tasks"


def _drifted(result: drift_report.DriftResult) -> tuple[list[str], list[str]]:
    """The drifted hosts and the roles they drifted in."""
    drifted = result.hosts_in("drifted")
    return drifted, sorted({role for name in drifted for role in result.hosts[name].drifted_roles()})


def _drift_clean(demo: Demo, label: str) -> tuple[bool, str]:
    options = demo.drift_options(label)
    result = fleet_drift.check(options, demo.progress)
    drift_console.render(result, demo.console, diffs=options.diffs)
    fleet_drift.write_reports(result, options)
    drifted, roles = _drifted(result)
    outcome = f"exit {result.exit_code}; drifted: {', '.join(drifted) or 'none'}"
    if roles:
        outcome += f" ({', '.join(roles)})"
    return result.exit_code == 0 and not drifted, outcome


def _tamper(demo: Demo, host: str) -> tuple[bool, str]:
    assert demo.fleet is not None
    edit = ["sed", "-i", f"s/^{TAMPER_KEY}=.*/{TAMPER_KEY}={TAMPER_VALUE}/", TAMPER_FILE]
    done = lab.podman_exec(demo.fleet, host, edit)
    if done.returncode != 0:
        return False, f"sed failed on {host}: {done.stderr.strip()}"
    now = lab.podman_exec(demo.fleet, host, ["grep", f"^{TAMPER_KEY}=", TAMPER_FILE]).stdout.strip()
    return now == f"{TAMPER_KEY}={TAMPER_VALUE}", f"{host}: {now or 'key missing'}"


def _remediate(demo: Demo, host: str) -> tuple[bool, str]:
    options = demo.drift_options("drift-remediate", remediate=True)
    outcome = fleet_drift.execute(options, demo.progress, demo.console)
    caught, roles = _drifted(outcome.first)
    remediated = sorted(outcome.remediation.hosts) if outcome.remediation else []
    ok = caught == [host] and roles == [TAMPER_ROLE] and remediated == [host] and outcome.exit_code == 0
    return ok, (
        f"caught on {', '.join(caught) or 'no host'} ({', '.join(roles) or 'no role'}); "
        f"applied on {', '.join(remediated) or 'no host'}; then exit {outcome.exit_code}"
    )


def summary(steps: list[Step]) -> Table:
    """One row per step: what was expected, what happened, how long it took."""
    table = Table(title="gpufabric demo", title_justify="left")
    for column in ("#", "step", "expected", "outcome", "time"):
        table.add_column(column, justify="right" if column in ("#", "time") else "left")
    for number, step in enumerate(steps, start=1):
        table.add_row(
            str(number),
            Text(step.title, style="green" if step.ok else "bold red"),
            Text(step.expected),
            Text(step.outcome),
            f"{step.seconds:.0f} s",
        )
    return table
