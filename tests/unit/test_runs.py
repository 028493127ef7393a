# SPDX-License-Identifier: Apache-2.0
"""gpufabric.runs: the inventory's hosts, artifact directories, the progress tally over REAL
ansible-runner events (tests/fixtures/runner_events), and real ansible-runner runs of a small
playbook over local connections."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import pytest

from gpufabric import inventory as inventory_source
from gpufabric import runs
from gpufabric.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runner_events"

INVENTORY = """
[rack1]
gpu-1
gpu-2
[rack2]
gpu-3
[all:vars]
ansible_connection=local
ansible_python_interpreter={python}
"""

# Reads, on the controller, the settings the run was given; writes a file (a change) under a
# directory the test owns; ends with the fact site.yml's last task sets.
PLAYBOOK = """
- name: Runs test
  hosts: all
  gather_facts: false
  tasks:
    - name: Report the settings the run was given
      ansible.builtin.debug:
        msg:
          host_key_checking: "{{ lookup('env', 'ANSIBLE_HOST_KEY_CHECKING') }}"
          forks: "{{ lookup('env', 'ANSIBLE_FORKS') }}"
          pipelining: "{{ lookup('env', 'ANSIBLE_PIPELINING') }}"
          who: "{{ who | default('nobody') }}"
    - name: Write a file per host
      ansible.builtin.copy:
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        content: "hello {{ inventory_hostname }}\\n"
        mode: "0644"
    - name: Summarize whether the host needs a reboot
      ansible.builtin.set_fact:
        gpufabric_reboot_required: false
"""


def fixture_events(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.ini"
    path.write_text(INVENTORY.format(python=sys.executable), encoding="utf-8")
    return path


@pytest.fixture
def playbook(tmp_path: Path) -> Path:
    path = tmp_path / "play.yml"
    path.write_text(PLAYBOOK, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fact cache and control sockets of these runs stay in the test's directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("ANSIBLE_FORKS", "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_PIPELINING"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "state"


# ---------------------------------------------------------------------------
# inventory, artifacts
# ---------------------------------------------------------------------------


def test_inventory_hosts_with_and_without_limit(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert runs.inventory_hosts(str(inventory)) == ["gpu-1", "gpu-2", "gpu-3"]
    assert runs.inventory_hosts(str(inventory), ["rack1:!gpu-2"]) == ["gpu-1"]
    assert runs.inventory_hosts(str(inventory), ["gpu-3", "gpu-1"]) == ["gpu-1", "gpu-3"]
    assert runs.inventory_hosts(str(inventory), ["nomatch"]) == []
    monkeypatch.chdir(inventory.parent)
    assert runs.inventory_hosts("hosts.ini") == ["gpu-1", "gpu-2", "gpu-3"], "a relative path is a file"


USER_INVENTORY_PLUGIN = """
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = r\"\"\"
name: fleet
short_description: One host, for the test
options:
  plugin:
    required: true
    choices: [acme.tools.fleet]
\"\"\"


class InventoryModule(BaseInventoryPlugin):
    NAME = "acme.tools.fleet"

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        inventory.add_host("gpu-9")
        inventory.set_variable("gpu-9", "gpufabric_profile", "aws/p5.48xlarge")
"""


def test_the_inventory_is_listed_with_the_users_ansible_cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An inventory plugin from the collections_path of the user's ansible.cfg lists its hosts, as in a run."""
    project = tmp_path / "project"
    plugins = project / "colls" / "ansible_collections" / "acme" / "tools" / "plugins" / "inventory"
    plugins.mkdir(parents=True)
    (plugins / "fleet.py").write_text(USER_INVENTORY_PLUGIN)
    (plugins.parents[1] / "galaxy.yml").write_text("namespace: acme\nname: tools\nversion: 1.0.0\n")
    (project / "ansible.cfg").write_text("[defaults]\ncollections_path = colls\n")
    (project / "fleet.yml").write_text("plugin: acme.tools.fleet\n")
    monkeypatch.chdir(project)
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    hostvars = inventory_source.host_vars("fleet.yml")
    assert inventory_source.as_play_sees(hostvars["gpu-9"]["gpufabric_profile"]) == "aws/p5.48xlarge"
    assert runs.inventory_hosts("fleet.yml", ["gpu-*"]) == ["gpu-9"]


def test_an_unreadable_inventory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read inventory"):
        runs.inventory_hosts(str(tmp_path / "missing.yml"))


def test_default_artifacts_are_new_directories_in_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_state: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    first = runs.default_artifacts("drift")
    assert first.parent == private_state / "gpufabric" / "runs"
    assert first.name.startswith("drift-") and first.name.endswith("Z")
    assert first.is_dir() and not any(first.iterdir())
    second = runs.default_artifacts("drift")
    assert second != first and second.is_dir()


def test_runs_started_in_the_same_second_never_share_a_directory(
    monkeypatch: pytest.MonkeyPatch, private_state: Path
) -> None:
    """Each run makes its directory with an exclusive mkdir: eight at once, in one second, get eight."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Frozen:
            return cls(2026, 12, 7, 5, 0, 0, tzinfo=tz)

    monkeypatch.setattr(runs, "datetime", Frozen)
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", "0")
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _n: runs.default_artifacts("drift"), range(8)))
    assert sorted(path.name for path in made) == sorted(
        ["drift-20261207T050000Z", *(f"drift-20261207T050000Z-{n}" for n in range(2, 9))]
    )
    assert all(path.is_dir() for path in made)


def test_artifacts_must_be_new_or_empty(tmp_path: Path) -> None:
    runs.check_artifacts(tmp_path / "new")
    runs.check_artifacts(tmp_path)
    (tmp_path / "old").write_text("x")
    with pytest.raises(UserError, match=r"already holds files"):
        runs.check_artifacts(tmp_path)
    with pytest.raises(UserError, match=r"not a directory"):
        runs.check_artifacts(tmp_path / "old")
    with pytest.raises(UserError, match=rf"^--artifacts {tmp_path}/old/run: {tmp_path}/old is a file, not a directory"):
        runs.check_artifacts(tmp_path / "old" / "run")
    with pytest.raises(UserError, match=r"^--artifacts /proc/gpufabric-runs: cannot create a directory in /proc"):
        runs.check_artifacts(Path("/proc/gpufabric-runs"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["old"]


def test_an_inventory_that_is_a_fifo_or_a_device_is_refused_before_ansible_inventory(tmp_path: Path) -> None:
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO (named pipe)"), (Path("/dev/null"), "a device")):
        with pytest.raises(
            UserError, match=rf"^-i {path}: is {re.escape(kind)}, not a file; accepted: an inventory file"
        ):
            inventory_source.read(str(path), env={})


RUN_DIRS = [f"drift-20261201T0{n}0000Z" for n in range(5)] + ["drift-20261201T040000Z-2", "apply-20261201T000000Z"]


def test_default_artifacts_keep_the_last_runs_of_their_kind_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_state: Path
) -> None:
    base = private_state / "gpufabric" / "runs"
    for name in RUN_DIRS:
        (base / name / "check").mkdir(parents=True)
    (base / "drift-20261201T000000Z.txt").write_text("an operator's note\n")
    (base / "drift-19991231T235959Z").write_text("a file named like a run\n")
    (tmp_path / "elsewhere").mkdir()
    (base / "drift-19991231T000000Z").symlink_to(tmp_path / "elsewhere")
    (base / "mine").mkdir()
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", "3")
    new = runs.default_artifacts("drift")
    assert new.is_dir()
    assert sorted(path.name for path in base.iterdir()) == sorted(
        [
            new.name,
            "apply-20261201T000000Z",  # another kind
            "drift-20261201T040000Z",
            "drift-20261201T040000Z-2",  # two kept, and the new run makes three
            "drift-20261201T000000Z.txt",
            "drift-19991231T235959Z",
            "drift-19991231T000000Z",
            "mine",
        ]
    )
    assert (tmp_path / "elsewhere").is_dir()
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", "0")  # keep every run
    runs.default_artifacts("drift")
    assert (base / "drift-20261201T040000Z").is_dir()


def test_keep_runs_one_leaves_only_the_new_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    base = runs.runs_root()
    for name in ("drift-20261201T000000Z", "drift-20261201T010000Z", "apply-20261201T000000Z"):
        (base / name).mkdir(parents=True)
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", "1")
    new = runs.default_artifacts("drift")
    assert sorted(path.name for path in base.iterdir()) == sorted(["apply-20261201T000000Z", new.name])
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", " 2 ")
    runs.default_artifacts("drift")
    assert new.is_dir(), "2 keeps the previous run beside the new one"


@pytest.mark.parametrize("value", ["-1", "abc", "2.5", "99999999", "\u00b2", "\u0663", "1_0", "+3", "0x10"])
def test_a_bad_keep_runs_is_a_user_error(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUFABRIC_KEEP_RUNS", value)
    with pytest.raises(UserError, match=rf"^GPUFABRIC_KEEP_RUNS='{re.escape(value)}' \(environment\): not a count"):
        runs.default_artifacts("apply")


def test_secret_names_and_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFABRIC_SECRET_VARS", "site_pin, other")
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET"):
        assert runs.is_secret(name), name
    for name in ("NEBIUS_IAM_TOKEN", "OCI_CLI_PASSPHRASE", "db_password", "GCP_SERVICE_ACCOUNT_CONTENTS", "site_pin"):
        assert runs.is_secret(name), name
    for name in ("PATH", "AWS_REGION", "ANSIBLE_FORKS", "gpufabric_tier", "SITE_PIN"):
        assert not runs.is_secret(name), name
    value = {"who": "x", "site_pin": "1234", "nested": {"api_token": "t", "list": [{"Password": "p", "ok": 1}]}}
    assert runs.redact(value) == {
        "who": "x",
        "site_pin": runs.REDACTED,
        "nested": {"api_token": runs.REDACTED, "list": [{"Password": runs.REDACTED, "ok": 1}]},
    }


# ---------------------------------------------------------------------------
# Tally (recorded events)
# ---------------------------------------------------------------------------


def test_tally_counts_hosts_from_recorded_events() -> None:
    hosts = ["gpu-clean-1", "gpu-dark-1", "gpu-drift-1", "gpu-failed-1", 'rack"7\\node']
    tally = runs.Tally(hosts, "check")
    task_starts = 0
    events = fixture_events("mixed")
    for event in events[:-1]:
        task_starts += tally.feed(event)
    assert task_starts == sum(1 for event in events if event["event"] == "playbook_on_task_start")
    assert tally.failed == {"gpu-failed-1"}
    assert tally.unreachable == {"gpu-dark-1"}
    assert tally.changed == {"gpu-drift-1", 'rack"7\\node'}
    assert tally.done == 2, "failed and unreachable hosts are done; the others have not reached the last task"
    assert tally.line().startswith("[check] 2/5 hosts done, 2 changed, 1 failed, 1 unreachable | ")
    tally.feed(events[-1])  # playbook_on_stats
    assert tally.done == 5
    assert tally.line() == "[check] 5/5 hosts done, 2 changed, 1 failed, 1 unreachable"


def test_tally_ignores_ignored_failures() -> None:
    tally = runs.Tally(["gpu-drift-1"])
    for event in fixture_events("drifted"):
        tally.feed(event)
    assert tally.failed == set(), "the drifted fixture has an ignore_errors failure"
    assert tally.changed == {"gpu-drift-1"}


# ---------------------------------------------------------------------------
# run_playbook (real ansible-runner, local connections)
# ---------------------------------------------------------------------------


def _messages(run: runs.PlaybookRun, task: str) -> dict[str, Any]:
    return {
        event["event_data"]["host"]: event["event_data"]["res"]["msg"]
        for event in run.events
        if event["event"] == "runner_on_ok" and event["event_data"]["task"] == task
    }


def test_run_keeps_artifacts_checks_host_keys_and_applies_the_tuned_set(
    inventory: Path, playbook: Path, tmp_path: Path, private_state: Path
) -> None:
    lines: list[str] = []
    out = tmp_path / "out"
    out.mkdir()
    run = runs.run_playbook(
        playbook,
        str(inventory),
        # A value holding a template (a catalog path may) stays text: gpufabric's extra variables are data.
        extravars={"out_dir": str(out), "who": "gpufabric {{ 6 * 7 }}"},
        artifacts_dir=tmp_path / "runs" / "apply",
        progress=lines.append,
        label="apply",
    )
    assert (run.rc, run.status) == (0, "successful")
    assert run.hosts == ["gpu-1", "gpu-2", "gpu-3"]
    assert run.artifacts_dir == tmp_path / "runs" / "apply"
    assert {path.name for path in run.artifacts_dir.iterdir()} >= {"gpufabric-run.json", "job_events", "stdout", "rc"}
    assert len(list((run.artifacts_dir / "job_events").glob("*.json"))) == len(run.events)
    counters = [event["counter"] for event in run.events]
    assert counters == sorted(counters)
    assert run.duration_s > 0
    # Host key checking stays on (ansible-runner would turn it off); the tuned set is what Ansible saw.
    seen = _messages(run, "Report the settings the run was given")
    assert seen["gpu-1"] == {
        "host_key_checking": "True",
        "forks": "5",
        "pipelining": "True",
        "who": "gpufabric {{ 6 * 7 }}",
    }
    assert run.settings["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert run.settings["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == str(private_state / "gpufabric" / "facts")
    record = json.loads((run.artifacts_dir / "gpufabric-run.json").read_text())
    assert record["settings"] == "tuned" and record["extravars"]["who"] == "gpufabric {{ 6 * 7 }}"
    assert (out / "gpu-3.txt").read_text() == "hello gpu-3\n"
    # A line at the start, one per task, one at the end (never one per host).
    assert lines[0] == "apply: play.yml on 3 host(s), settings tuned"
    assert (
        lines[1] == "[apply] 0/3 hosts done, 0 changed, 0 failed, 0 unreachable | Report the settings the run was given"
    )
    assert lines[-1].startswith("[apply] 3/3 hosts done, 3 changed, 0 failed, 0 unreachable (")
    assert len(lines) == 2 + 3


def test_check_diff_limit_and_the_users_own_settings(
    inventory: Path, playbook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_FORKS", "2")
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
    out = tmp_path / "out"
    out.mkdir()
    ticks: list[int] = []
    run = runs.run_playbook(
        playbook,
        str(inventory),
        check=True,
        diff=True,
        limit=["rack1"],
        extravars={"out_dir": str(out)},
        artifacts_dir=tmp_path / "check",
        watch=lambda tally: ticks.append(tally.done),
    )
    assert run.rc == 0
    assert run.hosts == ["gpu-1", "gpu-2"]
    assert list(out.iterdir()) == [], "check mode wrote nothing"
    changed = [
        event for event in run.events if event["event"] == "runner_on_ok" and event["event_data"]["res"].get("changed")
    ]
    assert {event["event_data"]["host"] for event in changed} == {"gpu-1", "gpu-2"}
    assert all("diff" in event["event_data"]["res"] for event in changed)
    # What the user exported wins over the set.
    seen = _messages(run, "Report the settings the run was given")
    assert seen["gpu-1"]["forks"] == "2" and seen["gpu-1"]["host_key_checking"] == "False"
    assert "ANSIBLE_FORKS" not in run.settings
    assert ticks and ticks[-1] == 2


def test_stock_settings_leave_ansible_defaults_and_the_users_host_key_checking(
    inventory: Path, playbook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # The user's ./ansible.cfg checks host keys: ansible-runner's False must not fill the unset variable.
    project = tmp_path / "project"
    project.mkdir()
    (project / "ansible.cfg").write_text("[defaults]\nhost_key_checking = yes\n")
    monkeypatch.chdir(project)
    interrupt = signal.getsignal(signal.SIGINT)
    run = runs.run_playbook(
        playbook,
        str(inventory),
        limit=["gpu-2"],
        extravars={"out_dir": str(out)},
        settings="stock",
        artifacts_dir=tmp_path / "stock",
    )
    assert run.rc == 0
    seen = _messages(run, "Report the settings the run was given")
    assert seen == {"gpu-2": {"host_key_checking": "yes", "forks": "", "pipelining": "", "who": "nobody"}}
    # ansible-runner's own SIGINT handler (which only sets its cancel flag) is gone after the run: Ctrl-C interrupts.
    assert signal.getsignal(signal.SIGINT) is interrupt
    assert set(run.settings) == {
        "ANSIBLE_COLLECTIONS_PATH",
        "ANSIBLE_CALLBACK_PLUGINS",
        "ANSIBLE_NOCOLOR",
        "ANSIBLE_HOST_KEY_CHECKING",
        "ANSIBLE_CONFIG",
    }


def test_an_empty_limit_and_used_artifacts_are_refused(inventory: Path, playbook: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="every host"):
        runs.run_playbook(playbook, str(inventory), limit=[], artifacts_dir=tmp_path / "a")
    used = tmp_path / "used"
    used.mkdir()
    (used / "job_events").mkdir()
    with pytest.raises(UserError, match="already holds files"):
        runs.run_playbook(playbook, str(inventory), artifacts_dir=used)


# The secrets reach ansible-playbook (the asserts compare lengths: no value is printed); the command
# file holds none while the run goes on (scrubbed before ansible-playbook starts), nor does anything
# under the artifacts after it.
SECRET_PLAYBOOK = """
- name: Secrets test
  hosts: all
  gather_facts: false
  tasks:
    - name: The environment's credentials and the extra variables reached the run
      ansible.builtin.assert:
        that:
          - lookup('env', 'AWS_SECRET_ACCESS_KEY') | length == 24
          - lookup('env', 'NEBIUS_IAM_TOKEN') | length == 24
          - db_password | length == 24
          - site_pin | length == 24
          - who == 'gpufabric'
    - name: The artifacts' command file holds no secret while the run goes on
      ansible.builtin.assert:
        that: lookup('env', 'AWS_SECRET_ACCESS_KEY') not in lookup('ansible.builtin.file', command_file)
"""
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "fake-aws-secret-0123456789"[:24],
    "AWS_SESSION_TOKEN": "fake-aws-session-0123456"[:24],
    "NEBIUS_IAM_TOKEN": "fake-nebius-token-012345"[:24],
    "GOOGLE_APPLICATION_CREDENTIALS": "/fake/gcp-key-012345.json",
}


def test_secrets_never_rest_in_the_artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUFABRIC_SECRET_VARS", "site_pin")
    hosts = tmp_path / "hosts.ini"
    hosts.write_text(f"gpu-1 ansible_connection=local ansible_python_interpreter={sys.executable}\n", encoding="utf-8")
    playbook = tmp_path / "secrets.yml"
    playbook.write_text(SECRET_PLAYBOOK, encoding="utf-8")
    artifacts = tmp_path / "runs" / "apply"
    extravars = {
        "who": "gpufabric",
        "db_password": "fake-db-password-0123456",
        "site_pin": "fake-site-pin-0123456789",
        "command_file": str(artifacts / "command"),
    }
    run = runs.run_playbook(playbook, str(hosts), extravars=extravars, artifacts_dir=artifacts)
    assert (run.rc, run.status) == (0, "successful"), (run.artifacts_dir / "stdout").read_text()
    secrets = [*SECRETS.values(), extravars["db_password"], extravars["site_pin"]]
    for path in run.artifacts_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not [secret for secret in secrets if secret in text], path
    command = json.loads((run.artifacts_dir / "command").read_text())
    assert command["env"]["AWS_SECRET_ACCESS_KEY"] == runs.REDACTED
    assert command["env"]["PATH"], "only secrets are redacted"
    assert not any("fake" in arg for arg in command["command"]), "extra variables never on the command line"
    record = json.loads((run.artifacts_dir / "gpufabric-run.json").read_text())
    assert record["extravars"] == {**extravars, "db_password": runs.REDACTED, "site_pin": runs.REDACTED}


def test_tally_shortens_a_roles_argument_check_to_its_first_part() -> None:
    tally = runs.Tally(["gpu-1"])
    task = "Validating arguments against arg spec 'main' - Write the fabric catalog's NCCL environment"
    assert tally.feed(
        {"event": "playbook_on_task_start", "event_data": {"role": "gpufabric.cluster.nccl_env", "task": task}}
    )
    assert tally.task == "nccl_env : Validating arguments against arg spec 'main'"


USER_CALLBACK = """
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "mark_start"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        with open(playbook._basedir + "/callback-ran", "w") as mark:
            mark.write("yes")
"""
USER_FILTER = """
class FilterModule:
    def filters(self):
        return {"shout": lambda text: str(text).upper()}
"""


def test_the_users_collections_and_callbacks_load_beside_gpufabrics(
    inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """collections_path and callback_plugins of the user's ansible.cfg, relative to the file as Ansible reads
    them, are joined with gpufabric's collection and ansible-runner's callback: all of them load."""
    project = tmp_path / "project"
    (project / "cb").mkdir(parents=True)
    (project / "cb" / "mark_start.py").write_text(USER_CALLBACK)
    filters = project / "colls" / "ansible_collections" / "acme" / "tools" / "plugins" / "filter"
    filters.mkdir(parents=True)
    (filters / "shout.py").write_text(USER_FILTER)
    (filters.parents[1] / "galaxy.yml").write_text("namespace: acme\nname: tools\nversion: 1.0.0\n")
    (project / "ansible.cfg").write_text(
        "[defaults]\ncollections_path = colls\ncallback_plugins = cb\ncallbacks_enabled = mark_start\n"
    )
    playbook = project / "play.yml"
    playbook.write_text(
        "- name: Use both collections\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Use the user's filter\n"
        "      ansible.builtin.debug:\n        msg: \"{{ 'fabric' | acme.tools.shout }}\"\n"
        "    - name: Summarize whether the host needs a reboot\n"
        "      ansible.builtin.set_fact:\n        gpufabric_reboot_required: false\n"
    )
    monkeypatch.chdir(project)
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    run = runs.run_playbook(playbook, str(inventory), limit=["gpu-1"], settings="stock", artifacts_dir=tmp_path / "r")
    assert run.rc == 0, (tmp_path / "r" / "stdout").read_text()
    assert _messages(run, "Use the user's filter") == {"gpu-1": "FABRIC"}
    assert (project / "callback-ran").read_text() == "yes", "the user's callback ran beside ansible-runner's"
    paths = run.settings["ANSIBLE_COLLECTIONS_PATH"].split(":")
    assert paths[1:] == [str(project / "colls")] and paths[0].endswith(runs.collections_path().name)
