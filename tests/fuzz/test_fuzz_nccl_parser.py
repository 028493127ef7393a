# SPDX-License-Identifier: Apache-2.0
"""Property tests of the nccl-tests parser (plugins/module_utils/nccl_output.py) on untrusted output.

Whatever the input (arbitrary bytes or text, JSON-like noise, mutated SYNTHETIC fixtures), `parse_runs`
returns at least one run of the documented shape, raises nothing (its only error is a run with
`complete: false` and the reason in `errors`), never falls back to its catch-all "parser error", and stays
within a time and memory bound. The explicit adversarial cases are the ones issue 16 measured: 5 MB of
`{}` (87 s and 2.3 GB before the limits), deep brackets with many commas (53 s), many runs, many JSON
documents. Hypothesis is derandomized so that CI runs the same examples every time.
"""

from __future__ import annotations

import json
import math
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.collection import module_utils

nccl = module_utils("nccl_output")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
SAMPLES = [path.read_bytes() for path in sorted(FIXTURES.iterdir()) if path.suffix in (".txt", ".json", ".bin")]
# Generous bounds: a small input parses in milliseconds and a few hundred KB; the worst input within the
# limits takes a few seconds under tracemalloc. The old parser took 53-87 s and GBs on the adversarial
# inputs. CPU time, not wall time: CI machines are shared, and a wall clock measures the neighbours.
SECONDS = 20.0
MEMORY = 32 * 1024 * 1024
PER_INPUT_BYTE = 24  # peak Python memory per byte of input, over MEMORY
FUZZ = settings(
    max_examples=100,
    deadline=None,  # the time bound is asserted below, with room for a loaded machine
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_shape(run: dict[str, Any]) -> None:
    assert isinstance(run, dict)
    assert run["source_format"] in ("text", "json")
    assert isinstance(run["complete"], bool)
    assert isinstance(run["errors"], list) and all(isinstance(error, str) for error in run["errors"])
    assert isinstance(run["rows"], list) and isinstance(run["notes"], list)
    assert run["complete"] or run["errors"], "an incomplete run always says why"
    assert len(run["errors"]) <= 100
    for row in run["rows"]:
        assert isinstance(row["size"], int) and isinstance(row["count"], int)
        for placement in ("out_of_place", "in_place"):
            for key in ("time_us", "algbw", "busbw", "wrong"):
                value = row[placement][key]
                assert value is None or (isinstance(value, float) and math.isfinite(value))
    json.dumps(run, allow_nan=False)  # strict JSON, as report.json and --json print it


def parse_bounded(data: str | bytes) -> list[dict[str, Any]]:
    """parse_runs under a clock and tracemalloc; asserts the shape and the bounds."""
    tracemalloc.start()
    try:
        started = time.process_time()
        runs = nccl.parse_runs(data)
        elapsed = time.process_time() - started
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(runs, list) and 1 <= len(runs) <= nccl.MAX_RUNS
    for run in runs:
        check_shape(run)
        assert not any(error.startswith("parser error") for error in run["errors"]), run["errors"]
    assert elapsed < SECONDS, f"{elapsed:.2f} s of CPU for {len(data)} bytes"
    assert peak < MEMORY + PER_INPUT_BYTE * len(data), f"peak {peak} bytes for {len(data)} bytes of input"
    return runs


@FUZZ
@given(st.binary(max_size=4096))
def test_any_bytes(data: bytes) -> None:
    parse_bounded(data)


@FUZZ
@given(st.text(max_size=2048))
def test_any_text(data: str) -> None:
    parse_bounded(data)


# JSON-like noise: the characters the JSON scans and the repair react to.
@FUZZ
@given(st.text(alphabet='{}[],:"\\ \n0123456789.-+eEnaif#', max_size=3000).map(lambda text: "{" + text))
def test_json_like_noise(data: str) -> None:
    parse_bounded(data)


# Table-like noise: rows, headers, footers and prefixes in any order and shape.
LINES = st.sampled_from(
    [
        "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "     1048576        262144     float     sum      -1    1.0   1.0   1.0      0    1.0   1.0   1.0      0",
        "1 2 float sum -1 nan inf -inf N/A 1 2 3 4",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 12.5",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
        "#  Rank  0 Group  0 Pid  1 on node-a device  0 [0x1b] NVIDIA H100",
        "# Collective test starting: all_reduce_perf",
        "# nccl-tests version 2.19.6",
        "node-b: Test NCCL failure common.cu:1 'x'",
        "node-a:1:1 [0] NCCL INFO x",
        "[1,0]<stdout>:",
        "0: ",
        "2026-12-01T10:00:00Z ",
        "",
    ]
)


@FUZZ
@given(st.lists(st.tuples(LINES, LINES), max_size=200))
def test_table_like_noise(pairs: list[tuple[str, str]]) -> None:
    parse_bounded("\n".join(prefix + line for prefix, line in pairs))


@st.composite
def mutated_fixture(draw: st.DrawFn) -> bytes:
    """A SYNTHETIC fixture with a few bytes replaced, inserted or deleted, cut, or a slice repeated."""
    data = bytearray(draw(st.sampled_from(SAMPLES)))
    for _edit in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["replace", "insert", "delete", "cut", "repeat"]))
        at = draw(st.integers(0, len(data)))
        if kind == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "cut":
            data = data[:at]
        else:
            size = draw(st.integers(1, 256))
            data[at:at] = bytes(data[at : at + size]) * draw(st.integers(1, 20))
    return bytes(data)


@FUZZ
@given(mutated_fixture())
def test_mutated_fixtures(data: bytes) -> None:
    parse_bounded(data)


@FUZZ
@given(st.sampled_from(SAMPLES), st.sampled_from(["    ", "\t", "[1,3]<stdout>:", " 12: ", "[0] ", "host-1: "]))
def test_prefixed_fixtures_parse_as_the_raw_ones(data: bytes, prefix: str) -> None:
    text = data.decode("utf-8", errors="replace")
    if "\x00" in text or data.startswith(b"{"):
        return  # binary and -J JSON are not line output
    prefixed = "".join(prefix + line for line in text.splitlines(keepends=True))
    keys = ("collective", "rows", "avg_busbw", "out_of_bounds", "complete", "hosts", "nranks")
    raw = [[run[key] for key in keys] for run in parse_bounded(text)]
    assert [[run[key] for key in keys] for run in parse_bounded(prefixed)] == raw


ONE_RUN = (FIXTURES / "v2_19_reference.txt").read_text()
ONE_JSON = (FIXTURES / "json_v1.json").read_text()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param("{}" * 2_500_000, "JSON values, more than the limit", id="5MB-of-braces"),
        pytest.param(b"{}" * 2_500_000, "JSON values, more than the limit", id="5MB-of-braces-bytes"),
        pytest.param('{"a":' + "[" * 900 + "," * 2_000_000, "JSON values, more than the limit", id="deep-commas"),
        pytest.param('{"a":' + "[" * 900 + "1," * 100_000, "nested deeper than 32", id="deep-brackets"),
        pytest.param("[" * 4_000_000, None, id="deep-brackets-as-text"),
        pytest.param('{"a":' + "[" * 30 + "1," * 100_000, None, id="truncated-depth-30"),
        pytest.param(ONE_RUN * (nccl.MAX_RUNS + 1), "more than 64 runs", id="many-runs"),
        pytest.param(ONE_RUN * nccl.MAX_RUNS, None, id="64-runs"),
        pytest.param(ONE_JSON * (nccl.MAX_JSON_DOCUMENTS + 1), "more than 64 JSON documents", id="many-json-docs"),
        pytest.param("{}\n" * 20_000, "more than 64 JSON documents", id="many-empty-json-docs"),
        pytest.param("\n" * (nccl.MAX_INPUT_BYTES - 1), None, id="8MiB-of-newlines"),
        pytest.param(b"\xff" * (nccl.MAX_INPUT_BYTES + 1), "over the limit of 8388608", id="over-8MiB"),
        pytest.param("x" * 4_000_000, None, id="one-4MB-line"),
        pytest.param("[1,0]<stdout>:" * 300_000, None, id="prefixes-only"),
    ],
)
def test_adversarial_inputs(data: str | bytes, error: str | None) -> None:
    runs = parse_bounded(data)
    if error is not None:
        assert len(runs) == 1 and any(error in text for text in runs[0]["errors"]), runs[0]["errors"]
