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

Every host counts as a GPU host. Bad input is one DiscoveryError naming the
file, the host and the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils.bounded_yaml import YAMLFileError, load_file
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import RUNNING, DiscoveryError, Instance

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
        return data["hosts"]

    def _check(self, index: int, host: Any, seen: set[str]) -> None:
        where = f"hosts[{index}]"
        if not isinstance(host, dict):
            raise self._error(where, "must be a mapping")
        for key in host:
            if key not in HOST_KEYS:
                raise self._error(f"{where}.{key}", f"unknown key; accepted: {', '.join(HOST_KEYS)}")
        for key, required in HOST_KEYS.items():
            if required and not host.get(key):
                raise self._error(f"{where}.{key}", "missing required key")
        for key in ("tags", "vars"):
            if key in host and not isinstance(host[key], dict):
                raise self._error(f"{where}.{key}", "must be a mapping")
        name = str(host["name"])
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
            )
