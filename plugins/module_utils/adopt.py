# SPDX-License-Identifier: Apache-2.0
"""Adopt what the image ships: the one shape of a host-stack role's ``adopt`` mode.

The clouds' GPU images already carry a stack (GCP's ubuntu-accelerator images: Canonical's 570-server driver;
AWS's and Azure's images: driver, EFA, DOCA, NCCL). A role that forces its own packages there replaces a working
stack. In ``adopt`` mode a role instead reads the installed packages (``ansible.builtin.package_facts``,
``facts['packages']``), accepts or refuses what the image ships against its settings, holds what it accepts at the
installed versions and installs only what is missing. ``install`` mode is the roles' own install.

Role-neutral: the nvidia_driver role uses it first; rdma_stack, NCCL and EFA adopt the same way. What the role
adopts is the hold step built here (every found package at its installed version, held, pinned in an APT
preferences file). That file is the on-host record of what was adopted: when a package later moves, the next
run's diff of the file (and vendor_packages' hold check) shows it, which is how check mode reports drift on an
adopted stack.
"""

from __future__ import annotations

import re
from collections.abc import Callable, MutableMapping
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackageStep

MODES = ("install", "adopt")


class Adoption(TypedDict):
    """What a role in adopt mode found on the host and decided; install mode's is empty."""

    mode: str  # install or adopt
    known: bool  # whether the installed packages were read (facts['packages'])
    found: dict[str, str]  # what the role adopts and holds: package -> installed version
    missing: list[str]  # what the role installs because the image lacks it
    refused: str  # why the shipped stack is not accepted; '' when it is


def adoption(
    mode: str = "install",
    known: bool = False,
    found: dict[str, str] | None = None,
    missing: list[str] | None = None,
    refused: str = "",
) -> Adoption:
    """One Adoption; ``adoption()`` is install mode's (nothing read, nothing adopted)."""
    return {
        "mode": mode,
        "known": known,
        "found": dict(sorted((found or {}).items())),
        "missing": list(missing or []),
        "refused": refused,
    }


class Refused(ValueError):
    """Adopt mode: what the image ships is not accepted (the role installs nothing and changes nothing)."""


def settle(plan: MutableMapping[str, Any], decide: Callable[[], dict[str, Any]]) -> None:
    """Fill a role's plan with what ``decide`` returns; a ValueError (a bad input) becomes the plan's one error, and a
    Refused also adopt mode's refusal, so that `gpufabric plan` shows why the image's stack was not adopted."""
    try:
        plan.update(decide())
    except Refused as exc:
        plan["errors"] = [str(exc)]
        plan["adopt"] = adoption("adopt", known=True, refused=str(exc))
    except ValueError as exc:
        plan["errors"] = [str(exc)]


def mode_error(mode: str, variable: str) -> str | None:
    """Why ``mode`` (the value of the role variable ``variable``) is not a mode, or None."""
    if mode in MODES:
        return None
    return f"{variable} '{mode}' is not accepted; accepted: {', '.join(MODES)}"


def installed_versions(facts: dict[str, Any]) -> dict[str, str] | None:
    """Installed package -> version, from package_facts' layout (name -> [{version, ...}]); None when the facts
    have no ``packages`` (the installed packages were not read, e.g. `gpufabric plan` without --probe).

    A package installed for two architectures (amd64 and i386) at one version is listed once; dpkg keeps a
    Multi-Arch: same package at one version on every architecture.
    """
    packages = facts.get("packages")
    if packages is None:
        return None
    return {str(name): str(entries[0].get("version", "")) for name, entries in packages.items() if entries}


def version_numbers(version: str) -> tuple[int, ...]:
    """The numbers of a package's upstream version, for a floor: '1:570.195.03-0ubuntu0.22.04.2' -> (570, 195, 3),
    '1.1.0-1' -> (1, 1, 0). The epoch and the Debian revision do not move a floor."""
    upstream = version.split(":", 1)[-1].split("-", 1)[0]
    return tuple(int(part) for part in re.findall(r"\d+", upstream))


def hold_step(found: dict[str, str], preferences: str, pin_priority: int = 1001) -> PackageStep:
    """The step that adopts what the image ships: every found package at its installed version, held, from no
    repository of the role's, pinned in the APT preferences file ``preferences`` (the record of what was adopted)."""
    packages = [
        supply_chain.package(name, version, repository="", hold=True) for name, version in sorted(found.items())
    ]
    return supply_chain.step(packages, preferences=preferences, pin_priority=pin_priority)
