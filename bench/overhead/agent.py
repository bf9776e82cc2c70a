"""The ``python`` backend's agent for the benchmark: answers from the workload like the fakes.

Per turn: with tools, "one request" (a sleep of ``latency``), the tool call, a
second request; without, one request. It records when its first
request starts (monotonic clock) and the process's CPU time at every request,
written to the ``stats`` file at exit, which the benchmark reads as the model
requests.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import time
from collections.abc import Sequence
from pathlib import Path

from multiturn_eval import CaseContext, ToolInvocation, TurnFile, TurnReply

from .tools import calculate
from .workload import TOOL, answer_text

_FIRST: list[float] = []
_CPU: list[float] = []


def _write(stats: str) -> None:
    Path(stats).write_text(
        json.dumps({"first_request": _FIRST[0], "cpu_at_first": _CPU[0], "cpu": _CPU}),
        encoding="utf-8",
    )


def _note(stats: str) -> None:
    if not stats:
        return
    _CPU.append(time.process_time())
    if not _FIRST:
        _FIRST.append(time.monotonic())
        atexit.register(_write, stats)


class WorkloadSession:
    def __init__(self, ctx: CaseContext) -> None:
        options = ctx.agent.get("options", {})
        self.latency = float(options.get("latency", 0))
        self.stats = str(options.get("stats", ""))
        self.tools = bool(ctx.agent.get("tools"))
        self.answers = list(ctx.context["answers"])
        self.programs = list(ctx.context["programs"])
        self.turn = 0

    async def _request(self) -> None:
        _note(self.stats)
        await asyncio.sleep(self.latency)

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        turn = self.turn
        self.turn += 1
        await self._request()
        calls: tuple[ToolInvocation, ...] = ()
        if self.tools:
            program = self.programs[turn]
            started = time.perf_counter()
            result = calculate(program)
            calls = (
                ToolInvocation(
                    name=TOOL,
                    args={"program": program},
                    result=result,
                    duration_ms=(time.perf_counter() - started) * 1000,
                ),
            )
            await self._request()
        return TurnReply(response=answer_text(self.answers[turn]), tool_invocations=calls)

    async def close(self) -> None:
        return None


async def factory(ctx: CaseContext) -> WorkloadSession:
    return WorkloadSession(ctx)
