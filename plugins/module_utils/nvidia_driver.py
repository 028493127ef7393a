# SPDX-License-Identifier: Apache-2.0
"""Pure data and decisions for the nvidia_driver role: package names, repository, branch checks.

Everything that differs between Debian, Ubuntu and the RHEL family, between driver branches
and between open and proprietary kernel modules lives here, so unit tests cover the
combinations that molecule (Debian 12 only) cannot reach. The role calls ``plan()`` in one task,
``nvidia_driver__settings | gpufabric.cluster.nvidia_driver_plan(facts=ansible_facts)``
(plugins/filter/nvidia_driver_plan.py), which returns one NvidiaDriverPlan.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

# Oldest driver branch that supports each GPU generation (first branch with the GPU in its support list).
MIN_BRANCH = {"B200": 570, "H200": 550, "H100": 525, "A100": 450}
# Fabric manager's package is branch-suffixed on Ubuntu/Debian up to this branch (exclusive).
FM_UNSUFFIXED_FROM = 580
# NVIDIA CUDA network repository.
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
# Public key the CUDA repositories are signed with (3bf863cc.pub in each repository directory).
CUDA_REPO_KEY_FILE = "3bf863cc.pub"
SOURCES = ("cuda_repo", "distro")
KERNEL_MODULES = ("open", "proprietary")
GPUDIRECT = ("peermem", "dmabuf", "none")


def family(distribution: str) -> str:
    """Map an ansible distribution name to debian, ubuntu or redhat."""
    name = distribution.lower()
    if name == "debian":
        return "debian"
    if name == "ubuntu":
        return "ubuntu"
    if name in ("redhat", "rocky", "almalinux", "centos", "oraclelinux"):
        return "redhat"
    raise ValueError(
        f"distribution '{distribution}' is not supported; accepted: Debian, Ubuntu, RedHat, Rocky, AlmaLinux"
    )


def gpu_generation(gpu_model: str) -> str | None:
    """B200-SXM-180GB -> B200; unknown models -> None."""
    match = re.match(r"^([A-Z]+\d+)", gpu_model.upper())
    return match.group(1) if match else None


def branch_error(branch: str, gpu_model: str) -> str | None:
    """Why this branch cannot drive the GPU model, or None when it can (or the model is not in the table)."""
    if not re.fullmatch(r"\d{3}", branch):
        return f"nvidia_driver_branch '{branch}' is not a driver branch; accepted: three digits such as 570 or 580"
    generation = gpu_generation(gpu_model) if gpu_model else None
    minimum = MIN_BRANCH.get(generation or "")
    if minimum is not None and int(branch) < minimum:
        return (
            f"nvidia_driver_branch '{branch}' is too old for {gpu_model}; accepted: {minimum} or newer "
            f"({', '.join(f'{gpu} >= {b}' for gpu, b in MIN_BRANCH.items())})"
        )
    return None


def upstream_version(version: str) -> str:
    """'1:570.133.20-1ubuntu1' -> '570.133.20' (the version nvidia-smi reports)."""
    return version.split(":", 1)[-1].split("-", 1)[0]


def version_error(branch: str, version: str) -> str | None:
    upstream = upstream_version(version)
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", upstream):
        return f"nvidia_driver_version '{version}' is not a package version; accepted: e.g. 570.133.20-1"
    if upstream.split(".", 1)[0] != branch:
        return f"nvidia_driver_version '{version}' is not on branch {branch}; accepted: {branch}.x versions"
    return None


def fabricmanager_package(branch: str, distribution: str) -> str:
    """Fabric manager's package name: branch-suffixed before 580 on Debian/Ubuntu, renamed on RHEL."""
    fam = family(distribution)
    if int(branch) >= FM_UNSUFFIXED_FROM:
        return "nvidia-fabricmanager"
    return "nvidia-fabric-manager" if fam == "redhat" else f"nvidia-fabricmanager-{branch}"


def driver_packages(source: str, distribution: str, branch: str, kernel_modules: str) -> list[str]:
    """Packages pinned at the driver version, for a source, distribution, branch and module flavour."""
    fam = family(distribution)
    open_ = kernel_modules == "open"
    br = int(branch)
    if source == "distro":
        if fam == "debian":
            kernel = "nvidia-open-kernel-dkms" if open_ else "nvidia-kernel-dkms"
            return ["nvidia-driver", kernel, "nvidia-smi"]
        if fam == "ubuntu":
            suffix = "-open" if open_ else ""
            return [f"nvidia-headless-{branch}-server{suffix}", f"nvidia-utils-{branch}-server"]
        raise ValueError("nvidia_driver_source 'distro' is not available on the RHEL family; accepted: cuda_repo")
    if source != "cuda_repo":
        raise ValueError(f"nvidia_driver_source '{source}' is not accepted; accepted: {', '.join(SOURCES)}")
    if fam == "debian":
        # NVIDIA's Debian repository uses Debian-style, unsuffixed names.
        return ["nvidia-open", "nvidia-kernel-open-dkms"] if open_ else ["cuda-drivers", "nvidia-kernel-dkms"]
    if fam == "ubuntu":
        if br >= FM_UNSUFFIXED_FROM:  # branch-suffixed packages stop at 580
            return ["nvidia-open"] if open_ else ["cuda-drivers"]
        suffix = "-open" if open_ else ""
        return [f"nvidia-driver-{branch}{suffix}", f"nvidia-dkms-{branch}{suffix}"]
    # RHEL family: DNF module stream selects the branch; these are versionlocked.
    return ["nvidia-open"] if open_ else ["cuda-drivers", "kmod-nvidia-latest-dkms"]


def cuda_repo_url(distribution: str, version: str, architecture: str) -> str:
    """https://developer.download.nvidia.com/compute/cuda/repos/<ubuntu2404|debian12|rhel9>/<x86_64|sbsa>/.

    ``version`` is the fact distribution_version (Ubuntu "22.04", Debian "12.11", RHEL "9.6"): on Ubuntu the
    major version alone ("22") does not name the repository.
    """
    fam = family(distribution)
    version = str(version)
    if fam == "ubuntu":
        tag = "ubuntu" + version.replace(".", "")
    elif fam == "debian":
        tag = f"debian{version.split('.', 1)[0]}"
    else:
        tag = f"rhel{version.split('.', 1)[0]}"
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}.get(architecture)
    if arch is None:
        raise ValueError(f"architecture '{architecture}' is not supported; accepted: x86_64, aarch64")
    return f"{CUDA_REPO_BASE}/{tag}/{arch}/"


def version_lock_method(distribution: str) -> str:
    """How packages are held: dpkg selections on Debian/Ubuntu, dnf versionlock on RHEL."""
    return "dnf_versionlock" if family(distribution) == "redhat" else "dpkg_hold"


def initramfs_command(distribution: str) -> list[str]:
    return (
        ["dracut", "--regenerate-all", "--force"]
        if family(distribution) == "redhat"
        else ["update-initramfs", "-u", "-k", "all"]
    )


class NvidiaDriverPlan(TypedDict):
    errors: list[str]  # the first bad input, named with what is accepted; empty when the inputs are acceptable
    warnings: list[str]
    family: str  # debian, ubuntu or redhat
    packages: list[str]  # the driver's packages
    fabricmanager_package: str | None
    pinned: list[str]  # the packages pinned at nvidia_driver_version: the driver's and fabric manager's
    upstream_version: str  # the version the loaded module reports (no epoch, no Debian revision)
    cuda_repo_url: str  # empty unless nvidia_driver_source is cuda_repo
    cuda_repo_key_url: str
    lock: str  # dpkg_hold or dnf_versionlock
    initramfs_command: list[str]


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> NvidiaDriverPlan:
    """Everything the role needs from its settings (its variables without the ``nvidia_driver_`` prefix) and the
    host's facts (distribution, distribution_version, architecture). ``host_plan`` is not read: site.yml
    maps the profile's GPU model and NVSwitch into the role's variables."""
    decided = _decide(
        source=str(settings.get("source", "")),
        distribution=str(facts.get("distribution", "")),
        # Not distribution_major_version: Ubuntu's is "22", its CUDA repository is ubuntu2204.
        distribution_version=str(facts.get("distribution_version") or facts.get("distribution_major_version", "")),
        architecture=str(facts.get("architecture", "")),
        branch=str(settings.get("branch", "")),
        version=str(settings.get("version", "")),
        kernel_modules=str(settings.get("kernel_modules", "")),
        gpu_model=str(settings.get("gpu_model") or ""),
        fabric_manager=bool(settings.get("fabric_manager", False)),
        nvswitch=bool(settings.get("nvswitch", False)),
        gpudirect=str(settings.get("gpudirect", "none")),
    )
    error = decided.pop("error")
    result: NvidiaDriverPlan = {
        "errors": [error] if error else [],
        "warnings": [],
        "family": "",
        "packages": [],
        "fabricmanager_package": None,
        "pinned": [],
        "upstream_version": "",
        "cuda_repo_url": "",
        "cuda_repo_key_url": "",
        "lock": "",
        "initramfs_command": [],
    }
    result.update(decided)  # type: ignore[typeddict-item]  # _decide returns the same keys
    return result


def _decide(
    *,
    source: str,
    distribution: str,
    distribution_version: str,
    architecture: str,
    branch: str,
    version: str,
    kernel_modules: str,
    gpu_model: str = "",
    fabric_manager: bool = False,
    nvswitch: bool = False,
    gpudirect: str = "none",
) -> dict[str, Any]:
    """Everything the role needs, or {'error': message} naming the first bad value and what is accepted."""
    checks = [
        None
        if source in SOURCES
        else f"nvidia_driver_source '{source}' is not accepted; accepted: {', '.join(SOURCES)}",
        None
        if kernel_modules in KERNEL_MODULES
        else f"nvidia_driver_kernel_modules '{kernel_modules}' is not accepted; accepted: {', '.join(KERNEL_MODULES)}",
        None
        if gpudirect in GPUDIRECT
        else f"nvidia_driver_gpudirect '{gpudirect}' is not accepted; accepted: {', '.join(GPUDIRECT)}",
        branch_error(str(branch), gpu_model),
    ]
    for error in checks:
        if error:
            return {"error": error}
    branch = str(branch)
    for error in (
        version_error(branch, version),
        None
        if not (gpudirect == "dmabuf" and kernel_modules != "open")
        else "nvidia_driver_gpudirect 'dmabuf' needs open kernel modules; accepted with proprietary: peermem, none",
        None
        if not (fabric_manager and not nvswitch)
        else "nvidia_driver_fabric_manager is true but the profile has no NVSwitch; accepted: false on this profile",
        None
        if not (kernel_modules == "proprietary" and gpu_generation(gpu_model) == "B200")
        else f"nvidia_driver_kernel_modules 'proprietary' cannot drive {gpu_model}; accepted: open",
    ):
        if error:
            return {"error": error}
    try:
        packages = driver_packages(source, distribution, branch, kernel_modules)
        fm = fabricmanager_package(branch, distribution) if fabric_manager else None
        repo = cuda_repo_url(distribution, distribution_version, architecture) if source == "cuda_repo" else ""
    except ValueError as exc:
        return {"error": str(exc)}
    if fabric_manager and source == "distro" and family(distribution) == "debian":
        return {
            "error": (
                "nvidia_driver_fabric_manager needs nvidia_driver_source 'cuda_repo' on Debian "
                "(Debian does not package it); accepted with source 'distro': false"
            )
        }
    return {
        "error": "",
        "family": family(distribution),
        "packages": packages,
        "fabricmanager_package": fm,
        "pinned": packages + ([fm] if fm else []),
        "upstream_version": upstream_version(version),
        "cuda_repo_url": repo,
        "cuda_repo_key_url": repo + CUDA_REPO_KEY_FILE if repo else "",
        "lock": version_lock_method(distribution),
        "initramfs_command": initramfs_command(distribution),
    }
