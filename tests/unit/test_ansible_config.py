# SPDX-License-Identifier: Apache-2.0
"""The user's ansible.cfg: found as Ansible finds it, layered over gpufabric's settings, honoured by a
real `gpufabric drift` run from a read-only working directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric import ansible_config, ansible_settings, runs
from gpufabric.errors import UserError


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ANSIBLE_* from the caller; a HOME without ~/.ansible.cfg."""
    for key in [key for key in os.environ if key.startswith(("ANSIBLE_", "GPUFABRIC_"))]:
        monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_every_setting_gpufabric_sets_has_its_ansible_cfg_keys() -> None:
    for setting in ansible_settings.tuned(4, state=Path("/s")):
        assert (setting.section, setting.key) in ansible_config.same_setting(setting.env).ini, setting.env
    # Ansible reads pipelining under three sections: the user's file wins under any of them.
    assert ("ssh_connection", "pipelining") in ansible_config.same_setting("ANSIBLE_PIPELINING").ini
    # The ssh plugin reads host key checking under a second variable and section, the last one winning.
    checking = ansible_config.same_setting("ANSIBLE_HOST_KEY_CHECKING")
    assert checking.env == ("ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_SSH_HOST_KEY_CHECKING")
    assert checking.ini == (("defaults", "host_key_checking"), ("ssh_connection", "host_key_checking"))


def test_the_file_is_found_as_ansible_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert ansible_config.find() is None or ansible_config.find() == Path("/etc/ansible/ansible.cfg")
    (clean_env / ".ansible.cfg").write_text("[defaults]\n")
    assert ansible_config.find() == clean_env / ".ansible.cfg"
    (project / "ansible.cfg").write_text("[defaults]\nforks = 7\n")
    assert ansible_config.find() == project / "ansible.cfg", "./ansible.cfg before ~/.ansible.cfg"
    other = tmp_path / "other.cfg"
    other.write_text("[defaults]\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", "../other.cfg")
    assert ansible_config.find() == other, "ANSIBLE_CONFIG first, made absolute"
    monkeypatch.delenv("ANSIBLE_CONFIG")
    project.chmod(0o777)
    assert ansible_config.find() == clean_env / ".ansible.cfg", "a world-writable directory's file is ignored"


def test_the_users_file_and_environment_win_over_gpufabrics_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    path = tmp_path / "ansible.cfg"
    path.write_text("[defaults]\nforks = 7 ; a comment\n[ssh_connection]\npipelining = False\n")
    config = ansible_config.read(path)
    monkeypatch.setenv("ANSIBLE_GATHERING", "explicit")
    layered = {entry.setting.env: entry for entry in ansible_settings.layer(ansible_settings.tuned(3), config)}
    assert (layered["ANSIBLE_FORKS"].source, layered["ANSIBLE_FORKS"].value) == (str(path), "7")
    assert (layered["ANSIBLE_PIPELINING"].source, layered["ANSIBLE_PIPELINING"].value) == (str(path), "False")
    assert (layered["ANSIBLE_GATHERING"].source, layered["ANSIBLE_GATHERING"].value) == ("environment", "explicit")
    assert layered["ANSIBLE_STRATEGY"].source == "gpufabric"
    ours = {setting.env for setting in ansible_settings.ours(list(layered.values()))}
    assert not ours & {"ANSIBLE_FORKS", "ANSIBLE_PIPELINING", "ANSIBLE_GATHERING"}


@pytest.mark.parametrize(
    ("environment", "text", "value", "source"),
    [
        ({}, None, "True", "gpufabric"),
        ({}, "[defaults]\nforks = 7\n", "True", "gpufabric"),
        ({}, "[defaults]\nhost_key_checking = True\n", "True", "file"),
        ({}, "[defaults]\nhost_key_checking = False\n", "False", "file"),
        # The ssh plugin reads [ssh_connection] after [defaults]: the last one wins, as in Ansible.
        ({}, "[defaults]\nhost_key_checking = False\n[ssh_connection]\nhost_key_checking = yes\n", "yes", "file"),
        ({"ANSIBLE_HOST_KEY_CHECKING": "False"}, "[defaults]\nhost_key_checking = True\n", "False", "environment"),
        (
            {"ANSIBLE_SSH_HOST_KEY_CHECKING": "True"},
            "[defaults]\nhost_key_checking = False\n",
            "True",
            "environment (ANSIBLE_SSH_HOST_KEY_CHECKING)",
        ),
    ],
)
def test_host_key_checking_is_the_users_and_on_by_default(
    environment: dict[str, str],
    text: str | None,
    value: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_env: Path,
) -> None:
    path = tmp_path / "ansible.cfg"
    if text is not None:
        path.write_text(text)
        monkeypatch.setenv("ANSIBLE_CONFIG", str(path))
    for name, exported in environment.items():
        monkeypatch.setenv(name, exported)
    config = ansible_config.read(path) if text is not None else None
    decided = ansible_settings.host_key_checking(config)
    assert (decided.value, decided.source) == (value, str(path) if source == "file" else source)
    # Every run gets it set: ansible-runner fills an unset variable with False, which outranks any ansible.cfg.
    assert runs.base_env()["ANSIBLE_HOST_KEY_CHECKING"] == value


def test_an_unreadable_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ansible.cfg"
    path.write_text("[defaults\nforks = 7\n")
    with pytest.raises(UserError, match=rf"^Ansible configuration {path} \(found as ansible-playbook finds it"):
        ansible_config.read(path)


@pytest.mark.parametrize(
    ("text", "environment", "message"),
    [
        (
            "[defaults]\nforks = abc\n",
            {},
            r"^\[defaults\] forks = 'abc' in the Ansible configuration {path}: "
            r"not a valid DEFAULT_FORKS; accepted: a whole number$",
        ),
        ("[defaults]\ntimeout = 1.5\n", {}, r"^\[defaults\] timeout = '1.5' in .*accepted: a whole number$"),
        ("[defaults]\ngathering = bogus\n", {}, r"^\[defaults\] gathering = 'bogus' .*accepted: one of implicit, "),
        (
            "[defaults]\nforks = 7\n",
            {"ANSIBLE_FORKS": "many"},
            r"^ANSIBLE_FORKS='many' \(environment\): not a valid DEFAULT_FORKS; accepted: a whole number$",
        ),
    ],
)
def test_a_value_ansible_cannot_convert_is_one_clear_error(
    text: str,
    environment: dict[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_env: Path,
) -> None:
    path = tmp_path / "ansible.cfg"
    path.write_text(text)
    monkeypatch.setenv("ANSIBLE_CONFIG", str(path))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError, match=message.format(path=path)):
        ansible_config.user_config()


def test_a_good_value_and_one_the_environment_overrides_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    path = tmp_path / "ansible.cfg"
    path.write_text("[defaults]\nforks = abc\ntimeout = 30\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(path))
    monkeypatch.setenv("ANSIBLE_FORKS", "12")  # the environment outranks the file, as in Ansible
    config = ansible_config.user_config()
    assert config is not None and config.values[("defaults", "timeout")] == "30"


# A host gpufabric leaves alone on purpose: site.yml resolves its plan on the controller and ends, so the
# run is quick and touches nothing on this machine.
INVENTORY = "gpu-1 ansible_connection=local gpufabric_managed=false ansible_python_interpreter={python}\n"
USER_CFG = """[defaults]
local_tmp = {local_tmp}
forks = 7
[ssh_connection]
pipelining = False
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare for a read-only mount")
def test_drift_honours_the_users_ansible_cfg_from_a_read_only_directory(tmp_path: Path, clean_env: Path) -> None:
    project, state, local_tmp = tmp_path / "project", tmp_path / "state", tmp_path / "ansible-local"
    project.mkdir()
    (project / "ansible.cfg").write_text(USER_CFG.format(local_tmp=local_tmp))
    (project / "hosts").write_text(INVENTORY.format(python=sys.executable))
    env = {**os.environ, "XDG_STATE_HOME": str(state), "PYTHONPATH": str(Path(__file__).parents[2] / "driver")}
    gpufabric = [sys.executable, "-m", "gpufabric"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        # The working directory is mounted read-only in a private mount namespace (as the CronJob's root is).
        script = f'mount --bind "{project}" "{project}" && mount -o remount,bind,ro "{project}" && exec "$@"'
        command = ["unshare", "--mount", "sh", "-c", script, "sh", *gpufabric, *argv]
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False, timeout=120)

    shown = run("drift", "-i", "hosts", "--show-settings")
    assert shown.returncode == 0, shown.stderr
    assert f"Ansible configuration file: {project / 'ansible.cfg'}" in shown.stdout
    assert any("forks" in line and "7" in line and "ansible.cfg" in line for line in shown.stdout.splitlines())
    # Host key checking is listed with its source; the file leaves it, so Ansible's default (on) is passed.
    assert (
        "  [defaults] host_key_checking = True  (from Ansible's default, set since ansible-runner would turn it off)"
        in shown.stdout.splitlines()
    )

    drift = run("drift", "-i", "hosts", "-e", "db_password=fake-db-password-0123", "-e", "who=ops", "-v")
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert sorted(path.name for path in project.iterdir()) == ["ansible.cfg", "hosts"], "nothing written here"
    assert local_tmp.is_dir(), "Ansible used the local_tmp of the user's ansible.cfg"
    (run_dir,) = (state / "gpufabric" / "runs").iterdir()
    assert run_dir.name.startswith("drift-")
    record = json.loads((run_dir / "check" / "gpufabric-run.json").read_text())
    assert record["ansible_config"] == str(project / "ansible.cfg")
    assert "ANSIBLE_FORKS" not in record["ansible_env"] and "ANSIBLE_PIPELINING" not in record["ansible_env"]
    assert record["ansible_args"][:2] == ["-e", json.dumps({"db_password": "<redacted by gpufabric>"})]
    assert record["ansible_args"][2:] == ["-e", "who=ops", "-v"]
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert "fake-db-password" not in path.read_text(errors="replace"), path
