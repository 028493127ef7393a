# SPDX-License-Identifier: Apache-2.0
"""The gds role's plan (plugins/module_utils/gds.py) over the recorded facts of each OS: the packages of the host's
CUDA release from NVIDIA's CUDA repository, pinned and held; adopt mode; cufile.json with only the keys NVIDIA's GDS
configuration guide defines; every bad input refused with one message. Also the catalog's storage section and the
plan's storage view (molecule/gds runs install mode on one Ubuntu 22.04 identity host; the rest is here)."""

from __future__ import annotations

import json

import pytest

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import package_facts, recorded_facts

gds = module_utils("gds")
fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
STORAGE = {"nics": {"count": 2, "kind": "connectx_roce", "speed_gbit_s": 200}, "source": "s", "gds": True, "mounts": []}
HOST_PLAN = {
    "profile": "baremetal/hgx-h100-ib-ndr",
    "nccl": {"version": "2.27.5-1+cuda12.9", "minimum": "2.27.5", "source": "catalog"},
    "storage": STORAGE,
}
NFS = {"mounts": [{"path": "/mnt/ckpt", "type": "nfs"}], "storage_addresses": ["192.0.2.10", "192.0.2.11"]}

# The keys of cufile.json in the GDS configuration guide's schema ("GPUDirect Storage Parameters", read 2026-12-07):
# the ones this role may write. Anything else it writes would be a key cuFile does not document.
DOCUMENTED = {
    "logging": {"dir", "level"},
    "properties": {"allow_compat_mode", "rdma_dev_addr_list", "use_poll_mode", "max_device_pinned_mem_size_kb"},
    "fs": {"nfs", "lustre", "beegfs", "gpfs", "weka", "generic"},
}


def plan(settings=None, host_plan=None, facts=None):
    return gds.plan(
        {"provision": "install", **(settings or {})},
        HOST_PLAN if host_plan is None else host_plan,
        recorded_facts("ubuntu2204") if facts is None else facts,
    )


def versions(result):
    (step,) = result["supply"]
    return {package["name"]: package["version"] for package in step["packages"]}


@pytest.mark.parametrize(("target", "path"), [("ubuntu2204", "ubuntu2204/x86_64"), ("ubuntu2404", "ubuntu2404/x86_64")])
def test_install_mode_pins_the_kernel_module_and_the_packages_of_the_nccl_pins_cuda(target, path):
    result = plan(facts=recorded_facts(target))
    assert result["errors"] == []
    assert result["cuda"] == "12.9" and "2.27.5-1+cuda12.9" in result["cuda_source"]
    assert versions(result) == {
        "nvidia-fs-dkms": "*",
        "nvidia-fs": "*",
        "nvidia-gds-12-9": "12.9.*",
        "libcufile-12-9": "*",
        "gds-tools-12-9": "*",
    }
    (step,) = result["supply"]
    assert {package["repository"] for package in step["packages"]} == {"gpufabric-cuda"}
    assert all(package["hold"] for package in step["packages"])
    assert (step["preferences"], step["pin_priority"]) == ("gpufabric-gds", 1001)
    assert step["repositories"][0]["uris"] == [f"{BASE}/{path}/"]
    assert step["keys"][0]["fingerprints_from"] == "gds_cuda_repo_key_fingerprints"
    assert result["gdscheck"] == "/usr/local/cuda-12.9/gds/tools/gdscheck"


def test_the_inventory_pins_beat_the_defaults():
    result = plan(
        {"cuda_version": "12.8", "version": "12.8.1-1", "cufile_version": "1.13.1.3-1", "nvidia_fs_version": "2.26.6-1"}
    )
    assert result["errors"] == []
    assert versions(result) == {
        "nvidia-fs-dkms": "2.26.6-1",
        "nvidia-fs": "2.26.6-1",
        "nvidia-gds-12-8": "12.8.1-1",
        "libcufile-12-8": "1.13.1.3-1",
        "gds-tools-12-8": "1.13.1.3-1",
    }
    assert result["cuda_source"] == "gds_cuda_version (inventory)"


def test_the_cuda_repository_source_is_the_one_nvidia_driver_and_nccl_write():
    (step,) = plan()["supply"]
    (repository,) = step["repositories"]
    assert repository["name"] == "gpufabric-cuda"
    assert "gpufabric.cluster.gds" in repository["managed_by"] and "gpufabric.cluster.nccl" in repository["managed_by"]


@pytest.mark.parametrize(
    ("settings", "host_plan", "message"),
    [
        ({}, {"profile": "p"}, "no CUDA release for GDS on this host: gds_cuda_version is empty and p has no NCCL pin"),
        ({"cuda_version": "12"}, None, "gds_cuda_version '12' is not a CUDA release; accepted: X.Y"),
        (
            {"cuda_version": "12.8", "version": "12.9.0-1"},
            None,
            "gds_version '12.9.0-1' is not a version of nvidia-gds-12-8",
        ),
        ({"version": "*"}, None, "gds_version '*' is not a version of nvidia-gds-12-9"),
        ({"nvidia_fs_version": "2.26 6"}, None, "gds_nvidia_fs_version '2.26 6' is not a package version"),
        ({"cufile_version": "latest"}, None, "gds_cufile_version 'latest' is not a package version"),
        ({"provision": "keep"}, None, "gds_provision 'keep' is not accepted; accepted: install, adopt"),
        ({"logging_level": "LOUD"}, None, "gds_logging_level 'LOUD' is not accepted"),
        ({"allow_compat_mode": "yes"}, None, "gds_allow_compat_mode 'yes' is not accepted; accepted: true or false"),
        ({"mounts": {"path": "/x"}}, None, "gds_mounts {'path': '/x'} is not a list"),
        ({"mounts": [{"path": "/x", "type": "cifs"}]}, None, "gds_mounts[0].type 'cifs' is not accepted; accepted:"),
        ({"mounts": [{"path": "x", "type": "nfs"}]}, None, "gds_mounts[0].path 'x' is not accepted"),
        ({"mounts": [{"path": "/x", "type": "nvme", "opts": 1}]}, None, "gds_mounts[0] {"),
        (
            {"mounts": [{"path": "/x", "type": "nvme"}, {"path": "/x", "type": "nvme"}]},
            None,
            "gds_mounts names /x more than once",
        ),
        ({"mounts": NFS["mounts"]}, None, "gds_mounts has network file systems (nfs), but gds_storage_addresses is"),
        ({**NFS, "storage_addresses": ["10.0.0.300"]}, None, "gds_storage_addresses[0] '10.0.0.300' is not an IP"),
        (
            NFS,
            {**HOST_PLAN, "storage": None},
            "gds_mounts[0] (nfs at /mnt/ckpt) reaches storage over the network, but baremetal/hgx-h100-ib-ndr declares "
            "no storage NICs",
        ),
    ],
)
def test_bad_inputs_are_refused_with_one_message(settings, host_plan, message):
    result = plan(settings, host_plan)
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith(message), result["errors"][0]
    assert result["supply"] == []


def test_rhel_is_refused():
    result = plan(facts=recorded_facts("rhel9"))
    assert result["errors"] == [
        "the gds role installs with APT; distribution 'RedHat' is not accepted; accepted: Debian, Ubuntu"
    ]


def test_adopt_mode_holds_what_the_image_ships_and_installs_the_rest():
    shipped = package_facts({"nvidia-fs-dkms": "2.25.7-1", "nvidia-fs": "2.25.7-1"})
    facts = recorded_facts("ubuntu2204", packages=shipped)
    result = plan({"provision": "adopt"}, facts=facts)
    assert result["errors"] == []
    assert versions(result) == {
        "nvidia-fs-dkms": "2.25.7-1",
        "nvidia-fs": "2.25.7-1",
        "nvidia-gds-12-9": "12.9.*",
        "libcufile-12-9": "*",
        "gds-tools-12-9": "*",
    }
    adoption = result["adopt"]
    assert adoption["known"] and adoption["found"] == {"nvidia-fs": "2.25.7-1", "nvidia-fs-dkms": "2.25.7-1"}
    assert adoption["missing"] == ["nvidia-gds-12-9", "libcufile-12-9", "gds-tools-12-9"]
    (step,) = result["supply"]
    assert step["preferences"] == "gpufabric-gds"  # one file in both modes: a host moves between them in one run


def test_adopt_mode_without_the_installed_packages_shows_the_pins_and_says_so():
    result = plan({"provision": "adopt"})
    assert result["errors"] == [] and not result["adopt"]["known"]
    assert "package_facts" in result["warnings"][0]


def test_cufile_json_names_the_storage_addresses_for_each_network_file_system_only():
    result = plan(
        {
            **NFS,
            "mounts": [
                {"path": "/mnt/ckpt", "type": "nfs"},
                {"path": "/lustre", "type": "lustre"},
                {"path": "/scratch", "type": "nvme"},
            ],
        }
    )
    assert result["errors"] == [] and result["warnings"] == []
    assert result["cufile"] == {
        "logging": {"level": "ERROR"},
        "properties": {"allow_compat_mode": True, "rdma_dev_addr_list": ["192.0.2.10", "192.0.2.11"]},
        "fs": {
            "nfs": {"rdma_dev_addr_list": ["192.0.2.10", "192.0.2.11"]},
            "lustre": {"rdma_dev_addr_list": ["192.0.2.10", "192.0.2.11"]},
        },
    }
    text = result["cufile_json"]
    assert text.startswith("// Managed by gpufabric (role gpufabric.cluster.gds)")
    body = json.loads("".join(line for line in text.splitlines(keepends=True) if not line.startswith("//")))
    assert body == result["cufile"]


def test_cufile_json_writes_only_documented_keys():
    result = plan({**NFS, "mounts": [*NFS["mounts"], {"path": "/w", "type": "weka"}], "logging_level": "INFO"})
    for section, keys in result["cufile"].items():
        assert set(keys) <= DOCUMENTED[section], section


def test_local_nvme_needs_no_storage_nic_and_lists_no_address():
    result = plan({"mounts": [{"path": "/scratch", "type": "nvme"}]}, {**HOST_PLAN, "storage": None})
    assert result["errors"] == []
    assert result["cufile"] == {"logging": {"level": "ERROR"}, "properties": {"allow_compat_mode": True}}


def test_fewer_addresses_than_storage_nics_is_a_warning():
    result = plan({**NFS, "storage_addresses": ["2001:db8::1"]})
    assert result["errors"] == []
    assert result["warnings"] == [
        "gds_storage_addresses names 1 address(es), baremetal/hgx-h100-ib-ndr has 2 storage NIC(s): cuFile spreads I/O "
        "over the listed ones only"
    ]


# ---------------------------------------------------------------- the catalog's storage section and the plan


def test_the_bare_metal_hgx_profile_declares_its_storage_nics_with_a_source():
    catalog = fabric_catalog.load_catalog()
    storage = catalog.profiles["baremetal/hgx-h100-ib-ndr"]["storage"]
    assert storage["nics"] == {"count": 2, "kind": "connectx_roce", "speed_gbit_s": 200}
    assert "network-logical-architecture" in storage["source"]
    # No cloud profile declares storage NICs: no source found names an instance type's (roles/gds/README.md).
    assert [name for name, profile in catalog.profiles.items() if "storage" in profile] == ["baremetal/hgx-h100-ib-ndr"]
    # Nor does any default tier run gds: the mounts are a site's.
    runs_gds = [
        name
        for name, profile in catalog.profiles.items()
        if any("gds" in t["roles"] for t in profile["tiers"].values())
    ]
    assert runs_gds == []


def profile_with(**changes):
    catalog = fabric_catalog.load_catalog()
    profile = json.loads(json.dumps(catalog.profiles["baremetal/hgx-h100-ib-ndr"]))
    profile.update(changes)
    return profile


def test_a_tier_running_gds_needs_a_storage_section():
    profile = profile_with()
    del profile["storage"]
    profile["tiers"]["best"]["roles"].append("gds")
    with pytest.raises(fabric_catalog.CatalogError, match=r"tiers\.best\.roles: names gds, but the profile has no"):
        fabric_catalog.validate_profile("baremetal/hgx-h100-ib-ndr", profile, "test.yml")


@pytest.mark.parametrize(
    ("storage", "reason"),
    [
        ({"nics": {"count": 0, "kind": "connectx_roce"}, "source": "s"}, "count"),
        ({"nics": {"count": 2, "kind": "fibre"}, "source": "s"}, "kind"),
        ({"nics": {"count": 2, "kind": "efa"}}, "source"),
        ({"nics": {"count": 2, "kind": "efa", "shared_with": "management"}, "source": "s"}, "shared_with"),
    ],
)
def test_a_bad_storage_section_is_refused_naming_its_key(storage, reason):
    with pytest.raises(fabric_catalog.CatalogError, match=reason):
        fabric_catalog.validate_profile("baremetal/hgx-h100-ib-ndr", profile_with(storage=storage), "test.yml")


def test_the_plan_shows_the_storage_nics_and_the_mounts_where_the_tier_runs_gds():
    catalog = fabric_catalog.load_catalog()
    hostvars = {"gpufabric_profile": "baremetal/hgx-h100-ib-ndr", "gds_mounts": NFS["mounts"]}
    plain = fabric_plan.plan_host(hostvars, catalog)["storage"]
    assert plain["gds"] is False and plain["mounts"] == [] and plain["nics"]["count"] == 2
    catalog.profiles["baremetal/hgx-h100-ib-ndr"]["tiers"]["best"]["roles"].append("gds")
    with_gds = fabric_plan.plan_host(hostvars, catalog)["storage"]
    assert with_gds["gds"] is True and with_gds["mounts"] == NFS["mounts"]
    other = fabric_plan.plan_host({"gpufabric_profile": "aws/p5.48xlarge"}, catalog)
    assert other["storage"] is None


def test_gpufabric_plan_lists_the_storage_nics_gds_and_the_mounts():
    from gpufabric import plan as cli_plan

    rows = cli_plan.storage_rows(
        {
            "hosts": {
                "a": {"storage": {**STORAGE, "gds": True, "mounts": NFS["mounts"]}},
                "b": {"storage": {**STORAGE, "gds": False}},
                "c": {"storage": None},
            }
        }
    )
    assert rows == [
        ("a", "2 connectx_roce x 200 Gb/s", "yes", "nfs /mnt/ckpt"),
        ("b", "2 connectx_roce x 200 Gb/s", "no (gds not in the tier)", "-"),
    ]
