# SPDX-License-Identifier: Apache-2.0
"""`gpufabric health`: the real command over a local-connection inventory of SIMULATED hosts (each its own sysfs
tree and canned kernel log): a healthy one, a faulty one, a host without a profile; the table, --json, --previous
and the exit codes (0 healthy, 2 unhealthy, 1 a host not judged or bad input). The event reading alone, on
events shaped as ansible-runner's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric import health
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError
from gpufabric.simulated_hw import Faults, write_tree

catalog = plugin_utils("fabric_catalog").load_catalog()
PROFILE = "baremetal/hgx-h100-ib-ndr"
HEALTHY_LOG = "kernel: Linux version 6.1.0-28-amd64\n"
XID_79 = "kernel: NVRM: Xid (PCI:0000:1c:00): 79, GPU has fallen off the bus.\n"


def host_line(tmp_path: Path, name: str, faults: Faults | None = None, log: str = HEALTHY_LOG) -> str:
    root = write_tree(catalog.get(PROFILE), tmp_path / name, faults)
    (tmp_path / f"{name}.log").write_text(log, encoding="utf-8")
    # nvidia-smi's answers for a healthy host: lines in its --format=csv,noheader shape, SIMULATED values (the
    # shape's sources are in tests/unit/test_health_gpu_memory.py).
    smi = tmp_path / f"{name}-smi"
    smi.mkdir()
    devices = sorted((root / "sys/bus/pci/devices").iterdir())
    buses = [f"0000{path.name.upper()}" for path in devices if (path / "class").read_text().startswith("0x030")]
    gpu_line = ", 550.90.07, 96.00.89.00.01, 0, 0, [N/A], [N/A], 0x0000000000000001\n"
    (smi / "query-gpu.csv").write_text("".join(bus + gpu_line for bus in buses), encoding="utf-8")
    (smi / "query-remapped-rows.csv").write_text("".join(f"{bus}, 0, 0, 0\n" for bus in buses), encoding="utf-8")
    # nvidia-smi nvlink -s in the shape tests/unit/test_health_nvlink.py sources; 18 links each, SIMULATED rates.
    links = "".join(f"         Link {link}: 25.000 GB/s\n" for link in range(18))
    nvlink = "".join(f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: GPU-{index})\n{links}" for index in range(len(buses)))
    (smi / "nvlink-status.txt").write_text(nvlink, encoding="utf-8")
    return (
        f"{name} ansible_connection=local ansible_python_interpreter={sys.executable} ansible_become=false "
        f"gpufabric_profile={PROFILE} gpufabric_hw_root={root} health_kernel_log_file={tmp_path / f'{name}.log'} "
        f'health_nvidia_smi_dir={smi} health_service_states=\'{{"nvidia-fabricmanager": "active"}}\''
    )


def inventory(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "hosts"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_healthy_and_an_unhealthy_host(gpufabric: Any, tmp_path: Path) -> None:
    hosts = inventory(tmp_path, host_line(tmp_path, "good"), host_line(tmp_path, "bad", Faults(nic_down=3), XID_79))
    quarantine, junit = tmp_path / "quarantine.yml", tmp_path / "health.xml"
    first = gpufabric(
        "health",
        "-i",
        str(hosts),
        "--json",
        "--artifacts",
        str(tmp_path / "run1"),
        "--quarantine",
        str(quarantine),
        "--junit",
        str(junit),
    )
    assert first.returncode == 2, first.stderr
    assert list(yaml.safe_load(quarantine.read_text())["all"]["children"]["gpufabric_quarantine"]["hosts"]) == ["bad"]
    assert '<failure message="mlx5_3/1 is DOWN' in junit.read_text()
    report = json.loads(first.stdout)
    assert report["exit_code"] == 2
    good, bad = report["hosts"]["good"], report["hosts"]["bad"]
    # The first run has no earlier counters: those checks are unknown, and the healthy host is not "pass".
    assert (good["status"], good["counts"]["fail"], good["counts"]["unknown"]) == ("unknown", 0, 16)
    assert (bad["status"], bad["action"]) == ("fail", "isolate")
    assert sorted((item["check"], item["action"]) for item in bad["verdicts"] if item["status"] == "fail") == [
        ("fabric_port", "isolate"),
        ("xid", "reboot"),
    ]
    assert "gpufabric health" in first.stderr and "mlx5_3/1 is DOWN" in first.stderr

    # With the first report as --previous, the counters compare: the healthy host passes every check.
    (tmp_path / "first.json").write_text(first.stdout, encoding="utf-8")
    hosts = inventory(tmp_path, host_line(tmp_path, "good2"))
    previous = {"hosts": {"good2": {"port_counters": good["port_counters"]}}}
    (tmp_path / "previous.json").write_text(json.dumps(previous), encoding="utf-8")
    second = gpufabric(
        "health", "-i", str(hosts), "--previous", str(tmp_path / "previous.json"), "--artifacts", str(tmp_path / "run2")
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "PASS" in second.stdout and "1 pass (exit 0)" in second.stdout


def test_a_host_without_a_profile_is_not_judged_and_exits_1(gpufabric: Any, tmp_path: Path) -> None:
    hosts = inventory(
        tmp_path,
        host_line(tmp_path, "good"),
        f"stray ansible_connection=local ansible_python_interpreter={sys.executable} ansible_become=false",
    )
    result = gpufabric("health", "-i", str(hosts), "--json", "--artifacts", str(tmp_path / "run"))
    assert result.returncode == 1, result.stderr
    stray = json.loads(result.stdout)["hosts"]["stray"]
    assert stray["status"] == "error"
    assert stray["error"].startswith("not managed (no_profile)")


@pytest.mark.parametrize(
    ("content", "names"),
    [
        (b"{", "not JSON"),
        (b"[]", "no `hosts` mapping"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_bad_previous_report_is_one_line(gpufabric: Any, tmp_path: Path, content: bytes, names: str) -> None:
    (tmp_path / "previous.json").write_bytes(content)
    result = gpufabric("health", "-i", "localhost,", "--previous", str(tmp_path / "previous.json"))
    assert result.returncode == 1
    assert names in result.stderr and "Traceback" not in result.stderr


def test_events_become_host_verdicts() -> None:
    summary = {"status": "fail", "action": "reboot", "counts": {"pass": 1, "fail": 1, "unknown": 0}}
    events = [
        {
            "event": "runner_on_ok",
            "event_data": {
                "host": "a",
                "task_action": "gpufabric.cluster.health_info",
                "res": {"summary": summary, "verdicts": [{"status": "fail", "message": "m"}], "port_counters": {}},
            },
        },
        {
            "event": "runner_on_ok",
            "event_data": {
                "host": "b",
                "task_action": "ansible.builtin.set_fact",
                "res": {"ansible_facts": {"gpufabric_unmanaged": {"code": "excluded", "reason": "on purpose"}}},
            },
        },
        {"event": "runner_on_unreachable", "event_data": {"host": "c", "res": {"msg": "no route"}}},
    ]
    result = health.HealthResult(health.summarize(events, ["a", "b", "c", "d"]))
    assert {name: host.status for name, host in result.hosts.items()} == {
        "a": "fail",
        "b": "excluded",
        "c": "error",
        "d": "error",
    }
    assert result.hosts["c"].error == "unreachable: no route"
    assert result.hosts["d"].error == "no health verdicts came back"
    assert result.exit_code == 1
    del result.hosts["c"], result.hosts["d"]
    assert result.exit_code == 2


def test_read_previous_takes_each_hosts_counters(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"hosts": {"a": {"port_counters": {"mlx5_0/1": {"link_downed": 1}}}, "b": {}}}))
    assert health.read_previous(path) == {"a": {"mlx5_0/1": {"link_downed": 1}}}
    with pytest.raises(UserError, match="not a regular file"):
        health.read_previous(tmp_path)
