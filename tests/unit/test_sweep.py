# SPDX-License-Identifier: Apache-2.0
"""The sweep's scheduling and conviction rule (driver/gpufabric/sweep.py) against small SIMULATED fabrics."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from gpufabric import sweep
from gpufabric.collection import plugin_utils


class Fabric:
    """Pair results from a set of bad (host, rail) units; ``flaps`` read slow in two of every three tests."""

    def __init__(self, rails: int = 1, bad: Sequence[tuple[str, int]] = (), flaps: Sequence[tuple[str, int]] = ()):
        self.rails = rails
        self.bad = set(bad)
        self.flaps = set(flaps)
        self.tests: dict[tuple[str, int], int] = {}
        self.rounds: list[tuple[sweep.Pair, ...]] = []

    def slow(self, host: str, rail: int) -> bool:
        if (host, rail) in self.bad:
            return True
        if (host, rail) in self.flaps:
            count = self.tests[(host, rail)] = self.tests.get((host, rail), 0) + 1
            return count % 3 != 0
        return False

    def __call__(self, pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
        self.rounds.append(tuple(pairs))
        results = []
        for first, second in pairs:
            statuses: list[sweep.Status] = []
            for rail in range(self.rails):
                slow = [self.slow(host, rail) for host in (first, second)]  # both sides advance a flap
                statuses.append("slow" if any(slow) else "pass")
            results.append(sweep.PairResult((first, second), tuple(statuses)))
        return results


def hosts(count: int) -> list[str]:
    return [f"node-{index:03d}" for index in range(count)]


def test_pairs_are_disjoint_in_every_round() -> None:
    fleet = hosts(40)
    fabric = Fabric(rails=4, bad=[("node-003", 1), *(("node-017", rail) for rail in range(4))])
    result = sweep.sweep(fleet, fabric, sweep.Options(rails=4, seed=3))
    assert len(result.rounds) > 1
    for round_ in result.rounds:
        named = [host for pair in round_.pairs for host in pair]
        assert len(named) == len(set(named)), round_.number
        assert all(first != second for first, second in round_.pairs)


def test_the_first_pass_tests_every_host() -> None:
    fleet = hosts(64)
    result = sweep.sweep(fleet, Fabric(), sweep.Options(seed=1))
    assert sorted(host for pair in result.rounds[0].pairs for host in pair) == fleet


def test_an_all_good_fleet_ends_after_the_first_pass_with_no_suspects() -> None:
    result = sweep.sweep(hosts(32), Fabric(rails=8), sweep.Options(rails=8))
    assert len(result.rounds) == 1
    assert result.findings == [] and result.unresolved == [] and result.untested == []
    assert result.follow_up_rounds == 0


@pytest.mark.parametrize("rails", [1, 8])
def test_a_single_slow_host_is_found_and_only_it(rails: int) -> None:
    fleet = hosts(32)
    fabric = Fabric(rails=rails, bad=[("node-011", rail) for rail in range(rails)])
    result = sweep.sweep(fleet, fabric, sweep.Options(rails=rails, seed=5))
    assert [(finding.host, finding.rail) for finding in result.findings] == [("node-011", None)]
    assert result.unresolved == []
    assert result.follow_up_rounds <= 3
    finding = result.findings[0]
    # The evidence: bad results with two distinct partners, each proven good, and none of them the bad host.
    partners = {obs.partner for _rail, obs in finding.evidence}
    assert len(partners) >= 2 and "node-011" not in partners
    assert "node-011" in finding.describe()


def test_a_slow_rail_is_named_as_the_rail() -> None:
    fabric = Fabric(rails=8, bad=[("node-020", 5)])
    result = sweep.sweep(hosts(48), fabric, sweep.Options(rails=8, seed=2))
    assert [(finding.host, finding.rail) for finding in result.findings] == [("node-020", 5)]
    assert all(rail == 5 for rail, _obs in result.findings[0].evidence)


def test_an_odd_host_count_tests_the_leftover_host_in_the_next_round() -> None:
    fleet = hosts(33)
    result = sweep.sweep(fleet, Fabric(), sweep.Options(seed=4))
    first = {host for pair in result.rounds[0].pairs for host in pair}
    assert len(first) == 32
    (leftover,) = set(fleet) - first
    assert len(result.rounds) == 2
    assert any(leftover in pair for pair in result.rounds[1].pairs)
    assert result.findings == [] and result.unresolved == [] and result.untested == []


def test_an_odd_fleet_finds_a_bad_leftover_host() -> None:
    fleet = hosts(9)
    for seed in range(6):
        fabric = Fabric(bad=[(host, 0) for host in fleet[:1]])
        result = sweep.sweep(fleet, fabric, sweep.Options(seed=seed, max_follow_up=4))
        assert result.bad_hosts == ["node-000"], seed


def test_a_flapping_rail_is_convicted_after_two_bad_results_with_good_partners() -> None:
    fabric = Fabric(rails=4, flaps=[("node-007", 2)])
    result = sweep.sweep(hosts(32), fabric, sweep.Options(rails=4, seed=0, max_follow_up=6))
    assert [(finding.host, finding.rail) for finding in result.findings] == [("node-007", 2)]
    assert len({obs.partner for _rail, obs in result.findings[0].evidence}) >= 2


def test_a_flapping_rail_that_passes_its_retest_is_cleared_not_blamed_on_its_partner() -> None:
    """The rule's limit (docs/sweep.md): a flap that passes every retest (here, all but its first test) is cleared."""

    class PassesRetest(Fabric):
        def slow(self, host: str, rail: int) -> bool:
            count = self.tests[(host, rail)] = self.tests.get((host, rail), 0) + 1
            return (host, rail) == ("node-007", 0) and count == 1

    result = sweep.sweep(hosts(16), PassesRetest(), sweep.Options(seed=0))
    assert result.findings == [] and result.unresolved == []


def test_min_follow_up_re_tests_every_host_with_new_partners() -> None:
    fleet = hosts(16)
    result = sweep.sweep(fleet, Fabric(rails=2), sweep.Options(rails=2, seed=0, min_follow_up=2))
    assert len(result.rounds) == 3 and result.findings == []
    for round_ in result.rounds:
        assert sorted(host for pair in round_.pairs for host in pair) == fleet
    pairs = [frozenset(pair) for round_ in result.rounds for pair in round_.pairs]
    assert len(pairs) == len(set(pairs))
    fabric = Fabric(rails=2, flaps=[("node-004", 1)])
    result = sweep.sweep(fleet, fabric, sweep.Options(rails=2, seed=0, min_follow_up=2))
    assert [(finding.host, finding.rail) for finding in result.findings] == [("node-004", 1)]


def test_one_transient_slow_result_convicts_no_one() -> None:
    """A pair slow once (noise) makes two suspects; each passes with a proven-good partner and is cleared, then
    passes once more on probation (each one's first-pass bad counts once the other is proven)."""

    class Once(Fabric):
        def __call__(self, pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
            results = super().__call__(pairs)
            if len(self.rounds) == 1:
                results[0] = sweep.PairResult(results[0].pair, ("slow",))
            return results

    result = sweep.sweep(hosts(16), Once(), sweep.Options(seed=1))
    assert result.findings == [] and result.unresolved == [] and result.watch == []
    assert len(result.rounds) == 3


def test_a_failed_run_and_a_slow_rail_do_not_add_up() -> None:
    """A crash marks every rail; one slow rail later with another good partner is not a second piece of evidence."""
    seen: list[sweep.Pair] = []

    def run(pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
        results = []
        for pair in pairs:
            statuses: tuple[sweep.Status, ...] = ("pass", "pass")
            if "node-010" in pair:
                statuses = ("slow", "slow")  # a bad node keeps the sweep going for a few rounds
            elif "node-003" in pair:
                seen.append(pair)
                if len(seen) == 2:
                    statuses = ("fail", "fail")
                elif len(seen) == 3:
                    statuses = ("slow", "pass")
            results.append(sweep.PairResult(pair, statuses))
        return results

    result = sweep.sweep(hosts(16), run, sweep.Options(rails=2, seed=3, max_follow_up=4))
    assert len(seen) >= 3
    assert result.bad_hosts == ["node-010"]


def test_a_conviction_stands_when_the_first_pass_partner_reads_bad_later() -> None:
    """The bad host's first-pass result counts once its partner is proven; that partner going bad later must not
    undo the verdict."""
    fleet = hosts(16)
    first = sweep.sweep(fleet, Fabric(bad=[("node-006", 0)]), sweep.Options(seed=1)).rounds[0]
    (partner,) = [host for pair in first.pairs if "node-006" in pair for host in pair if host != "node-006"]

    class LaterNoise(Fabric):
        def slow(self, host: str, rail: int) -> bool:
            count = self.tests[(host, rail)] = self.tests.get((host, rail), 0) + 1
            return host == "node-006" or (host == partner and count >= 3)

    fabric = LaterNoise()
    result = sweep.sweep(fleet, fabric, sweep.Options(seed=1, min_follow_up=2, max_follow_up=3))
    assert fabric.tests[(partner, 0)] >= 4
    assert ("node-006", 2) in [(finding.host, finding.round) for finding in result.findings]


def test_a_proven_host_paired_with_a_bad_one_stays_proven() -> None:
    fabric = Fabric(bad=[("node-001", 0)])
    result = sweep.sweep(hosts(16), fabric, sweep.Options(seed=7))
    assert result.bad_hosts == ["node-001"]
    assert result.unresolved == []


def test_a_pair_without_a_result_counts_as_failed() -> None:
    def silent(pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
        return [sweep.PairResult(pair, ("pass",)) for pair in pairs if "node-004" not in pair]

    result = sweep.sweep(hosts(12), silent, sweep.Options(seed=2))
    assert result.bad_hosts == ["node-004"]
    assert {obs.status for _rail, obs in result.findings[0].evidence} == {"fail"}


def test_suspects_are_not_convicted_past_the_round_budget() -> None:
    fabric = Fabric(bad=[("node-002", 0)])
    result = sweep.sweep(hosts(16), fabric, sweep.Options(seed=1, max_follow_up=0))
    assert len(result.rounds) == 1
    assert result.findings == []  # a bad result with an unproven partner is evidence against neither
    (partner,) = [host for pair in result.rounds[0].pairs if "node-002" in pair for host in pair if host != "node-002"]
    assert sorted(result.unresolved) == sorted([("node-002", 0), (partner, 0)])


def test_the_same_seed_gives_the_same_sweep_and_another_seed_another_pairing() -> None:
    def run(seed: int) -> list[tuple[sweep.Pair, ...]]:
        fabric = Fabric(rails=2, bad=[("node-009", 1)])
        sweep.sweep(hosts(30), fabric, sweep.Options(rails=2, seed=seed))
        return fabric.rounds

    assert run(11) == run(11)
    assert run(11)[0] != run(12)[0]


def test_the_first_pass_pairs_hosts_of_the_same_group() -> None:
    fleet = hosts(32)
    groups = {host: f"rack-{index // 8}" for index, host in enumerate(fleet)}
    result = sweep.sweep(fleet, Fabric(), sweep.Options(seed=3, groups=groups))
    assert all(groups[first] == groups[second] for first, second in result.rounds[0].pairs)


def test_suspects_meet_a_partner_they_have_not_met() -> None:
    fabric = Fabric(bad=[("node-005", 0)])
    sweep.sweep(hosts(20), fabric, sweep.Options(seed=9, max_follow_up=3))
    partners = [pair for round_ in fabric.rounds for pair in round_ if "node-005" in pair]
    assert len(partners) == len(set(map(frozenset, partners)))


def test_a_fleet_of_one_is_reported_untested() -> None:
    result = sweep.sweep(["solo"], Fabric(), sweep.Options())
    assert result.rounds == [] and result.untested == ["solo"]


def test_bad_results_are_refused_with_what_is_accepted() -> None:
    def wrong_rails(pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
        return [sweep.PairResult(pair, ("pass",)) for pair in pairs]

    with pytest.raises(ValueError, match="1 rail statuses, expected 2"):
        sweep.sweep(hosts(4), wrong_rails, sweep.Options(rails=2))

    def odd_status(pairs: Sequence[sweep.Pair]) -> list[sweep.PairResult]:
        return [sweep.PairResult(pair, ("ok",)) for pair in pairs]  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="status 'ok'; accepted: pass, slow, fail"):
        sweep.sweep(hosts(4), odd_status)
    with pytest.raises(ValueError, match="hosts must be distinct"):
        sweep.sweep(["a", "a"], Fabric())


def test_the_judge_compares_busbw_with_the_floor() -> None:
    floor = sweep.Floor(48.0, "test")
    assert sweep.judge_busbw(50.0, floor)[0] == "pass"
    assert sweep.judge_busbw(48.0, floor)[0] == "pass"
    status, detail = sweep.judge_busbw(30.5, floor)
    assert status == "slow" and detail == "30.5 GB/s < floor 48.0"
    assert sweep.judge_busbw(None, floor)[0] == "fail"
    assert sweep.judge_busbw(float("nan"), floor)[0] == "fail"
    assert sweep.Floor(480.0, "x").per_rail(8).busbw_gbyte_s == 60.0


def test_the_two_node_floor_is_the_catalogs_verify_threshold() -> None:
    catalog = plugin_utils("fabric_catalog").load_catalog()
    floor = sweep.two_node_floor(catalog.get("aws/p5.48xlarge"))
    assert floor is not None and floor.busbw_gbyte_s == 430
    assert "verified" in floor.source
    assert sweep.two_node_floor({"bandwidth": {"thresholds": []}}) is None


def test_judged_turns_measurements_into_results() -> None:
    floor = sweep.Floor(40.0, "test")
    bad = {"node-006"}

    def measure(pairs: Sequence[sweep.Pair]) -> dict[sweep.Pair, list[float | None]]:
        return {pair: [20.0 if bad & set(pair) else 45.0, 45.0] for pair in pairs}

    result = sweep.sweep(hosts(16), sweep.judged(measure, floor), sweep.Options(rails=2, seed=4))
    assert [(finding.host, finding.rail) for finding in result.findings] == [("node-006", 0)]
    assert "20.0 GB/s < floor 40.0" in result.findings[0].describe()


def test_two_bad_hosts_paired_first_are_both_found() -> None:
    for seed in itertools.islice(itertools.count(), 8):
        fabric = Fabric(bad=[("node-000", 0), ("node-001", 0)])
        result = sweep.sweep(hosts(24), fabric, sweep.Options(seed=seed))
        assert result.bad_hosts == ["node-000", "node-001"], seed
