# SPDX-License-Identifier: Apache-2.0
"""Write a TEST-DOUBLE libcuda.so.1: ldconfig indexes only ELF libraries by their SONAME, so the double is
Debian's libattr.so.1 with its SONAME renamed (same length) and a marker appended; it holds no NVIDIA code.
Usage: libcuda-double.py SOURCE DESTINATION"""

import sys
from pathlib import Path

data = Path(sys.argv[1]).read_bytes()
if data.count(b"libattr.so.1\0") != 1:
    sys.exit(f"{sys.argv[1]}: expected exactly one SONAME libattr.so.1")
marker = b"TEST DOUBLE libcuda.so.1 (gpufabric molecule)\n"
Path(sys.argv[2]).write_bytes(data.replace(b"libattr.so.1\0", b"libcuda.so.1\0") + marker)
