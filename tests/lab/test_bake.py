# SPDX-License-Identifier: Apache-2.0
"""`gpufabric bake`: a golden image baked here the way Packer bakes one, started as a lab host, shows no drift.

The bake takes the lab's own role settings (SIMULATED hardware root, the roles a container can run, the
container-only knobs) through -e, exactly as an operator passes site settings to Packer's provisioner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric import drift as fleet_drift
from gpufabric import lab
from gpufabric.lab_podman import image_exists, podman

pytestmark = pytest.mark.lab

BUILDER = "gpufabric-labtest-bakevars"
HOSTS = "gpufabric-labtest-baked"
TAG = "localhost/gpufabric-labtest-baked:1"


def test_baked_image_started_as_a_host_shows_no_drift(tmp_path: Path) -> None:
    directories = {BUILDER: tmp_path / "builder", HOSTS: tmp_path / "hosts"}
    try:
        # The lab's settings (its catalog override lives in its directory) for the bake's -e @file.
        builder = lab.up(BUILDER, nodes=1, directory=directories[BUILDER], progress=lambda line: None)
        settings = tmp_path / "lab-settings.yml"
        settings.write_text(yaml.safe_dump(lab.host_settings(builder)), encoding="utf-8")

        command = [sys.executable, "-m", "gpufabric", "bake", "--profile", builder.profile, "--tag", TAG]
        command += ["-e", f"@{settings}", "--artifacts", str(tmp_path / "bake")]
        # The user's ./ansible.cfg checks host keys: the bake's run keeps it (its podman connection has no keys).
        project = tmp_path / "project"
        project.mkdir()
        (project / "ansible.cfg").write_text("[defaults]\nhost_key_checking = True\n")
        baked = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), cwd=project, check=False)
        assert baked.returncode == 0, baked.stdout[-3000:] + baked.stderr[-3000:]
        record = json.loads((tmp_path / "bake" / "run" / "gpufabric-run.json").read_text())
        assert record["ansible_config"] == str(project / "ansible.cfg")
        assert record["ansible_env"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"
        assert image_exists(TAG)
        machine_id = podman(["run", "--rm", "--entrypoint", "cat", TAG, "/etc/machine-id"]).stdout
        assert machine_id.strip() == "", "every host booted from the image must make its own machine-id"

        fleet = lab.up(HOSTS, nodes=1, image=TAG, directory=directories[HOSTS], progress=lambda line: None)
        result = fleet_drift.check(
            fleet_drift.DriftOptions(inventory=str(fleet.inventory), artifacts=tmp_path / "drift"),
            lambda line: None,
        )
        changes = {name: [(c.role, c.task) for c in host.changes] for name, host in result.hosts.items()}
        assert result.exit_code == 0, (changes, result.problems)
        assert [host.state for host in result.hosts.values()] == ["clean"]
    finally:
        for name, directory in directories.items():
            lab.down(name, directory, progress=lambda line: None)
        podman(["rmi", "--force", TAG], check=False)
