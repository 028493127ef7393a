# SPDX-License-Identifier: Apache-2.0
"""Every filter the collection exports documents itself, true to its signature.

A file with one filter holds its DOCUMENTATION; a file with several holds none, and each of its
filters has plugins/filter/<filter name>.yml (ansible-doc reads that file only when the Python file
has no DOCUMENTATION: one there would be shown as the page of every filter in the file).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.collection import collections_path

REPO = Path(__file__).resolve().parents[2]
FILTERS = REPO / "plugins" / "filter"
BIN = Path(sys.executable).parent

sys.path.insert(0, str(collections_path()))


def _python_documentation(path: Path) -> dict[str, Any] | None:
    """The DOCUMENTATION a plugin file assigns, parsed; None when it has none."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "DOCUMENTATION" for target in node.targets
        ):
            return yaml.safe_load(ast.literal_eval(node.value))
    return None


def _exported() -> dict[str, tuple[Path, Any]]:
    """Filter name -> (its plugin file, its function), for every FilterModule in plugins/filter."""
    found: dict[str, tuple[Path, Any]] = {}
    for path in sorted(FILTERS.glob("*.py")):
        module = importlib.import_module(f"ansible_collections.gpufabric.cluster.plugins.filter.{path.stem}")
        for name, function in module.FilterModule().filters().items():
            assert name not in found, f"{name} is exported by {found[name][0].name} and {path.name}"
            found[name] = (path, function)
    return found


EXPORTED = _exported()


def _documentation(name: str) -> dict[str, Any]:
    """What ansible-doc shows for the filter: its file's DOCUMENTATION, else its own YAML file's."""
    path, _function = EXPORTED[name]
    in_python = _python_documentation(path)
    if in_python is not None:
        return in_python
    sidecar = FILTERS / f"{name}.yml"
    assert sidecar.is_file(), f"{name} ({path.name}) has no documentation: add {sidecar.relative_to(REPO)}"
    return yaml.safe_load(sidecar.read_text(encoding="utf-8"))["DOCUMENTATION"]


def test_the_collection_exports_filters() -> None:
    assert len(EXPORTED) >= 30


@pytest.mark.parametrize("path", sorted(FILTERS.glob("*.py")), ids=lambda path: path.name)
def test_a_file_of_several_filters_holds_no_documentation(path: Path) -> None:
    names = [name for name, (where, _function) in EXPORTED.items() if where == path]
    if len(names) > 1:
        assert _python_documentation(path) is None, (
            f"{path.name} exports {', '.join(names)}: its DOCUMENTATION would be every one's page; "
            "document each in plugins/filter/<filter name>.yml"
        )


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_filter_documents_itself_true_to_its_signature(name: str) -> None:
    doc = _documentation(name)
    assert doc["name"] == name
    assert doc.get("short_description") and doc.get("description")
    parameters = list(inspect.signature(EXPORTED[name][1]).parameters.values())
    options = doc.get("options") or {}
    # The value left of the | is _input; the arguments are the function's other parameters.
    assert set(options) == {"_input", *(parameter.name for parameter in parameters[1:])}
    for parameter in parameters[1:]:
        required = parameter.default is inspect.Parameter.empty
        assert bool(options[parameter.name].get("required")) == required, f"{name}: {parameter.name} required?"
    positional = [part.strip() for part in str(doc.get("positional") or "").split(",") if part.strip()]
    assert positional == [parameter.name for parameter in parameters[1 : 1 + len(positional)]]


def test_no_documentation_file_without_its_filter() -> None:
    orphans = sorted(path.name for path in FILTERS.glob("*.yml") if path.stem not in EXPORTED)
    assert orphans == []


def test_ansible_doc_shows_each_filter_its_own_page(ansible_env: dict[str, str]) -> None:
    """What a user sees: `ansible-doc -t filter NAME` for every filter, in one run."""
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "filter", "--json", *(f"gpufabric.cluster.{name}" for name in EXPORTED)],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    shown = {fqcn.rsplit(".", 1)[-1]: page["doc"]["name"] for fqcn, page in json.loads(result.stdout).items()}
    assert shown == {name: name for name in EXPORTED}


@pytest.mark.parametrize(
    "path",
    sorted(
        path for kind in ("modules", "lookup", "inventory", "action") for path in (REPO / "plugins" / kind).glob("*.py")
    ),
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_every_plugins_documentation_is_yaml(path: Path) -> None:
    """DOCUMENTATION, EXAMPLES and RETURN parse (a ': ' in a plain scalar does not): ansible-doc and sanity read
    them, and a broken one is otherwise found only by the sanity stage."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
            for target in node.targets
        ):
            # An inventory plugin's EXAMPLES may hold several files, one YAML document each.
            list(yaml.safe_load_all(ast.literal_eval(node.value)))
