"""Core runner benchmarks (numbers go in bench/README.md; nothing here is asserted in tests).

    python bench/core.py overhead   # 1,000 cases x 4 turns, zero-latency agent, all reports
    python bench/core.py scaling    # 256 cases x 4 turns at 50 ms/turn, -p 8/32/128; 16 at -p 1
    python bench/core.py validate   # `multiturn-eval validate` on a 1,000-case suite
    python bench/core.py version    # `multiturn-eval --version`
    python bench/core.py all

Run from the repository root with the project's virtual environment.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = [sys.executable, "-m", "multiturn_eval"]


def write_suite(path: Path, cases: int, turns: int, factory: str, latency: float = 0.0) -> None:
    lines = [
        "agent:",
        "  backend: python",
        f"  factory: {factory}",
        f"  options: {{latency: {latency}}}",
        "evaluations:",
        "  - {type: standard, metric: numeric, absolute_tolerance: 0.5}",
        "  - {type: standard, metric: equality, name: exact, strip_whitespace: true}",
        "test_cases:",
    ]
    for c in range(cases):
        lines.append(f"  - name: case-{c:04d}")
        lines.append("    tags: [bench]")
        lines.append("    turns:")
        for t in range(turns):
            lines.append(f"      - input: what is the difference in year {t}?")
            lines.append('        ground_truth: "25587"')
            lines.append("        expected_tools:")
            lines.append("          - {name: subtract, args: {a: {fuzzy: '206,588'}, b: 181001}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(args: list[str], cwd: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, exit code, peak RSS KB) of one CLI process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cpu0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run([*EXE, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, child_cpu() - cpu0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        sys.exit(f"{args}: exit {proc.returncode}\n{proc.stderr}")
    return wall, cpu, proc.returncode, peak


def overhead(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_suite(work / "suite.yaml", 1000, 4, "bench.agents:instant")
        base = [run_cli(["--version"], work)[1] for _ in range(repeats)]
        runs = [run_cli(["run", "suite.yaml", "-q", "-o", "out"], work) for _ in range(repeats)]
        cpu = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[0] for r in runs)
        start = statistics.median(base)
        turns = 4000
        print(
            "overhead: 1,000 cases x 4 turns, zero-latency agent, 2 evaluators + 1 tool assertion per turn"
        )
        print(
            f"  end to end: {wall:.2f} s wall, {cpu:.2f} s CPU -> {cpu / turns * 1000:.3f} ms CPU per turn"
        )
        print(f"  of which interpreter + imports (--version): {start:.2f} s CPU")
        print(f"  excluding start-up: {(cpu - start) / turns * 1000:.3f} ms CPU per turn")
        print(f"  peak RSS: {runs[-1][3] / 1024:.0f} MiB")
        phases(work)


def phases(work: Path) -> None:
    """Start-up, run phase and report writing, timed in-process."""
    sys.path.insert(0, str(ROOT))
    os.chdir(work)
    t0 = time.process_time()
    from multiturn_eval.backends.base import create_backend
    from multiturn_eval.loader import load_suites
    from multiturn_eval.reports.redact import Redactor
    from multiturn_eval.reports.writer import build_report, now_iso, write_reports
    from multiturn_eval.scheduler import PlannedSuite, RunState, Selection, run_plan
    from multiturn_eval.settings import resolve_settings

    t1 = time.process_time()
    suites = load_suites([Path("suite.yaml")], {})
    settings = resolve_settings({}, {})
    plan = [PlannedSuite(s, settings, Selection().select(s)) for s in suites]
    state = RunState(plan=plan)
    backends = [create_backend(p.loaded, p.settings) for p in plan]
    t2 = time.process_time()
    asyncio.run(run_plan(state, backends))
    t3 = time.process_time()
    report = build_report(
        ["suite.yaml"],
        state.final_results(),
        started_at=now_iso(),
        started=time.perf_counter(),
        complete=True,
    )
    t4 = time.process_time()
    timings = {}
    for fmt in ("json", "junit", "markdown", "html"):
        f0 = time.process_time()
        try:
            write_reports(report, Path("phases"), [fmt], Redactor())
        except ModuleNotFoundError:
            continue
        timings[fmt] = time.process_time() - f0
    t5 = time.process_time()
    print(
        f"  phases (CPU): imports {t1 - t0:.3f} s, load+validate {t2 - t1:.3f} s, run {t3 - t2:.3f} s "
        f"({(t3 - t2) / 4:.3f} ms/turn), roll-up {t4 - t3:.3f} s, reports {t5 - t4:.3f} s "
        f"({', '.join(f'{k} {v:.3f}' for k, v in timings.items())})"
    )


def scaling(repeats: int = 3) -> None:
    print(
        "scaling: 50 ms agent latency per turn, 4 turns; run phase = first session opened to last closed"
    )
    print(
        "  (median of 3; sync factory = called in the thread pool, async factory = on the event loop)"
    )
    for cases, parallel in ((16, 1), (256, 8), (256, 32), (256, 128)):
        ideal = math.ceil(cases / parallel) * 4 * 0.05
        row = []
        for factory in ("bench.agents:latent", "bench.agents:latent_async"):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                write_suite(work / "suite.yaml", cases, 4, factory, latency=0.05)
                measured = statistics.median(run_phase(work, parallel) for _ in range(repeats))
            row.append(f"{measured:.3f} s (+{(measured / ideal - 1) * 100:.1f}%)")
        print(
            f"  {cases:>3} cases -p {parallel:<3}: ideal {ideal:.3f} s; sync factory {row[0]}; async factory {row[1]}"
        )


def run_phase(work: Path, parallel: int) -> float:
    code = f"""
import asyncio, sys, time
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from multiturn_eval.backends.base import create_backend
from multiturn_eval.loader import load_suites
from multiturn_eval.scheduler import PlannedSuite, RunState, Selection, run_plan
from multiturn_eval.settings import resolve_settings
suites = load_suites([Path("suite.yaml")], {{}})
settings = resolve_settings({{"parallel_test_cases": {parallel}}}, {{}})
plan = [PlannedSuite(s, settings, Selection().select(s)) for s in suites]
state = RunState(plan=plan)
backends = [create_backend(p.loaded, p.settings) for p in plan]
asyncio.run(run_plan(state, backends))
assert state.complete and state.max_in_flight == min({parallel}, len(plan[0].indices))
print(state.last_session_closed - state.first_session_opened)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=work, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def validate() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_suite(work / "suite.yaml", 1000, 4, "bench.agents:instant")
        runs = [run_cli(["validate", "suite.yaml"], work) for _ in range(5)]
        print(
            f"validate, 1,000 cases x 4 turns: median {statistics.median(r[0] for r in runs):.3f} s wall "
            f"({statistics.median(r[1] for r in runs):.3f} s CPU)"
        )


def version() -> None:
    runs = [run_cli(["--version"], ROOT) for _ in range(10)]
    print(f"--version: median {statistics.median(r[0] for r in runs):.3f} s wall")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["overhead", "scaling", "validate", "version", "all"])
    which = parser.parse_args().which
    for name, fn in (
        ("version", version),
        ("validate", validate),
        ("scaling", scaling),
        ("overhead", overhead),
    ):
        if which in (name, "all"):
            fn()


if __name__ == "__main__":
    main()
