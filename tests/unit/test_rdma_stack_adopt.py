# SPDX-License-Identifier: Apache-2.0
"""rdma_stack's adopt mode (settings['mode'] 'adopt', plugins/module_utils/adopt.py) over the recorded facts of each
OS and installed packages in package_facts' layout: what the image ships of the role's packages is held at its
installed versions, only what it lacks is installed (any version, from the host's own sources), a DOCA request on an
inbox image is refused with one message, and install mode is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufabric.collection import module_utils
from tests import conftest
from tests.conftest import package_facts

REPO = Path(__file__).resolve().parents[2]
rdma = module_utils("rdma_stack")
adopt = module_utils("adopt")

KERNEL = "6.8.0-1015-gcp"
MODULES_EXTRA = f"linux-modules-extra-{KERNEL}"
# Ubuntu 22.04's inbox stack as jammy's release pocket installs it (packages.ubuntu.com/jammy); the role's own table
# (rdma_stack.INBOX_DEFAULTS) asks for any revision of these upstream versions.
JAMMY_PINS = dict(rdma.INBOX_DEFAULTS["ubuntu2204"])
JAMMY = {name: pin.replace("-*", "-1") for name, pin in JAMMY_PINS.items()}
# NVIDIA's rdma-core on a DOCA-OFED image, the version the issue names for Azure's HPC and Nebius' GPU images
# (UNVERIFIED as a published build); rdma-core's binaries share their source's version.
MLNX = "2410mlnx54-1.2410068"
DOCA_IMAGE = {"rdma-core": MLNX, "ibverbs-utils": MLNX, "infiniband-diags": MLNX, "mlnx-ofed-kernel-dkms": MLNX}
# The DOCA profile's version the logic tests use (test_rdma_stack_logic.DOCA): a test value, not a published one.
DOCA_PROFILE_VERSION = "2.9.1-1"
DOCA = {
    "flavor": "doca",
    "fabric": "infiniband",
    "doca_profile": "doca-ofed",
    "doca_version": DOCA_PROFILE_VERSION,
    "doca_release": "2.9.1",
    "doca_base_url": "https://linux.mellanox.com/public/repo/doca",
    "doca_key_url": "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
    "doca_key_fingerprints": ["0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567"],
}
INBOX = {"flavor": "inbox", "fabric": "infiniband"}


def plan(installed: dict[str, str] | None, target: str = "ubuntu2204", mode: str = "adopt", **settings: object):
    facts = conftest.recorded_facts(target, kernel=KERNEL)
    if installed is not None:
        facts["packages"] = package_facts(installed)
    return rdma.plan({**INBOX, **settings, "mode": mode}, None, facts)


def pins(step: dict) -> dict[str, str]:
    return {package["name"]: package["version"] for package in step["packages"]}


def test_nothing_installed_is_installed_as_install_mode_plans_it():
    adopted = plan({"bash": "5.1-6ubuntu1"})
    installed = plan({"bash": "5.1-6ubuntu1"}, mode="install")
    assert adopted["errors"] == []
    assert adopted["supply"] == installed["supply"]
    assert pins(adopted["supply"][0]) == {**JAMMY_PINS, MODULES_EXTRA: ""}
    assert adopted["adopt"] == adopt.adoption("adopt", known=True, missing=list(JAMMY))
    assert installed["adopt"] == adopt.adoption()


def test_the_inbox_stack_shipped_whole_is_held_at_its_versions_and_nothing_added():
    shipped = {**JAMMY, "rdma-core": "39.0-1ubuntu0.1"}  # another revision than the role's table: kept, not moved
    result = plan({**shipped, "bash": "5.1-6ubuntu1"})
    assert result["errors"] == [] and result["warnings"] == []
    hold, rest = result["supply"]
    assert hold == adopt.hold_step(shipped, rdma.ADOPT_PREFERENCES)
    assert hold["preferences"] == "gpufabric-rdma-stack-adopted" and hold["repositories"] == hold["keys"] == []
    assert all(package["hold"] and package["repository"] == "" for package in hold["packages"])
    # linux-modules-extra stays as in install mode: installed when missing, never held.
    assert rest["packages"] == [{"name": MODULES_EXTRA, "version": "", "hold": False, "repository": ""}]
    assert result["adopt"] == adopt.adoption("adopt", known=True, found=shipped)
    assert result["holds"] == sorted(shipped)
    assert result["repo"] is None and result["apt_pins"] == []
    assert result["pending"] == [MODULES_EXTRA]
    assert result["kernel_modules"] == ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "mlx5_ib"]


def test_a_partial_stack_keeps_what_is_there_and_installs_the_rest_at_any_version():
    shipped = {name: version for name, version in JAMMY.items() if name != "perftest"}
    result = plan(shipped)
    assert result["errors"] == []
    hold, rest = result["supply"]
    assert pins(hold) == shipped
    # perftest from the host's sources at whatever they offer (no repository, no version, no preferences), held.
    assert rest["packages"][0] == {"name": "perftest", "version": "", "hold": True, "repository": ""}
    assert rest["preferences"] == "" and rest["repositories"] == rest["keys"] == []
    assert result["adopt"] == adopt.adoption("adopt", known=True, found=shipped, missing=["perftest"])
    assert result["holds"] == [*sorted(shipped), "perftest"]
    assert result["pending"] == ["perftest", MODULES_EXTRA]


def test_the_run_after_adds_what_was_installed_to_the_adopted_set():
    """What the first run installed is found by the next plan (the role plans again after installing it), so the
    preferences file and holds it plans are those of every later run."""
    result = plan({**JAMMY, "perftest": "4.4+0.37-1"})
    assert pins(result["supply"][0]) == JAMMY
    assert result["adopt"]["missing"] == []


def test_a_doca_image_is_adopted_for_the_doca_flavor_without_the_doca_repository():
    shipped = {**DOCA_IMAGE, "doca-ofed": DOCA_PROFILE_VERSION}
    result = plan(shipped, **DOCA)
    assert result["errors"] == []
    # One step: nothing is missing, and DOCA builds its own kernel modules (no linux-modules-extra).
    (hold,) = result["supply"]
    # The profile and the stack's packages under their common names; the image's kernel part is not the role's.
    assert pins(hold) == {name: version for name, version in shipped.items() if name != "mlnx-ofed-kernel-dkms"}
    # No DOCA key, repository or dkms preferences: nothing is fetched from NVIDIA's repository. doca-ofed's exact
    # openmpi dependency is met already (DOCA's openmpi, or a package providing it as azhpc-images' does).
    assert all(step["repositories"] == step["keys"] == [] for step in result["supply"])
    assert result["repo"] is None and result["apt_pins"] == []
    assert result["adopt"]["missing"] == []


def test_the_doca_profile_missing_on_a_doca_image_is_installed_from_the_hosts_sources():
    result = plan(DOCA_IMAGE, **DOCA)
    assert result["errors"] == []
    assert [step["repositories"] for step in result["supply"]] == [[], []]
    # At the version asked for, when one is; the run after adopts it at that version.
    assert pins(result["supply"][1]) == {"doca-ofed": DOCA_PROFILE_VERSION, "openmpi": ""}
    assert result["adopt"]["missing"] == ["doca-ofed", "openmpi"]
    assert pins(plan(DOCA_IMAGE, **{**DOCA, "doca_version": ""})["supply"][1]) == {"doca-ofed": "", "openmpi": ""}


def test_inbox_asked_on_a_doca_image_adopts_doca_and_adds_nothing_of_the_distribution_s():
    result = plan({**DOCA_IMAGE, "perftest": MLNX, "libucx0": MLNX, "ucx-utils": MLNX})
    assert result["errors"] == []
    # One step, the hold: no linux-modules-extra (DOCA builds its modules), no Ubuntu rdma-core library.
    (hold,) = result["supply"]
    assert pins(hold) == {
        name: MLNX for name in ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest", "libucx0", "ucx-utils")
    }
    assert result["flavor"] == "doca" and result["adopt"]["missing"] == []
    assert result["warnings"] == [
        "rdma_stack_provision 'adopt': rdma_stack_flavor is 'inbox' and the image ships DOCA-OFED/MLNX_OFED "
        f"(rdma-core {MLNX}): the doca flavor is adopted, held at the image's versions, and nothing of the "
        "distribution's stack is installed beside it (not ibverbs-providers, libibverbs1, librdmacm1, "
        f"{MODULES_EXTRA}); rdma_stack_flavor 'doca' says so without this warning; rdma_stack_provision 'install' "
        "replaces it with the distribution's"
    ]


def test_a_doca_profile_installed_marks_a_doca_image_whatever_rdma_core_s_version():
    """DOCA's profile packages (host-stack.md section 1) mark the stack as DOCA's, even beside an rdma-core whose
    version lacks 'mlnx' (a test value: no public DOCA build of that form is known)."""
    result = plan({"doca-ofed-userspace": "3.2.1-1", "rdma-core": "2510-1", "ucx": "1.18.0-1"})
    assert result["errors"] == []
    assert result["flavor"] == "doca" and result["doca_version"] == "3.2.1-1"
    (hold,) = result["supply"]
    assert pins(hold) == {"doca-ofed-userspace": "3.2.1-1", "rdma-core": "2510-1", "ucx": "1.18.0-1"}
    # The inbox flavor asked for no profile: doca-ofed (rdma_stack_doca_profile's default) is not installed.
    assert "doca-ofed" not in result["holds"]


def test_on_a_doca_image_doca_s_ucx_stands_for_ubuntu_s_and_nothing_of_the_distribution_s_is_added():
    """Azure's ubuntu-hpc image: DOCA's `ucx` conflicts with Ubuntu's libucx0 (Azure/azhpc-images
    components/install_rocm.sh); DOCA's rdma-core carries the libraries under Ubuntu's names."""
    ucx = "1.18.0-1.2410068"  # a DOCA-built version: a test value, not a published one
    result = plan({**DOCA_IMAGE, "perftest": MLNX, "ucx": ucx})
    assert result["errors"] == []
    (hold,) = result["supply"][:1]
    assert pins(hold)["ucx"] == ucx and "libucx0" not in pins(hold)
    added = [package["name"] for step in result["supply"][1:] for package in step["packages"]]
    assert added == [], "no Ubuntu UCX, rdma-core library or linux-modules-extra beside DOCA's"
    assert "ucx" in result["holds"] and not {"libucx0", "ucx-utils", "libibverbs1"} & set(result["holds"])


def test_doca_asked_on_an_inbox_image_is_refused_naming_package_version_and_the_way_out():
    result = plan(JAMMY, **DOCA)
    (error,) = result["errors"]
    assert error.startswith(
        "rdma_stack_provision 'adopt': rdma_stack_flavor 'doca' asks for DOCA-OFED and the image ships the "
        "distribution's stack (ibverbs-utils 39.0-1, "
    )
    assert "rdma-core 39.0-1" in error and "rdma-core without 'mlnx' in its version, no DOCA profile package" in error
    assert error.endswith(
        "accepted: an image with DOCA-OFED or MLNX_OFED (a DOCA profile package such as doca-ofed, or rdma-core at a "
        "version such as 2410mlnx54-1.2410068), or rdma_stack_flavor 'inbox' to adopt this one; rdma_stack_provision "
        "'install' installs DOCA over it"
    )
    assert result["supply"] == [] and result["pending"] == []
    assert result["adopt"]["refused"] == error and result["adopt"]["found"]["rdma-core"] == "39.0-1"


def test_doca_asked_on_an_image_with_part_of_a_stack_and_no_rdma_core_is_refused():
    (error,) = plan({"perftest": "4.4+0.37-1"}, **DOCA)["errors"]
    assert "(perftest 4.4+0.37-1; rdma-core not installed, no DOCA profile package)" in error


# Adopt installs nothing from DOCA's repository on a DOCA image: none of the settings only that install needs.
DOCA_ADOPT = {"flavor": "doca", "fabric": "infiniband", "doca_profile": "doca-ofed"}


def test_adopting_a_doca_image_needs_no_doca_version_key_or_repository():
    shipped = {**DOCA_IMAGE, "doca-ofed": DOCA_PROFILE_VERSION}
    result = plan(shipped, **DOCA_ADOPT)
    assert result["errors"] == []
    # The version is the image's, read from the installed profile package.
    assert result["doca_version"] == DOCA_PROFILE_VERSION and result["flavor"] == "doca"
    assert pins(result["supply"][0])["doca-ofed"] == DOCA_PROFILE_VERSION
    assert result["repo"] is None and all(step["keys"] == [] for step in result["supply"])
    # Install mode still needs them, each named.
    errors = plan(shipped, mode="install", **DOCA_ADOPT)["errors"]
    assert errors[0].startswith(
        "rdma_stack_doca_version is empty; the doca flavor needs the exact version of doca-ofed"
    )
    assert any(
        error.startswith("rdma_stack_doca_key_src and rdma_stack_doca_key_url are both empty") for error in errors
    )


def test_a_doca_version_the_image_does_not_have_is_refused_naming_both():
    result = plan({**DOCA_IMAGE, "doca-ofed": "3.2.3-1"}, **{**DOCA, "doca_version": "3.2.1-1"})
    assert result["errors"] == [
        "rdma_stack_provision 'adopt': rdma_stack_doca_version '3.2.1-1' differs from the image's doca-ofed 3.2.3-1; "
        "accepted in adopt mode: '' (the image's version is adopted) or '3.2.3-1'; rdma_stack_provision 'install' "
        "installs doca-ofed 3.2.1-1 from DOCA's repository"
    ]
    assert result["supply"] == [] and result["pending"] == []
    assert result["adopt"]["refused"] == result["errors"][0]
    # The same version, or none, is adopted.
    assert plan({**DOCA_IMAGE, "doca-ofed": "3.2.3-1"}, **{**DOCA, "doca_version": "3.2.3-1"})["errors"] == []


def test_a_doca_version_is_checked_when_doca_is_adopted_for_inbox_too():
    (error,) = plan({**DOCA_IMAGE, "doca-ofed": "3.2.3-1"}, doca_profile="doca-ofed", doca_version="3.2.1-1")["errors"]
    assert "rdma_stack_doca_version '3.2.1-1' differs from the image's doca-ofed 3.2.3-1" in error


def test_an_image_without_a_stack_needs_the_doca_settings_to_install_doca():
    result = plan({"bash": "5.1-6ubuntu1"}, **DOCA_ADOPT)
    assert result["errors"][0] == (
        "rdma_stack_provision 'adopt': the image ships no RDMA stack, so the doca flavor installs DOCA-OFED from "
        "DOCA's repository as rdma_stack_provision 'install' does: rdma_stack_doca_version is empty; the doca flavor "
        "needs the exact version of doca-ofed (apt-cache madison doca-ofed lists them)"
    )
    # Given, the image without a stack is installed as install mode plans it.
    adopted = plan({"bash": "5.1-6ubuntu1"}, **DOCA)
    assert adopted["errors"] == []
    assert adopted["supply"] == plan({"bash": "5.1-6ubuntu1"}, mode="install", **DOCA)["supply"]
    assert adopted["doca_version"] == DOCA_PROFILE_VERSION


def _double_packages(name: str) -> dict[str, str]:
    path = REPO / "tests" / "fixtures" / "images" / "doubles" / f"{name}.yml"
    double = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {entry["name"]: str(entry["version"]) for entry in double.get("packages") or []}


@pytest.mark.parametrize("double", ["azure-ubuntu-hpc-2204", "azure-ubuntu-hpc-2404", "oci-ubuntu-2204-doca-gpu-580"])
@pytest.mark.parametrize("flavor", [INBOX, DOCA_ADOPT], ids=["inbox", "doca"])
def test_the_doca_image_doubles_are_adopted_as_doca_without_a_doca_version(double, flavor):
    """The DOCA images' packages as their doubles install them (tests/fixtures/images/doubles: doca-ofed, rdma-core in
    NVIDIA's <OFED>mlnx<N>-1.<build> form, DOCA's ucx; those versions are the doubles' UNVERIFIED picks): the default
    inbox flavor and the doca flavor without rdma_stack_doca_version adopt the same DOCA stack and add nothing."""
    installed = _double_packages(double)
    target = "ubuntu2404" if double.endswith("2404") else "ubuntu2204"
    result = plan(installed, target=target, **flavor)
    assert result["errors"] == []
    assert result["flavor"] == "doca" and result["doca_version"] == installed["doca-ofed"]
    (hold,) = result["supply"]
    assert pins(hold) == {name: installed[name] for name in ("doca-ofed", "rdma-core", "ucx")}
    assert result["adopt"]["missing"] == []


def test_unknown_packages_plan_no_image_steps_and_say_so():
    result = plan(None)
    assert result["errors"] == []
    assert result["supply"] == [
        {
            "keys": [],
            "repositories": [],
            "packages": [{"name": MODULES_EXTRA, "version": "", "hold": False, "repository": ""}],
            "preferences": "",
            "pin_priority": 1001,
            "release": [],
        }
    ]
    assert result["adopt"] == adopt.adoption("adopt")
    (warning,) = result["warnings"]
    assert warning.startswith("rdma_stack_provision 'adopt': the image's packages are read on the host")
    # Without a kernel either (gpufabric plan without --probe), no package step at all.
    facts = conftest.recorded_facts("ubuntu2404")
    assert rdma.plan({**INBOX, "mode": "adopt"}, None, facts)["supply"] == []


@pytest.mark.parametrize("target", ["rhel9", "rocky9"])
def test_adopt_on_the_rhel_family_fails_with_one_message(target):
    facts = conftest.recorded_facts(target, packages=package_facts({"rdma-core": "51.0-1.el9"}))
    result = rdma.plan({**INBOX, "mode": "adopt", "inbox_packages": {"rdma-core": "51.0-1.el9"}}, None, facts)
    (error,) = result["errors"]
    assert error.startswith("rdma_stack_provision 'adopt' is not available on ")
    assert error.endswith(
        "(os_family 'RedHat'): adopt holds the image's packages with APT; accepted: Debian and Ubuntu hosts, or "
        "rdma_stack_provision 'install' here"
    )
    assert result["supply"] == []


def test_an_unknown_mode_is_refused():
    (error,) = plan(JAMMY, mode="replace")["errors"]
    assert error == "rdma_stack_provision 'replace' is not accepted; accepted: install, adopt"


@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_install_mode_is_unchanged_whatever_the_image_ships(target):
    result = plan({**DOCA_IMAGE, "doca-ofed": DOCA_PROFILE_VERSION}, target=target, mode="install")
    assert result["adopt"] == adopt.adoption()
    assert result["errors"] == []
    table = rdma.INBOX_DEFAULTS[target]
    assert {name: version for name, version in pins(result["supply"][0]).items() if version} == table
    assert plan(None, target=target, mode="install")["supply"] == result["supply"]
    # A host adopted before goes back: adopt mode's record is removed and the holds it alone explains released.
    assert result["supply"][0]["release"] == [rdma.ADOPT_PREFERENCES]
