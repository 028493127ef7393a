# SPDX-License-Identifier: Apache-2.0
"""`gpufabric nccl`: read nccl-tests output with the collection's parser and show it.

The parser and the judgement live in plugins/module_utils (nccl_output, nccl_judge) so the
role and the CLI read output the same way; this module only loads files and renders tables.
"""

from __future__ import annotations

import errno
import math
import stat
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufabric.collection import module_utils
from gpufabric.errors import UserError


def read_output(path: Path) -> bytes:
    """The bytes of an nccl-tests output file, read only when it is a regular file within the parser's size
    limit (nccl_output.MAX_INPUT_BYTES); OSError (with a message that names the problem) otherwise.

    A FIFO or a device would block or never end, so only regular files are opened; at most one byte past
    the limit is read, so a file that grows while it is read cannot make this read it all.
    """
    parser = module_utils("nccl_output")
    status = path.stat()
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory; pass the output file of an nccl-tests run")
    if not stat.S_ISREG(status.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    with path.open("rb") as stream:
        data = stream.read(parser.MAX_INPUT_BYTES + 1)
    if problem := parser.over_limit(max(len(data), status.st_size)):
        raise OSError(errno.EFBIG, problem)
    return data


def parse_file(path: Path) -> list[dict[str, Any]]:
    """Every run in the file; an unreadable or oversized file is a UserError (one line, exit 1)."""
    try:
        data = read_output(path)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    nccl_output = module_utils("nccl_output")
    if problem := nccl_output.text_problem(data):
        # Not a run that failed: a file that is no output at all (a binary, an archive) is bad input.
        raise UserError(f"{path}: {problem}; accepted: nccl-tests output (its stdout, or its -J JSON file)")
    runs: list[dict[str, Any]] = nccl_output.parse_runs(data)
    return runs


def is_ok(run: dict[str, Any]) -> bool:
    """Parsed, complete and without problems (data errors are the judgement's business)."""
    return bool(run.get("complete")) and not run.get("errors")


def exit_code(runs: list[dict[str, Any]]) -> int:
    return 0 if runs and all(is_ok(run) for run in runs) else 1


def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}f}"


def _wrong(half: dict[str, Any] | None) -> str:
    if not half:
        return "-"
    if half.get("wrong") is not None:
        return f"{half['wrong']:g}"
    if half.get("max_error") is not None:
        return f"err {half['max_error']:.0e}"
    return "N/A"


def run_table(run: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("size (B)", "count", "type", "redop", "oop busbw", "ip busbw", "wrong (oop/ip)"):
        table.add_column(column, justify="right" if column != "type" and column != "redop" else "left")
    for row in run.get("rows") or []:
        oop, inp = row.get("out_of_place") or {}, row.get("in_place") or {}
        table.add_row(
            Text(str(row["size"])),
            Text(str(row["count"])),
            Text(str(row["type"])),
            Text(str(row["redop"])),
            Text(_number(oop.get("busbw"))),
            Text(_number(inp.get("busbw"))),
            Text(f"{_wrong(oop)}/{_wrong(inp)}"),
        )
    return table


def render(runs: list[dict[str, Any]], console: Console) -> None:
    """One table per run, then its footer, completeness, errors and notes."""
    for number, run in enumerate(runs, start=1):
        name = run.get("collective") or "unknown collective"
        about = [f"run {number}/{len(runs)}: {name}"]
        if run.get("version"):
            about.append(f"nccl-tests {run['version']}")
        if run.get("nranks"):
            about.append(f"{run['nranks']} ranks")
        if run.get("hosts"):
            about.append(f"{len(run['hosts'])} host(s)")
        about.append(f"from {run.get('source_format', 'text')}")
        console.print(run_table(run, escape(", ".join(about))))
        average = run.get("avg_busbw")
        footer = (
            f"avg busbw {_number(average, 3)} GB/s (all sizes; not a pass metric), "
            f"out of bounds {run.get('out_of_bounds') if run.get('out_of_bounds') is not None else '-'}, "
            f"complete: {'yes' if run.get('complete') else 'no'}"
        )
        console.print(footer, markup=False, highlight=False)
        for error in run.get("errors") or []:
            console.print(f"[red]error[/red]: {escape(str(error))}", highlight=False)
        for note in run.get("notes") or []:
            console.print(f"note: {note}", markup=False, highlight=False)
        if number < len(runs):
            console.print()
