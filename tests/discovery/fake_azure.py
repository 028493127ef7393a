# SPDX-License-Identifier: Apache-2.0
"""A fake Azure Resource Manager on 127.0.0.1 for the ARM list calls fleet_azure makes.

Serves, from an in-memory fleet, the documented JSON shapes of:

- GET /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.Compute/virtualMachines
  (full models; with ``statusOnly=true`` only id, name, location, vmId and the
  instance view, the shape callers report ARM answers with)
- GET /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.Compute/virtualMachineScaleSets
- GET .../virtualMachineScaleSets/{vmss}/virtualMachines (instance view only with ``$expand=instanceView``)
- GET .../virtualMachineScaleSets/{vmss}/networkInterfaces and .../publicipaddresses
- GET /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.Network/networkInterfaces
- GET /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.Network/publicIPAddresses

Lists are paged as ARM pages them: ``{"value": [...], "nextLink": "<absolute url>"}``
with a ``$skiptoken``. Paths match case-insensitively, as ARM's do; every call
must carry ``api-version``. Knobs: ``throttle(n, status)`` answers the next n
requests with 429/503 and ``Retry-After: 0``; ``reject_token`` answers 401;
``forbid(kind)`` answers 403 AuthorizationFailed naming the RBAC action.
``requests`` records every request (its kind, path and query).

Not covered: the HTTPS transport, tokens (any bearer token is accepted unless
``reject_token``), $filter, per-VM GETs, other resource types, and how ARM
really orders or sizes its pages.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

COMPUTE, NETWORK = "Microsoft.Compute", "Microsoft.Network"

# kind of list -> the RBAC action ARM names when it refuses it
ACTIONS = {
    "virtualMachines": f"{COMPUTE}/virtualMachines/read",
    "virtualMachineScaleSets": f"{COMPUTE}/virtualMachineScaleSets/read",
    "virtualMachineScaleSets/virtualMachines": f"{COMPUTE}/virtualMachineScaleSets/virtualMachines/read",
    "virtualMachineScaleSets/networkInterfaces": f"{COMPUTE}/virtualMachineScaleSets/networkInterfaces/read",
    "virtualMachineScaleSets/publicIPAddresses": f"{COMPUTE}/virtualMachineScaleSets/publicIPAddresses/read",
    "networkInterfaces": f"{NETWORK}/networkInterfaces/read",
    "publicIPAddresses": f"{NETWORK}/publicIPAddresses/read",
}

SUB = r"^/subscriptions/(?P<sub>[^/]+)"
RG = r"(?:/resourcegroups/(?P<rg>[^/]+))?"
VMSS = r"/resourcegroups/(?P<rg>[^/]+)/providers/microsoft\.compute/virtualmachinescalesets/(?P<vmss>[^/]+)"
# ARM paths are case-insensitive (the SDK itself asks for .../publicipaddresses in lower case).
ROUTES = [
    (re.compile(pattern, re.IGNORECASE), kind)
    for pattern, kind in [
        (SUB + RG + r"/providers/microsoft\.compute/virtualmachines$", "virtualMachines"),
        (SUB + RG + r"/providers/microsoft\.compute/virtualmachinescalesets$", "virtualMachineScaleSets"),
        (SUB + VMSS + r"/virtualmachines$", "virtualMachineScaleSets/virtualMachines"),
        (SUB + VMSS + r"/networkinterfaces$", "virtualMachineScaleSets/networkInterfaces"),
        (SUB + VMSS + r"/publicipaddresses$", "virtualMachineScaleSets/publicIPAddresses"),
        (SUB + RG + r"/providers/microsoft\.network/networkinterfaces$", "networkInterfaces"),
        (SUB + RG + r"/providers/microsoft\.network/publicipaddresses$", "publicIPAddresses"),
    ]
]


@dataclass
class FakeVM:
    """A VM, or an instance of a scale set (then size, group and location come from the scale set)."""

    name: str
    resource_group: str = "rg-gpu"
    location: str = "eastus"
    vm_size: str = "Standard_D4s_v5"
    power: str | None = "running"  # PowerState/<power>; None: the instance view has no power status
    zone: str | None = None
    proximity_placement_group: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    private_ip: str = "10.0.0.4"
    public_ip: str | None = None
    accelerated_networking: bool = False
    vm_id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class FakeScaleSet:
    name: str
    instances: list[FakeVM]
    resource_group: str = "rg-gpu"
    location: str = "eastus"
    vm_size: str = "Standard_ND96isr_H100_v5"
    orchestration_mode: str = "Uniform"  # Flexible: the instances are served as ordinary VMs
    proximity_placement_group: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


class FakeAzure:
    """The server. Use as a context manager; ``url`` is its base URL."""

    def __init__(
        self,
        subscription_id: str,
        vms: list[FakeVM] | None = None,
        scale_sets: list[FakeScaleSet] | None = None,
        page_size: int = 100,
    ) -> None:
        self.subscription_id = subscription_id
        self.vms = list(vms or [])
        self.scale_sets = list(scale_sets or [])
        self.page_size = page_size
        self.requests: list[dict[str, Any]] = []
        self.authorizations: set[str] = set()
        self.reject_token = False
        self.forbidden: set[str] = set()
        self._throttle: list[int] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._lists: dict[tuple, list[dict] | None] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeAzure:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- knobs ---------------------------------------------------------------------------------

    def throttle(self, times: int, status: int = 429) -> None:
        """Answer the next ``times`` requests with ``status`` and Retry-After: 0."""
        with self._lock:
            self._throttle.extend([status] * times)

    def forbid(self, kind: str) -> None:
        """Answer 403 AuthorizationFailed for one kind of list (a key of ACTIONS)."""
        self.forbidden.add(kind)

    def count(self, kind: str | None = None, **query: str) -> int:
        """Requests served or refused, of one kind and with these query values if given."""
        return sum(
            1
            for r in self.requests
            if (kind is None or r["kind"] == kind) and all(r["query"].get(k) == v for k, v in query.items())
        )

    # --- answers -------------------------------------------------------------------------------

    def answer(self, path: str, query: dict[str, str], authorization: str) -> tuple[int, dict[str, str], Any]:
        kind, match = _route(path)
        with self._lock:
            self.requests.append({"kind": kind, "path": path, "query": query})
            self.authorizations.add(authorization)
            throttled = self._throttle.pop(0) if self._throttle else None
        if throttled:
            code = "TooManyRequests" if throttled == 429 else "ServiceUnavailable"
            return throttled, {"Retry-After": "0"}, _error(code, "The request is being throttled. Retry later.")
        if self.reject_token or not authorization.startswith("Bearer "):
            challenge = 'Bearer authorization_uri="https://login.invalid/", error="invalid_token"'
            return 401, {"WWW-Authenticate": challenge}, _error("InvalidAuthenticationToken", "The token is invalid.")
        if match is None:
            return 404, {}, _error("InvalidResourceType", f"no fake route for {path}")
        if "api-version" not in query:
            return 400, {}, _error("MissingApiVersionParameter", "The api-version query parameter is required.")
        if match["sub"].lower() != self.subscription_id.lower():
            return 404, {}, _error("SubscriptionNotFound", f"The subscription '{match['sub']}' could not be found.")
        if kind in self.forbidden:
            message = (
                f"The client 'fleet-reader' with object id '00000000-0000-0000-0000-000000000001' does not have "
                f"authorization to perform action '{ACTIONS[kind]}' over scope '/subscriptions/{match['sub']}' "
                "or the scope is invalid. If access was recently granted, please refresh your credentials."
            )
            return 403, {}, _error("AuthorizationFailed", message)
        items = self._list(kind, match.groupdict(), query)
        if items is None:
            return 400, {}, _error("OperationNotAllowed", "The operation is not allowed for this scale set.")
        return 200, {}, self._page(path, query, items)

    def _list(self, kind: str, where: dict[str, str | None], query: dict[str, str]) -> list[dict] | None:
        """The whole list a call pages through, built once per distinct call (the fleet is fixed once served)."""
        key = (kind, *sorted(where.items()), *sorted((k, v) for k, v in query.items() if k != "$skiptoken"))
        with self._lock:
            if key not in self._lists:
                self._lists[key] = self._items(kind, where, query)
            return self._lists[key]

    def _items(self, kind: str, where: dict[str, str | None], query: dict[str, str]) -> list[dict] | None:
        group = (where.get("rg") or "").lower()

        def in_group(resource_group: str) -> bool:
            return not group or resource_group.lower() == group

        if kind == "virtualMachines":
            status_only = query.get("statusOnly", "").lower() == "true"
            return [
                self._vm_json(vm, scale_set, status_only)
                for vm, scale_set in self._standalone()
                if in_group(vm.resource_group)
            ]
        if kind == "virtualMachineScaleSets":
            return [self._scale_set_json(s) for s in self.scale_sets if in_group(s.resource_group)]
        if kind in ("networkInterfaces", "publicIPAddresses"):
            vms = [(self._vm_id(vm), vm) for vm, _scale_set in self._standalone() if in_group(vm.resource_group)]
            if kind == "networkInterfaces":
                return [self._nic_json(vm_id, vm) for vm_id, vm in vms]
            return [self._pip_json(vm_id, vm) for vm_id, vm in vms if vm.public_ip]
        scale_set = self._scale_set(where)
        if scale_set is None:
            return []
        if scale_set.orchestration_mode == "Flexible":
            return None
        members = [(self._member_id(scale_set, i), i, vm) for i, vm in enumerate(scale_set.instances)]
        if kind == "virtualMachineScaleSets/virtualMachines":
            expand = query.get("$expand", "").lower() == "instanceview"
            return [self._member_json(scale_set, i, vm, expand) for _member_id, i, vm in members]
        if kind == "virtualMachineScaleSets/networkInterfaces":
            return [self._nic_json(member_id, vm) for member_id, _i, vm in members]
        return [self._pip_json(member_id, vm) for member_id, _i, vm in members if vm.public_ip]

    def _page(self, path: str, query: dict[str, str], items: list[dict]) -> dict[str, Any]:
        start = int(query.get("$skiptoken", "0"))
        page: dict[str, Any] = {"value": items[start : start + self.page_size]}
        if start + self.page_size < len(items):
            following = {k: v for k, v in query.items() if k != "$skiptoken"}
            following["$skiptoken"] = str(start + self.page_size)
            page["nextLink"] = f"{self.url}{path}?{urlencode(following)}"
        return page

    # --- the fleet as ARM resources ------------------------------------------------------------

    def _standalone(self) -> list[tuple[FakeVM, FakeScaleSet | None]]:
        flexible = [(vm, s) for s in self.scale_sets if s.orchestration_mode == "Flexible" for vm in s.instances]
        return [(vm, None) for vm in self.vms] + flexible

    def _scale_set(self, where: dict[str, str | None]) -> FakeScaleSet | None:
        for s in self.scale_sets:
            if s.resource_group.lower() == (where["rg"] or "").lower() and s.name.lower() == where["vmss"].lower():
                return s
        return None

    def _base(self, resource_group: str, provider: str) -> str:
        return f"/subscriptions/{self.subscription_id}/resourceGroups/{resource_group}/providers/{provider}"

    def _vm_id(self, vm: FakeVM) -> str:
        return f"{self._base(vm.resource_group, COMPUTE)}/virtualMachines/{vm.name}"

    def _scale_set_id(self, s: FakeScaleSet) -> str:
        return f"{self._base(s.resource_group, COMPUTE)}/virtualMachineScaleSets/{s.name}"

    def _member_id(self, s: FakeScaleSet, index: int) -> str:
        return f"{self._scale_set_id(s)}/virtualMachines/{index}"

    def _ppg(self, resource_group: str, name: str | None) -> dict[str, str] | None:
        return {"id": f"{self._base(resource_group, COMPUTE)}/proximityPlacementGroups/{name}"} if name else None

    def _nic_id(self, owner_id: str, vm: FakeVM) -> str:
        if "/virtualMachineScaleSets/" in owner_id:
            return f"{owner_id}/networkInterfaces/nic"
        return f"{self._base(vm.resource_group, NETWORK)}/networkInterfaces/{vm.name}-nic"

    @staticmethod
    def _reference(resource_id: str) -> str:
        """The id as another resource refers to it: ARM does not always repeat a resource's casing."""
        return re.sub(r"/resourceGroups/([^/]+)/", lambda m: f"/resourcegroups/{m[1].upper()}/", resource_id)

    @staticmethod
    def _instance_view(vm: FakeVM) -> dict[str, Any]:
        statuses = [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"}]
        if vm.power:
            statuses.append({"code": f"PowerState/{vm.power}", "level": "Info", "displayStatus": f"VM {vm.power}"})
        return {"computerName": vm.name, "statuses": statuses}

    def _vm_json(self, vm: FakeVM, scale_set: FakeScaleSet | None, status_only: bool) -> dict[str, Any]:
        vm_id = self._vm_id(vm)
        head = {"id": vm_id, "name": vm.name, "type": f"{COMPUTE}/virtualMachines", "location": vm.location}
        if status_only:
            return {**head, "properties": {"vmId": vm.vm_id, "instanceView": self._instance_view(vm)}}
        properties: dict[str, Any] = {
            "vmId": vm.vm_id,
            "provisioningState": "Succeeded",
            "hardwareProfile": {"vmSize": vm.vm_size},
            "osProfile": {"computerName": vm.name, "adminUsername": "azureuser"},
            "storageProfile": {"osDisk": {"osType": "Linux", "createOption": "FromImage", "name": f"{vm.name}-os"}},
            "networkProfile": {
                "networkInterfaces": [{"id": self._reference(self._nic_id(vm_id, vm)), "properties": {"primary": True}}]
            },
        }
        ppg = self._ppg(vm.resource_group, vm.proximity_placement_group)
        if ppg:
            properties["proximityPlacementGroup"] = ppg
        if scale_set is not None:
            properties["virtualMachineScaleSet"] = {"id": self._scale_set_id(scale_set)}
        body = {**head, "tags": vm.tags, "properties": properties}
        if vm.zone:
            body["zones"] = [vm.zone]
        return body

    def _scale_set_json(self, s: FakeScaleSet) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "orchestrationMode": s.orchestration_mode,
            "provisioningState": "Succeeded",
            "uniqueId": str(uuid.uuid5(uuid.NAMESPACE_URL, s.name)),
            "virtualMachineProfile": {
                "networkProfile": {
                    "networkInterfaceConfigurations": [
                        {"name": "nic", "properties": {"primary": True, "enableAcceleratedNetworking": True}}
                    ]
                }
            },
        }
        ppg = self._ppg(s.resource_group, s.proximity_placement_group)
        if ppg:
            properties["proximityPlacementGroup"] = ppg
        return {
            "id": self._scale_set_id(s),
            "name": s.name,
            "type": f"{COMPUTE}/virtualMachineScaleSets",
            "location": s.location,
            "tags": s.tags,
            "sku": {"name": s.vm_size, "tier": "Standard", "capacity": len(s.instances)},
            "properties": properties,
        }

    def _member_json(self, s: FakeScaleSet, index: int, vm: FakeVM, expand: bool) -> dict[str, Any]:
        member_id = self._member_id(s, index)
        properties: dict[str, Any] = {
            "vmId": vm.vm_id,
            "latestModelApplied": True,
            "provisioningState": "Succeeded",
            "osProfile": {"computerName": f"{s.name}{index:06x}"},
            "networkProfile": {"networkInterfaces": [{"id": self._reference(self._nic_id(member_id, vm))}]},
        }
        if expand:
            properties["instanceView"] = self._instance_view(vm)
        body: dict[str, Any] = {
            "id": member_id,
            "name": f"{s.name}_{index}",
            "type": f"{COMPUTE}/virtualMachineScaleSets/virtualMachines",
            "location": s.location,
            "instanceId": str(index),
            "sku": {"name": s.vm_size, "tier": "Standard"},
            "tags": vm.tags,
            "properties": properties,
        }
        if vm.zone:
            body["zones"] = [vm.zone]
        return body

    def _nic_json(self, owner_id: str, vm: FakeVM) -> dict[str, Any]:
        nic_id = self._nic_id(owner_id, vm)
        config: dict[str, Any] = {
            "privateIPAddress": vm.private_ip,
            "privateIPAllocationMethod": "Dynamic",
            "privateIPAddressVersion": "IPv4",
            "primary": True,
            "subnet": {"id": f"{self._base(vm.resource_group, NETWORK)}/virtualNetworks/vnet/subnets/default"},
        }
        if vm.public_ip:
            config["publicIPAddress"] = {"id": self._reference(self._pip_id(owner_id, vm))}
        return {
            "id": nic_id,
            "name": nic_id.rsplit("/", 1)[-1],
            "type": f"{NETWORK}/networkInterfaces",
            "location": vm.location,
            "properties": {
                "provisioningState": "Succeeded",
                "primary": True,
                "enableAcceleratedNetworking": vm.accelerated_networking,
                "virtualMachine": {"id": owner_id},
                "ipConfigurations": [
                    {"id": f"{nic_id}/ipConfigurations/ipconfig1", "name": "ipconfig1", "properties": config}
                ],
            },
        }

    def _pip_id(self, owner_id: str, vm: FakeVM) -> str:
        if "/virtualMachineScaleSets/" in owner_id:
            return f"{self._nic_id(owner_id, vm)}/ipConfigurations/ipconfig1/publicIPAddresses/pip"
        return f"{self._base(vm.resource_group, NETWORK)}/publicIPAddresses/{vm.name}-ip"

    def _pip_json(self, owner_id: str, vm: FakeVM) -> dict[str, Any]:
        pip_id = self._pip_id(owner_id, vm)
        return {
            "id": pip_id,
            "name": pip_id.rsplit("/", 1)[-1],
            "type": f"{NETWORK}/publicIPAddresses",
            "location": vm.location,
            "sku": {"name": "Standard"},
            "properties": {
                "ipAddress": vm.public_ip,
                "publicIPAllocationMethod": "Static",
                "publicIPAddressVersion": "IPv4",
                "ipConfiguration": {"id": f"{self._nic_id(owner_id, vm)}/ipConfigurations/ipconfig1"},
            },
        }


def _route(path: str) -> tuple[str, re.Match[str] | None]:
    for pattern, kind in ROUTES:
        match = pattern.match(path)
        if match:
            return kind, match
    return "unknown", None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _handler(fake: FakeAzure) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
            status, headers, body = fake.answer(parts.path, query, self.headers.get("Authorization", ""))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-ms-request-id", str(uuid.uuid4()))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler
