# SPDX-License-Identifier: Apache-2.0
"""A fleet from a YAML file: bare-metal or SSH hosts no cloud API knows.

    hosts:
      - name: hgx-01                          # required, unique
        address: 10.1.0.11                    # required: where to connect
        profile: baremetal/hgx-h100-ib-ndr    # optional hint (else cloud + instance_type, else --probe infers)
        cloud: baremetal                      # optional, default baremetal
        instance_type: hgx-h100-ib-ndr        # optional
        placement: rack-a                     # optional: hosts that share a fabric
        tags: {owner: ml-infra}               # optional
        vars: {ansible_user: ubuntu}          # optional: further Ansible host variables

Every host counts as a GPU host and is kept: one the catalog cannot classify
(no profile or instance type, an unknown type or cloud) goes to fabric_unknown
with a warning naming it. Bad input is one DiscoveryError naming the file, the
host and the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.bounded_yaml import YAMLFileError, load_file
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_plan import PlanError, check_host_vars
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import RUNNING, DiscoveryError, Instance
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_inventory import SAFE_HOSTNAME

HOST_KEYS = {
    "name": True,
    "address": True,
    "profile": False,
    "cloud": False,
    "instance_type": False,
    "placement": False,
    "tags": False,
    "vars": False,
}
# What each text key accepts (a number is taken as its text: `name: 42`).
TEXT_KEYS = {
    "name": "a host name such as hgx-01",
    "address": "an IP address or a DNS name",
    "profile": "a catalog profile name such as baremetal/hgx-h100-ib-ndr (`gpufabric catalog list`)",
    "cloud": "a cloud name such as baremetal or aws",
    "instance_type": "the instance type's name such as hgx-h100-ib-ndr",
    "placement": "a placement name such as rack-a",
}


def _shown(value: Any) -> str:
    """A bad value as the error shows it: its repr, cut short (a whole mapping can be long)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


class StaticSource:
    """Hosts listed in a YAML file."""

    cloud = "static"

    def __init__(self, path: str) -> None:
        self.path = str(path)

    def _error(self, where: str, reason: str) -> DiscoveryError:
        return DiscoveryError("static", f"{self.path}: {where}: {reason}")

    def _load(self) -> list[Any]:
        try:
            data = load_file(self.path)  # size, encoding, nesting and alias limits: one clear error each
        except YAMLFileError as exc:
            raise self._error(exc.where or "file", exc.reason) from None
        if not isinstance(data, dict) or not isinstance(data.get("hosts"), list):
            raise self._error("hosts", "the file must be a mapping with a 'hosts:' list")
        if not data["hosts"]:
            raise self._error("hosts", "the list is empty; accepted: at least one host (name and address)")
        return data["hosts"]

    def _check(self, index: int, host: Any, seen: set[str]) -> None:
        where = f"hosts[{index}]"
        if not isinstance(host, dict):
            raise self._error(where, f"{_shown(host)} is not a mapping; accepted: a mapping with name and address")
        if isinstance(host.get("name"), (str, int)) and not isinstance(host.get("name"), bool):
            where = f"hosts[{index}] ({host['name']})"
        for key in host:
            if key not in HOST_KEYS:
                raise self._error(f"{where}.{key}", f"unknown key; accepted: {', '.join(HOST_KEYS)}")
        for key, required in HOST_KEYS.items():
            if required and not host.get(key):
                raise self._error(f"{where}.{key}", "missing required key")
        for key in ("tags", "vars"):
            if key in host and not isinstance(host[key], dict):
                raise self._error(f"{where}.{key}", "must be a mapping")
        # Text where the builder and the plan read text: a list or a mapping here is a typo, never a profile.
        for key in TEXT_KEYS:
            value = host.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
                raise self._error(f"{where}.{key}", f"{_shown(value)} is not text; accepted: {TEXT_KEYS[key]}")
        try:
            check_host_vars(host.get("vars") or {})
        except PlanError as exc:
            raise self._error(f"{where}.vars", str(exc)) from None
        name = str(host["name"])
        if not SAFE_HOSTNAME.match(name):
            # The builder would rename it; the operator's own name is kept or refused, never changed.
            raise self._error(
                f"{where}.name",
                f"{name!r} is not a host name; accepted: up to 63 letters, digits, '.', '_' and '-', starting "
                "with a letter or digit",
            )
        if name in seen:
            raise self._error(f"{where}.name", f"{name!r} is listed twice")
        seen.add(name)

    def instances(self) -> Iterator[Instance]:
        hosts = self._load()
        seen: set[str] = set()
        for index, host in enumerate(hosts):
            self._check(index, host, seen)
        for host in hosts:
            hints = dict(host.get("vars") or {})
            if host.get("profile"):
                hints["gpufabric_profile"] = str(host["profile"])
            yield Instance(
                cloud=str(host.get("cloud", "baremetal")),
                instance_id=str(host["name"]),
                name=str(host["name"]),
                instance_type=str(host.get("instance_type", "")),
                state=RUNNING,
                private_ip=str(host["address"]),  # the connection address, an IP or a DNS name
                placement=str(host["placement"]) if host.get("placement") else None,
                tags={str(k): str(v) for k, v in (host.get("tags") or {}).items()},
                hints=hints,
                gpu_host=True,  # listed by hand for its GPUs: an unknown type or cloud is fabric_unknown, not dropped
            )
