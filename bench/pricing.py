"""What pricing costs: loading genai-prices' table, and pricing one request.

    python bench/pricing.py                 # 5 fresh interpreters, 20,000 requests per model
    python bench/pricing.py --runs 3 --requests 5000

Per fresh interpreter (``sys.executable``, the repository on ``sys.path``):

* CLI import: ``import multiturn_eval.cli`` (what every command pays; the table is
  not part of it);
* first table price: the first ``price_for`` that reads the table, from
  ``multiturn_eval.pricing`` already imported (``genai_prices`` and its bundled data
  imported, the table built, the model found; pydantic and httpx2 are already loaded
  by the CLI, as they are in a run);
* per request: ``Price.cost(usage)`` for a request of a few thousand tokens, the
  median over ``--requests`` calls, for table prices (flat and long-context tiered)
  and for a suite ``pricing:`` price.

Numbers go in ``bench/README.md`` ("Prices"); nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import multiturn_eval.cli
from multiturn_eval.pricing import price_for
from multiturn_eval.suite import ModelPrice
from multiturn_eval.types import TokenUsage
t1 = time.perf_counter()
assert "genai_prices" not in sys.modules
first = price_for("claude-haiku-4-5", provider="anthropic")
t2 = time.perf_counter()
assert first is not None and "genai_prices" in sys.modules
usage = TokenUsage(prompt_tokens=3200, completion_tokens=450, cache_read_tokens=1800)
prices = {
    "table, flat (claude-haiku-4-5)": first,
    "table, tiered (claude-sonnet-4-5)": price_for("claude-sonnet-4-5", provider="anthropic"),
    "table, flat (gpt-5-mini)": price_for("gpt-5-mini", provider="openai"),
    "suite pricing:": price_for("m", {"m": ModelPrice(input=1, output=2)}),
}
per_request = {}
for name, price in prices.items():
    assert price is not None and price.cost(usage) is not None
    times = []
    for _ in range(%(requests)d):
        start = time.perf_counter()
        price.cost(usage)
        times.append(time.perf_counter() - start)
    times.sort()
    per_request[name] = times[len(times) // 2] * 1e6
print(json.dumps({"cli_import_ms": (t1 - t0) * 1e3, "first_price_ms": (t2 - t1) * 1e3,
                  "per_request_us": per_request}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        done = subprocess.run(
            [sys.executable, "-c", CHILD % {"requests": args.requests}],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT / "runner")},
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout))
    print(f"median of {args.runs} fresh interpreters, {args.requests:,} requests per price")
    for key, label in (("cli_import_ms", "CLI import"), ("first_price_ms", "first table price")):
        print(f"  {label}: {statistics.median(r[key] for r in runs):.1f} ms")
    for name in runs[0]["per_request_us"]:
        value = statistics.median(r["per_request_us"][name] for r in runs)
        print(f"  per request, {name}: {value:.1f} us")


if __name__ == "__main__":
    main()
