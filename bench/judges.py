"""LLM-judge overhead: 500 judged turns against a fake Anthropic judge with 50 ms latency.

    python bench/judges.py                         # 125 cases x 4 turns, -p 16, 50 ms, 3 runs
    python bench/judges.py --cases 50 --turns 2 --latency 0.02 --repeats 1

The agent is the instant python agent (``bench.agents:instant``: no latency, no
HTTP); every turn has one ``type: judge`` evaluation whose judge is
``tests/fakes/anthropic_server.py --responder judge-pass --latency L`` run as its
own process (its CPU is not the runner's). Every turn's input differs, so every
judge request differs and none is de-duplicated: ``cases x turns`` judge calls.

Per run, in a fresh interpreter (as ``bench/backends.py`` does), it reports

* wall: the run phase (first session opened to last closed), against
  ideal = ceil(cases / p) x turns x latency: each worker runs its cases one after
  the other and each turn waits for one judge call; the agent adds nothing. With
  cases a multiple of p this is ceil(calls / p) x latency, the brief's ideal;
* CPU ms per judge call: the runner process's CPU during the run phase with
  judges, minus the same suite's run phase without the judge evaluation (the
  agent and the rest of the runner), divided by the judge calls; and the whole
  run phase's CPU per call, for comparison.

* SDK floor: the same number of bare ``AsyncAnthropic`` Messages requests (same
  prompt size, the same forced tool, the judge's transport: aiohttp when installed,
  ``p`` at a time, no runner), their client CPU
  per request: what the ``anthropic`` SDK and ``httpx`` cost on this machine right
  now, so the runner's own share is the difference.

Numbers go in ``bench/README.md`` ("LLM judges"); nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.backends import ROOT, child_json, fake_server

API_KEY = "sk-ant-test-key-0123456789"

CHILD = """
import json, os
from multiturn_eval.run import RunOptions, run_suites
options = RunOptions(parallel_test_cases={parallel}, turn_timeout=60, formats=("json",))
outcome = run_suites(["suite.yaml"], options, dict(os.environ))
turns = [t for r in outcome.report.results for t in r.all_turns()]
judge = outcome.report.summary.judge_token_usage
print(json.dumps({{
    "run_cpu": outcome.cpu_seconds["run"], "run_wall": outcome.run_seconds,
    "turns": len(turns), "passed": sum(t.passed for t in turns),
    "judge_tokens": judge.total_tokens if judge else 0,
    "errors": sorted({{e for t in turns for e in t.errors}})[:3]
    + sorted({{m.error for t in turns for m in t.metric_results if m.error}})[:3],
}}))
"""


SDK_FLOOR = """
import asyncio, json, os, time
import anthropic
{setup}

async def main():
    http = anthropic.DefaultAioHttpClient() if "{transport}" == "aiohttp" else None
    client = anthropic.AsyncAnthropic(api_key=os.environ["ANTHROPIC_API_KEY"],
        base_url=os.environ["ANTHROPIC_BASE_URL"], max_retries=0, http_client=http)
    queue = asyncio.Queue()
    for prompt in prompts({calls}):
        queue.put_nowait(prompt)
    async def worker():
        while not queue.empty():
            prompt = queue.get_nowait()
            raw = await client.messages.with_raw_response.create(model="claude-haiku-4-5",
                max_tokens=1024, messages=[{{"role": "user", "content": prompt}}], tools=[TOOL],
                tool_choice={{"type": "tool", "name": TOOL["name"]}}, **EXTRA)
            json.loads(raw.http_response.content)
    await client.messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=10,
        messages=[{{"role": "user", "content": "warm up"}}])
    t0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range({parallel})))
    print(json.dumps({{"cpu": time.process_time() - t0, "wall": time.perf_counter() - w0}}))

asyncio.run(main())
"""
"""Bare ``AsyncAnthropic`` requests of one forced tool, ``parallel`` at a time: the SDK's own
client CPU per request. ``setup`` defines ``TOOL``, ``EXTRA`` (more keywords of
``create``) and ``prompts(n)``."""

JUDGE_SETUP = """
from multiturn_eval.grading.judges.prompt import packaged_template, render
from multiturn_eval.grading.judges.verdict import verdict_schema
TOOL = {"name": "record_verdict", "description": "x", "input_schema": verdict_schema("pass_fail")}
EXTRA = {}
def prompts(n):
    return [render(packaged_template(), rubric="The reply states the difference.",
        scale="pass_fail", input=f"what is the difference, take {i}?",
        reply="The difference is 25587.") for i in range(n)]
"""


def judge_env(url: str) -> dict[str, str]:
    """The child's environment: the repository importable, the fake judge as Anthropic."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),  # this checkout's
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": url,
    }


def sdk_floor(calls: int, parallel: int, url: str, transport: str) -> dict[str, float]:
    data: dict[str, float] = child_json(
        SDK_FLOOR.format(setup=JUDGE_SETUP, calls=calls, parallel=parallel, transport=transport),
        judge_env(url),
    )
    return data


def write_suite(path: Path, cases: int, turns: int, judged: bool) -> None:
    lines = ["agent:", "  backend: python", "  factory: bench.agents:instant"]
    if judged:
        lines += [
            "judge: {model: claude-haiku-4-5}",
            "evaluations:",
            "  - {type: judge, rubric: The reply states the difference as a number.}",
        ]
    lines.append("test_cases:")
    for c in range(cases):
        lines += [f"  - name: case-{c:04d}", "    turns:"]
        lines += [
            f"      - input: what is the difference, case {c} take {t}?" for t in range(turns)
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def measure(cases: int, turns: int, parallel: int, url: str, judged: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_suite(work / "suite.yaml", cases, turns, judged)
        data: dict[str, float] = child_json(
            CHILD.format(parallel=parallel), judge_env(url), cwd=work
        )
    if data["passed"] != data["turns"]:
        raise SystemExit(f"only {data['passed']}/{data['turns']} turns passed: {data['errors']}")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=125)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("-p", "--parallel", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05, help="the judge's seconds per call")
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs")
    args = parser.parse_args()
    calls = args.cases * args.turns
    try:
        import aiohttp  # noqa: F401  (the judge's transport when installed; the floor's too)

        transport = "aiohttp"
    except ImportError:
        transport = "httpx"
    ideal = math.ceil(args.cases / args.parallel) * args.turns * args.latency
    command = [
        sys.executable,
        "-m",
        "tests.fakes.anthropic_server",
        "--responder",
        "judge-pass",
        "--latency",
        str(args.latency),
    ]
    with fake_server(command) as url:
        runs = []
        for _ in range(args.repeats):
            judged = measure(args.cases, args.turns, args.parallel, url, True)
            if judged["judge_tokens"] != calls * 230:
                raise SystemExit(
                    f"expected {calls} judge calls, got {judged['judge_tokens'] / 230:g}"
                )
            bare = measure(args.cases, args.turns, args.parallel, url, False)
            floor = sdk_floor(calls, args.parallel, url, transport)
            runs.append((judged, bare, floor))
    wall = statistics.median(j["run_wall"] for j, _, _ in runs)
    cpu = statistics.median(j["run_cpu"] for j, _, _ in runs)
    extra = statistics.median(j["run_cpu"] - b["run_cpu"] for j, b, _ in runs)
    floor_cpu = statistics.median(f["cpu"] for _, _, f in runs)
    floor_wall = statistics.median(f["wall"] for _, _, f in runs)
    print(
        f"{args.cases} cases x {args.turns} turns = {calls} judge calls, -p {args.parallel}, "
        f"{args.latency * 1000:g} ms judge latency, median of {args.repeats} runs, "
        f"{transport} transport\n"
    )
    print(
        "| wall | ideal | wall / ideal | judge CPU ms/call | run-phase CPU ms/call "
        "| SDK floor: CPU ms/request, wall |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {wall:.2f} s | {ideal:.2f} s | {wall / ideal:.3f} | {extra / calls * 1000:.2f} | "
        f"{cpu / calls * 1000:.2f} | {floor_cpu / calls * 1000:.2f}, {floor_wall:.2f} s |"
    )
    spread = ", ".join(
        f"{j['run_wall']:.2f} s / {(j['run_cpu'] - b['run_cpu']) / calls * 1000:.2f} ms / "
        f"{f['cpu'] / calls * 1000:.2f} ms"
        for j, b, f in runs
    )
    print(f"\nruns (wall / judge CPU per call / SDK floor per request): {spread}")


if __name__ == "__main__":
    main()
