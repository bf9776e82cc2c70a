"""A report of a run's stored results copies each stored text instead of reading the result
back and dumping it again, where that gives the same bytes: the reports written the new
way equal, byte for byte, the reports written the old way (every result read back as a
model, then dumped), on random and hostile results, the first time (when the store notes
which texts are the same bytes) and every time after (when it copies them); and the
summary totalled from the results' :class:`~multiturn_eval.results.CaseTotals` equals the
one totalled from the whole results."""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.interrupts import InterruptGuard
from multiturn_eval.reports.json_report import _report_pieces, dump_json
from multiturn_eval.reports.writer import RENDERERS, build_report, render_reports
from multiturn_eval.results import (
    CaseResult,
    MetricResult,
    Report,
    Simulation,
    SimulatorInfo,
    TurnResult,
)
from multiturn_eval.rollup import aggregate_runs, summarize
from multiturn_eval.run import RunOptions, run_suites
from multiturn_eval.run_store import (
    _COMPACT_SAME,
    _PRETTY_SAME,
    KEY_BITS,
    RunResults,
    RunStore,
    redacted_text,
)
from multiturn_eval.secrets import Redactor
from multiturn_eval.stored import ResultSequence
from multiturn_eval.types import TokenUsage, ToolInvocation
from tests import test_run_store
from tests.reports_fixtures import case, not_run, turn

SECRET = "sk-test-abcdefghijklmnopqrstuv"
NUMBER_SECRET = "7304851296"
"""A "secret" that is also part of a JSON number: redacting the text breaks the JSON, so the
store redacts the strings one by one instead (``redacted_text``'s fallback)."""

TEXTS = [
    "",
    "plain words",
    "ünïcödé ✓ 中文 עברית",
    "😀 emoji 𝄞",
    'quote " backslash \\ slash /',
    "control \x00\x01\x08\x0c\x1f\x7f",
    "line\nbreaks\r\n\u2028\u2029 tab\t",
    "</script><!-- & &amp; -->",
    f"the key is {SECRET}.",
    f'escaped {SECRET!r} and "{SECRET}"',
    "\\u00e9 written out, \\n too",
]
SURROGATES = ["lone \ud800 surrogate", "\udfff end", "pair \ud83d\ude00 split"]
NUMBERS: list[Any] = [
    0,
    -1,
    2**63,
    2**64 + 1,
    10**30,
    -(10**40),
    10**400,
    1e16,
    1e-7,
    1.5e300,
    -0.0,
    5e-324,
    0.1 + 0.2,
    1 / 3,
    math.inf,
    math.nan,
]


def _text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return "".join(rng.choice('aé😀"\\\n\x1f ✓中') for _ in range(rng.randint(0, 12)))
    return rng.choice(TEXTS)


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(NUMBERS)
    if kind == 1:
        return _text(rng)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.randint(-(10**6), 10**6) / rng.choice([1, 7, 1000])
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == 5:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    return {_text(rng): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _metric(rng: random.Random, name: str) -> MetricResult:
    passed = rng.random() < 0.7
    errored = rng.random() < 0.1
    return MetricResult(
        metric_name=name,
        kind=rng.choice(["standard", "code", "judge"]),
        score=None if errored else rng.choice([0.0, 1, 0.5, 1 / 3, 1.0]),
        threshold=rng.choice([None, 0.5, 1]),
        passed=passed and not errored,
        error="grader raised" if errored else None,
        reason=_text(rng),
        details=rng.choice([None, {"value": _value(rng)}, {"found": [], "missing": ["x"]}]),
    )


def _turn(rng: random.Random, index: int) -> TurnResult:
    tools = [
        ToolInvocation(name=_text(rng) or "t", args={"a": _value(rng)}, result=_value(rng))
        for _ in range(rng.randint(0, 2))
    ]
    metrics = [_metric(rng, name) for name in rng.sample(["polite", "numeric", "ünï"], 2)]
    result = turn(
        index,
        _text(rng),
        rng.choice([None, _text(rng)]),
        ground_truth=rng.choice([None, _text(rng)]),
        tools=tools,
        metrics=metrics,
        errors=rng.choice([(), ("agent error: " + _text(rng),)]),
        skipped=rng.random() < 0.1,
        duration_ms=rng.choice([0.0, 53.25, 1e-9, 12345678.9]),
        tokens=rng.choice([0, 7, 2**40]),
        cost_usd=rng.choice([None, 0.0, 1e-12, 0.25]),
        warnings=rng.choice([(), (_text(rng),)]),
    )
    if rng.random() < 0.2:
        result = result.model_copy(
            update={
                "judge_token_usage": TokenUsage(prompt_tokens=rng.randint(0, 10**12)),
                "judge_cost_usd": rng.choice([None, 0.001]),
                "source": rng.choice(["scripted", "simulated"]),
            }
        )
    return result


def _case(rng: random.Random, index: int) -> CaseResult:
    legacy = rng.random() < 0.25
    turns = [_turn(rng, i) for i in range(1 if legacy else rng.randint(1, 4))]
    result = case(
        index,
        f"case {index} {_text(rng)}",
        turns,
        suite="s.yaml",
        suite_name="s",
        line=rng.choice([None, 1, 10**6]),
        legacy=legacy,
        errors=rng.choice([(), ("case error",)]),
        tags=rng.choice([(), ("smoke", _text(rng))]),
    )
    if rng.random() < 0.3:
        simulation = Simulation(
            goal=_text(rng),
            outcome=rng.choice(["goal_met", "max_turns", "invalid_simulation"]),
            user_turns=len(turns),
            simulator=SimulatorInfo(backend="anthropic", model="claude-haiku-4-5"),
            user_token_usage=TokenUsage(prompt_tokens=900, completion_tokens=40),
            user_cost_usd=rng.choice([None, 0.0001]),
        )
        result = result.model_copy(update={"simulation": simulation})
    return result


def _hostile(rng: random.Random, index: int) -> tuple[CaseResult, bool | None]:
    """A result as a ``finish_case`` hook or an unchecked value may leave it, and whether
    reading its stored text back gives other bytes (so the store must not copy it; None:
    it may or may not)."""
    base = _case(rng, index)
    kind = index // 3 % 6
    if kind == 0:  # lone surrogates: pydantic cannot dump it; the fallback writer does
        return base.model_copy(update={"name": rng.choice(SURROGATES)}), True
    if kind == 1:  # an int field holding a float: dumped 2.0, read back 2
        return base.model_copy(update={"line": 2.0}), True
    if kind == 2:  # a bool holding an int: dumped 1, read back true
        return base.model_copy(update={"passed": 1}), True
    if kind == 3:  # keys that collide once made strings: read back, one of them is left
        details = {1: "one", "1": "other", None: 0, "None": 1}
        metric = MetricResult.model_construct(
            metric_name="m", kind="code", passed=True, details=details
        )
        return base.model_copy(update={"metric_results": [metric]}), True
    if kind == 4:  # the number "secret" in a number: the strings are redacted one by one
        update = {"duration_ms": float(NUMBER_SECRET) + 0.5, "warnings": [f"#{NUMBER_SECRET}"]}
        return base.model_copy(update=update), None
    repeated = aggregate_runs(  # a repeated case whose last run did not finish
        [base, _case(rng, index), None], min_pass_rate=0.5
    )
    return repeated, False


class _OldWay(ResultSequence):
    """The same entries read as every report read them before: each stored result read back
    as a whole model (for the summary and again for report.json), then dumped."""

    def __init__(self, results: RunResults) -> None:
        self.results = results
        self.redacted_by = results.redacted_by

    def __len__(self) -> int:
        return len(self.results)

    def _get(self, index: int) -> CaseResult:
        return self.results[index]

    def __iter__(self) -> Iterator[CaseResult]:
        return iter(self.results)


def _report(results: ResultSequence) -> Report:
    return build_report(
        ["s.yaml"], results, started_at="2026-01-01T00:00:00Z", started=0.0, complete=True
    )


def _both_ways(results: RunResults, redact: Redactor) -> None:
    """Every JSON layout and the summary, the new way against the old way, twice."""
    old = _report(_OldWay(results))
    for _ in range(2):  # the first pass notes what is the same; the second copies
        new = _report(results)
        new.run = old.run
        assert new.summary == old.summary
        assert summarize(results.totals()) == summarize(list(results))
        for indent in (None, 2):
            assert "".join(_report_pieces(new, indent)) == "".join(_report_pieces(old, indent))
        assert dict(render_reports(new, ["json"], redact)) == dict(
            render_reports(old, ["json"], redact)
        )


def _stored(store: RunStore, made: dict[int, Callable[[], CaseResult]], n: int) -> RunResults:
    """The n entries of suite 0, as RunState.final_results gives them: stored or made."""
    offsets, lengths, keys = array("q"), array("q"), array("q")
    for i in range(n):
        offset = store.offsets[0][i]
        offsets.append(offset if offset >= 0 else -1)
        lengths.append(store.lengths[0][i])
        keys.append(i if offset >= 0 else -1)  # suite 0: 0 << KEY_BITS | i
    assert KEY_BITS >= 32
    return RunResults(store, offsets, lengths, made, finish=_finish, keys=keys)


def _finish(result: CaseResult) -> CaseResult:
    """A ``finish_case`` hook (applied to the made entries when read)."""
    return result.model_copy(update={"tags": [*result.tags, "finished"]})


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
@pytest.mark.parametrize("seed", range(4))
def test_copied_texts_are_the_bytes_reading_back_and_dumping_give(seed: int) -> None:
    rng = random.Random(seed)
    redact = Redactor([SECRET, NUMBER_SECRET])
    store = RunStore([120], redact, spool=True)
    copyable: list[int] = []
    not_copyable: list[int] = []
    differs: bool | None
    made: dict[int, Callable[[], CaseResult]] = {}
    for i in range(120):
        if i % 10 == 9:  # not stored: a not-run case, a kept one, a partial repeat
            kept = _case(rng, i)
            made[i] = rng.choice(
                [lambda i=i: not_run(i, f"case {i}", ["a", "b"], "interrupted"), lambda k=kept: k]
            )
            continue
        if i % 3 == 2:
            result, differs = _hostile(rng, i)
        else:
            result, differs = _case(rng, i), False
        store.put(0, i, result)
        if differs is not None:
            (not_copyable if differs else copyable).append(i)
        if i % 3 == 2 and i // 3 % 6 == 4:  # redacted string by string (the fallback)
            text = redacted_text(result, redact)
            assert text != redact(dump_json(result)) and '"warnings":["#***"]' in text
    results = _stored(store, made, 120)
    assert len(copyable) > 60 and len(not_copyable) > 15
    _both_ways(results, redact)
    flags = store.checked[0]
    # what the runner makes is copied; what reads back otherwise is written the old way
    assert all(flags[i] & _COMPACT_SAME and flags[i] & _PRETTY_SAME for i in copyable)
    assert not any(flags[i] & _COMPACT_SAME for i in not_copyable)
    assert any(not flags[i] & _PRETTY_SAME for i in not_copyable)
    assert not any(flags[i] for i in made)


def _run(project: Path, *, repeat: int = 1, stop_at: int | None = None) -> RunResults:
    test_run_store.write_suite(project, 24, stop_at=stop_at)
    guard = InterruptGuard()
    if stop_at is not None:
        test_run_store.GUARD["guard"] = guard
    outcome = run_suites(
        ["suite.yaml"],
        RunOptions(report_dir="out", repeat=repeat, parallel_test_cases=3, finish_case=_finish),
        {},
        guard=guard,
        secrets=[test_run_store.SECRET],
    )
    results = outcome.report.results
    assert isinstance(results, RunResults) and results.keys is not None
    on_disk = (outcome.report_dir / RENDERERS["json"][0]).read_text(encoding="utf-8")
    assert on_disk == dict(render_reports(outcome.report, ["json"], outcome.redactor))["json"]
    return results


@pytest.mark.parametrize(
    ("repeat", "stop_at"), [(1, None), (2, None), (1, 9)], ids=["once", "repeated", "stopped"]
)
def test_a_run_writes_its_reports_as_it_did_when_it_read_every_result_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repeat: int, stop_at: int | None
) -> None:
    """Through a whole run (final_results' keys, the journal, secrets redacted, not-run
    entries of an interrupted run): the report written and written again."""
    monkeypatch.chdir(tmp_path)
    test_run_store.GUARD.clear()
    results = _run(tmp_path, repeat=repeat, stop_at=stop_at)
    _both_ways(results, results.redacted_by)
    assert results.keys is not None
    stored = [key for key in results.keys if key >= 0]
    assert 0 < len(stored) < 24 if stop_at else len(stored) == 24
    # the final report.json noted every stored text the same: later reports copy them
    assert all(results.store.checked[key >> KEY_BITS][key] & _PRETTY_SAME for key in stored)
