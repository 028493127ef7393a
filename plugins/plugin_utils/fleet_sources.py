# SPDX-License-Identifier: Apache-2.0
"""Which discovery sources exist, and how to make one from options (CLI or plugin config)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import DiscoveryError, Source, is_loopback

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


# The option that names an API endpoint, per source (each SDK spells it its own way).
ENDPOINT_OPTIONS = {"aws": "endpoint_url", "gcp": "endpoint", "azure": "endpoint", "oci": "endpoint"}

# The gpu_fleet inventory plugin's typed settings -> each source's constructor argument. A setting
# missing from a source's entry does not apply to it; every other argument (SDK timeouts, retries)
# goes through the plugin's source_options.
PLUGIN_SETTINGS = {
    "aws": {"regions": "regions", "profile": "profile", "endpoint_url": "endpoint_url"},
    "gcp": {"projects": "projects", "zones": "zones", "endpoint_url": "endpoint"},
    "azure": {"subscription_id": "subscription_id", "resource_groups": "resource_groups", "endpoint_url": "endpoint"},
    "nebius": {"parent_ids": "parent_ids", "endpoint_url": "endpoint"},
    "oci": {"compartment_id": "compartment_id", "regions": "regions", "profile": "profile", "endpoint_url": "endpoint"},
    "static": {"path": "path"},
}


def check_endpoint(name: str, option: str, value: Any) -> None:
    """An endpoint is an https:// URL with a host, or http:// to a loopback address (a local emulator):
    credentials never travel in clear text, and a typo is refused here instead of deep in an SDK."""
    accepted = "accepted: https://HOST[:PORT][/PATH], or http:// to a loopback address such as http://127.0.0.1:8080"
    if not isinstance(value, str):
        raise DiscoveryError(name, f"{option} {value!r} is not a URL; {accepted}")
    try:
        parts = urlsplit(value)
        host, _port = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError as exc:
        raise DiscoveryError(name, f"{option} {value!r} is not a URL ({exc}); {accepted}") from None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in value):
        raise DiscoveryError(name, f"{option} {value!r} is not a URL; {accepted}")
    if parts.scheme == "http" and not is_loopback(host):
        raise DiscoveryError(name, f"{option} {value!r} is plain http to a host that is not loopback; {accepted}")


def make_source(name: str, options: dict[str, Any]) -> Source:
    """The source ``name`` built from ``options``; an option it does not take is one clear error."""
    accepted = accepted_options(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DiscoveryError(name, f"unknown option {unknown[0]!r}; accepted: {', '.join(accepted)}")
    endpoint_option = ENDPOINT_OPTIONS.get(name)
    if endpoint_option and options.get(endpoint_option) is not None:
        check_endpoint(name, endpoint_option, options[endpoint_option])
    try:
        return source_class(name)(**options)
    except TypeError as exc:  # a required option is missing
        raise DiscoveryError(name, f"bad options: {exc}; accepted: {', '.join(accepted)}") from None
