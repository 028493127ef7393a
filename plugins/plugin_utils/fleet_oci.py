# SPDX-License-Identifier: Apache-2.0
"""OCI fleet source: every compute instance of one compartment in the given regions, through the official ``oci`` SDK.

API calls per region, none of them per instance (each list is paginated with ``opc-next-page``):

- ListInstances (compartment): the instances, their shape, state, availability domain and tags;
- ListVnicAttachments (compartment): which VNIC and subnet belongs to which instance;
- ListPrivateIps, once per subnet of a primary VNIC: the VNICs' addresses. OCI has no list of private IPs by
  compartment; the per-VNIC alternatives (GetVnic, ListPrivateIps by VNIC) would cost one call per instance, while
  a subnet holds many instances, so one list per subnet keeps the count flat;
- ListPublicIps, once for the region (reserved IPs) and once per availability domain (ephemeral IPs): the public
  address of each private IP;
- ListClusterNetworks, then ListClusterNetworkInstances once per cluster network: the RDMA cluster network of
  each instance;
- ListComputeClusters, then ListInstances filtered by compute cluster once per compute cluster: the RDMA compute
  cluster of instances launched into one (the Instance resource does not carry its compute cluster);
- ListComputeGpuMemoryClusters, then ListComputeGpuMemoryClusterInstances once per GPU memory cluster, only in a
  region with a rack-scale shape (BM.GPU.GB200.4, BM.GPU.GB300.4): the GPU memory fabric (NVL72 rack) of each
  instance, its NVLink domain (host variable gpufabric_nvlink_domain).

A region with no instance in the compartment costs one call. Instances of sub-compartments are not listed: give
each compartment as its own source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import (
    CALL_RETRIES,
    CALL_TIMEOUT_S,
    OTHER,
    PENDING,
    RUNNING,
    STOPPED,
    DiscoveryError,
    Instance,
    missing_sdk,
)

CLOUD = "oci"

# Instance lifecycle states (ListInstances lifecycleState) as fleet_base states; the rest (MOVING,
# CREATING_IMAGE, TERMINATING, TERMINATED and values newer than the SDK) become OTHER.
STATES = {
    "RUNNING": RUNNING,
    "STOPPED": STOPPED,
    "STOPPING": STOPPED,
    "PROVISIONING": PENDING,
    "STARTING": PENDING,
}

# HTTP statuses retried with backoff: 429 TooManyRequests is OCI's throttling answer; 503 is its "try again later".
THROTTLING_STATUSES = frozenset({429, 503})

# The IAM policy statement each list operation needs, named when OCI refuses it (404 NotAuthorizedOrNotFound, 403).
POLICIES = {
    "ListInstances": ("read instance-family",),
    "ListVnicAttachments": ("read instance-family", "read virtual-network-family"),
    "ListPrivateIps": ("read virtual-network-family",),
    "ListPublicIps": ("read virtual-network-family",),
    "ListClusterNetworks": ("read compute-management-family",),
    "ListClusterNetworkInstances": ("read compute-management-family",),
    "ListComputeClusters": ("read compute-clusters",),
    "ListComputeGpuMemoryClusters": ("read compute-gpu-memory-clusters",),
    "ListComputeGpuMemoryClusterInstances": ("read compute-gpu-memory-clusters",),
}
# Shapes with rack-scale NVLink (BM.GPU.GB200.4, BM.GPU.GB200-v2.4, BM.GPU.GB300.4, ...): their NVLink domain is the
# GPU memory fabric (one NVL72 rack) of the GPU memory cluster they run in (docs.oracle.com, "GPU Memory Cluster and
# Memory Fabric"). Only a region with such an instance is asked for GPU memory clusters.
RACK_SCALE_SHAPE = re.compile(r"^BM\.GPU\.GB\d00")


@dataclass
class _Addresses:
    """A region's addresses, keyed for the join instance -> primary VNIC -> primary private IP -> public IP."""

    primary_vnic: dict[str, Any]  # instance OCID -> its primary VNIC attachment
    vnic_count: dict[str, int]  # instance OCID -> attached VNICs
    private_ip: dict[str, Any]  # VNIC OCID -> its primary private IP
    public_ip: dict[str, str]  # private IP OCID -> public IP address


class OciSource:
    """Lists the compute instances of one OCI compartment in the given regions.

    Options:
        compartment_id: OCID of the compartment whose instances are listed (not its sub-compartments).
        regions: region identifiers, such as ``us-ashburn-1``.
        endpoint: Core Services (iaas) endpoint instead of the region's public one, for private endpoints and tests;
            ``{region}`` in it is replaced by each region, e.g. ``https://iaas.{region}.example.internal``.
        config: an OCI SDK config dict. Default: ``oci.config.from_file()`` (``~/.oci/config``, else the file
            named by ``OCI_CONFIG_FILE``), profile ``profile``, checked with ``oci.config.validate_config``.
        signer: a request signer that replaces the config's API key: instance or resource principals, a
            security token signer, or any ``requests`` auth object. With a signer, ``config`` may hold only
            ``region`` (or nothing: regions come from ``regions``).
        profile: the config file profile read when ``config`` is not given (default ``DEFAULT``).
        timeout_s: timeout of each HTTP request in seconds, one number or (connect, read); default 10 for both
            (fleet_base.CALL_TIMEOUT_S). A timed-out or refused connection is not retried.
        retry_attempts, retry_base_delay_s: throttled calls (HTTP 429, 503) are tried up to ``retry_attempts``
            times (default 3: fleet_base.CALL_RETRIES + 1), waiting a random time up to ``retry_base_delay_s``
            x 2, x 4, ... (30 s at most) in between.
    """

    cloud = CLOUD

    def __init__(
        self,
        compartment_id: str,
        regions: list[str],
        endpoint: str | None = None,
        config: dict[str, Any] | None = None,
        signer: Any = None,
        profile: str | None = None,
        timeout_s: float | tuple[float, float] = (CALL_TIMEOUT_S, CALL_TIMEOUT_S),
        retry_attempts: int = CALL_RETRIES + 1,
        retry_base_delay_s: float = 1.0,
    ) -> None:
        self.compartment_id = compartment_id
        self.regions = list(regions)
        self.endpoint = endpoint
        self.config = config
        self.signer = signer
        self.profile = profile or "DEFAULT"
        # requests wants a number or a (connect, read) tuple; plugin options give a YAML list.
        self.timeout_s = tuple(timeout_s) if isinstance(timeout_s, list | tuple) else timeout_s
        self.retry_attempts = retry_attempts
        self.retry_base_delay_s = retry_base_delay_s

    def instances(self) -> Iterator[Instance]:
        oci = _import_sdk()
        config = self._config(oci)
        signer = _signer_for_sdk(oci, self.signer) if self.signer is not None else None
        retry_strategy = _throttling_retry_strategy(oci, self.retry_attempts, self.retry_base_delay_s)
        for region in self.regions:
            api = _RegionApi(oci, region, self.compartment_id, self.retry_attempts)
            api.connect(config, signer, self.endpoint, self.timeout_s, retry_strategy)
            yield from _region_instances(api)

    def _config(self, oci: Any) -> dict[str, Any]:
        """The caller's config; none with a signer (it authenticates, ``regions`` names the regions); else the
        config file's. Checked whenever the SDK must sign with the config's API key."""
        try:
            if self.config is not None:
                config = dict(self.config)
            elif self.signer is not None:
                config = {}
            else:
                config = oci.config.from_file(profile_name=self.profile)
            if self.signer is None:
                # Each client gets its region from ``regions``; the file need not name one.
                oci.config.validate_config({**config, "region": self.regions[0]} if self.regions else config)
        except (oci.exceptions.ClientError, ValueError) as exc:
            raise DiscoveryError(CLOUD, f"no usable OCI config: {_config_problem(exc)}; {_CONFIG_HINT}") from exc
        return config


class _NotOci(Exception):
    """An answer that is not the OCI API's."""


class _RegionApi:
    """One region's SDK clients, and every list call made through them, failures included."""

    def __init__(self, oci: Any, region: str, compartment_id: str, retry_attempts: int) -> None:
        self.oci = oci
        self.region = region
        self.compartment_id = compartment_id
        self.retry_attempts = retry_attempts

    def connect(
        self, config: dict[str, Any], signer: Any, endpoint: str | None, timeout_s: Any, retry_strategy: Any
    ) -> None:
        options: dict[str, Any] = {"timeout": timeout_s, "retry_strategy": retry_strategy}
        if endpoint:
            options["service_endpoint"] = endpoint.replace("{region}", self.region)
        if signer is not None:
            options["signer"] = signer
        region_config = {**config, "region": self.region}
        core = self.oci.core
        try:
            self.compute = core.ComputeClient(region_config, **options)
            self.network = core.VirtualNetworkClient(region_config, **options)
            self.management = core.ComputeManagementClient(region_config, **options)
        except (self.oci.exceptions.ClientError, ValueError, OSError) as exc:
            # The API-key signer reads key_file here: a missing or unreadable key surfaces now.
            raise DiscoveryError(
                CLOUD, f"cannot set up the OCI client: {_config_problem(exc)}; {_CONFIG_HINT}"
            ) from exc

    def list(self, call: Any, *args: Any, **kwargs: Any) -> list[Any]:
        """Every page of one list operation, following ``opc-next-page``; any failure becomes one DiscoveryError.

        Pages are followed here rather than with ``oci.pagination.list_call_get_all_results``: that helper wraps
        each call in ``oci.retry.DEFAULT_RETRY_STRATEGY`` on top of the client's, which multiplies throttled
        attempts and retries an unreachable endpoint for minutes.
        """
        items: list[Any] = []
        page: str | None = None
        try:
            while True:
                response = call(*args, **kwargs, **({"page": page} if page else {}))
                # Every OCI answer carries opc-request-id; one without it came from something that is not OCI (a
                # proxy's page, a web server), and the SDK would read its non-JSON body as a list of characters.
                if not response.headers.get("opc-request-id"):
                    raise _NotOci(f"HTTP {response.status} without opc-request-id")
                # Most lists answer a JSON array; ListComputeClusters a collection with "items".
                data = response.data if isinstance(response.data, list) else getattr(response.data, "items", None)
                if not isinstance(data, list):
                    raise _NotOci(f"HTTP {response.status} with a body that is not a list")
                items.extend(data)
                if not response.has_next_page:
                    return items
                page = response.next_page
        except Exception as exc:
            raise self._error(exc, call, kwargs) from exc

    def _error(self, exc: Exception, call: Any, kwargs: dict[str, Any]) -> DiscoveryError:
        operation = "".join(word.title() for word in call.__name__.split("_"))  # list_instances -> ListInstances
        where = f"in {self.region}"
        exceptions = self.oci.exceptions
        endpoint = call.__self__.base_client.endpoint
        if isinstance(exc, _NotOci):
            return DiscoveryError(
                CLOUD,
                f"{endpoint} {where} did not answer {operation} as the OCI API ({exc}): check the endpoint and proxy "
                "settings",
            )
        if isinstance(exc, exceptions.ServiceError):
            answer = f"HTTP {exc.status} {exc.code or ''}".rstrip()
            if exc.status == 401:
                return DiscoveryError(
                    CLOUD,
                    f"credentials were rejected by {operation} {where} ({answer}): check the config's user, tenancy, "
                    "fingerprint and key_file (or the signer), and that the API key is uploaded for that user",
                )
            if exc.status == 403 or (exc.status == 404 and exc.code == "NotAuthorizedOrNotFound"):
                return DiscoveryError(
                    CLOUD, f"{operation} was refused {where} ({answer}): {self._policy_hint(operation, kwargs)}"
                )
            if exc.status in THROTTLING_STATUSES:
                return DiscoveryError(
                    CLOUD,
                    f"{operation} {where} was still throttled after {self.retry_attempts} attempts ({answer}): "
                    "try again later or ask Oracle for a higher API rate limit",
                )
            said = f": {_first_line(exc.message)}" if exc.message else ""
            return DiscoveryError(CLOUD, f"{operation} failed {where}: {answer}{said} (from {endpoint})")
        loop = _redirect_loop(exc)
        if loop is not None:
            return DiscoveryError(
                CLOUD,
                f"{endpoint} {where} answered {operation} with redirects that never end ({loop}): check the endpoint "
                "and proxy settings",
            )
        if isinstance(exc, exceptions.RequestException | exceptions.ConnectTimeout):
            return DiscoveryError(CLOUD, f"cannot reach {endpoint}: {_connection_reason(exc)}")
        return DiscoveryError(CLOUD, f"{operation} failed {where} (from {endpoint}): {type(exc).__name__}: {exc}")

    def _policy_hint(self, operation: str, kwargs: dict[str, Any]) -> str:
        if operation == "ListPrivateIps":
            subnet = kwargs.get("subnet_id")
            problem = f"the caller may not read the private IPs of subnet {subnet}"
            scope = f"the compartment of subnet {subnet}"
        else:
            problem = f"the caller lacks permission, or compartment {self.compartment_id} does not exist"
            scope = f"compartment id {self.compartment_id}"
        statements = " and ".join(f'"Allow group <group> to {verb} in {scope}"' for verb in POLICIES[operation])
        return f"{problem}; the IAM policy needed is {statements} (dynamic-group for instance principals)"


# --- one region ----------------------------------------------------------------------------------------------------


def _region_instances(api: _RegionApi) -> Iterator[Instance]:
    instances = api.list(api.compute.list_instances, api.compartment_id)
    if not instances:
        return
    addresses = _addresses(api, instances)
    placements = _placements(api)
    rack_scale = any(RACK_SCALE_SHAPE.match(instance.shape or "") for instance in instances)
    domains = _nvlink_domains(api) if rack_scale else {}
    for instance in instances:
        yield _instance_record(
            instance, api.region, addresses, placements.get(instance.id, {}), domains.get(instance.id)
        )


def _addresses(api: _RegionApi, instances: list[Any]) -> _Addresses:
    attachments = api.list(api.compute.list_vnic_attachments, api.compartment_id)
    attached = [attachment for attachment in attachments if attachment.lifecycle_state == "ATTACHED"]
    primary_vnic = _primary_vnic_attachments(attached)
    vnic_count: dict[str, int] = {}
    for attachment in attached:
        vnic_count[attachment.instance_id] = vnic_count.get(attachment.instance_id, 0) + 1

    private_ip: dict[str, Any] = {}
    for subnet_id in sorted({attachment.subnet_id for attachment in primary_vnic.values() if attachment.subnet_id}):
        for address in api.list(api.network.list_private_ips, subnet_id=subnet_id):
            if address.is_primary and address.vnic_id:
                private_ip[address.vnic_id] = address

    availability_domains = {instance.availability_domain for instance in instances} - {None}
    return _Addresses(primary_vnic, vnic_count, private_ip, _public_ips(api, availability_domains))


def _public_ips(api: _RegionApi, availability_domains: set[str]) -> dict[str, str]:
    """Private IP OCID -> public address: reserved IPs are region-scoped, ephemeral ones AD-scoped."""
    found = api.list(api.network.list_public_ips, "REGION", api.compartment_id)
    for availability_domain in sorted(availability_domains):
        found += api.list(
            api.network.list_public_ips,
            "AVAILABILITY_DOMAIN",
            api.compartment_id,
            availability_domain=availability_domain,
        )
    by_private_ip = {}
    for public in found:
        private_ip_id = public.assigned_entity_id or public.private_ip_id
        if private_ip_id and public.ip_address and public.assigned_entity_type in (None, "PRIVATE_IP"):
            by_private_ip[private_ip_id] = public.ip_address
    return by_private_ip


def _placements(api: _RegionApi) -> dict[str, dict[str, str]]:
    """Instance OCID -> {"cluster_network_id": ..., "compute_cluster_id": ...}: its RDMA network group(s)."""
    placements: dict[str, dict[str, str]] = {}
    for network in api.list(api.management.list_cluster_networks, api.compartment_id):
        if network.lifecycle_state == "TERMINATED":
            continue
        for member in api.list(api.management.list_cluster_network_instances, api.compartment_id, network.id):
            placements.setdefault(member.id, {})["cluster_network_id"] = network.id
    for cluster in api.list(api.compute.list_compute_clusters, api.compartment_id):
        if cluster.lifecycle_state == "DELETED":
            continue
        for member in api.list(api.compute.list_instances, api.compartment_id, compute_cluster_id=cluster.id):
            placements.setdefault(member.id, {})["compute_cluster_id"] = cluster.id
    return placements


def _nvlink_domains(api: _RegionApi) -> dict[str, str]:
    """Instance OCID -> the GPU memory fabric of the GPU memory cluster it is in: its NVLink domain."""
    domains: dict[str, str] = {}
    for cluster in api.list(api.compute.list_compute_gpu_memory_clusters, api.compartment_id):
        if cluster.lifecycle_state in ("DELETING", "DELETED") or not cluster.gpu_memory_fabric_id:
            continue
        for member in api.list(api.compute.list_compute_gpu_memory_cluster_instances, cluster.id):
            domains[member.id] = cluster.gpu_memory_fabric_id
    return domains


# --- records -------------------------------------------------------------------------------------------------------


def _instance_record(
    instance: Any, region: str, addresses: _Addresses, placement: dict[str, str], nvlink_domain: str | None
) -> Instance:
    attachment = addresses.primary_vnic.get(instance.id)
    private = addresses.private_ip.get(attachment.vnic_id) if attachment else None
    extra: dict[str, Any] = {
        "lifecycle_state": instance.lifecycle_state,
        "fault_domain": instance.fault_domain,
        "vnic_count": addresses.vnic_count.get(instance.id, 0),
        "cluster_placement_group_id": getattr(instance, "cluster_placement_group_id", None),  # absent from older SDKs
        **placement,
    }
    return Instance(
        cloud=CLOUD,
        instance_id=instance.id,
        name=instance.display_name or "",
        instance_type=instance.shape or "",
        state=STATES.get(instance.lifecycle_state, OTHER),
        region=region,
        zone=instance.availability_domain,
        private_ip=private.ip_address if private else None,
        public_ip=addresses.public_ip.get(private.id) if private else None,
        # The cluster network (instance pools) or compute cluster is the RDMA fabric domain.
        placement=placement.get("cluster_network_id") or placement.get("compute_cluster_id"),
        nvlink_domain=nvlink_domain,
        tags=_tags(instance.freeform_tags, instance.defined_tags),
        ids={"compartment_id": instance.compartment_id, "instance_ocid": instance.id},
        extra={key: value for key, value in extra.items() if value is not None},
    )


def _tags(freeform: dict[str, Any] | None, defined: dict[str, dict[str, Any]] | None) -> dict[str, str]:
    """Freeform tags as they are, defined tags as ``namespace.key``."""
    tags = {str(key): str(value) for key, value in (freeform or {}).items()}
    for namespace, values in (defined or {}).items():
        for key, value in (values or {}).items():
            tags[f"{namespace}.{key}"] = str(value)
    return tags


def _primary_vnic_attachments(attachments: Iterable[Any]) -> dict[str, Any]:
    """Instance OCID -> the attachment of its primary VNIC.

    A VNIC attachment does not say whether its VNIC is the primary one (only GetVnic does, one call per VNIC).
    The primary VNIC is created with the instance and cannot be detached, and secondary VNICs are attached after
    it, so the instance's earliest attachment is taken as the primary.
    """
    primary: dict[str, Any] = {}
    for attachment in sorted(attachments, key=_attachment_order):
        primary.setdefault(attachment.instance_id, attachment)
    return primary


def _attachment_order(attachment: Any) -> tuple[float, int, str]:
    created = attachment.time_created.timestamp() if attachment.time_created else float("inf")
    return created, attachment.nic_index or 0, attachment.id or ""


# --- SDK plumbing --------------------------------------------------------------------------------------------------

_CONFIG_HINT = "run `oci setup config`, or pass a config dict or a signer (instance principals) to the OCI source"


def _import_sdk() -> Any:
    try:
        import oci
    except ImportError as exc:
        raise missing_sdk(CLOUD, "oci", "oci") from exc
    return oci


def _signer_for_sdk(oci: Any, signer: Any) -> Any:
    """The signer as the SDK's clients accept it with a config that holds no API key.

    The clients insist on the config's API-key fields (user, fingerprint, key_file) unless the signer is one of the
    SDK's self-contained signers (instance or resource principals, security tokens, key pairs). Any other
    ``requests`` auth object is wrapped in a SecurityTokenSigner subclass that only delegates to it, so it still
    signs every request.
    """
    signers = oci.auth.signers
    if isinstance(
        signer, signers.InstancePrincipalsSecurityTokenSigner | signers.SecurityTokenSigner | signers.KeyPairSigner
    ):
        return signer

    class DelegatingSigner(signers.SecurityTokenSigner):
        def __init__(self, inner: Any) -> None:  # no super().__init__: there is no token or key to hold
            self.inner = inner

        def __call__(self, request: Any, enforce_content_headers: bool = True) -> Any:
            if isinstance(self.inner, oci.signer.AbstractBaseSigner):
                return self.inner(request, enforce_content_headers=enforce_content_headers)
            return self.inner(request)

    return DelegatingSigner(signer)


def _throttling_retry_strategy(oci: Any, attempts: int, base_delay_s: float) -> Any:
    """The SDK's exponential backoff with full jitter, retrying throttling only.

    ``oci.retry.DEFAULT_RETRY_STRATEGY`` also retries connection errors and timeouts for up to 10 minutes, which
    would hide an unreachable endpoint behind a long wait; those fail at once here instead.
    """

    class RetryOnThrottling(oci.retry.retry_checkers.BaseRetryChecker):
        def should_retry(self, exception: Any = None, response: Any = None, **kwargs: Any) -> bool:
            return isinstance(exception, oci.exceptions.ServiceError) and exception.status in THROTTLING_STATUSES

    checkers = oci.retry.retry_checkers.RetryCheckerContainer(
        checkers=[oci.retry.retry_checkers.LimitBasedRetryChecker(max_attempts=attempts), RetryOnThrottling()]
    )
    return oci.retry.ExponentialBackoffWithFullJitterRetryStrategy(
        base_sleep_time_seconds=base_delay_s,
        exponent_growth_factor=2,
        max_wait_between_calls_seconds=30,
        checker_container=checkers,
    )


def _redirect_loop(exc: BaseException) -> str | None:
    """What the endpoint answered where the SDK gave up following its redirects (requests' TooManyRedirects,
    wrapped by the SDK), e.g. "HTTP 302 to /20160918/instances"; None for any other failure. By class name: the SDK
    raises the one of the copy of requests it vendors (oci._vendor), not the installed package's."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if any(kind.__name__ == "TooManyRedirects" for kind in type(error).__mro__):
            response = getattr(error, "response", None)
            if response is None:
                return "HTTP redirects"
            location = _first_line(str(response.headers.get("Location") or "")) or "no Location"
            return f"HTTP {response.status_code} to {location}"
        pending += [
            inner for inner in (*error.args, error.__cause__, error.__context__) if isinstance(inner, BaseException)
        ]
    return None


def _connection_reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, e.g. "[Errno 111] Connection refused" or "timed out".

    The SDK re-raises the requests error with its arguments turned into one long string; the original socket
    error is still at the end of the exception chain (urllib3 keeps it as ``reason``, requests as the context).
    """
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        reason = getattr(exc, "reason", None)
        inner = reason if isinstance(reason, BaseException) else exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return str(exc) or type(exc).__name__


def _first_line(text: str) -> str:
    """The first line of an error message, at most 200 characters (a web server's page would be all of it)."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= 200 else line[:200] + "..."


def _config_problem(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)  # InvalidConfig: {config key: "missing" | "malformed"}
    if isinstance(errors, dict):
        return ", ".join(f"{key} is {state}" for key, state in sorted(errors.items()))
    return str(exc)
