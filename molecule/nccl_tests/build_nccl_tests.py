# SPDX-License-Identifier: Apache-2.0
"""Build a TEST-DOUBLE nccl-tests source tarball shaped like GitHub's archive of a release tag.

Nothing here is NVIDIA's software, and version 0.0.0-test was never published. The tarball unpacks to
nccl-tests-<version>/ with a Makefile that, like the real one, takes MPI=1 MPI_HOME CUDA_HOME NCCL_HOME and
builds build/<collective>_perf; it refuses a build without MPI=1 and checks that MPI_HOME/include/mpi.h,
CUDA_HOME/bin/nvcc and NCCL_HOME/include/nccl.h exist. The "binaries" are SIMULATED: shell scripts that need
Open MPI's rank variables (so only a real mpirun starts them), record their arguments and environment per rank
in /var/tmp/TEST-DOUBLE-nccl-tests/ (after reading nccl.conf as NCCL does), and on rank 0 print a synthetic
nccl-tests output (rendered with the v2.17.3+ format strings of ../shared/reference/nccl-tests.md section 2)
for 1 node x 8 H100, all_reduce 8 MiB to 16 GiB. NCCL_TESTS_TEST_DOUBLE_REPLAY picks the replay: pass (busbw
481 GB/s at 16 GiB, above the 460 GB/s single-node threshold of baremetal/hgx-h100-ib-ndr) or wrong (the same
with 12 wrong elements at 2 GiB, exit status 7 as nccl-tests >= 2.18 does).

    python build_nccl_tests.py OUT VERSION

writes OUT/TEST-DOUBLE-nccl-tests-<version>.tar.gz and its .sha256.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path

from gpufabric.collection import module_utils

# The test programs the role builds and checks: the collection's own list, so the double has exactly those.
COLLECTIVES = module_utils("nccl_tests_run").COLLECTIVES
MARK = "TEST DOUBLE, not NVIDIA's nccl-tests"
RANKS = 8
BUSBW = (150.2, 211.7, 268.4, 331.9, 379.6, 418.3, 444.8, 459.1, 469.7, 476.2, 479.4, 481.3)
SIZES = [8 * 1024**2 * 2**i for i in range(len(BUSBW))]
BUS_IDS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

MAKEFILE = """\
# TEST DOUBLE of NVIDIA/nccl-tests' Makefile (gpufabric molecule/nccl_tests/build_nccl_tests.py).
# Takes the real variables (MPI=1 MPI_HOME CUDA_HOME NCCL_HOME BUILDDIR) and "builds" SIMULATED programs.
BUILDDIR ?= build
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?=
TESTS := {tests}

ifneq ($(MPI),1)
$(error TEST DOUBLE: build with MPI=1; gpufabric runs nccl-tests over mpirun)
endif

all: prerequisites $(TESTS:%=$(BUILDDIR)/%_perf) $(BUILDDIR)/replays $(BUILDDIR)/TEST-DOUBLE-make.txt

prerequisites:
\t@test -f "$(MPI_HOME)/include/mpi.h" || {{ echo "TEST DOUBLE: no $(MPI_HOME)/include/mpi.h" >&2; exit 2; }}
\t@test -x "$(CUDA_HOME)/bin/nvcc" || {{ echo "TEST DOUBLE: no $(CUDA_HOME)/bin/nvcc" >&2; exit 2; }}
\t@test -f "$(NCCL_HOME)/include/nccl.h" || {{ echo "TEST DOUBLE: no $(NCCL_HOME)/include/nccl.h" >&2; exit 2; }}

$(BUILDDIR):
\tmkdir -p $@

$(BUILDDIR)/%_perf: src/perf.sh.in | $(BUILDDIR)
\tsed 's/@COLLECTIVE@/$*/g' $< > $@
\tchmod 0755 $@

$(BUILDDIR)/replays: | $(BUILDDIR)
\tcp -r src/replays $@

$(BUILDDIR)/TEST-DOUBLE-make.txt: | $(BUILDDIR)
\tprintf 'MPI=%s\\nMPI_HOME=%s\\n' "$(MPI)" "$(MPI_HOME)" > $@
\tprintf 'CUDA_HOME=%s\\nNCCL_HOME=%s\\n' "$(CUDA_HOME)" "$(NCCL_HOME)" >> $@

.PHONY: all prerequisites
"""

PERF = """\
#!/bin/sh
# TEST DOUBLE of nccl-tests' @COLLECTIVE@_perf (gpufabric molecule/nccl_tests/build_nccl_tests.py), SIMULATED:
# no GPU, no NCCL, no MPI calls. Every rank reads nccl.conf as NCCL does, records its arguments and environment;
# rank 0 prints a synthetic output (NCCL_TESTS_TEST_DOUBLE_REPLAY: pass or wrong) and exits 7 when it holds data
# errors.
rank=${OMPI_COMM_WORLD_RANK:?TEST DOUBLE: start me with Open MPI mpirun}
record=/var/tmp/TEST-DOUBLE-nccl-tests
mkdir -p "$record"
# SIMULATED NCCL start-up (NVIDIA/nccl src/misc/param.cc, initEnvFunc and setEnvFile): $NCCL_CONF_FILE, else
# ~/.nccl.conf, then /etc/nccl.conf; each NAME=VALUE line is set only when the process does not have NAME.
for conf in "${NCCL_CONF_FILE:-$HOME/.nccl.conf}" /etc/nccl.conf; do
    [ -r "$conf" ] || continue
    while IFS= read -r line || [ -n "$line" ]; do
        name=${line%%=*}
        case "$name" in ''|'#'*|*[!A-Za-z0-9_]*|"$line") continue ;; esac
        eval "set_already=\\${$name+x}"
        [ -n "$set_already" ] || export "$name=${line#*=}"
    done <"$conf"
done
{
    echo "rank=$rank size=${OMPI_COMM_WORLD_SIZE} local_size=${OMPI_COMM_WORLD_LOCAL_SIZE} host=$(hostname)"
    echo "args=$*"
    env | grep -E '^(NCCL_|UCX_|FI_|LD_LIBRARY_PATH=)' | sort
} >"$record/@COLLECTIVE@-rank$rank"
[ "$rank" = 0 ] || exit 0
replay="$(dirname "$0")/replays/@COLLECTIVE@-${NCCL_TESTS_TEST_DOUBLE_REPLAY:-pass}.txt"
if [ ! -f "$replay" ]; then
    echo "TEST DOUBLE: no replay $replay" >&2
    exit 5
fi
cat "$replay"
if grep -q 'Out of bounds values : [1-9]' "$replay"; then
    exit 7
fi
"""


def number(value: float, width: int) -> str:
    """nccl-tests >= 2.17.3: %.2f, %.1f, %.0f, the first that fits the width, else %.1e / %.0e."""
    for precision in (2, 1, 0):
        text = f"{value:.{precision}f}"
        if len(text) <= width:
            return text.rjust(width)
    return (f"{value:.1e}" if width >= 7 else f"{value:.0e}").rjust(width)


def half(size: int, busbw: float, wrong: int) -> tuple[str, float]:
    algbw = busbw / (2 * (RANKS - 1) / RANKS)
    time_us = size / (algbw * 1e3)
    algbw = size / (time_us * 1e3)
    busbw = algbw * 2 * (RANKS - 1) / RANKS
    return f"  {number(time_us, 7)}  {number(algbw, 6)}  {number(busbw, 6)}  {wrong:6g}", float(f"{busbw:.2f}")


def replay(wrong_at: int | None) -> str:
    lines = [
        "# nccl-tests version 0.0.0-test nccl-headers=22807 nccl-library=22807",
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus 1 minBytes {SIZES[0]} maxBytes {SIZES[-1]} step: 2(factor) warmup iters: 5 iters: 20"
        " agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(RANKS):
        lines.append(
            f"#  Rank {rank:2d} Group {0:2d} Pid {40100 + rank:6d} on {'sim-node-0':>10s} device {rank:2d} "
            f"[{0:04x}:{BUS_IDS[rank]:02x}:{0:02x}] NVIDIA H100 80GB HBM3"
        )
    lines += [
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)         ",
    ]
    cells = []
    errors = 0
    for size, busbw in zip(SIZES, BUSBW, strict=True):
        wrong = 12 if size == wrong_at else 0
        errors += 1 if wrong else 0
        out_of_place, oop = half(size, busbw, wrong)
        in_place, ip = half(size, busbw * 1.002, 0)
        cells += [oop, ip]
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}{out_of_place}{in_place}")
    lines += [
        f"# {'Out of bounds values':<20s} : {errors} {'FAILED' if errors else 'OK'}",
        f"# {'Avg bus bandwidth':<20s} : {sum(cells) / len(cells):g} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
        "",
    ]
    return "\n".join(lines) + "\n"


def add(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode("utf-8")
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def build(out: Path, version: str) -> Path:
    top = f"nccl-tests-{version}"
    tarball = out / f"TEST-DOUBLE-nccl-tests-{version}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        add(tar, f"{top}/TEST-DOUBLE", f"nccl-tests {version}: {MARK}. SIMULATED programs, synthetic outputs.\n")
        add(tar, f"{top}/Makefile", MAKEFILE.format(tests=" ".join(COLLECTIVES)))
        add(tar, f"{top}/src/perf.sh.in", PERF, 0o755)
        add(tar, f"{top}/src/replays/all_reduce-pass.txt", replay(None))
        add(tar, f"{top}/src/replays/all_reduce-wrong.txt", replay(2 * 1024**3))
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (out / f"{tarball.name}.sha256").write_text(f"{digest}  {tarball.name}\n", encoding="utf-8")
    return tarball


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    print(build(out, argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
