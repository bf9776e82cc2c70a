"""What one tool call gave: the text the model reads, the invocation the reports record.

The model-facing half of a call, shared by every tool source (Python functions in
:mod:`.definition`, MCP servers in :mod:`.mcp_servers`) and by the
:class:`~multiturn_eval.tools.ToolSet` that caps results: it imports neither, so the
tool kinds and the set can both use it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..errors import ToolArgumentError, UserCodeAbort
from ..types import ToolInvocation

_QUOTE = 80


def quote_value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _QUOTE else text[: _QUOTE - 1] + "…"


def jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value, fallback=repr)
    except (PydanticSerializationError, ValueError, TypeError):
        return repr(value)


def content_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(jsonable(value), ensure_ascii=False)


def error_text(exc: BaseException) -> str:
    """``ExceptionType: message`` (just the type when there is no message; an abort in words)."""
    if isinstance(exc, UserCodeAbort):
        return str(exc)
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """One tool call's result: what the model is told, and what the report records."""

    invocation: ToolInvocation
    content: str
    """Text answered to the model: the result (a string as is, anything else as JSON),
    or ``"Error: ExceptionType: message"``."""
    is_error: bool


def parse_arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """The model's arguments as a mapping (JSON text parsed); :class:`ToolArgumentError` if not."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"arguments are not valid JSON ({exc.msg}): {quote_value(arguments)}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(
            f"arguments must be a JSON object, got {type(arguments).__name__}: {quote_value(arguments)}"
        )
    return dict(arguments)


def failed_from(name: str, args: dict[str, Any], exc: BaseException, started: float) -> ToolOutcome:
    return failed_outcome(name, args, error_text(exc), started)


def failed_outcome(
    name: str, args: Mapping[str, Any], error: str, started: float, *, server: str | None = None
) -> ToolOutcome:
    """A call that failed with ``error``: the model reads ``Error: <error>``."""
    return ToolOutcome(
        invocation=ToolInvocation.model_construct(
            name=name,
            args=jsonable(dict(args)),
            result=None,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            server=server,
        ),
        content=f"Error: {error}",
        is_error=True,
    )


# ------------------------------------------------------------------------------ the cap

#: ``max_tool_result_chars`` when the agent block gives none
DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"… [{len(text) - limit:,} of {len(text):,} characters cut: "
        f"max_tool_result_chars is {limit:,}]"
    )


def capped(outcome: ToolOutcome, limit: int | None) -> ToolOutcome:
    """``outcome`` with its text cut to ``limit`` characters, for the model and the reports.

    The model reads the cut text; the invocation records it as its ``result`` (a
    result that was not text becomes the cut JSON text) or its ``error``.
    """
    if limit is None or len(outcome.content) <= limit:
        return outcome
    invocation = outcome.invocation
    if outcome.is_error and invocation.error is not None:
        error = cut_text(invocation.error, limit)
        update: dict[str, Any] = {"error": error}
        content = f"Error: {error}"
    else:
        content = cut_text(outcome.content, limit)
        update = {"result": content}
    return ToolOutcome(
        invocation=invocation.model_copy(update=update),
        content=content,
        is_error=outcome.is_error,
    )
