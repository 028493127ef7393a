# SPDX-License-Identifier: Apache-2.0
"""NVIDIA's CUDA network repository as a supply_chain source: its URL per distribution and architecture, its key and
its APT source.

Shared by the roles that install from it (nvidia_driver: the driver, fabric manager, IMEX; nccl: libnccl2 and
libnccl-dev; gds: nvidia-fs and the GPUDirect Storage packages). All write the same source and keyring
(``CUDA_REPO_NAME``), so the roles' settings must agree: the nccl and gds roles' repository settings default to the
nvidia_driver role's (roles/nccl/defaults/main.yml, roles/gds/defaults/main.yml).
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils import supply_chain

# Flat, one directory per distribution and architecture (<base>/ubuntu2204/x86_64/, suite "/", no components;
# Packages, InRelease and the key in that directory).
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
# Public key the CUDA repositories are signed with (3bf863cc.pub in each repository directory).
CUDA_REPO_KEY_FILE = "3bf863cc.pub"
# The source file and keyring the roles write, and who the source file's header says manages it: both roles write the
# same file, so it names them all (a header per role would rewrite the file at every run).
CUDA_REPO_NAME = "gpufabric-cuda"
CUDA_REPO_MANAGED_BY = "roles gpufabric.cluster.nvidia_driver, gpufabric.cluster.nccl and gpufabric.cluster.gds"
# The key NVIDIA publishes as 3bf863cc.pub (the roles' default <role>_cuda_repo_key_fingerprints, with its source in
# roles/nvidia_driver/defaults/main.yml); used when a caller leaves the setting out.
CUDA_REPO_KEY_FINGERPRINTS = ["EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"]
KEYRINGS = "/etc/apt/keyrings"


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


def require_apt(distribution: str, role: str) -> None:
    """Refuse an RPM distribution for a role that installs from the CUDA repository with APT only (nccl, gds)."""
    if family(distribution) == "redhat":
        raise ValueError(
            f"the {role} role installs with APT; distribution '{distribution}' is not accepted;"
            " accepted: Debian, Ubuntu"
        )


def cuda_repo_url(distribution: str, version: str, architecture: str, base: str = CUDA_REPO_BASE) -> str:
    """<base>/<ubuntu2204|ubuntu2404|debian12|rhel9>/<x86_64|sbsa>/, base NVIDIA's by default.

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
    return f"{base.rstrip('/')}/{tag}/{arch}/"


def source(
    settings: dict[str, Any], facts: dict[str, Any], role: str
) -> tuple[str, str, list[supply_chain.RepoKey], list[supply_chain.Repository]]:
    """The CUDA repository's URL, key URL, key and source, from a role's settings (its variables without the
    ``<role>_`` prefix: cuda_repo_base, cuda_repo_url, cuda_repo_key, cuda_repo_key_fingerprints, cuda_repo_suites,
    cuda_repo_components) and the host's facts; the role's name prefixes the variables named in refusals."""
    url = str(settings.get("cuda_repo_url") or "") or cuda_repo_url(
        str(facts.get("distribution", "")),
        # Not distribution_major_version: Ubuntu's is "22", its CUDA repository is ubuntu2204.
        str(facts.get("distribution_version") or facts.get("distribution_major_version", "")),
        str(facts.get("architecture", "")),
        str(settings.get("cuda_repo_base") or CUDA_REPO_BASE),
    )
    key_url = str(settings.get("cuda_repo_key") or "") or url + CUDA_REPO_KEY_FILE
    return url, key_url, [_key(key_url, settings, role)], [_repository(url, key_url, settings)]


def _keyring(key: str) -> str:
    # APT reads a keyring by its extension: .gpg for a binary key, .asc for an armored one (3bf863cc.pub is armored).
    return f"{KEYRINGS}/{CUDA_REPO_NAME}.{'gpg' if key.endswith('.gpg') else 'asc'}"


def _key(key: str, settings: dict[str, Any], role: str) -> supply_chain.RepoKey:
    fingerprints = [str(fpr) for fpr in settings.get("cuda_repo_key_fingerprints") or CUDA_REPO_KEY_FINGERPRINTS]
    fingerprints_from = f"{role}_cuda_repo_key_fingerprints"
    if key.startswith("/"):
        return supply_chain.key(CUDA_REPO_NAME, _keyring(key), fingerprints, fingerprints_from, src=key)
    if not re.match(r"^(https?|file)://", key):
        raise ValueError(
            f"{role}_cuda_repo_key '{key:.60}' is not a key location; accepted: an https://, http:// or "
            "file:// URL, or the absolute path of a key file on the controller"
        )
    return supply_chain.key(CUDA_REPO_NAME, _keyring(key), fingerprints, fingerprints_from, url=key)


def _repository(url: str, key: str, settings: dict[str, Any]) -> supply_chain.Repository:
    suites = [str(suite) for suite in settings.get("cuda_repo_suites") or ["/"]]
    components = [str(component) for component in settings.get("cuda_repo_components") or []]
    repository = supply_chain.repository(
        CUDA_REPO_NAME, url, suites[0], _keyring(key), components, managed_by=CUDA_REPO_MANAGED_BY
    )
    repository["suites"] = suites
    return repository
