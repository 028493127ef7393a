# SPDX-License-Identifier: Apache-2.0
"""`ansible-galaxy collection build` works and ships only what a collection user needs, and the built
tarball, installed with its declared dependencies, resolves every module its roles call. The wheel bundles
the three collections the roles and `gpufabric bake` call, unmodified, and runs with them alone."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

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
    "hatch_build.py",
    "bundled-licenses/",
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


# --- the wheel: gpufabric with the three collections it bundles (hatch_build.py) ----------------------------

BUNDLED = {"community.general", "ansible.posix", "containers.podman"}
# Each collection's own licence files, which must travel with it.
LICENCE_FILES = {
    "community.general": ["COPYING", "LICENSES/GPL-3.0-or-later.txt", "LICENSES/BSD-2-Clause.txt", "LICENSES/MIT.txt"],
    "ansible.posix": ["COPYING", "PSF-license.txt"],
    "containers.podman": ["COPYING"],
}
# Run from the wheel's files only: the bundle on the collections path, nothing from this environment's
# `ansible` package (Ansible scans no sys.path entry for collections).
FROM_THE_WHEEL = """
import json, os, sys
from gpufabric import collection, runs
collection.require_collections()
print(json.dumps({"package": str(collection.PACKAGE_DIR), "path": runs.base_env()["ANSIBLE_COLLECTIONS_PATH"]}))
"""


@pytest.fixture(scope="module")
def wheel(repo, tmp_path_factory):
    """The wheel as `pip install gpufabric` gets it (hatchling in-process, the build hook included), unpacked."""
    from hatchling.builders.wheel import WheelBuilder

    work = tmp_path_factory.mktemp("wheel")
    [built] = WheelBuilder(str(repo)).build(directory=str(work / "dist"), versions=["standard"])
    with zipfile.ZipFile(built) as archive:
        archive.extractall(work / "site")
    return work / "site"


def bundled_dir(site: Path, fqcn: str) -> Path:
    return site / "gpufabric" / "_bundled" / "ansible_collections" / Path(*fqcn.split("."))


def test_the_wheel_bundles_the_three_collections_unmodified_with_their_licences(repo, wheel):
    pins = {
        e["name"]: e["version"]
        for e in yaml.safe_load((repo / "collections/requirements.yml").read_text())["collections"]
        if "version" in e
    }
    assert pins.keys() == BUNDLED
    found = {
        f"{ns.name}.{name.name}"
        for ns in (wheel / "gpufabric/_bundled/ansible_collections").iterdir()
        for name in ns.iterdir()
    }
    assert found == BUNDLED, "no other collection"
    for fqcn in BUNDLED:
        directory = bundled_dir(wheel, fqcn)
        assert json.loads((directory / "MANIFEST.json").read_text())["collection_info"]["version"] == pins[fqcn]
        # Byte for byte as published: every file is one the collection's FILES.json lists, with its checksum.
        listed = {
            e["name"]: e["chksum_sha256"]
            for e in json.loads((directory / "FILES.json").read_text())["files"]
            if e["ftype"] == "file"
        }
        shipped = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
        assert shipped - {"MANIFEST.json", "FILES.json"} <= listed.keys(), fqcn
        for name in shipped - {"MANIFEST.json", "FILES.json"}:
            assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == listed[name], name
        assert all((directory / name).is_file() for name in LICENCE_FILES[fqcn]), fqcn
        assert (directory / "plugins").is_dir()


def test_the_wheel_metadata_names_every_licence_and_no_ansible_package(repo, wheel):
    [dist_info] = wheel.glob("gpufabric-*.dist-info")
    metadata = (dist_info / "METADATA").read_text()
    assert "License-Expression: Apache-2.0 AND GPL-3.0-or-later AND BSD-2-Clause AND MIT AND PSF-2.0" in metadata
    licences = sorted(line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("License-File: "))
    assert licences == [
        "LICENSE",
        *(f"bundled-licenses/{n}.txt" for n in ("BSD-2-Clause", "GPL-3.0-or-later", "MIT", "PSF-2.0")),
    ]
    assert all((dist_info / "licenses" / name).is_file() for name in licences)
    # The licence texts are community.general's own.
    general = bundled_dir(wheel, "community.general")
    for name in licences[1:]:
        assert (repo / name).read_bytes() == (general / "LICENSES" / Path(name).name).read_bytes()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    assert any(line.startswith("Requires-Dist: ansible-core") for line in requires)
    assert [
        line for line in requires if re.match(r"Requires-Dist: ansible\b(?!-)", line) and "extra ==" not in line
    ] == []


def test_gpufabric_from_the_wheel_runs_with_the_bundle_and_no_ansible_package(wheel, tmp_path, ansible_env):
    user = tmp_path / "mine"  # a collection path of the user's: it comes before the bundle
    env = {
        **{k: v for k, v in ansible_env.items() if k != "ANSIBLE_COLLECTIONS_PATH"},
        "PYTHONPATH": str(wheel),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ANSIBLE_COLLECTIONS_PATH": str(user),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "0",
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
    }
    result = subprocess.run(
        [sys.executable, "-c", FROM_THE_WHEEL], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    assert said["package"] == str(wheel / "gpufabric")
    path = said["path"].split(os.pathsep)
    assert path[1:] == [str(user), str(wheel / "gpufabric" / "_bundled")]
    # ansible-core itself, on the path gpufabric gives it, finds the modules and the connection gpufabric uses.
    run_env = {**env, "ANSIBLE_COLLECTIONS_PATH": said["path"]}
    names = ["community.general.modprobe", "community.general.dnf_versionlock", "ansible.posix.sysctl"]
    resolved = subprocess.run(
        [sys.executable, "-c", RESOLVE, *names], capture_output=True, text=True, env=run_env, cwd=tmp_path, check=False
    )
    assert resolved.returncode == 0, resolved.stderr
    assert all(
        found.startswith(str(wheel / "gpufabric" / "_bundled")) for found in json.loads(resolved.stdout).values()
    )
    doc = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "connection", "containers.podman.podman"],
        capture_output=True,
        text=True,
        env=run_env,
        cwd=tmp_path,
        check=False,
    )
    assert doc.returncode == 0 and "podman" in doc.stdout, doc.stderr
    listed = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env=run_env,
        cwd=tmp_path,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    collections = {name for per_path in json.loads(listed.stdout).values() for name in per_path}
    # ansible._protomatter is ansible-core's own, inside its `ansible` Python package.
    assert collections - {"ansible._protomatter"} == {*BUNDLED, "gpufabric.cluster"}
