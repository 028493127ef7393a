# SPDX-License-Identifier: Apache-2.0
"""The health_info module through real ``ansible``, in check mode, over a SIMULATED sysfs tree.

The kernel log comes from a file, or from stand-in ``journalctl``/``dmesg`` first on PATH that print canned lines
(SIMULATED text after the driver's "NVRM: Xid (PCI:...): NN," prefix).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import Faults, write_tree
from tests.fixtures import ansible_module

catalog = plugin_utils("fabric_catalog").load_catalog()
IB = "baremetal/hgx-h100-ib-ndr"
HARDWARE_KEYS = ("fabric", "gpu", "nics")


def hardware(name: str = IB) -> dict[str, Any]:
    profile = catalog.get(name)
    return {key: profile[key] for key in HARDWARE_KEYS}


def run(ansible_env: dict[str, str], args: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    return ansible_module.run(ansible_env, "health_info", "-a", json.dumps(args), "--check", env=env)


def stand_in(bin_dir: Path, name: str, rc: int, out: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({out!r})\nsys.exit({rc})\n")
    path.chmod(0o755)


def test_a_faulty_host_in_check_mode_reports_verdicts_and_changes_nothing(ansible_env, tmp_path):
    root = write_tree(catalog.get(IB), tmp_path / "sim", Faults(gpu_link_width=(0, 8), link_downed=(2, 1)))
    log = tmp_path / "kern.log"
    log.write_text("kernel: NVRM: Xid (PCI:0000:1c:00): 79, GPU has fallen off the bus.\n")
    first = run(ansible_env, {"hardware": hardware(), "root": str(root), "kernel_log_file": str(log)})
    assert "failed" not in first, first
    assert first["changed"] is False
    assert first["kernel_log_source"] == str(log)
    fails = [(item["check"], item["subject"], item["action"]) for item in first["verdicts"] if item["status"] == "fail"]
    assert fails == [("pcie_link", "0000:15:00.0", "reboot"), ("xid", "0000:1c:00/xid79", "reboot")]
    assert first["summary"]["status"] == "fail"
    assert first["port_counters"]["mlx5_2/1"] == {"link_downed": 1, "symbol_error": 0}

    # The next run compares with the first one's counters: one more flap on mlx5_2.
    (root / "sys/class/infiniband/mlx5_2/ports/1/counters/link_downed").write_text("4\n")
    second = run(
        ansible_env,
        {
            "hardware": hardware(),
            "root": str(root),
            "kernel_log_file": str(log),
            "previous_counters": first["port_counters"],
        },
    )
    flaps = [item for item in second["verdicts"] if item["check"] == "link_downed" and item["status"] == "fail"]
    assert [(item["subject"], item["evidence"]["previous"], item["evidence"]["current"]) for item in flaps] == [
        ("mlx5_2/1", 1, 4)
    ]


def test_the_kernel_log_falls_back_to_dmesg_and_is_unknown_when_neither_answers(ansible_env, tmp_path):
    root = write_tree(catalog.get(IB), tmp_path / "sim")
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "journalctl", 1, "")
    stand_in(bin_dir, "dmesg", 0, "[ 5.1] NVRM: Xid (PCI:0000:16:00): 94, pid=1, name=x, Contained: SM (0x1).\n")
    env = {"PATH": f"{bin_dir}{os.pathsep}{ansible_env['PATH']}"}
    result = run(ansible_env, {"hardware": hardware(), "root": str(root)}, env)
    assert result["kernel_log_source"] == "dmesg"
    [xid] = [item for item in result["verdicts"] if item["check"] == "xid"]
    assert (xid["status"], xid["action"]) == ("fail", "monitor")

    stand_in(bin_dir, "dmesg", 1, "")
    result = run(ansible_env, {"hardware": hardware(), "root": str(root)}, env)
    [xid] = [item for item in result["verdicts"] if item["check"] == "xid"]
    assert xid["status"] == "unknown"
    assert result["kernel_log_source"].startswith("journalctl: rc 1")


def test_a_healthy_host_passes(ansible_env, tmp_path):
    root = write_tree(catalog.get(IB), tmp_path / "sim")
    log = tmp_path / "kern.log"
    log.write_text("kernel: Linux version 6.1.0-28-amd64\n")
    previous = {f"mlx5_{index}/1": {"link_downed": 0, "symbol_error": 0} for index in range(8)}
    # nvidia-smi's answers for the tree's 8 GPUs, in its --format=csv,noheader shape (SIMULATED values; the shape's
    # sources are in tests/unit/test_health_gpu_memory.py).
    smi = tmp_path / "smi"
    smi.mkdir()
    buses = [
        path.name
        for path in sorted((root / "sys/bus/pci/devices").iterdir())
        if (path / "class").read_text().startswith("0x030")
    ]
    (smi / "query-gpu.csv").write_text(
        "".join(
            f"0000{bus.upper()}, 550.90.07, 96.00.89.00.01, 0, 0, [N/A], [N/A], 0x0000000000000001\n" for bus in buses
        )
    )
    (smi / "query-remapped-rows.csv").write_text("".join(f"0000{bus.upper()}, 0, 0, 0\n" for bus in buses))
    args = {
        "hardware": hardware(),
        "root": str(root),
        "kernel_log_file": str(log),
        "previous_counters": previous,
        "nvidia_smi_dir": str(smi),
    }
    result = run(ansible_env, args)
    assert result["summary"] == {"status": "pass", "action": None, "counts": {"pass": 75, "fail": 0, "unknown": 0}}
    assert (result["nvidia_smi_source"], result["versions"]) == (
        str(smi),
        {"driver": ["550.90.07"], "vbios": ["96.00.89.00.01"], "hca_firmware": [], "nccl": []},
    )


def test_bad_input_is_one_clear_error(ansible_env, tmp_path):
    result = run(ansible_env, {"hardware": {"fabric": "infiniband"}, "root": str(tmp_path)})
    assert result["failed"] is True
    assert result["msg"].startswith("hardware lacks gpu, nics: pass the host's plan's hardware")
    result = run(ansible_env, {"hardware": hardware(), "counter_increase_allowed": {"crc": 1}})
    assert result["failed"] is True
    assert result["msg"] == (
        "counter_increase_allowed: {'crc': 1} is not accepted; accepted: link_downed, symbol_error, each a whole number"
    )
