# SPDX-License-Identifier: Apache-2.0
"""How long does a nightly `gpufabric drift` take, with gpufabric's Ansible settings and with stock ones?

Baseline: the same playbook (site.yml in check and diff mode, exactly what `gpufabric drift` runs) on the
same hosts in the same run with Ansible's stock settings (forks 5, no pipelining, implicit fact
gathering, no fact cache). The hosts are lab fleets of 4, 8 and 16 podman containers over real SSH,
started from an image baked once with `gpufabric bake`, so every host starts converged, as a nightly drift
finds a fleet. Per size: one warm-up check (discarded), then stock, tuned, and tuned with the `free`
strategy, each a full check; then one apply (a baked host has no record yet: site.yml writes it) and the
fast check (`gpufabric drift --fast`: drift_check.yml, tuned settings) on the same hosts. Prints the wall
times, the ratios stock/tuned, stock/fast and tuned/fast, the time per host-task, an extrapolation to 1,000
hosts on one controller (tuned and fast) and the AWX job-slice count that finishes within 15 minutes.

    .venv/bin/python bench/fleet_drift.py [--sizes 4,8,16] [--json bench-fleet-drift.json]

Needs root, podman and the lab image (built when missing), like `gpufabric lab up`; takes 20-40 minutes
on a 2-core machine. The controller and every host share this machine's cores: per host-task times are
upper bounds for a controller whose hosts run elsewhere.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpufabric import ansible_settings, bake, drift_events, lab, runs

PROFILE = lab.DEFAULT_PROFILE
IMAGE_TAG = "localhost/gpufabric-bench-baked:latest"
LAB_PREFIX = "gpufabric-bench"
TARGET_HOSTS = 1000
SLICE_BUDGET_S = 15 * 60
# The variants timed per size: (label, settings set, strategy).
VARIANTS = (("stock", ansible_settings.STOCK, None), ("tuned", ansible_settings.TUNED, None))
FREE = ("tuned+free", ansible_settings.TUNED, "free")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def bake_image(work: Path) -> None:
    """Bake the lab profile once, with a one-host lab's settings (SIMULATED hardware root, container knobs)."""
    name = f"{LAB_PREFIX}-bakevars"
    builder = lab.up(name, PROFILE, 1, directory=work / name, progress=say)
    try:
        settings = lab.host_settings(builder)
        options = bake.Options(profile=PROFILE, tag=IMAGE_TAG, extra_vars=settings, artifacts=work / "bake")
        result = bake.bake(options, say)
        if not result.committed:
            raise SystemExit(f"bake failed; artifacts in {work / 'bake'}")
    finally:
        lab.down(name, work / name, progress=say)


def host_tasks(run: runs.PlaybookRun) -> int:
    """Task results on hosts (ok, changed, skipped, failed): the work the run did."""
    kinds = {"runner_on_ok", "runner_on_skipped", "runner_on_failed", "runner_on_unreachable"}
    return sum(1 for event in run.events if event.get("event") in kinds)


def check_once(
    inventory: Path, hosts: list[str], settings: str, strategy: str | None, where: Path, playbook: Path | None = None
) -> dict[str, Any]:
    run = runs.run_playbook(
        playbook or runs.site_playbook(),
        str(inventory),
        check=True,
        diff=True,
        settings=settings,
        strategy=strategy,
        artifacts_dir=where,
        hosts=hosts,
    )
    result = drift_events.summarize(run.events, expected_hosts=hosts)
    tasks = host_tasks(run)
    return {
        "seconds": run.duration_s,
        "exit_code": result.exit_code,
        "host_tasks": tasks,
        "seconds_per_host_task": run.duration_s / tasks if tasks else math.nan,
        "ansible_env": run.settings,
    }


def measure(size: int, work: Path, with_free: bool) -> dict[str, Any]:
    name = f"{LAB_PREFIX}-{size}"
    directory = work / name
    started = time.monotonic()
    fleet = lab.up(name, PROFILE, size, image=IMAGE_TAG, directory=directory, progress=say)
    row: dict[str, Any] = {"hosts": size, "lab_up_s": time.monotonic() - started}
    try:
        hosts = [host.name for host in fleet.hosts]
        say(f"{size} hosts: warm-up check")
        warm = check_once(fleet.inventory, hosts, ansible_settings.TUNED, None, work / f"{name}-warm-up")
        if warm["exit_code"] != 0:
            raise SystemExit(f"{size} hosts: the baked fleet is not clean (exit {warm['exit_code']}); see {work}")
        for label, settings, strategy in (*VARIANTS, *((FREE,) if with_free else ())):
            say(f"{size} hosts: {label}")
            row[label] = check_once(fleet.inventory, hosts, settings, strategy, work / f"{name}-{label}")
        say(f"{size} hosts: apply (writes the record the fast check reads)")
        applied = runs.run_playbook(
            runs.site_playbook(), str(fleet.inventory), artifacts_dir=work / f"{name}-apply", hosts=hosts
        )
        row["apply_s"] = applied.duration_s
        say(f"{size} hosts: fast")
        fast = check_once(
            fleet.inventory, hosts, ansible_settings.TUNED, None, work / f"{name}-fast", runs.drift_check_playbook()
        )
        if fast["exit_code"] != 0:
            raise SystemExit(f"{size} hosts: the fast check found drift (exit {fast['exit_code']}); see {work}")
        row["fast"] = fast
    finally:
        lab.down(name, directory, progress=say)
    return row


def extrapolate(rows: list[dict[str, Any]], label: str = "tuned") -> dict[str, Any]:
    """Wall time = fixed + per_host x hosts, fitted through the two largest fleets (one variant)."""
    small, large = rows[-2], rows[-1]
    per_host = (large[label]["seconds"] - small[label]["seconds"]) / (large["hosts"] - small["hosts"])
    per_host = max(per_host, large[label]["seconds"] / large["hosts"] / 4)  # never a flat or falling line
    fixed = max(large[label]["seconds"] - per_host * large["hosts"], 0.0)
    at_target = fixed + per_host * TARGET_HOSTS
    slices = next(
        (k for k in range(1, TARGET_HOSTS + 1) if fixed + per_host * math.ceil(TARGET_HOSTS / k) <= SLICE_BUDGET_S),
        TARGET_HOSTS,
    )
    return {
        "variant": label,
        "fixed_s": fixed,
        "per_host_s": per_host,
        "hosts": TARGET_HOSTS,
        "one_controller_s": at_target,
        "awx_slices_for_15_min": slices,
        "slice_s": fixed + per_host * math.ceil(TARGET_HOSTS / slices),
    }


def print_table(rows: list[dict[str, Any]], outlooks: list[dict[str, Any]]) -> None:
    labels = [label for label, _settings, _strategy in (*VARIANTS, FREE) if label in rows[0]] + ["fast"]
    header = f"{'hosts':>5} " + " ".join(f"{label + ' s':>12}" for label in labels)
    header += f" {'stock/tuned':>11} {'stock/fast':>10} {'tuned/fast':>10} {'s/host-task':>11} {'host-tasks':>10}"
    print(header)
    for row in rows:
        times = " ".join(f"{row[label]['seconds']:12.1f}" for label in labels)
        stock, tuned, fast = (row[label]["seconds"] for label in ("stock", "tuned", "fast"))
        per_task = row["tuned"]["seconds_per_host_task"]
        print(
            f"{row['hosts']:5d} {times} {stock / tuned:10.2f}x {stock / fast:9.2f}x {tuned / fast:9.2f}x"
            f" {per_task:11.3f} {row['tuned']['host_tasks']:10d}"
        )
    for outlook in outlooks:
        print(
            f"\nfit ({outlook['variant']}): {outlook['fixed_s']:.1f} s + {outlook['per_host_s']:.2f} s per host; "
            f"{TARGET_HOSTS} hosts on one controller like this one: {outlook['one_controller_s'] / 60:.1f} min"
        )
        print(
            f"AWX job slicing: {outlook['awx_slices_for_15_min']} slices of "
            f"{math.ceil(TARGET_HOSTS / outlook['awx_slices_for_15_min'])} hosts finish in "
            f"{outlook['slice_s'] / 60:.1f} min each (within 15 min, slices run in parallel on separate nodes)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="4,8,16", help="lab fleet sizes, comma-separated (default 4,8,16)")
    parser.add_argument("--no-free", action="store_true", help="skip the tuned+free strategy variant")
    parser.add_argument("--json", type=Path, help="also write the measurements as JSON here")
    args = parser.parse_args()
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    if len(sizes) < 2:
        parser.error("--sizes needs at least two sizes (the extrapolation fits a line)")
    with tempfile.TemporaryDirectory(prefix="gpufabric-bench-") as scratch:
        work = Path(scratch)
        say(f"baking {PROFILE} into {IMAGE_TAG}")
        bake_image(work)
        rows = [measure(size, work, not args.no_free) for size in sizes]
    outlooks = [extrapolate(rows, "tuned"), extrapolate(rows, "fast")]
    print_table(rows, outlooks)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "outlooks": outlooks}, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
