"""Core runner benchmarks (numbers go in bench/README.md; nothing here is asserted in tests).

    python bench/core.py overhead   # 1,000 cases x 4 turns, zero-latency agent, all reports
    python bench/core.py scaling    # 256 cases x 4 turns at 50 ms/turn, -p 8/32/128; 16 at -p 1
    python bench/core.py validate   # `multiturn-eval validate` on a 1,000-case suite
    python bench/core.py version    # `multiturn-eval --version`
    python bench/core.py compare --old-root DIR   # overhead, an older checkout vs this one
    python bench/core.py all

Run from the repository root with the project's virtual environment.
"""

from __future__ import annotations

import argparse
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


def write_jsonl_suite(path: Path, cases: int, turns: int, factory: str) -> Path:
    """The cases of :func:`write_suite` as JSON Lines beside a suite that names them
    (``test_cases_file:``); returns the JSON Lines file."""
    import json

    lines = path.with_suffix(".jsonl")
    path.write_text(
        "\n".join(
            [
                "agent:",
                "  backend: python",
                f"  factory: {factory}",
                "  options: {latency: 0.0}",
                "evaluations:",
                "  - {type: standard, metric: numeric, absolute_tolerance: 0.5}",
                "  - {type: standard, metric: equality, name: exact, strip_whitespace: true}",
                f"test_cases_file: {lines.name}",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    turn = [
        {
            "input": "",
            "ground_truth": "25587",
            "expected_tools": [
                {"name": "subtract", "args": {"a": {"fuzzy": "206,588"}, "b": 181001}}
            ],
        }
    ]
    with lines.open("w", encoding="utf-8") as handle:
        for c in range(cases):
            case_turns = [
                {**turn[0], "input": f"what is the difference in year {t}?"} for t in range(turns)
            ]
            case = {"name": f"case-{c:04d}", "tags": ["bench"], "turns": case_turns}
            handle.write(json.dumps(case) + "\n")
    return lines


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(
    args: list[str], cwd: Path, pythonpath: str | None = None
) -> tuple[float, float, int, int]:
    """(wall s, CPU s, exit code, peak RSS KB) of one CLI process."""
    env = {**os.environ, "PYTHONPATH": pythonpath or str(ROOT)}
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
    """Start-up, the whole run_suites call and each report's rendering, timed in-process."""
    sys.path.insert(0, str(ROOT))
    os.chdir(work)
    t0 = time.process_time()
    from multiturn_eval.reports.writer import RENDERERS, render_reports
    from multiturn_eval.run import RunOptions, run_suites
    from multiturn_eval.secrets import Redactor

    t1 = time.process_time()
    outcome = run_suites(["suite.yaml"], RunOptions(report_dir="phases"), {})
    t2 = time.process_time()
    timings = {}
    for fmt in RENDERERS:
        f0 = time.process_time()
        for _ in render_reports(outcome.report, [fmt], Redactor()):
            pass
        timings[fmt] = time.process_time() - f0
    print(
        f"  phases (CPU): imports {t1 - t0:.3f} s, run_suites (load, run, all reports) "
        f"{t2 - t1:.3f} s ({(t2 - t1) / 4:.3f} ms/turn); rendering alone: "
        f"{', '.join(f'{k} {v:.3f}' for k, v in timings.items())}"
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
import sys
sys.path.insert(0, {str(ROOT)!r})
from multiturn_eval.run import RunOptions, run_suites
outcome = run_suites(["suite.yaml"], RunOptions(parallel_test_cases={parallel}, formats=("json",)), {{}})
assert outcome.report.run.complete
assert outcome.max_in_flight == min({parallel}, len(outcome.report.results))
print(outcome.run_seconds)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=work, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def compare(old_root: Path, repeats: int = 5) -> None:
    """The overhead workload on an older checkout and on this one, interleaved: CPU ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_suite(work / "suite.yaml", 1000, 4, "bench.agents:instant")
        cpu: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(repeats):
            for label, root in (("old", old_root), ("new", ROOT)):
                env_path = os.pathsep.join([str(root / "runner"), str(ROOT)])
                cpu[label].append(
                    run_cli(["run", "suite.yaml", "-q", "-o", "out"], work, env_path)[1]
                )
        old, new = statistics.median(cpu["old"]), statistics.median(cpu["new"])
        print(f"compare: 1,000 cases x 4 turns, all reports, median of {repeats} interleaved runs")
        print(
            f"  old {old:.2f} s CPU ({old / 4:.3f} ms/turn), new {new:.2f} s CPU ({new / 4:.3f} ms/turn)"
        )
        print(f"  new / old: {new / old:.3f}")


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
    parser.add_argument(
        "which", choices=["overhead", "scaling", "validate", "version", "compare", "all"]
    )
    parser.add_argument("--old-root", type=Path, help="for compare: an older checkout")
    options = parser.parse_args()
    which = options.which
    if which == "compare":
        if options.old_root is None:
            parser.error("compare needs --old-root")
        compare(options.old_root)
        return
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
