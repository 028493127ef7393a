# SPDX-License-Identifier: Apache-2.0
"""busbw.png: bus bandwidth against message size, per tier, with the catalog's lines.

One panel per (collective, node count) of the report. Each tier is a curve (the lowest out-of-place
busbw at each size, the judgement's metric) on a log2 size axis; the catalog's line rate
(``line_rate_gbit_s / 8`` GB/s) is a horizontal line and the threshold a horizontal segment from its
``min_size_bytes`` on, labelled verified or unverified. When two tiers are compared, a second axis
shows the speed-up at each size. Rendered with matplotlib's Agg canvas (no display, no pyplot state).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from gpufabric.report import curve, human_size

PLOT_FILE = "busbw.png"
# matplotlib is the optional `plot` extra: a plain `pip install gpufabric` judges and reports without it.
INSTALL_HINT = "pip install 'gpufabric[plot]'"
PANEL_SIZE = (10.0, 5.2)  # inches per panel
DPI = 110
TIER_COLOURS = {"best": "#1f77b4", "standard": "#ff7f0e"}
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def available() -> bool:
    """Whether matplotlib can be imported, without importing it (a second or so) when it can."""
    return importlib.util.find_spec("matplotlib") is not None


def _size_label(size: float) -> str:
    text = human_size(int(size)) if size >= 1 and float(size).is_integer() else f"{size:g}"
    return text.replace(" GiB", "G").replace(" MiB", "M").replace(" KiB", "K").replace(" B", "")


def panels(report: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(collective, nodes) of every run with data rows, in report order."""
    seen: list[tuple[Any, Any]] = []
    for entry in report["tiers"].values():
        for run in entry["runs"]:
            key = (run.get("collective"), run.get("nodes"))
            if key not in seen and curve(run):
                seen.append(key)
    return seen


def _threshold(report: dict[str, Any], collective: Any, nodes: Any) -> dict[str, Any] | None:
    for entry in report["tiers"].values():
        for run in entry["runs"]:
            if (run.get("collective"), run.get("nodes")) == (collective, nodes) and run.get("threshold"):
                threshold: dict[str, Any] = run["threshold"]
                return threshold
    return None


def render(report: dict[str, Any], path: Path, title: str | None = None) -> Path:
    """Write the PNG; a report without any data row still gets a figure that says so."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    keys = panels(report)
    rows = max(len(keys), 1)
    figure = Figure(figsize=(PANEL_SIZE[0], PANEL_SIZE[1] * rows), dpi=DPI, layout="constrained")
    heading = f"nccl-tests busbw: {report.get('profile') or 'unknown profile'}"
    figure.suptitle(f"{title}: {heading}" if title else heading, fontsize=12)
    axes_list = figure.subplots(rows, 1, squeeze=False)[:, 0]
    if not keys:
        axes = axes_list[0]
        axes.text(0.5, 0.5, "no data rows to plot", ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
    speedups = {(item["collective"], item["nodes"]): item for item in report.get("speedup") or []}
    rate = report.get("line_rate_gbyte_s")
    for axes, (collective, nodes) in zip(axes_list, keys, strict=False):
        sizes: list[int] = []
        values: list[float] = []
        tier_runs = [
            (tier, run)
            for tier, entry in report["tiers"].items()
            for run in entry["runs"]
            if (run.get("collective"), run.get("nodes")) == (collective, nodes) and curve(run)
        ]
        others = iter(OTHER_COLOURS)
        for tier, run in tier_runs:
            points = curve(run)
            colour = TIER_COLOURS.get(tier) or next(others, "#7f7f7f")
            label = f"{tier} ({run['status']})"
            if sum(1 for other, _run in tier_runs if other == tier) > 1:
                label = f"{tier} {run.get('run_id')} ({run['status']})"
            axes.plot(list(points), list(points.values()), marker="o", markersize=4, color=colour, label=label)
            sizes += list(points)
            values += list(points.values())
        threshold = _threshold(report, collective, nodes)
        low, high = min(sizes), max(sizes)
        if threshold and isinstance(threshold.get("min_busbw_gbyte_s"), (int, float)):
            start = int(threshold.get("min_size_bytes") or low)
            high = max(high, start)
            limit = float(threshold["min_busbw_gbyte_s"])
            state = "verified" if threshold.get("verified") else "unverified"
            # Faint across the plot, bold where it judges (>= min_size_bytes, up to the plot's right edge).
            axes.axhline(limit, color="#d62728", linestyle="--", linewidth=1, alpha=0.3)
            axes.hlines(
                limit,
                start,
                high * 1.3,
                colors="#d62728",
                linestyles="--",
                linewidth=2.5,
                label=f"threshold {limit:g} GB/s, judged at >= {human_size(start)} ({state})",
            )
            axes.plot([start], [limit], marker="|", markersize=14, color="#d62728")
            values.append(limit)
        if isinstance(rate, (int, float)):
            axes.axhline(
                rate,
                color="#555555",
                linestyle=":",
                linewidth=1.5,
                label=f"line rate {rate:g} GB/s ({report.get('line_rate_gbit_s')} Gbit/s)",
            )
            values.append(float(rate))
        axes.set_xscale("log", base=2)
        axes.set_xlim(low / 1.3, high * 1.3)
        axes.xaxis.set_major_formatter(FuncFormatter(lambda size, _pos: _size_label(size)))
        positive = [value for value in values if value > 0]
        if len(tier_runs) > 1 and positive and max(positive) / min(positive) > 20:
            axes.set_yscale("log")
            axes.set_ylim(min(positive) / 1.5, max(positive) * 1.6)
        else:
            axes.set_ylim(0, max(positive or [1.0]) * 1.15)
        axes.set_xlabel("message size (bytes, log2)")
        axes.set_ylabel("busbw (GB/s)")
        axes.set_title(f"{collective or 'unknown collective'} on {nodes} node(s)", fontsize=11)
        axes.grid(True, which="major", alpha=0.3)
        item = speedups.get((collective, nodes))
        if item:
            twin = axes.twinx()
            ratios: list[tuple[int, float]] = [
                (point["size"], point["speedup"]) for point in item["sizes"] if point["speedup"] is not None
            ]
            twin.plot(
                [size for size, _speed in ratios],
                [speed for _size, speed in ratios],
                color="#2ca02c",
                linestyle="-.",
                marker="s",
                markersize=3,
                label=f"speed-up {item['tier']}/{item['baseline']}",
            )
            for size, speed in ratios:
                twin.annotate(
                    f"{speed:.0f}x" if speed >= 10 else f"{speed:.1f}x",
                    (size, speed),
                    textcoords="offset points",
                    xytext=(0, 6),
                    ha="center",
                    fontsize=7,
                    color="#2ca02c",
                )
            top = max((speed for _size, speed in ratios), default=1.0)
            twin.set_ylim(0, top * 1.25 if math.isfinite(top) else 1.0)
            twin.set_ylabel(f"speed-up {item['tier']}/{item['baseline']} (x)", color="#2ca02c")
            handles, labels = axes.get_legend_handles_labels()
            more_handles, more_labels = twin.get_legend_handles_labels()
            axes.legend(handles + more_handles, labels + more_labels, loc="lower right", fontsize=8)
        else:
            axes.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    # No timestamp or version in the file: the same report gives the same bytes on the same matplotlib.
    figure.savefig(temporary, format="png", metadata={"Software": None})
    temporary.replace(path)
    return path
