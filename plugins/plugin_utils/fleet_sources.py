# SPDX-License-Identifier: Apache-2.0
"""Which discovery sources exist, and how to make one from options (CLI or plugin config)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import (
    CALL_RETRIES,
    CALL_TIMEOUT_S,
    DiscoveryError,
    Source,
    is_loopback,
)

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


# The call budget's accepted ranges: whole seconds per HTTP request, and retries per API call.
TIMEOUT_RANGE_S = (1, 600)
RETRIES_RANGE = (0, 10)


def budget_options(name: str, timeout_s: float = CALL_TIMEOUT_S, retries: int = CALL_RETRIES) -> dict[str, Any]:
    """Each source's own SDK arguments for one call budget: ``timeout_s`` to connect and to read one HTTP answer,
    ``retries`` after a throttled answer (or a dropped connection, where the SDK retries it).

    An endpoint that accepts and never answers then fails within about (retries + 1) x timeout_s plus the backoff.
    GCP's SDK retries by time rather than by count: its throttled calls are retried for (retries + 1) x timeout_s.
    """
    attempts = retries + 1
    options: dict[str, dict[str, Any]] = {
        "aws": {"connect_timeout": timeout_s, "read_timeout": timeout_s, "max_attempts": attempts},
        "gcp": {"timeout": timeout_s, "retry_timeout": timeout_s * attempts},
        "azure": {"connection_timeout": timeout_s, "read_timeout": timeout_s, "retry_total": retries},
        "oci": {"timeout_s": (timeout_s, timeout_s), "retry_attempts": attempts},
        "nebius": {"timeout": timeout_s, "retry_attempts": attempts},
    }
    return options.get(name, {})


def check_budget(name: str, timeout_s: Any, retries: Any, where: tuple[str, str]) -> None:
    """Refuse a call budget out of range; ``where`` names the two settings as the user gave them."""
    for value, (low, high), setting, unit in (
        (timeout_s, TIMEOUT_RANGE_S, where[0], "whole seconds"),
        (retries, RETRIES_RANGE, where[1], "retries"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise DiscoveryError(name, f"{setting} {value!r} is not accepted; accepted: {unit} from {low} to {high}")


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
