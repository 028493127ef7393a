# SPDX-License-Identifier: Apache-2.0
"""`gpufabric bake` leaves no container behind, however it ends (tests/lab/test_bake.py bakes for real).

podman is replaced at the subprocess boundary by a fake on PATH that keeps its containers in a JSON file and
fails, or presses Ctrl-C, where a test asks; the play is replaced by a stub of runs.run_playbook. Each case
takes well under a second.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpufabric import bake as fleet_bake
from gpufabric import runs
from gpufabric.errors import UserError

PROFILE = "aws/p5.48xlarge"
TAG = "localhost/gpufabric-unittest-baked:1"

# State: {"containers": {name: status}, "images": [tag], "calls": [argv]}.
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
def podman(tmp_path, monkeypatch):
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

    def run_playbook(playbook, inventory, *, artifacts_dir, hosts, **_):
        if interrupt:
            raise KeyboardInterrupt
        return runs.PlaybookRun(rc, "failed" if rc else "successful", [], artifacts_dir, 0.1, hosts)

    return run_playbook


def bake(tmp_path: Path) -> fleet_bake.Result:
    options = fleet_bake.Options(profile=PROFILE, tag=TAG, artifacts=tmp_path / "bake")
    return fleet_bake.bake(options, lambda line: None)


def made(state: dict) -> list[str]:
    """The containers the bake asked podman to run."""
    return [call[call.index("--name") + 1] for call in state["calls"] if call[0] == "run"]


def test_a_bake_commits_the_image_and_removes_its_container(tmp_path, podman, monkeypatch):
    monkeypatch.setattr(fleet_bake.runs, "run_playbook", play(rc=0))
    result = bake(tmp_path)
    state = podman()
    assert result.committed and state["images"] == [TAG]
    assert len(made(state)) == 1 and state["containers"] == {}


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
