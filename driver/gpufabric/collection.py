# SPDX-License-Identifier: Apache-2.0
"""Find the gpufabric.cluster collection on disk and make it importable and runnable.

The driver ships no catalog or plan logic of its own: it imports them from the
collection it runs (plugins/module_utils), so the CLI and the playbooks can
never disagree. Ansible finds collections under ``<path>/ansible_collections/
<namespace>/<name>``; a source checkout is not laid out that way, so the driver
links it into a cache directory with that shape.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpufabric import base_dirs
from gpufabric.errors import UserError

NAMESPACE, NAME = "gpufabric", "cluster"
PACKAGE_DIR = Path(__file__).resolve().parent
# Where hatch_build.py puts the collections the wheel bundles, inside the package.
BUNDLED = "_bundled"


def collection_root() -> Path:
    """The collection's root: the source checkout, else the copy inside the wheel."""
    for candidate in (PACKAGE_DIR.parents[1], PACKAGE_DIR / "_collection"):
        if (candidate / "galaxy.yml").is_file():
            return candidate
    raise UserError(f"cannot find the gpufabric.cluster collection next to {PACKAGE_DIR}; reinstall gpufabric")


def _cache_dir() -> Path:
    return base_dirs.cache_home() / "gpufabric" / "collections"


def collections_path() -> Path:
    """A directory usable as ANSIBLE_COLLECTIONS_PATH that holds this collection."""
    root = collection_root()
    if root.parts[-3:] == ("ansible_collections", NAMESPACE, NAME):
        return root.parents[2]
    # One link directory per checkout, so two checkouts on one machine never swap each other's link.
    base = _cache_dir() / hashlib.sha256(str(root).encode()).hexdigest()[:12]
    link = base / "ansible_collections" / NAMESPACE / NAME
    if not (link.is_symlink() and link.resolve() == root):
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(root, target_is_directory=True)
    return base


def bundled_path() -> Path | None:
    """The collections the wheel bundles (community.general, ansible.posix, containers.podman), as a
    collections path entry; None in a checkout, whose environment has the `ansible` package instead.

    Every run puts it after the user's collections path and before Python's sys.path (runs.base_env): a
    collection the user installed wins, and these win over an `ansible` package left in the environment.
    """
    bundled = PACKAGE_DIR / BUNDLED
    return bundled if (bundled / "ansible_collections").is_dir() else None


@cache
def _import_plugins(kind: str, name: str) -> ModuleType:
    """Once per module: `gpufabric plan` asks for its plugin_utils for every host."""
    path = str(collections_path())
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(f"ansible_collections.{NAMESPACE}.{NAME}.plugins.{kind}.{name}")


def module_utils(name: str) -> ModuleType:
    """Import plugins/module_utils/<name>.py of the collection (code that modules may also ship to hosts)."""
    return _import_plugins("module_utils", name)


def plugin_utils(name: str) -> ModuleType:
    """Import plugins/plugin_utils/<name>.py of the collection (controller-only code: catalog, plan, discovery)."""
    return _import_plugins("plugin_utils", name)


def filter_plugin(name: str) -> ModuleType:
    """Import plugins/filter/<name>.py of the collection (the filters the roles call)."""
    return _import_plugins("filter", name)


def _search_paths(collections_paths: str | None) -> list[Path]:
    """Where ansible-playbook looks for collections, in its order: ANSIBLE_COLLECTIONS_PATH, then sys.path.

    The order of ansible-core's collection finder: each path entry holds ansible_collections/<ns>/<name>
    (an entry that is itself an ansible_collections directory counts as its parent), then every sys.path
    entry, where the `ansible` package's collections live (site-packages/ansible_collections), unless
    ANSIBLE_COLLECTIONS_SCAN_SYS_PATH is false. ansible-playbook runs on this Python, so its sys.path is ours.
    """
    if collections_paths is None:
        # What runs.base_env gives ansible-playbook: this collection first, then the user's path, then the bundle.
        bundled = bundled_path()
        collections_paths = os.pathsep.join(
            [str(collections_path()), os.environ.get("ANSIBLE_COLLECTIONS_PATH", ""), str(bundled or "")]
        )
    paths = []
    for entry in collections_paths.split(os.pathsep):
        if entry:
            path = Path(entry).expanduser()
            paths.append(path.parent if path.name == "ansible_collections" else path)
    if os.environ.get("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "true").lower() not in ("0", "false", "no", "off", "n", "f"):
        paths += [Path(entry) for entry in sys.path if entry]
    return paths


def _installed_version(directory: Path) -> str | None:
    """The version of an installed collection (MANIFEST.json) or a source checkout (galaxy.yml), if it says."""
    try:
        if (directory / "MANIFEST.json").is_file():
            return str(json.loads((directory / "MANIFEST.json").read_text())["collection_info"]["version"])
        if (directory / "galaxy.yml").is_file():
            return str(yaml.safe_load((directory / "galaxy.yml").read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        pass
    return None


def _satisfies(version: str | None, requirement: str) -> bool:
    """Whether a version meets a galaxy.yml range ('*', '>=1.2.0', '>=1.2,<2'), as far as it can be told.

    Galaxy's range operators are PEP 440's; a version or range that cannot be read is not held against
    the collection: Ansible loads it all the same.
    """
    if version is None or requirement.strip() in ("", "*"):
        return True
    try:
        return SpecifierSet(requirement).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True


def _ansible_requirement() -> str:
    """The `ansible` package pin gpufabric's dev extra declares (a checkout's environment gets the collections
    from it; an installed wheel bundles them)."""
    try:
        declared = importlib.metadata.requires("gpufabric") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    for text in declared:
        requirement = Requirement(text)
        if requirement.name == "ansible":
            requirement.marker = None  # the dev extra's pin, without its `extra == "dev"`
            return str(requirement)
    return "ansible"


def require_collections(collections_paths: str | None = None) -> None:
    """Fail before any host is touched unless every collection in galaxy.yml's dependencies can be loaded.

    collections_paths: the ANSIBLE_COLLECTIONS_PATH value ansible-playbook will run with (os.pathsep-joined;
    runs.base_env()["ANSIBLE_COLLECTIONS_PATH"]); None: the same composition, from this environment.
    Raises UserError naming every missing or too old collection, where it looked and how to install them.
    """
    root = collection_root()
    dependencies = (yaml.safe_load((root / "galaxy.yml").read_text()) or {}).get("dependencies") or {}
    search = _search_paths(collections_paths)
    problems = []
    for fqcn, requirement in dependencies.items():
        namespace, name = fqcn.split(".")
        # The first copy on the search path is the one Ansible loads, whatever its version.
        found = next((d for p in search if (d := p / "ansible_collections" / namespace / name).is_dir()), None)
        if found is None:
            problems.append(f"{fqcn} {requirement} (not installed)")
        elif not _satisfies(version := _installed_version(found), str(requirement)):
            problems.append(f"{fqcn} {requirement} (found {version} in {found})")
    if problems:
        searched = os.pathsep.join(dict.fromkeys(str(path) for path in search))
        wanted = " ".join(f"'{fqcn}:{requirement}'" for fqcn, requirement in dependencies.items())
        # A too old copy comes before any other: Ansible loads it, not the wheel's bundle or a later one.
        shadowing = (
            " (a too old copy is loaded before any later one: upgrade or remove it)"
            if any("(found " in problem for problem in problems)
            else ""
        )
        raise UserError(
            f"{root / 'galaxy.yml'} needs Ansible collections that ansible-playbook cannot find: "
            f"{', '.join(problems)}; searched {searched}{shadowing}. Install them "
            f"with {sys.executable} -m pip install '{_ansible_requirement()}', or ansible-galaxy collection "
            f"install {wanted} -p DIR with DIR on ANSIBLE_COLLECTIONS_PATH"
        )
