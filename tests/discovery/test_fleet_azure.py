# SPDX-License-Identifier: Apache-2.0
"""The Azure source with the real azure-mgmt-compute/-network SDKs against a fake Azure Resource Manager.

The fake (fake_azure.py) listens on 127.0.0.1 only. Every source here gets the fake's endpoint and an
explicit static-token credential; the environment holds no Azure credentials and points the managed
identity (IMDS) and login endpoints at a closed local port, so nothing can reach Azure or 169.254.169.254.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import sys
import time

import pytest

from gpufabric.collection import plugin_utils

from .fake_azure import FakeAzure, FakeScaleSet, FakeVM

pytest.importorskip("azure.mgmt.compute")
pytest.importorskip("azure.mgmt.network")
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

fleet_base = plugin_utils("fleet_base")
fleet_azure = plugin_utils("fleet_azure")
catalog = plugin_utils("fabric_catalog").load_catalog()

SUBSCRIPTION = "00000000-1111-2222-3333-444444444444"
SECRET_TOKEN = "eyJ0eXAi.SECRET-ARM-TOKEN-do-not-print"
GPU_TYPES = ["Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"]
OTHER_TYPE = "Standard_D4s_v5"
FAST = {"retry_backoff_factor": 0.001, "connection_timeout": 2.0, "read_timeout": 10.0}


class StaticTokenCredential:
    """A TokenCredential that hands out one fixed token, valid far into the future."""

    def __init__(self, token: str = SECRET_TOKEN) -> None:
        self.token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 10 * 365 * 86400)


class FailingCredential:
    """A credential that cannot get a token, as DefaultAzureCredential fails with nothing configured."""

    def get_token(self, *scopes: str, **kwargs) -> AccessToken:
        raise ClientAuthenticationError("EnvironmentCredential: environment variables are not fully configured")


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
def offline_azure(monkeypatch, tmp_path):
    """No Azure credentials in the environment, IMDS and login on a closed local port, no proxy."""
    dead = f"http://127.0.0.1:{closed_port()}"
    for name in (
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_CLIENT_CERTIFICATE_PATH",
        "AZURE_USERNAME",
        "AZURE_PASSWORD",
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_SUBSCRIPTION_ID",
        "IDENTITY_ENDPOINT",
        "IDENTITY_HEADER",
        "IDENTITY_SERVER_THUMBPRINT",
        "IMDS_ENDPOINT",
        "MSI_ENDPOINT",
        "MSI_SECRET",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", dead)  # azure-identity's IMDS override
    monkeypatch.setenv("AZURE_AUTHORITY_HOST", dead)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path / "azure-cli"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    # And should anything still try: any connection off 127.0.0.1 fails the test before it leaves.
    connect = socket.socket.connect

    def loopback_only(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not ipaddress.ip_address(address[0]).is_loopback:
            raise AssertionError(f"a test tried to connect to {address[0]}")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)


def source(fake: FakeAzure, credential=None, **options) -> object:
    return fleet_azure.AzureSource(
        SUBSCRIPTION, endpoint=fake.url, credential=credential or StaticTokenCredential(), **{**FAST, **options}
    )


def by_name(instances) -> dict[str, object]:
    return {i.name: i for i in instances}


def small_fleet() -> tuple[list[FakeVM], list[FakeScaleSet]]:
    vms = [
        FakeVM(
            "h100-a",
            location="eastus",
            zone="1",
            vm_size=GPU_TYPES[0],
            proximity_placement_group="ppg-train",
            tags={"team": "llm", "gpufabric": "yes"},
            private_ip="10.1.0.4",
            public_ip="203.0.113.10",
            accelerated_networking=True,
            vm_id="6d1c7f2e-0000-4000-8000-000000000001",
        ),
        FakeVM("h100-b", location="eastus", zone="2", vm_size=GPU_TYPES[0], power="deallocated", private_ip="10.1.0.5"),
        FakeVM("h200-a", location="swedencentral", vm_size=GPU_TYPES[1], power="stopped", private_ip="10.2.0.4"),
        FakeVM("web", resource_group="rg-web", location="westus3", vm_size=OTHER_TYPE, private_ip="10.3.0.4"),
        FakeVM("booting", location="westus3", vm_size=OTHER_TYPE, power="starting", private_ip="10.3.0.5"),
        FakeVM("halting", location="westus3", vm_size=OTHER_TYPE, power="stopping", private_ip="10.3.0.6"),
    ]
    uniform = FakeScaleSet(
        "h200-pool",
        location="swedencentral",
        vm_size=GPU_TYPES[1],
        proximity_placement_group="ppg-h200",
        tags={"pool": "h200", "team": "default"},
        instances=[
            FakeVM(
                "m0",
                zone="3",
                tags={"team": "vision"},
                private_ip="10.4.0.4",
                public_ip="198.51.100.7",
                accelerated_networking=True,
            ),
            FakeVM("m1", zone="3", power="deallocated", private_ip="10.4.0.5", accelerated_networking=True),
        ],
    )
    flexible = FakeScaleSet(
        "flex-pool",
        orchestration_mode="Flexible",
        location="eastus",
        vm_size=GPU_TYPES[0],
        instances=[FakeVM("flex-0", location="eastus", vm_size=GPU_TYPES[0], private_ip="10.5.0.4")],
    )
    return vms, [uniform, flexible]


def test_every_vm_and_scale_set_instance_with_its_facts():
    vms, scale_sets = small_fleet()
    credential = StaticTokenCredential()
    with FakeAzure(SUBSCRIPTION, vms, scale_sets) as fake:
        found = by_name(source(fake, credential).instances())

    assert sorted(found) == sorted(
        ["h100-a", "h100-b", "h200-a", "web", "booting", "halting", "flex-0", "h200-pool_0", "h200-pool_1"]
    )
    h100 = found["h100-a"]
    rg = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-gpu/providers/Microsoft.Compute"
    assert h100 == fleet_base.Instance(
        cloud="azure",
        instance_id=f"{rg}/virtualMachines/h100-a",
        name="h100-a",
        instance_type="Standard_ND96isr_H100_v5",
        state=fleet_base.RUNNING,
        region="eastus",
        zone="1",
        private_ip="10.1.0.4",
        public_ip="203.0.113.10",
        placement="ppg-train",
        tags={"team": "llm", "gpufabric": "yes"},
        ids={
            "subscription_id": SUBSCRIPTION,
            "resource_group": "rg-gpu",
            "vm_id": "6d1c7f2e-0000-4000-8000-000000000001",
        },
        extra={"accelerated_networking": True, "scale_set": None},
    )
    member = found["h200-pool_0"]
    assert member.instance_id == f"{rg}/virtualMachineScaleSets/h200-pool/virtualMachines/0"
    assert (member.instance_type, member.state, member.region, member.zone) == (
        "Standard_ND96isr_H200_v5",
        fleet_base.RUNNING,
        "swedencentral",
        "3",
    )
    assert (member.private_ip, member.public_ip, member.placement) == ("10.4.0.4", "198.51.100.7", "ppg-h200")
    assert member.tags == {"pool": "h200", "team": "vision"}  # the instance's tags over the scale set's
    assert member.extra == {"accelerated_networking": True, "scale_set": "h200-pool"}
    assert found["h200-pool_1"].state == fleet_base.STOPPED
    assert found["flex-0"].extra == {"accelerated_networking": False, "scale_set": "flex-pool"}
    assert found["web"].ids["resource_group"] == "rg-web"
    assert found["web"].zone is None and found["web"].placement is None and found["web"].public_ip is None
    # The token went to the fake as a bearer token, for the ARM scope.
    assert fake.authorizations == {f"Bearer {SECRET_TOKEN}"}
    assert credential.scopes and all(s == ("https://management.azure.com/.default",) for s in credential.scopes)


def test_power_states_come_from_list_calls_only():
    vms, scale_sets = small_fleet()
    with FakeAzure(SUBSCRIPTION, vms, scale_sets) as fake:
        found = by_name(source(fake).instances())
    states = {name: i.state for name, i in found.items()}
    assert states == {
        "h100-a": fleet_base.RUNNING,
        "h100-b": fleet_base.STOPPED,  # deallocated
        "h200-a": fleet_base.STOPPED,  # stopped
        "web": fleet_base.RUNNING,
        "booting": fleet_base.PENDING,  # starting
        "halting": fleet_base.OTHER,  # stopping
        "flex-0": fleet_base.RUNNING,
        "h200-pool_0": fleet_base.RUNNING,
        "h200-pool_1": fleet_base.STOPPED,
    }
    # One statusOnly pass for VM power states, the scale set's instance view expanded in its list.
    assert fake.count("virtualMachines", statusOnly="true") == 1
    assert fake.count("virtualMachineScaleSets/virtualMachines", **{"$expand": "instanceView"}) == 1
    # A Flexible scale set's instances are ordinary VMs: its VMSS VM, NIC and IP lists are not called.
    assert all("flex-pool" not in r["path"] for r in fake.requests)


def test_gpu_and_other_types_as_the_catalog_and_fleet_base_see_them():
    vms, scale_sets = small_fleet()
    with FakeAzure(SUBSCRIPTION, vms, scale_sets) as fake:
        found = list(source(fake).instances())
    azure_types = {catalog.get(name)["instance_type"] for name in catalog.names() if name.startswith("azure/")}
    assert set(GPU_TYPES) <= azure_types
    gpu = {i.name for i in found if i.instance_type in azure_types}
    assert gpu == {"h100-a", "h100-b", "h200-a", "flex-0", "h200-pool_0", "h200-pool_1"}
    assert all(fleet_base.is_gpu_type("azure", i.instance_type) for i in found if i.name in gpu)
    assert not any(fleet_base.is_gpu_type("azure", i.instance_type) for i in found if i.name not in gpu)


def test_thousands_of_instances_cost_pages_not_calls_per_instance():
    # 1,000 VMs in five pages show what 3,000 in fifteen did, in a third of the time (21 s of a CI worker).
    vm_count = 1000
    regions = [("eastus", "1"), ("eastus", "2"), ("westus3", None), ("swedencentral", "3")]
    vms = []
    for n in range(vm_count):
        region, zone = regions[n % len(regions)]
        vms.append(
            FakeVM(
                f"vm-{n:05d}",
                resource_group=f"rg-{n % 3}",
                location=region,
                zone=zone,
                vm_size=[*GPU_TYPES, OTHER_TYPE][n % 3],
                power="running" if n % 5 else "deallocated",
                private_ip=f"10.{n // 65536}.{n // 256 % 256}.{n % 256}",
                public_ip=f"203.0.113.{n // 20}" if n % 20 == 0 else None,
                accelerated_networking=n % 2 == 0,
            )
        )
    pools = [
        FakeScaleSet(
            f"pool-{p}",
            location="swedencentral",
            vm_size=GPU_TYPES[1],
            instances=[FakeVM(f"m{i}", zone="1", private_ip=f"10.9.{p}.{i % 256}") for i in range(250)],
        )
        for p in range(2)
    ]
    page = 200
    with FakeAzure(SUBSCRIPTION, vms, pools, page_size=page) as fake:
        found = list(source(fake).instances())

    assert len(found) == vm_count + 2 * 250
    assert len({i.instance_id for i in found}) == len(found)
    by = by_name(found)
    assert all(by[vm.name].private_ip == vm.private_ip for vm in vms)
    assert all(by[vm.name].public_ip == vm.public_ip for vm in vms)
    assert all(by[vm.name].extra["accelerated_networking"] == vm.accelerated_networking for vm in vms)
    assert sum(i.state == fleet_base.STOPPED for i in found) == vm_count // 5
    assert {(i.region, i.zone) for i in found} == set(regions) | {("swedencentral", "1")}

    vm_pages = math.ceil(vm_count / page)
    member_pages = math.ceil(250 / page)
    assert fake.count("virtualMachines") == 2 * vm_pages  # the model pass and the statusOnly pass
    assert fake.count("networkInterfaces") == vm_pages
    assert fake.count("publicIPAddresses") == 1  # 50 public IPs: one page
    assert fake.count("virtualMachineScaleSets") == 1
    assert fake.count("virtualMachineScaleSets/virtualMachines") == 2 * member_pages
    assert fake.count("virtualMachineScaleSets/networkInterfaces") == 2 * member_pages
    assert fake.count("virtualMachineScaleSets/publicIPAddresses") == 2
    assert len(fake.requests) == 3 * vm_pages + 1 + 1 + 2 * (2 * member_pages + 1)
    assert len(fake.requests) < len(found) / 40


def test_resource_groups_are_listed_one_by_one():
    vms, scale_sets = small_fleet()
    with FakeAzure(SUBSCRIPTION, vms, scale_sets) as fake:
        found = by_name(source(fake, resource_groups=["RG-WEB"]).instances())
        assert sorted(found) == ["web"]
        assert found["web"].private_ip == "10.3.0.4" and found["web"].state == fleet_base.RUNNING
        scoped = [r["path"] for r in fake.requests if r["kind"] != "virtualMachines" or "statusOnly" not in r["query"]]
        assert scoped and all("/resourceGroups/RG-WEB/" in path for path in scoped)


@pytest.mark.parametrize("status", [429, 503])
def test_throttling_is_retried_by_the_sdk_retry_policy(status):
    vms, scale_sets = small_fleet()
    with FakeAzure(SUBSCRIPTION, vms, scale_sets) as fake:
        fake.throttle(5, status)  # more than azure-core's default of 3 status retries
        started = time.monotonic()
        found = list(source(fake, retry_total=6).instances())
    assert len(found) == 9
    assert time.monotonic() - started < 10


def test_throttling_that_never_ends_is_one_error():
    with FakeAzure(SUBSCRIPTION, *small_fleet()) as fake:
        fake.throttle(100)
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake, retry_total=2).instances())
    message = str(error.value)
    assert message.startswith("azure: ")
    assert "throttling" in message and "429" in message and "TooManyRequests" in message
    assert fake.count() == 3  # the first try and two retries


def test_rejected_token_is_one_error_without_the_token():
    with FakeAzure(SUBSCRIPTION, *small_fleet()) as fake:
        fake.reject_token = True
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake).instances())
    message = str(error.value)
    assert message.startswith("azure: credentials were rejected")
    assert "HTTP 401" in message and "InvalidAuthenticationToken" in message
    assert SECRET_TOKEN not in message and "SECRET" not in message
    assert fake.count() == 1  # not retried


def test_credential_that_cannot_get_a_token_is_one_error():
    with FakeAzure(SUBSCRIPTION, *small_fleet()) as fake:
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake, credential=FailingCredential()).instances())
        assert fake.count() == 0
    assert str(error.value).startswith("azure: credentials were rejected or are missing")
    assert "az login" in str(error.value)


@pytest.mark.parametrize(
    "kind, action",
    [
        ("virtualMachines", "Microsoft.Compute/virtualMachines/read"),
        ("networkInterfaces", "Microsoft.Network/networkInterfaces/read"),
        ("publicIPAddresses", "Microsoft.Network/publicIPAddresses/read"),
        ("virtualMachineScaleSets/virtualMachines", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read"),
        (
            "virtualMachineScaleSets/networkInterfaces",
            "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read",
        ),
    ],
)
def test_missing_permission_names_the_rbac_action(kind, action):
    with FakeAzure(SUBSCRIPTION, *small_fleet()) as fake:
        fake.forbid(kind)
        with pytest.raises(fleet_base.DiscoveryError) as error:
            list(source(fake).instances())
    message = str(error.value)
    assert message.startswith(f"azure: permission denied in subscription {SUBSCRIPTION} (AuthorizationFailed)")
    assert f"the identity needs '{action}'" in message
    assert SECRET_TOKEN not in message
    assert fake.count(kind) == 1  # a 403 is not retried


def test_unknown_subscription_is_one_error_with_the_arm_code():
    with (
        FakeAzure("99999999-0000-0000-0000-000000000000", *small_fleet()) as fake,
        pytest.raises(fleet_base.DiscoveryError) as error,
    ):
        list(source(fake).instances())
    assert "HTTP 404 SubscriptionNotFound" in str(error.value)


def test_unreachable_endpoint_is_one_error_quickly():
    endpoint = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(
            fleet_azure.AzureSource(
                SUBSCRIPTION, endpoint=endpoint, credential=StaticTokenCredential(), **FAST
            ).instances()
        )
    assert time.monotonic() - started < 5
    assert str(error.value) == f"azure: cannot reach {endpoint}: Connection refused"


def test_plain_http_is_refused_off_loopback():
    with pytest.raises(fleet_base.DiscoveryError, match="not https; plain http is accepted only for a loopback"):
        fleet_azure.AzureSource(SUBSCRIPTION, endpoint="http://arm.example.test", credential=StaticTokenCredential())


def test_default_credential_is_loaded_only_when_none_is_given(monkeypatch):
    import azure.identity

    made = []

    class FakeDefaultCredential(StaticTokenCredential):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", FakeDefaultCredential)
    with FakeAzure(SUBSCRIPTION, *small_fleet()) as fake:
        assert len(list(source(fake).instances())) == 9
        assert made == []
        found = fleet_azure.AzureSource(SUBSCRIPTION, endpoint=fake.url, **FAST).instances()
        assert len(list(found)) == 9
    assert len(made) == 1 and made[0].scopes


def test_missing_sdk_is_one_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "azure.mgmt.compute", None)
    with pytest.raises(fleet_base.DiscoveryError) as error:
        list(fleet_azure.AzureSource(SUBSCRIPTION, credential=StaticTokenCredential()).instances())
    assert str(error.value) == "azure: the azure-mgmt-compute SDK is not installed; install gpufabric[azure]"
