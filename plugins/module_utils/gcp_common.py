# SPDX-License-Identifier: Apache-2.0
"""The Artifact Registry apt transport, which gcp_tcpxo and gcp_gpudirect_rdma share.

apt reads an ``ar+https://`` source only once apt-transport-artifact-registry is installed, so both roles
install it first, from its own repository, in its own gpufabric.cluster.vendor_packages run.
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
