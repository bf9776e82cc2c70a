"""The shard split: balance, stability under edits, CPU (nothing here is asserted in tests).

    python bench/shards.py                       # 1,000 cases of 1-12 turns, 8 shards
    python bench/shards.py --cases 5000 --shards 16 --seeds 20

For ``--seeds`` random suites it reports, for the runner's split
(``sharding.assign``) and three simpler ones for comparison:

* balance: the largest shard's turns / the mean (worst over the seeds);
* moved on add: test cases whose shard changes when one case is added (mean, max);
* moved on remove: the same when one case is removed;
* CPU to split the suite (best of the seeds).

The baselines: ``hash mod N`` (stable, unbalanced), pure rendezvous hashing
(most stable, unbalanced) and greedy balancing in suite order (each case to
the lightest shard: balanced, but an insertion moves the cases after it).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))

from multiturn_eval.sharding import ShardItem, assign

Split = Callable[[Sequence[ShardItem], int], list[int]]


def _h(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def hash_mod(items: Sequence[ShardItem], n: int) -> list[int]:
    return [_h(i.key) % n for i in items]


def rendezvous(items: Sequence[ShardItem], n: int) -> list[int]:
    return [max(range(n), key=lambda s: _h(i.key, str(s))) for i in items]


def greedy_in_order(items: Sequence[ShardItem], n: int) -> list[int]:
    loads = [0] * n
    out = []
    for item in items:
        s = min(range(n), key=lambda k: (loads[k], k))
        loads[s] += item.weight
        out.append(s)
    return out


SPLITS: dict[str, Split] = {
    "runner (bounded rendezvous)": assign,
    "hash mod N": hash_mod,
    "rendezvous": rendezvous,
    "greedy in suite order": greedy_in_order,
}


def suite(rng: random.Random, cases: int) -> list[ShardItem]:
    return [ShardItem(f"evals/s{i % 4}.yaml\x00case-{i}", rng.randint(1, 12)) for i in range(cases)]


def moved(before: Sequence[ShardItem], after: Sequence[ShardItem], split: Split, n: int) -> int:
    a = dict(zip((i.key for i in before), split(before, n), strict=True))
    b = dict(zip((i.key for i in after), split(after, n), strict=True))
    return sum(1 for k in a.keys() & b.keys() if a[k] != b[k])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    n = args.shards
    print(f"{args.cases:,} cases of 1-12 turns, {n} shards, {args.seeds} random suites")
    print(
        f"{'split':<30} {'max/mean':>9} {'add: mean':>10} {'max':>5} "
        f"{'remove: mean':>13} {'max':>5} {'CPU ms':>8}"
    )
    for name, split in SPLITS.items():
        ratios, adds, removes, cpu = [], [], [], []
        for seed in range(args.seeds):
            rng = random.Random(seed)
            items = suite(rng, args.cases)
            started = time.process_time()
            shards = split(items, n)
            cpu.append(time.process_time() - started)
            loads = [0] * n
            for item, s in zip(items, shards, strict=True):
                loads[s] += item.weight
            ratios.append(max(loads) / (sum(loads) / n))
            position = rng.randrange(len(items))
            added = [*items[:position], ShardItem(f"evals/new.yaml\x00added-{seed}", 6)]
            added += items[position:]
            adds.append(moved(items, added, split, n))
            removes.append(moved(items, items[:position] + items[position + 1 :], split, n))
        print(
            f"{name:<30} {max(ratios):>9.3f} {statistics.mean(adds):>10.1f} {max(adds):>5} "
            f"{statistics.mean(removes):>13.1f} {max(removes):>5} {min(cpu) * 1000:>8.1f}"
        )


if __name__ == "__main__":
    main()
