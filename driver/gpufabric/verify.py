# SPDX-License-Identifier: Apache-2.0
"""`gpufabric verify`: run nccl-tests through playbooks/verify.yml, then judge and report.

The playbook (role nccl_tests) builds or checks nccl-tests on the inventory's hosts, runs the
collectives once over MPI from the first host and fetches the outputs and a run.json to
``<dir>/<tier>/<run id>/`` on this machine. ansible-runner runs it over the inventory's own
connections (SSH, podman, local: the inventory's variables apply as they are), one tier after the
other; its events become progress lines. The role is told not to fail the play on a verdict
(nccl_tests_fail_on=never): the verdicts are this command's, made again from the files by
gpufabric.report, so `--from-results` gives the same report from the same directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufabric import ansible_settings, plot, report, runs
from gpufabric import catalog as fabric_catalog
from gpufabric import plan as fleet_plan
from gpufabric.collection import collection_root, module_utils, plugin_utils
from gpufabric.errors import UserError
from gpufabric.inventory import as_play_sees, host_vars
from gpufabric.playbook_args import PlaybookArgs

TIERS = ("best", "standard")
LOG_FILE = "ansible.log"
# Beside it, the run record apply and drift keep (runs.run_playbook): job_events/, stdout, command, rc, status,
# gpufabric-run.json.
ARTIFACTS_DIR = "artifacts"
Progress = Callable[[str], None]


@dataclass
class Options:
    """What the command line asked for."""

    inventory: str | None = None
    collectives: list[str] = field(default_factory=list)
    nodes: int | None = None
    # Empty: not given (run tier best; --from-results reads every tier it finds).
    tiers: list[str] = field(default_factory=list)
    compare: bool = False
    catalog_files: list[Path] = field(default_factory=list)
    output: Path | None = None
    from_results: Path | None = None
    title: str | None = None
    args: PlaybookArgs = field(default_factory=PlaybookArgs)
    # --nvlink: the scopes of a rack-scale fleet to run (within one NVLink domain, across domains), tier best each.
    nvlink: list[str] = field(default_factory=list)
    # --limit: Ansible host patterns; the run covers only these hosts of the inventory (--nodes counts within them).
    limit: list[str] | None = None


def parse_tiers(tier: str | None, compare: str | None) -> tuple[list[str], bool]:
    """--tier or --compare A,B (never both) -> (tiers in run order, compare)."""
    if tier is not None and compare is not None:
        raise UserError("give --tier or --compare, not both (--compare runs each of its tiers)")
    if compare is not None:
        tiers = [part.strip() for part in compare.split(",") if part.strip()]
        if len(tiers) != 2 or len(set(tiers)) != 2 or any(t not in TIERS for t in tiers):
            raise UserError(f"--compare {compare!r} must name two different tiers, e.g. standard,best")
        return tiers, True
    if tier is None:
        return [], False
    if tier not in TIERS:
        raise UserError(f"unknown --tier {tier!r}; accepted: {', '.join(TIERS)}")
    return [tier], False


def parse_collectives(values: list[str] | None) -> list[str]:
    """--collective all_reduce --collective all_gather, or all_reduce,all_gather; checked against nccl-tests."""
    known: tuple[str, ...] = module_utils("nccl_tests_run").COLLECTIVES
    names: list[str] = []
    for value in values or []:
        if not value.strip(" ,"):
            raise UserError(f"--collective {value!r}: names no collective; accepted: {', '.join(known)}")
        for name in (part.strip() for part in value.split(",")):
            name = name.removesuffix("_perf")
            if not name:
                continue
            if name not in known:
                raise UserError(f"unknown --collective {name!r}; accepted: {', '.join(known)}")
            if name not in names:
                names.append(name)
    return names


def parse_nvlink(value: str | None) -> list[str]:
    """--nvlink within,across (either or both, in that order) -> the scopes."""
    if value is None:
        return []
    scopes = [part.strip() for part in value.split(",") if part.strip()]
    accepted = plugin_utils("nvlink_domains").SCOPES
    if not scopes or len(set(scopes)) != len(scopes) or any(scope not in accepted for scope in scopes):
        raise UserError(f"--nvlink {value!r} is not accepted; accepted: within, across or within,across")
    return [scope for scope in accepted if scope in scopes]


def nvlink_runs(options: Options, tiers: list[str]) -> list[tuple[str, list[str]]]:
    """(scope, hosts) of each --nvlink scope, from the inventory's NVLink domains as `gpufabric plan` groups them."""
    if tiers != ["best"] or options.compare:
        raise UserError("--nvlink runs tier best within and across NVLink domains; give it without --tier or --compare")
    inventory_vars = {name: as_play_sees(variables) for name, variables in host_vars(str(options.inventory)).items()}
    plans = fleet_plan.host_plans(inventory_vars, fabric_catalog.load(options.catalog_files))
    domains = plugin_utils("nvlink_domains")
    grouped = domains.group(plans)
    if domains.has_errors(grouped):
        raise UserError("--nvlink: the inventory's NVLink domains have errors; `gpufabric plan` shows them")
    profiles = sorted({profile for entry in grouped["domains"].values() for profile in entry["profiles"]})
    if len(profiles) > 1:
        raise UserError(
            f"--nvlink: the inventory's NVLink domains are of several profiles ({', '.join(profiles)}); one run is one "
            "profile: verify each profile's hosts from an inventory of their own"
        )
    try:
        return [(scope, domains.scope_hosts(grouped["domains"], scope, options.nodes)) for scope in options.nvlink]
    except ValueError as exc:
        raise UserError(str(exc)) from None


def default_output() -> Path:
    """A new run directory under the state directory (never the current one), pruned like apply's and drift's."""
    return runs.default_artifacts("verify")


def runner_env() -> dict[str, str]:
    """Environment for ansible-playbook: gpufabric's (this collection first, the `ansible` beside this
    Python, the user's ansible.cfg, host key checking as the user's configuration decides it)."""
    return runs.base_env()


def extra_vars(
    options: Options, tier: str, results_dir: Path, scope: str | None = None, hosts: list[str] | None = None
) -> dict[str, Any]:
    """The playbook's extra variables for one tier, or one --nvlink scope's run on its hosts (they win over the
    inventory's)."""
    variables: dict[str, Any] = {
        "gpufabric_verify_tier": tier,
        "gpufabric_verify_results_dir": str(results_dir.resolve()),
        # The verdicts are this command's (report.build); the play fails only when something broke.
        "nccl_tests_fail_on": "never",
    }
    if options.collectives:
        variables["gpufabric_verify_collectives"] = list(options.collectives)
    if hosts:
        # Exactly these hosts (a host pattern): a scope's selection is already cut to --nodes.
        variables |= {"gpufabric_verify_hosts": ",".join(hosts), "gpufabric_verify_scope": scope}
    elif options.nodes:
        variables["gpufabric_verify_nodes"] = options.nodes
    files = [str(path.resolve()) for path in fabric_catalog.override_files(options.catalog_files)]
    if files:
        variables["gpufabric_catalog_files"] = files
    return variables


class _Events:
    """ansible-runner event handler: progress lines, and what failed."""

    def __init__(self, tier: str, progress: Progress) -> None:
        self.tier = tier
        self.progress = progress
        self.failures: list[str] = []

    def __call__(self, event: dict[str, Any]) -> bool:
        kind = event.get("event")
        data = event.get("event_data") or {}
        host, task = data.get("host"), data.get("task") or ""
        result = data.get("res")
        if not isinstance(result, dict):
            result = {}
        prefix = f"[{self.tier}]"
        if kind == "playbook_on_play_start":
            self.progress(f"{prefix} play: {data.get('play', '')}")
        elif kind == "runner_on_ok":
            changed = " (changed)" if result.get("changed") else ""
            self.progress(f"{prefix} {host}: {task}{changed}")
        elif kind == "runner_on_failed":
            message = str(result.get("msg") or "failed").strip()
            if data.get("ignore_errors"):
                self.progress(f"{prefix} {host}: {task}: failed (ignored)")
            else:
                self.progress(f"{prefix} {host}: {task}: FAILED: {message}")
                self.failures.append(f"{host}: {task}: {message}")
        elif kind == "runner_on_unreachable":
            message = str(result.get("msg") or "unreachable").strip()
            self.progress(f"{prefix} {host}: {task}: UNREACHABLE: {message}")
            self.failures.append(f"{host}: unreachable: {message}")
        return True


def run_tier(
    options: Options,
    tier: str,
    results_dir: Path,
    progress: Progress,
    playbook: Path | None = None,
    scope: str | None = None,
    hosts: list[str] | None = None,
    covered: list[str] | None = None,
) -> list[str]:
    """Run the verify playbook for one tier (or one --nvlink scope on its hosts) into results_dir; the errors of a
    play that broke.

    The run is runs.run_playbook's, as apply's and drift's are: ansible-runner's artifact directory (job events,
    stdout, the command with its secrets redacted, rc, status) and gpufabric-run.json in results_dir/artifacts,
    Ansible's defaults under the user's configuration (settings stock). covered: the inventory's hosts the run
    is meant for, when the caller listed them (the progress count).
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    label = report.tier_label(tier, scope)
    events = _Events(label, progress)
    run = runs.run_playbook(
        playbook or collection_root() / "playbooks" / "verify.yml",
        str(options.inventory),
        limit=options.limit,
        extravars=extra_vars(options, tier, results_dir, scope, hosts),
        settings=ansible_settings.STOCK,
        artifacts_dir=results_dir / ARTIFACTS_DIR,
        progress=progress,
        hosts=hosts if hosts is not None else covered,
        label=label,
        args=options.args,
        on_event=events,
    )
    log = results_dir / LOG_FILE
    try:
        shutil.copyfile(run.artifacts_dir / "stdout", log)
    except OSError:
        log = run.artifacts_dir
    if run.rc == 0:
        return []
    errors = events.failures or [f"ansible-playbook ended {run.status} (exit {run.rc}) before any task failed"]
    return [*errors, f"the playbook's output: {log}"]


def _prepare_output(path: Path, tiers: list[str]) -> None:
    """-o DIR may exist, but a tier's directory in it must be empty: old results would be judged too."""
    if path.exists() and not path.is_dir():
        raise UserError(f"-o {path}: not a directory")
    for tier in tiers:
        tier_dir = path / tier
        if tier_dir.exists() and any(tier_dir.iterdir()):
            raise UserError(
                f"-o {path}: {tier_dir} already holds results; choose a new directory, or re-judge them with "
                f"--from-results {path}"
            )


def execute(options: Options, progress: Progress, playbook: Path | None = None) -> tuple[dict[str, Any], Path]:
    """Run (unless --from-results), build report.json and busbw.png (when matplotlib is installed).

    Returns the report and its directory.
    """
    catalog = fabric_catalog.load(options.catalog_files)
    tier_errors: dict[str, list[str]] = {}
    if options.from_results is not None:
        if options.inventory:
            raise UserError(
                "give -i INVENTORY (run nccl-tests) or --from-results DIR (judge earlier results), not both"
            )
        source = options.from_results
        if not source.is_dir():
            raise UserError(f"--from-results {source}: not a directory")
        output = options.output or source
        root = source
        tiers = options.tiers or None
    else:
        if not options.inventory:
            raise UserError("give -i INVENTORY to run nccl-tests, or --from-results DIR to judge earlier results")
        covered: list[str] | None = None  # the hosts a tier's run is for (--nvlink: each scope's own)
        if options.limit:
            if options.nvlink:
                raise UserError("--nvlink chooses the hosts of each scope itself; give --limit or --nvlink, not both")
            # The gpufabric_quarantine group's hosts are left out (docs/health.md).
            given = options.limit[0]
            covered, limit, quarantined = runs.hosts_outside_quarantine(str(options.inventory), options.limit)
            options = replace(options, limit=limit)
            if not covered:
                left_out = (
                    f" outside the {runs.QUARANTINE_GROUP} group ({', '.join(quarantined)})" if quarantined else ""
                )
                raise UserError(f"inventory {options.inventory!r} has no host matching --limit {given!r}{left_out}")
        tiers = options.tiers or ["best"]
        # (label, tier, scope, hosts): a tier over the inventory, or each --nvlink scope of tier best on its hosts.
        planned: list[tuple[str, str, str | None, list[str] | None]] = [(tier, tier, None, None) for tier in tiers]
        if options.output is not None:
            _prepare_output(options.output, tiers)  # a bad -o is refused before the inventory is read
        if options.nvlink:
            scopes = nvlink_runs(options, tiers)
            planned = [(report.tier_label("best", scope), "best", scope, hosts) for scope, hosts in scopes]
            tiers = [label for label, *_rest in planned]
        if covered is None and not options.nvlink:
            # Listed once for every tier (the runs' progress count).
            covered, limit, _quarantined = runs.hosts_outside_quarantine(str(options.inventory))
            options = replace(options, limit=limit)
            if not covered:
                raise UserError(f"inventory {options.inventory!r} has no host")
        # A default run directory only once the inventory is read: a bad one is refused with nothing written.
        output = options.output or default_output()
        _prepare_output(output, tiers)
        if covered is not None and options.nodes:
            covered = covered[: options.nodes]
        root = output
        for label, tier, scope, hosts in planned:
            on = f" on {', '.join(hosts)}" if hosts else ""
            progress(f"[{label}] running playbooks/verify.yml{on}; results in {output / label}")
            errors = run_tier(options, tier, output / label, progress, playbook, scope, hosts, covered)
            if errors:
                tier_errors[label] = errors
    built = report.build(
        root,
        catalog,
        tiers=tiers,
        tier_errors=tier_errors,
        compare=options.tiers if options.compare else None,
    )
    report.write(built, output)
    _draw(built, output / plot.PLOT_FILE, options.title, progress)
    return built, output


def _draw(built: dict[str, Any], path: Path, title: str | None, progress: Progress) -> None:
    """busbw.png from the report, or one line saying how to get it when matplotlib is not installed."""
    if plot.available():
        plot.render(built, path, title=title)
        return
    note = f"{plot.PLOT_FILE} not drawn: matplotlib is not installed ({plot.INSTALL_HINT} adds it)"
    if path.is_file():
        # A plot from an earlier judgement of these results would contradict the report.json just written.
        path.unlink()
        note += f"; removed the earlier {path}"
    progress(note)
