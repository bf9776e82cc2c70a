"""Annotations for failing turns, ranked to fit GitHub's per-step budget (pure).

GitHub shows at most 10 error annotations per step, so the most useful ones go
first:

1. the first failing turn of every failing test case whose failure is a failed
   check (a regression in the agent's behaviour), in suite order;
2. the first failing turn of the test cases that failed on an infrastructure
   error (timeout, backend error, broken session);
3. the remaining failing turns, in suite order.

Each annotation points at the YAML line of the turn (the test case's line when
the turn's is unknown) in the suite file, as a path relative to the
workspace, and says what was expected and what came back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..results import CaseResult, Report, TurnResult
from .commands import ANNOTATIONS_PER_STEP, Annotation, clean

_TEXT = 300


@dataclass(frozen=True)
class RankedAnnotations:
    annotations: list[Annotation]
    omitted: int
    """failing turns (or test cases) beyond the budget"""


def _quote(text: str | None) -> str:
    if text is None:
        return "(no reply)"
    return repr(clean(text, _TEXT))


def turn_annotation(case: CaseResult, turn: TurnResult, file: str | None) -> Annotation:
    checks = turn.failed_checks() or ["failed"]
    lines = [f"Turn {turn.turn_index + 1} failed: {clean(checks[0], 500)}"]
    lines += [f"also: {clean(check, 500)}" for check in checks[1:4]]
    if len(checks) > 4:
        lines.append(f"(+{len(checks) - 4} more failed checks)")
    lines.append(f"input:    {_quote(turn.input)}")
    if turn.ground_truth is not None:
        lines.append(f"expected: {_quote(turn.ground_truth)}")
    lines.append(f"got:      {_quote(turn.response)}")
    if case.repeat is not None:  # --repeat: which run this is, and how the turns fared
        from ..reports._view import repeat_reason, representative_run

        run = representative_run(case)
        lines.insert(1, f"{repeat_reason(case)}; this is run {(run or 0) + 1}")
    return Annotation(
        level="error",
        title=f"{case.suite_name} › {case.name} › turn {turn.turn_index + 1}",
        message="\n".join(lines),
        file=file,
        line=turn.line or case.line,
    )


def case_annotation(case: CaseResult, file: str | None) -> Annotation:
    # a case whose turns all passed may fail on a conversation-level check
    conversation = [
        f"conversation {m.metric_name}: {m.error or m.reason or 'failed'}"
        for m in case.metric_results
        if m.scope == "conversation" and not m.passed
    ]
    reason = clean((case.errors or conversation or ["failed"])[0], 500)
    return Annotation(
        level="error",
        title=f"{case.suite_name} › {case.name}",
        message=f"Test case failed: {reason}",
        file=file,
        line=case.line,
    )


def rank_annotations(
    report: Report,
    file_of: Callable[[str], str | None],
    budget: int = ANNOTATIONS_PER_STEP,
) -> RankedAnnotations:
    """Error annotations for the failing turns of ``report``, at most ``budget``.

    ``file_of`` maps the file a result is written in (its ``suite``, or its ``file``
    for a case of a ``test_cases_file``) to the path GitHub should show (relative to
    the workspace), or None when it is outside the workspace.
    """
    budget = max(budget, 0)
    # each list keeps at most ``budget`` (no more can be shown) and counts the rest: the
    # results are read one at a time (issue 23)
    firsts: list[Annotation] = []
    infra: list[Annotation] = []
    rest: list[Annotation] = []
    total = 0
    for case in report.results:
        if case.passed or case.skipped:
            continue
        file = file_of(case.written_in)
        failing = [t for t in case.all_turns() if not t.passed and not t.skipped]
        first_list = infra if case.outcome == "error" else firsts
        total += max(len(failing), 1)
        if len(first_list) < budget:
            first_list.append(
                turn_annotation(case, failing[0], file)
                if failing
                else case_annotation(case, file)  # a case-level error, or every turn skipped
            )
        for turn in failing[1 : 1 + max(budget - len(rest), 0)]:
            rest.append(turn_annotation(case, turn, file))
    ranked = firsts + infra + rest
    return RankedAnnotations(ranked[:budget], max(total - budget, 0))
