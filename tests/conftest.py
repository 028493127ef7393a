# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the repo root, the collection on ANSIBLE_COLLECTIONS_PATH, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric import simulated_sriov
from gpufabric.collection import collections_path, plugin_utils
from gpufabric.simulated_hw import write_tree

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def ansible_env() -> dict[str, str]:
    """Environment for ansible-* commands that finds this collection and nothing stale."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "GPUFABRIC_"))}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections_path()),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


@pytest.fixture
def gpufabric(ansible_env: dict[str, str]):
    """Run the real CLI in a subprocess; returns CompletedProcess with text output."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "gpufabric"), *args],
            capture_output=True,
            text=True,
            env={**ansible_env, "COLUMNS": "200", **(env or {})},
            cwd=cwd,
            check=False,
        )

    return run


@pytest.fixture
def sriov_tree(tmp_path: Path) -> Iterator[Path]:
    """A SIMULATED HGX with 8 InfiniBand HCAs, its kernel watching, and an ip stand-in in tmp_path/bin."""
    profile = plugin_utils("fabric_catalog").load_catalog().get("baremetal/hgx-h100-ib-ndr-sriov")
    root = write_tree(profile, tmp_path / "tree")
    stand_in = tmp_path / "bin/ip"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{simulated_sriov.__file__}" ip --root "{root}" -- "$@"\n')
    stand_in.chmod(0o755)
    simulated_sriov.Kernel(root).prepare()
    watch = [sys.executable, simulated_sriov.__file__, "watch", "--root", str(root), "--interval", "0.005"]
    process = subprocess.Popen(watch)
    try:
        yield root
    finally:
        process.terminate()
        process.wait(timeout=10)


def nccl_env_paths(root: Path) -> dict[str, object]:
    """Every file variable of the nccl_env role, under root: a role run on this machine writes none of its files."""
    return {
        "nccl_env_conf_path": str(root / "nccl.conf"),
        "nccl_env_script_path": str(root / "env.sh"),
        "nccl_env_ld_conf_path": str(root / "ld-gpufabric-nccl.conf"),
        "nccl_env_environment_path": str(root / "environment"),
        "nccl_env_container_env_paths": [str(root / "nccl.env"), str(root / "enroot-nccl.env")],
        "nccl_env_limits_path": str(root / "limits-gpufabric-fabric.conf"),
        "nccl_env_systemd_limits_path": str(root / "system.conf.d" / "90-gpufabric-limits.conf"),
        # This machine's own units are not the test's: no image unit owns the test's nccl.conf.
        "nccl_env_conf_owner_units": [],
        "nccl_env_conf_cooperate_path": str(root / "gpufabric-nccl.conf"),
        "nccl_env_conf_merge_path": str(root / "gpufabric-nccl-conf"),
    }


def recorded_facts(target: str, **more: object) -> dict[str, Any]:
    """ansible_facts as ansible-core gathered them over the target's real release files
    (tests/fixtures/os_release/<target>/facts.json), on x86_64, with ``more`` on top (kernel, packages, ...)."""
    recording = REPO / "tests" / "fixtures" / "os_release" / target / "facts.json"
    gathered = json.loads(recording.read_text(encoding="utf-8"))
    facts = {key.removeprefix("ansible_"): value for key, value in gathered.items() if key.startswith("ansible_")}
    return {"architecture": "x86_64", **facts, **more}


def recorded_nic_names() -> dict[str, dict[str, dict[str, Any]]]:
    """tests/fixtures/nic_names.yml: per catalog profile and image, the names the image gives the NIC groups."""
    return yaml.safe_load((REPO / "tests" / "fixtures" / "nic_names.yml").read_text(encoding="utf-8"))


def image_nic_names(profile: str, image: str) -> dict[str, list[str]]:
    """The interface names ``image`` gives the NIC groups of catalog ``profile``, each in PCI order, as
    tests/fixtures/nic_names.yml records them with their sources: {"gpu": [...], "management": [...]} (a group the
    recording leaves out is absent), and "gpu_rdma", the RDMA device names of ConnectX GPU NICs, where the image renames
    them. The catalog names no interface; these stand for a real host's names."""
    names = recorded_nic_names()[profile][image]
    return {group: list(names[group]) for group in ("gpu", "management", "gpu_rdma") if group in names}


def package_facts(installed: dict[str, str]) -> dict[str, list[dict[str, str]]]:
    """Installed packages as ansible.builtin.package_facts lists them on apt (name -> [{name, version, ...}])."""
    return {
        name: [{"name": name, "version": version, "arch": "amd64", "category": "misc", "origin": "", "source": "apt"}]
        for name, version in installed.items()
    }
