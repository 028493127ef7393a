# SPDX-License-Identifier: Apache-2.0
"""The signed APT repository fixture: it builds, gpgv trusts it with its key, and the other-key repo is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.aptrepo import Package, build_flat_repo, build_repo

TOOLS = ("gpg", "gpgv", "dpkg-deb", "apt-ftparchive")
pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS), reason=f"needs {', '.join(TOOLS)} (gnupg, apt-utils)"
)
PACKAGES = [
    Package("doca-ofed", "2.9.1-1", depends=["doca-ofed-userspace (= 2.9.1-1)"]),
    Package("doca-ofed-userspace", "2.9.1-1", files={"/usr/bin/ofed_info": "#!/bin/sh\necho 2.9.1-1\n"}),
]


def gpgv(repo_path: Path, key_file: Path, suite: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gpgv", "--keyring", str(key_file), str(repo_path / "dists" / suite / "InRelease")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_repo_builds_and_verifies(tmp_path):
    repo = build_repo(tmp_path / "repo", PACKAGES)
    assert repo.suite == "stable" and repo.component == "main"
    debs = sorted(path.name for path in (repo.path / "pool" / "main").glob("*.deb"))
    assert debs == ["doca-ofed-userspace_2.9.1-1_all.deb", "doca-ofed_2.9.1-1_all.deb"]
    packages = (repo.path / "dists" / "stable" / "main" / "binary-amd64" / "Packages").read_text()
    assert "Package: doca-ofed\n" in packages and "Depends: doca-ofed-userspace (= 2.9.1-1)" in packages
    assert "TEST DOUBLE" in packages
    assert "Packages" in (repo.path / "dists" / "stable" / "Release").read_text()
    assert (repo.path / "dists" / "stable" / "Release.gpg").is_file()
    assert len(repo.fingerprint) == 40 and repo.key_file.read_bytes()[:1] != b"-"  # binary, not armored
    result = gpgv(repo.path, repo.key_file, "stable")
    assert result.returncode == 0, result.stderr
    contents = subprocess.run(
        ["dpkg-deb", "--contents", str(repo.path / "pool/main/doca-ofed-userspace_2.9.1-1_all.deb")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-rwxr-xr-x root/root" in contents and "./usr/bin/ofed_info" in contents


def test_other_key_does_not_verify(tmp_path):
    good = build_repo(tmp_path / "good", PACKAGES[:1], suite="bookworm", component="doca")
    bad = build_repo(tmp_path / "bad", PACKAGES[:1], suite="bookworm", component="doca", sign_with="other")
    assert bad.fingerprint == good.fingerprint  # key_file is always the run's key
    assert bad.key_file.read_bytes() == good.key_file.read_bytes()
    result = gpgv(bad.path, bad.key_file, "bookworm")
    assert result.returncode != 0


def run_cli(out: Path, spec: Path) -> subprocess.CompletedProcess[str]:
    """tests/fixtures/aptrepo.py as the molecule create playbooks run it."""
    script = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "aptrepo.py"
    return subprocess.run(
        [sys.executable, str(script), str(out), "--spec", str(spec)], capture_output=True, text=True, check=False
    )


def test_cli(tmp_path):
    spec = tmp_path / "spec.yml"
    spec.write_text(
        "suite: stable\nsign_with: other\npackages:\n  - name: mlnx-ofed-kernel-utils\n    version: 2.10.0-1\n",
        encoding="utf-8",
    )
    result = run_cli(tmp_path / "out", spec)
    assert result.returncode == 0, result.stderr
    repo = json.loads(result.stdout)
    assert Path(repo["key_file"]).is_file()
    assert gpgv(Path(repo["path"]), Path(repo["key_file"]), "stable").returncode != 0


def test_flat_repo_is_laid_out_as_nvidias(tmp_path):
    """NVIDIA's CUDA repositories: the .debs and indexes in one directory (suite "/"), the armored key beside them."""
    repo = build_flat_repo(tmp_path / "ubuntu2204" / "x86_64", PACKAGES, key_name="3bf863cc.pub")
    assert (repo.suite, repo.component) == ("/", "")
    names = {path.name for path in repo.path.iterdir()}
    assert {"Packages", "Packages.gz", "Release", "InRelease", "Release.gpg", "3bf863cc.pub"} <= names
    assert "doca-ofed_2.9.1-1_all.deb" in names and "dists" not in names and "pool" not in names
    assert "Filename: ./doca-ofed_2.9.1-1_all.deb" in (repo.path / "Packages").read_text()
    assert (repo.path / "3bf863cc.pub").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    result = subprocess.run(
        ["gpgv", "--keyring", str(repo.key_file), str(repo.path / "InRelease")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_one_spec_builds_several_repositories_with_one_key(tmp_path):
    """The molecule scenarios' form: a flat CUDA repository and an archive with two suites, one key."""
    spec = tmp_path / "spec.yml"
    spec.write_text(
        "repositories:\n"
        "  - {path: compute/cuda/repos/ubuntu2204/x86_64, layout: flat, key_name: 3bf863cc.pub,"
        " packages: [{name: nvidia-dkms-570-open, version: 570.133.20-0ubuntu1}]}\n"
        "  - {path: ubuntu, suites: [jammy, noble], component: main,"
        " packages: [{name: linux-headers-6.8.0-1-generic, version: 6.8.0-1.1}]}\n",
        encoding="utf-8",
    )
    result = run_cli(tmp_path / "out", spec)
    assert result.returncode == 0, result.stderr
    flat, archive = json.loads(result.stdout)
    assert flat["fingerprint"] == archive["fingerprint"] and flat["suite"] == "/"
    out = tmp_path / "out"
    assert (out / "compute/cuda/repos/ubuntu2204/x86_64/nvidia-dkms-570-open_570.133.20-0ubuntu1_all.deb").is_file()
    for suite in ("jammy", "noble"):
        packages = (out / "ubuntu/dists" / suite / "main/binary-amd64/Packages").read_text()
        assert "Package: linux-headers-6.8.0-1-generic" in packages
        assert f"Suite: {suite}" in (out / "ubuntu/dists" / suite / "Release").read_text()
