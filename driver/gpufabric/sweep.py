# SPDX-License-Identifier: Apache-2.0
"""Find the bad node or NIC rail among N hosts with rounds of two-node tests (issue 44, scope 2).

Scheduling and inference only, no I/O: the caller passes ``run_round``, a callable that runs one round's host pairs
(all in parallel: every host is in at most one pair per round) and returns one :class:`PairResult` per pair. The
same code drives the simulation bench (bench/sweep_faults.py) and, later, real nccl-tests runs.

The method follows what the fleet tools in docs/sweep.md do (Google's cluster health scanner: random and intra-rack
pairs, then failures re-paired with known-good nodes; AWS pairwise NCCL with ``NCCL_TESTS_SPLIT_MASK=0x7``, one
GPU per node, so one two-node run measures every rail at once):

1. The first pass pairs every host with another at random (hosts of the same group first when a host -> group map
   is given: rack, NVLink domain, placement group). With an odd host count the host left over is tested in the
   next round, with a proven-good partner.
2. Each pair test judges every rail (or the node as a whole when the fabric has no per-rail runs): pass, slow
   (below the profile's two-node floor) or fail (the run did not complete).
3. A unit (host, rail) that read slow or failed is a suspect. Later rounds pair each suspect host with a host
   proven good on every rail (a partner it has not had before, of its group when possible); hosts not needed as
   partners are re-paired among themselves, which re-tests them for free (a round takes as long with them).
4. Conviction rule (precision first): a unit is convicted after ``convict_after`` (2) bad results of one kind (slow,
   or fail) with distinct partners that are proven good on that rail: proven when the test ran, or since (a
   first-pass partner that later passed with a proven-good host). A bad result between two unproven units (the first
   pass) makes both suspects; a bad result of a proven-good unit with an unproven partner is blamed on the partner
   alone. A suspect is cleared after ``clear_after`` (1) consecutive passes with proven-good partners, and is a
   suspect again at its next bad result. Proven good: passed and never bad, or cleared. A cleared unit that read bad
   with a proven-good partner stays on probation (still scheduled) until it passes ``probation`` (2) times in a row.
   So a flapping unit is convicted once it has read bad with two good partners; one that passes every retest is
   cleared (the bench measures how often), and suspects left when the round budget ends are reported unresolved,
   never convicted.
5. A host whose every rail is convicted is reported as the bad node; otherwise each convicted rail is named.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "slow", "fail"]
STATUSES: tuple[Status, ...] = ("pass", "slow", "fail")
Pair = tuple[str, str]
# The catalog's two-node floor is for the collective the verify role runs by default (roles/nccl_tests).
FLOOR_COLLECTIVE = "all_reduce"
PROVEN = ("good", "cleared")


@dataclass(frozen=True)
class PairResult:
    """One pair test: a status per rail (one entry when the fabric gives no per-rail runs) and the evidence."""

    pair: Pair
    rails: tuple[Status, ...]
    detail: tuple[str, ...] = ()  # per rail, e.g. "41.2 GB/s < floor 48.0 GB/s"; may be empty


@dataclass(frozen=True)
class Observation:
    round: int
    partner: str
    status: Status
    partner_good: bool  # the partner was proven good on this rail when the test ran
    self_good: bool = False  # this side was proven good on this rail when the test ran
    detail: str = ""

    @property
    def counts(self) -> bool:
        """False for a bad result of a proven-good unit with an unproven partner: the partner is blamed."""
        return self.status == "pass" or self.partner_good or not self.self_good


@dataclass(frozen=True)
class Finding:
    """A convicted host (``rail`` None: every rail bad, or no per-rail runs) or one of its rails."""

    host: str
    rail: int | None
    evidence: tuple[tuple[int, Observation], ...]  # (rail, observation) of every bad result with a good partner
    round: int = 0  # the round after which the sweep had convicted it

    def describe(self) -> str:
        where = self.host if self.rail is None else f"{self.host} rail {self.rail}"
        tests = "; ".join(
            f"round {obs.round} rail {rail} with {obs.partner}: {obs.status}"
            + (f" ({obs.detail})" if obs.detail else "")
            for rail, obs in self.evidence
        )
        return f"{where}: {tests}"


@dataclass(frozen=True)
class Options:
    rails: int = 1  # rails per host judged separately; 1 = the node as a whole
    seed: int = 0
    groups: Mapping[str, str] | None = None  # host -> rack / NVLink domain / placement group: preferred partners
    max_follow_up: int = 3  # rounds after the first pass; suspects left then are reported unresolved
    min_follow_up: int = (
        0  # rounds after the first pass run even when nothing is suspect: every host meets new partners
    )
    convict_after: int = 2
    clear_after: int = 1
    retest_clean: bool = True  # pair hosts not needed as partners among themselves in follow-up rounds
    probation: int = 2  # passes in a row a cleared unit with a bad result against a good partner still needs


@dataclass(frozen=True)
class Round:
    number: int
    pairs: tuple[Pair, ...]
    results: tuple[PairResult, ...]


@dataclass
class SweepResult:
    hosts: tuple[str, ...]
    rails: int
    rounds: list[Round] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unresolved: list[tuple[str, int]] = field(default_factory=list)  # (host, rail) still suspect at the end
    watch: list[tuple[str, int]] = field(default_factory=list)  # on probation at the end: passed, but read bad once
    untested: list[str] = field(default_factory=list)  # hosts no round could pair (a fleet of one)

    @property
    def follow_up_rounds(self) -> int:
        """Rounds after the first full pass (the round that tests every host, or all but one of an odd count)."""
        return max(0, len(self.rounds) - 1)

    @property
    def bad_hosts(self) -> list[str]:
        return sorted({finding.host for finding in self.findings})


RunRound = Callable[[Sequence[Pair]], Iterable[PairResult]]


def _strongest(bad: list[Observation]) -> dict[str, Observation]:
    """{partner: first bad result} of the kind (slow or fail) with the most partners: a failed run says nothing
    about which rail is slow and a slow rail nothing about crashes, so evidence of the two kinds does not add up."""
    kinds: dict[str, dict[str, Observation]] = {}
    for obs in bad:
        kinds.setdefault(obs.status, {}).setdefault(obs.partner, obs)
    return max(kinds.values(), key=len, default={})


class _Unit:
    """What the sweep knows about one (host, rail)."""

    __slots__ = ("cleared", "observations")

    def __init__(self) -> None:
        self.observations: list[Observation] = []
        self.cleared = False

    def bad_good_partners(self) -> dict[str, Observation]:
        """The bad results of one kind (slow, or fail) with the most distinct partners proven good then."""
        return _strongest([obs for obs in self.observations if obs.status != "pass" and obs.partner_good])

    def state(self, convict_after: int) -> str:
        """untested, good (passed, never bad), suspect, cleared or convicted, from this unit's own record (a bad
        result counts against it when the partner was proven good then); _Sweep.state adds what partners show since."""
        if not self.observations:
            return "untested"
        if len(self.bad_good_partners()) >= convict_after:
            return "convicted"
        if self.cleared:
            return "cleared"
        if all(obs.status == "pass" for obs in self.observations if obs.counts):
            return "good"
        return "suspect"


class _Sweep:
    def __init__(self, hosts: Sequence[str], options: Options) -> None:
        if options.rails < 1:
            raise ValueError(f"rails must be at least 1, got {options.rails}")
        if len(set(hosts)) != len(hosts):
            raise ValueError("hosts must be distinct")
        self.hosts = tuple(hosts)
        self.options = options
        self.rng = random.Random(options.seed)
        self.units = {(host, rail): _Unit() for host in hosts for rail in range(options.rails)}
        self.met: set[frozenset[str]] = set()
        # (host, rail) -> (round, evidence) when convicted: a verdict stands when a partner later reads bad once.
        self.convicted: dict[tuple[str, int], tuple[int, tuple[Observation, ...]]] = {}

    def attributed(self, host: str, rail: int) -> dict[str, Observation]:
        """Bad results of (host, rail) of one kind, by partner, whose partner was proven good then or is now."""
        bad = [
            obs
            for obs in self.units[(host, rail)].observations
            if obs.status != "pass"
            and obs.counts
            and (obs.partner_good or self.units[(obs.partner, rail)].state(self.options.convict_after) in PROVEN)
        ]
        return _strongest(bad)

    def state(self, host: str, rail: int) -> str:
        if (host, rail) in self.convicted:
            return "convicted"
        own = self.units[(host, rail)].state(self.options.convict_after)
        if own in ("untested", "convicted"):
            return own
        return "convicted" if len(self.attributed(host, rail)) >= self.options.convict_after else own

    def proven(self, host: str, rail: int) -> bool:
        return self.state(host, rail) in PROVEN

    def host_states(self, host: str) -> set[str]:
        return {self.state(host, rail) for rail in range(self.options.rails)}

    def on_probation(self, host: str, rail: int) -> bool:
        """Proven again, but read bad with a good partner and has not passed ``probation`` times in a row since."""
        unit = self.units[(host, rail)]
        if not self.options.probation or unit.state(self.options.convict_after) not in PROVEN:
            return False
        if not self.attributed(host, rail):
            return False
        streak = 0
        for obs in reversed([obs for obs in unit.observations if obs.counts]):
            if obs.status != "pass":
                break
            streak += obs.partner_good
        return streak < self.options.probation

    def open_hosts(self) -> list[str]:
        """Hosts still to be tested, with a suspect rail or with a rail on probation."""
        rails = range(self.options.rails)
        return [
            host
            for host in self.hosts
            if self.host_states(host) & {"untested", "suspect"} or any(self.on_probation(host, rail) for rail in rails)
        ]

    def group(self, host: str) -> str | None:
        return (self.options.groups or {}).get(host)

    def pick(self, host: str, candidates: list[str]) -> str | None:
        """A partner for ``host`` it has not met, of its own group when one is free."""
        fresh = [other for other in candidates if frozenset((host, other)) not in self.met]
        if not fresh:
            return None
        same = [other for other in fresh if self.group(other) is not None and self.group(other) == self.group(host)]
        return self.rng.choice(same or fresh)

    def pair_up(self, hosts: list[str]) -> list[Pair]:
        """Random disjoint pairs of ``hosts``, within groups first, avoiding pairs already met where possible."""
        pool = list(hosts)
        self.rng.shuffle(pool)
        pairs: list[Pair] = []
        free = set(pool)
        for host in pool:
            if host not in free:
                continue
            free.discard(host)
            others = [other for other in pool if other in free]
            partner = self.pick(host, others)
            if partner is None and others:
                partner = self.rng.choice(others)  # every pair met before: re-test one anyway
            if partner is None:
                free.add(host)
                continue
            free.discard(partner)
            pairs.append((host, partner))
        return pairs

    def schedule(self, last: bool) -> list[Pair]:
        """One follow-up round: suspects (and an untested leftover) with proven-good partners, then the rest
        (not in the ``last`` round: a suspect found there could not be resolved)."""
        rails = range(self.options.rails)
        waiting = self.open_hosts()
        reference = [host for host in self.hosts if all(self.proven(host, rail) for rail in rails)]
        reference = [host for host in reference if host not in set(waiting)]
        self.rng.shuffle(reference)
        busy: set[str] = set()
        pairs: list[Pair] = []
        self.rng.shuffle(waiting)
        # Suspects with the most bad results first: they are nearest to a verdict.
        waiting.sort(key=lambda host: -sum(len(self.attributed(host, rail)) for rail in rails))
        unpaired = []
        for host in waiting:
            partner = self.pick(host, [other for other in reference if other not in busy and other != host])
            if partner is None:
                unpaired.append(host)
                continue
            busy.update((host, partner))
            pairs.append((host, partner))
        # No good partner left (a small or very sick fleet): open hosts meet each other.
        for host in unpaired:
            if host in busy:
                continue
            partner = self.pick(host, [other for other in unpaired if other not in busy and other != host])
            if partner is not None:
                busy.update((host, partner))
                pairs.append((host, partner))
        if self.options.retest_clean and not last:
            idle = [host for host in reference if host not in busy]
            pairs += self.pair_up(idle)
        return pairs

    def record(self, number: int, pairs: Sequence[Pair], results: Iterable[PairResult]) -> tuple[PairResult, ...]:
        by_pair: dict[frozenset[str], PairResult] = {}
        for result in results:
            if len(result.rails) != self.options.rails:
                raise ValueError(
                    f"the result for {result.pair} has {len(result.rails)} rail statuses, expected {self.options.rails}"
                )
            bad = [status for status in result.rails if status not in STATUSES]
            if bad:
                raise ValueError(f"the result for {result.pair} has status {bad[0]!r}; accepted: {', '.join(STATUSES)}")
            by_pair[frozenset(result.pair)] = result
        kept = []
        for pair in pairs:
            # A pair the runner returned nothing for failed: the run did not report.
            fail: Status = "fail"
            failed = (fail,) * self.options.rails
            result = by_pair.get(frozenset(pair)) or PairResult(pair, failed, ("no result",) * self.options.rails)
            kept.append(result)
        for result in kept:
            first, second = result.pair
            self.met.add(frozenset(result.pair))
            for rail, status in enumerate(result.rails):
                detail = result.detail[rail] if rail < len(result.detail) else ""
                good = {host: self.proven(host, rail) for host in (first, second)}
                for host, partner in ((first, second), (second, first)):
                    unit = self.units[(host, rail)]
                    unit.observations.append(Observation(number, partner, status, good[partner], good[host], detail))
        for unit in self.units.values():
            self.update(unit)
        for host, rail in self.units:
            if (host, rail) not in self.convicted and self.state(host, rail) == "convicted":
                evidence = tuple(sorted(self.attributed(host, rail).values(), key=lambda obs: obs.round))
                self.convicted[(host, rail)] = (number, evidence)
        return tuple(kept)

    def update(self, unit: _Unit) -> None:
        if unit.cleared and unit.observations[-1].status != "pass" and unit.observations[-1].counts:
            unit.cleared = False  # bad again after clearing: a suspect again (flapping)
        if unit.state(self.options.convict_after) != "suspect":
            return
        streak = 0
        for obs in reversed([obs for obs in unit.observations if obs.counts]):
            if obs.status != "pass":
                break
            streak += obs.partner_good
        if streak >= self.options.clear_after:
            unit.cleared = True

    def result(self) -> SweepResult:
        rails = self.options.rails
        out = SweepResult(self.hosts, rails)
        for host in self.hosts:
            convicted = [rail for rail in range(rails) if self.state(host, rail) == "convicted"]
            evidence = {rail: self.convicted[(host, rail)][1] for rail in convicted}
            if convicted and len(convicted) == rails:
                flat = tuple((rail, obs) for rail in convicted for obs in evidence[rail])
                when = max(self.convicted[(host, rail)][0] for rail in convicted)
                out.findings.append(Finding(host, None, flat, when))
            else:
                out.findings += [
                    Finding(host, rail, tuple((rail, obs) for obs in evidence[rail]), self.convicted[(host, rail)][0])
                    for rail in convicted
                ]
            out.unresolved += [(host, rail) for rail in range(rails) if self.state(host, rail) == "suspect"]
            out.watch += [(host, rail) for rail in range(rails) if self.on_probation(host, rail)]
            if all(self.state(host, rail) == "untested" for rail in range(rails)):
                out.untested.append(host)
        return out


def sweep(hosts: Sequence[str], run_round: RunRound, options: Options | None = None) -> SweepResult:
    """Run the first full pass and the follow-up rounds; see the module docstring for the rules."""
    options = options or Options()
    state = _Sweep(hosts, options)
    rounds: list[Round] = []
    pairs = state.pair_up(list(state.hosts))
    while pairs:
        number = len(rounds) + 1
        results = state.record(number, pairs, run_round(tuple(pairs)))
        rounds.append(Round(number, tuple(pairs), results))
        more = len(rounds) <= options.min_follow_up  # re-test every host with new partners (flapping links)
        if (not state.open_hosts() and not more) or len(rounds) > options.max_follow_up:
            break
        pairs = state.schedule(last=len(rounds) == options.max_follow_up)
        still_open = set(state.open_hosts())
        if not more and not any(host in still_open for pair in pairs for host in pair):
            break  # nothing left to learn: the open hosts have no partner they have not met
    result = state.result()
    result.rounds = rounds
    return result


# The judge: a measured busbw against the profile's two-node floor.


@dataclass(frozen=True)
class Floor:
    """The two-node floor a pair test is judged by, in GB/s, and where it comes from."""

    busbw_gbyte_s: float
    source: str

    def per_rail(self, rails: int) -> Floor:
        """The floor of one rail's run (one GPU per node, ``NCCL_TESTS_SPLIT_MASK``): the node floor shared evenly.
        DERIVED, not a catalog value: calibrate per site."""
        return Floor(self.busbw_gbyte_s / rails, f"{self.source}, divided by {rails} rails (derived)")


def two_node_floor(profile: Mapping[str, Any] | None) -> Floor | None:
    """The catalog's threshold for a two-node all_reduce (algo default), as `gpufabric verify` judges it, or None."""
    from gpufabric.collection import module_utils  # the collection's judge: the same lookup the role makes

    entry = module_utils("nccl_judge").find_threshold(dict(profile or {}), FLOOR_COLLECTIVE, 2, "default")
    if not entry or not isinstance(entry.get("min_busbw_gbyte_s"), (int, float)):
        return None
    basis = str(entry.get("basis") or "")
    verified = "verified" if entry.get("verified") else "unverified"
    return Floor(float(entry["min_busbw_gbyte_s"]), f"catalog all_reduce 2 nodes ({verified}; {basis})")


def judge_busbw(measured: float | None, floor: Floor) -> tuple[Status, str]:
    """pass at or above the floor, slow below it, fail when the run gave no number (crashed, timed out)."""
    if measured is None or measured != measured:  # None or NaN
        return "fail", "no busbw: the run did not complete"
    if measured >= floor.busbw_gbyte_s:
        return "pass", f"{measured:.1f} GB/s >= {floor.busbw_gbyte_s:.1f}"
    return "slow", f"{measured:.1f} GB/s < floor {floor.busbw_gbyte_s:.1f}"


def judged(measure: Callable[[Sequence[Pair]], Mapping[Pair, Sequence[float | None]]], floor: Floor) -> RunRound:
    """A ``run_round`` from a runner that measures busbw per rail of each pair (GB/s, None = no result)."""

    def run_round(pairs: Sequence[Pair]) -> list[PairResult]:
        measured = measure(pairs)
        results = []
        for pair in pairs:
            verdicts = [judge_busbw(value, floor) for value in measured.get(pair, ())]
            if not verdicts:
                continue  # missing: the sweep counts it as a failed run
            results.append(PairResult(pair, tuple(v[0] for v in verdicts), tuple(v[1] for v in verdicts)))
        return results

    return run_round
