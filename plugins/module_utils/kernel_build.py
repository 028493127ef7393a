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
"""

from __future__ import annotations

import re

# "(<triplet->gcc[-N] (Ubuntu|Debian X.Y.Z-rev) X.Y.Z": the distribution's gcc, major version from its own version.
_DISTRIBUTION_GCC = re.compile(r"\((?:[A-Za-z0-9_]+-linux-gnu-)?gcc(?:-[0-9]+)? \((?:Ubuntu|Debian) ([0-9]+)\.")


def compiler_package(proc_version: str) -> str | None:
    """``gcc-<major>`` for a kernel a distribution's gcc built, from the text of /proc/version; None otherwise."""
    match = _DISTRIBUTION_GCC.search(proc_version or "")
    return f"gcc-{match.group(1)}" if match else None


# The flavour of a distribution kernel release: what follows the version and the ABI number ("6.8.0-1015-azure":
# azure; "6.1.0-28-cloud-amd64": cloud-amd64; "6.12.9+bpo-amd64": amd64).
_KERNEL_FLAVOUR = re.compile(r"[0-9][^-]*-(?:[0-9][^-]*-)?([a-z][a-z0-9.+-]*)")


def headers_meta_packages(kernel: str, installed: list[str]) -> list[str]:
    """``linux-headers-<meta>`` for every installed ``linux-image-<meta>`` meta-package of the running kernel's flavour
    (``<meta>`` is the flavour or starts with it and a dash), sorted; none for a kernel with no flavour or no meta."""
    match = _KERNEL_FLAVOUR.fullmatch(kernel or "")
    if not match:
        return []
    flavour = match.group(1)
    metas = {name.removeprefix("linux-image-") for name in installed if name.startswith("linux-image-")}
    return sorted(f"linux-headers-{meta}" for meta in metas if meta == flavour or meta.startswith(f"{flavour}-"))
