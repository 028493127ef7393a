# SPDX-License-Identifier: Apache-2.0
"""OS identity fixtures: each target's real release files and the facts ansible-core gathered from them.

tests/fixtures/os_release/record.py writes <target>/facts.json; SOURCES.md says where each file came from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "os_release"

# target: (distribution, version, major version, release, os_family)
EXPECTED = {
    "debian12": ("Debian", "12.11", "12", "bookworm", "Debian"),
    "debian13": ("Debian", "13.1", "13", "trixie", "Debian"),
    "ubuntu2204": ("Ubuntu", "22.04", "22", "jammy", "Debian"),
    "ubuntu2404": ("Ubuntu", "24.04", "24", "noble", "Debian"),
    "rocky9": ("Rocky", "9.7", "9", "Blue Onyx", "RedHat"),
    "rhel9": ("RedHat", "9.6", "9", "Plow", "RedHat"),
}
# The release files each OS has (/etc/os-release is a symlink to ../usr/lib/os-release on all of them).
DEBIAN = {"usr/lib/os-release", "etc/debian_version"}
UBUNTU = {"usr/lib/os-release", "etc/lsb-release", "etc/debian_version"}
RELEASE_FILES = {
    "debian12": DEBIAN,
    "debian13": DEBIAN,
    "ubuntu2204": UBUNTU,
    "ubuntu2404": UBUNTU,
    "rocky9": {"usr/lib/os-release", "etc/redhat-release", "etc/rocky-release", "etc/system-release"},
    "rhel9": {"usr/lib/os-release", "etc/redhat-release", "etc/system-release"},
}


def facts(target: str) -> dict[str, object]:
    return json.loads((FIXTURES / target / "facts.json").read_text())


def test_every_target_has_files_and_facts():
    targets = {path.name for path in FIXTURES.iterdir() if path.is_dir() and not path.name.startswith("__")}
    assert targets == set(EXPECTED)
    for target in EXPECTED:
        assert (FIXTURES / target / "facts.json").is_file(), target


@pytest.mark.parametrize("target", sorted(RELEASE_FILES))
def test_target_has_the_release_files_of_its_os(target):
    root = FIXTURES / target
    files = {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()} - {"facts.json"}
    assert files == RELEASE_FILES[target]
    assert all((root / name).read_text().endswith("\n") for name in files)


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_identity_facts(target):
    distribution, version, major, release, family = EXPECTED[target]
    got = facts(target)
    assert got["ansible_distribution"] == distribution
    assert got["ansible_distribution_version"] == version
    assert got["ansible_distribution_major_version"] == major
    assert got["ansible_distribution_release"] == release
    assert got["ansible_os_family"] == family
    recorded = got["_recorded_with"]
    assert isinstance(recorded, dict) and recorded["ansible_core"] and "ansible.builtin.setup" in recorded["command"]


@pytest.mark.parametrize("target", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_lsb_facts_come_from_lsb_release(target):
    lines = (FIXTURES / target / "etc" / "lsb-release").read_text().splitlines()
    distrib = {key: value.strip('"') for key, value in (line.split("=", 1) for line in lines)}
    assert facts(target)["ansible_lsb"] == {
        "id": distrib["DISTRIB_ID"],
        "release": distrib["DISTRIB_RELEASE"],
        "major_release": distrib["DISTRIB_RELEASE"].split(".")[0],
        "codename": distrib["DISTRIB_CODENAME"],
        "description": distrib["DISTRIB_DESCRIPTION"],
    }


@pytest.mark.parametrize("target", ["debian12", "debian13", "rocky9", "rhel9"])
def test_no_lsb_facts_without_lsb_release(target):
    assert facts(target)["ansible_lsb"] == {}
