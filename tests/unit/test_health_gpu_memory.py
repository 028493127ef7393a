# SPDX-License-Identifier: Apache-2.0
"""GPU memory and clock verdicts from nvidia-smi's CSV answers (pure Python, no Ansible).

The shape of the lines is nvidia-smi's ``--format=csv,noheader``: one line per GPU, the fields in the order asked,
separated by ", " (as in the CSV output quoted in XueSongTap/XueSongTap.github.io
_posts/2024-01-04-nvidia-smi-more.md, read 2026-12-07), a bus id as nvidia-smi prints it ("00000000:4F:00.0", with an
8-digit domain, in the nvidia-smi tables quoted by thamada/nvidia-smi nvsim/A40x10_smi.py) and "[N/A]" where a GPU
does not report a field (nvidia-smi(1): "Any unsupported data is indicated by a N/A"). The values are SIMULATED.
Whether remapped_rows.pending/failure print 0/1 or No/Yes is UNVERIFIED, so both are tested.
"""

from __future__ import annotations

from gpufabric.collection import module_utils

health = module_utils("health")

# pci.bus_id, driver_version, vbios_version, ecc uncorrected volatile, aggregate, retired_pages.pending,
# retired_pages.double_bit.count, clocks_throttle_reasons.active
HEALTHY = "00000000:1C:00.0, 550.90.07, 96.00.89.00.01, 0, 2, [N/A], [N/A], 0x0000000000000001"
OLD_GPU = "00000000:3B:00.0, 470.82.01, 88.00.4F.00.09, 0, 0, Yes, 1, 0x0000000000000000"


def gpus(*lines: str) -> list[dict[str, str]]:
    rows = health.parse_smi_csv("\n".join(lines) + "\n", health.SMI_GPU_FIELDS)
    assert rows is not None
    return rows


def remaps(*lines: str) -> list[dict[str, str]]:
    rows = health.parse_smi_csv("\n".join(lines) + "\n", health.SMI_REMAP_FIELDS)
    assert rows is not None
    return rows


def outcome(results: list[dict[str, object]]) -> list[tuple[object, object, object, object]]:
    return [(item["check"], item["subject"], item["status"], item["action"]) for item in results]


def test_a_healthy_gpu_passes_and_its_lifetime_count_is_evidence_only():
    results = health.check_gpu_memory(gpus(HEALTHY), remaps("00000000:1C:00.0, No, No, 0"))
    assert outcome(results) == [
        ("ecc_uncorrected", "0000:1c:00.0", "pass", None),
        ("row_remap", "0000:1c:00.0", "pass", None),
    ]
    assert results[0]["evidence"] == {"uncorrected_volatile": 0, "uncorrected_aggregate": 2}


def test_uncorrectable_errors_since_the_driver_loaded_ask_for_a_gpu_reset():
    line = HEALTHY.replace(", 0, 2,", ", 3, 5,")
    [ecc, _remap] = health.check_gpu_memory(gpus(line), remaps("00000000:1C:00.0, 0, 0, 0"))
    assert (ecc["status"], ecc["action"]) == ("fail", "reset_gpu")
    assert ecc["message"] == "GPU 0000:1c:00.0: 3 uncorrectable ECC errors since the driver loaded"


def test_a_pending_remap_asks_for_a_reset_and_a_failed_one_isolates():
    rows = gpus(HEALTHY, HEALTHY.replace("1C", "1D"))
    results = health.check_gpu_memory(rows, remaps("00000000:1C:00.0, Yes, No, 1", "00000000:1D:00.0, 1, 1, 8"))
    assert [entry for entry in outcome(results) if entry[2] != "pass"] == [
        ("row_remap_pending", "0000:1c:00.0", "fail", "reset_gpu"),
        ("row_remap_failure", "0000:1d:00.0", "fail", "isolate"),
    ]


def test_pages_pending_retirement_on_an_older_gpu_ask_for_a_reboot():
    results = health.check_gpu_memory(gpus(OLD_GPU), remaps())
    assert outcome(results) == [
        ("ecc_uncorrected", "0000:3b:00.0", "pass", None),
        ("row_remap", "0000:3b:00.0", "unknown", None),
        ("retired_pages_pending", "0000:3b:00.0", "fail", "reboot"),
    ]


def test_no_nvidia_smi_is_unknown_never_pass():
    assert outcome(health.check_gpu_memory(None, None, "nvidia-smi: not found")) == [
        ("gpu_memory", "gpus", "unknown", None)
    ]
    assert outcome(health.check_clock_events(None)) == [("clock_events", "gpus", "unknown", None)]
    assert health.check_gpu_memory([], None)[0]["status"] == "unknown"


def test_ecc_not_reported_is_unknown():
    line = HEALTHY.replace(", 0, 2,", ", [N/A], [N/A],")
    [ecc, remap] = health.check_gpu_memory(gpus(line), None)
    assert (ecc["status"], remap["status"]) == ("unknown", "unknown")


def test_thermal_and_power_slowdowns_fail_and_idle_or_power_cap_pass():
    rows = gpus(
        HEALTHY,  # 0x1: idle
        HEALTHY.replace("1C", "1D").replace("0x0000000000000001", "0x0000000000000004"),  # SW power cap
        HEALTHY.replace("1C", "1E").replace("0x0000000000000001", "0x0000000000000048"),  # HW slowdown + thermal
        HEALTHY.replace("1C", "1F").replace("0x0000000000000001", "[Not Supported]"),
    )
    results = health.check_clock_events(rows)
    assert outcome(results) == [
        ("clock_events", "0000:1c:00.0", "pass", None),
        ("clock_events", "0000:1d:00.0", "pass", None),
        ("clock_events", "0000:1e:00.0", "fail", "monitor"),
        ("clock_events", "0000:1f:00.0", "unknown", None),
    ]
    assert results[2]["evidence"]["faults"] == ["hw_slowdown", "hw_thermal_slowdown"]


def test_lines_that_are_no_gpu_are_left_out_and_versions_are_collected():
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n" + HEALTHY + "\n"
    assert health.parse_smi_csv(text, health.SMI_GPU_FIELDS) == gpus(HEALTHY)
    assert health.parse_smi_csv(None, health.SMI_GPU_FIELDS) is None
    reading = {"hca_firmware": {"mlx5_0": "28.39.1002", "mlx5_1": "28.39.1002", "mlx5_2": None}, "nccl": None}
    assert health.host_versions(gpus(HEALTHY, OLD_GPU), reading) == {
        "driver": ["470.82.01", "550.90.07"],
        "vbios": ["88.00.4F.00.09", "96.00.89.00.01"],
        "hca_firmware": ["28.39.1002"],
        "nccl": [],
    }
