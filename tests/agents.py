"""Scripted agents for the engine tests (``python`` backend factories).

Each test case's ``context.script`` lists one step per turn::

    context:
      script:
        - {response: "10", tools: [{name: subtract, args: {a: 1, b: 2}}]}
        - {delay: 5}                       # slower than turn_timeout
        - {raise: session}                 # SessionError (session_alive=True)
        - {raise: dead}                    # SessionError(session_alive=False)
        - {raise: fatal}                   # FatalBackendError (stops the run)
        - {raise: bug}                     # ValueError from the agent's own code
        - {echo_history: true}             # replies with every message seen so far

Module-level counters record how many sessions were open at once and whether
each was closed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from multiturn_eval import (
    CaseContext,
    SessionError,
    TokenUsage,
    ToolInvocation,
    TurnFile,
    TurnReply,
)
from multiturn_eval.errors import FatalBackendError

OPEN = 0
MAX_OPEN = 0
OPENED: list[str] = []
CLOSED: list[str] = []
SENT: list[tuple[str, str]] = []
CONTEXTS: list[CaseContext] = []


def reset() -> None:
    global OPEN, MAX_OPEN
    OPEN = MAX_OPEN = 0
    OPENED.clear()
    CLOSED.clear()
    SENT.clear()
    CONTEXTS.clear()


class ScriptedSession:
    def __init__(self, ctx: CaseContext) -> None:
        global OPEN, MAX_OPEN
        self.ctx = ctx
        self.name = ctx.test_case_name
        self.script: list[dict[str, Any]] = [dict(step) for step in ctx.context.get("script", [])]
        self.history: list[str] = []
        OPEN += 1
        MAX_OPEN = max(MAX_OPEN, OPEN)
        OPENED.append(self.name)
        CONTEXTS.append(ctx)

    def _step(self, message: str) -> dict[str, Any]:
        SENT.append((self.name, message))
        self.history.append(message)
        index = len(self.history) - 1
        return self.script[index] if index < len(self.script) else {}

    def _reply(self, step: dict[str, Any], files: Sequence[TurnFile]) -> Any:
        error = step.get("raise")
        if error == "session":
            raise SessionError("the agent lost its connection")
        if error == "dead":
            raise SessionError("the agent process exited", session_alive=False)
        if error == "fatal":
            raise FatalBackendError("authentication failed: invalid API key")
        if error == "bug":
            raise ValueError("bug in the agent")
        if step.get("echo_history"):
            return " | ".join(self.history)
        if step.get("echo_files"):
            return ",".join(f"{f.path.name}:{f.media_type}" for f in files)
        if step.get("as") == "mapping":
            return {"response": step.get("response", ""), "tool_invocations": step.get("tools", [])}
        if step.get("as") == "string":
            return step.get("response", "")
        return TurnReply(
            response=str(step.get("response", "")),
            tool_invocations=[ToolInvocation(**t) for t in step.get("tools", [])],
            token_usage=TokenUsage(**step["usage"]) if "usage" in step else None,
            cost_usd=step.get("cost"),
        )

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> Any:
        step = self._step(message)
        if step.get("delay"):
            await asyncio.sleep(float(step["delay"]))
        return self._reply(step, files)

    async def close(self) -> None:
        global OPEN
        OPEN -= 1
        CLOSED.append(self.name)


def scripted(ctx: CaseContext) -> ScriptedSession:
    if ctx.context.get("factory_raises"):
        raise RuntimeError("cannot start the agent")
    return ScriptedSession(ctx)


class SyncSession(ScriptedSession):
    def send(self, message: str, files: Sequence[TurnFile] = ()) -> Any:  # type: ignore[override]
        step = self._step(message)
        if step.get("delay"):
            time.sleep(float(step["delay"]))
        return self._reply(step, files)

    def close(self) -> None:  # type: ignore[override]
        global OPEN
        OPEN -= 1
        CLOSED.append(self.name)


def scripted_sync(ctx: CaseContext) -> SyncSession:
    return SyncSession(ctx)


async def scripted_async_factory(ctx: CaseContext) -> ScriptedSession:
    await asyncio.sleep(0)
    return ScriptedSession(ctx)


class NoSend:
    pass


def no_send(ctx: CaseContext) -> NoSend:
    return NoSend()


class Counter:
    """Remembers state across turns: answers with the running total of numbers sent."""

    def __init__(self) -> None:
        self.total = 0

    def send(self, message: str) -> str:
        self.total += int(message)
        return str(self.total)


def counter(ctx: CaseContext) -> Counter:
    return Counter()


class Surrogates:
    """Replies with text UTF-8 cannot encode (as a bad decode in an agent may produce)."""

    def send(self, message: str) -> TurnReply:
        return TurnReply(
            response="bad \udcff text",
            tool_invocations=[
                ToolInvocation(name="lookup", args={"row": "\ud800"}, result="x\udfff")
            ],
        )


def surrogates(ctx: CaseContext) -> Surrogates:
    return Surrogates()
