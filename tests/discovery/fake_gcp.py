# SPDX-License-Identifier: Apache-2.0
"""A fake Compute Engine REST API on 127.0.0.1 for the GCP source tests.

It serves the two list calls the source makes, in the documented JSON shape (camelCase fields,
``items`` keyed by scope, ``nextPageToken``, ``maxResults``/``pageToken`` honoured, 500 per page
by default as the real API):

- ``GET /compute/v1/projects/{project}/aggregated/instances`` (kind compute#instanceAggregatedList)
- ``GET /compute/v1/projects/{project}/aggregated/resourcePolicies`` (kind compute#resourcePolicyAggregatedList)

Knobs: ``throttle`` answers the next N list calls with a rate-limit error (HTTP 429 by default,
or 503, or 403 rateLimitExceeded); ``fail_with`` answers every call (or, with ``fail_only``, the
calls of one collection) with 401, 403 or 404 in Google's error JSON shape; ``unreachables``
lists scopes (``zones/Z`` for instances, ``regions/R`` for policies) a partial answer missed.
``requests`` counts the calls per path. It does not check credentials, filters, or any
request parameter other than the two paging ones.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

API = "https://www.googleapis.com/compute/v1"
DEFAULT_PAGE_SIZE = 500

ERRORS = {
    401: ("UNAUTHENTICATED", "authError", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "forbidden", "Required '{permission}' permission for 'projects/{project}'"),
    404: ("NOT_FOUND", "notFound", "The resource 'projects/{project}' was not found"),
    429: ("RESOURCE_EXHAUSTED", "rateLimitExceeded", "Quota exceeded for quota metric 'Read requests'."),
    503: ("UNAVAILABLE", "backendError", "The service is currently unavailable."),
}


def instance(
    name: str,
    zone: str,
    machine_type: str,
    *,
    project: str = "proj-a",
    instance_id: int,
    status: str = "RUNNING",
    private_ip: str | None = "10.0.0.2",
    public_ip: str | None = None,
    gvnics: int = 1,
    mrdma_nics: int = 0,
    labels: dict[str, str] | None = None,
    policies: list[str] | None = None,
    topology: tuple[str, str, str, str] | None = None,
) -> dict[str, Any]:
    """One instance resource as instances.aggregatedList returns it (the fields the source reads, and a few more)."""
    nics: list[dict[str, Any]] = []
    for index in range(gvnics + mrdma_nics):
        nic: dict[str, Any] = {
            "kind": "compute#networkInterface",
            "name": f"nic{index}",
            "network": f"{API}/projects/{project}/global/networks/net-{index}",
            "networkIP": f"10.{index}.0.{instance_id % 250 + 2}",
            "nicType": "GVNIC" if index < gvnics else "MRDMA",
        }
        nics.append(nic)
    if nics:
        if private_ip is None:
            del nics[0]["networkIP"]
        else:
            nics[0]["networkIP"] = private_ip
        if public_ip:
            nics[0]["accessConfigs"] = [
                {"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": "External NAT", "natIP": public_ip}
            ]
    region = zone.rsplit("-", 1)[0]
    resource: dict[str, Any] = {
        "kind": "compute#instance",
        "id": str(instance_id),  # uint64 is a string in JSON
        "creationTimestamp": "2025-01-01T00:00:00.000-08:00",
        "name": name,
        "zone": f"{API}/projects/{project}/zones/{zone}",
        "machineType": f"{API}/projects/{project}/zones/{zone}/machineTypes/{machine_type}",
        "status": status,
        "networkInterfaces": nics,
        "selfLink": f"{API}/projects/{project}/zones/{zone}/instances/{name}",
        "labels": labels or {},
    }
    if topology:  # (cluster, block, subblock, host) of the physical host
        cluster, block, subblock, host = topology
        resource["resourceStatus"] = {
            "physicalHost": f"/{block}/{subblock}/{host}",
            "physicalHostTopology": {"cluster": cluster, "block": block, "subblock": subblock, "host": host},
        }
    if policies:
        resource["resourcePolicies"] = [
            f"{API}/projects/{project}/regions/{region}/resourcePolicies/{p}" for p in policies
        ]
    return resource


def compact_policy(name: str, region: str, *, project: str = "proj-a", kind: str = "compact") -> dict[str, Any]:
    """A resource policy: ``compact`` (group placement, COLLOCATED), ``workload`` (HIGH_THROUGHPUT), ``schedule``."""
    policy: dict[str, Any] = {
        "kind": "compute#resourcePolicy",
        "name": name,
        "region": f"{API}/projects/{project}/regions/{region}",
        "selfLink": f"{API}/projects/{project}/regions/{region}/resourcePolicies/{name}",
        "status": "READY",
    }
    if kind == "compact":
        policy["groupPlacementPolicy"] = {"collocation": "COLLOCATED", "vmCount": 2}
    elif kind == "workload":
        policy["workloadPolicy"] = {"type": "HIGH_THROUGHPUT"}
    else:
        policy["instanceSchedulePolicy"] = {"timeZone": "UTC", "vmStartSchedule": {"schedule": "0 8 * * *"}}
    return policy


@dataclass
class FakeGcp:
    """The fleet (project -> instances, project -> resource policies) and the failure knobs."""

    instances: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    throttle: int = 0
    throttle_status: int = 429  # 429, 503, or 403 (answered as rateLimitExceeded)
    fail_with: int | None = None
    fail_only: str | None = None  # "instances" or "resourcePolicies": fail_with applies to that list only
    unreachables: list[str] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    authorizations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, query: dict[str, list[str]], authorization: str | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests[path] += 1
            if authorization:
                self.authorizations.append(authorization)
            throttled = self.throttle > 0
            self.throttle -= 1 if throttled else 0
        parts = path.strip("/").split("/")
        if len(parts) != 6 or parts[:3] != ["compute", "v1", "projects"] or parts[4] != "aggregated":
            return 404, error_body(404, "NOT_FOUND", "notFound", f"no route for {path}")
        project, collection = parts[3], parts[5]
        if collection not in {"instances", "resourcePolicies"}:
            return 404, error_body(404, "NOT_FOUND", "notFound", f"no route for {path}")
        if throttled:
            return self.throttled_answer()
        if self.fail_with is not None and self.fail_only in {None, collection}:
            status, reason, message = ERRORS[self.fail_with]
            permission = f"compute.{collection}.list"
            return self.fail_with, error_body(
                self.fail_with, status, reason, message.format(project=project, permission=permission)
            )
        if collection == "instances":
            return 200, self.page(project, query, "instances", self.instances.get(project, []), "zone")
        return 200, self.page(project, query, "resourcePolicies", self.policies.get(project, []), "region")

    def throttled_answer(self) -> tuple[int, dict[str, Any]]:
        if self.throttle_status == 403:
            message = "Rate Limit Exceeded"
            return 403, error_body(403, "PERMISSION_DENIED", "rateLimitExceeded", message)
        status, reason, message = ERRORS[self.throttle_status]
        return self.throttle_status, error_body(self.throttle_status, status, reason, message)

    def page(
        self, project: str, query: dict[str, list[str]], key: str, resources: list[dict[str, Any]], scope_field: str
    ) -> dict[str, Any]:
        """One page of an aggregated list: resources ordered by scope, grouped under ``zones/Z`` or ``regions/R``."""
        size = min(int(query.get("maxResults", [DEFAULT_PAGE_SIZE])[0]), DEFAULT_PAGE_SIZE)
        start = int(query.get("pageToken", ["0"])[0] or 0)
        ordered = sorted(resources, key=lambda r: (r[scope_field], r["name"]))
        chunk = ordered[start : start + size]
        plural = "zones" if scope_field == "zone" else "regions"
        items: dict[str, Any] = {}
        for resource in chunk:
            scope = f"{plural}/{resource[scope_field].rsplit('/', 1)[-1]}"
            items.setdefault(scope, {key: []})[key].append(resource)
        # The real API also lists scopes with nothing on this page, each with a warning and no resources.
        items[f"{plural}/{'europe-west4-b' if plural == 'zones' else 'europe-west4'}"] = {
            "warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": "There are no results for scope on this page.",
                "data": [{"key": "scope", "value": "europe-west4"}],
            }
        }
        kind = "compute#instanceAggregatedList" if key == "instances" else "compute#resourcePolicyAggregatedList"
        body: dict[str, Any] = {
            "kind": kind,
            "id": f"projects/{project}/aggregated/{key}",
            "items": items,
            "selfLink": f"{API}/projects/{project}/aggregated/{key}",
        }
        missed = [scope for scope in self.unreachables if scope.startswith(f"{plural}/")]
        if missed:
            body["unreachables"] = missed
        if start + size < len(ordered):
            body["nextPageToken"] = str(start + size)
        return body

    def serve(self) -> FakeServer:
        return FakeServer(self)


def error_body(code: int, status: str, reason: str, message: str) -> dict[str, Any]:
    """Google's JSON error shape."""
    return {
        "error": {
            "code": code,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
            "status": status,
        }
    }


class FakeServer:
    """The fake on a free 127.0.0.1 port, in a thread; a context manager that stops it."""

    def __init__(self, fake: FakeGcp) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                status, body = fake.answer(url.path, parse_qs(url.query), self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
