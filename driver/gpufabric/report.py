# SPDX-License-Identifier: Apache-2.0
"""`gpufabric verify` reports: judge the fetched nccl-tests outputs and show the verdicts.

The role (roles/nccl_tests) leaves, per tier, ``<dir>/<tier>/<run id>/run.json`` and one
``<collective>-<N>n.txt`` per collective. This module re-reads them, parses every output with the
collection's parser and judges it with the collection's judgement (plugins/module_utils
nccl_output, nccl_judge, nccl_tests_run: the same code the role runs), against the catalog profile
named in run.json. So an old results directory can be judged again after a catalog change.

The report (report.json)::

    {"report_version": 1, "profile": str|None, "line_rate_gbit_s": float|None,
     "line_rate_gbyte_s": float|None, "status": "pass"|"warn"|"unjudged"|"fail",
     "tiers": {tier: {"status", "errors": [str],
                      "runs": [{"run_id", "collective", "nodes", "algo", "status", "measured_busbw",
                                "threshold", "reasons", "largest_size", "exit_code", "output",
                                "hosts", "version", "complete", "avg_busbw", "rows"}]}},
     "speedup": [{"collective", "nodes", "baseline", "tier",
                  "sizes": [{"size", "baseline_busbw", "busbw", "speedup"}]}]}

``rows`` are the parser's rows. Per size, a curve (plot, speed-up) uses the lowest out-of-place
busbw of the rows of that size, the judgement's own metric.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric import nccl as nccl_output
from gpufabric import output_file
from gpufabric.collection import module_utils
from gpufabric.errors import UserError

REPORT_VERSION = 1
REPORT_FILE = "report.json"
RECORD_FILE = "run.json"
BASELINE_TIER = "standard"
# Worst first: the overall status is the worst of the runs'.
SEVERITY = ("fail", "warn", "unjudged", "pass")
STATUS_STYLE = {"pass": "green", "warn": "yellow", "unjudged": "yellow", "fail": "bold red"}
# A run.json the role writes is a few KB; one far larger, or nested deeper than it ever is, is not one.
MAX_RECORD_BYTES = 1024 * 1024
MAX_RECORD_DEPTH = 16
_NO_THRESHOLD = "the profile has no threshold for"


def worst(statuses: list[str]) -> str:
    """The most severe status of a list ("pass" for an empty one)."""
    for status in SEVERITY:
        if status in statuses:
            return status
    return "pass"


class RecordError(Exception):
    """What is wrong with a run.json (the caller names the file)."""


def _integer(value: Any) -> bool:
    """An integer as the role writes it: a JSON number, or its text (older Ansible templates to strings)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit())


def _check(value: Any, where: str, kind: str, *, required: bool = False) -> None:
    """RecordError unless value (at `where` in run.json) is of kind: text, integer, list or object."""
    if value is None:
        if required:
            raise RecordError(f"missing key {where!r}")
        return
    ok = {
        "text": isinstance(value, str) and bool(value.strip()),
        "integer": _integer(value),
        "list": isinstance(value, list),
        "object": isinstance(value, dict),
    }[kind]
    if not ok:
        shown = repr(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
        wanted = {"text": "a non-empty string", "integer": "an integer", "list": "a list", "object": "an object"}[kind]
        raise RecordError(f"{where!r} is {shown[:80]}, not {wanted}")


def _check_name(name: str, where: str) -> None:
    """An output is read beside its run.json: a name with a directory in it could read any file."""
    if Path(name).name != name or name in (".", "..") or "\\" in name:
        raise RecordError(f"{where!r} is {name!r}, not a file name beside run.json")


def _refuse_constant(name: str) -> Any:
    raise RecordError(f"{name} is not a JSON number (the role writes strict JSON)")


def validate_record(record: Any) -> dict[str, Any]:
    """The record, when it has the shape roles/nccl_tests writes (the keys the report reads); RecordError if not."""
    if not isinstance(record, dict):
        raise RecordError(f"holds a JSON {type(record).__name__}, not an object")
    _check(record.get("profile"), "profile", "text", required=True)
    for key in ("run_id", "tier", "algo"):
        _check(record.get(key), key, "text")
    _check(record.get("nodes"), "nodes", "integer")
    _check(record.get("exit_codes"), "exit_codes", "object")
    for key in ("hosts", "runs", "collectives"):
        _check(record.get(key), key, "list")
    for index, host in enumerate(record.get("hosts") or []):
        _check(host, f"hosts[{index}]", "text", required=True)
    for index, name in enumerate(record.get("collectives") or []):
        _check(name, f"collectives[{index}]", "text", required=True)
        _check_name(name, f"collectives[{index}]")  # it names the output file when there is no `runs`
    for index, run in enumerate(record.get("runs") or []):
        where = f"runs[{index}]"
        _check(run, where, "object", required=True)
        _check(run.get("collective"), f"{where}.collective", "text", required=True)
        _check_name(run["collective"], f"{where}.collective")
        _check(run.get("nodes"), f"{where}.nodes", "integer")
        _check(run.get("algo"), f"{where}.algo", "text")
        _check(run.get("exit_code"), f"{where}.exit_code", "integer")
        _check(run.get("file"), f"{where}.file", "text")
        if run.get("file") is not None:
            _check_name(run["file"], f"{where}.file")
    scope = record.get("scope")
    if scope is not None and scope not in SCOPE_LABELS:
        raise RecordError(f"'scope' is {str(scope)[:80]!r}, not one of {', '.join(SCOPE_LABELS)}")
    _check(record.get("nccl"), "nccl", "object")
    nccl = record.get("nccl") or {}
    _check(nccl.get("loaded"), "nccl.loaded", "object")
    # A node's library path and the pin may be empty (none found, no pin): strings, not text.
    for where, value in [("nccl.pin", nccl.get("pin", ""))] + [
        (f"nccl.loaded.{host}", library) for host, library in (nccl.get("loaded") or {}).items()
    ]:
        if not isinstance(value, str):
            raise RecordError(f"{where!r} is {type(value).__name__}, not a string")
    if not record.get("runs") and not record.get("collectives"):
        raise RecordError("missing key 'runs' (or 'collectives'): it names no collective")
    return record


def load_record(path: Path) -> dict[str, Any]:
    """One run.json, checked: a UserError naming the file and what is wrong with it, before anything is written."""
    try:
        if not path.is_file():
            raise RecordError("not a regular file")
        with path.open("rb") as stream:
            data = stream.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise RecordError(f"larger than {MAX_RECORD_BYTES} bytes; the role writes a few KB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
        if module_utils("nccl_output").json_depth(text, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
            raise RecordError(f"nested deeper than {MAX_RECORD_DEPTH} levels; the role writes 5")
        try:
            record = json.loads(text, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise RecordError(f"not JSON ({exc})") from None
        return validate_record(record)
    except RecordError as exc:
        problem = str(exc)
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
    raise UserError(
        f"{path}: {problem}; a run.json is what `gpufabric verify` (role nccl_tests) writes. "
        "report.json and busbw.png were not written"
    )


def find_records(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every run.json under root, sorted by path, each checked (a UserError for the first bad one)."""
    return [(path, load_record(path)) for path in sorted(root.rglob(RECORD_FILE))]


# `gpufabric verify --nvlink`: a run's scope (run.json's "scope") names where its hosts are in the NVLink domains.
SCOPE_LABELS = {"within": "within-domain", "across": "across-domains"}


def tier_label(tier: str, scope: str | None) -> str:
    """What the report calls a tier's runs: the tier, or for an --nvlink scope 'best-within-domain' and
    'best-across-domains' (also their directory under the results)."""
    return f"{tier}-{SCOPE_LABELS[scope]}" if scope in SCOPE_LABELS else tier


def record_tier(path: Path, record: dict[str, Any], root: Path) -> str:
    """The tier run.json names (with its --nvlink scope), else the directory below root
    (<root>/<tier>/<run id>/run.json)."""
    tier = record.get("tier")
    if isinstance(tier, str) and tier:
        return tier_label(tier, record.get("scope"))
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) >= 3 else "best"


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _record_runs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs of one record: its `runs` list, else one per collective named `<collective>-<N>n.txt`."""
    runs = [run for run in record.get("runs") or [] if isinstance(run, dict)]
    if runs:
        return runs
    nodes = _int_or_none(record.get("nodes"))
    exit_codes = record.get("exit_codes")
    if not isinstance(exit_codes, dict):
        exit_codes = {}
    algo = record.get("algo") if record.get("algo") in ("default", "ring") else "default"
    return [
        {
            "collective": str(name),
            "nodes": nodes,
            "algo": algo,
            "file": f"{name}-{nodes}n.txt",
            "exit_code": exit_codes.get(name),
        }
        for name in record.get("collectives") or []
    ]


def _read_output(path: Path, size_on_host: Any = None) -> tuple[dict[str, Any], list[str]]:
    """The first run of an output file (the role writes one per collective) and notes about the file.

    An output the role did not fetch because it was over the parser's limit (run.json's `output_bytes`),
    or one that cannot be read or is over that limit here, is a failed run, never an error of the report.
    """
    parser = module_utils("nccl_output")
    try:
        if not path.exists() and _integer(size_on_host) and (problem := parser.over_limit(int(size_on_host))):
            raise OSError(f"not fetched from the host: {problem}")
        data = nccl_output.read_output(path)
    except OSError as exc:
        run: dict[str, Any] = parser.empty_run()
        run["errors"].append(f"cannot read the output {path.name}: {exc.strerror or exc}")
        return run, []
    runs: list[dict[str, Any]] = parser.parse_runs(data)
    if not runs:
        run = parser.empty_run()
        run["errors"].append(f"{path.name} holds no nccl-tests run")
        return run, []
    notes = [f"{path.name} holds {len(runs)} runs; the first is judged"] if len(runs) > 1 else []
    return runs[0], notes


def judge_record(
    root: Path,
    path: Path,
    record: dict[str, Any],
    tier: str,
    profile: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Parse and judge each output of one run.json, as the role does (tier thresholds, exit codes)."""
    judge = module_utils("nccl_judge")
    planner = module_utils("nccl_tests_run")
    name = record.get("profile")
    # A label's tier is the record's own ('best-within-domain' is tier best, judged within the domain).
    tier = str(record.get("tier") or tier)
    bandwidth = dict((profile or {}).get("bandwidth") or {})
    thresholds = planner.tier_thresholds(bandwidth, tier)
    if record.get("scope") == "within":
        # Within one NVLink domain the GPUs talk over NVLink: the profile's nvlink.thresholds judge it.
        nvlink = (profile or {}).get("nvlink") or {}
        thresholds = list(nvlink.get("thresholds") or []) if tier == "best" else []
    judged = {**(profile or {}), "bandwidth": {**bandwidth, "thresholds": thresholds}}
    entries = []
    for spec in _record_runs(record):
        collective = spec.get("collective")
        nodes = _int_or_none(spec.get("nodes", record.get("nodes")))
        algo = spec.get("algo") if spec.get("algo") in ("default", "ring") else "default"
        output = path.parent / str(spec.get("file") or f"{collective}-{nodes}n.txt")
        run, notes = _read_output(output, spec.get("output_bytes"))
        exit_code = _int_or_none(spec.get("exit_code"))
        verdict = planner.verdict_line(judge.judge(run, judged, nodes, algo, collective=collective), exit_code)
        reasons = [str(reason) for reason in verdict["reasons"]]
        status = str(verdict["status"])
        named = run.get("collective")
        if collective and named and named != collective:
            reasons.insert(0, f"{output.name} is {named}_perf output, but run.json says {collective}")
            status = "warn" if status == "pass" else status
        # The NCCL each node loaded (run.json's nccl.loaded, read on the nodes before the run) and the launcher's.
        nccl = record.get("nccl") or {}
        if nccl.get("loaded"):
            findings = module_utils("nccl").rank_findings(
                nccl["loaded"], [run.get("nccl_version")], str(nccl.get("pin") or "")
            )
            reasons += findings["fail"] + findings["warn"] + findings["info"]
            status = "fail" if findings["fail"] else ("warn" if findings["warn"] and status == "pass" else status)
        if profile is None:
            reasons.insert(0, f"profile {name!r} is not in the catalog (add it with --catalog): not judged")
            reasons = [reason for reason in reasons if not reason.startswith(_NO_THRESHOLD)]
        elif tier != "best" and status == "unjudged":
            reasons = [
                f"tier {tier} is a baseline: judged for completeness and data errors only "
                "(the catalog's thresholds measure tier best)"
                if reason.startswith(_NO_THRESHOLD)
                else reason
                for reason in reasons
            ]
        entries.append(
            {
                "run_id": str(record.get("run_id") or path.parent.name),
                "profile": name,
                "collective": verdict.get("collective") or collective,
                "nodes": nodes,
                "algo": algo,
                "status": status,
                "measured_busbw": verdict.get("measured_busbw"),
                "threshold": verdict.get("threshold"),
                "reasons": reasons + notes,
                "largest_size": verdict.get("largest_size"),
                "exit_code": exit_code,
                "output": str(output.relative_to(root)) if output.is_relative_to(root) else str(output),
                "hosts": [str(host) for host in record.get("hosts") or []],
                "version": run.get("version"),
                "nccl_version": run.get("nccl_version"),
                "complete": bool(run.get("complete")),
                "avg_busbw": run.get("avg_busbw"),
                "rows": run.get("rows") or [],
            }
        )
    return entries


def curve(run: dict[str, Any]) -> dict[int, float]:
    """{size: lowest finite out-of-place busbw at that size} of one report run."""
    points: dict[int, float] = {}
    for row in run.get("rows") or []:
        value = (row.get("out_of_place") or {}).get("busbw")
        size = row.get("size")
        if not isinstance(size, int) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        points[size] = min(points.get(size, value), float(value))
    return dict(sorted(points.items()))


def speedups(tiers: dict[str, dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Per (collective, nodes) in both tiers: busbw of the second tier over the first, size by size."""
    if len(order) != 2 or not all(tier in tiers for tier in order):
        return []
    baseline, faster = order
    result = []
    first: dict[tuple[Any, Any], dict[str, Any]] = {}
    for run in tiers[baseline]["runs"]:
        first.setdefault((run["collective"], run["nodes"]), run)
    seen = set()
    for run in tiers[faster]["runs"]:
        key = (run["collective"], run["nodes"])
        if key in seen or key not in first:
            continue
        seen.add(key)
        base, fast = curve(first[key]), curve(run)
        sizes = [
            {
                "size": size,
                "baseline_busbw": base[size],
                "busbw": fast[size],
                "speedup": round(fast[size] / base[size], 3) if base[size] > 0 else None,
            }
            for size in sorted(set(base) & set(fast))
        ]
        if sizes:
            result.append({"collective": key[0], "nodes": key[1], "baseline": baseline, "tier": faster, "sizes": sizes})
    return result


def compare_order(tiers: list[str], requested: list[str] | None) -> list[str]:
    """The tiers a speed-up compares: the --compare order, else standard then best when both are there."""
    if requested and len(requested) == 2:
        return requested
    if BASELINE_TIER in tiers and "best" in tiers:
        return [BASELINE_TIER, "best"]
    return []


def build(
    root: Path,
    catalog: Any,
    *,
    tiers: list[str] | None = None,
    tier_errors: dict[str, list[str]] | None = None,
    compare: list[str] | None = None,
) -> dict[str, Any]:
    """The report of every run.json under root; `tiers` fixes which tiers appear and in which order."""
    by_tier: dict[str, dict[str, Any]] = {}
    for tier in tiers or []:
        by_tier[tier] = {"status": "pass", "errors": [], "runs": []}
    for tier, errors in (tier_errors or {}).items():
        by_tier.setdefault(tier, {"status": "pass", "errors": [], "runs": []})["errors"].extend(errors)
    profiles: list[str] = []
    for path, record in find_records(root):
        tier = record_tier(path, record, root)
        if tiers and tier not in tiers:
            continue
        name = record.get("profile")
        if isinstance(name, str) and name not in profiles:
            profiles.append(name)
        profile = catalog.get(name) if isinstance(name, str) else None
        entry = by_tier.setdefault(tier, {"status": "pass", "errors": [], "runs": []})
        entry["runs"].extend(judge_record(root, path, record, tier, profile))
    if not any(entry["runs"] or entry["errors"] for entry in by_tier.values()):
        raise UserError(
            f"no {RECORD_FILE} under {root}; --from-results takes the -o directory of an earlier "
            f"`gpufabric verify` (<dir>/<tier>/<run id>/{RECORD_FILE})"
        )
    for tier, entry in by_tier.items():
        if not entry["runs"] and not entry["errors"]:
            entry["errors"].append(f"no {RECORD_FILE} for tier {tier} under {root}")
        entry["status"] = "fail" if entry["errors"] else worst([run["status"] for run in entry["runs"]])
    if len(profiles) > 1:
        for entry in by_tier.values():
            entry["errors"].append(f"the results name several profiles ({', '.join(profiles)}); verify one at a time")
            entry["status"] = "fail"
    profile_name = profiles[0] if profiles else None
    bandwidth = (catalog.get(profile_name) or {}).get("bandwidth") or {} if profile_name else {}
    rate = bandwidth.get("line_rate_gbit_s")
    return {
        "report_version": REPORT_VERSION,
        "profile": profile_name,
        "line_rate_gbit_s": rate,
        "line_rate_gbyte_s": rate / 8 if isinstance(rate, (int, float)) else None,
        "status": worst([entry["status"] for entry in by_tier.values()]),
        "tiers": by_tier,
        "speedup": speedups(by_tier, compare_order(list(by_tier), compare)),
    }


def write(report: dict[str, Any], directory: Path) -> Path:
    """report.json in directory (strict JSON: the parser never leaves NaN behind)."""
    path = directory / REPORT_FILE
    output_file.write_atomically(path, json.dumps(report, indent=2, allow_nan=False) + "\n", make_parents=True)
    return path


def exit_code(report: dict[str, Any]) -> int:
    """1 when a run failed or a tier could not run; warn and unjudged do not fail the command."""
    return 1 if report["status"] == "fail" else 0


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _gbs(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def table(report: dict[str, Any]) -> Table:
    title = f"nccl-tests verification: {report.get('profile') or 'unknown profile'}"
    result = Table(title=escape(title), title_justify="left")
    for column, justify in (
        ("collective", "left"),
        ("nodes", "right"),
        ("algo", "left"),
        ("tier", "left"),
        ("status", "left"),
        ("busbw GB/s", "right"),
        ("threshold", "right"),
        ("verified", "left"),
        ("largest size", "right"),
    ):
        result.add_column(column, justify=justify)  # type: ignore[arg-type]
    for tier, entry in report["tiers"].items():
        for run in entry["runs"]:
            threshold = run.get("threshold") or {}
            limit = "-"
            if threshold:
                size = human_size(threshold.get("min_size_bytes"))
                limit = f">= {_gbs(threshold.get('min_busbw_gbyte_s'))} GB/s at >= {size}"
            verified = ("yes" if threshold.get("verified") else "no") if threshold else "-"
            result.add_row(
                Text(str(run.get("collective") or "?")),
                Text(str(run.get("nodes") if run.get("nodes") is not None else "?")),
                Text(str(run.get("algo"))),
                Text(tier),
                Text(run["status"].upper(), style=STATUS_STYLE.get(run["status"], "")),
                Text(_gbs(run.get("measured_busbw"))),
                Text(limit),
                Text(verified),
                Text(human_size(run.get("largest_size"))),
            )
    return result


def speedup_table(item: dict[str, Any]) -> Table:
    title = f"speed-up {item['tier']}/{item['baseline']}: {item['collective']} on {item['nodes']} node(s)"
    result = Table(title=escape(title), title_justify="left")
    for column in ("size", f"{item['baseline']} GB/s", f"{item['tier']} GB/s", "speed-up"):
        result.add_column(escape(column), justify="right")
    for point in item["sizes"]:
        speed = point["speedup"]
        result.add_row(
            Text(human_size(point["size"])),
            Text(_gbs(point["baseline_busbw"])),
            Text(_gbs(point["busbw"])),
            Text(f"{speed:.1f}x" if isinstance(speed, (int, float)) else "-"),
        )
    return result


def render(report: dict[str, Any], console: Console) -> None:
    """The verdict table, the reasons of every run that did not pass, tier errors and speed-ups."""
    if any(entry["runs"] for entry in report["tiers"].values()):
        console.print(table(report))
    for tier, entry in report["tiers"].items():
        for error in entry["errors"]:
            console.print(f"[red]error[/red] ({escape(tier)}): {escape(error)}", highlight=False)
        for run in entry["runs"]:
            if run["status"] == "pass":
                continue
            style = STATUS_STYLE.get(run["status"], "")
            label = f"{run.get('collective')} on {run.get('nodes')} node(s), tier {tier}"
            reasons = [
                reason for reason in run["reasons"] if not reason.startswith("info:") and not reason.endswith(": ok")
            ]
            for reason in reasons or ["(no reason given)"]:
                console.print(
                    f"[{style}]{run['status']}[/{style}] {escape(label)}: {escape(reason)}",
                    highlight=False,
                )
    for item in report["speedup"]:
        console.print(speedup_table(item))
