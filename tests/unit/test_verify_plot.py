# SPDX-License-Identifier: Apache-2.0
"""busbw.png from reports of SYNTHETIC results, and the README plot's generator."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest

from gpufabric import catalog as fabric_catalog
from gpufabric import plot, report
from tests.unit.test_verify_report import FIXTURES, GIB, MIB, make_results, synthetic_output

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails unless the file is a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def catalog() -> Any:
    return fabric_catalog.load([])


def test_one_tier_plot_is_a_png(tmp_path, catalog):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    built = report.build(tmp_path, catalog)
    path = plot.render(built, tmp_path / "busbw.png")
    assert path.stat().st_size > 10_000
    width, height = png_size(path)
    assert (width, height) == (round(plot.PANEL_SIZE[0] * plot.DPI), round(plot.PANEL_SIZE[1] * plot.DPI))
    assert not list(tmp_path.glob("*.tmp"))


def test_compare_plot_has_one_panel_per_collective_and_node_count(tmp_path, catalog):
    sizes = [128 * MIB, 512 * MIB, 2 * GIB, 8 * GIB]
    make_results(tmp_path, "standard", {"all_reduce": synthetic_output(9.6, sizes)})
    make_results(
        tmp_path,
        "best",
        {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt", "all_gather": FIXTURES / "v2_18_all_gather_2node.txt"},
    )
    built = report.build(tmp_path, catalog, tiers=["standard", "best"], compare=["standard", "best"])
    assert plot.panels(built) == [("all_reduce", 2), ("all_gather", 2)]
    path = plot.render(built, tmp_path / "out" / "busbw.png", title="SYNTHETIC")
    assert png_size(path)[1] == round(2 * plot.PANEL_SIZE[1] * plot.DPI)


def test_a_report_without_rows_still_draws(tmp_path, catalog):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "nccl_failure.txt"})
    built = report.build(tmp_path, catalog)
    assert plot.panels(built) == []
    path = plot.render(built, tmp_path / "busbw.png")
    assert path.stat().st_size > 1000 and png_size(path)[0] > 0


def test_readme_plot_regenerates_with_the_committed_dimensions(tmp_path):
    committed = REPO / "docs" / "img" / "verify-compare.png"
    spec = importlib.util.spec_from_file_location("verify_readme_plot", REPO / "scripts" / "verify_readme_plot.py")
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    result = generator.generate(tmp_path / "verify-compare.png")
    assert result.returncode == 0, result.stderr
    assert "SYNTHETIC" in generator.TITLE
    assert png_size(tmp_path / "verify-compare.png") == png_size(committed)
    size = (tmp_path / "verify-compare.png").stat().st_size
    # Same report, same figure: only font rasterisation may differ between matplotlib/freetype builds.
    assert abs(size - committed.stat().st_size) < committed.stat().st_size * 0.2
