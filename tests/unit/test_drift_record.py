# SPDX-License-Identifier: Apache-2.0
"""The fast drift path's record and check: the state readers, and drift_record / drift_check through real
`ansible` on this machine (its own files and dpkg database; units through a stand-in systemctl answer)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils
from tests.fixtures import ansible_module

state = module_utils("drift_state")
PLAN = {"profile": "lab/sim-h100-roce", "tier": "best", "roles": ["nccl_env"], "env": {"NCCL_DEBUG": "WARN"}}


def no_commands(argv: list[str]) -> tuple[int, str, str]:
    raise AssertionError(f"no command expected, ran {argv}")


# --- readers ------------------------------------------------------------------------------------------


def test_a_file_is_its_checksum_mode_and_owners(tmp_path):
    path = tmp_path / "nccl.conf"
    path.write_text("NCCL_DEBUG=WARN\n")
    path.chmod(0o640)
    read = state.read_file(str(path))
    assert read["sha256"] == hashlib.sha256(b"NCCL_DEBUG=WARN\n").hexdigest()
    assert read["mode"] == "0640" and read["owner"] == "root" and read["group"] == "root"
    assert state.read_file(str(tmp_path / "gone")) == {"present": False}
    assert state.read_file(str(tmp_path)) == {"type": "not a regular file"}


def test_contents_are_small_values_with_whitespace_folded(tmp_path):
    (tmp_path / "sriov_numvfs").write_text("8\n")
    (tmp_path / "ranges").write_text("4096\t87380   6291456\n")
    assert state.read_content(str(tmp_path / "sriov_numvfs")) == {"value": "8"}
    assert state.read_content(str(tmp_path / "ranges")) == {"value": "4096 87380 6291456"}
    assert state.read_content(str(tmp_path / "absent")) == {"present": False}
    (tmp_path / "big").write_text("x" * 5000)
    with pytest.raises(state.DriftStateError, match="holds over 4096 bytes; list it under files"):
        state.read_content(str(tmp_path / "big"))


def test_kernel_modules_are_sys_module_directories(tmp_path):
    (tmp_path / "module" / "ib_core").mkdir(parents=True)
    read = state.read_kernel_modules(["ib_core", "ib-umad"], sys_root=str(tmp_path))
    assert read == {"ib_core": {"loaded": True}, "ib-umad": {"loaded": False}}


def test_units_come_from_one_systemctl_show():
    calls = []

    def systemctl(argv):
        calls.append(argv)
        blocks = [
            "Id=a.service\nActiveState=active\nUnitFileState=enabled\n",
            "Id=b.service\nActiveState=inactive\nUnitFileState=disabled\n",
        ]
        return 0, "\n".join(blocks), ""

    read = state.read_units(["a.service", "b.service"], systemctl)
    assert read == {
        "a.service": {"enabled": "enabled", "active": "active"},
        "b.service": {"enabled": "disabled", "active": "inactive"},
    }
    assert len(calls) == 1 and calls[0][:2] == ["systemctl", "show"]
    with pytest.raises(state.DriftStateError, match="answered 1 block"):
        state.read_units(["a.service", "b.service"], lambda argv: (0, "Id=a\nActiveState=active\n", ""))


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")
def test_packages_are_dpkgs_version_and_hold():
    def run(argv):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    read = state.read_packages(["dpkg", "gpufabric-no-such-package"], run)
    assert read["gpufabric-no-such-package"] == {"present": False}
    assert read["dpkg"]["version"] and read["dpkg"]["held"] is False


def test_a_small_world_readable_text_file_is_recorded_with_its_text(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    conf.chmod(0o644)
    assert state.read_file(str(conf))["text"] == "NCCL_DEBUG=WARN\n"
    conf.chmod(0o600)  # a file only root reads: its text stays out of a record every user can read
    assert "text" not in state.read_file(str(conf))
    keyring = tmp_path / "key.gpg"
    keyring.write_bytes(b"\x99\x01\xff")
    keyring.chmod(0o644)
    assert "text" not in state.read_file(str(keyring))
    large = tmp_path / "large"
    large.write_text("x" * (state.MAX_TEXT_BYTES + 1))
    large.chmod(0o644)
    assert "text" not in state.read_file(str(large))


def test_the_plan_digest_ignores_key_order():
    assert state.plan_digest({"a": 1, "b": [1, 2]}) == state.plan_digest({"b": [1, 2], "a": 1})
    assert state.plan_digest({"a": 1}) != state.plan_digest({"a": 2})


def test_compare_names_what_moved(tmp_path):
    path = tmp_path / "nccl.conf"
    path.write_text("NCCL_DEBUG=WARN\n")
    entry = state.role_entry("digest", state.read_state({"files": [str(path)]}, no_commands))
    assert state.compare("nccl_env", entry, "digest", no_commands) == []
    path.write_text("NCCL_DEBUG=INFO\n")
    (finding,) = state.compare("nccl_env", entry, "digest", no_commands)
    assert (finding["kind"], finding["item"]) == ("files", str(path))
    assert finding["recorded"]["sha256"] != finding["live"]["sha256"]
    moved = state.compare("nccl_env", entry, "other", no_commands)
    assert [item["kind"] for item in moved] == ["plan", "files"]
    assert state.compare("nccl_env", None, "digest", no_commands) == [
        {"role": "nccl_env", "kind": "record", "item": "nccl_env", "recorded": None, "live": "no record of this role"}
    ]


def test_settings_belong_to_the_longest_role_name_they_start_with():
    settings = {"gcp_tcpx_bake": "a", "gcp_tcpxo_bake": "b", "nccl_env_extra": "c", "other_var": "d"}
    owned = state.role_settings(["gcp_tcpx", "gcp_tcpxo", "nccl_env", "sriov"], settings)
    assert owned == {
        "gcp_tcpx": {"gcp_tcpx_bake": "a"},
        "gcp_tcpxo": {"gcp_tcpxo_bake": "b"},
        "nccl_env": {"nccl_env_extra": "c"},
        "sriov": {},
    }


def test_a_setting_changed_added_or_removed_is_drift():
    entry = state.role_entry("digest", {}, {"nccl_env_extra": "a", "nccl_env_debug": "b"})
    assert state.compare("nccl_env", entry, "digest", no_commands, {"nccl_env_extra": "a", "nccl_env_debug": "b"}) == []
    found = state.compare("nccl_env", entry, "digest", no_commands, {"nccl_env_extra": "z", "nccl_env_new": "n"})
    assert [(item["item"], item["recorded"], item["live"]) for item in found] == [
        ("nccl_env_debug", "b", None),
        ("nccl_env_extra", "a", "z"),
        ("nccl_env_new", None, "n"),
    ]
    assert {item["kind"] for item in found} == {"settings"}
    # A record written before settings were recorded holds none: settings set now are drift until re-applied.
    legacy = {"plan": "digest", "state": {}}
    assert [item["item"] for item in state.compare("nccl_env", legacy, "digest", no_commands, {"nccl_env_x": "1"})] == [
        "nccl_env_x"
    ]


def test_supply_files_are_every_keyring_source_and_pin_once():
    supply_chain = module_utils("supply_chain")
    keys = [{"dest": "/etc/apt/keyrings/gpufabric-doca.gpg"}]
    steps = [
        {"keys": keys, "repositories": [{"name": "gpufabric-doca"}], "preferences": "gpufabric-doca"},
        {"keys": keys, "repositories": [], "preferences": ""},  # the same key again, no pin: nothing more
    ]
    assert supply_chain.supply_files(steps) == [
        "/etc/apt/keyrings/gpufabric-doca.gpg",
        "/etc/apt/sources.list.d/gpufabric-doca.sources",
        "/etc/apt/preferences.d/gpufabric-doca.pref",
    ]
    assert supply_chain.supply_files(steps, repositories=False) == ["/etc/apt/preferences.d/gpufabric-doca.pref"]


# --- the modules, through real ansible --------------------------------------------------------------


def record(ansible_env: dict[str, str], args: dict[str, Any], *extra: str) -> dict[str, Any]:
    return ansible_module.run(ansible_env, "drift_record", "-a", json.dumps(args), *extra)


def check(ansible_env: dict[str, str], args: dict[str, Any], *extra: str) -> dict[str, Any]:
    return ansible_module.run(ansible_env, "drift_check", "-a", json.dumps(args), *extra)


@pytest.fixture
def managed(tmp_path: Path) -> dict[str, Any]:
    conf = tmp_path / "etc" / "nccl.conf"
    conf.parent.mkdir()
    conf.write_text("NCCL_DEBUG=WARN\n")
    (tmp_path / "numvfs").write_text("4\n")
    record_path = tmp_path / "var" / "drift-record.json"
    nccl_env = {
        "name": "nccl_env",
        "files": [str(conf)],
        "contents": [str(tmp_path / "numvfs")],
        "packages": ["dpkg"] if shutil.which("dpkg-query") else [],
    }
    args = {"roles": [nccl_env, {"name": "fabric_facts"}], "plan": PLAN, "path": str(record_path)}
    return {"conf": conf, "numvfs": tmp_path / "numvfs", "record": record_path, "args": args}


def test_record_writes_once_then_is_unchanged_and_check_mode_writes_nothing(ansible_env, managed):
    dry = record(ansible_env, managed["args"], "--check", "--diff")
    assert dry["changed"] is True and not managed["record"].exists()
    assert dry["diff"]["before"] == "" and '"plan"' in dry["diff"]["after"]
    first = record(ansible_env, managed["args"])
    assert first["changed"] is True
    written = json.loads(managed["record"].read_text())
    assert written["format"] == 1 and sorted(written["roles"]) == ["fabric_facts", "nccl_env"]
    assert written["roles"]["fabric_facts"]["state"] == {}
    assert oct(os.stat(managed["record"]).st_mode & 0o777) == "0o644"
    assert record(ansible_env, managed["args"])["changed"] is False
    # A run that --tags narrowed keeps the entries of the plan's roles it did not run, as recorded.
    kept = record(ansible_env, {**managed["args"], "roles": [{"name": "fabric_facts"}], "keep": ["nccl_env", "roce"]})
    assert kept["changed"] is False and json.loads(managed["record"].read_text()) == written
    # The roles given are the record: one no longer in the plan leaves it.
    record(ansible_env, {**managed["args"], "roles": [{"name": "fabric_facts"}]})
    assert list(json.loads(managed["record"].read_text())["roles"]) == ["fabric_facts"]


def test_check_is_clean_then_names_each_change_and_a_moved_plan(ansible_env, managed):
    record(ansible_env, managed["args"])
    target = {"roles": ["nccl_env"], "plan": PLAN, "path": str(managed["record"])}
    clean = check(ansible_env, target, "--check")
    assert clean["changed"] is False and clean["drifted"] == {}
    managed["conf"].write_text("NCCL_DEBUG=INFO\n")
    managed["numvfs"].write_text("0\n")
    drifted = check(ansible_env, target, "--check", "--diff")
    assert drifted["changed"] is True
    found = [(finding["kind"], finding["item"]) for finding in drifted["drifted"]["nccl_env"]]
    assert found == [("files", str(managed["conf"])), ("contents", str(managed["numvfs"]))]
    # The edit itself, as a thorough check's diff shows it; the findings carry the checksums only.
    assert (drifted["diff"][0]["before"], drifted["diff"][0]["after"]) == ("NCCL_DEBUG=WARN\n", "NCCL_DEBUG=INFO\n")
    assert "text" not in drifted["drifted"]["nccl_env"][0]["recorded"]
    assert drifted["diff"][1]["before"] == '{\n  "value": "4"\n}\n' and '"0"' in drifted["diff"][1]["after"]
    # The catalog or inventory moved the desired state: drift on an untouched host too.
    record(ansible_env, managed["args"])
    moved = check(ansible_env, {**target, "plan": {**PLAN, "tier": "standard"}})
    assert [finding["kind"] for finding in moved["drifted"]["nccl_env"]] == ["plan"]
    # So did an operator's setting of the role that the plan does not hold; only its digest is stored.
    record(ansible_env, {**managed["args"], "settings": {"nccl_env_extra": "d1", "fabric_facts_root": "d2"}})
    written = json.loads(managed["record"].read_text())["roles"]
    assert written["nccl_env"]["settings"] == {"nccl_env_extra": "d1"}
    assert written["fabric_facts"]["settings"] == {"fabric_facts_root": "d2"}
    setting = check(ansible_env, {**target, "settings": {"nccl_env_extra": "d3"}})
    assert [(item["kind"], item["item"]) for item in setting["drifted"]["nccl_env"]] == [("settings", "nccl_env_extra")]


def test_no_record_is_never_clean(ansible_env, managed):
    target = {"roles": ["nccl_env", "sriov"], "plan": PLAN, "path": str(managed["record"])}
    nothing = check(ansible_env, target)  # no record file at all
    assert nothing["changed"] is True and sorted(nothing["drifted"]) == ["nccl_env", "sriov"]
    record(ansible_env, managed["args"])  # nccl_env and fabric_facts, no sriov
    missing = check(ansible_env, target)
    assert list(missing["drifted"]) == ["sriov"]
    assert missing["drifted"]["sriov"][0]["live"] == "no record of this role"


def test_a_relative_path_is_refused(ansible_env, managed):
    result = record(ansible_env, {**managed["args"], "roles": [{"name": "nccl_env", "files": ["etc/nccl.conf"]}]})
    assert result["failed"] is True and result["msg"] == "nccl_env: files: 'etc/nccl.conf' is not an absolute path"


# A sysctl gcp_tcpx sets (roles/gcp_tcpx/defaults/main.yml) that is per network namespace on this kernel.
SYSCTL = "/proc/sys/net/core/optmem_max"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_sysctl_changed_by_hand_is_drift(ansible_env, tmp_path):
    """A real kernel setting, in a network namespace of the test's own: recorded as a role leaves it, set by
    hand to another value, and named by the fast check with both values. Nothing outside the namespace moves."""
    record_path, result_path = tmp_path / "record.json", tmp_path / "check.json"
    role = {"name": "gcp_tcpx", "contents": [SYSCTL]}
    plays = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {"name": "Set the value as the role does", "ansible.builtin.shell": f"echo 131072 > {SYSCTL}"},
                {
                    "name": "Record",
                    "gpufabric.cluster.drift_record": {"roles": [role], "plan": PLAN, "path": str(record_path)},
                },
                {"name": "Change it by hand", "ansible.builtin.shell": f"echo 20480 > {SYSCTL}"},
                {
                    "name": "Check",
                    "gpufabric.cluster.drift_check": {"roles": ["gcp_tcpx"], "plan": PLAN, "path": str(record_path)},
                    "register": "checked",
                },
                {
                    "name": "Keep the result",
                    "ansible.builtin.copy": {"content": "{{ checked | to_json }}", "dest": str(result_path)},
                },
            ],
        }
    ]
    playbook = tmp_path / "sysctl.yml"
    playbook.write_text(json.dumps(plays))
    before = Path(SYSCTL).read_text()
    done = subprocess.run(
        ["unshare", "--net", "--", shutil.which("ansible-playbook") or "ansible-playbook", "-i", "localhost,",
         "-c", "local", str(playbook)],
        capture_output=True, text=True, env={**ansible_env, "ANSIBLE_PYTHON_INTERPRETER": sys.executable}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert Path(SYSCTL).read_text() == before, "the test's namespace only"
    checked = json.loads(result_path.read_text())
    assert checked["changed"] is True
    (finding,) = checked["drifted"]["gcp_tcpx"]
    assert (finding["kind"], finding["item"]) == ("contents", SYSCTL)
    assert (finding["recorded"], finding["live"]) == ({"value": "131072"}, {"value": "20480"})
