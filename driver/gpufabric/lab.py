# SPDX-License-Identifier: Apache-2.0
"""`gpufabric lab up|down|status`: a local fleet of podman containers that look like a profile's GPU hosts.

Each lab host is a systemd container reached over real SSH on 127.0.0.1, with
the profile's SIMULATED hardware tree bind-mounted at /simulated-hw (and, for
SR-IOV profiles, the SIMULATED SR-IOV kernel). The lab directory holds what
Ansible and gpufabric need to use it like any fleet: inventory.yml, the lab's
key pair and known_hosts, a catalog override narrowing the profile's roles to
those a container can run, and lab.json (what load() reads).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import catalog as fabric_catalog
from gpufabric import lab_host, output_file
from gpufabric.errors import UserError
from gpufabric.lab_files import (
    CATALOG_OVERRIDE,
    DEFAULT_NAME,
    HOSTS_DIR,
    INVENTORY,
    KEY,
    KNOWN_HOSTS,
    LAB_JSON,
    Lab,
    LabHost,
    catalog_override,
    check_name,
    check_nodes,
    default_directory,
    from_json,
    host_names,
    inventory_vars,
    known_hosts_line,
    lab_command,
    render_catalog_override,
    render_inventory,
    split_roles,
    to_json,
)
from gpufabric.lab_image import LAB_IMAGE, ensure_image, ensure_inotify_instances, ensure_tools
from gpufabric.lab_podman import (
    MISSING,
    container_label,
    container_state,
    containers_with_label,
    execute,
    podman,
    published_port,
    wait_booted,
)

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_NODES",
    "DEFAULT_PROFILE",
    "LAB_IMAGE",
    "Lab",
    "LabHost",
    "down",
    "host_settings",
    "load",
    "podman_exec",
    "render",
    "start_host",
    "status",
    "stop_host",
    "up",
]

DEFAULT_PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
DEFAULT_NODES = 2
Progress = Callable[[str], None]
T = TypeVar("T")


def _say(line: str) -> None:
    print(line, flush=True)


def _directory(name: str, directory: Path | None) -> Path:
    return Path(directory) if directory is not None else default_directory(name)


def load(name: str = DEFAULT_NAME, directory: Path | None = None) -> Lab:
    """The lab described by <directory>/lab.json; UserError when there is none."""
    check_name(name)
    where = _directory(name, directory)
    path = where / LAB_JSON
    if not path.is_file():
        raise UserError(f"no lab {name!r}: {path} does not exist; `gpufabric lab up` creates a lab")
    lab = from_json(path.read_text(encoding="utf-8"), where, str(path))
    if lab.name != name:
        raise UserError(f"{path} describes lab {lab.name!r}, not {name!r}; use --name {lab.name}")
    return lab


def _existing(name: str, directory: Path, profile: str, nodes: int, image: str | None) -> Lab | None:
    """The lab already in the directory when it matches the request; UserError when it does not."""
    if not (directory / LAB_JSON).is_file():
        if directory.exists() and any(directory.iterdir()):
            raise UserError(f"--dir {directory}: not empty and not a lab directory (no {LAB_JSON}); choose another")
        return None
    lab = load(name, directory)
    wanted = {"profile": profile, "nodes": nodes, "image": image or lab.image}
    have = {"profile": lab.profile, "nodes": len(lab.hosts), "image": lab.image}
    if wanted != have:
        differences = ", ".join(
            f"{key} {have[key]} (asked: {wanted[key]})" for key in wanted if wanted[key] != have[key]
        )
        raise UserError(f"lab {name} exists with {differences}; run `{lab_command(lab, 'down')}` first")
    return lab


def _save(lab: Lab) -> None:
    output_file.write_atomically(lab.directory / LAB_JSON, to_json(lab), make_parents=True)


def _ensure_key(directory: Path) -> str:
    key = directory / KEY
    if not key.is_file():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpufabric-lab@{directory.name}", "-f", str(key)],
            check=True,
            capture_output=True,
        )
    return (directory / f"{KEY}.pub").read_text(encoding="utf-8")


def _start_containers(lab: Lab, profile: dict[str, Any], progress: Progress) -> None:
    """Create missing containers (with their SIMULATED trees), start stopped ones."""
    for host in lab.hosts:
        tree = lab_host.write_hardware(lab.directory, host.name, profile)
        lab.simulated_sriov = lab_host.has_sriov(tree)
        state = container_state(host.name)
        if state == MISSING:
            progress(f"{host.name}: creating the container (SIMULATED hardware: {tree})")
            lab_host.create_container(host.name, lab.name, lab.directory, lab.image, tree)
        elif container_label(host.name, lab_host.LABEL) != lab.name:
            raise UserError(
                f"a container named {host.name} exists and is not part of lab {lab.name}; "
                "remove it or choose another --name"
            )
        elif state != "running":
            progress(f"{host.name}: starting the stopped container")
            podman(["start", host.name])


def _set_up_host(lab: Lab, host: LabHost, public_key: str, progress: Progress) -> str:
    """Wait for the host's boot, give it the lab key (and the SIMULATED SR-IOV kernel); its known_hosts line."""
    progress(f"{host.name}: waiting for systemd to boot")
    wait_booted(host.name)
    lab_host.authorize_key(host.name, public_key)
    if lab.simulated_sriov:
        lab_host.install_simulated_sriov(host.name)
        progress(f"{host.name}: SIMULATED SR-IOV kernel running (and its ip stand-in)")
    host.port = published_port(host.name, lab_host.SSH_PORT)
    host.state = "running"
    return known_hosts_line(host.port, lab_host.host_key(host.name))


def _on_every_host(lab: Lab, work: Callable[[LabHost], T]) -> list[T]:
    """work on every host at once, results in host order: each host mostly waits (its boot, the SR-IOV
    unit's VF re-creation, sshd), so one after another a 16-host lab took 8 minutes to come up."""
    with ThreadPoolExecutor(max_workers=len(lab.hosts)) as pool:  # at most MAX_NODES threads
        return list(pool.map(work, lab.hosts))


def _set_up_hosts(lab: Lab, public_key: str, progress: Progress) -> list[str]:
    """Every host set up; known_hosts lines in host order."""
    return _on_every_host(lab, lambda host: _set_up_host(lab, host, public_key, progress))


def up(
    name: str = DEFAULT_NAME,
    profile: str = DEFAULT_PROFILE,
    nodes: int = DEFAULT_NODES,
    image: str | None = None,
    directory: Path | None = None,
    progress: Progress = _say,
) -> Lab:
    """Create the lab, or bring an existing one with the same profile and nodes back up."""
    check_name(name)
    check_nodes(nodes)
    body = fabric_catalog.load().get(profile)
    if body is None:
        raise UserError(f"--profile {profile!r}: not in the fabric catalog; `gpufabric catalog list` shows the names")
    where = _directory(name, directory)
    existing = _existing(name, where, profile, nodes, image)
    roles, left_out = split_roles(list(body["tiers"]["best"]["roles"]))
    lab = existing or Lab(
        name=name,
        directory=where,
        profile=profile,
        image=image or LAB_IMAGE,
        inventory=where / INVENTORY,
        hosts=[LabHost(host, 0) for host in host_names(name, nodes)],
        roles=roles,
        left_out=left_out,
    )
    lab.roles, lab.left_out = roles, left_out
    progress(f"lab {name}: {nodes} x {profile} in {where}" + (" (reusing it)" if existing else ""))
    ensure_tools(progress)
    ensure_inotify_instances(nodes, progress)
    ensure_image(lab.image, progress)
    where.mkdir(parents=True, exist_ok=True)
    public_key = _ensure_key(where)
    _save(lab)  # first, so `lab down` can clean up after an `up` that failed half-way
    _start_containers(lab, body, progress)
    known_hosts = _set_up_hosts(lab, public_key, progress)
    output_file.write_atomically(where / KNOWN_HOSTS, "\n".join(known_hosts) + "\n", make_parents=True)
    output_file.write_atomically(
        where / CATALOG_OVERRIDE, render_catalog_override(lab, catalog_override(profile, body)), make_parents=True
    )
    output_file.write_atomically(lab.inventory, render_inventory(lab), make_parents=True)
    _save(lab)

    def reach(host: LabHost) -> None:
        progress(f"{host.name}: waiting for SSH on 127.0.0.1:{host.port}")
        lab_host.wait_ssh(where, host.name, host.port)
        host.ssh_reachable = True

    _on_every_host(lab, reach)
    progress(f"lab {name} is up: {', '.join(host.name for host in lab.hosts)}")
    progress(f"roles in the lab: {', '.join(lab.roles)}")
    for role, why in lab.left_out.items():
        progress(f"left out: {role}: {why}")
    progress(f"inventory: {lab.inventory}")
    # plan reads catalog overrides from --catalog, not from the inventory's gpufabric_catalog_files (apply does).
    progress(f"next: gpufabric plan --probe -i {lab.inventory} --catalog {where / CATALOG_OVERRIDE}")
    progress(f"      gpufabric apply -i {lab.inventory}")
    return lab


def _lab_in(where: Path, name: str) -> Lab | None:
    """The lab that where/lab.json describes, which must be lab `name`; None when there is no lab.json.
    A lab.json that is garbage or names another lab is refused: `down` would remove what it did not create."""
    path = where / LAB_JSON
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"lab down: cannot read {path} ({exc}); nothing was removed") from None
    hint = f"remove only what you know to be the lab's yourself, then {LAB_JSON}"
    try:
        lab = from_json(text, where, str(path))
    except UserError:
        raise UserError(f"lab down: {path} is not a gpufabric lab description; nothing was removed: {hint}") from None
    if lab.name != name:
        raise UserError(
            f"lab down --name {name}: {path} describes lab {lab.name!r}; nothing was removed "
            f"(`gpufabric lab down --name {lab.name}` removes that one)"
        )
    return lab


def _remove_lab_files(lab: Lab, progress: Progress) -> None:
    """Remove the files `lab up` writes, and the directory only when nothing else is left in it: an
    operator's own files there stay, and so does the directory that holds them."""
    where = lab.directory
    for name in (INVENTORY, CATALOG_OVERRIDE, KNOWN_HOSTS, KEY, f"{KEY}.pub"):
        (where / name).unlink(missing_ok=True)
    if lab.inventory.parent == where:
        lab.inventory.unlink(missing_ok=True)
    hosts_dir = where / HOSTS_DIR
    for host in lab.hosts:
        # Each host's SIMULATED hardware tree: written by `lab up` only (lab_host.write_hardware).
        shutil.rmtree(hosts_dir / host.name, ignore_errors=True)
    if hosts_dir.is_dir() and not any(hosts_dir.iterdir()):
        hosts_dir.rmdir()
    (where / LAB_JSON).unlink(missing_ok=True)
    real = where.resolve()  # --dir may be a link to the directory: the link (the operator's) stays
    left = sorted(path.name for path in real.iterdir())
    if left:
        progress(f"removed the lab's files from {real}; left the directory: it holds {', '.join(left)}")
    else:
        real.rmdir()
        progress(f"removed {real}")


def down(name: str = DEFAULT_NAME, directory: Path | None = None, progress: Progress = _say) -> None:
    """Remove the lab's containers and the files `lab up` wrote; nothing there is not an error."""
    check_name(name)
    # Without podman there can be no containers, and the directory can still go.
    containers = containers_with_label(lab_host.LABEL, name) if shutil.which("podman") else []
    directories = [_directory(name, directory)]
    for container in containers:
        labelled = container_label(container, lab_host.DIRECTORY_LABEL)
        # The label holds the resolved path: compare resolved, or one directory would be removed twice.
        if labelled and Path(labelled).resolve() not in [where.resolve() for where in directories]:
            directories.append(Path(labelled))
    labs = {where: _lab_in(where, name) for where in directories}  # every refusal before anything is removed
    removed = False
    if containers:
        podman(["rm", "--force", "--time", "3", *containers])
        for container in containers:
            progress(f"removed container {container}")
        removed = True
    for where, lab in labs.items():
        if lab is not None:
            _remove_lab_files(lab, progress)
            removed = True
        elif where.exists():
            progress(f"left {where} alone: it has no {LAB_JSON}, so it is not a lab directory")
    if not removed:
        progress(f"no lab {name}: nothing to remove")


def status(lab: Lab) -> Lab:
    """The lab with each host's live podman state and SSH reachability."""
    hosts = []
    for host in lab.hosts:
        state = container_state(host.name)
        reachable = state == "running" and lab_host.ssh_reachable(lab.directory, host.port)
        hosts.append(dataclasses.replace(host, state=state, ssh_reachable=reachable))
    return dataclasses.replace(lab, hosts=hosts)


def as_dict(lab: Lab) -> dict[str, Any]:
    """`gpufabric lab status --json` (docs/lab.md, "JSON"): the lab and each host's live state."""
    return {
        "name": lab.name,
        "profile": lab.profile,
        "image": lab.image,
        "directory": str(lab.directory),
        "inventory": str(lab.inventory),
        "exit_code": 0 if all(host.state == "running" for host in lab.hosts) else 1,
        "hosts": [
            {"name": host.name, "state": host.state, "ssh_port": host.port, "ssh_reachable": host.ssh_reachable}
            for host in lab.hosts
        ],
    }


def render(lab: Lab, console: Console) -> None:
    table = Table(title=f"gpufabric lab {lab.name}")
    for column in ("host", "container", "SSH port", "SSH reachable", "profile"):
        table.add_column(column, no_wrap=True)
    for host in lab.hosts:
        reachable = {True: "yes", False: "no", None: "?"}[host.ssh_reachable]
        style = "green" if host.state == "running" and host.ssh_reachable else "red"
        table.add_row(
            Text(host.name),
            Text(host.state, style=style),
            Text(str(host.port)),
            Text(reachable, style=style),
            Text(lab.profile),
        )
    console.print(table)
    console.print(f"inventory: {escape(str(lab.inventory))}", highlight=False)


def _host(lab: Lab, host: str | LabHost) -> LabHost:
    name = host.name if isinstance(host, LabHost) else host
    for candidate in lab.hosts:
        if candidate.name == name:
            return candidate
    raise UserError(f"lab {lab.name} has no host {name!r}; its hosts: {', '.join(h.name for h in lab.hosts)}")


def host_settings(lab: Lab) -> dict[str, Any]:
    """The lab's inventory variables that shape what the roles do (no connection settings): what a
    `gpufabric bake` for this lab's hosts needs (`-e`), so that a host from the image shows no drift."""
    return {name: value for name, value, _comment in inventory_vars(lab) if not name.startswith("ansible_")}


def podman_exec(lab: Lab, host: str | LabHost, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a command in a lab host's container as root (to tamper with it in tests and demos)."""
    return execute(_host(lab, host).name, argv)


def stop_host(lab: Lab, host: str | LabHost) -> None:
    """Power a lab host off (podman stop: systemd shuts down)."""
    podman(["stop", "--time", "10", _host(lab, host).name])


def start_host(lab: Lab, host: str | LabHost) -> None:
    """Power a lab host on and wait until it booted and answers SSH (its SIMULATED kernel starts without VFs)."""
    found = _host(lab, host)
    podman(["start", found.name])
    wait_booted(found.name)
    lab_host.wait_ssh(lab.directory, found.name, found.port)
