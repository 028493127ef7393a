# SPDX-License-Identifier: Apache-2.0
"""Image doubles (tests/fixtures/images/doubles) follow their recorded manifests: every package entry names the
manifest's line, keeps each value the manifest sources (version, hold) and says UNVERIFIED where it picked one the
manifest does not have; the index excerpts they name exist; tests/fixtures/image_double.py builds them."""

from __future__ import annotations

import fnmatch
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "tests" / "fixtures" / "images"
DOUBLES = sorted((IMAGES / "doubles").glob("*.yml"))
UNVERIFIED = "UNVERIFIED"
sys.path.insert(0, str(REPO / "tests" / "fixtures"))

import image_double  # noqa: E402


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    return data


def test_there_are_doubles() -> None:
    assert {path.stem for path in DOUBLES} >= {
        "azure-ubuntu-hpc-2204",
        "azure-ubuntu-hpc-2404",
        "gcp-ubuntu-accelerator-2404-580",
        "oci-ubuntu-2204-doca-gpu-580",
    }


@pytest.mark.parametrize("path", DOUBLES, ids=lambda path: path.stem)
def test_scenario_runs_every_double_on_a_profile_of_its_manifest(path: Path) -> None:
    hosts = _load(REPO / "molecule" / "image_doubles" / "inventory" / "hosts.yml")["molecule"]["hosts"]
    manifest = _load(IMAGES / "manifests" / f"{path.stem}.yml")
    tag = {"ubuntu2204": "22.04", "ubuntu2404": "24.04"}[_load(path)["base"]]
    runs = [host for host in hosts.values() if host["molecule_image"].endswith(f"-image-double-{path.stem}:{tag}")]
    assert runs, f"molecule/image_doubles runs no host on {path.stem}"
    for host in runs:
        assert host["gpufabric_profile"] in manifest["profiles"], f"{path.stem}: {host['gpufabric_profile']}"


@pytest.mark.parametrize("path", DOUBLES, ids=lambda path: path.stem)
def test_double_follows_its_manifest(path: Path) -> None:
    double = _load(path)
    assert double["manifest"] == path.stem
    manifest = _load(IMAGES / "manifests" / f"{path.stem}.yml")
    recorded = {entry["name"]: entry for entry in manifest.get("packages") or []}
    for entry in double.get("packages") or []:
        where = f"{path.name}: {entry['name']}"
        section, _sep, key = str(entry.get("manifest", "")).partition(":")
        assert section == "packages" and key in recorded, f"{where}: names no package line of the manifest"
        line = recorded[key]
        version = str(line.get("version"))
        open_values = [field for field in ("version", "held") if line.get(field) == UNVERIFIED]
        if fnmatch.fnmatchcase(entry["name"], key):
            if version != UNVERIFIED and "not recorded" not in version:
                assert entry["version"] == version, f"{where}: version differs from the manifest's"
        else:
            # The line names what the image's name says it carries ("DOCA 3.2.1"), no package: the double picks the
            # package and its Debian version, which must carry the product's version, and says so.
            assert "name" in str(entry.get("unverified")), f"{where}: picks a name for line {key} without saying so"
            product = re.search(r"\d+(?:\.\d+)+", version)
            if version != UNVERIFIED and product:
                assert str(entry["version"]).startswith(product.group()), f"{where}: not version {product.group()}"
            open_values.append("version")
        if line.get("held") != UNVERIFIED:
            assert bool(entry.get("held")) is bool(line["held"]), f"{where}: hold differs from the manifest's"
        picked = open_values if key == entry["name"] else ["name", *open_values]
        if picked or "not recorded" in version:
            assert entry.get("unverified"), f"{where}: picks {picked or ['version']} without saying UNVERIFIED"
    assert double["base"] == {"22.04": "ubuntu2204", "24.04": "ubuntu2404"}[manifest["image"]["os"]["version_id"]], (
        f"{path.name}: base is not the manifest's release"
    )
    for name in double.get("repositories") or []:
        assert (IMAGES / "index" / f"{name}.yml").is_file(), f"{path.name}: no index excerpt {name}"


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_context_builds_packages_holds_files_and_units(tmp_path: Path) -> None:
    spec = IMAGES / "doubles" / "azure-ubuntu-hpc-2404.yml"
    image_double.context(spec, tmp_path / "context")
    debs = sorted(deb.name for deb in (tmp_path / "context" / "debs").iterdir())
    assert "libnccl2_2.30.4-1+cuda13.0_all.deb" in debs
    setup = (tmp_path / "context" / "setup.sh").read_text()
    assert "printf '%s hold\\n' libnccl2 libnccl-dev | dpkg --set-selections" in setup
    assert "systemctl enable nvidia-fabricmanager.service sku-customizations.service" in setup
    unit = tmp_path / "context" / "rootfs" / "etc" / "systemd" / "system" / "sku-customizations.service"
    assert "ExecStop=/usr/sbin/remove_sku_customizations.sh" in unit.read_text()
    assert (tmp_path / "context" / "rootfs" / "usr" / "sbin" / "setup_sku_customizations.sh").stat().st_mode & 0o111


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_context_takes_the_files_of_the_double_named_in_files_from(tmp_path: Path) -> None:
    """Azure's 22.04 double carries the 2404 double's sku-customizations files (one recipe writes them on both
    releases); its own setup script, the VM size, replaces the 2404 one."""
    image_double.context(IMAGES / "doubles" / "azure-ubuntu-hpc-2204.yml", tmp_path / "context")
    rootfs = tmp_path / "context" / "rootfs"
    shared = _load(IMAGES / "doubles" / "azure-ubuntu-hpc-2404.yml")["files"]
    unit = "/etc/systemd/system/sku-customizations.service"
    assert (rootfs / unit.lstrip("/")).read_text() == shared[unit]
    assert (rootfs / "opt/azurehpc/customizations/ndv5.sh").stat().st_mode & 0o111
    assert "standard_nd96isr_h200_v5" in (rootfs / "usr/sbin/setup_sku_customizations.sh").read_text()
    setup = (tmp_path / "context" / "setup.sh").read_text()
    assert "systemctl enable nvidia-fabricmanager.service sku-customizations.service" in setup


def test_files_from_must_name_a_double_without_files_from(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("files_from: b\nfiles: {/etc/a: a}\n", encoding="utf-8")
    (tmp_path / "b.yml").write_text("files_from: c\nfiles: {/etc/b: b}\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="b: files_from names a double that has files_from itself"):
        image_double.image_files(_load(tmp_path / "a.yml"), tmp_path)


def test_context_of_a_double_without_packages_installs_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "bare.yml"
    spec.write_text(
        "schema: 1\nmanifest: nebius-ubuntu2204-cuda12\nbase: ubuntu2204\nrepositories: [ubuntu-jammy]\n"
        "packages: []\nfiles: {}\nenable: []\n",
        encoding="utf-8",
    )
    image_double.context(spec, tmp_path / "context")
    assert not any((tmp_path / "context" / "debs").iterdir())
    assert "dpkg" not in (tmp_path / "context" / "setup.sh").read_text()


def test_repos_offer_every_recorded_version(tmp_path: Path) -> None:
    out = tmp_path / "repos.yml"
    image_double.repos(DOUBLES, out)
    repositories = {repo["path"]: repo for repo in _load(out)["repositories"]}
    cuda = repositories["compute/cuda/repos/ubuntu2404/x86_64"]
    assert cuda["layout"] == "flat" and cuda["key_name"] == "3bf863cc.pub"
    offered = {(package["name"], package["version"]) for package in cuda["packages"]}
    assert ("libnccl2", "2.27.5-1+cuda12.9") in offered
    assert ("nvidia-fabricmanager", "580.126.20-1") in offered
    # Fabric manager carries its (inert) unit, so that a host installing it can enable it.
    (fm,) = [p for p in cuda["packages"] if (p["name"], p["version"]) == ("nvidia-fabricmanager", "580.126.20-1")]
    assert "ExecStart=/bin/true" in fm["files"]["/usr/lib/systemd/system/nvidia-fabricmanager.service"]
    # An UNVERIFIED version is not offered: nothing says what the string is.
    assert not any(name == "nvidia-driver-pinning-580.173.02" for name, _version in offered)
    assert repositories["ubuntu/noble"]["suites"] == ["noble"]
    jammy_cuda = repositories["compute/cuda/repos/ubuntu2204/x86_64"]
    assert ("libnccl2", "2.28.7-1+cuda12.9") in {(entry["name"], entry["version"]) for entry in jammy_cuda["packages"]}
    assert repositories["ubuntu/jammy"]["suites"] == ["jammy"]
