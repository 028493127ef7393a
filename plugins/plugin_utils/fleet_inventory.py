# SPDX-License-Identifier: Apache-2.0
"""Turn discovered instances into an Ansible inventory, classified against the catalog.

``build`` returns the inventory in the exact shape of ``ansible-inventory
--list`` (``_meta.hostvars`` plus one entry per group), with every value that
whoever runs instances in the account could have chosen (names, tags,
labels, placement names, cloud ids) wrapped in ``Unsafe``. The renderers
keep that mark: JSON as ``{"__ansible_unsafe": ...}`` (what ansible-inventory
prints), YAML as ``!unsafe``, and the inventory plugin through make_unsafe.
So a tag such as ``{{ lookup('pipe', 'id') }}`` stays text, never a template.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from typing import Any

import yaml

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import (
    KNOWN_CLOUDS,
    PENDING,
    RUNNING,
    Instance,
    is_gpu_type,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_select import preferred_hostname

SAFE_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
UNSAFE_GROUP_CHARS = re.compile(r"[^A-Za-z0-9_]")
NON_GPU_GROUP = "non_gpu"


class Unsafe(str):
    """Text from the cloud that Ansible must never template."""


def group_name(*parts: str) -> str:
    """A valid Ansible group name: letters, digits and underscores, not starting with a digit."""
    name = UNSAFE_GROUP_CHARS.sub("_", "_".join(parts)).lower()
    return f"_{name}" if name[:1].isdigit() else name


def _unsafe(value: Any) -> Any:
    if isinstance(value, str):
        return Unsafe(value) if value else value  # nothing to template; `!unsafe ''` would load as null
    if isinstance(value, dict):
        return {_unsafe(key): _unsafe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unsafe(item) for item in value]
    return value


def _address(instance: Instance, public: bool) -> tuple[str | None, str | None]:
    """The connection address and, when the preferred kind is missing, a warning."""
    kind = "public" if public else "private"
    preferred, other = (instance.public_ip, instance.private_ip)
    if not public:
        preferred, other = other, preferred
    if preferred:
        return preferred, None
    if other:
        return other, f"{instance.cloud} {instance.instance_id} has no {kind} address; using {other}"
    return None, f"{instance.cloud} {instance.instance_id} has no address; Ansible will use its inventory name"


def _checked_ip(value: str | None) -> str | None:
    """An IP address as text; anything else (a static file's DNS name, a cloud answer that is not an address) as
    it is, marked unsafe: an address field holding ``{{ ... }}`` must reach ansible_host as text, never templated."""
    if value is None:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return _unsafe(value)  # type: ignore[no-any-return]


class InventoryBuilder:
    """Collects hosts and groups; ``inventory()`` returns the ansible-inventory --list shape."""

    def __init__(
        self,
        catalog: Any,
        include_non_gpu: bool = False,
        include_stopped: bool = False,
        hostnames: list[dict[str, str]] | None = None,
    ) -> None:
        self.catalog = catalog
        self.include_non_gpu = include_non_gpu
        self.include_stopped = include_stopped
        self.hostnames = hostnames or []  # fleet_select.check_hostnames() preferences
        self.hostvars: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, list[str]] = {}
        self.warnings: list[str] = []

    def _preferred_name(self, instance: Instance) -> str | None:
        """The name the hostnames preferences give; None (and a warning) when they give none usable.

        Unlike aws_ec2, which drops such an instance, it keeps its usual name: a GPU host must not
        vanish from the fleet because a tag is missing.
        """
        preferred = preferred_hostname(instance, self.hostnames)
        if preferred is not None and SAFE_HOSTNAME.match(preferred):
            return preferred
        why = "no hostnames preference gives it a value" if preferred is None else f"{preferred!r} is not a host name"
        self.warnings.append(f"{instance.cloud} instance {instance.instance_id}: {why}; named as without hostnames")
        return None

    def _hostname(self, instance: Instance) -> str:
        preferred = self._preferred_name(instance) if self.hostnames else None
        name = preferred or (instance.name if SAFE_HOSTNAME.match(instance.name or "") else instance.instance_id)
        if not SAFE_HOSTNAME.match(name):
            name = group_name(instance.cloud, name)
        if name in self.hostvars:
            name = f"{name}-{group_name(instance.instance_id)}"
        return name

    def _classify(self, instance: Instance) -> tuple[str | None, str | None]:
        """(profile, fabric) for a GPU host, (None, "unknown") for an unknown GPU type, (None, None) else."""
        hinted = instance.hints.get("gpufabric_profile")
        if hinted:
            profile = self.catalog.get(hinted)
            if profile is None:
                self.warnings.append(f"{instance.name}: profile {hinted!r} is not in the catalog; in fabric_unknown")
                return None, "unknown"
            return hinted, profile["fabric"]
        name = self.catalog.find(instance.cloud, instance.instance_type)
        if name:
            return name, self.catalog.get(name)["fabric"]
        if instance.gpu_host or is_gpu_type(instance.cloud, instance.instance_type):
            if instance.cloud not in KNOWN_CLOUDS:
                what = (
                    f"cloud {instance.cloud!r}, which no catalog profile has (known clouds: {', '.join(KNOWN_CLOUDS)})"
                )
            elif instance.instance_type:
                kind = "GPU type" if is_gpu_type(instance.cloud, instance.instance_type) else "instance type"
                what = f"{kind} {instance.instance_type!r}, which the catalog does not know"
            else:
                what = "no profile or instance type, which the catalog needs"
            self.warnings.append(
                f"{instance.cloud} instance {instance.instance_id} has {what}; put in fabric_unknown "
                "(gpufabric plan --probe infers bare-metal profiles from the hardware)"
            )
            return None, "unknown"
        return None, None

    def add(self, instance: Instance, public: bool = False) -> None:
        if instance.state not in (RUNNING, PENDING) and not self.include_stopped:
            return
        profile, fabric = self._classify(instance)
        if fabric is None and not self.include_non_gpu:
            return
        name = self._hostname(instance)
        address, warning = _address(instance, public)
        if warning:
            self.warnings.append(warning)
        variables: dict[str, Any] = {
            "gpufabric_cloud": instance.cloud,
            "gpufabric_instance_type": _unsafe(instance.instance_type),
            "gpufabric_instance_id": _unsafe(instance.instance_id),
            "gpufabric_instance_name": _unsafe(instance.name),
            "gpufabric_state": instance.state,
            "gpufabric_region": _unsafe(instance.region),
            "gpufabric_zone": _unsafe(instance.zone),
            "gpufabric_placement": _unsafe(instance.placement),
            "gpufabric_private_ip": _checked_ip(instance.private_ip),
            "gpufabric_public_ip": _checked_ip(instance.public_ip),
            "gpufabric_ids": _unsafe(instance.ids),
            "gpufabric_tags": _unsafe(instance.tags),
            "gpufabric_source_facts": _unsafe(instance.extra),
        }
        if address:
            variables["ansible_host"] = _checked_ip(address)
        if fabric is not None:
            variables["gpufabric_fabric"] = fabric
        if profile is not None:
            variables["gpufabric_profile"] = profile
        if instance.nvlink_domain:
            # What `gpufabric plan` groups NVLink domains by (plugin_utils/nvlink_domains.py).
            variables["gpufabric_nvlink_domain"] = _unsafe(instance.nvlink_domain)
        variables.update(instance.hints)  # the operator's own file: trusted, and it wins
        self.hostvars[name] = variables
        for group in self._groups(instance, profile, fabric):
            self.groups.setdefault(group, []).append(name)

    def _groups(self, instance: Instance, profile: str | None, fabric: str | None) -> list[str]:
        if fabric is None:
            return [NON_GPU_GROUP]
        groups = [group_name("fabric", fabric), group_name("cloud", instance.cloud)]
        if profile is not None:
            groups.append(group_name("profile", *profile.split("/", 1)))
        if instance.placement:
            groups.append(group_name("placement", instance.cloud, instance.placement))
        return groups

    def inventory(self) -> dict[str, Any]:
        """The exact shape of `ansible-inventory --list`, hosts and groups sorted."""
        result: dict[str, Any] = {
            "_meta": {
                "hostvars": {name: self.hostvars[name] for name in sorted(self.hostvars)},
                "profile": "inventory_legacy",  # as ansible-inventory --list (ansible-core 2.19) prints it
            },
            "all": {"children": ["ungrouped", *sorted(self.groups)]},
        }
        for group in sorted(self.groups):
            result[group] = {"hosts": sorted(self.groups[group])}
        return result


def build(
    instances: Iterable[Instance],
    catalog: Any,
    public: bool = False,
    include_non_gpu: bool = False,
    include_stopped: bool = False,
    hostnames: list[dict[str, str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """(inventory in ansible-inventory --list shape, warnings). hostnames: checked preferences
    (fleet_select.check_hostnames), the first that gives an instance a value names it."""
    builder = InventoryBuilder(
        catalog, include_non_gpu=include_non_gpu, include_stopped=include_stopped, hostnames=hostnames
    )
    for instance in instances:
        builder.add(instance, public=public)
    return builder.inventory(), builder.warnings


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def json_ready(value: Any) -> Any:
    """Plain JSON data, unsafe text as {"__ansible_unsafe": text} (how ansible-inventory prints it)."""
    if isinstance(value, Unsafe):
        return {"__ansible_unsafe": str(value)}
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item) for item in value]
    return value


def to_json(inventory: dict[str, Any]) -> str:
    return json.dumps(json_ready(inventory), indent=4, sort_keys=True) + "\n"


class _InventoryDumper(yaml.SafeDumper):
    pass


def _represent_unsafe(dumper: yaml.SafeDumper, value: Unsafe) -> yaml.Node:
    return dumper.represent_scalar("!unsafe", str(value), style="'")


_InventoryDumper.add_representer(Unsafe, _represent_unsafe)


def to_yaml(inventory: dict[str, Any]) -> str:
    """A YAML inventory file: host variables under all.hosts, membership under all.children."""
    children = {
        group: {"hosts": dict.fromkeys(body["hosts"])}
        for group, body in inventory.items()
        if group not in ("_meta", "all", "ungrouped")
    }
    document = {"all": {"hosts": inventory["_meta"]["hostvars"], "children": children}}
    header = "# Built by `gpufabric inventory build`. Values from the cloud are !unsafe: never templated.\n"
    return header + yaml.dump(document, Dumper=_InventoryDumper, sort_keys=False, default_flow_style=False)
