# SPDX-License-Identifier: Apache-2.0
"""What do the filter files' deferred module_utils save a task that templates one of the collection's filters?

A local play of TASKS set_fact tasks, each templating ``gpufabric.cluster.roce_gid_errors`` (roce.py sorts late, so
Ansible imports most of plugins/filter/ before it finds the filter, in every worker it forks), runs against the
working tree and against a baseline revision checked out into a temporary `git worktree` (default 52ab692: before
plugins/plugin_utils/module_utils_on_use.py), alternating. Prints the CPU time of ansible-playbook and its workers
for each (the least of --repeat runs), per task, and the ratio:

    .venv/bin/python bench/filter_imports.py [--tasks 20] [--repeat 3] [--baseline 52ab692]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench_support import REPO, baseline_worktree, cpu_seconds, link_collection

FILTER = "gpufabric.cluster.roce_gid_errors"


def playbook(tasks: int) -> str:
    lines = ["- name: Filters", "  hosts: localhost", "  gather_facts: false", "  tasks:"]
    for index in range(tasks):
        lines += [f"    - name: Template the filter {index}", "      ansible.builtin.set_fact:"]
        lines += [f'        bench_{index}: "{{{{ [] | {FILTER}(None) }}}}"']
    return "\n".join(lines) + "\n"


def cpu_of_run(collections: Path, play: Path) -> float:
    """CPU seconds of one ansible-playbook run of ``play`` over ``collections``, its workers included."""
    command = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local", str(play)]
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return cpu_seconds(command, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default="52ab692", help="git revision to compare with (default 52ab692)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufabric-bench-") as name:
        tmp = Path(name)
        with baseline_worktree(args.baseline, tmp / "baseline") as baseline:
            play = tmp / "play.yml"
            play.write_text(playbook(args.tasks), encoding="utf-8")
            trees = {f"baseline {args.baseline}": baseline, "working tree": REPO}
            collections = {
                label: link_collection(tree, tmp / f"collections-{index}")
                for index, (label, tree) in enumerate(trees.items())
            }
            cpu: dict[str, list[float]] = {label: [] for label in trees}
            for _round in range(args.repeat):
                for label in trees:
                    cpu[label].append(cpu_of_run(collections[label], play))
    best = {label: min(values) for label, values in cpu.items()}
    for label, seconds in best.items():
        print(f"{label:18} {seconds:6.2f}s CPU  {seconds / args.tasks:5.3f}s a task  (least of {args.repeat})")
    (before, after) = best.values()
    print(f"{args.tasks} tasks templating {FILTER}: {before / after:.2f}x less CPU than the baseline")


if __name__ == "__main__":
    main()
