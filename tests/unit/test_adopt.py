# SPDX-License-Identifier: Apache-2.0
"""Adopt mode (plugins/module_utils/adopt.py, nvidia_driver's plan with settings['mode'] 'adopt') over the recorded
facts of each OS and installed packages in package_facts' layout: what the image ships is found, accepted or refused
with one message, held at its installed versions, and only what it lacks installed. Molecule covers one image
(the GCP-like TEST-DOUBLE set on the 22.04 identity); the combinations are here."""

from __future__ import annotations

import re

import pytest
import yaml

from gpufabric.collection import module_utils
from tests import conftest
from tests.conftest import package_facts
from tests.unit import test_nvidia_driver_logic

nd = module_utils("nvidia_driver")
cuda_repo = module_utils("cuda_repo")
adopt = module_utils("adopt")
supply_chain = module_utils("supply_chain")

KERNEL = "6.8.0-1015-gcp"
HEADERS = f"linux-headers-{KERNEL}"
# Canonical's 570-server set on jammy, names and version as a public Ubuntu 22.04 apt log installs them
# (570.195.03-0ubuntu0.22.04.2); the -open headless package as a public listing of a cloud image's set names it.
CANONICAL = "570.195.03-0ubuntu0.22.04.2"
GCP_LIKE = {
    "libnvidia-cfg1-570-server": CANONICAL,
    "libnvidia-compute-570-server": CANONICAL,
    "nvidia-compute-utils-570-server": CANONICAL,
    "nvidia-firmware-570-server-570.195.03": CANONICAL,
    "nvidia-headless-no-dkms-570-server-open": CANONICAL,
    "nvidia-kernel-common-570-server": CANONICAL,
    "nvidia-utils-570-server": CANONICAL,
}
# Installed beside it with versions of their own (the same apt log): left alone.
OTHERS = {"nvidia-modprobe": "575.57.08-0ubuntu1", "libnvidia-egl-wayland1": "1:1.1.9-1.1", "bash": "5.1-6ubuntu1"}
# install mode's settings of the driver's own tests, in adopt mode
SETTINGS = {**test_nvidia_driver_logic.SETTINGS, "mode": "adopt"}
CUDA_2204 = f"{cuda_repo.CUDA_REPO_BASE}/ubuntu2204/x86_64/"


def plan(installed: dict[str, str] | None, target: str = "ubuntu2204", **settings: object) -> dict:
    facts = conftest.recorded_facts(target, kernel=KERNEL)
    if installed is not None:
        facts["packages"] = package_facts(installed)
    return dict(nd.plan({**SETTINGS, **settings}, None, facts))


def names(step: dict) -> dict[str, str]:
    return {package["name"]: package["version"] for package in step["packages"]}


def test_shared_helpers():
    assert adopt.MODES == ("install", "adopt")
    assert adopt.installed_versions({"distribution": "Ubuntu"}) is None
    assert adopt.installed_versions({"packages": package_facts({"a": "1-1"}) | {"b": []}}) == {"a": "1-1"}
    assert adopt.mode_error("replace", "nvidia_driver_provision") == (
        "nvidia_driver_provision 'replace' is not accepted; accepted: install, adopt"
    )
    assert supply_chain.origin_pin("https://developer.download.nvidia.com/compute/cuda/repos/") == (
        "origin developer.download.nvidia.com"
    )
    assert supply_chain.origin_pin("file:///srv/mirror/") == ""
    step = adopt.hold_step({"b": "2", "a": "1"}, "gpufabric-x")
    assert step == {
        "keys": [],
        "repositories": [],
        "packages": [
            {"name": "a", "version": "1", "hold": True, "repository": ""},
            {"name": "b", "version": "2", "hold": True, "repository": ""},
        ],
        "preferences": "gpufabric-x",
        "pin_priority": 1001,
        "release": [],
    }


def test_install_mode_is_unchanged_and_says_so():
    settings = {key: value for key, value in SETTINGS.items() if key != "mode"}
    facts = conftest.recorded_facts("ubuntu2204", kernel=KERNEL)
    # The packages are not read in install mode: the same plan with or without them, installing the role's driver.
    result = nd.plan(settings, None, facts)
    assert result == nd.plan(settings, None, facts | {"packages": package_facts(GCP_LIKE)})
    assert result == nd.plan({**settings, "mode": "install"}, None, facts)
    assert result["adopt"] == {"mode": "install", "known": False, "found": {}, "missing": [], "refused": ""}
    assert result["apt_pins"] == []
    assert names(result["supply"][-1])["nvidia-driver-570-open"] == "570.133.20-*"


def test_a_mode_that_is_not_one_is_refused():
    (error,) = plan(GCP_LIKE, mode="replace")["errors"]
    assert error == "nvidia_driver_provision 'replace' is not accepted; accepted: install, adopt"


def test_nothing_shipped_installs_everything_as_install_mode_plans_it():
    result = plan(OTHERS)
    install = plan(OTHERS, mode="install")
    assert result["errors"] == []
    assert result["supply"] == install["supply"] and result["versions"] == install["versions"]
    assert result["adopt"] == {
        "mode": "adopt",
        "known": True,
        "found": {},
        "missing": ["nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-fabricmanager-570"],
        "refused": "",
    }


def test_a_gcp_like_image_is_adopted_held_and_only_fabric_manager_installed():
    result = plan(GCP_LIKE | OTHERS)
    assert result["errors"] == [] and result["warnings"] == []
    # The image's modules are precompiled (nvidia-headless-no-dkms-*): no headers step, nothing to build.
    hold, added = result["supply"]
    assert result["kernel_headers"] == []
    # The image's whole set at its installed versions, held and pinned in the role's preferences file; what
    # carries another version (nvidia-modprobe, libnvidia-egl-wayland1) is left alone.
    assert hold["keys"] == hold["repositories"] == []
    assert names(hold) == GCP_LIKE
    assert all(package["hold"] and package["repository"] == "" for package in hold["packages"])
    assert (hold["preferences"], hold["pin_priority"]) == ("gpufabric-nvidia-driver", 1001)
    # Fabric manager, which the image lacks, at any revision of the shipped driver's upstream version (the CUDA
    # repository's, resolved on the host), from that repository (its key, its source), pinned in the file of the
    # profile's own packages.
    assert names(added) == {"nvidia-fabricmanager-570": "570.195.03-*"}
    assert [key["url"] for key in added["keys"]] == [CUDA_2204 + "3bf863cc.pub"]
    assert [repository["uris"] for repository in added["repositories"]] == [[CUDA_2204]]
    assert added["packages"][0]["repository"] == "gpufabric-cuda" and added["packages"][0]["hold"]
    assert added["preferences"] == "gpufabric-nvidia-driver-extra"
    # The CUDA repository lowered for everything else, by its host, before anything is installed.
    assert result["apt_pins"] == [
        {
            "path": "/etc/apt/preferences.d/gpufabric-cuda-priority.pref",
            "content": (
                "# Managed by gpufabric (role gpufabric.cluster.nvidia_driver): local edits are overwritten.\n"
                "# Adopt mode: the image's driver stays; this repository supplies only what the image lacks.\n"
                "Package: *\nPin: origin developer.download.nvidia.com\nPin-Priority: 400\n"
            ),
        }
    ]
    assert result["adopt"] == {
        "mode": "adopt",
        "known": True,
        "found": GCP_LIKE,
        "missing": ["nvidia-fabricmanager-570"],
        "refused": "",
    }
    assert result["upstream_version"] == "570.195.03" and result["pinning_package"] is None
    assert result["versions"] == {**GCP_LIKE, "nvidia-fabricmanager-570": "570.195.03-*"}
    assert result["cuda_repo_url"] == CUDA_2204


def test_part_of_canonicals_set_without_its_meta_packages_is_still_the_images_driver():
    # What the GCP ubuntu-accelerator 2204 570 manifest records (tests/fixtures/images/manifests/): two packages of
    # Canonical's -server set, neither a meta package nor nvidia-utils. The image ships a driver: it is adopted, not
    # taken for an image without one (NVIDIA's nvidia-driver-570-open and its DKMS planned on top of Canonical's).
    shipped = {name: GCP_LIKE[name] for name in ("libnvidia-cfg1-570-server", "nvidia-compute-utils-570-server")}
    result = plan(shipped | OTHERS)
    assert result["errors"] == []
    hold, added = result["supply"]
    assert names(hold) == shipped and result["kernel_headers"] == []
    assert names(added) == {"nvidia-fabricmanager-570": "570.195.03-*"}
    assert result["adopt"]["found"] == shipped and result["upstream_version"] == "570.195.03"


def test_fabric_manager_shipped_is_adopted_and_nothing_installed():
    shipped = GCP_LIKE | {"nvidia-fabricmanager-570": "570.195.03-1", "libnvidia-nscq-570": "570.195.03-1"}
    result = plan(shipped)
    assert result["errors"] == []
    hold, own = result["supply"]
    assert names(hold) == GCP_LIKE | {"libnvidia-nscq-570": "570.195.03-1"}
    # Fabric manager, the profile's, in its own file at its installed version: no CUDA repository, nothing missing.
    assert names(own) == {"nvidia-fabricmanager-570": "570.195.03-1"}
    assert own["repositories"] == own["keys"] == [] and own["packages"][0]["repository"] == ""
    assert result["apt_pins"] == [] and result["cuda_repo_url"] == ""
    assert result["adopt"]["missing"] == [] and result["adopt"]["found"] == shipped


def test_the_run_after_installing_fabric_manager_pins_and_holds_the_same():
    """Idempotence: once fabric manager is installed, the next plan writes the same preferences files and holds
    (the CUDA source, key and lowered priority stay as written; nothing is removed)."""

    def pinned(result: dict) -> dict:
        """Each preferences file's packages and holds: what vendor_packages writes and sets."""
        return {
            step["preferences"]: {
                package["name"]: (package["version"], package["hold"]) for package in step["packages"]
            }
            for step in result["supply"]
        }

    first = plan(GCP_LIKE)
    second = plan(GCP_LIKE | {"nvidia-fabricmanager-570": "570.195.03-1"})
    # The first plan asks for any revision; vendor_packages pins what that resolved to (570.195.03-1 here), which the
    # second plan adopts: the same file.
    assert pinned(first)["gpufabric-nvidia-driver-extra"] == {"nvidia-fabricmanager-570": ("570.195.03-*", True)}
    assert pinned(second) == pinned(first) | {
        "gpufabric-nvidia-driver-extra": {"nvidia-fabricmanager-570": ("570.195.03-1", True)}
    }
    assert second["adopt"]["missing"] == [] and first["adopt"]["missing"] == ["nvidia-fabricmanager-570"]


def test_without_fabric_manager_asked_nothing_is_installed():
    result = plan(GCP_LIKE, fabric_manager=False)
    assert [names(step) for step in result["supply"]] == [GCP_LIKE]
    assert result["adopt"]["missing"] == []


def test_a_fabric_manager_at_another_version_is_refused():
    (error,) = plan(GCP_LIKE | {"nvidia-fabricmanager-570": "570.133.20-1"})["errors"]
    assert error == (
        "nvidia_driver_provision 'adopt': the image's nvidia-fabricmanager-570 570.133.20-1 does not match its driver "
        f"nvidia-headless-no-dkms-570-server-open {CANONICAL}: fabric manager runs only at the driver's exact "
        "version; accepted: nvidia-fabricmanager-570 at 570.195.03; nvidia_driver_provision 'install' replaces both"
    )


def test_a_driver_on_another_branch_is_refused_with_one_message():
    shipped = {name.replace("570", "580"): version.replace("570", "580") for name, version in GCP_LIKE.items()}
    result = plan(shipped)
    (error,) = result["errors"]
    assert error == (
        "nvidia_driver_provision 'adopt': the image's driver nvidia-headless-no-dkms-580-server-open "
        "580.195.03-0ubuntu0.22.04.2 (driver 580.195.03) is not accepted; accepted: branch 570 (nvidia_driver_branch) "
        "at 570.133.20 or newer (nvidia_driver_version, the floor in adopt mode); nvidia_driver_provision 'install' "
        "replaces it"
    )
    # Refused: nothing installed, nothing held; the refusal recorded.
    assert result["supply"] == [] and result["apt_pins"] == []
    assert result["adopt"] == {"mode": "adopt", "known": True, "found": {}, "missing": [], "refused": error}


def test_a_driver_older_than_the_floor_is_refused():
    (error,) = plan(GCP_LIKE, version="570.211.01")["errors"]
    assert (
        "(driver 570.195.03) is not accepted; accepted: branch 570 (nvidia_driver_branch) at 570.211.01 or newer"
        in (error)
    )


@pytest.mark.parametrize("floor", ["570.195.03", "570.195.03-0ubuntu0.22.04.2", "570.86.15", "570.148.08-1"])
def test_the_floor_is_the_upstream_version_compared_as_numbers(floor):
    # 570.195.03 >= 570.86.15 as numbers (not as text); a revision given is not compared.
    assert plan(GCP_LIKE, version=floor)["errors"] == []


def test_two_drivers_shipped_are_refused():
    shipped = GCP_LIKE | {"nvidia-driver-570-open": "570.172.08-0ubuntu1"}
    (error,) = plan(shipped)["errors"]
    assert error.startswith("nvidia_driver_provision 'adopt': the image carries more than one driver (")
    assert "nvidia-driver-570-open 570.172.08-0ubuntu1" in error and "accepted: one driver version" in error


# Real versions: the CUDA repository's Ubuntu and Debian 13 driver (public install scripts,
# shared/reference/real-images.md section 1), Debian 12's own driver and nvidia-persistenced
# (molecule/nvidia_driver installs them).
FOUND_ACROSS_SOURCES = [
    ("ubuntu2404", "570.133.20", {"nvidia-driver-570-open": "570.133.20-0ubuntu1"}, "nvidia-driver-570-open"),
    (
        "debian12",
        "535.261.03",
        {"nvidia-driver": "535.261.03-1", "nvidia-smi": "535.261.03-1", "nvidia-persistenced": "535.171.04-1~deb12u1"},
        "nvidia-driver",
    ),
    ("debian13", "595.71.05", {"nvidia-open": "595.71.05-1"}, "nvidia-open"),
]


@pytest.mark.parametrize(("target", "version", "shipped", "carrier"), FOUND_ACROSS_SOURCES)
def test_the_driver_is_found_across_sources(target, version, shipped, carrier):
    branch = version.split(".")[0]
    result = plan(shipped, target, fabric_manager=False, branch=branch, version=version)
    assert result["errors"] == [], result["errors"]
    assert result["upstream_version"] == version
    # Debian's nvidia-persistenced carries its own version: left alone.
    assert result["adopt"]["found"] == {name: v for name, v in shipped.items() if name != "nvidia-persistenced"}
    assert carrier in result["adopt"]["found"]


def test_debian_cuda_repository_gives_fabric_manager_its_revision():
    shipped = {"nvidia-open": "595.71.05-1", "nvidia-kernel-open-dkms": "595.71.05-1"}
    result = plan(shipped, "debian13", branch="595", version="595.71.05")
    assert names(result["supply"][-1]) == {"nvidia-fabricmanager": "595.71.05-*"}
    assert result["cuda_repo_url"] == f"{cuda_repo.CUDA_REPO_BASE}/debian13/x86_64/"


def test_packages_not_read_plan_the_headers_only_and_say_where_they_are_read():
    result = plan(None)
    assert result["errors"] == []
    assert [names(step) for step in result["supply"]] == [{HEADERS: ""}]
    assert result["adopt"] == {"mode": "adopt", "known": False, "found": {}, "missing": [], "refused": ""}
    assert result["warnings"] == [
        "nvidia_driver_provision 'adopt': the image's packages are read on the host (package_facts), so what it ships, "
        "holds and lacks is not known here (`gpufabric plan --probe` reads them); shown: the kernel headers only"
    ]


def test_source_distro_refuses_a_missing_package_it_cannot_version():
    result = plan(GCP_LIKE, source="distro", version="570.133.20-0ubuntu0.22.04.1")
    (error,) = result["errors"]
    assert error == (
        "nvidia_driver_provision 'adopt': the image lacks nvidia-fabricmanager-570, and from the distribution "
        "(nvidia_driver_source 'distro') its exact version cannot be derived from the driver's 570.195.03; accepted: "
        "the exact version in nvidia_driver_extra_packages (name: version, as apt-cache madison lists it), or "
        "nvidia_driver_source 'cuda_repo'"
    )
    assert result["adopt"]["refused"] == error


def test_source_distro_installs_a_missing_package_at_the_version_given():
    # UNVERIFIED: the revision Ubuntu publishes nvidia-fabricmanager-570 at; any exact version given is taken.
    given = {"nvidia-fabricmanager-570": "570.195.03-0ubuntu0.22.04.1"}
    result = plan(GCP_LIKE, source="distro", version="570.133.20-0ubuntu0.22.04.1", extra_packages=given)
    assert result["errors"] == []
    added = result["supply"][-1]
    assert names(added) == given and added["repositories"] == [] and added["keys"] == []
    assert added["packages"][0]["repository"] == "" and result["apt_pins"] == []


def test_extra_packages_installed_are_adopted_missing_ones_installed():
    # An exact version given for an extra is kept as given.
    extras = {"nvidia-compute-utils-570-server": "", "libnvidia-nscq-570": "570.195.03-1", "nvidia-modprobe": ""}
    result = plan(GCP_LIKE | OTHERS, extra_packages=extras)
    hold, own = result["supply"]
    # An installed extra is adopted at its installed version (even one of another version than the driver's), in
    # the file of the profile's own packages; a missing one installed beside fabric manager.
    assert names(own) == {
        "nvidia-compute-utils-570-server": CANONICAL,
        "nvidia-modprobe": "575.57.08-0ubuntu1",
        "nvidia-fabricmanager-570": "570.195.03-*",
        "libnvidia-nscq-570": "570.195.03-1",
    }
    assert "nvidia-compute-utils-570-server" not in names(hold)
    assert result["adopt"]["found"] == GCP_LIKE | {"nvidia-modprobe": "575.57.08-0ubuntu1"}
    assert result["adopt"]["missing"] == ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]
    (error,) = plan(GCP_LIKE, extra_packages={"nvidia-utils-570-server": "570.211.01-0ubuntu0.22.04.1"})["errors"]
    assert error.startswith("nvidia_driver_extra_packages: nvidia-utils-570-server '570.211.01-0ubuntu0.22.04.1' ")
    assert f"accepted in adopt mode: '' or {CANONICAL}" in error


def test_a_local_cuda_repository_needs_its_pin():
    local = {"cuda_repo_base": "file:///srv/mirror/compute/cuda/repos"}
    (error,) = plan(GCP_LIKE, **local)["errors"]
    assert error.startswith("nvidia_driver_cuda_repo_pin is empty and the CUDA repository file:///srv/mirror/")
    pinned = plan(GCP_LIKE, **local, cuda_repo_pin="release o=mirror")
    assert "Pin: release o=mirror\nPin-Priority: 400\n" in pinned["apt_pins"][0]["content"]


def test_the_gcp_like_image_carries_the_set_these_tests_adopt():
    """The GCP-like set above is the recorded package list tests/fixtures/images/ubuntu2204-gcp-accelerator.yml:
    one spec of the image's driver set."""
    spec = yaml.safe_load((conftest.REPO / "tests/fixtures/images/ubuntu2204-gcp-accelerator.yml").read_text())
    assert {package["name"]: package["version"] for package in spec["packages"]} == GCP_LIKE
    assert all("TEST DOUBLE" in package["description"] for package in spec["packages"])
    assert not any(re.fullmatch(nd.FABRICMANAGER, package["name"]) for package in spec["packages"])


def test_imex_shipped_is_adopted_and_missing_imex_installed_at_the_drivers_version():
    """IMEX is the profile's own package like fabric manager: an image that ships it at the driver's version keeps
    it (held), one that lacks it gets it from the CUDA repository at the shipped driver's version."""
    lacking = plan(GCP_LIKE, imex=True)
    assert lacking["errors"] == []
    assert "nvidia-imex-570" in lacking["adopt"]["missing"]
    assert names(lacking["supply"][-1])["nvidia-imex-570"] == "570.195.03-*"
    shipped = plan(GCP_LIKE | {"nvidia-imex-570": "570.195.03-1"}, imex=True)
    assert shipped["errors"] == [] and "nvidia-imex-570" not in shipped["adopt"]["missing"]
    assert "nvidia-imex-570" in shipped["pinned"]


def test_an_nvlink5_image_lacking_nvlsm_gets_it_beside_its_driver():
    """On a B200 image with fabric manager: the missing NVLSM comes at any version, libnvsdm at the driver's."""
    lacking = plan(GCP_LIKE, gpu_model="B200-SXM-180GB", nvswitch=True, fabric_manager=True)
    assert lacking["errors"] == []
    assert {"nvlsm", "libnvsdm-570"} <= set(lacking["adopt"]["missing"])
    assert names(lacking["supply"][-1])["nvlsm"] == ""
    assert names(lacking["supply"][-1])["libnvsdm-570"] == "570.195.03-*"
    nvlink5 = {"nvlsm": "2025.06.10-1", "libnvsdm-570": "570.195.03-1", "nvidia-fabricmanager-570": "570.195.03-1"}
    shipped = plan(
        GCP_LIKE | nvlink5,
        gpu_model="B200-SXM-180GB",
        nvswitch=True,
        fabric_manager=True,
    )
    assert shipped["errors"] == [] and shipped["adopt"]["missing"] == []


def test_a_dkms_driver_set_gets_the_running_kernels_headers_first():
    """A shipped driver whose modules DKMS builds (nvidia-dkms-*) needs the running kernel's headers, from the
    distribution's archive, in a step before everything else; precompiled modules (no-dkms) need none."""
    dkms = {
        "nvidia-driver-570-server-open": CANONICAL,
        "nvidia-dkms-570-server-open": CANONICAL,
        "nvidia-utils-570-server": CANONICAL,
    }
    result = plan(dkms)
    assert result["errors"] == [] and result["kernel_headers"] == [HEADERS]
    headers = result["supply"][0]
    assert headers == {
        "keys": [],
        "repositories": [],
        "packages": [{"name": HEADERS, "version": "", "hold": False, "repository": ""}],
        "preferences": "",
        "pin_priority": 1001,
        "release": [],
    }
    assert nd.DKMS_PACKAGE.search("nvidia-kernel-open-dkms") and not nd.DKMS_PACKAGE.search(
        "nvidia-headless-no-dkms-570-server-open"
    )
    # On a 22.04 HWE kernel the same step brings the kernel's gcc-12 (plugins/module_utils/kernel_build.py); the
    # precompiled set of GCP's images builds nothing and needs neither.
    hwe = "Linux version 6.8.0-1015-gcp (x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld)"
    assert names(plan(dkms, kernel_version_text=hwe)["supply"][0]) == {HEADERS: "", "gcc-12": ""}
    assert plan(GCP_LIKE | OTHERS, kernel_version_text=hwe)["kernel_compiler"] is None
