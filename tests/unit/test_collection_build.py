# SPDX-License-Identifier: Apache-2.0
"""`ansible-galaxy collection build` works and ships only what a collection user needs."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

BIN = Path(sys.executable).parent
DEV_ONLY = (
    "tests/",
    "test-results/",
    "bench/",
    ".ci/",
    ".config/",
    "driver/",
    "molecule/",
    "scripts/",
    ".venv/",
    ".cache/",
    "pyproject.toml",
)


def test_collection_tarball_leaves_out_dev_content(repo, tmp_path, ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), str(repo)],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (tarball,) = tmp_path.glob("gpufabric-cluster-*.tar.gz")
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "MANIFEST.json" in names
    assert "meta/runtime.yml" in names
    assert "roles/nccl_env/tasks/main.yml" in names
    assert "plugins/lookup/fabric_plan.py" in names
    assert "catalog/gcp.yml" in names
    leaked = [name for name in names if name.startswith(DEV_ONLY) or "__pycache__" in name]
    assert leaked == []
