# SPDX-License-Identifier: Apache-2.0
"""The whole discovery path for GCP, Azure, OCI and Nebius, each against its fake API on 127.0.0.1.

Per cloud, one small fleet in the cloud's fake (fake_<cloud>.py): two GPU instances of a catalog type
sharing a placement unit (compact placement policy, proximity placement group, cluster network, GPU
cluster), one non-GPU instance, one stopped GPU instance in the same placement unit, and one GPU
instance whose tag or label is a Jinja expression. Then:

1. In process, every cloud: ``fleet_sources.make_source`` with the fake's endpoint and the test
   credentials the source's own tests use, then ``fleet_inventory.build``: the hosts, profiles,
   fabrics and groups, and the tag kept as ``Unsafe`` text (``{"__ansible_unsafe": ...}`` in JSON).
2. Through the real CLI (``gpufabric inventory build``) and the ``gpu_fleet`` inventory plugin
   (``ansible-inventory --list``) in subprocesses, for the clouds whose *default* credential chain
   works offline: Nebius (``NEBIUS_IAM_TOKEN``) and OCI (``~/.oci/config`` with an API key made
   here, under a temporary HOME). The CLI must print exactly what (1) built, and the plugin the same
   values.

GCP and Azure are tested in process only: their default chains (``google.auth.default()``,
``DefaultAzureCredential``) need a token endpoint (Google OAuth, Azure AD / managed identity), which
these tests must not reach, and the CLI has no option to pass a credential object.

Nothing may connect anywhere but 127.0.0.1: proxy and cloud variables are cleared, HOME is a
temporary directory, and Python's ``socket.connect`` is guarded in this process and, through a
``sitecustomize`` on PYTHONPATH, in every subprocess; a connection elsewhere is refused and fails the
test. gRPC (Nebius) opens its sockets in C, outside that guard: there the endpoint is the only
address the SDK is given (one resolver for every service).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from azure.core.credentials import AccessToken
from google.auth.compute_engine import _metadata
from google.auth.credentials import AnonymousCredentials

from gpufabric.collection import plugin_utils

from .fake_azure import FakeAzure, FakeVM
from .fake_gcp import FakeGcp, compact_policy
from .fake_gcp import instance as gcp_instance
from .fake_nebius import GOOD_TOKEN, FakeNebius, gpu_cluster
from .fake_nebius import instance as nebius_instance
from .fake_oci import FakeFleet, FakeOci
from .test_inventory_build import listing, unwrap

fleet_sources = plugin_utils("fleet_sources")
fleet_inventory = plugin_utils("fleet_inventory")
catalog = plugin_utils("fabric_catalog").load_catalog()

BIN = Path(sys.executable).parent
EVIL = "{{ lookup('pipe', 'id') }}"
GPU_HOSTS = ["tagged", "train-0", "train-1"]  # "web" (not a GPU type) and "parked" (stopped) are left out
PLACED = ["train-0", "train-1"]

# Environment variables a cloud SDK reads for credentials, profiles, endpoints or metadata servers.
CLOUD_ENV_PREFIXES = ("AWS_", "GOOGLE_", "GCE_", "CLOUDSDK_", "AZURE_", "IDENTITY_", "MSI_", "IMDS_", "NEBIUS_", "OCI_")

# Installed as sitecustomize in every subprocess: a connection anywhere but 127.0.0.1 is refused and logged.
CONNECT_GUARD = """
import os
import socket

_LOG = os.environ.get("FAKES_CONNECT_LOG")
_connect = socket.socket.connect


def _guarded_connect(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(repr(address) + "\\n")
        raise ConnectionRefusedError(f"test guard: no connection to {address}")
    return _connect(sock, address)


if _LOG:
    socket.socket.connect = _guarded_connect
"""


@dataclass(frozen=True)
class Expected:
    """What the inventory must hold for a cloud's small fleet."""

    cloud: str
    instance_type: str
    fabric: str
    placement: str  # the placement unit as the source reports it
    profile_group: str
    placement_group: str

    @property
    def profile(self) -> str:
        return f"{self.cloud}/{self.instance_type}"

    @property
    def groups(self) -> dict[str, list[str]]:
        return {
            f"cloud_{self.cloud}": GPU_HOSTS,
            f"fabric_{self.fabric}": GPU_HOSTS,
            self.profile_group: GPU_HOSTS,
            self.placement_group: PLACED,
        }


@dataclass
class Served:
    """A running fake: the in-process source options, what to expect, and the CLI/plugin view of it."""

    options: dict[str, Any]
    expected: Expected
    fake: Any
    cli_args: list[str] = field(default_factory=list)
    plugin_options: dict[str, Any] = field(default_factory=dict)


# --- the fleets, one per cloud ------------------------------------------------------------------------------------

GCP_PROJECT, GCP_ZONE = "proj-fabric", "us-east5-a"
GCP_TYPE = "a3-megagpu-8g"


@contextlib.contextmanager
def serve_gcp() -> Iterator[Served]:
    def vm(name: str, machine_type: str, number: int, **options: Any) -> dict[str, Any]:
        return gcp_instance(
            name,
            GCP_ZONE,
            machine_type,
            project=GCP_PROJECT,
            instance_id=number,
            private_ip=f"10.5.0.{number % 100}",
            **options,
        )

    fleet = [
        vm("train-0", GCP_TYPE, 1001, gvnics=9, policies=["pack-a"]),
        vm("train-1", GCP_TYPE, 1002, gvnics=9, policies=["pack-a"]),
        vm("web", "e2-medium", 1003),
        vm("parked", GCP_TYPE, 1004, status="TERMINATED", policies=["pack-a"]),
        vm("tagged", GCP_TYPE, 1005, labels={"owner": EVIL}),
    ]
    fake = FakeGcp(
        instances={GCP_PROJECT: fleet},
        policies={GCP_PROJECT: [compact_policy("pack-a", "us-east5", project=GCP_PROJECT)]},
    )
    with fake.serve() as server:
        yield Served(
            options={
                "projects": [GCP_PROJECT],
                "endpoint": server.endpoint,
                "credentials": AnonymousCredentials(),
                "retry_initial_delay": 0.01,
                "timeout": 5.0,
            },
            expected=Expected("gcp", GCP_TYPE, "tcpxo", "pack-a", "profile_gcp_a3_megagpu_8g", "placement_gcp_pack_a"),
            fake=fake,
        )


AZURE_SUBSCRIPTION = "00000000-1111-2222-3333-444444444444"
AZURE_TYPE = "Standard_ND96isr_H100_v5"


class StaticTokenCredential:
    """An azure-core TokenCredential with one fixed token: no token endpoint is ever called."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake-arm-token", int(time.time()) + 3600)


@contextlib.contextmanager
def serve_azure() -> Iterator[Served]:
    vms = [
        FakeVM("train-0", vm_size=AZURE_TYPE, proximity_placement_group="ppg-train", private_ip="10.1.0.4", vm_id="1"),
        FakeVM("train-1", vm_size=AZURE_TYPE, proximity_placement_group="ppg-train", private_ip="10.1.0.5", vm_id="2"),
        FakeVM("web", vm_size="Standard_D4s_v5", private_ip="10.1.0.6", vm_id="3"),
        FakeVM(
            "parked",
            vm_size=AZURE_TYPE,
            proximity_placement_group="ppg-train",
            power="deallocated",
            private_ip="10.1.0.7",
            vm_id="4",
        ),
        FakeVM("tagged", vm_size=AZURE_TYPE, tags={"owner": EVIL}, private_ip="10.1.0.8", vm_id="5"),
    ]
    with FakeAzure(AZURE_SUBSCRIPTION, vms=vms) as fake:
        yield Served(
            options={
                "subscription_id": AZURE_SUBSCRIPTION,
                "endpoint": fake.url,
                "credential": StaticTokenCredential(),
                "retry_backoff_factor": 0.001,
                "connection_timeout": 2.0,
                "read_timeout": 10.0,
            },
            expected=Expected(
                "azure",
                AZURE_TYPE,
                "infiniband",
                "ppg-train",
                "profile_azure_standard_nd96isr_h100_v5",
                "placement_azure_ppg_train",
            ),
            fake=fake,
        )


OCI_COMPARTMENT, OCI_REGION, OCI_AD = "ocid1.compartment.oc1..fakecompartment", "us-ashburn-1", "Uocm:US-ASHBURN-AD-1"
OCI_TYPE = "BM.GPU.H100.8"
OCI_SIGNATURE = "FAKE-SIGNATURE-must-never-be-printed"


class FakeOciSigner(requests.auth.AuthBase):
    """Signs nothing: a fixed Authorization header, as test_fleet_oci.py's signer."""

    def __call__(self, request: Any) -> Any:
        request.headers["Authorization"] = f'Signature version="1",keyId="fake",signature="{OCI_SIGNATURE}"'
        return request


@contextlib.contextmanager
def serve_oci() -> Iterator[Served]:
    fleet = FakeFleet()
    network = fleet.add_cluster_network(OCI_REGION, OCI_COMPARTMENT)
    assert network == "ocid1.clusternetwork.oc1.us-ashburn-1.fake000001"  # the first OCID the fake hands out
    subnet = fleet.ocid("subnet", OCI_REGION)

    def vm(name: str, shape: str, address: str, **options: Any) -> None:
        fleet.add_instance(
            OCI_REGION,
            OCI_COMPARTMENT,
            name=name,
            shape=shape,
            availability_domain=OCI_AD,
            subnet_id=subnet,
            private_ip=address,
            **options,
        )

    vm("train-0", OCI_TYPE, "10.0.1.10", cluster_network_id=network)
    vm("train-1", OCI_TYPE, "10.0.1.11", cluster_network_id=network)
    vm("web", "VM.Standard.E4.Flex", "10.0.1.20")
    vm("parked", OCI_TYPE, "10.0.1.12", state="STOPPED", cluster_network_id=network)
    vm("tagged", OCI_TYPE, "10.0.1.13", freeform_tags={"owner": EVIL})
    with FakeOci(fleet) as fake:
        yield Served(
            options={
                "compartment_id": OCI_COMPARTMENT,
                "regions": [OCI_REGION],
                "endpoint": fake.endpoint,
                "signer": FakeOciSigner(),
                "config": {"region": OCI_REGION},
                "timeout_s": (2.0, 5.0),
                "retry_base_delay_s": 0.01,
            },
            expected=Expected(
                "oci",
                OCI_TYPE,
                "roce",
                network,
                "profile_oci_bm_gpu_h100_8",
                "placement_oci_ocid1_clusternetwork_oc1_us_ashburn_1_fake000001",
            ),
            fake=fake,
            cli_args=["--compartment", OCI_COMPARTMENT, "--region", OCI_REGION, "--endpoint-url", fake.endpoint],
            plugin_options={"compartment_id": OCI_COMPARTMENT, "regions": [OCI_REGION], "endpoint_url": fake.endpoint},
        )


NEBIUS_PROJECT, NEBIUS_CLUSTER = "project-e00fabric", "computegpucluster-e00train"
NEBIUS_TYPE = "gpu-h100-sxm"
NEBIUS_SECRET_TOKEN = "nebius-iam-SECRET-token-must-never-be-printed"  # for the CLI and plugin only


@contextlib.contextmanager
def serve_nebius() -> Iterator[Served]:
    def vm(number: int, name: str, platform: str, **options: Any) -> Any:
        return nebius_instance(
            f"computeinstance-e00n{number}",
            name,
            platform,
            parent_id=NEBIUS_PROJECT,
            private_ip=f"10.2.0.{number}",
            **options,
        )

    fleet = [
        vm(1, "train-0", NEBIUS_TYPE, gpu_cluster_id=NEBIUS_CLUSTER),
        vm(2, "train-1", NEBIUS_TYPE, gpu_cluster_id=NEBIUS_CLUSTER),
        vm(3, "web", "cpu-d3", preset="4vcpu-16gb"),
        vm(4, "parked", NEBIUS_TYPE, state="STOPPED", gpu_cluster_id=NEBIUS_CLUSTER),
        vm(5, "tagged", NEBIUS_TYPE, labels={"owner": EVIL}),
    ]
    clusters = [gpu_cluster(NEBIUS_CLUSTER, "train-ib", parent_id=NEBIUS_PROJECT)]
    with FakeNebius(fleet, clusters) as fake:
        endpoint = f"http://{fake.address}"  # http:// means plaintext gRPC, so the CLI needs no --insecure
        yield Served(
            options={
                "parent_ids": [NEBIUS_PROJECT],
                "endpoint": endpoint,
                "credentials": GOOD_TOKEN,
                "timeout": 5,
                "retry_delay": 0,
            },
            expected=Expected(
                "nebius",
                NEBIUS_TYPE,
                "infiniband",
                NEBIUS_CLUSTER,
                "profile_nebius_gpu_h100_sxm",
                "placement_nebius_computegpucluster_e00train",
            ),
            fake=fake,
            cli_args=["--parent-id", NEBIUS_PROJECT, "--endpoint-url", endpoint],
            plugin_options={"parent_ids": [NEBIUS_PROJECT], "endpoint_url": endpoint},
        )


SERVE = {"gcp": serve_gcp, "azure": serve_azure, "oci": serve_oci, "nebius": serve_nebius}


# --- isolation ----------------------------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No proxy, no cloud credentials or profiles, metadata servers on a closed port; connections to 127.0.0.1 only."""
    for name in list(os.environ):
        if name.startswith(CLOUD_ENV_PREFIXES) or "proxy" in name.lower():
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("HOME", str(tmp_path / "in-process-home"))  # no ~/.oci, ~/.nebius, ~/.azure, gcloud config
    dead = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GCE_METADATA_HOST", dead)
    monkeypatch.setenv("GCE_METADATA_IP", dead)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", dead)  # read by google-auth at import time
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
    monkeypatch.setenv("AZURE_AUTHORITY_HOST", f"http://{dead}")
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", f"http://{dead}")

    elsewhere: list[object] = []
    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            elsewhere.append(address)
            raise ConnectionRefusedError(f"test guard: no connection to {address}")
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    yield
    assert elsewhere == [], f"connections attempted outside 127.0.0.1: {elsewhere}"


@pytest.fixture
def subprocess_env(ansible_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """ansible_env without proxy or cloud variables, HOME in tmp_path, and the connection guard on PYTHONPATH."""
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(CONNECT_GUARD, encoding="utf-8")
    log = tmp_path / "connections-elsewhere.log"
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value
        for key, value in ansible_env.items()
        if not key.startswith(CLOUD_ENV_PREFIXES) and "proxy" not in key.lower()
    }
    pythonpath = os.pathsep.join(filter(None, [str(guard), env.get("PYTHONPATH")]))
    env.update(
        HOME=str(home),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONPATH=pythonpath,
        FAKES_CONNECT_LOG=str(log),
        COLUMNS="200",
    )
    yield env
    assert not log.exists(), f"a subprocess tried to connect outside 127.0.0.1: {log.read_text(encoding='utf-8')}"


def in_process(served: Served) -> tuple[dict[str, Any], list[str]]:
    source = fleet_sources.make_source(served.expected.cloud, served.options)
    return fleet_inventory.build(list(source.instances()), catalog)


def check_inventory(inventory: dict[str, Any], expected: Expected) -> None:
    """Hosts, variables and groups of the small fleet, in the plain JSON values (unsafe marks dropped)."""
    view = unwrap(inventory)
    hosts = view["_meta"]["hostvars"]
    assert sorted(hosts) == GPU_HOSTS
    for name, variables in hosts.items():
        assert variables["gpufabric_cloud"] == expected.cloud, name
        assert variables["gpufabric_instance_type"] == expected.instance_type, name
        assert variables["gpufabric_profile"] == expected.profile, name
        assert variables["gpufabric_fabric"] == expected.fabric, name
        assert variables["gpufabric_state"] == "running", name
        assert variables["ansible_host"] == variables["gpufabric_private_ip"], name
    assert hosts["train-0"]["gpufabric_placement"] == hosts["train-1"]["gpufabric_placement"] == expected.placement
    assert hosts["tagged"]["gpufabric_placement"] is None
    assert hosts["tagged"]["gpufabric_tags"] == {"owner": EVIL}
    groups = {name: body["hosts"] for name, body in view.items() if name not in ("_meta", "all", "ungrouped")}
    assert groups == expected.groups
    assert sorted(view["all"]["children"]) == sorted(["ungrouped", *expected.groups])


# --- 1. in process, every cloud -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cloud", list(SERVE))
def test_source_and_builder_against_the_fake(cloud: str) -> None:
    with SERVE[cloud]() as served:
        inventory, warnings = in_process(served)
    assert warnings == []
    check_inventory(inventory, served.expected)
    tag = inventory["_meta"]["hostvars"]["tagged"]["gpufabric_tags"]["owner"]
    assert isinstance(tag, fleet_inventory.Unsafe)
    assert tag == EVIL
    for host in PLACED:
        assert isinstance(inventory["_meta"]["hostvars"][host]["gpufabric_placement"], fleet_inventory.Unsafe)
    rendered = json.loads(fleet_inventory.to_json(inventory))
    assert rendered["_meta"]["hostvars"]["tagged"]["gpufabric_tags"]["owner"] == {"__ansible_unsafe": EVIL}


# --- 2. CLI and plugin, with each SDK's default credentials (Nebius, OCI) -----------------------------------------


def nebius_default_credentials(served: Served, home: Path) -> tuple[dict[str, str], list[str]]:
    """NEBIUS_IAM_TOKEN, the SDK's own variable: (environment, secrets that must never be printed)."""
    served.fake.tokens.add(NEBIUS_SECRET_TOKEN)
    return {"NEBIUS_IAM_TOKEN": NEBIUS_SECRET_TOKEN}, [NEBIUS_SECRET_TOKEN]


def oci_default_credentials(served: Served, home: Path) -> tuple[dict[str, str], list[str]]:
    """~/.oci/config with an API key made here, as `oci setup config` writes it (all values fake)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    oci_dir = home / ".oci"
    oci_dir.mkdir()
    (oci_dir / "key.pem").write_text(pem, encoding="utf-8")
    (oci_dir / "key.pem").chmod(0o600)
    (oci_dir / "config").write_text(
        "[DEFAULT]\n"
        "user=ocid1.user.oc1..fakeuser\n"
        "fingerprint=12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0\n"
        "tenancy=ocid1.tenancy.oc1..faketenancy\n"
        f"region={OCI_REGION}\n"
        f"key_file={oci_dir / 'key.pem'}\n",
        encoding="utf-8",
    )
    key_lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    return {}, ["PRIVATE KEY", "signature=", *key_lines]


DEFAULT_CREDENTIALS = {"nebius": nebius_default_credentials, "oci": oci_default_credentials}


def used_default_credentials(cloud: str, served: Served) -> None:
    """The fake saw the credentials of the default chain, not the in-process test credentials."""
    if cloud == "nebius":
        assert set(served.fake.tokens_seen) == {GOOD_TOKEN, NEBIUS_SECRET_TOKEN}
    else:
        signed = [header for header in served.fake.authorization if OCI_SIGNATURE not in header]
        assert signed, "no request was signed with the config file's API key"
        assert all('keyId="ocid1.tenancy.oc1..faketenancy/ocid1.user.oc1..fakeuser/12:34:' in h for h in signed)


def run(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)


@pytest.mark.parametrize("cloud", list(DEFAULT_CREDENTIALS))
def test_cli_and_plugin_with_default_credentials(cloud: str, subprocess_env: dict[str, str], tmp_path: Path) -> None:
    with SERVE[cloud]() as served:
        env, secrets = DEFAULT_CREDENTIALS[cloud](served, Path(subprocess_env["HOME"]))
        env = {**subprocess_env, **env}
        built, _warnings = in_process(served)
        cli = run(
            env, str(BIN / "gpufabric"), "inventory", "build", "--source", cloud, *served.cli_args, "--format", "json"
        )
        config = tmp_path / f"{cloud}.gpu_fleet.yml"
        config.write_text(
            yaml.safe_dump({"plugin": "gpufabric.cluster.gpu_fleet", "source": cloud, **served.plugin_options}),
            encoding="utf-8",
        )
        listed = run(env, str(BIN / "ansible-inventory"), "-i", str(config), "--list")
        used_default_credentials(cloud, served)

    assert cli.returncode == 0, cli.stderr
    assert "3 hosts from " + cloud in cli.stderr
    from_cli = json.loads(cli.stdout)
    assert from_cli == json.loads(fleet_inventory.to_json(built)), "the CLI prints what the builder built"
    check_inventory(from_cli, served.expected)
    assert from_cli["_meta"]["hostvars"]["tagged"]["gpufabric_tags"]["owner"] == {"__ansible_unsafe": EVIL}

    assert listed.returncode == 0, listed.stderr
    from_plugin = listing(listed.stdout)
    # ansible-core 2.19 lists every value an inventory plugin sets as unsafe; compare the values themselves.
    assert unwrap(from_plugin) == unwrap(from_cli)
    assert from_plugin["_meta"]["hostvars"]["tagged"]["gpufabric_tags"]["owner"] == {"__ansible_unsafe": EVIL}

    for output in (cli.stdout, cli.stderr, listed.stdout, listed.stderr):
        leaked = [secret for secret in secrets if secret in output]
        assert leaked == [], f"credential text in the output: {leaked}"
