# SPDX-License-Identifier: Apache-2.0
"""What an out-of-tree kernel module (DKMS) build needs from the kernel besides its headers: the compiler that built
it, and the headers meta-package that keeps later kernels buildable.

A distribution kernel's headers call the compiler that built the kernel by its versioned name: Ubuntu 22.04's HWE and
cloud kernels from 6.5 are built with gcc-12 while the release's default gcc (build-essential) is gcc-11, so DKMS
fails with "gcc-12: command not found" (piraeusdatastore/piraeus-operator #594; p4lang/open-p4studio #128:
``HOSTCC = gcc-12`` in linux-headers-6.8.0-101-generic) or NVIDIA's build stops at its compiler check
(GoogleCloudPlatform/compute-gpu-installation #15). NVIDIA's driver container and AWS ParallelCluster install the
kernel's gcc for that reason (NVIDIA/gpu-driver-container PR #20, aws/aws-parallelcluster-cookbook PR #2852).
The running kernel names its compiler in /proc/version, for example (PR #20's recorded kernels)::

    Linux version 6.2.0-1019-gcp (buildd@lcy02-amd64-032) (x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04)
    12.3.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #21~22.04.1-Ubuntu SMP ...
    Linux version 5.15.0-101-generic (buildd@lcy02-amd64-032) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, ...

Debian's read ``(gcc-12 (Debian 12.2.0-14) 12.2.0, ...)``. Only a compiler the distribution packaged is named here:
a kernel built elsewhere (``gcc (GCC) 15.3.0``) says nothing about a package the host's archive has.

A kernel that a later update installs gets the DKMS modules only if its headers come with it: dkms' autoinstall skips
a kernel without headers ("autoinstall for kernel 6.8.0-45-generic was skipped since the kernel headers for this
kernel do not seem to be installed"), and the host then boots without the driver. The distributions keep headers in
step with the kernel through unversioned meta-packages in pairs, ``linux-image-<flavour…>`` and
``linux-headers-<flavour…>`` (dkms-project/dkms #521, 2025-04-21: Debian's ``linux-image-cloud-amd64`` and
``linux-headers-cloud-amd64``; Ubuntu's ``linux-image-azure-6.8``/``linux-headers-azure-6.8``, which Azure's
ubuntu-hpc image installs through ``linux-azure-6.8``). The headers meta-package to install is the partner of the
image meta-package the host has for its running kernel's flavour, never one guessed from the cloud's name.

The running kernel's own packages (``linux-headers-<uname -r>``, Ubuntu's ``linux-modules-extra-<uname -r>``) leave
the archive's index once a newer kernel of the flavour is published: actions/runner-images #2291 (2020-12-17,
"E: Unable to locate package linux-modules-extra-5.4.0-1032-azure" after a security update), #7570 (2023-05-10:
"older versions of the package are removed from the Ubuntu repositories"), #8080 (2023-08, linux-modules-extra-
5.15.0-1042-azure "is not available"); on Debian sipwise/rtpengine #1712 (2023-08-27: Debian 11's AWS image runs
5.10.0-23-cloud-amd64, whose headers apt cannot locate, while linux-headers-amd64 is at 5.10.191-1). A host started
from an image older than its flavour's last kernel update cannot have them, and no role can install them: the host
needs the flavour's current kernel and a reboot into it. ``running_kernel_error`` says so before a role changes
anything (the kernel_packages module).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

# "(<triplet->gcc[-N] (Ubuntu|Debian X.Y.Z-rev) X.Y.Z": the distribution's gcc, major version from its own version.
_DISTRIBUTION_GCC = re.compile(r"\((?:[A-Za-z0-9_]+-linux-gnu-)?gcc(?:-[0-9]+)? \((?:Ubuntu|Debian) ([0-9]+)\.")


def compiler_package(proc_version: str) -> str | None:
    """``gcc-<major>`` for a kernel a distribution's gcc built, from the text of /proc/version; None otherwise."""
    match = _DISTRIBUTION_GCC.search(proc_version or "")
    return f"gcc-{match.group(1)}" if match else None


# The flavour of a distribution kernel release: what follows the version and the ABI number ("6.8.0-1015-azure":
# azure; "6.1.0-28-cloud-amd64": cloud-amd64; "6.12.9+bpo-amd64": amd64).
_KERNEL_FLAVOUR = re.compile(r"[0-9][^-]*-(?:[0-9][^-]*-)?([a-z][a-z0-9.+-]*)")


def kernel_flavour(kernel: str) -> str | None:
    """The flavour of a distribution kernel release (``6.8.0-1015-azure``: ``azure``); None when it has none."""
    match = _KERNEL_FLAVOUR.fullmatch(kernel or "")
    return match.group(1) if match else None


def headers_meta_packages(kernel: str, installed: list[str]) -> list[str]:
    """``linux-headers-<meta>`` for every installed ``linux-image-<meta>`` meta-package of the running kernel's flavour
    (``<meta>`` is the flavour or starts with it and a dash), sorted; none for a kernel with no flavour or no meta."""
    flavour = kernel_flavour(kernel)
    if not flavour:
        return []
    metas = {name.removeprefix("linux-image-") for name in installed if name.startswith("linux-image-")}
    return sorted(f"linux-headers-{meta}" for meta in metas if meta == flavour or meta.startswith(f"{flavour}-"))


def running_kernel_packages(names: list[str], kernel: str) -> list[str]:
    """The packages among names that exist for one kernel release only, the running one's: ``linux-<part>-<kernel>``
    (``linux-headers-6.8.0-1015-gcp``, ``linux-modules-extra-6.8.0-1015-gcp``), in order, once each."""
    if not kernel:
        return []
    return list(dict.fromkeys(n for n in names if n.startswith("linux-") and n.endswith(f"-{kernel}")))


def flavour_headers(kernel: str, installed: list[str]) -> list[str]:
    """The headers meta-packages that say which kernel of the running kernel's flavour the archive has now: the
    partners of the installed image meta-packages (``linux-headers-azure-6.8`` on a 22.04 HWE host), else
    ``linux-headers-<flavour>``; none for a kernel without a flavour."""
    flavour = kernel_flavour(kernel)
    if not flavour:
        return []
    return headers_meta_packages(kernel, installed) or [f"linux-headers-{flavour}"]


def running_kernel_error(kernel: str, missing: list[str], offered: dict[str, list[str]], needed_by: str) -> str | None:
    """One message when packages of the running kernel are neither installed nor offered; None when none is missing.

    missing: the running kernel's packages not installed; offered: name -> versions the host's repositories offer
    (newest first, as apt-cache madison lists them), for those and for the headers meta-packages of
    ``flavour_headers``.
    """
    absent = [name for name in missing if not offered.get(name)]
    if not absent:
        return None
    flavour = kernel_flavour(kernel)
    metas = {
        name.removeprefix("linux-headers-"): versions[0]
        for name, versions in offered.items()
        if name.startswith("linux-headers-") and name not in missing and versions
    }
    if metas:
        now = ", ".join(f"linux-headers-{meta} {version}" for meta, version in sorted(metas.items()))
        images = " ".join(f"linux-image-{meta} linux-headers-{meta}" for meta in sorted(metas))
        archive = f"For the {flavour} flavour they offer {now}: the flavour's current kernel."
        fix = f"Install that kernel with its headers and reboot into it (apt-get install {images} && reboot)"
    else:
        archive = f"They offer no linux-headers-{flavour} either." if flavour else ""
        fix = "Install the distribution's current kernel with its headers and reboot into it"
    verb = "is" if len(absent) == 1 else "are"
    return " ".join(
        part
        for part in (
            f"{', '.join(absent)} (the running kernel {kernel}'s, uname -r; needed by {needed_by}) {verb} neither "
            "installed nor offered by this host's repositories: the archive keeps the packages of each flavour's "
            "newest kernel only, and the running kernel is older.",
            archive,
            f"{fix}, then apply again; or start the host from an image whose kernel is the archive's current one. "
            "Nothing was changed.",
        )
        if part
    )


class IndexReader(Protocol):
    """What the check needs from a package manager backend (vendor_packages_apt.Apt)."""

    def installed(self, names: list[str]) -> tuple[dict[str, list[dict[str, Any]]], set[str]]: ...
    def refresh(self, repositories: tuple[()]) -> None: ...
    def offered(self, names: list[str]) -> dict[str, list[str]]: ...


def check_running_kernel(reader: IndexReader, names: list[str], kernel: str, needed_by: str) -> dict[str, Any]:
    """Whether the running kernel's packages among names are installed or offered by the host's own sources.

    Reads only: dpkg's database, then, where one is missing, the package index refreshed from the sources the host
    has (a cache, as vendor_packages refreshes it in check mode too) and what it offers for them and for the
    flavour's headers meta-packages. Returns checked (the running kernel's packages), missing (not installed),
    offered (name -> newest version, for the missing ones and the meta-packages), refreshed, and error (the message
    of running_kernel_error, '' when nothing is lacking).
    """
    checked = running_kernel_packages(names, kernel)
    result: dict[str, Any] = {"checked": checked, "missing": [], "offered": {}, "refreshed": False, "error": ""}
    if not checked:
        return result
    installed, _held = reader.installed(checked)
    missing = [name for name in checked if not installed.get(name)]
    result["missing"] = missing
    if not missing:
        return result
    reader.refresh(())
    result["refreshed"] = True
    metas, _held = reader.installed([f"linux-image-{flavour}*" for flavour in filter(None, [kernel_flavour(kernel)])])
    offered = reader.offered(missing + flavour_headers(kernel, list(metas)))
    result["offered"] = {name: versions[0] for name, versions in offered.items() if versions}
    result["error"] = running_kernel_error(kernel, missing, offered, needed_by) or ""
    return result
