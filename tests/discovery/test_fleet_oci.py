# SPDX-License-Identifier: Apache-2.0
"""The OCI source with the real ``oci`` SDK against a fake Core Services endpoint on 127.0.0.1 (fake_oci.py).

Every client is pointed at the fake with ``endpoint`` and gets explicit fake credentials (a signer, or a config
file written here), so no request can leave this machine.
"""

from __future__ import annotations

import math
import socket
import sys
import time

import pytest
import requests

from gpufabric.collection import plugin_utils

from .fake_oci import FakeFleet, FakeOci

fleet_base = plugin_utils("fleet_base")
fleet_oci = plugin_utils("fleet_oci")

COMPARTMENT = "ocid1.compartment.oc1..fakecompartment"
OTHER_COMPARTMENT = "ocid1.compartment.oc1..othercompartment"
GPU, CPU = "BM.GPU.H100.8", "VM.Standard.E4.Flex"  # catalog/oci.yml, and a shape the catalog does not know
ASHBURN_AD1, ASHBURN_AD2 = "Uocm:US-ASHBURN-AD-1", "Uocm:US-ASHBURN-AD-2"
FRANKFURT_AD1 = "Uocm:EU-FRANKFURT-1-AD-1"
SECRET = "FAKE-SIGNATURE-must-never-be-printed"


class FakeSigner(requests.auth.AuthBase):
    """Signs nothing: adds a fixed Authorization header, the part of a signature an error must never show."""

    def __call__(self, request):
        request.headers["Authorization"] = f'Signature version="1",keyId="fake",signature="{SECRET}"'
        return request


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch, tmp_path):
    """No proxy (requests would send 127.0.0.1 traffic to one), no real OCI config, profile or region."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in (
        "OCI_CONFIG_FILE",
        "OCI_REGION",
        "OCI_CLI_PROFILE",
        "OCI_REGION_METADATA",
        "OCI_RESOURCE_PRINCIPAL_VERSION",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/.oci/config is looked up here


def source(endpoint: str, regions=("us-ashburn-1",), **options) -> object:
    options = {
        "signer": FakeSigner(),
        "config": {"region": regions[0]},
        "timeout_s": (2.0, 5.0),
        "retry_base_delay_s": 0.01,
        **options,
    }
    return fleet_oci.OciSource(COMPARTMENT, list(regions), endpoint=endpoint, **options)


def by_name(instances) -> dict[str, object]:
    return {instance.name: instance for instance in instances}


@pytest.fixture
def mixed_fleet() -> FakeFleet:
    """Two regions, three ADs: GPU hosts in a cluster network and a compute cluster, CPU VMs, every state."""
    fleet = FakeFleet()
    r1, r2 = "us-ashburn-1", "eu-frankfurt-1"
    network = fleet.add_cluster_network(r1, COMPARTMENT)
    fleet.add_cluster_network(r1, COMPARTMENT, state="TERMINATED")
    cluster = fleet.add_compute_cluster(r1, COMPARTMENT, ASHBURN_AD2)
    subnet1, subnet2 = fleet.ocid("subnet", r1), fleet.ocid("subnet", r2)
    common = {"subnet_id": subnet1}
    fleet.add_instance(
        r1, COMPARTMENT, name="gpu-a", shape=GPU, availability_domain=ASHBURN_AD1, private_ip="10.0.1.10",
        public_ip="203.0.113.10", cluster_network_id=network, freeform_tags={"team": "ml"},
        defined_tags={"Operations": {"CostCenter": 42}}, **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, COMPARTMENT, name="gpu-b", shape=GPU, availability_domain=ASHBURN_AD1, private_ip="10.0.1.11",
        cluster_network_id=network, **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, COMPARTMENT, name="gpu-stopped", shape=GPU, availability_domain=ASHBURN_AD2, state="STOPPED",
        private_ip="10.0.1.12", compute_cluster_id=cluster, **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, COMPARTMENT, name="cpu-web", shape=CPU, availability_domain=ASHBURN_AD2, private_ip="10.0.1.20",
        public_ip="198.51.100.20", public_ip_lifetime="RESERVED", secondary_vnic_ips=("10.0.1.21",), **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, COMPARTMENT, name="cpu-new", shape=CPU, availability_domain=ASHBURN_AD1, state="PROVISIONING",
        private_ip="10.0.1.30", **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, COMPARTMENT, name="cpu-gone", shape=CPU, availability_domain=ASHBURN_AD1, state="TERMINATED",
        private_ip=None, **common,
    )  # fmt: skip
    fleet.add_instance(
        r1, OTHER_COMPARTMENT, name="not-ours", shape=GPU, availability_domain=ASHBURN_AD1, private_ip="10.9.0.1",
        **common,
    )  # fmt: skip
    fleet.add_instance(
        r2, COMPARTMENT, name="fra-gpu", shape=GPU, availability_domain=FRANKFURT_AD1, state="STOPPING",
        private_ip="10.1.0.5", subnet_id=subnet2,
    )  # fmt: skip
    fleet.add_instance(
        r2, COMPARTMENT, name="fra-cpu", shape=CPU, availability_domain=FRANKFURT_AD1, state="STARTING",
        private_ip="10.1.0.6", subnet_id=subnet2,
    )  # fmt: skip
    return fleet


def test_every_instance_of_the_compartment_in_every_region(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        found = by_name(source(fake.endpoint, regions=("us-ashburn-1", "eu-frankfurt-1")).instances())
        assert fake.requests["other"] == 0  # no GET of a single instance or VNIC

    assert set(found) == {"gpu-a", "gpu-b", "gpu-stopped", "cpu-web", "cpu-new", "cpu-gone", "fra-gpu", "fra-cpu"}
    gpu_a = found["gpu-a"]
    assert gpu_a.cloud == "oci"
    assert gpu_a.instance_id.startswith("ocid1.instance.oc1.us-ashburn-1.")
    assert gpu_a.instance_type == GPU and fleet_base.is_gpu_type("oci", gpu_a.instance_type)
    assert (gpu_a.state, gpu_a.region, gpu_a.zone) == (fleet_base.RUNNING, "us-ashburn-1", ASHBURN_AD1)
    assert (gpu_a.private_ip, gpu_a.public_ip) == ("10.0.1.10", "203.0.113.10")
    assert gpu_a.placement.startswith("ocid1.clusternetwork.")
    assert gpu_a.tags == {"team": "ml", "Operations.CostCenter": "42"}
    assert gpu_a.ids == {"compartment_id": COMPARTMENT, "instance_ocid": gpu_a.instance_id}
    assert gpu_a.extra["fault_domain"] == "FAULT-DOMAIN-1"
    assert gpu_a.extra["cluster_network_id"] == gpu_a.placement
    assert found["gpu-b"].placement == gpu_a.placement and found["gpu-b"].public_ip is None

    stopped = found["gpu-stopped"]
    assert stopped.state == fleet_base.STOPPED
    assert (
        stopped.placement.startswith("ocid1.computecluster.")
        and stopped.extra["compute_cluster_id"] == stopped.placement
    )

    web = found["cpu-web"]
    assert not fleet_base.is_gpu_type("oci", web.instance_type)
    # The primary VNIC's address, not the secondary VNIC's; the reserved (region-scoped) public IP.
    assert (web.private_ip, web.public_ip, web.placement) == ("10.0.1.20", "198.51.100.20", None)
    assert web.extra["vnic_count"] == 2

    assert found["cpu-new"].state == fleet_base.PENDING
    gone = found["cpu-gone"]
    assert (gone.state, gone.private_ip, gone.extra["lifecycle_state"]) == (fleet_base.OTHER, None, "TERMINATED")
    assert (found["fra-gpu"].state, found["fra-gpu"].region, found["fra-gpu"].private_ip) == (
        fleet_base.STOPPED,
        "eu-frankfurt-1",
        "10.1.0.5",
    )
    assert found["fra-cpu"].state == fleet_base.PENDING


def test_rack_scale_hosts_carry_their_gpu_memory_fabric_as_nvlink_domain():
    """BM.GPU.GB200.4 hosts in GPU memory clusters: each names the cluster's GPU memory fabric (its NVL72 rack);
    a region without a rack-scale shape is never asked for GPU memory clusters."""
    fleet = FakeFleet()
    region = "us-ashburn-1"
    subnet = fleet.ocid("subnet", region)
    rack_a, fabric_a = fleet.add_gpu_memory_cluster(region, COMPARTMENT, ASHBURN_AD1)
    rack_b, fabric_b = fleet.add_gpu_memory_cluster(region, COMPARTMENT, ASHBURN_AD1)
    for index, cluster in enumerate((rack_a, rack_a, rack_b)):
        fleet.add_instance(
            region, COMPARTMENT, name=f"gb-{index}", shape="BM.GPU.GB200.4", availability_domain=ASHBURN_AD1,
            private_ip=f"10.0.2.{index}", subnet_id=subnet, gpu_memory_cluster_id=cluster,
        )  # fmt: skip
    fleet.add_instance(
        region, COMPARTMENT, name="gb-loose", shape="BM.GPU.GB200.4", availability_domain=ASHBURN_AD1,
        private_ip="10.0.2.9", subnet_id=subnet,
    )  # fmt: skip
    with FakeOci(fleet) as fake:
        found = by_name(source(fake.endpoint).instances())
        assert fake.requests["computeGpuMemoryClusters"] == 1
        assert fake.requests["computeGpuMemoryClusterInstances"] == 2  # one per cluster, none per instance
    assert [found[f"gb-{index}"].nvlink_domain for index in range(3)] == [fabric_a, fabric_a, fabric_b]
    assert found["gb-loose"].nvlink_domain is None

    catalog = plugin_utils("fabric_catalog").load_catalog()
    inventory, _warnings = plugin_utils("fleet_inventory").build(list(found.values()), catalog)
    hostvars = inventory["_meta"]["hostvars"]
    assert hostvars["gb-0"]["gpufabric_nvlink_domain"] == fabric_a
    assert "gpufabric_nvlink_domain" not in hostvars["gb-loose"]


def test_a_region_without_rack_scale_shapes_lists_no_gpu_memory_clusters(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.deny("computeGpuMemoryClusters")
        found = by_name(source(fake.endpoint).instances())
        assert fake.requests["computeGpuMemoryClusters"] == 0
    assert found["gpu-a"].nvlink_domain is None


def test_pagination_over_thousands_of_instances_costs_calls_per_page(monkeypatch):
    region, count, page = "us-ashburn-1", 3000, 100
    fleet = FakeFleet()
    network = fleet.add_cluster_network(region, COMPARTMENT)
    cluster = fleet.add_compute_cluster(region, COMPARTMENT, ASHBURN_AD1)
    subnets = [fleet.ocid("subnet", region) for _index in range(3)]
    ads = [f"Uocm:US-ASHBURN-AD-{n}" for n in (1, 2, 3)]
    for n in range(count):
        fleet.add_instance(
            region, COMPARTMENT, name=f"node-{n:04d}", shape=GPU if n % 2 else CPU, availability_domain=ads[n % 3],
            subnet_id=subnets[n % 3], private_ip=f"10.{n // 250}.{n % 250}.1",
            cluster_network_id=network if n < 500 else None, compute_cluster_id=cluster if 500 <= n < 700 else None,
        )  # fmt: skip
    started = time.monotonic()
    with FakeOci(fleet, page_size=page) as fake:
        found = list(source(fake.endpoint).instances())
        calls = dict(fake.requests)

    assert len(found) == count and len({instance.instance_id for instance in found}) == count
    assert {instance.private_ip for instance in found} == {f"10.{n // 250}.{n % 250}.1" for n in range(count)}
    assert sum(1 for instance in found if instance.placement and "clusternetwork" in instance.placement) == 500
    assert sum(1 for instance in found if instance.placement and "computecluster" in instance.placement) == 200
    pages = math.ceil(count / page)
    assert calls == {
        "instances": pages + math.ceil(200 / page),  # the compartment, then the compute cluster's members
        "vnicAttachments": pages,
        "privateIps": 3 * math.ceil(count / 3 / page),  # one list per subnet
        "publicIps": 1 + len(ads),  # reserved (region scope), then ephemeral per AD
        "clusterNetworks": 1,
        "clusterNetworkInstances": math.ceil(500 / page),
        "computeClusters": 1,
    }
    assert time.monotonic() - started < 20


def test_throttling_is_retried_until_it_succeeds(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.throttle(3)
        found = list(source(fake.endpoint, retry_attempts=4).instances())
        assert fake.throttled == 3
    assert len(found) == 6


def test_throttling_that_does_not_stop_is_one_clear_error(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.throttle(1000)
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint, retry_attempts=3).instances())
        assert fake.throttled == 3
    message = str(error.value)
    assert message.startswith("oci: ListInstances in us-ashburn-1 was still throttled after 3 attempts")
    assert "429 TooManyRequests" in message


def test_rejected_credentials(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.reject_credentials()
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint).instances())
        assert any(SECRET in header for header in fake.authorization)  # the signer did sign
    message = str(error.value)
    assert message.startswith(
        "oci: credentials were rejected by ListInstances in us-ashburn-1 (HTTP 401 NotAuthenticated)"
    )
    assert SECRET not in message and "Signature" not in message


@pytest.mark.parametrize(
    ("resource", "operation", "policy"),
    [
        ("instances", "ListInstances", f"Allow group <group> to read instance-family in compartment id {COMPARTMENT}"),
        ("vnicAttachments", "ListVnicAttachments", "to read instance-family in compartment id"),
        ("privateIps", "ListPrivateIps", "to read virtual-network-family in the compartment of subnet ocid1.subnet."),
        ("publicIps", "ListPublicIps", "to read virtual-network-family in compartment id"),
        ("clusterNetworks", "ListClusterNetworks", "to read compute-management-family in compartment id"),
        ("computeClusters", "ListComputeClusters", "to read compute-clusters in compartment id"),
    ],
)
def test_missing_permission_names_the_policy(mixed_fleet, resource, operation, policy):
    with FakeOci(mixed_fleet) as fake:
        fake.deny(resource)
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint).instances())
    message = str(error.value)
    assert message.startswith(f"oci: {operation} was refused in us-ashburn-1 (HTTP 404 NotAuthorizedOrNotFound)")
    assert policy in message
    assert SECRET not in message


def test_unreachable_endpoint_fails_fast():
    with socket.socket() as probe:  # a free port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(source(f"http://127.0.0.1:{port}/{{region}}").instances())
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert message == f"oci: cannot reach http://127.0.0.1:{port}/us-ashburn-1/20160918: [Errno 111] Connection refused"


def test_other_api_errors_carry_the_code_and_message(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.fail("vnicAttachments", 400, "InvalidParameter", "compartmentId is malformed")
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint).instances())
    assert str(error.value) == (
        "oci: ListVnicAttachments failed in us-ashburn-1: HTTP 400 InvalidParameter: compartmentId is malformed "
        f"(from {fake.endpoint.replace('{region}', 'us-ashburn-1')}/20160918)"
    )


def test_an_endpoint_that_does_not_answer_times_out(mixed_fleet):
    with FakeOci(mixed_fleet) as fake:
        fake.stall_s = 2.0
        started = time.monotonic()
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint, timeout_s=(1.0, 0.3)).instances())
        assert time.monotonic() - started < 1.5  # one attempt: timeouts are not retried
        fake.stall_s = 0.0
    assert (
        str(error.value) == f"oci: cannot reach {fake.endpoint.replace('{region}', 'us-ashburn-1')}/20160918: timed out"
    )


def write_config_file(home, key_pem: bytes) -> None:
    """~/.oci/config with an API key, as `oci setup config` writes it (all values fake)."""
    oci_dir = home / ".oci"
    oci_dir.mkdir(parents=True)
    (oci_dir / "key.pem").write_bytes(key_pem)
    (oci_dir / "config").write_text(
        "[DEFAULT]\n"
        "user=ocid1.user.oc1..fakeuser\n"
        "fingerprint=12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0\n"
        "tenancy=ocid1.tenancy.oc1..faketenancy\n"
        "region=us-ashburn-1\n"
        f"key_file={oci_dir / 'key.pem'}\n",
        encoding="utf-8",
    )


def test_default_credentials_come_from_the_config_file(mixed_fleet, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    write_config_file(tmp_path / "home", key_pem)
    with FakeOci(mixed_fleet) as fake:
        found = list(source(fake.endpoint, signer=None, config=None).instances())
        signature = fake.authorization[0]
        fake.reject_credentials()
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake.endpoint, signer=None, config=None).instances())
    assert len(found) == 6
    # The SDK's API-key signer signed with the file's tenancy/user/fingerprint.
    assert 'keyId="ocid1.tenancy.oc1..faketenancy/ocid1.user.oc1..fakeuser/12:34:56:78:9a:bc' in signature
    message = str(error.value)
    assert "credentials were rejected" in message
    assert "PRIVATE KEY" not in message and "signature=" not in message


def test_no_config_file_and_no_signer():
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(source("http://127.0.0.1:9/{region}", signer=None, config=None).instances())
    message = str(error.value)
    assert message.startswith("oci: no usable OCI config: Could not find config file at ")
    assert "oci setup config" in message


def test_incomplete_config_without_signer():
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(source("http://127.0.0.1:9/{region}", signer=None, config={"region": "us-ashburn-1"}).instances())
    assert str(error.value).startswith(
        "oci: no usable OCI config: fingerprint is missing, key_file is missing, tenancy is missing, user is missing"
    )


def test_missing_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "oci", None)  # import oci raises ImportError
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(source("http://127.0.0.1:9/{region}").instances())
    assert str(error.value) == "oci: the oci SDK is not installed; install gpufabric[oci]"
