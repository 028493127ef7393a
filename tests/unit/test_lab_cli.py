# SPDX-License-Identifier: Apache-2.0
"""`gpufabric lab` input checks: every bad value ends with exit 1 and one clear line, before podman runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpufabric import cli, lab_host, lab_image
from gpufabric import lab as local_lab
from gpufabric.errors import UserError
from unit.test_cli import assert_clean_error


def test_nodes_out_of_range(gpufabric, tmp_path):
    for nodes in ("0", "65"):
        result = gpufabric("lab", "up", "--nodes", nodes, "--dir", str(tmp_path / "lab"))
        assert_clean_error(result, f"--nodes {nodes}", "accepted 1..64")


def test_unknown_profile_points_at_catalog_list(gpufabric, tmp_path):
    result = gpufabric("lab", "up", "--profile", "nowhere/x1", "--dir", str(tmp_path / "lab"))
    assert_clean_error(result, "--profile 'nowhere/x1'", "`gpufabric catalog list`")


def test_bad_name(gpufabric):
    assert_clean_error(gpufabric("lab", "up", "--name", "My_Lab"), "lab name 'My_Lab' (--name)", "lowercase")


def test_status_of_a_lab_that_does_not_exist(gpufabric, tmp_path):
    result = gpufabric("lab", "status", "--name", "gpufabric-labtest-none", "--dir", str(tmp_path))
    assert_clean_error(result, "no lab 'gpufabric-labtest-none'", "`gpufabric lab up` creates a lab")


def write_lab_json(directory, nodes):
    """A lab.json of gpufabric-lab, baremetal/hgx-h100-ib-ndr, hosts gpufabric-lab-N on ports 40000+N."""
    hosts = [{"name": f"gpufabric-lab-{n}", "port": 40000 + n} for n in range(1, nodes + 1)]
    lab = {
        "name": "gpufabric-lab",
        "profile": "baremetal/hgx-h100-ib-ndr",
        "nodes": nodes,
        "image": local_lab.LAB_IMAGE,
        "hosts": hosts,
        "roles": ["fabric_facts"],
        "left_out": {},
    }
    (directory / "lab.json").write_text(json.dumps(lab))


def test_up_refuses_a_directory_that_is_not_a_lab(gpufabric, tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = gpufabric("lab", "up", "--dir", str(tmp_path))
    assert_clean_error(result, f"--dir {tmp_path}: not empty and not a lab directory")


def test_up_refuses_another_profile_for_an_existing_lab(gpufabric, tmp_path):
    write_lab_json(tmp_path, nodes=1)
    result = gpufabric("lab", "up", "--dir", str(tmp_path))
    assert_clean_error(
        result,
        "lab gpufabric-lab exists with profile baremetal/hgx-h100-ib-ndr (asked: baremetal/hgx-h100-ib-ndr-sriov)",
        "nodes 1 (asked: 2)",
        f"run `gpufabric lab down --dir {tmp_path}` first",
    )


def test_down_leaves_a_directory_without_lab_json_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(local_lab, "containers_with_label", lambda label, value: [])
    (tmp_path / "notes.txt").write_text("mine\n")
    lines: list[str] = []
    local_lab.down("gpufabric-labtest-unit", tmp_path, progress=lines.append)
    assert (tmp_path / "notes.txt").exists()
    assert lines == [
        f"left {tmp_path} alone: it has no lab.json, so it is not a lab directory",
        "no lab gpufabric-labtest-unit: nothing to remove",
    ]


def test_missing_tools_without_root_name_the_apt_get_command(monkeypatch):
    monkeypatch.setattr(lab_image.shutil, "which", lambda tool: None if tool in ("runc", "ssh") else f"/usr/bin/{tool}")
    monkeypatch.setattr(lab_image.os, "geteuid", lambda: 1000)
    with pytest.raises(
        UserError,
        match=r"needs openssh-client, runc .*`sudo apt-get install -y --no-install-recommends "
        r"openssh-client runc`",
    ):
        lab_image.ensure_tools(print)


def test_another_image_must_exist(monkeypatch):
    monkeypatch.setattr(lab_image, "image_exists", lambda image: False)
    with pytest.raises(UserError, match="--image example/none:1: no such image"):
        lab_image.ensure_image("example/none:1", print)


def test_a_missing_base_image_needs_debootstrap_first(monkeypatch):
    """A fresh machine has no base image and no debootstrap: named before any build starts."""
    monkeypatch.setattr(lab_image, "image_exists", lambda image: False)
    monkeypatch.setattr(lab_image.shutil, "which", lambda tool: None if tool == "debootstrap" else f"/usr/bin/{tool}")
    monkeypatch.setattr(lab_image.os, "geteuid", lambda: 1000)
    with pytest.raises(
        UserError, match=r"needs debootstrap .*`sudo apt-get install -y --no-install-recommends debootstrap`"
    ):
        lab_image.ensure_base_image(print)


def test_a_large_lab_raises_the_inotify_instance_limit_as_root_only(tmp_path, monkeypatch):
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    said: list[str] = []
    lab_image.ensure_inotify_instances(8, said.append, limit)  # 8 x 8 + 64 = 128: enough already
    assert limit.read_text() == "128\n" and said == []
    lab_image.ensure_inotify_instances(64, said.append, limit)
    assert limit.read_text() == "576\n"
    assert said == [
        "raised fs.inotify.max_user_instances from 128 to 576 (until reboot): each lab host's systemd needs a few"
    ]
    limit.write_text("128\n")
    monkeypatch.setattr(lab_image.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match=r"sudo sysctl -w fs.inotify.max_user_instances=576"):
        lab_image.ensure_inotify_instances(64, said.append, limit)


def test_status_json_gives_each_hosts_live_state(tmp_path, monkeypatch):
    """`lab status --json`: the lab and every host on stdout as JSON, exit 1 when a host is not running."""
    write_lab_json(tmp_path, nodes=2)
    states = {"gpufabric-lab-1": "running", "gpufabric-lab-2": "exited"}
    monkeypatch.setattr(local_lab, "container_state", states.__getitem__)
    monkeypatch.setattr(lab_host, "ssh_reachable", lambda directory, port: port == 40001)
    result = CliRunner().invoke(cli.app, ["lab", "status", "--dir", str(tmp_path), "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout) == {
        "name": "gpufabric-lab",
        "profile": "baremetal/hgx-h100-ib-ndr",
        "image": local_lab.LAB_IMAGE,
        "directory": str(tmp_path),
        "inventory": str(tmp_path / "inventory.yml"),
        "exit_code": 1,
        "hosts": [
            {"name": "gpufabric-lab-1", "state": "running", "ssh_port": 40001, "ssh_reachable": True},
            {"name": "gpufabric-lab-2", "state": "exited", "ssh_port": 40002, "ssh_reachable": False},
        ],
    }
    states["gpufabric-lab-2"] = "running"
    result = CliRunner().invoke(cli.app, ["lab", "status", "--dir", str(tmp_path), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["exit_code"] == 0


def _no_podman(monkeypatch):
    monkeypatch.setattr(local_lab.shutil, "which", lambda tool: None)


def _lab_files(directory):
    """What `lab up` writes in its directory (lab.json last: written by write_lab_json)."""
    for name in ("inventory.yml", "catalog-lab.yml", "known_hosts", "id_ed25519", "id_ed25519.pub"):
        (directory / name).write_text("lab\n")
    tree = directory / "hosts" / "gpufabric-lab-1" / "simulated-hw"
    tree.mkdir(parents=True)
    (tree / "vendor").write_text("0x15b3\n")
    write_lab_json(directory, nodes=1)


@pytest.mark.parametrize(
    ("lab_json", "says"),
    [
        ("{not json", "is not a gpufabric lab description; nothing was removed"),
        ('{"name": "gpufabric-labtest-down"}', "is not a gpufabric lab description; nothing was removed"),
        (None, "describes lab 'gpufabric-lab'; nothing was removed"),
    ],
    ids=["garbage", "partial", "another-lab"],
)
def test_down_refuses_a_lab_json_it_cannot_trust_and_removes_nothing(gpufabric, tmp_path, lab_json, says):
    """The real CLI (a name no container has: podman, where present, finds nothing to remove)."""
    _lab_files(tmp_path)  # lab.json names gpufabric-lab
    if lab_json is not None:
        (tmp_path / "lab.json").write_text(lab_json)
    (tmp_path / "notes.txt").write_text("mine\n")
    before = sorted(str(path) for path in tmp_path.rglob("*"))
    result = gpufabric("lab", "down", "--name", "gpufabric-labtest-down", "--dir", str(tmp_path))
    assert_clean_error(result, f"{tmp_path / 'lab.json'}", says)
    assert sorted(str(path) for path in tmp_path.rglob("*")) == before


def test_down_removes_only_the_lab_files_and_keeps_the_operators(tmp_path, monkeypatch):
    _no_podman(monkeypatch)
    _lab_files(tmp_path)
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "hosts" / "mine").mkdir()
    lines: list[str] = []
    local_lab.down("gpufabric-lab", tmp_path, progress=lines.append)
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*")) == [
        "hosts",
        "hosts/mine",
        "notes.txt",
    ]
    left = "left the directory: it holds hosts, notes.txt"
    assert lines == [f"removed the lab's files from {tmp_path.resolve()}; {left}"]


def test_down_removes_a_directory_that_holds_only_the_lab(tmp_path, monkeypatch):
    _no_podman(monkeypatch)
    where = tmp_path / "lab"
    where.mkdir()
    _lab_files(where)
    lines: list[str] = []
    local_lab.down("gpufabric-lab", where, progress=lines.append)
    assert not where.exists()
    assert lines == [f"removed {where.resolve()}"]


def test_down_removes_a_lab_its_containers_name_once(tmp_path, monkeypatch):
    """The containers' label holds the resolved directory; --dir may name it through a link."""
    where = tmp_path / "lab"
    where.mkdir()
    _lab_files(where)
    (tmp_path / "via").symlink_to(where)
    monkeypatch.setattr(local_lab.shutil, "which", lambda tool: "/usr/bin/podman")
    monkeypatch.setattr(local_lab, "containers_with_label", lambda label, value: ["gpufabric-lab-1"])
    monkeypatch.setattr(local_lab, "container_label", lambda container, label: str(where.resolve()))
    removed: list[list[str]] = []
    monkeypatch.setattr(local_lab, "podman", lambda argv: removed.append(argv))
    lines: list[str] = []
    local_lab.down("gpufabric-lab", tmp_path / "via", progress=lines.append)
    assert removed == [["rm", "--force", "--time", "3", "gpufabric-lab-1"]]
    assert lines == ["removed container gpufabric-lab-1", f"removed {where.resolve()}"]
    assert not where.exists() and (tmp_path / "via").is_symlink()
