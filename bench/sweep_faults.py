# SPDX-License-Identifier: Apache-2.0
"""How fast and how precisely does the sweep (driver/gpufabric/sweep.py) find bad nodes and rails?

Runs the real scheduling and inference code against a SIMULATED fabric: every pair test's per-rail busbw comes
from a fault model, is judged against the profile's two-node floor (divided by the rails: one GPU per node per
rail, NCCL_TESTS_SPLIT_MASK=0x7) by the sweep's own judge, and fed back. Faults (1-3 % of hosts, kinds in turn):
a slow node (every rail at half the floor), a slow rail (one rail at half the floor) and a flapping link (one
rail at half the floor in a share --flap of its tests). Healthy hosts are not spotless: a share --noise of pair
tests reads one random rail slow for that test only, and a share --crash of pair tests fails outright.

Baseline, in the same run and on the same fault draws: one host at a time against a reference host known to be
good (N - 1 serial pair tests, each host convicted on one bad result), the simplest sweep one can script.

Prints, per fleet size and bad share: rounds after the first pass (mean, max), recall (all, and per kind),
precision, unresolved suspects, and the wall time projected at --pair-test-s per round, beside the baseline's.

    .venv/bin/python bench/sweep_faults.py [--sizes 64,256,1024] [--seeds 50] [--pair-test-s 120]

The pair-test duration is a parameter: no measured two-node nccl-tests run of a catalog profile is in this
repository (tests/fixtures/nccl and the reference example are SYNTHETIC), so the default 120 s (launch, NCCL
init and an all_reduce size sweep to 8 GiB) is an assumption, UNVERIFIED; the table also prints the longest
pair test that keeps the worst run within --budget-min.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufabric import sweep
from gpufabric.collection import plugin_utils

KINDS = ("node", "rail", "flap")


@dataclass(frozen=True)
class Fault:
    host: str
    kind: str  # node, rail or flap
    rail: int | None  # None for a node fault


class Fabric:
    """SIMULATED per-rail busbw of a pair test under the injected faults."""

    def __init__(self, faults: Sequence[Fault], rails: int, floor: float, args: argparse.Namespace, seed: int):
        self.faults = {(fault.host, fault.rail): fault for fault in faults}
        self.rails = rails
        self.floor = floor
        self.args = args
        self.rng = random.Random(seed ^ 0x5EED)
        self.tests = 0

    def rail_ok(self, host: str, rail: int) -> bool:
        if (host, None) in self.faults:
            return False
        fault = self.faults.get((host, rail))
        if fault is None:
            return True
        return fault.kind == "flap" and self.rng.random() >= self.args.flap

    def measure(self, pairs: Sequence[sweep.Pair]) -> Mapping[sweep.Pair, Sequence[float | None]]:
        out: dict[sweep.Pair, Sequence[float | None]] = {}
        for pair in pairs:
            self.tests += 1
            if self.rng.random() < self.args.crash:
                out[pair] = [None] * self.rails
                continue
            values: list[float | None] = []
            noisy = self.rng.randrange(self.rails) if self.rng.random() < self.args.noise else None
            for rail in range(self.rails):
                healthy = all(self.rail_ok(host, rail) for host in pair)
                factor = self.rng.uniform(1.05, 1.2) if healthy and rail != noisy else self.rng.uniform(0.4, 0.6)
                values.append(self.floor * factor)
            out[pair] = values
        return out


def inject(hosts: Sequence[str], share: float, rails: int, rng: random.Random, turn: int) -> list[Fault]:
    """``share`` of ``hosts`` bad (at least one), the kinds in turn from KINDS[turn] (so one fault cycles too)."""
    count = max(1, round(share * len(hosts)))
    bad = rng.sample(list(hosts), count)
    kinds = [KINDS[(turn + index) % len(KINDS)] for index in range(count)]
    rng.shuffle(kinds)
    return [
        Fault(host, kind, None if kind == "node" else rng.randrange(rails))
        for host, kind in zip(bad, kinds, strict=True)
    ]


def score(findings: Sequence[tuple[str, int | None]], faults: Sequence[Fault]) -> tuple[dict[str, list[int]], int]:
    """({kind: [found, injected]}, true findings); a node fault must be named as the node, a rail fault as its rail."""
    truth = {(fault.host, fault.rail): fault for fault in faults}
    per_kind = {kind: [0, 0] for kind in KINDS}
    for fault in faults:
        per_kind[fault.kind][1] += 1
    true = 0
    for key in set(findings):
        if key in truth:
            true += 1
            per_kind[truth[key].kind][0] += 1
    return per_kind, true


def baseline(hosts: Sequence[str], fabric: Fabric, floor: sweep.Floor) -> list[tuple[str, int | None]]:
    """One host at a time against hosts[0], taken as the known-good reference (it is never a fault here)."""
    reference = hosts[0]
    findings: list[tuple[str, int | None]] = []
    for host in hosts[1:]:
        values = fabric.measure([(reference, host)])[(reference, host)]
        statuses = [sweep.judge_busbw(value, floor)[0] for value in values]
        bad = [rail for rail, status in enumerate(statuses) if status != "pass"]
        if len(bad) == len(statuses):
            findings.append((host, None))
        else:
            findings += [(host, rail) for rail in bad]
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--shares", default="0.01,0.02,0.03", help="shares of bad hosts")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--profile", default="aws/p5.48xlarge", help="catalog profile: its two-node floor and GPUs")
    parser.add_argument("--rack", type=int, default=32, help="hosts per rack (the topology preference)")
    parser.add_argument("--flap", type=float, default=0.5, help="share of tests a flapping link reads slow")
    parser.add_argument("--noise", type=float, default=0.01, help="share of pair tests with one transient slow rail")
    parser.add_argument("--crash", type=float, default=0.002, help="share of pair tests that fail outright")
    parser.add_argument("--max-follow-up", type=int, default=3)
    parser.add_argument("--clear-after", type=int, default=sweep.Options.clear_after)
    parser.add_argument("--convict-after", type=int, default=sweep.Options.convict_after)
    parser.add_argument("--probation", type=int, default=sweep.Options.probation)
    parser.add_argument("--min-follow-up", type=int, default=sweep.Options.min_follow_up)
    parser.add_argument("--pair-test-s", type=float, default=120.0, help="one pair test (a round), seconds; UNVERIFIED")
    parser.add_argument("--budget-min", type=float, default=30.0)
    args = parser.parse_args()

    profile = plugin_utils("fabric_catalog").load_catalog().get(args.profile)
    rails = int(profile["gpu"]["count"])
    node_floor = sweep.two_node_floor(profile)
    if node_floor is None:
        raise SystemExit(f"profile {args.profile} has no two-node all_reduce threshold in the catalog")
    floor = node_floor.per_rail(rails)
    print(
        f"profile {args.profile}: {rails} rails, floor {node_floor.busbw_gbyte_s:g} GB/s per pair test "
        f"({floor.busbw_gbyte_s:.2f} per rail, derived); SIMULATED fabric"
    )
    print(
        f"faults: node/rail/flap in turn, flap slow in {args.flap:.0%} of tests; noise {args.noise:.1%} of tests "
        f"one rail, crash {args.crash:.1%}; racks of {args.rack}; {args.seeds} seeds per row; "
        f"at most {args.max_follow_up} rounds after the first pass; convict after {args.convict_after}, "
        f"clear after {args.clear_after}, probation {args.probation}, at least {args.min_follow_up} after it"
    )
    print(
        f"pair-test duration {args.pair_test_s:g} s per round (parameter, UNVERIFIED); baseline: one host at a "
        "time against a known-good reference, N-1 serial pair tests"
    )
    header = (
        f"{'hosts':>5} {'bad':>4} {'faults':>6} {'rounds+':>7} {'max':>3} {'found+':>6} {'recall':>6} {'node':>5} "
        f"{'rail':>5} {'flap':>5} {'solid':>5} {'prec':>5} {'pmin':>5} {'unres':>5} {'wall min':>8} "
        f"{'max s/test':>10} {'base rec':>8} {'base prec':>9} {'base wall h':>11} {'base/sweep':>10} {'cpu s':>6}"
    )
    print(header)
    for size in [int(value) for value in args.sizes.split(",")]:
        hosts = [f"node-{index:04d}" for index in range(size)]
        groups = {host: f"rack-{index // args.rack}" for index, host in enumerate(hosts)}
        for share in [float(value) for value in args.shares.split(",")]:
            rounds, precisions, unresolved, found_by, faults_total, solid_all = [], [], [], [], 0, 0
            pooled = [0, 0]  # true findings, findings
            kinds = {kind: [0, 0] for kind in KINDS}
            base_found = base_true = base_findings = 0
            started = time.process_time()
            for seed in range(args.seeds):
                rng = random.Random(seed * 7919 + size)
                faults = inject(hosts[1:], share, rails, rng, seed)  # hosts[0] is the baseline's reference
                faults_total += len(faults)
                fabric = Fabric(faults, rails, floor.busbw_gbyte_s, args, seed)
                options = sweep.Options(
                    rails=rails,
                    seed=seed,
                    groups=groups,
                    max_follow_up=args.max_follow_up,
                    clear_after=args.clear_after,
                    convict_after=args.convict_after,
                    probation=args.probation,
                    min_follow_up=args.min_follow_up,
                )
                result = sweep.sweep(hosts, sweep.judged(fabric.measure, floor), options)
                found = [(finding.host, finding.rail) for finding in result.findings]
                per_kind, true = score(found, faults)
                truth = {(fault.host, fault.rail) for fault in faults}
                found_by.append(max((f.round for f in result.findings if (f.host, f.rail) in truth), default=1) - 1)
                solid_all += per_kind["node"][0] + per_kind["rail"][0] == per_kind["node"][1] + per_kind["rail"][1]
                for kind, (hit, total) in per_kind.items():
                    kinds[kind][0] += hit
                    kinds[kind][1] += total
                precisions.append(true / len(found) if found else 1.0)
                pooled[0] += true
                pooled[1] += len(found)
                rounds.append(result.follow_up_rounds)
                unresolved.append(len(result.unresolved))
                base = baseline(hosts, Fabric(faults, rails, floor.busbw_gbyte_s, args, seed), floor)
                base_per_kind, base_hits = score(base, faults)
                base_found += sum(hit for hit, _total in base_per_kind.values())
                base_true += base_hits
                base_findings += len(set(base))
            cpu = (time.process_time() - started) / args.seeds
            found_all = sum(hit for hit, _total in kinds.values())
            worst = max(rounds) + 1
            wall_min = statistics.mean(rounds) * args.pair_test_s / 60 + args.pair_test_s / 60
            base_wall_h = (size - 1) * args.pair_test_s / 3600

            def rate(pair: list[int]) -> str:
                return f"{pair[0] / pair[1]:.3f}" if pair[1] else "-"

            print(
                f"{size:>5} {share:>4.0%} {faults_total / args.seeds:>6.1f} {statistics.mean(rounds):>7.2f} "
                f"{max(rounds):>3} {max(found_by):>6} {found_all / faults_total:>6.3f} {rate(kinds['node']):>5} "
                f"{rate(kinds['rail']):>5} {rate(kinds['flap']):>5} {solid_all / args.seeds:>5.2f} "
                f"{pooled[0] / pooled[1] if pooled[1] else 1.0:>5.3f} {min(precisions):>5.3f} "
                f"{statistics.mean(unresolved):>5.2f} {wall_min:>8.1f} {args.budget_min * 60 / worst:>10.0f} "
                f"{base_found / faults_total:>8.3f} {(base_true / base_findings if base_findings else 1):>9.3f} "
                f"{base_wall_h:>11.1f} {base_wall_h * 60 / wall_min:>9.0f}x {cpu:>6.2f}"
            )
    print("prec = true findings / findings over all runs of the row; pmin = the worst run's; unres = suspects left")
    print(
        "found+ = worst round after the first pass by which the sweep had convicted the faults it found; solid = "
        "share of runs with every node and rail fault found"
    )
    print(
        "rounds+ = rounds after the first pass; wall min = (1 + mean rounds+) x pair-test s; max s/test = the "
        "longest pair test that keeps the worst run within the budget; base/sweep = baseline wall / sweep wall"
    )


if __name__ == "__main__":
    main()
