# SPDX-License-Identifier: Apache-2.0
"""`gpufabric bake`: a golden image made the way Packer makes one, here as a local podman image.

playbooks/bake.yml (site.yml in bake mode: every role installs and configures, loads no module, starts
no service, never reboots) runs over the podman connection in a systemd container started from --image;
the container is then stopped and committed as --tag with /sbin/init as its command. Packer's Ansible
provisioner runs the same playbook on a cloud VM (examples/packer/gpufabric-bake.pkr.hcl). A host
booted from the image on its profile's hardware needs no change: `gpufabric drift` reports it clean.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufabric import catalog as fabric_catalog
from gpufabric import lab_podman, runs
from gpufabric.collection import collection_root
from gpufabric.errors import UserError
from gpufabric.lab_image import LAB_IMAGE, ensure_image
from gpufabric.playbook_args import PlaybookArgs

Progress = Callable[[str], None]
TIERS = ("best", "standard")
# Image hygiene before the commit: every host booted from the image must get its own machine-id.
CLEAN_UP = "truncate -s 0 /etc/machine-id && rm -f /var/lib/dbus/machine-id && apt-get clean"


@dataclass
class Options:
    """What the command line asked for."""

    profile: str
    tag: str
    image: str = LAB_IMAGE
    tier: str | None = None
    catalog_files: list[Path] = field(default_factory=list)
    args: PlaybookArgs = field(default_factory=PlaybookArgs)
    artifacts: Path | None = None


@dataclass
class Result:
    """The image made (or not), and the run that made it."""

    tag: str
    run: runs.PlaybookRun
    committed: bool


def as_dict(options: Options, result: Result) -> dict[str, Any]:
    """`gpufabric bake --json` (docs/operations.md, "Golden images with Packer"): the image made or not, and the run."""
    return {
        "profile": options.profile,
        "tier": options.tier,
        "image": options.image,
        "tag": result.tag,
        "committed": result.committed,
        "exit_code": 0 if result.committed else 1,
        "rc": result.run.rc,
        "status": result.run.status,
        "duration_seconds": round(result.run.duration_s, 3),
        # The bake's directory: inventory.yml, and run/ (ansible-runner's artifacts, gpufabric-run.json).
        "artifacts": str(result.run.artifacts_dir.parent),
    }


def check(options: Options) -> dict[str, Any]:
    """Refuse bad input before any container starts; the bake's variables."""
    if fabric_catalog.load(options.catalog_files).get(options.profile) is None:
        raise UserError(
            f"--profile {options.profile!r}: not in the fabric catalog; `gpufabric catalog list` shows the names"
        )
    if options.tier is not None and options.tier not in TIERS:
        raise UserError(f"--tier {options.tier!r}: accepted: {', '.join(TIERS)}")
    if not options.tag or any(char.isspace() for char in options.tag):
        raise UserError(f"--tag {options.tag!r}: accepted: an image name such as localhost/gpu-node:2026-11")
    variables: dict[str, Any] = {"gpufabric_profile": options.profile}
    if options.tier is not None:
        variables["gpufabric_tier"] = options.tier
    files = [str(path.resolve()) for path in fabric_catalog.override_files(options.catalog_files)]
    if files:
        variables["gpufabric_catalog_files"] = files
    return variables


def inventory_text(container: str) -> str:
    """One host: the build container, over the podman connection (no SSH in an image build)."""
    host = {"ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}
    return yaml.safe_dump({"all": {"hosts": {container: host}}}, sort_keys=False)


def bake(options: Options, progress: Progress) -> Result:
    """Start --image, run bake.yml in it, commit it as --tag when the play succeeded."""
    variables = check(options)
    artifacts = options.artifacts or runs.default_artifacts("bake")
    runs.check_artifacts(artifacts)
    ensure_image(options.image, progress)
    container = f"gpufabric-bake-{secrets.token_hex(4)}"
    artifacts.mkdir(parents=True, exist_ok=True)
    inventory = artifacts / "inventory.yml"
    inventory.write_text(inventory_text(container), encoding="utf-8")
    progress(f"bake {options.profile} on {options.image} in container {container}")
    # From `podman run` on, every way out removes the container: a run that fails after podman created the
    # container (it stays "Created"), a failed play, clean-up or commit, an exception, Ctrl-C.
    try:
        lab_podman.podman(["run", "--detach", "--name", container, "--systemd", "always", options.image, "/sbin/init"])
        lab_podman.wait_booted(container)
        run = runs.run_playbook(
            collection_root() / "playbooks" / "bake.yml",
            str(inventory),
            extravars=variables,
            artifacts_dir=artifacts / "run",
            progress=progress,
            hosts=[container],
            label="bake",
            args=options.args,
            # The podman connection runs podman, with the configuration gpufabric's own podman calls have.
            environment=lab_podman.configuration(),
        )
        if run.rc != 0:
            progress(f"bake.yml failed (exit {run.rc}); no image made. Artifacts: {artifacts}")
            return Result(options.tag, run, committed=False)
        cleaned = lab_podman.execute(container, ["sh", "-c", CLEAN_UP])
        if cleaned.returncode != 0:
            raise UserError(f"cannot clean the image up before the commit: {cleaned.stderr.strip()}")
        lab_podman.podman(["stop", "--time", "10", container])
        lab_podman.podman(
            [
                "commit",
                "--change",
                'CMD ["/sbin/init"]',
                "--change",
                "STOPSIGNAL SIGRTMIN+3",
                "--change",
                f"LABEL org.opencontainers.image.description=gpufabric bake of {options.profile}",
                container,
                options.tag,
            ]
        )
        progress(f"image {options.tag}: {options.profile} baked; artifacts: {artifacts}")
        return Result(options.tag, run, committed=True)
    finally:
        remove(container, progress)


def remove(container: str, progress: Progress) -> None:
    """Remove the build container, whatever state it is in (--ignore: also when podman never made it).

    A second Ctrl-C (it reaches podman too) would cut the removal short: it is tried once more before the
    interrupt goes on.
    """
    try:
        removed = lab_podman.podman(["rm", "--force", "--ignore", "--time", "3", container], check=False)
    except KeyboardInterrupt:
        removed = lab_podman.podman(["rm", "--force", "--ignore", "--time", "3", container], check=False)
        raise
    if removed.returncode != 0:
        message = (removed.stderr or removed.stdout).strip()
        progress(f"could not remove container {container} (`podman rm --force {container}` removes it): {message}")
