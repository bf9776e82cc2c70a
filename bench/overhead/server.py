"""Fake model servers answering from the workload, in their own process, with a latency knob.

    python -m bench.overhead.server --protocol openai --workload W.json --latency 0.05

``openai``: Chat Completions (``tests/fakes/openai_server.py``: the real wire
format, every request checked the way the API checks it); ``anthropic``: the
Messages API (``tests/fakes/anthropic_server.py``). The same answers on both:
for a new question, a call of ``calculate`` with the turn's program when the
request offers that tool (Semantic Kernel's ``tools-calculate`` too), else the
answer; after the tool result, the answer. Every request is checked against
the workload: the conversation must hold every earlier question and answer of
its dialogue, in order (and, with tools, each earlier turn's tool call and
result); a request that does not gets a 400 saying why, which fails the turn,
so the benchmark sees it. The reply waits ``latency`` seconds first.

``GET /_bench/stats``: requests answered, history problems, the monotonic time
of the first request and the client's CPU time then and at every request (``POST
/_bench/watch?pid=N`` names the client; its CPU is read from ``/proc``).
Prints its base URL, then serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.fakes import anthropic_server as fa
from tests.fakes import openai_server as fo
from tests.fakes._server import Request, Response, Slow

from .workload import TOOL, Dialogue, answer_text, dialogue_id, read

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid: int | None = None
        self.requests = 0
        self.first_request: float | None = None
        self.cpu_at_first: float | None = None
        self.problems: list[str] = []
        self.cpu: list[float | None] = []
        """The client's CPU time when each request arrived."""

    def seen(self) -> None:
        now = time.monotonic()
        cpu = process_cpu(self.pid) if self.pid else None
        with self.lock:
            self.requests += 1
            self.cpu.append(cpu)
            if self.first_request is None:
                self.first_request = now
                self.cpu_at_first = cpu

    def body(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "first_request": self.first_request,
                "cpu_at_first": self.cpu_at_first,
                "cpu": self.cpu,
                "problems": self.problems[:5],
                "problem_count": len(self.problems),
            }


def control(request: Request, stats: Stats) -> Response | None:
    if not request.path.startswith("/_bench/"):
        return None
    if request.path == "/_bench/watch":
        stats.pid = int(request.query["pid"])
    return Response(200, stats.body())


def expect_history(
    dialogue: Dialogue, turns: list[tuple[str, list[str], str | None]], tools: bool
) -> str | None:
    """Why the conversation is not the dialogue's so far, or None.

    ``turns``: per user turn, (question, tool results seen, final answer or None
    for the turn being answered now).
    """
    if len(turns) > len(dialogue.questions):
        return f"{len(turns)} user turns; the dialogue has {len(dialogue.questions)}"
    for k, (question, results, answer) in enumerate(turns):
        if question != dialogue.questions[k]:
            return f"turn {k}: question {question[:60]!r} is not the dialogue's"
        last = k == len(turns) - 1
        if not last:
            if answer != answer_text(dialogue.answers[k]):
                return f"turn {k}: the history says {answer!r}, not the answer given"
            if tools and len(results) != 1:
                return f"turn {k}: {len(results)} tool results in the history, not 1"
        elif answer is not None:
            return f"turn {k}: the conversation ends with an assistant message"
    return None


def openai_turns(
    messages: list[dict[str, Any]],
) -> tuple[str, list[tuple[str, list[str], str | None]]]:
    system = ""
    turns: list[tuple[str, list[str], str | None]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            system += str(content)
        elif role == "user":
            turns.append((str(content), [], None))
        elif role == "tool" and turns:
            turns[-1][1].append(str(content))
        elif role == "assistant" and turns and not message.get("tool_calls"):
            question, results, _ = turns[-1]
            turns[-1] = (question, results, str(content))
    return system, turns


def anthropic_turns(body: dict[str, Any]) -> tuple[str, list[tuple[str, list[str], str | None]]]:
    system = " ".join(b.get("text", "") for b in body.get("system") or [] if isinstance(b, dict))
    turns: list[tuple[str, list[str], str | None]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts = [str(b.get("text")) for b in blocks if b.get("type") == "text"]
        if message.get("role") == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results and turns:
                turns[-1][1].extend(str(r.get("content")) for r in results)
            else:
                turns.append(("".join(texts), [], None))
        elif turns and not any(b.get("type") == "tool_use" for b in blocks):
            question, seen, _ = turns[-1]
            turns[-1] = (question, seen, "".join(texts))
    return system, turns


class Workload:
    def __init__(self, path: Path, latency: float) -> None:
        self.dialogues = read(path)
        self.latency = latency
        self.stats = Stats()

    def problem(self, why: str) -> str:
        with self.stats.lock:
            self.stats.problems.append(why)
        return why

    def decide(
        self,
        system: str,
        turns: list[tuple[str, list[str], str | None]],
        offered: list[str],
        after_tool: bool,
    ) -> tuple[str, Any] | str:
        """("call", program) or ("answer", text), or a problem."""
        self.stats.seen()
        found = dialogue_id(system)
        dialogue = self.dialogues.get(found or "")
        if dialogue is None:
            return self.problem(f"no dialogue named in the system prompt ({system[:60]!r})")
        tool = next((name for name in offered if name.endswith(TOOL)), None)
        problem = expect_history(dialogue, turns, tool is not None)
        if problem is not None:
            return self.problem(f"{dialogue.id}: {problem}")
        k = len(turns) - 1
        if tool is not None and not after_tool:
            return ("call", (tool, dialogue.programs[k]))
        return ("answer", answer_text(dialogue.answers[k]))

    def later(self, reply: Any) -> Any:
        return Slow(self.latency, reply) if self.latency > 0 else reply


class _Serving:
    """A fake provider that answers from the workload and takes the control requests."""

    def __init__(self, workload: Workload) -> None:
        super().__init__(self.respond, api_key=None)
        self.workload = workload

    def respond(self, request: Request) -> Any:
        raise NotImplementedError

    def check(self, request: Request) -> Any | None:
        return control(request, self.workload.stats) or super().check(request)


class WorkloadOpenAI(_Serving, fo.FakeOpenAI):
    def respond(self, request: Request) -> Any:
        body = request.body
        messages = body["messages"]
        system, turns = openai_turns(messages)
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        after_tool = messages[-1].get("role") == "tool"
        decision = self.workload.decide(system, turns, offered, after_tool)
        if isinstance(decision, str):
            return fo.ErrorReply(
                400, f"benchmark history check: {decision}", "invalid_request_error"
            )
        kind, value = decision
        usage = fo.Usage(400 + 40 * len(messages), 12)
        if kind == "call":
            name, program = value
            reply: Any = fo.calls(fo.ToolCall(name, {"program": program}), usage=usage)
        else:
            reply = fo.text(value, usage)
        return self.workload.later(reply)


class WorkloadAnthropic(_Serving, fa.FakeAnthropic):
    def respond(self, request: Request) -> Any:
        body = request.body
        system, turns = anthropic_turns(body)
        offered = [t["name"] for t in body.get("tools") or []]
        last = body["messages"][-1]["content"]
        after_tool = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        decision = self.workload.decide(system, turns, offered, after_tool)
        if isinstance(decision, str):
            return fa.ApiError(400, "invalid_request_error", f"benchmark history check: {decision}")
        kind, value = decision
        usage = fa.Usage(400 + 40 * len(body["messages"]), 12)
        if kind == "call":
            name, program = value
            reply: Any = fa.tool_uses((name, {"program": program}), usage=usage)
        else:
            reply = fa.text(value, usage)
        return self.workload.later(reply)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--protocol", choices=["openai", "anthropic"], required=True)
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args(argv)
    workload = Workload(args.workload, args.latency)
    server: Any = (
        WorkloadOpenAI(workload) if args.protocol == "openai" else WorkloadAnthropic(workload)
    ).start()
    print(server.url, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
