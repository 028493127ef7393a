# SPDX-License-Identifier: Apache-2.0
"""One 2-node lab per test module (podman, real SSH), always removed at the end.

The lab is made by gpufabric.lab.up with a name starting gpufabric-labtest-. It
needs podman and the base image (scripts/build-images 12); `lab up` builds the
lab image from it when missing.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest

from gpufabric import lab as local_lab
from lab.support import LabUnderTest

PREFIX = "gpufabric-labtest"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabUnderTest]:
    if shutil.which("podman") is None:
        pytest.skip("the lab needs podman")
    name = f"{PREFIX}-{os.getpid()}"
    directory = tmp_path_factory.mktemp("lab") / name
    lines: list[str] = []
    start = time.monotonic()
    try:
        made = local_lab.up(name, nodes=2, directory=directory, progress=lines.append)
        yield LabUnderTest(made, time.monotonic() - start, lines)
    finally:
        local_lab.down(name, directory, progress=lambda _line: None)
