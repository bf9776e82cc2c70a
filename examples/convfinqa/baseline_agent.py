"""An offline, rule-based ConvFinQA analyst for the ``python`` backend.

``agent: {backend: python, factory: examples.convfinqa.baseline_agent:factory}``

It needs no model, no key and no network, so the example suite runs anywhere in
seconds -- and it is honest about what it is: a few dozen rules, not an LLM.
Its measured accuracy is in ``examples/convfinqa/README.md``.

What it does with each question:

1. decide the kind of question from its wording: a value lookup, a change
   (``difference``, ``change``, ``increase`` ...), a percentage change
   (``percentage change``, ``growth rate``, ``in relation to`` a change ...),
   a sum, an average, a ratio (``divided by``, ``portion``, ``percentage of``
   ...), a product (``times 1000``) or a yes/no comparison;
2. find what the question names: the table row whose words it shares most,
   the years (columns) it mentions, literal numbers (``divided by 100``);
3. fill the gaps from the session's history: "what about in 2008?" is the
   last row in a new column; "what is the difference?" subtracts the last two
   values; "what percentage change does this represent?" divides the last
   change by its base;
4. do every step by calling the example's tools (``lookup``, ``subtract``,
   ``divide`` ...) -- the same functions a model gets -- and report each call
   as a :class:`ToolInvocation`, so the suite's tool assertions and the
   program grader check it exactly as they check a model;
5. reply with the working and the number last (``60.94 - 25.14 = 35.8``),
   or with a sentence without a number when it cannot tell.

It only calls tools the suite offers in ``agent.tools`` (all of the example's
tools when the list is empty).
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from multiturn_eval import CaseContext, ToolInvocation, TurnReply

from .graders import format_value
from .tools import normalise, row_labels, years_in

__all__ = ["BaselineSession", "factory"]

_STOP_WORDS = """
    a an the of in on at to for from by and or as is was were are be been it its this that
    these those what which how much many did does do then so also with between over during
    year years value amount number change percentage percent portion there their about same
    period end ended ending beginning start december dec respectively approximately combined
    sum difference ratio s
"""
_STOP = frozenset(_STOP_WORDS.split())
#: words that say little about which row is meant: they count, but less
_WEAK_WORDS = "total net other average including excluding less plus per share"
_WEAK = frozenset(_WEAK_WORDS.split())
_YEAR = re.compile(r"(?<![\d.$])((?:19|20)\d{2})(?![\d%\w])")
#: "what is 45 times 4?": both operands are in the question
_LITERAL_OPS = (
    (r"\b(times|multipl\w*|product)\b", "multiply"),
    (r"\b(divided by|over|divide)\b", "divide"),
    (r"\b(less|minus|subtract\w*)\b", "subtract"),
    (r"\b(plus|sum|add|added)\b", "add"),
)
_SHORT_DATE = re.compile(r"\b\d{1,2}/\d{1,2}/(\d{2})\b")
_LITERAL = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.]*%)")


@dataclass
class Answer:
    """What one turn produced, for later turns to refer to."""

    question: str
    kind: str
    value: float | str | None = None
    row: str | None = None
    column: str | None = None
    operands: tuple[float, ...] = ()


class _Stuck(Exception):
    """The agent cannot answer this question; the message says why (no number in it)."""


@dataclass
class _Turn:
    calls: list[ToolInvocation] = field(default_factory=list)


def _resolve(ref: str) -> Callable[..., Any]:
    module_name, _, attr = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{ref} is not callable")
    return target  # type: ignore[no-any-return]


def _offered_tools(agent: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    specs = agent.get("tools") or []
    if not specs:
        from . import tools

        return {name: getattr(tools, name) for name in tools.TOOL_NAMES}
    offered: dict[str, Callable[..., Any]] = {}
    for spec in specs:
        fn = _resolve(str(spec["function"]))
        offered[str(spec.get("name") or fn.__name__)] = fn
    return offered


def _takes_context(fn: Callable[..., Any]) -> str | None:
    for name, param in inspect.signature(fn).parameters.items():
        if param.annotation in (CaseContext, "CaseContext"):
            return name
    return None


def _fmt(value: float | str | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, str):
        return value
    return format_value(round(value, 5))


def _overlap(asked: Sequence[str], label: str) -> int:
    """How many words of ``label`` the question has (``highest`` has ``high``)."""
    return sum(
        1
        for word in set(_words(label))
        if any(q == word or (len(word) >= 3 and q.startswith(word)) for q in asked)
    )


def _words(text: str) -> list[str]:
    words = []
    for word in normalise(text).split():
        if word in _STOP or _YEAR.fullmatch(word) or (len(word) < 2 and not word.isdigit()):
            continue
        words.append(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


class BaselineSession:
    """One dialogue: keeps the history the follow-up questions refer to."""

    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx
        table = ctx.context.get("table") or {}
        self.table: Mapping[str, Mapping[str, Any]] = table if isinstance(table, Mapping) else {}
        self.columns = [str(c) for c in self.table]
        self.rows = row_labels(self.table)
        self.tools = _offered_tools(ctx.agent)
        self.history: list[Answer] = []
        self._turn = _Turn()
        self._pending_row: str | None = None

    # ------------------------------------------------------------------ protocol

    def send(self, message: str, files: Sequence[Any] = ()) -> TurnReply:
        self._turn = _Turn()
        question = " ".join(message.lower().split())
        try:
            answer, text = self._answer(question)
        except _Stuck as stuck:
            answer, text = Answer(question, "unknown"), str(stuck)
        self.history.append(answer)
        return TurnReply(response=text, tool_invocations=list(self._turn.calls))

    def close(self) -> None:
        self.history.clear()

    # --------------------------------------------------------------------- tools

    def _call(self, name: str, **args: Any) -> Any:
        fn = self.tools.get(name)
        if fn is None:
            raise _Stuck(f"I would need the '{name}' tool, which this suite does not offer.")
        ctx_param = _takes_context(fn)
        started = time.perf_counter()
        try:
            result = fn(**({ctx_param: self.ctx} if ctx_param else {}), **args)
        except Exception as exc:
            self._turn.calls.append(
                ToolInvocation(
                    name=name,
                    args=args,
                    error=f"{type(exc).__name__}: {exc}",
                    duration_ms=(time.perf_counter() - started) * 1000,
                )
            )
            # the error is in the tool call; the reply carries no number a grader could misread
            raise _Stuck(f"I could not work this out: the {name} tool failed.") from None
        self._turn.calls.append(
            ToolInvocation(
                name=name,
                args=args,
                result=result,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
        )
        return result

    def _op(self, op: str, a: float, b: float) -> float:
        value = self._call(op, a=a, b=b)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Stuck(f"The {op} tool returned {value!r}, not a number.")
        return float(value)

    def _lookup(self, row: str, column: str) -> Answer:
        result = self._call("lookup", row=row, column=column)
        value = result.get("value") if isinstance(result, Mapping) else result
        if isinstance(value, int | float) and not isinstance(value, bool):
            number: float | str = float(value)
        else:
            number = str(value)
        return Answer(
            "", "lookup", number, str(result.get("row", row)), str(result.get("column", column))
        )

    # ------------------------------------------------------------------ reading

    def _years(self, question: str) -> list[str]:
        found = [(m.start(), m.group(1)) for m in _YEAR.finditer(question)]
        found += [(m.start(), "20" + m.group(1)) for m in _SHORT_DATE.finditer(question)]
        return list(dict.fromkeys(year for _, year in sorted(found)))

    def _literals(self, question: str) -> list[float]:
        stripped = _SHORT_DATE.sub(" ", _YEAR.sub(" ", question))
        return [float(m) for m in _LITERAL.findall(stripped)]

    def _scored_rows(self, question: str) -> list[tuple[float, float, str]]:
        """(score 0..1, matched weight, label) of every row sharing a word with the question."""
        asked = set(_words(question))
        scored = []
        for label in self.rows:
            words = set(_words(label))
            if not words:
                continue
            # weak words count 2/5 of a word; in fifths, so the sums are exact whatever order
            # the sets iterate in (str hashes, hence set order, change from run to run)
            weight = {w: 2 if w in _WEAK else 5 for w in words}
            shared = sum(weight[w] for w in words & asked)
            if shared:
                scored.append((shared / sum(weight.values()), shared / 5, label))
        scored.sort(key=lambda t: (-t[0], -t[1], len(t[2])))
        return scored

    def _best_row(self, question: str) -> tuple[str | None, float]:
        """The row whose words the question shares most, and how well (0..1)."""
        if len(self.rows) == 1:
            return self.rows[0], 1.0
        scored = self._scored_rows(question)
        return (scored[0][2], scored[0][0]) if scored else (None, 0.0)

    def _two_rows(self, question: str) -> tuple[str, str] | None:
        """Two rows the question names, in the order it names them (for "X to Y" ratios)."""
        good = [t for t in self._scored_rows(question) if t[0] >= 0.5][:2]
        if len(good) < 2:
            return None
        asked = normalise(question)

        def position(label: str) -> int:
            spots = [asked.find(w) for w in _words(label) if asked.find(w) >= 0]
            return min(spots) if spots else len(asked)

        first, second = sorted((good[0][2], good[1][2]), key=position)
        if "total" in normalise(first).split() and "total" not in normalise(second).split():
            first, second = second, first  # a part of a total: the total is the divisor
        return first, second

    def _column_for(self, year: str | None, question: str) -> str:
        asked = _words(question)
        if year is not None and not self._year_in_table(year):
            year = None  # the table covers one year (or other years): choose by words
        if year is None:
            if len(self.columns) == 1:
                return self.columns[0]
            scored = [(_overlap(asked, c), c) for c in self.columns]
            best = max(scored, key=lambda pair: pair[0])
            if best[0]:
                return best[1]
            last = next((a.column for a in reversed(self.history) if a.column), None)
            return last if last is not None else self.columns[0]
        with_year = [c for c in self.columns if year in years_in(c)]
        if len(with_year) > 1:
            with_year.sort(key=lambda c: -_overlap(asked, c))
        return with_year[0] if with_year else year

    def _year_in_table(self, year: str) -> bool:
        return any(year in years_in(label) for label in [*self.columns, *self.rows])

    def _year_is_row(self, year: str) -> bool:
        in_columns = any(year in years_in(c) for c in self.columns)
        return not in_columns and any(year in years_in(r) for r in self.rows)

    def _last_row(self) -> str | None:
        return next((a.row for a in reversed(self.history) if a.row), None)

    def _read(self, question: str, year: str | None, *, fresh_row: bool = True) -> Answer:
        """Look up the value the question names in ``year`` (or the current column)."""
        if year is not None and self._year_is_row(year):
            row_label = next(r for r in self.rows if year in years_in(r))
            column = self._column_for(None, question)
            return self._lookup(row_label, column)
        row, score = self._best_row(question) if fresh_row else (None, 0.0)
        last = self._last_row()
        if row is None or (score < 0.34 and last is not None):
            row = last
        if row is None:
            raise _Stuck("I cannot tell which line of the table this question is about.")
        return self._lookup(row, self._column_for(year, question))

    def _numbers(self) -> list[float]:
        return [a.value for a in self.history if isinstance(a.value, float)]

    def _last_two(self) -> tuple[float, float]:
        values = self._numbers()
        if len(values) < 2:
            raise _Stuck("I need two earlier values to compare, and I do not have them.")
        return values[-2], values[-1]

    def _two_reads(self, question: str, years: Sequence[str]) -> tuple[Answer, Answer]:
        """Values in the later and the earlier of two years."""
        later, earlier = sorted(years[:2], reverse=True)
        return self._read(question, later), self._read(question, earlier)

    def _two_numbers(self, question: str, years: Sequence[str]) -> tuple[float, float]:
        """The numbers in the first and the second year named, in that order."""
        first, second = self._read(question, years[0]), self._read(question, years[1])
        if not (isinstance(first.value, float) and isinstance(second.value, float)):
            raise _Stuck("Those cells are not numbers.")
        return first.value, second.value

    # ------------------------------------------------------------------ answering

    def _answer(self, q: str) -> tuple[Answer, str]:
        years = self._years(q)
        literals = self._literals(q)
        row, score = self._best_row(q)
        names_row = row is not None and score >= 0.5

        if re.match(r"(is|was|were|are|did|does)\b", q) and re.search(
            r"\b(greater|more|higher|larger|exceed|bigger)\b", q
        ):
            return self._greater(q, years)
        if re.search(
            r"percent(age)? (change|increase|decrease|growth|decline)|growth rate|rate of "
            r"(change|growth)|% change|change.* in percentage|percentual|"
            r"(change|difference|increase|decrease) (over|divided by|as a percentage of) "
            r"(the|this|that) (\d{4} )?(value|number|amount|total|price)",
            q,
        ):
            return self._percentage_change(q, years, names_row)
        if re.search(r"\baverage\b", q) and not (
            row is not None and "average" in row and names_row
        ):
            return self._average(q, years)
        if len(literals) >= 2 and not names_row:
            for pattern, op in _LITERAL_OPS:
                if re.search(pattern, q):
                    a, b = literals[0], literals[1]
                    value = self._op(op, a, b)
                    return Answer(q, "ratio", value, None, None, (a, b)), (
                        f"{op}({_fmt(a)}, {_fmt(b)}) = {_fmt(value)}"
                    )
        if literals and re.search(r"\b(times|multipl\w*)\b", q):
            return self._with_literal(q, "multiply", literals[-1], names_row, years)
        if literals and re.search(r"\b(divided by|over|divide)\b", q):
            return self._with_literal(q, "divide", literals[-1], names_row, years)
        if literals and re.search(r"\b(less|minus)\b", q):
            return self._with_literal(q, "subtract", literals[-1], names_row, years)
        if re.search(
            r"\b(in relation to|represent|portion|proportion|ratio|percentage of|percent of|"
            r"divided|quotient|as a percentage|fraction|share of)\b",
            q,
        ):
            if self._last_kind() == "change" and not names_row and len(years) < 2:
                return self._percentage_change(q, years, names_row)
            return self._ratio(q, years, names_row)
        if re.search(
            r"\b(difference|change|changed|increase|increased|decrease|decreased|decline|"
            r"variation|fluctuation|grow|grew|growth|rise|fall|drop|dropped)\b",
            q,
        ) or (len(years) >= 2 and re.search(r"\b(less|minus)\b", q)):
            return self._change(q, years, names_row)
        if re.search(
            r"\b(sum|combined|together|plus|added|in total)\b|\btotal (of|for) (the|these|those|both)",
            q,
        ):
            return self._sum(q, years, names_row)
        return self._value(q, years)

    def _last_kind(self) -> str | None:
        return self.history[-1].kind if self.history else None

    def _value(self, q: str, years: Sequence[str]) -> tuple[Answer, str]:
        anaphoric = bool(
            re.match(r"(and |so )?(what|how) about\b|and (in|for|as of)\b|and\b", q)
            or re.search(r"\b(it|that|this|they|those)\b", q)
        )
        _, score = self._best_row(q)
        fresh = not (anaphoric and score < 0.5)
        read = self._read(q, years[0] if years else None, fresh_row=fresh)
        read.question = q
        where = f"{read.row} ({read.column})" if read.row is not None else "the value"
        return read, f"{where}: {_fmt(read.value)}"

    def _operand_pair(
        self, q: str, years: Sequence[str], names_row: bool
    ) -> tuple[float, float, str]:
        """(a, b, how): the two values a change, sum or ratio works on."""
        if len(years) >= 2:
            later, earlier = self._two_reads(q, years)
            if isinstance(later.value, float) and isinstance(earlier.value, float):
                self._remember_row(later)
                return later.value, earlier.value, f"{later.column} vs {earlier.column}"
        if names_row and len(years) == 1 and self.history:
            read = self._read(q, years[0])
            last = self._numbers()
            if isinstance(read.value, float) and last:
                self._remember_row(read)
                return read.value, last[-1], ""
        if names_row and len(years) == 1 and len(self._numbers()) < 2:
            earlier_year = self._year_before(years[0], q)
            if earlier_year is not None:
                later, earlier = self._read(q, years[0]), self._read(q, earlier_year)
                if isinstance(later.value, float) and isinstance(earlier.value, float):
                    self._remember_row(later)
                    return later.value, earlier.value, ""
        a, b = self._last_two()
        return a, b, ""

    def _year_before(self, year: str, question: str = "") -> str | None:
        """The year a one-year change starts from: the year before, else the first column's.

        "over the five year period ended in 2012" starts from the first column.
        """
        known = sorted({y for c in self.columns for y in years_in(c)})
        previous = str(int(year) - 1)
        whole_period = re.search(r"\b(period|since|years? (period|ended))\b", question)
        if previous in known and not whole_period:
            return previous
        earlier = [y for y in known if y < year]
        return earlier[0] if earlier else None

    def _remember_row(self, read: Answer) -> None:
        self._pending_row = read.row

    def _change(self, q: str, years: Sequence[str], names_row: bool) -> tuple[Answer, str]:
        self._pending_row = None
        a, b, _ = self._operand_pair(q, years, names_row)
        value = self._op("subtract", a, b)
        answer = Answer(q, "change", value, self._pending_row, None, (a, b))
        return answer, f"{_fmt(a)} - {_fmt(b)} = {_fmt(value)}"

    def _percentage_change(
        self, q: str, years: Sequence[str], names_row: bool
    ) -> tuple[Answer, str]:
        change = next((a for a in reversed(self.history) if a.kind == "change"), None)
        if len(years) >= 2 or change is None or (names_row and years):
            self._pending_row = None
            a, b, _ = self._operand_pair(q, years, names_row)
            diff = self._op("subtract", a, b)
            base = b
        else:
            assert isinstance(change.value, float)
            diff, base = change.value, change.operands[1]
        value = self._op("divide", diff, base)
        answer = Answer(q, "ratio", value, None, None, (diff, base))
        return answer, f"{_fmt(diff)} / {_fmt(base)} = {_fmt(value)}"

    def _sum(self, q: str, years: Sequence[str], names_row: bool) -> tuple[Answer, str]:
        self._pending_row = None
        last = self.history[-1] if self.history else None
        if last is not None and last.kind == "sum" and years and isinstance(last.value, float):
            read = self._read(q, years[-1])
            if not isinstance(read.value, float):
                raise _Stuck("That cell is not a number.")
            value = self._op("add", last.value, read.value)
            operands = (*last.operands, read.value)
            return Answer(q, "sum", value, None, None, operands), (
                f"{_fmt(last.value)} + {_fmt(read.value)} = {_fmt(value)}"
            )
        a, b, _ = self._operand_pair(q, years, names_row)
        value = self._op("add", a, b)
        return Answer(q, "sum", value, self._pending_row, None, (a, b)), (
            f"{_fmt(a)} + {_fmt(b)} = {_fmt(value)}"
        )

    def _average(self, q: str, years: Sequence[str]) -> tuple[Answer, str]:
        last = self.history[-1] if self.history else None
        if (
            last is not None
            and last.kind == "sum"
            and isinstance(last.value, float)
            and len(years) < 2
        ):
            count = float(max(len(last.operands), 2))
            value = self._op("divide", last.value, count)
            return Answer(q, "ratio", value, None, None, (last.value, count)), (
                f"{_fmt(last.value)} / {_fmt(count)} = {_fmt(value)}"
            )
        if len(years) >= 2:
            reads = [self._read(q, y) for y in years]
            values = [r.value for r in reads if isinstance(r.value, float)]
            if len(values) != len(reads):
                raise _Stuck("Some of those cells are not numbers.")
            total = values[0]
            for v in values[1:]:
                total = self._op("add", total, v)
            value = self._op("divide", total, float(len(values)))
            return Answer(q, "ratio", value, reads[0].row, None, (total, float(len(values)))), (
                f"({' + '.join(_fmt(v) for v in values)}) / {len(values)} = {_fmt(value)}"
            )
        a, b = self._last_two()
        total = self._op("add", a, b)
        value = self._op("divide", total, 2.0)
        return Answer(q, "ratio", value, None, None, (total, 2.0)), (
            f"({_fmt(a)} + {_fmt(b)}) / 2 = {_fmt(value)}"
        )

    def _with_literal(
        self, q: str, op: str, literal: float, names_row: bool, years: Sequence[str]
    ) -> tuple[Answer, str]:
        numbers = self._numbers()
        if names_row or not numbers:
            read = self._read(q, years[0] if years else None)
            if not isinstance(read.value, float):
                raise _Stuck("That cell is not a number.")
            base, row = read.value, read.row
        else:
            base, row = numbers[-1], None
        value = self._op(op, base, literal)
        symbol = {"multiply": "*", "divide": "/", "subtract": "-"}[op]
        kind = "change" if op == "subtract" else "ratio"
        return Answer(q, kind, value, row, None, (base, literal)), (
            f"{_fmt(base)} {symbol} {_fmt(literal)} = {_fmt(value)}"
        )

    def _ratio(self, q: str, years: Sequence[str], names_row: bool) -> tuple[Answer, str]:
        numbers = self._numbers()
        pair = self._two_rows(q)
        anaphoric = re.search(r"\b(that|this|it|those|these|they)\b", q) is not None
        if pair is not None and not (anaphoric and numbers):
            column = self._column_for(years[0] if years else None, q)
            first, second = self._lookup(pair[0], column), self._lookup(pair[1], column)
            if not (isinstance(first.value, float) and isinstance(second.value, float)):
                raise _Stuck("Those cells are not numbers.")
            a, b = first.value, second.value
        elif names_row and numbers:
            read = self._read(q, years[0] if years else None)
            if isinstance(read.value, float) and read.value != numbers[-1]:
                a, b = numbers[-1], read.value
            else:
                a, b = self._last_two()
        elif len(years) >= 2:
            a, b = self._two_numbers(q, years)
        else:
            a, b = self._last_two()
        value = self._op("divide", a, b)
        return Answer(
            q, "ratio", value, None, None, (a, b)
        ), f"{_fmt(a)} / {_fmt(b)} = {_fmt(value)}"

    def _greater(self, q: str, years: Sequence[str]) -> tuple[Answer, str]:
        if len(years) >= 2:
            a, b = self._two_numbers(q, years)
        else:
            a, b = self._last_two()
        result = self._call("greater", a=a, b=b)
        verdict = "yes" if result is True else "no"
        return Answer(q, "yes-no", verdict), verdict


def factory(ctx: CaseContext) -> BaselineSession:
    """The ``python`` backend's factory: one session per test case."""
    return BaselineSession(ctx)
