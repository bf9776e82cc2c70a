"""A seeded random agent for the repeat tests (``python`` backend factory).

``tests.flaky_agents:flaky`` answers turn ``i`` of a test case with
``context.answers[i]`` -- or with a wrong answer, as its context says:

- ``pass_probability: {"<turn index>": p}``: the turn is right with
  probability ``p``, drawn from ``random.Random`` seeded with
  ``(context.seed, test-case name, session number, turn index)``;
- ``fail_in_sessions: {"<turn index>": [session numbers]}``: the turn is wrong
  in exactly those sessions (0-based, in the order the case's sessions open).

The session number is how many sessions of that test case opened before this
one, so the *set* of outcomes over K runs does not depend on which run opens
first (``-p`` > 1 may reorder them): the tests compute it with
:func:`turn_is_right` and compare with the report.

``wait_for_open: N``: the first turn waits (up to 5 s) until N sessions were
open at once, so a test sees runs overlap without relying on timing.

``slow_sessions: [numbers]`` with ``marker: PATH``: those sessions touch
``PATH`` when their first turn is sent, then take ``slow_seconds`` (default 60)
to answer -- a test interrupts the run while they wait.

Every session remembers the messages it was sent; ``HISTORIES`` keeps them per
session, so a test sees whether a run got another run's conversation.
"""

from __future__ import annotations

import asyncio
import random
import threading
from pathlib import Path
from typing import Any

from multiturn_eval import CaseContext, TokenUsage, TurnReply

_LOCK = threading.Lock()
SESSIONS: dict[str, int] = {}
"""test-case name -> sessions opened so far"""
HISTORIES: list[tuple[str, int, list[str]]] = []
"""(test-case name, session number, every message the session was sent)"""
OPEN = 0
MAX_OPEN = 0


def reset() -> None:
    global OPEN, MAX_OPEN
    with _LOCK:
        SESSIONS.clear()
        HISTORIES.clear()
        OPEN = MAX_OPEN = 0


def turn_is_right(context: dict[str, Any], case: str, session: int, turn: int) -> bool:
    """Whether the agent answers ``turn`` right in the ``session``-th session of ``case``."""
    failing = context.get("fail_in_sessions", {}).get(str(turn))
    if failing is not None:
        return session not in failing
    probability = context.get("pass_probability", {}).get(str(turn))
    if probability is None:
        return True
    rng = random.Random(f"{context.get('seed', 0)}:{case}:{session}:{turn}")
    return rng.random() < float(probability)


class FlakySession:
    def __init__(self, ctx: CaseContext) -> None:
        global OPEN, MAX_OPEN
        self.case = ctx.test_case_name
        self.context: dict[str, Any] = dict(ctx.context)
        with _LOCK:
            self.number = SESSIONS.get(self.case, 0)
            SESSIONS[self.case] = self.number + 1
            self.history: list[str] = []
            HISTORIES.append((self.case, self.number, self.history))
            OPEN += 1
            MAX_OPEN = max(MAX_OPEN, OPEN)

    async def send(self, message: str) -> TurnReply:
        turn = len(self.history)
        self.history.append(message)
        await asyncio.sleep(float(self.context.get("delay", 0)))
        wanted = int(self.context.get("wait_for_open", 0))
        for _ in range(500):  # until that many sessions were open at once (at most 5 s)
            if MAX_OPEN >= wanted:
                break
            await asyncio.sleep(0.01)
        if self.number in self.context.get("slow_sessions", []):
            Path(self.context["marker"]).touch()  # noqa: ASYNC240 - a test marker, once
            await asyncio.sleep(float(self.context.get("slow_seconds", 60)))
        answers = self.context.get("answers", [])
        right = answers[turn] if turn < len(answers) else ""
        answer = right if turn_is_right(self.context, self.case, self.number, turn) else "-1"
        return TurnReply(
            response=str(answer),
            token_usage=TokenUsage(prompt_tokens=10, completion_tokens=5),
            cost_usd=0.001,
        )

    async def close(self) -> None:
        global OPEN
        with _LOCK:
            OPEN -= 1


def flaky(ctx: CaseContext) -> FlakySession:
    return FlakySession(ctx)
