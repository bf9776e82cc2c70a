"""Runner overhead per turn on the model backends, against zero-latency fake servers.

    python bench/backends.py                      # every backend, 200 cases x 4 turns, -p 32
    python bench/backends.py anthropic python     # some of them
    python bench/backends.py --cases 50 --repeats 1

Each backend gets the same suite: ``cases`` test cases of ``turns`` turns, each
turn with a numeric ``ground_truth`` and an expected tool with arguments. The
``anthropic`` backend talks to ``tests/fakes/anthropic_server.py`` (responder
``tool-then-answer``: every turn is a ``tool_use`` reply, one Python tool call,
then the answer: two HTTP requests per turn), run as its own process so its
CPU is not counted. The ``python`` backend's agent answers at once with the
same reply (the floor: no HTTP, no SDK).

Per backend, in a fresh interpreter: load the suite, build the backend, run
every case (``-p``), and report

* turns/s: turns divided by the wall time of the run phase;
* CPU ms/turn: the runner process's CPU time (user + system) during the run
  phase, divided by the turns -- everything the runner, the SDK and the HTTP
  client spend per turn, without interpreter start-up, imports and reports;
* start-up: the CPU time of imports, loading and building the backend.

Add a backend by adding a function to ``BACKENDS`` (name -> setup returning the
suite text and, optionally, a fake server command). Numbers go in
``bench/README.md`` ("Backends"); nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setup:
    """What one backend needs: an ``agent:`` block and maybe a fake server to talk to."""

    agent: str
    """The suite's agent block; ``{url}`` is replaced by the fake server's address."""
    server: list[str] | None = None
    """Command that starts the fake server and prints its base URL on the first line."""
    env: dict[str, str] | None = None
    """Environment for the runner process; ``{url}`` is replaced too."""
    ground_truth: str = "25587"
    tool_args: str = "{a: {fuzzy: '206,588'}, b: 181001}"


def python_setup() -> Setup:
    return Setup(agent="agent:\n  backend: python\n  factory: bench.agents:instant\n")


def tool_then_answer(agent: str, server_module: str, env: dict[str, str]) -> Setup:
    """A model backend against a fake server (``server_module``) run with its responder
    ``tool-then-answer``: every turn, one call of subtract(a=1, b=1), then the answer
    "The answer is 0.0." (two HTTP requests per turn)."""
    return Setup(
        agent=agent,
        server=[sys.executable, "-m", server_module, "--responder", "tool-then-answer"],
        env=env,
        ground_truth="0",
        tool_args="{a: 1, b: {fuzzy: '1'}}",
    )


def anthropic_setup() -> Setup:
    return tool_then_answer(
        textwrap.dedent(
            """\
            agent:
              backend: anthropic
              model: claude-haiku-4-5
              instructions: Use the tools for arithmetic.
              tools:
                - function: tests.tool_funcs:subtract
            """
        ),
        "tests.fakes.anthropic_server",
        {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "ANTHROPIC_BASE_URL": "{url}"},
    )


#: backend name -> setup; one function per backend
BACKENDS: dict[str, Callable[[], Setup]] = {
    "python": python_setup,
    "anthropic": anthropic_setup,
}


def write_suite(path: Path, setup: Setup, cases: int, turns: int, url: str) -> None:
    lines = [setup.agent.replace("{url}", url).rstrip("\n")]
    lines += [
        "evaluations:",
        "  - {type: standard, metric: numeric, absolute_tolerance: 0.5}",
        "test_cases:",
    ]
    for c in range(cases):
        lines += [f"  - name: case-{c:04d}", "    turns:"]
        for t in range(turns):
            lines += [
                f"      - input: what is the difference, take {t}?",
                f'        ground_truth: "{setup.ground_truth}"',
                "        expected_tools:",
                f"          - {{name: subtract, args: {setup.tool_args}}}",
            ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@contextmanager
def fake_server(command: list[str] | None, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start a fake server (``command`` prints its base URL first), yield the URL, stop it.

    ``env``: the server's environment (default: this one, with the repository on
    ``PYTHONPATH``). No command: no server, the URL is empty.
    """
    if command is None:
        yield ""
        return
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=dict(env) if env is not None else {**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"fake server did not start: {' '.join(command)}")
        yield url
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=10)


def child_json(code: str, env: Mapping[str, str], cwd: Path | None = None, what: str = "") -> Any:
    """Run ``python -c code`` (a measurement in a fresh interpreter): its last line, as JSON.

    A child that fails ends the benchmark with its stderr (``what`` names it).
    """
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=dict(env), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{what}exit {out.returncode}\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


CHILD = """
import json, os, time
t0 = time.process_time()
from multiturn_eval.run import RunOptions, run_suites
imports = time.process_time() - t0
options = RunOptions(parallel_test_cases={parallel}, turn_timeout=60, formats=("json",))
outcome = run_suites(["suite.yaml"], options, dict(os.environ))
turns = [t for r in outcome.report.results for t in r.all_turns()]
print(json.dumps({{
    "startup_cpu": imports + outcome.cpu_seconds["load"], "run_cpu": outcome.cpu_seconds["run"],
    "run_wall": outcome.run_seconds,
    "turns": len(turns), "passed": sum(t.passed for t in turns),
    "errors": sorted({{e for t in turns for e in t.errors}})[:3],
}}))
"""


def measure(name: str, cases: int, turns: int, parallel: int) -> dict[str, float]:
    setup = BACKENDS[name]()
    with tempfile.TemporaryDirectory() as tmp, fake_server(setup.server) as url:
        work = Path(tmp)
        write_suite(work / "suite.yaml", setup, cases, turns, url)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.update({k: v.replace("{url}", url) for k, v in (setup.env or {}).items()})
        data: dict[str, float] = child_json(
            CHILD.format(parallel=parallel), env, cwd=work, what=f"{name}: "
        )
    if data["passed"] != data["turns"]:
        raise SystemExit(
            f"{name}: only {data['passed']}/{data['turns']} turns passed: {data['errors']}"
        )
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("backends", nargs="*", help=f"any of {', '.join(BACKENDS)} (default: all)")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("-p", "--parallel", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs")
    args = parser.parse_args()
    names = args.backends or list(BACKENDS)
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}")
    print(
        f"{args.cases} cases x {args.turns} turns, -p {args.parallel}, zero-latency fakes, "
        f"median of {args.repeats} runs\n"
    )
    print("| backend | turns/s | CPU ms/turn | run phase | start-up CPU |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        runs = [measure(name, args.cases, args.turns, args.parallel) for _ in range(args.repeats)]
        wall = statistics.median(r["run_wall"] for r in runs)
        cpu = statistics.median(r["run_cpu"] for r in runs)
        startup = statistics.median(r["startup_cpu"] for r in runs)
        n = runs[0]["turns"]
        print(
            f"| {name} | {n / wall:,.0f} | {cpu / n * 1000:.2f} | {wall:.2f} s | {startup:.2f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()
