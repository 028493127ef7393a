# SPDX-License-Identifier: Apache-2.0
"""How much does the molecule scenarios' SSH connection save per task, against podman exec?

The same playbook (TASKS tasks: commands, stats and a file written) runs against the same systemd container,
alternating, with the scenarios' connection (Ansible's ssh, pipelined and multiplexed, through `podman exec` into
the container's `sshd -i`: .config/molecule/config.yml) and with the baseline, containers.podman.podman (the
connection of molecule's podman driver: one `podman exec` or more per task, no pipelining). Prints each one's
wall time and the CPU time the whole machine spent (controller, podman, conmon, runc and the container's
processes, from /proc/stat, so nothing else should run meanwhile), per task, and the ratios:

    .venv/bin/python bench/molecule_connection.py [--tasks 30] [--repeat 2]

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

import yaml

from gpufabric.collection import collections_path

REPO = Path(__file__).resolve().parents[1]
IMAGE = "localhost/gpufabric-debian:12"
CONTAINER = "gpufabric-bench-connection"
SCENARIO_SSH = "ssh (molecule's)"
BASELINE = "containers.podman.podman"


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


def ssh_environment(key: Path) -> dict[str, str]:
    """The molecule scenarios' SSH settings, read from .config/molecule/config.yml, as ANSIBLE_* variables."""
    cfg = yaml.safe_load((REPO / ".config" / "molecule" / "config.yml").read_text(encoding="utf-8"))["ansible"]["cfg"]
    ssh = cfg["ssh_connection"]
    return {
        "ANSIBLE_REMOTE_USER": cfg["defaults"]["remote_user"],
        "ANSIBLE_PRIVATE_KEY_FILE": str(key),
        "ANSIBLE_PIPELINING": str(ssh["pipelining"]),
        "ANSIBLE_SSH_ARGS": ssh["ssh_args"],
        "ANSIBLE_SSH_COMMON_ARGS": ssh["ssh_common_args"],
    }


def busy_seconds() -> float:
    """CPU time all cores have spent busy since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()
    return sum(int(fields[index]) for index in (1, 2, 3, 6, 7, 8)) / os.sysconf("SC_CLK_TCK")


def run(env: dict[str, str], play: Path, inventory: Path) -> tuple[float, float]:
    """Wall and whole-machine CPU seconds of one ansible-playbook run."""
    command = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(play)]
    command += ["-e", "ansible_python_interpreter=/usr/bin/python3"]
    start, busy = time.monotonic(), busy_seconds()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start, busy_seconds() - busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("CONTAINERS_CONF", str(REPO / ".ci" / "containers.conf"))
    base = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_HOST_KEY_CHECKING="false")
    subprocess.run(["podman", "rm", "-f", CONTAINER], check=False, capture_output=True)
    # As create.yml starts the test hosts: UNKNOWN (the remote host `sshd -i` gives PAM) resolved from /etc/hosts.
    start = ["podman", "run", "-d", "--name", CONTAINER, "--add-host", "UNKNOWN:127.0.0.1", IMAGE, "/sbin/init"]
    subprocess.run(start, check=True, capture_output=True)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            play, inventory, key = Path(scratch) / "play.yml", Path(scratch) / "inventory.ini", Path(scratch) / "key"
            play.write_text(playbook(args.tasks), encoding="utf-8")
            inventory.write_text(f"{CONTAINER}\n", encoding="utf-8")
            # As molecule/resources/create.yml does: a key of its own, let in as root.
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
            authorize = "umask 077 && mkdir -p /root/.ssh && cat >/root/.ssh/authorized_keys"
            subprocess.run(
                ["podman", "exec", "-i", CONTAINER, "sh", "-c", authorize],
                input=key.with_suffix(".pub").read_bytes(),
                check=True,
            )
            envs = {
                BASELINE: dict(base, ANSIBLE_TRANSPORT=BASELINE),
                SCENARIO_SSH: dict(base, ANSIBLE_TRANSPORT="ssh", **ssh_environment(key)),
            }
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
            for _round in range(args.repeat):
                for name, env in envs.items():
                    results[name].append(run(env, play, inventory))
    finally:
        subprocess.run(["podman", "rm", "-f", CONTAINER], check=False, capture_output=True)
    best = {name: (min(wall for wall, _cpu in runs), min(cpu for _wall, cpu in runs)) for name, runs in results.items()}
    for name, (wall, cpu) in best.items():
        print(
            f"{name:26s} wall {wall:6.1f}s ({wall / args.tasks:4.2f}s a task)  "
            f"CPU {cpu:6.1f}s ({cpu / args.tasks:4.2f}s a task)  (best of {args.repeat})"
        )
    (base_wall, base_cpu), (ssh_wall, ssh_cpu) = best[BASELINE], best[SCENARIO_SSH]
    print(
        f"{SCENARIO_SSH} against {BASELINE} on {args.tasks} tasks: "
        f"{base_wall / ssh_wall:.2f}x less wall time, {base_cpu / ssh_cpu:.2f}x less CPU"
    )


if __name__ == "__main__":
    main()
