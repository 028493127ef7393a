# SPDX-License-Identifier: Apache-2.0
"""How fast does gpufabric's AWS source list a fleet, next to the amazon.aws.aws_ec2 inventory plugin?

Starts moto's EC2 server on 127.0.0.1 (tests/discovery/fake_aws.py) and creates a fleet over
us-east-1, us-west-2 and eu-west-1: p5.48xlarge, p4d.24xlarge and m5.large (half m5), one
reservation per instance as Auto Scaling launches them, the GPU instances with an EFA primary
interface in placement groups of 64, every 20th instance stopped. Then, in the same run:

(a) gpufabric: ``AwsSource`` lists every instance and the builder makes the inventory (in a child
    process, as the CLI would);
(b) ``ansible-inventory -i <tmp>/x.aws_ec2.yml --list`` with ``amazon.aws.aws_ec2`` pointed at
    the same server (``endpoint_url``, fake keys, ``hostnames: [instance-id]``).

Both clients run in their own process, so neither shares the GIL with moto's server thread.
Wall is each whole process's wall-clock time, most of it moto serialising XML (~3 ms per
instance a page); CPU is the client process's own user + system time, the part that carries
over to real AWS. API calls are moto's recorded requests by EC2 action (each HTTP attempt), and
for gpufabric also the source's own ``api_calls`` count. Page counts are moto's: gpufabric asks
for 1000 per page; aws_ec2 sends no MaxResults, which moto answers 100 reservations a page and
AWS answers with every instance of the region in one response.

    .venv/bin/python bench/inventory_scale.py [--instances 10000]

Nothing leaves 127.0.0.1: explicit endpoint and keys, no AWS variables or config files, the
instance metadata service disabled, no proxy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
TYPES = ["p5.48xlarge", "m5.large", "p4d.24xlarge", "m5.large"]
GPU_TYPES = frozenset({"p5.48xlarge", "p4d.24xlarge"})
ACCESS_KEY, SECRET_KEY = "AKIAFAKEBENCHKEY0000", "fake-bench-secret"


def offline_env(home: Path) -> dict[str, str]:
    """This environment without AWS settings or proxies: clients can only reach the endpoint given."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AWS_") and key.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
        NO_PROXY="127.0.0.1,localhost",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        ANSIBLE_LOCALHOST_WARNING="0",
    )
    return env


def list_with_gpufabric(endpoint: str) -> None:
    """Child process: build the inventory with AwsSource; print hosts, seconds and API calls as JSON."""
    from gpufabric.collection import plugin_utils

    started = time.perf_counter()
    source = plugin_utils("fleet_aws").AwsSource(
        regions=REGIONS, endpoint_url=endpoint, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY
    )
    # The whole job, as `gpufabric inventory build --format json` does it: list, classify, render.
    fleet_inventory = plugin_utils("fleet_inventory")
    instances = list(source.instances())
    catalog = plugin_utils("fabric_catalog").load_catalog()
    inventory, _warnings = fleet_inventory.build(instances, catalog, include_non_gpu=True, include_stopped=True)
    fleet_inventory.to_json(inventory)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "instances": len(inventory["_meta"]["hostvars"]),
                "build_seconds": seconds,
                "api_calls": dict(source.api_calls),
            }
        )
    )


def create_fleet(moto, instances: int) -> None:
    per_region = [instances // len(REGIONS) + (index < instances % len(REGIONS)) for index in range(len(REGIONS))]
    for region, count in zip(REGIONS, per_region, strict=True):
        moto.bulk_launch(region, TYPES, count, efa_types=GPU_TYPES, placement_group_size=64, stop_every=20)


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``command``; its wall seconds, its CPU seconds (user + system) and its stdout."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return wall, cpu, done.stdout


def calls(actions: Counter[str]) -> str:
    return ", ".join(f"{action} {count}" for action, count in sorted(actions.items())) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=10000)
    parser.add_argument("--list-with-gpufabric", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.list_with_gpufabric:
        list_with_gpufabric(args.list_with_gpufabric)
        return

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = offline_env(home)
        os.environ.update(env)
        # moto reads where to record requests when it is imported.
        os.environ["MOTO_RECORDER_FILEPATH"] = str(home / "moto-recording")
        sys.path.insert(0, str(REPO))
        from tests.discovery.fake_aws import MotoEc2

        with MotoEc2() as moto:
            started = time.perf_counter()
            create_fleet(moto, args.instances)
            print(f"created {args.instances} instances in {time.perf_counter() - started:.1f} s", file=sys.stderr)

            moto.start_recording()
            gpufabric_s, gpufabric_cpu, out = timed(
                [sys.executable, __file__, "--list-with-gpufabric", moto.url], {**env, "PYTHONPATH": str(REPO)}
            )
            gpufabric_requests = moto.stop_recording()
            gpufabric = json.loads(out)

            config = home / "x.aws_ec2.yml"
            config.write_text(
                "plugin: amazon.aws.aws_ec2\n"
                f"regions: {json.dumps(REGIONS)}\n"
                f"endpoint_url: {moto.url}\n"
                f"access_key: {ACCESS_KEY}\n"
                f"secret_key: {SECRET_KEY}\n"
                "hostnames: [instance-id]\n",
                encoding="utf-8",
            )
            moto.start_recording()
            aws_ec2_s, aws_ec2_cpu, out = timed([str(BIN / "ansible-inventory"), "-i", str(config), "--list"], env)
            aws_ec2_requests = moto.stop_recording()
            aws_ec2_hosts = len(json.loads(out).get("_meta", {}).get("hostvars", {}))

            empty = home / "empty.yml"
            empty.write_text("all: {}\n", encoding="utf-8")
            startup_s, startup_cpu, _stdout = timed([str(BIN / "ansible-inventory"), "-i", str(empty), "--list"], env)

    print(f"fleet: {args.instances} instances in {', '.join(REGIONS)} (moto EC2 server on 127.0.0.1)")
    print(f"{'':36}{'wall s':>8}{'CPU s':>8}{'hosts':>7}  API calls (moto's recorded requests)")
    rows = [
        ("gpufabric inventory build", gpufabric_s, gpufabric_cpu, gpufabric["instances"], calls(gpufabric_requests)),
        ("amazon.aws.aws_ec2", aws_ec2_s, aws_ec2_cpu, aws_ec2_hosts, calls(aws_ec2_requests)),
        ("ansible-inventory, empty inventory", startup_s, startup_cpu, 0, "(startup alone)"),
    ]
    for name, wall, cpu, hosts, api in rows:
        print(f"{name:36}{wall:8.2f}{cpu:8.2f}{hosts:7d}  {api}")
    print(
        f"gpufabric list + classify + render (in its process): {gpufabric['build_seconds']:.2f} s; "
        f"its own count: {calls(Counter(gpufabric['api_calls']))}"
    )
    print(
        f"ratio aws_ec2 / gpufabric: wall {aws_ec2_s / gpufabric_s:.2f}x, client CPU {aws_ec2_cpu / gpufabric_cpu:.2f}x"
    )


if __name__ == "__main__":
    main()
