# SPDX-License-Identifier: Apache-2.0
"""What the rdma_stack role installs, holds and loads on one host, per OS family.

Pure Python so that the OS differences molecule cannot reach (RHEL's package names, dnf's
version syntax, each release's inbox versions, the DOCA repository layout per distribution and architecture)
are unit-tested. What the role installs is the plan's ``supply`` (plugins/module_utils/supply_chain.py).
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.repo_key import pin_errors
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages import pending

FLAVORS = ("inbox", "doca")
FABRICS = ("infiniband", "roce", "gpudirect_rdma", "efa", "tcpx", "tcpxo", "none")
OS_FAMILIES = ("Debian", "RedHat")

# Kernel modules each fabric needs from the RDMA stack (the GPU driver's own modules are not here).
FABRIC_MODULES: dict[str, tuple[str, ...]] = {
    "infiniband": ("ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "mlx5_ib"),
    "roce": ("ib_core", "ib_uverbs", "rdma_ucm", "mlx5_ib"),
    "gpudirect_rdma": ("ib_core", "ib_uverbs", "rdma_ucm", "mlx5_ib"),
    "efa": ("ib_core", "ib_uverbs", "efa"),
    "tcpx": (),
    "tcpxo": (),
    "none": (),
}

# The inbox stack of each release, package -> version. rdma-core's binaries (rdma-core, ibverbs-utils,
# infiniband-diags, and on Ubuntu the libraries ibverbs-providers, libibverbs1, librdmacm1, pinned with them so
# that the set never ends at mixed versions) share the source's version, as do ucx's (libucx0, ucx-utils).
# Debian: the exact version of the stable release. Ubuntu: any revision of the release's upstream version (a glob,
# vendor_packages.matches), because the -updates pocket rebuilds it (noble: 50.0-2build2 in the release pocket,
# 50.0-2ubuntu0.2 in noble-updates; shared/reference/real-images.md section 5): the newest the host's pockets offer
# is installed, and an installed one is kept, never downgraded to the release pocket's.
INBOX_DEFAULTS: dict[str, dict[str, str]] = {
    # Debian 12 bookworm: installed from Debian's mirror by molecule/rdma_stack (real packages).
    "debian12": {
        "rdma-core": "44.0-2",
        "ibverbs-utils": "44.0-2",
        "infiniband-diags": "44.0-2",
        "perftest": "4.5+0.17-1",
        "libucx0": "1.13.1-1",
        "ucx-utils": "1.13.1-1",
    },
    # Debian 13 trixie: installed from Debian's mirror by molecule/rdma_stack (real packages).
    "debian13": {
        "rdma-core": "56.1-1",
        "ibverbs-utils": "56.1-1",
        "infiniband-diags": "56.1-1",
        "perftest": "25.01.0+0.80-1",
        "libucx0": "1.18.1+ds-2+b1",
        "ucx-utils": "1.18.1+ds-2+b1",
    },
    # Ubuntu 22.04 jammy, from packages.ubuntu.com/jammy/{rdma-core,perftest,ucx-utils} (ucx-utils depends on
    # libucx0 (= 1.12.1~rc2-1)). perftest and ucx are in universe. No jammy-updates version is listed for them.
    "ubuntu2204": {
        "rdma-core": "39.0-*",
        "ibverbs-utils": "39.0-*",
        "infiniband-diags": "39.0-*",
        "ibverbs-providers": "39.0-*",
        "libibverbs1": "39.0-*",
        "librdmacm1": "39.0-*",
        "perftest": "4.4+0.37-*",
        "libucx0": "1.12.1~rc2-*",
        "ucx-utils": "1.12.1~rc2-*",
    },
    # Ubuntu 24.04 noble, from packages.ubuntu.com/noble/{rdma-core,ucx-utils} and source/noble/perftest (release
    # pocket 50.0-2build2, 24.01.0+0.38-1build2, 1.16.0+ds-5ubuntu1); noble-updates rdma-core 50.0-2ubuntu0.2.
    "ubuntu2404": {
        "rdma-core": "50.0-*",
        "ibverbs-utils": "50.0-*",
        "infiniband-diags": "50.0-*",
        "ibverbs-providers": "50.0-*",
        "libibverbs1": "50.0-*",
        "librdmacm1": "50.0-*",
        "perftest": "24.01.0+0.38-*",
        "libucx0": "1.16.0+ds-*",
        "ucx-utils": "1.16.0+ds-*",
    },
}

# The inbox stack is named after Debian's packages; other families' names for the same thing.
INBOX_NAMES: dict[str, dict[str, str]] = {
    "Debian": {},
    "RedHat": {"ibverbs-utils": "libibverbs-utils", "libucx0": "ucx", "ucx-utils": "ucx", "libibverbs1": "libibverbs"},
}

# Where each family keeps repository keys.
KEYRING_DIRS = {"Debian": "/etc/apt/keyrings", "RedHat": "/etc/pki/rpm-gpg"}

# The role variable that selects install or adopt (adopt.MODES), named in the plan's messages (not rdma_stack_mode:
# the collection names an option for what it selects, tests/unit/test_role_contracts.py).
MODE_VARIABLE = "rdma_stack_provision"
# Adopt mode: the APT preferences file pinning what the image ships at its installed versions (adopt.hold_step), the
# on-host record of what was adopted.
ADOPT_PREFERENCES = "gpufabric-rdma-stack-adopted"
# Adopt mode: the packages that make up an RDMA stack under the same names whoever built it (the inbox tables' names).
# DOCA-OFED and MLNX_OFED ship rdma-core, ibverbs-utils, infiniband-diags and perftest under these names too
# (host-stack.md section 1), so a DOCA image's are found and held even when the doca flavor installs only its
# profile package.
STACK_PACKAGES = ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest", "libucx0", "ucx-utils")
# Adopt mode: an rdma-core built by NVIDIA (DOCA-OFED, MLNX_OFED) carries this in its version, e.g.
# 2410mlnx54-1.2410068 on Azure's HPC images; the distribution's (39.0-1, 50.0-2build2) does not.
DOCA_VERSION_MARK = "mlnx"
# Adopt mode: DOCA's profile meta-packages (host-stack.md section 1, from NVIDIA's DOCA installation guide), any of
# which installed marks the image's stack as DOCA-OFED whatever rdma-core's version says.
DOCA_PROFILES = (
    "doca-all",
    "doca-networking",
    "doca-ofed",
    "doca-roce",
    "doca-host-basic",
    "doca-ofed-userspace",
)

# DOCA-OFED's UCX package, which ships the library and tools Ubuntu's libucx0 and ucx-utils do, and conflicts with
# them (Azure/azhpc-images 8e9d055f components/install_rocm.sh: Ubuntu's libucx0 "is older than and conflicts with
# the ucx package installed by doca-ofed"). On a DOCA image it stands for both and is held with the stack.
DOCA_UCX = "ucx"
DISTRIBUTION_UCX = ("libucx0", "ucx-utils")
# rdma-core's libraries, in the Ubuntu tables beside rdma-core. A DOCA image's come with DOCA's rdma-core under the
# same names: one it lacks is never installed from the distribution beside DOCA's (mixed versions).
RDMA_CORE_LIBRARIES = ("ibverbs-providers", "libibverbs1", "librdmacm1")

# Where NVIDIA's online DOCA repository keeps each architecture.
DOCA_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-sbsa", "arm64": "arm64-sbsa"}


# Where Ubuntu keeps the RDMA kernel modules (mlx5_ib, ib_umad, ...) of its cloud kernels: not in
# linux-modules-<release> but in linux-modules-extra-<release> (gpu-operator #2781, network-operator PR #1450).
MODULES_EXTRA = "linux-modules-extra-{kernel}"
# An installed kernel image, as package_facts lists it: linux-image-6.8.0-1015-gcp (or -unsigned-), never the
# meta packages (linux-image-gcp) that name no release.
KERNEL_IMAGE = re.compile(r"^linux-image-(?:unsigned-)?(\d[^\s]*)$")

# The name of the DOCA repository: its source file and the supply chain's repository name.
DOCA_REPOSITORY = "gpufabric-doca"
# DOCA's Ubuntu repository ships its own dkms; the distribution's is kept (azhpc-images
# components/install_doca.sh pins it away at priority -1): the APT preferences file that does it.
DOCA_DKMS_PREFERENCES = "gpufabric-doca-dkms"


def release_key(facts: dict[str, Any]) -> str:
    """The release a default table is looked up by: debian12, ubuntu2204, rhel9, ..."""
    distribution = str(facts.get("distribution", "")).lower()
    version = str(facts.get("distribution_version", ""))
    if distribution == "ubuntu":
        return f"ubuntu{version.replace('.', '')}"
    if facts.get("os_family") == "RedHat":
        return f"rhel{version.split('.', maxsplit=1)[0]}"
    return f"{distribution}{version.split('.', maxsplit=1)[0]}"


def modules_extra(facts: dict[str, Any], bake: bool, warnings: list[str]) -> list[str]:
    """linux-modules-extra for the running kernel (live) or every installed kernel image (bake)."""
    if not bake:
        kernel = str(facts.get("kernel") or "")
        return [MODULES_EXTRA.format(kernel=kernel)] if kernel else []
    kernels = sorted({m.group(1) for name in facts.get("packages") or {} if (m := KERNEL_IMAGE.match(name))})
    if not kernels:
        warnings.append(
            "bake mode: no installed linux-image-<release> package found, so no linux-modules-extra package is "
            "installed; the RDMA kernel modules of Ubuntu's cloud kernels live there: install it with the kernel"
        )
    return [MODULES_EXTRA.format(kernel=kernel) for kernel in kernels]


def doca_distro_dir(distribution: str, version: str, os_family: str) -> str:
    """The distribution directory of the DOCA repository: ubuntu22.04, rhel9.4, debian12, ..."""
    name = distribution.lower()
    if name == "ubuntu":
        return f"ubuntu{version}"
    if os_family == "RedHat":
        return f"rhel{version}"
    return f"{name}{version.split('.')[0]}"


def doca_repo_url(
    base_url: str, release: str, distribution: str, version: str, os_family: str, architecture: str
) -> str:
    """The online repository for one DOCA release, e.g. .../doca/2.9.1/ubuntu22.04/x86_64/."""
    arch = DOCA_ARCH.get(architecture)
    if arch is None:
        raise ValueError(f"architecture {architecture!r} has no DOCA repository; accepted: {', '.join(DOCA_ARCH)}")
    return f"{base_url.rstrip('/')}/{release}/{doca_distro_dir(distribution, version, os_family)}/{arch}/"


def package_spec(os_family: str, name: str, version: str) -> str:
    """How the package manager is asked for one exact version: apt name=version, dnf name-version."""
    return f"{name}={version}" if os_family == "Debian" else f"{name}-{version}"


def keyring_path(key_src: str, key_url: str, directory: str = "/etc/apt/keyrings") -> str:
    """apt reads a keyring by its extension: binary keys must end in .gpg, armored ones in .asc."""
    source = key_src or key_url
    suffix = "gpg" if source.endswith(".gpg") else "asc"
    return f"{directory.rstrip('/')}/gpufabric-doca.{suffix}"


def _inbox_packages(os_family: str, wanted: dict[str, Any], errors: list[str]) -> list[dict[str, str]]:
    names = INBOX_NAMES.get(os_family, {})
    packages: dict[str, dict[str, str]] = {}
    for logical, version in wanted.items():
        if version in (None, "") or not isinstance(version, (str, int, float)):
            errors.append(
                f"rdma_stack_inbox_packages: {logical!r} has version {version!r}; every package needs an exact version"
            )
            continue
        name = names.get(logical, logical)
        version = str(version)
        if name in packages and packages[name]["version"] != version:
            errors.append(
                f"rdma_stack_inbox_packages: {logical!r} maps to {name} on {os_family}, "
                f"already pinned to {packages[name]['version']}, not {version}"
            )
            continue
        packages[name] = {"name": name, "version": version, "spec": package_spec(os_family, name, version)}
    return list(packages.values())


class RdmaPackage(TypedDict):
    name: str
    version: str
    spec: str  # name=version (apt) or name-version (dnf)


class DocaRepo(TypedDict):
    url: str
    suites: str
    components: list[str]
    key_src: str  # a key file on the controller, or empty
    key_url: str
    key_fingerprints: list[str]
    keyring: str  # where the key is written on the host


class RdmaStackPlan(TypedDict):
    flavor: str  # the flavor installed or, in adopt mode, the one the image ships (doca on a DOCA-OFED image)
    manager: str  # apt or dnf
    packages: list[RdmaPackage]  # the pins
    holds: list[str]  # packages held (apt) or version-locked (dnf)
    kernel_modules: list[str]
    repo: DocaRepo | None  # the DOCA repository (doca flavor), else None
    doca_version: str  # the DOCA profile package's version: the pin (install), the image's (adopt), else ''
    apt_pins: list[supply_chain.AptPin]  # preferences files written before the packages (apt)
    supply: list[supply_chain.PackageStep]  # what repo_key and vendor_packages are given (apt)
    pending: list[str]  # packages of the supply not installed at their pin (from facts' packages)
    adopt: Adoption  # adopt mode: what the image ships, adopted or refused, and what is missing
    errors: list[str]
    warnings: list[str]


def _inbox_wanted(settings: dict[str, Any], facts: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    """The operator's table when set (it replaces the default whole), else the release's default table."""
    wanted = settings.get("inbox_packages") or {}
    if wanted:
        return dict(wanted)
    release = release_key(facts)
    if release in INBOX_DEFAULTS:
        return dict(INBOX_DEFAULTS[release])
    errors.append(
        f"rdma_stack_inbox_packages is empty and {facts.get('distribution', '')} "
        f"{facts.get('distribution_version', '')} ({release}) has no default table of inbox versions; accepted: "
        f"rdma_stack_inbox_packages set to package: exact version, or a release with a default table: "
        f"{', '.join(INBOX_DEFAULTS)}"
    )
    return {}


def _doca(settings: dict[str, Any], facts: dict[str, Any], os_family: str, errors: list[str]) -> dict[str, Any]:
    """The DOCA repository, its pins and holds, and on Ubuntu dkms pinned away and openmpi named. What only
    installing from DOCA's repository needs (the profile's version, the key, the repository, the dkms pin) is
    checked apart, into the result's ``repo_errors``: adopt mode installs nothing from there unless the image ships
    no RDMA stack, and asks for none of it otherwise."""
    profile = settings.get("doca_profile") or ""
    version = str(settings.get("doca_version") or "")
    if not profile:
        errors.append("rdma_stack_doca_profile is empty; accepted: a DOCA profile package such as doca-ofed")
    repo_errors: list[str] = []
    if not version:
        repo_errors.append(
            "rdma_stack_doca_version is empty; the doca flavor needs the exact version of "
            f"{profile or 'the profile package'} (apt-cache madison {profile or 'doca-ofed'} lists them)"
        )
    key_src = settings.get("doca_key_src") or ""
    key_url = settings.get("doca_key_url") or ""
    if not key_src and not key_url:
        repo_errors.append(
            "rdma_stack_doca_key_src and rdma_stack_doca_key_url are both empty; the repository needs a key"
        )
    if key_url and not key_url.startswith("https://") and not key_src:
        repo_errors.append(f"rdma_stack_doca_key_url {key_url!r} is not accepted; accepted: an https:// URL")
    repo_errors.extend(pin_errors("rdma_stack_doca_key_fingerprints", settings.get("doca_key_fingerprints")))
    url = settings.get("doca_repo_url") or ""
    if not url and os_family in OS_FAMILIES:
        try:
            url = doca_repo_url(
                settings.get("doca_base_url") or "",
                str(settings.get("doca_release") or ""),
                facts.get("distribution", ""),
                str(facts.get("distribution_version", "")),
                os_family,
                facts.get("architecture", ""),
            )
        except ValueError as exc:
            repo_errors.append(f"rdma_stack_doca_repo_url is empty and {exc}")
    packages = [{"name": profile, "version": version, "spec": package_spec(os_family, profile, version)}]
    extra = [name for name in settings.get("doca_hold") or [] if name != profile]
    repo: DocaRepo = {
        "url": url,
        "suites": settings.get("doca_suite") or "./",
        "components": list(settings.get("doca_components") or []),
        "key_src": key_src,
        "key_url": key_url,
        "key_fingerprints": list(settings.get("doca_key_fingerprints") or []),
        "keyring": keyring_path(key_src, key_url, KEYRING_DIRS.get(os_family, "/etc/apt/keyrings")),
    }
    apt_pins: list[supply_chain.AptPin] = []
    unversioned = list(extra)
    if str(facts.get("distribution", "")).lower() == "ubuntu":
        # doca-ofed depends on DOCA's openmpi at an exact version (host-stack.md §2): named, so the supply chain
        # shows it comes from the DOCA repository, and held with the stack; its version when the operator pins it.
        openmpi = str(settings.get("doca_openmpi_version") or "")
        if openmpi:
            packages.append(
                {"name": "openmpi", "version": openmpi, "spec": package_spec(os_family, "openmpi", openmpi)}
            )
        elif "openmpi" not in unversioned:
            unversioned.append("openmpi")
        pin = settings.get("doca_dkms_pin") or supply_chain.origin_pin(url)
        if not pin:
            repo_errors.append(
                f"rdma_stack_doca_dkms_pin is empty and the DOCA repository {url!r} has no host to pin DOCA's dkms "
                "away by; accepted: an APT preferences Pin selecting the DOCA repository, e.g. 'release l=DOCA-HOST*'"
                " (the label of DOCA's local-repo package) or 'origin linux.mellanox.com'"
            )
        apt_pins.append(
            supply_chain.apt_pin(
                DOCA_DKMS_PREFERENCES,
                "dkms",
                pin,
                -1,
                "role gpufabric.cluster.rdma_stack",
                "DOCA's repository ships its own dkms; the distribution's is kept.",
            )
        )
    pinned = [package["name"] for package in packages]
    unversioned = [name for name in unversioned if name not in pinned]
    return {
        "packages": packages if profile and version else [],
        "holds": ([profile] if profile else []) + [name for name in pinned if name != profile] + unversioned,
        "unversioned": unversioned,
        "repo": repo,
        "apt_pins": apt_pins,
        "repo_errors": repo_errors,
    }


def _supply(
    result: dict[str, Any], unversioned: list[str], unheld: list[str], repository: str
) -> list[supply_chain.PackageStep]:
    """One vendor_packages step: the DOCA key and repository (doca), the pins, the held packages they bring
    along, and the packages installed when missing and never held (linux-modules-extra)."""
    packages = [
        supply_chain.package(package["name"], package["version"], repository, hold=True)
        for package in result["packages"]
    ]
    packages += [supply_chain.package(name, "", repository, hold=True) for name in unversioned]
    packages += [supply_chain.package(name, "", "", hold=False) for name in unheld]
    # Adopt mode's record, when the host was adopted before: the image's packages this step does not hold are
    # released (dpkg does not replace a held package).
    release = [ADOPT_PREFERENCES]
    repo = result["repo"]
    if repo is None:
        return [supply_chain.step(packages, release=release)]
    key = supply_chain.key(
        DOCA_REPOSITORY,
        repo["keyring"],
        repo["key_fingerprints"],
        "rdma_stack_doca_key_fingerprints",
        url="" if repo["key_src"] else repo["key_url"],
        src=repo["key_src"],
    )
    source = supply_chain.repository(
        DOCA_REPOSITORY, repo["url"], repo["suites"], repo["keyring"], components=repo["components"]
    )
    return [supply_chain.step(packages, [source], [key], release=release)]


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> RdmaStackPlan:
    """Everything the role does on a host, plus every reason it must refuse to start.

    settings: the role's variables without the rdma_stack_ prefix. host_plan: unused (the role does not read
    the catalog; site.yml maps rdma_stack_fabric from it). facts: ansible_facts (os_family, distribution,
    distribution_version, architecture, kernel, packages).
    """
    errors: list[str] = []
    warnings: list[str] = []
    os_family = facts.get("os_family", "")
    flavor = settings.get("flavor")
    fabric = settings.get("fabric")
    mode = str(settings.get("mode") or "install")
    if os_family not in OS_FAMILIES:
        errors.append(f"os_family {os_family!r} is not supported; accepted: {', '.join(OS_FAMILIES)}")
    if flavor not in FLAVORS:
        errors.append(f"rdma_stack_flavor {flavor!r} is not accepted; accepted: {', '.join(FLAVORS)}")
    if fabric not in FABRICS:
        errors.append(f"rdma_stack_fabric {fabric!r} is not accepted; accepted: {', '.join(FABRICS)}")
    if error := adopt.mode_error(mode, MODE_VARIABLE):
        errors.append(error)

    modules = list(settings.get("kernel_modules") or FABRIC_MODULES.get(str(fabric), ()))
    result: dict[str, Any] = {
        "flavor": flavor,
        "manager": "apt" if os_family == "Debian" else "dnf",
        "packages": [],
        "holds": [],
        "kernel_modules": modules,
        "repo": None,
        "apt_pins": [],
        "doca_version": "",
        "adopt": adopt.adoption(),
        "errors": errors,
        "warnings": warnings,
    }
    unversioned: list[str] = []
    unheld: list[str] = []
    repo_errors: list[str] = []
    if flavor == "inbox":
        result["packages"] = _inbox_packages(os_family, _inbox_wanted(settings, facts, errors), errors)
        result["holds"] = [package["name"] for package in result["packages"]]
        # DOCA builds its own modules (DKMS); the inbox stack uses the kernel's, which Ubuntu ships apart.
        if modules and str(facts.get("distribution", "")).lower() == "ubuntu":
            unheld = modules_extra(facts, bool(settings.get("bake")), warnings)
    elif flavor == "doca":
        doca = _doca(settings, facts, os_family, errors)
        unversioned = doca.pop("unversioned")
        repo_errors = doca.pop("repo_errors")
        if mode != "adopt":
            errors.extend(repo_errors)
        result.update(doca, doca_version=str(settings.get("doca_version") or ""))
    result["supply"] = _supply(result, unversioned, unheld, DOCA_REPOSITORY if result["repo"] else "")
    if mode == "adopt" and not errors:
        _adopt(settings, facts, result, list(result["holds"]), unheld, repo_errors)
    result["pending"] = pending(
        [package for step in result["supply"] for package in step["packages"]], facts.get("packages") or {}
    )
    return result


def shipped_stack(installed: dict[str, str], profile: str) -> tuple[str, dict[str, str]]:
    """Which RDMA stack the image ships, read from its installed packages: 'doca' (DOCA-OFED or MLNX_OFED: a DOCA
    profile package installed, or rdma-core at an NVIDIA build, DOCA_VERSION_MARK in its version), 'inbox' (the
    distribution's rdma-core) or '' (neither); and the installed packages that say DOCA (name -> version)."""
    marks = {name: installed[name] for name in dict.fromkeys([profile, *DOCA_PROFILES]) if name and name in installed}
    rdma_core = installed.get("rdma-core", "")
    if DOCA_VERSION_MARK in rdma_core:
        marks["rdma-core"] = rdma_core
    return ("doca" if marks else "inbox" if rdma_core else ""), marks


def _adopt(
    settings: dict[str, Any],
    facts: dict[str, Any],
    result: dict[str, Any],
    wanted: list[str],
    unheld: list[str],
    repo_errors: list[str],
) -> None:
    """Adopt mode, on top of the install plan ``result``: the stack the image ships is adopted whichever flavor was
    asked for where it can stand for it (DOCA-OFED for inbox: the plan's flavor says doca), and what it ships of the
    role's packages is held at its installed versions; only what it lacks is installed, at any version, from the
    host's own sources (no DOCA repository, no pin). On a DOCA image nothing of the distribution's stack is added
    beside DOCA's (no linux-modules-extra, no Ubuntu UCX or rdma-core library); elsewhere linux-modules-extra and the
    kernel modules stay as in install mode. An image that ships none of it is installed as install mode plans it,
    which for the doca flavor needs the DOCA repository's settings (``repo_errors``, not checked otherwise). A refusal
    is one error naming the package, its version, what is accepted and the way out.

    wanted: what install mode installs and holds here, by name (its versions are install mode's, not the image's).
    unheld: what install mode installs and never holds (linux-modules-extra)."""
    errors: list[str] = result["errors"]
    warnings: list[str] = result["warnings"]
    if facts.get("os_family") != "Debian":
        # adopt.hold_step pins and holds with APT (preferences, dpkg holds); a dnf counterpart (versionlock at the
        # installed versions, excludepkgs) is not built. Not a refusal of what the image ships: nothing was read.
        errors.append(
            f"{MODE_VARIABLE} 'adopt' is not available on {facts.get('distribution', '')} "
            f"{facts.get('distribution_version', '')} (os_family {facts.get('os_family', '')!r}): adopt holds the "
            f"image's packages with APT; accepted: Debian and Ubuntu hosts, or {MODE_VARIABLE} 'install' here"
        )
        result["supply"] = []
        return
    flavor = str(settings.get("flavor"))
    profile = str(settings.get("doca_profile") or "")
    requested = str(settings.get("doca_version") or "")
    installed = adopt.installed_versions(facts)
    shipped, marks = shipped_stack(installed or {}, profile)
    # What install mode would have added that the image lacks (named in the warning when DOCA is adopted for inbox).
    not_added = [name for name in wanted + unheld if name not in (installed or {})]
    if shipped == "doca":
        # DOCA builds its own kernel modules (DKMS): the distribution's linux-modules-extra is not added beside them.
        unheld = []
        if flavor == "inbox":
            # The DOCA stack the image ships is adopted (what it has under the inbox names too); nothing is added to
            # it that the operator did not ask for.
            wanted = [name for name in wanted if name not in not_added]
    modules_extra_only = [supply_chain.package(name, "", "", hold=False) for name in unheld]
    image_free = {
        "packages": [],
        "holds": [],
        "repo": None,
        "apt_pins": [],
        "supply": [supply_chain.step(modules_extra_only)] if modules_extra_only else [],
    }
    if installed is None:
        warnings.append(
            f"{MODE_VARIABLE} 'adopt': the image's packages are read on the host (package_facts), so what it ships, "
            "holds and lacks is not known here (`gpufabric plan --probe` reads them); shown: linux-modules-extra only"
        )
        result.update(image_free, adopt=adopt.adoption("adopt"))
        return
    found = {name: installed[name] for name in dict.fromkeys(wanted + list(STACK_PACKAGES)) if name in installed}
    found.update(marks)
    missing = [name for name in wanted if name not in installed]
    if not found:
        # Nothing shipped: everything is missing, installed exactly as install mode plans it; for the doca flavor
        # from DOCA's repository, whose settings are needed now.
        errors.extend(
            f"{MODE_VARIABLE} 'adopt': the image ships no RDMA stack, so the doca flavor installs DOCA-OFED from "
            f"DOCA's repository as {MODE_VARIABLE} 'install' does: {error}"
            for error in repo_errors
        )
        result["adopt"] = adopt.adoption("adopt", known=True, missing=missing)
        return
    rdma_core = installed.get("rdma-core", "")
    if flavor == "doca" and shipped != "doca":
        # The operator asked for DOCA-OFED (its kernel modules, openibd, UCX/HPC-X built for it); the inbox stack
        # offers none of that, and installing DOCA's profile beside it from the image's sources would replace it.
        shipped_as = ", ".join(f"{name} {version}" for name, version in sorted(found.items()))
        refused = (
            f"{MODE_VARIABLE} 'adopt': rdma_stack_flavor 'doca' asks for DOCA-OFED and the image ships the "
            f"distribution's stack ({shipped_as}; {'rdma-core' if rdma_core else 'rdma-core not installed'}"
            f"{'' if not rdma_core else ' without ' + repr(DOCA_VERSION_MARK) + ' in its version'}, no DOCA profile "
            "package); accepted: an image with DOCA-OFED or MLNX_OFED (a DOCA profile package such as doca-ofed, or "
            "rdma-core at a version such as 2410mlnx54-1.2410068), or rdma_stack_flavor 'inbox' to adopt this one; "
            f"{MODE_VARIABLE} 'install' installs DOCA over it"
        )
        errors.append(refused)
        result.update(image_free, supply=[], adopt=adopt.adoption("adopt", known=True, found=found, refused=refused))
        return
    if shipped == "doca" and requested and profile in installed and installed[profile] != requested:
        # Adopt keeps the image's DOCA; a different version asked for is the operator's mistake or an install.
        refused = (
            f"{MODE_VARIABLE} 'adopt': rdma_stack_doca_version '{requested}' differs from the image's {profile} "
            f"{installed[profile]}; accepted in adopt mode: '' (the image's version is adopted) or "
            f"'{installed[profile]}'; {MODE_VARIABLE} 'install' installs {profile} {requested} from DOCA's repository"
        )
        errors.append(refused)
        result.update(image_free, supply=[], adopt=adopt.adoption("adopt", known=True, found=found, refused=refused))
        return
    if shipped == "doca":
        profiles = [name for name in marks if name != "rdma-core"]
        result["flavor"] = "doca"
        result["doca_version"] = installed[profiles[0]] if profiles else requested
        if flavor == "inbox":
            # Adopted, not refused: DOCA's rdma-core is built from the same upstream and ships the same packages and
            # libraries (libibverbs, librdmacm, the inbox API), and replacing a vendor stack whose kernel modules the
            # image was built with is what adopt exists to avoid; adding the distribution's packages beside it
            # conflicts (DOCA's ucx against Ubuntu's libucx0, azhpc-images install_rocm.sh) or mixes versions. An
            # engineer who wants the distribution's stack says install.
            says = ", ".join(f"{name} {version}" for name, version in marks.items())
            warnings.append(
                f"{MODE_VARIABLE} 'adopt': rdma_stack_flavor is 'inbox' and the image ships DOCA-OFED/MLNX_OFED "
                f"({says}): the doca flavor is adopted, held at the image's versions, and nothing of the "
                f"distribution's stack is installed beside it (not {', '.join(not_added) or 'anything'}); "
                f"rdma_stack_flavor 'doca' says so without this warning; {MODE_VARIABLE} 'install' replaces it with "
                "the distribution's"
            )
        if profile in installed and "openmpi" in missing:
            # doca-ofed depends on openmpi at an exact version; installed, that dependency is met already (by DOCA's
            # openmpi or a package providing it, as azhpc-images' hpcx-provides-openmpi does).
            missing.remove("openmpi")
        missing = [name for name in missing if name not in RDMA_CORE_LIBRARIES]
        if DOCA_UCX in installed:
            # Installing Ubuntu's UCX beside DOCA's would fail on the conflict or remove DOCA's: DOCA's is adopted.
            missing = [name for name in missing if name not in DISTRIBUTION_UCX]
            found[DOCA_UCX] = installed[DOCA_UCX]
    steps = [adopt.hold_step(found, ADOPT_PREFERENCES)]
    # The profile the image lacks at the version asked for, when one was (else any version).
    added = [
        supply_chain.package(name, requested if name == profile else "", "", hold=True) for name in missing
    ] + modules_extra_only
    if added:
        # After the hold, so that apt resolving what is added cannot move what the image ships.
        steps.append(supply_chain.step(added))
    result.update(
        packages=[
            {"name": name, "version": version, "spec": package_spec("Debian", name, version)}
            for name, version in sorted(found.items())
        ],
        holds=sorted(found) + missing,
        repo=None,
        apt_pins=[],
        supply=steps,
        adopt=adopt.adoption("adopt", known=True, found=found, missing=missing),
    )
