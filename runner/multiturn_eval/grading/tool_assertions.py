"""Tool assertions beyond "was called" (issue 11 part 2); pure functions.

Per turn (``expected_tools`` with ``forbidden_tools``, ``tool_order``,
``args_mode``, ``max_count``) and per test case over every call of the
conversation (``conversation_tools:``). Names match by substring, as
``expected_tools`` always did (case-sensitive: ``refund`` matches
``issue_refund``).

- ``max_count: N`` beside ``count``: at most N *matching* calls (a call whose
  name contains the expected name and whose arguments satisfy ``args``);
  ``count: 1, max_count: 1`` is "exactly once".
- ``args_mode: exact``: a matching call has no arguments beyond the asserted
  ones (``partial``, the default, ignores them). It applies to expected tools
  that give ``args:`` (``args: {}`` + exact = called with no arguments); a tool
  named without ``args`` asserts nothing about arguments in either mode. Set it
  per expected tool, or per turn / in ``conversation_tools`` as the default of
  its expected tools (the expected tool's own setting wins).
- ``tool_order: in_order``: the expected tools must match calls in the order
  they are listed, other calls allowed in between (``count: N`` takes N calls
  at that point of the sequence). Matching is greedy, earliest call first,
  which finds an order whenever one exists. ``any`` (default): no order.
- ``forbidden_tools``: any call whose name contains one fails, naming the
  call(s).

Every failure is one :class:`ArgMatchDetail` with a reason in words (expected
vs actual, naming calls by number, ``call #3``; at conversation level
``call #3 (turn 2)``). A forbidden tool's detail is labelled ``not <name>``.
A turn that uses none of these keys is checked by
:func:`~.matchers.check_tools` exactly as before (same words).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..results import ArgMatchDetail, MetricResult
from ..suite import ConversationTools, ExpectedTool, Turn
from ..types import ConversationContext, ToolInvocation
from .conversation import mark_conversation
from .matchers import RegexBudget, arg_mismatches, check_tools, clip

CONVERSATION_TOOLS = "conversation_tools"
"""The metric name of a test case's ``conversation_tools`` result."""
MAX_NAMED_CALLS = 5


@dataclass(frozen=True)
class Scope:
    """Where the calls come from, for the words of a reason."""

    where: str
    """``in this turn`` / ``in the conversation``"""
    label: Callable[[int], str]
    """0-based index into the calls -> ``call #3`` / ``call #3 (turn 2)``"""


def _turn_label(i: int) -> str:
    return f"call #{i + 1}"


TURN = Scope("in this turn", _turn_label)


def call_brief(call: ToolInvocation) -> str:
    """``delete_account(user_id='u1')`` (clipped)."""
    args = ", ".join(f"{k}={clip(repr(v), 40)}" for k, v in call.args.items())
    return clip(f"{call.name}({args})", 120)


def _labels(indices: Sequence[int], scope: Scope) -> str:
    shown = ", ".join(scope.label(i) for i in indices[:MAX_NAMED_CALLS])
    more = len(indices) - MAX_NAMED_CALLS
    return shown + (f" and {more} more" if more > 0 else "")


def _calls_word(n: int) -> str:
    return f"{n} matching call" + ("" if n == 1 else "s")


def exact_mismatches(expected: ExpectedTool, call: ToolInvocation) -> list[str]:
    """With args_mode exact: the call's arguments the expected tool does not assert."""
    extra = [k for k in call.args if k not in (expected.args or {})]
    if not extra:
        return []
    names = ", ".join(f"'{k}'" for k in extra)
    return [f"unexpected arg{'s' if len(extra) > 1 else ''} {names} (args_mode: exact)"]


@dataclass
class _Matched:
    named: list[int]
    matching: list[int]
    closest: tuple[int, list[str]] | None


def _match(
    expected: ExpectedTool,
    calls: Sequence[ToolInvocation],
    exact: bool,
    budget: RegexBudget,
) -> _Matched:
    named = [i for i, c in enumerate(calls) if expected.name in c.name]
    matching: list[int] = []
    closest: tuple[int, list[str]] | None = None
    for i in named:
        problems = arg_mismatches(expected, calls[i], budget)
        if exact and expected.args is not None:
            problems += exact_mismatches(expected, calls[i])
        if not problems:
            matching.append(i)
        elif closest is None or len(problems) < len(closest[1]):
            closest = (i, problems)
    return _Matched(named, matching, closest)


def _unordered_reason(
    expected: ExpectedTool, calls: Sequence[ToolInvocation], m: _Matched, scope: Scope
) -> str | None:
    label = expected.name
    if not m.named:
        made = ", ".join(sorted({c.name for c in calls})) or "none"
        return f"{label}: not called {scope.where} (tools called: {made})"
    if len(m.matching) < expected.count:
        if expected.count > 1:
            reason = (
                f"{label}: expected at least {expected.count} matching calls {scope.where}, "
                f"got {len(m.matching)}"
            )
            if m.closest is not None:
                reason += f"; closest other {scope.label(m.closest[0])}: {'; '.join(m.closest[1])}"
            return reason
        assert m.closest is not None
        return f"{label}: no call matched; closest {scope.label(m.closest[0])}: {'; '.join(m.closest[1])}"
    if expected.max_count is not None and len(m.matching) > expected.max_count:
        exactly = expected.max_count == expected.count
        want = (
            f"exactly {_calls_word(expected.count)}"
            if exactly
            else f"at most {_calls_word(expected.max_count)}"
        )
        return (
            f"{label}: expected {want} {scope.where}, got {len(m.matching)}: "
            f"{_labels(m.matching, scope)}"
        )
    return None


def assert_tools(
    expected: Sequence[ExpectedTool],
    forbidden: Sequence[str],
    order: str,
    args_mode: str,
    calls: Sequence[ToolInvocation],
    scope: Scope,
    budget: RegexBudget | None = None,
) -> list[ArgMatchDetail]:
    """One detail per expected tool (in order), then one per forbidden name."""
    budget = budget or RegexBudget()
    details: list[ArgMatchDetail] = []
    cursor = -1  # in_order: the call the previous expected tool ended on
    previous: str | None = None
    for tool in expected:
        exact = (tool.args_mode or args_mode) == "exact"
        m = _match(tool, calls, exact, budget)
        reason = _unordered_reason(tool, calls, m, scope)
        first = m.matching[0] if m.matching else None
        if reason is None and order == "in_order":
            after = [i for i in m.matching if i > cursor]
            if len(after) < tool.count:
                since = f"after {previous} ({scope.label(cursor)})" if previous is not None else ""
                need = f"{tool.count} matching calls" if tool.count > 1 else "a matching call"
                reason = (
                    f"{tool.name}: out of order (tool_order: in_order): expected {need} "
                    f"{since}, but its matching calls are {_labels(m.matching, scope)}"
                )
            else:
                first = after[0]
                cursor = after[tool.count - 1]
                previous = tool.name
        details.append(
            ArgMatchDetail(
                expected_tool=tool.name,
                matched_call_index=first,
                reason=reason,
            )
        )
    for name in forbidden:
        hits = [i for i, c in enumerate(calls) if name in c.name]
        reason = None
        if hits:
            named = "; ".join(f"{scope.label(i)} {call_brief(calls[i])}" for i in hits[:3])
            more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
            reason = (
                f"{name}: forbidden, but called {scope.where} "
                f"{len(hits)} time{'s' if len(hits) > 1 else ''}: {named}{more}"
            )
        details.append(
            ArgMatchDetail(
                expected_tool=f"not {name}",
                matched_call_index=hits[0] if hits else None,
                reason=reason,
            )
        )
    return details


def _uses_new_keys(turn: Turn) -> bool:
    return bool(
        turn.forbidden_tools
        or turn.tool_order != "any"
        or turn.args_mode != "partial"
        or any(t.max_count is not None or t.args_mode is not None for t in turn.tools)
    )


def check_turn_tools(
    turn: Turn, calls: Sequence[ToolInvocation], budget: RegexBudget | None = None
) -> tuple[bool | None, list[ArgMatchDetail]]:
    """(tools_matched, details) of one turn; tools_matched is None when nothing is asserted."""
    if not _uses_new_keys(turn):
        return check_tools(turn.tools, calls, budget)
    details = assert_tools(
        turn.tools,
        turn.forbidden_tools or [],
        turn.tool_order,
        turn.args_mode,
        calls,
        TURN,
        budget,
    )
    if not details:
        return None, []
    return all(d.reason is None for d in details), details


def check_conversation_tools(spec: ConversationTools, ctx: ConversationContext) -> MetricResult:
    """``conversation_tools`` over every call of the conversation, as a case-level metric."""
    calls: list[ToolInvocation] = []
    turn_of: list[int] = []
    for turn in ctx.turns:
        for call in turn.tool_invocations:
            calls.append(call)
            turn_of.append(turn.turn_index)

    def label(i: int) -> str:
        return f"call #{i + 1} (turn {turn_of[i] + 1})"

    details = assert_tools(
        spec.tools,
        spec.forbidden_tools or [],
        spec.tool_order,
        spec.args_mode,
        calls,
        Scope("in the conversation", label),
    )
    failed = [d.reason for d in details if d.reason]
    checks = len(details)
    if failed:
        reason = "; ".join(failed)
    else:
        reason = (
            f"{checks} tool assertion{'s hold' if checks != 1 else ' holds'} over "
            f"{len(calls)} call{'s' if len(calls) != 1 else ''}"
        )
    dumped: list[dict[str, Any]] = [d.model_dump(mode="json") for d in details]
    result = MetricResult(
        metric_name=CONVERSATION_TOOLS,
        kind="standard",
        score=0.0 if failed else 1.0,
        passed=not failed,
        reason=reason,
        details={"tool_checks": dumped, "calls": len(calls)},
    )
    return mark_conversation(result, ctx)
