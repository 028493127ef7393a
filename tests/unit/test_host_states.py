# SPDX-License-Identifier: Apache-2.0
"""A host gpufabric does not manage is never reported clean, and plan --probe, apply and drift agree.

Real runs of the real site.yml (drift, apply --check) and of plan --probe over one inventory:
- typo:      gpufabric_profile mistyped, and unreachable (SSH to a closed port on 127.0.0.1)
- bare:      no profile variable at all (a local connection; its hardware root an empty directory)
- parked:    a good profile, excluded on purpose with gpufabric_managed: false
site.yml ends all three before connecting, so the runs take seconds and touch nothing here.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

EXPECTED = {"typo": "unknown_profile", "bare": "no_profile", "parked": "excluded"}


def inventory(tmp_path: Path) -> Path:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "empty-root").mkdir()
    hosts = {
        "typo": {"gpufabric_profile": "gcp/a3-megagpu-8gg", "ansible_host": "127.0.0.1", "ansible_port": 1},
        "bare": {**local, "gpufabric_hw_root": str(tmp_path / "empty-root")},
        "parked": {**local, "gpufabric_profile": "aws/p5.48xlarge", "gpufabric_managed": False},
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}), encoding="utf-8")
    return path


def test_drift_apply_and_plan_agree_that_hosts_without_a_profile_are_not_managed(gpufabric, tmp_path: Path) -> None:
    inv = str(inventory(tmp_path))
    reports = {name: tmp_path / name for name in ("drift.json", "drift.xml", "drift.prom")}
    written = ["--json-file", reports["drift.json"], "--junit", reports["drift.xml"], "--prom", reports["drift.prom"]]
    drift = gpufabric("drift", "-i", inv, "--artifacts", str(tmp_path / "drift"), *map(str, written))
    assert drift.returncode == 1, drift.stdout + drift.stderr
    report = json.loads(reports["drift.json"].read_text())
    assert report["exit_code"] == 1 and report["state"] == "unmanaged"
    assert {name: host["unmanaged"]["code"] for name, host in report["hosts"].items()} == EXPECTED
    assert {host["state"] for host in report["hosts"].values()} == {"unmanaged"}
    assert "UNMANAGED (unknown_profile)" in drift.stdout and "CLEAN" not in drift.stdout

    suites = {suite.get("name"): suite for suite in ET.parse(reports["drift.xml"]).getroot()}
    assert suites["typo"].find("testcase/failure").get("type") == "unmanaged"
    assert suites["bare"].find("testcase/failure").get("type") == "unmanaged"
    assert suites["parked"].find("testcase/skipped") is not None
    prom = reports["drift.prom"].read_text()
    assert 'gpufabric_drift_host_unmanaged{code="unknown_profile",host="typo"} 1.0' in prom
    assert "gpufabric_drift_exit_code 1.0" in prom

    apply = gpufabric("apply", "--check", "-i", inv, "--artifacts", str(tmp_path / "apply"))
    assert apply.returncode == 1, apply.stdout + apply.stderr
    assert apply.stdout.count("UNMANAGED") == 3

    plan = gpufabric("plan", "--probe", "--json", "-i", inv)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    planned = json.loads(plan.stdout)["hosts"]
    assert {name: host["unmanaged"]["code"] for name, host in planned.items()} == EXPECTED
    assert planned["typo"]["probe"]["reachable"] is False
