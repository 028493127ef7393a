# SPDX-License-Identifier: Apache-2.0
"""What a lab is, and the files that describe it: lab.json, inventory.yml, the catalog override, known_hosts.

Pure functions over data (no podman, no SSH), so the unit tests can check every file.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpufabric import base_dirs
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

DEFAULT_NAME = "gpufabric-lab"
LAB_JSON = "lab.json"
INVENTORY = "inventory.yml"
CATALOG_OVERRIDE = "catalog-lab.yml"
KEY = "id_ed25519"
KNOWN_HOSTS = "known_hosts"
HOSTS_DIR = "hosts"  # hosts/<host>/simulated-hw: each host's SIMULATED hardware tree
GROUP = "lab"
HW_ROOT = "/simulated-hw"  # where each container sees its SIMULATED tree (gpufabric_hw_root)
MAX_NODES = 64
# A lab name becomes container names and hostnames: keep it a DNS label with room for "-64".
NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,50}[a-z0-9])?$")

# The roles of the catalog that run in a lab container, as measured there (tests/lab runs site.yml with them).
CONTAINER_ROLES = ("fabric_facts", "rdma_stack", "infiniband", "sriov", "nccl_env")
# Why the others of a profile are left out of the lab.
LEFT_OUT_REASONS = {
    "nvidia_driver": "needs a GPU and a kernel to build its module for; a container has neither",
    "nccl": "installs from NVIDIA's CUDA repository, which a lab container cannot reach (molecule/nccl runs it "
    "against a TEST-DOUBLE one)",
    "nccl_tests": "needs CUDA (from nvidia_driver) to build and GPUs to run nccl-tests",
    "host_tuning": "sets PCI bridges, NIC firmware and the kernel command line of real hardware (molecule/host_tuning "
    "runs it over a SIMULATED tree with TEST-DOUBLE setpci, mstconfig and update-grub)",
}
UNPROVEN_REASON = "not proven in a lab container yet (gpufabric.lab_files.CONTAINER_ROLES lists those that are)"

# Inventory variables that only a container needs, per role: (role, variable, value, why).
CONTAINER_KNOBS: tuple[tuple[str, str, Any, str], ...] = (
    (
        "rdma_stack",
        "rdma_stack_load_modules",
        False,
        "a container cannot load kernel modules: write modules-load.d only",
    ),
    (
        "infiniband",
        "infiniband_activate",
        False,
        "a container can neither load ib_ipoib nor create IPoIB children: write and enable only",
    ),
)


@dataclass
class LabHost:
    name: str  # container name = hostname = inventory host name
    port: int  # SSH, published on 127.0.0.1 (0 until the container exists)
    state: str = "missing"  # podman's state, or "missing"
    ssh_reachable: bool | None = None  # None: not checked


@dataclass
class Lab:
    name: str
    directory: Path
    profile: str
    image: str
    inventory: Path
    hosts: list[LabHost]
    roles: list[str]  # of the profile's best tier, run in the lab
    left_out: dict[str, str]  # role -> why it cannot run in a container
    simulated_sriov: bool = False  # the SIMULATED SR-IOV kernel is installed in each container


def check_name(name: str) -> None:
    if not NAME_PATTERN.match(name):
        raise UserError(
            f"lab name {name!r} (--name): use lowercase letters, digits and '-', at most 52 characters, "
            "starting and ending with a letter or digit (it becomes container names and hostnames)"
        )


def check_nodes(nodes: int) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise UserError(f"--nodes {nodes}: accepted 1..{MAX_NODES}")


def host_names(name: str, nodes: int) -> list[str]:
    return [f"{name}-{index}" for index in range(1, nodes + 1)]


def default_directory(name: str) -> Path:
    base = base_dirs.state_home() or base_dirs.home() / ".local" / "state"
    return base / "gpufabric" / "lab" / name


def lab_command(lab: Lab, verb: str) -> str:
    """`gpufabric lab VERB` with the options that find this lab again."""
    words = ["gpufabric", "lab", verb]
    if lab.name != DEFAULT_NAME:
        words += ["--name", lab.name]
    if lab.directory.resolve() != default_directory(lab.name).resolve():
        words += ["--dir", str(lab.directory)]
    return shlex.join(words)


def split_roles(best_roles: list[str]) -> tuple[list[str], dict[str, str]]:
    """The best tier's roles -> (those the lab runs, {left-out role: why}), in the catalog's order."""
    kept = [role for role in best_roles if role in CONTAINER_ROLES]
    left_out = {role: LEFT_OUT_REASONS.get(role, UNPROVEN_REASON) for role in best_roles if role not in kept}
    return kept, left_out


def catalog_override(profile_name: str, profile: dict[str, Any]) -> dict[str, Any]:
    """Every tier of the profile narrowed to CONTAINER_ROLES (so --tier standard works in the lab too)."""
    tiers = {
        tier: {"roles": [role for role in body.get("roles", []) if role in CONTAINER_ROLES]}
        for tier, body in profile.get("tiers", {}).items()
    }
    # A section that configures a role the lab leaves out goes with it (the catalog refuses one without its role).
    sections = plugin_utils("fabric_catalog").ROLE_SECTIONS
    dropped = {section: None for section in sections if section in profile and section not in CONTAINER_ROLES}
    return {"profiles": {profile_name: {"tiers": tiers, **dropped}}}


def render_catalog_override(lab: Lab, override: dict[str, Any]) -> str:
    header = (
        f"# Written by `gpufabric lab up` for lab {lab.name}: the profile's roles narrowed to those a\n"
        "# container can run. Left out of the best tier:\n"
        + "".join(f"#   {role}: {why}\n" for role, why in lab.left_out.items())
        + ("#   (none)\n" if not lab.left_out else "")
    )
    return header + yaml.safe_dump(override, sort_keys=False)


def _yaml_entry(key: str, value: Any, indent: str) -> str:
    text = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=1000)
    return "".join(f"{indent}{line}\n" for line in text.splitlines())


def inventory_vars(lab: Lab) -> list[tuple[str, Any, str]]:
    """The group's variables in order: (name, value, comment)."""
    directory = lab.directory.resolve()
    ssh_args = " ".join(
        [
            f"-o UserKnownHostsFile={shlex.quote(str(directory / KNOWN_HOSTS))}",
            "-o StrictHostKeyChecking=yes",
            "-o IdentitiesOnly=yes",
        ]
    )
    entries: list[tuple[str, Any, str]] = [
        ("ansible_host", "127.0.0.1", "Each container publishes its sshd on 127.0.0.1 (the host's ansible_port)."),
        ("ansible_user", "root", "The lab key is root's authorized key in every container."),
        ("ansible_ssh_private_key_file", str(directory / KEY), "The lab's own key pair, made by ssh-keygen."),
        (
            "ansible_ssh_common_args",
            ssh_args,
            "known_hosts holds each container's own host key, read from the container at `lab up`.",
        ),
        (
            "ansible_host_key_checking",
            True,
            "Host key checking stays on, even under tools that turn it off in the environment.",
        ),
        ("ansible_python_interpreter", "/usr/bin/python3", "Debian's Python in the lab image."),
        ("gpufabric_profile", lab.profile, "The catalog profile these hosts pretend to be."),
        (
            "gpufabric_hw_root",
            HW_ROOT,
            "SIMULATED hardware: the profile's sysfs tree, written on this machine, bind-mounted writable.",
        ),
        (
            "gpufabric_catalog_files",
            [str(directory / CATALOG_OVERRIDE)],
            "Narrows the profile's roles to those a container can run (see the file for what is left out).",
        ),
    ]
    for role, variable, value, why in CONTAINER_KNOBS:
        if role in lab.roles:
            entries.append((variable, value, f"Container only: {why}."))
    return entries


def render_inventory(lab: Lab) -> str:
    lines = [
        f"# Written by `gpufabric lab up` for lab {lab.name}: {len(lab.hosts)} podman container(s) on this",
        f"# machine that look like {lab.profile} hosts. Real: systemd, sshd, apt, the roles. SIMULATED: the",
        "# hardware tree under gpufabric_hw_root"
        + (", the SR-IOV kernel reacting to it and its `ip` stand-in." if lab.simulated_sriov else "."),
        f"# Remove with `{lab_command(lab, 'down')}`.",
        f"{GROUP}:",
        "  hosts:",
    ]
    for host in lab.hosts:
        lines.append(f"    {host.name}:")
        lines.append(f"      ansible_port: {host.port}")
    lines.append("  vars:")
    for variable, value, comment in inventory_vars(lab):
        lines.append(f"    # {comment}")
        lines.append(_yaml_entry(variable, value, "    ").rstrip("\n"))
    return "\n".join(lines) + "\n"


def known_hosts_line(port: int, host_key: str) -> str:
    """``[127.0.0.1]:PORT ssh-ed25519 AAAA...`` from the container's ssh_host_ed25519_key.pub."""
    parts = host_key.split()
    if len(parts) < 2 or parts[0] != "ssh-ed25519":
        raise UserError(f"not an ed25519 host key: {host_key.strip()!r}")
    return f"[127.0.0.1]:{port} {parts[0]} {parts[1]}"


def to_json(lab: Lab) -> str:
    data = {
        "name": lab.name,
        "profile": lab.profile,
        "nodes": len(lab.hosts),
        "image": lab.image,
        "hosts": [{"name": host.name, "port": host.port} for host in lab.hosts],
        "roles": lab.roles,
        "left_out": lab.left_out,
        "simulated_sriov": lab.simulated_sriov,
        "inventory": INVENTORY,
    }
    return json.dumps(data, indent=2) + "\n"


def from_json(text: str, directory: Path, source: str) -> Lab:
    try:
        data = json.loads(text)
        return Lab(
            name=str(data["name"]),
            directory=directory,
            profile=str(data["profile"]),
            image=str(data["image"]),
            inventory=directory / str(data.get("inventory", INVENTORY)),
            hosts=[LabHost(name=str(host["name"]), port=int(host["port"])) for host in data["hosts"]],
            roles=[str(role) for role in data["roles"]],
            left_out={str(role): str(why) for role, why in data["left_out"].items()},
            simulated_sriov=bool(data.get("simulated_sriov", False)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{source}: not a gpufabric lab description ({exc}); remove the lab with `lab down`") from None
