# SPDX-License-Identifier: Apache-2.0
"""The bounded YAML loader: real files load as yaml.safe_load reads them; every limit is one clear error."""

from __future__ import annotations

import itertools
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from gpufabric.collection import plugin_utils

bounded_yaml = plugin_utils("bounded_yaml")
fabric_catalog = plugin_utils("fabric_catalog")
YAMLFileError = bounded_yaml.YAMLFileError


@pytest.fixture(params=["libyaml", "pure-python"], autouse=True)
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs over both parsers: libyaml where PyYAML has it, and the pure-Python fallback."""
    monkeypatch.setattr(bounded_yaml, "PREFER_LIBYAML", request.param == "libyaml")
    return str(request.param)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: a few hundred bytes whose aliases expand to 10**levels strings."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    names = "abcdefghijklmnop"
    for previous, name in itertools.pairwise(names[:levels]):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]")
    return "\n".join(lines) + "\n"


def refused(text: str) -> YAMLFileError:
    with pytest.raises(YAMLFileError) as caught:
        bounded_yaml.load_text(text, "test.yml")
    assert caught.value.source == "test.yml"
    assert "\n" not in str(caught.value)
    return caught.value


@pytest.mark.parametrize("path", sorted(fabric_catalog.BUILTIN_CATALOG_DIR.glob("*.yml")), ids=lambda p: p.name)
def test_catalog_files_load_as_safe_load_reads_them(path: Path) -> None:
    assert bounded_yaml.load_file(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_anchors_aliases_and_merge_keys_still_work() -> None:
    text = "common: &common {user: ubuntu, port: 22}\nhosts:\n- {name: a, vars: *common}\n- {<<: *common, port: 2222}\n"
    assert bounded_yaml.load_text(text, "t") == yaml.safe_load(text)


def test_merge_keys_may_repeat_and_equal_text_of_other_types_is_no_duplicate() -> None:
    assert bounded_yaml.load_text("<<: {a: 1}\n<<: {b: 2}\nc: 3\n", "t") == {"a": 1, "b": 2, "c": 3}
    assert bounded_yaml.load_text('{1: int, "1": str}', "t") == {1: "int", "1": "str"}


def test_a_value_and_an_empty_document() -> None:
    assert bounded_yaml.load_text("[1, two, 3.0, null]", "-e x") == [1, "two", 3.0, None]
    assert bounded_yaml.load_text("", "t") is None


def test_billion_laughs_is_refused_before_expansion() -> None:
    start = time.process_time()  # CPU time: a wall clock on a shared CI machine measures the neighbours
    error = refused(billion_laughs())
    assert time.process_time() - start < 5, "refused early: expanding it takes minutes and GBs"
    assert error.where.startswith("line 6, column ")  # the alias that crosses the limit, not the end of the file
    assert "more than 1,000,000 nodes with aliases expanded (an alias bomb?)" in error.reason


def test_a_small_expansion_is_fine() -> None:
    data = bounded_yaml.load_text(billion_laughs(levels=4), "t")
    assert len(data["d"]) == 10


def test_too_many_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_yaml, "MAX_ALIASES", 3)
    text = "a: &a 1\nb: [*a, *a, *a]\n"
    assert bounded_yaml.load_text(text, "t") == {"a": 1, "b": [1, 1, 1]}
    error = refused(text.replace("]", ", *a]"))
    assert (error.where, error.reason) == ("line 2, column 17", "more than 3 aliases; limit 3")


def test_recursive_alias_is_refused() -> None:
    error = refused("a: &a [1, *a]\n")
    assert (error.where, error.reason) == ("line 1, column 11", "alias *a refers to its own anchor (recursive)")


@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_nesting_is_bounded(opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    assert bounded_yaml.load_text(opener * 64 + "1" + closer * 64, "t") is not None
    error = refused(opener * 65 + "1" + closer * 65)
    assert error.reason == "nested deeper than 64 levels; limit 64"
    assert error.where == f"line 1, column {64 * len(opener) + 1}"


def test_block_nesting_is_bounded_too() -> None:
    text = "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(70))
    assert refused(text).where == "line 65, column 129"


def test_very_deep_flow_nesting_is_refused_quickly() -> None:
    start = time.process_time()
    error = refused("[" * 100_000)
    assert time.process_time() - start < 5
    # Ours at depth 65, or libyaml's own limit (1,000) where its look-ahead meets it first.
    assert "nest" in error.reason


def test_oversize_text_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_yaml, "MAX_BYTES", 100)
    error = refused("a: " + "x" * 100)
    assert (error.where, error.reason) == ("", "larger than 100 bytes; limit 100")


def test_oversize_file_is_read_no_further_than_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_yaml, "MAX_BYTES", 1000)
    big = tmp_path / "big.yml"
    big.write_bytes(b"a: " + b"\xff" * 5000)  # not UTF-8 either: the size is checked first
    with pytest.raises(YAMLFileError, match=r"big.yml: larger than 1,000 bytes; limit 1,000$"):
        bounded_yaml.load_file(big)


@pytest.mark.parametrize(
    ("content", "where", "reason"),
    [
        (b"a: 1\nb: caf\xe9\n", "line 2, column 7", "not UTF-8: byte 0xe9; accepted: UTF-8 text"),
        (b"\xff\xfea\x00:\x00", "line 1, column 1", "not UTF-8: byte 0xff"),
        (b"a: 1\nb: x\x00y\n", "line 2, column 5", "binary content: control character U+0000 '\\x00'"),
        (b"\x7fELF\x02\x01", "line 1, column 1", "control character U+007F"),
        (b"a: \x1b[31mred\n", "line 1, column 4", "control character U+001B"),
        (b"a: \xc2\x9b\n", "line 1, column 4", "control character U+009B"),  # C1, valid UTF-8
    ],
    ids=["latin-1", "utf-16", "nul", "elf", "escape", "c1"],
)
def test_binary_and_non_utf8_files(tmp_path: Path, content: bytes, where: str, reason: str) -> None:
    path = tmp_path / "f.yml"
    path.write_bytes(content)
    with pytest.raises(YAMLFileError) as caught:
        bounded_yaml.load_file(path)
    assert (caught.value.source, caught.value.where) == (str(path), where)
    assert reason in caught.value.reason


def test_tabs_carriage_returns_and_a_bom_are_text(tmp_path: Path) -> None:
    path = tmp_path / "f.yml"
    path.write_bytes(b"\xef\xbb\xbfa: 'x\ty'\r\nb: 2\r\n")
    assert bounded_yaml.load_file(path) == {"a": "x\ty", "b": 2}


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(YAMLFileError, match=r"absent.yml: cannot read file: No such file or directory$"):
        bounded_yaml.load_file(tmp_path / "absent.yml")
    with pytest.raises(YAMLFileError, match=r"is a directory, not a regular file; accepted: a YAML file$"):
        bounded_yaml.load_file(tmp_path)


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("a: [1, 2\n", "line 2, column 1", "not valid YAML: while parsing a flow sequence at line 1, "),
        ("a: *nope\n", "line 1, column 4", "not valid YAML: found undefined alias 'nope'"),
        ("a: &x 1\nb: &x 2\n", "line 2, column 4", "found duplicate anchor 'x'; first occurrence at line 1"),
        ("--- 1\n--- 2\n", "line 2, column 1", "expected a single document in the stream"),
        # A plain date is text (YAML 1.2 core); a date asked for by tag is still read, and refused when it is none.
        ("when: !!timestamp 2026-13-45\n", "line 1, column 7", "cannot read '2026-13-45': month must be in 1..12"),
        ("n: " + "9" * 5000 + "\n", "line 1, column 4", "Exceeds the limit (4300 digits)"),
        ("b: !!binary 'zz!'\n", "line 1, column 4", "failed to decode base64 data"),
        ("x: !!python/object/apply:os.system [id]\n", "line 1, column 4", "could not determine a constructor"),
        ("? [a, b]\n: 1\n", "line 1, column 3", "found unhashable key"),
        ("a: 1\nb: 2\na: 3\n", "line 3, column 1", "key 'a' is given twice (first at line 1); accepted: each key once"),
    ],
    ids=[
        "syntax",
        "undefined-alias",
        "duplicate-anchor",
        "two-documents",
        "bad-date",
        "huge-int",
        "bad-binary",
        "python-tag",
        "unhashable-key",
        "duplicate-key",
    ],
)
def test_invalid_yaml_is_one_error_with_its_line(text: str, where: str, reason: str) -> None:
    error = refused(text)
    assert error.where.startswith(where.rsplit(",", 1)[0]), error
    assert reason in error.reason


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("fifo", "is a FIFO (named pipe), not a regular file"),
        ("directory", "is a directory, not a regular file"),
        ("device", "is a character device, not a regular file"),
    ],
)
def test_only_a_regular_file_is_read(kind: str, reason: str, tmp_path: Path) -> None:
    """A FIFO without a writer would hang the open, /dev/zero the read: both refused before either."""
    path = tmp_path / "catalog.yml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    started = time.monotonic()
    with pytest.raises(bounded_yaml.YAMLFileError, match=rf"^{path}: {re.escape(reason)}; accepted: a YAML file$"):
        bounded_yaml.load_file(path)
    assert time.monotonic() - started < 5
    link = tmp_path / "link.yml"
    link.symlink_to(path)
    with pytest.raises(bounded_yaml.YAMLFileError, match=re.escape(reason)):
        bounded_yaml.load_file(link)


def test_a_catalog_override_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    """--catalog and $GPUFABRIC_CATALOG both reach load_file through load_catalog."""
    fifo = tmp_path / "site.yml"
    os.mkfifo(fifo)
    with pytest.raises(fabric_catalog.CatalogError, match=r"is a FIFO \(named pipe\), not a regular file"):
        fabric_catalog.load_catalog(fabric_catalog.override_files_from_env({"GPUFABRIC_CATALOG": str(fifo)}))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("010", 10),  # YAML 1.1: octal 8
        ("0o10", 8),
        ("0x1f", 31),
        ("-7", -7),
        ("1e3", 1000.0),  # YAML 1.1: text
        (".inf", float("inf")),
        ("1:30", "1:30"),  # YAML 1.1: 90 (sexagesimal)
        ("yes", "yes"),  # YAML 1.1: true
        ("off", "off"),  # YAML 1.1: false
        ("True", True),
        ("2026-12-07", "2026-12-07"),  # YAML 1.1: a date
        ("1_000", "1_000"),  # YAML 1.1: 1000
        ("~", None),
        ("'010'", "010"),
    ],
)
def test_plain_scalars_resolve_as_yaml_1_2_core(text, value):
    assert bounded_yaml.load_text(f"a: {text}\n", "f.yml") == {"a": value}


def test_the_values_of_text_maps_stay_as_written():
    text = "env: {A: 010, B: 1e3, C: 22, D: 0.50, E: yes, F: true, G: null, H: '7'}\nn: 010\nother: {A: 010}\n"
    data = bounded_yaml.load_text(text, "f.yml", text_maps=("env",))
    assert data["env"] == {"A": "010", "B": "1e3", "C": "22", "D": "0.50", "E": "yes", "F": True, "G": None, "H": "7"}
    assert (data["n"], data["other"]) == (10, {"A": 10})  # only the named maps
