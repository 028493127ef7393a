# SPDX-License-Identifier: Apache-2.0
"""What every fleet discovery source returns, and how sources fail.

A source (fleet_aws, fleet_gcp, fleet_azure, fleet_nebius, fleet_oci,
fleet_static) lists a cloud's instances through the cloud's official SDK and
yields ``Instance`` records; ``fleet_inventory`` turns them into an Ansible
inventory. Sources live in the collection so that the CLI and the
``gpufabric.cluster.gpu_fleet`` inventory plugin (also under AWX) share them.

Names, tags and labels come from whoever can create instances in the
account: they are untrusted and are marked unsafe by fleet_inventory.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

RUNNING, STOPPED, PENDING, OTHER = "running", "stopped", "pending", "other"

# One API call's budget, the same for every cloud: seconds an HTTP request may wait to connect and to read,
# and retries after a throttled answer (or, where the SDK retries them, a dropped connection or a timeout).
# An endpoint that accepts and never answers fails within about (CALL_RETRIES + 1) x CALL_TIMEOUT_S plus the
# backoff, about 35 s. fleet_sources.budget_options maps both numbers to each SDK's own arguments.
CALL_TIMEOUT_S = 10.0
CALL_RETRIES = 2


@dataclass
class Instance:
    """One instance as a cloud reports it, normalised across clouds."""

    cloud: str  # gcp | aws | azure | nebius | oci | baremetal
    instance_id: str  # the cloud's id (AWS i-..., GCP numeric id, Azure resource id, OCID, ...)
    name: str  # display name; untrusted
    instance_type: str  # instance type, machine type, VM size, shape or platform
    state: str  # RUNNING, STOPPED, PENDING or OTHER
    region: str | None = None
    zone: str | None = None
    private_ip: str | None = None
    public_ip: str | None = None
    placement: str | None = None  # placement unit: placement group, compact policy, GPU cluster, cluster network
    # Rack-scale NVLink (NVL72): the NVLink domain the cloud puts the instance in (OCI: its GPU memory fabric).
    nvlink_domain: str | None = None
    tags: dict[str, str] = field(default_factory=dict)  # tags or labels; untrusted
    ids: dict[str, str] = field(default_factory=dict)  # further cloud ids (account, project, subscription, ...)
    extra: dict[str, Any] = field(default_factory=dict)  # source facts such as {"efa_interfaces": 32}
    hints: dict[str, Any] = field(default_factory=dict)  # host variables from the operator's own file (static): trusted
    # The source knows this is a GPU host whatever its type (static: someone listed it by hand for its GPUs);
    # one the catalog cannot classify goes to fabric_unknown with a warning, never dropped as non-GPU.
    gpu_host: bool = False


class DiscoveryError(Exception):
    """A source could not list the fleet. The message names the cloud, what failed, and what to do.

    Raised before anything is written, so a failed build leaves no partial file.
    """

    def __init__(self, cloud: str, message: str) -> None:
        self.cloud = cloud
        super().__init__(f"{cloud}: {message}")


class Source(Protocol):
    """A fleet source: ``cloud`` names it, ``instances()`` lists every instance (all states)."""

    cloud: str

    def instances(self) -> Iterator[Instance]: ...


# Instance families that carry GPUs, for types the catalog does not know: such
# hosts go to fabric_unknown with a warning instead of being dropped as non-GPU.
GPU_TYPE_PATTERNS = {
    "aws": re.compile(r"^(p\d|g\d)[a-z0-9-]*\."),
    "gcp": re.compile(r"^(a2|a3|a4|a4x|g2|g4)-"),
    "azure": re.compile(r"^Standard_N", re.IGNORECASE),
    "nebius": re.compile(r"^gpu-"),
    "oci": re.compile(r"GPU", re.IGNORECASE),
    "baremetal": re.compile(r""),  # a host someone listed by hand is there for its GPUs
}


KNOWN_CLOUDS = tuple(GPU_TYPE_PATTERNS)


def is_loopback(host: str) -> bool:
    """localhost or a loopback address: where plain http may go (a local emulator), credentials never leaving."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_gpu_type(cloud: str, instance_type: str) -> bool:
    """True when the type is a GPU type by its family name (catalog profiles count as GPU regardless)."""
    pattern = GPU_TYPE_PATTERNS.get(cloud)
    return bool(pattern and pattern.search(instance_type))


def missing_sdk(cloud: str, package: str, extra: str) -> DiscoveryError:
    return DiscoveryError(cloud, f"the {package} SDK is not installed; install gpufabric[{extra}]")


def with_retries(
    call: Callable[[], T],
    is_throttled: Callable[[Exception], bool],
    attempts: int = 6,
    base_delay: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call``; when it fails with throttling, wait 0.5 s, 1 s, 2 s, ... and try again.

    For SDKs without a retry policy of their own that covers throttling; any
    other exception, or the last throttled attempt's, is raised unchanged.
    """
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if attempt == attempts - 1 or not is_throttled(exc):
                raise
            sleep(base_delay * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover
