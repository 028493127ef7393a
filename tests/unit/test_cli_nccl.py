# SPDX-License-Identifier: Apache-2.0
"""`gpufabric nccl parse`: tables, JSON, exit codes 0/1/2 and no tracebacks (SYNTHETIC outputs)."""

from __future__ import annotations

import json

FIXTURES = "tests/fixtures/nccl"


def test_parse_table_of_a_complete_run(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/v2_19_timestamps_per_iter.txt")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "run 1/1: all_reduce, nccl-tests 2.19.6, 16 ranks, 2 host(s), from text" in out
    assert "8589934592" in out and "457.01" in out and "457.61" in out
    assert "avg busbw 433.765 GB/s" in out and "complete: yes" in out
    assert "error" not in out


def test_parse_json_of_one_run_is_an_object(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/json_v1.json", "--json")
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert run["collective"] == "all_reduce" and run["source_format"] == "json"
    assert len(run["rows"]) == 4 and run["complete"] is True


def test_parse_json_of_several_runs_is_a_list(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/two_collectives.txt", "--json")
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [run["collective"] for run in runs] == ["all_reduce", "all_gather"]


def test_parse_table_of_several_runs(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/two_collectives.txt")
    assert result.returncode == 0
    assert "run 1/2: all_reduce" in result.stdout and "run 2/2: all_gather" in result.stdout


def test_incomplete_run_exits_1_with_the_failure_quoted(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/nccl_failure.txt")
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "error: node-b: Test NCCL failure common.cu:1148" in text
    assert "complete: no" in text


def test_incomplete_json_still_prints_json_and_exits_1(gpufabric):
    result = gpufabric("nccl", "parse", f"{FIXTURES}/killed_no_footer.txt", "--json")
    assert result.returncode == 1
    run = json.loads(result.stdout)
    assert run["complete"] is False and len(run["rows"]) == 2


def test_bad_inputs_exit_1_without_traceback(gpufabric):
    for name in ("empty.txt", "only_info.txt", "short_rows.txt", "nan_inf.txt", "json_nan_inf.json"):
        result = gpufabric("nccl", "parse", f"{FIXTURES}/{name}", "--json")
        assert result.returncode == 1, name
        assert "Traceback" not in result.stdout + result.stderr
        parsed = json.loads(result.stdout)  # strict JSON: NaN never printed
        assert parsed["errors"], name
        result = gpufabric("nccl", "parse", f"{FIXTURES}/{name}")
        assert result.returncode == 1, name
        assert "error:" in result.stdout


def test_a_binary_file_is_bad_input_named_once(gpufabric):
    """Not output of a run that failed: no table and no JSON, one error naming the file (test_fuzz_nccl_cli.py)."""
    for extra in ([], ["--json"]):
        result = gpufabric("nccl", "parse", f"{FIXTURES}/binary.bin", *extra)
        assert result.returncode == 1 and result.stdout == ""
        assert "binary.bin: binary input" in " ".join(result.stderr.split())


def test_unreadable_file_is_a_usage_error(gpufabric, tmp_path):
    for path in (tmp_path / "missing.txt", tmp_path):
        result = gpufabric("nccl", "parse", str(path))
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert str(path) in " ".join(result.stderr.split())


def test_nccl_group_is_listed(gpufabric):
    result = gpufabric("--help")
    assert result.returncode == 0
    assert "nccl" in result.stdout
