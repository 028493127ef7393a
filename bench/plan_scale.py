# SPDX-License-Identifier: Apache-2.0
"""How much does `gpufabric plan` add on top of reading the inventory?

Baseline: `ansible-inventory --list` on the same generated fleet, the floor any
plan has to pay. Prints both times and the ratio, in one run:

    .venv/bin/python bench/plan_scale.py [--hosts 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpufabric.collection import collections_path, plugin_utils

BIN = Path(sys.executable).parent


def write_fleet(path: Path, hosts: int) -> None:
    """A fleet cycling through every catalog profile, plus some unknown instance types. Hosts of rack-scale NVLink
    profiles fill their NVLink domains in order (a plan without one exits 1)."""
    catalog = plugin_utils("fabric_catalog").load_catalog()
    kinds = [catalog.get(name) for name in catalog.names()]
    seen: dict[str, int] = {}
    lines = ["all:", "  hosts:"]
    for index, profile in zip(range(hosts), itertools.cycle([*kinds, None])):
        cloud, instance = (profile["cloud"], profile["instance_type"]) if profile else ("gcp", "n2-standard-8")
        lines += [
            f"    node-{index:05d}:",
            f"      gpufabric_cloud: {cloud}",
            f"      gpufabric_instance_type: {instance}",
        ]
        if profile and profile.get("nvlink"):
            per_domain = profile["nvlink"]["domain_gpus"] // profile["gpu"]["count"]
            number = seen[instance] = seen.get(instance, -1) + 1
            lines.append(f"      gpufabric_nvlink_domain: {cloud}-{instance}-{number // per_domain}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def best_of(command: list[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    for _run in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()))
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "fleet.yml"
        write_fleet(inventory, args.hosts)
        baseline = best_of([str(BIN / "ansible-inventory"), "-i", str(inventory), "--list"], args.repeat, env)
        plan = best_of([str(BIN / "gpufabric"), "plan", "-i", str(inventory), "--json"], args.repeat, env)
    print(f"hosts: {args.hosts}, best of {args.repeat}")
    print(f"baseline ansible-inventory --list: {baseline:.2f} s")
    print(f"gpufabric plan --json:             {plan:.2f} s")
    print(f"ratio plan / baseline:             {plan / baseline:.2f}x")


if __name__ == "__main__":
    main()
