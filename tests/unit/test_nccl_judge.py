# SPDX-License-Identifier: Apache-2.0
"""Judging parsed nccl-tests runs against the real catalog's thresholds (SYNTHETIC outputs)."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path

import pytest

from gpufabric.collection import module_utils, plugin_utils

nccl = module_utils("nccl_output")
judge_module = module_utils("nccl_judge")
judge = judge_module.judge
CATALOG = plugin_utils("fabric_catalog").load_catalog()
NDR = CATALOG.get("baremetal/hgx-h100-ib-ndr")
ROCE = CATALOG.get("baremetal/hgx-h100-roce-400g")
A3MEGA = CATALOG.get("gcp/a3-megagpu-8g")
# What the role judges by: the host's plan (the tier's thresholds, the GPU count).
NDR_PLAN = plugin_utils("fabric_plan").plan_host({"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"}, CATALOG)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
RESULT_KEYS = {
    "status", "collective", "nodes", "algo", "threshold", "measured_busbw", "largest_size", "nccl_version", "reasons"
}  # fmt: skip


def run_of(name: str, index: int = 0) -> dict:
    return nccl.parse_runs((FIXTURES / name).read_bytes())[index]


def test_catalog_profiles_used_here_exist():
    assert NDR and ROCE and A3MEGA


def test_two_node_default_passes_on_the_8_gib_row():
    verdict = judge(run_of("v2_13_all_reduce_2node.txt"), NDR, 2)
    assert set(verdict) == RESULT_KEYS
    assert verdict["status"] == "pass", verdict["reasons"]
    assert verdict["threshold"]["min_busbw_gbyte_s"] == 420 and verdict["threshold"]["max_nodes"] == 2
    assert verdict["measured_busbw"] == 454.02  # the only row >= 8 GiB, out-of-place
    assert verdict["largest_size"] == 8589934592
    assert any("not the pass metric" in reason for reason in verdict["reasons"])


def test_two_node_default_below_a_verified_threshold_fails():
    verdict = judge(run_of("two_collectives.txt"), NDR, 2)
    assert verdict["status"] == "fail"
    assert verdict["measured_busbw"] == 371.26
    assert any("below the threshold" in reason for reason in verdict["reasons"])


def test_the_average_is_never_the_metric():
    run = run_of("v2_13_all_reduce_2node.txt")
    run["avg_busbw"] = 1.0
    assert judge(run, NDR, 2)["status"] == "pass"


def test_ring_threshold_judges_the_lowest_large_row():
    verdict = judge(run_of("v2_16_all_reduce_ring_2node.txt"), NDR, 2, "ring")
    assert verdict["status"] == "pass", verdict["reasons"]
    assert verdict["threshold"]["algo"] == "ring" and verdict["threshold"]["min_size_bytes"] == 1 << 30
    run = run_of("v2_16_all_reduce_ring_2node.txt")
    large = [row["out_of_place"]["busbw"] for row in run["rows"] if row["size"] >= 1 << 30]
    assert verdict["measured_busbw"] == min(large) and len(large) == 3


def test_ring_threshold_applies_beyond_two_nodes():
    run = run_of("v2_16_all_reduce_ring_2node.txt")
    verdict = judge(run, NDR, 4, "ring")
    assert verdict["threshold"]["algo"] == "ring"
    assert verdict["status"] == "warn"  # busbw passes, but the output names 2 hosts and 16 ranks, not 4 nodes
    assert any("device lines name 2 host(s)" in reason for reason in verdict["reasons"])
    assert any("16 ranks, but 4 node(s) x 8 GPUs is 32" in reason for reason in verdict["reasons"])


def test_below_an_unverified_threshold_warns():
    run = run_of("two_collectives.txt")
    verdict = judge(run, ROCE, 2)  # RoCE 2-node default: 420 GB/s, verified: false
    assert verdict["status"] == "warn"
    assert any("unverified threshold" in reason and "calibrate per site" in reason for reason in verdict["reasons"])
    slow = copy.deepcopy(run_of("v2_16_all_reduce_ring_2node.txt"))
    for row in slow["rows"]:
        row["out_of_place"]["busbw"] = 300.0
    verdict = judge(slow, NDR, 2, "ring")  # NDR ring 340: derived, unverified
    assert verdict["status"] == "warn" and verdict["measured_busbw"] == 300.0


def test_gcp_a3_mega_all_gather():
    verdict = judge(run_of("v2_18_all_gather_2node.txt"), A3MEGA, 2)
    assert verdict["status"] == "pass", verdict["reasons"]
    assert verdict["collective"] == "all_gather"
    assert verdict["threshold"]["min_busbw_gbyte_s"] == 170
    assert 170 <= verdict["measured_busbw"] < 200


def test_single_node_all_types_at_16_gib():
    verdict = judge(run_of("datatype_all_1node.txt"), NDR, 1)
    assert verdict["status"] == "pass", verdict["reasons"]
    assert verdict["threshold"]["min_size_bytes"] == 17179869184
    assert verdict["largest_size"] == 17179869184


def test_data_errors_always_fail():
    verdict = judge(run_of("data_errors.txt"), NDR, 2)
    assert verdict["status"] == "fail"
    assert verdict["measured_busbw"] == 454.02  # bandwidth would have passed
    joined = " ".join(verdict["reasons"])
    assert "1.67772e+07 wrong elements at 2147483648 bytes" in joined
    assert "Out of bounds values 2" in joined
    run = run_of("v2_13_all_reduce_2node.txt")
    run["out_of_bounds"] = 1
    assert judge(run, NDR, 2)["status"] == "fail"


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("nccl_failure.txt", "Test NCCL failure common.cu:1148"),
        ("timeout.txt", "Test timeout (300s)"),
        ("killed_no_footer.txt", "no footer"),
        ("empty.txt", "empty input"),
        ("binary.bin", "binary input"),
        ("json_truncated.json", "truncated"),
    ],
)
def test_incomplete_runs_fail_quoting_the_error(name, quoted):
    verdict = judge(run_of(name), NDR, 2, collective="all_reduce")
    assert verdict["status"] == "fail"
    assert verdict["reasons"][0].startswith("the run is incomplete: ")
    assert quoted in verdict["reasons"][0]


def test_damaged_complete_output_fails():
    for name in ("nan_inf.txt", "short_rows.txt", "json_nan_inf.json"):
        verdict = judge(run_of(name), NDR, 2, "ring")
        assert verdict["status"] == "fail", name
        assert verdict["reasons"][0].startswith("the output has problems: ")


def test_no_row_at_the_judged_size_fails():
    verdict = judge(run_of("v2_16_all_reduce_ring_2node.txt"), NDR, 2)  # default: judged at >= 8 GiB
    assert verdict["status"] == "fail"
    assert verdict["measured_busbw"] is None
    assert any(
        "the run stopped at 4294967296 bytes; the threshold judges >= 8589934592 bytes (8 GiB): raise -e" in reason
        for reason in verdict["reasons"]
    )


def test_unknown_node_count_is_unjudged():
    verdict = judge(run_of("v2_13_all_reduce_2node.txt"), NDR, None)
    assert verdict["status"] == "unjudged"
    assert any("unknown node count (its device lines name 2 host(s))" in reason for reason in verdict["reasons"])


def test_no_threshold_is_unjudged_and_lists_what_the_profile_has():
    verdict = judge(run_of("v2_17_alltoall_na.txt"), NDR, 2)
    assert verdict["status"] == "unjudged" and verdict["threshold"] is None
    (reason,) = [reason for reason in verdict["reasons"] if "no threshold" in reason]
    assert "alltoall on 2 node(s) with algo default" in reason
    assert "all_reduce nodes 2 algo default" in reason and "all_reduce nodes >= 2 algo ring" in reason
    assert judge(run_of("v2_18_all_gather_2node.txt"), A3MEGA, 2, "ring")["status"] == "unjudged"


def test_unnamed_collective_needs_the_caller():
    run = run_of("v2_11_all_reduce_2node.txt")
    assert judge(run, NDR, 2)["status"] == "unjudged"
    verdict = judge(run, NDR, 2, collective="all_reduce")
    assert verdict["status"] == "fail"  # 371.26 < 420 at 8 GiB
    assert verdict["collective"] == "all_reduce"


def test_json_runs_are_judged_like_text():
    assert judge(run_of("json_v3.json"), NDR, 2)["status"] == "pass"
    assert judge(run_of("json_v1.json"), NDR, 2)["measured_busbw"] == pytest.approx(454.02, abs=0.01)


def test_unvalidated_data_is_reported():
    verdict = judge(run_of("v2_19_validation_off.txt"), NDR, 2, "ring")
    assert verdict["status"] == "pass"
    assert any("not validated" in reason for reason in verdict["reasons"])


def test_bandwidth_block_is_accepted_as_the_profile():
    assert judge(run_of("v2_13_all_reduce_2node.txt"), NDR["bandwidth"], 2)["status"] == "pass"
    assert judge({}, None, 2, collective="all_reduce")["status"] == "fail"


def test_find_threshold_prefers_the_narrow_range():
    assert judge_module.find_threshold(NDR, "all_reduce", 2, "default")["max_nodes"] == 2
    assert judge_module.find_threshold(NDR, "all_reduce", 3, "default") is None
    assert judge_module.find_threshold(NDR, "all_reduce", 64, "ring")["min_nodes"] == 2


def test_expected_curve():
    curve = judge_module.expected_curve(NDR, 2, "all_reduce", "ring")
    assert curve["line_rate_gbyte_s"] == 400
    assert (curve["threshold"], curve["min_size_bytes"], curve["verified"]) == (340, 1 << 30, False)
    default = judge_module.expected_curve(A3MEGA, 2)
    assert default["collective"] == "all_gather" and default["threshold"] == 170
    assert default["line_rate_gbyte_s"] == 200
    assert judge_module.expected_curve(NDR, None)["threshold"] is None


def test_ansible_filters():
    filters = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.nccl_tests")
    table = filters.FilterModule().filters()
    runs = table["nccl_parse"]((FIXTURES / "v2_13_all_reduce_2node.txt").read_text())
    assert table["nccl_judge"](runs[0], NDR_PLAN, "2")["status"] == "pass"
    assert table["nccl_judge"](runs[0], NDR_PLAN, "2") == judge(runs[0], NDR, 2)
    # The plan's GPU count is the one the ranks are checked against.
    fewer = {**NDR_PLAN, "gpus": {**NDR_PLAN["gpus"], "count": 4}}
    assert "16 ranks, but 2 node(s) x 4 GPUs is 8" in table["nccl_judge"](runs[0], fewer, 2)["reasons"]
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError):
        table["nccl_judge"](runs, NDR_PLAN, 2)
    with pytest.raises(AnsibleFilterError):
        table["nccl_judge"](runs[0], NDR_PLAN, "two")
    with pytest.raises(AnsibleFilterError, match="expects the host's plan gpufabric_plan"):
        table["nccl_judge"](runs[0], "baremetal/hgx-h100-ib-ndr", 2)


def test_the_parse_filter_keeps_the_limits_and_says_when_an_output_is_too_large():
    filters = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.nccl_tests")
    table = filters.FilterModule().filters()
    limit = module_utils("nccl_output").MAX_INPUT_BYTES
    (run,) = table["nccl_parse"]("{}" * 2_500_000)
    assert run["complete"] is False and "JSON values, more than the limit" in run["errors"][0]
    (run,) = table["nccl_parse"](" " * (limit + 1))
    assert "over the limit of 8388608 (8 MiB)" in run["errors"][0]
    # Verdict of a run the parser refused: a fail with the limit quoted.
    verdict = table["nccl_judge"](run, NDR_PLAN, 2)
    assert verdict["status"] == "fail" and "over the limit" in " ".join(verdict["reasons"])
    assert table["nccl_over_limit"](limit) == ""
    assert table["nccl_over_limit"](str(limit + 1)).startswith(f"{limit + 1} bytes, over the limit")
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="expects a size in bytes"):
        table["nccl_over_limit"]("big")
