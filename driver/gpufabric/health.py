# SPDX-License-Identifier: Apache-2.0
"""`gpufabric health`: run playbooks/health.yml over the inventory and report each host's health verdicts.

The playbook resolves each host's plan and runs the read-only health role with health_fail_on=never, so every host
answers with its verdicts (the health_info module's result), which this command reads from the run's events and
judges: exit 0 when every host was judged and no check failed, 2 when a host failed a check (and every host was
judged), 1 when a host could not be judged (it failed, was unreachable, has no catalog profile) or on bad input.
A host excluded on purpose (gpufabric_managed: false) is listed and left out. --previous reads an earlier --json
report, whose port counters the flap checks compare with (without it, those checks are unknown: a first run).
"""

from __future__ import annotations

import errno
import io
import json
import stat
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import ansible_settings, apply, output_file, runs
from gpufabric import catalog as fabric_catalog
from gpufabric.collection import collection_root, module_utils
from gpufabric.errors import EXIT_CHANGES, EXIT_FAILED, EXIT_OK, UserError
from gpufabric.playbook_args import PlaybookArgs

EXIT_UNHEALTHY = EXIT_CHANGES  # 2, as drift's: an answer, not a failure of the command
# A report of 1,024 hosts with a few dozen verdicts each is a few MiB.
MAX_PREVIOUS_BYTES = 256 * 1024 * 1024
HEALTH_ACTION = "gpufabric.cluster.health_info"
UNMANAGED_FACT = "gpufabric_unmanaged"
EXCLUDED = "excluded"
# Two hosts that differ cannot say which one is off.
MIN_SKEW_HOSTS = 3
STATUS_STYLE = {"pass": "green", "unknown": "yellow", "fail": "bold red", "error": "bold red", "excluded": "dim"}


@dataclass
class HealthOptions:
    inventory: str
    limit: str | None = None
    catalog_files: list[Path] = field(default_factory=list)
    previous: Path | None = None
    artifacts: Path | None = None
    args: PlaybookArgs = field(default_factory=PlaybookArgs)
    # Where to write the gpufabric_quarantine inventory group and the JUnit report (checked before the run).
    quarantine: Path | None = None
    junit: Path | None = None


@dataclass
class HostHealth:
    """One host: its summary and verdicts (status pass, fail or unknown), or why it has none (error, excluded)."""

    status: str
    action: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    port_counters: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    versions: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "action": self.action,
            "counts": self.counts,
            "verdicts": self.verdicts,
            "port_counters": self.port_counters,
            "versions": self.versions,
            "error": self.error,
        }

    def add(self, verdict: dict[str, Any]) -> None:
        """One more verdict, and the host's status, counts and action again (as health.summary has them)."""
        self.verdicts.append(verdict)
        status = verdict["status"]
        self.counts[status] = self.counts.get(status, 0) + 1
        if status == "fail":
            self.status = "fail"
            actions = [self.action, verdict.get("action")]
            order = module_utils("health").ACTION_ORDER
            self.action = max((a for a in actions if a), key=order.index, default=None)
        elif status == "unknown" and self.status == "pass":
            self.status = "unknown"


@dataclass
class HealthResult:
    hosts: dict[str, HostHealth]
    artifacts_dir: Path | None = None

    @property
    def exit_code(self) -> int:
        states = {host.status for host in self.hosts.values()}
        if not self.hosts or "error" in states:
            return EXIT_FAILED
        return EXIT_UNHEALTHY if "fail" in states else EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "hosts": {name: host.as_dict() for name, host in self.hosts.items()}}


def playbook() -> Path:
    return collection_root() / "playbooks" / "health.yml"


def read_previous(path: Path | None) -> dict[str, dict[str, Any]]:
    """{host: port_counters} from an earlier `gpufabric health --json` report; {} without one."""
    if path is None:
        return {}
    try:
        # Only a regular file is opened: a FIFO or a device would block or never end.
        if not stat.S_ISREG(path.stat().st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with path.open("rb") as stream:
            raw = stream.read(MAX_PREVIOUS_BYTES + 1)
        if len(raw) > MAX_PREVIOUS_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_PREVIOUS_BYTES} bytes")
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise UserError(f"--previous {path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UserError(f"--previous {path}: not UTF-8; accepted: a report of `gpufabric health --json`") from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"--previous {path}: not JSON ({exc.msg} at line {exc.lineno}); accepted: a report of "
            "`gpufabric health --json`"
        ) from None
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, dict):
        raise UserError(f"--previous {path}: no `hosts` mapping; accepted: a report of `gpufabric health --json`")
    previous = {}
    for name, host in hosts.items():
        counters = host.get("port_counters") if isinstance(host, dict) else None
        if isinstance(counters, dict) and counters:
            previous[str(name)] = counters
    return previous


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def summarize(events: list[dict[str, Any]], expected_hosts: list[str]) -> dict[str, HostHealth]:
    """Each expected host's health from the run's events; a host without a health_info result is an error."""
    results: dict[str, HostHealth] = {}
    problems: dict[str, str] = {}
    for event in events:
        kind, data = event.get("event"), _mapping(event.get("event_data"))
        host = str(data.get("host") or "")
        res = _mapping(data.get("res"))
        if not host or not isinstance(kind, str):
            continue
        action = str(data.get("resolved_action") or data.get("task_action") or "")
        if kind == "runner_on_ok" and action in (HEALTH_ACTION, "health_info"):
            summary = _mapping(res.get("summary"))
            results[host] = HostHealth(
                status=str(summary.get("status") or "unknown"),
                action=summary.get("action"),
                counts=dict(_mapping(summary.get("counts"))),
                verdicts=list(res.get("verdicts") or []),
                port_counters=dict(_mapping(res.get("port_counters"))),
                versions={
                    str(key): [str(item) for item in value]
                    for key, value in _mapping(res.get("versions")).items()
                    if isinstance(value, list)
                },
            )
        elif kind == "runner_on_ok":
            unmanaged = _mapping(_mapping(res.get("ansible_facts")).get(UNMANAGED_FACT))
            if unmanaged:
                code, reason = str(unmanaged.get("code") or ""), str(unmanaged.get("reason") or "")
                if code == EXCLUDED:
                    results[host] = HostHealth(status=EXCLUDED, error=reason)
                else:
                    problems[host] = f"not managed ({code}): {reason}"
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            problems.setdefault(host, f"failed at '{data.get('task')}': {res.get('msg') or 'no message'}")
        elif kind == "runner_on_unreachable":
            problems.setdefault(host, f"unreachable: {res.get('msg') or 'no message'}")
    out = {}
    for host in expected_hosts:
        found = results.get(host)
        # A failure after the verdicts (or before them) makes the host an error, unless it was excluded on purpose.
        if found is not None and (found.status == EXCLUDED or host not in problems):
            out[host] = found
        else:
            out[host] = HostHealth(status="error", error=problems.get(host, "no health verdicts came back"))
    return out


def judge_skew(hosts: Mapping[str, HostHealth]) -> None:
    """Version skew across the fleet: for each of VERSION_KEYS, a host whose versions differ from the majority's gets
    a ``version_skew`` fail (action ``monitor``); the majority's hosts a pass. Hosts that reported nothing for a key
    are left out of it; with no strict majority (a tie) every reporting host gets ``unknown``. Fewer than
    MIN_SKEW_HOSTS hosts reporting: no verdict."""
    checks = module_utils("health")
    for key in checks.VERSION_KEYS:
        seen = {
            name: ", ".join(host.versions[key])
            for name, host in hosts.items()
            if host.status in ("pass", "fail", "unknown") and host.versions.get(key)
        }
        if len(seen) < MIN_SKEW_HOSTS:
            continue
        tally = Counter(seen.values())
        (majority, top), *rest = tally.most_common()
        tied = bool(rest) and rest[0][1] == top
        for name, value in seen.items():
            evidence = {"version": value, "fleet_majority": None if tied else majority, "fleet": dict(tally)}
            if tied:
                message = f"{key} {value}: the fleet has no majority version ({len(tally)} versions, tied)"
                hosts[name].add(checks.verdict("version_skew", key, "unknown", message, None, evidence))
            elif value == majority:
                message = f"{key} {value}, as {top} of {len(seen)} hosts"
                hosts[name].add(checks.verdict("version_skew", key, "pass", message, None, evidence))
            else:
                message = f"{key} {value}; {top} of {len(seen)} hosts have {majority}"
                hosts[name].add(
                    checks.verdict("version_skew", key, "fail", message, checks.ACTIONS["version_skew"], evidence)
                )


def execute(
    options: HealthOptions,
    progress: runs.Progress | None = None,
    *,
    watch: Callable[[runs.Tally], None] | None = None,
) -> HealthResult:
    """Run playbooks/health.yml over the inventory (after --limit) and gather each host's verdicts."""
    limit = apply.parse_limit(options.limit)
    fabric_catalog.load(options.catalog_files)
    previous = read_previous(options.previous)
    outputs = {"--quarantine": options.quarantine, "--junit": options.junit}
    for option, path in outputs.items():
        if path is not None:
            output_file.check_file(path, option)
    output_file.refuse_clobbers(list(outputs.items()), [("--previous", options.previous), ("-i", options.inventory)])
    hosts = runs.inventory_hosts(options.inventory, limit)
    base = options.artifacts or runs.default_artifacts("health")
    runs.check_artifacts(base)
    if not hosts:
        return HealthResult({}, None)
    extravars = apply.extra_vars(None, options.catalog_files) | {"gpufabric_health_previous": previous}
    run = runs.run_playbook(
        playbook(),
        options.inventory,
        limit=limit,
        extravars=extravars,
        settings=ansible_settings.TUNED,
        artifacts_dir=base / "health",
        progress=progress,
        hosts=hosts,
        watch=watch,
        label="health",
        args=options.args,
    )
    judged = summarize(run.events, hosts)
    judge_skew(judged)
    result = HealthResult(judged, run.artifacts_dir)
    write_reports(result, options)
    return result


def write_reports(result: HealthResult, options: HealthOptions) -> None:
    """The files asked for: the quarantine inventory and the JUnit report, each written atomically."""
    if options.quarantine is not None:
        output_file.write_atomically(options.quarantine, quarantine_inventory(result), option="--quarantine")
    if options.junit is not None:
        output_file.write_atomically(options.junit, to_junit(result), option="--junit")


QUARANTINE_HEADER = """\
# Written by `gpufabric health --quarantine`: the hosts that failed a health check, as the inventory group
# {group}. Keep this file in your inventory directory: `gpufabric apply` and `gpufabric verify` leave the
# group's hosts out; `gpufabric health` still judges them and rewrites this file (a host healthy again leaves it).
# gpufabric_quarantine_action: the strongest action asked for; gpufabric_quarantine_checks: the checks it failed
# (docs/health.md). Do not edit: the next run replaces it.
"""


def quarantine_inventory(result: HealthResult) -> str:
    """A YAML inventory with one group, runs.QUARANTINE_GROUP, of the hosts that failed a check (none: empty).

    Only gpufabric's own identifiers go in (actions, check names): no text read from a host, which Ansible would
    template when the variables are used."""
    hosts: dict[str, Any] = {}
    for name, host in result.hosts.items():
        if host.status != "fail":
            continue
        checks = sorted({str(item.get("check")) for item in host.verdicts if item.get("status") == "fail"})
        hosts[name] = {"gpufabric_quarantine_action": host.action, "gpufabric_quarantine_checks": checks}
    document = {"all": {"children": {runs.QUARANTINE_GROUP: {"hosts": hosts}}}}
    header = QUARANTINE_HEADER.format(group=runs.QUARANTINE_GROUP)
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def to_junit(result: HealthResult) -> str:
    """JUnit XML in drift's shape (docs/drift.md): one testsuite per host, one testcase per verdict (classname the
    host, name "check subject"): a failure (type: its action) for ``fail``, skipped for ``unknown``; a host not
    judged is one error testcase, a host excluded on purpose one skipped testcase."""
    import junitparser  # for this output only, as drift's writers

    from gpufabric.drift_formats import _xml_text

    report = junitparser.JUnitXml("gpufabric health")
    for name, host in result.hosts.items():
        suite = junitparser.TestSuite(_xml_text(name))
        suite.add_property("status", host.status)
        if host.action:
            suite.add_property("action", host.action)
        cases = []
        if host.status in ("error", EXCLUDED):
            case = junitparser.TestCase("health", _xml_text(name), 0)
            kind = junitparser.Error if host.status == "error" else junitparser.Skipped
            case.result = [kind(_xml_text(host.error or host.status), "error" if host.status == "error" else None)]
            cases.append(case)
        for verdict in host.verdicts:
            case = junitparser.TestCase(
                _xml_text(f"{verdict.get('check')} {verdict.get('subject')}"), _xml_text(name), 0
            )
            message = _xml_text(str(verdict.get("message") or ""))
            if verdict.get("status") == "fail":
                failure = junitparser.Failure(message, str(verdict.get("action") or "fail"))
                failure.text = _xml_text(json.dumps(verdict.get("evidence") or {}, sort_keys=True))
                case.result = [failure]
            elif verdict.get("status") != "pass":
                case.result = [junitparser.Skipped(message)]
            cases.append(case)
        suite.add_testcases(cases)
        report.add_testsuite(suite)
    report.update_statistics()  # type: ignore[no-untyped-call]
    written = io.BytesIO()
    report.write(written, pretty=True)
    return written.getvalue().decode("utf-8")


def _first_problem(host: HostHealth) -> str:
    if host.error:
        return host.error
    for status in ("fail", "unknown"):
        for verdict in host.verdicts:
            if verdict.get("status") == status:
                return str(verdict.get("message") or "")
    return "-"


def table(result: HealthResult) -> Table:
    output = Table(title="gpufabric health", title_justify="left")
    output.add_column("host", overflow="fold")
    output.add_column("status")
    output.add_column("action")
    for column in ("pass", "fail", "unknown"):
        output.add_column(column, justify="right")
    output.add_column("first finding")
    for name, host in result.hosts.items():
        output.add_row(
            Text(name),
            Text(host.status.upper(), style=STATUS_STYLE.get(host.status, "")),
            Text(host.action or "-"),
            *(Text(str(host.counts.get(column, 0)) if host.counts else "-") for column in ("pass", "fail", "unknown")),
            Text(_first_problem(host)),
        )
    return output


def render(result: HealthResult, console: Console) -> None:
    """The per-host table, a closing line with the exit code, and the artifacts path."""
    console.print(table(result))
    counts: dict[str, int] = {}
    for host in result.hosts.values():
        counts[host.status] = counts.get(host.status, 0) + 1
    shown = ", ".join(f"{count} {status}" for status, count in sorted(counts.items())) or "no host"
    console.print(f"{shown} (exit {result.exit_code})", highlight=False)
    if result.artifacts_dir is not None:
        console.print(f"artifacts: {escape(str(result.artifacts_dir))}", highlight=False)
