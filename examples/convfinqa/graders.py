"""ConvFinQA graders: the program executor and ``turn_program_equivalence``.

User-land code: it imports only the public API of multiturn-eval, the way a
benchmark repository would.

**Programs.** A ConvFinQA turn program is a comma-separated list of steps
``op(arg, arg)`` (or a bare number: the turn only reads a value). ``op`` is
``add``, ``subtract``, ``multiply``, ``divide``, ``exp`` or ``greater`` (which
answers ``"yes"``/``"no"``), or a table reduction ``table_sum``,
``table_average``, ``table_max``, ``table_min`` over one row (``table_sum(row
label, none)``). An argument is a number (``1,234`` and ``$`` allowed), a
percent literal (``13.4%`` = 0.134), a constant (``const_100`` = 100,
``const_m1`` = -1) or ``#N``, the value of step N of the same program
(0-based). Steps are computed at full precision; the program's value is its
last step rounded to 5 decimals, which is exactly how the dataset's
``executed_answers`` were made (FinQA's ``eval_program``).

**The grader.** ``turn_program_equivalence`` executes the gold program kept in
the turn's ``turn_program`` key and checks that the agent's tool calls
reproduce the value of every step: a step counts when a call of this turn
returned its value (calls of the same operation are preferred), or, failing
that, when an earlier turn of the session produced it (a tool result, or a
number in that turn's reply) -- ConvFinQA programs repeat the earlier turns'
steps, and an agent should reuse those results rather than recompute them.
Values match within a relative 1e-3 (an agent may pass a rounded intermediate
value on), and ``yes``/``no`` match ``True``/``False``. A turn that only reads
a number needs a call that returned it, unless the number is not in the table
(it comes from the document's text, and there is no tool step to check).

Score: the fraction of steps reproduced; passed: all of them. ``details``
list every expected step beside the call that matched it (or the closest
one), and every call the agent made this turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multiturn_eval import GraderContext, GraderResult

from .tools import numeric_text

__all__ = [
    "ARITHMETIC_OPS",
    "COMMUTATIVE_OPS",
    "TABLE_OPS",
    "ProgramError",
    "ProgramResult",
    "Step",
    "execute_program",
    "format_value",
    "parse_number",
    "turn_program_equivalence",
    "values_match",
]

ARITHMETIC_OPS = frozenset({"add", "subtract", "multiply", "divide", "exp", "greater"})
TABLE_OPS = frozenset({"table_sum", "table_average", "table_max", "table_min"})
COMMUTATIVE_OPS = frozenset({"add", "multiply"})

#: how close a tool result must be to a step's value to reproduce it
STEP_RELATIVE_TOLERANCE = 1e-3
STEP_ABSOLUTE_TOLERANCE = 1e-6

Value = float | str
"""A step's value: a number, or "yes"/"no" for ``greater``."""


class ProgramError(ValueError):
    """A turn program that cannot be parsed or executed."""


@dataclass(frozen=True)
class Step:
    """One executed step of a program."""

    index: int
    op: str
    args: tuple[str, ...]
    """The arguments as written (``"#0"``, ``"const_100"``, ``"13.4%"``, a row label)."""
    operands: tuple[Value, ...]
    """The arguments' values (a table reduction's operand is the row label)."""
    refs: tuple[int | None, ...]
    """For each argument, the step it refers to (``#N``), else None."""
    value: Value

    @property
    def expression(self) -> str:
        return f"{self.op}({', '.join(self.args)})"


@dataclass(frozen=True)
class ProgramResult:
    program: str
    steps: tuple[Step, ...]
    value: Value
    """The last step's value (or the literal's), rounded to 5 decimals."""


# ------------------------------------------------------------------------- parsing

_OP = re.compile(r"\s*([A-Za-z_]+)\s*\(")


def parse_number(token: str) -> float:
    """A program argument as a number: ``1,234``, ``$5``, ``13.4%``, ``const_100``, ``const_m1``."""
    text = token.strip()
    if text.startswith("const_"):
        body = text[len("const_") :]
        negative = body.startswith("m")
        try:
            number = float(body[1:] if negative else body)
        except ValueError:
            raise ProgramError(f"unknown constant {token!r}") from None
        return -number if negative else number
    try:
        number = numeric_text(text)
    except ValueError:
        raise ProgramError(f"{token!r} is not a number, a constant or a step reference") from None
    if not math.isfinite(number):
        raise ProgramError(f"{token!r} is not a finite number")
    return number


def _split_steps(program: str) -> list[tuple[str, str]]:
    """``"subtract(a, b), divide(#0, b)"`` -> ``[("subtract", "a, b"), ("divide", "#0, b")]``.

    Parentheses inside an argument (row labels such as ``"net sales ( a )"``)
    are balanced, so a step ends at its own closing parenthesis.
    """
    steps: list[tuple[str, str]] = []
    pos = 0
    while pos < len(program):
        match = _OP.match(program, pos)
        if match is None:
            raise ProgramError(f"expected 'op(' at character {pos + 1} of {program!r}")
        depth, i = 1, match.end()
        while i < len(program) and depth:
            depth += {"(": 1, ")": -1}.get(program[i], 0)
            i += 1
        if depth:
            raise ProgramError(f"unbalanced parentheses in {program!r}")
        steps.append((match.group(1), program[match.end() : i - 1]))
        rest = program[i:].lstrip()
        if rest.startswith(","):
            rest = rest[1:]
        elif rest:
            raise ProgramError(f"expected ',' between steps at {rest[:20]!r} in {program!r}")
        pos = len(program) - len(rest)
    return steps


def _row_numbers(
    row: str, table: Mapping[str, Mapping[str, Any]] | None
) -> tuple[str, list[float]]:
    if not table:
        raise ProgramError(f"a table operation on {row!r} needs the document's table")
    from .tools import match_label, row_labels  # the same forgiving row matching as the tools

    try:
        label = match_label(row, row_labels(table), "row")
    except LookupError as exc:
        raise ProgramError(str(exc)) from None
    numbers: list[float] = []
    for cells in table.values():
        if label in cells:
            cell = cells[label]
            if isinstance(cell, int | float) and not isinstance(cell, bool):
                numbers.append(float(cell))
            else:
                try:
                    numbers.append(parse_number(str(cell).split("(")[0]))
                except ProgramError:
                    raise ProgramError(f"row {label!r} has a non-numeric cell {cell!r}") from None
    if not numbers:
        raise ProgramError(f"row {label!r} has no cells")
    return label, numbers


def _arithmetic(op: str, a: float, b: float) -> Value:
    if op == "add":
        return a + b
    if op == "subtract":
        return a - b
    if op == "multiply":
        return a * b
    if op == "divide":
        if b == 0:
            raise ProgramError("division by zero")
        return a / b
    if op == "exp":
        try:
            result = a**b
        except (OverflowError, ZeroDivisionError) as exc:
            raise ProgramError(f"exp({a}, {b}): {exc}") from None
        if isinstance(result, complex):
            raise ProgramError(f"exp({a}, {b}) has no real value")
        return float(result)
    return "yes" if a > b else "no"  # greater


def execute_program(
    program: str, table: Mapping[str, Mapping[str, Any]] | None = None
) -> ProgramResult:
    """Run a turn program; ``table`` (``{column: {row: value}}``) is needed by table ops only."""
    text = str(program).strip()
    if not text:
        raise ProgramError("the program is empty")
    if "(" not in text:  # the turn only reads a number
        return ProgramResult(text, (), round(parse_number(text), 5))
    steps: list[Step] = []
    for index, (op, arg_text) in enumerate(_split_steps(text)):
        if op in TABLE_OPS:
            row, _, rest = arg_text.rpartition(",")
            if not row or rest.strip().lower() not in ("none", ""):
                row = arg_text
            label, numbers = _row_numbers(row.strip(), table)
            reduced = {
                "table_sum": math.fsum(numbers),
                "table_average": math.fsum(numbers) / len(numbers),
                "table_max": max(numbers),
                "table_min": min(numbers),
            }[op]
            steps.append(Step(index, op, (row.strip(),), (label,), (None,), reduced))
            continue
        if op not in ARITHMETIC_OPS:
            raise ProgramError(f"unknown operation {op!r} in step #{index} of {text!r}")
        args = tuple(a.strip() for a in arg_text.split(","))
        if len(args) != 2:
            raise ProgramError(f"{op} takes 2 arguments, got {len(args)} in {op}({arg_text})")
        operands: list[float] = []
        refs: list[int | None] = []
        for arg in args:
            if arg.startswith("#"):
                try:
                    ref = int(arg[1:])
                except ValueError:
                    raise ProgramError(f"bad step reference {arg!r}") from None
                if not 0 <= ref < index:
                    raise ProgramError(
                        f"step #{index} refers to {arg}, which is not an earlier step"
                    )
                earlier = steps[ref].value
                if isinstance(earlier, str):
                    raise ProgramError(
                        f"step #{index} uses {arg} = {earlier!r}, which is not a number"
                    )
                operands.append(earlier)
                refs.append(ref)
            else:
                operands.append(parse_number(arg))
                refs.append(None)
        value = _arithmetic(op, operands[0], operands[1])
        steps.append(Step(index, op, args, tuple(operands), tuple(refs), value))
    last = steps[-1].value
    return ProgramResult(text, tuple(steps), last if isinstance(last, str) else round(last, 5))


# ------------------------------------------------------------------------ matching


def format_value(value: Any) -> str:
    """Numbers without binary noise or a trailing ``.0``; anything else as repr."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        number = float(value)
        if number.is_integer() and abs(number) < 1e15:
            return str(int(number))
        return f"{number:.10g}"
    return str(value) if isinstance(value, str) else repr(value)


def _show(value: Any) -> str:
    """A value as reasons show it: numbers to 5 decimals, like the dataset's answers."""
    if isinstance(value, float):
        return format_value(round(value, 5))
    return format_value(value)


def _as_value(result: Any) -> Value | None:
    """What a tool result stands for: a number, "yes"/"no", or None."""
    if isinstance(result, bool):
        return "yes" if result else "no"
    if isinstance(result, int | float):
        return float(result) if math.isfinite(float(result)) else None
    if isinstance(result, Mapping) and "value" in result:
        return _as_value(result["value"])
    if isinstance(result, str):
        text = result.strip().lower()
        if text in ("yes", "true"):
            return "yes"
        if text in ("no", "false"):
            return "no"
        try:
            return parse_number(text)
        except ProgramError:
            return None
    return None


def values_match(actual: Value | None, expected: Value) -> bool:
    """Whether ``actual`` reproduces ``expected`` (relative 1e-3; yes/no exactly)."""
    if actual is None:
        return False
    if isinstance(expected, str) or isinstance(actual, str):
        return actual == expected
    allowed = max(STEP_ABSOLUTE_TOLERANCE, STEP_RELATIVE_TOLERANCE * abs(expected))
    return abs(actual - expected) <= allowed


@dataclass(frozen=True)
class _Produced:
    """A value the agent produced: a tool call's result or a number in a reply."""

    where: str
    name: str
    text: str
    value: Value


def _call_text(name: str, args: Mapping[str, Any], result: Any, error: str | None) -> str:
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
    if error is not None:
        return f"{name}({shown}) -> error: {_clip(error, 120)}"
    value = _as_value(result)
    return f"{name}({shown}) -> {_show(value) if value is not None else _short(result)}"


def _short(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _show(value)
    return _clip(repr(value), 60)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _calls(invocations: Iterable[Any], label: str) -> list[_Produced]:
    produced = []
    for number, call in enumerate(invocations, start=1):
        value = _as_value(call.result) if call.error is None else None
        text = _call_text(call.name, call.args, call.result, call.error)
        if value is not None:
            produced.append(_Produced(f"{label}call #{number}", call.name, text, value))
    return produced


_REPLY_NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\$?\d[\d,]*(?:\.\d+)?\s?%?")


def _reply_numbers(reply: str | None, label: str) -> list[_Produced]:
    produced = []
    for match in _REPLY_NUMBER.finditer(reply or ""):
        text = match.group(0).replace("\u2212", "-").replace("$", "")
        try:
            number = parse_number(text.rstrip("%").strip())
        except ProgramError:
            continue
        values = [number / 100, number] if text.rstrip().endswith("%") else [number]
        for value in values:
            produced.append(_Produced(f"{label}reply", "reply", match.group(0).strip(), value))
    return produced


def _find(
    expected: Value, op: str | None, pools: Sequence[list[_Produced]]
) -> tuple[_Produced | None, int]:
    """The first produced value matching ``expected`` (same op first), and its pool index."""
    for i, pool in enumerate(pools):
        matching = [p for p in pool if values_match(p.value, expected)]
        if matching:
            same_op = [p for p in matching if op and op in p.name]
            return (same_op or matching)[0], i
    return None, -1


def _closest(expected: Value, op: str | None, pool: Sequence[_Produced]) -> _Produced | None:
    if isinstance(expected, str):
        candidates = [p for p in pool if op and op in p.name]
        return candidates[0] if candidates else None
    numeric = [p for p in pool if not isinstance(p.value, str)]
    same_op = [p for p in numeric if op and op in p.name] or numeric
    if not same_op:
        return None
    return min(same_op, key=lambda p: abs(float(p.value) - expected))


def _table_cells(table: Any) -> list[tuple[str, str, float]]:
    cells = []
    if isinstance(table, Mapping):
        for column, rows in table.items():
            if isinstance(rows, Mapping):
                for row, cell in rows.items():
                    if isinstance(cell, int | float) and not isinstance(cell, bool):
                        cells.append((str(row), str(column), float(cell)))
    return cells


def turn_program_equivalence(ctx: GraderContext) -> GraderResult:
    """Do the agent's tool calls reproduce every step of the turn's gold program?

    Reads ``turn_program`` from the turn (``turn_config``) and the table from
    the test case's ``context``; see the module docstring for the rules.
    """
    program = ctx.turn_config.get("turn_program")
    if program is None or isinstance(program, bool) or not isinstance(program, str | int | float):
        raise ValueError("this turn has no 'turn_program' key (the gold program to compare with)")
    table = ctx.case_context.get("table")
    gold = execute_program(str(program), table if isinstance(table, Mapping) else None)

    this_turn = _calls(ctx.tool_invocations, "")
    earlier: list[_Produced] = []
    for previous in sorted(ctx.previous_turns, key=lambda p: -p.turn_index):
        label = f"turn {previous.turn_index + 1} "
        earlier.extend(_calls(previous.tool_invocations, label))
        earlier.extend(_reply_numbers(previous.response, label))
    pools = [this_turn, earlier]
    actual_calls = [
        f"call #{n}: {_call_text(c.name, c.args, c.result, c.error)}"
        for n, c in enumerate(ctx.tool_invocations, start=1)
    ]
    details: dict[str, Any] = {
        "program": gold.program,
        "expected_value": gold.value,
        "actual_calls": actual_calls,
    }

    if not gold.steps:
        return _literal_verdict(gold, pools, table, details)

    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    reused: list[str] = []
    for step in gold.steps:
        row: dict[str, Any] = {
            "step": f"#{step.index}",
            "expression": step.expression,
            "operands": [_show(v) for v in step.operands],
            "expected": _show(step.value),
        }
        found, pool = _find(step.value, step.op, pools)
        if found is not None:
            row["status"] = "reproduced" if pool == 0 else "reused"
            row["actual"] = f"{found.where}: {found.text}"
            if pool == 1:
                reused.append(f"#{step.index} from {found.where}")
        else:
            row["status"] = "missing"
            closest = _closest(step.value, step.op, this_turn)
            row["actual"] = None
            row["closest"] = f"{closest.where}: {closest.text}" if closest else None
            hint = f": no tool call returned it (closest: {closest.text})" if closest else ""
            missing.append(
                f"#{step.index} {step.op}({', '.join(_show(v) for v in step.operands)}) "
                f"= {_show(step.value)}{hint}"
            )
        rows.append(row)
    details["steps"] = rows
    done = len(rows) - len(missing)
    score = done / len(rows)
    if not missing:
        reason = (
            f"all {len(rows)} program steps reproduced"
            if len(rows) > 1
            else ("the program's one step reproduced")
        )
        if reused:
            reason += f" (reused {', '.join(reused)})"
        return GraderResult(score=1.0, passed=True, reason=reason, details=details)
    if this_turn:
        reason = f"{done} of {len(rows)} program steps reproduced; missing " + "; ".join(missing)
    else:
        made = "made no tool calls" if not ctx.tool_invocations else "got no result from its calls"
        reason = (
            f"{done} of {len(rows)} program steps reproduced: the agent {made} this turn; "
            "missing " + "; ".join(missing)
        )
    return GraderResult(score=score, passed=False, reason=reason, details=details)


def _literal_verdict(
    gold: ProgramResult,
    pools: Sequence[list[_Produced]],
    table: Any,
    details: dict[str, Any],
) -> GraderResult:
    value = gold.value
    shown = _show(value)
    found, pool = _find(value, None, pools)
    cells = [c for c in _table_cells(table) if values_match(c[2], value)]
    details["steps"] = []
    if found is not None:
        how = "read" if pool == 0 else "reused"
        details["steps"] = [
            {
                "step": "value",
                "expected": shown,
                "status": how,
                "actual": f"{found.where}: {found.text}",
            }
        ]
        return GraderResult(
            score=1.0,
            passed=True,
            reason=f"{how} {shown} ({found.where}: {found.text})",
            details=details,
        )
    if not cells:
        return GraderResult(
            score=1.0,
            passed=True,
            reason=f"{shown} is not in the table (it comes from the document's text): no tool step to check",
            details=details,
        )
    row, column, _ = cells[0]
    details["steps"] = [
        {
            "step": "value",
            "expected": shown,
            "status": "missing",
            "table_cell": {"row": row, "column": column},
        }
    ]
    return GraderResult(
        score=0.0,
        passed=False,
        reason=(
            f"expected a tool call returning {shown} (table row {row!r}, column {column!r}); "
            + (
                f"calls this turn: {', '.join(details['actual_calls'])}"
                if details["actual_calls"]
                else "the agent made no tool calls this turn"
            )
        ),
        details=details,
    )
