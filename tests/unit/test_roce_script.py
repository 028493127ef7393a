# SPDX-License-Identifier: Apache-2.0
"""roles/roce/files/gpufabric-roce-qos against SIMULATED trees in a temporary directory (never the real /sys)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "roce" / "files" / "gpufabric-roce-qos"
CATALOG = plugin_utils("fabric_catalog").load_catalog()
OCI = CATALOG.get("oci/BM.GPU.H100.8")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the script needs bash")


def add_mlnx_ofed_attributes(root: Path) -> None:
    """What the MLNX_OFED/DOCA mlx5 driver and an rdma_cm configfs group add (SIMULATED here)."""
    for device in (root / "sys/class/infiniband").iterdir():
        (netdev,) = [path.name for path in (device / "device/net").iterdir()]
        (device / "tc/1").mkdir(parents=True)
        (device / "tc/1/traffic_class").write_text("")
        for point in ("roce_np", "roce_rp"):
            enable = root / "sys/class/net" / netdev / "ecn" / point / "enable"
            enable.mkdir(parents=True)
            for prio in range(8):
                (enable / str(prio)).write_text("1\n")
        port = root / "sys/kernel/config/rdma_cm" / device.name / "ports/1"
        port.mkdir(parents=True)
        (port / "default_roce_mode").write_text("IB/RoCE v1\n")
        (port / "default_roce_tos").write_text("0\n")


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "tree"
    write_tree(OCI, root)
    add_mlnx_ofed_attributes(root)
    log = tmp_path / "mlnx_qos.log"
    qos = tmp_path / "mlnx_qos.SIMULATED"
    qos.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    qos.chmod(0o755)
    return {"root": root, "log": log, "qos": qos, "dir": tmp_path}


def run(host: dict[str, Path], **settings: str) -> subprocess.CompletedProcess[str]:
    values = {
        "DEVICES": "'mlx5*'",
        "EXCLUDE_NETDEVS": "eth0",
        "EXPECT_DEVICES": "16",
        "WAIT_SECONDS": "0",
        "MLNX_QOS": str(host["qos"]),
        "QOS_TOOL_PACKAGE": "'mlnx-tools (DOCA-OFED or MLNX_OFED)'",
        "TRUST": "dscp",
        "DSCP2PRIO": "'10:0 26:5'",
        "PFC_PRIORITIES": "'0 5'",
        "ECN_PRIORITIES": "'0 5'",
        "TRAFFIC_CLASS": "41",
        "CMA_TOS": "41",
        "CMA_MODE": "'RoCE v2'",
    }
    values.update(settings)
    config = host["dir"] / "roce-qos.conf"
    config.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return subprocess.run(
        ["bash", str(SCRIPT), "--config", str(config), "--root", str(host["root"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def read(path: Path) -> str:
    return path.read_text().strip()


def test_applies_everything_to_the_sixteen_roce_devices(host):
    result = run(host)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "gpufabric-roce-qos: applied to 16 device(s)"
    calls = read(host["log"]).splitlines()
    netdevs = sorted({call.split()[1] for call in calls})
    assert len(netdevs) == 16
    for netdev in netdevs:
        assert calls.count(f"-i {netdev} --trust dscp") == 1
        assert calls.count(f"-i {netdev} --dscp2prio set,10,0 --dscp2prio set,26,5") == 1
        assert calls.count(f"-i {netdev} --pfc 1,0,0,0,0,1,0,0") == 1
        for point in ("roce_np", "roce_rp"):
            enable = host["root"] / "sys/class/net" / netdev / "ecn" / point / "enable"
            assert "".join(read(enable / str(prio)) for prio in range(8)) == "10000100"
    # trust before the DSCP map (mlnx_qos refuses both in one call), PFC last
    first = [call.split(" ", 2)[2].split()[0] for call in calls if call.split()[1] == netdevs[0]]
    assert first == ["--trust", "--dscp2prio", "--pfc"]
    for device in (host["root"] / "sys/class/infiniband").iterdir():
        assert read(device / "tc/1/traffic_class") == "41"
        port = host["root"] / "sys/kernel/config/rdma_cm" / device.name / "ports/1"
        assert (read(port / "default_roce_tos"), read(port / "default_roce_mode")) == ("41", "RoCE v2")


def test_empty_settings_leave_the_nic_alone(host):
    before = {path: path.read_text() for path in host["root"].rglob("*") if path.is_file() and not path.is_symlink()}
    empty = "''"
    result = run(
        host,
        TRUST=empty,
        DSCP2PRIO=empty,
        PFC_PRIORITIES=empty,
        ECN_PRIORITIES=empty,
        TRAFFIC_CLASS=empty,
        CMA_TOS=empty,
        CMA_MODE=empty,
        MLNX_QOS="/nonexistent/mlnx_qos",
    )
    assert result.returncode == 0, result.stderr
    assert not host["log"].exists()
    assert {path: path.read_text() for path in before} == before


def test_missing_mlnx_qos_names_the_package_and_changes_nothing(host):
    result = run(host, MLNX_QOS="/nonexistent/mlnx_qos")
    assert result.returncode == 1
    assert (
        "ERROR: mlnx_qos ('/nonexistent/mlnx_qos') is not installed; trust, DSCP mapping and PFC need it: "
        "install mlnx-tools (DOCA-OFED or MLNX_OFED)"
    ) in result.stderr
    assert read(next((host["root"] / "sys/class/infiniband").iterdir()) / "tc/1/traffic_class") == ""


def test_an_inbox_driver_refuses_ecn_and_skips_the_traffic_class(tmp_path, host):
    inbox = tmp_path / "inbox"
    write_tree(OCI, inbox)
    result = run(dict(host, root=inbox), CMA_TOS="''", CMA_MODE="''")
    assert result.returncode == 1
    assert result.stderr.count("ECN needs the MLNX_OFED/DOCA mlx5 driver") == 32
    assert result.stdout.count("(inbox driver): the traffic class stays what each application sets") == 16
    assert len(read(host["log"]).splitlines()) == 48  # trust, map and PFC still set
    assert "16 problem(s)" not in result.stderr
    assert "32 problem(s) on 16 device(s)" in result.stderr


def test_fewer_devices_than_the_profile_is_a_failure_after_applying_to_those_present(tmp_path, host):
    short = tmp_path / "short"
    write_tree(OCI, short, Faults(nics_missing=2))
    add_mlnx_ofed_attributes(short)
    result = run(dict(host, root=short), WAIT_SECONDS="1")
    assert result.returncode == 1
    assert "found 14 of 16 GPU-network RDMA devices after 1s; applying to those present" in result.stderr
    assert len({call.split()[1] for call in read(host["log"]).splitlines()}) == 14


def test_only_matching_ethernet_devices_and_never_the_management_netdev(tmp_path, host):
    result = run(host, DEVICES="'mlx5_0 mlx5_1'", EXPECT_DEVICES="2")
    assert result.returncode == 0, result.stderr
    assert len({call.split()[1] for call in read(host["log"]).splitlines()}) == 2
    first = (host["root"] / "sys/class/infiniband/mlx5_0/device/net").iterdir().__next__().name
    result = run(host, DEVICES="mlx5_0", EXPECT_DEVICES="0", EXCLUDE_NETDEVS=first)
    assert result.returncode == 1
    assert "no RDMA device under" in result.stderr
    ib = tmp_path / "ib"
    write_tree(CATALOG.get("baremetal/hgx-h100-ib-ndr"), ib)
    result = run(dict(host, root=ib), DEVICES="'*'", EXPECT_DEVICES="0")
    assert result.returncode == 1
    assert "with an Ethernet port" in result.stderr


def test_a_value_the_driver_does_not_keep_is_reported(host):
    # A traffic_class file that always reads back another value (a driver that rejects the write).
    device = host["root"] / "sys/class/infiniband/mlx5_0"
    (device / "tc/1/traffic_class").unlink()
    (device / "tc/1/traffic_class").symlink_to(Path("/dev/null"))
    result = run(host)
    assert result.returncode == 1
    assert "traffic_class reads '' after writing '41'" in result.stderr
