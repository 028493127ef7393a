# SPDX-License-Identifier: Apache-2.0
"""The scenarios build their fixtures anew at every create.

Molecule keeps its ephemeral directory after destroy, under one name for every clone of the project, so a fixture
(a SIMULATED tree, a TEST-DOUBLE tarball) built only when absent (``creates:``) is an earlier run's, made by older
code: stop 51's CI ran image_doubles on trees an earlier run of the machine had left, and every host found 0 GPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# The shared start's SSH key: any key the scenario made serves, whichever run made it.
KEPT = {REPO / "molecule" / "resources" / "create.yml": {"{{ molecule_ephemeral_directory }}/id_ed25519"}}
CREATE_PLAYBOOKS = sorted((REPO / "molecule").glob("*/create.yml"))


def _creates(plays: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(task name, path) of every task that runs only where its `creates` path is absent."""
    found = []
    for play in plays:
        for task in play.get("tasks") or []:
            for args in task.values():
                if isinstance(args, dict) and "creates" in args:
                    found.append((task.get("name", "?"), args["creates"]))
    return found


def test_every_scenario_with_fixtures_is_checked():
    assert len(CREATE_PLAYBOOKS) >= 10  # the shared start and the scenarios that build fixtures


@pytest.mark.parametrize("playbook", CREATE_PLAYBOOKS, ids=lambda path: path.parent.name)
def test_no_fixture_is_built_only_when_absent(playbook):
    plays = yaml.safe_load(playbook.read_text(encoding="utf-8"))
    stale = [(name, path) for name, path in _creates(plays) if path not in KEPT.get(playbook, set())]
    assert stale == [], f"{playbook.relative_to(REPO)}: build these anew at every create (changed_when: true)"
