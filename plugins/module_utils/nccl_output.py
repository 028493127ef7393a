# SPDX-License-Identifier: Apache-2.0
"""Parse nccl-tests output (text of every generation, and the ``-J`` JSON file) into runs.

Stdlib only: the driver imports it through the collection on disk, the role through
``ansible_collections.gpufabric.cluster.plugins.module_utils.nccl_output`` and the
``gpufabric.cluster.nccl_parse`` filter. ``parse_runs`` never raises on any input:
bad input becomes a run with ``complete: false`` and a reason in ``errors``.

A run (one collective test) is a dict::

    {"collective": str|None, "version": str|None, "nccl_version": str|None, "nranks": int|None,
     "rows": [{"size", "count", "type", "redop", "root": int|None,
               "out_of_place": {"time_us", "algbw", "busbw", "wrong"},
               "in_place": {...}}],
     "avg_busbw": float|None, "out_of_bounds": int|None, "complete": bool,
     "errors": [str], "source_format": "text"|"json",
     "hosts": [str], "notes": [str]}

``wrong`` is None when nccl-tests printed ``N/A`` (not checked) and for builds up to
v2.11, whose last column is the largest numeric delta (kept as ``max_error``; their data
errors show in ``out_of_bounds``). Non-finite numbers (nan, inf) become None and add an
error, so every run serialises as strict JSON. docs/nccl-tests.md explains the rules.

The output comes from hosts, so the work is bounded whatever it holds (docs/nccl-tests.md, "Limits"):
at most ``MAX_INPUT_BYTES`` of input, ``MAX_RUNS`` runs, ``MAX_ROWS`` data rows, ``MAX_JSON_DOCUMENTS``
JSON documents, ``MAX_JSON_VALUES`` JSON values, and ``MAX_JSON_DEPTH`` levels of
nesting per file; the scans are linear in the input. An input over a limit is one run with
``complete: false`` and the limit it broke in ``errors``: the parse error of any bad input.

Lines may arrive indented (copied from a log viewer or a ticket) or behind launcher and log
prefixes (OpenMPI ``[1,0]<stdout>:``, Slurm/srun ``0:``, MPICH ``[0]``, kubectl ``[pod/p/c]``,
``host:``, ``svc |``, ISO or syslog timestamps): they parse as the raw output does.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

# Limits on one file. A real output is 2-30 KB (a 16-node run of one collective, 8 B to 16 GiB); the largest
# real ones are a few MB: NCCL_DEBUG=INFO on 128+ ranks, or -d all -o all (1,920 rows). 8 MiB leaves room for
# those; a file beyond any limit is not one nccl-tests run and is refused as a whole (one error run).
MAX_INPUT_BYTES = 8 * 1024 * 1024  # bytes (characters for text that is already decoded)
MAX_RUNS = 64  # collective tests per file; the role writes one per file
MAX_ROWS = 16384  # data rows per file; -d all -o all from 8 B to 16 GiB prints 1,920
MAX_LINES = 200_000  # lines per file; NCCL_DEBUG=INFO on 128 ranks prints about 40,000
MAX_JSON_DOCUMENTS = 64  # JSON documents per file; -J writes one
MAX_JSON_VALUES = 1_000_000  # JSON objects, arrays, strings and comma-separated items; -J writes about 100 per row
MAX_JSON_DEPTH = 32  # nesting levels; -J output nests 5 deep

# Row layouts when no column-name line was seen (wrappers that drop comment lines):
# token count -> (has root, per-half extra columns, trailing timestamp tokens).
_FALLBACK_LAYOUTS: dict[int, tuple[bool, int, int]] = {
    12: (False, 0, 0),  # <= v2.11: no root, `error` column
    13: (True, 0, 0),  # v2.13+
    15: (True, 0, 2),  # -S 1: date and time at the end (or -B bitwise: see _fallback_layout)
    17: (True, 1, 2),  # bitwise + timestamps
    21: (True, 4, 0),  # -I 1: i_min i_max i_p99 i_cv% after each half
    23: (True, 4, 2),  # -I 1 -S 1
}
_TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "half": 2,
    "bfloat16": 2,
    "float": 4,
    "int32": 4,
    "uint32": 4,
    "double": 8,
    "int64": 8,
    "uint64": 8,
}
_COLLECTIVE_PROGRAM = re.compile(r"\b([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
# One launcher or log prefix at the start of a line (after indentation). No data row, table header, footer or
# banner line starts like one: rows start with two integers, comment lines with '#', the rest with a word
# followed by a space.
_PREFIX = re.compile(
    r"""(?:
        \[?\d{4}-\d{2}-\d{2}[T\ ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?(?=\s|$)  # ISO time
      | [A-Z][a-z]{2}\ [\ \d]\d\ \d{2}:\d{2}:\d{2}\ \S+\ [^\s:]+:(?=\s|$)  # syslog: Dec  1 10:00:00 host tag[1]:
      | \[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?(?=\s)  # a clock
      | \[[^\]\s]{1,128}\](?:<(?:stdout|stderr|stddiag)>:|:|(?=\s|$))  # [1,0]<stdout>: (OpenMPI), [0] (MPICH),
                                                                      # [pod/p/c] (kubectl --prefix)
      | \d{1,7}:(?=\s|$|\#)  # srun --label: 0: (padded)
      | [A-Za-z][\w.-]{0,253}:(?=\s|$)  # host: (pdsh, clush)
      | [A-Za-z][\w.-]{0,253}\s+\|(?=\s|$)  # service | (docker compose)
    )""",
    re.VERBOSE,
)
_MAX_PREFIXES = 4  # e.g. a kubectl timestamp, then Slurm's label, then OpenMPI's tag
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VERSION = re.compile(r"nccl-tests version\s+(\S+)")
# The NCCL the launching process loaded: nccl-tests' banner (v2.14 on) prints its code, NCCL_DEBUG=VERSION or INFO
# prints "NCCL version 2.27.5+cuda12.9"; the -J document holds the code as nccl_version.
_NCCL_LIBRARY = re.compile(r"\bnccl-library=(\d+)")
_NCCL_VERSION_LINE = re.compile(r"\bNCCL version (\d+\.\d+\.\d+)")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"Collective test concluded:\s*(\S+)")
_NTHREAD = re.compile(r"^#?\s*nThread\s+\d+\s+nGpus\s+\d+")
_VALIDATION_OFF = re.compile(r"\bvalidation:\s*0\b")
_DEVICE = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\b")
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\s+redop\b")
_OOB = re.compile(r"^(?:#\s*)?Out of bounds values\s*:\s*(\S+)\s*(OK|FAILED)?", re.IGNORECASE)
_AVG = re.compile(r"^(?:#\s*)?Avg bus bandwidth\s*:\s*(\S*)\s*(OK|FAILED)?", re.IGNORECASE)
_LAST_ERROR = re.compile(r"^#\s*error:\s*(.*\S)")
_FAILURE = re.compile(r"Test NCCL failure|Test CUDA failure|Test failure|Test timeout|Invalid number of GPUs")
_LAUNCHER = re.compile(
    r"(?:mpirun|prterun|orterun) noticed that|srun: error:|MPI_ABORT was invoked|"
    r"exited on signal|Primary job\s+terminated|process returned a non-zero exit code"
)
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
_NCCL_CHATTER = re.compile(r"\bNCCL (?:INFO|TRACE)\b")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")
_INT = re.compile(r"^-?\d+$")
_BARE_NONFINITE = re.compile(r"(?<=[:\[,])(\s*)(-?)(inf|nan)\b", re.IGNORECASE)

# Stages of one run, in the order nccl-tests prints them; a line of an earlier stage
# than the current one starts the next run.
_EMPTY, _VERSION_S, _START_S, _NTHREAD_S, _DEVICES_S, _HEADER_S, _ROWS_S, _FOOTER_S, _CONCLUDED_S = range(9)
_MAX_QUOTED = 8  # error lines quoted per run; a failing 64-rank job prints one per rank and frame
_MAX_WARN = 3
_MAX_ERRORS = 50  # problems listed per run
_REPAIR_TRIES = 8  # cut points tried, last first, when closing a truncated JSON document


class _OverLimit(Exception):
    """The input breaks one of the MAX_* limits: it becomes one error run, never an exception to the caller."""


def add_error(errors: list[str], message: str) -> None:
    """Append a problem to a run's errors, up to _MAX_ERRORS of them (the rest are more of the same)."""
    if len(errors) < _MAX_ERRORS:
        errors.append(message)


def empty_run(source_format: str = "text") -> dict[str, Any]:
    """A run with nothing in it (the shape every run has)."""
    return {
        "collective": None,
        "version": None,
        "nccl_version": None,
        "nranks": None,
        "rows": [],
        "avg_busbw": None,
        "out_of_bounds": None,
        "complete": False,
        "errors": [],
        "source_format": source_format,
        "hosts": [],
        "notes": [],
    }


def nccl_version_from_code(code: Any) -> str | None:
    """NCCL's NCCL_VERSION_CODE as X.Y.Z: 22703 -> '2.27.3' (X*10000 + Y*100 + Z from 2.9 on), 2408 -> '2.4.8'
    (X*1000 + Y*100 + Z before); None for anything else."""
    if isinstance(code, bool) or not isinstance(code, (int, str)) or not str(code).isdigit():
        return None
    number = int(code)
    if number >= 20900:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    if 1000 <= number < 10000:
        return f"{number // 1000}.{number // 100 % 10}.{number % 100}"
    return None


def collective_from_program(program: str) -> str | None:
    """`/opt/nccl-tests/build/all_reduce_perf_mpi` -> `all_reduce`; None when it is not a *_perf name."""
    base = os.path.basename(program.strip())
    match = _COLLECTIVE_PROGRAM.fullmatch(base)
    return match.group(1) if match else None


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _number(token: str) -> float:
    """A float as C printf writes it (`nan`, `-nan`, `inf` included); ValueError otherwise."""
    return float(token)


class _Builder:
    """Collects one text run while the lines stream past."""

    def __init__(self) -> None:
        self.run = empty_run("text")
        self.stage = _EMPTY
        self.ranks: set[int] = set()
        self.hosts: list[str] = []
        self.columns: list[str] | None = None
        self.oob_seen = False
        self.avg_seen = False
        self.failures: list[str] = []
        self.failure_count = 0
        self.launcher: list[str] = []
        self.warnings: deque[str] = deque(maxlen=_MAX_WARN)
        self.last_error: str | None = None
        self.program_hint: str | None = None
        self.validation_off = False
        self.noise = 0

    @property
    def touched(self) -> bool:
        return self.stage != _EMPTY or bool(self.failures) or bool(self.run["errors"])

    def error(self, message: str) -> None:
        add_error(self.run["errors"], message)

    def finish(self) -> dict[str, Any]:
        run = self.run
        run["nranks"] = len(self.ranks) or None
        run["hosts"] = self.hosts
        if run["collective"] is None:
            run["collective"] = self.program_hint or _infer_collective(run["rows"], run["nranks"])
            if run["collective"] and not self.program_hint:
                run["notes"].append(f"collective {run['collective']} inferred from the rows' sizes and redop")
        footer = self.oob_seen and self.avg_seen
        run["complete"] = footer and not self.failures
        quoted = self.failures[:_MAX_QUOTED]
        if self.failure_count > len(quoted):
            quoted.append(f"... and {self.failure_count - len(quoted)} more failure lines")
        run["errors"] = quoted + run["errors"]
        if not footer:
            if run["rows"]:
                where = f" (last data row: {run['rows'][-1]['size']} bytes)"
            elif self.stage >= _HEADER_S:
                where = " (after the table header, before any data row)"
            else:
                where = " (before the table header)"
            run["errors"].append(f"no footer: the run stopped before it finished{where}")
        if not run["rows"]:
            run["errors"].append("no data rows")
        if not run["complete"]:
            run["errors"].extend(f"NCCL WARN: {line}" for line in self.warnings)
            run["errors"].extend(self.launcher)
            if self.last_error:
                run["errors"].append(f"NCCL last error: {self.last_error}")
        else:
            run["notes"].extend(f"NCCL WARN: {line}" for line in self.warnings)
            run["notes"].extend(self.launcher)
            if self.last_error:
                run["notes"].append(f"NCCL last error (the run completed): {self.last_error}")
        if self.validation_off:
            run["notes"].append("validation: 0 (-c 0): data was not checked, #wrong is N/A")
        return run


def _infer_collective(rows: list[dict[str, Any]], nranks: int | None) -> str | None:
    """all_reduce, reduce_scatter and reduce are recognisable from size/count and redop; the rest are not."""
    for row in rows:
        typesize = _TYPE_BYTES.get(row["type"])
        if row["redop"] in ("none", "") or typesize is None or row["count"] <= 0:
            continue
        if row["root"] is not None and row["root"] >= 0:
            return "reduce"
        if row["size"] == row["count"] * typesize:
            return "all_reduce" if row["root"] == -1 else None
        if nranks and row["size"] == row["count"] * typesize * nranks:
            return "reduce_scatter"
        if row["size"] > row["count"] * typesize:
            return "reduce_scatter"
        return None
    return None


def _normalise(raw: str) -> tuple[str, str]:
    """(whole line, its content): colours, NUL padding and outer blanks dropped; the content also loses
    indentation and launcher or log prefixes."""
    whole = _ANSI.sub("", raw).replace("\x00", "").strip()
    line = whole
    for _prefix in range(_MAX_PREFIXES):
        match = _PREFIX.match(line)
        if match is None:
            break
        line = line[match.end() :].lstrip()
    return whole, line


def _lines(text: str) -> Iterator[str]:
    """The lines of text one at a time (a list of every line of a large file would be many times its size)."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        yield text[start:stop]
        start = stop + 1


def _header_columns(line: str) -> list[str]:
    return line.lstrip("#").split()


def _layout_from_header(columns: list[str]) -> tuple[bool, int, int] | None:
    """(has root, extra columns per half, timestamp tokens) from the column-name line."""
    has_root = len(columns) > 4 and columns[4] == "root"
    first = 5 if has_root else 4
    times = [i for i, name in enumerate(columns) if name in ("time", "cputime")]
    if len(times) != 2 or times[0] != first:
        return None
    half = times[1] - times[0]
    if half < 4:
        return None
    stamp = 2 if columns[-1] == "timestamp" else 0
    end = len(columns) - (1 if stamp else 0)
    if end - times[1] != half:
        return None
    return has_root, half - 4, stamp


def _fallback_layout(tokens: list[str]) -> tuple[bool, int, int] | None:
    layout = _FALLBACK_LAYOUTS.get(len(tokens))
    if layout == (True, 0, 2) and not (_DATE.match(tokens[-2]) and _CLOCK.match(tokens[-1])):
        return True, 1, 0  # 15 tokens without a timestamp: -B bitwise column after each half
    return layout


def _expected_tokens(layout: tuple[bool, int, int]) -> int:
    has_root, extra, stamp = layout
    return (5 if has_root else 4) + 2 * (4 + extra) + stamp


def _parse_row(
    tokens: list[str], layout: tuple[bool, int, int], lineno: int, error: Callable[[str], None]
) -> dict[str, Any] | None:
    has_root, extra, _stamp = layout
    prefix = 5 if has_root else 4
    try:
        size, count = int(tokens[0]), int(tokens[1])
        root = int(tokens[4]) if has_root else None
    except ValueError:
        error(f"line {lineno}: size, count or root is not an integer: {' '.join(tokens[:5])}")
        return None
    kind, redop = tokens[2], tokens[3]
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", kind) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", redop):
        error(f"line {lineno}: type {kind!r} or redop {redop!r} is not a name")
        return None
    row: dict[str, Any] = {"size": size, "count": count, "type": kind, "redop": redop, "root": root}
    bad: list[str] = []
    for index, placement in enumerate(("out_of_place", "in_place")):
        start = prefix + index * (4 + extra)
        time_s, algbw_s, busbw_s, wrong_s = tokens[start : start + 4]
        half: dict[str, Any] = {}
        for key, token in (("time_us", time_s), ("algbw", algbw_s), ("busbw", busbw_s)):
            try:
                value = _number(token)
            except ValueError:
                error(f"line {lineno}: {placement} {key} {token!r} is not a number")
                return None
            if not math.isfinite(value):
                bad.append(f"{placement} {key} {token}")
                half[key] = None
            else:
                half[key] = value
        if wrong_s.upper() == "N/A":
            half["wrong"] = None
        else:
            try:
                wrong = _number(wrong_s)
            except ValueError:
                error(f"line {lineno}: {placement} #wrong {wrong_s!r} is not a number or N/A")
                return None
            if not math.isfinite(wrong):
                bad.append(f"{placement} {'error' if not has_root else '#wrong'} {wrong_s}")
                wrong = None
            if has_root:
                half["wrong"] = wrong
            else:
                # <= v2.11: the column is the largest numeric delta, not a count of wrong elements.
                half["wrong"] = None
                half["max_error"] = wrong
        row[placement] = half
    if bad:
        error(f"line {lineno}: non-finite value at size {size} ({', '.join(bad)}); reported as null")
    return row


def _is_row_candidate(tokens: list[str]) -> bool:
    return len(tokens) >= 2 and tokens[0].isdigit() and tokens[1].isdigit()


def _parse_text(text: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    current = _Builder()
    total = rows = 0

    def advance(stage: int, restart_at: int) -> None:
        """Start a new run when this line belongs before where the current run already is."""
        nonlocal current
        if current.touched and current.stage >= restart_at:
            if len(runs) + 1 >= MAX_RUNS:
                raise _OverLimit(f"more than {MAX_RUNS} runs in one file; nccl-tests prints one per collective test")
            runs.append(current.finish())
            current = _Builder()
        current.stage = max(current.stage, stage)

    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if (count := text.count("\n")) >= MAX_LINES:
        raise _OverLimit(f"{count + 1} lines, more than the limit of {MAX_LINES} lines per file")
    for lineno, raw in enumerate(_lines(text), start=1):
        whole, line = _normalise(raw)
        if not line:
            continue
        total += 1
        nccl = "NCCL" in whole  # a substring test first: most lines of a large output are not NCCL's
        if nccl and (match := _NCCL_VERSION_LINE.search(whole)) and current.run["nccl_version"] is None:
            current.run["nccl_version"] = match.group(1)
        if nccl and _NCCL_CHATTER.search(whole):
            continue
        # Failure lines are quoted whole: their prefix names the rank or host that failed.
        if nccl and _NCCL_WARN.search(whole):
            current.warnings.append(whole)
            continue
        if _FAILURE.search(whole):
            current.failure_count += 1
            if len(current.failures) < _MAX_QUOTED:
                current.failures.append(whole)
            continue
        if _LAUNCHER.search(whole):
            if len(current.launcher) < _MAX_QUOTED:
                current.launcher.append(whole)
            continue
        tokens = line.split()
        if _is_row_candidate(tokens):
            advance(_ROWS_S, _FOOTER_S)
            rows += 1
            if rows > MAX_ROWS:
                raise _OverLimit(f"more than {MAX_ROWS} data rows in one file; nccl-tests prints a few dozen per run")
            layout = None
            if current.columns is not None:
                layout = _layout_from_header(current.columns)
                if layout is not None and _expected_tokens(layout) != len(tokens):
                    layout = None
            layout = layout or _fallback_layout(tokens)
            if layout is None:
                expected = "12 or 13" if current.columns is None else str(len(current.columns))
                current.error(f"line {lineno}: {len(tokens)} fields; a data row has {expected}")
                continue
            row = _parse_row(tokens, layout, lineno, current.error)
            if row is not None:
                current.run["rows"].append(row)
            continue
        if match := _VERSION.search(line):
            advance(_VERSION_S, _VERSION_S)
            current.run["version"] = match.group(1)
            if library := _NCCL_LIBRARY.search(line):
                current.run["nccl_version"] = nccl_version_from_code(library.group(1))
        elif match := _STARTING.search(line):
            advance(_START_S, _START_S)
            current.run["collective"] = collective_from_program(match.group(1))
            current.program_hint = current.run["collective"]
        elif _NTHREAD.search(line):
            advance(_NTHREAD_S, _NTHREAD_S)
            current.validation_off = bool(_VALIDATION_OFF.search(line))
        elif match := _DEVICE.search(line):
            advance(_DEVICES_S, _FOOTER_S)
            current.ranks.add(int(match.group(1)))
            if match.group(2) not in current.hosts:
                current.hosts.append(match.group(2))
        elif _HEADER.search(line):
            advance(_HEADER_S, _FOOTER_S)
            current.columns = _header_columns(line)
        elif match := _OOB.search(line):
            advance(_FOOTER_S, _CONCLUDED_S if not current.oob_seen else _FOOTER_S)
            current.oob_seen = True
            try:
                current.run["out_of_bounds"] = int(match.group(1))
            except ValueError:
                current.error(f"line {lineno}: out-of-bounds count {match.group(1)!r} is not an integer")
        elif match := _AVG.search(line):
            advance(_FOOTER_S, _CONCLUDED_S if not current.avg_seen else _FOOTER_S)
            current.avg_seen = True
            try:
                value = _number(match.group(1))
            except ValueError:
                current.error(f"line {lineno}: average bus bandwidth {match.group(1)!r} is not a number")
            else:
                if math.isfinite(value):
                    current.run["avg_busbw"] = value
                else:
                    current.error(f"line {lineno}: non-finite average bus bandwidth {match.group(1)}")
            if match.group(2) and match.group(2).upper() == "FAILED":
                current.run["notes"].append("Avg bus bandwidth FAILED against NCCL_TESTS_MIN_BW (x 0.9)")
        elif match := _CONCLUDED.search(line):
            current.stage = max(current.stage, _CONCLUDED_S)
            if current.run["collective"] is None:
                current.run["collective"] = collective_from_program(match.group(1))
                current.program_hint = current.run["collective"]
        elif match := _LAST_ERROR.search(line):
            current.last_error = match.group(1)
        elif (
            current.program_hint is None
            and "_perf" in line
            and not line.startswith("#")
            and (hint := _COLLECTIVE_PROGRAM.search(line))
        ):
            # A wrapper that echoes its command line names the binary: the collective of a pre-2.16.7 run.
            current.program_hint = hint.group(1)
    touched = current.touched
    if touched or not runs:
        last = current.finish()
        if not touched:
            last["errors"] = [
                f"no nccl-tests output: none of the {total} non-empty lines is a table header, data row, footer "
                "or failure line"
                if total
                else "empty input"
            ]
        runs.append(last)
    return runs


# ---------------------------------------------------------------------------
# JSON (-J)
# ---------------------------------------------------------------------------


# A JSON string (possibly cut off at the end of the text) or one structural character: the scans below step
# over strings whole, so a bracket or comma inside a string never counts.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\],]', re.DOTALL)
_JSON_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
_SPACE = re.compile(r"\s*")


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep the JSON text nests (strings skipped), in one linear scan; stops counting past limit.

    json.loads recurses once per level, so deep input must be refused before it is decoded.
    """
    depth = deepest = 0
    for match in _JSON_BRACKET.finditer(text):
        char = match.group()
        if char in "{[":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char in "}]":
            depth = max(depth - 1, 0)
    return deepest


def _repair_truncated(text: str) -> Any:
    """Close a JSON document cut off mid-write (the run was killed); None when nothing can be recovered.

    One scan notes the last few cut points (after a closing bracket, before a comma) with the brackets
    still open there; each is tried, last first, by decoding the text up to it plus its closers. Linear:
    at most _REPAIR_TRIES decodes, and a decode that fails at offset N rules out every cut after N.
    """
    stack: list[str] = []
    closers = ""  # of the brackets open now: rebuilt when one opens or closes, shared by the commas between
    cuts: deque[tuple[int, str]] = deque(maxlen=_REPAIR_TRIES)
    for match in _JSON_TOKEN.finditer(text):
        char = match.group()
        if char == ",":
            cuts.append((match.start(), closers))
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
            closers = "".join(reversed(stack))
        elif char in "}]":
            if not stack:
                return None
            stack.pop()
            closers = "".join(reversed(stack))
            cuts.append((match.end(), closers))
    limit = len(text)
    for cut, closers in reversed(cuts):
        if cut > limit:
            continue
        try:
            return json.loads(text[:cut] + closers)
        except json.JSONDecodeError as exc:
            limit = min(limit, exc.pos)
        except ValueError:
            continue
    return None


def _json_strict(text: str) -> tuple[list[Any], int | None, str | None]:
    """Every JSON value in the text; the offset and message of the first that does not decode."""
    decoder = json.JSONDecoder()
    documents: list[Any] = []
    index = 0
    while True:
        index = _SPACE.match(text, index).end()  # type: ignore[union-attr]  # \s* always matches
        if index >= len(text):
            return documents, None, None
        if len(documents) >= MAX_JSON_DOCUMENTS:
            raise _OverLimit(f"more than {MAX_JSON_DOCUMENTS} JSON documents in one file; nccl-tests -J writes one")
        try:
            document, index = decoder.raw_decode(text, index)
        except ValueError as exc:
            return documents, index, str(exc)
        documents.append(document)


def _json_documents(text: str) -> tuple[list[tuple[Any, bool]], str | None]:
    """Every JSON object in the text as (document, truncated); a problem message when one cannot be read.

    nccl-tests writes doubles with %lf, so infinity comes out as a bare `inf`: quote those and retry
    before treating the text as cut off. The size limits are checked first, by linear scans, so the
    decoder never sees more objects or deeper nesting than they allow.
    """
    # Counted at C speed, before any Python loop over the tokens.
    values = text.count("{") + text.count("[") + text.count(",") + text.count('"') // 2
    if values > MAX_JSON_VALUES:
        raise _OverLimit(
            f"about {values} JSON values, more than the limit of {MAX_JSON_VALUES} (nccl-tests -J writes about "
            "100 per row)"
        )
    if json_depth(text) > MAX_JSON_DEPTH:
        raise _OverLimit(f"JSON nested deeper than {MAX_JSON_DEPTH} levels (nccl-tests -J nests 5)")
    candidate = text
    for candidate in (text, _BARE_NONFINITE.sub(r'\1"\2\3"', text)):
        documents, failed_at, problem = _json_strict(candidate)
        if failed_at is None:
            return [(document, False) for document in documents], None
    found = [(document, False) for document in documents]
    repaired = _repair_truncated(candidate[failed_at or 0 :])
    if repaired is None:
        return found, f"not valid JSON: {problem}"
    return [*found, (repaired, True)], None


def _json_number(value: Any, where: str, errors: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        add_error(errors, f"{where}: {value!r} is not a number")
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        add_error(errors, f"{where}: {value!r} is not a number")
        return None
    if not math.isfinite(number):
        add_error(errors, f"{where}: non-finite value {value}; reported as null")
        return None
    return number


def _json_run(document: Any, truncated: bool) -> dict[str, Any]:
    run = empty_run("json")
    errors: list[str] = run["errors"]
    if not isinstance(document, dict):
        add_error(errors, f"JSON output is a {type(document).__name__}, not an object")
        return run
    run["json_schema"] = document.get("version")
    run["nccl_version"] = nccl_version_from_code(document.get("nccl_version"))
    args = document.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        run["collective"] = collective_from_program(args[0])
    config = document.get("config") if isinstance(document.get("config"), dict) else {}
    devices = config.get("devices")
    if isinstance(devices, list):
        run["nranks"] = len(devices) or None
        for device in devices:
            host = device.get("hostname") if isinstance(device, dict) else None
            if isinstance(host, str) and host not in run["hosts"]:
                run["hosts"].append(host)
    if config.get("validation") == 0:
        run["notes"].append("validation: 0 (-c 0): data was not checked, nwrong is null")
    results = document.get("results")
    if not isinstance(results, list):
        results = []
    if len(results) > MAX_ROWS:
        raise _OverLimit(f"{len(results)} JSON results, more than the limit of {MAX_ROWS} data rows per file")
    for position, result in enumerate(results):
        where = f"results[{position}]"
        if not isinstance(result, dict):
            add_error(errors, f"{where}: not an object")
            continue
        try:
            size, count = int(result["size"]), int(result["count"])
            root_text = str(result.get("root", "")).strip()
            root = int(root_text) if _INT.match(root_text) else None
            row: dict[str, Any] = {
                "size": size,
                "count": count,
                "type": str(result["type"]),
                "redop": str(result["redop"]),
                "root": root,
            }
        except (KeyError, TypeError, ValueError):
            if not (truncated and position == len(results) - 1):  # the record the cut went through
                add_error(errors, f"{where}: size, count, type or redop missing or malformed")
            continue
        for placement in ("out_of_place", "in_place"):
            half = result.get(placement)
            if not isinstance(half, dict):
                if not (truncated and position == len(results) - 1):
                    add_error(errors, f"{where}: no {placement} result")
                row = {}
                break
            time_value = half.get("time", half.get("cpu_time"))
            row[placement] = {
                "time_us": _json_number(time_value, f"{where}.{placement}.time", errors),
                "algbw": _json_number(half.get("alg_bw"), f"{where}.{placement}.alg_bw", errors),
                "busbw": _json_number(half.get("bus_bw"), f"{where}.{placement}.bus_bw", errors),
                "wrong": _json_number(half.get("nwrong"), f"{where}.{placement}.nwrong", errors),
            }
        if row:
            if run["collective"] is None and isinstance(result.get("experiment_name"), str):
                run["collective"] = collective_from_program(result["experiment_name"])
            run["rows"].append(row)
    oob = document.get("out_of_bounds")
    if isinstance(oob, dict) and isinstance(oob.get("count"), int) and not isinstance(oob.get("count"), bool):
        run["out_of_bounds"] = oob["count"]
    average = document.get("average_bus_bandwidth")
    if isinstance(average, dict):
        run["avg_busbw"] = _json_number(average.get("bandwidth"), "average_bus_bandwidth", errors)
        if average.get("okay") in (False, "false"):
            run["notes"].append("Avg bus bandwidth FAILED against NCCL_TESTS_MIN_BW (x 0.9)")
    footer = isinstance(oob, dict) and isinstance(average, dict)
    run["complete"] = footer and not truncated
    reported = document.get("errors")
    last_errors = (
        [text for text in reported if isinstance(text, str) and text.strip()] if isinstance(reported, list) else []
    )
    if truncated:
        add_error(errors, "the JSON output is truncated: the run stopped before it finished")
    elif not footer:
        add_error(errors, "no footer: the JSON output has no out_of_bounds/average_bus_bandwidth")
    if not run["rows"]:
        add_error(errors, "no data rows")
    if run["complete"]:
        run["notes"].extend(f"NCCL last error (the run completed): {text}" for text in last_errors[:_MAX_QUOTED])
    else:
        errors.extend(f"NCCL last error: {text}" for text in last_errors[:_MAX_QUOTED])
    return run


def _parse_json(text: str) -> list[dict[str, Any]]:
    documents, problem = _json_documents(text)
    if not documents:
        run = empty_run("json")
        run["errors"] = [problem or "not valid JSON", "no data rows"]
        return [run]
    runs = [_json_run(document, truncated) for document, truncated in documents]
    if sum(len(run["rows"]) for run in runs) > MAX_ROWS:
        raise _OverLimit(f"more than {MAX_ROWS} data rows in one file; nccl-tests prints a few dozen per run")
    return runs


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def _decode(data: str | bytes | None) -> tuple[str | None, str | None]:
    """(text, problem): problem says why the input is not text."""
    if data is None:
        return "", None
    if isinstance(data, (bytes, bytearray)):
        text = bytes(data).decode("utf-8", errors="replace")
    elif isinstance(data, str):
        text = data
    else:
        return None, f"input is a {type(data).__name__}, not text"
    sample = text[:65536].replace("\x00", "")
    if text[:65536] and not sample:
        return None, "binary input: only NUL bytes"
    odd = sum(1 for char in sample if char == "\ufffd" or (ord(char) < 32 and char not in "\t\n\r\f\v\x1b"))
    if sample and odd / len(sample) > 0.1:
        return None, f"binary input: {odd} of the first {len(sample)} characters are not text"
    return text, None


def text_problem(data: str | bytes | None) -> str | None:
    """Why ``data`` is not text that could be nccl-tests output (binary, NUL bytes); None when it is text."""
    return _decode(data)[1]


def over_limit(size: int) -> str | None:
    """The parse error of an input of `size` bytes (or characters) when that is over MAX_INPUT_BYTES."""
    if size <= MAX_INPUT_BYTES:
        return None
    return (
        f"{size} bytes, over the limit of {MAX_INPUT_BYTES} ({MAX_INPUT_BYTES // (1024 * 1024)} MiB): "
        "nccl-tests output is tens of KB"
    )


def limit_run(message: str, source_format: str = "text") -> dict[str, Any]:
    """The one run an input over a limit parses to: incomplete, the limit in its errors."""
    run = empty_run(source_format)
    run["errors"] = [f"not parsed: {message}"]
    return run


def parse_runs(data: str | bytes | None) -> list[dict[str, Any]]:
    """Every run in nccl-tests output (text or -J JSON); never raises."""
    if isinstance(data, (str, bytes, bytearray)) and (message := over_limit(len(data))):
        return [limit_run(message)]
    try:
        text, problem = _decode(data)
        if text is None:
            run = empty_run("text")
            run["errors"] = [problem or "not text", "no data rows"]
            return [run]
        notes = ["the input holds NUL bytes (dropped)"] if "\x00" in text else []
        is_json = text.lstrip().startswith("{")
        try:
            runs = _parse_json(text) if is_json else _parse_text(text)
        except _OverLimit as exc:
            return [limit_run(str(exc), "json" if is_json else "text")]
        for run in runs:
            run["notes"].extend(notes)
        return runs
    except Exception as exc:
        run = empty_run("text")
        run["errors"] = [f"parser error ({type(exc).__name__}: {exc}); please report with the input file"]
        return [run]


def parse(data: str | bytes | None) -> dict[str, Any]:
    """The first run of the output (an empty incomplete run with errors when there is none)."""
    return parse_runs(data)[0]
