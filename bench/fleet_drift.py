# SPDX-License-Identifier: Apache-2.0
"""How long does a nightly `gpufabric drift` take: the default (fast) check against Ansible's check mode?

Baseline: the thorough check (`gpufabric drift --thorough`: site.yml in check and diff mode) on the same
hosts in the same run, with Ansible's stock settings (forks 5, no pipelining, implicit fact gathering, no
fact cache) and with gpufabric's tuned ones. The hosts are lab fleets of podman containers over real SSH,
started from an image baked once with `gpufabric bake`, so every host starts converged, as a nightly drift
finds a fleet. At the --compare sizes (default 16): one warm-up check (discarded), then stock and tuned
check mode (and, with --free, tuned with the `free` strategy). At every size (default 16 and 32): one apply
(a baked host has no record yet: site.yml writes it, as the first apply after boot does) and the default
check (drift_check.yml, tuned settings) on the same hosts. Prints the wall times, the ratios stock/tuned,
stock/fast and tuned/fast, a least-squares line of the fast check's time over the sizes, its extrapolation to
1,000 hosts on one controller and the AWX job-slice count that finishes within 15 minutes.

    .venv/bin/python bench/fleet_drift.py [--sizes 16,32] [--compare 16] [--json bench-fleet-drift.json]

Needs root, podman and the lab image (built when missing), like `gpufabric lab up`; takes about 40 minutes
on a 2-core machine with the defaults. The controller and every host share this machine's cores: per-host
times are upper bounds for a controller whose hosts run elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpufabric import ansible_settings, bake, drift_events, lab, runs
from gpufabric.playbook_args import PlaybookArgs

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
        settings = work / "bake-vars.json"  # -e @FILE, as `gpufabric bake -e @bake-vars.yml` takes them
        settings.write_text(json.dumps(lab.host_settings(builder)), encoding="utf-8")
        args = PlaybookArgs(extra_vars=(f"@{settings}",))
        options = bake.Options(profile=PROFILE, tag=IMAGE_TAG, args=args, artifacts=work / "bake")
        result = bake.bake(options, say)
        if not result.committed:
            raise SystemExit(f"bake failed; artifacts in {work / 'bake'}")
    finally:
        lab.down(name, work / name, progress=say)


def host_tasks(run: runs.PlaybookRun) -> int:
    """Task results on hosts (ok, changed, skipped, failed): the work the run did."""
    kinds = {"runner_on_ok", "runner_on_skipped", "runner_on_failed", "runner_on_unreachable"}
    return sum(1 for event in run.events if event.get("event") in kinds)


@contextlib.contextmanager
def mitogen_config(work: Path) -> Iterator[None]:
    """Ansible runs with Mitogen's strategy (mitogen_linear) through a user ansible.cfg, as Mitogen documents it:
    gpufabric reads that file as it reads yours, and its settings win over the tuned set's."""
    try:
        import ansible_mitogen  # optional: only --mitogen needs it
    except ImportError:
        raise SystemExit("--mitogen needs Mitogen in this Python: pip install mitogen") from None
    config = work / "mitogen.cfg"
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    config.write_text(f"[defaults]\nstrategy_plugins = {plugins}\nstrategy = mitogen_linear\n", encoding="utf-8")
    before = os.environ.get("ANSIBLE_CONFIG")
    os.environ["ANSIBLE_CONFIG"] = str(config)
    try:
        yield
    finally:
        if before is None:
            del os.environ["ANSIBLE_CONFIG"]
        else:
            os.environ["ANSIBLE_CONFIG"] = before


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


def measure(size: int, work: Path, compare: bool, with_free: bool, with_mitogen: bool) -> dict[str, Any]:
    """One lab fleet of `size` baked hosts: with `compare`, a warm-up check (discarded), then stock and tuned
    check mode (and tuned+free, tuned+mitogen); then the apply that writes the record, and the fast check
    (and, compared with Mitogen, the fast check with Mitogen)."""
    name = f"{LAB_PREFIX}-{size}"
    directory = work / name
    started = time.monotonic()
    fleet = lab.up(name, PROFILE, size, image=IMAGE_TAG, directory=directory, progress=say)
    row: dict[str, Any] = {"hosts": size, "lab_up_s": time.monotonic() - started}
    try:
        hosts = [host.name for host in fleet.hosts]
        if compare:
            say(f"{size} hosts: warm-up check")
            warm = check_once(fleet.inventory, hosts, ansible_settings.TUNED, None, work / f"{name}-warm-up")
            if warm["exit_code"] != 0:
                raise SystemExit(f"{size} hosts: the baked fleet is not clean (exit {warm['exit_code']}); see {work}")
            for label, settings, strategy in (*VARIANTS, *((FREE,) if with_free else ())):
                say(f"{size} hosts: {label}")
                row[label] = check_once(fleet.inventory, hosts, settings, strategy, work / f"{name}-{label}")
            if with_mitogen:
                say(f"{size} hosts: tuned+mitogen")
                with mitogen_config(work):
                    row["tuned+mitogen"] = check_once(
                        fleet.inventory, hosts, ansible_settings.TUNED, None, work / f"{name}-tuned+mitogen"
                    )
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
        if compare and with_mitogen:
            say(f"{size} hosts: fast+mitogen")
            with mitogen_config(work):
                row["fast+mitogen"] = check_once(
                    fleet.inventory,
                    hosts,
                    ansible_settings.TUNED,
                    None,
                    work / f"{name}-fast+mitogen",
                    runs.drift_check_playbook(),
                )
    finally:
        lab.down(name, directory, progress=say)
    return row


def extrapolate(rows: list[dict[str, Any]], label: str) -> dict[str, Any] | None:
    """Wall time = fixed + per_host x hosts, a least-squares line through every size measured with `label`;
    None with fewer than two such sizes."""
    points = [(row["hosts"], row[label]["seconds"]) for row in rows if label in row]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _y in points) / len(points)
    mean_y = sum(y for _x, y in points) / len(points)
    per_host = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _y in points)
    largest = max(points)
    per_host = max(per_host, largest[1] / largest[0] / 4)  # never a flat or falling line
    fixed = max(mean_y - per_host * mean_x, 0.0)
    at_target = fixed + per_host * TARGET_HOSTS
    slices = next(
        (k for k in range(1, TARGET_HOSTS + 1) if fixed + per_host * math.ceil(TARGET_HOSTS / k) <= SLICE_BUDGET_S),
        TARGET_HOSTS,
    )
    return {
        "variant": label,
        "sizes": [x for x, _y in points],
        "fixed_s": fixed,
        "per_host_s": per_host,
        "hosts": TARGET_HOSTS,
        "one_controller_s": at_target,
        "awx_slices_for_15_min": slices,
        "slice_s": fixed + per_host * math.ceil(TARGET_HOSTS / slices),
    }


def _seconds(row: dict[str, Any], label: str) -> str:
    return f"{row[label]['seconds']:12.1f}" if label in row else f"{'-':>12}"


def _ratio(row: dict[str, Any], slow: str, fast: str) -> str:
    if slow in row and fast in row:
        return f"{row[slow]['seconds'] / row[fast]['seconds']:10.2f}x"
    return f"{'-':>11}"


def print_table(rows: list[dict[str, Any]], outlooks: list[dict[str, Any]]) -> None:
    labels = [label for label, _settings, _strategy in (*VARIANTS, FREE) if any(label in row for row in rows)]
    labels += [label for label in ("tuned+mitogen", "fast", "fast+mitogen") if any(label in row for row in rows)]
    header = f"{'hosts':>5} " + " ".join(f"{label + ' s':>12}" for label in labels)
    header += f" {'stock/tuned':>11} {'stock/fast':>11} {'tuned/fast':>11} {'apply s':>9} {'fast host-tasks':>15}"
    print(header)
    for row in rows:
        times = " ".join(_seconds(row, label) for label in labels)
        pairs = (("stock", "tuned"), ("stock", "fast"), ("tuned", "fast"))
        ratios = " ".join(_ratio(row, slow, fast) for slow, fast in pairs)
        print(f"{row['hosts']:5d} {times} {ratios} {row['apply_s']:9.1f} {row['fast']['host_tasks']:15d}")
    for outlook in outlooks:
        sizes = ", ".join(str(size) for size in outlook["sizes"])
        print(
            f"\nfit ({outlook['variant']}, over {sizes} hosts): {outlook['fixed_s']:.1f} s + "
            f"{outlook['per_host_s']:.2f} s per host; {TARGET_HOSTS} hosts on one controller like this one: "
            f"{outlook['one_controller_s'] / 60:.1f} min"
        )
        print(
            f"AWX job slicing: {outlook['awx_slices_for_15_min']} slice(s) of "
            f"{math.ceil(TARGET_HOSTS / outlook['awx_slices_for_15_min'])} hosts finish in "
            f"{outlook['slice_s'] / 60:.1f} min each (within 15 min, slices run in parallel on separate nodes)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="16,32", help="lab fleet sizes, comma-separated (default 16,32)")
    parser.add_argument(
        "--compare", default="16", help="the sizes at which check mode (stock, tuned) runs too (default 16)"
    )
    parser.add_argument("--free", action="store_true", help="also time tuned check mode with the free strategy")
    parser.add_argument(
        "--mitogen", action="store_true", help="also time tuned check mode and the fast check with Mitogen's strategy"
    )
    parser.add_argument("--json", type=Path, help="also write the measurements as JSON here")
    args = parser.parse_args()
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    compare = {int(size) for size in args.compare.split(",") if size}
    if len(sizes) < 2:
        parser.error("--sizes needs at least two sizes (the extrapolation fits a line)")
    if not compare <= set(sizes):
        parser.error(f"--compare {args.compare}: every size compared must be one of --sizes {args.sizes}")
    with tempfile.TemporaryDirectory(prefix="gpufabric-bench-") as scratch:
        work = Path(scratch)
        say(f"baking {PROFILE} into {IMAGE_TAG}")
        bake_image(work)
        rows = [measure(size, work, size in compare, args.free, args.mitogen) for size in sizes]
    outlooks = [outlook for outlook in (extrapolate(rows, "tuned"), extrapolate(rows, "fast")) if outlook]
    print_table(rows, outlooks)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "outlooks": outlooks}, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
