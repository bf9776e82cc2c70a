"""The simulated user's own overhead: the conversation driver, the prompt, the reply checks.

    python bench/simulation.py                   # all three measures below
    python bench/simulation.py cpu --conversations 200 --turns 6
    python bench/simulation.py wall --latency 0.05 --parallel 8

Phase 1 of issue 21 measures what the simulation package adds per simulated turn;
the case runner, the chat core and the HTTP traffic are not in it yet (they are
measured with the whole runner once the driver is wired in). Fakes stand in for
both sides: the agent is an ``async`` function answering at once (or after
``latency``), the LLM simulator's structured call returns a well-formed reply at
once (or after ``latency``) with a fixed usage.

* ``cpu``: CPU per simulated turn of the driver (``time.process_time``) for
  ``conversations`` conversations of ``turns`` user messages, one at a time, with
  (a) the LLM simulator -- the prompt rendered from the packaged template with
  the whole conversation (agent replies fenced), the request built, the reply
  checked -- and (b) a python simulator (the support example's rule-based
  customer's kind of object: ``next_message`` on a daemon thread), both against
  an instant agent whose replies are 400 characters.
* ``long``: the LLM simulator's CPU per turn over a 50-message conversation
  (the prompt grows with the conversation: this shows how much).
* ``wall``: ``conversations`` conversations of ``turns`` messages, ``parallel``
  at a time (a semaphore, as ``-p``), agent and simulator each ``latency``
  seconds per call; against ideal = ceil(conversations / parallel) x turns x
  2 x latency.

Numbers go in ``bench/README.md`` ("Simulated users"); nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multiturn_eval import ConversationMessage, TokenUsage, UserTurn
from multiturn_eval.simulation import (
    AgentAnswer,
    LLMSimulator,
    Outgoing,
    PythonSimulator,
    StructuredAnswer,
    StructuredAsk,
    simulate,
)

GOAL = "Get a refund to your card for order W123; accept store credit only if refused twice."
KNOWN = {"order_id": "W123", "email": "mia@example.com", "customer_id": "C100"}
UNKNOWN = ["the card's last four digits"]
REPLY = ("Thanks for waiting. I looked into order W123 and I can help with that. " * 6)[:400]
USAGE = TokenUsage(prompt_tokens=900, completion_tokens=40)


def llm(latency: float, turns: int) -> LLMSimulator:
    said = 0

    async def call(ask: StructuredAsk) -> StructuredAnswer:
        nonlocal said
        said += 1
        if latency:
            await asyncio.sleep(latency)
        data: dict[str, Any] = {
            "message": f"message {said}",
            "done": False,
            "outcome": None,
            "reason": None,
        }
        return StructuredAnswer(data, None, USAGE, 0.0001)

    return LLMSimulator(
        call,
        backend="anthropic",
        model="claude-haiku-4-5",
        goal=GOAL,
        persona="Impatient and terse; writes in lowercase.",
        known=KNOWN,
        unknown=UNKNOWN,
    )


class Talker:
    def next_message(self, conversation: tuple[ConversationMessage, ...]) -> str | UserTurn:
        return f"message {len(conversation) // 2 + 1}: my customer ID is C100"


def agent(latency: float) -> Any:
    async def send(outgoing: Outgoing) -> AgentAnswer:
        if latency:
            await asyncio.sleep(latency)
        return AgentAnswer(REPLY)

    return send


async def conversations(make: Any, n: int, turns: int, latency: float, parallel: int) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one() -> None:
        async with gate:
            run = await simulate(
                make(), agent(latency), goal=GOAL, max_turns=turns, turn_timeout=60
            )
            assert run.simulation.outcome == "max_turns" and run.simulation.user_turns == turns

    async with asyncio.TaskGroup() as group:
        for _ in range(n):
            group.create_task(one())


def cpu_per_turn(make: Any, n: int, turns: int) -> float:
    asyncio.run(conversations(make, 5, turns, 0.0, 1))  # warm-up (imports, thread pool, caches)
    started = time.process_time()
    asyncio.run(conversations(make, n, turns, 0.0, 1))
    return (time.process_time() - started) / (n * turns) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", nargs="?", default="all", choices=["all", "cpu", "long", "wall"])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, turns = args.conversations, args.turns
    if args.what in ("all", "cpu"):
        llm_ms = [cpu_per_turn(lambda: llm(0, turns), n, turns) for _ in range(args.repeats)]
        py_ms = [
            cpu_per_turn(lambda: PythonSimulator(Talker(), "bench:talker"), n, turns)
            for _ in range(args.repeats)
        ]
        print(
            f"cpu: {n} conversations x {turns} turns, CPU ms per simulated turn "
            f"(median of {args.repeats}): LLM simulator {statistics.median(llm_ms):.3f} "
            f"({', '.join(f'{x:.3f}' for x in llm_ms)}), python simulator "
            f"{statistics.median(py_ms):.3f} ({', '.join(f'{x:.3f}' for x in py_ms)})"
        )
    if args.what in ("all", "long"):
        long_ms = [cpu_per_turn(lambda: llm(0, 50), 10, 50) for _ in range(args.repeats)]
        print(
            f"long: 10 conversations x 50 turns, LLM simulator CPU ms per turn "
            f"(median of {args.repeats}): {statistics.median(long_ms):.3f}"
        )
    if args.what in ("all", "wall"):
        ideal = math.ceil(n / args.parallel) * turns * 2 * args.latency
        walls = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            asyncio.run(
                conversations(
                    lambda: llm(args.latency, turns), n, turns, args.latency, args.parallel
                )
            )
            walls.append(time.perf_counter() - started)
        wall = statistics.median(walls)
        print(
            f"wall: {n} conversations x {turns} turns, -p {args.parallel}, {args.latency * 1000:g} ms "
            f"agent + {args.latency * 1000:g} ms simulator: {wall:.3f} s (median of {args.repeats}; "
            f"{', '.join(f'{w:.3f}' for w in walls)}), ideal {ideal:.3f} s, "
            f"wall / ideal {wall / ideal:.3f}"
        )


if __name__ == "__main__":
    main()
