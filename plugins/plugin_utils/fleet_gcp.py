# SPDX-License-Identifier: Apache-2.0
"""Google Cloud fleet source: Compute Engine instances through the official google-cloud-compute SDK.

One ``instances.aggregatedList`` call per page and project lists every zone at once; compact
placement policies are resolved with one ``resourcePolicies.aggregatedList`` per project, and only
for projects where some instance carries a resource policy. No call is made per instance. A rack-scale VM
(A4X) carries its NVLink domain, its sub-block, in its own resourceStatus.physicalHostTopology.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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

CLOUD = "gcp"
# Rack-scale NVLink machine types (A4X: GB200 NVL72, A4X Max: GB300 NVL72): the 18 VMs of one sub-block share an
# NVLink domain (cluster-toolkit's A4X blueprints place them with gpu_topology 1x72, one sub-block).
RACK_SCALE_PREFIX = "a4x-"
DEFAULT_ENDPOINT = "https://compute.googleapis.com"
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/compute.readonly"
LIST_INSTANCES = "compute.instances.list"
LIST_RESOURCE_POLICIES = "compute.resourcePolicies.list"
ACTIONS = {LIST_INSTANCES: "listing instances", LIST_RESOURCE_POLICIES: "listing resource policies"}

STATES = {
    "RUNNING": RUNNING,
    "TERMINATED": STOPPED,  # what the API reports for a stopped instance
    "STOPPED": STOPPED,
    "SUSPENDED": STOPPED,
    "PROVISIONING": PENDING,
    "STAGING": PENDING,
    "PENDING": PENDING,
}

# Compute Engine reports rate limits as HTTP 429, or as HTTP 403 with one of these reasons.
RATE_LIMIT_REASONS = {"rateLimitExceeded", "userRateLimitExceeded"}
API_DISABLED_REASONS = {"accessNotConfigured", "SERVICE_DISABLED"}


class GcpSource:
    """Every Compute Engine instance of the given projects, in all states.

    Options:
      projects: project ids to list.
      zones: only instances in these zones (for example ``us-central1-a``); None lists every zone.
        The filter is applied to the aggregated list's zone scopes rather than as an API filter
        expression, which Google documents as slow on projects with many instances.
      endpoint: Compute Engine API root, default ``https://compute.googleapis.com``; set it for a
        Private Service Connect endpoint, or to ``http://127.0.0.1:PORT`` for a test server.
      credentials: a ``google.auth.credentials.Credentials``; None uses the SDK's normal chain
        (``google.auth.default()``: GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default
        credentials, then the metadata server of a GCE VM).
      page_size: instances per list call (the API allows at most 500).
      timeout: seconds to wait for one call's HTTP answer (the SDK's deadline for the call: to connect
        and to read), default 10 (fleet_base.CALL_TIMEOUT_S). A timed-out call is not retried.
      retry_initial_delay, retry_timeout: backoff for throttled calls (HTTP 429/503 and 403
        rateLimitExceeded): the first wait, and how long to keep retrying before giving up
        (default 30 s: (fleet_base.CALL_RETRIES + 1) x CALL_TIMEOUT_S).
    """

    cloud = CLOUD

    def __init__(
        self,
        projects: list[str],
        zones: list[str] | None = None,
        endpoint: str | None = None,
        credentials: Any = None,
        *,
        page_size: int = 500,
        timeout: float = CALL_TIMEOUT_S,
        retry_initial_delay: float = 1.0,
        retry_timeout: float = (CALL_RETRIES + 1) * CALL_TIMEOUT_S,
    ) -> None:
        if not projects:
            raise DiscoveryError(CLOUD, "no project given; name at least one GCP project id")
        self.projects = list(projects)
        self.zones = set(zones) if zones else None
        self.endpoint = endpoint
        self.credentials = credentials
        self.page_size = page_size
        self.timeout = timeout
        self.retry_initial_delay = retry_initial_delay
        self.retry_timeout = retry_timeout

    def instances(self) -> Iterator[Instance]:
        sdk = _Sdk.load()
        with self._translated_errors(sdk, project=None, permission=LIST_INSTANCES):
            credentials = self._default_credentials(sdk) if self.credentials is None else self.credentials
            instances_client = sdk.compute_v1.InstancesClient(**self._client_args(sdk, credentials))
            policies_client = sdk.compute_v1.ResourcePoliciesClient(**self._client_args(sdk, credentials))
        for project in self.projects:
            placements = _CompactPlacements(lambda p=project: self._list_policies(sdk, policies_client, p))
            with self._translated_errors(sdk, project, LIST_INSTANCES):
                for raw in self._list_instances(sdk, instances_client, project):
                    with self._translated_errors(sdk, project, LIST_RESOURCE_POLICIES):
                        placement = placements.of(raw.resource_policies)
                    yield _to_instance(raw, project, placement)

    # -- API calls -------------------------------------------------------------------------

    def _default_credentials(self, sdk: _Sdk) -> Any:
        credentials, _project = sdk.google_auth.default(scopes=[READ_ONLY_SCOPE])
        return credentials

    def _client_args(self, sdk: _Sdk, credentials: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"credentials": credentials, "transport": "rest"}
        if self.endpoint:
            # The REST transport keeps an explicit http:// or https:// scheme of api_endpoint.
            args["client_options"] = sdk.ClientOptions(api_endpoint=self.endpoint)
        return args

    def _retry(self, sdk: _Sdk) -> Any:
        return sdk.Retry(
            predicate=_is_throttled,
            initial=self.retry_initial_delay,
            maximum=max(self.retry_initial_delay, 32.0),
            multiplier=2.0,
            timeout=self.retry_timeout,
        )

    def _list_instances(self, sdk: _Sdk, client: Any, project: str) -> Iterator[Any]:
        """Every instance of the project in the requested zones, page after page."""
        # No return_partial_success: since google-cloud-compute 1.55.0 (API version 2026-09-01)
        # every aggregatedList answers with partial success and names the scopes it missed.
        request = sdk.compute_v1.AggregatedListInstancesRequest(project=project, max_results=self.page_size)
        pager = client.aggregated_list(request=request, retry=self._retry(sdk), timeout=self.timeout)
        for page in pager.pages:
            self._refuse_partial_page(project, page.unreachables)
            for scope, scoped in page.items.items():
                if self._wanted(scope):
                    yield from scoped.instances

    def _list_policies(self, sdk: _Sdk, client: Any, project: str) -> Iterator[Any]:
        request = sdk.compute_v1.AggregatedListResourcePoliciesRequest(project=project, max_results=self.page_size)
        pager = client.aggregated_list(request=request, retry=self._retry(sdk), timeout=self.timeout)
        for page in pager.pages:
            self._refuse_partial_page(project, page.unreachables)
            for _scope, scoped in page.items.items():
                yield from scoped.resource_policies

    def _wanted(self, scope: str) -> bool:
        """Whether an aggregated list scope (``zones/Z`` or ``regions/R``) holds a requested zone."""
        if self.zones is None:
            return True
        kind, _sep, name = scope.partition("/")
        if kind == "regions":
            return any(zone.rsplit("-", 1)[0] == name for zone in self.zones)
        return name in self.zones

    def _refuse_partial_page(self, project: str, unreachables: Any) -> None:
        # The API answers even when some zones are down, and names them here. An inventory silently
        # missing a zone's hosts is worse than no inventory.
        missing = [scope for scope in unreachables if self._wanted(scope)]
        if missing:
            raise DiscoveryError(
                CLOUD,
                f"the API could not list {', '.join(missing)} in project {project} (partial answer); try again later",
            )

    # -- errors ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _translated_errors(self, sdk: _Sdk, project: str | None, permission: str) -> Iterator[None]:
        """Turn any SDK, HTTP or auth failure into one DiscoveryError that says what to do."""
        try:
            yield
        except DiscoveryError:
            raise
        except Exception as exc:
            where = f"in project {project}" if project else f"for projects {', '.join(self.projects)}"
            message = _explain(exc, sdk, where, permission, self.endpoint or DEFAULT_ENDPOINT)
            if message is None:
                raise
            raise DiscoveryError(CLOUD, message) from exc


class _CompactPlacements:
    """Which resource policies are compact placement policies, fetched once and only when needed.

    An instance's resource_policies are bare URLs; a policy can also be an instance schedule, so
    its kind comes from the project's resource policy list.
    """

    def __init__(self, list_policies: Callable[[], Iterator[Any]]) -> None:
        self._list_policies = list_policies
        self._compact: set[tuple[str, str]] | None = None

    def of(self, policy_urls: Any) -> str | None:
        if not policy_urls:
            return None
        if self._compact is None:
            self._compact = {
                (_last_segment(policy.region), policy.name) for policy in self._list_policies() if _is_compact(policy)
            }
        for url in policy_urls:
            region, name = _region_and_name(url)
            if (region, name) in self._compact:
                return name
        return None


def _is_compact(policy: Any) -> bool:
    """A placement policy that packs VMs close together (GPU clusters), not a spread or a schedule."""
    if "group_placement_policy" in policy and policy.group_placement_policy.collocation == "COLLOCATED":
        return True
    return "workload_policy" in policy and policy.workload_policy.type_ == "HIGH_THROUGHPUT"


def _to_instance(raw: Any, project: str, placement: str | None) -> Instance:
    zone = _last_segment(raw.zone)
    nics = list(raw.network_interfaces)
    machine_type = _last_segment(raw.machine_type)
    first_nic = nics[0] if nics else None
    return Instance(
        cloud=CLOUD,
        instance_id=str(raw.id),
        name=raw.name,
        instance_type=machine_type,
        state=STATES.get(raw.status, OTHER),
        region=zone.rsplit("-", 1)[0] if zone else None,
        zone=zone or None,
        private_ip=(first_nic.network_i_p or None) if first_nic else None,
        public_ip=_public_ip(first_nic),
        placement=placement,
        nvlink_domain=_subblock(raw) if machine_type.startswith(RACK_SCALE_PREFIX) else None,
        tags=dict(raw.labels),
        ids={"project": project, "instance_id": str(raw.id)},
        extra={
            "gvnic_interfaces": sum(1 for nic in nics if nic.nic_type == "GVNIC"),
            # a3-ultra and a4 carry their GPU-network NICs as RDMA (MRDMA) interfaces.
            "mrdma_interfaces": sum(1 for nic in nics if nic.nic_type == "MRDMA"),
            "network_interfaces": len(nics),
        },
    )


def _subblock(raw: Any) -> str | None:
    """cluster/block/subblock of the host the VM runs on (resourceStatus.physicalHostTopology), or None."""
    topology = raw.resource_status.physical_host_topology
    if not topology.subblock:
        return None
    return "/".join((topology.cluster, topology.block, topology.subblock))


def _public_ip(nic: Any) -> str | None:
    if nic is None:
        return None
    return next((config.nat_i_p for config in nic.access_configs if config.nat_i_p), None)


def _last_segment(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1] if url else ""


def _region_and_name(policy_url: str) -> tuple[str, str]:
    """``.../projects/P/regions/R/resourcePolicies/NAME`` -> (R, NAME), whatever the URL's host."""
    parts = policy_url.rstrip("/").split("/")
    return (parts[-3], parts[-1]) if len(parts) >= 3 else ("", parts[-1])


def _reasons(exc: Any) -> set[str]:
    reasons = {error.get("reason", "") for error in (getattr(exc, "errors", None) or []) if isinstance(error, dict)}
    if getattr(exc, "reason", None):
        reasons.add(exc.reason)
    return reasons


def _is_throttled(exc: Exception) -> bool:
    from google.api_core import exceptions as api_errors

    if isinstance(exc, api_errors.TooManyRequests | api_errors.ServiceUnavailable):
        return True
    return isinstance(exc, api_errors.Forbidden) and bool(_reasons(exc) & RATE_LIMIT_REASONS)


def _explain(exc: Exception, sdk: _Sdk, where: str, permission: str, endpoint: str) -> str | None:
    """The DiscoveryError sentence for a failure, or None for an error that is not the API's."""
    api, auth, http = sdk.api_errors, sdk.auth_errors, sdk.http_errors
    if isinstance(exc, api.RetryError):
        code = getattr(exc.cause, "code", None)
        status = f" (HTTP {code})" if code else ""
        return f"the API kept throttling requests {where}{status} after retrying; try again later"
    if isinstance(exc, api.Unauthorized):
        return (
            f"credentials were rejected by {endpoint} (HTTP 401) {where}; check GOOGLE_APPLICATION_CREDENTIALS "
            "or run `gcloud auth application-default login`"
        )
    if isinstance(exc, api.Forbidden):
        if _reasons(exc) & API_DISABLED_REASONS:
            return f"the Compute Engine API is not enabled {where}; enable compute.googleapis.com"
        return (
            f"permission denied {where}: the caller needs {permission} "
            f"(roles/compute.viewer grants it); the API said: {_api_message(exc)}"
        )
    if isinstance(exc, api.NotFound):
        return f"{ACTIONS[permission]} {where} failed: HTTP 404 (check the project id): {_api_message(exc)}"
    if isinstance(exc, api.GoogleAPICallError):
        return f"{ACTIONS[permission]} {where} failed: HTTP {exc.code}: {_api_message(exc)}"
    if isinstance(exc, auth.DefaultCredentialsError):
        return (
            "no credentials found: set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default "
            "login`, or run on a GCE VM with a service account"
        )
    if isinstance(exc, auth.RefreshError):
        # The refresh error's text can echo the token response; name the failure only.
        return "credentials were rejected while fetching an access token; renew or replace them"
    if isinstance(exc, auth.TransportError):
        return f"cannot reach the token endpoint: {_network_reason(exc)}"
    if isinstance(exc, http.TooManyRedirects):
        return f"{endpoint} answered {where} with redirects that never end ({exc}): check the endpoint"
    if isinstance(exc, http.Timeout):
        return f"cannot reach {endpoint}: no answer in time"
    if isinstance(exc, http.ConnectionError):
        return f"cannot reach {endpoint}: {_network_reason(exc)}"
    if isinstance(exc, sdk.ParseError):
        # A web page, a proxy's login form: anything but the API's JSON.
        return f"{endpoint} did not answer as the Compute Engine API {where} ({exc}): check the endpoint"
    if isinstance(exc, http.RequestException):  # any other HTTP failure (an invalid URL, a broken answer)
        return f"the request to {endpoint} failed {where}: {exc}"
    return None


def _api_message(exc: Any) -> str:
    """The server's message without the ``GET <url>:`` prefix the REST transport adds."""
    message = str(getattr(exc, "message", "") or exc)
    method, _sep, rest = message.partition(" ")
    if method in {"GET", "POST"} and ": " in rest:
        return rest.split(": ", 1)[1]
    return message


def _network_reason(exc: BaseException) -> str:
    """The innermost OS error ("Connection refused") in a requests/urllib3 error chain."""
    seen: set[int] = set()
    pending: list[Any] = [exc]
    while pending:
        current = pending.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        pending.extend([getattr(current, "reason", None), current.__cause__, current.__context__, *current.args])
    return str(exc)


class _Sdk:
    """The SDK modules, imported on first use so the collection loads without them."""

    def __init__(self) -> None:
        import google.auth as google_auth
        import requests.exceptions as http_errors
        from google.api_core import exceptions as api_errors
        from google.api_core.client_options import ClientOptions
        from google.api_core.retry import Retry
        from google.auth import exceptions as auth_errors
        from google.cloud import compute_v1
        from google.protobuf.json_format import ParseError

        self.google_auth = google_auth
        self.ParseError = ParseError
        self.compute_v1 = compute_v1
        self.ClientOptions = ClientOptions
        self.Retry = Retry
        self.api_errors = api_errors
        self.auth_errors = auth_errors
        self.http_errors = http_errors

    @classmethod
    def load(cls) -> _Sdk:
        try:
            return cls()
        except ImportError as exc:
            raise missing_sdk(CLOUD, "google-cloud-compute", "gcp") from exc
