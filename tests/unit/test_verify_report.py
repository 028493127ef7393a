# SPDX-License-Identifier: Apache-2.0
"""gpufabric.report: results directories built from the SYNTHETIC fixtures, judged against the real catalog."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpufabric import catalog as fabric_catalog
from gpufabric import report
from gpufabric.collection import module_utils
from gpufabric.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
PROFILE = "baremetal/hgx-h100-ib-ndr"
MIB, GIB = 1 << 20, 1 << 30


def make_fixtures() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic_output(peak: float, sizes: list[int], nodes: int = 2, gpus: int = 8) -> str:
    """A SYNTHETIC v2.13-style all_reduce output whose busbw rises towards `peak`."""
    fixtures = make_fixtures()
    rows = fixtures.model_rows("all_reduce", nodes * gpus, sizes, peak)
    lines = fixtures.run_text("2.13", "all_reduce_perf", rows, nodes, gpus, sizes[0], sizes[-1], 2)
    return fixtures.text(lines)


def make_results(
    root: Path,
    tier: str,
    outputs: dict[str, str | Path],
    *,
    nodes: int = 2,
    algo: str = "default",
    exit_codes: dict[str, int] | None = None,
    run_id: str = "20250314T092653Z",
    profile: str = PROFILE,
) -> Path:
    """<root>/<tier>/<run id>/ with one output per collective and a run.json shaped like roles/nccl_tests'."""
    directory = root / tier / run_id
    directory.mkdir(parents=True)
    runs = []
    for collective, output in outputs.items():
        name = f"{collective}-{nodes}n.txt"
        if isinstance(output, Path):
            shutil.copyfile(output, directory / name)
        else:
            (directory / name).write_text(output)
        code = (exit_codes or {}).get(collective, 0)
        runs.append(
            {
                "collective": collective,
                "algo": algo,
                "nodes": nodes,
                "min_bytes": 8 * MIB,
                "max_bytes": 8 * GIB,
                "file": name,
                "output": f"/var/lib/gpufabric/nccl-tests/{run_id}/{name}",
                "env": {"NCCL_IB_HCA": "mlx5"},
                "argv": ["timeout", "--kill-after=30", "1800s", "mpirun", f"/opt/nccl-tests/current/{collective}_perf"],
                "exit_code": code,
                "started": "2025-03-14 09:26:53.000000",
                "finished": "2025-03-14 09:27:53.000000",
                "verdict": {"status": "stale: the report re-judges"},
            }
        )
    record = {
        "run_id": run_id,
        "profile": profile,
        "tier": tier,
        "nodes": nodes,
        "gpus_per_node": 8,
        "algo": "auto",
        "collectives": list(outputs),
        "hosts": [f"node-{chr(97 + i)}" for i in range(nodes)],
        "addresses": [f"node-{chr(97 + i)}" for i in range(nodes)],
        "launcher": "node-a",
        "hostfile": "".join(f"node-{chr(97 + i)} slots=8\n" for i in range(nodes)),
        "nccl_tests": {"install": "path", "version": None, "bin_dir": "/opt/nccl-tests/current"},
        "command": {run["collective"]: run["argv"] for run in runs},
        "exit_codes": {run["collective"]: run["exit_code"] for run in runs},
        "started": "2025-03-14 09:26:53.000000",
        "finished": "2025-03-14 09:27:53.000000",
        "runs": runs,
    }
    (directory / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return directory


@pytest.fixture(scope="module")
def catalog() -> Any:
    return fabric_catalog.load([])


def lowest_busbw(path: Path) -> dict[int, float]:
    run = module_utils("nccl_output").parse_runs(path.read_bytes())[0]
    points: dict[int, float] = {}
    for row in run["rows"]:
        points[row["size"]] = min(points.get(row["size"], row["out_of_place"]["busbw"]), row["out_of_place"]["busbw"])
    return points


def test_a_passing_two_node_run(tmp_path, catalog):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    built = report.build(tmp_path, catalog, tiers=["best"])
    assert built["report_version"] == 1 and built["profile"] == PROFILE
    assert built["line_rate_gbit_s"] == 3200 and built["line_rate_gbyte_s"] == 400
    assert built["status"] == "pass" and built["speedup"] == []
    (run,) = built["tiers"]["best"]["runs"]
    assert run["status"] == "pass" and run["collective"] == "all_reduce" and run["nodes"] == 2
    assert run["algo"] == "default" and run["exit_code"] == 0 and run["complete"] is True
    assert run["threshold"]["min_busbw_gbyte_s"] == 420 and run["threshold"]["min_size_bytes"] == 8 * GIB
    assert run["measured_busbw"] == lowest_busbw(FIXTURES / "v2_13_all_reduce_2node.txt")[8 * GIB]
    assert run["largest_size"] == 8 * GIB and len(run["rows"]) == 4
    assert run["output"] == "best/20250314T092653Z/all_reduce-2n.txt"
    assert run["hosts"] == ["node-a", "node-b"] and run["run_id"] == "20250314T092653Z"
    assert any(reason.endswith(": ok") for reason in run["reasons"])
    assert report.exit_code(built) == 0
    path = report.write(built, tmp_path)
    assert json.loads(path.read_text()) == built


def test_data_errors_and_incomplete_runs_fail(tmp_path, catalog):
    make_results(
        tmp_path,
        "best",
        {"all_reduce": FIXTURES / "data_errors.txt", "all_gather": FIXTURES / "nccl_failure.txt"},
        exit_codes={"all_gather": 1},
    )
    built = report.build(tmp_path, catalog)
    wrong, failure = built["tiers"]["best"]["runs"]
    assert wrong["status"] == "fail" and any("data errors" in reason for reason in wrong["reasons"])
    assert failure["status"] == "fail" and failure["exit_code"] == 1
    assert any("Test NCCL failure" in reason for reason in failure["reasons"])
    assert any(reason == "mpirun exited 1" for reason in failure["reasons"])
    assert built["tiers"]["best"]["status"] == "fail" and built["status"] == "fail"
    assert report.exit_code(built) == 1


def test_a_clean_output_with_a_failed_exit_code_fails(tmp_path, catalog):
    make_results(
        tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"}, exit_codes={"all_reduce": 124}
    )
    (run,) = report.build(tmp_path, catalog)["tiers"]["best"]["runs"]
    assert run["status"] == "fail"
    assert "mpirun exited 124 (the wall-clock timeout (nccl_tests_timeout) fired)" in run["reasons"]


def test_missing_output_fails_naming_the_file(tmp_path, catalog):
    directory = make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    (directory / "all_reduce-2n.txt").unlink()
    (run,) = report.build(tmp_path, catalog)["tiers"]["best"]["runs"]
    assert run["status"] == "fail"
    assert any("cannot read the output all_reduce-2n.txt" in reason for reason in run["reasons"])


def test_unverified_threshold_warns(tmp_path):
    override = tmp_path / "site.yml"
    # A site catalog that raises the (unverified) 2-node ring threshold above the SYNTHETIC run.
    profile = fabric_catalog.load([]).get(PROFILE)
    thresholds = [dict(entry) for entry in profile["bandwidth"]["thresholds"]]
    for entry in thresholds:
        if entry["algo"] == "ring":
            entry["min_busbw_gbyte_s"] = 400
    override.write_text(
        json.dumps(
            {"profiles": {PROFILE: {**profile, "bandwidth": {**profile["bandwidth"], "thresholds": thresholds}}}}
        )
    )
    results = tmp_path / "results"
    make_results(results, "best", {"all_reduce": FIXTURES / "v2_16_all_reduce_ring_2node.txt"}, algo="ring")
    built = report.build(results, fabric_catalog.load([override]))
    (run,) = built["tiers"]["best"]["runs"]
    assert run["status"] == "warn" and run["algo"] == "ring" and run["threshold"]["verified"] is False
    assert any("unverified threshold" in reason and "calibrate per site" in reason for reason in run["reasons"])
    assert built["status"] == "warn" and report.exit_code(built) == 0


def test_standard_tier_is_a_baseline_and_unknown_profiles_are_unjudged(tmp_path, catalog):
    make_results(tmp_path, "standard", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    (run,) = report.build(tmp_path, catalog)["tiers"]["standard"]["runs"]
    assert run["status"] == "unjudged" and run["threshold"] is None
    assert run["reasons"][0].startswith("tier standard is a baseline")
    other = tmp_path / "other"
    make_results(other, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"}, profile="site/unknown")
    built = report.build(other, catalog)
    (run,) = built["tiers"]["best"]["runs"]
    assert run["status"] == "unjudged" and "'site/unknown' is not in the catalog" in run["reasons"][0]
    assert built["line_rate_gbyte_s"] is None and report.exit_code(built) == 0


def test_compare_speedup_per_size(tmp_path, catalog):
    sizes = [128 * MIB, 512 * MIB, 2 * GIB, 8 * GIB]
    make_results(tmp_path, "standard", {"all_reduce": synthetic_output(9.6, sizes)})
    best = make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    built = report.build(tmp_path, catalog, tiers=["standard", "best"], compare=["standard", "best"])
    assert list(built["tiers"]) == ["standard", "best"]
    (item,) = built["speedup"]
    assert (item["collective"], item["nodes"], item["baseline"], item["tier"]) == ("all_reduce", 2, "standard", "best")
    base = lowest_busbw(tmp_path / "standard" / "20250314T092653Z" / "all_reduce-2n.txt")
    fast = lowest_busbw(best / "all_reduce-2n.txt")
    assert [point["size"] for point in item["sizes"]] == sizes
    for point in item["sizes"]:
        assert point["baseline_busbw"] == base[point["size"]] and point["busbw"] == fast[point["size"]]
        assert point["speedup"] == round(fast[point["size"]] / base[point["size"]], 3)
    assert item["sizes"][-1]["speedup"] > 40
    # Without an explicit order, standard is the baseline when both tiers are there.
    assert report.build(tmp_path, catalog)["speedup"] == built["speedup"]
    # Sizes only one tier ran are left out.
    other = tmp_path / "partial"
    make_results(other, "standard", {"all_reduce": synthetic_output(9.6, sizes[:2])})
    make_results(other, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    assert [p["size"] for p in report.build(other, catalog)["speedup"][0]["sizes"]] == sizes[:2]


def test_no_results_is_a_usage_error_and_a_bad_record_is_one_too(tmp_path, catalog):
    with pytest.raises(UserError, match=r"no run\.json under"):
        report.build(tmp_path, catalog)
    (tmp_path / "best" / "x").mkdir(parents=True)
    (tmp_path / "best" / "x" / "run.json").write_text("{not json")
    with pytest.raises(UserError, match=r"best/x/run\.json: not JSON \(Expecting property name"):
        report.build(tmp_path, catalog)
    # A tier that was asked for but left nothing.
    (tmp_path / "best" / "x" / "run.json").unlink()
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    built = report.build(tmp_path, catalog, tiers=["best", "standard"], tier_errors={"standard": ["host down"]})
    assert built["tiers"]["standard"]["errors"] == ["host down"]


def _record(tmp_path: Path) -> Path:
    return make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"}) / "run.json"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[1, 2]", "holds a JSON list, not an object"),
        (b'"text"', "holds a JSON str, not an object"),
        (b"\xff\xfe{}", "not UTF-8 (byte 0xff at offset 0)"),
        (b"\x00\x01binary", "not JSON"),
        (b'{"profile": "p", "nodes": NaN}', "NaN is not a JSON number"),
        (b'{"profile": "p", "nodes": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"profile": "p", "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 16 levels"),
        (b'{"profile": "p", "x": ' + b"[" * 100000, "nested deeper than 16 levels"),
        (b'{"collectives": ["all_reduce"]}', "missing key 'profile'"),
        (b'{"profile": "p"}', "missing key 'runs' (or 'collectives')"),
        (b'{"profile": ["p"], "collectives": ["all_reduce"]}', "'profile' is list, not a non-empty string"),
        (b'{"profile": "p", "nodes": "two", "collectives": ["all_reduce"]}', "'nodes' is 'two', not an integer"),
        (b'{"profile": "p", "nodes": true, "collectives": ["all_reduce"]}', "'nodes' is True, not an integer"),
        (b'{"profile": "p", "runs": {"a": 1}}', "'runs' is dict, not a list"),
        (b'{"profile": "p", "runs": [1]}', "'runs[0]' is 1, not an object"),
        (b'{"profile": "p", "runs": [{}]}', "missing key 'runs[0].collective'"),
        (b'{"profile": "p", "runs": [{"collective": "all_reduce", "exit_code": 1.5}]}', "'runs[0].exit_code' is 1.5"),
        (b'{"profile": "p", "runs": [{"collective": "all_reduce", "file": "../../etc/passwd"}]}', "not a file name"),
        (b'{"profile": "p", "runs": [{"collective": "all_reduce", "file": "/etc/passwd"}]}', "not a file name"),
        (b'{"profile": "p", "runs": [{"collective": "../x"}]}', "'runs[0].collective' is '../x', not a file name"),
        (b'{"profile": "p", "collectives": ["a/b"]}', "'collectives[0]' is 'a/b', not a file name"),
        (b'{"profile": "p", "exit_codes": [0], "collectives": ["all_reduce"]}', "'exit_codes' is list, not an object"),
        (b'{"profile": "p", "hosts": [1], "collectives": ["all_reduce"]}', "'hosts[0]' is 1, not a non-empty string"),
        (b" " * (report.MAX_RECORD_BYTES + 1), "larger than 1048576 bytes"),
    ],
)
def test_a_malformed_run_json_is_one_error_naming_the_file(tmp_path, catalog, content, message):
    record = _record(tmp_path)
    record.write_bytes(content)
    with pytest.raises(UserError) as caught:
        report.build(tmp_path, catalog)
    text = str(caught.value)
    assert text.startswith(f"{record}: ") and message in text, text
    assert "\n" not in text


def test_a_run_json_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, catalog):
    record = _record(tmp_path)
    record.unlink()
    os.mkfifo(record)
    with pytest.raises(UserError, match=r"run\.json: not a regular file"):
        report.build(tmp_path, catalog)


def test_an_output_over_the_parser_limit_is_a_failed_run(tmp_path, catalog):
    record = _record(tmp_path)
    limit = module_utils("nccl_output").MAX_INPUT_BYTES
    with (record.parent / "all_reduce-2n.txt").open("ab") as stream:
        stream.truncate(limit + 1)
    (run,) = report.build(tmp_path, catalog)["tiers"]["best"]["runs"]
    assert run["status"] == "fail" and "over the limit of 8388608 (8 MiB)" in " ".join(run["reasons"])


def test_an_output_the_role_did_not_fetch_for_its_size_says_so(tmp_path, catalog):
    record = _record(tmp_path)
    data = json.loads(record.read_text())
    data["runs"][0]["output_bytes"] = 10 * 1024 * 1024 * 1024
    record.write_text(json.dumps(data))
    (record.parent / "all_reduce-2n.txt").unlink()
    (run,) = report.build(tmp_path, catalog)["tiers"]["best"]["runs"]
    assert run["status"] == "fail"
    assert "not fetched from the host: 10737418240 bytes, over the limit" in " ".join(run["reasons"])


def test_table_text(tmp_path, catalog):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"}, run_id="a")
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "data_errors.txt"}, run_id="b")
    built = report.build(tmp_path, catalog)
    console = Console(record=True, width=200, color_system=None)
    report.render(built, console)
    text = console.export_text()
    for heading in ("collective", "nodes", "tier", "status", "busbw GB/s", "threshold", "verified", "largest size"):
        assert heading in text
    assert "PASS" in text and "FAIL" in text and ">= 420.0 GB/s at >= 8 GiB" in text and "yes" in text
    flat = " ".join(text.split())
    assert "fail all_reduce on 2 node(s), tier best: data errors: 1.67772e+07 wrong elements" in flat
    assert ": ok" not in flat


def test_an_output_of_another_collective_is_flagged(tmp_path, catalog):
    make_results(tmp_path, "best", {"all_gather": FIXTURES / "v2_13_all_reduce_2node.txt"})
    (run,) = report.build(tmp_path, catalog)["tiers"]["best"]["runs"]
    assert run["status"] == "warn" and run["collective"] == "all_reduce"
    assert run["reasons"][0] == "all_gather-2n.txt is all_reduce_perf output, but run.json says all_gather"


def _with_nccl(directory: Path, nccl: dict) -> None:
    path = directory / "run.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "nccl": nccl}))


def test_nodes_on_different_nccl_versions_fail_and_the_pin_is_compared(tmp_path, catalog):
    lib = "/usr/lib/x86_64-linux-gnu/libnccl.so."
    directory = make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    _with_nccl(directory, {"loaded": {"node-a": lib + "2.28.7", "node-b": lib + "2.27.5"}, "pin": "2.28.7-1+cuda12.9"})
    (run,) = report.build(tmp_path, catalog, tiers=["best"])["tiers"]["best"]["runs"]
    assert run["status"] == "fail"
    assert "the nodes load different NCCL versions (node-a 2.28.7, node-b 2.27.5)" in run["reasons"][-1]
    _with_nccl(directory, {"loaded": {"node-a": lib + "2.28.7", "node-b": lib + "2.28.7"}, "pin": "2.27.5-1+cuda12.9"})
    (run,) = report.build(tmp_path, catalog, tiers=["best"])["tiers"]["best"]["runs"]
    assert run["status"] == "warn"
    assert "the nodes load NCCL 2.28.7, the plan pins 2.27.5-1+cuda12.9 (nccl role)" in run["reasons"]
    assert "info: NCCL 2.28.7 loaded on every node (node-a, node-b)" in run["reasons"]


@pytest.mark.parametrize(
    ("nccl", "message"),
    [({"loaded": ["x"]}, "'nccl.loaded' is list, not an object"), ({"loaded": {"a": 1}}, "'nccl.loaded.a' is int")],
)
def test_a_malformed_nccl_record_is_refused(tmp_path, catalog, nccl, message):
    directory = make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    _with_nccl(directory, nccl)
    with pytest.raises(UserError, match=re.escape(message)):
        report.build(tmp_path, catalog)
