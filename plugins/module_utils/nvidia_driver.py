# SPDX-License-Identifier: Apache-2.0
"""Pure data and decisions for the nvidia_driver role: package names, repository, branch checks.

Everything that differs between Debian, Ubuntu and the RHEL family, between driver branches
and between open and proprietary kernel modules lives here, so unit tests cover the
combinations that molecule (the Ubuntu 22.04 and 24.04 identity images) cannot reach. The role calls ``plan()`` in
one task, ``nvidia_driver__settings | gpufabric.cluster.nvidia_driver_plan(facts=ansible_facts)``
(plugins/filter/nvidia_driver_plan.py), which returns one NvidiaDriverPlan; its ``supply`` is everything the role
installs (supply_chain.PackageStep), handed to repo_key and vendor_packages unchanged.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, cuda_repo, kernel_build, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.cuda_repo import CUDA_REPO_NAME, family
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import AptPin, PackagePin, PackageStep

# Oldest driver branch that supports each GPU generation (first branch with the GPU in its support list).
# GB200 as B200 (R570 is Blackwell's first production branch; Azure/AI-benchmarking-guide runs ND GB200 v6 on
# 570.133.20, and NCCL's multi-node NVLink needs 2.25.2, released with it). GB300: no public source names a branch.
MIN_BRANCH = {"GB200": 570, "B200": 570, "H200": 550, "H100": 525, "A100": 450}
# Fabric manager's package is branch-suffixed on Ubuntu/Debian up to this branch (exclusive).
FM_UNSUFFIXED_FROM = 580
# IMEX (multi-node NVLink, GB200/GB300 NVL72) is packaged from branch 550, as nvidia-imex-<branch> before 580 and
# nvidia-imex from 580, at the driver's upstream version (NVIDIA's driver-container install scripts:
# "nvidia-imex=${DRIVER_VERSION}-1" from 580, "nvidia-imex-${DRIVER_BRANCH}=${DRIVER_VERSION}-1" from 550).
IMEX_FROM = 550
IMEX_UNSUFFIXED_FROM = 580
# NVLink-5 HGX baseboards (B100/B200/B300): the NVSwitches are reached through the NVLink fabric's InfiniBand devices,
# so where the host runs fabric manager it also needs NVIDIA's NVLink subnet manager (nvlsm, which fabric manager
# starts; its own release numbering, nvlsm_2025.06.10-1 in NVIDIA's ubuntu2404 repository) and libnvsdm at the driver's
# version (libnvsdm-<branch> before 580: public Ubuntu installs run `apt install ... nvidia-fabricmanager-570 nvlsm
# libnvsdm-570`; AWS DLAMI release notes list libnvsdm-570-570.x and libnvsdm-580.x), and fabric manager's precheck
# needs ib_umad loaded (it opens /dev/infiniband/umad*): spectrocloud/CanvOS PR #700 persists it in
# /etc/modules-load.d; ../shared/reference/host-stack.md, real-images.md. GB200/GB300 trays run IMEX, not this.
NVLINK5_GENERATIONS = ("B100", "B200", "B300")
NVLSM_PACKAGE = "nvlsm"
NVLSM_MODULES = ["ib_umad"]
# Branch from which NVIDIA's APT repositories carry nvidia-driver-pinning-<version>, the package that locks the whole
# driver set (pinning only nvidia-open/cuda-drivers lets their >= dependencies float). Source: NVIDIA Driver
# Installation Guide r580+, "Version locking packages for Ubuntu / Debian" (docs.nvidia.com/datacenter/tesla/
# driver-installation-guide); public install scripts install nvidia-driver-pinning-590.48.01 (ubuntu2404) and
# nvidia-driver-pinning-595.71.05 (debian13) from the CUDA network repository.
PINNING_PACKAGE_FROM = 580
# The APT preferences file the role writes (the CUDA repository's source and keyring: cuda_repo.CUDA_REPO_NAME).
PREFERENCES = "gpufabric-nvidia-driver"
PIN_PRIORITY = 1001
# No package revision is ever derived here. NVIDIA's revisions change within a branch (Ubuntu: -0ubuntu1 for the
# driver and -1 for fabric manager up to 580.105.08, -1ubuntu1 for both from 580.126.09; Debian: -1;
# shared/reference/real-images.md section 1), so an upstream version is handed to vendor_packages as a glob
# (570.133.20-*), which installs the newest revision the host's repository offers and pins the glob in APT.
ANY_REVISION = "-*"
SOURCES = ("cuda_repo", "distro")
# The role variable that selects install or adopt (adopt.MODES), named in the plan's messages. Not "<role>_mode":
# the collection names an option for what it selects (tests/unit/test_role_contracts.py).
MODE_VARIABLE = "nvidia_driver_provision"
# Adopt mode: the installed packages that carry a driver, in the order the shipped driver is named by. Their upstream
# version is the shipped driver's version.
DRIVER_CARRIERS = (
    # Canonical's driver in Ubuntu's archive, the -server branches GCP's ubuntu-accelerator images carry
    # (shared/reference/real-images.md section 2): the headless meta packages (nvidia-headless-no-dkms-* beside
    # precompiled linux-modules-nvidia-*), the full meta package, and nvidia-smi's package (Ubuntu's
    # nvidia-drivers-installation page; a jammy apt log installing nvidia-driver-570-server and
    # nvidia-utils-570-server at 570.195.03-0ubuntu0.22.04.2).
    r"nvidia-headless-(no-dkms-)?\d+-server(-open)?",
    r"nvidia-driver-\d+-server(-open)?",
    r"nvidia-utils-\d+-server",
    # Any other package of Canonical's -server set: every binary of nvidia-graphics-drivers-<N>-server carries the
    # driver's version, and an image may ship part of the set without the meta packages or nvidia-utils (the GCP
    # ubuntu-accelerator 2204 570 manifest records libnvidia-cfg1-570-server and nvidia-compute-utils-570-server,
    # which provides nvidia-persistenced: manpages.ubuntu.com/manpages/jammy/man1/nvidia-persistenced.1.html,
    # "Provided by: nvidia-compute-utils-550-server", seen 2026-12-07). Without it such an image counted as shipping
    # no driver, and NVIDIA's packages were planned on top of Canonical's.
    r"(lib)?nvidia-[a-z0-9-]+-\d+-server(-open)?",
    # NVIDIA's CUDA repository: the branch meta packages (to 575 on Ubuntu), nvidia-open and cuda-drivers.
    r"nvidia-driver-\d+(-open)?",
    r"nvidia-open",
    r"cuda-drivers(-\d+)?",
    # Debian's non-free driver (packages.debian.org: nvidia-driver, nvidia-smi).
    r"nvidia-driver",
    r"nvidia-smi",
)
# The shipped driver's set: every installed package of these prefixes at the shipped driver's upstream version
# (Canonical's whole set carries one upstream version; Debian's nvidia-persistenced, nvidia-modprobe from the CUDA
# repository and the like carry their own and are left alone).
DRIVER_SET_PREFIXES = ("nvidia-", "libnvidia-")
# A package of the driver set that builds its modules with DKMS (nvidia-dkms-570-open, nvidia-kernel-open-dkms), not
# Canonical's nvidia-headless-no-dkms-* meta package, which goes with precompiled modules.
DKMS_PACKAGE = re.compile(r"(?<!no-)dkms")
# Fabric manager, branch-suffixed (nvidia-fabricmanager-570) or not (580 on); never its -dev package.
FABRICMANAGER = r"nvidia-fabricmanager(-\d+)?"
# Adopt mode: the APT preferences file pinning the packages the profile adds to the image's driver set (fabric
# manager, nvidia_driver_extra_packages), adopted or installed; the image's set is pinned in PREFERENCES.
OWN_PREFERENCES = "gpufabric-nvidia-driver-extra"
# Adopt mode lowers the CUDA repository beside the image's driver, as GCP's A3/A4 blueprints do (priority 400:
# shared/reference/host-stack.md section 3, "Holds"; cluster-toolkit), so that it never replaces the image's
# packages; what the role asks of it by exact version still installs.
CUDA_REPO_ADOPT_PRIORITY = 400
CUDA_REPO_PRIORITY_FILE = "gpufabric-cuda-priority"
KERNEL_MODULES = ("open", "proprietary")
GPUDIRECT = ("peermem", "dmabuf", "none")


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
        return (
            f"nvidia_driver_version '{version}' is not a driver version; accepted: the upstream version such as "
            "570.133.20, or an exact package version such as 570.133.20-0ubuntu1"
        )
    if upstream.split(".", 1)[0] != branch:
        return f"nvidia_driver_version '{version}' is not on branch {branch}; accepted: {branch}.x versions"
    return None


def package_versions(source: str, distribution: str, version: str) -> tuple[str, str]:
    """The versions (driver packages; fabric manager, IMEX) to ask the repository for, for one driver version.

    From NVIDIA's CUDA repository the operator may give the upstream version alone (570.133.20): every package is
    asked for as a glob of it (570.133.20-*), which vendor_packages resolves against what the host's repository
    offers (the newest revision) and reports. A version with a revision (595.91.07-1ubuntu1) is the driver
    packages' exact version; fabric manager and IMEX, whose revision can differ from the driver's, still match on
    the upstream version. From the distribution, the version is the exact package version as given.
    """
    fam = family(distribution)
    if source != "cuda_repo":
        return version, version
    upstream = upstream_version(version)
    if fam == "redhat":
        # dnf versionlock matches name-version; the RPM release (-1.el9) is not derived here.
        return upstream, upstream
    driver = version if "-" in version else upstream + ANY_REVISION
    return driver, upstream + ANY_REVISION


def fabricmanager_package(branch: str, distribution: str) -> str:
    """Fabric manager's package name: branch-suffixed before 580 on Debian/Ubuntu, renamed on RHEL."""
    fam = family(distribution)
    if int(branch) >= FM_UNSUFFIXED_FROM:
        return "nvidia-fabricmanager"
    return "nvidia-fabric-manager" if fam == "redhat" else f"nvidia-fabricmanager-{branch}"


def nvlsm_packages(branch: str, gpu_model: str, fabric_manager: bool) -> list[str]:
    """NVLSM and libnvsdm where fabric manager runs on an NVLink-5 baseboard; [] elsewhere."""
    if not fabric_manager or gpu_generation(gpu_model) not in NVLINK5_GENERATIONS:
        return []
    return [NVLSM_PACKAGE, "libnvsdm" if int(branch) >= FM_UNSUFFIXED_FROM else f"libnvsdm-{branch}"]


def fabric_version(name: str, fm_version: str) -> str:
    """The version a fabric package (fabric manager, IMEX, libnvsdm, NVLSM) is pinned at: fabric manager's, any
    revision of the driver's upstream version; NVLSM numbers its own releases, so any version ('')."""
    return "" if name == NVLSM_PACKAGE else fm_version


def imex_package(source: str, branch: str, distribution: str) -> str:
    """IMEX's package name: nvidia-imex from branch 580 in NVIDIA's repositories, else nvidia-imex-<branch> (as
    Ubuntu's own archive names every branch's). Raises ValueError where no IMEX package exists."""
    if int(branch) < IMEX_FROM:
        raise ValueError(
            f"nvidia_driver_imex needs driver branch {IMEX_FROM} or newer (IMEX's first); nvidia_driver_branch is "
            f"'{branch}'; accepted: {IMEX_FROM} or newer, or nvidia_driver_imex false"
        )
    if source == "distro" and family(distribution) != "ubuntu":
        raise ValueError(
            f"nvidia_driver_imex with nvidia_driver_source 'distro' needs Ubuntu ({distribution} does not package "
            "IMEX); accepted: nvidia_driver_source 'cuda_repo'"
        )
    if source == "cuda_repo" and int(branch) >= IMEX_UNSUFFIXED_FROM:
        return "nvidia-imex"
    return f"nvidia-imex-{branch}"


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


def pinning_package(source: str, distribution: str, branch: str, version: str) -> str | None:
    """nvidia-driver-pinning-<version> from branch 580 on, from NVIDIA's APT repositories; None otherwise."""
    if source != "cuda_repo" or family(distribution) == "redhat" or int(branch) < PINNING_PACKAGE_FROM:
        return None
    return f"nvidia-driver-pinning-{upstream_version(version)}"


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
    imex_package: str | None  # IMEX (rack-scale NVLink), at the driver version like fabric manager
    nvlsm_packages: list[str]  # NVLink-5 with fabric manager: nvlsm (any version, held) and libnvsdm (driver's)
    nvlsm_modules: list[str]  # the kernel modules fabric manager's precheck needs there, loaded at boot
    pinning_package: str | None  # nvidia-driver-pinning-<version> (branch 580 on, NVIDIA's APT repositories)
    pinned: list[str]  # the driver's packages, fabric manager's, IMEX's and NVLSM's (at its own version)
    versions: dict[str, str]  # every package the role installs -> its exact version ('' for any)
    upstream_version: str  # the version the loaded module reports (no epoch, no Debian revision)
    kernel_headers: list[str]  # linux-headers-<release> and the flavour's meta-package, before the DKMS build
    kernel_compiler: str | None  # gcc-<N> that built the running kernel (kernel_build), installed with the headers
    cuda_repo_url: str  # empty unless nvidia_driver_source is cuda_repo
    cuda_repo_key_url: str
    lock: str  # dpkg_hold or dnf_versionlock
    initramfs_command: list[str]
    supply: list[PackageStep]  # what the tasks hand to repo_key and vendor_packages, in order
    apt_pins: list[AptPin]  # APT preferences files written before the supply (adopt: the CUDA repository lowered)
    adopt: Adoption  # adopt mode: what the image ships, adopted or refused, and what is missing


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> NvidiaDriverPlan:
    """Everything the role needs and installs, from its settings (its variables without the ``nvidia_driver_``
    prefix) and the host's facts (distribution, distribution_version, architecture, kernel; in adopt mode packages,
    as ansible.builtin.package_facts gathers them). ``host_plan`` is not read: site.yml maps the profile's GPU model
    and NVSwitch into the role's variables."""
    result: NvidiaDriverPlan = {
        "errors": [],
        "warnings": [],
        "family": "",
        "packages": [],
        "fabricmanager_package": None,
        "imex_package": None,
        "nvlsm_packages": [],
        "nvlsm_modules": [],
        "pinning_package": None,
        "pinned": [],
        "versions": {},
        "upstream_version": "",
        "kernel_headers": [],
        "kernel_compiler": None,
        "cuda_repo_url": "",
        "cuda_repo_key_url": "",
        "lock": "",
        "initramfs_command": [],
        "supply": [],
        "apt_pins": [],
        "adopt": adopt.adoption(),
    }
    adopt.settle(result, lambda: _decide(settings, facts))  # type: ignore[arg-type]  # a TypedDict is a mapping
    return result


def _check(error: str | None) -> None:
    if error:
        raise ValueError(error)


def _decide(settings: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Everything the role needs; raises ValueError naming the first bad value and what is accepted."""
    source = str(settings.get("source", ""))
    kernel_modules = str(settings.get("kernel_modules", ""))
    gpudirect = str(settings.get("gpudirect", "none"))
    branch = str(settings.get("branch", ""))
    version = str(settings.get("version", ""))
    gpu_model = str(settings.get("gpu_model") or "")
    fabric_manager = bool(settings.get("fabric_manager", False))
    imex = bool(settings.get("imex", False))
    distribution = str(facts.get("distribution", ""))
    mode = str(settings.get("mode") or "install")
    _check(adopt.mode_error(mode, MODE_VARIABLE))
    _check(
        None
        if source in SOURCES
        else f"nvidia_driver_source '{source}' is not accepted; accepted: {', '.join(SOURCES)}"
    )
    _check(
        None
        if kernel_modules in KERNEL_MODULES
        else f"nvidia_driver_kernel_modules '{kernel_modules}' is not accepted; accepted: {', '.join(KERNEL_MODULES)}"
    )
    _check(
        None
        if gpudirect in GPUDIRECT
        else f"nvidia_driver_gpudirect '{gpudirect}' is not accepted; accepted: {', '.join(GPUDIRECT)}"
    )
    _check(branch_error(branch, gpu_model))
    _check(version_error(branch, version))
    if gpudirect == "dmabuf" and kernel_modules != "open":
        raise ValueError(
            "nvidia_driver_gpudirect 'dmabuf' needs open kernel modules; accepted with proprietary: peermem, none"
        )
    if fabric_manager and not settings.get("nvswitch", False):
        raise ValueError(
            "nvidia_driver_fabric_manager is true but the profile has no NVSwitch; accepted: false on this profile"
        )
    if kernel_modules == "proprietary" and gpu_generation(gpu_model) == "B200":
        raise ValueError(f"nvidia_driver_kernel_modules 'proprietary' cannot drive {gpu_model}; accepted: open")
    fam = family(distribution)
    if fabric_manager and source == "distro" and fam == "debian":
        raise ValueError(
            "nvidia_driver_fabric_manager needs nvidia_driver_source 'cuda_repo' on Debian "
            "(Debian does not package it); accepted with source 'distro': false"
        )
    if source == "distro" and "-" not in version:
        raise ValueError(
            f"nvidia_driver_version '{version}' has no package revision; accepted with source 'distro': the exact "
            "version the distribution publishes, such as 535.261.03-1"
        )
    packages = driver_packages(source, distribution, branch, kernel_modules)
    fm = fabricmanager_package(branch, distribution) if fabric_manager else None
    imex_pkg = imex_package(source, branch, distribution) if imex else None
    nvlsm = nvlsm_packages(branch, gpu_model, fabric_manager)
    pinning = pinning_package(source, distribution, branch, version)
    driver_version, fm_version = package_versions(source, distribution, version)
    own = [name for name in (fm, imex_pkg, *nvlsm) if name]
    versions = dict.fromkeys(packages, driver_version) | {name: fabric_version(name, fm_version) for name in own}
    extras = settings.get("extra_packages") or {}
    if not isinstance(extras, dict):
        raise ValueError(
            f"nvidia_driver_extra_packages is {type(extras).__name__} {extras!r:.80}; accepted: a mapping of "
            "package name to exact version ('' for the driver's)"
        )
    versions |= {str(name): str(pin or driver_version) for name, pin in extras.items()}

    repo_url, key_url, keys, repositories = (
        cuda_repo.source(settings, facts, "nvidia_driver") if source == "cuda_repo" else ("", "", [], [])
    )
    repository = CUDA_REPO_NAME if source == "cuda_repo" else ""
    warnings: list[str] = []
    headers = _kernel_headers(settings, facts, warnings) if fam != "redhat" else []
    compiler = _kernel_compiler(settings, headers)

    # Headers, the kernel's compiler and NVIDIA's pinning package go first, in a step of their own: DKMS builds when
    # the driver's packages are configured, and apt resolves the driver's >= dependencies by the preferences the
    # pinning package installs.
    first = [supply_chain.package(name, hold=False) for name in _build_packages(headers, compiler)]
    if pinning:
        first.append(supply_chain.package(pinning, repository=repository))
    steps: list[PackageStep] = []
    if first:
        steps.append(supply_chain.step(first, repositories=repositories, keys=keys, preferences=""))
        keys = []
    pins: list[PackagePin] = [supply_chain.package(name, pin, repository) for name, pin in versions.items()]
    steps.append(
        supply_chain.step(
            pins,
            repositories=repositories,
            keys=keys,
            preferences=PREFERENCES,
            pin_priority=PIN_PRIORITY,
            # Adopt mode's files, when the host was adopted before: the CUDA repository back at its priority, and
            # the image's packages this step does not pin released (dpkg does not replace a held package).
            release=[OWN_PREFERENCES, CUDA_REPO_PRIORITY_FILE],
        )
    )
    install = {
        "warnings": warnings,
        "family": fam,
        "packages": packages,
        "fabricmanager_package": fm,
        "imex_package": imex_pkg,
        "nvlsm_packages": nvlsm,
        "nvlsm_modules": list(NVLSM_MODULES) if nvlsm else [],
        "pinning_package": pinning,
        "pinned": packages + own,
        "versions": {**{package["name"]: "" for package in first}, **versions},
        "upstream_version": upstream_version(version),
        "kernel_headers": headers,
        "kernel_compiler": compiler,
        "cuda_repo_url": repo_url,
        "cuda_repo_key_url": key_url,
        "lock": version_lock_method(distribution),
        "initramfs_command": initramfs_command(distribution),
        "supply": steps,
        "apt_pins": [],
        "adopt": adopt.adoption(),
    }
    return install if mode == "install" else _adopt(settings, facts, install, [fm, imex_pkg, *nvlsm], extras)


def _adopt(
    settings: dict[str, Any],
    facts: dict[str, Any],
    install: dict[str, Any],
    fabric: list[str | None],
    extras: dict[Any, Any],
) -> dict[str, Any]:
    """Adopt mode: the install plan when the image ships no driver; else the image's driver accepted (held at its
    installed versions, only what it lacks installed) or refused (Refused, naming the package and the way out)."""
    build = _build_packages(install["kernel_headers"], install["kernel_compiler"])
    headers = [supply_chain.package(name, hold=False) for name in build]
    headers_only = [supply_chain.step(headers, preferences="")] if headers else []
    installed = adopt.installed_versions(facts)
    if installed is None:
        return install | {
            "warnings": install["warnings"]
            + [
                f"{MODE_VARIABLE} 'adopt': the image's packages are read on the host (package_facts), so what it "
                "ships, holds and lacks is not known here (`gpufabric plan --probe` reads them); shown: the kernel "
                "headers only"
            ],
            "packages": [],
            "pinning_package": None,
            "pinned": [],
            "versions": {package["name"]: "" for package in headers},
            "upstream_version": "",
            "cuda_repo_url": "",
            "cuda_repo_key_url": "",
            "supply": headers_only,
            "adopt": adopt.adoption("adopt"),
        }
    carriers = {
        name: installed[name]
        for pattern in DRIVER_CARRIERS
        for name in sorted(installed)
        if re.fullmatch(pattern, name)
    }
    if not carriers:
        # Nothing shipped: everything is missing, installed exactly as install mode plans it.
        missing = [
            package["name"]
            for step in install["supply"]
            for package in step["packages"]
            if package["name"] not in build
        ]
        return install | {"adopt": adopt.adoption("adopt", known=True, missing=missing)}

    branch = str(settings.get("branch", ""))
    floor = upstream_version(str(settings.get("version", "")))
    name, installed_version = next(iter(carriers.items()))
    shipped = upstream_version(installed_version)
    others = sorted(
        {f"{other} {version}" for other, version in carriers.items() if upstream_version(version) != shipped}
    )
    if others:
        raise adopt.Refused(
            f"{MODE_VARIABLE} 'adopt': the image carries more than one driver ({name} {installed_version}, "
            f"{', '.join(others)}); accepted: one driver version; {MODE_VARIABLE} 'install' replaces them"
        )
    if shipped.split(".", 1)[0] != branch or adopt.version_numbers(shipped) < adopt.version_numbers(floor):
        raise adopt.Refused(
            f"{MODE_VARIABLE} 'adopt': the image's driver {name} {installed_version} (driver {shipped}) is not "
            f"accepted; accepted: branch {branch} (nvidia_driver_branch) at {floor} or newer (nvidia_driver_version, "
            f"the floor in adopt mode); {MODE_VARIABLE} 'install' replaces it"
        )
    found = carriers | {
        package: version
        for package, version in installed.items()
        if package.startswith(DRIVER_SET_PREFIXES) and upstream_version(version) == shipped
    }
    for package, version in installed.items():
        if re.fullmatch(FABRICMANAGER, package) and package not in found:
            raise adopt.Refused(
                f"{MODE_VARIABLE} 'adopt': the image's {package} {version} does not match its driver {name} "
                f"{installed_version}: fabric manager runs only at the driver's exact version; accepted: "
                f"{package} at {shipped}; {MODE_VARIABLE} 'install' replaces both"
            )
    # The profile's own packages on top of the image's set (fabric manager, nvidia_driver_extra_packages) have a step
    # and a preferences file of their own, whether the image has them (adopted at their installed version) or lacks
    # them (installed): the run after the one that installed them plans the same files and holds (idempotent).
    # fabric: fabric manager, IMEX and NVLSM's packages, the profile's (None where the profile has none).
    fm = fabric[0]
    own = dict.fromkeys([name for name in fabric if name], "") | {
        str(extra): str(pin or "") for extra, pin in extras.items()
    }
    adopted: dict[str, str] = {}
    wanted: dict[str, str] = {}
    any_fabricmanager = any(re.fullmatch(FABRICMANAGER, package) for package in installed)
    for package, pin in own.items():
        present = installed.get(package)
        if present is None:
            if package != fm or not any_fabricmanager:
                wanted[package] = pin
        elif pin in ("", present):
            adopted[package] = present
        else:
            raise adopt.Refused(
                f"nvidia_driver_extra_packages: {package} '{pin}' differs from the image's {package} {present}; "
                f"accepted in adopt mode: '' or {present} (the image's is adopted); {MODE_VARIABLE} 'install' "
                "installs the version given"
            )
    shipped_set = {package: version for package, version in found.items() if package not in own}
    # A driver set without DKMS (Canonical's nvidia-headless-no-dkms-* beside precompiled linux-modules-nvidia-*, as
    # GCP's accelerator images ship) builds nothing: the running kernel's headers are not needed, and asking for them
    # would fail on any image older than the archive's newest kernel ABI, whose headers have left the archive.
    precompiled = not any(DKMS_PACKAGE.search(package) for package in found)
    if precompiled:
        headers_only = []
    steps = list(headers_only)
    if shipped_set:
        steps.append(adopt.hold_step(shipped_set, PREFERENCES, PIN_PRIORITY))
    source = str(settings.get("source", ""))
    result = install | {
        "packages": sorted(shipped_set),
        "pinning_package": None,
        "pinned": sorted(shipped_set) + list(own),
        "kernel_headers": [] if precompiled else install["kernel_headers"],
        "kernel_compiler": None if precompiled else install["kernel_compiler"],
        "upstream_version": shipped,
        "cuda_repo_url": "",
        "cuda_repo_key_url": "",
        "apt_pins": [],
    }
    keys: list[supply_chain.RepoKey] = []
    repositories: list[supply_chain.Repository] = []
    if wanted and source == "cuda_repo":
        # What the image lacks, at the shipped driver's version as NVIDIA publishes it on this distribution, from
        # the CUDA repository lowered for everything else.
        driver_version, fm_version = package_versions(source, str(facts.get("distribution", "")), shipped)
        # The fabric packages as in install mode, the extras at the driver's version.
        wanted = {
            package: pin or (fabric_version(package, fm_version) if package in fabric else driver_version)
            for package, pin in wanted.items()
        }
        url, key_url, keys, repositories = cuda_repo.source(settings, facts, "nvidia_driver")
        pin = str(settings.get("cuda_repo_pin") or "") or supply_chain.origin_pin(url)
        if not pin:
            raise ValueError(
                f"nvidia_driver_cuda_repo_pin is empty and the CUDA repository {url} has no host to select it by; "
                "accepted: an APT preferences Pin selecting it, such as 'origin developer.download.nvidia.com' or "
                "'release o=<the Origin of its Release file>'"
            )
        result |= {
            "cuda_repo_url": url,
            "cuda_repo_key_url": key_url,
            "apt_pins": [
                supply_chain.apt_pin(
                    CUDA_REPO_PRIORITY_FILE,
                    "*",
                    pin,
                    CUDA_REPO_ADOPT_PRIORITY,
                    "role gpufabric.cluster.nvidia_driver",
                    "Adopt mode: the image's driver stays; this repository supplies only what the image lacks.",
                )
            ],
        }
    elif wanted:
        # From the distribution the revision of a package the image lacks is its own (Canonical's fabric manager
        # is not built from the driver's source): only the operator can give it.
        unversioned = [package for package, pin in wanted.items() if not pin and package != NVLSM_PACKAGE]
        if unversioned:
            raise adopt.Refused(
                f"{MODE_VARIABLE} 'adopt': the image lacks {', '.join(unversioned)}, and from the distribution "
                f"(nvidia_driver_source 'distro') its exact version cannot be derived from the driver's {shipped}; "
                "accepted: the exact version in nvidia_driver_extra_packages (name: version, as apt-cache madison "
                "lists it), or nvidia_driver_source 'cuda_repo'"
            )
    if own:
        repository = CUDA_REPO_NAME if repositories else ""
        pins = [supply_chain.package(package, version) for package, version in adopted.items()]
        pins += [supply_chain.package(package, version, repository) for package, version in wanted.items()]
        steps.append(
            supply_chain.step(pins, repositories, keys, preferences=OWN_PREFERENCES, pin_priority=PIN_PRIORITY)
        )
    result["versions"] = {package["name"]: package["version"] for step in steps for package in step["packages"]}
    result["supply"] = steps
    result["adopt"] = adopt.adoption("adopt", known=True, found=shipped_set | adopted, missing=list(wanted))
    return result


def _build_packages(headers: list[str], compiler: str | None) -> list[str]:
    """What DKMS needs before the driver's packages: the kernels' headers and the running kernel's compiler."""
    return headers + ([compiler] if compiler else [])


def _kernel_compiler(settings: dict[str, Any], headers: list[str]) -> str | None:
    """gcc-<N> that built the running kernel, where the role installs its headers live (not in a bake: the image's
    kernels are not the one running). From ``kernel_version_text``, /proc/version as the role reads it."""
    if settings.get("bake", False) or not headers:
        return None
    return kernel_build.compiler_package(str(settings.get("kernel_version_text") or ""))


def _kernel_headers(settings: dict[str, Any], facts: dict[str, Any], warnings: list[str]) -> list[str]:
    """linux-headers-<release> for the kernels the DKMS modules are built for: the running kernel live, the
    nvidia_driver_bake_kernels in a bake (none given: bake.yml builds for the headers already in the image)."""
    if settings.get("bake", False):
        kernels = [str(kernel) for kernel in settings.get("bake_kernels") or []]
        where = "nvidia_driver_bake_kernels"
    elif not facts.get("kernel"):
        # gpufabric plan without --probe knows the OS, not the kernel the host will run.
        warnings.append("the running kernel is not known here: linux-headers-<uname -r> is installed before the driver")
        return []
    else:
        kernels = [str(facts["kernel"])]
        where = "the fact kernel (the running kernel, uname -r)"
    for kernel in kernels:
        if not re.fullmatch(r"[0-9][A-Za-z0-9.+~_-]*", kernel):
            raise ValueError(
                f"kernel release '{kernel}' from {where} is not a kernel release; accepted: e.g. 6.8.0-1015-aws"
            )
    # With the flavour's headers meta-package, a kernel a later update installs comes with its headers, so DKMS
    # builds the driver for it before the reboot into it (kernel_build.headers_meta_packages).
    packages = facts.get("packages")
    installed = list(packages) if isinstance(packages, dict) else []
    metas = [meta for kernel in kernels for meta in kernel_build.headers_meta_packages(kernel, installed)]
    return [f"linux-headers-{kernel}" for kernel in kernels] + list(dict.fromkeys(metas))
