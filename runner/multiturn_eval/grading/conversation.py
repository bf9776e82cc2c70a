"""Conversation-level checks: ``conversation_evaluations`` and ``conversation_tools``.

They run once per test case, after its last turn, on the whole conversation,
including when the session died or could not be opened (then they are graded
on the turns that ran, and their reason says so). Their results are test-case
level :class:`~multiturn_eval.results.MetricResult` s marked
``scope: "conversation"``; the case passes only if they pass.

:func:`evaluate_conversation` is the one place that dispatches a conversation
evaluation by its type:

- ``type: code``: the grader receives a frozen
  :class:`~multiturn_eval.types.ConversationContext` instead of a
  GraderContext; the same result rules, ``grader_timeout`` and guarded call as a
  per-turn code grader (:func:`~multiturn_eval.grading.evaluators.run_code_grader`);
- ``type: judge``: an LLM judge sees the whole transcript (every turn's input
  and reply; a turn without a reply says why) and grades it against its rubric
  (:class:`~multiturn_eval.grading.judges.ConversationJudging`, which also
  collects the judge's usage for the test case);
- ``type: standard`` is refused when the suite loads (a response check belongs
  to a turn).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..results import MetricResult, TurnResult
from ..suite import CodeEvaluation, Evaluation, JudgeEvaluation
from ..types import ConversationContext, ConversationTurn, read_only
from .evaluators import run_code_grader

if TYPE_CHECKING:
    from .judges import ConversationJudging

CONVERSATION = "conversation"
"""The ``scope`` of a conversation-level metric result."""


def conversation_turns(
    results: Sequence[TurnResult], turn_configs: Sequence[Mapping[str, Any]]
) -> tuple[ConversationTurn, ...]:
    """Frozen views of a case's turn results (copies: a grader cannot change the report)."""
    return tuple(
        ConversationTurn(
            turn_index=r.turn_index,
            input=r.input,
            response=r.response,
            ground_truth=r.ground_truth,
            tool_invocations=tuple(c.model_copy(deep=True) for c in r.tool_invocations),
            passed=r.passed,
            skipped=r.skipped,
            errors=tuple(r.errors),
            metric_results=tuple(m.model_copy(deep=True) for m in r.metric_results),
            turn_config=read_only(turn_configs[r.turn_index])
            if r.turn_index < len(turn_configs)
            else read_only({}),
        )
        for r in results
    )


def partial_note(ctx: ConversationContext) -> str | None:
    """``graded on 2 of 4 turns (...)`` when not every turn ran; None when they all did."""
    ran = len(ctx.turns_run)
    total = len(ctx.turns)
    if ran == total and ctx.session_error is None:
        return None
    why = f": {ctx.session_error}" if ctx.session_error else ""
    return f"graded on the {ran} of {total} turns that ran{why}"


def mark_conversation(result: MetricResult, ctx: ConversationContext) -> MetricResult:
    """``result`` as a conversation-level metric; says so when not every turn ran."""
    result.scope = "conversation"
    note = partial_note(ctx)
    if note is not None:
        result.reason = f"{result.reason} ({note})" if result.reason else note
        details = dict(result.details or {})
        details.setdefault("turns_run", len(ctx.turns_run))
        details.setdefault("turns_total", len(ctx.turns))
        result.details = details
    return result


async def evaluate_conversation(
    spec: Evaluation,
    ctx: ConversationContext,
    *,
    graders: Mapping[str, Callable[..., Any]],
    grader_timeout: float | None,
    judging: ConversationJudging | None = None,
) -> MetricResult:
    """One conversation evaluation on a finished conversation; never raises for user code.

    A judge's 401/403 (FatalBackendError) is raised: it stops the run.
    """
    if isinstance(spec, CodeEvaluation):
        result = await run_code_grader(spec, graders[spec.grader], ctx, grader_timeout)
    elif isinstance(spec, JudgeEvaluation) and judging is not None:
        result = await judging.judge(spec, ctx)
    else:  # the suite model refuses other types in conversation_evaluations
        result = MetricResult(
            metric_name=spec.metric_name,
            kind=spec.type,
            passed=False,
            error=f"type: {spec.type} cannot be a conversation evaluation",
        )
    return mark_conversation(result, ctx)
