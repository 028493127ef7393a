# SPDX-License-Identifier: Apache-2.0
"""``sriov.Host`` over a SIMULATED tree, in-process: tests only, never production.

It is the module_utils ``Host`` itself (the same path handling, reads and
listings), with the kernel's part played at once by ``simulated_sriov.Kernel``:
a write of ``sriov_numvfs`` or a driver's ``bind``/``unbind`` reacts as the
kernel would, raising OSError as its write(2) would, and ``ip`` is answered from
the tree's VF state. It lives apart from ``simulated_sriov`` because that file
must stay standalone (molecule copies it into containers, where the collection
is not importable).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from gpufabric.collection import module_utils
from gpufabric.simulated_sriov import Kernel

NUMVFS = re.compile(r"^/sys/bus/pci/devices/([^/]+)/sriov_numvfs$")
DRIVER_BINDING = re.compile(r"^/sys/bus/pci/drivers/([^/]+)/(bind|unbind)$")

# The collection's module_utils are imported at run time, so mypy sees the base class as Any.
_Host: Any = module_utils("sriov").Host


class SimulatedSriovHost(_Host):  # type: ignore[misc]
    """``writes`` records (path, value) of every write attempted, ``commands`` every command run."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(str(root))
        self.kernel = Kernel(root)
        self.kernel.prepare()
        self.writes: list[tuple[str, str]] = []
        self.commands: list[list[str]] = []

    def write(self, path: str, value: str) -> None:
        self.writes.append((path, value))
        numvfs = NUMVFS.match(path)
        binding = DRIVER_BINDING.match(path)
        if numvfs:
            self.kernel.change_numvfs(numvfs.group(1), value)
        elif binding:
            getattr(self.kernel, binding.group(2))(binding.group(1), value)
            return
        super().write(path, value)

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.commands.append(list(argv))
        if os.path.basename(argv[0]) != "ip":
            return 127, "", f"simulated host: only ip is simulated, not {argv[0]}\n"
        answer = self.kernel.ip(argv[1:])
        return answer if answer is not None else (1, "", f"simulated host: {' '.join(argv)} names no device\n")

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, 0.001))
