"""Python function tools used by the tool and model-backend tests (``function: tests.tool_funcs:...``).

Shared by the anthropic and semantic-kernel backend tests, so both backends
run the very same tools. ``CALLS`` records every call (name, arguments,
thread), ``reset()`` clears it.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from multiturn_eval import CaseContext

CALLS: list[tuple[str, dict[str, object], str]] = []


def reset() -> None:
    CALLS.clear()


def _record(name: str, **args: object) -> None:
    CALLS.append((name, args, threading.current_thread().name))


def subtract(a: float, b: float) -> float:
    """Subtract b from a.

    Args:
        a: The number to subtract from.
        b: The number to subtract.
    """
    _record("subtract", a=a, b=b)
    return a - b


def divide(a: float, b: float) -> float:
    """Divide a by b.

    :param a: the dividend
    :param b: the divisor, not zero
    """
    _record("divide", a=a, b=b)
    return a / b  # ZeroDivisionError for b == 0: an error result for the model


async def lookup(key: str, ctx: CaseContext) -> str:
    """Look a value up in the test case's table.

    Parameters
    ----------
    key : str
        The row to look up,
        e.g. "revenue".
    """
    _record("lookup", key=key)
    await asyncio.sleep(0)
    table = ctx.context.get("table", {})
    if key not in table:
        raise KeyError(f"no row {key!r}")
    return str(table[key])


class Unit(enum.Enum):
    USD = "usd"
    EUR = "eur"


class Period(BaseModel):
    start: int
    end: int = 0


def report(
    metric: Literal["revenue", "cost"],
    unit: Unit,
    period: Period,
    years: list[int],
    note: Annotated[str, Field(description="A free-text note.")] = "",
    scale: float | None = None,
    detailed: bool = False,
) -> dict[str, object]:
    """Build a small report.

    Args:
        metric: Which metric.
        unit: Currency.
        period: The period covered.
        years: Years to include.
        note: Ignored: Field(description) wins.
        scale: Optional multiplier.
        detailed (bool): Add details.

    Returns:
        A mapping.
    """
    _record("report", metric=metric, unit=unit, period=period, years=years)
    return {
        "metric": metric,
        "unit": unit.value,
        "span": period.end - period.start,
        "years": years,
        "scale": scale,
        "detailed": detailed,
    }


def where() -> str:
    """Name the thread the tool runs in."""
    return threading.current_thread().name


def no_doc(x: int) -> int:
    return x


# ------------------------------------------------------------------ bad definitions


def untyped(x):  # type: ignore[no-untyped-def]
    """No annotation."""
    return x


def star_args(*values: int) -> int:
    """*args cannot be a tool."""
    return sum(values)


def opaque(conn: threading.Lock) -> None:
    """An annotation with no JSON shape."""
