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
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from multiturn_eval import (
    CaseContext,
    GraderContext,
    GraderResult,
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
    release_stuck()
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


def scripted_case(name: str, steps: Sequence[Any], turns: Sequence[str] = ("{input: q}",)) -> str:
    """One flow-style entry of a suite's ``test_cases:`` whose agent (:func:`scripted`) plays
    ``steps``, one a turn; ``turns`` are the turns as YAML."""
    script = json.dumps(list(steps))
    return f"  - {{name: {name}, context: {{script: {script}}}, turns: [{', '.join(turns)}]}}\n"


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


# ---------------------------------------------------------------- misbehaving agents
#
# ``tests.agents:misbehaving`` (sync factory) and ``misbehaving_async`` (async
# factory) build an agent that misbehaves once, as the test case's context says:
#
#   context: {misbehave: {at: send, turn: 1, do: "raise:sys_exit", sync: true}}
#
# ``at`` is factory | send | close; ``turn`` (1-based) is the turn whose send()
# misbehaves; ``sync`` picks a sync or an async session; ``do`` is
# ``family:variant`` from the tables below. Every other turn replies "ok".
# Values that YAML cannot express (bytes, sets, cycles, NaN...) are built here by name.


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken too")


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("__repr__ is broken")


class BrokenBool:
    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ is broken")


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return loop


def _deep(levels: int = 10_000) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


#: values JSON cannot hold, by name
BAD_VALUES: dict[str, Any] = {
    "bytes": lambda: b"\x00\xffraw",
    "bytearray": lambda: bytearray(b"\x01\x02"),
    "set": lambda: {3, 1, 2},
    "frozenset": lambda: frozenset({"a"}),
    "object": lambda: object(),
    "broken_repr": lambda: BrokenRepr(),
    "cycle": _cycle,
    "surrogate_key": lambda: {"\ud800key": 1},
    "surrogate_text": lambda: "lone \udcff surrogate",
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "minus_inf": lambda: float("-inf"),
    "deep": _deep,
    "non_string_keys": lambda: {1: "one", (2, 3): "tuple", None: "none", 1.5: "float"},
    "huge_int": lambda: 10**5000,
    "function": lambda: len,
}

#: token_usage values of the wrong type or range
BAD_USAGE: dict[str, Any] = {
    "string": lambda: "lots",
    "negative": lambda: {"prompt_tokens": -1},
    "nan": lambda: {"prompt_tokens": float("nan")},
    "inf": lambda: {"completion_tokens": float("inf")},
    "dict": lambda: {"prompt_tokens": {"a": 1}},
    "unknown_key": lambda: {"tokens": 3},
    "total_too_small": lambda: {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 1},
    "list": lambda: [1, 2],
    "constructed": lambda: TokenUsage.model_construct(prompt_tokens="x", completion_tokens=0),
}

#: cost_usd values of the wrong type or range
BAD_COST: dict[str, Any] = {
    "string": lambda: "3.5",
    "negative": lambda: -1.0,
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "dict": lambda: {"usd": 1},
    "bool": lambda: True,
}

#: what "raise:VARIANT" raises (or calls)
RAISES: dict[str, Any] = {
    "keyboard_interrupt": KeyboardInterrupt,
    "cancelled": asyncio.CancelledError,
    "system_exit": lambda: SystemExit(0),
    "generator_exit": GeneratorExit,
    "broken_str": BrokenStr,
    "timeout": lambda: TimeoutError("upstream took too long"),
    "memory": lambda: MemoryError("pretend"),
    "recursion": lambda: RecursionError("maximum recursion depth exceeded"),
}

STUCK = threading.Event()
"""What stuck user code waits for (set when a test ends, so no thread lingers for long)."""


def release_stuck() -> None:
    global STUCK
    STUCK.set()
    STUCK = threading.Event()


def _raise_or_exit(variant: str) -> None:
    if variant == "sys_exit":
        sys.exit()
    if variant == "sys_exit_3":
        sys.exit(3)
    if variant == "sys_exit_text":
        sys.exit("goodbye")
    raise RAISES[variant]()


def misbehaviour(do: str) -> Any:
    """The reply for ``do`` (or raise); for the sync path, also blocks when stuck."""
    family, _, variant = do.partition(":")
    if family == "raise":
        _raise_or_exit(variant)
    if family == "stuck":
        STUCK.wait(600)
        return "ok, finally"
    if family == "slow":
        time.sleep(float(variant))
        return "ok"
    if family == "args":
        bad = BAD_VALUES[variant]()
        return TurnReply(
            response="ok", tool_invocations=[ToolInvocation(name="t", args={"x": bad})]
        )
    if family == "args_mapping":
        bad = BAD_VALUES[variant]()
        args = bad if isinstance(bad, dict) else {"x": bad}
        return {"response": "ok", "tool_invocations": [{"name": "t", "args": args}]}
    if family == "result":
        bad = BAD_VALUES[variant]()
        return TurnReply(response="ok", tool_invocations=[ToolInvocation(name="t", result=bad)])
    if family == "usage":
        return {"response": "ok", "token_usage": BAD_USAGE[variant]()}
    if family == "cost":
        return TurnReply(response="ok", cost_usd=BAD_COST[variant]())
    if family == "reply":
        if variant == "surrogates":
            return TurnReply(response="bad \ud800 text", warnings=["warn \udfff"])
        if variant == "surrogate_string":
            return "plain \udcff string"
        if variant == "not_a_reply":
            return 42
        if variant == "response_not_text":
            return TurnReply(response=b"bytes")  # type: ignore[arg-type]
        if variant == "invocations_not_a_list":
            return TurnReply(response="ok", tool_invocations="t")  # type: ignore[arg-type]
        if variant == "mapping_with_bad_keys":
            return {"response": "ok", 1: "x"}
    raise AssertionError(f"unknown misbehaviour {do!r}")


async def amisbehaviour(do: str) -> Any:
    if do.startswith("stuck"):
        await asyncio.Event().wait()
    if do.startswith("slow:"):
        await asyncio.sleep(float(do.partition(":")[2]))
        return "ok"
    if do.startswith("raise:"):
        _raise_or_exit(do.partition(":")[2])
    return misbehaviour(do)


class _Misbehaving:
    def __init__(self, ctx: CaseContext) -> None:
        spec = dict(ctx.context.get("misbehave", {}))
        self.at: str = spec.get("at", "send")
        turn = spec.get("turn", 1)
        self.turns: set[int] = set(turn) if isinstance(turn, list) else {int(turn)}
        self.do: str = spec.get("do", "")
        self.sent = 0
        self.name = ctx.test_case_name
        OPENED.append(self.name)

    def _due(self) -> bool:
        self.sent += 1
        return bool(self.do) and self.at == "send" and self.sent in self.turns


class MisbehavingSync(_Misbehaving):
    def send(self, message: str) -> Any:
        SENT.append((self.name, message))
        return misbehaviour(self.do) if self._due() else "ok"

    def close(self) -> None:
        CLOSED.append(self.name)
        if self.do and self.at == "close":
            misbehaviour(self.do)


class MisbehavingAsync(_Misbehaving):
    async def send(self, message: str) -> Any:
        SENT.append((self.name, message))
        return await amisbehaviour(self.do) if self._due() else "ok"

    async def close(self) -> None:
        CLOSED.append(self.name)
        if self.do and self.at == "close":
            await amisbehaviour(self.do)


def _session(ctx: CaseContext) -> _Misbehaving:
    spec = ctx.context.get("misbehave", {})
    return MisbehavingSync(ctx) if spec.get("sync", True) else MisbehavingAsync(ctx)


def misbehaving(ctx: CaseContext) -> _Misbehaving:
    spec = ctx.context.get("misbehave", {})
    if spec.get("at") == "factory":
        misbehaviour(spec["do"])
    return _session(ctx)


async def misbehaving_async(ctx: CaseContext) -> _Misbehaving:
    spec = ctx.context.get("misbehave", {})
    if spec.get("at") == "factory":
        await amisbehaviour(spec["do"])
    return _session(ctx)


# ------------------------------------------------------------------- garbage graders
#
# ``tests.agents:garbage_grader`` (sync) and ``garbage_grader_async`` return or do
# what the test case's ``context.grader`` names; with no ``grader`` key they pass.


def _garbage(variant: str) -> Any:
    if variant == "":
        return True
    if variant.startswith("raise:"):
        _raise_or_exit(variant.partition(":")[2])
    if variant == "stuck":
        STUCK.wait(600)
        return True
    mutated = GraderResult(score=1.0)
    mutated.score = 7  # changed after it was checked
    table: dict[str, Any] = {
        "string": lambda: "yes",
        "none": lambda: None,
        "dict": lambda: {"score": 1},
        "nan": lambda: float("nan"),
        "inf": lambda: float("inf"),
        "seven": lambda: 7,
        "negative": lambda: -0.5,
        "bad_bool": lambda: BrokenBool(),
        "passed_bad_bool": lambda: GraderResult(score=1.0, passed=BrokenBool()),  # type: ignore[arg-type]
        "passed_string": lambda: GraderResult(score=0.0, passed="no"),  # type: ignore[arg-type]
        "mutated_score": lambda: mutated,
        "reason_not_text": lambda: GraderResult(score=1.0, reason=12),  # type: ignore[arg-type]
        "details_not_mapping": lambda: GraderResult(score=1.0, details=[1]),  # type: ignore[arg-type]
        "details_bytes": lambda: GraderResult(score=1.0, details={"b": b"x"}),
        "details_set": lambda: GraderResult(score=1.0, details={"s": {1}}),
        "details_nan": lambda: GraderResult(score=1.0, details={"n": float("nan")}),
        "details_cycle": lambda: GraderResult(score=1.0, details=_cycle()),
        "details_object": lambda: GraderResult(score=1.0, details={"o": object()}),
        "details_deep": lambda: GraderResult(score=1.0, details={"d": _deep()}),
        "details_surrogates": lambda: GraderResult(score=1.0, details={"t": "\ud800"}),
        "reason_surrogates": lambda: GraderResult(score=1.0, reason="fine \ud800"),
    }
    return table[variant]()


def garbage_grader(ctx: GraderContext) -> Any:
    return _garbage(str(ctx.case_context.get("grader", "")))


async def garbage_grader_async(ctx: GraderContext) -> Any:
    variant = str(ctx.case_context.get("grader", ""))
    if variant == "stuck":
        await asyncio.Event().wait()
    return _garbage(variant)


class Stubborn(ScriptedSession):
    """An async agent that catches and ignores its cancellation on the turn saying 'stubborn'."""

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> Any:
        if "stubborn" in message:
            self._step(message)
            for _ in range(200):  # up to ~20 s, whatever cancels it
                try:
                    await asyncio.sleep(0.1)
                except asyncio.CancelledError:
                    continue
            return "finally"
        return await super().send(message, files)


def stubborn(ctx: CaseContext) -> Stubborn:
    return Stubborn(ctx)
