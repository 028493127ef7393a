# SPDX-License-Identifier: Apache-2.0
"""A `DriftResult` (gpufabric.drift_report) on the terminal: the per-host table, then the details."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric.drift_report import STATES, DriftResult

STATE_STYLE = {
    "clean": "green",
    "drifted": "yellow",
    "unmanaged": "bold magenta",
    "failed": "bold red",
    "unreachable": "bold red",
}


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
        if host.not_checked:
            console.print(
                f"[yellow]not checked[/yellow] {escape(name)}: {escape(', '.join(host.not_checked))} "
                "(not selected by --tags / --skip-tags, or the host stopped before them)",
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
