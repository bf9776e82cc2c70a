"""YAML text -> plain data plus a map from field path to line number (pure).

Booleans follow YAML 1.2 (only ``true``/``false``), so ``ground_truth: yes``
stays the text "yes" instead of becoming ``True`` as in YAML 1.1, and dates are
not recognised (``2024-10-21`` stays text). Duplicate keys
in one mapping are errors (the second would silently win otherwise).

The data is built from the parser's event stream by a loop with an explicit
stack (no recursion, so no ``RecursionError`` whatever the input), and a suite
file is held to what a suite can contain. Each rule below is a located
:class:`~multiturn_eval.errors.YamlSyntaxError`, never a traceback or a hang:

- **plain data only**: text, numbers, ``true``/``false``, null, lists and
  mappings. The tags that name those (``!!str``, ``!!int``, ``!!float``,
  ``!!bool``, ``!!null``, ``!!seq``, ``!!map``) are accepted and must fit their
  value (``!!int x`` is an error); every other tag (``!!timestamp``,
  ``!!binary``, ``!!set``, ``!!omap``, ``!!python/...``, ``!custom``) is
  refused, because what it builds could not be checked, compared or reported.
- **nesting** at most :data:`MAX_DEPTH` (100) levels of lists and mappings.
  Real suites use fewer than 10; deeper data would only exhaust the recursion
  of whatever walks it later (validation, reports).
- **aliases** may repeat at most as many nodes as the file itself holds, or
  :data:`MIN_ALIAS_BUDGET` (100,000), whichever is more: enough for
  ``evaluations: *shared`` on every test case, far too little for a "billion
  laughs" bomb (nine lines that expand to 10^9 nodes). An alias to an anchor
  that is not defined before it, or to the node it sits inside, is an error.
  Aliased values are shared, not copied: building stays linear in the text.
- **merge keys** ``<<`` take a mapping or a list of mappings; keys written in
  the mapping itself win over merged ones, earlier merged mappings win over
  later ones (YAML's merge-key rules). Anywhere else ``<<`` and ``=`` are text.
- **numbers** are at most :data:`MAX_NUMBER_CHARS` (100) characters long
  (a longer unquoted number is almost certainly an ID: quote it to keep it as
  text); this also keeps Python's int/str conversion limits out of the way. A
  number keeps the text it was written with (``1.10``, ``007``) for the fields
  that take text (:mod:`multiturn_eval.scalars`).
- **keys** are scalars (text, numbers, booleans, null), never lists or
  mappings, and never NaN (which is not equal to itself).
- **size**: at most :data:`MAX_NODES` (1,000,000) values written in the file
  plus one per :data:`BYTES_PER_VALUE` (8) characters of text before the value.
  Real suites spend 9 characters a value or more, so any of them under the
  loader's 64 MiB cap loads (50,000 six-turn test cases with a tool assertion on
  every turn: a 55 MB file, 5.8 million values); a file dense with values
  (``[1,1,1,...]``: 30 million values in 60 MB) is refused when its first few
  million characters are read, before it costs more than a few hundred MB
  (about 150 bytes a value held). A whole ConvFinQA dev split as one 20 MB
  suite is about 400,000 values.
- **one document** per file.

Parser errors say where the parser gave up and, when it knows, where the
broken construct started (``while scanning a quoted scalar that starts at line
5, column 12: found unexpected end of stream at line 7, column 1``); a tab in
the indentation is named as such; a control character names its line and
column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from sys import intern
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from .errors import YamlSyntaxError
from .scalars import written_number

Path_ = tuple[Any, ...]
"""A field path: mapping keys (usually str) and list indexes."""


def format_path(path: Sequence[Any]) -> str:
    """A field path as messages write it: ``turns[2].expected_tools[0].args``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


MAX_DEPTH = 100
#: values deeper than this get no line of their own (``line_of`` gives their nearest
#: ancestor's): the suite format's deepest field is about 10 levels down, and a line per
#: value of a deep free-form ``context`` would cost a path tuple of its depth each
LINE_DEPTH = 16
"""Deepest nesting of lists and mappings a suite file may have."""
MIN_ALIAS_BUDGET = 100_000
"""Nodes aliases may repeat in any file (more when the file itself holds more)."""
MAX_NUMBER_CHARS = 100
"""Longest unquoted number (characters)."""
MAX_NODES = 1_000_000
"""Values (scalars, lists, mappings) any file may write out; more, one per
:data:`BYTES_PER_VALUE` characters of text before the value."""
BYTES_PER_VALUE = 8
"""A large suite written out by hand or a script spends 9-12 characters a value (the
bench's six-turn case, 9.4; a ConvFinQA dialogue, more); a file dense with values
(``[1,1,1,...]``, 2) is refused soon after its first :data:`MAX_NODES` values."""

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """SafeLoader with YAML 1.2 booleans."""


# YAML 1.2 core schema: no yes/no/on/off booleans and no implicit timestamps
# (an unquoted 2024-10-21 stays the text "2024-10-21", as an api_version or an answer)
_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp"}
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)

_TAG = "tag:yaml.org,2002:"
_STR_TAG = _TAG + "str"
_MERGE_TAG = _TAG + "merge"
_VALUE_TAG = _TAG + "value"
_MAP_TAGS = frozenset({None, "!", _TAG + "map"})
_SEQ_TAGS = frozenset({None, "!", _TAG + "seq"})
_NUMBER_TAGS = frozenset({_TAG + "int", _TAG + "float"})
_SCALAR_CONSTRUCTORS = {
    _TAG + "int": "construct_yaml_int",
    _TAG + "float": "construct_yaml_float",
    _TAG + "bool": "construct_yaml_bool",
    _TAG + "null": "construct_yaml_null",
}
_KEY_TYPES = (str, int, float, bool, type(None))
_ALLOWED = "a suite holds only text, numbers, true/false, null, lists and mappings"


@dataclass
class YamlDocument:
    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    """1-based line of each value; for mapping keys, the line of the key."""

    def line_of(self, path: Path_) -> int | None:
        """The line of ``path``, or of its closest ancestor that exists."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def compact(self, depth: int) -> None:
        """Drop the raw data and the lines of paths deeper than ``depth`` (once loaded)."""
        self.data = None
        self.lines = {k: v for k, v in self.lines.items() if len(k) <= depth}


def _show_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _Open:
    """A list or mapping whose end event has not come yet."""

    __slots__ = ("anchor", "eff", "key", "key_line", "line", "merges", "path", "size", "value")

    def __init__(self, value: Any, path: Path_, anchor: str | None, line: int, eff: int) -> None:
        self.value = value
        self.path = path
        self.anchor = anchor
        self.line = line
        self.eff = eff
        """The line ``line_of(path)`` gives once the document is built (a mapping's value:
        its key's line; anything else: where it starts)."""
        self.size = 1
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.merges: list[tuple[Any, int]] = []


_NO_KEY = object()
_MERGE = object()
"""The pending key of a mapping whose next value is a ``<<`` merge."""
_OPEN_ANCHOR = object()


class _Builder:
    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.lines: dict[Path_, int] = {}
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        """anchor -> (value, nodes in it); value is _OPEN_ANCHOR while it is being built"""
        self.nodes = 0
        """nodes written in the file"""
        self.repeated = 0
        """nodes that aliases repeat"""
        self.root: Any = None

    # ------------------------------------------------------------------ values

    def _child_path(self, line: int) -> Path_ | None:
        """The path a new value takes in the open collection (None: it is a mapping key)."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if type(top.value) is list:
            return (*top.path, len(top.value))
        if top.key is _NO_KEY:
            return None
        if top.key is _MERGE:
            return (*top.path, "<<")
        return (*top.path, top.key)

    def _add(self, value: Any, line: int, size: int, is_merge_key: bool = False) -> None:
        """Put a finished value into the open collection (or make it the document)."""
        if not self.stack:
            self.root = value
            self.lines.setdefault((), line)
            return
        top = self.stack[-1]
        top.size += size
        if type(top.value) is list:
            self._line((*top.path, len(top.value)), line, top.eff)
            top.value.append(value)
            return
        if top.key is _NO_KEY:  # this value is a key
            if is_merge_key:
                top.key, top.key_line = _MERGE, line
                return
            if not isinstance(value, _KEY_TYPES):
                raise YamlSyntaxError(
                    f"mapping keys must be plain scalars, got {type(value).__name__}", line
                )
            if type(value) is float and math.isnan(value):
                raise YamlSyntaxError("a mapping key cannot be NaN; quote it", line)
            if value in top.value:
                first = self.lines.get((*top.path, value))
                if first is None and len(top.path) < LINE_DEPTH:  # on its mapping's line
                    first = top.eff
                where = f" (first at line {first})" if first is not None else ""
                raise YamlSyntaxError(f"duplicate key {value!r}{where}", line)
            top.key, top.key_line = value, line
            return
        if top.key is _MERGE:
            top.merges.append((value, top.key_line))
        else:
            self._line((*top.path, top.key), top.key_line, top.eff, replace=True)
            top.value[top.key] = value
        top.key = _NO_KEY

    def _line(self, path: Path_, line: int, parent: int, *, replace: bool = False) -> None:
        """``path`` is at ``line``; ``parent``: the line its parent's path has (its ``eff``).

        A value on its parent's line gets no entry: :meth:`YamlDocument.line_of` gives
        the closest ancestor's line, the same one (most values of a large suite are on
        the line of their mapping or list item: this keeps the index to a third).
        """
        if len(path) <= LINE_DEPTH:
            if line == parent:
                if replace:
                    self.lines.pop(path, None)
            elif replace:
                self.lines[path] = line
            else:
                self.lines.setdefault(path, line)

    def _count(self, line: int, at: int) -> None:
        """One more value, starting at character ``at`` of the text."""
        self.nodes += 1
        if self.nodes > MAX_NODES + at // BYTES_PER_VALUE:
            raise YamlSyntaxError(
                f"the file holds more than {MAX_NODES:,} values (scalars, lists and mappings) "
                f"plus one per {BYTES_PER_VALUE} characters of text ({self.nodes:,} values in "
                f"its first {at:,} characters); split it into several suite files, or put the "
                "test cases in a JSON Lines file (test_cases_file:)",
                line,
            )

    def scalar(self, event: Any) -> None:
        line = event.start_mark.line + 1
        self._count(line, event.start_mark.index)
        tag = event.tag
        text = event.value
        is_key = self._child_path(line) is None
        if is_key:  # the same few keys in every test case: one string each, not one a case
            text = intern(text)
        if (tag is None and event.style) or tag == "!":  # quoted, block or '!': a string
            value: Any = text
        else:
            if tag is None:  # plain (the parser gives no style, or "")
                tag = self.loader.resolve(yaml.ScalarNode, text, event.implicit)
            if tag == _STR_TAG:
                value = text
            elif tag == _MERGE_TAG and is_key:
                value = None
            elif tag in (_MERGE_TAG, _VALUE_TAG) and event.tag is None:
                value = text  # a plain '<<' outside a key, or '=': just text
            elif tag in _SCALAR_CONSTRUCTORS:
                value = self._construct(tag, text, event, line)
            else:
                raise YamlSyntaxError(
                    f"tag {_show_tag(tag)} is not supported: {_ALLOWED} "
                    "(quote the value to keep it as text)",
                    line,
                )
        self._anchor(event.anchor, value, 1)
        self._add(value, line, 1, is_merge_key=is_key and tag == _MERGE_TAG)

    def _construct(self, tag: str, text: str, event: Any, line: int) -> Any:
        if tag in _NUMBER_TAGS and len(text) > MAX_NUMBER_CHARS:
            raise YamlSyntaxError(
                f"a number written with {len(text):,} characters is too long (at most "
                f"{MAX_NUMBER_CHARS}); quote it to keep it as text",
                line,
            )
        node = yaml.ScalarNode(tag, text, event.start_mark, event.end_mark, event.style)
        try:
            value = getattr(self.loader, _SCALAR_CONSTRUCTORS[tag])(node)
        except Exception:  # ValueError, KeyError, ...: the text does not fit the tag
            raise YamlSyntaxError(f"{text!r} is not a valid {_show_tag(tag)} value", line) from None
        # 1.10 stays "1.10" where the suite takes text (ground_truth, input): see scalars.py
        return written_number(value, text) if tag in _NUMBER_TAGS else value

    def _anchor(self, anchor: str | None, value: Any, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)

    def alias(self, event: Any) -> None:
        line = event.start_mark.line + 1
        found = self.anchors.get(event.anchor)
        if found is None:
            raise YamlSyntaxError(
                f"alias *{event.anchor} refers to no anchor: &{event.anchor} must be defined before it",
                line,
            )
        value, size = found
        if value is _OPEN_ANCHOR:
            raise YamlSyntaxError(
                f"alias *{event.anchor} is inside the node it refers to (a structure that contains itself)",
                line,
            )
        self.repeated += size
        if self.repeated > max(MIN_ALIAS_BUDGET, self.nodes):
            raise YamlSyntaxError(
                f"aliases repeat more than {max(MIN_ALIAS_BUDGET, self.nodes):,} nodes (at alias "
                f"*{event.anchor}); a suite may repeat through aliases at most as much data as it "
                f"holds, or {MIN_ALIAS_BUDGET:,} nodes (is this an alias bomb?)",
                line,
            )
        is_key = self._child_path(line) is None
        if is_key and not isinstance(value, _KEY_TYPES):
            raise YamlSyntaxError(
                f"mapping keys must be plain scalars, got {type(value).__name__} (alias *{event.anchor})",
                line,
            )
        self._add(value, line, size)

    # ------------------------------------------------------------- collections

    def start(self, event: Any, value: dict[Any, Any] | list[Any]) -> None:
        line = event.start_mark.line + 1
        self._count(line, event.start_mark.index)
        allowed = _MAP_TAGS if type(value) is dict else _SEQ_TAGS
        if event.tag not in allowed:
            raise YamlSyntaxError(
                f"tag {_show_tag(event.tag)} is not supported: {_ALLOWED}",
                line,
            )
        path = self._child_path(line)
        if path is None:
            kind = "mapping" if type(value) is dict else "list"
            raise YamlSyntaxError(f"mapping keys must be plain scalars, got a {kind}", line)
        if len(self.stack) >= MAX_DEPTH:
            raise YamlSyntaxError(
                f"nesting deeper than {MAX_DEPTH} levels of lists and mappings "
                f"(the outermost starts at line {self.stack[0].line})",
                line,
            )
        if not self.stack:
            eff = line
            self.lines.setdefault(path, line)
        else:
            top = self.stack[-1]
            mapping_value = type(top.value) is not list and top.key is not _MERGE
            eff = top.key_line if mapping_value else line
            self._line(path, eff, top.eff, replace=mapping_value)
        if event.anchor is not None:
            self.anchors[event.anchor] = (_OPEN_ANCHOR, 0)
        self.stack.append(_Open(value, path, event.anchor, line, eff))

    def end(self) -> None:
        done = self.stack.pop()
        value = done.value
        if done.merges:
            value = self._merged(done)
        self._anchor(done.anchor, value, done.size)
        self._add(value, done.line, done.size)

    def _merged(self, done: _Open) -> dict[Any, Any]:
        merged: dict[Any, Any] = {}
        for value, line in done.merges:
            if type(value) is dict:
                sources = [value]
            elif type(value) is list and all(type(v) is dict for v in value):
                sources = value
            else:
                got = "a list holding other values" if type(value) is list else _kind(value)
                raise YamlSyntaxError(
                    f"the merge key '<<' takes a mapping or a list of mappings; got {got}", line
                )
            for source in sources:
                for key, item in source.items():
                    if key not in merged and key not in done.value:
                        merged[key] = item
                        self._line((*done.path, key), line, done.eff)
        merged.update(done.value)
        return merged


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"


def _syntax_error(exc: yaml.MarkedYAMLError, text: str) -> YamlSyntaxError:
    problem, context = exc.problem, exc.context
    mark, start = exc.problem_mark, exc.context_mark
    parts = []
    if context:
        same = start is not None and mark is not None and start.line == mark.line
        parts.append(f"{context} that starts at {_where(start)}" if start and not same else context)
    if problem:
        parts.append(f"{problem} at {_where(mark)}" if mark else problem)
    message = ": ".join(parts) or str(exc).splitlines()[0]
    line = mark.line + 1 if mark else (start.line + 1 if start else None)
    if problem and "maximum nesting depth" in problem:  # libyaml's own limit (1,000) hit first
        where = f" at {_where(mark)}" if mark else ""
        return YamlSyntaxError(
            f"nesting deeper than {MAX_DEPTH} levels of lists and mappings{where}", line
        )
    tab = _tab_near(text, mark)
    if tab is not None:
        message = (
            f"a tab character at line {tab[0]}, column {tab[1]}: YAML indentation must use "
            f"spaces, not tabs ({message})"
        )
    return YamlSyntaxError(message, line)


def _tab_near(text: str, mark: Any) -> tuple[int, int] | None:
    """(line, column) of a tab in the indentation of the problem line or the one above it."""
    if mark is None:
        return None
    lines = text.splitlines()
    for number in (mark.line, mark.line - 1):
        if 0 <= number < len(lines):
            content = lines[number]
            indent = content[: len(content) - len(content.lstrip(" \t"))]
            if "\t" in indent:
                return number + 1, indent.index("\t") + 1
            if mark.line == number and content[mark.column : mark.column + 1] == "\t":
                return number + 1, mark.column + 1
    return None


def _reader_error(exc: yaml.reader.ReaderError, text: str) -> YamlSyntaxError:
    position = exc.position
    if isinstance(exc.character, int):
        shown = f"U+{exc.character:04X}"
        # the C parser counts UTF-8 bytes, the Python one characters: find the character itself
        found = text.find(chr(exc.character))
        if found >= 0:
            position = found
    else:
        shown = repr(exc.character)
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return YamlSyntaxError(
        f"character {shown} at line {line}, column {column} is not allowed in YAML "
        '(write control characters as escapes inside double quotes, e.g. "\\t")',
        line,
    )


def parse_yaml(text: str) -> YamlDocument:
    """Parse one suite file's text; YamlSyntaxError says what is wrong and where."""
    loader = _Loader(text)
    builder = _Builder(loader)
    documents = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                builder.scalar(event)
            elif kind is MappingStartEvent:
                builder.start(event, {})
            elif kind is SequenceStartEvent:
                builder.start(event, [])
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                builder.end()
            elif kind is AliasEvent:
                builder.alias(event)
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise YamlSyntaxError(
                        "a suite file holds one YAML document; a second one starts at "
                        f"line {event.start_mark.line + 1} (remove the '---' or split the file)",
                        event.start_mark.line + 1,
                    )
            elif kind is StreamEndEvent:
                break
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc).splitlines()[0], None) from None
    finally:
        loader.dispose()
    return YamlDocument(data=builder.root, lines=builder.lines)
