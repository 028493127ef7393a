# SPDX-License-Identifier: Apache-2.0
"""The collection's version, its changelog and every version_added agree (antsibull-changelog's model).

antsibull-changelog lists a plugin or role as new in the release whose version its version_added names,
so a version_added that is neither a released version nor the coming one (galaxy.yml's) would never be
listed. ansible-test sanity's changelog test lints the fragments themselves.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from packaging.version import Version

from gpufabric import __version__

REPO = Path(__file__).resolve().parents[2]
GALAXY_VERSION = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
RELEASED = list(yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"])
VERSION_ADDED = re.compile(r"""^\s*version_added:\s*["']?([^"'\s]+)""", re.MULTILINE)


def version_added_everywhere() -> dict[str, set[str]]:
    """version -> the files that say version_added: version (plugin docs, filter docs, role argument specs)."""
    found: dict[str, set[str]] = {}
    files = [*(REPO / "plugins").rglob("*.py"), *(REPO / "plugins").rglob("*.yml")]
    files += (REPO / "roles").glob("*/meta/argument_specs.yml")
    for path in files:
        for version in VERSION_ADDED.findall(path.read_text()):
            found.setdefault(version, set()).add(str(path.relative_to(REPO)))
    return found


def test_the_coming_version_is_after_every_release_and_the_driver_says_it():
    assert __version__ == GALAXY_VERSION
    assert all(Version(GALAXY_VERSION) > Version(released) for released in RELEASED)


def test_every_version_added_is_a_release_or_the_coming_one():
    found = version_added_everywhere()
    assert found, "no version_added found: the pattern no longer matches the docs"
    stray = {version: sorted(files) for version, files in found.items() if version not in {*RELEASED, GALAXY_VERSION}}
    assert stray == {}, f"released: {RELEASED}, coming: {GALAXY_VERSION}"


def test_the_coming_release_has_fragments_and_a_summary():
    fragments = sorted((REPO / "changelogs" / "fragments").glob("*.yml"))
    assert fragments, "changes since the last release need changelog fragments"
    summaries = [path.name for path in fragments if "release_summary" in yaml.safe_load(path.read_text())]
    assert summaries == [f"{GALAXY_VERSION}.yml"]
