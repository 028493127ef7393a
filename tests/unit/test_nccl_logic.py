# SPDX-License-Identifier: Apache-2.0
"""The nccl role's plan (plugins/module_utils/nccl.py) over the recorded facts of each OS: the pin and its repository
per release and architecture, every bad input refused with one message, and adopt mode's cases (molecule/nccl runs
install on 22.04 and one adopted image on 24.04; the rest is here). Also the catalog's NCCL section: inherited from
the fabric, overridden by a profile, held to the GPUs' and multi-node NVLink's floors, and shown by the plan."""

from __future__ import annotations

import pytest

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import package_facts, recorded_facts

nccl = module_utils("nccl")
fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

PIN = "2.27.5-1+cuda12.9"
HOST_PLAN = {"profile": "gcp/a3-ultragpu-8g", "nccl": {"version": PIN, "minimum": "2.27.5", "source": "catalog"}}
BASE = "https://developer.download.nvidia.com/compute/cuda/repos"


def plan(settings=None, host_plan=None, facts=None):
    return nccl.plan(
        {"mode": "install", **(settings or {})},
        HOST_PLAN if host_plan is None else host_plan,
        recorded_facts("ubuntu2204") if facts is None else facts,
    )


def names_versions(step):
    return {package["name"]: package["version"] for package in step["packages"]}


@pytest.mark.parametrize(
    ("target", "architecture", "path"),
    [
        ("ubuntu2204", None, "ubuntu2204/x86_64"),
        ("ubuntu2404", None, "ubuntu2404/x86_64"),
        ("ubuntu2404", "aarch64", "ubuntu2404/sbsa"),  # Grace (GB200): NVIDIA's sbsa repository
        ("debian12", None, "debian12/x86_64"),
    ],
)
def test_install_mode_pins_both_packages_from_the_cuda_repository_of_the_host(target, architecture, path):
    facts = recorded_facts(target, **({"architecture": architecture} if architecture else {}))
    result = plan(facts=facts)
    assert result["errors"] == []
    (step,) = result["supply"]
    assert names_versions(step) == {"libnccl2": PIN, "libnccl-dev": PIN}
    assert {package["repository"] for package in step["packages"]} == {"gpufabric-cuda"}
    assert all(package["hold"] for package in step["packages"])
    assert step["preferences"] == "gpufabric-nccl" and step["pin_priority"] == 1001
    assert step["repositories"][0]["uris"] == [f"{BASE}/{path}/"]
    assert step["keys"][0]["fingerprints_from"] == "nccl_cuda_repo_key_fingerprints"
    assert (result["upstream"], result["minimum"], result["source"]) == ("2.27.5", "2.27.5", "catalog")


def test_the_inventory_version_beats_the_catalog_and_says_so():
    result = plan({"version": "2.28.7-1+cuda12.9"})
    assert result["version"] == "2.28.7-1+cuda12.9" and result["source"] == "nccl_version (inventory)"


@pytest.mark.parametrize(
    ("settings", "host_plan", "message"),
    [
        ({}, {"profile": "baremetal/lab"}, "no NCCL version for this host: nccl_version is empty and baremetal/lab"),
        ({"version": "2.27.5"}, None, "nccl_version '2.27.5' is not a package version of NVIDIA's NCCL"),
        (
            {},
            {"profile": "p", "nccl": {"version": "2.18.5-1-2", "source": "x"}},
            "the catalog's nccl.version of p '2.18.5-1-2' is not a package version",
        ),
        ({"minimum": "2.30"}, None, "nccl_minimum '2.30' is not an NCCL version; accepted: X.Y.Z"),
        ({"minimum": "2.28.7"}, None, f"the catalog's nccl.version of gcp/a3-ultragpu-8g '{PIN}' is older than"),
        ({"mode": "keep"}, None, "nccl_provision 'keep' is not accepted; accepted: install, adopt"),
    ],
)
def test_bad_input_is_refused_with_one_message(settings, host_plan, message):
    result = plan(settings, host_plan)
    assert len(result["errors"]) == 1 and result["errors"][0].startswith(message), result["errors"]
    assert result["supply"] == []


def test_a_rhel_host_is_refused_before_anything_is_planned():
    result = plan(facts=recorded_facts("rocky9"))
    assert result["errors"] == [
        "the nccl role installs with APT; distribution 'Rocky' is not accepted; accepted: Debian, Ubuntu"
    ]


def test_a_mirror_from_the_driver_settings_is_used():
    result = plan({"cuda_repo_base": "file:///srv/mirror/cuda/repos"})
    assert result["supply"][0]["repositories"][0]["uris"] == ["file:///srv/mirror/cuda/repos/ubuntu2204/x86_64/"]


# ----------------------------------------------------------------------------------------------------- adopt mode


def adopt_plan(installed, host_plan=None):
    facts = recorded_facts("ubuntu2204", packages=package_facts(installed)) if installed is not None else None
    return plan({"mode": "adopt"}, host_plan, facts if facts is not None else recorded_facts("ubuntu2204"))


def test_adopt_without_the_installed_packages_shows_the_pin_and_says_why():
    result = adopt_plan(None)
    assert result["errors"] == [] and result["version"] == PIN
    assert result["adopt"]["mode"] == "adopt" and not result["adopt"]["known"]
    assert "gpufabric plan --probe" in result["warnings"][0]


def test_adopt_on_an_image_without_nccl_installs_the_pin():
    result = adopt_plan({"bash": "5.1-6ubuntu1"})
    assert names_versions(result["supply"][0]) == {"libnccl2": PIN, "libnccl-dev": PIN}
    assert result["adopt"]["missing"] == ["libnccl2", "libnccl-dev"]


def test_adopt_keeps_a_newer_image_nccl_and_adds_its_headers_from_the_cuda_repository():
    azure = "2.30.4-1+cuda13.0"  # Azure's HPC image builds it (azhpc-images install_nccl.sh)
    result = adopt_plan({"libnccl2": azure})
    assert result["errors"] == [] and result["version"] == azure and result["upstream"] == "2.30.4"
    (step,) = result["supply"]
    assert names_versions(step) == {"libnccl2": azure, "libnccl-dev": azure}
    assert step["repositories"] and result["cuda_repo_url"].endswith("ubuntu2204/x86_64/")
    assert result["adopt"]["found"] == {"libnccl2": azure} and result["adopt"]["missing"] == ["libnccl-dev"]


def test_adopt_plans_the_same_once_the_headers_are_there():
    azure = "2.30.4-1+cuda13.0"
    first = adopt_plan({"libnccl2": azure})
    second = adopt_plan({"libnccl2": azure, "libnccl-dev": azure})
    assert first["supply"] == second["supply"] and first["cuda_repo_url"] == second["cuda_repo_url"]


def test_adopt_of_a_build_not_of_nvidias_form_configures_no_repository():
    ubuntu = "2.28.9-1ubuntu1"  # an image's own build with its own revision, headers shipped
    result = adopt_plan({"libnccl2": ubuntu, "libnccl-dev": ubuntu})
    assert result["errors"] == [] and result["cuda_repo_url"] == ""
    assert result["supply"][0]["repositories"] == [] and result["supply"][0]["keys"] == []


@pytest.mark.parametrize(
    ("installed", "message"),
    [
        (
            {"libnccl2": "2.23.4-1+cuda12.6"},
            "nccl_provision 'adopt': the image's libnccl2 2.23.4-1+cuda12.6 (NCCL 2.23.4) is older than 2.27.5",
        ),
        (
            {"libnccl2": "2.30.4-1+cuda13.0", "libnccl-dev": "2.28.7-1+cuda12.9"},
            "nccl_provision 'adopt': the image's libnccl-dev 2.28.7-1+cuda12.9 does not match its libnccl2",
        ),
        (
            {"libnccl2": "2.28.9-1ubuntu1"},
            "nccl_provision 'adopt': the image lacks libnccl-dev, and its libnccl2 2.28.9-1ubuntu1 is not NVIDIA's",
        ),
    ],
)
def test_adopt_refuses_what_it_cannot_keep_and_names_the_way_out(installed, message):
    result = adopt_plan(installed)
    assert len(result["errors"]) == 1 and result["errors"][0].startswith(message), result["errors"]
    assert "nccl_provision 'install'" in result["errors"][0] or "'install'" in result["errors"][0]
    assert result["supply"] == [] and result["adopt"]["refused"]


# ------------------------------------------------------------------------------------------------------- catalog


def test_every_profile_of_a_fabric_inherits_its_pin_and_blackwell_and_nvl72_raise_the_minimum():
    catalog = fabric_catalog.load_catalog()
    for name, profile in catalog.profiles.items():
        assert nccl.PACKAGE_VERSION.match(profile["nccl"]["version"]), name
    assert catalog.get("gcp/a3-megagpu-8g")["nccl"]["version"] == "2.28.7-1+cuda12.9"  # TCPXO's qualified NCCL
    efa = catalog.get("aws/p6e-gb200.36xlarge")["nccl"]
    assert (efa["version"], efa["minimum"]) == ("2.28.7-1+cuda12.9", "2.25.2")  # fabric's pin, profile's minimum
    assert catalog.provenance["aws/p6e-gb200.36xlarge"]["nccl.version"][0] == "fabric"
    assert catalog.provenance["aws/p6e-gb200.36xlarge"]["nccl.minimum"][0] == "profile"


def override(tmp_path, nccl_section: str):
    path = tmp_path / "site.yml"
    path.write_text(f"profiles:\n  aws/p6-b200.48xlarge:\n    nccl: {nccl_section}\n", encoding="utf-8")
    return [path]


@pytest.mark.parametrize(
    ("section", "key", "reason"),
    [
        ("{minimum: '2.24.3'}", "nccl.minimum", "2.24.3 is below 2.25.1, the oldest NCCL for B200-SXM-180GB"),
        ("{version: '2.25.1-1+cuda12.4'}", "nccl.version", "2.25.1-1+cuda12.4 is built with CUDA 12.4"),
        ("{version: '2.26.2-1+cuda12.8', minimum: '2.27.5'}", "nccl.version", "is older than nccl.minimum 2.27.5"),
        ("{version: 2.27}", "nccl.version", "must be a package version of NVIDIA's NCCL"),
    ],
)
def test_the_catalog_refuses_a_pin_the_profile_cannot_run(tmp_path, section, key, reason):
    with pytest.raises(fabric_catalog.CatalogError) as error:
        fabric_catalog.load_catalog(override(tmp_path, section))
    assert error.value.key == f"profiles.aws/p6-b200.48xlarge.{key}" and reason in error.value.reason


def test_the_plan_shows_the_pin_and_a_host_var_beats_it():
    catalog = fabric_catalog.load_catalog()
    hostvars = {"gpufabric_profile": "gcp/a3-ultragpu-8g"}
    assert fabric_plan.plan_host(hostvars, catalog)["nccl"]["version"] == PIN
    pinned = fabric_plan.plan_host({**hostvars, "nccl_version": "2.28.7-1+cuda12.9"}, catalog)["nccl"]
    assert pinned == {"version": "2.28.7-1+cuda12.9", "minimum": "2.28.7", "source": "host var nccl_version"}
    with pytest.raises(fabric_plan.PlanError, match=r"host var nccl_version '2\.28' is not a package version"):
        fabric_plan.plan_host({**hostvars, "nccl_version": "2.28"}, catalog)


# ------------------------------------------------------------------------------------------- verify: the ranks' NCCL


LIB = "/usr/lib/x86_64-linux-gnu/libnccl.so."


def test_verify_passes_nodes_on_the_pinned_nccl_and_says_which():
    findings = nccl.rank_findings({"a": LIB + "2.27.5", "b": LIB + "2.27.5"}, ["2.27.5"], PIN)
    assert findings == {"fail": [], "warn": [], "info": ["info: NCCL 2.27.5 loaded on every node (a, b)"]}


def test_verify_fails_nodes_on_different_nccl_versions():
    gib = "/usr/local/gib/lib64/libnccl.so.2.30.4"  # the gIB plugin's own NCCL, first on LD_LIBRARY_PATH
    findings = nccl.rank_findings({"a": LIB + "2.27.5", "b": gib}, ["2.27.5"], PIN)
    assert findings["fail"] == [
        "the nodes load different NCCL versions (a 2.27.5, b 2.30.4): every rank must run one NCCL"
    ]


def test_verify_warns_on_another_version_than_the_pin_and_a_launcher_that_disagrees():
    findings = nccl.rank_findings({"a": LIB + "2.28.7", "b": ""}, ["2.26.2", None], PIN)
    assert findings["fail"] == []
    assert findings["warn"] == [
        "the nodes load NCCL 2.28.7, the plan pins 2.27.5-1+cuda12.9 (nccl role)",
        "the launching rank reports NCCL 2.26.2, which no node's libnccl.so.2 is",
    ]
    assert findings["info"][0].startswith("info: b: which NCCL it loads is not known (no libnccl.so.2")


@pytest.mark.parametrize(
    ("code", "version"), [(22703, "2.27.3"), ("22807", "2.28.7"), (2408, "2.4.8"), (0, None), ("x", None), (True, None)]
)
def test_nccl_version_codes_decode_as_nccl_defines_them(code, version):
    assert module_utils("nccl_output").nccl_version_from_code(code) == version


def test_the_parser_reads_the_nccl_the_launching_rank_loaded():
    parser = module_utils("nccl_output")
    banner = "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22705\n"
    assert parser.parse_runs(banner)[0]["nccl_version"] == "2.27.5"
    assert parser.parse_runs("host:1:1 [0] NCCL INFO x\nNCCL version 2.23.4+cuda12.6\n")[0]["nccl_version"] == "2.23.4"


def test_nvidia_driver_and_nccl_write_one_cuda_source_file_alike():
    """Both roles configure NVIDIA's CUDA repository: the same source, key and header, or each run of site.yml would
    rewrite the file the other wrote."""
    driver = module_utils("nvidia_driver")
    settings = {"source": "cuda_repo", "branch": "570", "version": "570.133.20", "kernel_modules": "open"}
    facts = recorded_facts("ubuntu2204", kernel="6.8.0-1015-gcp")
    driver_supply = driver.plan({**settings, "gpu_model": "H100-SXM-80GB"}, None, facts)["supply"]
    (nccl_step,) = plan(facts=facts)["supply"]
    assert driver_supply[-1]["repositories"] == nccl_step["repositories"]
    (driver_key,) = [key for step in driver_supply for key in step["keys"]]
    (nccl_key,) = nccl_step["keys"]
    assert (driver_key["dest"], driver_key["url"], driver_key["fingerprints"]) == (
        nccl_key["dest"],
        nccl_key["url"],
        nccl_key["fingerprints"],
    )
    apt = module_utils("vendor_packages_apt")
    vendor = module_utils("vendor_packages")
    request = {"repositories": nccl_step["repositories"], "packages": [], "managed_by": "role gpufabric.cluster.nccl"}
    (source,) = vendor.parse_request(request).repositories
    assert apt.sources_file(source, "role gpufabric.cluster.nccl").startswith(
        "# Managed by gpufabric (roles gpufabric.cluster.nvidia_driver, gpufabric.cluster.nccl and "
        "gpufabric.cluster.gds)"
    )
