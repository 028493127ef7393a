# SPDX-License-Identifier: Apache-2.0
"""Nebius AI Cloud fleet source: the Compute instances of one or more projects.

Uses the official ``nebius`` SDK (gRPC). Per project (parent id) it makes one
paginated ``GpuClusterService.List`` (to name each instance's GPU cluster) and
one paginated ``InstanceService.List``; the number of calls grows with pages,
never with instances.

Nebius instances carry no region or zone (a project lives in one region), so
``region`` and ``zone`` stay empty; the project id is in ``ids["parent_id"]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
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
    missing_sdk,
    with_retries,
)

CLOUD = "nebius"
TOKEN_ENV = "NEBIUS_IAM_TOKEN"  # the SDK's own variable for a static IAM token
USER_AGENT = "gpufabric"

# InstanceStatus.InstanceState names -> fleet_base states; the rest (UPDATING, DELETING, ERROR, ...) is OTHER.
STATES = {
    "RUNNING": RUNNING,
    "STOPPED": STOPPED,
    "STOPPING": STOPPED,
    "STARTING": PENDING,
    "CREATING": PENDING,
}

# What to grant when a list call is refused. Nebius grants roles to groups on a tenant or project; "viewer"
# is the read-only role that covers listing Compute instances and GPU clusters.
PERMISSION_NEEDED = "the viewer role on {parent_id} (read access to Compute instances and GPU clusters)"

CREDENTIAL_HELP = (
    f"set {TOKEN_ENV} (for example from `nebius iam get-access-token`), set up a nebius CLI profile "
    "(~/.nebius/config.yaml) with a service account or token file, or pass credentials"
)

# gRPC's texts for a connection that never came up (as opposed to a server answering UNAVAILABLE).
CONNECTION_FAILURES = ("failed to connect", "connection refused", "dns resolution failed", "name resolution")


class NebiusSource:
    """Lists Nebius Compute instances of the given projects.

    Options:
      parent_ids: project ids (``project-...``) to list; a single string is taken as one id.
      endpoint: ``host:port`` that serves every API used here (tests, private endpoints); default:
        the SDK's routing (``compute.<domain>``, domain from NEBIUS_ENDPOINT or the CLI profile, else
        api.nebius.cloud:443). ``http://host:port`` means plaintext, like ``insecure``.
      credentials: None for the SDK's normal chain (``NEBIUS_IAM_TOKEN``, else the active nebius CLI
        profile); a string is a static IAM token; a ``pathlib.Path`` is a service account credentials file;
        any other value is handed to the SDK as is (a token bearer, token requester, ...).
      insecure: plaintext gRPC instead of TLS (a local fake or a plaintext proxy only).
      timeout: seconds per API call (the gRPC deadline); also how long an unanswering endpoint is waited
        for; default 10 (fleet_base.CALL_TIMEOUT_S). A call past its deadline is not retried.
      page_size: instances per list page.
      retry_attempts: attempts per call while throttled, first one included; default 3
        (fleet_base.CALL_RETRIES + 1).
      retry_delay: first wait in seconds when throttled; it doubles for each attempt.
    """

    cloud = CLOUD

    def __init__(
        self,
        parent_ids: list[str] | str,
        endpoint: str | None = None,
        credentials: Any = None,
        insecure: bool = False,
        timeout: float = CALL_TIMEOUT_S,
        page_size: int = 100,
        retry_attempts: int = CALL_RETRIES + 1,
        retry_delay: float = 0.5,
    ) -> None:
        self.parent_ids = [parent_ids] if isinstance(parent_ids, str) else list(parent_ids or [])
        if not self.parent_ids:
            raise DiscoveryError(CLOUD, "no parent_ids given; list the project ids (project-...) to read")
        self.endpoint, self.insecure = _split_endpoint(endpoint, insecure)
        self.credentials = credentials
        self.timeout = float(timeout)
        self.page_size = int(page_size)
        self.retry_attempts = int(retry_attempts)
        self.retry_delay = float(retry_delay)

    def instances(self) -> Iterator[Instance]:
        sdk = self._open_sdk()
        try:
            for parent_id in self.parent_ids:
                clusters = {cluster.metadata.id: cluster for cluster in self._gpu_clusters(sdk, parent_id)}
                for item in self._list_instances(sdk, parent_id):
                    yield _to_instance(item, parent_id, clusters)
        finally:
            sdk.sync_close()

    # -- the SDK -----------------------------------------------------------------------------------

    def _open_sdk(self) -> Any:
        try:
            from nebius.base.error import SDKError
            from nebius.sdk import SDK
        except ImportError:
            raise missing_sdk(CLOUD, "nebius", "nebius") from None
        options: dict[str, Any] = {"user_agent_prefix": USER_AGENT}
        if self.endpoint:
            from nebius.base.resolver import Constant

            # Every service (compute, and IAM for token exchange) at this one address.
            options["resolver"] = Constant(self.endpoint)
        if self.insecure:
            from nebius.base.options import INSECURE

            options["options"] = [(INSECURE, True)]
        options.update(self._credential_options())
        try:
            return SDK(**options)
        except (SDKError, OSError, ValueError) as exc:
            raise DiscoveryError(CLOUD, f"cannot set up credentials: {self._redact(exc)}; {CREDENTIAL_HELP}") from None

    def _credential_options(self) -> dict[str, Any]:
        """SDK constructor arguments for the credentials: explicit ones, else the SDK's normal chain."""
        if isinstance(self.credentials, os.PathLike):
            return {"credentials_file_name": os.fspath(self.credentials)}
        if self.credentials is not None:
            return {"credentials": self.credentials}
        if os.environ.get(TOKEN_ENV, "").strip():
            return {}  # the SDK reads NEBIUS_IAM_TOKEN itself
        from nebius.aio.cli_config import Config, ConfigError

        try:
            # The CLI profile: service account, token file or token endpoint, as `nebius` itself uses.
            return {"config_reader": Config(no_parent_id=True)}
        except (ConfigError, FileNotFoundError) as exc:
            raise DiscoveryError(CLOUD, f"no credentials found ({exc}); {CREDENTIAL_HELP}") from None

    # -- list calls --------------------------------------------------------------------------------

    def _gpu_clusters(self, sdk: Any, parent_id: str) -> Iterator[Any]:
        from nebius.api.nebius.compute.v1 import GpuClusterServiceClient, ListGpuClustersRequest

        return self._pages(GpuClusterServiceClient(sdk).list, ListGpuClustersRequest, parent_id, "GPU clusters")

    def _list_instances(self, sdk: Any, parent_id: str) -> Iterator[Any]:
        from nebius.api.nebius.compute.v1 import InstanceServiceClient, ListInstancesRequest

        return self._pages(InstanceServiceClient(sdk).list, ListInstancesRequest, parent_id, "instances")

    def _pages(self, list_method: Callable[..., Any], request_type: type, parent_id: str, what: str) -> Iterator[Any]:
        """Every item of a Nebius List method, page after page (page_token / next_page_token)."""
        page_token = ""
        while True:
            request = request_type(parent_id=parent_id, page_size=self.page_size, page_token=page_token)
            page = self._call(list_method, request, parent_id, what)
            yield from page.items
            page_token = page.next_page_token
            if not page_token:
                return

    def _call(self, method: Callable[..., Any], request: Any, parent_id: str, what: str) -> Any:
        """One API call, retried with backoff while throttled; any failure becomes one DiscoveryError."""
        from nebius.aio.service_error import RequestError

        def attempt() -> Any:
            # retries=1: one RPC per attempt. The SDK's own retry repeats at once, without backoff,
            # which does not help against throttling; with_retries waits between attempts instead.
            pending = method(
                request,
                timeout=self.timeout,
                per_retry_timeout=self.timeout,
                auth_timeout=2 * self.timeout,
                retries=1,
            )
            # Fail at once when nothing listens, instead of waiting the whole timeout for a connection.
            pending.wait_for_ready = False
            return pending.wait()

        try:
            return with_retries(attempt, _is_throttled, attempts=self.retry_attempts, base_delay=self.retry_delay)
        except RequestError as exc:
            raise self._request_error(exc, parent_id, what) from None
        except Exception as exc:
            # Credential acquisition (token file, service account exchange) fails inside the SDK with
            # whatever its token code raised; the root cause is the useful part.
            raise DiscoveryError(CLOUD, f"listing {what} in {parent_id} failed: {self._describe(exc)}") from None

    # -- errors ------------------------------------------------------------------------------------

    def _request_error(self, exc: Any, parent_id: str, what: str) -> DiscoveryError:
        code = exc.status.code.name
        said = self._redact(f"{code}: {exc.status.message or ''}")
        where = self.endpoint or "the Nebius API"
        if code == "UNAUTHENTICATED":
            return DiscoveryError(CLOUD, f"credentials were rejected by {where} ({said}); {CREDENTIAL_HELP}")
        if code == "PERMISSION_DENIED":
            needed = PERMISSION_NEEDED.format(parent_id=parent_id)
            return DiscoveryError(CLOUD, f"not allowed to list {what} in {parent_id}: grant {needed} ({said})")
        if code == "DEADLINE_EXCEEDED":
            return DiscoveryError(CLOUD, f"cannot reach {where}: no answer within {self.timeout:g} s ({said})")
        if _is_connection_failure(exc):
            return DiscoveryError(CLOUD, f"cannot reach {where}: {self._redact(exc.status.message)}")
        if code in ("RESOURCE_EXHAUSTED", "UNAVAILABLE"):
            return DiscoveryError(CLOUD, f"listing {what} in {parent_id} is still throttled after retries ({said})")
        if code == "NOT_FOUND":
            return DiscoveryError(CLOUD, f"{parent_id} was not found ({said}); check parent_ids")
        return DiscoveryError(CLOUD, f"listing {what} in {parent_id} failed: {said} (from {where})")

    def _describe(self, exc: BaseException) -> str:
        """``Type: message``, and the innermost exception it was raised while handling, if any."""
        text = f"{type(exc).__name__}: {exc}"
        root = exc
        while root.__cause__ or root.__context__:
            root = root.__cause__ or root.__context__  # type: ignore[assignment]
        if root is not exc:
            text += f" (caused by {type(root).__name__}: {root})"
        return self._redact(text)

    def _redact(self, error: object) -> str:
        """The text of an error without the static token, should any layer ever echo it."""
        text = str(error)
        if isinstance(self.credentials, str) and self.credentials:
            text = text.replace(self.credentials, "***")
        token = os.environ.get(TOKEN_ENV, "").strip()
        return text.replace(token, "***") if token else text


def _split_endpoint(endpoint: str | None, insecure: bool) -> tuple[str | None, bool]:
    """``host:port`` and whether plaintext, from ``host:port``, ``https://host[:port]`` or ``http://host[:port]``."""
    if not endpoint or "://" not in endpoint:
        return endpoint or None, insecure
    parts = urlsplit(endpoint)
    plaintext = parts.scheme == "http"
    port = parts.port or (80 if plaintext else 443)
    return f"{parts.hostname}:{port}", insecure or plaintext


def _is_connection_failure(exc: Exception) -> bool:
    status = getattr(exc, "status", None)
    if status is None or status.code.name != "UNAVAILABLE":
        return False
    message = (status.message or "").lower()
    return any(text in message for text in CONNECTION_FAILURES)


def _is_throttled(exc: Exception) -> bool:
    """RESOURCE_EXHAUSTED, or UNAVAILABLE from a server that answered (not a connection that never came up)."""
    status = getattr(exc, "status", None)
    if status is None:
        return False
    return status.code.name == "RESOURCE_EXHAUSTED" or (
        status.code.name == "UNAVAILABLE" and not _is_connection_failure(exc)
    )


def _to_instance(item: Any, parent_id: str, clusters: dict[str, Any]) -> Instance:
    """A compute.v1.Instance message as a fleet Instance."""
    metadata, spec, status = item.metadata, item.spec, item.status
    state = getattr(status.state, "name", str(status.state))
    cluster_id = spec.gpu_cluster.id or None
    private_ip, public_ip = _addresses(status.network_interfaces)
    extra: dict[str, Any] = {"preset": spec.resources.preset or None, "gpu_cluster_id": cluster_id, "state": state}
    cluster = clusters.get(cluster_id) if cluster_id else None
    if cluster is not None:
        extra["gpu_cluster_name"] = cluster.metadata.name
        extra["infiniband_fabric"] = cluster.spec.infiniband_fabric or None
    return Instance(
        cloud=CLOUD,
        instance_id=metadata.id,
        name=metadata.name,
        instance_type=spec.resources.platform,
        state=STATES.get(state, OTHER),
        private_ip=private_ip,
        public_ip=public_ip,
        placement=cluster_id,
        tags=dict(metadata.labels),
        ids={"parent_id": metadata.parent_id or parent_id, "instance_id": metadata.id},
        extra=extra,
    )


def _addresses(interfaces: Any) -> tuple[str | None, str | None]:
    """(private, public) IPv4 of the first interface that has each, in interface index order."""
    private = public = None
    for interface in sorted(interfaces, key=lambda nic: nic.index):
        private = private or _bare_ip(interface.ip_address.address)
        public = public or _bare_ip(interface.public_ip_address.address)
    return private, public


def _bare_ip(address: str) -> str | None:
    # The API reports effective addresses with their prefix length ("10.0.0.5/32").
    return address.split("/", 1)[0] or None
