"""An agent's reply checked where it enters the runner: every field typed, every value JSON-safe.

:func:`checked_reply` checks the fields of a :class:`~multiturn_eval.types.TurnReply`
that must have a type (``response`` text, ``token_usage``, ``cost_usd``,
``tool_invocations``, ``warnings``): a wrong type there is a
:class:`~multiturn_eval.errors.BackendError` on the turn ("agent reply is
malformed: ..."); values JSON cannot hold are replaced
(:func:`multiturn_eval.sanitize.json_safe`) with a warning on the turn.

Above :mod:`multiturn_eval.types` on the ladder ``errors``, ``sanitize`` ->
``types`` -> ``results``: it needs the reply's types, which need ``sanitize``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from .errors import BackendError
from .sanitize import Replaced, clean_text, describe, has_surrogates, json_safe, safe_repr
from .types import TokenUsage, ToolInvocation, TurnReply


def _malformed(where: str, why: str) -> BackendError:
    return BackendError(f"agent reply is malformed: {where}: {why}")


def _cost(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _malformed(
            "cost_usd", f"must be a number of US dollars >= 0 or None, got {safe_repr(value)}"
        )
    try:
        cost = float(value)
    except OverflowError:
        cost = math.inf
    if not math.isfinite(cost) or cost < 0:
        raise _malformed("cost_usd", f"must be a finite number >= 0, got {safe_repr(value)}")
    return cost


def _usage(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, TokenUsage):
        fields = value.__dict__
        if all(
            type(fields.get(name)) is int and fields[name] >= 0 for name in TokenUsage.model_fields
        ):
            return value
        value = dict(fields)  # built with model_construct and bad values: validate them
    if not isinstance(value, Mapping):
        raise _malformed(
            "token_usage", f"expected TokenUsage or a mapping, got {type(value).__name__}"
        )
    try:
        return TokenUsage.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _malformed("token_usage" + (f".{loc}" if loc else ""), first["msg"]) from None
    except Exception as exc:
        raise _malformed("token_usage", f"{type(exc).__name__}: {exc}") from None


def _invocations(value: Any, problems: list[Replaced]) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise _malformed(
            "tool_invocations", f"expected a list of tool invocations, got {type(value).__name__}"
        )
    out: list[ToolInvocation] = []
    for i, item in enumerate(value):
        where = f"tool_invocations[{i}]"
        if isinstance(item, ToolInvocation):
            problems.extend(replaced_values(item, where))
            args, args_problems = json_safe(item.args, f"{where}.args")
            result, result_problems = json_safe(item.result, f"{where}.result")
            if args_problems or result_problems or type(item.name) is not str:
                problems.extend(args_problems + result_problems)
                try:
                    item = ToolInvocation.model_validate(
                        {**item.__dict__, "args": args, "result": result}
                    )
                except ValidationError as exc:
                    first = exc.errors(include_url=False)[0]
                    loc = ".".join(str(p) for p in first["loc"])
                    raise _malformed(f"{where}.{loc}", first["msg"]) from None
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise _malformed(
                where, f"expected ToolInvocation or a mapping, got {type(item).__name__}"
            )
        try:
            inv = ToolInvocation.model_validate(dict(item))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise _malformed(f"{where}.{loc}" if loc else where, first["msg"]) from None
        problems.extend(replaced_values(inv, where))
        out.append(inv)
    return tuple(out)


def replaced_values(invocation: Any, where: str) -> list[Replaced]:
    """What ToolInvocation's own validation replaced (paths relative to ``where``).

    Taken once: a reply checked twice (by its backend and by the runner) warns once.
    """
    private = getattr(invocation, "__pydantic_private__", None) or {}
    found: list[Replaced] = private.get("_replaced") or []
    if found:
        private["_replaced"] = []
    return [
        Replaced(where + p.where.removeprefix("tool_invocation"), p.what, p.stand_in) for p in found
    ]


def _warnings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes | bytearray):
        value = (value if isinstance(value, str) else safe_repr(value),)
    elif not isinstance(value, Iterable):
        raise _malformed("warnings", f"expected a list of text, got {type(value).__name__}")
    out = []
    for item in value:
        text = (
            item
            if type(item) is str
            else safe_repr(item)
            if not isinstance(item, str)
            else str.__str__(item)
        )
        out.append(clean_text(text))
    return tuple(out)


def checked_reply(reply: Any) -> Any:
    """``reply`` (a TurnReply) with every field checked and made JSON/UTF-8 safe.

    Raises :class:`BackendError` for a field of the wrong type; values that JSON
    cannot hold are replaced and listed in a warning on the turn.
    """
    if getattr(reply, "_checked", False) is True:  # checked already (by its backend)
        return reply
    response = reply.response
    if not isinstance(response, str):
        raise BackendError(f"agent response is {type(response).__name__}, not str")
    problems: list[Replaced] = []
    if type(response) is not str:
        response = str.__str__(response)
    if has_surrogates(response):
        response = clean_text(response)
        problems.append(Replaced("response", "text with lone surrogates", "'?' in their place"))
    invocations = _invocations(reply.tool_invocations, problems)
    usage = _usage(reply.token_usage)
    cost = _cost(reply.cost_usd)
    warnings = _warnings(reply.warnings)
    if problems:
        warnings = (
            *warnings,
            "values JSON cannot hold were replaced in the agent's reply: " + describe(problems),
        )
    checked = TurnReply(
        response=response,
        tool_invocations=invocations,
        token_usage=usage,
        warnings=warnings,
        cost_usd=cost,
    )
    checked._checked = True  # type: ignore[attr-defined]
    return checked
