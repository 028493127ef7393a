# SPDX-License-Identifier: Apache-2.0
"""The GCP source with the real google-cloud-compute SDK (REST transport) against a fake Compute Engine API.

The fake (fake_gcp.py) listens on 127.0.0.1 only. Every source here gets the fake's endpoint and
explicit credentials, and the environment points the metadata server at a closed local port, so
nothing can reach Google or 169.254.169.254.
"""

from __future__ import annotations

import math
import socket
import sys
import time

import google.auth.credentials
import google.cloud
import pytest
from google.auth.compute_engine import _metadata
from google.auth.credentials import AnonymousCredentials
from google.oauth2.credentials import Credentials

from gpufabric.collection import plugin_utils

from .fake_gcp import FakeGcp, compact_policy, instance

fleet_base = plugin_utils("fleet_base")
fleet_gcp = plugin_utils("fleet_gcp")
catalog = plugin_utils("fabric_catalog").load_catalog()

INSTANCES_PATH = "/compute/v1/projects/{}/aggregated/instances"
POLICIES_PATH = "/compute/v1/projects/{}/aggregated/resourcePolicies"
SECRET_TOKEN = "ya29.SECRET-ACCESS-TOKEN-do-not-print"
GPU_TYPES = ["a3-highgpu-8g", "a3-edgegpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"]
OTHER_TYPES = ["n2-standard-8", "e2-medium"]


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
def only_loopback(monkeypatch):
    """Fail the test if anything tries to connect anywhere but 127.0.0.1 (and refuse the connection)."""
    elsewhere: list[object] = []
    connect = socket.socket.connect

    def guarded_connect(sock, address):
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or address[0] in ("127.0.0.1", "::1"):
            return connect(sock, address)
        elsewhere.append(address)
        raise ConnectionRefusedError(f"test guard: no connection to {address}")

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    yield
    assert elsewhere == [], f"connections attempted outside 127.0.0.1: {elsewhere}"


@pytest.fixture(autouse=True)
def offline_google(monkeypatch, tmp_path):
    """No metadata server, no gcloud config, no mTLS, no proxy: nothing but 127.0.0.1 can be reached."""
    dead = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GCE_METADATA_HOST", dead)
    monkeypatch.setenv("GCE_METADATA_IP", dead)
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    # google-auth reads these two at import time, and on a GCE VM it trusts the BIOS name even when
    # the metadata server does not answer: set them on the module so no import order can leak.
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", dead)
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")
    monkeypatch.setenv("GOOGLE_API_USE_MTLS_ENDPOINT", "never")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCE_METADATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def source(endpoint: str, **options) -> object:
    options.setdefault("credentials", AnonymousCredentials())
    options.setdefault("retry_initial_delay", 0.01)
    options.setdefault("timeout", 5.0)
    return fleet_gcp.GcpSource(endpoint=endpoint, **options)


def small_fleet() -> FakeGcp:
    """Two projects, four zones in three regions, GPU and non-GPU types, every state family."""
    a = [
        instance("a3h-0", "us-central1-a", "a3-highgpu-8g", instance_id=101, gvnics=5, labels={"team": "ml"}),
        instance("a3e-0", "us-central1-b", "a3-edgegpu-8g", instance_id=102, gvnics=5, status="TERMINATED"),
        instance("a3m-0", "us-east5-a", "a3-megagpu-8g", instance_id=103, gvnics=9, policies=["pack-east"]),
        instance("a3m-1", "us-east5-a", "a3-megagpu-8g", instance_id=104, gvnics=9, policies=["nightly", "pack-east"]),
        instance("web-0", "us-central1-a", "e2-medium", instance_id=105, public_ip="203.0.113.7", status="STAGING"),
        instance("db-0", "us-central1-b", "n2-standard-8", instance_id=106, policies=["nightly-c"], status="SUSPENDED"),
        instance("x-0", "us-central1-b", "n2-standard-8", instance_id=107, status="STOPPING"),
    ]
    rdma = {"gvnics": 2, "mrdma_nics": 8}  # a3-ultra and a4: 2 gVNIC host NICs, 8 RDMA GPU NICs
    b = [
        instance(
            "a3u-0", "europe-west1-b", "a3-ultragpu-8g", project="proj-b", instance_id=201, policies=["ultra"], **rdma
        ),
        instance(
            "a4-0", "europe-west1-b", "a4-highgpu-8g", project="proj-b", instance_id=202, status="PROVISIONING", **rdma
        ),
    ]
    policies = {
        "proj-a": [
            compact_policy("pack-east", "us-east5"),
            compact_policy("nightly", "us-east5", kind="schedule"),
            compact_policy("nightly-c", "us-central1", kind="schedule"),
        ],
        "proj-b": [compact_policy("ultra", "europe-west1", project="proj-b", kind="workload")],
    }
    return FakeGcp(instances={"proj-a": a, "proj-b": b}, policies=policies)


def by_name(instances) -> dict:
    return {i.name: i for i in instances}


def test_catalog_gpu_types_are_the_ones_the_fleet_uses():
    assert all(catalog.find("gcp", t) for t in GPU_TYPES)
    assert not any(catalog.find("gcp", t) for t in OTHER_TYPES)
    assert all(fleet_base.is_gpu_type("gcp", t) for t in GPU_TYPES)
    assert not any(fleet_base.is_gpu_type("gcp", t) for t in OTHER_TYPES)


def test_lists_every_instance_of_every_project_and_zone_with_its_facts():
    fake = small_fleet()
    with fake.serve() as server:
        found = by_name(source(server.endpoint, projects=["proj-a", "proj-b"]).instances())

    assert set(found) == {"a3h-0", "a3e-0", "a3m-0", "a3m-1", "web-0", "db-0", "x-0", "a3u-0", "a4-0"}
    a3h = found["a3h-0"]
    assert (a3h.cloud, a3h.instance_id, a3h.instance_type) == ("gcp", "101", "a3-highgpu-8g")
    assert (a3h.region, a3h.zone, a3h.private_ip, a3h.public_ip) == ("us-central1", "us-central1-a", "10.0.0.2", None)
    assert a3h.tags == {"team": "ml"}
    assert a3h.ids == {"project": "proj-a", "instance_id": "101"}
    assert a3h.extra == {"gvnic_interfaces": 5, "mrdma_interfaces": 0, "network_interfaces": 5}
    assert a3h.placement is None
    assert found["web-0"].public_ip == "203.0.113.7"
    assert found["a3u-0"].extra == {"gvnic_interfaces": 2, "mrdma_interfaces": 8, "network_interfaces": 10}
    assert found["a3u-0"].ids["project"] == "proj-b"
    assert found["a3u-0"].region == "europe-west1"
    # Placement: the compact (or HIGH_THROUGHPUT workload) policy, never a schedule policy.
    assert found["a3m-0"].placement == found["a3m-1"].placement == "pack-east"
    assert found["a3u-0"].placement == "ultra"
    assert found["db-0"].placement is None
    # One list call per project for each collection: nothing per instance.
    assert fake.requests == {
        INSTANCES_PATH.format("proj-a"): 1,
        INSTANCES_PATH.format("proj-b"): 1,
        POLICIES_PATH.format("proj-a"): 1,
        POLICIES_PATH.format("proj-b"): 1,
    }


def test_a4x_vms_carry_their_sub_block_as_nvlink_domain():
    """A4X (GB200 NVL72): the sub-block of resourceStatus.physicalHostTopology is the NVLink domain; an a3-ultra VM
    with a physical topology gets none (it has no multi-node NVLink)."""
    rack = ("cl-1", "blk-7", "sb-3", "")
    vms = [
        instance(f"a4x-{i}", "us-central1-a", "a4x-highgpu-4g", instance_id=300 + i, topology=(*rack[:3], f"h{i}"))
        for i in range(2)
    ]
    vms.append(instance("a4x-loose", "us-central1-a", "a4x-highgpu-4g", instance_id=310))
    vms.append(instance("a3u-1", "us-central1-a", "a3-ultragpu-8g", instance_id=311, topology=("cl-1", "b", "s", "h")))
    with FakeGcp(instances={"proj-a": vms}).serve() as server:
        found = by_name(source(server.endpoint, projects=["proj-a"]).instances())
    assert found["a4x-0"].nvlink_domain == found["a4x-1"].nvlink_domain == "cl-1/blk-7/sb-3"
    assert found["a4x-loose"].nvlink_domain is None
    assert found["a3u-1"].nvlink_domain is None


def test_states_are_normalised():
    with small_fleet().serve() as server:
        found = by_name(source(server.endpoint, projects=["proj-a", "proj-b"]).instances())
    states = {name: i.state for name, i in found.items()}
    assert states == {
        "a3h-0": fleet_base.RUNNING,
        "a3m-0": fleet_base.RUNNING,
        "a3m-1": fleet_base.RUNNING,
        "a3u-0": fleet_base.RUNNING,
        "a3e-0": fleet_base.STOPPED,  # TERMINATED is how GCE reports a stopped VM
        "db-0": fleet_base.STOPPED,  # SUSPENDED
        "web-0": fleet_base.PENDING,  # STAGING
        "a4-0": fleet_base.PENDING,  # PROVISIONING
        "x-0": fleet_base.OTHER,  # STOPPING
    }


def test_zones_limit_the_listing_and_skip_the_policy_call_when_no_instance_needs_it():
    fake = small_fleet()
    with fake.serve() as server:
        found = by_name(source(server.endpoint, projects=["proj-a"], zones=["us-central1-a"]).instances())
    assert set(found) == {"a3h-0", "web-0"}
    assert fake.requests == {INSTANCES_PATH.format("proj-a"): 1}


def test_pagination_over_thousands_of_instances_grows_calls_with_pages_not_instances():
    zones = ["us-central1-a", "us-central1-b", "us-east5-a", "europe-west1-b", "asia-southeast1-c"]
    types = GPU_TYPES + OTHER_TYPES
    fleet = [
        instance(f"vm-{n:05d}", zones[n % len(zones)], types[n % len(types)], instance_id=10_000 + n, gvnics=1)
        for n in range(3_100)
    ]
    fake = FakeGcp(instances={"proj-a": fleet})
    with fake.serve() as server:
        found = list(source(server.endpoint, projects=["proj-a"]).instances())
        small_pages = list(source(server.endpoint, projects=["proj-a"], page_size=200).instances())

    assert len(found) == len(small_pages) == 3_100
    assert {i.instance_id for i in found} == {str(10_000 + n) for n in range(3_100)}
    assert {i.zone for i in found} == set(zones)
    gpu_hosts = sum(1 for n in range(3_100) if types[n % len(types)] in GPU_TYPES)
    assert sum(1 for i in found if fleet_base.is_gpu_type("gcp", i.instance_type)) == gpu_hosts
    # 500 per page (the API's maximum and the default), then 200 per page.
    assert fake.requests[INSTANCES_PATH.format("proj-a")] == math.ceil(3_100 / 500) + math.ceil(3_100 / 200)
    assert POLICIES_PATH.format("proj-a") not in fake.requests


@pytest.mark.parametrize("status", [429, 503, 403])
def test_throttling_is_retried_until_the_api_answers(status):
    fake = small_fleet()
    fake.throttle, fake.throttle_status = 3, status
    with fake.serve() as server:
        found = list(source(server.endpoint, projects=["proj-a"]).instances())
    assert len(found) == 7
    assert fake.requests[INSTANCES_PATH.format("proj-a")] == 4


def test_throttling_that_never_ends_is_one_clear_error():
    fake = small_fleet()
    fake.throttle = 10_000
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"], retry_timeout=0.3).instances())
    assert str(caught.value) == (
        "gcp: the API kept throttling requests in project proj-a (HTTP 429) after retrying; try again later"
    )


class StaticToken(google.auth.credentials.Credentials):
    """A bearer token that cannot be refreshed, as from a token broker: a 401 stays a 401."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def refresh(self, request) -> None:
        pass


def test_rejected_credentials_are_one_error_without_the_token():
    fake = small_fleet()
    fake.fail_with = 401
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"], credentials=StaticToken(SECRET_TOKEN)).instances())
    message = str(caught.value)
    assert message == (
        f"gcp: credentials were rejected by {server.endpoint} (HTTP 401) in project proj-a; "
        "check GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`"
    )
    assert "SECRET" not in message
    # The token did travel, to 127.0.0.1 only (google-auth retries once after a 401 with a refreshed token).
    assert set(fake.authorizations) == {f"Bearer {SECRET_TOKEN}"}


def test_token_that_cannot_be_refreshed_is_one_error_without_the_token():
    # User credentials without a refresh token: google-auth answers the 401 by trying to refresh.
    fake = small_fleet()
    fake.fail_with = 401
    token = Credentials(token=SECRET_TOKEN)
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"], credentials=token).instances())
    assert str(caught.value) == "gcp: credentials were rejected while fetching an access token; renew or replace them"


def test_missing_permission_names_compute_instances_list():
    fake = small_fleet()
    fake.fail_with = 403
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"]).instances())
    assert str(caught.value) == (
        "gcp: permission denied in project proj-a: the caller needs compute.instances.list "
        "(roles/compute.viewer grants it); the API said: Required 'compute.instances.list' permission for "
        "'projects/proj-a'"
    )
    assert fake.requests[INSTANCES_PATH.format("proj-a")] == 1  # a denial is not retried


def test_missing_permission_on_resource_policies_names_that_permission():
    fake = small_fleet()
    fake.fail_with, fake.fail_only = 403, "resourcePolicies"
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"]).instances())
    assert str(caught.value).startswith(
        "gcp: permission denied in project proj-a: the caller needs compute.resourcePolicies.list "
    )


def test_unknown_project_reports_the_api_message():
    fake = small_fleet()
    fake.fail_with = 404
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["nope"]).instances())
    assert str(caught.value) == (
        "gcp: listing instances in project nope failed: HTTP 404 (check the project id): "
        "The resource 'projects/nope' was not found"
    )


def test_partial_answer_about_a_region_of_a_requested_zone_is_an_error():
    fake = small_fleet()
    fake.unreachables = ["regions/us-east5"]
    with fake.serve() as server, pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(server.endpoint, projects=["proj-a"], zones=["us-east5-a"]).instances())
    assert "could not list regions/us-east5 in project proj-a" in str(caught.value)


def test_partial_answer_for_a_requested_zone_is_an_error():
    fake = small_fleet()
    fake.unreachables = ["zones/us-east5-a"]
    with fake.serve() as server:
        elsewhere = list(source(server.endpoint, projects=["proj-a"], zones=["us-central1-a"]).instances())
        with pytest.raises(fleet_base.DiscoveryError) as caught:
            list(source(server.endpoint, projects=["proj-a"]).instances())
    assert len(elsewhere) == 2
    assert str(caught.value) == (
        "gcp: the API could not list zones/us-east5-a in project proj-a (partial answer); try again later"
    )


def test_unreachable_endpoint_fails_fast():
    endpoint = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source(endpoint, projects=["proj-a"]).instances())
    assert time.monotonic() - started < 5
    assert str(caught.value) == f"gcp: cannot reach {endpoint}: Connection refused"


def test_no_credentials_anywhere_is_one_error():
    # credentials=None takes google.auth.default(); with no key file, no gcloud config and no
    # metadata server, it must fail with advice, not a traceback.
    with pytest.raises(fleet_base.DiscoveryError) as caught:
        list(fleet_gcp.GcpSource(projects=["proj-a"], endpoint=f"http://127.0.0.1:{closed_port()}").instances())
    assert str(caught.value).startswith("gcp: no credentials found: set GOOGLE_APPLICATION_CREDENTIALS")


def test_no_project_is_refused():
    with pytest.raises(fleet_base.DiscoveryError, match="no project given"):
        fleet_gcp.GcpSource(projects=[])


def test_missing_sdk_is_one_error(monkeypatch):
    # As if the package were not installed: the import of google.cloud.compute_v1 fails.
    monkeypatch.setitem(sys.modules, "google.cloud.compute_v1", None)
    monkeypatch.delattr(google.cloud, "compute_v1")
    with pytest.raises(fleet_base.DiscoveryError) as caught:
        list(fleet_gcp.GcpSource(projects=["proj-a"]).instances())
    assert str(caught.value) == "gcp: the google-cloud-compute SDK is not installed; install gpufabric[gcp]"
