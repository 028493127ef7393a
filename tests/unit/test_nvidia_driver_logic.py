# SPDX-License-Identifier: Apache-2.0
"""nvidia_driver's decisions for the combinations molecule (the Ubuntu 22.04 and 24.04 identity images, branch 570)
cannot reach: Debian and RHEL package names, exact versions per distribution, the pinning package from 580, CUDA
repository URLs, the kernel headers, the supply steps, fabric manager naming by branch, hold method, and every bad
input the role refuses before changing anything."""

from __future__ import annotations

from functools import partial

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils
from tests import conftest

nd = module_utils("nvidia_driver")
cuda_repo = module_utils("cuda_repo")
nd_filter = _import_plugins("filter", "nvidia_driver_plan")

BASE = {
    "source": "cuda_repo",
    "distribution": "Ubuntu",
    # As ansible-core gathers them on Ubuntu 24.04 (tests/fixtures/os_release/ubuntu2404/facts.json).
    "distribution_version": "24.04",
    "distribution_major_version": "24",
    "architecture": "x86_64",
    "kernel": "6.8.0-1015-aws",
    "branch": "570",
    "version": "570.133.20-1",
    "kernel_modules": "open",
}
FACT_KEYS = ("distribution", "distribution_version", "distribution_major_version", "architecture", "kernel")


def run(**values: object) -> dict:
    """nd.plan as the role's one task calls it: the role's settings, no host plan, ansible_facts."""
    settings = {key: value for key, value in values.items() if key not in FACT_KEYS}
    facts = {key: value for key, value in values.items() if key in FACT_KEYS}
    return dict(nd.plan(settings, None, facts))


@pytest.mark.parametrize(
    ("branch", "distribution", "expected"),
    [
        ("570", "Ubuntu", "nvidia-fabricmanager-570"),
        ("575", "Debian", "nvidia-fabricmanager-575"),
        ("580", "Ubuntu", "nvidia-fabricmanager"),
        ("590", "Debian", "nvidia-fabricmanager"),
        ("570", "RedHat", "nvidia-fabric-manager"),
        ("580", "Rocky", "nvidia-fabricmanager"),
    ],
)
def test_fabricmanager_package_by_branch_and_os(branch, distribution, expected):
    assert nd.fabricmanager_package(branch, distribution) == expected


@pytest.mark.parametrize(
    ("gpu", "too_old", "ok"),
    [
        ("B200-SXM-180GB", "565", "570"),
        ("H200-SXM-141GB", "545", "550"),
        ("H100-SXM-80GB", "520", "525"),
        ("A100-SXM-40GB", "440", "450"),
    ],
)
def test_branch_too_old_for_gpu(gpu, too_old, ok):
    error = nd.branch_error(too_old, gpu)
    assert error and f"'{too_old}'" in error and gpu in error and "accepted" in error
    assert nd.branch_error(ok, gpu) is None


def test_unknown_gpu_model_and_bad_branch():
    assert nd.branch_error("535", "L40S") is None
    assert "three digits" in nd.branch_error("r570", "H100-SXM-80GB")


@pytest.mark.parametrize(
    ("source", "distribution", "branch", "modules", "expected"),
    [
        ("distro", "Debian", "535", "open", ["nvidia-driver", "nvidia-open-kernel-dkms", "nvidia-smi"]),
        ("distro", "Debian", "535", "proprietary", ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi"]),
        ("distro", "Ubuntu", "570", "open", ["nvidia-headless-570-server-open", "nvidia-utils-570-server"]),
        ("distro", "Ubuntu", "570", "proprietary", ["nvidia-headless-570-server", "nvidia-utils-570-server"]),
        ("cuda_repo", "Debian", "570", "open", ["nvidia-open", "nvidia-kernel-open-dkms"]),
        ("cuda_repo", "Ubuntu", "570", "open", ["nvidia-driver-570-open", "nvidia-dkms-570-open"]),
        ("cuda_repo", "Ubuntu", "570", "proprietary", ["nvidia-driver-570", "nvidia-dkms-570"]),
        ("cuda_repo", "Ubuntu", "580", "open", ["nvidia-open"]),
        ("cuda_repo", "Ubuntu", "580", "proprietary", ["cuda-drivers"]),
        ("cuda_repo", "RedHat", "570", "open", ["nvidia-open"]),
    ],
)
def test_driver_packages(source, distribution, branch, modules, expected):
    assert nd.driver_packages(source, distribution, branch, modules) == expected


def test_distro_source_not_on_rhel():
    with pytest.raises(ValueError, match="accepted: cuda_repo"):
        nd.driver_packages("distro", "Rocky", "570", "open")


@pytest.mark.parametrize(
    ("distribution", "version", "arch", "expected"),
    [
        ("Ubuntu", "24.04", "x86_64", "ubuntu2404/x86_64/"),
        ("Ubuntu", "22.04", "aarch64", "ubuntu2204/sbsa/"),
        ("Debian", "12", "x86_64", "debian12/x86_64/"),
        ("RedHat", "9", "x86_64", "rhel9/x86_64/"),
        ("Rocky", "8", "aarch64", "rhel8/sbsa/"),
    ],
)
def test_cuda_repo_url(distribution, version, arch, expected):
    assert cuda_repo.cuda_repo_url(distribution, version, arch) == f"{cuda_repo.CUDA_REPO_BASE}/{expected}"


@pytest.mark.parametrize(
    ("target", "tag"),
    [
        ("ubuntu2204", "ubuntu2204"),
        ("ubuntu2404", "ubuntu2404"),
        ("debian12", "debian12"),
        ("debian13", "debian13"),
        ("rhel9", "rhel9"),
        ("rocky9", "rhel9"),
    ],
)
def test_the_cuda_repository_follows_the_facts_ansible_gathers(target, tag):
    """The facts ansible-core gathered from each OS's real release files (Ubuntu's major version is "22")."""
    settings = {key: value for key, value in BASE.items() if key not in FACT_KEYS}
    result = nd.plan(settings, None, conftest.recorded_facts(target))
    assert result["cuda_repo_url"] == f"{cuda_repo.CUDA_REPO_BASE}/{tag}/x86_64/", result["errors"]


def test_hold_method_and_initramfs_per_os():
    assert nd.version_lock_method("Ubuntu") == nd.version_lock_method("Debian") == "dpkg_hold"
    assert nd.version_lock_method("RedHat") == "dnf_versionlock"
    assert nd.initramfs_command("Debian")[0] == "update-initramfs"
    assert nd.initramfs_command("AlmaLinux")[0] == "dracut"


def test_plan_ok_with_fabric_manager_pinned_at_driver_version():
    result = run(**BASE, gpu_model="H100-SXM-80GB", fabric_manager=True, nvswitch=True, gpudirect="peermem")
    assert result["errors"] == []
    assert result["pinned"] == ["nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-fabricmanager-570"]
    # An exact version with a revision pins the driver's packages at it; fabric manager, whose revision can differ,
    # takes any revision of the same upstream version.
    assert result["versions"] == {
        "linux-headers-6.8.0-1015-aws": "",
        "nvidia-driver-570-open": "570.133.20-1",
        "nvidia-dkms-570-open": "570.133.20-1",
        "nvidia-fabricmanager-570": "570.133.20-*",
    }
    assert result["upstream_version"] == "570.133.20"
    assert result["cuda_repo_key_url"].endswith("/ubuntu2404/x86_64/3bf863cc.pub")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {"gpu_model": "B200-SXM-180GB", "branch": "565", "version": "565.57.01-1"},
            "'565' is too old for B200-SXM-180GB",
        ),
        ({"fabric_manager": True, "nvswitch": False}, "no NVSwitch"),
        ({"version": "580.65.06-1"}, "not on branch 570"),
        ({"version": "570"}, "'570' is not a driver version"),
        ({"source": "distro", "version": "570.133.20"}, "has no package revision"),
        ({"kernel": "$(reboot)"}, "kernel release '$(reboot)' from the fact kernel"),
        ({"cuda_repo_key": "-----BEGIN PGP PUBLIC KEY BLOCK-----"}, "is not a key location"),
        ({"extra_packages": ["nvidia-persistenced"]}, "nvidia_driver_extra_packages is list"),
        ({"kernel_modules": "proprietary", "gpudirect": "dmabuf"}, "'dmabuf' needs open"),
        ({"kernel_modules": "proprietary", "gpu_model": "B200-SXM-180GB"}, "accepted: open"),
        ({"source": "ppa"}, "'ppa' is not accepted"),
        ({"gpudirect": "nv_peer_mem"}, "'nv_peer_mem' is not accepted"),
        (
            {"source": "distro", "distribution": "Debian", "fabric_manager": True, "nvswitch": True},
            "Debian does not package it",
        ),
    ],
)
def test_plan_refuses_bad_input(changes, needle):
    (error,) = run(**{**BASE, **changes})["errors"]
    assert needle in error
    assert "accepted" in error


def test_the_filter_takes_the_settings_piped_and_the_facts_by_keyword():
    settings = {key: value for key, value in BASE.items() if key not in FACT_KEYS}
    facts = {key: BASE[key] for key in FACT_KEYS}
    assert nd_filter.FilterModule().filters()["nvidia_driver_plan"](settings, facts=facts) == run(**BASE)
    with pytest.raises(
        AnsibleFilterError,
        match=r"nvidia_driver_plan: facts= is NoneType None; accepted: ansible_facts \(a dictionary\)",
    ):
        nd_filter.FilterModule().filters()["nvidia_driver_plan"](settings)


def test_a_refused_plan_keeps_every_key_empty():
    result = run(**{**BASE, "source": "ppa"})
    assert set(result) == set(nd.NvidiaDriverPlan.__annotations__)
    assert (result["pinned"], result["lock"], result["cuda_repo_url"]) == ([], "", "")


def test_upstream_version():
    assert nd.upstream_version("1:570.133.20-1ubuntu1") == "570.133.20"
    assert nd.upstream_version("535.261.03-1") == "535.261.03"


FINGERPRINT = "EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"
SETTINGS = {
    "source": "cuda_repo",
    "branch": "570",
    "version": "570.133.20",
    "kernel_modules": "open",
    "gpu_model": "H100-SXM-80GB",
    "fabric_manager": True,
    "nvswitch": True,
    "gpudirect": "dmabuf",
    "extra_packages": {},
    "bake": False,
    "bake_kernels": [],
    "cuda_repo_base": cuda_repo.CUDA_REPO_BASE,
    "cuda_repo_url": "",
    "cuda_repo_key": "",
    "cuda_repo_key_fingerprints": [FINGERPRINT],
    "cuda_repo_suites": ["/"],
    "cuda_repo_components": [],
}


# The recorded facts of each OS, with a running kernel (tests/conftest.py).
recorded_facts = partial(conftest.recorded_facts, kernel="6.8.0-1015-aws")


def packages_of(step: dict) -> dict[str, str]:
    return {package["name"]: package["version"] for package in step["packages"]}


@pytest.mark.parametrize(
    ("target", "tag", "driver", "fabricmanager"),
    [
        # NVIDIA's Ubuntu repositories: the driver Ubuntu-style, fabric manager NVIDIA's -1 (module constants' sources).
        (
            "ubuntu2204",
            "ubuntu2204",
            {"nvidia-driver-570-open": "570.133.20-*", "nvidia-dkms-570-open": "570.133.20-*"},
            "570.133.20-*",
        ),
        (
            "ubuntu2404",
            "ubuntu2404",
            {"nvidia-driver-570-open": "570.133.20-*", "nvidia-dkms-570-open": "570.133.20-*"},
            "570.133.20-*",
        ),
        (
            "debian12",
            "debian12",
            {"nvidia-open": "570.133.20-*", "nvidia-kernel-open-dkms": "570.133.20-*"},
            "570.133.20-*",
        ),
        (
            "debian13",
            "debian13",
            {"nvidia-open": "570.133.20-*", "nvidia-kernel-open-dkms": "570.133.20-*"},
            "570.133.20-*",
        ),
    ],
)
def test_the_supply_per_distribution_from_one_driver_version(target, tag, driver, fabricmanager):
    """One upstream version, each package asked for as any revision of it: the host's repository decides (NVIDIA's
    revisions differ by distribution and moved within branch 580), vendor_packages resolves the glob."""
    result = nd.plan({**SETTINGS, "extra_packages": {"nvidia-persistenced": ""}}, None, recorded_facts(target))
    assert result["errors"] == [] and result["warnings"] == []
    headers, driver_step = result["supply"]
    url = f"{cuda_repo.CUDA_REPO_BASE}/{tag}/x86_64/"
    keyring = "/etc/apt/keyrings/gpufabric-cuda.asc"
    repository = {
        "name": "gpufabric-cuda",
        "uris": [url],
        "suites": ["/"],
        "components": [],
        "architectures": [],
        "signed_by": keyring,
        # nvidia_driver, nccl and gds write the one source file: its header names them all.
        "managed_by": "roles gpufabric.cluster.nvidia_driver, gpufabric.cluster.nccl and gpufabric.cluster.gds",
    }
    # First the running kernel's headers, from the distribution's archive, with the CUDA key and source.
    assert headers == {
        "keys": [
            {
                "repository": "gpufabric-cuda",
                "url": url + "3bf863cc.pub",
                "src": "",
                "dest": keyring,
                "fingerprints": [FINGERPRINT],
                "fingerprints_from": "nvidia_driver_cuda_repo_key_fingerprints",
                "checksum": "",
            }
        ],
        "repositories": [repository],
        "packages": [{"name": "linux-headers-6.8.0-1015-aws", "version": "", "hold": False, "repository": ""}],
        "preferences": "",
        "pin_priority": 1001,
        "release": [],
    }
    # Then the driver at exact versions, pinned in APT preferences and held; "" extras get the driver's version.
    assert driver_step["keys"] == [] and driver_step["repositories"] == [repository]
    assert (driver_step["preferences"], driver_step["pin_priority"]) == ("gpufabric-nvidia-driver", 1001)
    # A host adopted before goes back: adopt mode's own files go; the image's packages this step does not pin lose
    # their holds as they leave gpufabric-nvidia-driver.pref (vendor_packages releases what a preferences file drops).
    assert driver_step["release"] == ["gpufabric-nvidia-driver-extra", "gpufabric-cuda-priority"]
    assert packages_of(driver_step) == {
        **driver,
        "nvidia-fabricmanager-570": fabricmanager,
        "nvidia-persistenced": next(iter(driver.values())),
    }
    assert all(package["hold"] and package["repository"] == "gpufabric-cuda" for package in driver_step["packages"])
    assert result["versions"] == {"linux-headers-6.8.0-1015-aws": "", **packages_of(driver_step)}


def test_rhel_keeps_its_repository_and_names_without_apt_revisions():
    result = nd.plan(SETTINGS, None, recorded_facts("rocky9", architecture="aarch64"))
    assert result["errors"] == [] and result["lock"] == "dnf_versionlock"
    assert result["cuda_repo_url"] == f"{cuda_repo.CUDA_REPO_BASE}/rhel9/sbsa/"
    (step,) = result["supply"]  # no linux-headers on RHEL (kernel-devel is not this role's yet)
    assert packages_of(step) == {"nvidia-open": "570.133.20", "nvidia-fabric-manager": "570.133.20"}


@pytest.mark.parametrize(
    ("target", "open_", "driver"),
    [
        ("ubuntu2404", True, {"nvidia-open": "580.65.06-*"}),
        ("ubuntu2204", False, {"cuda-drivers": "580.65.06-*"}),
        ("debian12", True, {"nvidia-open": "580.65.06-*", "nvidia-kernel-open-dkms": "580.65.06-*"}),
    ],
)
def test_branch_580_installs_nvidias_pinning_package_first(target, open_, driver):
    """From 580 nvidia-driver-pinning-<version> locks the whole set; it goes in the first step, before the driver
    whose >= dependencies it holds (pinning the meta packages alone lets them float)."""
    settings = {
        **SETTINGS,
        "branch": "580",
        "version": "580.65.06",
        "kernel_modules": "open" if open_ else "proprietary",
        "gpudirect": "none",
    }
    result = nd.plan(settings, None, recorded_facts(target))
    assert result["errors"] == []
    assert result["pinning_package"] == "nvidia-driver-pinning-580.65.06"
    first, driver_step = result["supply"]
    assert [package["name"] for package in first["packages"]] == [
        "linux-headers-6.8.0-1015-aws",
        "nvidia-driver-pinning-580.65.06",
    ]
    # The pinning package's name carries the version; it is held like the driver.
    assert first["packages"][1] == {
        "name": "nvidia-driver-pinning-580.65.06",
        "version": "",
        "hold": True,
        "repository": "gpufabric-cuda",
    }
    assert packages_of(driver_step) == {**driver, "nvidia-fabricmanager": "580.65.06-*"}


def test_earlier_branches_and_the_distribution_have_no_pinning_package():
    assert nd.pinning_package("cuda_repo", "Ubuntu", "575", "575.57.08") is None
    assert nd.pinning_package("distro", "Ubuntu", "580", "580.65.06-0ubuntu1") is None
    assert nd.pinning_package("cuda_repo", "Rocky", "580", "580.65.06") is None


def test_distro_source_pins_the_exact_version_as_given():
    settings = {**SETTINGS, "source": "distro", "version": "535.261.03-1", "branch": "535", "fabric_manager": False}
    settings["extra_packages"] = {"nvidia-persistenced": "535.171.04-1~deb12u1"}
    result = nd.plan(settings, None, recorded_facts("debian12"))
    assert result["errors"] == [] and result["cuda_repo_url"] == ""
    headers, driver_step = result["supply"]
    assert headers["keys"] == headers["repositories"] == []
    assert packages_of(driver_step) == {
        "nvidia-driver": "535.261.03-1",
        "nvidia-open-kernel-dkms": "535.261.03-1",
        "nvidia-smi": "535.261.03-1",
        "nvidia-persistenced": "535.171.04-1~deb12u1",
    }
    assert {package["repository"] for package in driver_step["packages"]} == {""}


def test_a_bake_installs_the_headers_of_the_kernels_it_builds_for():
    bake = nd.plan({**SETTINGS, "bake": True, "bake_kernels": ["6.1.0-37-amd64"]}, None, recorded_facts("debian12"))
    assert bake["kernel_headers"] == ["linux-headers-6.1.0-37-amd64"]  # not the build host's running kernel
    # Without bake_kernels, bake.yml builds for the headers already in the image: nothing to install first.
    image = nd.plan({**SETTINGS, "bake": True}, None, recorded_facts("debian12"))
    assert image["kernel_headers"] == [] and len(image["supply"]) == 1
    assert image["supply"][0]["keys"]  # the key goes with the first step there is


def test_without_the_kernel_fact_the_plan_says_so():
    """gpufabric plan without --probe knows the OS only."""
    facts = recorded_facts("ubuntu2204")
    del facts["kernel"]
    result = nd.plan(SETTINGS, None, facts)
    assert result["errors"] == [] and result["kernel_headers"] == []
    assert "linux-headers-<uname -r>" in result["warnings"][0]


def test_the_repository_base_url_and_key_settings():
    facts = recorded_facts("ubuntu2204")
    mirror = nd.plan({**SETTINGS, "cuda_repo_base": "file:///srv/mirror/compute/cuda/repos/"}, None, facts)
    assert mirror["cuda_repo_url"] == "file:///srv/mirror/compute/cuda/repos/ubuntu2204/x86_64/"
    assert mirror["cuda_repo_key_url"] == "file:///srv/mirror/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub"
    url = nd.plan({**SETTINGS, "cuda_repo_url": "https://mirror.example/cuda/"}, None, facts)
    assert url["supply"][0]["repositories"][0]["uris"] == ["https://mirror.example/cuda/"]
    key_file = nd.plan({**SETTINGS, "cuda_repo_key": "/etc/gpufabric/cuda.gpg"}, None, facts)
    (key,) = key_file["supply"][0]["keys"]
    assert (key["src"], key["url"], key["dest"]) == (
        "/etc/gpufabric/cuda.gpg",
        "",
        "/etc/apt/keyrings/gpufabric-cuda.gpg",
    )
    assert key_file["supply"][1]["repositories"][0]["signed_by"] == "/etc/apt/keyrings/gpufabric-cuda.gpg"


def test_a_revision_given_pins_the_driver_packages_fabric_manager_matches_upstream():
    result = nd.plan({**SETTINGS, "version": "570.133.20-1ubuntu1"}, None, recorded_facts("ubuntu2404"))
    assert packages_of(result["supply"][1]) == {
        "nvidia-driver-570-open": "570.133.20-1ubuntu1",
        "nvidia-dkms-570-open": "570.133.20-1ubuntu1",
        "nvidia-fabricmanager-570": "570.133.20-*",
    }


@pytest.mark.parametrize(
    ("source", "branch", "distribution", "expected"),
    [
        ("cuda_repo", "570", "Ubuntu", "nvidia-imex-570"),
        ("cuda_repo", "580", "Ubuntu", "nvidia-imex"),
        ("cuda_repo", "595", "Debian", "nvidia-imex"),
        ("cuda_repo", "570", "Rocky", "nvidia-imex-570"),
        ("cuda_repo", "580", "RedHat", "nvidia-imex"),
        # Ubuntu's own archive suffixes every branch (nvidia-imex-570, nvidia-imex-595 in noble).
        ("distro", "580", "Ubuntu", "nvidia-imex-580"),
    ],
)
def test_imex_package_by_source_branch_and_os(source, branch, distribution, expected):
    assert nd.imex_package(source, branch, distribution) == expected


def test_imex_is_pinned_and_held_at_the_driver_version_like_fabric_manager():
    """GB200 on Ubuntu 24.04 arm64 (Azure: driver 580.126.20, IMEX 580.126.20-1), from the sbsa repository."""
    result = run(
        **(BASE | {"branch": "580", "version": "580.126.20", "architecture": "aarch64"}),
        gpu_model="GB200-186GB",
        imex=True,
    )
    assert result["errors"] == []
    assert result["imex_package"] == "nvidia-imex"
    assert result["pinned"] == ["nvidia-open", "nvidia-imex"]
    assert result["versions"]["nvidia-imex"] == "580.126.20-*"
    assert result["cuda_repo_url"] == f"{cuda_repo.CUDA_REPO_BASE}/ubuntu2404/sbsa/"
    driver_step = result["supply"][-1]
    assert {package["name"]: package["hold"] for package in driver_step["packages"]}["nvidia-imex"] is True


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {"branch": "535", "version": "535.261.03-1"},
            "nvidia_driver_imex needs driver branch 550 or newer (IMEX's first); nvidia_driver_branch is '535'",
        ),
        (
            {"source": "distro", "distribution": "Debian", "version": "570.133.20-1"},
            "nvidia_driver_imex with nvidia_driver_source 'distro' needs Ubuntu (Debian does not package IMEX)",
        ),
    ],
)
def test_imex_where_no_package_exists_is_one_error(changes, needle):
    # An H100 model, so that the GB200 driver floor (570) is not the error found first.
    (error,) = run(**(BASE | changes), gpu_model="H100-SXM-80GB", imex=True)["errors"]
    assert needle in error


@pytest.mark.parametrize(
    ("branch", "version", "libnvsdm"),
    [("570", "570.133.20", "libnvsdm-570"), ("580", "580.126.20", "libnvsdm")],
)
def test_nvlink5_with_fabric_manager_adds_nvlsm_libnvsdm_and_ib_umad(branch, version, libnvsdm):
    """HGX B200: fabric manager starts NVLSM, which needs libnvsdm at the driver's version and ib_umad loaded."""
    result = run(
        **(BASE | {"branch": branch, "version": version}),
        gpu_model="B200-SXM-180GB",
        nvswitch=True,
        fabric_manager=True,
    )
    assert result["errors"] == []
    assert result["nvlsm_packages"] == ["nvlsm", libnvsdm]
    assert result["nvlsm_modules"] == ["ib_umad"]
    # libnvsdm at fabric manager's version; NVLSM numbers its own releases: any version, held once installed.
    assert result["versions"][libnvsdm] == f"{version}-*"
    assert result["versions"]["nvlsm"] == ""
    holds = {package["name"]: package["hold"] for package in result["supply"][-1]["packages"]}
    assert holds["nvlsm"] is True and holds[libnvsdm] is True


@pytest.mark.parametrize(
    ("gpu_model", "fabric_manager"),
    [("H100-SXM-80GB", True), ("B200-SXM-180GB", False), ("GB200-186GB", False)],
)
def test_no_nvlsm_without_an_nvlink5_baseboard_running_fabric_manager(gpu_model, fabric_manager):
    result = run(**BASE, gpu_model=gpu_model, nvswitch=True, fabric_manager=fabric_manager)
    assert result["errors"] == []
    assert (result["nvlsm_packages"], result["nvlsm_modules"]) == ([], [])
    assert "nvlsm" not in result["versions"]


# /proc/version as the kernels recorded in NVIDIA/gpu-driver-container PR #20 print it, and a Debian 12 kernel's.
HWE_GCP_2204 = (
    "Linux version 6.2.0-1019-gcp (buildd@lcy02-amd64-032) (x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) "
    "12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #21~22.04.1-Ubuntu SMP Thu Nov 16 18:18:34 UTC 2023"
)
GA_2204 = (
    "Linux version 5.15.0-101-generic (buildd@lcy02-amd64-032) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, "
    "GNU ld (GNU Binutils for Ubuntu) 2.38) #111-Ubuntu SMP Tue Mar 5 20:16:58 UTC 2024"
)
DEBIAN_12 = (
    "Linux version 6.1.0-37-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0, "
    "GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.140-1 (2025-05-22)"
)
CUSTOM = "Linux version 6.18.44-fc-v1272 (builder@sandboxing) (gcc (GCC) 15.3.0, GNU ld (GNU Binutils) 2.46) #1 SMP"


@pytest.mark.parametrize(
    ("text", "compiler"),
    [(HWE_GCP_2204, "gcc-12"), (GA_2204, "gcc-11"), (DEBIAN_12, "gcc-12"), (CUSTOM, None), ("", None)],
)
def test_the_headers_step_installs_the_compiler_that_built_the_running_kernel(text, compiler):
    result = nd.plan({**SETTINGS, "kernel_version_text": text}, None, recorded_facts("ubuntu2204"))
    assert result["errors"] == [] and result["kernel_compiler"] == compiler
    first = [package["name"] for package in result["supply"][0]["packages"]]
    assert first[: len(result["kernel_headers"])] == result["kernel_headers"]
    assert (compiler in first) if compiler else not any(name.startswith("gcc") for name in first)
    if compiler:
        assert result["versions"][compiler] == ""  # any version the archive has, not held


def test_a_bake_plans_no_compiler_from_the_build_hosts_kernel():
    settings = {**SETTINGS, "bake": True, "bake_kernels": ["6.1.0-37-amd64"], "kernel_version_text": HWE_GCP_2204}
    assert nd.plan(settings, None, recorded_facts("debian12"))["kernel_compiler"] is None


def installed(*names: str) -> dict:
    """package_facts' layout for packages of any version."""
    return {name: [{"name": name, "version": "1", "source": "apt"}] for name in names}


@pytest.mark.parametrize(
    ("kernel", "packages", "meta"),
    [
        # Azure's ubuntu-hpc 2404 installs linux-azure-6.8 (azhpc-images prerequisites.sh): its image meta-package.
        (
            "6.8.0-1041-azure",
            installed("linux-image-azure-6.8", "linux-image-6.8.0-1041-azure"),
            ["linux-headers-azure-6.8"],
        ),
        ("6.8.0-1015-gcp", installed("linux-image-gcp", "linux-image-unsigned-6.8.0-1015-gcp"), ["linux-headers-gcp"]),
        ("6.8.0-45-generic", installed("linux-image-generic-hwe-22.04"), ["linux-headers-generic-hwe-22.04"]),
        (
            "6.1.0-37-cloud-amd64",
            installed("linux-image-cloud-amd64", "linux-image-amd64"),
            ["linux-headers-cloud-amd64"],
        ),
        # No meta-package of the running kernel's flavour: the running kernel's headers only.
        ("6.8.0-1015-gcp", installed("linux-image-generic"), []),
        ("6.18.44-fc-v1272", installed("linux-image-amd64"), []),
    ],
)
def test_the_headers_step_adds_the_headers_meta_package_of_the_kernels_installed_image_meta(kernel, packages, meta):
    """dkms skips a later kernel without headers (dkms-project/dkms #521): the flavour's meta keeps them coming."""
    result = nd.plan(SETTINGS, None, recorded_facts("ubuntu2204", kernel=kernel, packages=packages))
    assert result["errors"] == []
    assert result["kernel_headers"] == [f"linux-headers-{kernel}", *meta]
    first = {package["name"]: package for package in result["supply"][0]["packages"]}
    assert all(name in first and not first[name]["hold"] for name in result["kernel_headers"])
