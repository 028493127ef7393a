# SPDX-License-Identifier: Apache-2.0
"""The compiler an out-of-tree kernel module (DKMS) must be built with: the one that built the running kernel.

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
"""

from __future__ import annotations

import re

# "(<triplet->gcc[-N] (Ubuntu|Debian X.Y.Z-rev) X.Y.Z": the distribution's gcc, major version from its own version.
_DISTRIBUTION_GCC = re.compile(r"\((?:[A-Za-z0-9_]+-linux-gnu-)?gcc(?:-[0-9]+)? \((?:Ubuntu|Debian) ([0-9]+)\.")


def compiler_package(proc_version: str) -> str | None:
    """``gcc-<major>`` for a kernel a distribution's gcc built, from the text of /proc/version; None otherwise."""
    match = _DISTRIBUTION_GCC.search(proc_version or "")
    return f"gcc-{match.group(1)}" if match else None
