"""The simulated user's overhead: through the whole runner, and the driver alone.

    python bench/simulation.py runner            # the issue's benchmark, through run_suites
    python bench/simulation.py runner --simulator python --repeats 1
    python bench/simulation.py                   # the driver alone: cpu, long, wall below
    python bench/simulation.py cpu --conversations 200 --turns 6

* ``runner`` (issue 21's benchmark): ``conversations`` simulated test cases of
  ``turns`` user messages each (``max_turns``, never ended early), ``-p parallel``,
  through :func:`multiturn_eval.run.run_suites` in a fresh interpreter per run: the
  agent is ``bench.agents:latent`` (a python agent answering after ``latency``), the
  simulated user either the LLM simulator on the real ``anthropic`` SDK against
  ``tests/fakes/anthropic_server.py --responder user-turn --latency L`` in its own
  process (so the server's CPU is not the runner's), or a python simulator answering
  after ``latency`` (``bench.agents:talking_user``). Every turn also runs one
  response check. Reported: the run phase's wall (first session opened to last
  closed) against ideal = ceil(conversations / parallel) x turns x 2 x latency (each
  turn waits for the simulator, then the agent), and the runner process's CPU in the
  run phase per simulated turn (SDK included for the LLM simulator).

The driver alone (phase 1): what the simulation package adds per simulated turn,
without the case runner, the chat core or HTTP. Fakes stand in for both sides: the agent is an ``async`` function answering at once (or after
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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.backends import ROOT, child_json, fake_server
from bench.judges import SDK_FLOOR
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


# -------------------------------------------------------------- through the runner

API_KEY = "sk-ant-test-key-0123456789"
try:
    import aiohttp  # noqa: F401  (the simulated user's transport when installed; the floor's too)

    TRANSPORT = "aiohttp"
except ImportError:
    TRANSPORT = "httpx"

CHILD = """
import json, os
from multiturn_eval.run import RunOptions, run_suites
options = RunOptions(parallel_test_cases={parallel}, turn_timeout=60, formats=("json",))
outcome = run_suites(["suite.yaml"], options, dict(os.environ))
results = outcome.report.results
turns = [t for r in results for t in r.all_turns()]
print(json.dumps({{
    "run_cpu": outcome.cpu_seconds["run"], "run_wall": outcome.run_seconds,
    "turns": len(turns), "simulated": sum(t.source == "simulated" for t in turns),
    "passed": sum(t.passed for t in turns),
    "outcomes": sorted({{r.simulation.outcome for r in results if r.simulation}}),
    "errors": sorted({{e for r in results for e in r.errors}})[:3],
}}))
"""


USER_SETUP = """
from multiturn_eval import ConversationMessage
from multiturn_eval.simulation.llm import SYSTEM, user_turn_schema
from multiturn_eval.simulation.prompt import packaged_template, render
TOOL = {{"name": "user_turn", "description": "x", "input_schema": user_turn_schema()}}
EXTRA = {{"system": SYSTEM, "extra_body": {{"temperature": 0}}}}
SAID = [ConversationMessage(role="user", text="my order is W123"),
        ConversationMessage(role="agent", text="The difference is 25587.")] * 3
def prompts(n):
    return [render(packaged_template(), goal="{goal} " + str(i), persona=None,
        known={{"order_id": "W123"}}, unknown=[], conversation=SAID[: 2 * (i % 6)])
        for i in range(n)]
"""
"""The simulated user's requests for :data:`bench.judges.SDK_FLOOR` (the prompt sizes of a
6-message conversation's steps)."""


def write_suite(path: Path, n: int, turns: int, latency: float, simulator: str, url: str) -> None:
    if simulator == "python":
        user_simulator = "{backend: python, factory: bench.agents:talking_user}"
    else:
        user_simulator = f"{{backend: anthropic, model: claude-haiku-4-5, base_url: '{url}'}}"
    lines = [
        "agent:",
        "  backend: python",
        "  factory: bench.agents:latent",
        f"  options: {{latency: {latency}}}",
        f"user_simulator: {user_simulator}",
        "evaluations:",
        "- {type: standard, metric: not_contains, name: polite, value: [stupid, idiot]}",
        "test_cases:",
    ]
    for i in range(n):
        lines += [
            f"- name: conversation {i}",
            f"  context: {{latency: {latency}}}",
            "  user:",
            f"    goal: {GOAL}",
            "    persona: Impatient and terse; writes in lowercase.",
            "    known: {order_id: W123, email: mia@example.com, customer_id: C100}",
            '    unknown: ["the card\'s last four digits"]',
            f"    max_turns: {turns}",
            "    require_goal: false",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def runner(args: argparse.Namespace) -> None:
    n, turns, latency, parallel = args.conversations, args.turns, args.latency, args.parallel
    ideal = math.ceil(n / parallel) * turns * 2 * latency
    for simulator in ["anthropic", "python"] if args.simulator == "both" else [args.simulator]:
        command = (
            None
            if simulator == "python"
            else [
                sys.executable,
                "-m",
                "tests.fakes.anthropic_server",
                "--responder",
                "user-turn",
                "--latency",
                str(latency),
            ]
        )
        runs = []
        with fake_server(command) as url, tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            write_suite(work / "suite.yaml", n, turns, latency, simulator, url)
            # this checkout's runner, whatever the environment has installed
            path = os.pathsep.join([str(ROOT), str(ROOT / "runner")])
            env = {**os.environ, "PYTHONPATH": path, "ANTHROPIC_API_KEY": API_KEY}
            floors = []
            for _ in range(args.repeats):
                got = child_json(CHILD.format(parallel=parallel), env, work, f"{simulator}: ")
                if got["simulated"] != n * turns or got["errors"]:
                    raise SystemExit(f"{simulator}: unexpected run: {got}")
                runs.append(got)
                if simulator == "anthropic":
                    setup = USER_SETUP.format(goal=GOAL)
                    code = SDK_FLOOR.format(
                        setup=setup, calls=n * turns, parallel=parallel, transport=TRANSPORT
                    )
                    floor = child_json(code, {**env, "ANTHROPIC_BASE_URL": url}, work, "floor: ")
                    floors.append(floor["cpu"] / (n * turns) * 1000)
        walls = [r["run_wall"] for r in runs]
        cpus = [r["run_cpu"] / r["simulated"] * 1000 for r in runs]
        wall = statistics.median(walls)
        print(
            f"runner, {simulator} simulator: {n} conversations x {turns} turns, -p {parallel}, "
            f"{latency * 1000:g} ms agent + {latency * 1000:g} ms simulator: wall "
            f"{wall:.3f} s (median of {len(runs)}; {', '.join(f'{w:.3f}' for w in walls)}), "
            f"ideal {ideal:.3f} s, wall / ideal {wall / ideal:.3f}; runner CPU per simulated "
            f"turn {statistics.median(cpus):.3f} ms ({', '.join(f'{c:.3f}' for c in cpus)}); "
            f"outcomes {runs[0]['outcomes']}; load {os.getloadavg()[0]:.1f}"
        )
        if floors:
            cpu = statistics.median(cpus)
            floor = statistics.median(floors)
            print(
                f"  SDK floor ({TRANSPORT}): bare AsyncAnthropic user_turn requests, "
                f"{parallel} at a time, client CPU per request {floor:.3f} ms "
                f"({', '.join(f'{f:.3f}' for f in floors)}); the runner's own share per simulated "
                f"turn {cpu - floor:.3f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "cpu", "long", "wall", "runner"]
    )
    parser.add_argument("--simulator", choices=["both", "anthropic", "python"], default="both")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.what == "runner":
        runner(args)
        return
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
