# SPDX-License-Identifier: Apache-2.0
"""Azure fleet source: every VM and VM scale set instance of a subscription, through the official SDKs.

Uses azure-mgmt-compute and azure-mgmt-network (plus azure-identity for the
default credential). The number of ARM calls grows with pages and with scale
sets, never with instances:

- standalone VMs (and VMs of Flexible scale sets): ``virtual_machines.list_all()``
  (or ``list(rg)`` per requested resource group) for the model;
- their power state: ``virtual_machines.list_all(status_only="true")``, one more
  paged pass over the subscription. ARM's VM list carries no power state, and
  the ``statusOnly=true`` answer carries the instance view but not the rest of
  the model (size, NICs, tags), so the two passes are joined by resource id.
  The alternative, one ``instance_view`` call per VM, is what this avoids;
- scale sets: ``virtual_machine_scale_sets.list_all()`` (or ``list(rg)``), then for
  each Uniform scale set one paged ``virtual_machine_scale_set_vms.list(...,
  expand="instanceView")`` (which does carry the power state), one NIC list and
  one public IP list: a Uniform scale set's NICs and public IPs are children of
  the scale set and are not returned by the subscription-wide network lists;
- NICs and public IPs: ``network_interfaces.list_all()`` and
  ``public_ip_addresses.list_all()`` once per subscription (or ``list(rg)``),
  joined to the VMs by lowercased id, since ARM ids are case-insensitive and
  references do not always repeat a resource's casing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import (
    CALL_RETRIES,
    CALL_TIMEOUT_S,
    OTHER,
    PENDING,
    RUNNING,
    STOPPED,
    DiscoveryError,
    Instance,
    is_loopback,
    missing_sdk,
)

CLOUD = "azure"
DEFAULT_ENDPOINT = "https://management.azure.com"

# PowerState/<code> from an instance view; stopping, deallocating and unknown codes are OTHER.
POWER_STATES = {"running": RUNNING, "starting": PENDING, "stopped": STOPPED, "deallocated": STOPPED}

# The RBAC action each list call needs: named in the error when ARM refuses the call.
READ_VMS = "Microsoft.Compute/virtualMachines/read"
READ_SCALE_SETS = "Microsoft.Compute/virtualMachineScaleSets/read"
READ_SCALE_SET_VMS = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read"
READ_SCALE_SET_NICS = "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"
READ_SCALE_SET_PUBLIC_IPS = "Microsoft.Compute/virtualMachineScaleSets/publicIPAddresses/read"
READ_NICS = "Microsoft.Network/networkInterfaces/read"
READ_PUBLIC_IPS = "Microsoft.Network/publicIPAddresses/read"


class AzureSource:
    """Lists the VMs and VM scale set instances of one Azure subscription.

    Options:
        subscription_id: the subscription to list.
        resource_groups: list only these resource groups (VMs, scale sets, NICs and
            public IPs are then listed per group; a NIC in another group is not seen).
            Power states still come from the one subscription-wide ``statusOnly``
            list (ARM has no per-group form of it), joined to the VMs found; with a
            role granted only on resource groups, that call relies on ARM filtering
            a subscription-level list to what the caller may read. Default: the
            whole subscription.
        endpoint: the Azure Resource Manager URL, for a private or sovereign endpoint
            or a test server. Default: https://management.azure.com. Plain http is
            accepted only for a loopback address (a bearer token must not cross a
            network in clear).
        credential: an azure-core ``TokenCredential``. Default: azure-identity's
            ``DefaultAzureCredential`` (environment, workload identity, managed
            identity, Azure CLI, ...).
        retry_total, retry_backoff_factor: the SDK RetryPolicy, which retries 429 and
            5xx answers, dropped connections and read timeouts, and honours Retry-After;
            default 2 retries (fleet_base.CALL_RETRIES).
        connection_timeout, read_timeout: seconds, per HTTP request; default 10
            (fleet_base.CALL_TIMEOUT_S): an endpoint that accepts and never answers fails
            within (retry_total + 1) x read_timeout plus the backoff.
    """

    cloud = CLOUD

    def __init__(
        self,
        subscription_id: str,
        resource_groups: list[str] | None = None,
        endpoint: str | None = None,
        credential: Any = None,
        *,
        retry_total: int = CALL_RETRIES,
        retry_backoff_factor: float = 0.8,
        connection_timeout: float = CALL_TIMEOUT_S,
        read_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        self.subscription_id = subscription_id
        self.resource_groups = list(resource_groups) if resource_groups else None
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self._credential = credential
        self._client_options: dict[str, Any] = {
            "retry_total": retry_total,
            # azure-core allows only 3 status retries by default, whatever retry_total says.
            "retry_status": retry_total,
            "retry_backoff_factor": retry_backoff_factor,
            "connection_timeout": connection_timeout,
            "read_timeout": read_timeout,
        }
        # Passed to every list call: azure-core's bearer policy refuses plain http unless
        # told otherwise per request (its `enforce_https` option).
        self._call_options = {"enforce_https": False} if self._plain_http_loopback() else {}

    def instances(self) -> Iterator[Instance]:
        """Every VM and scale set instance, in all states. Lists everything before yielding anything."""
        compute, network = self._clients()
        vms = self._standalone_vms(compute)
        power = self._power_states(compute)
        addresses = Addresses(self._nics(network), self._public_ips(network))
        members = []
        for scale_set in self._uniform_scale_sets(compute):
            scale_set_vms = self._scale_set_vms(compute, scale_set)
            if scale_set_vms:
                addresses.add(*self._scale_set_network(network, scale_set))
                members.extend((scale_set, vm) for vm in scale_set_vms)
        records = [self._vm_instance(vm, power, addresses) for vm in vms]
        records += [self._scale_set_instance(scale_set, vm, addresses) for scale_set, vm in members]
        yield from records

    # --- clients -------------------------------------------------------------------------------

    def _plain_http_loopback(self) -> bool:
        if not self.endpoint:
            return False
        parts = urlsplit(self.endpoint)
        if parts.scheme == "https":
            return False
        if parts.scheme != "http" or not is_loopback(parts.hostname or ""):
            raise DiscoveryError(
                CLOUD,
                f"endpoint {self.endpoint} is not https; plain http is accepted only for a loopback address",
            )
        return True

    def _clients(self) -> tuple[Any, Any]:
        try:
            from azure.mgmt.compute import ComputeManagementClient
            from azure.mgmt.network import NetworkManagementClient
        except ImportError as exc:
            raise missing_sdk(CLOUD, _package_of(exc, "azure-mgmt-compute"), "azure") from exc
        options = dict(self._client_options, credential=self._credential or _default_credential())
        if self.endpoint:
            options["base_url"] = self.endpoint
        return (
            ComputeManagementClient(subscription_id=self.subscription_id, **options),
            NetworkManagementClient(subscription_id=self.subscription_id, **options),
        )

    # --- list calls (each one paged; a failure becomes one DiscoveryError) -------------------

    def _fetch(self, action: str, list_call: Callable[..., Iterable[Any]], *args: Any, **kwargs: Any) -> list[Any]:
        """Run one paged list call to its last page; any SDK or HTTP failure becomes a DiscoveryError."""
        try:
            return list(list_call(*args, **kwargs, **self._call_options))
        except DiscoveryError:
            raise
        except Exception as exc:
            raise self._explain(exc, action) from exc

    def _per_scope(
        self, action: str, list_all: Callable[..., Iterable[Any]], list_rg: Callable[..., Iterable[Any]]
    ) -> list[Any]:
        """The subscription-wide list, or the per-resource-group list for each requested group."""
        if self.resource_groups is None:
            return self._fetch(action, list_all)
        return [item for group in self.resource_groups for item in self._fetch(action, list_rg, group)]

    def _standalone_vms(self, compute: Any) -> list[Any]:
        return self._per_scope(READ_VMS, compute.virtual_machines.list_all, compute.virtual_machines.list)

    def _power_states(self, compute: Any) -> dict[str, str]:
        """Lowercased VM id -> fleet state, from one statusOnly pass over the subscription."""
        statuses = self._fetch(READ_VMS, compute.virtual_machines.list_all, status_only="true")
        return {vm.id.lower(): power_state(vm.instance_view) for vm in statuses if vm.id}

    def _uniform_scale_sets(self, compute: Any) -> list[Any]:
        scale_sets = self._per_scope(
            READ_SCALE_SETS, compute.virtual_machine_scale_sets.list_all, compute.virtual_machine_scale_sets.list
        )
        # A Flexible scale set's instances are ordinary VMs, already listed with the standalone ones.
        return [s for s in scale_sets if (s.orchestration_mode or "Uniform").lower() != "flexible"]

    def _scale_set_vms(self, compute: Any, scale_set: Any) -> list[Any]:
        return self._fetch(
            READ_SCALE_SET_VMS,
            compute.virtual_machine_scale_set_vms.list,
            resource_group(scale_set.id),
            scale_set.name,
            expand="instanceView",
        )

    def _nics(self, network: Any) -> list[Any]:
        return self._per_scope(READ_NICS, network.network_interfaces.list_all, network.network_interfaces.list)

    def _public_ips(self, network: Any) -> list[Any]:
        return self._per_scope(READ_PUBLIC_IPS, network.public_ip_addresses.list_all, network.public_ip_addresses.list)

    def _scale_set_network(self, network: Any, scale_set: Any) -> tuple[list[Any], list[Any]]:
        group = resource_group(scale_set.id)
        nics = self._fetch(
            READ_SCALE_SET_NICS,
            network.network_interfaces.list_virtual_machine_scale_set_network_interfaces,
            group,
            scale_set.name,
        )
        public_ips = self._fetch(
            READ_SCALE_SET_PUBLIC_IPS,
            network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses,
            group,
            scale_set.name,
        )
        return nics, public_ips

    # --- records -------------------------------------------------------------------------------

    def _vm_instance(self, vm: Any, power: dict[str, str], addresses: Addresses) -> Instance:
        nic = addresses.primary_nic(vm.network_profile)
        private_ip, public_ip = addresses.of(nic)
        return Instance(
            cloud=CLOUD,
            instance_id=vm.id,
            name=vm.name,
            instance_type=vm.hardware_profile.vm_size if vm.hardware_profile else "",
            state=power.get(vm.id.lower(), OTHER),
            region=vm.location,
            zone=first(vm.zones),
            private_ip=private_ip,
            public_ip=public_ip,
            placement=last_segment(vm.proximity_placement_group),
            tags=dict(vm.tags or {}),
            ids=self._ids(vm),
            extra={
                "accelerated_networking": bool(nic is not None and nic.enable_accelerated_networking),
                "scale_set": last_segment(vm.virtual_machine_scale_set),
            },
        )

    def _scale_set_instance(self, scale_set: Any, vm: Any, addresses: Addresses) -> Instance:
        nic = addresses.primary_nic(vm.network_profile)
        private_ip, public_ip = addresses.of(nic)
        size = (vm.sku and vm.sku.name) or (vm.hardware_profile and vm.hardware_profile.vm_size)
        return Instance(
            cloud=CLOUD,
            instance_id=vm.id,
            name=vm.name,
            instance_type=size or (scale_set.sku.name if scale_set.sku else ""),
            state=power_state(vm.instance_view),
            region=vm.location or scale_set.location,
            zone=first(vm.zones),
            private_ip=private_ip,
            public_ip=public_ip,
            # Instances do not carry the proximity placement group: the scale set does.
            placement=last_segment(scale_set.proximity_placement_group),
            tags={**(scale_set.tags or {}), **(vm.tags or {})},
            ids=self._ids(vm),
            extra={
                "accelerated_networking": bool(nic is not None and nic.enable_accelerated_networking),
                "scale_set": scale_set.name,
            },
        )

    def _ids(self, vm: Any) -> dict[str, str]:
        ids = {"subscription_id": self.subscription_id, "resource_group": resource_group(vm.id), "vm_id": vm.vm_id}
        return {key: value for key, value in ids.items() if value}

    # --- errors --------------------------------------------------------------------------------

    def _explain(self, exc: Exception, action: str) -> DiscoveryError:
        """One sentence for an SDK failure: what went wrong and what to do. Never includes a token."""
        from azure.core.exceptions import (
            ClientAuthenticationError,
            DecodeError,
            HttpResponseError,
            ServiceRequestError,
            ServiceResponseError,
            TooManyRedirectsError,
        )

        endpoint = self.endpoint or DEFAULT_ENDPOINT
        listed = action.removesuffix("/read")
        if isinstance(exc, ClientAuthenticationError):
            return DiscoveryError(CLOUD, self._credentials_message(exc))
        if isinstance(exc, DecodeError | json.JSONDecodeError):  # json's: an empty body
            status = f"HTTP {exc.status_code} with " if getattr(exc, "status_code", None) else ""
            return DiscoveryError(
                CLOUD,
                f"{endpoint} did not answer as Azure Resource Manager while listing {listed} ({status}an empty, "
                f"truncated or non-JSON body: {first_line(str(exc))}); check the endpoint and proxy settings",
            )
        if isinstance(exc, TooManyRedirectsError):
            return DiscoveryError(
                CLOUD, f"{endpoint} answered with redirects that never end while listing {listed}: check the endpoint"
            )
        if isinstance(exc, HttpResponseError) and exc.status_code is not None:
            code, message = error_details(exc)
            if exc.status_code == 403 or code in ("AuthorizationFailed", "LinkedAuthorizationFailed"):
                return DiscoveryError(
                    CLOUD,
                    f"permission denied in subscription {self.subscription_id} ({code or 'HTTP 403'}): "
                    f"the identity needs '{action}' (the Reader role includes it); ARM said: {message}",
                )
            if exc.status_code in (429, 503):
                return DiscoveryError(
                    CLOUD,
                    f"{endpoint} was still throttling after {self._client_options['retry_total']} retries "
                    f"(HTTP {exc.status_code} {code or ''}: {message}); try again later",
                )
            answer = f"HTTP {exc.status_code} {code}" if code else f"HTTP {exc.status_code}"
            return DiscoveryError(CLOUD, f"listing {listed} failed with {answer}: {message} (from {endpoint})")
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            return DiscoveryError(CLOUD, f"cannot reach {endpoint}: {connection_reason(exc)}")
        return DiscoveryError(
            CLOUD, f"listing {listed} at {endpoint} failed: {type(exc).__name__}: {first_line(str(exc))}"
        )

    def _credentials_message(self, exc: Any) -> str:
        if getattr(exc, "status_code", None) == 401:
            code, message = error_details(exc)
            return (
                f"credentials were rejected by Azure Resource Manager (HTTP 401 {code or ''}): {message}; "
                "check the service principal, managed identity or `az login`, and its tenant"
            )
        # Raised by the credential itself: no token could be obtained.
        return (
            f"credentials were rejected or are missing: no token could be obtained ({first_line(exc.message)}); "
            "set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, use a managed identity, or run `az login`"
        )


class Addresses:
    """NICs and public IPs by lowercased id, and the addresses of a VM's primary NIC."""

    def __init__(self, nics: Iterable[Any], public_ips: Iterable[Any]) -> None:
        self.nics: dict[str, Any] = {}
        self.public_ips: dict[str, str] = {}
        self.add(nics, public_ips)

    def add(self, nics: Iterable[Any], public_ips: Iterable[Any]) -> None:
        self.nics.update((nic.id.lower(), nic) for nic in nics if nic.id)
        self.public_ips.update((ip.id.lower(), ip.ip_address) for ip in public_ips if ip.id and ip.ip_address)

    def primary_nic(self, network_profile: Any) -> Any:
        references = list((network_profile and network_profile.network_interfaces) or [])
        primary = next((ref for ref in references if ref.primary), references[0] if references else None)
        return self.nics.get(primary.id.lower()) if primary is not None and primary.id else None

    def of(self, nic: Any) -> tuple[str | None, str | None]:
        """(private IP, public IP) of the NIC's primary IP configuration."""
        configurations = list((nic is not None and nic.ip_configurations) or [])
        config = next((c for c in configurations if c.primary), configurations[0] if configurations else None)
        if config is None:
            return None, None
        public = config.public_ip_address
        public_ip = None
        if public is not None:
            # A list answer holds a reference ({"id": ...}); an expanded one may hold the address itself.
            public_ip = public.ip_address or (self.public_ips.get(public.id.lower()) if public.id else None)
        return config.private_ip_address, public_ip


def power_state(instance_view: Any) -> str:
    """Fleet state from an instance view's PowerState/<code> status."""
    for status in (instance_view and instance_view.statuses) or []:
        code = status.code or ""
        if code.lower().startswith("powerstate/"):
            return POWER_STATES.get(code.split("/", 1)[1].lower(), OTHER)
    return OTHER


def resource_group(resource_id: str | None) -> str | None:
    """The resource group named in an ARM id (…/resourceGroups/<name>/…), as written there."""
    parts = (resource_id or "").split("/")
    lowered = [part.lower() for part in parts]
    if "resourcegroups" in lowered:
        index = lowered.index("resourcegroups") + 1
        if index < len(parts):
            return parts[index]
    return None


def last_segment(reference: Any) -> str | None:
    """The name at the end of a SubResource reference's id, e.g. a proximity placement group."""
    resource_id = reference.id if reference is not None else None
    return resource_id.rstrip("/").rsplit("/", 1)[-1] if resource_id else None


def first(values: Any) -> Any:
    return values[0] if values else None


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def error_details(exc: Any) -> tuple[str | None, str]:
    """The ARM error code and message of an HttpResponseError."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or first_line(getattr(exc, "reason", None)) or first_line(str(exc))
    return code, message.rstrip(".")


def connection_reason(exc: Exception) -> str:
    """The operating system's reason (e.g. 'Connection refused') found in the exception chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        reason = getattr(current, "reason", None)
        if isinstance(reason, OSError) and reason.strerror:
            return reason.strerror
        current = getattr(current, "inner_exception", None) or current.__cause__ or current.__context__
    text = first_line(str(exc))
    return text.rsplit(": ", 1)[-1] if ": " in text else text or type(exc).__name__


def _package_of(exc: ImportError, default: str) -> str:
    name = exc.name or ""
    for package in ("azure-mgmt-compute", "azure-mgmt-network", "azure-identity", "azure-core"):
        if name.replace(".", "-").startswith(package):
            return package
    return default


def _default_credential() -> Any:
    # Imported only when no credential is given: tests and callers with their own credential never load it.
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError as exc:
        raise missing_sdk(CLOUD, "azure-identity", "azure") from exc
    return DefaultAzureCredential()
