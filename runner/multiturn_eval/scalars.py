"""A number written where the suite means text: its text is the text as written.

``ground_truth: 1.10`` is a YAML number, but the suite means the answer
``1.10``; as a float it would be ``1.1`` and ``equality`` would fail against
the reply "1.10" (``007`` would be ``7``, ``1e3`` ``1000.0``, ``0x1F`` ``31``).
So the parser keeps the source text of every number whose text differs from
Python's shortest form (:class:`WrittenInt`, :class:`WrittenFloat`: still an
``int`` / ``float`` everywhere a number is meant, such as ``count: 2``,
``temperature: 0.50``, a literal argument matcher or a ``context`` value), and
:func:`number_text` is the one rule that turns a number into text wherever the
suite format takes text (``ground_truth``, ``input``, ``fuzzy``, a ``contains``
``value``, ``retrieval_context``):

- a number that kept its source text is that text, exactly: ``1.10``, ``007``,
  ``+5``, ``1_000``, ``1e3``;
- any other number (written in its shortest form, or built in Python, or read
  by a parser that keeps no text) is ``str(int)`` / ``repr(float)``;
- the special floats ``.inf``, ``-.inf`` and ``.nan`` are ``inf``, ``-inf`` and
  ``nan`` (YAML's spelling is no answer anyone expects).

Where the suite means a number or free-form data (``context``, ``options``, a
literal argument matcher, a turn's extra keys), :func:`plain_numbers` turns the
kept numbers back into plain ``int`` / ``float`` when the suite is validated, so
neither the runner nor your code ever meets the subclasses.

A reader of another format that keeps number texts (``json.loads`` with
``parse_int`` / ``parse_float``, for test cases in JSON Lines) wraps them with
:func:`written_number` and gets the same rule.
"""

from __future__ import annotations

import math
from typing import Any


# Two classes, not one mixin: int's and float's __new__ differ, and a shared one needs
# three ignore comments under mypy --strict.
class WrittenInt(int):
    """An int that remembers how the file wrote it (``007``, ``+5``, ``1_000``, ``0x1F``)."""

    written: str

    def __new__(cls, value: int, written: str) -> WrittenInt:
        number = super().__new__(cls, value)
        number.written = written
        return number

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy and pickle keep the text
        return (type(self), (int(self), self.written))


class WrittenFloat(float):
    """A float that remembers how the file wrote it (``1.10``, ``1e3``, ``.5``)."""

    written: str

    def __new__(cls, value: float, written: str) -> WrittenFloat:
        number = super().__new__(cls, value)
        number.written = written
        return number

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (float(self), self.written))


def _shortest(value: int | float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def written_number(value: int | float, text: str) -> int | float:
    """``value`` remembering ``text`` when that is not already its shortest form."""
    text = text.strip()
    if isinstance(value, bool) or text == _shortest(value):
        return value
    if isinstance(value, float):
        return value if not math.isfinite(value) else WrittenFloat(value, text)
    return WrittenInt(value, text)


def number_text(value: int | float) -> str:
    """A number as text, where the suite format takes text (the one rule; see above)."""
    written = getattr(value, "written", None)
    return written if isinstance(written, str) else _shortest(value)


def plain_numbers(value: Any) -> Any:
    """``value`` with every kept number as a plain int / float (the same object if none)."""
    kind = type(value)
    if kind is WrittenInt:
        return int(value)
    if kind is WrittenFloat:
        return float(value)
    if kind is dict:
        items = [(plain_numbers(k), plain_numbers(v)) for k, v in value.items()]
        same = all(
            k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)
        )
        return value if same else dict(items)
    if kind is list:
        items = [plain_numbers(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value
