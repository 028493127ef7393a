# SPDX-License-Identifier: Apache-2.0
"""What the roles' plan helpers read alike from the host's plan, gpufabric_plan (plugin_utils/fabric_plan.py)."""

from __future__ import annotations

from typing import Any


def no_profile(host_plan: dict[str, Any]) -> str:
    """Why the host has no catalog profile, as the host plan says it (the name asked for and where from)."""
    reason = (host_plan.get("unmanaged") or {}).get("reason")
    return str(reason or f"profile {host_plan.get('profile', 'unknown')!r} is not in the fabric catalog")
