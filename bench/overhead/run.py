"""Side-by-side overhead of the agent backends on one workload (issue 14).

    python -m bench.overhead.run                       # everything: 4 backends x 2 latencies x tools on/off, median of 3
    python -m bench.overhead.run --backends openai anthropic --latency 0.05 --tools on --repeats 1
    python -m bench.overhead.run --per-turn            # runner CPU per request at turn 1 .. 6

Workload (:mod:`bench.overhead.workload`): 100 ConvFinQA dialogues drawn with a
fixed seed from the dev split, all-numeric answers, ground truth
``executed_answers``. Each run is the real CLI as a subprocess,
``multiturn-eval run suite.yaml -p 8 --format json``, against a fake server in
its own process (:mod:`bench.overhead.server`, OpenAI Chat Completions for
``openai`` and ``semantic-kernel`` with ``service: openai``, the Messages API
for ``anthropic``) that answers from the workload after ``latency`` and checks
every request's history; ``python`` is an agent answering from the workload
with the same latency per "request" (:mod:`bench.overhead.agent`). With tools,
every turn is a tool call (``calculate(program)``, run by the runner) and the
answer: two sequential requests per turn; without, one.

Measured per run, reported as the median of ``--repeats``:

* **wall / ideal**: the run phase (``report.json`` ``run.duration_ms``) over the
  ideal ``mean sequential requests per dialogue x latency x ceil(100 / 8)``;
* **CPU/request**: the runner process's CPU time (user + system, read from
  ``/proc/PID/stat`` by the server as each request arrives; the server's own
  CPU is not counted) from the request at 10% of the run to the last one,
  divided by the requests in between: the steady state, grading included; and
  **CPU/request from the first**: its CPU (from ``wait4``) from the first
  model request to its exit over all requests (one-time costs after the first
  request, such as lazy imports and the reports, included);
* **peak RSS** of the runner process (``ru_maxrss``);
* **start to first request**: from just before the CLI process is spawned to
  the first model request reaching the server (both on the system-wide
  monotonic clock).

``--per-turn``: in a fresh interpreter, build the backend once and run the 6
first turns of every all-numeric dev dialogue that has 6 turns, one dialogue
after another against the zero-latency fake, timing the process's CPU around
each ``send`` (the server runs in its own process): CPU per request at turn 1
.. 6, where a backend that re-serialises the whole history grows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.backends import child_json, fake_server  # noqa: E402
from bench.overhead.workload import DIALOGUES, dump, load, long_dialogues, write_suite  # noqa: E402

BACKENDS = ("python", "openai", "semantic-kernel", "anthropic")
PARALLEL = 8
PROTOCOL = {"openai": "openai", "semantic-kernel": "openai", "anthropic": "anthropic"}


def cli() -> list[str]:
    script = Path(sys.executable).with_name("multiturn-eval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "multiturn_eval"]


def passed_turns(work: Path, label: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report of the run in ``work`` and its turns; a failed turn ends the benchmark."""
    report: dict[str, Any] = json.loads((work / "out" / "report.json").read_text())
    turns = [t for case in report["results"] for t in case["turns"]]
    failed = [t for t in turns if not t["passed"]]
    if failed:
        raise SystemExit(f"{label}{len(failed)} turns failed: {failed[0]['errors']}")
    return report, turns


def child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "AZURE_", "MULTITURN_EVAL_"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "runner")])  # this checkout's runner
    return env


@contextmanager
def server(protocol: str | None, workload: Path, latency: float) -> Iterator[str]:
    command = None
    if protocol is not None:
        command = [
            *(sys.executable, "-m", "bench.overhead.server", "--protocol", protocol),
            *("--workload", str(workload), "--latency", str(latency)),
        ]
    with fake_server(command, env=child_env()) as url:
        yield url


def control(url: str, path: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(
        url + path, method=method, data=b"" if method == "POST" else None
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def one_run(
    backend: str, workload: Path, latency: float, tools: bool, dialogues: int
) -> dict[str, float]:
    protocol = PROTOCOL.get(backend)
    with tempfile.TemporaryDirectory() as tmp, server(protocol, workload, latency) as url:
        work = Path(tmp)
        stats_file = work / "agent-stats.json"
        from bench.overhead.workload import read

        write_suite(
            work / "suite.yaml",
            list(read(workload).values()),
            backend,
            url,
            tools=tools,
            latency=latency,
            stats=str(stats_file),
        )
        argv = [*cli(), "run", "suite.yaml", "-p", str(PARALLEL), "--format", "json", "-o", "out"]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=work, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if url:
            control(url, f"/_bench/watch?pid={proc.pid}", "POST")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"{backend}: exit {proc.returncode}\n{err[-2000:]}")
        report, turns = passed_turns(work, f"{backend}: ")
        if url:
            stats = control(url, "/_bench/stats")
            if stats["problem_count"]:
                raise SystemExit(f"{backend}: history problems: {stats['problems']}")
            requests = stats["requests"]
        else:
            stats = json.loads(stats_file.read_text())
            requests = len(turns) * (2 if tools else 1)
    cpu = usage.ru_utime + usage.ru_stime
    cpu_at_first = stats["cpu_at_first"]
    # steady state: from the request at 10% of the run to the last one (one-time costs such
    # as lazy imports on the first requests, grading of the last turns and the reports after
    # the last request are left out)
    samples = [c for c in stats.get("cpu") or [] if c is not None]
    start = len(samples) // 10
    steady = (
        (samples[-1] - samples[start]) / (len(samples) - 1 - start) * 1000
        if len(samples) > start + 1
        else math.nan
    )
    ideal = requests / dialogues * latency * math.ceil(dialogues / PARALLEL)
    wall = report["run"]["duration_ms"] / 1000
    return {
        "wall": wall,
        "ratio": wall / ideal if ideal else math.nan,
        "cpu_per_request_ms": steady,
        "cpu_after_first_ms": (cpu - cpu_at_first) / requests * 1000
        if cpu_at_first is not None
        else math.nan,
        "rss_mb": usage.ru_maxrss / 1024,
        "first_request_s": stats["first_request"] - started,
        "requests": requests,
        "turns": len(turns),
        "cpu_total": cpu,
    }


PER_TURN = """
import asyncio, json, os, sys, time
from pathlib import Path
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.backends.base import create_backend
from multiturn_eval.case_runner import case_context
from multiturn_eval.environment import RunEnvironment

loaded = load_suite(Path("suite.yaml"), env={{}})
backend = create_backend(loaded, RunSettings(parallel_test_cases=1, turn_timeout=60))
turns = {turns}

async def main():
    cpu = [[] for _ in range(turns)]
    for i, case in enumerate(loaded.suite.test_cases):
        session = await backend.open_session(case_context(loaded, i))
        for t, turn in enumerate(case.effective_turns()):
            before = time.process_time()
            reply = await session.send(turn.input)
            cpu[t].append(time.process_time() - before)
            assert reply.response == turn.ground_truth, (reply.response, turn.ground_truth)
        await session.close()
    await backend.aclose()
    print(json.dumps(cpu))

asyncio.run(main())
"""


def per_turn(backends: Sequence[str], tools: bool, turns: int = 6) -> None:
    chosen = long_dialogues(turns)
    print(
        f"\nRunner CPU per model request by turn: the {len(chosen)} all-numeric dev dialogues "
        f"with >= {turns} turns, their first {turns} turns, one at a time, zero latency, "
        f"tools {'on' if tools else 'off'} (ms, median over dialogues)\n"
    )
    print("| backend | " + " | ".join(f"turn {t + 1}" for t in range(turns)) + " |")
    print("|---|" + "---:|" * turns)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        workload = work / "workload.json"
        dump(chosen, workload)
        for backend in backends:
            if backend == "python":
                continue
            with server(PROTOCOL[backend], workload, 0.0) as url:
                write_suite(work / "suite.yaml", chosen, backend, url, tools=tools, latency=0)
                cpu = child_json(
                    PER_TURN.format(turns=turns), child_env(), cwd=work, what=f"{backend}: "
                )
            per_request = 2 if tools else 1
            cells = [
                f"{statistics.median(c) / per_request * 1000:.2f}"
                for c in cpu  # skip none
            ]
            print(f"| {backend} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--latency", type=float, nargs="*", default=[0.0, 0.05])
    parser.add_argument("--tools", nargs="*", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-turn", action="store_true", help="CPU per request at turn 1..6")
    args = parser.parse_args()
    if args.per_turn:
        for tools in args.tools:
            per_turn(args.backends, tools == "on")
        return
    dialogues = load()
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "workload.json"
        dump(dialogues, workload)
        turns = sum(len(d.questions) for d in dialogues)
        print(
            f"{len(dialogues)} ConvFinQA dialogues ({turns} turns), -p {PARALLEL}, "
            f"median of {args.repeats}\n"
        )
        print(
            "| tools | latency | backend | wall | wall / ideal | CPU/request | CPU/request from "
            "the first | peak RSS | start to 1st request |"
        )
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for tools in args.tools:
            for latency in args.latency:
                for backend in args.backends:
                    runs = [
                        one_run(backend, workload, latency, tools == "on", DIALOGUES)
                        for _ in range(args.repeats)
                    ]

                    def med(key: str, runs: list[dict[str, float]] = runs) -> float:
                        return statistics.median(r[key] for r in runs)

                    ratio = med("ratio")
                    print(
                        f"| {tools} | {latency * 1000:.0f} ms | {backend} | {med('wall'):.2f} s | "
                        + ("-" if math.isnan(ratio) else f"{ratio:.2f}x")
                        + f" | {med('cpu_per_request_ms'):.2f} ms | "
                        f"{med('cpu_after_first_ms'):.2f} ms | {med('rss_mb'):.0f} MB | "
                        f"{med('first_request_s'):.2f} s |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
