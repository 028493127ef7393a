# SPDX-License-Identifier: Apache-2.0
"""The nccl-tests parser against SYNTHETIC outputs of every generation (tests/fixtures/nccl)."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

from gpufabric.collection import module_utils

nccl = module_utils("nccl_output")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
RUN_KEYS = {"collective", "version", "nranks", "rows", "avg_busbw", "out_of_bounds", "complete", "errors"}
ROW_KEYS = {"size", "count", "type", "redop", "root", "out_of_place", "in_place"}
HALF_KEYS = {"time_us", "algbw", "busbw", "wrong"}
BIG = [134217728, 536870912, 2147483648, 8589934592]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def runs_of(name: str) -> list[dict]:
    return nccl.parse_runs(fixture(name))


def all_fixtures() -> list[str]:
    return sorted(path.name for path in FIXTURES.iterdir() if path.is_file() and path.suffix not in (".py", ".md"))


def assert_shape(run: dict) -> None:
    assert set(run) >= RUN_KEYS | {"source_format"}
    assert run["source_format"] in ("text", "json")
    assert isinstance(run["complete"], bool)
    assert all(isinstance(error, str) and error for error in run["errors"])
    for row in run["rows"]:
        assert set(row) == ROW_KEYS
        assert isinstance(row["size"], int) and isinstance(row["count"], int)
        for placement in ("out_of_place", "in_place"):
            assert set(row[placement]) >= HALF_KEYS
            for key in HALF_KEYS:
                value = row[placement][key]
                assert value is None or (isinstance(value, float) and math.isfinite(value))
    # Strict JSON: no NaN or Infinity anywhere.
    json.dumps(run, allow_nan=False)


def test_fixtures_match_their_generator():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    rendered = generator.render()
    for name, data in rendered.items():
        assert (FIXTURES / name).read_bytes() == data, f"{name}: rerun tests/fixtures/nccl/make_fixtures.py"
    assert set(all_fixtures()) == set(rendered) - {"README.md"}
    readme = rendered["README.md"].decode()
    assert "SYNTHETIC" in readme
    assert all(f"`{name}`" in readme for name in all_fixtures())


@pytest.mark.parametrize("name", all_fixtures())
def test_every_fixture_has_the_run_shape(name):
    runs = runs_of(name)
    assert runs
    for run in runs:
        assert_shape(run)
        assert run["complete"] or run["errors"], "an incomplete run always says why"


@pytest.mark.parametrize(
    ("name", "collective", "version", "nranks", "avg"),
    [
        ("v2_13_all_reduce_2node.txt", "all_reduce", None, 16, 430.926),
        ("v2_16_all_reduce_ring_2node.txt", "all_reduce", None, 16, 350.212),
        ("v2_18_all_gather_2node.txt", "all_gather", "2.18.3", 16, 174.724),
        ("v2_19_timestamps.txt", "all_reduce", "2.19.6", 16, 433.765),
        ("v2_19_timestamps_per_iter.txt", "all_reduce", "2.19.6", 16, 433.765),
        ("v2_19_reference.txt", "all_reduce", "2.19.6", 2, 352.382),
        ("openmpi_tag_output.txt", "all_reduce", "2.19.6", 2, 352.382),
        ("slurm_label.txt", "all_reduce", "2.19.6", 2, 352.382),
        ("stripped_hash.txt", "all_reduce", "2.19.6", 2, 352.382),
        ("info_inside_table.txt", "all_reduce", "2.19.6", 2, 352.382),
    ],
)
def test_complete_runs_of_each_generation_and_wrapper(name, collective, version, nranks, avg):
    (run,) = runs_of(name)
    assert run["complete"] is True
    assert run["errors"] == []
    assert (run["collective"], run["version"], run["nranks"]) == (collective, version, nranks)
    assert run["avg_busbw"] == pytest.approx(avg)
    assert run["out_of_bounds"] == 0
    assert run["rows"], name
    assert all(row["out_of_place"]["wrong"] == 0 for row in run["rows"])


def test_reference_example_rows_are_read_by_value():
    run = nccl.parse(fixture("v2_19_reference.txt"))
    assert [row["size"] for row in run["rows"]] == BIG
    last = run["rows"][-1]
    assert last == {
        "size": 8589934592,
        "count": 2147483648,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": {"time_us": 43381.9, "algbw": 198.01, "busbw": 371.26, "wrong": 0.0},
        "in_place": {"time_us": 43325.6, "algbw": 198.26, "busbw": 371.75, "wrong": 0.0},
    }
    assert run["hosts"] == ["node-a"]  # the elided device lines are gone, as printed


def test_wrappers_give_the_same_rows_as_the_plain_output():
    plain = nccl.parse(fixture("v2_19_reference.txt"))["rows"]
    for name in ("openmpi_tag_output.txt", "slurm_label.txt", "stripped_hash.txt", "info_inside_table.txt"):
        assert nccl.parse(fixture(name))["rows"] == plain, name


def test_v2_11_error_column_without_root():
    (run,) = runs_of("v2_11_all_reduce_2node.txt")
    assert run["complete"] and run["errors"] == []
    assert run["collective"] is None  # no starting line, and without root all_reduce and reduce look alike
    assert run["hosts"] == ["node-a", "node-b"] and run["nranks"] == 16
    row = run["rows"][-1]
    assert row["root"] is None
    assert row["out_of_place"]["wrong"] is None  # `error` is a numeric delta, not a wrong count
    assert row["out_of_place"]["max_error"] == 0.0
    assert row["out_of_place"]["time_us"] == 43382.0  # %7.0f at >= 10000 us
    assert row["out_of_place"]["busbw"] == 371.26


def test_v2_13_infers_all_reduce_from_the_rows():
    run = nccl.parse(fixture("v2_13_all_reduce_2node.txt"))
    assert run["collective"] == "all_reduce"
    assert any("inferred" in note for note in run["notes"])


def test_v2_17_na_is_unchecked_not_zero():
    run = nccl.parse(fixture("v2_17_alltoall_na.txt"))
    assert run["collective"] == "alltoall"
    assert all(row["in_place"]["wrong"] is None for row in run["rows"])
    assert all(row["out_of_place"]["wrong"] == 0 for row in run["rows"])
    assert all(row["redop"] == "none" for row in run["rows"])


def test_per_iteration_and_timestamp_columns_do_not_shift_busbw():
    plain = nccl.parse(fixture("v2_19_timestamps.txt"))["rows"]
    iters = nccl.parse(fixture("v2_19_timestamps_per_iter.txt"))["rows"]
    assert plain == iters
    assert plain[-1]["out_of_place"]["busbw"] == 457.01


def test_program_name_with_mpi_suffix():
    assert nccl.collective_from_program("/opt/nccl-tests/build/all_gather_perf_mpi") == "all_gather"
    assert nccl.collective_from_program("reduce_scatter_perf") == "reduce_scatter"
    assert nccl.collective_from_program("hostname") is None


def test_several_types_stay_in_one_run():
    (run,) = runs_of("datatype_all_1node.txt")
    assert run["complete"]
    assert [row["type"] for row in run["rows"]] == ["int8"] * 3 + ["half"] * 3 + ["float"] * 3 + ["double"] * 3
    assert run["nranks"] == 8 and run["hosts"] == ["node-a"]


def test_two_collectives_are_two_runs():
    first, second = runs_of("two_collectives.txt")
    assert (first["collective"], len(first["rows"]), first["complete"]) == ("all_reduce", 4, True)
    assert (second["collective"], len(second["rows"]), second["complete"]) == ("all_gather", 8, True)
    assert second["avg_busbw"] == pytest.approx(325.046)
    assert nccl.parse(fixture("two_collectives.txt")) == first


@pytest.mark.parametrize(
    ("name", "quoted", "rows"),
    [
        ("nccl_failure.txt", "Test NCCL failure common.cu:1148", 0),
        ("cuda_failure.txt", "Test CUDA failure common.cu:892", 1),
        ("timeout.txt", "Test timeout (300s)", 3),
        ("invalid_gpus.txt", "Invalid number of GPUs: 16 requested but only 8 were found.", 0),
        ("killed_no_footer.txt", "no footer: the run stopped before it finished (last data row: 536870912", 2),
    ],
)
def test_failed_runs_are_incomplete_and_quote_the_failure(name, quoted, rows):
    (run,) = runs_of(name)
    assert run["complete"] is False
    assert len(run["rows"]) == rows
    assert any(quoted in error for error in run["errors"]), run["errors"]
    assert any(error.startswith("no footer") for error in run["errors"])


def test_nccl_failure_quotes_stack_warn_and_launcher():
    errors = nccl.parse(fixture("nccl_failure.txt"))["errors"]
    assert any(error.startswith(".. node-b pid 40109: Test failure") for error in errors)
    assert any(error.startswith("NCCL WARN:") for error in errors)
    assert any("prterun noticed" in error for error in errors)
    assert "no data rows" in errors


def test_data_errors_are_kept():
    run = nccl.parse(fixture("data_errors.txt"))
    assert run["complete"] and run["out_of_bounds"] == 2
    wrong = {row["size"]: row["out_of_place"]["wrong"] for row in run["rows"]}
    assert wrong[2147483648] == 16777200.0  # printed by %6g as 1.67772e+07
    assert wrong[8589934592] == 3


def test_validation_off_is_a_note():
    run = nccl.parse(fixture("v2_19_validation_off.txt"))
    assert run["complete"] and run["errors"] == []
    assert all(row[p]["wrong"] is None for row in run["rows"] for p in ("out_of_place", "in_place"))
    assert any("validation: 0" in note for note in run["notes"])


def test_short_rows_are_errors_with_line_numbers():
    run = nccl.parse(fixture("short_rows.txt"))
    assert len(run["rows"]) == 2
    assert any(error.endswith("9 fields; a data row has 13") for error in run["errors"])
    assert all(error.startswith("line ") for error in run["errors"])


def test_nan_and_inf_become_null_with_an_error():
    run = nccl.parse(fixture("nan_inf.txt"))
    assert run["rows"][0]["out_of_place"]["busbw"] is None
    assert run["rows"][-1]["in_place"]["time_us"] is None
    assert run["avg_busbw"] is None
    assert sum("non-finite" in error for error in run["errors"]) == 3


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty input"),
        ("\n\n  \n", "empty input"),
        (None, "empty input"),
        (fixture("binary.bin"), "binary input"),
        (b"\x00" * 100, "binary input"),
        (fixture("only_info.txt"), "no nccl-tests output"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "no nccl-tests output"),
        (12, "not text"),
    ],
)
def test_bad_input_is_one_incomplete_run_with_a_reason(data, reason):
    (run,) = nccl.parse_runs(data)
    assert run["complete"] is False and run["rows"] == []
    assert any(reason in error for error in run["errors"]), run["errors"]
    assert_shape(run)


def test_nul_padding_of_a_crashed_log_is_dropped():
    data = fixture("v2_19_reference.txt") + b"\x00" * 64
    run = nccl.parse(data)
    assert run["complete"] and len(run["rows"]) == 4
    assert any("NUL" in note for note in run["notes"])


def test_a_new_run_starts_at_each_boundary():
    rows = fixture("v2_19_reference.txt").decode()
    # Without the footer of the first run: the second's version line still starts a new run.
    first = rows[: rows.index("# Out of bounds")]
    runs = nccl.parse_runs(first + rows)
    assert [run["complete"] for run in runs] == [False, True]
    # Rows after a completed footer (no preamble at all) are a new run.
    table = [line for line in rows.splitlines() if line.startswith("  ")]
    runs = nccl.parse_runs(rows + "\n".join(table) + "\n")
    assert [len(run["rows"]) for run in runs] == [4, 4]
    assert runs[1]["complete"] is False


def test_launcher_abort_after_a_complete_run_is_a_note():
    text = fixture("v2_19_reference.txt").decode() + "srun: error: node-b: task 9: Exited with exit code 7\n"
    run = nccl.parse(text)
    assert run["complete"] and run["errors"] == []
    assert any("srun: error" in note for note in run["notes"])


def test_program_echoed_by_a_wrapper_names_an_old_run():
    text = (
        "+ mpirun -np 16 /opt/nccl-tests/build/alltoall_perf -b 1G\n" + fixture("v2_13_all_reduce_2node.txt").decode()
    )
    assert nccl.parse(text)["collective"] == "alltoall"


# -J JSON


@pytest.mark.parametrize("name", ["json_v1.json", "json_v3.json"])
def test_json_schemas_map_to_the_same_shape(name):
    (run,) = runs_of(name)
    assert run["source_format"] == "json"
    assert run["complete"] and run["errors"] == []
    assert run["collective"] == "all_reduce" and run["nranks"] == 16
    assert run["hosts"] == ["node-a", "node-b"]
    assert [row["size"] for row in run["rows"]] == BIG
    assert run["rows"][0]["root"] == -1  # "    -1" in the file
    assert run["out_of_bounds"] == 0
    assert run["avg_busbw"] == pytest.approx(430.926, abs=1e-3)
    assert "SECRET_TOKEN" not in json.dumps(run)  # env is never copied


def test_json_and_text_agree_on_busbw():
    text = nccl.parse(fixture("v2_13_all_reduce_2node.txt"))
    data = nccl.parse(fixture("json_v3.json"))
    for ours, theirs in zip(text["rows"], data["rows"], strict=True):
        assert ours["out_of_place"]["busbw"] == pytest.approx(theirs["out_of_place"]["busbw"], abs=0.006)


def test_json_truncated_keeps_whole_records():
    run = nccl.parse(fixture("json_truncated.json"))
    assert run["complete"] is False
    assert [row["size"] for row in run["rows"]] == BIG[:2]
    assert run["errors"] == ["the JSON output is truncated: the run stopped before it finished"]


def test_json_nan_string_and_bare_inf():
    run = nccl.parse(fixture("json_nan_inf.json"))
    assert run["complete"] is True and len(run["rows"]) == 4
    assert run["rows"][0]["out_of_place"]["busbw"] is None
    assert run["rows"][-1]["in_place"]["busbw"] is None
    assert len([error for error in run["errors"] if "non-finite" in error]) == 2


def test_json_unchecked_nwrong_is_null():
    document = json.loads(fixture("json_v3.json"))
    document["results"][0]["in_place"]["nwrong"] = None
    document["errors"] = ["NET/Plugin: No plugin found"]
    run = nccl.parse(json.dumps(document))
    assert run["rows"][0]["in_place"]["wrong"] is None
    assert run["errors"] == []
    assert any("No plugin found" in note for note in run["notes"])


# Never raises


def test_random_truncations_and_corruptions_never_raise():
    generator = random.Random(8)
    for name in all_fixtures():
        data = fixture(name)
        cuts = {0, 1, len(data) // 2, max(len(data) - 1, 0)} | {
            generator.randrange(len(data) + 1) for _cut in range(25)
        }
        for cut in sorted(cuts):
            for sample in (data[:cut], data[cut:]):
                for run in nccl.parse_runs(sample):
                    assert_shape(run)
                    assert run["complete"] or run["errors"]
        for _mutation in range(10):
            mutated = bytearray(data)
            for _byte in range(5):
                if mutated:
                    mutated[generator.randrange(len(mutated))] = generator.randrange(256)
            for run in nccl.parse_runs(bytes(mutated)):
                assert_shape(run)


def test_a_truncated_text_run_is_never_complete():
    data = fixture("v2_19_reference.txt").decode()
    end = data.index("# Avg bus bandwidth")
    for cut in range(data.index("#        (B)"), end):
        run = nccl.parse(data[:cut])
        assert run["complete"] is False
        assert any(error.startswith("no footer") for error in run["errors"])


# Bounded work on untrusted output (issue 16): every limit is one error run, never an exception or a long parse


def _limit_error(data: str | bytes) -> str:
    (run,) = nccl.parse_runs(data)
    assert run["complete"] is False and run["rows"] == []
    assert_shape(run)
    (error,) = run["errors"]
    assert error.startswith("not parsed: ")
    return error


def test_input_over_the_size_limit_is_refused_before_it_is_read():
    assert "over the limit of 8388608 (8 MiB)" in _limit_error(b" " * (nccl.MAX_INPUT_BYTES + 1))
    assert "8388609 bytes" in _limit_error("x" * (nccl.MAX_INPUT_BYTES + 1))
    assert nccl.over_limit(nccl.MAX_INPUT_BYTES) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{}" * 2_500_000, "JSON values, more than the limit of 1000000"),  # 5 MB: was 87 s and 2.3 GB
        ('{"a":' + "[" * 900 + "," * 2_000_000, "JSON values, more than the limit"),  # was 53 s
        ('{"a":' + "[" * 900 + "1,", "JSON nested deeper than 32 levels"),
        ('{"a":' + "[" * 100_000, "JSON nested deeper than 32 levels"),  # was a RecursionError
        ("{}\n" * (nccl.MAX_JSON_DOCUMENTS + 1), "more than 64 JSON documents"),
        ('{"results": [' + ",".join(["{}"] * (nccl.MAX_ROWS + 1)) + "]}", "more than the limit of 16384 data rows"),
        ("a\n" * nccl.MAX_LINES, "lines, more than the limit of 200000"),
        ("1 1 float sum -1 1 1 1 0 1 1 1 0\n" * (nccl.MAX_ROWS + 1), "more than 16384 data rows"),
    ],
)
def test_adversarial_inputs_hit_a_limit_quickly(data, message):
    assert message in _limit_error(data)


def test_many_runs_hit_the_run_limit():
    one = fixture("v2_19_reference.txt").decode()
    assert len(nccl.parse_runs(one * nccl.MAX_RUNS)) == nccl.MAX_RUNS
    assert "more than 64 runs" in _limit_error(one * (nccl.MAX_RUNS + 1))


def test_json_depth_skips_strings_and_stops_at_the_limit():
    assert nccl.json_depth('{"a": ["[[[[", {"b": "}}"}]}') == 3
    assert nccl.json_depth("[" * 10_000, limit=32) == 33
    assert nccl.json_depth("]]]{") == 1


def test_a_truncated_json_deep_within_the_limit_is_repaired_in_linear_time():
    # Depth 30 and 400,000 commas: one scan, and only the last cut is decoded.
    text = '{"a":' + "[" * 30 + "1," * 400_000
    (run,) = nccl.parse_runs(text)
    assert run["errors"][0] == "the JSON output is truncated: the run stopped before it finished"
    value = nccl._repair_truncated(text)["a"]
    for _level in range(29):
        (value,) = value
    assert value == [1] * 400_000


def test_repair_skips_cuts_after_a_decoding_error():
    assert nccl._repair_truncated('{"a": [1, 2, -, 3, 4,') == {"a": [1, 2]}
    assert nccl._repair_truncated('{"a": "x, y", "b') == {"a": "x, y"}
    assert nccl._repair_truncated("]") is None


def test_errors_of_a_run_are_capped():
    text = fixture("v2_19_reference.txt").decode() + "1 2 x y -1 a b c d e f g h\n" * 500
    for run in nccl.parse_runs(text):
        assert len(run["errors"]) <= 60


PREFIXES = [
    "    ",
    "\t\t",
    "[1,0]<stdout>:",
    "[1,12]<stderr>: ",
    "  0: ",
    "13: ",
    "[0] ",
    "2026-12-01T10:00:00Z ",
    "2026-12-01T10:00:00.123456789Z ",
    "2026-12-01T10:00:00+01:00 ",
    "[2026-12-01 10:00:00] ",
    "2026-12-01 10:00:00,123 ",
    "10:00:00 ",
    "[pod/nccl-worker-0/nccl] ",
    "node-a: ",
    "nccl-worker-1  | ",
    "Dec  1 10:00:00 node-a nccl[123]: ",
    "2026-12-01T10:00:00Z [1,0]<stdout>:",
    "   [pod/p/c] 2026-12-01T10:00:00Z 0: ",
]


def _same(runs: list[dict]) -> list[tuple]:
    keys = ("collective", "version", "nranks", "rows", "avg_busbw", "out_of_bounds", "complete", "hosts")
    return [tuple(json.dumps(run[key], sort_keys=True) for key in keys) for run in runs]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_indented_and_prefixed_output_parses_as_the_raw_output(prefix):
    for name in all_fixtures():
        if not name.endswith(".txt"):
            continue
        text = fixture(name).decode()
        prefixed = "".join(prefix + line for line in text.splitlines(keepends=True))
        assert _same(nccl.parse_runs(prefixed)) == _same(nccl.parse_runs(text)), name


def test_a_failure_line_is_quoted_with_the_rank_that_printed_it():
    text = "".join("[1,9]<stderr>:" + line for line in fixture("nccl_failure.txt").decode().splitlines(True))
    errors = nccl.parse(text)["errors"]
    assert any(error.startswith("[1,9]<stderr>:node-b: Test NCCL failure") for error in errors), errors


def test_prefix_stripping_never_eats_a_data_row_or_footer():
    for line in (
        "     1048576        262144     float     sum      -1    1.0   1.0   1.0      0    1.0   1.0   1.0      0",
        "# Out of bounds values : 0 OK",
        "Avg bus bandwidth    : 12.5",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong",
        "Collective test concluded: all_reduce_perf",
        "nccl-tests version 2.19.6 nccl-headers=22905 nccl-library=22905",
    ):
        assert nccl._normalise(line)[1] == line.strip()
