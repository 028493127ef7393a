# SPDX-License-Identifier: Apache-2.0
"""The lab's files without podman: inventory, lab.json, catalog override, known_hosts, role split."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufabric import lab_files
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError
from gpufabric.inventory import host_vars
from gpufabric.lab_files import Lab, LabHost

PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
catalog = plugin_utils("fabric_catalog").load_catalog()


def a_lab(directory: Path, name: str = "gpufabric-labtest-unit", roles: list[str] | None = None) -> Lab:
    kept, left_out = lab_files.split_roles(catalog.get(PROFILE)["tiers"]["best"]["roles"])
    return Lab(
        name=name,
        directory=directory,
        profile=PROFILE,
        image="localhost/gpufabric-lab:12",
        inventory=directory / lab_files.INVENTORY,
        hosts=[LabHost(f"{name}-1", 40001), LabHost(f"{name}-2", 40002)],
        roles=kept if roles is None else roles,
        left_out=left_out,
        simulated_sriov=True,
    )


def test_split_roles_keeps_the_container_capable_ones_in_catalog_order():
    kept, left_out = lab_files.split_roles(catalog.get(PROFILE)["tiers"]["best"]["roles"])
    assert kept == ["fabric_facts", "rdma_stack", "infiniband", "sriov", "nccl_env"]
    assert list(left_out) == ["host_tuning", "nvidia_driver", "nccl", "nccl_tests"]
    assert "GPU" in left_out["nvidia_driver"] and "CUDA" in left_out["nccl_tests"]


def test_split_roles_says_when_a_role_is_not_proven_in_a_container():
    kept, left_out = lab_files.split_roles(["fabric_facts", "gcp_tcpxo", "nccl_env"])
    assert kept == ["fabric_facts", "nccl_env"]
    assert left_out == {"gcp_tcpxo": lab_files.UNPROVEN_REASON}


def test_catalog_override_narrows_every_tier_and_the_catalog_accepts_it(tmp_path):
    override = lab_files.catalog_override(PROFILE, catalog.get(PROFILE))
    lab = a_lab(tmp_path)
    path = tmp_path / lab_files.CATALOG_OVERRIDE
    path.write_text(lab_files.render_catalog_override(lab, override))
    assert "#   nvidia_driver: needs a GPU" in path.read_text()
    merged = plugin_utils("fabric_catalog").load_catalog([path]).get(PROFILE)
    assert merged["tiers"]["best"]["roles"] == lab.roles
    assert merged["tiers"]["standard"]["roles"] == ["nccl_env"]
    # Only the roles change: the environment the roles write stays the profile's.
    assert merged["tiers"]["best"]["env"] == catalog.get(PROFILE)["tiers"]["best"]["env"]


def test_inventory_reaches_each_host_over_ssh_with_host_key_checking_on(tmp_path):
    lab = a_lab(tmp_path)
    lab.inventory.write_text(lab_files.render_inventory(lab))
    hosts = host_vars(str(lab.inventory))
    assert sorted(hosts) == ["gpufabric-labtest-unit-1", "gpufabric-labtest-unit-2"]
    first = hosts["gpufabric-labtest-unit-1"]
    assert first["ansible_host"] == "127.0.0.1"
    assert first["ansible_port"] == 40001
    assert first["ansible_user"] == "root"
    assert first["ansible_ssh_private_key_file"] == str(tmp_path / lab_files.KEY)
    assert f"UserKnownHostsFile={tmp_path / lab_files.KNOWN_HOSTS}" in first["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in first["ansible_ssh_common_args"]
    assert first["ansible_host_key_checking"] is True
    assert first["gpufabric_profile"] == PROFILE
    assert first["gpufabric_hw_root"] == "/simulated-hw"
    assert first["gpufabric_catalog_files"] == [str(tmp_path / lab_files.CATALOG_OVERRIDE)]
    assert first["rdma_stack_load_modules"] is False
    assert first["infiniband_activate"] is False


def test_inventory_comments_every_variable_and_names_what_is_simulated(tmp_path):
    text = lab_files.render_inventory(a_lab(tmp_path))
    lines = text.splitlines()
    start = lines.index("  vars:")
    variables = [i for i, line in enumerate(lines) if i > start and not line.lstrip().startswith(("#", "-"))]
    assert variables, text
    for index in variables:
        assert lines[index - 1].lstrip().startswith("# "), f"no comment above {lines[index]!r}"
    assert "SIMULATED" in text
    assert "gpufabric lab down --name gpufabric-labtest-unit --dir" in text


def test_container_knobs_only_for_roles_in_the_lab(tmp_path):
    variables = yaml.safe_load(lab_files.render_inventory(a_lab(tmp_path, roles=["fabric_facts", "nccl_env"])))
    assert "rdma_stack_load_modules" not in variables["lab"]["vars"]
    assert "infiniband_activate" not in variables["lab"]["vars"]


def test_lab_json_round_trips(tmp_path):
    lab = a_lab(tmp_path)
    assert lab_files.from_json(lab_files.to_json(lab), tmp_path, "lab.json") == lab


def test_a_broken_lab_json_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"broken\.json: not a gpufabric lab description"):
        lab_files.from_json('{"name": "x"}', tmp_path, "broken.json")


def test_known_hosts_line_takes_the_ed25519_key_without_its_comment():
    line = lab_files.known_hosts_line(40001, "ssh-ed25519 AAAAC3Nza root@gpufabric-lab-1\n")
    assert line == "[127.0.0.1]:40001 ssh-ed25519 AAAAC3Nza"
    with pytest.raises(UserError, match="not an ed25519 host key"):
        lab_files.known_hosts_line(40001, "ssh-rsa AAAAB3")


@pytest.mark.parametrize("name", ["", "Lab", "lab_1", "-lab", "lab-", "a" * 53, "lab/1"])
def test_bad_lab_names(name):
    with pytest.raises(UserError, match="--name"):
        lab_files.check_name(name)


@pytest.mark.parametrize("nodes", [0, -1, 65])
def test_bad_node_counts(nodes):
    with pytest.raises(UserError, match=r"accepted 1\.\.64"):
        lab_files.check_nodes(nodes)


def test_default_directory_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert lab_files.default_directory("gpufabric-lab") == tmp_path / "gpufabric" / "lab" / "gpufabric-lab"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert lab_files.default_directory("x") == tmp_path / ".local" / "state" / "gpufabric" / "lab" / "x"
