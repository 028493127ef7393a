# SPDX-License-Identifier: Apache-2.0
"""The P_Key boot unit's script, run by dash and bash against SIMULATED sysfs trees with a recording ip(8).

What it must do at boot: find each named HCA's IPoIB netdev (InfiniBand type, not a child), create
<netdev>.<pkey> through rtnetlink, record what it created, and on stop remove exactly that; wait for
late netdevs, and fail with a message naming the HCA when one never appears.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree
from tests.conftest import image_nic_names

hw_facts = module_utils("hw_facts")
catalog = plugin_utils("fabric_catalog").load_catalog()

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "infiniband" / "files" / "gpufabric-ipoib-pkey"
SHELLS = [shell for shell in ("dash", "bash") if shutil.which(shell)]
MLX5 = [f"mlx5_{i}" for i in range(8)]


class Host:
    """A SIMULATED tree, a state file and an ip(8) stand-in that records its arguments."""

    def __init__(
        self,
        tmp_path: Path,
        shell: str,
        profile: str = "nebius/gpu-h100-sxm",
        faults: Faults | None = None,
        nic_names: dict[str, list[str]] | None = None,
    ):
        self.root = tmp_path / "tree"
        write_tree(catalog.get(profile), self.root, faults, nic_names=nic_names)
        self.facts = hw_facts.gather(str(self.root))
        self.shell = shell
        self.state = tmp_path / "run" / "children"
        self.log = tmp_path / "ip.log"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        ip = bin_dir / "ip"
        ip.write_text(f'#!/bin/sh\necho "$*" >>{self.log}\nexit "${{IP_EXIT:-0}}"\n', encoding="utf-8")
        ip.chmod(0o755)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GPUFABRIC_SYSFS": str(self.root / "sys"),
            "GPUFABRIC_STATE": str(self.state),
        }

    def netdev(self, device: str) -> str:
        (found,) = [d["netdev"] for d in self.facts["rdma_devices"] if d["name"] == device]
        return found

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.shell, str(SCRIPT), *args],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def calls(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def recorded(self) -> list[str]:
        return self.state.read_text(encoding="utf-8").splitlines() if self.state.exists() else []

    def make_netdev(self, name: str, **files: str) -> None:
        """A netdev in /sys/class/net (the real tree is a symlink farm; a directory is enough here)."""
        path = self.root / "sys" / "class" / "net" / name
        path.mkdir(parents=True, exist_ok=True)
        for file, content in files.items():
            (path / file).write_text(content, encoding="utf-8")


@pytest.fixture(params=SHELLS)
def host(request, tmp_path) -> Host:
    return Host(tmp_path, request.param)


def test_add_creates_one_child_per_hca_through_rtnetlink(host):
    result = host.run("add", "0x8001", "1", *MLX5)
    assert result.returncode == 0, result.stderr
    children = [f"{host.netdev(name)}.8001" for name in MLX5]
    assert host.calls() == [
        f"link add link {host.netdev(name)} name {host.netdev(name)}.8001 type ipoib pkey 0x8001" for name in MLX5
    ]
    assert host.recorded() == children
    assert result.stdout.splitlines()[0] == f"gpufabric-ipoib-pkey: created {children[0]} on mlx5_0 (P_Key 0x8001)"


def test_default_partition_child_is_allowed(host):
    assert host.run("add", "0xFFFF", "1", "mlx5_0").returncode == 0
    assert host.calls() == [
        f"link add link {host.netdev('mlx5_0')} name {host.netdev('mlx5_0')}.ffff type ipoib pkey 0xFFFF"
    ]


def test_existing_child_is_left_alone_and_not_recorded(host):
    parent = host.netdev("mlx5_0")
    host.make_netdev(f"{parent}.8001")
    result = host.run("add", "0x8001", "1", "mlx5_0", "mlx5_1")
    assert result.returncode == 0
    assert f"{parent}.8001 exists already; left as it is" in result.stdout
    assert host.recorded() == [f"{host.netdev('mlx5_1')}.8001"]
    # del removes only what add recorded (and what exists).
    host.make_netdev(f"{host.netdev('mlx5_1')}.8001")
    host.log.unlink()
    assert host.run("del").returncode == 0
    assert host.calls() == [f"link delete {host.netdev('mlx5_1')}.8001"]
    assert not host.state.exists()


def test_a_new_start_replaces_the_children_of_the_last_one(host):
    assert host.run("add", "0x8001", "1", "mlx5_0").returncode == 0
    host.make_netdev(f"{host.netdev('mlx5_0')}.8001")
    host.log.unlink()
    assert host.run("add", "0x8002", "1", "mlx5_0").returncode == 0
    parent = host.netdev("mlx5_0")
    assert host.calls() == [
        f"link delete {parent}.8001",
        f"link add link {parent} name {parent}.8002 type ipoib pkey 0x8002",
    ]
    assert host.recorded() == [f"{parent}.8002"]


def test_children_of_the_parent_are_not_parents(host):
    """A child appears under the HCA's device/net too; it has a `parent` file and gets no child of its own."""
    parent = host.netdev("mlx5_0")
    device_net = host.root / "sys" / "class" / "infiniband" / "mlx5_0" / "device" / "net"
    child = device_net / f"{parent}.8001"
    child.mkdir()
    host.make_netdev(f"{parent}.8001", type="32\n", parent=f"{parent}\n")
    assert host.run("add", "0x8002", "1", "mlx5_0").returncode == 0
    assert host.calls() == [f"link add link {parent} name {parent}.8002 type ipoib pkey 0x8002"]


def test_missing_hca_fails_after_the_wait_naming_it(host):
    result = host.run("add", "0x8001", "0", "mlx5_0", "mlx5_9")
    assert result.returncode == 1
    assert (
        "gpufabric-ipoib-pkey: mlx5_9 has no IPoIB netdev after 0s (is ib_ipoib loaded, is mlx5_9 present?)"
        in result.stderr
    )
    assert host.recorded() == [f"{host.netdev('mlx5_0')}.8001"]


def test_late_netdev_is_waited_for(tmp_path):
    host = Host(tmp_path, SHELLS[0])
    device_net = host.root / "sys" / "class" / "infiniband" / "mlx5_0" / "device" / "net"
    hidden = tmp_path / "hidden"
    shutil.move(str(device_net), str(hidden))
    process = subprocess.Popen(
        [host.shell, str(SCRIPT), "add", "0x8001", "10", "mlx5_0"],
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        subprocess.run(["sleep", "1.5"], check=True)
        shutil.move(str(hidden), str(device_net))
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
    assert host.recorded() == [f"{host.netdev('mlx5_0')}.8001"]


def test_names_longer_than_ifnamsiz_are_refused(host):
    long_parent = "ibp170s0f1np1"
    device_net = host.root / "sys" / "class" / "infiniband" / "mlx5_0" / "device" / "net"
    (device_net / long_parent).mkdir()
    host.make_netdev(long_parent, type="32\n")
    result = host.run("add", "0x8001", "1", "mlx5_0")
    assert result.returncode == 1
    assert f"{long_parent}.8001 is longer than the 15 characters Linux allows" in result.stderr


def test_failed_ip_is_not_recorded_and_fails_the_unit(host):
    result = host.run("add", "0x8001", "1", "mlx5_0", IP_EXIT="2")
    assert result.returncode == 1
    assert host.recorded() == []


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("start",),
        ("add", "8001", "1", "mlx5_0"),
        ("add", "0x801", "1", "mlx5_0"),
        ("add", "0x8001", "x", "mlx5_0"),
        ("add", "0x8001", "1"),
        ("del", "0x8001"),
    ],
)
def test_bad_arguments_print_usage(host, args):
    result = host.run(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ")
    assert host.calls() == []


def test_azure_names(tmp_path):
    """Azure's ubuntu-hpc image: RDMA devices mlx5_ib<N>, IPoIB netdevs the kernel's ib<N> (net.ifnames=0)."""
    profile = "azure/Standard_ND96isr_H100_v5"
    host = Host(tmp_path, SHELLS[0], profile, nic_names=image_nic_names(profile, "ubuntu-hpc"))
    assert host.run("add", "0x8001", "1", "mlx5_ib0", "mlx5_ib7").returncode == 0
    assert host.recorded() == ["ib0.8001", "ib7.8001"]
