# SPDX-License-Identifier: Apache-2.0
"""nvidia_driver's decisions for the combinations molecule (Debian 12 only) cannot reach:
Ubuntu and RHEL package names, CUDA repository URLs, fabric manager naming by branch,
hold method, and every bad input the role refuses before changing anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils

nd = module_utils("nvidia_driver")
nd_filter = _import_plugins("filter", "nvidia_driver_plan")

BASE = {
    "source": "cuda_repo",
    "distribution": "Ubuntu",
    # As ansible-core gathers them on Ubuntu 24.04 (tests/fixtures/os_release/ubuntu2404/facts.json).
    "distribution_version": "24.04",
    "distribution_major_version": "24",
    "architecture": "x86_64",
    "branch": "570",
    "version": "570.133.20-1",
    "kernel_modules": "open",
}
FACT_KEYS = ("distribution", "distribution_version", "distribution_major_version", "architecture")


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
    assert nd.cuda_repo_url(distribution, version, arch) == f"{nd.CUDA_REPO_BASE}/{expected}"


OS_RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "os_release"


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
    gathered = json.loads((OS_RELEASE / target / "facts.json").read_text(encoding="utf-8"))
    facts = {key.removeprefix("ansible_"): value for key, value in gathered.items()}
    settings = {key: value for key, value in BASE.items() if key not in FACT_KEYS}
    result = nd.plan(settings, None, {**facts, "architecture": "x86_64"})
    assert result["cuda_repo_url"] == f"{nd.CUDA_REPO_BASE}/{tag}/x86_64/", result["errors"]


def test_hold_method_and_initramfs_per_os():
    assert nd.version_lock_method("Ubuntu") == nd.version_lock_method("Debian") == "dpkg_hold"
    assert nd.version_lock_method("RedHat") == "dnf_versionlock"
    assert nd.initramfs_command("Debian")[0] == "update-initramfs"
    assert nd.initramfs_command("AlmaLinux")[0] == "dracut"


def test_plan_ok_with_fabric_manager_pinned_at_driver_version():
    result = run(**BASE, gpu_model="H100-SXM-80GB", fabric_manager=True, nvswitch=True, gpudirect="peermem")
    assert result["errors"] == []
    assert result["pinned"] == ["nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-fabricmanager-570"]
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
