# SPDX-License-Identifier: Apache-2.0
"""The Nebius source against a fake Compute API (gRPC on 127.0.0.1) through the real nebius SDK."""

from __future__ import annotations

import math
import socket
import sys
import time
from pathlib import Path

import grpc
import pytest

from gpufabric.collection import plugin_utils

from .fake_nebius import GOOD_TOKEN, FakeNebius, gpu_cluster, instance

fleet_base = plugin_utils("fleet_base")
fleet_nebius = plugin_utils("fleet_nebius")

EU, US = "project-e00training", "project-u00inference"  # one project per region, as Nebius lays them out


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real credentials, CLI profile, endpoint or proxy can reach the SDK: only the fake is ever called."""
    for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_PROFILE", "NEBIUS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.nebius/config.yaml


def source(fake: FakeNebius, parent_ids: list[str], **options: object):
    defaults = {"endpoint": fake.address, "credentials": GOOD_TOKEN, "insecure": True, "timeout": 5, "retry_delay": 0}
    return fleet_nebius.NebiusSource(parent_ids, **{**defaults, **options})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


FLEET = [
    instance(
        "computeinstance-e00h100a",
        "train-0",
        "gpu-h100-sxm",
        parent_id=EU,
        private_ip="10.1.0.10",
        public_ip="203.0.113.10",
        gpu_cluster_id="computegpucluster-e00ib1",
        labels={"team": "llm", "role": "worker"},
    ),
    instance(
        "computeinstance-e00h200a", "train-1", "gpu-h200-sxm", parent_id=EU, gpu_cluster_id="computegpucluster-e00ib1"
    ),
    instance("computeinstance-e00cpu", "bastion", "cpu-d3", parent_id=EU, preset="4vcpu-16gb", private_ip="10.1.0.2"),
    instance(
        "computeinstance-u00b200a", "infer-0", "gpu-b200-sxm", parent_id=US, state="STOPPED", private_ip="10.2.0.7"
    ),
    instance("computeinstance-u00b200b", "infer-1", "gpu-b200-sxm", parent_id=US, state="STARTING"),
]
CLUSTERS = [gpu_cluster("computegpucluster-e00ib1", "training-ib", parent_id=EU, fabric="fabric-5")]


def test_every_instance_of_every_project_with_its_fields() -> None:
    with FakeNebius(FLEET, CLUSTERS) as fake:
        found = {found.instance_id: found for found in source(fake, [EU, US]).instances()}

    assert set(found) == {item.metadata.id for item in FLEET}
    assert found["computeinstance-e00h100a"] == fleet_base.Instance(
        cloud="nebius",
        instance_id="computeinstance-e00h100a",
        name="train-0",
        instance_type="gpu-h100-sxm",
        state=fleet_base.RUNNING,
        private_ip="10.1.0.10",
        public_ip="203.0.113.10",
        placement="computegpucluster-e00ib1",
        tags={"team": "llm", "role": "worker"},
        ids={"parent_id": EU, "instance_id": "computeinstance-e00h100a"},
        extra={
            "preset": "8gpu-128vcpu-1600gb",
            "gpu_cluster_id": "computegpucluster-e00ib1",
            "state": "RUNNING",
            "gpu_cluster_name": "training-ib",
            "infiniband_fabric": "fabric-5",
        },
    )
    bastion = found["computeinstance-e00cpu"]
    assert (bastion.instance_type, bastion.placement, bastion.public_ip) == ("cpu-d3", None, None)
    assert not fleet_base.is_gpu_type("nebius", bastion.instance_type)
    assert all(fleet_base.is_gpu_type("nebius", i.instance_type) for i in found.values() if i.name != "bastion")
    assert found["computeinstance-u00b200a"].ids["parent_id"] == US
    assert found["computeinstance-u00b200a"].state == fleet_base.STOPPED
    assert found["computeinstance-u00b200b"].extra == {
        "preset": "8gpu-128vcpu-1600gb",
        "gpu_cluster_id": None,
        "state": "STARTING",
    }
    # One GPU cluster list and one instance list per project: nothing per instance.
    assert fake.calls == {"GpuClusterService.List": 2, "InstanceService.List": 2}
    assert set(fake.tokens_seen) == {GOOD_TOKEN}


@pytest.mark.parametrize(
    ("nebius_state", "state"),
    [
        ("RUNNING", fleet_base.RUNNING),
        ("STOPPED", fleet_base.STOPPED),
        ("STOPPING", fleet_base.STOPPED),
        ("STARTING", fleet_base.PENDING),
        ("CREATING", fleet_base.PENDING),
        ("UPDATING", fleet_base.OTHER),
        ("DELETING", fleet_base.OTHER),
        ("ERROR", fleet_base.OTHER),
    ],
)
def test_states(nebius_state: str, state: str) -> None:
    with FakeNebius([instance("computeinstance-e00x", "x", "gpu-h100-sxm", parent_id=EU, state=nebius_state)]) as fake:
        (found,) = source(fake, [EU]).instances()
    assert (found.state, found.extra["state"]) == (state, nebius_state)


def test_instances_in_pages() -> None:
    # 20 full pages and two short ones (200 and 15 instances in pages of 10): the calls follow the pages. The
    # same with 2,000 and 150 in pages of 100 took 28 s of a CI worker's time and proved nothing more.
    count, page_size, other = 200, 10, 15
    fleet = [
        instance(
            f"computeinstance-e00n{n:05}",
            f"node-{n}",
            "gpu-h200-sxm",
            parent_id=EU,
            private_ip=f"10.3.{n // 250}.{n % 250}",
        )
        for n in range(count)
    ]
    fleet += [instance(f"computeinstance-u00n{n:03}", f"us-{n}", "cpu-d3", parent_id=US) for n in range(other)]
    with FakeNebius(fleet) as fake:
        found = list(source(fake, [EU, US], page_size=page_size).instances())

    assert len(found) == count + other
    assert len({i.instance_id for i in found}) == count + other
    assert fake.calls["InstanceService.List"] == count // page_size + math.ceil(other / page_size)
    # The page and call counts are the contract; speed is for bench/, never a timed assertion (this one
    # failed at 31 s on a loaded 2-core CI machine).
    assert fake.calls["GpuClusterService.List"] == 2


@pytest.mark.parametrize("code", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE])
def test_throttling_is_retried_with_backoff(code: grpc.StatusCode) -> None:
    with FakeNebius(FLEET, CLUSTERS) as fake:
        fake.throttle, fake.throttle_code = 3, code
        found = list(source(fake, [EU, US], retry_attempts=4).instances())
    assert len(found) == len(FLEET)
    assert sum(fake.calls.values()) == 4 + 3


def test_throttled_for_good_is_one_error() -> None:
    with FakeNebius(FLEET) as fake:
        fake.throttle = 100
        with pytest.raises(fleet_base.DiscoveryError) as raised:
            list(source(fake, [EU]).instances())
    assert str(raised.value).startswith("nebius: listing GPU clusters in project-e00training is still throttled")
    assert "RESOURCE_EXHAUSTED" in str(raised.value)
    assert fake.calls["GpuClusterService.List"] == fleet_base.CALL_RETRIES + 1


def test_rejected_credentials() -> None:
    secret = "stolen-looking-token-0123456789"
    with FakeNebius(FLEET) as fake, pytest.raises(fleet_base.DiscoveryError) as raised:
        list(source(fake, [EU], credentials=secret).instances())
    message = str(raised.value)
    assert message.startswith(f"nebius: credentials were rejected by {fake.address} (UNAUTHENTICATED: ")
    assert "NEBIUS_IAM_TOKEN" in message
    assert secret not in message
    assert fake.tokens_seen == [secret]  # not retried


def test_missing_permission_names_the_role_and_project() -> None:
    with FakeNebius(FLEET, CLUSTERS) as fake, pytest.raises(fleet_base.DiscoveryError) as raised:
        fake.denied_parents = {US}
        list(source(fake, [EU, US]).instances())
    message = str(raised.value)
    assert message.startswith(
        f"nebius: not allowed to list GPU clusters in {US}: grant the viewer role on {US} "
        "(read access to Compute instances and GPU clusters) (PERMISSION_DENIED: "
    )
    assert GOOD_TOKEN not in message


def test_unreachable_endpoint_fails_fast() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(fleet_base.DiscoveryError) as raised:
        list(fleet_nebius.NebiusSource([EU], endpoint=address, credentials=GOOD_TOKEN, insecure=True).instances())
    assert time.monotonic() - started < 5
    assert str(raised.value).startswith(f"nebius: cannot reach {address}: failed to connect")
    assert GOOD_TOKEN not in str(raised.value)


def test_endpoint_that_does_not_answer() -> None:
    with FakeNebius(FLEET) as fake, pytest.raises(fleet_base.DiscoveryError) as raised:
        fake.delay = 1.5
        list(source(fake, [EU], timeout=0.3).instances())
    assert str(raised.value).startswith(f"nebius: cannot reach {fake.address}: no answer within 0.3 s")


def test_http_endpoint_means_plaintext() -> None:
    with FakeNebius(FLEET, CLUSTERS) as fake:
        found = list(source(fake, [US], endpoint=f"http://{fake.address}", insecure=False).instances())
    assert {i.name for i in found} == {"infer-0", "infer-1"}


def test_default_credentials_read_the_sdk_token_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", GOOD_TOKEN)
    with FakeNebius(FLEET, CLUSTERS) as fake:
        found = list(source(fake, [EU], credentials=None).instances())
    assert len(found) == 3
    assert set(fake.tokens_seen) == {GOOD_TOKEN}


def test_default_credentials_read_the_cli_profile(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(GOOD_TOKEN)
    (tmp_path / ".nebius").mkdir()
    (tmp_path / ".nebius" / "config.yaml").write_text(
        f"default: test\nprofiles:\n  test:\n    endpoint: 127.0.0.1:1\n    token-file: {token_file}\n"
    )
    with FakeNebius(FLEET, CLUSTERS) as fake:
        found = list(source(fake, [EU], credentials=None).instances())
    assert len(found) == 3
    assert set(fake.tokens_seen) == {GOOD_TOKEN}


def test_broken_cli_profile_is_one_error(tmp_path: Path) -> None:
    (tmp_path / ".nebius").mkdir()
    (tmp_path / ".nebius" / "config.yaml").write_text(
        f"default: test\nprofiles:\n  test:\n    token-file: {tmp_path}/missing-token\n"
    )
    with FakeNebius(FLEET) as fake, pytest.raises(fleet_base.DiscoveryError) as raised:
        list(source(fake, [EU], credentials=None).instances())
    assert str(raised.value).startswith(f"nebius: listing GPU clusters in {EU} failed: ")
    assert f"{tmp_path}/missing-token" in str(raised.value)
    assert sum(fake.calls.values()) == 0


def test_no_credentials_anywhere_is_one_error_before_any_call() -> None:
    with FakeNebius(FLEET) as fake, pytest.raises(fleet_base.DiscoveryError) as raised:
        list(source(fake, [EU], credentials=None).instances())
    assert str(raised.value).startswith("nebius: no credentials found (")
    assert "NEBIUS_IAM_TOKEN" in str(raised.value)
    assert sum(fake.calls.values()) == 0


def test_parent_ids_are_required() -> None:
    with pytest.raises(fleet_base.DiscoveryError, match="no parent_ids given"):
        fleet_nebius.NebiusSource([])
    assert fleet_nebius.NebiusSource(EU).parent_ids == [EU]


def test_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nebius.sdk", None)
    with pytest.raises(fleet_base.DiscoveryError) as raised:
        list(fleet_nebius.NebiusSource([EU], endpoint="127.0.0.1:1", credentials=GOOD_TOKEN).instances())
    assert str(raised.value) == "nebius: the nebius SDK is not installed; install gpufabric[nebius]"
