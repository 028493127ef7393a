# SPDX-License-Identifier: Apache-2.0
"""hw_facts.gather on odd input (it must never raise), on this real machine, and through the
fabric_facts module run by real ``ansible``."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree
from tests.fixtures import ansible_module

hw_facts = module_utils("hw_facts")
catalog = plugin_utils("fabric_catalog").load_catalog()
BIN = Path(sys.executable).parent
KEYS = {"root", "gpus", "nvswitches", "nics", "default_routes", "rdma_devices", "affinity", "host", "unreadable"}


@pytest.fixture
def tree(tmp_path) -> Path:
    """A healthy simulated host with gVNIC data NICs (eth1..eth4) and a gVNIC eth0."""
    return write_tree(catalog.get("gcp/a3-highgpu-8g"), tmp_path / "tree")


@pytest.fixture
def ib_tree(tmp_path) -> Path:
    """A healthy simulated host with InfiniBand RDMA devices mlx5_0..mlx5_7 and IPoIB netdevs."""
    return write_tree(catalog.get("nebius/gpu-h100-sxm"), tmp_path / "tree")


def gather(root: Path) -> dict[str, Any]:
    return hw_facts.gather(str(root))


def nic(facts: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in facts["nics"] if item["name"] == name)


def rdma(facts: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in facts["rdma_devices"] if item["name"] == name)


# ---------------------------------------------------------------------------
# Odd values: None plus an unreadable entry, the rest untouched
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-2", "", "abc", "1_000", "0x10", "9" * 5 + ".5", "\x00\xff"])
def test_garbage_speed(tree, value):
    before = gather(tree)
    (tree / "sys/class/net/eth1/speed").write_text(value + "\n", encoding="utf-8", errors="surrogateescape")
    after = gather(tree)
    assert nic(after, "eth1")["speed_mbps"] is None
    assert [entry["path"] for entry in after["unreadable"]] == ["/sys/class/net/eth1/speed"]
    assert after["unreadable"][0]["reason"].startswith("invalid value")
    nic(before, "eth1")["speed_mbps"] = None
    assert {**after, "unreadable": []} == before


def test_unknown_speed_is_a_fact_not_a_read_error(tree):
    """-1 is the kernel's SPEED_UNKNOWN (virtio reports it): no speed, nothing unreadable."""
    (tree / "sys/class/net/eth1/speed").write_text("-1\n", encoding="utf-8")
    facts = gather(tree)
    assert nic(facts, "eth1")["speed_mbps"] is None
    assert facts["unreadable"] == []


def test_speed_of_a_link_that_is_down_is_not_read(tree):
    (tree / "sys/class/net/eth1/operstate").write_text("down\n", encoding="utf-8")
    (tree / "sys/class/net/eth1/speed").write_text("garbage\n", encoding="utf-8")
    facts = gather(tree)
    assert nic(facts, "eth1")["speed_mbps"] is None
    assert facts["unreadable"] == []


def test_speed_of_a_down_link_reads_einval(tree, monkeypatch):
    """Real sysfs answers EINVAL for the speed of a link that is down; a tmpfs cannot, so open() does."""
    real_open = open
    speed = str(tree / "sys/class/net/eth3/speed")

    def fake_open(path, *args, **kwargs):
        if str(path) == speed:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(hw_facts, "open", fake_open, raising=False)
    facts = gather(tree)
    assert nic(facts, "eth3")["speed_mbps"] is None
    assert facts["unreadable"] == [{"path": "/sys/class/net/eth3/speed", "reason": "Invalid argument"}]


def test_missing_files(ib_tree):
    (ib_tree / "sys/class/net/ibp23s0/mtu").unlink()
    (ib_tree / "sys/class/infiniband/mlx5_0/ports/1/rate").unlink()
    devices = sorted((ib_tree / "sys/bus/pci/devices").iterdir())
    gpu = next(path for path in devices if (path / "class").read_text() == "0x030200\n")
    (gpu / "numa_node").unlink()
    (ib_tree / "etc/os-release").unlink()
    facts = gather(ib_tree)
    assert nic(facts, "ibp23s0")["mtu"] is None
    port = rdma(facts, "mlx5_0")["ports"][0]
    assert port["rate"] is None
    assert port["rate_gbit_s"] is None
    assert port["state"] == "ACTIVE"
    assert facts["gpus"][0]["numa_node"] is None
    assert facts["host"]["os"] == {}
    assert facts["unreadable"] == [
        {"path": f"/sys/bus/pci/devices/{gpu.name}/numa_node", "reason": "missing"},
        {"path": "/sys/class/net/ibp23s0/mtu", "reason": "missing"},
        {"path": "/sys/class/infiniband/mlx5_0/ports/1/rate", "reason": "missing"},
        {"path": "/etc/os-release", "reason": "missing"},
    ]


def test_garbage_pci_id(tree):
    (tree / "sys/class/net/eth4/device/vendor").write_text("Google\n")
    facts = gather(tree)
    eth4 = nic(facts, "eth4")
    assert eth4["pci_id"] is None
    assert eth4["kind"] == "gvnic"  # still known by its driver
    (entry,) = facts["unreadable"]
    assert entry["path"].endswith("/vendor")
    assert entry["reason"] == "invalid value 'Google'"


def test_optional_files_are_not_reported(tree):
    """numa_node -1, no driver bound, no SR-IOV, no EFI: normal on real hosts, so not 'unreadable'."""
    eth1 = tree / "sys/class/net/eth1/device"
    (eth1 / "numa_node").write_text("-1\n")
    (eth1 / "driver").unlink()
    shutil.rmtree(tree / "sys/firmware")
    facts = gather(tree)
    assert nic(facts, "eth1")["numa_node"] is None
    assert nic(facts, "eth1")["driver"] is None
    assert nic(facts, "eth1")["kind"] == "gvnic"  # by PCI vendor
    assert facts["host"]["secure_boot"] is None
    assert facts["unreadable"] == []


def test_rdma_port_oddities(ib_tree):
    port = ib_tree / "sys/class/infiniband/mlx5_1/ports/1"
    (port / "rate").write_text("fast\n")
    (port / "state").write_text("ACTIVE\n")  # no "4: " prefix
    facts = gather(ib_tree)
    (parsed,) = rdma(facts, "mlx5_1")["ports"]
    assert parsed["rate"] == "fast"
    assert parsed["rate_gbit_s"] is None
    assert parsed["state"] == "ACTIVE"
    assert facts["unreadable"] == [
        {"path": "/sys/class/infiniband/mlx5_1/ports/1/rate", "reason": "invalid value 'fast'"}
    ]


def test_dangling_symlinks(tree):
    net = tree / "sys/class/net"
    (net / "eth9").symlink_to("../../devices/pci0000:99/0000:99:00.0/net/eth9")
    physfn = tree / "sys/class/net/eth2/device/physfn"
    physfn.symlink_to("../0000:99:00.0")  # its target is gone; the link alone says "virtual function"
    driver = tree / "sys/class/net/eth3/device/driver"
    driver.unlink()
    driver.symlink_to("../../../bus/pci/drivers/gone_driver")
    facts = gather(tree)
    assert [n["name"] for n in facts["nics"]] == ["eth0", "eth1", "eth2", "eth3", "eth4"]
    assert nic(facts, "eth2")["is_virtual_function"] is True
    assert nic(facts, "eth3")["driver"] == "gone_driver"
    assert facts["unreadable"] == [{"path": "/sys/class/net/eth9", "reason": "dangling symlink"}]


def test_virtual_netdevs_are_skipped(tree):
    for name in ("lo", "docker0", "veth1234"):
        virtual = tree / "sys/devices/virtual/net" / name
        virtual.mkdir(parents=True)
        (virtual / "mtu").write_text("1500\n")
        (tree / "sys/class/net" / name).symlink_to(f"../../devices/virtual/net/{name}")
    facts = gather(tree)
    assert [n["name"] for n in facts["nics"]] == ["eth0", "eth1", "eth2", "eth3", "eth4"]
    assert facts["unreadable"] == []


def test_netdev_vanishes_between_listing_and_reading(tree, monkeypatch):
    real_listdir = os.listdir
    net = str(tree / "sys/class/net")

    def listdir(path):
        names = real_listdir(path)
        if str(path) == net:  # the interface goes away right after the listing, as on hot-unplug
            target = (tree / "sys/class/net/eth2").resolve()
            (tree / "sys/class/net/eth2").unlink()
            shutil.rmtree(target)
        return names

    monkeypatch.setattr(os, "listdir", listdir)
    facts = gather(tree)
    assert [n["name"] for n in facts["nics"]] == ["eth0", "eth1", "eth3", "eth4"]
    assert facts["unreadable"] == [{"path": "/sys/class/net/eth2", "reason": "vanished during the scan"}]


def test_oserror_anywhere_in_a_device_leaves_that_device_out(ib_tree, monkeypatch):
    real_realpath = os.path.realpath

    def realpath(path, *args, **kwargs):
        if "mlx5_2" in str(path):
            raise OSError(errno.ENOENT, "No such file or directory")
        return real_realpath(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", realpath)
    facts = gather(ib_tree)
    assert "mlx5_2" not in [device["name"] for device in facts["rdma_devices"]]
    assert len(facts["rdma_devices"]) == 7
    (entry,) = facts["unreadable"]
    assert entry["path"] == "/sys/class/infiniband/mlx5_2"


def test_unreadable_directory(tree, monkeypatch):
    real_listdir = os.listdir

    def listdir(path):
        if str(path).endswith("sys/class/net"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    facts = gather(tree)
    assert facts["nics"] == []
    assert len(facts["gpus"]) == 8
    assert facts["unreadable"] == [{"path": "/sys/class/net", "reason": "Permission denied"}]


@pytest.mark.parametrize("seed", range(5))
def test_garbage_everywhere_never_raises(ib_tree, seed):
    """Overwrite a third of all files with random bytes: gather still returns the full shape."""
    chance = random.Random(seed)
    for top, _dirs, files in os.walk(ib_tree):
        for name in files:
            path = Path(top) / name
            if not path.is_symlink() and chance.random() < 0.33:
                path.write_bytes(bytes(chance.randrange(256) for _byte in range(chance.randrange(12))))
    facts = gather(ib_tree)
    assert set(facts) == KEYS
    assert facts["unreadable"]
    json.dumps(facts)  # plain data only, as Ansible returns it


def test_empty_root(tmp_path):
    facts = gather(tmp_path)
    assert set(facts) == KEYS
    assert facts["root"] == str(tmp_path)
    for key in ("gpus", "nvswitches", "nics", "default_routes", "rdma_devices", "affinity"):
        assert facts[key] == []
    host = facts["host"]
    assert host["kernel"] is None
    assert host["os"] == {}
    assert host["secure_boot"] is None
    assert not any(host["modules"].values())
    assert host["nvidia_driver_version"] is None
    assert {entry["path"] for entry in facts["unreadable"]} == {
        "/proc/sys/kernel/osrelease",
        "/etc/os-release",
        "/proc/modules",
    }


def test_root_that_does_not_exist(tmp_path):
    facts = gather(tmp_path / "nothing here")
    assert facts["gpus"] == facts["nics"] == []


# ---------------------------------------------------------------------------
# Parsers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "switch"),
    [
        ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:03.0/0000:03:00.0", "0000:01:00.0"),
        ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:03.0/0000:03:00.0/net/eth1", "0000:01:00.0"),
        ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", None),
        ("/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0", None),
        ("/sys/devices/virtual/net/lo", None),
        ("", None),
    ],
)
def test_pcie_switch_of(path, switch):
    assert hw_facts.pcie_switch_of(path) == switch


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n", "535.183.01"),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n",
            "570.86.15",
        ),
        ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.127.05  Tue Oct  8 2024\n", "550.127.05"),
    ],
)
def test_nvidia_driver_version(tmp_path, text, version):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(text)
    assert gather(tmp_path)["host"]["nvidia_driver_version"] == version


def test_nvidia_driver_version_from_sys_module(tmp_path):
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("580.65.06\n")
    assert gather(tmp_path)["host"]["nvidia_driver_version"] == "580.65.06"


def test_os_release_quoting(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text(
        '# comment\nPRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID=\'13\'\nBROKEN="unclosed\n'
    )
    assert gather(tmp_path)["host"]["os"] == {
        "id": "debian",
        "version_id": "13",
        "pretty_name": "Debian GNU/Linux 13 (trixie)",
    }


# The real release files of each OS target (tests/fixtures/os_release/, recorded from the distributions' base-files):
# molecule/fabric_facts reads Ubuntu 22.04's from the identity image; Debian's stay covered here.
@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("debian12", ("debian", "12", "Debian GNU/Linux 12 (bookworm)")),
        ("debian13", ("debian", "13", "Debian GNU/Linux 13 (trixie)")),
        ("ubuntu2204", ("ubuntu", "22.04", "Ubuntu 22.04.5 LTS")),
        ("ubuntu2404", ("ubuntu", "24.04", "Ubuntu 24.04.3 LTS")),
    ],
)
def test_os_release_of_each_target(tmp_path, target, expected):
    recorded = Path(__file__).resolve().parents[1] / "fixtures" / "os_release" / target / "usr/lib/os-release"
    (tmp_path / "usr/lib").mkdir(parents=True)  # only the fallback path: /etc/os-release is a link to it there
    shutil.copy(recorded, tmp_path / "usr/lib/os-release")
    os_release = gather(tmp_path)["host"]["os"]
    assert (os_release["id"], os_release["version_id"], os_release["pretty_name"]) == expected


@pytest.mark.parametrize(("data", "enabled"), [(b"\x06\x00\x00\x00\x01", True), (b"\x06\x00\x00\x00\x00", False)])
def test_secure_boot(tree, data, enabled):
    (tree / hw_facts.SECURE_BOOT_VAR.lstrip("/")).write_bytes(data)
    assert gather(tree)["host"]["secure_boot"] is enabled


def test_secure_boot_variable_too_short(tree):
    (tree / hw_facts.SECURE_BOOT_VAR.lstrip("/")).write_bytes(b"\x06\x00")
    facts = gather(tree)
    assert facts["host"]["secure_boot"] is None
    assert facts["unreadable"] == [{"path": hw_facts.SECURE_BOOT_VAR, "reason": "too short (2 bytes)"}]


@pytest.mark.parametrize(
    ("pci_id", "driver", "kind"),
    [
        ("1ae0:0042", None, "gvnic"),
        ("15b3:101e", None, "connectx"),
        ("1d0f:efa2", None, "efa"),
        ("1d0f:ec20", None, "ena"),
        ("1d0f:1234", "ena", "ena"),
        ("1af4:1041", None, "virtio"),
        ("1414:00ba", None, "mana"),
        (None, "virtio_net", "virtio"),
        ("8086:1592", "ice", "unknown"),
    ],
)
def test_nic_kind(pci_id, driver, kind):
    assert hw_facts.nic_kind(pci_id, driver) == kind


# ---------------------------------------------------------------------------
# This machine, and the module through real ansible
# ---------------------------------------------------------------------------


def test_this_machine_does_not_crash():
    facts = hw_facts.gather("/")
    assert set(facts) == KEYS
    assert facts["root"] == "/"
    for entry in facts["unreadable"]:
        assert set(entry) == {"path", "reason"}
        assert entry["path"].startswith("/")
    json.dumps(facts)


def ansible(ansible_env: dict[str, str], *args: str) -> dict[str, Any]:
    result = ansible_module.run(ansible_env, "fabric_facts", *args)
    assert not result.get("failed"), result
    return result


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file's content and every link's target, to prove the module changed nothing."""
    state: dict[str, bytes | str] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            if path.is_symlink():
                state[str(path)] = os.readlink(path)
            elif path.is_file():
                state[str(path)] = path.read_bytes()
    return state


def test_module_returns_the_facts(tree, ansible_env):
    before = snapshot(tree)
    result = ansible(ansible_env, "-a", f"root={tree}")
    assert result["changed"] is False
    assert result["ansible_facts"]["gpufabric_hardware"] == gather(tree)
    checked = ansible(ansible_env, "--check", "-a", f"root={tree}")
    assert checked["changed"] is False
    assert checked["ansible_facts"] == result["ansible_facts"]
    assert snapshot(tree) == before


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system python3")
def test_module_runs_on_the_system_python(ib_tree, ansible_env):
    result = ansible(ansible_env, "-a", f"root={ib_tree}", "-e", "ansible_python_interpreter=/usr/bin/python3")
    assert result["ansible_facts"]["gpufabric_hardware"] == gather(ib_tree)


def test_module_on_this_machine(ansible_env):
    result = ansible(ansible_env)
    assert set(result["ansible_facts"]["gpufabric_hardware"]) == KEYS


def test_module_documentation_renders(ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "gpufabric.cluster.fabric_facts"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "gpufabric_hardware" in result.stdout
