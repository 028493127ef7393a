# SPDX-License-Identifier: Apache-2.0
"""`gpufabric lab` end to end: a 2-node lab of baremetal/hgx-h100-ib-ndr-sriov hosts, reached over real SSH.

The tests share one lab and run in file order: checks on the fresh lab, a host
powered off and on, then `lab down`. Applying site.yml to a lab, rerunning it and
checking it for drift is test_fleet_life.py's (the README's demo), not repeated here.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from gpufabric import lab as local_lab
from gpufabric import lab_podman
from gpufabric.errors import UserError
from gpufabric.lab_files import CATALOG_OVERRIDE, KNOWN_HOSTS
from lab.support import LabUnderTest, ansible_env, run_ansible

pytestmark = pytest.mark.lab


def lab_options(lab: local_lab.Lab) -> list[str]:
    return ["--name", lab.name, "--dir", str(lab.directory)]


def test_up_writes_a_lab_of_the_container_capable_roles(lab: LabUnderTest) -> None:
    made = lab.lab
    print(f"lab up: {lab.up_seconds:.1f}s")
    assert [host.name for host in made.hosts] == [f"{made.name}-1", f"{made.name}-2"]
    assert made.roles == ["fabric_facts", "rdma_stack", "infiniband", "sriov", "nccl_env"]
    assert set(made.left_out) == {"host_tuning", "nvidia_driver", "nccl", "nccl_tests"}
    assert made.simulated_sriov
    loaded = local_lab.load(made.name, made.directory)  # lab.json: no live states
    assert [(host.name, host.port) for host in loaded.hosts] == [(host.name, host.port) for host in made.hosts]
    assert dataclasses.replace(loaded, hosts=made.hosts) == made
    known_hosts = (made.directory / KNOWN_HOSTS).read_text().splitlines()
    assert [line.split()[0] for line in known_hosts] == [f"[127.0.0.1]:{host.port}" for host in made.hosts]
    # Each container made its own host key at first boot.
    assert len({line.split()[2] for line in known_hosts}) == 2
    assert any(line.startswith("next: gpufabric plan --probe -i ") for line in lab.progress)


def test_status_shows_every_host_running_and_reachable(lab: LabUnderTest, gpufabric) -> None:
    result = gpufabric("lab", "status", *lab_options(lab.lab))
    assert result.returncode == 0, result.stdout + result.stderr
    for host in lab.lab.hosts:
        row = next(line for line in result.stdout.splitlines() if host.name in line)
        assert "running" in row and "yes" in row and str(host.port) in row


def test_ping_over_ssh_with_host_key_checking_on(lab: LabUnderTest, tmp_path: Path) -> None:
    made = lab.lab
    ping = run_ansible(made.inventory, tmp_path / "ping", host_pattern="all", module="ansible.builtin.ping")
    assert ping.rc == 0, ping.output
    assert sorted(ping.stats["ok"]) == [host.name for host in made.hosts]

    # The same inventory with an empty known_hosts: every host is refused, even with checking off in the
    # environment (as a tool may set it): the inventory keeps checking on.
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    stranger = tmp_path / "inventory.yml"
    stranger.write_text(made.inventory.read_text().replace(str(made.directory / KNOWN_HOSTS), str(empty)))
    refused = run_ansible(
        stranger,
        tmp_path / "refused",
        host_pattern="all",
        module="ansible.builtin.ping",
        # A fresh connection: ssh's ControlPersist master from the ping above would skip the key check.
        envvars={**ansible_env(host_key_checking_off=True), "ANSIBLE_SSH_ARGS": "-o ControlPath=none"},
    )
    assert refused.rc != 0
    assert sorted(refused.stats["dark"]) == [host.name for host in made.hosts], refused.output
    assert "Host key verification failed" in refused.output


def test_every_command_refuses_an_unknown_host_key_when_ansible_cfg_checks_them(
    lab: LabUnderTest, gpufabric, tmp_path: Path
) -> None:
    """The user's `host_key_checking = True` in ./ansible.cfg holds for every command that connects, with an
    inventory that says nothing about host keys and a known_hosts that lacks the lab's keys. ansible-runner turns
    checking off whenever ANSIBLE_HOST_KEY_CHECKING is unset, and that variable outranks any ansible.cfg."""
    made = lab.lab
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    stranger = tmp_path / "inventory.yml"
    text = made.inventory.read_text().replace(str(made.directory / KNOWN_HOSTS), str(empty))
    text = text.replace(" -o StrictHostKeyChecking=yes", "").replace("ansible_host_key_checking: true", "")
    assert "StrictHostKeyChecking" not in text and "ansible_host_key_checking" not in text
    stranger.write_text(text)
    catalog = ["--catalog", str(made.directory / CATALOG_OVERRIDE)]
    inventory = ["-i", str(stranger)]

    def run(checking: str, *argv: str) -> subprocess.CompletedProcess[str]:
        project = tmp_path / f"project-{checking}"
        project.mkdir(exist_ok=True)
        (project / "ansible.cfg").write_text(f"[defaults]\nhost_key_checking = {checking}\n")
        # Fresh SSH control sockets: a master left by an earlier test would skip the key check.
        env = {"XDG_STATE_HOME": str(project / "state"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(project / "cp")}
        return gpufabric(*argv, env=env, cwd=project)

    commands = {
        "apply": ["apply", *inventory, *catalog],
        "drift": ["drift", *inventory, *catalog],
        "verify": ["verify", *inventory, *catalog, "-o", str(tmp_path / "verify")],
        "plan --probe": ["plan", "--probe", *inventory, *catalog],
    }
    for name, argv in commands.items():
        refused = run("True", *argv)
        assert refused.returncode == 1, f"{name}: {refused.stdout}{refused.stderr}"
        # ("Host key verification failed", cut to the width of apply's table.)
        assert "Host key ve" in refused.stdout + refused.stderr, f"{name}: {refused.stdout}"
    assert empty.read_text() == "", "no key was trusted"

    # The same probe with checking off in the same file connects: the file decided, nothing else.
    trusted = run("False", *commands["plan --probe"])
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert sorted(line.split()[1] for line in empty.read_text().splitlines()) == ["ssh-ed25519"] * len(made.hosts)


def test_plan_probe_finds_the_simulated_hardware_matches(lab: LabUnderTest, gpufabric) -> None:
    made = lab.lab
    result = gpufabric(
        "plan", "--probe", "--json", "-i", str(made.inventory), "--catalog", str(made.directory / CATALOG_OVERRIDE)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    hosts = json.loads(result.stdout)["hosts"]
    assert sorted(hosts) == [host.name for host in made.hosts]
    for plan in hosts.values():
        assert plan["probe"]["reachable"], plan["probe"]
        assert [f for f in plan["probe"]["findings"] if f["severity"] == "error"] == []
        assert plan["roles"] == made.roles


def test_a_stopped_host_fails_status_until_started_again(lab: LabUnderTest, gpufabric) -> None:
    made, host = lab.lab, lab.lab.hosts[1]
    local_lab.stop_host(made, host)
    try:
        stopped = gpufabric("lab", "status", *lab_options(made))
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        assert "exited" in next(line for line in stopped.stdout.splitlines() if host.name in line)
    finally:
        local_lab.start_host(made, host)
    assert gpufabric("lab", "status", *lab_options(made)).returncode == 0


def test_up_again_reuses_the_lab_and_refuses_another_size(lab: LabUnderTest) -> None:
    made = lab.lab
    again = local_lab.up(made.name, nodes=2, directory=made.directory, progress=lambda _line: None)
    assert [(host.name, host.port) for host in again.hosts] == [(host.name, host.port) for host in made.hosts]
    with pytest.raises(UserError, match=r"exists with nodes 2 \(asked: 3\); run `gpufabric lab down"):
        local_lab.up(made.name, nodes=3, directory=made.directory, progress=lambda _line: None)


def test_down_removes_containers_and_directory_and_again_does_nothing(lab: LabUnderTest) -> None:
    made = lab.lab
    lines: list[str] = []
    start = time.monotonic()
    local_lab.down(made.name, made.directory, progress=lines.append)
    print(f"lab down: {time.monotonic() - start:.1f}s")
    assert lab_podman.containers_with_label("gpufabric.lab", made.name) == []
    assert not made.directory.exists()
    assert sorted(lines) == sorted(
        [f"removed container {host.name}" for host in made.hosts] + [f"removed {made.directory}"]
    )

    again: list[str] = []
    local_lab.down(made.name, made.directory, progress=again.append)
    assert again == [f"no lab {made.name}: nothing to remove"]
