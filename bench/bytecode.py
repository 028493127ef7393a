# SPDX-License-Identifier: Apache-2.0
"""What Python's bytecode cache saves the test run: the same commands with and without it.

Baseline: PYTHONDONTWRITEBYTECODE=1 and an empty PYTHONPYCACHEPREFIX, so every Python process compiles
every module it imports from source (what this build machine's environment did to every run before
scripts/test unset the variable). Against it: a PYTHONPYCACHEPREFIX that one warm-up run filled, as the
venv's __pycache__ directories are after the first import of a CI run. Neither touches the venv.

The commands are the ones CI repeats most: the CLI (each case of the bad-input suite is one run of it),
and ansible-playbook over a local connection (each task forks a worker that loads its action plugin).
Prints the CPU time of each (user + system, the command and its children), best of --repeat, and the ratio:

    .venv/bin/python bench/bytecode.py [--tasks 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench_support import cpu_seconds

BIN = Path(sys.executable).parent


def playbook(tasks: int) -> str:
    lines = ["- name: Bench", "  hosts: localhost", "  connection: local", "  gather_facts: false", "  tasks:"]
    for index in range(tasks):
        lines += [f"    - name: Command {index}", "      ansible.builtin.command: 'true'", "      changed_when: false"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        play = Path(scratch) / "play.yml"
        play.write_text(playbook(args.tasks), encoding="utf-8")
        inventory = f"localhost ansible_python_interpreter={sys.executable},"
        commands = {
            "gpufabric --version": [sys.executable, "-m", "gpufabric", "--version"],
            "gpufabric catalog list": [sys.executable, "-m", "gpufabric", "catalog", "list"],
            f"ansible-playbook, {args.tasks} tasks": [str(BIN / "ansible-playbook"), "-i", inventory, str(play)],
        }
        base = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        without = dict(base, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(Path(scratch) / "empty"))
        cached = dict(base, PYTHONPYCACHEPREFIX=str(Path(scratch) / "cache"))
        totals = {"without bytecode": 0.0, "with bytecode": 0.0}
        for name, command in commands.items():
            cpu_seconds(command, cached)  # the warm-up run fills the cache
            best = {
                label: min(cpu_seconds(command, env) for _attempt in range(args.repeat))
                for label, env in (("without bytecode", without), ("with bytecode", cached))
            }
            for label, seconds in best.items():
                totals[label] += seconds
            report(name, best)
    report("all", totals)


def report(name: str, seconds: dict[str, float]) -> None:
    without, cached = seconds["without bytecode"], seconds["with bytecode"]
    print(f"{name:32s} {without:6.2f}s without bytecode, {cached:6.2f}s with: {without / cached:.2f}x")


if __name__ == "__main__":
    main()
