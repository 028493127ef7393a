# SPDX-License-Identifier: Apache-2.0
"""docs/architecture.md's walk of one profile stays true: its files exist, its count is theirs, and its roles are
the ones the catalog runs for the profile, in the catalog's order."""

from __future__ import annotations

import re

from gpufabric.collection import plugin_utils
from tests.conftest import REPO

fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

PROFILE = "gcp/a3-megagpu-8g"


def walk_section() -> str:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("## One profile from catalog to host", 1)[1].split("\n## ", 1)[0]


def test_the_walk_names_files_that_exist_and_counts_them():
    section = walk_section()
    paths = set(re.findall(r"`((?:driver|catalog|plugins|playbooks|roles|tests)/[^`\s]+)`", section))
    missing = sorted(path for path in paths if not (REPO / path).exists())
    assert missing == [], f"docs/architecture.md's walk names files that do not exist: {missing}"
    walked = {path for path in paths if not path.startswith("tests/")}
    [count] = re.findall(r"That is (\d+) files for one profile", section)
    assert int(count) == len(walked), sorted(walked)


def test_the_walk_lists_the_roles_the_catalog_runs_for_the_profile():
    [listed] = re.findall(r"The plan's roles, in order: ((?:`[a-z_]+`(?:, )?)+)", walk_section())
    roles = re.findall(r"`([a-z_]+)`", listed)
    catalog = fabric_catalog.load_catalog()
    plan = fabric_plan.plan_host(
        {"gpufabric_profile": PROFILE}, catalog, tier="best", roles_present=set(fabric_catalog.KNOWN_ROLES)
    )
    assert roles == plan["roles"]
    for role in roles:  # and the walk says where each one starts
        assert f"`roles/{role}/tasks/main.yml`" in walk_section(), role
