# SPDX-License-Identifier: Apache-2.0
"""Wheel build hook: bundle the collections the roles and `gpufabric bake` call, unmodified.

collections/requirements.yml pins community.general, ansible.posix and containers.podman at the releases
of the `ansible` package that constraints.txt pins (and build-system.requires installs here). The hook
finds each one where ansible-core would, under an `ansible_collections` directory on this Python's
sys.path, checks it is exactly the pinned release, and copies it into the wheel as
gpufabric/_bundled/ansible_collections/<namespace>/<name>. Every file copied is checked against the
collection's own FILES.json checksums, so the wheel carries them byte for byte as published (GPL-3.0-or-later,
with their own licence files; docs/install-size.md). Editable installs get nothing: a checkout's
environment has the `ansible` package (the dev extra).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUNDLED = "gpufabric/_bundled"


def pinned(requirements: Path) -> dict[str, str]:
    """The collections requirements.yml pins, fqcn -> version (the `type: dir` entry is this collection)."""
    entries = yaml.safe_load(requirements.read_text())["collections"]
    return {entry["name"]: str(entry["version"]) for entry in entries if "version" in entry}


def find(fqcn: str) -> Path | None:
    """The collection's directory on sys.path, as ansible-core's finder scans it (first one wins)."""
    namespace, name = fqcn.split(".")
    for entry in sys.path:
        candidate = Path(entry or ".") / "ansible_collections" / namespace / name
        if (candidate / "MANIFEST.json").is_file():
            return candidate
    return None


def copy_verified(source: Path, target: Path) -> None:
    """Copy every file of an installed collection that its FILES.json lists, checking each checksum;
    MANIFEST.json and FILES.json themselves (FILES.json checked against MANIFEST.json)."""
    manifest = json.loads((source / "MANIFEST.json").read_text())
    files_json = (source / "FILES.json").read_bytes()
    expected = [manifest["file_manifest_file"], *json.loads(files_json)["files"]]
    target.mkdir(parents=True)
    shutil.copy2(source / "MANIFEST.json", target / "MANIFEST.json")
    for entry in expected:
        if entry["ftype"] != "file":
            continue
        path = source / entry["name"]
        if not path.is_file():  # the `ansible` package leaves out the collections' CI and docs files
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["chksum_sha256"]:
            raise RuntimeError(f"{path} differs from its collection's FILES.json (sha256 {digest}); reinstall ansible")
        (target / entry["name"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / entry["name"])


class BundleCollections(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._staging = Path(tempfile.mkdtemp(prefix="gpufabric-bundle-"))
        for fqcn, want in pinned(Path(self.root) / "collections" / "requirements.yml").items():
            source = find(fqcn)
            found = json.loads((source / "MANIFEST.json").read_text())["collection_info"]["version"] if source else None
            if found != want:
                where = f"{found} in {source}" if source else "nothing"
                raise RuntimeError(
                    f"building the wheel needs {fqcn} {want} (collections/requirements.yml) under ansible_collections "
                    f"on {sys.executable}'s sys.path, found {where}; build with the `ansible` package "
                    "pyproject.toml's build-system.requires names"
                )
            namespace, name = fqcn.split(".")
            copy_verified(source, self._staging / "ansible_collections" / namespace / name)
        build_data["force_include"][str(self._staging)] = BUNDLED

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        staging = getattr(self, "_staging", None)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
