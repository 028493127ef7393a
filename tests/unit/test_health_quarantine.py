# SPDX-License-Identifier: Apache-2.0
"""Quarantine: the inventory group `gpufabric health --quarantine` writes, the limit apply and verify run with
(checked by ansible-inventory itself), and the JUnit report. Verdicts are hand-made; no playbook runs."""

from __future__ import annotations

from pathlib import Path

import junitparser
import yaml

from gpufabric import inventory as inventory_source
from gpufabric import runs
from gpufabric.health import HealthResult, HostHealth, quarantine_inventory, to_junit

PORT_DOWN = {"check": "fabric_port", "subject": "mlx5_3/1", "status": "fail", "action": "isolate", "message": "down"}
XID = {"check": "xid", "subject": "0000:1c:00/xid79", "status": "fail", "action": "reboot", "message": "Xid 79"}
PASSED = {"check": "gpu_count", "subject": "gpus", "status": "pass", "action": None, "message": "8 GPUs"}
UNKNOWN = {"check": "gpu_memory", "subject": "gpus", "status": "unknown", "action": None, "message": "no answer"}


def fleet() -> HealthResult:
    return HealthResult(
        {
            "gpu-1": HostHealth("pass", verdicts=[PASSED]),
            "gpu-2": HostHealth("fail", "isolate", verdicts=[PASSED, XID, PORT_DOWN]),
            "gpu-3": HostHealth("unknown", verdicts=[PASSED, UNKNOWN]),
            "gpu-4": HostHealth("error", error="unreachable: no route"),
        }
    )


def test_the_quarantine_group_holds_the_failed_hosts_only(tmp_path: Path) -> None:
    text = quarantine_inventory(fleet())
    assert text.startswith("# Written by `gpufabric health --quarantine`")
    assert yaml.safe_load(text) == {
        "all": {
            "children": {
                "gpufabric_quarantine": {
                    "hosts": {
                        "gpu-2": {
                            "gpufabric_quarantine_action": "isolate",
                            "gpufabric_quarantine_checks": ["fabric_port", "xid"],
                        }
                    }
                }
            }
        }
    }
    healthy = quarantine_inventory(HealthResult({"gpu-1": HostHealth("pass")}))
    assert yaml.safe_load(healthy)["all"]["children"]["gpufabric_quarantine"] == {"hosts": {}}


def test_apply_and_verify_leave_the_quarantined_hosts_out(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.ini").write_text("[rack7]\ngpu-1\ngpu-2\n[rack8]\ngpu-3\n", encoding="utf-8")
    # (Without the group the limit stays as given: every apply and verify test runs that path.)
    (inventory / "gpufabric-quarantine.yml").write_text(quarantine_inventory(fleet()), encoding="utf-8")
    hosts, limit, skipped = runs.hosts_outside_quarantine(str(inventory), ["rack7"])
    assert (hosts, limit, skipped) == (["gpu-1"], ["rack7:!gpufabric_quarantine"], ["gpu-2"])
    # The limit handed to the playbook selects the same hosts in Ansible's own reading.
    assert inventory_source.hosts(inventory_source.read(str(inventory), limit)) == {"gpu-1"}


def test_the_junit_report_has_drifts_shape(tmp_path: Path) -> None:
    path = tmp_path / "health.xml"
    path.write_text(to_junit(fleet()), encoding="utf-8")
    report = junitparser.JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in report}
    assert list(suites) == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    assert (report.tests, report.failures, report.errors, report.skipped) == (7, 2, 1, 1)
    failures = [case for case in suites["gpu-2"] if case.result]
    assert [(case.name, case.classname, case.result[0].type) for case in failures] == [
        ("xid 0000:1c:00/xid79", "gpu-2", "reboot"),
        ("fabric_port mlx5_3/1", "gpu-2", "isolate"),
    ]


def test_without_a_limit_the_whole_inventory_but_the_group_runs(monkeypatch) -> None:
    listing = {"ungrouped": {"hosts": ["gpu-1", "gpu-2"]}, "gpufabric_quarantine": {"hosts": ["gpu-2"]}}
    monkeypatch.setattr(runs.inventory_source, "read", lambda inventory, limit, env: listing)
    assert runs.hosts_outside_quarantine("fleet.yml") == (["gpu-1"], ["all:!gpufabric_quarantine"], ["gpu-2"])
    listing.pop("gpufabric_quarantine")
    assert runs.hosts_outside_quarantine("fleet.yml", ["rack7"]) == (["gpu-1", "gpu-2"], ["rack7"], [])
