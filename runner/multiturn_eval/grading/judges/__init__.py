"""LLM judges (``type: judge``): prompt, structured verdicts, clients, dedup, usage.

See :mod:`.service` for the precedence of the ``judge:`` blocks and de-duplication,
:mod:`.prompt` for the template and the injection defence, :mod:`.verdict` for
the verdict schema, :mod:`.evaluate` for the metric.
"""

from __future__ import annotations

from ...errors import JudgeConfigProblem
from .evaluate import (
    ConversationJudging,
    JudgeResult,
    JudgeTexts,
    Judging,
    judge_conversation,
    judge_turn,
)
from .prompt import TranscriptTurn
from .service import JUDGES, JudgeService, merge_levels, resolve

__all__ = [
    "JUDGES",
    "ConversationJudging",
    "JudgeConfigProblem",
    "JudgeResult",
    "JudgeService",
    "JudgeTexts",
    "Judging",
    "TranscriptTurn",
    "judge_conversation",
    "judge_turn",
    "merge_levels",
    "resolve",
]
