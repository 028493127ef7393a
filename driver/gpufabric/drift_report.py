# SPDX-License-Identifier: Apache-2.0
"""`gpufabric drift` reports: what they say about each host, and the exit code they give.

The report's model only: `DriftResult` (per host a `HostDrift`: its state, the task changes and
errors by role, the task counts) and the exit code rule. gpufabric.drift_events builds one from
ansible-runner's job events, gpufabric.drift_formats writes it as JSON, JUnit XML and a Prometheus
textfile-collector file, gpufabric.drift_console prints it. The formats and the exit code rule are
documented in docs/drift.md.

Per host the state is one of (worst first):
  unreachable  a task could not reach it (or it was expected and never appeared): never clean
  failed       a task failed (ignored failures do not count; with the run's stats, rescued ones don't)
  unmanaged    site.yml left it alone: no profile, a profile the catalog does not know, or excluded
               on purpose (gpufabric_managed: false); its code and reason come from the plan
  drifted      at least one task would change it
  clean        it ran and nothing would change
Exit code: 1 when any host is failed, unreachable or unmanaged (but excluded on purpose) or the run
itself is incomplete (the drift picture is not whole: that wins over drift), else 2 when any host
drifted, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpufabric.errors import EXIT_CHANGES, EXIT_FAILED, EXIT_OK

REPORT_VERSION = 1
# Worst first: a host's state, and the order of every per-state listing.
STATES = ("unreachable", "failed", "unmanaged", "drifted", "clean")
# The one unmanaged code that is the operator's choice: it does not make a run fail. The plan's
# fabric_plan.EXCLUDED; written out here so that reading reports loads no collection code.
EXCLUDED = "excluded"
# Tasks outside any role (pre_tasks, tasks, handlers of the playbook itself) are grouped here.
PLAYBOOK_ROLE = "playbook"
COUNT_KEYS = ("ok", "changed", "failed", "unreachable", "skipped", "ignored", "rescued")


@dataclass
class FileDiff:
    """One diff of a task result: the two sides (cut to size) and the unified diff of the full texts."""

    header: str
    before: str
    after: str
    unified: str
    truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "header": self.header,
            "before": self.before,
            "after": self.after,
            "unified": self.unified,
            "truncated": self.truncated,
            "notes": list(self.notes),
        }


@dataclass
class TaskChange:
    """A task that would change the host (check mode said changed), with its diffs if it gave any."""

    task: str
    role: str
    action: str
    diffs: list[FileDiff] = field(default_factory=list)
    items: list[str] = field(default_factory=list)  # the loop items that would change

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "role": self.role,
            "action": self.action,
            "items": list(self.items),
            "diffs": [diff.as_dict() for diff in self.diffs],
        }


@dataclass
class TaskError:
    """A task that failed or could not reach the host."""

    task: str
    role: str
    kind: str  # "failed" | "unreachable"
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "role": self.role, "kind": self.kind, "message": self.message}


@dataclass
class HostDrift:
    host: str
    state: str = "clean"
    roles: list[str] = field(default_factory=list)  # every role that ran a task here, in order
    changes: list[TaskChange] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    unmanaged: dict[str, str] | None = None  # {"code", "reason"} when site.yml left the host alone
    in_run: bool = True  # False: expected (in the inventory) but in no event of the run
    # The plan's roles that ran no task here: --tags or --skip-tags left them out (or the host stopped first).
    not_checked: list[str] = field(default_factory=list)

    @property
    def excluded(self) -> bool:
        """Left alone because the operator said so: reported, but it does not fail the run."""
        return self.state == "unmanaged" and self.unmanaged is not None and self.unmanaged["code"] == EXCLUDED

    def drifted_roles(self) -> list[str]:
        return unique(change.role for change in self.changes)

    def changes_in(self, role: str) -> list[TaskChange]:
        return [change for change in self.changes if change.role == role]

    def errors_in(self, role: str) -> list[TaskError]:
        return [error for error in self.errors if error.role == role]

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "unmanaged": dict(self.unmanaged) if self.unmanaged else None,
            "counts": dict(self.counts),
            "changed_tasks": len(self.changes),
            "drifted_roles": self.drifted_roles(),
            "not_checked": list(self.not_checked),
            "roles": {
                role: {
                    "changes": [change.as_dict() for change in self.changes_in(role)],
                    "errors": [error.as_dict() for error in self.errors_in(role)],
                }
                for role in self.roles
            },
        }


@dataclass
class DriftResult:
    hosts: dict[str, HostDrift]
    started: datetime | None
    finished: datetime | None
    playbook: str | None = None
    # Run-level problems: the run ended before its summary, no host was checked.
    problems: list[str] = field(default_factory=list)

    def replaced(self, other: DriftResult) -> DriftResult:
        """This result with the hosts of `other` (a second run over some of the same hosts) taking their
        verdict from it; both runs' problems, the span of both."""
        times = [time for time in (self.started, self.finished, other.started, other.finished) if time is not None]
        return DriftResult(
            hosts={**self.hosts, **other.hosts},
            started=min(times, default=None),
            finished=max(times, default=None),
            playbook=self.playbook,
            problems=[*self.problems, *other.problems],
        )

    def hosts_in(self, state: str) -> list[str]:
        return [name for name, host in self.hosts.items() if host.state == state]

    def state_counts(self) -> dict[str, int]:
        return {state: len(self.hosts_in(state)) for state in STATES}

    @property
    def state(self) -> str:
        """The worst state of the hosts that count ("clean" for none); "failed" when the run itself has a problem."""
        if self.problems and not (self.hosts_in("unreachable") or self.hosts_in("failed")):
            return "failed"
        counted = {host.state for host in self.hosts.values() if not host.excluded}
        return next((state for state in STATES if state in counted), "clean")

    @property
    def exit_code(self) -> int:
        return exit_code(self)


def unique(values: Iterable[str]) -> list[str]:
    """Each value once, in the order first seen (roles and error kinds are listed as they ran)."""
    return list(dict.fromkeys(values))


def exit_code(result: DriftResult) -> int:
    """0 clean, 2 drifted, 1 when a host failed, was unreachable or is unmanaged (not excluded on purpose)
    or the run is incomplete (wins over 2)."""
    unmanaged = [name for name in result.hosts_in("unmanaged") if not result.hosts[name].excluded]
    if result.problems or result.hosts_in("failed") or result.hosts_in("unreachable") or unmanaged:
        return EXIT_FAILED
    if result.hosts_in("drifted"):
        return EXIT_CHANGES
    return EXIT_OK
