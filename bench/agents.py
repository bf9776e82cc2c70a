"""Agents for the benchmarks: replies at once, or after a fixed latency."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from multiturn_eval import CaseContext, ToolInvocation, TurnFile, TurnReply

_CALL = (ToolInvocation(name="subtract", args={"a": 206588, "b": 181001}, result=25587),)


class Instant:
    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        return TurnReply(response="The difference is 25587.", tool_invocations=_CALL)

    async def close(self) -> None:
        return None


class Latent(Instant):
    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        await asyncio.sleep(self.latency)
        return await super().send(message, files)


def instant(ctx: CaseContext) -> Instant:
    return Instant()


def latent(ctx: CaseContext) -> Latent:
    return Latent(float(ctx.agent["options"].get("latency", 0.05)))


async def latent_async(ctx: CaseContext) -> Latent:
    """The same agent behind an async factory (called on the event loop, no thread hand-off)."""
    return latent(ctx)


class TalkingUser:
    """A python simulated user that answers after ``latency`` (async) and never ends."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def next_message(self, conversation: Sequence[object]) -> str:
        await asyncio.sleep(self.latency)
        return f"message {len(conversation) // 2 + 1}: my order is W123"


def talking_user(ctx: object) -> TalkingUser:
    """The simulated user's factory (``context.latency``, default 50 ms)."""
    context = getattr(ctx, "context", {})
    return TalkingUser(float(context.get("latency", 0.05)))
