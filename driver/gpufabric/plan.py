# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan`: what each host of an inventory gets, as JSON or as tables."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import catalog as fabric_catalog
from gpufabric.collection import module_utils, plugin_utils
from gpufabric.errors import UserError
from gpufabric.inventory import as_play_sees, host_vars


def fleet_plan(
    inventory: str, tier: str | None, catalog_files: list[Path] | None, probe: bool = False
) -> dict[str, Any]:
    """{"hosts": {name: plan}, "nvlink": domains} for every host of the inventory, sorted by name.

    With ``probe``, each host's hardware is read and compared with its profile
    (a "probe" section per host), and profile-less bare metal gets a profile
    inferred from its hardware.

    "nvlink" groups the hosts of rack-scale NVLink profiles into their NVLink domains, with findings
    (plugin_utils/nvlink_domains.py).

    Each host's "supply" section holds the keys, repositories and packages its roles will configure, for the OS
    the probe read or the host variable gpufabric_os names (supply.py).
    """
    planner = plugin_utils("fabric_plan")
    if tier is not None:
        try:
            planner.check_tier(tier, "--tier")
        except planner.PlanError as exc:
            raise UserError(str(exc)) from None
    catalog = fabric_catalog.load(catalog_files)
    raw_vars = host_vars(inventory)
    inventory_vars = {name: as_play_sees(variables) for name, variables in raw_vars.items()}
    hosts = host_plans(inventory_vars, catalog, tier)
    answers = _probe().gather(inventory) if probe else {}
    memo: dict[str, dict[str, Any]] = {}  # hosts alike share their roles' supply (supply.host_supply)
    for name, host in hosts.items():
        if probe:
            _probe().probe_host(host, inventory_vars[name], answers.get(name), catalog)
        host["supply"] = _supply(name, host, raw_vars[name], answers.get(name) if probe else None, memo)
    return {"hosts": hosts, "nvlink": plugin_utils("nvlink_domains").group(hosts)}


def host_plans(inventory_vars: dict[str, dict[str, Any]], catalog: Any, tier: str | None = None) -> dict[str, Any]:
    """Each host's plan (fabric_plan.plan_host) from its variables as a play sees them, sorted by name; a bad host var
    is one UserError naming the host."""
    planner = plugin_utils("fabric_plan")
    roles_present = planner.available_roles()
    hosts: dict[str, Any] = {}
    for name, variables in sorted(inventory_vars.items()):
        try:
            hosts[name] = planner.plan_host(variables, catalog, tier=tier, roles_present=roles_present)
        except planner.PlanError as exc:  # a host var of the wrong type, or an unknown tier
            raise UserError(f"host {name}: {exc}") from None
    return hosts


def has_problems(plan: dict[str, Any], probed: bool) -> bool:
    """Whether `gpufabric plan` exits 1: an NVLink domain finding of severity error, or, with --probe, what
    probe.has_problems counts (a host that did not answer, an error finding, a host not managed)."""
    return plugin_utils("nvlink_domains").has_errors(plan["nvlink"]) or (probed and _probe().has_problems(plan))


def _probe() -> ModuleType:
    """gpufabric.probe, imported on first use: ansible-runner costs startup that only --probe needs."""
    from gpufabric import probe

    return probe


def _supply(
    name: str,
    host: dict[str, Any],
    raw_vars: dict[str, Any],
    answer: dict[str, Any] | None,
    memo: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The host's supply chain for the OS its probe read (when it answered) or its gpufabric_os names."""
    # Imported here: ansible's templar and data loader cost about a second of startup that every other command,
    # and every plan refused on its input, would otherwise pay.
    from gpufabric import supply

    probed = answer["facts"] if answer and answer.get("facts") else None
    try:
        facts, os_name, os_from = supply.host_facts(raw_vars, probed, host.get("image"))
    except UserError as exc:
        raise UserError(f"host {name}: {exc}") from None
    if facts is None:
        if answer is not None and probed is None:
            os_from = f"the probe did not read the host ({answer.get('error')}); {os_from}"
        return supply.unknown_os(os_from)
    if probed is None and host.get("architecture"):
        # Without a probe, the host is what its profile says: a Grace (arm64) host takes the sbsa repositories.
        facts["architecture"] = plugin_utils("fabric_catalog").ANSIBLE_ARCHITECTURE[host["architecture"]]
    return supply.host_supply(host, raw_vars, facts, os_name, os_from, memo)


def render(plan: dict[str, Any], console: Console) -> None:
    """A table of hosts, then the environment once per (profile, tier)."""
    table = Table(title="gpufabric plan", show_lines=False)
    for column in ("host", "profile", "fabric", "tier", "nccl"):
        table.add_column(column, no_wrap=True)
    table.add_column("roles (* = not written yet)")
    probed = any("probe" in host for host in plan["hosts"].values())
    if probed:
        table.add_column("hardware")
    # One environment per (profile, tier), or per (profile, tier, hosts) where the hosts' NIC names differ (--probe).
    shared_env: dict[tuple[str, str, str], dict[str, str]] = {}
    env_hosts: dict[tuple[str, str, str], list[str]] = {}
    for name, host in plan["hosts"].items():
        roles = " ".join(f"{role}*" if role in host["roles_unavailable"] else role for role in host["roles"])
        unmanaged = host.get("unmanaged")
        style = "yellow" if unmanaged else None
        # apply and drift leave such a host alone: its roles column says so instead of listing roles.
        roles = f"NOT MANAGED ({unmanaged['code']})" if unmanaged else roles or "-"
        row = [name, host["profile"], host["fabric"], host["tier"], _nccl_cell(host), roles]
        if probed:
            row.append(_probe_cell(host.get("probe")))
        table.add_row(*(Text(cell) for cell in row), style=style)  # Text: inventory data is never markup
        if host["env"]:
            env_key = (host["profile"], host["tier"], json.dumps(host["env"], sort_keys=True))
            shared_env[env_key] = host["env"]
            env_hosts.setdefault(env_key, []).append(name)
    console.print(table)
    _render_images(plan, console)
    _render_nvlink(plan, console)
    _render_sriov(plan, console)
    _render_storage(plan, console)
    _render_supply(plan, console)
    variants = Counter((profile, tier) for profile, tier, _env in shared_env)
    for (profile, tier, shape), env in sorted(shared_env.items()):
        hosts = env_hosts[(profile, tier, shape)]
        which = f" ({', '.join(hosts)})" if variants[(profile, tier)] > 1 else ""
        console.print(f"\n[bold]{escape(profile)}[/bold] tier [bold]{escape(tier)}[/bold] environment{escape(which)}:")
        for key, value in env.items():
            console.print(f"  {key}={value}", markup=False, highlight=False)
    for name, host in plan["hosts"].items():
        for warning in host["warnings"]:
            console.print(f"[yellow]warning[/yellow]: {escape(name)}: {escape(warning)}", highlight=False)
    if probed:
        _render_findings(plan, console)


def _nccl_cell(host: dict[str, Any]) -> str:
    """The NCCL package version the nccl role installs and holds (adopt mode: the image's, at the minimum or newer)."""
    pin = host.get("nccl")
    if not pin or "nccl" not in host["roles"]:
        return "-"
    adopting = "nccl" in ((host.get("image") or {}).get("adopt") or [])
    return f"image's >= {pin['minimum']} (else {pin['version']})" if adopting else pin["version"]


def _render_images(plan: dict[str, Any], console: Console) -> None:
    """Per catalog image the hosts boot (gpufabric_image): the hosts, and which host-stack roles adopt its stack."""
    hosts_by_image: dict[str, list[str]] = {}
    images: dict[str, dict[str, Any]] = {}
    for name, host in plan["hosts"].items():
        if host.get("image"):
            images[host["image"]["name"]] = host["image"]
            hosts_by_image.setdefault(host["image"]["name"], []).append(name)
    for image_name, names in sorted(hosts_by_image.items()):
        image = images[image_name]
        console.print(
            f"image {image_name} ({image['os']}) on {', '.join(names)}: "
            f"roles that adopt its stack: {', '.join(image['adopt']) or 'none'}",
            markup=False,
            highlight=False,
        )


def _render_nvlink(plan: dict[str, Any], console: Console) -> None:
    """The NVLink domains of rack-scale hosts (NVL72): members and GPUs per domain, then every domain finding."""
    nvlink = plan.get("nvlink") or {"domains": {}, "findings": []}
    if nvlink["domains"]:
        table = Table(title="NVLink domains")
        for column in ("domain", "profile", "hosts", "GPUs", "members"):
            table.add_column(column, no_wrap=column != "members")
        for domain, entry in nvlink["domains"].items():
            hosts = f"{len(entry['members'])} of {entry['hosts_per_domain']}"
            row = (domain, ", ".join(entry["profiles"]), hosts, str(entry["gpus"]), " ".join(entry["members"]))
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    findings = [*nvlink["findings"], *(f for entry in nvlink["domains"].values() for f in entry["findings"])]
    colours = {"error": "red", "warning": "yellow"}
    for finding in findings:
        colour = colours.get(finding["severity"], "dim")
        console.print(f"[{colour}]{finding['severity']}[/{colour}]: {escape(finding['message'])}", highlight=False)


def sriov_rows(plan: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per host whose plan carves SR-IOV virtual functions: the VF layout the sriov role creates."""
    rows: list[tuple[str, ...]] = []
    for name, host in plan["hosts"].items():
        layout = host.get("sriov")
        if not layout:
            continue
        named = layout["physical_functions"]
        # Profiles that name no PFs: the role selects the GPU-network ConnectX PFs by PCI id (at boot in a bake).
        pfs = ", ".join(named) if named else f"{layout['nics']} GPU-network NICs (by PCI id)"
        rows.append(
            (
                name,
                pfs,
                str(layout["vfs_per_nic"]),
                str(layout["vfs"]),
                layout["link_type"],
                layout["address_scheme"],
            )
        )
    return rows


def _render_rows(
    console: Console, title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], no_wrap: set[str]
) -> None:
    """A table of text rows (nothing when there are none); the columns in ``no_wrap`` never wrap."""
    if not rows:
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, no_wrap=column in no_wrap)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


def _render_sriov(plan: dict[str, Any], console: Console) -> None:
    columns = ("host", "physical functions", "VFs per PF", "total VFs", "link type", "address scheme")
    _render_rows(console, "SR-IOV virtual functions", columns, sriov_rows(plan), set(columns) - {"physical functions"})


def storage_rows(plan: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per host whose profile declares storage NICs: the NICs, whether the tier runs gds (GPUDirect
    Storage), and its mounts."""
    rows: list[tuple[str, ...]] = []
    for name, host in plan["hosts"].items():
        storage = host.get("storage")
        if not storage:
            continue
        nics = storage["nics"]
        speed = f" x {nics['speed_gbit_s']:g} Gb/s" if "speed_gbit_s" in nics else ""
        shared = " (shared with the GPU network)" if nics.get("shared_with") == "gpu" else ""
        given = [mount for mount in storage["mounts"] if isinstance(mount, dict)]
        mounts = ", ".join(f"{mount.get('type', '?')} {mount.get('path', '?')}" for mount in given)
        rows.append(
            (
                name,
                f"{nics['count']} {nics['kind']}{speed}{shared}",
                "yes" if storage["gds"] else "no (gds not in the tier)",
                mounts or "-",
            )
        )
    return rows


def _render_storage(plan: dict[str, Any], console: Console) -> None:
    columns = ("host", "storage NICs", "GDS", "GDS mounts")
    _render_rows(console, "storage NICs and GPUDirect Storage", columns, storage_rows(plan), {"host"})


def _render_supply(plan: dict[str, Any], console: Console) -> None:
    """Per group of hosts with the same supply chain: its repositories (with the keys that sign them) and packages."""
    groups: dict[str, list[str]] = {}
    for name, host in plan["hosts"].items():
        groups.setdefault(json.dumps(host["supply"], sort_keys=True), []).append(name)
    for key, names in groups.items():
        chain = json.loads(key)
        hosts = ", ".join(names)
        if chain["os"] is None:
            console.print(f"\n[bold]supply chain[/bold] of {escape(hosts)}: not computed ({escape(chain['note'])})")
            continue
        title = f"supply chain of {hosts} ({chain['os']}, from {chain['os_from']})"
        repositories = Table(title=f"{title}: repositories", title_justify="left")
        for column in ("role", "repository", "url", "suite", "signed by"):
            repositories.add_column(column, no_wrap=column != "signed by")
        packages = Table(title=f"{title}: packages", title_justify="left")
        for column in ("role", "package", "version", "repository", "hold"):
            packages.add_column(column, no_wrap=True)
        for role, steps in chain["roles"].items():
            for step in steps:
                keys = {key["repository"]: key for key in step["keys"]}
                for repository in step["repositories"]:
                    suite = " ".join(repository["suites"] + repository["components"])
                    row = (role, repository["name"], " ".join(repository["uris"]), suite, _signer(keys, repository))
                    repositories.add_row(*(Text(cell) for cell in row))
                for pin in step["packages"]:
                    row = (
                        role,
                        pin["name"],
                        pin["version"] or "any",
                        pin["repository"] or "host's sources",
                        "held" if pin["hold"] else "-",
                    )
                    packages.add_row(*(Text(cell) for cell in row))
        fetched = Table(title=f"{title}: fetched outside package repositories", title_justify="left")
        for column in ("role", "kind", "what", "source", "checksum"):
            fetched.add_column(column, no_wrap=column != "source")
        for role, artifacts in chain.get("artifacts", {}).items():
            for artifact in artifacts:
                row = (role, artifact["kind"], artifact["name"], artifact["source"], artifact["checksum"])
                fetched.add_row(*(Text(cell) for cell in row))
        console.print()
        if repositories.row_count:
            console.print(repositories)
        console.print(packages if packages.row_count else f"{escape(title)}: no packages")
        if fetched.row_count:
            console.print(fetched)
        for role, pins in chain.get("apt_pins", {}).items():
            for pin in pins:
                rule = " ".join(line for line in pin["content"].splitlines() if not line.startswith("#"))
                console.print(f"  {role}: APT preferences {pin['path']}: {rule}", markup=False, highlight=False)
        preferences_path = module_utils("supply_chain").preferences_path
        for role, steps in chain["roles"].items():
            released = [preferences_path(name) for step in steps for name in step.get("release", [])]
            if released:
                console.print(
                    f"  {role}: removes {', '.join(released)} where present (the other provision mode's record) "
                    "and releases the holds only it explains",
                    markup=False,
                    highlight=False,
                )
        for role, adoption in chain.get("adopt", {}).items():
            console.print(f"  {role}: {adoption_line(adoption)}", markup=False, highlight=False)
        for error in chain["errors"]:
            console.print(f"  [red]cannot plan[/red]: {escape(error)}", highlight=False)
        for warning in chain.get("warnings", []):
            console.print(f"  [yellow]warning[/yellow]: {escape(warning)}", highlight=False)
        if chain["note"]:
            console.print(f"  {chain['note']}", markup=False, highlight=False)


def adoption_line(adoption: dict[str, Any]) -> str:
    """What a role in adopt mode found on the host's image and what it does about it, in one line."""
    if not adoption["known"]:
        return "adopts what the image ships; its packages are read on the host (run with --probe to see them)"
    found = ", ".join(f"{name} {version}" for name, version in adoption["found"].items())
    missing = ", ".join(adoption["missing"])
    if not found:
        return f"adopts, but the image ships none of it: installs {missing or 'nothing'}"
    lacking = f"; installs what the image lacks: {missing}" if missing else "; installs nothing"
    return f"adopts the image's {found} (held at these versions){lacking}"


def _signer(keys: dict[str, Any], repository: dict[str, Any]) -> str:
    """The key a repository must be signed by: its pinned fingerprints (or checksum) and where the key comes from."""
    key = keys.get(repository["name"])
    if key is None:
        return str(repository["signed_by"])
    pins = ", ".join(key["fingerprints"]) or key["checksum"] or "no pin"
    return f"{pins} ({key['src'] or key['url']})"


def _probe_cell(probe: dict[str, Any] | None) -> str:
    if probe is None:
        return "-"
    if not probe["reachable"]:
        return "unreachable"
    counts = {severity: 0 for severity in ("error", "warning", "info")}
    for finding in probe["findings"]:
        counts[finding["severity"]] += 1
    if not probe["findings"]:
        return "matches profile"
    plural = {"error": "errors", "warning": "warnings", "info": "info"}
    return ", ".join(
        f"{count} {severity if count == 1 else plural[severity]}" for severity, count in counts.items() if count
    )


def _render_findings(plan: dict[str, Any], console: Console) -> None:
    table = Table(title="hardware findings")
    for column in ("host", "severity", "check", "finding"):
        table.add_column(column, no_wrap=column != "finding")
    colours = {"error": "red", "warning": "yellow", "info": "dim"}
    for name, host in plan["hosts"].items():
        probe = host.get("probe")
        if probe and not probe["reachable"]:
            table.add_row(*(Text(cell) for cell in (name, "error", "reachable", probe["error"])), style="red")
        for finding in probe["findings"] if probe else []:
            cells = (name, finding["severity"], finding["check"], finding["message"])
            table.add_row(*(Text(cell) for cell in cells), style=colours[finding["severity"]])
    if table.row_count:
        console.print(table)
    else:
        console.print("\nhardware findings: none; every probed host matches its profile")


def plan_json(plan: dict[str, Any]) -> str:
    """``json.dumps(plan, indent=2)``, the same text, faster on a large fleet: Python's JSON encoder with an indent is
    its slow pure-Python one, and hosts alike have the same values (the supply section is even the same object,
    supply.host_supply's memo). Each host's value is indented once per distinct compact encoding (the C encoder's)."""
    indented: dict[str, str] = {}

    def field_text(value: Any) -> str:
        # A host's field sits at depth 3 ({"hosts": {name: {field: ...}}}): each line after the first gets 6 spaces.
        # JSON text holds no raw newline inside a string, so its lines are the encoder's own.
        compact = json.dumps(value)
        if compact not in indented:
            indented[compact] = json.dumps(value, indent=2).replace("\n", "\n" + " " * 6)
        return indented[compact]

    def hosts_text(hosts: dict[str, Any]) -> str:
        entries = []
        for name, host in hosts.items():
            fields = [f"      {json.dumps(field)}: {field_text(value)}" for field, value in host.items()]
            entries.append(f"    {json.dumps(name)}: " + ("{\n" + ",\n".join(fields) + "\n    }" if fields else "{}"))
        return "{\n" + ",\n".join(entries) + "\n  }" if entries else "{}"

    parts = [
        f"  {json.dumps(key)}: "
        + (hosts_text(value) if key == "hosts" else json.dumps(value, indent=2).replace("\n", "\n  "))
        for key, value in plan.items()
    ]
    return "{\n" + ",\n".join(parts) + "\n}" if parts else "{}"
