# SPDX-License-Identifier: Apache-2.0
"""The AWS source with the real boto3 SDK against moto's EC2 server (fake_aws.py) on 127.0.0.1.

Every source here gets the server's endpoint and explicit credentials; the environment has no
AWS variables, no shared config, the instance metadata service disabled and no proxy, so
nothing can reach AWS or 169.254.169.254.
"""

from __future__ import annotations

import math
import os
import re
import socket
import sys
import time

import pytest
from botocore.retries import bucket, standard

from gpufabric.collection import plugin_utils

from .fake_aws import ACCESS_KEY, ACCOUNT_ID, IMAGE_ID, SECRET_KEY, FailFirst, MotoEc2

fleet_base = plugin_utils("fleet_base")
fleet_aws = plugin_utils("fleet_aws")
catalog = plugin_utils("fabric_catalog").load_catalog()

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
BULK_REGION = "ap-northeast-1"  # the pagination fleet, kept out of the other tests' listings
# Pages of BULK_PAGE (EC2's smallest MaxResults) instead of the source's 1000: the same three pages, the last one
# short, from 12 instances instead of 2,500 (31 s of a CI worker's time on moto).
BULK_INSTANCES = 12
BULK_PAGE = 5
SECRET = "wRoNg/SECRET+key-do-not-print"
UNKNOWN_KEY = "AKIAUNKNOWNKEY000000"


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def aws_home(tmp_path_factory):
    """No AWS variable, config file, metadata service or proxy from this machine: only 127.0.0.1."""
    home = tmp_path_factory.mktemp("aws")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("AWS_") or name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
                patch.delenv(name)
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        patch.setenv("AWS_CONFIG_FILE", str(home / "config"))
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials"))
        patch.setenv("NO_PROXY", "127.0.0.1,localhost")
        patch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        yield home


@pytest.fixture(scope="module")
def moto(aws_home):
    with MotoEc2() as server:
        yield server


@pytest.fixture(scope="module")
def fleet(moto) -> dict[str, list[str]]:
    """11 instances in 3 regions: p5 and p4d with EFA in placement groups, g5, m5; stopped, terminated."""
    p5 = [
        moto.launch(
            "us-east-1", "p5.48xlarge", name=f"train-{n}", tags={"team": "ml"}, efa=32, placement_group="train-a"
        )[0]
        for n in range(3)
    ]
    m5_east = moto.launch("us-east-1", "m5.large", 2, zone="us-east-1b")
    p4d = moto.launch(
        "us-west-2", "p4d.24xlarge", 2, zone="us-west-2b", efa=4, efa_only=False, placement_group="pg-west"
    )
    g5 = moto.launch("us-west-2", "g5.xlarge", name="viz")
    m5_eu = moto.launch("eu-west-1", "m5.large", 3, name="web")
    moto.stop_instances("us-east-1", [p5[2]])
    moto.stop_instances("eu-west-1", [m5_eu[1]])
    moto.terminate_instances("eu-west-1", [m5_eu[2]])
    return {"p5": p5, "m5_east": m5_east, "p4d": p4d, "g5": g5, "m5_eu": m5_eu}


@pytest.fixture(scope="module")
def listed(moto, fleet):
    """The whole fleet as one source lists it, and the source (for its api_calls)."""
    source = make_source(moto)
    return listing(source), source


@pytest.fixture(scope="module")
def bulk(moto) -> list[str]:
    return moto.bulk_launch(BULK_REGION, ["p5.48xlarge", "p4d.24xlarge", "m5.large", "g5.xlarge"], BULK_INSTANCES)


@pytest.fixture
def no_backoff(monkeypatch) -> list[float]:
    """botocore's retry backoff without the sleep; returns the delays it would have slept."""
    delays: list[float] = []
    original = standard.ExponentialBackoff.delay_amount

    def delay_amount(self, context):
        delays.append(original(self, context))
        return 0

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", delay_amount)
    return delays


def make_source(moto, **options):
    options.setdefault("regions", REGIONS)
    if "profile" not in options:
        options.setdefault("access_key_id", ACCESS_KEY)
        options.setdefault("secret_access_key", SECRET_KEY)
    return fleet_aws.AwsSource(endpoint_url=moto.url, **options)


def listing(source) -> dict[str, object]:
    return {instance.instance_id: instance for instance in source.instances()}


def failure(source) -> str:
    with pytest.raises(fleet_base.DiscoveryError) as caught:
        list(source.instances())
    message = str(caught.value)
    assert message.startswith("aws: ")
    assert SECRET not in message and SECRET_KEY not in message and UNKNOWN_KEY not in message
    return message


def all_ids(fleet) -> set[str]:
    return {instance_id for ids in fleet.values() for instance_id in ids}


def test_lists_every_instance_of_every_region_in_one_call_each(fleet, listed):
    found, source = listed
    assert set(found) == all_ids(fleet)
    assert {instance.region for instance in found.values()} == set(REGIONS)
    assert all(instance.cloud == "aws" for instance in found.values())
    assert source.api_calls == {"DescribeInstances": 3}


def test_gpu_instance_with_efa_in_a_placement_group(fleet, listed):
    found, _source = listed
    p5 = found[fleet["p5"][0]]
    assert (p5.name, p5.instance_type, p5.state) == ("train-0", "p5.48xlarge", fleet_base.RUNNING)
    assert (p5.region, p5.zone, p5.placement) == ("us-east-1", "us-east-1a", "train-a")
    assert p5.tags == {"Name": "train-0", "team": "ml"}
    assert p5.ids == {"owner_id": ACCOUNT_ID}
    assert p5.extra["efa_interfaces"] == 32
    assert p5.extra["vpc_id"].startswith("vpc-") and p5.extra["subnet_id"].startswith("subnet-")
    assert p5.extra["image_id"] == IMAGE_ID
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", p5.private_ip)
    p4d = found[fleet["p4d"][1]]
    assert (p4d.zone, p4d.placement, p4d.extra["efa_interfaces"]) == ("us-west-2b", "pg-west", 4)


def test_plain_instance_has_its_id_as_name_no_placement_no_efa(fleet, listed):
    found, _source = listed
    m5 = found[fleet["m5_east"][0]]
    assert (m5.name, m5.zone, m5.placement, m5.tags) == (m5.instance_id, "us-east-1b", None, {})
    assert m5.extra["efa_interfaces"] == 0


def test_gpu_and_other_types_are_all_reported(fleet, listed):
    found, _source = listed
    types = {instance.instance_type for instance in found.values()}
    assert types == {"p5.48xlarge", "p4d.24xlarge", "g5.xlarge", "m5.large"}
    assert {"aws/p5.48xlarge", "aws/p4d.24xlarge"} <= set(catalog.names())
    assert fleet_base.is_gpu_type("aws", found[fleet["g5"][0]].instance_type)
    assert not fleet_base.is_gpu_type("aws", found[fleet["m5_eu"][0]].instance_type)


def test_stopped_and_terminated_instances_are_reported_with_their_state(fleet, listed):
    found, _source = listed
    assert found[fleet["p5"][2]].state == fleet_base.STOPPED
    assert found[fleet["m5_eu"][1]].state == fleet_base.STOPPED
    assert found[fleet["m5_eu"][2]].state == fleet_base.OTHER  # terminated
    assert found[fleet["m5_eu"][0]].state == fleet_base.RUNNING


@pytest.mark.parametrize(
    ("aws_state", "state"),
    [
        ("running", "running"),
        ("pending", "pending"),
        ("stopping", "stopped"),
        ("stopped", "stopped"),
        ("shutting-down", "other"),
        ("terminated", "other"),
    ],
)
def test_state_mapping(aws_state, state):
    raw = {"InstanceId": "i-0abc", "State": {"Name": aws_state}, "Placement": {"GroupName": ""}}
    instance = fleet_aws.to_instance(raw, "us-east-1", None)
    assert instance.state == state
    assert (instance.name, instance.placement, instance.ids, instance.extra["efa_interfaces"]) == (
        "i-0abc",
        None,
        {},
        0,
    )


def test_pagination_grows_with_pages_not_instances(moto, bulk, monkeypatch):
    assert fleet_aws.PAGE_SIZE == 1000  # the most DescribeInstances accepts: the fewest calls
    monkeypatch.setattr(fleet_aws, "PAGE_SIZE", BULK_PAGE)
    source = make_source(moto, regions=[BULK_REGION])
    page_sizes = []
    source.client(BULK_REGION).meta.events.register(
        "before-parameter-build.ec2.DescribeInstances", lambda params, **_: page_sizes.append(params.get("MaxResults"))
    )
    found = [instance.instance_id for instance in source.instances()]
    assert len(found) == BULK_INSTANCES
    assert set(found) == set(bulk)
    assert page_sizes == [BULK_PAGE] * 3
    assert source.api_calls == {"DescribeInstances": math.ceil(BULK_INSTANCES / BULK_PAGE)}


@pytest.mark.parametrize(
    ("status", "code"), [(400, "RequestLimitExceeded"), (503, "RequestLimitExceeded"), (400, "Throttling")]
)
def test_throttling_is_retried_until_it_succeeds(moto, fleet, no_backoff, status, code):
    source = make_source(moto, regions=["eu-west-1"])
    throttle = FailFirst(2, status, code, "Request limit exceeded.")
    source.client("eu-west-1").meta.events.register("before-send.ec2.DescribeInstances", throttle)
    assert set(listing(source)) == set(fleet["m5_eu"])
    assert throttle.attempts == 3
    assert len(no_backoff) == 2
    assert source.api_calls == {"DescribeInstances": 1}  # one call, three attempts


def test_adaptive_retry_mode_also_retries_throttling(moto, fleet, no_backoff, monkeypatch):
    # Adaptive mode also slows the client down after a throttle (a token bucket that waits on
    # the real clock); that wait is botocore's own business, and skipped here.
    monkeypatch.setattr(bucket.TokenBucket, "acquire", lambda self, amount=1, block=True: True)
    source = make_source(moto, regions=["eu-west-1"], retry_mode="adaptive")
    throttle = FailFirst(1, 400, "RequestLimitExceeded", "Request limit exceeded.")
    source.client("eu-west-1").meta.events.register("before-send.ec2.DescribeInstances", throttle)
    assert set(listing(source)) == set(fleet["m5_eu"])
    assert throttle.attempts == 2


def test_throttling_that_never_ends_is_one_error(moto, fleet, no_backoff):
    source = make_source(moto, regions=["us-east-1"], max_attempts=3)
    throttle = FailFirst(math.inf, 400, "RequestLimitExceeded", "Request limit exceeded.")
    source.client("us-east-1").meta.events.register("before-send.ec2.DescribeInstances", throttle)
    message = failure(source)
    assert message == (
        "aws: EC2 still throttled DescribeInstances in us-east-1 (RequestLimitExceeded) after 3 attempts; "
        "try again later or raise max_attempts"
    )
    assert throttle.attempts == 3


@pytest.fixture
def enforced_iam(moto, fleet):
    """moto checks signatures and IAM policies while the test runs; returns users' keys."""
    users = {
        "reader": moto.create_user(f"reader-{time.monotonic_ns()}", ["ec2:DescribeInstances"]),
        "nobody": moto.create_user(f"nobody-{time.monotonic_ns()}", ["ec2:DescribeRegions"]),
    }
    moto.enforce_iam(True)
    yield users
    moto.enforce_iam(False)


def test_ec2_describe_instances_is_the_only_permission_needed(moto, fleet, enforced_iam):
    key, secret = enforced_iam["reader"]
    source = make_source(moto, access_key_id=key, secret_access_key=secret)
    assert set(listing(source)) == all_ids(fleet)


def test_missing_permission_names_the_action(moto, enforced_iam):
    key, secret = enforced_iam["nobody"]
    message = failure(make_source(moto, access_key_id=key, secret_access_key=secret))
    assert message == (
        "aws: permission denied in us-east-1 (AccessDenied): "
        "allow ec2:DescribeInstances for this user or role (read-only, resource *)"
    )
    assert secret not in message and key not in message


@pytest.mark.parametrize("known_key", [False, True], ids=["unknown-key", "wrong-secret"])
def test_rejected_credentials(moto, enforced_iam, known_key):
    key = enforced_iam["reader"][0] if known_key else UNKNOWN_KEY
    message = failure(make_source(moto, access_key_id=key, secret_access_key=SECRET))
    assert message.startswith("aws: credentials were rejected by EC2 in us-east-1 (AuthFailure): ")
    assert key not in message


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (
            403,
            "UnauthorizedOperation",
            "aws: permission denied in us-east-1 (UnauthorizedOperation): allow ec2:DescribeInstances",
        ),
        (401, "AuthFailure", "aws: credentials were rejected by EC2 in us-east-1 (AuthFailure)"),
        (400, "InvalidClientTokenId", "aws: credentials were rejected by EC2 in us-east-1 (InvalidClientTokenId)"),
        (400, "OptInRequired", "aws: EC2 DescribeInstances failed in us-east-1: OptInRequired: You are not subscribed"),
    ],
)
def test_errors_as_ec2_sends_them_are_not_retried(moto, fleet, status, code, expected):
    """The exact XML real EC2 answers (moto says AccessDenied where EC2 says UnauthorizedOperation)."""
    source = make_source(moto)
    answer = FailFirst(
        math.inf,
        status,
        code,
        "You are not subscribed to this service. Please go to http://aws.amazon.com to subscribe."
        if code == "OptInRequired"
        else f"User: arn:aws:iam::{ACCOUNT_ID}:user/ops is not authorized to perform: ec2:DescribeInstances",
    )
    source.client("us-east-1").meta.events.register("before-send.ec2.DescribeInstances", answer)
    assert failure(source).startswith(expected)
    assert answer.attempts == 1


def test_unreachable_endpoint_fails_fast_after_retries(aws_home, no_backoff):
    url = f"http://127.0.0.1:{closed_port()}"
    source = fleet_aws.AwsSource(
        regions=REGIONS, endpoint_url=url, access_key_id=ACCESS_KEY, secret_access_key=SECRET, connect_timeout=2
    )
    started = time.monotonic()
    message = failure(source)
    assert time.monotonic() - started < 5
    assert message.startswith(f"aws: cannot reach {url} in us-east-1: ")
    assert "Connection refused" in message
    assert message.endswith("check endpoint_url, proxy settings and the network")
    assert len(no_backoff) == fleet_base.CALL_RETRIES  # botocore retried the connection


def test_no_credentials_anywhere(moto):
    message = failure(fleet_aws.AwsSource(regions=REGIONS, endpoint_url=moto.url))
    assert message.startswith("aws: no AWS credentials found (environment, shared config, or instance role)")


def test_profile_from_the_shared_credentials_file(moto, fleet, aws_home):
    (aws_home / "credentials").write_text(
        f"[fleet]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n", encoding="utf-8"
    )
    assert set(listing(make_source(moto, regions=["eu-west-1"], profile="fleet"))) == set(fleet["m5_eu"])
    message = failure(make_source(moto, profile="missing"))
    assert message == "aws: AWS profile 'missing' was not found in the shared config and credentials files"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"regions": []}, "regions must be a non-empty list"),
        ({"regions": "us-east-1"}, "regions must be a non-empty list"),
        ({"retry_mode": "legacy"}, "retry_mode 'legacy' is not accepted; accepted: standard, adaptive"),
        ({"max_attempts": 0}, "max_attempts must be 1 or more"),
        ({"access_key_id": ACCESS_KEY}, "access_key_id and secret_access_key must be given together"),
        (
            {"profile": "fleet", "access_key_id": ACCESS_KEY, "secret_access_key": SECRET},
            "give either a profile or access keys, not both",
        ),
    ],
)
def test_bad_options(options, expected):
    options.setdefault("regions", REGIONS)
    with pytest.raises(fleet_base.DiscoveryError, match=re.escape(expected)):
        fleet_aws.AwsSource(**options)


def test_missing_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    source = fleet_aws.AwsSource(regions=REGIONS)
    with pytest.raises(
        fleet_base.DiscoveryError, match=re.escape("aws: the boto3 SDK is not installed; install gpufabric[aws]")
    ):
        list(source.instances())
