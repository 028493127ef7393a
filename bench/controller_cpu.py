# SPDX-License-Identifier: Apache-2.0
"""Controller CPU per host of a site.yml check run: a baseline revision against the working tree.

The same fleet runs `ansible-playbook playbooks/site.yml --check` twice, once from a baseline revision
(checked out into a temporary `git worktree`, default b113656: before the plan was resolved once per host)
and once from this working tree. Every host is this machine over a local connection, its hardware a
SIMULATED tree (`gpufabric_hw_root`), and a catalog override narrows the profile's roles to fabric_facts,
roce and nccl_env (nccl_env's files point into the temporary directory), so the run reads the catalog
the way a fleet run does and changes nothing here. Prints, for both, the CPU time of ansible-playbook and
its children (the controller and its forks: what runs lookups and filters) per host, the catalog loads per
run, and the ratio:

    .venv/bin/python bench/controller_cpu.py [--baseline b113656] [--hosts 8] [--repeat 1]

Catalog loads are counted the same way for both trees, without changing either: an audit hook (loaded
through sitecustomize) counts the opens of the run's catalog override file, which every load reads once.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import yaml
from bench_support import REPO, baseline_worktree, link_collection

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import write_tree

BIN = Path(sys.executable).parent
PROFILE = "oci/BM.GPU.H100.8"
ROLES = ["fabric_facts", "roce", "nccl_env"]

# Imported by every Python process of the run (PYTHONPATH), so Ansible's forks inherit the hook.
SITECUSTOMIZE = """
import atexit, os, sys

_watched = os.environ["GPUFABRIC_BENCH_WATCH"]
_log = os.environ["GPUFABRIC_BENCH_LOG"]

def _count_catalog_reads(event, args):
    if event == "open" and args and isinstance(args[0], str) and args[0] == _watched:
        descriptor = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, b"x")
        finally:
            os.close(descriptor)

sys.addaudithook(_count_catalog_reads)


def _record_module_cpu():
    # A module's own process (the AnsiballZ wrapper is its __main__): on a real fleet this CPU is spent on
    # the host, not on the controller, so the bench counts it apart.
    if not hasattr(sys.modules.get("__main__"), "_ansiballz_main"):
        return
    import resource

    used = sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )
    descriptor = os.open(os.environ["GPUFABRIC_BENCH_MODULES"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{used}\\n".encode())
    finally:
        os.close(descriptor)


atexit.register(_record_module_cpu)
"""


def write_fleet(tmp: Path, hosts: int, override: Path, hw_root: Path) -> Path:
    inventory = {"all": {"hosts": {}, "vars": {}}}
    for index in range(hosts):
        files = tmp / "hosts" / f"node-{index:02d}"
        files.mkdir(parents=True)
        inventory["all"]["hosts"][f"node-{index:02d}"] = {
            "nccl_env_conf_path": str(files / "nccl.conf"),
            "nccl_env_script_path": str(files / "env.sh"),
        }
    inventory["all"]["vars"] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpufabric_profile": PROFILE,
        "gpufabric_hw_root": str(hw_root),
        "gpufabric_catalog_files": [str(override)],
        # No mlnx_qos here: leave the NIC's trust mode alone (the settings are checked all the same).
        "roce_trust": "none",
    }
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory), encoding="utf-8")
    return path


class Run(NamedTuple):
    """CPU seconds of one check run: everything, and the modules' own processes; catalog loads."""

    total: float
    modules: float
    loads: int

    @property
    def controller(self) -> float:
        return self.total - self.modules


def run_site(tree: Path, tmp: Path, name: str, inventory: Path, override: Path, hosts: int) -> Run:
    """One check run of tree's site.yml."""
    log = tmp / f"{name}.loads"
    log.write_bytes(b"")
    modules = tmp / f"{name}.modules"
    modules.write_bytes(b"")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "GPUFABRIC_"))}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(tmp / f"collections-{name}"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        GPUFABRIC_BENCH_WATCH=str(override),
        GPUFABRIC_BENCH_LOG=str(log),
        GPUFABRIC_BENCH_MODULES=str(modules),
        PYTHONPATH=os.pathsep.join([str(tmp / "hook"), env.get("PYTHONPATH", "")]),
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(tree / "playbooks" / "site.yml"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    recaps = re.findall(r"^node-\d+\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0\s", result.stdout, re.M)
    if result.returncode != 0 or len(recaps) != hosts:
        sys.exit(f"the {name} run failed (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    module_cpu = sum(float(line) for line in modules.read_text(encoding="utf-8").split())
    if not module_cpu:
        sys.exit(f"the {name} run recorded no module CPU: the bench's sitecustomize hook did not reach the modules")
    return Run(cpu, module_cpu, len(log.read_bytes()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="b113656", help="git revision to compare with (default b113656)")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tree, alternating; the least CPU counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufabric-bench-") as name:
        tmp = Path(name)
        with baseline_worktree(args.baseline, tmp / "baseline") as baseline:
            (tmp / "hook").mkdir()
            (tmp / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
            hw_root = write_tree(plugin_utils("fabric_catalog").load_catalog().get(PROFILE), tmp / "simulated-hw")
            override = tmp / "catalog.yml"
            override.write_text(yaml.safe_dump({"profiles": {PROFILE: {"tiers": {"best": {"roles": ROLES}}}}}))
            inventory = write_fleet(tmp, args.hosts, override, hw_root)
            trees = {"baseline": baseline, "after": REPO}
            for label, tree in trees.items():
                link_collection(tree, tmp / f"collections-{label}")
            best: dict[str, Run] = {}
            for _run in range(args.repeat):
                for label, tree in trees.items():
                    run = run_site(tree, tmp, label, inventory, override, args.hosts)
                    if label not in best or run.controller < best[label].controller:
                        best[label] = run
    before, after = best["baseline"], best["after"]
    print(f"site.yml --check, {args.hosts} hosts (local connection, {PROFILE}, roles {', '.join(ROLES)})")
    print(f"CPU seconds per host, the run with the least controller CPU of {args.repeat} per tree;")
    print("controller = ansible-playbook and its forks; modules = the modules' own processes (a fleet's hosts)")
    for label, run in ((f"baseline {args.baseline}", before), ("working tree", after)):
        print(
            f"{label:17} controller {run.controller / args.hosts:5.2f}  modules {run.modules / args.hosts:5.2f}"
            f"  total {run.total / args.hosts:5.2f}  catalog loads {run.loads}"
        )
    print(
        f"ratio working tree / baseline: {after.controller / before.controller:.2f}x controller CPU,"
        f" {after.total / before.total:.2f}x total, {after.loads / before.loads:.2f}x catalog loads"
    )


if __name__ == "__main__":
    main()
