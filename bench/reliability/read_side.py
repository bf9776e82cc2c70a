"""Read side at N cases: report.json read back, merge, --baseline -- how much is held?

    python bench/reliability/read_side.py                      # 1k, 10k, 50k cases
    python bench/reliability/read_side.py --sizes 1000,10000 --old-root /tmp/main

A real run of the load suite (``bench/reliability/load.py``'s six-turn case, 100
cases) gives the template results; the N-case reports are that report's results
repeated with new indices and names, written one result a line (as a JSON
writer streams them; the reader takes any layout). Each operation runs in a
fresh process, and its peak RSS is that process's own:

- ``read``: :func:`load_report` of an N-case report, then one pass over every
  result (what a streaming writer or ``summarize`` does);
- ``merge``: four shard reports of N/4 cases each merged
  (:func:`merge_reports`: the keys sorted, the summary and run.fixtures
  counted), then one pass over the merged results;
- ``baseline``: :func:`compare` of an N-case report with an N-case baseline
  (1 % renamed, 1 % removed, 1 % added).

The writers are not measured here (``load.py`` measures a run's reports).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.core import write_suite  # noqa: E402

_OPERATION = """
import json, resource, sys, time
from pathlib import Path
from multiturn_eval.reports.reader import load_report
op, files = sys.argv[1], [Path(p) for p in sys.argv[2:]]
t0 = time.perf_counter()
if op == "read":
    report = load_report(files[0])
    shown = sum(1 for r in report.results if r.passed)
elif op == "merge":
    from multiturn_eval.merge import load_shards, merge_reports
    report = merge_reports(load_shards(files))
    shown = sum(1 for r in report.results if r.passed)
else:
    from multiturn_eval.comparison import compare
    comparison = compare(load_report(files[0]), load_report(files[1]), "baseline.json")
    shown = len(comparison.cases)
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": u.ru_utime + u.ru_stime, "rss_kb": u.ru_maxrss,
                  "shown": shown}))
"""


def template(work: Path) -> dict[str, object]:
    """A real 100-case report of the load suite."""
    suite = work / "template.yaml"
    write_suite(suite, 100, 6, "bench.agents:instant")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(ROOT)])}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "multiturn_eval",
            "run",
            str(suite),
            "-q",
            "-o",
            "tpl",
            "--format",
            "json",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        check=False,
    )
    data: dict[str, object] = json.loads((work / "tpl" / "report.json").read_text())
    return data


def write_report(
    path: Path,
    data: dict[str, object],
    indices: range | list[int],
    *,
    shard: tuple[int, int] | None = None,
    rename: float = 0.0,
    seed: int = 0,
) -> None:
    """An N-case report: the template's results repeated, one result a line."""
    rng = random.Random(seed)
    results: list[dict[str, object]] = data["results"]  # type: ignore[assignment]
    head = {k: v for k, v in data.items() if k != "results"}
    if shard is not None:
        run = dict(head["run"])  # type: ignore[call-overload]
        run["shard"] = {"index": shard[0], "total": shard[1], "split_id": "read-side-bench"}
        head["run"] = run
    text = json.dumps(head)
    with path.open("w", encoding="utf-8") as out:
        out.write(text[:-1] + ', "results": [\n')
        for n, i in enumerate(indices):
            item = dict(results[i % len(results)])
            renamed = rng.random() < rename
            item["index"], item["name"] = i, f"case-{i:06d}{'-renamed' if renamed else ''}"
            out.write(("" if n == 0 else ",\n") + json.dumps(item, ensure_ascii=False))
        out.write("\n]}\n")


def measure(root: Path, op: str, files: list[Path]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "runner"), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", _OPERATION, op, *map(str, files)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    row: dict[str, float] = json.loads(proc.stdout)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--old-root", type=Path, help="a checkout to compare with")
    parser.add_argument("--ops", default="read,merge,baseline")
    args = parser.parse_args()
    roots = [("new", ROOT)] + ([("old", args.old_root)] if args.old_root else [])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = template(work)
        print("| runner | operation | cases | report MB | wall s | CPU s | peak RSS MiB |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for cases in (int(s) for s in args.sizes.split(",")):
            current, baseline = work / f"r{cases}.json", work / f"b{cases}.json"
            write_report(current, data, range(cases))
            keep = [i for i in range(cases + cases // 100) if i % 100 != 7]  # removed, added
            write_report(baseline, data, keep, rename=0.01, seed=cases)
            shards = []
            for k in range(4):
                shards.append(work / f"s{cases}-{k}.json")
                write_report(shards[-1], data, list(range(k, cases, 4)), shard=(k + 1, 4))
            files = {"read": [current], "merge": shards, "baseline": [current, baseline]}
            size = current.stat().st_size / 1e6
            for op in args.ops.split(","):
                for label, root in roots:
                    row = measure(root, op, files[op])
                    print(
                        f"| {label} | {op} | {cases:,} | {size:.0f} | {row['wall']:.1f} | "
                        f"{row['cpu']:.1f} | {row['rss_kb'] / 1024:.0f} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
