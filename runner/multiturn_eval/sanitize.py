"""Values from user code made fit for the reports (JSON, UTF-8), saying what was replaced.

An agent's tool invocations may carry anything Python can hold; ``report.json``
can only hold JSON, written as UTF-8. :func:`json_safe` walks a value and
returns a JSON-safe copy plus the list of what it had to replace:

=====================================  ==========================================
value                                  stand-in
=====================================  ==========================================
``bytes``, ``bytearray``, memoryview   its ``repr`` (``"b'\\x00'"``)
``set``, ``frozenset``                 a list (sorted by ``repr``, so stable)
an arbitrary object                    its ``repr`` (``"<object of type X>"`` if that raises)
a reference cycle                      ``"<cycle>"``
deeper than :data:`MAX_DEPTH` levels   ``"<nested deeper than 100 levels>"``
NaN, +inf, -inf                        ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
an int of more than 4,000 digits       ``"<int with N digits>"``
a non-string mapping key               ``str(key)`` (``repr`` of it if that raises)
text with lone surrogates              those characters replaced by ``?``
=====================================  ==========================================

Faithful conversions need no warning: tuples become lists; dataclasses and
pydantic models become mappings; enums their value; ``datetime``/``date``/
``time`` ISO text; ``Path``, ``UUID`` and ``Decimal`` their text; subclasses of
``int``/``float``/``str`` the plain type.

:mod:`multiturn_eval.replies` applies this to a whole agent reply where it enters
the runner.

The rung below :mod:`multiturn_eval.types` (whose ``ToolInvocation`` uses
:func:`json_safe`): this module imports nothing of the package, so anything may use it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import math
import uuid
from collections.abc import Mapping
from pathlib import PurePath
from types import UnionType
from typing import Any, NamedTuple

from pydantic import BaseModel

MAX_DEPTH = 100
"""Levels of nesting kept in a tool invocation's args or result."""

_MAX_INT_BITS = 13_000  # about 4,000 decimal digits: Python's int-to-text limit is 4,300
_LISTED = 5  # problems spelled out in one warning


class Replaced(NamedTuple):
    """One value :func:`json_safe` had to replace."""

    where: str
    what: str
    stand_in: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what} replaced by {self.stand_in}"


def safe_repr(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError
    except BaseException:  # a broken __repr__ must not spread
        try:
            return f"<object of type {type(value).__name__}>"
        except BaseException:
            return "<object>"
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_JSON_KINDS: tuple[tuple[type | UnionType, str], ...] = (
    (bool, "a boolean"),  # before int: a bool is an int
    (int | float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def json_kind(value: Any) -> str:
    """What JSON calls ``value``, as a message says it ("a number", "an object", "null")."""
    if value is None:
        return "null"
    found = (kind for types, kind in _JSON_KINDS if isinstance(value, types))
    return next(found, type(value).__name__)


def has_surrogates(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which UTF-8 cannot encode) replaced by ``?``."""
    if has_surrogates(text):
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class _Path(NamedTuple):
    parent: _Path | None
    key: str | int

    def text(self, root: str) -> str:
        parts: list[str] = []
        node: _Path | None = self
        while node is not None:
            parts.append(f"[{node.key}]" if isinstance(node.key, int) else f".{node.key}")
            node = node.parent
        parts.reverse()
        if len(parts) > 8:  # a 100-level path is noise: its ends say where it is
            parts = [*parts[:4], f"…({len(parts) - 6} levels)…", *parts[-2:]]
        return root + "".join(parts)


class _Walker:
    def __init__(self, root: str) -> None:
        self.root = root
        self.problems: list[Replaced] = []
        self.on_path: set[int] = set()

    def replaced(self, path: _Path | None, what: str, stand_in: Any, shown: str) -> Any:
        where = path.text(self.root) if path is not None else self.root
        self.problems.append(Replaced(where, what, shown))
        return stand_in

    def walk(self, value: Any, path: _Path | None, depth: int) -> Any:
        # the common, already JSON-safe scalars first
        kind = type(value)
        if value is None or kind is bool or kind is int:
            if kind is int and value.bit_length() > _MAX_INT_BITS:
                text = f"<int with about {int(value.bit_length() * 0.30103)} digits>"
                return self.replaced(path, "an int too long for JSON readers", text, repr(text))
            return value
        if kind is str:
            if has_surrogates(value):
                return self.replaced(
                    path, "text with lone surrogates", clean_text(value), "'?' in their place"
                )
            return value
        if kind is float:
            if math.isfinite(value):
                return value
            text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return self.replaced(path, f"the float {text}", text, repr(text))
        if depth >= MAX_DEPTH:
            text = f"<nested deeper than {MAX_DEPTH} levels>"
            return self.replaced(path, f"nesting deeper than {MAX_DEPTH} levels", text, repr(text))
        try:
            return self._walk_other(value, path, depth)
        except RecursionError:
            text = f"<nested deeper than {MAX_DEPTH} levels>"
            return self.replaced(path, "nesting too deep", text, repr(text))
        except Exception as exc:  # a container whose iteration raises
            text = safe_repr(value)
            return self.replaced(
                path,
                f"a {type(value).__name__} that could not be read ({type(exc).__name__})",
                text,
                "its repr",
            )

    def _container(self, value: Any, path: _Path | None, depth: int) -> Any:
        marker = id(value)
        if marker in self.on_path:
            return self.replaced(path, "a reference cycle", "<cycle>", "'<cycle>'")
        self.on_path.add(marker)
        try:
            if isinstance(value, Mapping):
                return self._mapping(value, path, depth)
            if isinstance(value, set | frozenset):
                items = sorted(value, key=safe_repr)
                self.replaced(path, f"a {type(value).__name__}", None, "a list")
            else:
                items = list(value)
            return [self.walk(item, _Path(path, i), depth + 1) for i, item in enumerate(items)]
        finally:
            self.on_path.discard(marker)

    def _mapping(self, value: Mapping[Any, Any], path: _Path | None, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is str and not has_surrogates(key):
                name = key
            elif isinstance(key, str):
                name = clean_text(str.__str__(key))
                if name != key:
                    self.replaced(
                        path, f"the key {safe_repr(key)} with lone surrogates", None, repr(name)
                    )
            else:
                try:
                    name = clean_text(key if isinstance(key, str) else str(key))
                    if not isinstance(name, str):
                        raise TypeError
                except Exception:
                    name = safe_repr(key)
                self.replaced(path, f"the non-string key {safe_repr(key)}", None, repr(name))
            if name in out:
                self.replaced(path, f"a second key {name!r}", None, "the later value")
            out[name] = self.walk(item, _Path(path, name), depth + 1)
        return out

    def _walk_other(self, value: Any, path: _Path | None, depth: int) -> Any:
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int | float | str) and not isinstance(value, enum.Enum):
            base = int if isinstance(value, int) else float if isinstance(value, float) else str
            return self.walk(base(value) if base is not str else str.__str__(value), path, depth)
        if isinstance(value, Mapping | list | tuple | set | frozenset):
            return self._container(value, path, depth)
        if isinstance(value, enum.Enum):
            return self.walk(value.value, path, depth + 1)
        if isinstance(value, BaseModel):  # its fields as they are: no serialiser that could fail
            fields = {
                name: getattr(value, name)
                for name, info in type(value).model_fields.items()
                if info.exclude_if is None or not info.exclude_if(getattr(value, name))
            }
            return self._container(fields, path, depth)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return self._container(fields, path, depth)
        if isinstance(value, _dt.datetime | _dt.date | _dt.time):
            return value.isoformat()
        if isinstance(value, PurePath | uuid.UUID | decimal.Decimal):
            return str(value)
        if isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value)
            text = safe_repr(raw)
            what = f"{type(value).__name__} of length {len(raw)}"
            return self.replaced(path, what, text, "its repr")
        text = safe_repr(value)
        return self.replaced(path, f"an object of type {type(value).__name__}", text, "its repr")


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is JSON already (the common case, checked without building anything)."""
    kind = type(value)
    if kind is str:
        return value.isascii() or not has_surrogates(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(value.bit_length() <= _MAX_INT_BITS)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        return all(
            type(k) is str and (k.isascii() or not has_surrogates(k)) and _plain(v, depth + 1)
            for k, v in value.items()
        )
    if kind is list:
        return all(_plain(v, depth + 1) for v in value)
    return False


def json_safe(value: Any, where: str = "value") -> tuple[Any, list[Replaced]]:
    """A JSON-safe copy of ``value`` and what had to be replaced (``where`` names the root).

    Plain JSON data (the common case) is returned as it is, not copied.
    """
    try:
        if _plain(value, 0):
            return value, []
    except RecursionError:  # a cycle of plain containers: the walker finds and names it
        pass
    walker = _Walker(where)
    safe = walker.walk(value, None, 0)
    return safe, walker.problems


def describe(problems: list[Replaced]) -> str:
    """One line for a warning: the first few replacements, and how many more."""
    shown = "; ".join(str(p) for p in problems[:_LISTED])
    more = len(problems) - _LISTED
    return shown + (f"; and {more} more" if more > 0 else "")
