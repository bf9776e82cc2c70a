"""Conversation-level code graders used by tests/test_conversation_evaluations.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from multiturn_eval import ConversationContext, GraderResult

SEEN: list[ConversationContext] = []


def record(ctx: ConversationContext) -> GraderResult:
    """Passes; remembers what it saw."""
    SEEN.append(ctx)
    return GraderResult(score=1.0, reason=f"saw {len(ctx.turns)} turns")


def all_replied(ctx: ConversationContext) -> GraderResult:
    """Passes when every turn got a reply."""
    missing = [t.turn_index + 1 for t in ctx.turns if t.response is None]
    return GraderResult(
        score=0.0 if missing else 1.0,
        reason=f"turns without a reply: {missing}" if missing else "every turn replied",
    )


def polite(ctx: ConversationContext) -> GraderResult:
    rude = [t.turn_index + 1 for t in ctx.turns_run if t.response and "stupid" in t.response]
    return GraderResult(
        score=0.0 if rude else 1.0,
        reason=f"rude on turn(s) {rude}" if rude else "polite throughout",
        details={"rude_turns": rude},
    )


def boom(ctx: ConversationContext) -> bool:
    raise RuntimeError("conversation grader broke")


def hangs(ctx: ConversationContext) -> bool:
    time.sleep(3)
    return True


async def hangs_async(ctx: ConversationContext) -> bool:
    await asyncio.sleep(30)
    return True


def garbage(ctx: ConversationContext) -> Any:
    return "yes"


def mutate(ctx: ConversationContext) -> bool:
    """Tries to change what it was given; the report must not change."""
    ctx.turns[0].metric_results[0].passed = True
    ctx.turns[0].tool_invocations[0].name = "changed"
    return True
