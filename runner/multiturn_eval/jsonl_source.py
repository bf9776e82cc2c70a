"""JSON Lines text -> one JSON object per line, read as a stream (the input of ``test_cases_file``).

A suite's ``test_cases_file: data/dev.jsonl`` holds one test case per line,
each the JSON object a YAML ``test_cases:`` item would be. The file is read
line by line, never whole (a dataset may be far larger than the 64 MiB a suite
file may be), and held to the rules of a suite file, each broken one a
located problem (the loader adds the file, line and test case), never a
traceback or a hang:

- **one JSON object per line**; a line holding only whitespace is skipped.
  JSON has no comments: a line starting with ``#`` is refused (as is any line
  that is not JSON, or is JSON but not an object). ``\\n`` or ``\\r\\n`` ends
  a line.
- **UTF-8**: a line that is not is refused, naming the byte and its column. A
  UTF-8 byte-order mark at the start of the file is skipped (editors on
  Windows write one); a UTF-16 file is refused at its first line.
- **a line is at most** :data:`MAX_LINE_BYTES` (8 MiB): one test case, however
  large its ``context``, is far smaller. A longer line is refused without being
  held in memory (the reader skips to its end in small steps).
- **numbers** keep the text they were written with (``1.10`` stays the
  ``ground_truth`` ``1.10``; :func:`multiturn_eval.scalars.written_number`, the
  YAML reader's rule) and are at most ``MAX_NUMBER_CHARS`` (100) characters;
  ``NaN`` and ``Infinity`` (which Python's ``json`` accepts) are not JSON and are
  refused.
- **keys** appear once in an object (Python's ``json`` silently keeps the last).
- **nesting** at most ``MAX_DEPTH`` (100) levels of arrays and objects, as in
  a YAML suite.
- **text** holds characters only: a lone surrogate escape (``"\\ud800"``,
  which UTF-8 cannot encode) is refused; a proper pair (an emoji) is one
  character.

:func:`read_lines` yields each non-blank line with its number and byte
offset (what the loader's index keeps, to read the line again when its case
runs); :func:`parse_line` turns one line into data or raises ``ValueError``
saying what is wrong (with the column where JSON knows it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from .sanitize import has_surrogates, json_kind
from .scalars import written_number
from .yaml_source import MAX_DEPTH, MAX_NUMBER_CHARS

MAX_LINE_BYTES = 8 * 1024 * 1024
"""The longest line (one test case) of a JSON Lines file, in bytes."""

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


@dataclass(frozen=True, slots=True)
class RawLine:
    """One non-blank line of a JSON Lines file, as read."""

    number: int
    """1-based line number in the file (blank lines count)."""
    offset: int
    """Byte offset of the line's first byte (after a byte-order mark) in the file."""
    data: bytes
    """The line without its line ending (empty when ``problem`` says it was not kept)."""
    problem: str | None = None
    """Why the line cannot be a test case before it is even parsed (too long, UTF-16)."""


def read_lines(handle: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[RawLine]:
    """Every non-blank line of ``handle`` (a binary file at its start), in order.

    Reads at most ``limit + 1`` bytes of any line: a longer one is skipped to its
    end in 1 MiB steps and yielded with a ``problem`` (its size) and no data.
    """
    offset = 0
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        start = offset
        offset += len(raw)
        if len(raw) > limit and not raw.endswith(b"\n"):
            chunk, size = raw, len(raw)
            while not chunk.endswith(b"\n"):  # the rest of the line, without holding it
                chunk = handle.readline(1 << 20)
                if not chunk:
                    break
                offset += len(chunk)
                size += len(chunk)
            size -= chunk.endswith(b"\n")
            yield RawLine(
                number,
                start,
                b"",
                f"the line is {size:,} bytes, over the {limit / (1024 * 1024):g} MiB limit of "
                "one test case",
            )
            continue
        if number == 1:
            if raw.startswith(_UTF16_BOMS):
                yield RawLine(
                    number,
                    start,
                    b"",
                    "the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8",
                )
                return
            if raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
                start += len(_BOM)
        data = raw.rstrip(b"\r\n")
        if not data.strip():
            continue
        yield RawLine(number, start, data)


def _number_too_long(text: str) -> ValueError:
    return ValueError(
        f"a number written with {len(text):,} characters is too long (at most "
        f"{MAX_NUMBER_CHARS}); write it as a string to keep it as text"
    )


def _int(text: str) -> int | float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long(text)
    return written_number(int(text), text)


def _float(text: str) -> int | float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long(text)
    return written_number(float(text), text)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (Python writes it, JSON has no such number); quote it")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r} in one object (JSON keeps only the last)")
            seen.add(key)
    return data


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_int=_int, parse_float=_float, parse_constant=_constant
)


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects deeper than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if type(c) in (dict, list))
    return False


def _surrogate_in(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if has_surrogates(item):
                return True
        elif type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def parse_line(data: bytes) -> dict[str, Any]:
    """One line's test case as data; ValueError says why the line is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(data[: exc.start].decode("utf-8", "replace")) + 1
        raise ValueError(
            f"the line is not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} ({exc.reason})"
        ) from None
    stripped = text.lstrip()
    if stripped.startswith("#"):
        raise ValueError(
            "JSON has no comments: every line of a JSON Lines file is one test case (a JSON "
            "object); remove this line (blank lines are skipped)"
        )
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the line is not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels of arrays and objects") from None
    if type(value) is not dict:
        raise ValueError(
            'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is '
            + json_kind(value)
        )
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _depth_over(value, MAX_DEPTH):
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels of arrays and objects")
    if (b"\\ud" in data or b"\\uD" in data) and _surrogate_in(value):
        raise ValueError(
            "the line holds a lone surrogate escape (such as \\ud800), which is not a character; "
            "write the character itself, or a proper pair of escapes"
        )
    return value
