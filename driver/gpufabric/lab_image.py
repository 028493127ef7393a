# SPDX-License-Identifier: Apache-2.0
"""What `gpufabric lab up` needs on this machine: the tools, the base image and the lab image.

The lab image is the collection's systemd-capable Debian 12 base image
(scripts/build-images) plus openssh-server, built once with podman run, apt-get
and podman commit, and reused after. Host keys are not baked in: each container
makes its own at first boot, so known_hosts tells the lab hosts apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from gpufabric.collection import collection_root
from gpufabric.errors import UserError
from gpufabric.lab_podman import container_state, environment, image_exists, podman

Progress = Callable[[str], None]

BASE_IMAGE = "localhost/gpufabric-debian:12"
LAB_IMAGE = "localhost/gpufabric-lab:12"
# The commands `lab up` runs on this machine, and the Debian package of each.
TOOLS = {"podman": "podman", "runc": "runc", "ssh": "openssh-client", "ssh-keygen": "openssh-client"}
# What scripts/build-images needs besides podman, only when the base image must be built.
BUILD_TOOLS = {"debootstrap": "debootstrap"}

HOST_KEYS_UNIT = """\
# gpufabric lab: every container makes its own SSH host keys at first boot (none are in the image).
[Unit]
Description=SSH host keys of this lab host
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=ssh.service
"""

# Runs inside a container of the base image; its result is committed as LAB_IMAGE.
BUILD_SCRIPT = f"""\
set -eu
export DEBIAN_FRONTEND=noninteractive
# No daemons start during the build (there is no systemd running to own them).
printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
apt-get update -q
apt-get install -y -q --no-install-recommends openssh-server
rm -f /usr/sbin/policy-rc.d /etc/ssh/ssh_host_*
cat > /etc/systemd/system/gpufabric-lab-host-keys.service <<'UNIT'
{HOST_KEYS_UNIT}UNIT
systemctl enable ssh.service gpufabric-lab-host-keys.service
apt-get clean
rm -rf /var/lib/apt/lists/*
"""


def ensure_tools(progress: Progress, tools: dict[str, str] | None = None) -> None:
    """Install missing tools ({command: Debian package}; TOOLS by default) with apt-get as root, else say how."""
    tools = TOOLS if tools is None else tools
    missing = sorted({package for tool, package in tools.items() if shutil.which(tool) is None})
    if not missing:
        return
    command = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise UserError(
            f"gpufabric lab needs {', '.join(missing)} on this machine; install them, e.g. `sudo {' '.join(command)}`"
        )
    progress(f"installing {', '.join(missing)} (apt-get)")
    for step in (["apt-get", "update", "-q"], command):
        result = subprocess.run(
            step, capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, check=False
        )
        if result.returncode != 0:
            raise UserError(f"`{' '.join(step)}` failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")


# Every lab host holds inotify instances (systemd, journald, the SIMULATED SR-IOV kernel: 7 measured), all
# counted against root, whom the containers share. Past the limit (the kernel's default, 128, runs out near 17
# hosts) systemd stalls the host's boot ("Failed to create inotify object: Too many open files"); kind documents
# the same limit for its nodes.
INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_HOST = 8
INOTIFY_HEADROOM = 64  # the rest of the machine: molecule's containers, desktop tools


def ensure_inotify_instances(nodes: int, progress: Progress, limit: Path = INOTIFY_INSTANCES) -> None:
    """Raise fs.inotify.max_user_instances (as root, until reboot) when `nodes` lab hosts would exhaust it."""
    wanted = INOTIFY_PER_HOST * nodes + INOTIFY_HEADROOM
    try:
        current = int(limit.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not Linux's procfs: podman reports what goes wrong
    if current >= wanted:
        return
    if os.geteuid() != 0:
        raise UserError(
            f"a {nodes}-host lab needs fs.inotify.max_user_instances of at least {wanted} (it is {current}): "
            f"`sudo sysctl -w fs.inotify.max_user_instances={wanted}`"
        )
    limit.write_text(f"{wanted}\n", encoding="utf-8")
    progress(
        f"raised fs.inotify.max_user_instances from {current} to {wanted} (until reboot): "
        f"each lab host's systemd needs a few"
    )


def ensure_base_image(progress: Progress) -> None:
    if image_exists(BASE_IMAGE):
        return
    try:
        script = collection_root() / "scripts" / "build-images"
    except UserError:
        script = None
    if script is None or not script.is_file():
        raise UserError(
            f"image {BASE_IMAGE} is missing and this installation has no scripts/build-images to build it; "
            "run scripts/build-images 12 from a gpufabric checkout"
        )
    ensure_tools(progress, BUILD_TOOLS)
    progress(f"building {BASE_IMAGE} with {script} 12 (debootstrap; about a minute)")
    result = subprocess.run([str(script), "12"], capture_output=True, text=True, env=environment(), check=False)
    if result.returncode != 0:
        raise UserError(f"{script} 12 failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")


def ensure_image(image: str, progress: Progress) -> None:
    """LAB_IMAGE is built when missing; any other --image must exist (and run systemd and sshd)."""
    if image_exists(image):
        return
    if image != LAB_IMAGE:
        raise UserError(
            f"--image {image}: no such image; give an image with systemd and sshd, or leave --image out for {LAB_IMAGE}"
        )
    ensure_base_image(progress)
    progress(f"building {LAB_IMAGE} ({BASE_IMAGE} + openssh-server; once, reused after)")
    builder = f"gpufabric-lab-image-build-{os.getpid()}"
    try:
        podman(["run", "--name", builder, BASE_IMAGE, "sh", "-c", BUILD_SCRIPT])
        podman(
            [
                "commit",
                "--quiet",
                "--change",
                'CMD ["/sbin/init"]',
                "--change",
                "LABEL org.opencontainers.image.title=gpufabric-lab-12",
                builder,
                LAB_IMAGE,
            ]
        )
    finally:
        if container_state(builder) != "missing":
            podman(["rm", "--force", builder], check=False)
    progress(f"built {LAB_IMAGE}")
