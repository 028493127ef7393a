# SPDX-License-Identifier: Apache-2.0
"""The operating systems `gpufabric plan` can compute a host's supply chain for without reaching the host.

A host says which with the host variable ``gpufabric_os``; ``--probe`` reads it from the host's os-release instead.
Each target's facts are the ones Ansible gathers there, as recorded from the real release files
(tests/fixtures/os_release/<target>/facts.json; a unit test holds this table to them). The point release is the
recorded one: the roles read the major release, except where a vendor's path names the point release (DOCA's
rhel9.x directories), which a probe gets right for the host at hand.
"""

from __future__ import annotations

from typing import Any

from gpufabric.errors import UserError

# ansible_facts keys the roles' plans read, per target.
OS_TARGETS: dict[str, dict[str, str]] = {
    "ubuntu-22.04": {
        "distribution": "Ubuntu",
        "distribution_version": "22.04",
        "distribution_major_version": "22",
        "distribution_release": "jammy",
        "os_family": "Debian",
    },
    "ubuntu-24.04": {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "distribution_major_version": "24",
        "distribution_release": "noble",
        "os_family": "Debian",
    },
    "debian-12": {
        "distribution": "Debian",
        "distribution_version": "12.11",
        "distribution_major_version": "12",
        "distribution_release": "bookworm",
        "os_family": "Debian",
    },
    "debian-13": {
        "distribution": "Debian",
        "distribution_version": "13.1",
        "distribution_major_version": "13",
        "distribution_release": "trixie",
        "os_family": "Debian",
    },
    "rhel-9": {
        "distribution": "RedHat",
        "distribution_version": "9.6",
        "distribution_major_version": "9",
        "distribution_release": "Plow",
        "os_family": "RedHat",
    },
}
# os-release ID values of the RHEL family that share RHEL's packages and repository paths.
RHEL_LIKE = ("rhel", "rocky", "almalinux")
# The architecture assumed without a probe: every catalog profile so far is x86_64.
DEFAULT_ARCHITECTURE = "x86_64"


def facts_for(name: Any, where: str) -> dict[str, str]:
    """The facts of ``gpufabric_os`` value ``name``; UserError naming the value, ``where`` and what is accepted."""
    target = OS_TARGETS.get(str(name)) if isinstance(name, str) else None
    if target is None:
        raise UserError(f"{where} {name!r} is not accepted; accepted: {', '.join(OS_TARGETS)}")
    return {**target, "architecture": DEFAULT_ARCHITECTURE}


def target_of(os_release: dict[str, Any]) -> str | None:
    """The target a probed host's os-release (fabric_facts' host.os: id, version_id) names; None when none fits."""
    os_id = str(os_release.get("id") or "").lower()
    version = str(os_release.get("version_id") or "")
    if os_id == "ubuntu":
        name = f"ubuntu-{version}"
    elif os_id == "debian":
        name = f"debian-{version.split('.', 1)[0]}"
    elif os_id in RHEL_LIKE:
        name = f"rhel-{version.split('.', 1)[0]}"
    else:
        return None
    return name if name in OS_TARGETS else None
