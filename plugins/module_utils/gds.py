# SPDX-License-Identifier: Apache-2.0
"""GPUDirect Storage for the gds role: nvidia-fs and the GDS packages at the host's CUDA release, and cufile.json.

The role calls ``plan()`` in one task (``gds__settings | gpufabric.cluster.gds_plan(plan=gpufabric_plan,
facts=ansible_facts)``); its ``supply`` is what the role hands to repo_key and vendor_packages unchanged, and its
``cufile_json`` the text of /etc/cufile.json. Sources of every name below: roles/gds/README.md, "Sources".

- Packages (NVIDIA GPUDirect Storage release notes, "Included Packages": gds-tools-<X>-<Y>, libcufile-<X>-<Y>,
  libcufile-dev-<X>-<Y>, nvidia-fs, nvidia-fs-dkms, nvidia-gds-<X>-<Y>), from NVIDIA's CUDA repository, the source
  nvidia_driver and nccl write too (cuda_repo.py). The kernel module (nvidia-fs-dkms, and nvidia-fs beside it) goes
  the way of the driver's packages: pinned in APT preferences and held. The user-space packages carry the CUDA
  release in their names; the host's release is gds_cuda_version, else the one the host's NCCL pin was built for
  (``2.27.5-1+cuda12.9`` -> 12.9).
- install: every package at its version (an exact version or a glob that vendor_packages resolves against the
  repository and then pins). adopt: what the image already ships of these packages is held at its installed
  version; the rest is installed as in install mode. One preferences file in both modes, so a host moves between
  them in one run.
- cufile.json: only keys NVIDIA's GDS documentation defines (configuration guide, "GPUDirect Storage Parameters"):
  ``logging.level``, ``properties.allow_compat_mode``, ``properties.rdma_dev_addr_list`` and, per network file
  system the inventory mounts, ``fs.<nfs|lustre|beegfs|gpfs>.rdma_dev_addr_list``. ``mount_table`` is listed there
  without the shape of its entries, so the role writes none.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, cuda_repo, nccl, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackageStep

ROLE = "gds"
MODE_VARIABLE = "gds_provision"
PREFERENCES = "gpufabric-gds"
PIN_PRIORITY = 1001
# The kernel module: DKMS source package and the package beside it (release notes, "Included Packages").
KERNEL_PACKAGES = ("nvidia-fs-dkms", "nvidia-fs")
CUFILE_PATH = "/etc/cufile.json"
MODULES_LOAD = "/etc/modules-load.d/gpufabric-nvidia-fs.conf"
MODULE = "nvidia_fs"
CUDA_RELEASE = re.compile(r"^(\d+)\.(\d+)$")
# An exact package version or a glob of one (vendor_packages: '*' matches as APT matches a pin's version).
VERSION = re.compile(r"^[0-9*][0-9A-Za-z.+~:*-]*$")
# Mount types and what they need: the network file systems GDS reaches over RDMA through the storage NICs (cuFile
# reads their fs.<type> section), WekaFS (user-space RDMA: properties.rdma_dev_addr_list), local NVMe (no NIC).
FS_SECTIONS = ("nfs", "lustre", "beegfs", "gpfs")
NETWORK_TYPES = (*FS_SECTIONS, "weka")
MOUNT_TYPES = (*NETWORK_TYPES, "nvme")
LOG_LEVELS = ("NOTICE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
MOUNT_PATH = re.compile(r"^/[^\s]*$")


class GdsPlan(TypedDict):
    errors: list[str]
    warnings: list[str]
    cuda: str  # the CUDA release the user-space packages are of (X.Y)
    cuda_source: str
    packages: dict[str, str]  # package -> version (exact or glob) the role installs or holds
    kernel_packages: list[str]
    gdscheck: str  # where gds-tools puts gdscheck for this CUDA release
    mounts: list[dict[str, str]]
    storage_addresses: list[str]
    storage_nics: dict[str, Any] | None  # the profile's storage NICs (catalog storage.nics); None: it declares none
    cufile: dict[str, Any]
    cufile_json: str
    cuda_repo_url: str
    supply: list[PackageStep]
    adopt: Adoption


def user_packages(cuda: str) -> tuple[str, str, str]:
    """The GDS user-space packages of a CUDA release: '12.8' -> nvidia-gds-12-8, libcufile-12-8, gds-tools-12-8."""
    tag = cuda.replace(".", "-")
    return (f"nvidia-gds-{tag}", f"libcufile-{tag}", f"gds-tools-{tag}")


def gdscheck_path(cuda: str) -> str:
    """gds-tools-<X>-<Y> installs gdscheck under the release's CUDA tree (troubleshooting guide: gdscheck -p)."""
    return f"/usr/local/cuda-{cuda}/gds/tools/gdscheck"


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> GdsPlan:
    """Everything the role installs, holds and writes, from its settings (its variables without the ``gds_`` prefix),
    the host's plan (the catalog's storage NICs, the NCCL pin whose CUDA release is the default) and facts
    (distribution, distribution_version, architecture; packages in adopt mode)."""
    result: GdsPlan = {
        "errors": [],
        "warnings": [],
        "cuda": "",
        "cuda_source": "",
        "packages": {},
        "kernel_packages": list(KERNEL_PACKAGES),
        "gdscheck": "",
        "mounts": [],
        "storage_addresses": [],
        "storage_nics": None,
        "cufile": {},
        "cufile_json": "",
        "cuda_repo_url": "",
        "supply": [],
        "adopt": adopt.adoption(),
    }
    adopt.settle(result, lambda: _decide(settings, host_plan or {}, facts))  # type: ignore[arg-type]  # a TypedDict is a mapping
    return result


def _cuda(settings: dict[str, Any], host_plan: dict[str, Any]) -> tuple[str, str]:
    given = str(settings.get("cuda_version") or "")
    if given:
        if not CUDA_RELEASE.match(given):
            raise ValueError(f"gds_cuda_version '{given}' is not a CUDA release; accepted: X.Y such as 12.8")
        return given, "gds_cuda_version (inventory)"
    pin = str((host_plan.get("nccl") or {}).get("version") or "")
    release = nccl.cuda_release(pin) if pin else None
    if release is None:
        profile = host_plan.get("profile") or "the host's profile"
        raise ValueError(
            f"no CUDA release for GDS on this host: gds_cuda_version is empty and {profile} has no NCCL pin built for "
            "a CUDA release (nccl.version such as 2.27.5-1+cuda12.9); accepted: gds_cuda_version X.Y such as 12.8"
        )
    return f"{release[0]}.{release[1]}", f"the CUDA release of the NCCL pin {pin}"


def _version(value: Any, variable: str, default: str) -> str:
    version = str(value or "") or default
    if not VERSION.match(version):
        raise ValueError(
            f"{variable} '{version:.60}' is not a package version; accepted: an exact version as apt-cache madison "
            "lists it (2.26.6-1) or a glob of one (2.26.*)"
        )
    return version


def _mounts(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise ValueError(f"gds_mounts {value!r:.80} is not a list; accepted: a list of {{path, type}} mappings")
    mounts = []
    for index, mount in enumerate(value):
        where = f"gds_mounts[{index}]"
        if not isinstance(mount, dict) or set(mount) - {"path", "type"} or not {"path", "type"} <= set(mount):
            raise ValueError(f"{where} {mount!r:.80} is not accepted; accepted: a mapping of path and type only")
        path, kind = str(mount["path"]), str(mount["type"])
        if not MOUNT_PATH.match(path):
            raise ValueError(f"{where}.path '{path:.60}' is not accepted; accepted: an absolute path without spaces")
        if kind not in MOUNT_TYPES:
            raise ValueError(f"{where}.type '{kind:.40}' is not accepted; accepted: {', '.join(MOUNT_TYPES)}")
        mounts.append({"path": path, "type": kind})
    paths = [mount["path"] for mount in mounts]
    duplicates = sorted({path for path in paths if paths.count(path) > 1})
    if duplicates:
        raise ValueError(f"gds_mounts names {', '.join(duplicates)} more than once; accepted: each path once")
    return mounts


def _addresses(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise ValueError(
            f"gds_storage_addresses {value!r:.80} is not a list; accepted: a list of the storage NICs' IP addresses"
        )
    addresses = []
    for index, address in enumerate(value):
        try:
            addresses.append(str(ipaddress.ip_address(str(address))))
        except ValueError:
            raise ValueError(
                f"gds_storage_addresses[{index}] '{address!s:.60}' is not an IP address; accepted: the IPv4 or IPv6 "
                "address of a storage NIC of this host, as cuFile's rdma_dev_addr_list takes it"
            ) from None
    return addresses


def cufile(mounts: list[dict[str, str]], addresses: list[str], allow_compat_mode: bool, level: str) -> dict[str, Any]:
    """/etc/cufile.json's content: the keys the GDS configuration guide defines, and only those the role sets."""
    types = {mount["type"] for mount in mounts}
    network = bool(types & set(NETWORK_TYPES))
    properties: dict[str, Any] = {"allow_compat_mode": allow_compat_mode}
    if network:
        properties["rdma_dev_addr_list"] = list(addresses)
    content: dict[str, Any] = {"logging": {"level": level}, "properties": properties}
    sections = {kind: {"rdma_dev_addr_list": list(addresses)} for kind in FS_SECTIONS if kind in types}
    if sections:
        content["fs"] = sections
    return content


def cufile_text(content: dict[str, Any]) -> str:
    """The file as written: a header (cuFile reads // comments: NVIDIA's own cufile.json has them) and the JSON."""
    return (
        "// Managed by gpufabric (role gpufabric.cluster.gds): local edits are overwritten.\n"
        "// Keys as the GDS configuration guide defines them; cuFile's defaults hold for every key not here.\n"
        + json.dumps(content, indent=2, sort_keys=True)
        + "\n"
    )


def _storage(
    host_plan: dict[str, Any], mounts: list[dict[str, str]], addresses: list[str]
) -> tuple[dict[str, Any] | None, list[str]]:
    storage = host_plan.get("storage") or None
    nics = (storage or {}).get("nics") or None
    profile = host_plan.get("profile") or "the host's profile"
    network = [mount for mount in mounts if mount["type"] in NETWORK_TYPES]
    warnings = []
    if network and nics is None:
        raise ValueError(
            f"gds_mounts[{mounts.index(network[0])}] ({network[0]['type']} at {network[0]['path']}) reaches storage "
            f"over the network, but {profile} declares no storage NICs (catalog storage.nics); accepted: local "
            "mounts (nvme) only, or a profile whose storage section names its storage NICs"
        )
    if network and not addresses:
        raise ValueError(
            f"gds_mounts has network file systems ({', '.join(sorted({m['type'] for m in network}))}), but "
            "gds_storage_addresses is empty; accepted: the IP addresses of this host's storage NICs, which cuFile's "
            "rdma_dev_addr_list names"
        )
    if nics is not None and network and len(addresses) != nics["count"]:
        warnings.append(
            f"gds_storage_addresses names {len(addresses)} address(es), {profile} has {nics['count']} storage NIC(s): "
            "cuFile spreads I/O over the listed ones only"
        )
    return (dict(nics) if nics is not None else None), warnings


def _decide(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    mode = str(settings.get("provision") or "install")
    error = adopt.mode_error(mode, MODE_VARIABLE)
    if error:
        raise ValueError(error)
    cuda_repo.require_apt(str(facts.get("distribution", "")), ROLE)
    cuda, cuda_source = _cuda(settings, host_plan)
    major, minor = cuda.split(".")
    nvidia_fs = _version(settings.get("nvidia_fs_version"), "gds_nvidia_fs_version", "*")
    meta = _version(settings.get("version"), "gds_version", f"{major}.{minor}.*")
    if not glob_within(meta, f"{major}.{minor}."):
        raise ValueError(
            f"gds_version '{meta}' is not a version of nvidia-gds-{major}-{minor} (CUDA {cuda}); accepted: a version "
            f"of CUDA {cuda} such as {major}.{minor}.1-1, or a glob such as {major}.{minor}.*"
        )
    library = _version(settings.get("cufile_version"), "gds_cufile_version", "*")
    level = str(settings.get("logging_level") or "ERROR")
    if level not in LOG_LEVELS:
        raise ValueError(f"gds_logging_level '{level:.40}' is not accepted; accepted: {', '.join(LOG_LEVELS)}")
    allow_compat = settings.get("allow_compat_mode", True)
    if not isinstance(allow_compat, bool):
        raise ValueError(f"gds_allow_compat_mode {allow_compat!r:.40} is not accepted; accepted: true or false")
    mounts = _mounts(settings.get("mounts") if settings.get("mounts") is not None else [])
    addresses = _addresses(settings.get("storage_addresses") if settings.get("storage_addresses") is not None else [])
    nics, warnings = _storage(host_plan, mounts, addresses)
    gds, libcufile, tools = user_packages(cuda)
    wanted = {
        **dict.fromkeys(KERNEL_PACKAGES, nvidia_fs),
        gds: meta,
        libcufile: library,
        tools: library,
    }
    url, _key_url, keys, repositories = cuda_repo.source(settings, facts, ROLE)
    content = cufile(mounts, addresses, allow_compat, level)
    common = {
        "warnings": warnings,
        "cuda": cuda,
        "cuda_source": cuda_source,
        "gdscheck": gdscheck_path(cuda),
        "mounts": mounts,
        "storage_addresses": addresses,
        "storage_nics": nics,
        "cufile": content,
        "cufile_json": cufile_text(content),
        "cuda_repo_url": url,
    }
    found: dict[str, str] = {}
    known = False
    if mode == "adopt":
        installed = adopt.installed_versions(facts)
        if installed is None:
            warnings.append(
                f"{MODE_VARIABLE} 'adopt': the image's packages are read on the host (package_facts), so what it "
                "ships of GDS is not known here (`gpufabric plan --probe` reads them); shown: the pins"
            )
        else:
            known = True
            found = {name: installed[name] for name in wanted if name in installed}
    packages = {name: found.get(name, version) for name, version in wanted.items()}
    pins = [supply_chain.package(name, version, cuda_repo.CUDA_REPO_NAME) for name, version in packages.items()]
    return common | {
        "packages": packages,
        "supply": [supply_chain.step(pins, repositories, keys, PREFERENCES, PIN_PRIORITY)],
        "adopt": adopt.adoption(mode, known=known, found=found, missing=[n for n in wanted if n not in found])
        if mode == "adopt"
        else adopt.adoption(),
    }


def glob_within(version: str, prefix: str) -> bool:
    """Whether a version or glob can only name versions that start with ``prefix`` ('12.8.*' and '12.8.1-1' for
    '12.8.'; '*' and '12.*' cannot be held to it)."""
    head = version.split("*", 1)[0]
    return head.startswith(prefix)
