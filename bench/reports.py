"""CPU time to render each report of a big run (nothing here is asserted in tests).

    python bench/reports.py                  # 1,000 cases x 4 turns, 10% failing
    python bench/reports.py --cases 2000 --fail-every 1 --repeats 3

Builds the report in memory (the same builder the report tests use: every
turn has a tool call, a ground truth and a metric), then renders each format
``repeats`` times and prints the best CPU time (``time.process_time``) per
format, the total, and the total per turn. The runner's overhead budget is
0.3 ms of CPU per turn end to end; rendering the four reports is a small part
of it. Run from the repository root with the project's virtual environment.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reports_fixtures import large_report

from multiturn_eval.reports.writer import RENDERERS, renderer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--fail-every", type=int, default=10, help="every Nth case fails")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    report = large_report(args.cases, args.turns, args.fail_every)
    turns = args.cases * args.turns
    for fmt in RENDERERS:  # warm up: imports, template compilation
        renderer(fmt)(report)
    total = 0.0
    print(f"{args.cases:,} cases x {args.turns} turns, 1 in {args.fail_every} failing")
    for fmt, (name, _) in RENDERERS.items():
        render = renderer(fmt)
        best = float("inf")
        size = 0
        for _ in range(args.repeats):
            start = time.process_time()
            size = len(render(report))
            best = min(best, time.process_time() - start)
        total += best
        print(f"  {name:<12} {best * 1000:8.1f} ms CPU  {size / 1e6:6.2f} MB")
    print(f"  {'all four':<12} {total * 1000:8.1f} ms CPU  ({total * 1e3 / turns:.4f} ms per turn)")


if __name__ == "__main__":
    main()
