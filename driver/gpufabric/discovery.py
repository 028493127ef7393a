# SPDX-License-Identifier: Apache-2.0
"""`gpufabric inventory build`: list a fleet from a cloud API and write an Ansible inventory.

The sources and the builder live in the collection (plugins/plugin_utils/fleet_*),
shared with the gpufabric.cluster.gpu_fleet inventory plugin; this module maps
command-line options to a source and writes the result in one step, so a failed
discovery leaves no partial file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from gpufabric import catalog as fabric_catalog
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

# Command-line flag -> source constructor argument, per source.
OPTION_NAMES = {
    "aws": {"--region": "regions", "--endpoint-url": "endpoint_url", "--profile": "profile"},
    "gcp": {"--project": "projects", "--zone": "zones", "--endpoint-url": "endpoint"},
    "azure": {"--subscription": "subscription_id", "--resource-group": "resource_groups", "--endpoint-url": "endpoint"},
    "nebius": {"--parent-id": "parent_ids", "--endpoint-url": "endpoint"},
    "oci": {"--compartment": "compartment_id", "--region": "regions", "--endpoint-url": "endpoint"},
    "static": {"--file": "path"},
}

# One API call's budget (fleet_base.CALL_TIMEOUT_S, CALL_RETRIES), set for every cloud at once.
TIMEOUT_ENV = "GPUFABRIC_CLOUD_TIMEOUT"
RETRIES_ENV = "GPUFABRIC_CLOUD_RETRIES"


def _whole_number(variable: str, accepted: tuple[int, int], default: float, unit: str) -> int | None:
    """$variable as a whole number in ``accepted``, None when unset; anything else is one error naming it."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    low, high = accepted
    if not re.fullmatch(r"[0-9]{1,6}", text) or not low <= int(text) <= high:
        accepted_text = f"{unit} from {low} to {high} (default {default:g})"
        raise UserError(f"{variable}={text!r} (environment): not accepted; accepted: {accepted_text}")
    return int(text)


def call_budget(source: str) -> dict[str, Any]:
    """The source's SDK timeout and retry arguments from $GPUFABRIC_CLOUD_TIMEOUT and $GPUFABRIC_CLOUD_RETRIES."""
    fleet_base, fleet_sources = plugin_utils("fleet_base"), plugin_utils("fleet_sources")
    timeout_s = _whole_number(TIMEOUT_ENV, fleet_sources.TIMEOUT_RANGE_S, fleet_base.CALL_TIMEOUT_S, "whole seconds")
    retries = _whole_number(RETRIES_ENV, fleet_sources.RETRIES_RANGE, fleet_base.CALL_RETRIES, "whole numbers")
    return dict(
        fleet_sources.budget_options(
            source,
            fleet_base.CALL_TIMEOUT_S if timeout_s is None else timeout_s,
            fleet_base.CALL_RETRIES if retries is None else retries,
        )
    )


def source_options(source: str, given: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments for ``source`` from the flags given (flag -> value, None when absent)."""
    if source not in OPTION_NAMES:
        raise UserError(f"unknown --source {source!r}; accepted: {', '.join(OPTION_NAMES)}")
    names = OPTION_NAMES[source]
    stray = sorted(flag for flag, value in given.items() if value and flag not in names)
    if stray:
        raise UserError(f"{stray[0]} does not apply to --source {source}; it takes {', '.join(names)}")
    return {names[flag]: value for flag, value in given.items() if value and flag in names}


def build(
    source: str,
    options: dict[str, Any],
    catalog_files: list[Path] | None = None,
    public: bool = False,
    include_non_gpu: bool = False,
    include_stopped: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """(inventory in ansible-inventory --list shape, warnings)."""
    fleet_base = plugin_utils("fleet_base")
    catalog = fabric_catalog.load(catalog_files)
    try:
        arguments = {**call_budget(source), **source_options(source, options)}
        instance_source = plugin_utils("fleet_sources").make_source(source, arguments)
        instances = list(instance_source.instances())
    except fleet_base.DiscoveryError as exc:
        raise UserError(f"discovery failed: {exc}") from None
    inventory, warnings = plugin_utils("fleet_inventory").build(
        instances, catalog, public=public, include_non_gpu=include_non_gpu, include_stopped=include_stopped
    )
    return inventory, list(warnings)


def render(inventory: dict[str, Any], output_format: str) -> str:
    fleet_inventory = plugin_utils("fleet_inventory")
    if output_format == "json":
        return str(fleet_inventory.to_json(inventory))
    if output_format == "yaml":
        return str(fleet_inventory.to_yaml(inventory))
    raise UserError(f"unknown --format {output_format!r}; accepted: yaml, json")
