# SPDX-License-Identifier: Apache-2.0
"""How long does `gpufabric plan --json` take on a large fleet, against a baseline revision and against the floor?

The same generated fleet (every catalog profile in turn, some unknown instance types, NVL72 hosts in full
NVLink domains, gpufabric_os set in the fleet's vars so that every host's supply chain is computed, as in
inventories/sample) is planned, in one run, by:

- ``ansible-inventory --list``: the floor any plan pays to read the inventory;
- ``gpufabric plan --json`` of a baseline revision (default ceef48d, before the supply memo), checked out into a
  temporary `git worktree`; it plans at most ``--baseline-hosts`` (default 300) and is scaled per host, since it
  takes about 0.2 s of CPU a host (its startup scaled too: a few percent high);
- ``gpufabric plan --json`` of the working tree.

Wall and CPU seconds (the process and its children: the machine may be shared) and the ratios are printed:

    .venv/bin/python bench/plan_scale.py [--hosts 10000] [--baseline ceef48d] [--baseline-hosts 300] [--no-os]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_support import REPO, baseline_worktree

from gpufabric.collection import collections_path, plugin_utils

BIN = Path(sys.executable).parent


def write_fleet(path: Path, hosts: int, os_name: str | None = "ubuntu-22.04") -> None:
    """A fleet cycling through every catalog profile, plus some unknown instance types. Hosts of rack-scale NVLink
    profiles fill their NVLink domains in order (a plan without one exits 1). With ``os_name``, the fleet's vars
    name the OS and the driver (as inventories/sample does), so that the plan computes every host's supply chain."""
    catalog = plugin_utils("fabric_catalog").load_catalog()
    kinds = [catalog.get(name) for name in catalog.names()]
    seen: dict[str, int] = {}
    lines = ["all:"]
    if os_name:
        lines += ["  vars:", f"    gpufabric_os: {os_name}", '    nvidia_driver_branch: "570"']
        lines += ['    nvidia_driver_version: "570.133.20"']
    lines += ["  hosts:"]
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


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, with every process it waited for) of one run; its output is dropped."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best_of(command: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """The least wall and the least CPU seconds of ``repeat`` runs."""
    runs = [timed(command, env) for _run in range(repeat)]
    return min(wall for wall, _cpu in runs), min(cpu for _wall, cpu in runs)


def plan_command(tree: Path, inventory: Path) -> list[str]:
    """`gpufabric plan --json` of the checkout at ``tree`` (its driver and its collection)."""
    start = f"import sys; sys.path.insert(0, {str(tree / 'driver')!r}); from gpufabric.cli import main; main()"
    return [sys.executable, "-c", start, "plan", "-i", str(inventory), "--json"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", default="ceef48d", help="git revision to compare with (default ceef48d)")
    parser.add_argument(
        "--baseline-hosts",
        type=int,
        default=300,
        help="plan the baseline on at most this many hosts and scale per host (default 300)",
    )
    parser.add_argument("--no-os", action="store_true", help="no gpufabric_os: no host's supply chain is computed")
    args = parser.parse_args()
    os_name = None if args.no_os else "ubuntu-22.04"
    base_hosts = min(args.baseline_hosts, args.hosts)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()))
    with tempfile.TemporaryDirectory(prefix="gpufabric-bench-") as name:
        tmp = Path(name)
        inventory, base_inventory = tmp / "fleet.yml", tmp / "baseline-fleet.yml"
        write_fleet(inventory, args.hosts, os_name)
        write_fleet(base_inventory, base_hosts, os_name)
        floor = best_of([str(BIN / "ansible-inventory"), "-i", str(inventory), "--list"], args.repeat, env)
        after = best_of(plan_command(REPO, inventory), args.repeat, env)
        with baseline_worktree(args.baseline, tmp / "baseline") as tree:
            base = best_of(plan_command(tree, base_inventory), args.repeat, env)
    scale = args.hosts / base_hosts
    before = (base[0] * scale, base[1] * scale)
    scaled = f", measured on {base_hosts} hosts and scaled" if base_hosts != args.hosts else ""
    print(f"hosts: {args.hosts}, gpufabric_os: {os_name or 'unset'}, best of {args.repeat}; wall s / CPU s")
    print(f"ansible-inventory --list (floor):    {floor[0]:8.2f} / {floor[1]:8.2f}")
    print(f"plan --json, baseline {args.baseline:<12}   {before[0]:8.2f} / {before[1]:8.2f}{scaled}")
    print(f"plan --json, working tree:           {after[0]:8.2f} / {after[1]:8.2f}")
    print(f"ratio baseline / working tree:       {before[0] / after[0]:8.2f}x / {before[1] / after[1]:.2f}x")
    print(f"ratio working tree / floor:          {after[0] / floor[0]:8.2f}x / {after[1] / floor[1]:.2f}x")


if __name__ == "__main__":
    main()
