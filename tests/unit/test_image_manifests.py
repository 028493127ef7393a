# SPDX-License-Identifier: Apache-2.0
"""Recorded image manifests and repository index excerpts (tests/fixtures/images/{manifests,index}): the schema
in manifests/README.md. Every value has a source with an address and a date, or it is UNVERIFIED and named under
unverified; names are unique; profiles and catalog images exist in the catalog."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "tests" / "fixtures" / "images"
MANIFESTS = sorted((IMAGES / "manifests").glob("*.yml"))
INDEXES = sorted((IMAGES / "index").glob("*.yml"))
UNVERIFIED = "UNVERIFIED"
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
ADDRESS = re.compile(r"https?://\S+|gh-index:\d+|tests/fixtures/\S+")
SECTIONS = {"packages": "name", "files": "path", "services": "unit", "interfaces": "name"}
TOP = {
    "schema",
    "image",
    "recorded",
    "kernel",
    "packages",
    "files",
    "services",
    "interfaces",
    "profiles",
    "unverified",
    "notes",
}


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    return data


def _catalog() -> tuple[set[str], set[str]]:
    profiles: set[str] = set()
    images: set[str] = set()
    for path in (REPO / "catalog").glob("*.yml"):
        data = _load(path)
        profiles.update((data.get("profiles") or {}).keys())
        images.update((data.get("images") or {}).keys())
    return profiles, images


def _sourced(source: Any) -> bool:
    return isinstance(source, str) and bool(ADDRESS.search(source)) and bool(DATE.search(source))


def _unverified_items(data: dict[str, Any], where: str) -> set[str]:
    items = set()
    for entry in data.get("unverified") or []:
        assert isinstance(entry, dict) and entry.get("item") and entry.get("note"), f"{where}: unverified {entry!r}"
        assert entry["item"] not in items, f"{where}: unverified item {entry['item']!r} twice"
        items.add(entry["item"])
    return items


def _check_entry(entry: dict[str, Any], key: str, unverified: set[str], where: str) -> None:
    """Sourced, or UNVERIFIED somewhere and named under unverified."""
    open_values = [k for k, v in entry.items() if v == UNVERIFIED]
    if entry.get("source") == UNVERIFIED or open_values:
        missing = open_values or ["source"]
        assert key in unverified, f"{where}: {key} has UNVERIFIED {missing} but is not under unverified"
    if entry.get("source") != UNVERIFIED:
        source = entry.get("source")
        assert _sourced(source), f"{where}: {key} source {source!r} lacks an address or a date"


@pytest.fixture(scope="module")
def catalog() -> tuple[set[str], set[str]]:
    return _catalog()


def test_files_exist() -> None:
    assert len(MANIFESTS) >= 10 and len(INDEXES) >= 5
    assert (IMAGES / "manifests" / "README.md").is_file()


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_manifest(path: Path, catalog: tuple[set[str], set[str]]) -> None:
    data = _load(path)
    where = path.name
    assert data["schema"] == 1 and set(data) <= TOP, f"{where}: keys {sorted(set(data) - TOP)}"
    assert DATE.fullmatch(str(data["recorded"])), f"{where}: recorded"
    image = data["image"]
    assert image["name"] == path.stem, f"{where}: image.name"
    assert image["cloud"] in {"gcp", "aws", "azure", "oci", "nebius"}
    assert image["arch"] in {"x86_64", "aarch64"}
    assert set(image["os"]) == {"id", "version_id", "codename"} and isinstance(image["os"]["version_id"], str)
    assert _sourced(image["source"]), f"{where}: image.source"
    for seen in image.get("seen_versions") or []:
        assert seen["name"] and _sourced(seen["source"]), f"{where}: seen_versions {seen!r}"
    profiles, images = catalog
    if image["catalog_image"] is not None:
        assert image["catalog_image"] in images, f"{where}: catalog image {image['catalog_image']!r} not in catalog"
    unverified = _unverified_items(data, where)
    kernel = data["kernel"]
    assert set(kernel) == {"flavour", "version", "source"}, f"{where}: kernel keys"
    _check_entry(kernel, "kernel", unverified, where)
    for section, key_field in SECTIONS.items():
        names = set()
        for entry in data[section]:
            name = entry[key_field]
            assert name and name not in names, f"{where}: {section} {name!r} empty or twice"
            names.add(name)
            if section == "packages":
                assert entry["held"] in (True, False, UNVERIFIED), f"{where}: {name} held"
            _check_entry(entry, f"{section}:{name}", unverified, where)
    for profile in data["profiles"]:
        assert profile in profiles, f"{where}: profile {profile!r} not in catalog"
    for note in data.get("notes") or []:
        assert _sourced(note), f"{where}: note without address and date: {note!r}"


@pytest.mark.parametrize("path", INDEXES, ids=lambda p: p.stem)
def test_index(path: Path) -> None:
    data = _load(path)
    where = path.name
    assert data["schema"] == 1 and DATE.fullmatch(str(data["recorded"]))
    assert set(data["repo"]) == {"name", "url", "dist", "arch"} and ADDRESS.match(data["repo"]["url"])
    unverified = _unverified_items(data, where)
    assert data["packages"], f"{where}: no packages"
    for name, versions in data["packages"].items():
        seen = set()
        for entry in versions:
            version = entry["version"]
            assert version == UNVERIFIED or version not in seen, f"{where}: {name} {version} twice"
            seen.add(version)
            if version != UNVERIFIED and "file" in entry:
                assert f"_{version}_" in entry["file"], f"{where}: {entry['file']} does not carry {version}"
            _check_entry(entry, f"packages:{name}", unverified, where)
