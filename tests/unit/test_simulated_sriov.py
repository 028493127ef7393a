# SPDX-License-Identifier: Apache-2.0
"""The SIMULATED SR-IOV kernel (gpufabric.simulated_sriov) and the SR-IOV files simulated_hw writes.

The module and boot script tests trust these reactions, so they are pinned here: the kernel's
refusals (EBUSY, ERANGE), the VF layout in sysfs, the iproute2 JSON, the watch daemon and reset.
"""

from __future__ import annotations

import errno
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric import simulated_sriov
from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import write_tree
from gpufabric.simulated_sriov import Kernel
from gpufabric.simulated_sriov_host import SimulatedSriovHost

catalog = plugin_utils("fabric_catalog").load_catalog()
SCRIPT = simulated_sriov.__file__
IB_PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
PF = "0000:17:00.0"  # the first ConnectX PF of IB_PROFILE's tree; netdev ibp23s0, RDMA device mlx5_0
NUMVFS = f"/sys/bus/pci/devices/{PF}/sriov_numvfs"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(catalog.get(IB_PROFILE), tmp_path / "tree")


def virtfns(tree: Path, pf: str = PF) -> list[str]:
    return sorted(name for name in os.listdir(tree / "sys/bus/pci/devices" / pf) if name.startswith("virtfn"))


# ---------------------------------------------------------------------------
# simulated_hw
# ---------------------------------------------------------------------------


def test_sriov_profile_has_sr_iov_capable_connectx_pfs(tree):
    device = tree / "sys/bus/pci/devices" / PF
    assert {name: (device / name).read_text().strip() for name in ("sriov_totalvfs", "sriov_numvfs")} == {
        "sriov_totalvfs": "16",
        "sriov_numvfs": "0",
    }
    assert (device / "sriov_vf_device").read_text().strip() == "101e"
    guids = [(tree / "sys/class/infiniband" / f"mlx5_{n}/node_guid").read_text().strip() for n in range(8)]
    assert len(set(guids)) == 8
    assert all(len(guid) == 19 and guid.count(":") == 3 for guid in guids)


def test_profiles_without_sriov_have_no_sr_iov_files(tmp_path):
    root = write_tree(catalog.get("nebius/gpu-h100-sxm"), tmp_path / "tree")
    assert not list(root.glob("sys/bus/pci/devices/*/sriov_totalvfs"))
    assert list(root.glob("sys/class/infiniband/*/node_guid"))


@pytest.mark.parametrize("total", [0, 8])
def test_sriov_totalvfs_is_chosen(tmp_path, total):
    root = write_tree(catalog.get("nebius/gpu-h100-sxm"), tmp_path / "tree", sriov_totalvfs=total)
    values = {path.read_text().strip() for path in root.glob("sys/bus/pci/devices/*/sriov_totalvfs")}
    assert values == {str(total)}


# ---------------------------------------------------------------------------
# sriov_numvfs
# ---------------------------------------------------------------------------


def test_creating_vfs_lays_them_out_like_the_kernel(tree):
    host = SimulatedSriovHost(tree)
    host.write(NUMVFS, "4")
    assert virtfns(tree) == [f"virtfn{n}" for n in range(4)]
    assert (tree / NUMVFS.lstrip("/")).read_text().strip() == "4"
    vf = tree / "sys/bus/pci/devices/0000:17:00.1"
    assert os.readlink(vf) == os.path.join(os.path.dirname(os.readlink(tree / "sys/bus/pci/devices" / PF)), vf.name)
    assert not os.path.isabs(os.readlink(vf / "physfn"))
    assert (vf / "physfn").resolve() == (tree / "sys/bus/pci/devices" / PF).resolve()
    assert (vf / "device").read_text().strip() == "0x101e"
    assert os.path.basename(os.readlink(vf / "driver")) == "mlx5_core"
    assert (tree / "sys/class/net/ibp23s0v0/type").read_text().strip() == "32"
    assert (tree / "sys/class/infiniband/mlx5_8/device").resolve() == vf.resolve()
    host.write(NUMVFS, "0")
    assert virtfns(tree) == []
    assert not (tree / "sys/class/net/ibp23s0v0").exists()
    assert not (tree / "sys/bus/pci/devices/0000:17:00.1").exists()


@pytest.mark.parametrize(
    ("first", "second", "code"),
    [("4", "8", errno.EBUSY), ("0", "17", errno.ERANGE), ("0", "many", errno.EINVAL), ("0", "-1", errno.EINVAL)],
)
def test_the_kernel_refuses(tree, first, second, code):
    host = SimulatedSriovHost(tree)
    host.write(NUMVFS, first)
    with pytest.raises(OSError) as raised:
        host.write(NUMVFS, second)
    assert raised.value.errno == code
    assert len(virtfns(tree)) == int(first)
    assert (tree / NUMVFS.lstrip("/")).read_text().strip() == first


def test_same_count_is_a_no_op(tree):
    host = SimulatedSriovHost(tree)
    host.write(NUMVFS, "2")
    before = os.stat(tree / "sys/bus/pci/devices/0000:17:00.1/vendor").st_ino
    host.write(NUMVFS, "2")
    assert os.stat(tree / "sys/bus/pci/devices/0000:17:00.1/vendor").st_ino == before


def test_rebind_makes_the_admin_guid_take_effect(tree):
    host = SimulatedSriovHost(tree)
    host.write(NUMVFS, "1")
    guid = "02:00:00:00:00:00:00:07"
    assert host.run(["ip", "link", "set", "dev", "ibp23s0", "vf", "0", "node_guid", guid]) == (0, "", "")
    rdma = tree / "sys/class/infiniband/mlx5_8/node_guid"
    assert rdma.read_text().strip() == "0000:0000:0000:0000"
    host.write("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:17:00.1")
    assert not (tree / "sys/bus/pci/devices/0000:17:00.1/driver").exists()
    assert not rdma.exists()
    host.write("/sys/bus/pci/drivers/mlx5_core/bind", "0000:17:00.1")
    assert rdma.read_text().strip() == "0200:0000:0000:0007"
    with pytest.raises(OSError) as raised:
        host.write("/sys/bus/pci/drivers/mlx5_core/bind", "0000:17:00.1")
    assert raised.value.errno == errno.EBUSY


# ---------------------------------------------------------------------------
# ip
# ---------------------------------------------------------------------------


def test_ip_prints_iproute2_json(tree):
    host = SimulatedSriovHost(tree)
    host.write(NUMVFS, "2")
    rc, out, _err = host.run(["ip", "-j", "-d", "link", "show", "dev", "ibp23s0"])
    assert rc == 0
    (link,) = json.loads(out)
    assert link["ifname"] == "ibp23s0"
    vf = link["vfinfo_list"][1]
    assert vf["vf"] == 1
    assert vf["node guid"] == vf["port guid"] == "00:00:00:00:00:00:00:00"
    assert vf["trust"] is False
    assert vf["spoofchk"] is False
    assert vf["vlan_list"] == [{}]


def test_ip_sets_and_refuses_like_the_kernel(tmp_path):
    root = write_tree(catalog.get("baremetal/hgx-h100-roce-400g"), tmp_path / "tree", sriov_totalvfs=8)
    host = SimulatedSriovHost(root)
    pf = os.path.basename(os.path.realpath(root / "sys/class/net/enp23s0np0/device"))
    host.write(f"/sys/bus/pci/devices/{pf}/sriov_numvfs", "2")
    ok = host.run(["ip", "link", "set", "dev", "enp23s0np0", "vf", "1", "mac", "02:00:00:00:00:09", "vlan", "5"])
    assert ok == (0, "", "")
    assert host.run(["ip", "link", "set", "dev", "enp23s0np0", "vf", "1", "trust", "on"])[0] == 0
    _rc, out, _err = host.run(["ip", "-j", "link", "show", "enp23s0np0"])
    vf = json.loads(out)[0]["vfinfo_list"][1]
    assert (vf["address"], vf["vlan_list"], vf["trust"]) == ("02:00:00:00:00:09", [{"vlan": 5}], True)
    assert host.run(["ip", "link", "set", "dev", "enp23s0np0", "vf", "2", "trust", "on"])[0] == 2
    node_guid = ["ip", "link", "set", "dev", "enp23s0np0", "vf", "0", "node_guid", "02:00:00:00:00:00:00:01"]
    assert "Operation not supported" in host.run(node_guid)[2]


def test_ip_leaves_other_devices_to_the_real_ip(tree):
    assert Kernel(tree).ip(["-j", "link", "show", "dev", "lo"]) is None
    assert Kernel(tree).ip(["route", "show"]) is None


# ---------------------------------------------------------------------------
# Processes: watch, ip, reset
# ---------------------------------------------------------------------------


@pytest.fixture
def watching(tree: Path) -> Iterator[Path]:
    process = subprocess.Popen([sys.executable, SCRIPT, "watch", "--root", str(tree), "--interval", "0.01"])
    try:
        yield tree
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the simulated kernel did not react"
        time.sleep(0.02)


def test_watch_reacts_and_logs_refusals(watching):
    numvfs = watching / NUMVFS.lstrip("/")
    time.sleep(0.2)  # the daemon has written the bind/unbind files
    numvfs.write_text("3\n")
    wait_for(lambda: len(virtfns(watching)) == 3)
    numvfs.write_text("5\n")  # a real write(2) fails with EBUSY; the daemon reverts the file instead
    wait_for(lambda: numvfs.read_text().strip() == "3")
    assert "sriov_numvfs 5 (kept 3)" in (watching / simulated_sriov.REFUSALS_LOG).read_text()
    (watching / "sys/bus/pci/drivers/mlx5_core/unbind").write_text("0000:17:00.2")
    wait_for(lambda: not (watching / "sys/bus/pci/devices/0000:17:00.2/driver").exists())
    numvfs.write_text("0\n")
    wait_for(lambda: virtfns(watching) == [])


def test_a_write_wakes_the_watch_through_inotify(tmp_path):
    """The daemon sleeps until a file in a watched directory is closed after writing: no busy poll."""
    writes = simulated_sriov._Writes.open([tmp_path])
    assert writes is not None, "inotify is available on Linux"
    assert select.select([writes.descriptor], [], [], 0)[0] == [], "nothing written yet"
    (tmp_path / "sriov_numvfs").write_text("4\n")
    assert select.select([writes.descriptor], [], [], 0)[0] == [writes.descriptor]
    writes.wait(0)  # drains what was queued
    assert select.select([writes.descriptor], [], [], 0)[0] == []


def test_ip_stand_in_and_reset(tree):
    subprocess.run([sys.executable, SCRIPT, "reset", "--root", str(tree)], check=True)
    SimulatedSriovHost(tree).write(NUMVFS, "2")
    shown = subprocess.run(
        [sys.executable, SCRIPT, "ip", "--root", str(tree), "--", "-j", "-d", "link", "show", "dev", "ibp23s0"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(json.loads(shown.stdout)[0]["vfinfo_list"]) == 2
    subprocess.run([sys.executable, SCRIPT, "reset", "--root", str(tree)], check=True)
    assert virtfns(tree) == []
    assert (tree / NUMVFS.lstrip("/")).read_text().strip() == "0"
    assert not (tree / simulated_sriov.STATE_FILE).exists()
