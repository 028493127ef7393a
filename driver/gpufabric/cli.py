# SPDX-License-Identifier: Apache-2.0
"""The `gpufabric` command line: parsing and presentation only.

All host changes happen in the Ansible collection; this module only reads the
catalog and inventories, prints, and (later) starts playbooks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import __version__, discovery, k8s, output_file, playbook_args, plot, show_settings
from gpufabric import ansible_settings as playbook_settings
from gpufabric import apply as fabric_apply
from gpufabric import bake as fleet_bake
from gpufabric import catalog as fabric_catalog
from gpufabric import demo as fleet_demo
from gpufabric import drift as fabric_drift
from gpufabric import health as fleet_health
from gpufabric import lab as local_lab
from gpufabric import nccl as nccl_output
from gpufabric import report as verify_report
from gpufabric import runs as playbook_runs
from gpufabric import verify as nccl_verify
from gpufabric.errors import EXIT_FAILED, EXIT_OK, UserError
from gpufabric.plan import fleet_plan, plan_json, render
from gpufabric.plan import has_problems as plan_has_problems
from gpufabric.terminal import SafeConsole

app = typer.Typer(help="Configure and prove GPU cluster networks from one fabric catalog.", no_args_is_help=True)
catalog_app = typer.Typer(help="Inspect the fabric catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")
inventory_app = typer.Typer(help="Build Ansible inventories from cloud APIs.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")
k8s_app = typer.Typer(help="Kubernetes manifests for the fleet's SR-IOV networks.", no_args_is_help=True)
app.add_typer(k8s_app, name="k8s")
nccl_app = typer.Typer(help="Read nccl-tests output.", no_args_is_help=True)
app.add_typer(nccl_app, name="nccl")
lab_app = typer.Typer(
    help="A local lab: podman containers over SSH that look like a profile's GPU hosts (SIMULATED hardware).",
    no_args_is_help=True,
)
app.add_typer(lab_app, name="lab")

# Tables are read in terminals and in CI logs; a log is not a terminal, so give it room. With --json the
# tables go to stderr, and get the same room there.
# SafeConsole: what they print comes from outside (host names, tags, error text) and must not drive the terminal.
stdout = SafeConsole(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
stderr = SafeConsole(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 200)
# verify --nodes: far above any fleet, so that a number beyond it is a typo, not a run of every host.
MAX_HOSTS = 100_000

CatalogOption = Annotated[
    Optional[list[Path]],  # noqa: UP045 - typer needs Optional here on Python 3.11
    typer.Option(
        "--catalog",
        help="Extra catalog YAML merged over the built-in one (repeatable; also $GPUFABRIC_CATALOG).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def _print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def _print_version(value: bool) -> None:
    if value:
        stdout.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    """Configure and prove GPU cluster networks from one fabric catalog."""


@catalog_app.command("list")
def catalog_list(catalog: CatalogOption = None, as_json: JsonOption = False) -> None:
    """List every profile of the catalog."""
    loaded = fabric_catalog.load(catalog)
    rows = [fabric_catalog.summary(name, loaded.get(name)) for name in loaded.names()]
    if as_json:
        _print_json({"profiles": rows})
        return
    columns = ("name", "fabric", "gpus", "gpu_nics", "line_rate_gbit_s", "architecture", "nvlink_domain")
    table = Table(title="fabric catalog (`gpufabric catalog show NAME` lists a profile's sources)")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(Text(str(row[column])) for column in columns))
    stdout.print(table)


@catalog_app.command("show")
def catalog_show(
    name: Annotated[str, typer.Argument(help="Profile name, e.g. gcp/a3-megagpu-8g.")],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one profile as resolved, and where each value came from: its fabric, the profile, an override file."""
    loaded = fabric_catalog.load(catalog)
    profile = loaded.get(name)
    if profile is None:
        raise UserError(f"no profile {name!r} in the catalog; `gpufabric catalog list` shows the accepted names")
    if as_json:
        provenance = fabric_catalog.provenance(loaded, name)
        _print_json({"name": name, "source": loaded.origins[name], **profile, "provenance": provenance})
        return
    origins = loaded.provenance[name]
    files = {fabric_catalog.origin_label(origin): origin[1] for origin in origins.values() if origin[0] != "override"}
    stdout.print(f"[bold]{escape(name)}[/bold]  (from {escape(loaded.origins[name])})", highlight=False)
    for label, file in sorted(files.items()):
        stdout.print(f"# {label} = {file}", markup=False, highlight=False)
    lines = fabric_catalog.annotated(profile, origins)
    width = min(max(len(line) for line, _label in lines), 100) + 2  # labels line up unless a value is long
    for line, label in lines:
        stdout.print(
            f"{line}{' ' * max(width - len(line), 2)}# {label}" if label else line, markup=False, highlight=False
        )


@app.command()
def plan(
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Any inventory ansible-inventory reads.")],
    tier: Annotated[
        Optional[str],  # noqa: UP045 - typer needs Optional here on Python 3.11
        typer.Option(help="best or standard; default: host var gpufabric_tier, else best."),
    ] = None,
    catalog: CatalogOption = None,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Read each host's hardware over its Ansible connection and show where it differs from its "
            "profile; exit 1 when a host is unreachable or has an error finding.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show, per host, the profile, fabric, roles and environment that apply would use.

    Hosts of rack-scale NVLink profiles (NVL72) are grouped into their NVLink domains; a domain with too many
    hosts or mixed profiles, or such a host without a domain, exits 1.
    """
    result = fleet_plan(inventory, tier, catalog, probe=probe)
    if as_json:
        sys.stdout.write(plan_json(result) + "\n")
    else:
        render(result, stdout)
    if plan_has_problems(result, probe):
        raise typer.Exit(1)


ListOption = Optional[list[str]]  # noqa: UP045 - typer needs Optional here on Python 3.11


@inventory_app.command("build")
def inventory_build(
    source: Annotated[str, typer.Option(help="aws, gcp, azure, nebius, oci or static.")],
    region: Annotated[ListOption, typer.Option(help="aws, oci: region to list (repeatable).")] = None,
    project: Annotated[ListOption, typer.Option(help="gcp: project to list (repeatable).")] = None,
    zone: Annotated[ListOption, typer.Option(help="gcp: only these zones (repeatable).")] = None,
    subscription: Annotated[Optional[str], typer.Option(help="azure: subscription id.")] = None,  # noqa: UP045
    resource_group: Annotated[ListOption, typer.Option(help="azure: only these resource groups.")] = None,
    compartment: Annotated[Optional[str], typer.Option(help="oci: compartment OCID.")] = None,  # noqa: UP045
    parent_id: Annotated[ListOption, typer.Option(help="nebius: project (parent) id (repeatable).")] = None,
    file: Annotated[Optional[Path], typer.Option(help="static: YAML file of hosts.")] = None,  # noqa: UP045
    profile: Annotated[Optional[str], typer.Option(help="aws: shared-config profile.")] = None,  # noqa: UP045
    endpoint_url: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="API endpoint instead of the cloud's (private endpoints, emulators)."),
    ] = None,
    public: Annotated[bool, typer.Option("--public", help="Connect to public addresses (default: private).")] = False,
    include_non_gpu: Annotated[bool, typer.Option("--include-non-gpu", help="Keep non-GPU instances.")] = False,
    include_stopped: Annotated[bool, typer.Option("--include-stopped", help="Keep stopped instances.")] = False,
    output_format: Annotated[str, typer.Option("--format", help="yaml (an inventory file) or json.")] = "yaml",
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "-o", "--output", help="Write here (atomically; its directory must exist) instead of standard output."
        ),
    ] = None,
    catalog: CatalogOption = None,
) -> None:
    """List the fleet through the cloud's API and print or write an Ansible inventory.

    --format json is exactly the shape of `ansible-inventory --list`.
    """
    given = {
        "--region": region,
        "--project": project,
        "--zone": zone,
        "--subscription": subscription,
        "--resource-group": resource_group,
        "--compartment": compartment,
        "--parent-id": parent_id,
        "--file": str(file) if file else None,
        "--profile": profile,
        "--endpoint-url": endpoint_url,
    }
    if output_format not in ("yaml", "json"):
        raise UserError(f"unknown --format {output_format!r}; accepted: yaml, json")
    if output is not None:
        output_file.check_file(output, "-o")  # before the cloud's API is asked anything
        inputs = [("--file", file), *fabric_catalog.input_files(catalog)]
        output_file.refuse_clobbers([("-o", output)], inputs)
    inventory, warnings = discovery.build(source, given, catalog, public, include_non_gpu, include_stopped)
    text = discovery.render(inventory, output_format)
    for warning in warnings:
        stderr.print(f"[yellow]warning[/yellow]: {escape(warning)}", highlight=False)
    hosts = len(inventory["_meta"]["hostvars"])
    if output is None:
        sys.stdout.write(text)
    else:
        output_file.write_atomically(output, text, option="-o")
    where = f" written to {output}" if output else ""
    stderr.print(f"{hosts} hosts from {source}{where}", highlight=False, markup=False)


@k8s_app.command("manifests")
def k8s_manifests(
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Any inventory ansible-inventory reads.")],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Directory to write (created; must be empty, see --force).")
    ],
    tier: Annotated[
        Optional[str],  # noqa: UP045 - typer needs Optional here on Python 3.11
        typer.Option(help="best or standard; default: host var gpufabric_tier, else best. VFs exist at best only."),
    ] = None,
    catalog: CatalogOption = None,
    resource_prefix: Annotated[
        str, typer.Option(help="Device plugin resource prefix: pods request PREFIX/rdma_vf_...")
    ] = k8s.Options.resource_prefix,
    namespace: Annotated[
        str, typer.Option(help="Namespace of the NetworkAttachmentDefinitions (the pods' namespace).")
    ] = k8s.Options.namespace,
    storage_interface: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Also an IPVLAN (l2) storage network on this host interface, e.g. eth1."),
    ] = None,
    ipam_range: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help=f"whereabouts range of the RDMA networks, split per rail (site-specific; default: the "
            f"placeholder {k8s.PLACEHOLDER_IPAM_RANGE}, flagged in the files)."
        ),
    ] = None,
    storage_ipam_range: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help=f"whereabouts range of the storage network (default placeholder {k8s.PLACEHOLDER_STORAGE_RANGE})."
        ),
    ] = None,
    gatekeeper: Annotated[
        bool,
        typer.Option(
            "--gatekeeper",
            help="Also write the admission rule as an OPA Gatekeeper ConstraintTemplate and Constraint.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace the files an earlier run wrote in the directory (never any other)."),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print what was written as JSON on stdout (the progress lines go to stderr)."),
    ] = False,
) -> None:
    """Write the SR-IOV device plugin config, NetworkAttachmentDefinitions, the admission policy and a README.

    One resource per profile that declares `sriov:` (per rail where the profile names its PF netdevs).
    """
    options = k8s.Options(
        resource_prefix=resource_prefix,
        namespace=namespace,
        storage_interface=storage_interface,
        ipam_range=ipam_range,
        storage_ipam_range=storage_ipam_range,
        gatekeeper=gatekeeper,
    )
    k8s.check_output(output, force)  # before the inventory is read
    output_file.refuse_clobbers([], [("-i", inventory), *fabric_catalog.input_files(catalog)], [("-o", output)])
    warnings: list[str] = []

    def warn(text: str) -> None:
        warnings.append(text)
        stderr.print(f"warning: {text}", markup=False, highlight=False)

    networks, files = k8s.generate(inventory, tier, catalog, options, warn=warn)
    written = k8s.write_tree(output, files, force)
    out = stderr if as_json else stdout
    for path in written:
        out.print(f"wrote {path}", markup=False, highlight=False)
    hosts = sum(len(network.hosts) for network in networks)
    out.print(
        f"{len(networks)} SR-IOV profile(s), {hosts} host(s); next: read {output / 'README.md'}",
        markup=False,
        highlight=False,
    )
    if as_json:
        _print_json(k8s.as_dict(output, written, networks, options, warnings))
    if ipam_range is None or (storage_interface and storage_ipam_range is None):
        stderr.print(
            "[yellow]warning[/yellow]: IP ranges are site-specific placeholders; regenerate with --ipam-range "
            "(and --storage-ipam-range) before applying",
            highlight=False,
        )


@nccl_app.command("parse")
def nccl_parse(
    file: Annotated[Path, typer.Argument(help="nccl-tests output: stdout of any generation, or its -J JSON file.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as JSON (a list when the file holds several runs).")
    ] = False,
) -> None:
    """Parse nccl-tests output: rows, footer, completeness and errors.

    Exit 0 when every run is complete and clean, 1 when one is incomplete or invalid or the file
    cannot be read. Bandwidth is not judged here (`gpufabric verify` does that against the catalog).
    """
    runs = nccl_output.parse_file(file)
    if as_json:
        _print_json(runs[0] if len(runs) == 1 else runs)
    else:
        nccl_output.render(runs, stdout)
    raise typer.Exit(nccl_output.exit_code(runs))


@app.command()
def verify(
    inventory: Annotated[
        Optional[str],  # noqa: UP045 - typer needs Optional here on Python 3.11
        typer.Option(
            "-i", "--inventory", help="Any inventory ansible-inventory reads; its hosts' own variables apply."
        ),
    ] = None,
    collective: Annotated[
        ListOption,
        typer.Option(help="Collective to run, e.g. all_reduce (repeatable or comma-separated; default: the role's)."),
    ] = None,
    nodes: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            min=1, max=MAX_HOSTS, help="Run on the first N hosts (of --limit's, if given; default: every host)."
        ),
    ] = None,
    tier: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="best (the fabric, judged against the catalog) or standard (default: best)."),
    ] = None,
    compare: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Run two tiers, e.g. standard,best, and show the second's speed-up over the first."),
    ] = None,
    nvlink: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="Rack-scale NVLink fleets: run within one NVLink domain (judged by the profile's nvlink thresholds), "
            "across domains (one host of each, judged by its bandwidth thresholds), or both: within, across or "
            "within,across. --nodes caps the hosts of each."
        ),
    ] = None,
    limit: LimitOption = None,
    catalog: CatalogOption = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "-o",
            "--output",
            help="Directory for the results, report.json and busbw.png (default <state>/runs/verify-<UTC time>; "
            "with --from-results, that directory).",
        ),
    ] = None,
    from_results: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Run nothing: judge the results in DIR again and rebuild report.json and busbw.png."),
    ] = None,
    title: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Text put before the plot's title (e.g. the site or the date)."),
    ] = None,
    as_json: JsonOption = False,
    show: ShowSettingsOption = False,
    extra_vars: ExtraVarsOption = None,
    user: RemoteUserOption = None,
    private_key: PrivateKeyOption = None,
    ask_become_pass: AskBecomeOption = False,
    become_password_file: BecomeFileOption = None,
    vault_id: VaultIdOption = None,
    vault_password_file: VaultFileOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Prove the fabric with nccl-tests: run playbooks/verify.yml, judge every output against the catalog.

    Writes report.json and busbw.png (busbw vs message size, the catalog's line rate and threshold).
    Exit 0 when every run passed (warn and unjudged too, with a warning line), 1 when a run failed,
    a tier could not run, or on a usage error.
    """
    if show:
        # verify runs with Ansible's defaults under the user's configuration (host key checking as it says).
        _show_settings(playbook_settings.STOCK, 0, always=nccl_verify.runner_env(), as_json=as_json)
    tiers, comparing = nccl_verify.parse_tiers(tier, compare)
    args = _ansible_args(
        extra_vars, user, private_key, ask_become_pass, become_password_file, vault_id, vault_password_file, verbose
    )
    if output is not None:
        output_file.check_directory(output, "-o")
        inputs = [("-i", inventory), *fabric_catalog.input_files(catalog), *args.input_files()]
        outputs = [("-o", output / name) for name in (verify_report.REPORT_FILE, plot.PLOT_FILE)]
        output_file.refuse_clobbers(outputs, inputs)
    options = nccl_verify.Options(
        inventory=inventory,
        collectives=nccl_verify.parse_collectives(collective),
        nodes=nodes,
        tiers=tiers,
        compare=comparing,
        catalog_files=list(catalog or []),
        output=output,
        from_results=from_results,
        title=title,
        args=args,
        nvlink=nccl_verify.parse_nvlink(nvlink),
        limit=fabric_apply.parse_limit(limit),
    )

    def progress(line: str) -> None:
        stderr.print(line, markup=False, highlight=False)

    result, directory = nccl_verify.execute(options, progress)
    if as_json:
        _print_json(result)
    else:
        verify_report.render(result, stdout)
        # No busbw.png without matplotlib (verify said how to get it): name only what was written.
        drawn = f", plot: {directory / 'busbw.png'}" if (directory / "busbw.png").is_file() else ""
        stdout.print(f"report: {directory / verify_report.REPORT_FILE}{drawn}", markup=False, highlight=False)
    others = sorted(
        {run["status"] for entry in result["tiers"].values() for run in entry["runs"]} & {"warn", "unjudged"}
    )
    code = verify_report.exit_code(result)
    if code == 0 and others:
        counts = ", ".join(
            f"{sum(run['status'] == status for e in result['tiers'].values() for run in e['runs'])} {status}"
            for status in others
        )
        stderr.print(f"[yellow]warning[/yellow]: {counts}: not a clean pass (see the reasons)", highlight=False)
    raise typer.Exit(code)


SettingsOption = Annotated[
    str,
    typer.Option(
        "--settings",
        help="Ansible settings: tuned (pipelining, SSH multiplexing, forks sized to the run, fact cache) or "
        "stock (Ansible's defaults). docs/apply.md says why.",
    ),
]
RunTierOption = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional here on Python 3.11
    typer.Option(help="best or standard for every host; default: host var gpufabric_tier, else best."),
]
LimitOption = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--limit", "-l", help="Ansible host pattern: only these hosts of the inventory."),
]
ArtifactsOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        help="New or empty directory for ansible-runner's artifacts (default <state>/runs/<cmd>-<UTC time>, <state> "
        "$XDG_STATE_HOME/gpufabric, /var/lib/gpufabric for root, else ~/.local/state/gpufabric)."
    ),
]
Watch = Optional[Callable[[playbook_runs.Tally], None]]  # noqa: UP045

# The ansible-playbook options passed through unchanged (gpufabric.playbook_args); their own help panel.
PANEL = "ansible-playbook options (passed through)"
ExtraVarsOption = Annotated[
    ListOption,
    typer.Option(
        "-e",
        "--extra-vars",
        help="KEY=VALUE, YAML/JSON or @FILE, repeatable; as ansible-playbook reads it (gpufabric's own options win).",
        rich_help_panel=PANEL,
    ),
]
RemoteUserOption = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("-u", "--user", help="Connect as this user.", rich_help_panel=PANEL),
]
PrivateKeyOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--private-key", "--key-file", help="SSH private key file.", rich_help_panel=PANEL),
]
AskBecomeOption = Annotated[
    bool,
    typer.Option("-K", "--ask-become-pass", help="Ask for the become (sudo) password once.", rich_help_panel=PANEL),
]
BecomeFileOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--become-password-file", help="Become password file.", rich_help_panel=PANEL),
]
VaultIdOption = Annotated[
    ListOption,
    typer.Option("--vault-id", help="Vault identity LABEL@FILE or FILE (repeatable).", rich_help_panel=PANEL),
]
VaultFileOption = Annotated[
    Optional[list[Path]],  # noqa: UP045
    typer.Option("--vault-password-file", help="Vault password file (repeatable).", rich_help_panel=PANEL),
]
VerboseOption = Annotated[
    int,
    typer.Option(
        "-v",
        "--verbose",
        count=True,
        help="ansible-playbook verbosity (-vvv), in the run's stdout artifact.",
        rich_help_panel=PANEL,
    ),
]
TagsOption = Annotated[
    ListOption, typer.Option("-t", "--tags", help="Only tasks and roles tagged so.", rich_help_panel=PANEL)
]
SkipTagsOption = Annotated[
    ListOption, typer.Option("--skip-tags", help="Skip tasks and roles tagged so.", rich_help_panel=PANEL)
]
ShowSettingsOption = Annotated[
    bool,
    typer.Option(
        "--show-settings",
        help="Print the Ansible configuration file and settings a run would use, and who set each (with --json, "
        "as JSON); run nothing.",
    ),
]


def _ansible_args(
    extra_vars: list[str] | None,
    user: str | None,
    private_key: Path | None,
    ask_become_pass: bool,
    become_password_file: Path | None,
    vault_id: list[str] | None,
    vault_password_file: list[Path] | None,
    verbose: int,
    tags: list[str] | None = None,
    skip_tags: list[str] | None = None,
) -> playbook_args.PlaybookArgs:
    return playbook_args.build(
        extra_vars=extra_vars,
        user=user,
        private_key=private_key,
        ask_become_pass=ask_become_pass,
        become_password_file=become_password_file,
        vault_ids=vault_id,
        vault_password_files=vault_password_file,
        verbosity=verbose,
        tags=tags,
        skip_tags=skip_tags,
    )


def _show_settings(settings: str, hosts: int, *, always: dict[str, str] | None = None, as_json: bool = False) -> None:
    """--show-settings: print (with --json, show_settings.describe as JSON) and exit 0."""
    described = show_settings.describe(settings, hosts, always=always)
    if as_json:
        _print_json(described)
    else:
        show_settings.render(described, stdout)
    raise typer.Exit(EXIT_OK)


@contextmanager
def _run_display() -> Iterator[tuple[playbook_runs.Progress, Watch]]:
    """Progress of a playbook run: a live status line in a terminal, plain lines (one per task) in a log."""

    def plain(line: str) -> None:
        stderr.print(line, markup=False, highlight=False)

    if not (sys.stdout.isatty() and stderr.is_terminal):
        yield plain, None
        return
    with Live(Text("starting ansible-playbook"), console=stderr, transient=True, refresh_per_second=8) as live:

        def watch(tally: playbook_runs.Tally) -> None:
            live.update(Text(tally.line()))

        yield plain, watch


@app.command("apply")
def apply_command(
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Any inventory ansible-inventory reads.")],
    tier: RunTierOption = None,
    limit: LimitOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Change nothing: run in check and diff mode and show what would change.")
    ] = False,
    serial: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Hosts per batch: N (1 to 100,000) or P% (1%-100%); default all hosts at once."),
    ] = None,
    max_fail: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--max-fail", help="Stop the play when more than P% (0%-100%) of a batch failed; default never."),
    ] = None,
    artifacts: ArtifactsOption = None,
    catalog: CatalogOption = None,
    settings: SettingsOption = playbook_settings.TUNED,
    show: ShowSettingsOption = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the result as JSON on stdout (the table goes to stderr); with --show-settings, the settings.",
        ),
    ] = False,
    extra_vars: ExtraVarsOption = None,
    user: RemoteUserOption = None,
    private_key: PrivateKeyOption = None,
    ask_become_pass: AskBecomeOption = False,
    become_password_file: BecomeFileOption = None,
    vault_id: VaultIdOption = None,
    vault_password_file: VaultFileOption = None,
    verbose: VerboseOption = 0,
    tags: TagsOption = None,
    skip_tags: SkipTagsOption = None,
) -> None:
    """Run playbooks/site.yml: configure every host as its catalog profile says, then show each host.

    Exit 0 when every host finished (or was excluded on purpose: gpufabric_managed false), 1 when a host
    failed, was unreachable, never got to run or is not managed (no catalog profile), or on bad input.
    """
    if show:
        hosts = len(playbook_runs.inventory_hosts(inventory, fabric_apply.parse_limit(limit)))
        _show_settings(settings, hosts, as_json=as_json)
    options = fabric_apply.ApplyOptions(
        inventory=inventory,
        tier=tier,
        limit=limit,
        check=check,
        serial=serial,
        max_fail=max_fail,
        catalog_files=list(catalog or []),
        artifacts=artifacts,
        settings=settings,
        args=_ansible_args(
            extra_vars,
            user,
            private_key,
            ask_become_pass,
            become_password_file,
            vault_id,
            vault_password_file,
            verbose,
            tags,
            skip_tags,
        ),
    )
    with _run_display() as (progress, watch):
        result = fabric_apply.execute(options, progress, watch=watch)
    fabric_apply.render(result, stderr if as_json else stdout)
    if as_json:
        _print_json(fabric_apply.as_dict(result))
    raise typer.Exit(result.exit_code)


@app.command("drift")
def drift_command(
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Any inventory ansible-inventory reads.")],
    tier: RunTierOption = None,
    limit: LimitOption = None,
    remediate: Annotated[
        bool,
        typer.Option(
            "--remediate",
            help="Apply site.yml to the drifted hosts only, then check again; the reports show that check.",
        ),
    ] = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the JSON report on stdout (the tables go to stderr); with --show-settings, the settings.",
        ),
    ] = False,
    json_file: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--json-file", help="Write the JSON report here (atomically)."),
    ] = None,
    junit_path: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--junit", help="Write a JUnit XML report here: a test case per host and role."),
    ] = None,
    prom_path: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--prom", help="Write a Prometheus textfile-collector file here."),
    ] = None,
    diffs: Annotated[bool, typer.Option("--diff", help="Show the diff of every change that would be made.")] = False,
    fast: Annotated[
        bool,
        typer.Option(
            "--fast/--thorough",
            help="--fast (the default): compare each host with the record of its last apply, one task per host; "
            "a host without a full record is checked thoroughly. --thorough: run site.yml in check mode on every "
            "host (about 100 tasks each). docs/drift.md says what each sees.",
        ),
    ] = True,
    artifacts: ArtifactsOption = None,
    catalog: CatalogOption = None,
    settings: SettingsOption = playbook_settings.TUNED,
    show: ShowSettingsOption = False,
    extra_vars: ExtraVarsOption = None,
    user: RemoteUserOption = None,
    private_key: PrivateKeyOption = None,
    ask_become_pass: AskBecomeOption = False,
    become_password_file: BecomeFileOption = None,
    vault_id: VaultIdOption = None,
    vault_password_file: VaultFileOption = None,
    verbose: VerboseOption = 0,
    tags: TagsOption = None,
    skip_tags: SkipTagsOption = None,
) -> None:
    """Check every host against the record of its last apply (--thorough: site.yml in check mode) and report its drift.

    Exit 0 when every host is clean, 2 when one drifted (and every host was checked), 1 when a host
    failed, was unreachable or is not managed (no catalog profile, unless excluded on purpose with the
    host var gpufabric_managed: false) or the check broke, or on bad input (a bad option value, an unreadable
    inventory: before any run and any report). docs/drift.md has the reports' formats.
    """
    if show:
        hosts = len(playbook_runs.inventory_hosts(inventory, fabric_apply.parse_limit(limit)))
        _show_settings(settings, hosts, as_json=json_out)
    options = fabric_drift.DriftOptions(
        inventory=inventory,
        tier=tier,
        limit=limit,
        catalog_files=list(catalog or []),
        remediate=remediate,
        json_path=json_file,
        junit_path=junit_path,
        prom_path=prom_path,
        artifacts=artifacts,
        settings=settings,
        diffs=diffs,
        fast=fast,
        args=_ansible_args(
            extra_vars,
            user,
            private_key,
            ask_become_pass,
            become_password_file,
            vault_id,
            vault_password_file,
            verbose,
            tags,
            skip_tags,
        ),
    )
    with _run_display() as (progress, watch):
        outcome = fabric_drift.execute(options, progress, stderr if json_out else stdout, watch=watch)
    if json_out:
        from gpufabric import drift_formats  # prometheus_client, for this output only

        sys.stdout.write(drift_formats.to_json(outcome.final))
    raise typer.Exit(outcome.exit_code)


@app.command("health")
def health_command(
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Any inventory ansible-inventory reads.")],
    limit: LimitOption = None,
    previous: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--previous",
            help="An earlier `gpufabric health --json` report: the flap checks compare the port counters with it "
            "(without it they are unknown).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON on stdout (the table goes to stderr).")
    ] = False,
    quarantine: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--quarantine",
            help="Write the hosts that failed a check as the inventory group gpufabric_quarantine to this YAML file; "
            "kept in the inventory directory, apply and verify leave those hosts out.",
        ),
    ] = None,
    junit: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--junit", help="Write a JUnit XML report: a testsuite per host, a testcase per check."),
    ] = None,
    artifacts: ArtifactsOption = None,
    catalog: CatalogOption = None,
    user: RemoteUserOption = None,
    private_key: PrivateKeyOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Judge every host's health against its catalog profile (playbooks/health.yml, read-only), one verdict per check.

    Exit 0 when every host was judged and no check failed (checks that could not be judged are listed as
    unknown), 2 when a host failed a check (and every host was judged), 1 when a host could not be judged
    (failed, unreachable, no catalog profile) or on bad input. docs/health.md says what each check reads.
    """
    options = fleet_health.HealthOptions(
        inventory=inventory,
        limit=limit,
        catalog_files=list(catalog or []),
        previous=previous,
        artifacts=artifacts,
        args=_ansible_args(None, user, private_key, False, None, None, None, verbose),
        quarantine=quarantine,
        junit=junit,
    )
    with _run_display() as (progress, watch):
        result = fleet_health.execute(options, progress, watch=watch)
    fleet_health.render(result, stderr if as_json else stdout)
    if as_json:
        _print_json(result.as_dict())
    raise typer.Exit(result.exit_code)


LabNameOption = Annotated[str, typer.Option("--name", help="The lab's name (its containers are NAME-1..NAME-N).")]
LabDirOption = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional here on Python 3.11
    typer.Option("--dir", help="The lab's directory (default $XDG_STATE_HOME/gpufabric/lab/NAME)."),
]


def _lab_progress(line: str) -> None:
    stderr.print(line, markup=False, highlight=False)


@lab_app.command("up")
def lab_up(
    profile: Annotated[
        str, typer.Option(help="Catalog profile the hosts pretend to be (`gpufabric catalog list`).")
    ] = local_lab.DEFAULT_PROFILE,
    nodes: Annotated[int, typer.Option(help="Number of hosts, 1..64.")] = local_lab.DEFAULT_NODES,
    name: LabNameOption = local_lab.DEFAULT_NAME,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help=f"Image with systemd and sshd (default {local_lab.LAB_IMAGE}, built when missing)."),
    ] = None,
    directory: LabDirOption = None,
) -> None:
    """Start the lab (or bring an existing one back up) and write its inventory."""
    local_lab.up(name, profile, nodes, image, directory, progress=_lab_progress)


@lab_app.command("down")
def lab_down(name: LabNameOption = local_lab.DEFAULT_NAME, directory: LabDirOption = None) -> None:
    """Remove the lab's containers and directory (nothing to remove is fine)."""
    local_lab.down(name, directory, progress=_lab_progress)


@lab_app.command("status")
def lab_status(
    name: LabNameOption = local_lab.DEFAULT_NAME, directory: LabDirOption = None, as_json: JsonOption = False
) -> None:
    """Show each lab host's container state and SSH reachability; exit 1 when a host is not running."""
    lab = local_lab.status(local_lab.load(name, directory))
    shown = local_lab.as_dict(lab)
    if as_json:
        _print_json(shown)
    else:
        local_lab.render(lab, stdout)
    raise typer.Exit(shown["exit_code"])


@app.command()
def demo(
    profile: Annotated[
        str, typer.Option(help="Catalog profile the lab hosts pretend to be (`gpufabric catalog list`).")
    ] = local_lab.DEFAULT_PROFILE,
    nodes: Annotated[int, typer.Option(help="Number of lab hosts, 1..64.")] = local_lab.DEFAULT_NODES,
    name: LabNameOption = local_lab.DEFAULT_NAME,
    directory: LabDirOption = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the lab up at the end (`gpufabric lab down` later).")
    ] = False,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "-o", "--output", help="Directory for the reports and artifacts (default <state>/runs/demo-<UTC time>)."
        ),
    ] = None,
) -> None:
    """The whole life of a fleet on a local lab: up, plan, apply, drift, tamper, drift --remediate, down.

    Needs nothing but this checkout, root and Debian's podman (installed when missing).
    Exit 0 when every step did what it should, 1 otherwise.
    """
    options = fleet_demo.Options(profile=profile, nodes=nodes, name=name, directory=directory, keep=keep, output=output)
    raise typer.Exit(fleet_demo.run(options, stdout, _lab_progress))


@app.command()
def bake(
    profile: Annotated[str, typer.Option(help="Catalog profile to bake (`gpufabric catalog list`).")],
    tag: Annotated[str, typer.Option(help="Name of the image to make, e.g. localhost/gpu-node:2026-11.")],
    image: Annotated[
        str, typer.Option(help="Base image with systemd (the lab image, with sshd, is built when missing).")
    ] = local_lab.LAB_IMAGE,
    tier: RunTierOption = None,
    artifacts: ArtifactsOption = None,
    catalog: CatalogOption = None,
    show: ShowSettingsOption = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the result as JSON on stdout (progress stays on stderr); with --show-settings, the settings.",
        ),
    ] = False,
    extra_vars: ExtraVarsOption = None,
    vault_id: VaultIdOption = None,
    vault_password_file: VaultFileOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Bake a golden image locally: playbooks/bake.yml in a podman container, committed as --tag.

    The same playbook Packer's Ansible provisioner runs (examples/packer). Exit 0 when the image was
    made, 1 when bake.yml failed (no image) or on a usage error.
    """
    if show:
        _show_settings(playbook_settings.TUNED, 1, as_json=as_json)
    options = fleet_bake.Options(
        profile=profile,
        tag=tag,
        image=image,
        tier=tier,
        catalog_files=list(catalog or []),
        args=_ansible_args(extra_vars, None, None, False, None, vault_id, vault_password_file, verbose),
        artifacts=artifacts,
    )
    result = fleet_bake.bake(options, _lab_progress)
    if as_json:
        _print_json(fleet_bake.as_dict(options, result))
    raise typer.Exit(0 if result.committed else 1)


def main() -> None:
    """Entry point: the exit codes of errors.py. Bad input ends with one line on stderr, no traceback; a usage
    error (an unknown option, a bad option value) with click's message. Both exit 1, never drift's 2."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # click's usage errors (typer carries its own click)
        # Imported for a usage error only: its rich markdown and traceback modules cost about a third of a
        # second that every run would otherwise pay.
        from typer import rich_utils as typer_rich_utils

        typer_rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # the help, which rich_format_error leaves to it
        sys.exit(EXIT_FAILED)
    except typer.Abort:
        stderr.print("aborted")
        sys.exit(EXIT_FAILED)
    except UserError as exc:
        # Messages quote user input (file names, keys, instance names): never read them as markup.
        stderr.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    # Without standalone mode a command's typer.Exit comes back as its code, and a command that returns, as None.
    sys.exit(code if isinstance(code, int) else EXIT_OK)
