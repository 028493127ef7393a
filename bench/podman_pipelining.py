# SPDX-License-Identifier: Apache-2.0
"""How much does pipelining save the molecule scenarios per task?

The same playbook (TASKS tasks: commands, stats and a file written) runs against the same systemd
container twice, alternating, with the molecule scenarios' connection
(molecule/resources/connection_plugins/podman_pipelining.py) and with the baseline it extends,
containers.podman.podman, which cannot pipeline. Prints both times, the time per task and the ratio:

    .venv/bin/python bench/podman_pipelining.py [--tasks 40] [--repeat 2]

Needs podman, CONTAINERS_CONF=.ci/containers.conf and localhost/gpufabric-debian:12 (scripts/build-images).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpufabric.collection import collections_path

REPO = Path(__file__).resolve().parents[1]
IMAGE = "localhost/gpufabric-debian:12"
CONTAINER = "gpufabric-bench-pipelining"
PLUGINS = REPO / "molecule" / "resources" / "connection_plugins"


def playbook(tasks: int) -> str:
    """A play of ordinary tasks: a third commands, a third stats, a third a file written (changed once)."""
    lines = ["- name: Bench", "  hosts: all", "  gather_facts: false", "  tasks:"]
    for index in range(tasks):
        kind = index % 3
        if kind == 0:
            lines += [f"    - name: Command {index}", "      ansible.builtin.command: 'true'"]
            lines += ["      changed_when: false"]
        elif kind == 1:
            lines += [f"    - name: Stat {index}", "      ansible.builtin.stat:", "        path: /etc/os-release"]
        else:
            lines += [
                f"    - name: File {index}",
                "      ansible.builtin.copy:",
                f"        dest: /tmp/bench-{index}",
                f"        content: '{index}\\n'",
                "        mode: '0644'",
            ]
    return "\n".join(lines) + "\n"


def run(connection: str, play: Path, inventory: Path) -> float:
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(collections_path()),
        ANSIBLE_CONNECTION_PLUGINS=str(PLUGINS),
        ANSIBLE_HOST_KEY_CHECKING="false",
    )
    command = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(play)]
    command += ["-e", f"ansible_connection={connection}", "-e", "ansible_python_interpreter=/usr/bin/python3"]
    start = time.monotonic()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("CONTAINERS_CONF", str(REPO / ".ci" / "containers.conf"))
    podman = ["podman"]
    subprocess.run([*podman, "rm", "-f", CONTAINER], check=False, capture_output=True)
    subprocess.run([*podman, "run", "-d", "--name", CONTAINER, IMAGE, "/sbin/init"], check=True, capture_output=True)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            play, inventory = Path(scratch) / "play.yml", Path(scratch) / "inventory.ini"
            play.write_text(playbook(args.tasks), encoding="utf-8")
            inventory.write_text(f"{CONTAINER}\n", encoding="utf-8")
            times: dict[str, list[float]] = {"containers.podman.podman": [], "podman_pipelining": []}
            for _round in range(args.repeat):
                for connection in times:
                    times[connection].append(run(connection, play, inventory))
    finally:
        subprocess.run([*podman, "rm", "-f", CONTAINER], check=False, capture_output=True)
    best = {connection: min(values) for connection, values in times.items()}
    for connection, seconds in best.items():
        print(f"{connection:26s} {seconds:6.1f}s  {seconds / args.tasks:5.2f}s per task  (best of {args.repeat})")
    ratio = best["containers.podman.podman"] / best["podman_pipelining"]
    print(f"podman_pipelining is {ratio:.2f}x faster than containers.podman.podman on {args.tasks} tasks")


if __name__ == "__main__":
    main()
