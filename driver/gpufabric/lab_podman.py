# SPDX-License-Identifier: Apache-2.0
"""The podman calls of `gpufabric lab` and `bake`: one place that runs podman, with the right configuration.

Podman on a CI host like this project's (no systemd as PID 1, no journald, hybrid cgroups, low hard
ulimits) needs settings its defaults lack: runc, ulimits the host can grant, cgroupfs, file logs and
events (.ci/containers.conf says why). gpufabric gives podman that file as CONTAINERS_CONF, the checkout's
or the wheel's copy of it (gpufabric/containers.conf), unless the user configured podman: a CONTAINERS_CONF
of their own, or a containers.conf podman reads besides its distribution's defaults. Those are never
replaced (CONTAINERS_CONF makes podman read that one file and no other).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from gpufabric.collection import PACKAGE_DIR, collection_root
from gpufabric.errors import UserError

MISSING = "missing"  # the state of a container podman does not know
BOOTED = ("running", "degraded")  # `systemctl is-system-running`: degraded still means booted
# The containers.conf files an administrator writes (/usr/share/containers holds the distribution's defaults).
SYSTEM_CONFIG = Path("/etc/containers")
WHEEL_CONF = PACKAGE_DIR / "containers.conf"  # pyproject.toml puts .ci/containers.conf there in the wheel


def user_configured(env: dict[str, str]) -> bool:
    """Whether podman reads a containers.conf of the user's: the system one (root) or their own (rootless)."""
    confs = [SYSTEM_CONFIG / "containers.conf"]
    if os.geteuid() != 0:  # root's podman reads no file in its home
        config_home = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".config")
        confs.append(Path(config_home) / "containers" / "containers.conf")
    return any(conf.is_file() or any(conf.with_name("containers.conf.d").glob("*.conf")) for conf in confs)


def own_conf() -> Path | None:
    """gpufabric's containers.conf: the checkout's .ci/containers.conf, else the wheel's copy."""
    try:
        candidates = [collection_root() / ".ci" / "containers.conf", WHEEL_CONF]
    except UserError:
        candidates = [WHEEL_CONF]
    return next((path for path in candidates if path.is_file()), None)


def configuration() -> dict[str, str]:
    """What podman's environment needs besides the user's: CONTAINERS_CONF, where the user configured nothing.

    Also for ansible-playbook, whose containers.podman.podman connection (gpufabric bake) runs podman too.
    """
    env = dict(os.environ)
    if env.get("CONTAINERS_CONF") or user_configured(env):
        return {}
    conf = own_conf()
    return {"CONTAINERS_CONF": str(conf)} if conf is not None else {}


def environment() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("CONTAINERS_CONF"):
        env.pop("CONTAINERS_CONF", None)  # set but empty: podman would fail to read ""
    return {**env, **configuration()}


def podman(
    args: Sequence[str], *, check: bool = True, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run podman; with ``check``, a failure raises UserError quoting the command and podman's message."""
    command = ["podman", *args]
    try:
        result = subprocess.run(
            command, input=input_text, capture_output=True, text=True, env=environment(), check=False
        )
    except FileNotFoundError:
        raise UserError("podman is not installed; `gpufabric lab up` installs it (as root, with apt-get)") from None
    if check and result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise UserError(f"`{' '.join(command[:4])} ...` failed (exit {result.returncode}): {' '.join(message[-3:])}")
    return result


def image_exists(image: str) -> bool:
    return podman(["image", "exists", image], check=False).returncode == 0


def container_state(name: str) -> str:
    """podman's state of a container (running, exited, created, ...), or MISSING."""
    result = podman(["container", "inspect", "--format", "{{.State.Status}}", name], check=False)
    return result.stdout.strip() if result.returncode == 0 else MISSING


def container_label(name: str, label: str) -> str | None:
    result = podman(["container", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', name], check=False)
    value = result.stdout.strip()
    return value if result.returncode == 0 and value and value != "<no value>" else None


def containers_with_label(label: str, value: str) -> list[str]:
    result = podman(["ps", "--all", "--filter", f"label={label}={value}", "--format", "{{.Names}}"])
    return sorted(result.stdout.split())


def published_port(name: str, container_port: int) -> int:
    """The 127.0.0.1 port podman chose for ``container_port`` (kept across stop and start)."""
    answer = podman(["port", name, f"{container_port}/tcp"]).stdout.strip().splitlines()
    if not answer:
        raise UserError(f"container {name} publishes no port for {container_port}/tcp")
    return int(answer[0].rsplit(":", 1)[1])


def execute(name: str, argv: Sequence[str], input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """`podman exec` (never raises: the caller reads returncode)."""
    interactive = ["--interactive"] if input_text is not None else []
    return podman(["exec", *interactive, name, *argv], check=False, input_text=input_text)


def put_file(name: str, path: str, content: str, mode: str = "0644") -> None:
    """Write a file inside a running container (parents created), as root."""
    script = 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"'
    result = execute(name, ["sh", "-c", script, "sh", path, mode], input_text=content)
    if result.returncode != 0:
        raise UserError(f"cannot write {path} in container {name}: {result.stderr.strip()}")


def wait_booted(name: str, timeout_s: float = 120) -> None:
    """Until systemd in the container says it finished booting."""
    deadline = time.monotonic() + timeout_s
    answer = ""
    while time.monotonic() < deadline:
        # --wait blocks while starting; before the bus socket exists it fails at once, hence the loop.
        result = execute(name, ["systemctl", "is-system-running", "--wait"])
        answer = (result.stdout or result.stderr).strip()
        if answer in BOOTED:
            return
        time.sleep(0.5)
    raise UserError(f"container {name} did not boot within {timeout_s:.0f}s: systemd says {answer!r}")
