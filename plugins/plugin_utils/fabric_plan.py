# SPDX-License-Identifier: Apache-2.0
"""Turn one host's inventory variables into its plan: profile, fabric, roles, env.

Shared by ``gpufabric plan`` (driver) and playbooks/site.yml (through the
``gpufabric.cluster.fabric_plan`` lookup), so what the plan shows is what the
playbook applies.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_nics, nccl, sriov
from ansible_collections.gpufabric.cluster.plugins.module_utils.nccl_tests_run import tier_thresholds
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CLOUDS,
    DEFAULT_ARCHITECTURE,
    TIERS,
    Catalog,
    hosts_per_domain,
)

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"
UNKNOWN = "unknown"
# The profile's sections that describe its hardware: what fabric_findings compares a host's facts with.
HARDWARE = ("fabric", "gpu", "nics", "sriov")
DEFAULT_TIER = "best"
# The one unmanaged code that is the operator's choice (gpufabric_managed: false): reported, not counted.
EXCLUDED = "excluded"


class PlanError(Exception):
    """Input that no plan can be made from (for example an unknown tier)."""


def available_roles(roles_dir: Path = ROLES_DIR) -> set[str]:
    """Roles of this collection that exist, i.e. have tasks/main.yml."""
    return {path.parent.parent.name for path in roles_dir.glob("*/tasks/main.yml")}


# Host vars that name things: text only (a list or a mapping here is a typo in the inventory, and Python would
# hash, iterate or print it instead of refusing it). What each accepts, for the error.
TEXT_VARS = {
    "gpufabric_profile": "a catalog profile name such as gcp/a3-megagpu-8g (`gpufabric catalog list`)",
    "gpufabric_cloud": f"one of {', '.join(CLOUDS)}",
    "gpufabric_instance_type": "the cloud's name of the instance type, such as p5.48xlarge",
    "gpufabric_tier": f"one of {', '.join(TIERS)}",
    "gpufabric_image": "a catalog image name such as gcp/ubuntu-accelerator-2204-amd64-with-nvidia-570",
    "gpufabric_nvlink_domain": "the id of the NVLink domain (NVL72 rack) the host belongs to",
}
_KINDS = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a mapping"}


def check_host_vars(hostvars: dict[str, Any]) -> None:
    """Refuse a host var of TEXT_VARS that is not text (null means unset), naming it, its value and what is accepted."""
    for name, accepted in TEXT_VARS.items():
        value = hostvars.get(name)
        if value is not None and not isinstance(value, str):
            kind = next((text for python, text in _KINDS.items() if isinstance(value, python)), type(value).__name__)
            raise PlanError(f"host var {name} {value!r} is {kind}, not text; accepted: {accepted}")


def check_tier(tier: str, where: str) -> str:
    if not isinstance(tier, str) or tier not in TIERS:
        raise PlanError(f"unknown tier {tier!r} ({where}); accepted: {', '.join(TIERS)}")
    return tier


def resolve_profile(hostvars: dict[str, Any], catalog: Catalog) -> tuple[str | None, str]:
    """Return (profile name or None, how it was resolved or why it was not)."""
    explicit = hostvars.get("gpufabric_profile")
    if explicit:
        if catalog.get(explicit):
            return explicit, "host var gpufabric_profile"
        return None, f"profile {explicit!r} from host var gpufabric_profile is not in the catalog"
    cloud = hostvars.get("gpufabric_cloud")
    instance_type = hostvars.get("gpufabric_instance_type")
    if cloud and instance_type:
        name = catalog.find(str(cloud), str(instance_type))
        if name:
            return name, "host vars gpufabric_cloud and gpufabric_instance_type"
        return None, f"no catalog profile for {cloud} instance type {instance_type!r}"
    return None, "host has neither gpufabric_profile nor gpufabric_cloud with gpufabric_instance_type"


def host_image(hostvars: dict[str, Any], catalog: Catalog) -> dict[str, Any] | None:
    """The catalog image the host var gpufabric_image names (None when unset): its OS and the roles that adopt its
    stack. A name not in the catalog is refused: on a cloud image, a typo must not turn adopting into replacing."""
    name = hostvars.get("gpufabric_image")
    if not name:
        return None
    image = catalog.images.get(name)
    if image is None:
        accepted = ", ".join(sorted(catalog.images)) or "none (the catalog has no images)"
        raise PlanError(f"host var gpufabric_image {name!r} is not a catalog image; accepted: {accepted}")
    return {
        "name": name,
        "reference": image["reference"],
        "os": image["os"],
        "adopt": list(image["adopt"]),
    }


def check_no_interface_naming(hostvars: dict[str, Any]) -> None:
    """The host var gpufabric_interface_naming is gone: a host's NIC names are read from the host (fabric_nics)."""
    if hostvars.get("gpufabric_interface_naming") is not None:
        raise PlanError(
            f"host var gpufabric_interface_naming {hostvars['gpufabric_interface_naming']!r} is no longer read: "
            'the plan takes a host\'s NIC names from the host itself (docs/catalog.md, "NICs by identity"); '
            "remove it"
        )


def sriov_layout(profile: dict[str, Any], hostvars: dict[str, Any]) -> dict[str, Any]:
    """The VFs the sriov role carves from the profile's GPU-network NICs (physical functions).

    The role's own inventory variables win over the profile, as they do when it runs, and are checked by the
    role's own check (module_utils/sriov.py): what the role refuses, the plan refuses.
    """
    nics = profile["nics"]["gpu"]
    settings, errors = sriov.layout_vars({key: hostvars.get(f"sriov_{key}") for key in sriov.LAYOUT_VARS})
    if errors:
        raise PlanError("; ".join(f"host var {error}" for error in errors))
    chosen = settings["physical_functions"]
    per_nic = profile["sriov"]["vfs_per_nic"] if settings["num_vfs"] is None else settings["num_vfs"]
    count = len(chosen) if chosen else nics["count"]
    return {
        "vfs_per_nic": per_nic,
        "nics": count,
        "vfs": per_nic * count,
        "link_type": "infiniband" if nics["kind"] == "connectx_ib" else "ethernet",
        # By name where the inventory or the profile names them; else the role selects the profile's NICs by PCI id.
        "physical_functions": chosen or list(nics.get("rdma_devices") or []),
        "address_scheme": settings["address_scheme"],
    }


def nic_placeholders(env: dict[str, Any]) -> list[str]:
    """The variables of the tier's env whose values name NICs through placeholders: what the host's names fill."""
    return fabric_nics.symbolic(env)


def nvlink_plan(profile: dict[str, Any], hostvars: dict[str, Any]) -> dict[str, Any] | None:
    """The host's multi-node NVLink: its domain (host var gpufabric_nvlink_domain), the domain's size in GPUs and
    hosts, and the thresholds of runs within one domain. None for a profile without multi-node NVLink."""
    nvlink = profile.get("nvlink")
    if nvlink is None:
        return None
    return {
        "domain": hostvars.get("gpufabric_nvlink_domain") or None,
        "domain_gpus": nvlink["domain_gpus"],
        "hosts_per_domain": hosts_per_domain(profile),
        "thresholds": copy.deepcopy(nvlink.get("thresholds") or []),
    }


def nccl_pin(profile: dict[str, Any], hostvars: dict[str, Any]) -> dict[str, str] | None:
    """The NCCL the nccl role installs or accepts: the catalog's pin, or the host var nccl_version over it; None when
    neither says (a profile of fabric none without nccl)."""
    pin = dict(profile.get("nccl") or {})
    given = hostvars.get("nccl_version")
    if given:
        error = nccl.package_version_error(str(given), "host var nccl_version")
        if error:
            raise PlanError(error)
        pin |= {"version": str(given), "source": "host var nccl_version"}
    if not pin:
        return None
    return {
        "version": pin["version"],
        "minimum": nccl.minimum_of(pin),
        "source": pin["source"],
    }


def storage_plan(profile: dict[str, Any], hostvars: dict[str, Any], gds: bool) -> dict[str, Any] | None:
    """The profile's storage NICs (None when it declares none) and whether the tier runs gds, with the host's GDS
    mounts (host var gds_mounts, as given: the gds role checks them) when it does."""
    storage = profile.get("storage")
    if storage is None:
        return None
    mounts = hostvars.get("gds_mounts") if gds else None
    return {
        "nics": copy.deepcopy(storage["nics"]),
        "source": storage["source"],
        "gds": gds,
        "mounts": copy.deepcopy(mounts) if isinstance(mounts, list) else [],
    }


def tier_bandwidth(profile: dict[str, Any], tier: str) -> dict[str, Any]:
    """The profile's bandwidth block with the thresholds the tier is judged by (none for a baseline tier)."""
    bandwidth = copy.deepcopy(profile["bandwidth"])
    return {**bandwidth, "thresholds": tier_thresholds(bandwidth, tier)}


def is_managed(hostvars: dict[str, Any]) -> bool:
    """The host var gpufabric_managed (default true): false excludes the host on purpose."""
    value = hostvars.get("gpufabric_managed", True)
    try:
        # Ansible's own conversion, the one the lookup's `type: bool` option applies in site.yml: the plan
        # and the playbook read an ini inventory's "yes" or "0" alike.
        return boolean(value, strict=True)
    except TypeError:
        raise PlanError(f"host var gpufabric_managed is {value!r}; accepted: true or false") from None


def unmanaged(hostvars: dict[str, Any], profile: str | None, reason: str) -> dict[str, str] | None:
    """Why gpufabric leaves the host alone (None when it manages it): {"code": ..., "reason": ...}.

    Every report (plan, apply, drift) shows this one verdict; only "excluded" is the operator's choice,
    the others make apply and drift exit non-zero.
    """
    if not is_managed(hostvars):
        return {"code": EXCLUDED, "reason": "excluded on purpose by the host var gpufabric_managed: false"}
    if profile is not None:
        return None
    if hostvars.get("gpufabric_profile") or (
        hostvars.get("gpufabric_cloud") and hostvars.get("gpufabric_instance_type")
    ):
        return {"code": "unknown_profile", "reason": reason}
    return {"code": "no_profile", "reason": reason}


def plan_host(
    hostvars: dict[str, Any],
    catalog: Catalog,
    tier: str | None = None,
    roles_present: set[str] | None = None,
    tier_source: str = "--tier",
) -> dict[str, Any]:
    """The plan for one host. ``tier`` (named by ``tier_source``) beats the host var."""
    check_host_vars(hostvars)
    check_no_interface_naming(hostvars)
    if tier is None:
        given = hostvars.get("gpufabric_tier")
        tier = check_tier(DEFAULT_TIER if given is None else given, "host var gpufabric_tier")
    else:
        tier = check_tier(tier, tier_source)
    present = available_roles() if roles_present is None else roles_present
    name, reason = resolve_profile(hostvars, catalog)
    not_managed = unmanaged(hostvars, name, reason)
    image = host_image(hostvars, catalog)
    if name is None:
        return {
            "profile": UNKNOWN,
            "fabric": UNKNOWN,
            "tier": tier,
            "roles": [],
            "roles_unavailable": [],
            "env": {},
            "gpus": {},
            "nics": {},
            "sriov": None,
            "hardware": {},
            "bandwidth": {},
            "image": image,
            "nic_names": None,
            "nic_placeholders": [],
            "architecture": None,
            "nvlink": None,
            "nccl": None,
            "host_tuning": None,
            "storage": None,
            "resolved_by": None,
            "unmanaged": not_managed,
            "warnings": [f"{reason}; apply and drift leave this host alone and report it NOT MANAGED"],
        }
    profile = catalog.profiles[name]
    roles = list(profile["tiers"][tier]["roles"])
    unavailable = [role for role in roles if role not in present]
    warnings = []
    if not_managed is not None:
        warnings.append(f"{not_managed['reason']}: apply and drift leave this host alone (reported, not counted)")
    if unavailable:
        warnings.append(f"roles not written yet: {', '.join(unavailable)}; apply refuses to run them")
    if "nvlink" not in profile and hostvars.get("gpufabric_nvlink_domain"):
        warnings.append(
            f"host var gpufabric_nvlink_domain {hostvars['gpufabric_nvlink_domain']!r} is set, but profile {name} "
            "has no multi-node NVLink; the domain is ignored"
        )
    plan = {
        "profile": name,
        "fabric": profile["fabric"],
        "tier": tier,
        "roles": roles,
        "roles_unavailable": unavailable,
        "env": dict(profile["tiers"][tier]["env"]),
        # What host-stack roles need from the profile (driver branch checks, fabric manager).
        "gpus": {key: profile["gpu"][key] for key in ("model", "count", "nvswitch")},
        # What fabric roles need: NIC names, counts, MTU, RDMA devices of the GPU network and the management NIC.
        "nics": copy.deepcopy(profile["nics"]),
        "sriov": sriov_layout(profile, hostvars) if "sriov" in roles else None,
        # What fabric_findings compares the host's facts with (the profile's hardware sections, as they are).
        "hardware": {key: copy.deepcopy(profile[key]) for key in HARDWARE if key in profile},
        # What nccl_tests judges a run by: the profile's bandwidth with this tier's thresholds only.
        "bandwidth": tier_bandwidth(profile, tier),
        # The image the host boots (gpufabric_image): the host-stack roles it names adopt its stack.
        "image": image,
        # The names the host gives its NICs (fabric_nics.resolve, from fabric_facts): None until read. Until then
        # env values that name NICs hold placeholders such as {nics.gpu} (docs/catalog.md, "NICs by identity").
        "nic_names": None,
        "nic_placeholders": nic_placeholders(profile["tiers"][tier]["env"]),
        "architecture": profile.get("architecture", DEFAULT_ARCHITECTURE),
        "nvlink": nvlink_plan(profile, hostvars),
        # What the nccl role installs and holds, or the oldest NCCL it adopts (docs/catalog.md, "NCCL").
        "nccl": nccl_pin(profile, hostvars),
        # The settings the host_tuning role applies unless the inventory overrides them (docs/catalog.md).
        "host_tuning": copy.deepcopy(profile["host_tuning"]) if "host_tuning" in roles else None,
        # The profile's storage NICs and, where the tier runs gds, the host's GDS mounts (docs/catalog.md).
        "storage": storage_plan(profile, hostvars, "gds" in roles),
        "resolved_by": reason,
        "unmanaged": not_managed,
        "warnings": warnings,
    }
    names = hostvars.get("gpufabric_nic_names")
    if names is not None:
        # The names an image gives the NICs, said by the inventory (an image bake on a builder without them).
        if not isinstance(names, dict):
            raise PlanError(
                f"host var gpufabric_nic_names {names!r} is not accepted; accepted: a mapping of gpu and management "
                "to lists of interface names, each in PCI order"
            )
        try:
            plan = fabric_nics.resolve_with_names(plan, names)
        except ValueError as exc:
            raise PlanError(f"host var {exc}" if str(exc).startswith("gpufabric_nic_names") else str(exc)) from None
    return plan
