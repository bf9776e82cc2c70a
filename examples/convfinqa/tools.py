"""The ConvFinQA tools: read the document's table and do the program's arithmetic.

Plain Python functions with type hints and docstrings, so every backend can
offer them (``agent.tools: [{function: examples.convfinqa.tools:subtract}]``)
and the offline baseline agent calls the very same functions.

The table tools take a first parameter annotated :class:`CaseContext`: the
runner fills it with the test case's ``context`` (where ``convert.py`` puts the
document's table, ``{column header: {row label: value}}``) and never shows it
to the model.

Matching of row labels and column headers is forgiving, in this order, and
stops at the first rule that picks exactly one label:

1. the exact label;
2. the same text ignoring case, punctuation and spacing
   (``"Net cash, from operating activities"``);
3. for a query with a year in it, the one label that mentions that year
   (``"2009"`` finds ``"for the years ended december 31 , 2009"`` and
   ``"12/31/2009"``);
4. the one label that contains every word of the query, or starts with it
   (``"operating activities"``); when several do, the query is ambiguous;
5. the closest label by :mod:`difflib` similarity, when it is clearly closer
   than the runner-up.

When no rule picks exactly one label, the error lists the candidates, so a
model can retry with a better label. If the query fits only with row and column
swapped, the cell is returned with a ``note`` saying so. Results always name
the row and column actually used.

(No ``from __future__ import annotations`` here: the annotations stay real
objects, so any tool-schema builder sees ``CaseContext`` itself.)
"""

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from multiturn_eval import CaseContext

__all__ = [
    "TOOL_NAMES",
    "TableLookupError",
    "add",
    "divide",
    "exp",
    "greater",
    "lookup",
    "match_label",
    "multiply",
    "normalise",
    "row_labels",
    "subtract",
    "table_average",
    "table_max",
    "table_min",
    "table_sum",
    "years_in",
]

#: the functions offered as tools, in the order the suites list them
TOOL_NAMES = (
    "lookup",
    "add",
    "subtract",
    "multiply",
    "divide",
    "exp",
    "greater",
    "table_sum",
    "table_average",
    "table_max",
    "table_min",
)

Table = Mapping[str, Mapping[str, Any]]

#: how much closer (difflib ratio) the best fuzzy candidate must be than the runner-up
_FUZZY_MARGIN = 0.08
_FUZZY_CUTOFF = 0.6
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")
_SHORT_DATE_YEAR = re.compile(r"\b\d{1,2}/\d{1,2}/(\d{2})\b")
_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


class TableLookupError(LookupError):
    """No cell (or no single cell) fits the requested row and column."""


# ------------------------------------------------------------------------- numbers


def numeric_text(text: str) -> float:
    """Numeric text as written in filings: ``"1,234"``, ``"$5"``, ``"13.4%"`` (0.134).

    ValueError when it is not a number (infinities and NaN are numbers here).
    """
    text = text.strip().replace(",", "").replace("$", "").strip()
    percent = text.endswith("%")
    if percent:
        text = text[:-1].strip()
    number = float(text)
    return number / 100 if percent else number


def _number(value: Any, name: str) -> float:
    """``value`` as a float; numeric text like ``"1,234"``, ``"$5"`` or ``"13.4%"`` too."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = numeric_text(value)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    elif isinstance(value, Mapping) and "value" in value:  # a lookup result passed back in
        return _number(value["value"], name)
    else:
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def _clean(value: float) -> float:
    """Drop binary noise (``35.800000000000004`` -> ``35.8``): 12 significant digits."""
    if not math.isfinite(value):
        raise OverflowError("the result is too large to represent")
    return float(f"{value:.12g}")


# -------------------------------------------------------------------------- tables


def _table(ctx: CaseContext) -> Table:
    table = ctx.context.get("table")
    if not isinstance(table, Mapping) or not table:
        raise TableLookupError(
            f"test case {ctx.test_case_name!r} has no table (expected context.table: "
            "{column header: {row label: value}})"
        )
    return table


def row_labels(table: Table) -> list[str]:
    """Every row label, in first-seen order across the columns."""
    seen: dict[str, None] = {}
    for column in table.values():
        for label in column:
            seen.setdefault(str(label), None)
    return list(seen)


def normalise(text: str) -> str:
    """Lower-case words and numbers only: ``"Net cash ( used )"`` -> ``"net cash used"``."""
    return " ".join(_WORD.findall(text.casefold().replace(",", "")))


def years_in(text: str) -> set[str]:
    """Four-digit years in a label; ``12/31/16`` counts as 2016."""
    years = set(_YEAR.findall(text))
    years.update("20" + y for y in _SHORT_DATE_YEAR.findall(text))
    return years


def _unique(candidates: Sequence[str]) -> str | None:
    return candidates[0] if len(candidates) == 1 else None


def _quote_all(labels: Iterable[str], limit: int = 12) -> str:
    labels = list(labels)
    shown = ", ".join(repr(label) for label in labels[:limit])
    return shown + (f", ... ({len(labels) - limit} more)" if len(labels) > limit else "")


def match_label(query: str, labels: Sequence[str], kind: str = "label") -> str:
    """The one label ``query`` stands for (rules in the module docstring).

    Raises :class:`TableLookupError` listing the candidates when none or
    several fit.
    """
    query = str(query)
    if query in labels:
        return query
    wanted = normalise(query)
    by_norm = [label for label in labels if normalise(label) == wanted]
    if by_norm:
        found = _unique(by_norm)
        if found is not None:
            return found
        raise TableLookupError(
            f"{kind} {query!r} is ambiguous: it could be {_quote_all(by_norm)}; "
            "give the exact label"
        )
    pool = list(labels)
    years = years_in(query)
    if years:
        with_year = [label for label in pool if years <= years_in(label)]
        found = _unique(with_year)
        if found is not None:
            return found
        if with_year:
            pool = with_year
    words = set(wanted.split())
    if words:
        containing = [
            label
            for label in pool
            if words <= set(normalise(label).split()) or normalise(label).startswith(wanted)
        ]
        found = _unique(containing)
        if found is not None:
            return found
        if containing:  # several labels hold every word: only the caller can tell which
            raise TableLookupError(
                f"{kind} {query!r} is ambiguous: it could be {_quote_all(containing)}; "
                "give more of the label"
            )
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, wanted, normalise(label)).ratio(), label)
            for label in pool
        ),
        key=lambda pair: -pair[0],
    )
    close = [(score, label) for score, label in scored if score >= _FUZZY_CUTOFF]
    if close and (len(scored) == 1 or scored[0][0] - scored[1][0] >= _FUZZY_MARGIN):
        return close[0][1]
    if len(pool) < len(labels) or close:
        candidates = [label for _, label in close] or pool
        raise TableLookupError(
            f"{kind} {query!r} is ambiguous: it could be {_quote_all(candidates)}; "
            "give more of the label"
        )
    raise TableLookupError(f"no {kind} matches {query!r}; the {kind}s are: {_quote_all(labels)}")


def _cell(table: Table, row: str, column: str) -> dict[str, Any]:
    columns = [str(c) for c in table]
    rows = row_labels(table)
    if not column.strip() and len(columns) == 1:
        column_label = columns[0]
    else:
        column_label = match_label(column, columns, "column")
    row_label = match_label(row, rows, "row")
    cells = table[column_label]
    if row_label not in cells:
        raise TableLookupError(
            f"the table has no value for row {row_label!r} in column {column_label!r}"
        )
    return {"row": row_label, "column": column_label, "value": cells[row_label]}


def lookup(ctx: CaseContext, row: str, column: str) -> dict[str, Any]:
    """Read one cell of the document's table.

    Matching is forgiving: case, punctuation and spacing do not matter, a year
    picks the one column that mentions it, and a unique part of a label is
    enough. When several labels fit, the error lists them.

    Args:
        row: The row label, e.g. "net cash from operating activities".
        column: The column header, e.g. "2009"; may be "" when the table has one column.

    Returns:
        {"row": the row label used, "column": the column header used, "value": the cell}.
    """
    table = _table(ctx)
    try:
        return _cell(table, row, column)
    except TableLookupError as first:
        try:
            swapped = _cell(table, column, row)
        except TableLookupError:
            raise first from None
        swapped["note"] = "row and column were swapped to find this cell"
        return swapped


def _row_values(ctx: CaseContext, row: str) -> dict[str, Any]:
    table = _table(ctx)
    label = match_label(row, row_labels(table), "row")
    values: dict[str, float] = {}
    skipped: dict[str, Any] = {}
    for column, cells in table.items():
        if label not in cells:
            continue
        cell = cells[label]
        try:
            values[str(column)] = _number(cell, "cell")
        except (TypeError, ValueError):
            skipped[str(column)] = cell
    if not values:
        raise TableLookupError(f"row {label!r} has no numeric cells (cells: {skipped!r})")
    result: dict[str, Any] = {"row": label, "values": values}
    if skipped:
        result["skipped"] = skipped
    return result


def table_sum(ctx: CaseContext, row: str) -> dict[str, Any]:
    """Sum of the numeric cells of one table row, across all columns.

    Args:
        row: The row label (matched as in lookup).

    Returns:
        {"row": the row label used, "values": {column: value}, "value": the sum}.
    """
    result = _row_values(ctx, row)
    result["value"] = _clean(math.fsum(result["values"].values()))
    return result


def table_average(ctx: CaseContext, row: str) -> dict[str, Any]:
    """Mean of the numeric cells of one table row, across all columns.

    Args:
        row: The row label (matched as in lookup).

    Returns:
        {"row": the row label used, "values": {column: value}, "value": the mean}.
    """
    result = _row_values(ctx, row)
    values = result["values"].values()
    result["value"] = _clean(math.fsum(values) / len(values))
    return result


def table_max(ctx: CaseContext, row: str) -> dict[str, Any]:
    """Largest numeric cell of one table row.

    Args:
        row: The row label (matched as in lookup).

    Returns:
        {"row": the row label used, "values": {column: value}, "value": the maximum}.
    """
    result = _row_values(ctx, row)
    result["value"] = max(result["values"].values())
    return result


def table_min(ctx: CaseContext, row: str) -> dict[str, Any]:
    """Smallest numeric cell of one table row.

    Args:
        row: The row label (matched as in lookup).

    Returns:
        {"row": the row label used, "values": {column: value}, "value": the minimum}.
    """
    result = _row_values(ctx, row)
    result["value"] = min(result["values"].values())
    return result


# ----------------------------------------------------------------------- arithmetic


def add(a: float, b: float) -> float:
    """Add two numbers: a + b.

    Args:
        a: The first number.
        b: The second number.
    """
    return _clean(_number(a, "a") + _number(b, "b"))


def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b (e.g. the change from b to a).

    Args:
        a: The number to subtract from (e.g. the later value).
        b: The number to subtract (e.g. the earlier value).
    """
    return _clean(_number(a, "a") - _number(b, "b"))


def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b.

    Args:
        a: The first number.
        b: The second number.
    """
    return _clean(_number(a, "a") * _number(b, "b"))


def divide(a: float, b: float) -> float:
    """Divide a by b: a / b (e.g. a change divided by the earlier value).

    Args:
        a: The dividend.
        b: The divisor (not zero).
    """
    divisor = _number(b, "b")
    if divisor == 0:
        raise ZeroDivisionError("cannot divide by zero (b is 0)")
    return _clean(_number(a, "a") / divisor)


def exp(a: float, b: float) -> float:
    """Raise a to the power b: a ** b.

    Args:
        a: The base.
        b: The exponent.
    """
    try:
        result = _number(a, "a") ** _number(b, "b")
    except ZeroDivisionError:
        raise ZeroDivisionError("0 cannot be raised to a negative power") from None
    except OverflowError:
        raise OverflowError("the result is too large to represent") from None
    if isinstance(result, complex):
        raise ValueError("a negative base with a fractional exponent has no real result")
    return _clean(result)


def greater(a: float, b: float) -> bool:
    """Whether a is greater than b (answers yes/no questions).

    Args:
        a: The first number.
        b: The second number.
    """
    return _number(a, "a") > _number(b, "b")
