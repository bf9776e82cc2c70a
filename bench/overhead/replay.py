"""Replaying the ``bench/overhead`` workload from fixtures, through the whole CLI (issue 20).

    python -m bench.overhead.replay                        # 3 chat backends x tools off/on, median of 3
    python -m bench.overhead.replay --backends anthropic --tools on --repeats 5

The workload of :mod:`bench.overhead.run` (100 ConvFinQA dialogues, 352 turns,
``-p 8``): for each chat backend (``anthropic``, ``openai``, ``semantic-kernel``)
and tools off / on, the suite is run once with ``--fixtures record`` against the
zero-latency fake server (its own process), the server is stopped, and the suite
is run ``--repeats`` times with ``--fixtures replay``, with no API key in the
suite or the environment (the real CLI as a subprocess each time; every turn must
pass and every call be replayed). The baseline is the ``python`` backend's
offline run of the same dialogues (``bench/overhead/agent.py`` answering from the
workload at zero latency: no model, no fixtures), the same way.

Measured per run, the median of ``--repeats``:

* **wall**: the CLI process, from spawn to exit (start-up, imports, loading the
  suite and the fixtures, the run, the report);
* **run phase**: ``report.json`` ``run.duration_ms`` (from the first test case
  started to the last finished);
* **CPU**: the process's user + system time (``wait4``), and its peak RSS;
* **fixture bytes per turn**: the recorded files' size over the turns.

"Where the time goes" times, in fresh interpreters, what a replay pays that the
``python`` backend does not: importing the SDK (``import anthropic`` / ``openai``
/ ``semantic_kernel`` after ``multiturn_eval.cli``) and building the backend.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.overhead.run import PARALLEL, PROTOCOL, child_env, cli, passed_turns, server  # noqa: E402
from bench.overhead.workload import workload_file, write_suite  # noqa: E402

BACKENDS = ("anthropic", "openai", "semantic-kernel")
SDK = {"anthropic": "anthropic", "openai": "openai", "semantic-kernel": "semantic_kernel"}


def run_cli(work: Path, *extra: str) -> dict[str, Any]:
    """One ``multiturn-eval run suite.yaml -p 8 --format json`` in ``work``: its figures."""
    argv = [*cli(), "run", "suite.yaml", "-p", str(PARALLEL), "--format", "json", "-o", "out"]
    started = time.monotonic()
    proc = subprocess.Popen(
        [*argv, *extra],
        cwd=work,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if code != 0:
        raise SystemExit(f"exit {code} ({' '.join(extra)}):\n{err[-2000:]}")
    report, turns = passed_turns(work)
    return {
        "wall": wall,
        "run": report["run"]["duration_ms"] / 1000,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "turns": len(turns),
        "fixtures": report["run"].get("fixtures"),
    }


def median(runs: Sequence[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def baseline(
    workload: Path, dialogues: list[Any], tools: bool, repeats: int
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_suite(
            work / "suite.yaml",
            dialogues,
            "python",
            "",
            tools=tools,
            latency=0.0,
            stats=str(work / "s.json"),
        )
        return [run_cli(work) for _ in range(repeats)]


def replayed(
    backend: str, workload: Path, dialogues: list[Any], tools: bool, repeats: int
) -> tuple[list[dict[str, Any]], int]:
    """(the replay runs, the fixtures' bytes) of ``backend``: recorded once, then replayed."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with server(PROTOCOL[backend], workload, 0.0) as url:
            write_suite(work / "suite.yaml", dialogues, backend, url, tools=tools, latency=0.0)
            recorded = run_cli(work, "--fixtures", "record")
        fixtures = recorded["fixtures"]
        assert fixtures is not None and fixtures["written"] == len(dialogues), fixtures
        size = sum(p.stat().st_size for p in (work / "fixtures" / "suite").glob("*.jsonl"))
        # the server is gone; the suite names no key (the base URL stays: it shapes requests)
        suite = work / "suite.yaml"
        text = suite.read_text()
        suite.write_text("\n".join(line for line in text.split("\n") if "api_key:" not in line))
        runs = [run_cli(work, "--fixtures", "replay") for _ in range(repeats)]
        for r in runs:
            f = r["fixtures"]
            assert f["missed"] == 0 and f["recorded"] == 0 and f["replayed"] > 0, f
    return runs, size


IMPORTS = """
import time
t0 = time.perf_counter()
import multiturn_eval.cli
t1 = time.perf_counter()
import {sdk}
t2 = time.perf_counter()
print(f"{{t1 - t0:.3f}} {{t2 - t1:.3f}}")
"""


def import_times(backend: str, repeats: int) -> tuple[float, float]:
    """(importing the CLI, then importing the backend's SDK), seconds, median in fresh
    interpreters."""
    cli_s, sdk_s = [], []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", IMPORTS.format(sdk=SDK[backend])],
            env=child_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        cli_s.append(float(out[0]))
        sdk_s.append(float(out[1]))
    return statistics.median(cli_s), statistics.median(sdk_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--tools", nargs="*", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with workload_file() as (dialogues, workload):
        print(
            f"{len(dialogues)} ConvFinQA dialogues, -p {PARALLEL}, median of {args.repeats}; "
            "replay: no key, the fake server stopped\n"
        )
        print(
            "| tools | run | wall | wall / python | run phase | CPU | peak RSS | "
            "fixture bytes per turn |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for tools in args.tools:
            on = tools == "on"
            base = baseline(workload, dialogues, on, args.repeats)
            base_wall = median(base, "wall")
            print(
                f"| {tools} | python, offline | {base_wall:.2f} s | 1.00x | "
                f"{median(base, 'run'):.2f} s | {median(base, 'cpu'):.2f} s | "
                f"{median(base, 'rss_mb'):.0f} MB | - |",
                flush=True,
            )
            for backend in args.backends:
                runs, size = replayed(backend, workload, dialogues, on, args.repeats)
                wall = median(runs, "wall")
                print(
                    f"| {tools} | {backend}, replay | {wall:.2f} s | {wall / base_wall:.2f}x | "
                    f"{median(runs, 'run'):.2f} s | {median(runs, 'cpu'):.2f} s | "
                    f"{median(runs, 'rss_mb'):.0f} MB | {size / runs[0]['turns']:,.0f} |",
                    flush=True,
                )
    print("\nWhere a replay's extra time goes (fresh interpreters, median):\n")
    print("| backend | import multiturn_eval.cli | then import the SDK |")
    print("|---|---:|---:|")
    for backend in args.backends:
        cli_s, sdk_s = import_times(backend, args.repeats)
        print(f"| {backend} | {cli_s:.2f} s | {sdk_s:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
