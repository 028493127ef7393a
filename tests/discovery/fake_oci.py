# SPDX-License-Identifier: Apache-2.0
"""A fake OCI Core Services (iaas) endpoint on 127.0.0.1 for the real ``oci`` SDK.

It serves the documented REST list operations the OCI source calls, under API version 20160918, with the
documented camelCase JSON and ``opc-next-page`` pagination, from an in-memory fleet:

    GET /20160918/instances?compartmentId=..[&computeClusterId=..][&page=..][&limit=..]   -> [Instance]
    GET /20160918/vnicAttachments?compartmentId=..                                        -> [VnicAttachment]
    GET /20160918/privateIps?subnetId=..                                                  -> [PrivateIp]
    GET /20160918/publicIps?scope=REGION|AVAILABILITY_DOMAIN&compartmentId=..[&availabilityDomain=..] -> [PublicIp]
    GET /20160918/clusterNetworks?compartmentId=..                                        -> [ClusterNetworkSummary]
    GET /20160918/clusterNetworks/{id}/instances?compartmentId=..                         -> [InstanceSummary]
    GET /20160918/computeClusters?compartmentId=..                                        -> ComputeClusterCollection
    GET /20160918/computeGpuMemoryClusters?compartmentId=..                      -> ComputeGpuMemoryClusterCollection
    GET /20160918/computeGpuMemoryClusters/{id}/instances          -> ComputeGpuMemoryClusterInstanceCollection

Several regions share one server: a leading path segment names the region (``/us-ashburn-1/20160918/...``, the
source's endpoint being ``http://127.0.0.1:PORT/{region}``). Errors have OCI's shape, ``{"code", "message"}``.

Knobs: ``throttle(n)`` answers 429 TooManyRequests n times; ``reject_credentials()`` answers 401 NotAuthenticated;
``deny(resource)`` answers 404 NotAuthorizedOrNotFound for one resource (e.g. "privateIps"), ``fail(resource,
status, code, message)`` any other error; ``stall_s`` delays every answer. ``requests`` counts
the calls per resource; ``authorization`` keeps the Authorization headers seen.

Not faked: request signature verification (any Authorization header is accepted, a missing one is a 401),
sorting, lifecycle filters, GET of single resources (answered 404 NotFound and counted under "other"), IPv6,
VLAN-attached VNICs, and write operations.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_VERSION = "20160918"
CREATED = "2025-01-15T10:00:00.000Z"


@dataclass
class Region:
    """One region's resources, each a dict in the API's JSON shape."""

    instances: list[dict[str, Any]] = field(default_factory=list)
    vnic_attachments: list[dict[str, Any]] = field(default_factory=list)
    private_ips: list[dict[str, Any]] = field(default_factory=list)
    public_ips: list[dict[str, Any]] = field(default_factory=list)
    cluster_networks: list[dict[str, Any]] = field(default_factory=list)
    cluster_network_members: dict[str, list[str]] = field(default_factory=dict)  # cluster network id -> instance ids
    compute_clusters: list[dict[str, Any]] = field(default_factory=list)
    compute_cluster_members: dict[str, list[str]] = field(default_factory=dict)  # compute cluster id -> instance ids
    gpu_memory_clusters: list[dict[str, Any]] = field(default_factory=list)
    # GPU memory cluster id -> the summaries of its instances
    gpu_memory_cluster_members: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class FakeFleet:
    """An in-memory OCI tenancy; ``add_instance`` writes the instance and its VNIC, IPs and placement records."""

    def __init__(self) -> None:
        self.regions: dict[str, Region] = {}
        self._serial = itertools.count(1)

    def ocid(self, kind: str, region: str) -> str:
        return f"ocid1.{kind}.oc1.{region}.fake{next(self._serial):06d}"

    def region(self, name: str) -> Region:
        return self.regions.setdefault(name, Region())

    def add_cluster_network(self, region: str, compartment_id: str, state: str = "RUNNING") -> str:
        network_id = self.ocid("clusternetwork", region)
        self.region(region).cluster_networks.append(
            {
                "id": network_id,
                "compartmentId": compartment_id,
                "displayName": f"cn-{network_id[-6:]}",
                "lifecycleState": state,
                "instancePools": [],
                "timeCreated": CREATED,
                "timeUpdated": CREATED,
                "freeformTags": {},
                "definedTags": {},
            }
        )
        self.region(region).cluster_network_members[network_id] = []
        return network_id

    def add_compute_cluster(self, region: str, compartment_id: str, availability_domain: str) -> str:
        cluster_id = self.ocid("computecluster", region)
        self.region(region).compute_clusters.append(
            {
                "id": cluster_id,
                "compartmentId": compartment_id,
                "availabilityDomain": availability_domain,
                "displayName": f"cc-{cluster_id[-6:]}",
                "lifecycleState": "ACTIVE",
                "timeCreated": CREATED,
                "freeformTags": {},
                "definedTags": {},
            }
        )
        self.region(region).compute_cluster_members[cluster_id] = []
        return cluster_id

    def add_gpu_memory_cluster(self, region: str, compartment_id: str, availability_domain: str) -> tuple[str, str]:
        """A GPU memory cluster on a GPU memory fabric of its own (one NVL72 rack): (cluster id, fabric id)."""
        cluster_id = self.ocid("computegpumemorycluster", region)
        fabric_id = self.ocid("computegpumemoryfabric", region)
        self.region(region).gpu_memory_clusters.append(
            {
                "id": cluster_id,
                "compartmentId": compartment_id,
                "availabilityDomain": availability_domain,
                "gpuMemoryFabricId": fabric_id,
                "size": 0,
                "displayName": f"gmc-{cluster_id[-6:]}",
                "lifecycleState": "ACTIVE",
                "timeCreated": CREATED,
                "freeformTags": {},
                "definedTags": {},
                "systemTags": {},
            }
        )
        self.region(region).gpu_memory_cluster_members[cluster_id] = []
        return cluster_id, fabric_id

    def add_instance(
        self,
        region: str,
        compartment_id: str,
        *,
        name: str,
        shape: str,
        availability_domain: str,
        state: str = "RUNNING",
        subnet_id: str,
        private_ip: str | None,
        public_ip: str | None = None,
        public_ip_lifetime: str = "EPHEMERAL",
        secondary_vnic_ips: tuple[str, ...] = (),
        cluster_network_id: str | None = None,
        compute_cluster_id: str | None = None,
        gpu_memory_cluster_id: str | None = None,
        freeform_tags: dict[str, str] | None = None,
        defined_tags: dict[str, dict[str, Any]] | None = None,
    ) -> str:
        """One instance; ``private_ip=None`` gives it no VNIC (as a terminated instance)."""
        records = self.region(region)
        instance_id = self.ocid("instance", region)
        records.instances.append(
            {
                "id": instance_id,
                "compartmentId": compartment_id,
                "availabilityDomain": availability_domain,
                "faultDomain": "FAULT-DOMAIN-1",
                "displayName": name,
                "shape": shape,
                "lifecycleState": state,
                "region": region,
                "imageId": self.ocid("image", region),
                "timeCreated": CREATED,
                "freeformTags": freeform_tags or {},
                "definedTags": defined_tags or {},
                "systemTags": {},
                "metadata": {},
                "extendedMetadata": {},
            }
        )
        if private_ip is not None:
            # The primary VNIC's attachment is the oldest; secondary VNICs are attached later.
            private_ip_id = self._add_vnic(
                region, compartment_id, instance_id, availability_domain, subnet_id, private_ip, 0
            )
            for minute, address in enumerate(secondary_vnic_ips, start=1):
                self._add_vnic(region, compartment_id, instance_id, availability_domain, subnet_id, address, minute)
            if public_ip:
                records.public_ips.append(
                    {
                        "id": self.ocid("publicip", region),
                        "compartmentId": compartment_id,
                        "ipAddress": public_ip,
                        "lifetime": public_ip_lifetime,
                        "scope": "AVAILABILITY_DOMAIN" if public_ip_lifetime == "EPHEMERAL" else "REGION",
                        "availabilityDomain": availability_domain if public_ip_lifetime == "EPHEMERAL" else None,
                        "assignedEntityId": private_ip_id,
                        "assignedEntityType": "PRIVATE_IP",
                        "privateIpId": private_ip_id,
                        "lifecycleState": "ASSIGNED",
                        "timeCreated": CREATED,
                    }
                )
        if cluster_network_id:
            records.cluster_network_members[cluster_network_id].append(instance_id)
        if compute_cluster_id:
            records.compute_cluster_members[compute_cluster_id].append(instance_id)
        if gpu_memory_cluster_id:
            records.gpu_memory_cluster_members[gpu_memory_cluster_id].append(
                {
                    "id": instance_id,
                    "compartmentId": compartment_id,
                    "availabilityDomain": availability_domain,
                    "faultDomain": "FAULT-DOMAIN-1",
                    "region": region,
                    "instanceShape": shape,
                    "lifecycleState": state,
                    "displayName": name,
                    "timeCreated": CREATED,
                }
            )
        return instance_id

    def _add_vnic(
        self, region: str, compartment_id: str, instance_id: str, ad: str, subnet_id: str, address: str, minute: int
    ) -> str:
        records = self.region(region)
        vnic_id = self.ocid("vnic", region)
        private_ip_id = self.ocid("privateip", region)
        records.vnic_attachments.append(
            {
                "id": self.ocid("vnicattachment", region),
                "compartmentId": compartment_id,
                "availabilityDomain": ad,
                "instanceId": instance_id,
                "vnicId": vnic_id,
                "subnetId": subnet_id,
                "nicIndex": 0,
                "lifecycleState": "ATTACHED",
                "timeCreated": f"2025-01-15T10:{minute:02d}:00.000Z",
            }
        )
        records.private_ips.append(
            {
                "id": private_ip_id,
                "compartmentId": compartment_id,
                "availabilityDomain": ad,
                "ipAddress": address,
                "isPrimary": True,
                "subnetId": subnet_id,
                "vnicId": vnic_id,
                "hostnameLabel": None,
                "timeCreated": CREATED,
                "freeformTags": {},
                "definedTags": {},
            }
        )
        return private_ip_id


class FakeOci:
    """The HTTP server; a context manager that serves ``fleet`` on a free port of 127.0.0.1."""

    def __init__(self, fleet: FakeFleet, page_size: int = 100) -> None:
        self.fleet = fleet
        self.page_size = page_size
        self.requests: Counter[str] = Counter()
        self.authorization: list[str] = []
        self._throttles_left = 0
        self.throttled = 0
        self._credentials_rejected = False
        self._failures: dict[str, tuple[int, str, str]] = {}  # resource -> (status, code, message)
        self.stall_s = 0.0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # A short poll interval, so that leaving the context does not wait half a second.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        """The source's ``endpoint`` option: one path prefix per region."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/{{region}}"

    def __enter__(self) -> FakeOci:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- knobs ---------------------------------------------------------------------------------------------------

    def throttle(self, times: int) -> None:
        self._throttles_left = times

    def reject_credentials(self) -> None:
        self._credentials_rejected = True

    def deny(self, resource: str) -> None:
        self.fail(resource, 404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")

    def fail(self, resource: str, status: int, code: str, message: str) -> None:
        self._failures[resource] = (status, code, message)

    def list_calls(self) -> int:
        return sum(count for resource, count in self.requests.items() if resource != "other")

    # --- serving -------------------------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between

            def do_GET(self) -> None:
                status, body, headers = fake._answer(self.path, self.headers.get("Authorization"))
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("opc-request-id", "fake-request-id")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        return Handler

    def _answer(self, raw_path: str, authorization: str | None) -> tuple[int, Any, dict[str, str]]:
        time.sleep(self.stall_s)
        url = urlsplit(raw_path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        region_name, resource, cluster_network_id = _route(url.path)
        with self._lock:
            self.requests[resource] += 1
            if authorization:
                self.authorization.append(authorization)
            if not authorization or self._credentials_rejected:
                return _error(
                    401,
                    "NotAuthenticated",
                    "The required information to complete authentication was not provided or was incorrect.",
                )
            if self._throttles_left > 0:
                self._throttles_left -= 1
                self.throttled += 1
                return _error(429, "TooManyRequests", "Too many requests for the tenancy")
            if resource in self._failures:
                return _error(*self._failures[resource])
        region = self.fleet.regions.get(region_name or "", Region())
        items = _select(region, resource, cluster_network_id, query)
        if items is None:
            return _error(404, "NotFound", f"no fake route for {url.path}")
        if isinstance(items, str):
            return _error(400, "MissingParameter", items)
        return self._page(resource, items, query)

    def _page(
        self, resource: str, items: list[dict[str, Any]], query: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        start = int(query.get("page", "0"))
        size = min(int(query.get("limit", self.page_size)), self.page_size)
        page = items[start : start + size]
        headers = {"opc-next-page": str(start + size)} if start + size < len(items) else {}
        collections = ("computeClusters", "computeGpuMemoryClusters", "computeGpuMemoryClusterInstances")
        body: Any = {"items": page} if resource in collections else page
        return 200, body, headers


# /[region/]20160918/<resource>, or /[region/]20160918/<clusterNetworks|computeGpuMemoryClusters>/<id>/instances;
# anything else (such as a GET of one instance or VNIC, which the source must never need) is routed to "other".
ROUTE = re.compile(
    rf"^/(?:(?P<region>[a-z0-9-]+)/)?{API_VERSION}/(?P<resource>[A-Za-z]+)(?:/(?P<id>[^/]+)/instances)?$"
)


def _route(path: str) -> tuple[str | None, str, str | None]:
    """(region, resource, cluster network or GPU memory cluster id) of a request path."""
    match = ROUTE.match(path)
    if not match:
        return None, "other", None
    if match["id"]:
        members = {
            "clusterNetworks": "clusterNetworkInstances",
            "computeGpuMemoryClusters": "computeGpuMemoryClusterInstances",
        }
        if match["resource"] not in members:
            return match["region"], "other", None
        return match["region"], members[match["resource"]], match["id"]
    return match["region"], match["resource"], None


def _select(
    region: Region, resource: str, cluster_network_id: str | None, query: dict[str, str]
) -> list[dict[str, Any]] | str | None:
    """The items one list operation returns, a missing-parameter message, or None for an unknown route."""
    compartment = query.get("compartmentId")
    if resource == "privateIps":
        if "subnetId" not in query and "vnicId" not in query:
            return "one of subnetId, vnicId or vlanId is required"
        return [
            ip
            for ip in region.private_ips
            if ip["subnetId"] == query.get("subnetId", ip["subnetId"])
            and ip["vnicId"] == query.get("vnicId", ip["vnicId"])
        ]
    if resource == "computeGpuMemoryClusterInstances":  # by cluster id alone, as the API takes it
        return list(region.gpu_memory_cluster_members.get(cluster_network_id or "", []))
    if resource not in (
        "computeGpuMemoryClusters",
        "instances",
        "vnicAttachments",
        "publicIps",
        "clusterNetworks",
        "clusterNetworkInstances",
        "computeClusters",
    ):
        return None
    if not compartment:
        return "compartmentId is required"

    def in_compartment(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [item for item in items if item["compartmentId"] == compartment]

    if resource == "instances":
        instances = in_compartment(region.instances)
        if "computeClusterId" in query:
            members = set(region.compute_cluster_members.get(query["computeClusterId"], []))
            instances = [instance for instance in instances if instance["id"] in members]
        return instances
    if resource == "vnicAttachments":
        return in_compartment(region.vnic_attachments)
    if resource == "publicIps":
        scope = query.get("scope")
        if scope not in ("REGION", "AVAILABILITY_DOMAIN"):
            return "scope is required"
        if scope == "AVAILABILITY_DOMAIN" and not query.get("availabilityDomain"):
            return "availabilityDomain is required for scope AVAILABILITY_DOMAIN"
        return [
            ip
            for ip in in_compartment(region.public_ips)
            if ip["scope"] == scope and (scope == "REGION" or ip["availabilityDomain"] == query["availabilityDomain"])
        ]
    if resource == "clusterNetworks":
        return in_compartment(region.cluster_networks)
    if resource == "computeGpuMemoryClusters":
        return in_compartment(region.gpu_memory_clusters)
    if resource == "clusterNetworkInstances":
        members = set(region.cluster_network_members.get(cluster_network_id or "", []))
        return [_instance_summary(i) for i in in_compartment(region.instances) if i["id"] in members]
    return in_compartment(region.compute_clusters)


def _instance_summary(instance: dict[str, Any]) -> dict[str, Any]:
    """An instance as ListClusterNetworkInstances returns it (InstanceSummary, with ``state`` not lifecycleState)."""
    keys = ("id", "availabilityDomain", "compartmentId", "displayName", "faultDomain", "region", "shape", "timeCreated")
    return {**{key: instance[key] for key in keys}, "state": instance["lifecycleState"]}


def _error(status: int, code: str, message: str) -> tuple[int, Any, dict[str, str]]:
    return status, {"code": code, "message": message}, {}
