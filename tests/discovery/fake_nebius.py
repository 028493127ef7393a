# SPDX-License-Identifier: Apache-2.0
"""A fake Nebius Compute API: a real gRPC server on 127.0.0.1 for the Nebius source tests.

It serves the two calls the source makes, with the nebius SDK's own message types and the
method paths, request and response types taken from the SDK's service descriptors:

- ``/nebius.compute.v1.InstanceService/List`` (ListInstancesRequest -> ListInstancesResponse)
- ``/nebius.compute.v1.GpuClusterService/List`` (ListGpuClustersRequest -> ListGpuClustersResponse)

Both honour ``parent_id``, ``page_size`` (0 -> DEFAULT_PAGE_SIZE, capped at MAX_PAGE_SIZE) and
``page_token`` / ``next_page_token`` (opaque; a token from another parent is INVALID_ARGUMENT).
Every call must carry ``authorization: Bearer <token>`` with a token in ``tokens``, else
UNAUTHENTICATED. Knobs: ``throttle`` answers the next N calls with ``throttle_code``
(RESOURCE_EXHAUSTED by default, or UNAVAILABLE); ``denied_parents`` answers PERMISSION_DENIED for
those projects; ``delay`` holds every answer that many seconds. ``calls`` counts calls per method,
``tokens_seen`` records the bearer tokens received.

Not covered: the SDK 0.6.29 ships no generated servicer base classes (no ``*_pb2_grpc``): it has
its own descriptor registry, so the handlers are generic gRPC handlers built from those
descriptors. Error answers carry a status code and message but not Nebius' structured
``ServiceError`` details; the real page size limits and error texts are not known here.
"""

from __future__ import annotations

import base64
import threading
import time
from collections import Counter
from concurrent import futures
from typing import Any

import grpc
from nebius.api.nebius.common.v1 import ResourceMetadata
from nebius.api.nebius.compute.v1 import (
    REGISTRY,
    GpuCluster,
    GpuClusterServiceClient,
    GpuClusterSpec,
    Instance,
    InstanceGpuClusterSpec,
    InstanceServiceClient,
    InstanceSpec,
    InstanceStatus,
    IPAddressStatus,
    NetworkInterfaceStatus,
    PublicIPAddressStatus,
    ResourcesSpec,
)

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
GOOD_TOKEN = "fake-iam-token-not-a-secret"


def instance(
    instance_id: str,
    name: str,
    platform: str,
    *,
    parent_id: str = "project-e00fake",
    preset: str = "8gpu-128vcpu-1600gb",
    state: str = "RUNNING",
    private_ip: str | None = "10.0.0.2",
    public_ip: str | None = None,
    gpu_cluster_id: str | None = None,
    labels: dict[str, str] | None = None,
) -> Any:
    """One compute.v1.Instance as InstanceService.List returns it (the fields the source reads, and a few more)."""
    nic = NetworkInterfaceStatus(index=0, name="eth0", mac_address="02:00:00:00:00:01")
    if private_ip:
        nic.ip_address = IPAddressStatus(address=f"{private_ip}/32", allocation_id="vpcallocation-e00priv")
    if public_ip:
        nic.public_ip_address = PublicIPAddressStatus(address=f"{public_ip}/32", allocation_id="vpcallocation-e00pub")
    spec = InstanceSpec(resources=ResourcesSpec(platform=platform, preset=preset), stopped=state == "STOPPED")
    if gpu_cluster_id:
        spec.gpu_cluster = InstanceGpuClusterSpec(id=gpu_cluster_id)
    return Instance(
        metadata=ResourceMetadata(id=instance_id, parent_id=parent_id, name=name, labels=labels or {}),
        spec=spec,
        status=InstanceStatus(state=InstanceStatus.InstanceState[state], network_interfaces=[nic]),
    )


def gpu_cluster(cluster_id: str, name: str, *, parent_id: str = "project-e00fake", fabric: str = "fabric-3") -> Any:
    """One compute.v1.GpuCluster as GpuClusterService.List returns it."""
    return GpuCluster(
        metadata=ResourceMetadata(id=cluster_id, parent_id=parent_id, name=name),
        spec=GpuClusterSpec(infiniband_fabric=fabric),
    )


class FakeNebius:
    """The fake API over in-memory instances and GPU clusters; ``with FakeNebius(...) as fake: fake.address``."""

    def __init__(self, instances: list[Any], gpu_clusters: list[Any] | None = None) -> None:
        self.instances = instances
        self.gpu_clusters = gpu_clusters or []
        self.tokens = {GOOD_TOKEN}
        self.throttle = 0
        self.throttle_code = grpc.StatusCode.RESOURCE_EXHAUSTED
        self.denied_parents: set[str] = set()
        self.delay = 0.0
        self.calls: Counter[str] = Counter()
        self.tokens_seen: list[str] = []
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers(
            (
                _service(
                    InstanceServiceClient, "List", lambda request, context: self._list(request, context, "instances")
                ),
                _service(
                    GpuClusterServiceClient, "List", lambda request, context: self._list(request, context, "clusters")
                ),
            )
        )
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeNebius:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)

    def _list(self, request: Any, context: grpc.ServicerContext, kind: str) -> Any:
        method = "InstanceService.List" if kind == "instances" else "GpuClusterService.List"
        with self._lock:
            self.calls[method] += 1
            throttled = self.throttle > 0
            self.throttle -= int(throttled)
        if self.delay:
            time.sleep(self.delay)
        token = dict(context.invocation_metadata()).get("authorization", "").removeprefix("Bearer ")
        self.tokens_seen.append(token)
        if token not in self.tokens:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid IAM token")
        if throttled:
            context.abort(self.throttle_code, "too many requests, retry later")
        if request.parent_id in self.denied_parents:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"permission denied for resource {request.parent_id}")
        stored = self.instances if kind == "instances" else self.gpu_clusters
        items = [item for item in stored if item.metadata.parent_id == request.parent_id]
        start = _offset(request.page_token, request.parent_id, context)
        size = min(request.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        page, end = items[start : start + size], start + size
        next_token = _token(request.parent_id, end) if end < len(items) else ""
        response_type = REGISTRY.message_class(
            "nebius.compute.v1.ListInstancesResponse"
            if kind == "instances"
            else "nebius.compute.v1.ListGpuClustersResponse"
        )
        return response_type(items=page, next_page_token=next_token)


def _service(client: type, method: str, behaviour: Any) -> grpc.GenericRpcHandler:
    """A gRPC handler for one method of a Nebius service, typed by the SDK's service descriptor."""
    descriptor = client.get_descriptor()  # type: ignore[attr-defined]
    method_descriptor = descriptor.methods_by_name[method]
    handler = grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=REGISTRY.message_class(method_descriptor.input_type.full_name).FromString,
        response_serializer=REGISTRY.message_class(method_descriptor.output_type.full_name).SerializeToString,
    )
    return grpc.method_handlers_generic_handler(descriptor.full_name, {method: handler})


def _token(parent_id: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{parent_id}:{offset}".encode()).decode()


def _offset(page_token: str, parent_id: str, context: grpc.ServicerContext) -> int:
    if not page_token:
        return 0
    try:
        parent, offset = base64.urlsafe_b64decode(page_token).decode().rsplit(":", 1)
        if parent == parent_id:
            return int(offset)
    except ValueError:
        pass
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid page token")
    raise AssertionError("unreachable")  # context.abort raises
