"""Conversation-level graders of the support example (``conversation_evaluations``).

Each receives a :class:`~multiturn_eval.ConversationContext`: every turn of the
test case, with its reply, tool calls and per-turn results, once the
conversation is over.
"""

from __future__ import annotations

from multiturn_eval import ConversationContext, GraderResult

RUDE = ("stupid", "idiot", "shut up", "your fault", "calm down")


def polite_throughout(ctx: ConversationContext) -> GraderResult:
    """Every turn got a reply, and no reply is rude."""
    missing = [t.turn_index + 1 for t in ctx.turns if t.response is None]
    rude = [
        t.turn_index + 1
        for t in ctx.turns
        if t.response is not None and any(word in t.response.lower() for word in RUDE)
    ]
    problems = []
    if missing:
        problems.append(f"no reply on turn(s) {missing}")
    if rude:
        problems.append(f"rude reply on turn(s) {rude}")
    return GraderResult(
        score=0.0 if problems else 1.0,
        reason="; ".join(problems) or f"all {len(ctx.turns)} replies polite",
        details={"rude_turns": rude, "unanswered_turns": missing},
    )


def no_unbacked_refund_promise(ctx: ConversationContext) -> GraderResult:
    """A reply that says a refund was issued comes after an issue_refund call that succeeded.

    Catches the bot telling the customer "I have issued a refund" when no refund
    was made (or the call failed): a check across turns and tools that no single
    per-turn check can make.
    """
    refunded = False
    for turn in ctx.turns:
        if any(c.name == "issue_refund" and c.error is None for c in turn.tool_invocations):
            refunded = True
        if turn.response and "issued a refund" in turn.response.lower() and not refunded:
            return GraderResult(
                score=0.0,
                reason=f"turn {turn.turn_index + 1} says a refund was issued, but no "
                "issue_refund call had succeeded by then",
            )
    return GraderResult(score=1.0, reason="every refund the bot mentions was made")
