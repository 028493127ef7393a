# SPDX-License-Identifier: Apache-2.0
"""What the GCP fabric roles (gcp_tcpx, gcp_tcpxo, gcp_gpudirect_rdma) share.

The Artifact Registry apt transport: apt reads an ``ar+https://`` source only once
apt-transport-artifact-registry is installed, so gcp_tcpxo and gcp_gpudirect_rdma install it first, from
its own repository, in its own gpufabric.cluster.vendor_packages run. And the one sentence for a host the
catalog has no profile for.
"""

from __future__ import annotations

from typing import Any

TRANSPORT_PACKAGE = "apt-transport-artifact-registry"
TRANSPORT_SCHEME = "ar+https://"


def transport_needed(url: str) -> bool:
    """apt needs the Artifact Registry transport only for ar+https:// repositories."""
    return url.strip().lower().startswith(TRANSPORT_SCHEME)


def transport_packages(version: str) -> list[dict[str, Any]]:
    """The transport in vendor_packages' layout: held only at a pin (unpinned, installed once, never moved)."""
    return [{"name": TRANSPORT_PACKAGE, "version": version, "hold": bool(version)}]


def no_profile(host_plan: dict[str, Any]) -> str:
    """Why the host has no catalog profile, as the host plan says it (the name asked for and where from)."""
    reason = (host_plan.get("unmanaged") or {}).get("reason")
    return str(reason or f"profile {host_plan.get('profile', 'unknown')!r} is not in the fabric catalog")
