# SPDX-License-Identifier: Apache-2.0
"""Which discovery sources exist, and how to make one from options (CLI or plugin config)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import DiscoveryError, Source

PACKAGE = "ansible_collections.gpufabric.cluster.plugins.plugin_utils"
SOURCES = {
    "aws": ("fleet_aws", "AwsSource"),
    "gcp": ("fleet_gcp", "GcpSource"),
    "azure": ("fleet_azure", "AzureSource"),
    "nebius": ("fleet_nebius", "NebiusSource"),
    "oci": ("fleet_oci", "OciSource"),
    "static": ("fleet_static", "StaticSource"),
}


def source_class(name: str) -> type:
    if name not in SOURCES:
        raise DiscoveryError(name, f"unknown source; accepted: {', '.join(SOURCES)}")
    module_name, class_name = SOURCES[name]
    try:
        module = importlib.import_module(f"{PACKAGE}.{module_name}")
    except ModuleNotFoundError as exc:
        raise DiscoveryError(name, f"this source is not available ({exc.name} is missing)") from None
    return getattr(module, class_name)


def accepted_options(name: str) -> list[str]:
    parameters = inspect.signature(source_class(name).__init__).parameters
    return [option for option in parameters if option != "self"]


def make_source(name: str, options: dict[str, Any]) -> Source:
    """The source ``name`` built from ``options``; an option it does not take is one clear error."""
    accepted = accepted_options(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DiscoveryError(name, f"unknown option {unknown[0]!r}; accepted: {', '.join(accepted)}")
    try:
        return source_class(name)(**options)
    except TypeError as exc:  # a required option is missing
        raise DiscoveryError(name, f"bad options: {exc}; accepted: {', '.join(accepted)}") from None
