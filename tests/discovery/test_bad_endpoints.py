# SPDX-License-Identifier: Apache-2.0
"""A cloud endpoint that misbehaves (HTTP 500, an empty 200, a redirect loop, truncated XML, a slow answer)
ends discovery with one DiscoveryError naming the cloud, the endpoint and what it answered, never a
traceback: a real HTTP server on 127.0.0.1 answers what such an endpoint would."""

from __future__ import annotations

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

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.do_GET()

    def do_GET(self) -> None:
        body = b""
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
    handler = type("Handler", (_Misbehaving,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
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


@pytest.mark.parametrize("answer", ["empty", "truncated", "redirect-loop"])
def test_inventory_build_ends_with_one_clear_error(endpoint, ansible_env, tmp_path: Path, answer: str) -> None:
    url, handler = endpoint
    handler.answer = answer
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
    )
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
