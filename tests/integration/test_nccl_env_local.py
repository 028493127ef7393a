# SPDX-License-Identifier: Apache-2.0
"""The nccl_env role and site.yml run for real on this machine, writing under a temp dir.

The molecule scenario proves the same role in systemd containers on Debian 12
and 13; this test is the fast loop: real ansible-playbook, real files, real
`sh` sourcing the written script.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils
from tests.conftest import image_nic_names, nccl_env_paths, recorded_nic_names

BIN = Path(sys.executable).parent
catalog = plugin_utils("fabric_catalog").load_catalog()
# This machine has no GPU NICs for the plan role to read: the names Google's Ubuntu images give the GCP profiles'
# NICs (a test fixture, with its sources) fill the catalog's {nics.*} placeholders, as gpufabric_nic_names does.
UBUNTU_NAMES = {
    profile: image_nic_names(profile, "ubuntu")
    for profile, images in recorded_nic_names().items()
    if "ubuntu" in images
}


def expected_env(profile: str, tier: str = "best") -> dict[str, str]:
    """The env the plan hands nccl_env on a host with Google's Ubuntu names."""
    hostvars = {"gpufabric_profile": profile, "gpufabric_nic_names": UBUNTU_NAMES[profile]}
    return plugin_utils("fabric_plan").plan_host(hostvars, catalog, tier=tier)["env"]


def playbook(tmp_path: Path, ansible_env, body: str, *args: str, inventory: str | None = None):
    path = tmp_path / "play.yml"
    path.write_text(body, encoding="utf-8")
    if inventory is None:
        inventory = "localhost ansible_connection=local ansible_python_interpreter=" + sys.executable
        (tmp_path / "hosts").write_text(inventory + "\n", encoding="utf-8")
    else:
        (tmp_path / "hosts").write_text(inventory, encoding="utf-8")
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts"), str(path), *args],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )


def role_play(tmp_path: Path, profile: str, tier: str = "best", extra: str = "{}") -> str:
    paths = "\n".join(f"      {name}: {json.dumps(value)}" for name, value in nccl_env_paths(tmp_path).items())
    return f"""
- name: Apply nccl_env
  hosts: all
  gather_facts: false
  vars:
    gpufabric_profile: {profile}
    gpufabric_tier: {tier}
    gpufabric_nic_names: {json.dumps(UBUNTU_NAMES.get(profile, {}))}
  roles:
    - role: gpufabric.cluster.nccl_env
      nccl_env_extra: {extra}
      nccl_env_backup: false
{paths}
"""


def recap(result) -> dict[str, int]:
    match = re.search(r"ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", result.stdout)
    assert match, result.stdout + result.stderr
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))


def read_conf(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def sourced_env(script: Path) -> dict[str, str]:
    output = subprocess.run(
        ["sh", "-c", f". {script}; . {script}; env"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/site/lib"},
    ).stdout
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def test_role_writes_profile_env_idempotently_and_removes_stale_keys(tmp_path, ansible_env):
    expected = expected_env("gcp/a3-ultragpu-8g")
    assert expected["NCCL_SOCKET_IFNAME"] == "enp0s19,enp192s20"
    (tmp_path / "nccl.conf").write_text("NCCL_STALE_FROM_LAST_PROFILE=1\n", encoding="utf-8")

    check = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-ultragpu-8g"), "--check", "--diff")
    assert recap(check)["failed"] == 0
    # nccl.conf, the loader's file, the container files and their directories, the login script, the limits for
    # sessions, the systemd drop-in and its directory.
    assert recap(check)["changed"] == 8
    assert read_conf(tmp_path / "nccl.conf") == {"NCCL_STALE_FROM_LAST_PROFILE": "1"}, "check mode wrote"
    assert "+NCCL_NET=gIB" in check.stdout, "diff shows the new content"

    first = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-ultragpu-8g"))
    assert recap(first)["changed"] == 8
    second = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-ultragpu-8g"))
    assert recap(second)["changed"] == 0

    conf = read_conf(tmp_path / "nccl.conf")
    assert conf == {key: value for key, value in expected.items() if key.startswith("NCCL_")}
    assert (tmp_path / "nccl.conf").stat().st_mode & 0o777 == 0o644
    env = sourced_env(tmp_path / "env.sh")
    assert env["LD_LIBRARY_PATH"] == f"{expected['LD_LIBRARY_PATH']}:/opt/site/lib", "prepended once"
    assert "export NCCL_" not in (tmp_path / "env.sh").read_text()


def test_profile_change_and_site_overrides(tmp_path, ansible_env):
    playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-ultragpu-8g"))
    extra = "{NCCL_DEBUG: INFO, NCCL_IB_HCA: null, UCX_TLS: 'rc,cuda_copy'}"
    result = playbook(tmp_path, ansible_env, role_play(tmp_path, "nebius/gpu-h100-sxm", extra=extra))
    assert recap(result)["failed"] == 0, result.stdout
    conf = read_conf(tmp_path / "nccl.conf")
    assert conf["NCCL_DEBUG"] == "INFO"
    assert "NCCL_IB_HCA" not in conf
    assert "NCCL_NET" not in conf, "gIB keys of the previous profile are gone"
    env = sourced_env(tmp_path / "env.sh")
    assert env["UCX_TLS"] == "rc,cuda_copy"
    assert env["UCX_NET_DEVICES"] == catalog.get("nebius/gpu-h100-sxm")["tiers"]["best"]["env"]["UCX_NET_DEVICES"]
    assert env["LD_LIBRARY_PATH"] == "/opt/site/lib"


def test_role_rejects_unknown_profile_and_tier(tmp_path, ansible_env):
    result = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a9-hyper"))
    assert recap(result)["failed"] == 1
    refusal = "has no fabric plan: profile 'gcp/a9-hyper' from host var gpufabric_profile is not in the catalog"
    assert refusal in result.stdout
    result = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-megagpu-8g", tier="gold"))
    assert recap(result)["failed"] == 1
    assert "gold" in result.stdout and "best" in result.stdout
    result = playbook(tmp_path, ansible_env, role_play(tmp_path, "gcp/a3-megagpu-8g", extra="{NCCL_NVLS_ENABLE: true}"))
    assert recap(result)["failed"] == 1
    assert "nccl_env_extra must map variable names" in result.stdout
    assert not (tmp_path / "nccl.conf").exists()


SITE_INVENTORY = """
[fleet]
mega ansible_connection=local gpufabric_cloud=gcp gpufabric_instance_type=a3-megagpu-8g
stranger ansible_connection=local gpufabric_cloud=gcp gpufabric_instance_type=n2-standard-8
[fleet:vars]
ansible_python_interpreter={python}
"""


SITE_CATALOG = """
profiles:
  gcp/a3-megagpu-8g:
    tiers:
      best:
        # Only nccl_env, which writes under tmp_path: no other role may touch this machine.
        roles: [nccl_env]
"""


@pytest.fixture
def site(repo, tmp_path, ansible_env):
    """site.yml against this machine. A catalog override narrows a3-mega's roles to nccl_env (writing
    under tmp_path), so no host-stack role ever installs packages here."""
    override = tmp_path / "site-catalog.yml"
    override.write_text(SITE_CATALOG, encoding="utf-8")

    def run(*extra: str):
        inventory = tmp_path / "site-hosts"
        inventory.write_text(SITE_INVENTORY.format(python=sys.executable), encoding="utf-8")
        variables = {
            **nccl_env_paths(tmp_path),
            "gpufabric_catalog_files": [str(override)],
            "gpufabric_nic_names": UBUNTU_NAMES["gcp/a3-megagpu-8g"],
        }
        return subprocess.run(
            [
                str(BIN / "ansible-playbook"),
                "-i",
                str(inventory),
                str(repo / "playbooks/site.yml"),
                "-e",
                json.dumps(variables),
                *extra,
            ],
            capture_output=True,
            text=True,
            env=ansible_env,
            check=False,
        )

    return run


def test_site_applies_the_plan_and_leaves_hosts_without_a_profile_alone(site, tmp_path):
    result = site()
    assert result.returncode == 0, result.stdout
    assert "NOT MANAGED stranger (unknown_profile)" in result.stdout
    assert read_conf(tmp_path / "nccl.conf")["NCCL_FASTRAK_CTRL_DEV"] == "enp0s12"


def test_site_applies_unknown_hosts_only_when_opted_in(site):
    result = site("-e", "gpufabric_unknown_hosts_profile=gcp/a3-megagpu-8g")
    assert result.returncode == 0, result.stdout
    assert "NOT MANAGED stranger" not in result.stdout
    # The stranger ran the opted-in profile's role: its recap has tasks beyond the plan's.
    assert re.search(r"^stranger\s+: ok=([3-9]|\d\d)", result.stdout, re.MULTILINE), result.stdout


def test_site_rejects_an_opted_in_profile_that_does_not_exist(site):
    result = site("-e", "gpufabric_unknown_hosts_profile=gcp/a9-hyper")
    assert result.returncode != 0
    assert "gpufabric_unknown_hosts_profile 'gcp/a9-hyper' is not in the fabric catalog" in result.stdout


HARDWARE_FIRST_CATALOG = """
profiles:
  gcp/a3-megagpu-8g:
    tiers:
      best:
        roles: [fabric_facts, nccl_env]
"""


@pytest.mark.parametrize("bake", [False, True])
def test_site_reads_the_hardware_first_and_a_bake_goes_on_without_it(site, tmp_path, bake):
    """This machine has no GPU: a live run stops at fabric_facts before nccl_env; a bake reports and goes on."""
    override = tmp_path / "hardware-first.yml"
    override.write_text(HARDWARE_FIRST_CATALOG, encoding="utf-8")
    result = site("-e", json.dumps({"gpufabric_catalog_files": [str(override)], "gpufabric_bake": bake}))
    assert "found 0 of 8 GPUs (H100-SXM-80GB)" in result.stdout
    if bake:
        assert result.returncode == 0, result.stdout
        assert read_conf(tmp_path / "nccl.conf")["NCCL_FASTRAK_CTRL_DEV"] == "enp0s12"
    else:
        assert result.returncode != 0
        assert "does not have the hardware of gcp/a3-megagpu-8g" in result.stdout
        assert not (tmp_path / "nccl.conf").exists()


@pytest.mark.parametrize("playbook", ["site.yml", "bake.yml"])
def test_playbooks_pass_syntax_check(repo, ansible_env, playbook):
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(repo / "playbooks" / playbook)],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
