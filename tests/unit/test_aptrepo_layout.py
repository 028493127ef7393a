# SPDX-License-Identifier: Apache-2.0
"""TEST-DOUBLE repositories in vendors' layouts: Ubuntu's archive (components) and DOCA's flat directories, signed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures import aptrepo_layout

TOOLS = ("gpg", "gpgv", "dpkg-deb", "apt-ftparchive")
pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS), reason=f"needs {', '.join(TOOLS)} (gnupg, apt-utils)"
)


def verifies(in_release: Path, key: Path) -> bool:
    result = subprocess.run(["gpgv", "--keyring", str(key), str(in_release)], capture_output=True, check=False)
    return result.returncode == 0


def test_archive_layout_has_a_pool_and_index_per_component_and_pocket(tmp_path):
    spec = {
        "layout": "archive",
        "origin": "Ubuntu",
        "suite": "jammy",
        "components": {
            "main": [{"name": "rdma-core", "version": "39.0-1"}],
            "universe": [{"name": "perftest", "version": "4.4+0.37-1"}],
        },
        "pockets": {"jammy-updates": {"main": [{"name": "rdma-core", "version": "39.0-1ubuntu0.1"}]}},
    }
    fingerprint = aptrepo_layout.build(tmp_path / "ubuntu", spec)
    out = tmp_path / "ubuntu"
    assert (out / "pool/main/jammy/rdma-core_39.0-1_all.deb").is_file()
    assert (out / "pool/universe/jammy/perftest_4.4+0.37-1_all.deb").is_file()
    main = (out / "dists/jammy/main/binary-amd64/Packages").read_text()
    assert "Package: rdma-core\n" in main and "perftest" not in main and "TEST DOUBLE" in main
    # A pocket indexes only its own packages, signed like the release suite.
    updates = (out / "dists/jammy-updates/main/binary-amd64/Packages").read_text()
    assert "Version: 39.0-1ubuntu0.1\n" in updates and "Version: 39.0-1\n" not in updates
    assert "Version: 39.0-1ubuntu0.1" not in main
    assert verifies(out / "dists/jammy-updates/InRelease", out / "test-double-archive-keyring.gpg")
    release = (out / "dists/jammy/Release").read_text()
    assert "Components: main universe\n" in release and "Codename: jammy\n" in release
    assert "Origin: Ubuntu\n" in release and " universe/binary-amd64/Packages\n" in release
    assert (out / "test-double-archive-keyring.fingerprint").read_text().strip() == fingerprint
    assert verifies(out / "dists/jammy/InRelease", out / "test-double-archive-keyring.gpg")


def test_flat_layout_keeps_the_debs_beside_a_signed_index_per_directory(tmp_path):
    packages = [{"name": "openmpi", "version": "4.1.7a1-1"}]  # the same version in both: one work dir each
    spec = {
        "layout": "flat",
        "origin": "gpufabric-test-double-doca",
        "directories": {
            "2.9.1/ubuntu22.04/x86_64": [{"name": "doca-ofed", "version": "2.9.1-1"}, *packages],
            "2.10.0/ubuntu22.04/x86_64": [{"name": "doca-ofed", "version": "2.10.0-1"}, *packages],
        },
    }
    aptrepo_layout.build(tmp_path / "doca", spec)
    for release in ("2.9.1", "2.10.0"):
        directory = tmp_path / "doca" / release / "ubuntu22.04/x86_64"
        index = (directory / "Packages").read_text()
        assert f"Filename: ./doca-ofed_{release}-1_all.deb\n" in index
        assert (directory / f"doca-ofed_{release}-1_all.deb").is_file()
        # A flat Release lists the index by its bare name (apt's suite ./).
        assert " Packages\n" in (directory / "Release").read_text()
        assert verifies(directory / "InRelease", tmp_path / "doca/test-double-archive-keyring.gpg")


def test_an_unknown_layout_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="layout 'pool' is not accepted; accepted: archive, flat"):
        aptrepo_layout.build(tmp_path / "x", {"layout": "pool"})
