"""``--shard I/N``: a stable, balanced split of the selected test cases over N jobs.

The split (algorithm ``rendezvous-bounded-v2``):

1. every selected test case has a *key*, its suite path (as reports show it)
   and its name (``suite.yaml\\x00refund-flow``; a name used twice in one
   suite gets ``#2``, ``#3`` appended to its later occurrences), and a
   *weight*: its turn count times its repeat count;
2. each shard ranks the cases by ``sha256(key, shard)`` (rendezvous, or
   highest-random-weight, hashing): a case's preferred shard is the one that
   ranks it highest, its second choice the next, ...;
3. the cases are placed one by one in the order of ``sha256(key)``; each goes
   to its most preferred shard whose load (sum of weights) stays within the
   mean load plus the heaviest case's weight; when none has room (rare), to
   the least loaded shard, which then holds at most the mean plus this case's
   weight;
4. once as many cases are left to place as shards are still empty, each goes
   to its most preferred empty shard.

So no shard is heavier than the mean by more than one case's weight, and with
at least as many cases as shards no shard is empty (3 cases over 2 shards:
2 and 1, never 3 and 0).

Why: pure rendezvous hashing moves nothing when a case is added but leaves
shards ±15% apart on a thousand cases; greedy balancing in suite order is
balanced but moves every case after an insertion. The bounded-load variant
keeps both: a case only leaves its first choice when that shard is full, so
adding one case to a 1,000-case suite moves a handful of others (see
``bench/README.md``, "Shards", for the figures), and the largest shard stays
within the bound (``tests/test_shards.py``).

Every shard computes the same assignment from the same inputs (no state, no
randomness beyond the hash), so N jobs that load the same suites agree on
who runs what without talking to each other. The *split id* names the
assignment: a hash of the algorithm, N and every selected case's key and
weight. :mod:`multiturn_eval.merge` refuses shard reports of different split
ids (different suites, selections, repeat counts or N).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .stored import KeptResults

if TYPE_CHECKING:
    from .loaded import PlannedSuite

ALGORITHM = "rendezvous-bounded-v2"

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 1024


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (0-based) of ``total``."""

    index: int
    total: int

    @property
    def label(self) -> str:
        """``2/4``: 1-based, as ``--shard`` takes it and every message shows it."""
        return f"{self.index + 1}/{self.total}"


def parse_shard(text: str) -> ShardSpec:
    """``--shard I/N`` (1-based: ``1/4`` .. ``4/4``); ValueError says what is wrong."""
    match = _SHARD.match(text)
    if match is None:
        raise ValueError("must be I/N, e.g. 1/4 (I counts from 1)")
    number, total = int(match.group(1)), int(match.group(2))
    return shard_spec(number - 1, total, one_based=True)


def shard_spec(index: int, total: int, *, one_based: bool = False) -> ShardSpec:
    """A checked shard; ``one_based`` only words the error as ``--shard`` does."""
    if not 1 <= total <= MAX_SHARDS:
        raise ValueError(f"the shard total must be from 1 to {MAX_SHARDS}; got {total}")
    if not 0 <= index < total:
        if one_based:
            raise ValueError(f"the shard number must be from 1 to {total}; got {index + 1}")
        raise ValueError(f"the shard index must be from 0 to {total - 1}; got {index}")
    return ShardSpec(index, total)


@dataclass(frozen=True)
class ShardItem:
    """One selected test case as the split sees it."""

    key: str
    weight: int


def case_keys(suite_path: str, names: Sequence[str]) -> list[str]:
    """The split keys of a suite's test cases (duplicate names get ``#2``, ``#3``, ...)."""
    seen: dict[str, int] = {}
    keys = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        suffix = "" if seen[name] == 1 else f"#{seen[name]}"
        keys.append(f"{suite_path}\x00{name}{suffix}")
    return keys


def _hash(*parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


def assign(items: Sequence[ShardItem], total: int) -> list[int]:
    """The shard (0-based) of every item, in the items' order.

    Two guarantees (``tests/test_shards.py``): no shard's load exceeds the mean by
    more than the heaviest item's weight, and with at least as many items as
    shards, no shard is empty.
    """
    if total <= 1 or not items:
        return [0] * len(items)
    weights = [max(1, item.weight) for item in items]
    # a load may reach mean + heaviest weight: load * total <= sum + total * heaviest
    cap = sum(weights) + total * max(weights)
    loads = [0] * total
    counts = [0] * total
    out = [0] * len(items)
    order = sorted(range(len(items)), key=lambda i: (_hash(items[i].key), items[i].key))
    shards = [str(s) for s in range(total)]
    empty = total
    for placed, i in enumerate(order):
        key, weight = items[i].key, weights[i]
        ranked = sorted(range(total), key=lambda s: _hash(key, shards[s]), reverse=True)
        if len(order) - placed <= empty:  # as many cases left as empty shards: one each
            chosen = next(s for s in ranked if counts[s] == 0)
        else:
            # the least loaded shard, when none has room, is at most mean + weight after this
            chosen = next(
                (s for s in ranked if (loads[s] + weight) * total <= cap),
                min(range(total), key=lambda s: (loads[s], s)),
            )
        loads[chosen] += weight
        empty -= counts[chosen] == 0
        counts[chosen] += 1
        out[i] = chosen
    return out


def owner(key: str, total: int) -> int:
    """The shard that ranks ``key`` highest: where a result carried over by
    ``--keep-passed`` goes (it takes no time, so it needs no balancing)."""
    return max(range(total), key=lambda s: _hash(key, str(s))) if total > 1 else 0


def keep_for_shard(
    plan: Sequence[PlannedSuite], kept: Mapping[tuple[int, int], Any], spec: ShardSpec
) -> Mapping[tuple[int, int], Any]:
    """The ``--keep-passed`` results this shard carries (each lands in exactly one shard)."""
    mine = []
    keys: dict[int, list[str]] = {}
    for s, index in kept:  # the keys only: the results stay where they are
        if s not in keys:  # once per suite, not once per result
            loaded = plan[s].loaded
            keys[s] = case_keys(loaded.display_path, loaded.cases.names())
        if owner(keys[s][index], spec.total) == spec.index:
            mine.append((s, index))
    if isinstance(kept, KeptResults):
        return kept.restricted(mine)
    return {key: kept[key] for key in mine}


def split_id(items: Sequence[ShardItem], total: int) -> str:
    """Names one split: the algorithm, N and every selected case's key and weight."""
    data = json.dumps(
        [ALGORITHM, total, sorted((item.key, item.weight) for item in items)],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(data.encode("ascii")).hexdigest()[:16]


def file_hash(path: Path) -> str:
    """``sha256:<hex>`` of a suite file's bytes (as it is now on disk)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def plan_items(plan: Sequence[PlannedSuite]) -> list[tuple[int, int, ShardItem]]:
    """(suite position, case index, item) of every selected test case, in suite order."""
    out = []
    for s, planned in enumerate(plan):
        loaded = planned.loaded
        keys = case_keys(loaded.display_path, loaded.cases.names())
        repeat = max(1, planned.settings.repeat)
        for index in planned.indices:
            out.append((s, index, ShardItem(keys[index], loaded.cases.turns(index) * repeat)))
    return out


def apply_shard(plan: Sequence[PlannedSuite], spec: ShardSpec) -> dict[str, Any]:
    """Keep only ``spec``'s test cases in ``plan``; returns the report's shard fields."""
    items = plan_items(plan)
    shards = assign([item for _, _, item in items], spec.total)
    mine: dict[int, list[int]] = {}
    for (s, index, _), shard in zip(items, shards, strict=True):
        if shard == spec.index:
            mine.setdefault(s, []).append(index)
    for s, planned in enumerate(plan):
        planned.indices = mine.get(s, [])
    return {
        "shard": {
            "index": spec.index + 1,
            "total": spec.total,
            "split_id": split_id([item for _, _, item in items], spec.total),
        },
        "suite_hashes": suite_hashes(plan),
        "selected": len(items),
    }


def suite_hashes(plan: Sequence[PlannedSuite]) -> dict[str, str]:
    """Suite path (as reports show it) -> :func:`file_hash` of the file."""
    out: dict[str, str] = {}
    for planned in plan:
        try:
            out[planned.loaded.display_path] = file_hash(planned.loaded.path)
        except OSError as exc:  # it was read a moment ago; say so rather than crash
            out[planned.loaded.display_path] = f"unreadable: {exc.strerror or exc}"
    return out
