# SPDX-License-Identifier: Apache-2.0
"""What the rdma_stack role installs, holds and loads on one host, per OS family.

Pure Python so that the OS differences molecule cannot reach (RHEL's package names, dnf's
version syntax, the DOCA repository layout per distribution and architecture) are unit-tested.
"""

from __future__ import annotations

from typing import Any, TypedDict

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

# The inbox stack is named after Debian's packages; other families' names for the same thing.
INBOX_NAMES: dict[str, dict[str, str]] = {
    "Debian": {},
    "RedHat": {"ibverbs-utils": "libibverbs-utils", "libucx0": "ucx", "ucx-utils": "ucx", "libibverbs1": "libibverbs"},
}

# Where each family keeps repository keys.
KEYRING_DIRS = {"Debian": "/etc/apt/keyrings", "RedHat": "/etc/pki/rpm-gpg"}

# Where NVIDIA's online DOCA repository keeps each architecture.
DOCA_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-sbsa", "arm64": "arm64-sbsa"}


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
    flavor: str
    manager: str  # apt or dnf
    packages: list[RdmaPackage]  # the pins
    holds: list[str]  # packages held (apt) or version-locked (dnf)
    kernel_modules: list[str]
    repo: DocaRepo | None  # the DOCA repository (doca flavor), else None
    pending: list[str]  # pinned packages not installed at their pin (from facts' packages)
    install: list[dict[str, Any]]  # what gpufabric.cluster.vendor_packages is given
    errors: list[str]
    warnings: list[str]


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> RdmaStackPlan:
    """Everything the role does on a host, plus every reason it must refuse to start.

    settings: the role's variables without the rdma_stack_ prefix. host_plan: unused (the role does not read
    the catalog; site.yml maps rdma_stack_fabric from it). facts: ansible_facts (os_family, distribution,
    distribution_version, architecture, packages).
    """
    errors: list[str] = []
    os_family = facts.get("os_family", "")
    flavor = settings.get("flavor")
    fabric = settings.get("fabric")
    if os_family not in OS_FAMILIES:
        errors.append(f"os_family {os_family!r} is not supported; accepted: {', '.join(OS_FAMILIES)}")
    if flavor not in FLAVORS:
        errors.append(f"rdma_stack_flavor {flavor!r} is not accepted; accepted: {', '.join(FLAVORS)}")
    if fabric not in FABRICS:
        errors.append(f"rdma_stack_fabric {fabric!r} is not accepted; accepted: {', '.join(FABRICS)}")

    modules = list(settings.get("kernel_modules") or FABRIC_MODULES.get(str(fabric), ()))
    result: dict[str, Any] = {
        "flavor": flavor,
        "manager": "apt" if os_family == "Debian" else "dnf",
        "packages": [],
        "holds": [],
        "kernel_modules": modules,
        "repo": None,
        "errors": errors,
        "warnings": [],
    }
    if flavor == "inbox":
        wanted = settings.get("inbox_packages") or {}
        if not wanted:
            errors.append("rdma_stack_inbox_packages is empty; the inbox flavor needs package names with versions")
        result["packages"] = _inbox_packages(os_family, wanted, errors)
        result["holds"] = [package["name"] for package in result["packages"]]
    elif flavor == "doca":
        profile = settings.get("doca_profile") or ""
        version = str(settings.get("doca_version") or "")
        if not profile:
            errors.append("rdma_stack_doca_profile is empty; accepted: a DOCA profile package such as doca-ofed")
        if not version:
            errors.append(
                "rdma_stack_doca_version is empty; the doca flavor needs the exact version of "
                f"{profile or 'the profile package'} (apt-cache madison {profile or 'doca-ofed'} lists them)"
            )
        key_src = settings.get("doca_key_src") or ""
        key_url = settings.get("doca_key_url") or ""
        if not key_src and not key_url:
            errors.append(
                "rdma_stack_doca_key_src and rdma_stack_doca_key_url are both empty; the repository needs a key"
            )
        if key_url and not key_url.startswith("https://") and not key_src:
            errors.append(f"rdma_stack_doca_key_url {key_url!r} is not accepted; accepted: an https:// URL")
        errors.extend(pin_errors("rdma_stack_doca_key_fingerprints", settings.get("doca_key_fingerprints")))
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
                errors.append(f"rdma_stack_doca_repo_url is empty and {exc}")
        if profile and version:
            result["packages"] = [
                {"name": profile, "version": version, "spec": package_spec(os_family, profile, version)}
            ]
        extra = [name for name in settings.get("doca_hold") or [] if name != profile]
        result["holds"] = ([profile] if profile else []) + extra
        result["repo"] = {
            "url": url,
            "suites": settings.get("doca_suite") or "./",
            "components": list(settings.get("doca_components") or []),
            "key_src": key_src,
            "key_url": key_url,
            "key_fingerprints": list(settings.get("doca_key_fingerprints") or []),
            "keyring": keyring_path(key_src, key_url, KEYRING_DIRS.get(os_family, "/etc/apt/keyrings")),
        }
    result["pending"] = pending(result["packages"], facts.get("packages") or {})
    # What gpufabric.cluster.vendor_packages installs: the pins, and the held packages they bring along.
    pinned = [package["name"] for package in result["packages"]]
    result["install"] = [
        {"name": package["name"], "version": package["version"], "hold": package["name"] in result["holds"]}
        for package in result["packages"]
    ] + [{"name": name, "hold": True} for name in result["holds"] if name not in pinned]
    return result
