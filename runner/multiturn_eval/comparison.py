"""A run compared with a baseline report (``--baseline REPORT.json``, SPEC 6.7). Pure: no I/O.

Every test case and every turn of either report gets one class:

==============  =============================================================
regressed       passed in the baseline, fails now
fixed           failed in the baseline, passes now
still_failing   failed in both
still_passing   passed in both
new             only in this run
removed         only in the baseline (deleted, renamed, or not selected now)
not_run         skipped on either side (an interrupted run, a not regradable
                case): no verdict to compare, never a regression
within_noise    repeated on both sides, its verdict flipped, but the change in
                pass rate is within the noise margin below: not a regression
                (nor a fix), and said so rather than hidden
==============  =============================================================

**Memory.** Neither report is held: the baseline is indexed in one pass (case key
-> position, a few dozen bytes a case), this run's results are walked once and
each matched baseline case is read on its own (with reports read by
:func:`~multiturn_eval.reports.reader.load_report`, one result at a time from
the file); the removed ones are read in a last pass. What is kept is the
comparison itself (one :class:`CaseChange` a case, as the report shows it).

**Matching.** A test case is identified by its suite file (``CaseResult.suite``,
as reports show it) and its name; a turn by its index within the case (a legacy
single-turn case is turn 0). Order does not matter, so reordered cases match.
A renamed case is ``removed`` under its old name and ``new`` under the new one.
Duplicate names in one suite are matched by occurrence: the n-th case of that
name in this run with the n-th of that name in the baseline, and the comparison
carries a warning naming them.

**Repeats (noise margin).** When either side ran the case several times
(``CaseResult.repeat``; a side without repeats counts as 1 run), a verdict is a
pass rate, and one flip is not a regression. The case (or turn, from
``turn_pass_counts``) is ``regressed`` only when its pass rate dropped by at
least :data:`MIN_DROP` **and** a one-sided Fisher exact test on the two
pass counts (passes/K before vs after) gives p <= :data:`ALPHA`; ``fixed`` is the
same test the other way. Otherwise it is ``still_passing`` or ``still_failing``
when both verdicts (the ``min_pass_rate`` gate) agree, and ``within_noise`` when
they differ. Examples with K=5 on both sides: 5/5 -> 1/5 regresses (p = 0.024),
5/5 -> 2/5 does not (p = 0.083); with K=10: 10/10 -> 6/10 regresses (p = 0.043).

**A single run on either side** is the plain rule on the two verdicts (each
side's gate): passed -> failed is a regression. The test has no power there
(3/3 -> 0/1 gives p = 0.25), so a repeated base branch compared with a PR run
once (or the reverse) would otherwise never show a regression.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from .results import (
    BaselineComparison,
    CaseChange,
    CaseResult,
    ChangeClass,
    Report,
    TotalsDelta,
    TurnChange,
    TurnResult,
)
from .stored import fields_of

ALPHA = 0.05
"""Significance level of the one-sided Fisher exact test on repeated pass counts."""

MIN_DROP = 0.1
"""The smallest change in pass rate that can count as a regression (or a fix)."""

CLASSES: tuple[ChangeClass, ...] = get_args(ChangeClass)

NOISE_RULE = (
    f"repeated cases: regressed when the pass rate drops by at least {MIN_DROP:g} and a "
    f"one-sided Fisher exact test on passes/K gives p <= {ALPHA:g}; a single run on either "
    "side: passed -> failed"
)


@dataclass(frozen=True)
class _Verdict:
    """One side's verdict on a case or turn: passes of runs, or not run."""

    passes: int
    runs: int
    skipped: bool = False

    @property
    def rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0

    def words(self, repeated: bool) -> str:
        if self.skipped:
            return "not run"
        if repeated:
            return f"{self.passes}/{self.runs} passed"
        return "passed" if self.passes else "failed"


def fisher_one_sided(
    passes_before: int, runs_before: int, passes_after: int, runs_after: int, *, drop: bool = True
) -> float:
    """P-value of a one-sided Fisher exact test that the pass rate dropped (or rose).

    Under the null hypothesis (the same pass rate on both sides) the passes of the
    "after" side follow a hypergeometric distribution given the margins; the
    p-value is P(X <= passes_after) for a drop, P(X >= passes_after) for a rise.
    """
    total = runs_before + runs_after
    passes = passes_before + passes_after
    denominator = math.comb(total, runs_after)
    low = max(0, runs_after - (total - passes))
    high = min(runs_after, passes)
    values = range(low, passes_after + 1) if drop else range(passes_after, high + 1)
    favourable = sum(
        math.comb(passes, x) * math.comb(total - passes, runs_after - x) for x in values
    )
    return favourable / denominator


def _case_verdict(case: CaseResult) -> _Verdict:
    if case.skipped:
        return _Verdict(0, 0, skipped=True)
    if case.repeat is not None:
        return _Verdict(case.repeat.passes, case.repeat.runs)
    return _Verdict(1 if case.passed else 0, 1)


def _turn_verdicts(case: CaseResult) -> dict[int, _Verdict]:
    if case.skipped:
        return {t.turn_index: _Verdict(0, 0, skipped=True) for t in case.all_turns()}
    if case.repeat is not None and case.repeat.turn_pass_counts:
        return {
            c.turn_index: _Verdict(c.passed, c.runs, skipped=c.runs == 0)
            for c in case.repeat.turn_pass_counts
        }
    return {
        t.turn_index: _Verdict(0, 0, skipped=True) if t.skipped else _Verdict(int(t.passed), 1)
        for t in case.all_turns()
    }


def classify(
    before: _Verdict, after: _Verdict, after_passed: bool, before_passed: bool | None = None
) -> tuple[ChangeClass, float | None]:
    """The class of a change between two verdicts, and the test's p-value (repeats only).

    ``after_passed`` / ``before_passed``: each side's verdict (its gate); a side's
    verdict defaults to "every run passed".
    """
    if before.skipped or after.skipped:
        return "not_run", None
    if before_passed is None:
        before_passed = before.passes == before.runs
    if before.runs == 1 or after.runs == 1:
        if before_passed and not after_passed:
            return "regressed", None
        if not before_passed and after_passed:
            return "fixed", None
        return ("still_passing" if after_passed else "still_failing"), None
    change = after.rate - before.rate
    if change <= -MIN_DROP:
        p = fisher_one_sided(before.passes, before.runs, after.passes, after.runs, drop=True)
        if p <= ALPHA:
            return "regressed", p
    elif change >= MIN_DROP:
        p = fisher_one_sided(before.passes, before.runs, after.passes, after.runs, drop=False)
        if p <= ALPHA:
            return "fixed", p
    else:
        p = None
    if before_passed != after_passed:
        return "within_noise", p
    return ("still_passing" if after_passed else "still_failing"), p


@functools.lru_cache(maxsize=8192)
def _turn_change(**fields: Any) -> TurnChange:
    """A :class:`TurnChange`, the same object for the same fields (built alike, so the same
    ``model_fields_set``): a comparison of 50,000 six-turn cases would otherwise hold
    300,000 of them, most alike ("turn 3: still passing"); nothing changes one once made."""
    return TurnChange(**fields)


def _first_check(turn: TurnResult) -> str | None:
    checks = turn.failed_checks()
    return checks[0] if checks else None


def _case_failing_check(case: CaseResult) -> str | None:
    turn = case.first_failing_turn()
    if turn is not None:
        check = _first_check(turn)
        if check is not None:
            return f"turn {turn.turn_index + 1}: {check}"
    return case.errors[0] if case.errors else None


def _compare_case(current: CaseResult, baseline: CaseResult, occurrence: int) -> CaseChange:
    repeated = current.repeat is not None or baseline.repeat is not None
    before, after = _case_verdict(baseline), _case_verdict(current)
    change, p_value = classify(before, after, current.passed, baseline.passed)
    turns_before, turns_after = _turn_verdicts(baseline), _turn_verdicts(current)
    current_turns = {t.turn_index: t for t in current.all_turns()}
    turns: list[TurnChange] = []
    for index in sorted(set(turns_before) | set(turns_after)):
        if index not in turns_before:
            turns.append(
                _turn_change(
                    turn_index=index, change="new", after=turns_after[index].words(repeated)
                )
            )
            continue
        if index not in turns_after:
            turns.append(
                _turn_change(
                    turn_index=index, change="removed", before=turns_before[index].words(repeated)
                )
            )
            continue
        tb, ta = turns_before[index], turns_after[index]
        turn = current_turns.get(index)
        turn_passed = (
            ta.passes == ta.runs
            if current.repeat is None
            else ta.rate >= current.repeat.min_pass_rate
        )
        turn_before = (
            tb.passes == tb.runs
            if baseline.repeat is None
            else tb.rate >= baseline.repeat.min_pass_rate
        )
        turn_change, _ = classify(tb, ta, turn_passed and not ta.skipped, turn_before)
        failing = (
            _first_check(turn)
            if turn is not None and not turn.passed and not turn.skipped
            else None
        )
        turns.append(
            _turn_change(
                turn_index=index,
                change=turn_change,
                before=tb.words(repeated),
                after=ta.words(repeated),
                failing_check=failing if turn_change in ("regressed", "still_failing") else None,
            )
        )
    return CaseChange(
        suite=current.suite,
        name=current.name,
        occurrence=occurrence,
        index=current.index,
        baseline_index=baseline.index,
        change=change,
        before=before.words(repeated),
        after=after.words(repeated),
        pass_rate_before=None if before.skipped else before.rate,
        pass_rate_after=None if after.skipped else after.rate,
        p_value=p_value,
        failing_check=_case_failing_check(current) if not current.passed else None,
        turns=turns,
    )


class CaseIndex:
    """Where each case of a report is: (suite, name, occurrence) -> its position in the
    results, from one pass (the results are read again only where needed). The n-th
    case of a name in a suite is occurrence n (``--baseline`` and regrade match so)."""

    def __init__(self, results: Sequence[CaseResult]) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.at: dict[tuple[str, str, int], int] = {}
        self.occurrence = array("i")
        for position, (suite, name) in enumerate(fields_of(results, "suite", "name")):
            n = self.counts.get((suite, name), 0)
            self.counts[(suite, name)] = n + 1
            self.at[(suite, name, n)] = position
            self.occurrence.append(n)


def _duplicates(counts: dict[tuple[str, str], int], which: str) -> list[str]:
    return [
        f"{which}: {n} test cases named {name!r} in {suite}: matched by occurrence "
        "(the n-th of this run with the n-th of the baseline)"
        for (suite, name), n in counts.items()
        if n > 1
    ]


def _delta(before: float | None, after: float | None) -> TotalsDelta:
    delta = after - before if before is not None and after is not None else None
    return TotalsDelta(before=before, after=after, delta=delta)


def _one_sided(case: CaseResult, occurrence: int, *, removed: bool = False) -> CaseChange:
    """A case in one report only: new in this run, or (``removed``) only in the baseline."""
    change: ChangeClass = "removed" if removed else "new"
    verdict = _case_verdict(case).words(case.repeat is not None)
    side: dict[str, Any] = (
        {"baseline_index": case.index, "before": verdict}
        if removed
        else {
            "index": case.index,
            "after": verdict,
            "failing_check": _case_failing_check(case) if not case.passed else None,
        }
    )
    return CaseChange(
        suite=case.suite,
        name=case.name,
        occurrence=occurrence,
        change=change,
        turns=[_turn_change(turn_index=t.turn_index, change=change) for t in case.all_turns()],
        **side,
    )


def compare(
    current: Report,
    baseline: Report,
    baseline_file: str = "baseline",
    *,
    not_selected: Collection[tuple[str, str]] = (),
) -> BaselineComparison:
    """``current`` against ``baseline``: every case and turn classed, counts and total deltas.

    ``not_selected``: (suite, name) of the test cases that are in the current suites
    but that this run did not select (``--shard``, ``-k``, ``--tag``,
    ``--rerun-failed``); a baseline case among them is out of this run's scope,
    not "removed", and is left out of the comparison.
    """
    index = CaseIndex(baseline.results)
    matched = bytearray(len(baseline.results))
    seen: dict[tuple[str, str], int] = {}
    cases: list[CaseChange] = []
    for case in current.results:  # one pass; each matched baseline case read on its own
        n = seen.get((case.suite, case.name), 0)
        seen[(case.suite, case.name)] = n + 1
        position = index.at.get((case.suite, case.name, n))
        if position is None:
            cases.append(_one_sided(case, n))
            continue
        matched[position] = 1
        cases.append(_compare_case(case, baseline.results[position], n))
    skip = set(not_selected)
    for position, old in enumerate(_unmatched(baseline.results, matched)):
        if old is not None and (old.suite, old.name) not in skip:
            cases.append(_one_sided(old, index.occurrence[position], removed=True))
    s_now, s_before = current.summary, baseline.summary
    return BaselineComparison(
        file=baseline_file,
        schema_version=baseline.schema_version,
        run=baseline.run,
        counts=_counts(c.change for c in cases),
        turn_counts=_counts(t.change for c in cases for t in c.turns),
        noise=NOISE_RULE,
        pass_rate=_delta(s_before.pass_rate, s_now.pass_rate),
        total_tokens=_delta(
            float(s_before.token_usage.total_tokens), float(s_now.token_usage.total_tokens)
        ),
        cost_usd=_delta(s_before.cost_usd, s_now.cost_usd),
        duration_ms=_delta(baseline.run.duration_ms, current.run.duration_ms),
        warnings=[*_duplicates(seen, "this run"), *_duplicates(index.counts, "baseline")],
        cases=cases,
    )


def _counts(changes: Iterable[ChangeClass]) -> dict[ChangeClass, int]:
    """How many of ``changes`` are of each class (every class, in :data:`CLASSES` order)."""
    counts = dict.fromkeys(CLASSES, 0)
    for change in changes:
        counts[change] += 1
    return counts


def _unmatched(results: Sequence[CaseResult], matched: bytearray) -> Iterator[CaseResult | None]:
    """The baseline's results in order, None for those matched (a pass that reads only the
    unmatched ones when the results are kept in a file)."""
    if all(matched):
        return
    if not any(matched):
        yield from results
        return
    for position in range(len(results)):
        yield None if matched[position] else results[position]


def regressions(comparison: BaselineComparison) -> list[CaseChange]:
    """The regressed test cases, in this run's order."""
    return [c for c in comparison.cases if c.change == "regressed"]


def summary_line(comparison: BaselineComparison) -> str:
    """``vs baseline: 2 regressed, 1 fixed, 5 still passing, ...`` (classes with a count only)."""
    parts = [
        f"{comparison.counts.get(name, 0):,} {name.replace('_', ' ')}"
        for name in CLASSES
        if comparison.counts.get(name, 0)
    ]
    return f"vs baseline {comparison.file}: " + (", ".join(parts) if parts else "no test cases")
