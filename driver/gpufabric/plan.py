# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan`: what each host of an inventory gets, as JSON or as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gpufabric import catalog as fabric_catalog
from gpufabric.collection import module_utils
from gpufabric.errors import UserError
from gpufabric.inventory import host_vars


def fleet_plan(inventory: str, tier: str | None, catalog_files: list[Path] | None) -> dict[str, Any]:
    """{"hosts": {name: plan}} for every host of the inventory, sorted by name."""
    planner = module_utils("fabric_plan")
    if tier is not None:
        try:
            planner.check_tier(tier, "--tier")
        except planner.PlanError as exc:
            raise UserError(str(exc)) from None
    catalog = fabric_catalog.load(catalog_files)
    roles_present = planner.available_roles()
    hosts: dict[str, Any] = {}
    for name, variables in sorted(host_vars(inventory).items()):
        try:
            hosts[name] = planner.plan_host(variables, catalog, tier=tier, roles_present=roles_present)
        except planner.PlanError as exc:  # only a host's own gpufabric_tier can be wrong here
            raise UserError(f"host {name}: {exc}") from None
    return {"hosts": hosts}


def render(plan: dict[str, Any], console: Console) -> None:
    """A table of hosts, then the environment once per (profile, tier)."""
    table = Table(title="gpufabric plan", show_lines=False)
    for column in ("host", "profile", "fabric", "tier"):
        table.add_column(column, no_wrap=True)
    table.add_column("roles (* = not written yet)")
    shared_env: dict[tuple[str, str], dict[str, str]] = {}
    for name, host in plan["hosts"].items():
        roles = " ".join(f"{role}*" if role in host["roles_unavailable"] else role for role in host["roles"])
        style = "yellow" if host["profile"] == "unknown" else None
        table.add_row(name, host["profile"], host["fabric"], host["tier"], roles or "-", style=style)
        if host["env"]:
            shared_env[(host["profile"], host["tier"])] = host["env"]
    console.print(table)
    for (profile, tier), env in sorted(shared_env.items()):
        console.print(f"\n[bold]{profile}[/bold] tier [bold]{tier}[/bold] environment:")
        for key, value in env.items():
            console.print(f"  {key}={value}", markup=False, highlight=False)
    for name, host in plan["hosts"].items():
        for warning in host["warnings"]:
            console.print(f"[yellow]warning[/yellow]: {name}: {warning}", highlight=False)
