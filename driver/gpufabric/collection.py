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
import os
import sys
from pathlib import Path
from types import ModuleType

from gpufabric.errors import UserError

NAMESPACE, NAME = "gpufabric", "cluster"
PACKAGE_DIR = Path(__file__).resolve().parent


def collection_root() -> Path:
    """The collection's root: the source checkout, else the copy inside the wheel."""
    for candidate in (PACKAGE_DIR.parents[1], PACKAGE_DIR / "_collection"):
        if (candidate / "galaxy.yml").is_file():
            return candidate
    raise UserError(f"cannot find the gpufabric.cluster collection next to {PACKAGE_DIR}; reinstall gpufabric")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpufabric" / "collections"


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


def _import_plugins(kind: str, name: str) -> ModuleType:
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
