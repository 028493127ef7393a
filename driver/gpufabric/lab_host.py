# SPDX-License-Identifier: Apache-2.0
"""One lab host: its SIMULATED hardware, its container, its SSH access.

The hardware tree is written on this machine by gpufabric.simulated_hw and
bind-mounted writable at /simulated-hw (the sriov role writes sriov_numvfs
there). For profiles with SR-IOV capable physical functions the container also
gets the SIMULATED SR-IOV kernel (gpufabric/simulated_sriov.py `watch` as a
service), its `ip` stand-in and the drop-in that orders the sriov role's boot
unit after it: the lab's hardware, installed at `lab up`, not by a role.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from gpufabric import simulated_sriov
from gpufabric.errors import UserError
from gpufabric.lab_files import HOSTS_DIR, HW_ROOT, KEY, KNOWN_HOSTS
from gpufabric.lab_podman import execute, podman, put_file
from gpufabric.simulated_hw import write_tree

LABEL = "gpufabric.lab"  # value: the lab's name
DIRECTORY_LABEL = "gpufabric.lab.directory"  # value: the lab's directory, so `lab down` finds it
SSH_PORT = 22
SIMULATED_DIR = "/usr/local/libexec/gpufabric-lab"
SIMULATED_KERNEL = f"{SIMULATED_DIR}/simulated_sriov.py"
KERNEL_UNIT = "gpufabric-simulated-kernel.service"
SRIOV_UNIT = "gpufabric-sriov.service"  # the sriov role's boot unit
# The SIMULATED kernel wakes on each write through inotify, as a real one reacts at once, and costs no CPU idle.
# Without inotify it polls the tree this often, about 5% of a CPU per host (a 64-host lab would starve 2 cores).
KERNEL_POLL_S = 0.05

KERNEL_UNIT_TEXT = f"""\
# SIMULATED SR-IOV kernel of a gpufabric lab host: reacts to sriov_numvfs and driver bind writes in {HW_ROOT}.
[Unit]
Description=SIMULATED SR-IOV kernel on {HW_ROOT} (gpufabric lab)
DefaultDependencies=no

[Service]
# A container start is this host's boot: like a real kernel, the SIMULATED one starts without VFs.
ExecStartPre=/usr/bin/python3 {SIMULATED_KERNEL} reset --root {HW_ROOT}
ExecStart=/usr/bin/python3 {SIMULATED_KERNEL} watch --root {HW_ROOT} --interval {KERNEL_POLL_S}

[Install]
WantedBy=multi-user.target
"""

IP_STAND_IN = f"""\
#!/bin/sh
# SIMULATED ip stand-in (gpufabric lab): devices of the SIMULATED tree are answered by simulated_sriov.py,
# everything else goes to the real /usr/sbin/ip.
exec /usr/bin/python3 {SIMULATED_KERNEL} ip --root {HW_ROOT} -- "$@"
"""

SRIOV_DROP_IN = f"""\
# gpufabric lab only: the SIMULATED kernel must watch the tree before the sriov role's boot unit creates VFs.
[Unit]
Wants={KERNEL_UNIT}
After={KERNEL_UNIT}
"""


def hardware_tree(directory: Path, host: str) -> Path:
    return directory / HOSTS_DIR / host / "simulated-hw"


def write_hardware(directory: Path, host: str, profile: dict[str, Any]) -> Path:
    """The host's SIMULATED tree (kept when it exists: it holds the VFs the roles made)."""
    tree = hardware_tree(directory, host)
    if not (tree / "SIMULATED").is_file():
        write_tree(profile, tree)
    return tree


def has_sriov(tree: Path) -> bool:
    """Whether the tree has SR-IOV capable physical functions for the SIMULATED kernel to serve."""
    return bool(simulated_sriov.Kernel(tree).physical_functions())


def create_container(name: str, lab_name: str, directory: Path, image: str, tree: Path) -> None:
    podman(
        [
            "run",
            "--detach",
            "--name",
            name,
            "--hostname",
            name,
            "--label",
            f"{LABEL}={lab_name}",
            "--label",
            f"{DIRECTORY_LABEL}={directory.resolve()}",
            "--systemd",
            "always",
            # podman picks a free port once; it keeps it across stop and start.
            "--publish",
            f"127.0.0.1::{SSH_PORT}",
            "--volume",
            f"{tree.resolve()}:{HW_ROOT}:rw",
            image,
            "/sbin/init",
        ]
    )


def authorize_key(name: str, public_key: str) -> None:
    put_file(name, "/root/.ssh/authorized_keys", public_key.strip() + "\n", mode="0600")
    execute(name, ["chmod", "0700", "/root/.ssh"])


def install_simulated_sriov(name: str) -> None:
    """The SIMULATED SR-IOV kernel as a service, its ip stand-in, and the drop-in for the sriov boot unit."""
    put_file(name, SIMULATED_KERNEL, Path(simulated_sriov.__file__).read_text(encoding="utf-8"))
    put_file(name, f"/etc/systemd/system/{KERNEL_UNIT}", KERNEL_UNIT_TEXT)
    put_file(name, "/usr/local/sbin/ip", IP_STAND_IN, mode="0755")
    put_file(name, "/etc/systemd/system/gpufabric-sriov.service.d/simulated-kernel.conf", SRIOV_DROP_IN)
    result = execute(name, ["sh", "-c", f"systemctl daemon-reload && systemctl enable --now {KERNEL_UNIT}"])
    if result.returncode != 0:
        raise UserError(f"cannot start the SIMULATED SR-IOV kernel in {name}: {result.stderr.strip()}")
    # A host from a baked image has the sriov role's boot unit, and at this first boot it ran before the
    # SIMULATED kernel was installed: run it again, as the boot of a host with its hardware would have.
    rerun = f"if systemctl cat {SRIOV_UNIT} >/dev/null 2>&1; then systemctl restart {SRIOV_UNIT}; fi"
    result = execute(name, ["sh", "-c", rerun])
    if result.returncode != 0:
        raise UserError(f"{SRIOV_UNIT} failed in {name} on the SIMULATED kernel: {result.stderr.strip()}")


def host_key(name: str, timeout_s: float = 30) -> str:
    """The container's own ed25519 host key (made at its first boot)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = execute(name, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
        if time.monotonic() > deadline:
            raise UserError(f"container {name} has no SSH host key after {timeout_s:.0f}s: {result.stderr.strip()}")
        time.sleep(0.5)


def ssh_command(directory: Path, port: int, *argv: str) -> list[str]:
    """ssh to a lab host as Ansible does: the lab key, the lab known_hosts, host key checking on."""
    return [
        "ssh",
        "-F",
        "none",
        "-i",
        str(directory / KEY),
        "-o",
        f"UserKnownHostsFile={directory / KNOWN_HOSTS}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        "-p",
        str(port),
        "root@127.0.0.1",
        *argv,
    ]


def ssh_reachable(directory: Path, port: int) -> bool:
    try:
        result = subprocess.run(ssh_command(directory, port, "true"), capture_output=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


def wait_ssh(directory: Path, name: str, port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ssh_reachable(directory, port):
        if time.monotonic() > deadline:
            detail = subprocess.run(
                ssh_command(directory, port, "true"), capture_output=True, text=True, timeout=15, check=False
            ).stderr.strip()
            raise UserError(f"{name}: SSH on 127.0.0.1:{port} does not answer after {timeout_s:.0f}s: {detail}")
        time.sleep(0.5)
