# SPDX-License-Identifier: Apache-2.0
"""NCCL itself for the nccl role: libnccl2 and libnccl-dev at the catalog's pin, or the image's NCCL adopted.

The catalog pins NCCL per fabric, at the version the fabric's plugin is qualified against (``nccl.version``, a
package version of NVIDIA's CUDA repository such as ``2.27.5-1+cuda12.9``), and names the oldest NCCL a host may keep
in adopt mode (``nccl.minimum``); docs/catalog.md, "NCCL", gives each pin's source. The role calls ``plan()`` in one
task (``nccl__settings | gpufabric.cluster.nccl_plan(plan=gpufabric_plan, facts=ansible_facts)``); its ``supply`` is
what the role hands to repo_key and vendor_packages unchanged.

- install: both packages at the pin, from NVIDIA's CUDA repository (the source nvidia_driver writes too,
  cuda_repo.py), pinned in APT preferences and held. Ubuntu's multiverse ships packages of the same names (noble:
  libnccl2 2.18.5-1-2), so only the full ``X-1+cudaY.Z`` version selects NVIDIA's build.
- adopt: the image's libnccl2 (Azure's HPC image builds its own packages of NVIDIA's form) at the minimum or newer
  is held at its installed version, libnccl-dev with it; libnccl-dev missing is installed at libnccl2's version.
  An image without libnccl2 gets install mode's packages; one older than the minimum is refused, naming the way out.
  The hold and the preferences file are the same in both modes, so a host moves between them in one run.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, cuda_repo, nvidia_driver, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackageStep

LIBRARY = "libnccl2"
HEADERS = "libnccl-dev"
PACKAGES = (LIBRARY, HEADERS)
# NVIDIA's package version: NCCL's version, the package revision, and the CUDA release it was built with.
PACKAGE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-(\d+)\+cuda(\d+)\.(\d+)$")
UPSTREAM_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
PREFERENCES = "gpufabric-nccl"
PIN_PRIORITY = 1001
MODE_VARIABLE = "nccl_provision"
ROLE = "nccl"


def package_version_error(version: str, where: str) -> str | None:
    """Why ``version`` is not a package version of NVIDIA's NCCL, or None."""
    if PACKAGE_VERSION.match(version):
        return None
    return (
        f"{where} '{version}' is not a package version of NVIDIA's NCCL; accepted: <NCCL version>-<revision>+cuda"
        "<CUDA major.minor>, such as 2.27.5-1+cuda12.9 (apt-cache madison libnccl2 lists them)"
    )


def upstream(version: str) -> str:
    """NCCL's own version of a package version: '2.27.5-1+cuda12.9' -> '2.27.5', "2.18.5-1-2" -> '2.18.5'."""
    return version.split(":", 1)[-1].split("-", 1)[0].split("+", 1)[0]


def minimum_of(section: dict[str, Any]) -> str:
    """The oldest NCCL a catalog nccl section (or the plan's) accepts: its minimum, else its pin's own version."""
    return str(section.get("minimum") or "") or upstream(str(section["version"]))


def cuda_release(version: str) -> tuple[int, int] | None:
    """The CUDA release an NVIDIA package version was built with: '2.27.5-1+cuda12.9' -> (12, 9)."""
    match = PACKAGE_VERSION.match(version)
    return (int(match.group(5)), int(match.group(6))) if match else None


def older(version: str, minimum: str) -> bool:
    """Whether NCCL ``version`` (a package or an upstream version) is older than ``minimum`` (an upstream version)."""
    return adopt.version_numbers(upstream(version)) < adopt.version_numbers(minimum)


class NcclPlan(TypedDict):
    errors: list[str]  # the first bad input, named with what is accepted; empty when the inputs are acceptable
    warnings: list[str]
    version: str  # the package version installed or held ('' when adopt mode could not read the host)
    upstream: str  # NCCL's version of it, as NCCL reports it ("NCCL version 2.27.5+cuda12.9")
    minimum: str  # the oldest NCCL adopt mode keeps
    source: str  # where the pin comes from: the catalog's basis, or the inventory variable
    packages: dict[str, str]  # package -> exact version the role installs or holds
    cuda_repo_url: str  # '' when the role configures no repository (adopt mode: a build not of NVIDIA's form)
    supply: list[PackageStep]  # what the tasks hand to repo_key and vendor_packages, in order
    adopt: Adoption


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> NcclPlan:
    """Everything the role installs or holds, from its settings (its variables without the ``nccl_`` prefix), the
    host's plan (the catalog's ``nccl``: version, minimum, source) and facts (distribution, distribution_version,
    architecture; in adopt mode packages, as ansible.builtin.package_facts gathers them)."""
    result: NcclPlan = {
        "errors": [],
        "warnings": [],
        "version": "",
        "upstream": "",
        "minimum": "",
        "source": "",
        "packages": {},
        "cuda_repo_url": "",
        "supply": [],
        "adopt": adopt.adoption(),
    }
    adopt.settle(result, lambda: _decide(settings, host_plan or {}, facts))  # type: ignore[arg-type]  # a TypedDict is a mapping
    return result


def _pin(settings: dict[str, Any], host_plan: dict[str, Any]) -> tuple[str, str, str]:
    """The pin, the minimum and where the pin comes from: the role's variables over the catalog's nccl."""
    catalog = host_plan.get("nccl") or {}
    profile = host_plan.get("profile") or "the host's profile"
    version = str(settings.get("version") or "")
    where = "nccl_version"
    if version:
        source = "nccl_version (inventory)"
    else:
        version = str(catalog.get("version") or "")
        where = f"the catalog's nccl.version of {profile}"
        source = str(catalog.get("source") or "")
    if not version:
        raise ValueError(
            f"no NCCL version for this host: nccl_version is empty and {profile} has no nccl section in the catalog; "
            "accepted: nccl_version set to a package version such as 2.27.5-1+cuda12.9, or a catalog profile with nccl"
        )
    error = package_version_error(version, where)
    if error:
        raise ValueError(error)
    minimum = str(settings.get("minimum") or "") or minimum_of({**catalog, "version": version})
    if not UPSTREAM_VERSION.match(minimum):
        raise ValueError(f"nccl_minimum '{minimum}' is not an NCCL version; accepted: X.Y.Z such as 2.25.2")
    if older(version, minimum):
        raise ValueError(
            f"{where} '{version}' is older than the NCCL minimum {minimum} for this host; accepted: a version at "
            f"{minimum} or newer"
        )
    return version, minimum, source


def _decide(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    mode = str(settings.get("mode") or "install")
    error = adopt.mode_error(mode, MODE_VARIABLE)
    if error:
        raise ValueError(error)
    cuda_repo.require_apt(str(facts.get("distribution", "")), ROLE)
    version, minimum, source = _pin(settings, host_plan)
    url, _key_url, keys, repositories = cuda_repo.source(settings, facts, ROLE)
    pins = [supply_chain.package(name, version, cuda_repo.CUDA_REPO_NAME) for name in PACKAGES]
    install = {
        "warnings": [],
        "version": version,
        "upstream": upstream(version),
        "minimum": minimum,
        "source": source,
        "packages": dict.fromkeys(PACKAGES, version),
        "cuda_repo_url": url,
        "supply": [supply_chain.step(pins, repositories, keys, PREFERENCES, PIN_PRIORITY)],
        "adopt": adopt.adoption(),
    }
    if mode == "install":
        return install
    installed = adopt.installed_versions(facts)
    if installed is None:
        return install | {
            "warnings": [
                f"{MODE_VARIABLE} 'adopt': the image's packages are read on the host (package_facts), so whether it "
                f"ships NCCL is not known here (`gpufabric plan --probe` reads them); shown: the pin {version}, "
                "installed when the image has no libnccl2"
            ],
            "adopt": adopt.adoption("adopt"),
        }
    shipped = installed.get(LIBRARY)
    if shipped is None:
        return install | {"adopt": adopt.adoption("adopt", known=True, missing=list(PACKAGES))}
    if older(shipped, minimum):
        raise adopt.Refused(
            f"{MODE_VARIABLE} 'adopt': the image's {LIBRARY} {shipped} (NCCL {upstream(shipped)}) is older than "
            f"{minimum}, the oldest NCCL this host's fabric takes; accepted: {minimum} or newer; {MODE_VARIABLE} "
            f"'install' replaces it with {version}"
        )
    headers = installed.get(HEADERS)
    if headers is not None and headers != shipped:
        raise adopt.Refused(
            f"{MODE_VARIABLE} 'adopt': the image's {HEADERS} {headers} does not match its {LIBRARY} {shipped}; "
            f"accepted: both at one version; {MODE_VARIABLE} 'install' installs both at {version}"
        )
    if headers is None and not PACKAGE_VERSION.match(shipped):
        raise adopt.Refused(
            f"{MODE_VARIABLE} 'adopt': the image lacks {HEADERS}, and its {LIBRARY} {shipped} is not NVIDIA's build, "
            f"so NVIDIA's CUDA repository has no {HEADERS} to match it; accepted: an image with both packages, or "
            f"{MODE_VARIABLE} 'install' (installs both at {version})"
        )
    found = {LIBRARY: shipped} | ({HEADERS: headers} if headers is not None else {})
    # An NVIDIA-form build keeps NVIDIA's CUDA repository configured, the source of its headers whether they are
    # missing now or later: the run after the one that installed them plans the same files (idempotent).
    nvidia_form = PACKAGE_VERSION.match(shipped) is not None
    packages = [
        supply_chain.package(name, shipped, cuda_repo.CUDA_REPO_NAME if nvidia_form else "") for name in PACKAGES
    ]
    return {
        "warnings": [],
        "version": shipped,
        "upstream": upstream(shipped),
        "minimum": minimum,
        "source": f"adopted: the image's {LIBRARY} {shipped}",
        "packages": dict.fromkeys(PACKAGES, shipped),
        "cuda_repo_url": url if nvidia_form else "",
        "supply": [
            supply_chain.step(
                packages,
                repositories if nvidia_form else [],
                keys if nvidia_form else [],
                PREFERENCES,
                PIN_PRIORITY,
            )
        ],
        "adopt": adopt.adoption("adopt", known=True, found=found, missing=[] if headers is not None else [HEADERS]),
    }


# The oldest NCCL each GPU generation and multi-node NVLink need, with the source (the catalog refuses a profile whose
# nccl.minimum is below them). Blackwell's sm_100 is compiled into NCCL from 2.25.1 with CUDA 12.8 or newer
# (NVIDIA/nccl v2.25.1-1, makefiles/common.mk: "Include Blackwell support if we're using CUDA12.8 or above"); multi-node
# NVLink on GB200 from 2.25.2 (NVIDIA GB200 NVL multi-node tuning guide, NCCL: "GB200 MNNVL is supported in NCCL
# version 2.25.2 and later"). GB300 (Blackwell Ultra): no public source names its first NCCL, so none is enforced.
BLACKWELL = ("B200", "GB200")
BLACKWELL_MINIMUM = "2.25.1"
BLACKWELL_CUDA = (12, 8)
MNNVL_MINIMUM = "2.25.2"


def floors(gpu_model: str, multi_node_nvlink: bool) -> list[tuple[str, str]]:
    """(oldest NCCL, why) for the GPU model and, with ``multi_node_nvlink``, an NVLink domain across hosts."""
    found = []
    if nvidia_driver.gpu_generation(gpu_model) in BLACKWELL:
        found.append((BLACKWELL_MINIMUM, f"{gpu_model} (Blackwell, sm_100: NCCL 2.25.1 built with CUDA 12.8)"))
    if multi_node_nvlink:
        found.append((MNNVL_MINIMUM, "multi-node NVLink (NVIDIA: GB200 MNNVL from NCCL 2.25.2)"))
    return found


def gpu_cuda(gpu_model: str) -> tuple[tuple[int, int], str] | None:
    """(oldest CUDA release an NCCL build must come from, why) for the GPU model, or None."""
    if nvidia_driver.gpu_generation(gpu_model) in BLACKWELL:
        return BLACKWELL_CUDA, f"{gpu_model} (Blackwell) runs NCCL builds of CUDA 12.8 or newer (sm_100)"
    return None


LIBRARY_FILE = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)$")


def loaded_version(line: str) -> str | None:
    """The NCCL version of the library a node loads, from the path libnccl.so.2 resolves to
    ('/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.5' -> '2.27.5'); None when nothing resolved."""
    match = LIBRARY_FILE.search(line.strip())
    return match.group(1) if match else None


def rank_findings(loaded: dict[str, str], reported: list[str | None], pin: str) -> dict[str, list[str]]:
    """What verify says about the NCCL the ranks run: ``loaded`` is each node's libnccl.so.2 as the job's environment
    resolves it (its real path, '' when none), ``reported`` the version each output's launching rank printed, ``pin``
    the plan's package version ('' when the plan has none). Nodes on different NCCL versions fail the run (NCCL
    refuses or hangs when its ranks differ); a launcher that reports another version than the nodes load, and a
    version other than the pin, are warnings. A node whose library is not found that way (NCCL reached through an
    rpath, or linked in) is said to be unknown: the run itself shows whether NCCL loaded."""
    findings: dict[str, list[str]] = {"fail": [], "warn": [], "info": []}
    versions = {node: loaded_version(path) for node, path in loaded.items()}
    found = {node: version for node, version in versions.items() if version}
    for node in sorted(node for node, version in versions.items() if not version):
        findings["info"].append(
            f"info: {node}: which NCCL it loads is not known (no libnccl.so.2 on the job's LD_LIBRARY_PATH or in the "
            "loader's cache; the nccl role installs it there)"
        )
    if len(set(found.values())) > 1:
        listing = ", ".join(f"{node} {version}" for node, version in sorted(found.items()))
        findings["fail"].append(f"the nodes load different NCCL versions ({listing}): every rank must run one NCCL")
    elif found:
        version = next(iter(found.values()))
        findings["info"].append(f"info: NCCL {version} loaded on every node ({', '.join(sorted(found))})")
        if pin and upstream(pin) != version:
            findings["warn"].append(f"the nodes load NCCL {version}, the plan pins {pin} (nccl role)")
    for number in sorted({version for version in reported if version}):
        if found and number not in found.values():
            findings["warn"].append(f"the launching rank reports NCCL {number}, which no node's libnccl.so.2 is")
    return findings
