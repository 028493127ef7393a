# SPDX-License-Identifier: Apache-2.0
"""gpufabric apply runs the real playbooks/site.yml: --serial and --max-fail reach its play keywords
(Ansible templates them from extra variables), and its last task reports reboots, in check mode too.

Hosts are local connections; a catalog override narrows the profile's roles to nccl_env, which
writes under the test's directory (host variables move its files there), so no role touches this
machine. The host `stranger` has no profile and opts into one that does not exist: it fails early.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gpufabric import apply, runs
from gpufabric.playbook_args import PlaybookArgs
from tests.conftest import nccl_env_paths

CATALOG = {"profiles": {"gcp/a3-megagpu-8g": {"tiers": {"best": {"roles": ["nccl_env"]}}}}}


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("GPUFABRIC_CATALOG", raising=False)
    override = tmp_path / "catalog.yml"
    override.write_text(yaml.safe_dump(CATALOG), encoding="utf-8")

    def host(name: str, **variables: object) -> dict[str, object]:
        (tmp_path / name).mkdir()
        return {
            "gpufabric_profile": "gcp/a3-megagpu-8g",
            **nccl_env_paths(tmp_path / name),
            **variables,
        }

    inventory = {
        "fleet": {
            "hosts": {
                "node-a": host("node-a", sriov_reboot_required=True),
                "node-b": host("node-b"),
                "stranger": {
                    "gpufabric_cloud": "gcp",
                    "gpufabric_instance_type": "n2-standard-8",
                    "gpufabric_unknown_hosts_profile": "gcp/a9-hyper",
                },
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "gpufabric_catalog_files": [str(override)],
                # This machine has no gVNICs for the plan role to read: the names Google's Ubuntu images give
                # a3-mega's (tests/fixtures/nic_names.yml) fill the catalog's {nics.*} placeholders.
                "gpufabric_nic_names": {
                    "management": ["enp0s12"],
                    "gpu": ["enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0"],
                },
            },
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory), encoding="utf-8")
    return path


def run(fleet: Path, name: str, **options: object) -> apply.ApplyResult:
    return apply.execute(
        apply.ApplyOptions(str(fleet), **options),  # type: ignore[arg-type]
        artifacts_dir=fleet.parent / "runs" / name,
    )


def events_of(result: apply.ApplyResult, kind: str) -> list[dict]:
    return [event for event in result.run.events if event["event"] == kind]


def test_site_play_keywords_and_reboot_summary(fleet: Path) -> None:
    conf = fleet.parent / "node-a" / "nccl.conf"

    # Check mode on fresh hosts: nothing written, the summary task still runs and changes nothing;
    # by default a failing host stops nobody else.
    checked = run(fleet, "check", check=True)
    assert {name: host.state for name, host in checked.hosts.items()} == {
        "node-a": "changed",
        "node-b": "changed",
        "stranger": "failed",
    }
    assert not conf.exists()
    assert (checked.hosts["node-a"].reboot_required, checked.hosts["node-b"].reboot_required) == (True, False)
    assert checked.hosts["stranger"].reboot_required is None
    assert "gpufabric_unknown_hosts_profile 'gcp/a9-hyper' is not in the fabric catalog" in str(
        checked.hosts["stranger"].error
    )
    summaries = [
        event
        for event in events_of(checked, "runner_on_ok")
        if event["event_data"]["task"] == "Summarize whether the host needs a reboot"
    ]
    assert len(summaries) == 2 and not any(event["event_data"]["res"]["changed"] for event in summaries)
    assert len(events_of(checked, "playbook_on_play_start")) == 1
    assert checked.exit_code == 1

    # --serial 1: one batch per host (three plays), templated from the extra variable.
    serial = run(fleet, "serial", serial="1")
    assert len(events_of(serial, "playbook_on_play_start")) == 3
    assert [serial.hosts[name].state for name in ("node-a", "node-b", "stranger")] == ["changed", "changed", "failed"]
    assert conf.read_text().count("NCCL_") > 3

    # --max-fail 0%: the stranger's failure stops the play for the others, who did not finish.
    stopped = run(fleet, "max-fail", max_fail="0%")
    assert events_of(stopped, "playbook_on_no_hosts_remaining")
    assert [stopped.hosts[name].state for name in ("node-a", "node-b", "stranger")] == ["stopped", "stopped", "failed"]
    assert "--max-fail" in str(stopped.hosts["node-a"].error)
    assert stopped.exit_code == 1


def test_default_artifacts_and_no_host(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fleet.parent)
    with pytest.raises(apply.UserError, match=r"has no host matching --limit 'nobody'"):
        apply.execute(apply.ApplyOptions(str(fleet), limit="nobody"))
    result = apply.execute(apply.ApplyOptions(str(fleet), limit="node-b", check=True))
    assert {name: host.state for name, host in result.hosts.items()} == {"node-b": "changed"}
    assert result.exit_code == 0
    assert result.run.artifacts_dir.parent.parent == fleet.parent / "state" / "gpufabric" / runs.RUNS_DIR
    assert result.run.artifacts_dir.name == "apply"
    assert result.run.artifacts_dir.parent.name.startswith("apply-")


def test_tags_select_roles_on_a_resolved_plan(fleet: Path) -> None:
    # fabric_facts first: it reads the hardware at / and fails on this machine, which has none.
    (fleet.parent / "catalog.yml").write_text(
        yaml.safe_dump(
            {"profiles": {"gcp/a3-megagpu-8g": {"tiers": {"best": {"roles": ["fabric_facts", "nccl_env"]}}}}}
        ),
        encoding="utf-8",
    )
    # The role's name selects it alone; the plan, the record and the reboot summary run for every selection.
    only = run(fleet, "tags", limit="node-b", check=True, args=PlaybookArgs(tags=("nccl_env",)))
    assert {name: host.state for name, host in only.hosts.items()} == {"node-b": "changed"}
    assert only.hosts["node-b"].reboot_required is False and only.exit_code == 0
    # Ansible tags each role's argument validation always: that is all fabric_facts ran.
    ran = {
        event["event_data"].get("role")
        for event in events_of(only, "runner_on_ok")
        if event["event_data"]["resolved_action"] != "ansible.builtin.validate_argument_spec"
    }
    assert "nccl_env" in ran and "fabric_facts" not in ran
    # The group tag selects its roles: fabric takes fabric_facts and nccl_env, so the hardware check fails.
    fabric = run(fleet, "fabric", limit="node-b", check=True, args=PlaybookArgs(tags=("fabric",)))
    assert fabric.hosts["node-b"].state == "failed"
    assert "does not have the hardware of gcp/a3-megagpu-8g" in str(fabric.hosts["node-b"].error)
