# SPDX-License-Identifier: Apache-2.0
"""This collection's module_utils for the filter plugins, each one run only when a filter first uses it.

Ansible finds a collection's filter by importing the files of plugins/filter/ one after another, in name order,
until one holds it (ansible.plugins.loader.Jinja2Loader.get_with_context), and it does so again in every worker
process it forks for a task, compiling each file from source (its collection loader keeps no bytecode). Templating
``roce_plan`` imported the planning code of every role whose filter file sorts before it: about 0.2 s of CPU a task
that used one. A filter file that takes its module_utils from here costs its own few lines until a filter of it is
called. Python's own ``importlib.util.LazyLoader`` does the deferring.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

PACKAGE = "ansible_collections.gpufabric.cluster.plugins.module_utils"


def module_utils(name: str) -> ModuleType:
    """plugins/module_utils/<name>.py, its code run at the first attribute read (or already imported)."""
    full_name = f"{PACKAGE}.{name}"
    if full_name in sys.modules:
        return sys.modules[full_name]
    spec = importlib.util.find_spec(full_name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module_utils {name!r} in this collection ({full_name})")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[full_name] = module
    spec.loader.exec_module(module)
    return module
