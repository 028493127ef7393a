# SPDX-License-Identifier: Apache-2.0
"""`gpufabric drift`: compare every host with its desired state and report each host's drift.

One check is, by default, one run of playbooks/drift_check.yml through gpufabric.runs (each host compared
with the record of its last apply), then site.yml with --check --diff over the hosts that have no full
record; with --thorough, site.yml with --check --diff over every host. drift_events.summarize reads each
run's events, with the inventory's hosts (after --limit) as the expected hosts, so a host that never
answered is unreachable, never clean. With --remediate, the hosts that drifted (and only those: failed or
unreachable ones are left for a person) get `gpufabric apply` limited to them, then the whole selection is
checked once more. The reports and the exit code describe the last check: 0 clean, 2 drifted, 1 a host
failed, was unreachable or is not managed (no catalog profile, unless excluded on purpose) or the check
itself broke.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from gpufabric import (
    ansible_settings,
    apply,
    drift_console,
    drift_events,
    drift_formats,
    drift_report,
    output_file,
    runs,
)
from gpufabric import catalog as fabric_catalog
from gpufabric.errors import UserError
from gpufabric.playbook_args import PlaybookArgs


@dataclass
class DriftOptions:
    inventory: str
    tier: str | None = None
    limit: str | None = None
    catalog_files: list[Path] = field(default_factory=list)
    remediate: bool = False
    json_path: Path | None = None
    junit_path: Path | None = None
    prom_path: Path | None = None
    artifacts: Path | None = None
    settings: str = ansible_settings.TUNED
    diffs: bool = False
    args: PlaybookArgs = field(default_factory=PlaybookArgs)
    # playbooks/drift_check.yml: the record of the last apply; False (--thorough): check-mode site.yml.
    fast: bool = True


@dataclass
class DriftOutcome:
    first: drift_report.DriftResult
    remediation: apply.ApplyResult | None
    final: drift_report.DriftResult
    exit_code: int
    artifacts_dir: Path | None = None  # holds check/ (and remediate/, final-check/)
    problems: list[str] = field(default_factory=list)  # why a remediation did not run


def _check_report_paths(options: DriftOptions) -> None:
    """Fail before a long run, not after it, when a report cannot be written where asked, or would
    overwrite a file the run reads or another report."""
    outputs = (
        ("--json-file", options.json_path),
        ("--junit", options.junit_path),
        ("--prom", options.prom_path),
    )
    for option, path in outputs:
        if path is not None:
            output_file.check_file(path, option)
    inputs: list[tuple[str, Path | str | None]] = [("-i", options.inventory)]
    inputs += [*fabric_catalog.input_files(options.catalog_files), *options.args.input_files()]
    output_file.refuse_clobbers(outputs, inputs)


def _run_problem(run: runs.PlaybookRun, result: drift_report.DriftResult) -> str | None:
    """A run that ended badly with no host to blame (a playbook error, ansible missing)."""
    if run.rc == 0 or result.hosts_in("failed") or result.hosts_in("unreachable"):
        return None
    output = run.artifacts_dir / "stdout"
    return f"ansible-playbook ended {run.status} (exit {run.rc}) with no host failing; its output: {output}"


def _run_playbook(
    options: DriftOptions,
    playbook: Path,
    artifacts_dir: Path,
    hosts: list[str],
    progress: runs.Progress | None,
    watch: Callable[[runs.Tally], None] | None,
    label: str,
) -> drift_report.DriftResult:
    """One --check --diff run of `playbook` over `hosts`, summarized (drift_check.yml reads only too, and
    check mode makes sure of it)."""
    run = runs.run_playbook(
        playbook,
        options.inventory,
        check=True,
        diff=True,
        limit=apply.parse_limit(options.limit),
        extravars=apply.extra_vars(apply.parse_tier(options.tier), options.catalog_files),
        settings=options.settings,
        artifacts_dir=artifacts_dir,
        progress=progress,
        hosts=hosts,
        watch=watch,
        label=label,
        args=options.args,
    )
    result = drift_events.summarize(run.events, expected_hosts=hosts)
    problem = _run_problem(run, result)
    if problem:
        result.problems.append(problem)
    return result


def run_check(
    options: DriftOptions,
    artifacts_dir: Path,
    hosts: list[str],
    progress: runs.Progress | None = None,
    watch: Callable[[runs.Tally], None] | None = None,
    label: str = "check",
) -> drift_report.DriftResult:
    """One check of `hosts` (the inventory's, after --limit). Thorough: site.yml in check and diff mode. Fast
    (the default): drift_check.yml, each host against the record of its last apply; a host whose record does
    not cover every role of its plan (never applied by this gpufabric, booted from a baked image, a role new
    to its plan) is then checked thoroughly, and that result is its verdict: no record means not checked yet,
    never drifted nor clean by default."""
    if not hosts:
        # Nothing to run: summarize says "no host was checked", which is an error, never clean.
        return drift_events.summarize([])
    if not options.fast:
        return _run_playbook(options, runs.site_playbook(), artifacts_dir, hosts, progress, watch, label)
    result = _run_playbook(options, runs.drift_check_playbook(), artifacts_dir, hosts, progress, watch, label)
    uncovered = drift_events.hosts_without_record(result)
    if uncovered:
        if progress is not None:
            progress(
                f"{len(uncovered)} host(s) without a full record of their last apply, checked thoroughly "
                f"(site.yml in check mode): {', '.join(uncovered)}"
            )
        thorough = _run_playbook(
            options,
            runs.site_playbook(),
            artifacts_dir.parent / f"{artifacts_dir.name}-thorough",
            uncovered,
            progress,
            watch,
            f"{label} (thorough)",
        )
        result = result.replaced(thorough)
    return result


def _artifacts_base(options: DriftOptions) -> Path:
    base = options.artifacts or runs.default_artifacts("drift")
    runs.check_artifacts(base)
    return base


def _check_options(options: DriftOptions) -> list[str] | None:
    """Every option that can be wrong, before any host is touched (a missing or invalid --catalog too);
    the parsed --limit."""
    apply.parse_tier(options.tier)
    ansible_settings.parse_name(options.settings)
    if options.fast and (options.args.tags or options.args.skip_tags):
        # The fast check is one task: a tag selection would skip it and leave hosts unchecked, never clean.
        raise UserError(
            "--tags and --skip-tags select site.yml's tasks, which only the thorough check runs: add --thorough"
        )
    limit = apply.parse_limit(options.limit)
    fabric_catalog.load(options.catalog_files)
    return limit


def check(options: DriftOptions, progress: runs.Progress | None = None) -> drift_report.DriftResult:
    """One check of the inventory's hosts (after --limit); artifacts in <base>/check."""
    limit = _check_options(options)
    # The inventory first: a bad one is refused before a default run directory is made for it.
    hosts = runs.inventory_hosts(options.inventory, limit)
    base = _artifacts_base(options)
    return run_check(options, base / "check", hosts, progress)


def write_reports(result: drift_report.DriftResult, options: DriftOptions) -> list[Path]:
    """The --json-file, --junit and --prom files, each written atomically."""
    written = []
    for option, path, render in (
        ("--json-file", options.json_path, drift_formats.to_json),
        ("--junit", options.junit_path, drift_formats.to_junit),
        ("--prom", options.prom_path, drift_formats.to_prometheus),
    ):
        if path is not None:
            output_file.write_atomically(path, render(result), option=option)
            written.append(path)
    return written


class _Refused(Exception):
    """The remediation cannot be limited to exactly the drifted hosts."""


def _remediate(
    options: DriftOptions,
    drifted: list[str],
    base: Path,
    progress: runs.Progress | None,
    watch: Callable[[runs.Tally], None] | None,
) -> apply.ApplyResult:
    """gpufabric apply on exactly the drifted hosts."""
    # A host name can read as a pattern (`web*`, `~re`, `a:b`): run only when the limit selects
    # exactly the drifted hosts, so a clean host is never touched.
    selected = runs.inventory_hosts(options.inventory, [",".join(drifted)])
    if sorted(selected) != sorted(drifted):
        extra = sorted(set(selected) - set(drifted))
        raise _Refused(
            f"remediation not run: a --limit of the drifted hosts would also select {', '.join(extra) or 'other hosts'}"
            if extra
            else "remediation not run: the drifted hosts' names do not select themselves as an Ansible --limit"
        )
    remedy = apply.ApplyOptions(
        options.inventory,
        tier=options.tier,
        limit=",".join(drifted),
        catalog_files=options.catalog_files,
        settings=options.settings,
        args=options.args,
    )
    return apply.execute(remedy, progress, watch=watch, artifacts_dir=base / "remediate", label="remediate")


def execute(
    options: DriftOptions,
    progress: runs.Progress | None = None,
    console: Console | None = None,
    *,
    watch: Callable[[runs.Tally], None] | None = None,
) -> DriftOutcome:
    """Check, and with --remediate apply to the drifted hosts and check again; write the reports."""
    limit = _check_options(options)
    _check_report_paths(options)
    # The inventory first: a bad one is refused before a default run directory is made for it.
    hosts = runs.inventory_hosts(options.inventory, limit)
    base = _artifacts_base(options)
    out = console or Console(quiet=True)
    steps = 3 if options.remediate else 1

    def step(number: int, text: str) -> None:
        if options.remediate:
            out.print(f"[bold]step {number}/{steps}: {escape(text)}[/bold]", highlight=False)

    step(1, f"check {len(hosts)} host(s)")
    first = run_check(options, base / "check", hosts, progress, watch, "check")
    drift_console.render(first, out, diffs=options.diffs)
    final, remediation, problems = first, None, []
    if options.remediate:
        drifted = first.hosts_in("drifted")
        if not drifted:
            step(2, "remediate: no host drifted, nothing to apply")
            step(3, "final check: not needed, the first check stands")
        else:
            step(2, f"remediate {len(drifted)} drifted host(s): {', '.join(drifted)}")
            try:
                remediation = _remediate(options, drifted, base, progress, watch)
            except _Refused as refused:
                problems.append(str(refused))
                out.print(f"[red]error[/red]: {escape(str(refused))}", highlight=False)
            if remediation is not None:
                apply.render(remediation, out)
                step(3, f"final check of {len(hosts)} host(s)")
                final = run_check(options, base / "final-check", hosts, progress, watch, "final check")
                drift_console.render(final, out, diffs=options.diffs)
    for path in write_reports(final, options):
        out.print(f"wrote {escape(str(path))}", highlight=False)
    if base.exists():
        out.print(f"artifacts: {escape(str(base))}", highlight=False)
    return DriftOutcome(first, remediation, final, final.exit_code, base, problems)
