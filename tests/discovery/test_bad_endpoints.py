# SPDX-License-Identifier: Apache-2.0
"""A cloud endpoint that misbehaves (HTTP 500, an empty 200, a redirect loop, a truncated body, a slow answer, no
answer at all) ends discovery with one DiscoveryError naming the cloud, the endpoint and what it answered, never a
traceback, within the call budget (GPUFABRIC_CLOUD_TIMEOUT, GPUFABRIC_CLOUD_RETRIES): a real HTTP server on 127.0.0.1
answers what such an endpoint would.

Nebius speaks gRPC (HTTP/2): pointed at this HTTP/1.1 server it never gets as far as an HTTP answer (the server
refuses its HTTP/2 preface), so a 500, an empty or a truncated answer cannot be served to it here; what it meets is
one error naming the endpoint, and its gRPC failures (a status, a slow answer) are the fake gRPC server's
(tests/discovery/fake_nebius.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils

BIN = Path(sys.executable).parent
# The start of a real DescribeInstances answer, cut off where a dropped connection would cut it.
TRUNCATED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/'
    b'2016-11-15/"><requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId><reservationSet>'
)


class _Misbehaving(BaseHTTPRequestHandler):
    answer = "500"
    truncated = TRUNCATED
    released = threading.Event()  # "silent": set when the test ends (each fixture gives its handler its own)
    requests = 0

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.do_GET()

    def do_GET(self) -> None:
        type(self).requests += 1
        body = b""
        if self.answer == "silent":  # accepts, reads the request, never answers
            self.released.wait()
            return
        if self.answer == "500":
            self.send_response(500)
            body = b"<html><body>Internal Server Error</body></html>"
        elif self.answer == "redirect-loop":
            self.send_response(302)
            self.send_header("Location", self.path)
        elif self.answer == "slow":
            time.sleep(2)
            self.send_response(200)
        else:
            self.send_response(200)
            body = self.truncated if self.answer == "truncated" else b""
        self.send_header("Content-Length", str(len(body)))
        try:
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first ("slow"), as it should


@pytest.fixture
def endpoint() -> Iterator[tuple[str, type[_Misbehaving]]]:
    handler = type("Handler", (_Misbehaving,), {"released": threading.Event(), "requests": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    handler.released.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("500", "EC2 DescribeInstances failed in us-east-1: 500: Internal Server Error (from {url})"),
        ("empty", "{url} in us-east-1 did not answer as the EC2 API (an empty, truncated or non-XML answer"),
        ("truncated", "{url} in us-east-1 did not answer as the EC2 API (an empty, truncated or non-XML answer"),
        ("redirect-loop", "{url} in us-east-1 did not answer as the EC2 API"),
        ("slow", "cannot reach {url} in us-east-1: "),
    ],
)
def test_aws_source_names_the_endpoint_and_what_it_answered(endpoint, answer: str, says: str) -> None:
    url, handler = endpoint
    handler.answer = answer
    aws = plugin_utils("fleet_aws")
    source = aws.AwsSource(
        ["us-east-1"],
        endpoint_url=url,
        access_key_id="AKIDEXAMPLE",
        secret_access_key="wJalrXUtnFEMI",
        max_attempts=1,
        read_timeout=0.5,
    )
    with pytest.raises(plugin_utils("fleet_base").DiscoveryError) as raised:
        list(source.instances())
    assert str(raised.value).startswith("aws: ")
    assert says.format(url=url) in str(raised.value)


def aws_cli_env(ansible_env: dict[str, str], tmp_path: Path, **more: str) -> dict[str, str]:
    """The CLI's environment for the AWS source against the local server: test credentials, no proxy, no user's
    AWS files, and ``more`` on top."""
    env = {
        key: value for key, value in ansible_env.items() if not key.startswith("AWS_") and "proxy" not in key.lower()
    }
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
        NO_PROXY="127.0.0.1,localhost",
        COLUMNS="200",
        **more,
    )
    return env


@pytest.mark.parametrize("answer", ["empty", "truncated", "redirect-loop"])
def test_inventory_build_ends_with_one_clear_error(endpoint, ansible_env, tmp_path: Path, answer: str) -> None:
    url, handler = endpoint
    handler.answer = answer
    env = aws_cli_env(ansible_env, tmp_path)
    done = subprocess.run(
        [
            str(BIN / "gpufabric"),
            "inventory",
            "build",
            "--source",
            "aws",
            "--region",
            "us-east-1",
            "--endpoint-url",
            url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    assert f"error: discovery failed: aws: {url} in us-east-1 did not answer as the EC2 API" in message


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("empty", "{url} did not answer as the Compute Engine API in project p-1 (Failed to load JSON"),
        ("truncated", "{url} did not answer as the Compute Engine API in project p-1 (Failed to load JSON"),
        ("redirect-loop", "{url} answered in project p-1 with redirects that never end"),
        ("slow", "cannot reach {url}: no answer in time"),
    ],
)
def test_gcp_source_names_the_endpoint_and_what_it_answered(endpoint, answer: str, says: str) -> None:
    from google.auth.credentials import AnonymousCredentials

    url, handler = endpoint
    handler.answer = answer
    handler.truncated = b'{"items": {"zones/us-central1-a": {"instances": [{"name": "gpu-1", '
    source = plugin_utils("fleet_gcp").GcpSource(
        ["p-1"], endpoint=url, credentials=AnonymousCredentials(), timeout=0.5, retry_timeout=1
    )
    with pytest.raises(plugin_utils("fleet_base").DiscoveryError) as raised:
        list(source.instances())
    assert str(raised.value).startswith("gcp: ")
    assert says.format(url=url) in str(raised.value)


# --- every cloud, and the call budget ---------------------------------------------------------------------------

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaafake"
# Cut off where a dropped connection would cut a JSON list answer.
TRUNCATED_JSON = b'{"value": [{"name": "gpu-1", "id": "/subscriptions/'


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing between the SDKs and 127.0.0.1; no real credentials or config files."""
    for name in list(os.environ):
        if "proxy" in name.lower():
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_ENDPOINT", "OCI_CONFIG_FILE", "AZURE_CLIENT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def _source(cloud: str, url: str, timeout_s: float, retries: int) -> object:
    """The cloud's source pointed at ``url``, with the call budget the CLI and the plugin would give it."""
    budget = plugin_utils("fleet_sources").budget_options(cloud, timeout_s, retries)
    if cloud == "aws":
        return plugin_utils("fleet_aws").AwsSource(
            ["us-east-1"], endpoint_url=url, access_key_id="AKIDEXAMPLE", secret_access_key="wJalrXUtnFEMI", **budget
        )
    if cloud == "gcp":
        from google.auth.credentials import AnonymousCredentials

        return plugin_utils("fleet_gcp").GcpSource(["p-1"], endpoint=url, credentials=AnonymousCredentials(), **budget)
    if cloud == "azure":
        from tests.discovery.test_fleet_azure import StaticTokenCredential

        return plugin_utils("fleet_azure").AzureSource(
            SUBSCRIPTION, endpoint=url, credential=StaticTokenCredential(), retry_backoff_factor=0.01, **budget
        )
    if cloud == "oci":
        from tests.discovery.test_fleet_oci import FakeSigner

        return plugin_utils("fleet_oci").OciSource(
            COMPARTMENT,
            ["us-ashburn-1"],
            endpoint=url,
            signer=FakeSigner(),
            config={"region": "us-ashburn-1"},
            retry_base_delay_s=0.01,
            **budget,
        )
    from tests.discovery.fake_nebius import GOOD_TOKEN

    return plugin_utils("fleet_nebius").NebiusSource(
        ["project-e00fake"], endpoint=url, credentials=GOOD_TOKEN, **budget
    )


def _failure(cloud: str, url: str, timeout_s: float = 0.5, retries: int = 0) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(plugin_utils("fleet_base").DiscoveryError) as raised:
        list(_source(cloud, url, timeout_s, retries).instances())  # type: ignore[attr-defined]
    return str(raised.value), time.monotonic() - started


def _names_the_endpoint(cloud: str, url: str, message: str) -> None:
    assert message.startswith(f"{cloud}: ")
    host = url.removeprefix("http://")
    assert host in message, message
    assert "Traceback" not in message and "\n" not in message


# What each cloud says of each answer: Azure and OCI answer JSON, so they meet truncated JSON.
SAYS: dict[tuple[str, str], str] = {
    ("azure", "500"): "{url} did not answer as Azure Resource Manager while listing Microsoft.Compute/virtualMachines "
    "(HTTP 500 with an empty, truncated or non-JSON body",
    ("azure", "empty"): "{url} did not answer as Azure Resource Manager while listing "
    "Microsoft.Compute/virtualMachines (an empty, truncated or non-JSON body",
    ("azure", "truncated"): "{url} did not answer as Azure Resource Manager while listing "
    "Microsoft.Compute/virtualMachines (HTTP 200 with an empty, truncated or non-JSON body",
    ("azure", "slow"): "cannot reach {url}: ",
    ("oci", "500"): "ListInstances failed in us-ashburn-1: HTTP 500: <html><body>Internal Server Error</body></html> "
    "(from {url}/20160918)",
    ("oci", "empty"): "{url}/20160918 in us-ashburn-1 did not answer ListInstances as the OCI API (HTTP 200 without "
    "opc-request-id)",
    ("oci", "truncated"): "{url}/20160918 in us-ashburn-1 did not answer ListInstances as the OCI API (HTTP 200 "
    "without opc-request-id)",
    ("oci", "slow"): "cannot reach {url}/20160918: ",
    # The redirect's Location, its query string included.
    ("oci", "redirect-loop"): "{url}/20160918 in us-ashburn-1 answered ListInstances with redirects that never end "
    "(HTTP 302 to /20160918/instances?compartmentId=",
}


@pytest.mark.parametrize(("cloud", "answer"), sorted(SAYS))
def test_azure_and_oci_name_the_endpoint_and_what_it_answered(endpoint, cloud: str, answer: str) -> None:
    url, handler = endpoint
    handler.answer, handler.truncated = answer, TRUNCATED_JSON
    message, _took = _failure(cloud, url)
    _names_the_endpoint(cloud, url, message)
    assert SAYS[cloud, answer].format(url=url) in message


@pytest.mark.parametrize("answer", ["500", "empty", "truncated", "slow"])
def test_nebius_meets_an_http1_server_with_one_error(endpoint, answer: str) -> None:
    url, handler = endpoint
    handler.answer = answer
    message, _took = _failure("nebius", url)
    _names_the_endpoint("nebius", url, message)
    assert message.startswith(f"nebius: cannot reach {url.removeprefix('http://')}: ")


def test_nebius_names_the_endpoint_for_a_grpc_error_status() -> None:
    import grpc

    from tests.discovery.fake_nebius import FakeNebius

    with FakeNebius([]) as fake:
        fake.throttle, fake.throttle_code = 100, grpc.StatusCode.INTERNAL
        message, _took = _failure("nebius", f"http://{fake.address}")
    assert f"failed: INTERNAL: too many requests, retry later (from {fake.address})" in message
    assert fake.calls["GpuClusterService.List"] == 1  # an error status that is not throttling: never retried


# Which SDKs retry an answer that never comes (the others fail at the first timeout): botocore's retry modes
# and azure-core's RetryPolicy do; the others retry throttling only (GCP: its Retry predicate; OCI: our retry
# checker; Nebius: with_retries).
RETRIES_TIMEOUTS = {"aws": True, "gcp": False, "azure": True, "oci": False, "nebius": False}


@pytest.mark.parametrize("cloud", sorted(RETRIES_TIMEOUTS))
def test_an_endpoint_that_never_answers_fails_within_the_budget(endpoint, cloud: str) -> None:
    url, handler = endpoint
    handler.answer = "empty"
    _failure(cloud, url)  # the SDK imported and set up once: the timing below is the calls' alone
    handler.answer, handler.requests = "silent", 0
    timeout_s, retries = 1, 1
    message, took = _failure(cloud, url, timeout_s, retries)
    _names_the_endpoint(cloud, url, message)
    assert "cannot reach" in message or "no answer" in message, message
    attempts = retries + 1 if RETRIES_TIMEOUTS[cloud] else 1
    if cloud != "nebius":  # gRPC never gets as far as a request the server can count
        assert handler.requests == attempts
    # Each attempt waits timeout_s; the slack is for a loaded CI machine (the SDK defaults took minutes).
    assert took < attempts * timeout_s + 5, took


@pytest.mark.parametrize(
    ("variable", "value", "accepted"),
    [
        ("GPUFABRIC_CLOUD_TIMEOUT", "0", "whole seconds from 1 to 600 (default 10)"),
        ("GPUFABRIC_CLOUD_TIMEOUT", "1.5", "whole seconds from 1 to 600 (default 10)"),
        ("GPUFABRIC_CLOUD_TIMEOUT", "²", "whole seconds from 1 to 600 (default 10)"),
        ("GPUFABRIC_CLOUD_TIMEOUT", "601", "whole seconds from 1 to 600 (default 10)"),
        ("GPUFABRIC_CLOUD_RETRIES", "-1", "whole numbers from 0 to 10 (default 2)"),
        ("GPUFABRIC_CLOUD_RETRIES", "11", "whole numbers from 0 to 10 (default 2)"),
        ("GPUFABRIC_CLOUD_RETRIES", "\x1b[31m", "whole numbers from 0 to 10 (default 2)"),
    ],
)
def test_a_bad_budget_is_one_error(monkeypatch: pytest.MonkeyPatch, variable: str, value: str, accepted: str) -> None:
    from gpufabric import discovery
    from gpufabric.errors import UserError

    monkeypatch.setenv(variable, value)
    with pytest.raises(UserError) as raised:
        discovery.call_budget("aws")
    assert str(raised.value) == f"{variable}={value!r} (environment): not accepted; accepted: {accepted}"


def test_the_budget_reaches_every_sdk_and_defaults_bound_a_dead_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufabric import discovery

    monkeypatch.delenv("GPUFABRIC_CLOUD_TIMEOUT", raising=False)
    monkeypatch.delenv("GPUFABRIC_CLOUD_RETRIES", raising=False)
    assert discovery.call_budget("aws") == {"connect_timeout": 10.0, "read_timeout": 10.0, "max_attempts": 3}
    monkeypatch.setenv("GPUFABRIC_CLOUD_TIMEOUT", "4")
    monkeypatch.setenv("GPUFABRIC_CLOUD_RETRIES", "0")
    assert discovery.call_budget("azure") == {"connection_timeout": 4, "read_timeout": 4, "retry_total": 0}
    assert discovery.call_budget("gcp") == {"timeout": 4, "retry_timeout": 4}
    assert discovery.call_budget("oci") == {"timeout_s": (4, 4), "retry_attempts": 1}
    assert discovery.call_budget("nebius") == {"timeout": 4, "retry_attempts": 1}
    assert discovery.call_budget("static") == {}
    # The defaults, as each source is built without the CLI (the gpu_fleet plugin, a script).
    aws = _source("aws", "https://127.0.0.1", 10.0, 2)
    assert (aws.read_timeout, aws.max_attempts) == (10.0, 3)  # type: ignore[attr-defined]
    bare = plugin_utils("fleet_aws").AwsSource(["us-east-1"])
    assert (bare.connect_timeout, bare.read_timeout, bare.max_attempts) == (10.0, 10.0, 3)


def test_inventory_build_gives_up_on_a_silent_endpoint_within_the_budget(endpoint, ansible_env, tmp_path: Path) -> None:
    url, handler = endpoint
    handler.answer = "silent"
    env = aws_cli_env(ansible_env, tmp_path, GPUFABRIC_CLOUD_TIMEOUT="1", GPUFABRIC_CLOUD_RETRIES="1")
    argv = [str(BIN / "gpufabric"), "inventory", "build", "--source", "aws", "--region", "us-east-1"]
    done = subprocess.run(
        [*argv, "--endpoint-url", url], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    assert f"error: discovery failed: aws: cannot reach {url} in us-east-1: " in message
    assert handler.requests == 2  # GPUFABRIC_CLOUD_RETRIES=1: one retry
