"""Parameter descriptions from a tool's docstring (Google, numpy and reST styles)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters):\s*$"
)
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")
_NUMPY_ITEM = re.compile(r"^\*{0,2}(?P<names>\w+(?:\s*,\s*\w+)*)\s*(?::.*)?$")
_REST_FIELD = re.compile(r"^:(?P<kind>\w+)(?:\s+(?P<args>[^:]+))?:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: Sequence[str]) -> str:
    return " ".join(part.strip() for part in lines if part.strip())


def _numpy_section(lines: Sequence[str], i: int, params: dict[str, str]) -> int:
    """Read a numpy ``Parameters`` block whose header is at ``i``; return the next line."""
    base = _indent(lines[i])
    i += 2
    names: list[str] = []
    text: list[str] = []
    while i < len(lines):
        current = lines[i]
        if current.strip() and _indent(current) <= base:
            if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip()):
                break  # the next section's header
            match = _NUMPY_ITEM.match(current.strip())
            if match is None:
                break
            params.update(dict.fromkeys(names, _join(text)))
            names = [n.strip().lstrip("*") for n in match["names"].split(",")]
            text = []
        elif current.strip():
            text.append(current)
        i += 1
    params.update(dict.fromkeys(names, _join(text)))
    return i


def _google_section(lines: Sequence[str], i: int, params: dict[str, str]) -> int:
    """Read a Google ``Args:`` block whose header is at ``i``; return the next line."""
    i += 1
    item_indent: int | None = None
    name: str | None = None
    text: list[str] = []
    while i < len(lines):
        current = lines[i]
        if current.strip():
            indent = _indent(current)
            if indent == 0:
                break
            if item_indent is None:
                item_indent = indent
            match = _GOOGLE_ITEM.match(current.strip()) if indent <= item_indent else None
            if match is not None:
                if name is not None:
                    params[name] = _join(text)
                name, text = match["name"], [match["text"]]
            elif name is not None:
                text.append(current)
        i += 1
    if name is not None:
        params[name] = _join(text)
    return i


def _rest_field(lines: Sequence[str], i: int, params: dict[str, str]) -> int | None:
    """Read a reST ``:param x:`` field at ``i``; None when the line is not one."""
    line = lines[i]
    match = _REST_FIELD.match(line.strip())
    if match is None or match["kind"] not in _REST_PARAM_KINDS:
        return None
    text = [match["text"]]
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > _indent(line):
        text.append(lines[i])
        i += 1
    if match["kind"] != "type" and match["args"]:
        params[match["args"].split()[-1].lstrip("*")] = _join(text)
    return i


_REST_PARAM_KINDS = ("param", "parameter", "arg", "argument", "key", "keyword", "type")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description without parameter sections, {parameter: text}).

    Understands Google (``Args:`` with ``name (type): text``), numpy
    (``Parameters`` underlined with dashes, ``name : type`` then indented text)
    and reST (``:param name: text``, ``:param type name: text``; ``:type x:``
    lines are dropped) styles. Continuation lines are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if (
            stripped in ("Parameters", "Other Parameters", "Arguments")
            and i + 1 < len(lines)
            and re.fullmatch(r"-{3,}", lines[i + 1].strip())
        ):
            i = _numpy_section(lines, i, params)
        elif _GOOGLE_HEADER.match(stripped) and _indent(line) == 0:
            i = _google_section(lines, i, params)
        else:
            after = _rest_field(lines, i, params)
            if after is None:
                kept.append(line)
                i += 1
            else:
                i = after
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept).strip())
    return description, params
