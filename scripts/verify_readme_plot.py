# SPDX-License-Identifier: Apache-2.0
"""Regenerate docs/img/verify-compare.png: `gpufabric verify --from-results` on SYNTHETIC results.

The README's plot is not a measurement. This script renders two SYNTHETIC all_reduce outputs for
2 nodes x 8 H100 (baremetal/hgx-h100-ib-ndr) with the nccl-tests printf formats of
tests/fixtures/nccl/make_fixtures.py: tier standard (NCCL over TCP sockets, rising to an invented
~9.6 GB/s) and tier best (InfiniBand NDR, an invented ~455 GB/s), writes run.json files shaped like
roles/nccl_tests', and runs the real command on them:

    .venv/bin/python scripts/verify_readme_plot.py [--output docs/img/verify-compare.png]

tests/unit/test_verify_plot.py runs it into a temporary file and checks the image has the committed
one's dimensions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "nccl"
DEFAULT_OUTPUT = REPO / "docs" / "img" / "verify-compare.png"
PROFILE = "baremetal/hgx-h100-ib-ndr"
MIB, GIB = 1 << 20, 1 << 30
SIZES = [8 * MIB << step for step in range(11)]  # 8 MiB .. 8 GiB, -f 2
PEAKS = {"standard": 9.6, "best": 455.0}  # invented plateaus, GB/s
TITLE = "SYNTHETIC data (not a measurement)"


def _make_fixtures() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_results(root: Path) -> None:
    """<root>/<tier>/SYNTHETIC/{all_reduce-2n.txt, run.json} for both tiers."""
    fixtures = _make_fixtures()
    for tier, peak in PEAKS.items():
        directory = root / tier / "SYNTHETIC"
        directory.mkdir(parents=True)
        rows = fixtures.model_rows("all_reduce", 16, SIZES, peak)
        lines = fixtures.run_text("2.19", "all_reduce_perf", rows, 2, 8, SIZES[0], SIZES[-1], 2)
        (directory / "all_reduce-2n.txt").write_text(fixtures.text(lines))
        record = {
            "run_id": "SYNTHETIC",
            "profile": PROFILE,
            "tier": tier,
            "nodes": 2,
            "gpus_per_node": 8,
            "algo": "auto",
            "collectives": ["all_reduce"],
            "hosts": ["node-a", "node-b"],
            "exit_codes": {"all_reduce": 0},
            "runs": [
                {"collective": "all_reduce", "algo": "default", "nodes": 2, "file": "all_reduce-2n.txt", "exit_code": 0}
            ],
        }
        (directory / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def generate(output: Path) -> subprocess.CompletedProcess[str]:
    """Write the SYNTHETIC results to a temporary directory, run the CLI on them, copy busbw.png to output."""
    with tempfile.TemporaryDirectory(prefix="gpufabric-readme-plot-") as temporary:
        root = Path(temporary)
        write_results(root)
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "gpufabric"),
                "verify",
                "--from-results",
                str(root),
                "--compare",
                "standard,best",
                "--title",
                TITLE,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode == 0:
            output.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / "busbw.png", output)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    result = generate(args.output)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        print(f"wrote {args.output}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
