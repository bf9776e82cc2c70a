"""Load harness: does the run stay linear in the number of test cases?

    python bench/reliability/load.py                 # 1k, 10k, 50k cases x 6 turns, -p 256
    python bench/reliability/load.py --sizes 1000,3000 --quick
    python bench/reliability/load.py --old-root /path/to/an/old/checkout   # old vs new, one run
    python bench/reliability/load.py --jsonl         # the cases from a JSON Lines file
    python bench/reliability/load.py --jsonl --validate   # `validate` alone, no run
    python bench/reliability/load.py --jsonl --slope 1000,5000 -p 16   # CI: fails above 3 KiB a case

Each size runs ``multiturn-eval run`` in a fresh process (zero-latency python
agent, two evaluators and one tool assertion per turn, all four reports) and
reports CPU per turn, wall time, peak RSS, exit code, and whether report.json
holds every case. The figures go in bench/reliability/README.md. ``--quick``
(what CI runs through tests/test_reliability_harnesses.py) uses small sizes and
checks only that every run completes with every case reported: timings are
never asserted.

``--slope A,B`` runs sizes A and B only and fails (exit 1) when the peak RSS
per case between them, (RSS(B) - RSS(A)) / (B - A), is above 3 KiB: the
memory of a run must not grow with its test cases (issue 23; ``.ci/run``).

``--jsonl`` puts the same cases in a JSON Lines file the suite names
(``test_cases_file:``) instead of one YAML document; ``--validate`` measures
``multiturn-eval validate`` of the suite (loading and checking every case, no
run, no reports) instead of a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.core import write_jsonl_suite, write_suite  # noqa: E402

TURNS = 6
#: ``--slope``: the most peak RSS a test case may add (issue 23: under 3 KB a case)
SLOPE_LIMIT = 3 * 1024

#: measures one CLI run from a wrapper process, so peak RSS is that run's own
_WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "wall": wall, "cpu": u.ru_utime + u.ru_stime, "rss_kb": u.ru_maxrss}))
"""


def measure(
    cases: int,
    parallel: int,
    runner_root: Path,
    work: Path,
    *,
    jsonl: bool = False,
    validate: bool = False,
) -> dict[str, float]:
    suite = work / f"suite-{cases}{'-jsonl' if jsonl else ''}.yaml"
    if not suite.exists():
        if jsonl:
            write_jsonl_suite(suite, cases, TURNS, "bench.agents:instant")
        else:
            write_suite(suite, cases, TURNS, "bench.agents:instant")
    out = work / f"out-{cases}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(runner_root / "runner"), str(ROOT)]),
    }
    command = (
        ["validate", str(suite)] if validate else ["run", str(suite), "-q", "-p", str(parallel)]
    )
    cmd = [sys.executable, "-m", "multiturn_eval", *command]
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *cmd, *([] if validate else ["-o", str(out)])],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    row: dict[str, float] = json.loads(proc.stdout)
    row["cpu_ms_per_turn"] = row["cpu"] / (cases * TURNS) * 1000
    if validate:
        row["reported"], row["complete"] = cases, float(row["code"] == 0)
        return row
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    row["reported"] = len(report["results"])
    row["complete"] = float(report["run"]["complete"])
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("-p", "--parallel", type=int, default=256)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI")
    parser.add_argument("--old-root", type=Path, help="a checkout to compare with (ratio)")
    parser.add_argument("--jsonl", action="store_true", help="the cases in a JSON Lines file")
    parser.add_argument("--validate", action="store_true", help="measure validate, not a run")
    parser.add_argument(
        "--slope", metavar="A,B", help=f"sizes A and B; fail above {SLOPE_LIMIT:,} bytes a case"
    )
    args = parser.parse_args()
    sizes = [300, 1200] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.slope:
        sizes = [int(s) for s in args.slope.split(",")]
    roots = [("new", ROOT)] + ([("old", args.old_root)] if args.old_root else [])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = "a JSON Lines file" if args.jsonl else "one YAML suite"
        what = (
            "validate" if args.validate else f"run, -p {args.parallel}, zero-latency python agent"
        )
        print(f"load: N cases x {TURNS} turns from {source}; {what}")
        print("| runner | cases | wall s | CPU ms/turn | peak RSS MiB | exit | reported |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        results: dict[str, list[float]] = {}
        rss: dict[str, list[tuple[int, float]]] = {}
        for cases in sizes:
            for label, root in roots:
                row = measure(
                    cases, args.parallel, root, work, jsonl=args.jsonl, validate=args.validate
                )
                ok = row["code"] in (0, 1) and row["reported"] == cases and row["complete"]
                failures += not ok
                results.setdefault(label, []).append(row["cpu_ms_per_turn"])
                rss.setdefault(label, []).append((cases, row["rss_kb"]))
                print(
                    f"| {label} | {cases:,} | {row['wall']:.1f} | {row['cpu_ms_per_turn']:.3f} | "
                    f"{row['rss_kb'] / 1024:.0f} | {int(row['code'])} | "
                    f"{int(row['reported']):,}{'' if ok else ' (INCOMPLETE)'} |",
                    flush=True,
                )
        new = results["new"]
        if not args.validate:  # validate is mostly start-up at these sizes: no per-turn figure
            print(f"CPU per turn, largest / smallest size: {max(new) / min(new):.2f}x")
        (small, low), (large, high) = rss["new"][0], rss["new"][-1]
        if large > small:
            slope = (high - low) / (large - small) * 1024
            print(f"peak RSS per case, {small:,} to {large:,}: {slope:,.0f} bytes")
            if args.slope and slope > SLOPE_LIMIT:
                print(f"FAIL: above {SLOPE_LIMIT:,} bytes a case: the run holds its results")
                failures += 1
        if "old" in results:
            ratios = [n / o for n, o in zip(new, results["old"], strict=True)]
            print("new / old CPU per turn: " + ", ".join(f"{r:.2f}" for r in ratios))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
