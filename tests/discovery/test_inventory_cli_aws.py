# SPDX-License-Identifier: Apache-2.0
"""`gpufabric inventory build --source aws` and the gpu_fleet plugin, end to end against moto on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from discovery.fake_aws import MotoEc2
from discovery.test_inventory_build import ansible_inventory, unwrap

BIN = Path(sys.executable).parent
EVIL = "{{ lookup('pipe', 'id') }}"


@pytest.fixture(scope="module")
def moto():
    with MotoEc2() as server:
        server.launch("us-east-1", "p5.48xlarge", 2, name="train", efa=32, placement_group="train-a")
        server.launch("us-east-1", "p4d.24xlarge", name="old-train", tags={"owner": EVIL}, efa=4)
        server.launch("us-east-1", "m5.large", name="web")
        stopped = server.launch("us-east-1", "p5.48xlarge", name="parked")
        server.stop_instances("us-east-1", stopped)
        yield server


@pytest.fixture
def aws_env(ansible_env, tmp_path):
    """Fake keys for moto; no AWS variable, config file, metadata service or proxy from this machine."""
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
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "gpufabric"), "inventory", "build", "--source", "aws", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cli_json_has_gpu_hosts_groups_and_marks(moto, aws_env):
    result = cli(aws_env, "--region", "us-east-1", "--endpoint-url", moto.url, "--format", "json")
    assert result.returncode == 0, result.stderr
    inventory = json.loads(result.stdout)
    hosts = inventory["_meta"]["hostvars"]
    assert len(hosts) == 3, "two p5 and one p4d: the m5 and the stopped p5 are left out"
    profiles = sorted(host["gpufabric_profile"] for host in hosts.values())
    assert profiles == ["aws/p4d.24xlarge", "aws/p5.48xlarge", "aws/p5.48xlarge"]
    assert len(inventory["fabric_efa"]["hosts"]) == 3
    assert len(inventory["placement_aws_train_a"]["hosts"]) == 2
    p4d = next(
        host for host in hosts.values() if host["gpufabric_instance_type"] == {"__ansible_unsafe": "p4d.24xlarge"}
    )
    assert p4d["gpufabric_tags"]["owner"] == {"__ansible_unsafe": EVIL}
    assert p4d["gpufabric_source_facts"]["efa_interfaces"] == 4
    assert all(host["ansible_host"] == host["gpufabric_private_ip"] for host in hosts.values())
    assert "testing" not in result.stdout + result.stderr


def test_plugin_gives_the_same_hosts_and_groups(moto, aws_env, tmp_path):
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text(
        f"plugin: gpufabric.cluster.gpu_fleet\nsource: aws\nregions: [us-east-1]\nendpoint_url: {moto.url}\n",
        encoding="utf-8",
    )
    listed = ansible_inventory(aws_env, "-i", str(config), "--list")
    built = cli(aws_env, "--region", "us-east-1", "--endpoint-url", moto.url, "--format", "json")
    assert unwrap(json.loads(listed.stdout)) == unwrap(json.loads(built.stdout))


@pytest.mark.parametrize("exclude", [False, True])
def test_plugin_filters_and_hostnames_as_aws_ec2_has_them(moto, aws_env, tmp_path, exclude):
    # The p5 hosts, plus any host with an owner tag (the p4d); exclusion wins over both.
    config = tmp_path / "fleet.gpu_fleet.yml"
    settings = {
        "plugin": "gpufabric.cluster.gpu_fleet",
        "source": "aws",
        "regions": ["us-east-1"],
        "endpoint": moto.url,  # the alias of endpoint_url
        "source_options": {"read_timeout": 30, "max_attempts": 2},
        "filters": {"instance_type": "p5.*"},
        "include_filters": [{"tag:owner": "*"}],
        "exclude_filters": [{"instance_type": ["p4d.*", "p3.*"]}] if exclude else [],
        "hostnames": [{"name": "instance_id", "prefix": "tag:Name", "separator": "-"}],
    }
    config.write_text(json.dumps(settings), encoding="utf-8")
    hostvars = json.loads(ansible_inventory(aws_env, "-i", str(config), "--list").stdout)["_meta"]["hostvars"]
    names = {host: unwrap(variables)["gpufabric_instance_type"] for host, variables in hostvars.items()}
    expected = {"p5.48xlarge": 2} if exclude else {"p5.48xlarge": 2, "p4d.24xlarge": 1}
    assert {kind: list(names.values()).count(kind) for kind in set(names.values())} == expected
    for host, variables in hostvars.items():
        plain = unwrap(variables)
        assert host == f"{plain['gpufabric_tags']['Name']}-{plain['gpufabric_instance_id']}"


def test_plugin_refuses_options_that_do_not_fit(aws_env, tmp_path):
    config = tmp_path / "fleet.gpu_fleet.yml"
    env = {**aws_env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    for settings, message in [
        ({"projects": ["p"]}, "projects does not apply to source aws; it takes regions, profile, endpoint_url"),
        ({"source_options": {"regions": ["us-east-1"]}}, "source_options.regions: set it as the option regions"),
        ({"filters": {"colour": "red"}}, "filters: unknown key 'colour'; accepted: name, instance_id"),
        ({"hostnames": [{"name": "tag:Name", "suffix": "x"}]}, "hostnames[0]: unknown setting 'suffix'"),
    ]:
        config.write_text(json.dumps({"plugin": "gpufabric.cluster.gpu_fleet", "source": "aws", **settings}))
        failed = ansible_inventory(env, "-i", str(config), "--list", check=False)
        assert failed.returncode != 0
        assert message in " ".join(failed.stderr.split()), failed.stderr
        assert "Traceback" not in failed.stderr


def test_include_options(moto, aws_env):
    result = cli(
        aws_env, "--region", "us-east-1", "--endpoint-url", moto.url, "--format", "json", "--include-non-gpu",
        "--include-stopped",
    )  # fmt: skip
    inventory = json.loads(result.stdout)
    assert len(inventory["_meta"]["hostvars"]) == 5
    assert len(inventory["non_gpu"]["hosts"]) == 1


def test_unreachable_endpoint_writes_nothing(aws_env, tmp_path):
    output = tmp_path / "fleet.yml"
    result = cli(
        aws_env, "--region", "us-east-1", "--endpoint-url", f"http://127.0.0.1:{free_port()}", "-o", str(output)
    )
    assert result.returncode == 1
    assert "cannot reach" in result.stderr
    assert "Traceback" not in result.stderr
    assert not output.exists()
    assert os.listdir(tmp_path) == [], "no temporary file left behind"


def test_missing_credentials_is_one_clear_error(moto, aws_env):
    env = {key: value for key, value in aws_env.items() if key not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    result = cli(env, "--region", "us-east-1", "--endpoint-url", moto.url)
    assert result.returncode == 1
    assert "no AWS credentials found" in result.stderr
