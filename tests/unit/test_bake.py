# SPDX-License-Identifier: Apache-2.0
"""`gpufabric bake` leaves no container behind, however it ends, and gives podman the configuration it needs
from a checkout or the wheel, never over the user's own (tests/lab/test_bake.py bakes for real).

podman is replaced at the subprocess boundary by a fake on PATH that keeps its containers in a JSON file and
fails, or presses Ctrl-C, where a test asks; the play is replaced by a stub of runs.run_playbook. Each case
takes well under a second.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from gpufabric import bake as fleet_bake
from gpufabric import lab_podman, runs
from gpufabric.errors import UserError

REPO = Path(__file__).resolve().parents[2]
PROFILE = "aws/p5.48xlarge"
TAG = "localhost/gpufabric-unittest-baked:1"

# State: {"containers": {name: status}, "images": [tag], "calls": [argv], "confs": [CONTAINERS_CONF of each]}.
# FAKE_PODMAN_FAIL names the step that fails (run, cleanup, commit) or is interrupted (boot-ctrl-c, rm-ctrl-c:
# SIGINT to gpufabric, as a Ctrl-C in the terminal delivers it to the whole foreground process group).
FAKE_PODMAN = """\
#!{python}
import json, os, signal, sys, time
from pathlib import Path

state_file = Path(os.environ["FAKE_PODMAN_STATE"])
fail = os.environ.get("FAKE_PODMAN_FAIL", "")
state = json.loads(state_file.read_text()) if state_file.exists() else {{"containers": {{}}, "images": [], "calls": []}}
args = sys.argv[1:]
state["calls"].append(args)
state.setdefault("confs", []).append(os.environ.get("CONTAINERS_CONF"))
containers = state["containers"]
code, out, err = 0, "", ""
if args[:2] == ["image", "exists"]:
    code = 0
elif args[0] == "run":
    name = args[args.index("--name") + 1]
    containers[name] = "created"
    if fail == "run":
        code, err = 126, "Error: OCI runtime error: runc: error setting rlimit type 7: operation not permitted"
    else:
        containers[name] = "running"
elif args[0] == "exec":
    name = args[1]
    if containers.get(name) != "running":
        code, err = 125, f"Error: no container with name or ID {{name!r}} found: no such container"
    elif "is-system-running" in args:
        if fail == "boot-ctrl-c":
            os.kill(os.getppid(), signal.SIGINT)
        out = "running"
    elif fail == "cleanup":
        code, err = 1, "truncate: cannot open '/etc/machine-id' for writing: Read-only file system"
elif args[0] == "stop":
    containers[args[-1]] = "exited"
elif args[0] == "commit":
    if fail == "commit":
        code, err = 125, "Error: committing container: writing blob: no space left on device"
    else:
        state["images"].append(args[-1])
elif args[0] == "rm":
    name = args[-1]
    if fail == "rm-ctrl-c" and sum(call[0] == "rm" for call in state["calls"]) == 1:
        state_file.write_text(json.dumps(state))
        os.kill(os.getppid(), signal.SIGINT)
        time.sleep(30)  # gpufabric kills this podman as the Ctrl-C reaches it
    if name in containers:
        del containers[name]
    elif "--ignore" not in args:
        code, err = 1, f"Error: no container with name or ID {{name!r}} found: no such container"
else:
    code, err = 125, f"fake podman: {{args}} not understood"
state_file.write_text(json.dumps(state))
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
"""


@pytest.fixture
def no_podman_config(tmp_path, monkeypatch):
    """A user who configured podman in no way (no CONTAINERS_CONF, no containers.conf); returns the system dir."""
    system = tmp_path / "etc-containers"
    system.mkdir()
    monkeypatch.setattr(lab_podman, "SYSTEM_CONFIG", system)
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return system


@pytest.fixture
def podman(tmp_path, monkeypatch, no_podman_config):
    """Put the fake podman first on PATH; returns a function that reads its state."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "podman"
    script.write_text(FAKE_PODMAN.format(python=sys.executable))
    script.chmod(0o755)
    state = tmp_path / "podman-state.json"
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PODMAN_STATE", str(state))
    return lambda: json.loads(state.read_text())


def play(rc: int = 0, interrupt: bool = False):
    """A stand-in for runs.run_playbook: exits rc, or is interrupted by Ctrl-C."""

    def run_playbook(playbook, inventory, *, artifacts_dir, hosts, environment, **_):
        if interrupt:
            raise KeyboardInterrupt
        run_playbook.environment = environment
        return runs.PlaybookRun(rc, "failed" if rc else "successful", [], artifacts_dir, 0.1, hosts)

    return run_playbook


def bake(tmp_path: Path) -> fleet_bake.Result:
    options = fleet_bake.Options(profile=PROFILE, tag=TAG, artifacts=tmp_path / "bake")
    return fleet_bake.bake(options, lambda line: None)


def made(state: dict) -> list[str]:
    """The containers the bake asked podman to run."""
    return [call[call.index("--name") + 1] for call in state["calls"] if call[0] == "run"]


def test_a_bake_commits_the_image_and_removes_its_container(tmp_path, podman, monkeypatch):
    stub = play(rc=0)
    monkeypatch.setattr(fleet_bake.runs, "run_playbook", stub)
    result = bake(tmp_path)
    state = podman()
    assert result.committed and state["images"] == [TAG]
    assert len(made(state)) == 1 and state["containers"] == {}
    # Every podman call, and ansible-playbook's podman connection, had gpufabric's containers.conf.
    conf = str(REPO / ".ci" / "containers.conf")
    assert set(state["confs"]) == {conf} and stub.environment == {"CONTAINERS_CONF": conf}


@pytest.mark.parametrize(
    ("fail", "rc", "interrupt", "raised"),
    [
        # podman made the container, then could not start it: it stays "Created" unless removed.
        pytest.param("run", 0, False, UserError, id="podman-run-fails-after-create"),
        pytest.param("boot-ctrl-c", 0, False, KeyboardInterrupt, id="ctrl-c-while-booting"),
        pytest.param("", 2, False, None, id="playbook-fails"),
        pytest.param("", 0, True, KeyboardInterrupt, id="ctrl-c-during-the-play"),
        pytest.param("cleanup", 0, False, UserError, id="clean-up-fails"),
        pytest.param("commit", 0, False, UserError, id="commit-fails"),
        # A second Ctrl-C, while podman removes the container after a failed play.
        pytest.param("rm-ctrl-c", 2, False, KeyboardInterrupt, id="ctrl-c-during-the-removal"),
    ],
)
def test_a_failed_bake_leaves_no_container(tmp_path, podman, monkeypatch, fail, rc, interrupt, raised):
    monkeypatch.setenv("FAKE_PODMAN_FAIL", fail)
    monkeypatch.setattr(fleet_bake.runs, "run_playbook", play(rc=rc, interrupt=interrupt))
    if raised is None:
        assert not bake(tmp_path).committed
    else:
        with pytest.raises(raised):
            bake(tmp_path)
    state = podman()
    assert len(made(state)) == 1, state["calls"]
    assert state["containers"] == {}, f"left behind: {state['containers']}"
    assert state["images"] == []


# --- podman's configuration ---------------------------------------------------------------------------------


def test_a_containers_conf_the_user_set_is_kept(tmp_path, monkeypatch, no_podman_config):
    mine = tmp_path / "mine.conf"
    mine.write_text("[engine]\n")
    monkeypatch.setenv("CONTAINERS_CONF", str(mine))
    assert lab_podman.configuration() == {}
    assert lab_podman.environment()["CONTAINERS_CONF"] == str(mine)


@pytest.mark.parametrize("where", ["system", "system drop-in", "user", "user drop-in"])
def test_a_user_who_configured_podman_keeps_their_configuration(tmp_path, monkeypatch, no_podman_config, where):
    # CONTAINERS_CONF would make podman read gpufabric's file instead of theirs.
    directory = no_podman_config if where.startswith("system") else tmp_path / "home" / ".config" / "containers"
    if where.startswith("user"):
        monkeypatch.setattr(lab_podman.os, "geteuid", lambda: 1000)  # rootless: podman reads their own file
    file = directory / "containers.conf.d" / "10-mine.conf" if "drop-in" in where else directory / "containers.conf"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text('[engine]\nruntime = "crun"\n')
    assert lab_podman.configuration() == {}
    assert "CONTAINERS_CONF" not in lab_podman.environment()


def test_a_checkout_gives_podman_its_ci_containers_conf(no_podman_config, monkeypatch):
    monkeypatch.setenv("CONTAINERS_CONF", "")  # set but empty counts as unset
    conf = str(REPO / ".ci" / "containers.conf")
    assert lab_podman.configuration() == {"CONTAINERS_CONF": conf}
    assert lab_podman.environment()["CONTAINERS_CONF"] == conf


def test_the_wheel_carries_the_containers_conf_and_uses_it(tmp_path, monkeypatch, no_podman_config):
    # The wheel as `pip install gpufabric` gets it (hatchling, in-process: half a second), then the
    # installed layout: the collection under gpufabric/_collection has no .ci/, the package its copy.
    from hatchling.builders.wheel import WheelBuilder

    [wheel] = WheelBuilder(str(REPO)).build(directory=str(tmp_path / "dist"), versions=["standard"])
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    package = tmp_path / "site" / "gpufabric"
    assert (package / "containers.conf").read_bytes() == (REPO / ".ci" / "containers.conf").read_bytes()
    assert lab_podman.WHEEL_CONF == lab_podman.PACKAGE_DIR / "containers.conf"
    collection = package / "_collection"
    assert (collection / "galaxy.yml").is_file() and not (collection / ".ci").exists()
    monkeypatch.setattr(lab_podman, "collection_root", lambda: collection)
    monkeypatch.setattr(lab_podman, "WHEEL_CONF", package / "containers.conf")
    assert lab_podman.configuration() == {"CONTAINERS_CONF": str(package / "containers.conf")}
