# SPDX-License-Identifier: Apache-2.0
"""The one YAML loader for every YAML file gpufabric reads itself, with limits checked before the work.

Catalog files, the static fleet file and `bake -e` values come from operators, sites and tickets; a file
that is binary, not UTF-8, enormous, nested absurdly deep or an alias bomb ("billion laughs": a few
lines whose aliases expand to 10^9 nodes) must be one clear error, never a traceback, a hang or
gigabytes of memory. Each limit is checked as early as it can be:

- size, before parsing: the file is read up to MAX_BYTES + 1 bytes, never further;
- encoding and binary content, before parsing: strict UTF-8, and only the characters YAML allows in a
  stream (so no NUL and no control character other than tab, newline and carriage return);
- nesting, aliases and expanded size, while composing, before any Python object is built: the composer
  counts every node as the copy an alias would make of it, so a bomb stops after a few hundred events.

Errors are YAMLFileError(source, where, reason): ``where`` is "line L, column C" where known. Callers
turn them into their own error type (CatalogError, DiscoveryError, UserError) unchanged.

Plain scalars resolve as YAML 1.2's core schema, not PyYAML's YAML 1.1: ``010`` is ten (not octal eight),
``1:30`` and ``yes`` are text (not ninety seconds and true), ``2026-12-07`` is text (not a date); only
``true``/``false`` are booleans and ``0o``/``0x`` mark octal and hexadecimal. The values of the mappings named in
``text_maps`` (the catalog's ``env`` and ``k8s_env``) are text exactly as written wherever YAML would read a
number: ``NCCL_IB_TC: 041`` is "041", ``NCCL_X: 1e3`` is "1e3".

libyaml's C parser is used where PyYAML has it (the scanner and parser are the slow part); composing
and constructing stay in Python so that the limits apply. PyYAML is imported only when a document is
loaded.
"""

from __future__ import annotations

import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import Any

# Real catalog files are tens of KB; a static fleet file of 10,000 hosts is about 2.5 MB.
MAX_BYTES = 4 * 1024 * 1024
# No real file nests deeper than about 8 levels (a catalog threshold sits at depth 6).
MAX_DEPTH = 64
# Anchors and aliases are rare in gpufabric's files; a fleet file may share one `vars:` per host.
MAX_ALIASES = 10_000
# Nodes in the document as if every alias were copied out: a 2.5 MB fleet file has about 100,000.
MAX_NODES = 1_000_000

# The characters YAML 1.1 allows in a stream (PyYAML's Reader.NON_PRINTABLE), refused here first so
# that the error names the character and its line instead of a position in a decoded string.
NOT_TEXT = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class YAMLFileError(Exception):
    """A YAML file or value is unreadable, over a limit, or not valid YAML."""

    def __init__(self, source: str, where: str, reason: str) -> None:
        self.source = source
        self.where = where
        self.reason = reason
        super().__init__(f"{source}: {where}: {reason}" if where else f"{source}: {reason}")


class _Refused(Exception):
    """A limit was crossed while composing; load_text adds the source."""

    def __init__(self, mark: Any, reason: str) -> None:
        super().__init__(reason)
        self.mark = mark
        self.reason = reason


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _mark_position(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


MERGE_TAG = "tag:yaml.org,2002:merge"  # `<<: *base` may repeat: each merges one more mapping
STR_TAG = "tag:yaml.org,2002:str"
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

# Tests turn this off to run the pure-Python parser, the one a controller without libyaml has.
PREFER_LIBYAML = True


@cache
def _loader_class(libyaml: bool) -> Any:
    """SafeLoader with a counting composer (over libyaml's parser where available)."""
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import ConstructorError, SafeConstructor
    from yaml.events import AliasEvent, CollectionStartEvent
    from yaml.nodes import MappingNode, ScalarNode
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.resolver import BaseResolver
    from yaml.scanner import Scanner

    # PyYAML built without libyaml has no yaml._yaml: then the pure-Python parser, about six times slower.
    c_parser = getattr(getattr(yaml, "_yaml", None), "CParser", None) if libyaml else None

    class CoreResolver(BaseResolver):  # type: ignore[misc]
        """YAML 1.2's core schema (yaml.org/spec/1.2.2, 10.3.2) for plain scalars; everything else is text."""

    for tag, pattern, first in (
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        (
            "float",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            "-+.0123456789",
        ),
        ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        ("merge", r"^(?:<<)$", "<"),
    ):
        CoreResolver.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), list(first))

    class BoundedComposer(Composer):  # type: ignore[misc]
        text_maps: tuple[str, ...] = ()

        def __init__(self) -> None:
            super().__init__()
            self._depth = 0
            self._aliases = 0
            self._nodes = 0
            self._weights: dict[str, int] = {}  # anchor: nodes its alias stands for

        def _count(self, mark: Any, weight: int) -> None:
            self._nodes += weight
            if self._nodes > MAX_NODES:
                raise _Refused(
                    mark, f"more than {MAX_NODES:,} nodes with aliases expanded (an alias bomb?); limit {MAX_NODES:,}"
                )

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise _Refused(event.start_mark, f"more than {MAX_ALIASES:,} aliases; limit {MAX_ALIASES:,}")
                if event.anchor in self.anchors and event.anchor not in self._weights:
                    raise _Refused(event.start_mark, f"alias *{event.anchor} refers to its own anchor (recursive)")
                # An undefined alias weighs nothing here: Composer reports it with its line.
                self._count(event.start_mark, self._weights.get(event.anchor, 0))
                return super().compose_node(parent, index)
            collection = isinstance(event, CollectionStartEvent)
            if collection:
                self._depth += 1
                if self._depth > MAX_DEPTH:
                    raise _Refused(event.start_mark, f"nested deeper than {MAX_DEPTH} levels; limit {MAX_DEPTH}")
            before = self._nodes
            self._count(event.start_mark, 1)
            node = super().compose_node(parent, index)
            if event.anchor is not None:
                self._weights[event.anchor] = self._nodes - before
            if collection:
                self._depth -= 1
            return node

        def compose_mapping_node(self, anchor: Any) -> Any:
            # A key written twice is a typo that YAML would settle silently (the last one wins).
            node = super().compose_mapping_node(anchor)
            seen: dict[tuple[str, str], Any] = {}
            for key, _value in node.value:
                if isinstance(key, ScalarNode) and key.tag != MERGE_TAG:
                    first = seen.setdefault((key.tag, key.value), key.start_mark)
                    if first is not key.start_mark:
                        raise _Refused(
                            key.start_mark,
                            f"key {key.value[:60]!r} is given twice (first at line {first.line + 1}); "
                            "accepted: each key once",
                        )
            # The values of a text map stay as written where YAML would read a number (booleans and nulls still
            # read as such, for the caller to refuse or keep).
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.value in self.text_maps and isinstance(value, MappingNode):
                    for _name, item in value.value:
                        if isinstance(item, ScalarNode) and not item.style and item.tag in NUMBER_TAGS:
                            item.tag = STR_TAG
            return node

    class BoundedConstructor(SafeConstructor):  # type: ignore[misc]
        def construct_core_int(self, node: Any) -> int:
            """YAML 1.2 core integers: decimal (leading zeros too), 0o octal, 0x hexadecimal."""
            text = self.construct_scalar(node)
            sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
            base = {"0o": 8, "0x": 16}.get(digits[:2], 10)
            return sign * int(digits[2:] if base != 10 else digits, base)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep)
            except (ValueError, OverflowError) as exc:
                # A scalar YAML resolves to a type whose constructor refuses it: 2026-13-45 (no month 13),
                # an integer of more than 4,300 digits.
                value = node.value if isinstance(node.value, str) else ""
                shown = repr(value if len(value) <= 40 else value[:40] + "...")
                raise ConstructorError(None, None, f"cannot read {shown}: {exc}", node.start_mark) from None

    BoundedConstructor.add_constructor("tag:yaml.org,2002:int", BoundedConstructor.construct_core_int)

    # The composer comes first so that its get_single_node wins over CParser's (which composes in C,
    # without the limits); the parser only supplies events.
    if c_parser is not None:

        class BoundedLoader(BoundedComposer, c_parser, BoundedConstructor, CoreResolver):  # type: ignore[misc]
            def __init__(self, stream: str) -> None:
                c_parser.__init__(self, stream)
                BoundedComposer.__init__(self)
                BoundedConstructor.__init__(self)
                CoreResolver.__init__(self)

    else:

        class BoundedLoader(BoundedComposer, Reader, Scanner, Parser, BoundedConstructor, CoreResolver):  # type: ignore[misc,no-redef]
            def __init__(self, stream: str) -> None:
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)
                BoundedComposer.__init__(self)
                BoundedConstructor.__init__(self)
                CoreResolver.__init__(self)

    return BoundedLoader


def load_text(text: str, source: str, text_maps: tuple[str, ...] = ()) -> Any:
    """Parse one YAML document from ``text`` within the limits; ``source`` names it in errors. The values of
    mappings under a key in ``text_maps`` are text as written wherever YAML would read a number."""
    import yaml

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YAMLFileError(source, "", f"larger than {MAX_BYTES:,} bytes; limit {MAX_BYTES:,}")
    found = NOT_TEXT.search(text)
    if found:
        char = found.group()
        raise YAMLFileError(
            source,
            _position(text, found.start()),
            f"binary content: control character U+{ord(char):04X} {char!r}; accepted: UTF-8 text",
        )
    loader = _loader_class(PREFER_LIBYAML)(text)
    loader.text_maps = text_maps
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise YAMLFileError(source, _mark_position(exc.mark), exc.reason) from None
    except yaml.MarkedYAMLError as exc:
        reason = exc.problem or str(exc)
        if exc.context:  # "while parsing a flow sequence at line 3, expected ',' or ']'"
            context_at = f" at line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
            reason = f"{exc.context}{context_at}, {reason}"
        raise YAMLFileError(source, _mark_position(exc.problem_mark), f"not valid YAML: {reason}") from None
    except yaml.YAMLError as exc:
        raise YAMLFileError(source, "", f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _not_regular(mode: int) -> str:
    """What a file that is not a regular file is, in a few words; '' for a regular file."""
    kinds = (
        (stat.S_ISDIR, "is a directory"),
        (stat.S_ISFIFO, "is a FIFO (named pipe)"),
        (stat.S_ISSOCK, "is a socket"),
        (stat.S_ISCHR, "is a character device"),
        (stat.S_ISBLK, "is a block device"),
    )
    return next((what for test, what in kinds if test(mode)), "" if stat.S_ISREG(mode) else "is not a file")


def load_file(path: str | Path, text_maps: tuple[str, ...] = ()) -> Any:
    """Read and parse a YAML file: at most MAX_BYTES of strict UTF-8 text, then load_text.

    Only a regular file (or a link to one): a directory, FIFO, socket or device is refused before any
    read, since a FIFO without a writer or a device such as /dev/zero would hang or never end."""
    source = str(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer would wait forever; fstat then refuses it.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise YAMLFileError(source, "", f"cannot read file: {exc.strerror or exc}") from None
    kind = _not_regular(os.fstat(descriptor).st_mode)
    if kind:
        os.close(descriptor)
        raise YAMLFileError(source, "", f"{kind}, not a regular file; accepted: a YAML file")
    with os.fdopen(descriptor, "rb") as stream:
        try:
            data = stream.read(MAX_BYTES + 1)
        except OSError as exc:
            raise YAMLFileError(source, "", f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise YAMLFileError(source, "", f"larger than {MAX_BYTES:,} bytes; limit {MAX_BYTES:,}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YAMLFileError(
            source, f"line {line}, column {column}", f"not UTF-8: byte 0x{data[exc.start]:02x}; accepted: UTF-8 text"
        ) from None
    return load_text(text, source, text_maps)
