# SPDX-License-Identifier: Apache-2.0
"""`ansible-galaxy collection build` works and ships only what a collection user needs, and the built
tarball, installed with its declared dependencies, resolves every module its roles call."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import ansible_collections

BIN = Path(sys.executable).parent
# Where the `ansible` package keeps its collections (community.general, ansible.posix, ...): the
# dependencies "available locally", as Galaxy is not reachable here.
ANSIBLE_PACKAGE_COLLECTIONS = next(
    Path(path).parent for path in ansible_collections.__path__ if (Path(path) / "community" / "general").is_dir()
)
# A task calling a module by its FQCN (`community.general.modprobe:`), in the roles and playbooks.
MODULE_CALL = re.compile(r"^\s*-?\s*([a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+):\s*$", re.MULTILINE)
RESOLVE = """
import json, sys
from ansible.plugins.loader import init_plugin_loader, module_loader
init_plugin_loader()
found = {name: module_loader.find_plugin_with_context(name) for name in sys.argv[1:]}
print(json.dumps({name: context.plugin_resolved_path if context.resolved else None for name, context in found.items()}))
"""
DEV_ONLY = (
    "tests/",
    "test-results/",
    "bench/",
    ".ci/",
    ".config/",
    "driver/",
    "molecule/",
    "scripts/",
    ".venv/",
    ".cache/",
    ".ansible/",
    "ansible-navigator.yml",
    "navigator-artifacts/",
    "pyproject.toml",
)


@pytest.fixture(scope="module")
def tarball(repo, tmp_path_factory, ansible_env):
    output = tmp_path_factory.mktemp("built")
    result = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(output), str(repo)],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (built,) = output.glob("gpufabric-cluster-*.tar.gz")
    return built


def test_collection_tarball_leaves_out_dev_content(tarball):
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "MANIFEST.json" in names
    assert "meta/runtime.yml" in names
    assert "roles/nccl_env/tasks/main.yml" in names
    assert "plugins/lookup/fabric_plan.py" in names
    assert "catalog/gcp.yml" in names
    assert "LICENSE" in names
    leaked = [name for name in names if name.startswith(DEV_ONLY) or "__pycache__" in name]
    assert leaked == []


def modules_called(repo: Path) -> list[str]:
    files = [
        *repo.glob("roles/*/tasks/**/*.yml"),
        *repo.glob("roles/*/handlers/**/*.yml"),
        *repo.glob("playbooks/*.yml"),
    ]
    called = {name for path in files for name in MODULE_CALL.findall(path.read_text())}
    return sorted(name for name in called if not name.startswith("ansible.builtin."))


def test_the_installed_tarball_and_its_dependencies_resolve_every_module_the_roles_call(
    repo, tarball, tmp_path, ansible_env
):
    def galaxy_install(target: Path, collections_path: Path) -> subprocess.CompletedProcess[str]:
        # --offline: dependencies come from the collections already installed on collections_path.
        env = {
            **ansible_env,
            "ANSIBLE_COLLECTIONS_PATH": str(collections_path),
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "0",
        }
        command = [str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p", str(target), str(tarball)]
        return subprocess.run(command, capture_output=True, text=True, env=env, check=False)

    # Without its dependencies the install stops, naming them: galaxy.yml declares what the roles need.
    (tmp_path / "empty").mkdir()
    alone = galaxy_install(tmp_path / "alone", tmp_path / "empty")
    assert alone.returncode != 0 and "community.general:>=" in alone.stdout + alone.stderr
    installed = galaxy_install(tmp_path / "target", ANSIBLE_PACKAGE_COLLECTIONS)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "gpufabric.cluster:" in installed.stdout and "community.general:" in installed.stdout

    # Ansible's own plugin loader, seeing only the installed copy and the dependencies, finds every module.
    modules = modules_called(repo)
    assert {"community.general.modprobe", "ansible.posix.sysctl", "gpufabric.cluster.sriov_vfs"} <= set(modules)
    search = os.pathsep.join([str(tmp_path / "target"), str(ANSIBLE_PACKAGE_COLLECTIONS)])
    env = {**ansible_env, "ANSIBLE_COLLECTIONS_PATH": search, "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "0"}
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE, *modules], capture_output=True, text=True, env=env, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    assert [name for name, path in resolved.items() if path is None] == []
    ours = {name: path for name, path in resolved.items() if name.startswith("gpufabric.cluster.")}
    assert all(path.startswith(str(tmp_path / "target")) for path in ours.values()), ours
