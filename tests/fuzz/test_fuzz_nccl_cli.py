# SPDX-License-Identifier: Apache-2.0
"""`gpufabric nccl parse` and `gpufabric verify --from-results` on bad input, over the real CLI.

A file that cannot be an nccl-tests output (missing, a directory, a FIFO, a device, over the parser's
size limit) is a usage error: exit 1, one `error:` line naming it. Content the parser reads but that is not
a clean run (binary, empty, over a limit) is a parse result: exit 1, the reason on an `error:` line of the
report on stdout, nothing on stderr. A malformed run.json under --from-results is a usage error naming the
file and what is wrong with it, and the results directory is left exactly as it was (no report.json or
busbw.png, half-written or not).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fuzz.harness import Case, Result, run
from tests.unit.test_verify_report import make_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
REFERENCE = (FIXTURES / "v2_19_reference.txt").read_text()
LIMIT = 8 * 1024 * 1024  # nccl_output.MAX_INPUT_BYTES
RECORD = "r/best/20250314T092653Z/run.json"
OUTPUT = "r/best/20250314T092653Z/all_reduce-2n.txt"


def _write(name: str, data: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


def _sparse(name: str, size: int) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        with (tmp / name).open("wb") as stream:
            stream.truncate(size)

    return setup


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "out.txt")


def _device(tmp: Path) -> None:
    (tmp / "out.txt").symlink_to("/dev/zero")


def _parsed(*texts: str, stdout_only: bool = True) -> Callable[[Result], None]:
    """The parse result on stdout names every text (an `error:` line of the report), stderr stays empty."""

    def expect(result: Result) -> None:
        flat = " ".join(result.stdout.split())
        for text in texts:
            assert text in flat, result.stdout[-2000:]
        if stdout_only:
            assert result.stderr.strip() == "", result.stderr

    return expect


def _strict_json(result: Result) -> None:
    runs = json.loads(result.stdout)  # strict JSON: NaN never printed
    run = runs if isinstance(runs, dict) else runs[0]
    assert run["complete"] is False and run["errors"]


PARSE = ("nccl", "parse", "{tmp}/out.txt")
PREFIXED = "".join(f"[1,0]<stdout>:    {line}" for line in REFERENCE.splitlines(keepends=True))

PARSE_CASES = [
    Case("parse-missing", PARSE, names="{tmp}/out.txt: No such file"),
    Case("parse-directory", PARSE, names="{tmp}/out.txt: is a directory", setup=lambda t: (t / "out.txt").mkdir()),
    Case("parse-fifo", PARSE, names="{tmp}/out.txt: not a regular file", setup=_fifo, timeout=20),
    Case("parse-dev-zero", PARSE, names="{tmp}/out.txt: not a regular file", setup=_device, timeout=20),
    Case(
        "parse-over-8MiB",
        PARSE,
        names=f"{{tmp}}/out.txt: {LIMIT + 1} bytes, over the limit of {LIMIT}",
        setup=_sparse("out.txt", LIMIT + 1),
        untouched=("out.txt",),
    ),
    Case(
        "parse-binary",
        PARSE,
        names="out.txt: binary input",  # bad input: no table, one error naming the file
        setup=_write("out.txt", (FIXTURES / "binary.bin").read_bytes()),
    ),
    Case(
        "parse-empty",
        PARSE,
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", b""),
        expect=_parsed("error: empty input"),
    ),
    Case(
        "parse-non-utf8-hostnames",
        PARSE,
        exit_code=0,
        error_line=False,
        setup=_write("out.txt", REFERENCE.encode().replace(b"node-a", b"n\xe9ud-a")),
        expect=_parsed("complete: yes", "2 ranks", "avg busbw 352.382 GB/s"),
    ),
    Case(
        "parse-utf16",
        PARSE,
        exit_code=0,
        error_line=False,
        setup=_write("out.txt", REFERENCE.encode("utf-16")),
        expect=_parsed("complete: yes"),
    ),
    Case(
        "parse-prefixed-indented",
        PARSE,
        exit_code=0,
        error_line=False,
        setup=_write("out.txt", PREFIXED),
        expect=_parsed("complete: yes", "2 ranks", "avg busbw 352.382 GB/s"),
    ),
    Case(
        "parse-5MB-of-braces",
        PARSE,
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", "{}" * 2_500_000),
        expect=_parsed("error: not parsed: about 2500000 JSON values, more than the limit of 1000000"),
    ),
    Case(
        "parse-deep-brackets-commas",
        PARSE,
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", '{"a":' + "[" * 900 + "1," * 200_000),
        expect=_parsed("error: not parsed: JSON nested deeper than 32 levels"),
    ),
    Case(
        "parse-many-runs",
        PARSE,
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", REFERENCE * 65),
        expect=_parsed("error: not parsed: more than 64 runs in one file"),
    ),
    Case(
        "parse-many-json-documents",
        (*PARSE, "--json"),
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", (FIXTURES / "json_v1.json").read_text() * 65),
        expect=_strict_json,
    ),
    Case(
        "parse-nan-json",
        (*PARSE, "--json"),
        exit_code=1,
        error_line=False,
        setup=_write("out.txt", '{"results": [{"size": NaN, "count": Infinity}]}'),
        expect=_strict_json,
    ),
]


def _results(tmp: Path) -> None:
    make_results(tmp / "r", "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})


def _record(data: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _results(tmp)
        (tmp / RECORD).write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


def _record_json(change: Callable[[dict], object]) -> Callable[[Path], None]:
    """A record the role would write, then changed (change returns the new record, or None to keep it)."""

    def setup(tmp: Path) -> None:
        _results(tmp)
        record = json.loads((tmp / RECORD).read_text())
        changed = change(record)
        (tmp / RECORD).write_text(json.dumps(record if changed is None else changed))

    return setup


def _record_replaced(kind: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _results(tmp)
        (tmp / RECORD).unlink()
        if kind == "directory":
            (tmp / RECORD).mkdir()
        elif kind == "fifo":
            os.mkfifo(tmp / RECORD)
        else:
            (tmp / RECORD).symlink_to("/dev/zero")

    return setup


def _output_replaced(kind: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _results(tmp)
        (tmp / OUTPUT).unlink()
        if kind == "fifo":
            os.mkfifo(tmp / OUTPUT)
        else:
            with (tmp / OUTPUT).open("wb") as stream:
                stream.truncate(LIMIT + 1)

    return setup


def _set(path: tuple[str | int, ...], value: object) -> Callable[[dict], None]:
    def change(record: dict) -> None:
        target: dict = record
        for key in path[:-1]:
            target = target[key]  # type: ignore[index]
        target[path[-1]] = value  # type: ignore[index]

    return change


VERIFY = ("verify", "--from-results", "{tmp}/r")
UNTOUCHED = ("r", "r/best/20250314T092653Z", RECORD, OUTPUT, "r/report.json", "r/busbw.png")


def _bad_record(case_id: str, setup: Callable[[Path], None], problem: str) -> Case:
    return Case(
        case_id,
        VERIFY,
        names=f"{{tmp}}/{RECORD}: {problem}",
        setup=setup,
        untouched=UNTOUCHED,
        timeout=30,
    )


def _failed_run(case_id: str, setup: Callable[[Path], None], reason: str) -> Case:
    def expect(result: Result) -> None:
        report = json.loads((result.tmp / "r" / "report.json").read_text())
        (judged,) = report["tiers"]["best"]["runs"]
        assert judged["status"] == "fail" and reason in " ".join(judged["reasons"]), judged["reasons"]

    return Case(case_id, VERIFY, exit_code=1, error_line=False, setup=setup, expect=expect, timeout=30)


VERIFY_CASES = [
    _bad_record("record-not-json", _record("{not json"), "not JSON (Expecting property name"),
    _bad_record("record-empty", _record(""), "not JSON (Expecting value"),
    _bad_record("record-not-utf8", _record(b'{"profile": "\xff"}'), "not UTF-8 (byte 0xff at offset 13)"),
    _bad_record("record-binary", _record(bytes(range(256))), "not UTF-8"),
    _bad_record("record-list", _record("[1, 2]"), "holds a JSON list, not an object"),
    _bad_record("record-null", _record("null"), "holds a JSON NoneType, not an object"),
    _bad_record("record-nan", _record_json(_set(("nodes",), float("nan"))), "NaN is not a JSON number"),
    _bad_record("record-infinity", _record('{"profile": "p", "runs": [], "x": Infinity}'), "Infinity is not a JSON"),
    _bad_record("record-deep", _record('{"x": ' + "[" * 5000 + "]" * 5000 + "}"), "nested deeper than 16 levels"),
    _bad_record("record-deep-unclosed", _record('{"x": ' + "[" * 100_000), "nested deeper than 16 levels"),
    _bad_record("record-huge", _record(" " * (1024 * 1024 + 1)), "larger than 1048576 bytes"),
    _bad_record("record-no-profile", _record_json(lambda r: r.pop("profile") and None), "missing key 'profile'"),
    _bad_record(
        "record-no-runs",
        _record_json(lambda r: {"profile": r["profile"]}),
        "missing key 'runs' (or 'collectives')",
    ),
    _bad_record("record-profile-list", _record_json(_set(("profile",), ["a"])), "'profile' is list, not a non-empty"),
    _bad_record("record-nodes-text", _record_json(_set(("nodes",), "two")), "'nodes' is 'two', not an integer"),
    _bad_record("record-runs-object", _record_json(_set(("runs",), {"a": 1})), "'runs' is dict, not a list"),
    _bad_record("record-run-number", _record_json(_set(("runs",), [7])), "'runs[0]' is 7, not an object"),
    _bad_record(
        "record-run-no-collective",
        _record_json(lambda r: r["runs"][0].pop("collective") and None),
        "missing key 'runs[0].collective'",
    ),
    _bad_record(
        "record-exit-code-float", _record_json(_set(("runs", 0, "exit_code"), 1.5)), "'runs[0].exit_code' is 1.5"
    ),
    _bad_record(
        "record-file-escapes",
        _record_json(_set(("runs", 0, "file"), "../../../../etc/passwd")),
        "'runs[0].file' is '../../../../etc/passwd', not a file name beside run.json",
    ),
    _bad_record("record-hosts-numbers", _record_json(_set(("hosts",), [1, 2])), "'hosts[0]' is 1"),
    _bad_record("record-directory", _record_replaced("directory"), "not a regular file"),
    _bad_record("record-fifo", _record_replaced("fifo"), "not a regular file"),
    _bad_record("record-dev-zero", _record_replaced("device"), "not a regular file"),
    _failed_run("output-fifo", _output_replaced("fifo"), "cannot read the output all_reduce-2n.txt: not a regular"),
    _failed_run("output-over-8MiB", _output_replaced("sparse"), f"{LIMIT + 1} bytes, over the limit of {LIMIT}"),
]


@pytest.mark.parametrize("case", PARSE_CASES + VERIFY_CASES, ids=[case.id for case in PARSE_CASES + VERIFY_CASES])
def test_bad_nccl_input(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)


def test_the_cases_leave_no_report_behind(tmp_path: Path) -> None:
    """The untouched snapshot of a bad record includes report.json and busbw.png being absent: check it can see them."""
    _results(tmp_path)
    shutil.copytree(tmp_path / "r", tmp_path / "copy")
    run(Case("good", ("verify", "--from-results", "{tmp}/copy"), exit_code=0, error_line=False), tmp_path)
    assert (tmp_path / "copy" / "report.json").is_file() and (tmp_path / "copy" / "busbw.png").is_file()
