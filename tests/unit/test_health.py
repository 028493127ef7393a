# SPDX-License-Identifier: Apache-2.0
"""Health verdicts from SIMULATED hosts: each injected fault caught on its device with its action, nothing on a
healthy host, and ``unknown`` (never ``pass``) where the host cannot answer.

The sysfs trees come from gpufabric.simulated_hw (SIMULATED hardware, docs/simulated-hardware.md); the reading from
the real reader (health.read_host over hw_facts). Kernel-log lines follow the driver's "NVRM: Xid (PCI:...): NN,"
prefix as real logs print it (NVIDIA/open-gpu-kernel-modules#1151 quotes an Xid 79 line); what follows the code
in the lines for Xid 48 and 94 is SIMULATED text, which the parser does not read.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

catalog = plugin_utils("fabric_catalog").load_catalog()
health = module_utils("health")

IB = "baremetal/hgx-h100-ib-ndr"
XID_79 = "kernel: NVRM: Xid (PCI:0000:1c:00): 79, GPU has fallen off the bus."
XID_48 = "kernel: NVRM: Xid (PCI:0000:15:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable ECC error"
XID_94 = "kernel: NVRM: Xid (PCI:0000:16:00): 94, pid=4242, name=python3, Contained: SM (0x1)."
CLEAN_LOG = "kernel: Linux version 6.1.0-28-amd64\nkernel: nvidia: loading out-of-tree module taints kernel.\n"


def reading_of(name: str, tmp_path: Path, faults: Faults | None = None) -> dict[str, Any]:
    profile = catalog.get(name)
    return health.read_host(str(write_tree(profile, tmp_path / "sim", faults)), profile)


def healthy_smi(reading: dict[str, Any]) -> dict[str, Any]:
    """What nvidia-smi would answer for the reading's GPUs on a healthy host (tests/unit/test_health_gpu_memory.py
    has the format and its sources; the values are SIMULATED)."""
    buses = [gpu["pci_address"] for gpu in reading["hardware"]["gpus"]]
    gpus = "".join(
        f"0000{bus.upper()}, 550.90.07, 96.00.89.00.01, 0, 0, [N/A], [N/A], 0x0000000000000001\n" for bus in buses
    )
    remaps = "".join(f"0000{bus.upper()}, 0, 0, 0\n" for bus in buses)
    return {
        "gpus": health.parse_smi_csv(gpus, health.SMI_GPU_FIELDS),
        "remaps": health.parse_smi_csv(remaps, health.SMI_REMAP_FIELDS),
    }


def judge(
    name: str, tmp_path: Path, faults: Faults | None = None, log: str = CLEAN_LOG, previous: Any = "same"
) -> list[dict[str, Any]]:
    """Verdicts for a simulated host; ``previous`` "same": the counters as a healthy earlier run read them."""
    reading = reading_of(name, tmp_path, faults)
    if previous == "same":
        previous = {subject: {"link_downed": 0, "symbol_error": 0} for subject in reading["port_counters"]}
    return health.verdicts(reading, catalog.get(name), log, previous, smi=healthy_smi(reading))


def failed(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(item["check"], item["subject"], item["action"]) for item in results if item["status"] == "fail"]


def unknown(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["check"], item["subject"]) for item in results if item["status"] == "unknown"]


@pytest.mark.parametrize("name", catalog.names())
def test_a_healthy_host_of_every_profile_fails_nothing(name, tmp_path):
    results = judge(name, tmp_path)
    assert failed(results) == []
    assert health.summary(results)["status"] in ("pass", "unknown")


def test_the_healthy_control_passes_every_check(tmp_path):
    results = judge(IB, tmp_path)
    assert (failed(results), unknown(results)) == ([], [])
    assert health.summary(results) == {
        "status": "pass",
        "action": None,
        "counts": {"pass": 75, "fail": 0, "unknown": 0},
    }
    checks = {item["check"] for item in results}
    assert checks == {
        "gpu_count",
        "gpu_model",
        "pcie_link",
        "fabric_count",
        "fabric_port",
        "link_downed",
        "symbol_error",
        "xid",
        "ecc_uncorrected",
        "row_remap",
        "clock_events",
    }


def test_a_missing_gpu_fails_the_count_only(tmp_path):
    results = judge(IB, tmp_path, Faults(gpus_missing=1))
    assert failed(results) == [("gpu_count", "gpus", "reboot")]
    count = next(item for item in results if item["check"] == "gpu_count")
    assert count["message"].startswith("found 7 of 8 GPUs")
    assert count["evidence"]["found"] == 7


def test_a_gpu_at_x8_of_x16_fails_its_link(tmp_path):
    results = judge(IB, tmp_path, Faults(gpu_link_width=(2, 8)))
    assert failed(results) == [("pcie_link", "0000:1c:00.0", "reboot")]
    link = next(item for item in results if item["status"] == "fail")
    assert link["message"] == "GPU 0000:1c:00.0 links at x8; it and its slot can do x16"
    assert link["evidence"]["current_link_width"] == 8


def test_a_device_wired_narrower_by_design_passes(tmp_path):
    """x8 in a slot whose max is x8 (aws-k8s-tester PR #806): the device's own max_link_width decides."""
    profile = catalog.get(IB)
    root = write_tree(profile, tmp_path / "sim")
    gpu = root / "sys/bus/pci/devices/0000:1c:00.0"
    (gpu / "current_link_width").write_text("8\n")
    (gpu / "max_link_width").write_text("8\n")
    results = health.verdicts(health.read_host(str(root), profile), profile, CLEAN_LOG, None)
    link = next(item for item in results if item["subject"] == "0000:1c:00.0")
    assert link["status"] == "pass"


def test_an_idle_gpu_below_its_link_generation_is_unknown_and_a_slow_nic_fails(tmp_path):
    profile = catalog.get(IB)
    root = write_tree(profile, tmp_path / "sim")
    (root / "sys/bus/pci/devices/0000:1c:00.0/current_link_speed").write_text("2.5 GT/s PCIe\n")
    reading = health.read_host(str(root), profile)
    nic = next(address for address, link in reading["pcie_links"].items() if link["kind"] == "nic")
    (root / f"sys/bus/pci/devices/{nic}/current_link_speed").write_text("16.0 GT/s PCIe\n")
    results = health.check_pcie_links(health.read_host(str(root), profile))
    by_subject = {item["subject"]: item for item in results}
    assert by_subject["0000:1c:00.0"]["status"] == "unknown"
    assert "idle GPU" in by_subject["0000:1c:00.0"]["message"]
    assert (by_subject[nic]["status"], by_subject[nic]["action"]) == ("fail", "reboot")


def test_unreadable_link_files_are_unknown_never_pass(tmp_path):
    profile = catalog.get(IB)
    root = write_tree(profile, tmp_path / "sim")
    (root / "sys/bus/pci/devices/0000:1c:00.0/max_link_width").unlink()
    results = health.check_pcie_links(health.read_host(str(root), profile))
    assert [(item["subject"], item["status"]) for item in results if item["status"] != "pass"] == [
        ("0000:1c:00.0", "unknown")
    ]


def test_a_port_down_fails_that_port(tmp_path):
    results = judge(IB, tmp_path, Faults(nic_down=0))
    assert failed(results) == [("fabric_port", "mlx5_0/1", "isolate")]


def test_a_port_at_half_rate_fails_that_port(tmp_path):
    results = judge(IB, tmp_path, Faults(ib_port_rate_gbit_s=(3, 200)))
    assert failed(results) == [("fabric_port", "mlx5_3/1", "isolate")]
    port = next(item for item in results if item["status"] == "fail")
    assert port["message"] == "mlx5_3/1 is ACTIVE at 200 Gb/s; the profile expects 400 Gb/s"


def test_a_missing_nic_fails_the_count(tmp_path):
    results = judge(IB, tmp_path, Faults(nics_missing=1), previous=None)
    assert ("fabric_count", "gpu_network", "isolate") in failed(results)


def test_a_gvnic_down_fails_by_its_operstate(tmp_path):
    results = judge("gcp/a3-highgpu-8g", tmp_path, Faults(nic_down=1))
    assert [(check, action) for check, _subject, action in failed(results)] == [("fabric_port", "isolate")]


def test_link_downed_rising_is_a_flap(tmp_path):
    results = judge(IB, tmp_path, Faults(link_downed=(1, 3)))
    assert failed(results) == [("link_downed", "mlx5_1/1", "isolate")]
    flap = next(item for item in results if item["status"] == "fail")
    assert flap["evidence"] == {"previous": 0, "current": 3, "allowed_increase": 0}


def test_a_rise_within_the_allowance_passes(tmp_path):
    reading = reading_of(IB, tmp_path, Faults(link_downed=(1, 3)))
    previous = {subject: {"link_downed": 0, "symbol_error": 0} for subject in reading["port_counters"]}
    results = health.check_port_counters(reading, previous, {"link_downed": 5})
    assert all(item["status"] == "pass" for item in results)


def test_the_first_run_has_nothing_to_compare_with_and_says_so(tmp_path):
    results = judge(IB, tmp_path, Faults(link_downed=(1, 3)), previous=None)
    counters = [item for item in results if item["check"] in ("link_downed", "symbol_error")]
    assert counters and all(item["status"] == "unknown" for item in counters)
    assert "no earlier reading to compare with (first run)" in counters[0]["message"]
    assert failed(results) == []


def test_counters_that_went_down_were_reset_and_are_unknown(tmp_path):
    reading = reading_of(IB, tmp_path)
    previous = {subject: {"link_downed": 9, "symbol_error": 0} for subject in reading["port_counters"]}
    results = health.check_port_counters(reading, previous)
    assert {item["status"] for item in results if item["check"] == "link_downed"} == {"unknown"}


@pytest.mark.parametrize(
    ("line", "code", "action", "bucket"),
    [
        (XID_79, 79, "reboot", "RESTART_BM"),
        (XID_48, 48, "reset_gpu", "RESET_GPU"),
        (XID_94, 94, "monitor", "RESTART_APP"),
    ],
)
def test_each_xid_is_caught_with_the_catalogs_action(line, code, action, bucket, tmp_path):
    results = judge(IB, tmp_path, log=CLEAN_LOG + line + "\n" + line + "\n")
    [xid] = [item for item in results if item["status"] == "fail"]
    assert (xid["check"], xid["action"], xid["evidence"]["code"], xid["evidence"]["bucket"]) == (
        "xid",
        action,
        code,
        bucket,
    )
    assert xid["evidence"]["count"] == 2
    assert "analyzing-xid-catalog" in xid["evidence"]["source"]


def test_xid_events_group_by_gpu_and_code_and_the_strongest_action_wins():
    log = "\n".join([XID_94, XID_79, XID_94, "NVRM: Xid (0000:01:00): 13, 0005 00000000 0000502d"])
    results = health.check_xids(log)
    assert [(item["subject"], item["action"]) for item in results] == [
        ("0000:01:00/xid13", "monitor"),
        ("0000:16:00/xid94", "monitor"),
        ("0000:1c:00/xid79", "reboot"),
    ]
    assert health.summary(results)["action"] == "reboot"


def test_an_xid_outside_the_table_is_unknown_and_unverified():
    [result] = health.check_xids("NVRM: Xid (PCI:0000:16:00): 999, something new")
    assert (result["status"], result["action"], result["evidence"]["source"]) == ("unknown", "monitor", "UNVERIFIED")


def test_no_kernel_log_is_unknown_and_an_empty_one_passes():
    assert [item["status"] for item in health.check_xids(None)] == ["unknown"]
    assert [item["status"] for item in health.check_xids("")] == ["pass"]


def test_every_catalog_bucket_has_an_action():
    assert {entry["bucket"] for entry in health.XID_CATALOG.values()} <= set(health.BUCKET_ACTIONS)
    assert set(health.BUCKET_ACTIONS.values()) <= set(health.ACTION_ORDER)


def test_an_unreadable_pci_bus_is_unknown_for_gpus(tmp_path):
    profile = catalog.get(IB)
    root = write_tree(profile, tmp_path / "sim")
    shutil.rmtree(root / "sys/bus/pci")
    results = health.check_gpus(health.read_host(str(root), profile), profile)
    assert {item["status"] for item in results} == {"unknown"}


def test_another_gpu_than_the_profiles_fails_its_model(tmp_path):
    profile = catalog.get(IB)
    root = write_tree(profile, tmp_path / "sim")
    (root / "sys/bus/pci/devices/0000:15:00.0/device").write_text("0x2335\n")
    results = health.check_gpus(health.read_host(str(root), profile), profile)
    assert failed(results) == [("gpu_model", "0000:15:00.0", "isolate")]
