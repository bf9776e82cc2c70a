"""Verdicts recorded in an earlier report, for grading without calling a model again.

``multiturn-eval regrade`` re-runs every check of the current suite on the
replies recorded in a report. Code graders and standard checks are cheap and
run again; LLM judges cost money, so unless ``--rejudge`` is given a judged
metric takes its verdict from the report instead of calling the judge model.

The regrade driver sets :data:`RECORDED_JUDGEMENTS` for the whole run (tasks
inherit it) unless ``--rejudge``; while it is set, a judged metric takes its
recorded verdict, and one the report has no verdict for (a judge added since,
a turn not judged before) is a metric error saying so: a regrade without
``--rejudge`` never calls a judge, and needs no judge API key. Outside a
regrade (and with ``--rejudge``) it is None and judges are always called.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from ..results import MetricResult


@dataclass(frozen=True, slots=True)
class JudgeKey:
    """Which judged metric: the case as the *current* suite numbers it."""

    suite: str
    """The suite file as reports show it (``CaseResult.suite``)."""
    case_index: int
    """``CaseResult.index``: the test case's position in the current suite file."""
    turn_index: int | None
    """The turn, or None for a conversation-level judge."""
    metric_name: str


class RecordedJudgements(Protocol):
    def lookup(self, key: JudgeKey) -> MetricResult | None:
        """The recorded verdict to reuse, or None to call the judge."""
        ...


RECORDED_JUDGEMENTS: ContextVar[RecordedJudgements | None] = ContextVar(
    "RECORDED_JUDGEMENTS", default=None
)
