# SPDX-License-Identifier: Apache-2.0
"""Container image references pinned by digest, shared by the roles that run vendor images (gcp_tcpx, gcp_tcpxo).

Stdlib only. Each role words its own messages (they name its variables); the grammar and the
reference that is pulled and run are the same for all of them.
"""

from __future__ import annotations

import re

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# A repository path below the registry: lower-case components joined by '.', '_' or '-', separated by '/'.
IMAGE_NAME = re.compile(r"^[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$")


def image_reference(registry: str, name: str, digest: str) -> str:
    """What is pulled and run: the repository by digest, e.g. us-docker.pkg.dev/.../tcpgpudmarxd-dev@sha256:...

    The tag is documentation only: a digest cannot move under a pin.
    """
    return f"{registry.rstrip('/')}/{name}@{digest}"
