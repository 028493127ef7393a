# SPDX-License-Identifier: Apache-2.0
"""Judge a parsed nccl-tests run against the catalog profile's bandwidth thresholds.

``profile`` is a catalog profile (the driver's `gpufabric report`) or a host plan, gpufabric_plan (the role: its
``bandwidth`` holds the tier's thresholds, its ``gpus`` the GPU count); a ``bandwidth`` block alone is accepted too.

Stdlib only. The metric is the out-of-place busbw at the large sizes the threshold names
(the lowest of those rows), never nccl-tests' ``Avg bus bandwidth``, which averages every
size and both placements. docs/nccl-tests.md lists the rules in order.
"""

from __future__ import annotations

import math
from typing import Any

STATUSES = ("pass", "warn", "fail", "unjudged")
GIB = 1 << 30


def _bandwidth(profile: dict[str, Any] | None) -> dict[str, Any]:
    """The profile's ``bandwidth`` block (a bandwidth block itself is accepted too)."""
    if not isinstance(profile, dict):
        return {}
    if "thresholds" in profile:
        return profile
    bandwidth = profile.get("bandwidth")
    return bandwidth if isinstance(bandwidth, dict) else {}


def _gpu_count(profile: dict[str, Any] | None) -> Any:
    """GPUs per node: a catalog profile's ``gpu.count`` or a host plan's ``gpus.count``; None when neither."""
    for key in ("gpu", "gpus"):
        section = (profile or {}).get(key) if isinstance(profile, dict) else None
        if isinstance(section, dict):
            return section.get("count")
    return None


def _thresholds(profile: dict[str, Any] | None) -> list[dict[str, Any]]:
    entries = _bandwidth(profile).get("thresholds")
    return [entry for entry in entries or [] if isinstance(entry, dict)]


def _covers(entry: dict[str, Any], nodes: int) -> bool:
    low = entry.get("min_nodes", 1)
    high = entry.get("max_nodes")
    return isinstance(low, int) and low <= nodes and (high is None or nodes <= high)


def find_threshold(profile: dict[str, Any] | None, collective: str, nodes: int, algo: str = "default") -> Any:
    """The catalog entry for (collective, nodes, algo), or None; the narrowest node range wins."""
    matches = [
        entry
        for entry in _thresholds(profile)
        if entry.get("collective") == collective and entry.get("algo", "default") == algo and _covers(entry, nodes)
    ]
    if not matches:
        return None

    def narrowness(entry: dict[str, Any]) -> tuple[int, int]:
        high = entry.get("max_nodes")
        return (0 if high is not None else 1, (high or 0) - entry.get("min_nodes", 1))

    return min(matches, key=narrowness)


def describe_threshold(entry: dict[str, Any]) -> str:
    high = entry.get("max_nodes")
    low = entry.get("min_nodes", 1)
    span = f"{low}" if high == low else (f"{low}-{high}" if high is not None else f">= {low}")
    return f"{entry.get('collective')} nodes {span} algo {entry.get('algo', 'default')}"


def human_bytes(size: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _gbs(value: float) -> str:
    return f"{value:.1f} GB/s"


def judge(
    run: dict[str, Any],
    profile: dict[str, Any] | None,
    nodes: int | None,
    algo: str = "default",
    *,
    collective: str | None = None,
) -> dict[str, Any]:
    """pass / warn / fail / unjudged for one run; ``collective`` fills in when the output does not name it."""
    run = run if isinstance(run, dict) else {}
    rows = [row for row in run.get("rows") or [] if isinstance(row, dict)]
    name = run.get("collective") or collective
    result: dict[str, Any] = {
        "status": "pass",
        "collective": name,
        "nodes": nodes,
        "algo": algo,
        "threshold": None,
        "measured_busbw": None,
        "largest_size": max((row["size"] for row in rows), default=None),
        # The NCCL the launching rank printed (nccl-tests' banner, NCCL_DEBUG); the role compares it with the nodes'.
        "nccl_version": run.get("nccl_version"),
        "reasons": [],
    }
    reasons: list[str] = result["reasons"]
    failed: list[str] = []

    # 1. A run that did not finish, or whose output is damaged, fails with its error lines quoted.
    errors = [str(error) for error in run.get("errors") or []]
    if not run.get("complete"):
        failed.append("the run is incomplete: " + "; ".join(errors or ["no footer"]))
    elif errors:
        failed.append("the output has problems: " + "; ".join(errors))

    # 2. Data errors always fail.
    wrong = [
        (row["size"], row["type"], placement, row[placement]["wrong"])
        for row in rows
        for placement in ("out_of_place", "in_place")
        if isinstance(row.get(placement), dict) and (row[placement].get("wrong") or 0) > 0
    ]
    if wrong:
        size, kind, placement, count = wrong[0]
        more = f" (and {len(wrong) - 1} more cells)" if len(wrong) > 1 else ""
        failed.append(f"data errors: {count:g} wrong elements at {size} bytes {kind} {placement}{more}")
    out_of_bounds = run.get("out_of_bounds")
    if isinstance(out_of_bounds, int) and out_of_bounds > 0:
        failed.append(f"data errors: Out of bounds values {out_of_bounds}")

    # 3. Which threshold applies.
    threshold = None
    unjudged: str | None = None
    if not name:
        unjudged = "the output does not name its collective; pass collective= to judge it"
    elif not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        hosts = run.get("hosts") or []
        hint = f" (its device lines name {len(hosts)} host(s))" if hosts else ""
        unjudged = f"unknown node count{hint}: the thresholds depend on it"
    else:
        threshold = find_threshold(profile, name, nodes, algo)
        if threshold is None:
            have = [describe_threshold(entry) for entry in _thresholds(profile)]
            unjudged = f"the profile has no threshold for {name} on {nodes} node(s) with algo {algo}; it has: " + (
                "; ".join(have) if have else "none"
            )
    result["threshold"] = threshold

    # 4. Measure the large sizes: the lowest out-of-place busbw among rows at or above min_size_bytes.
    warned: list[str] = []
    if threshold is not None:
        min_size = int(threshold.get("min_size_bytes", 0))
        minimum = float(threshold.get("min_busbw_gbyte_s", 0))
        large = [row for row in rows if row["size"] >= min_size]
        if not large:
            stop = result["largest_size"]
            where = f"the run stopped at {stop} bytes" if stop is not None else "the run has no data rows"
            failed.append(f"{where}; the threshold judges >= {min_size} bytes ({human_bytes(min_size)}): raise -e")
        else:
            values = [(row.get("out_of_place") or {}).get("busbw") for row in large]
            finite = [value for value in values if isinstance(value, (int, float)) and math.isfinite(value)]
            if len(finite) < len(values):
                failed.append("a large-size row has no finite out-of-place busbw")
            if finite:
                measured = min(finite)
                result["measured_busbw"] = measured
                summary = (
                    f"busbw {_gbs(measured)} (lowest out-of-place of {len(finite)} row(s) >= "
                    f"{human_bytes(min_size)}) vs threshold {_gbs(minimum)} ({describe_threshold(threshold)})"
                )
                if measured < minimum:
                    if threshold.get("verified", False):
                        failed.append(f"{summary}: below the threshold")
                    else:
                        warned.append(
                            f"{summary}: below an unverified threshold ({threshold.get('basis', 'derived')}); "
                            "calibrate per site"
                        )
                else:
                    reasons.append(f"{summary}: ok")
        # The output's own view of the fleet: ranks and hosts that do not match the judgement's nodes.
        hosts = run.get("hosts") or []
        if hosts and nodes is not None and len(hosts) != nodes:
            warned.append(f"judged for {nodes} node(s) but the device lines name {len(hosts)} host(s)")
        gpus = _gpu_count(profile)
        nranks = run.get("nranks")
        if isinstance(gpus, int) and isinstance(nranks, int) and nodes is not None and nranks != gpus * nodes:
            warned.append(f"{nranks} ranks, but {nodes} node(s) x {gpus} GPUs is {gpus * nodes}")

    average = run.get("avg_busbw")
    if isinstance(average, (int, float)):
        reasons.append(f"info: nccl-tests Avg bus bandwidth {average:g} GB/s (all sizes; not the pass metric)")
    if rows and all(
        (row.get(placement) or {}).get("wrong") is None and (row.get(placement) or {}).get("max_error") is None
        for row in rows
        for placement in ("out_of_place", "in_place")
    ):
        reasons.append("info: data was not validated (#wrong N/A everywhere)")

    if failed:
        result["status"] = "fail"
    elif unjudged:
        result["status"] = "unjudged"
    elif warned:
        result["status"] = "warn"
    result["reasons"] = failed + ([unjudged] if unjudged else []) + warned + reasons
    return result


def expected_curve(
    profile: dict[str, Any] | None,
    nodes: int | None,
    collective: str | None = None,
    algo: str = "default",
) -> dict[str, Any]:
    """What a plot draws: the line rate in GB/s and the threshold for (collective, nodes, algo).

    Without a collective, the first threshold that covers the node count (all_reduce preferred).
    """
    bandwidth = _bandwidth(profile)
    rate = bandwidth.get("line_rate_gbit_s")
    entry = None
    if isinstance(nodes, int) and nodes >= 1:
        if collective:
            entry = find_threshold(profile, collective, nodes, algo)
        else:
            for name in ["all_reduce", *sorted({str(e.get("collective")) for e in _thresholds(profile)})]:
                entry = find_threshold(profile, name, nodes, algo)
                if entry is not None:
                    break
    return {
        "line_rate_gbyte_s": rate / 8 if isinstance(rate, (int, float)) else None,
        "threshold": entry.get("min_busbw_gbyte_s") if entry else None,
        "min_size_bytes": entry.get("min_size_bytes") if entry else None,
        "collective": entry.get("collective") if entry else collective,
        "verified": entry.get("verified") if entry else None,
        "entry": entry,
    }
