# SPDX-License-Identifier: Apache-2.0
"""House rules every role keeps: argspec and defaults agree, variables carry the role prefix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml"))
BIN = Path(sys.executable).parent


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


@pytest.mark.parametrize("role", ROLES)
def test_argspec_and_defaults_agree(role):
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    optional = {name: spec for name, spec in options.items() if not spec.get("required")}
    assert set(defaults) == set(optional), "defaults/main.yml must hold exactly the optional options"
    for name, spec in optional.items():
        assert spec.get("default") == defaults[name], f"{name}: argspec default differs from defaults/main.yml"
    for name, spec in options.items():
        assert name.startswith(f"{role}_"), f"{name} lacks the {role}_ prefix"
        assert spec.get("description"), f"{name} has no description"
        if spec.get("required"):
            assert name not in defaults, f"{name} is required and must not get a default"


@pytest.mark.parametrize("role", ROLES)
def test_role_has_a_molecule_scenario(role):
    assert (REPO / "molecule" / role / "molecule.yml").is_file()


def test_lookup_documentation_renders(ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "lookup", "gpufabric.cluster.fabric_plan"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "catalog_files" in result.stdout


@pytest.mark.parametrize("role", ROLES)
def test_role_documentation_renders(role, ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "role", f"gpufabric.cluster.{role}"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"{role}_" in result.stdout
