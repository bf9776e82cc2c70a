"""The roll-up rules: pass/fail and every total, decided here once (pure; SPEC 6.4, 6.6).

- a turn passes when it has no error, is not skipped, its tool assertions hold
  and no metric failed;
- a test case passes when every turn passes (and it was not skipped and had no
  case-level error);
- each metric appears once per test case: score = mean over the turns that ran
  it, where a turn on which the metric errored (a grader raised, timed out or
  returned garbage: ``score`` None) counts as 0 -- so a metric that failed on
  a turn can never show a perfect score; passed = all of those passed; a
  metric no turn ran is left out;
- token usage is the element-wise sum; cost is the sum of the known costs
  (None when no turn had a known cost);
- summary counts are test cases, with separate turn counts;
- a repeated test case (``--repeat K``) is one result over its runs
  (:func:`aggregate_runs`), passing when its pass rate meets the gate.

The case runner, the scheduler, regrade and merge apply these to the models of
:mod:`multiturn_eval.results`; reporters only format what comes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .results import (
    CaseResult,
    CaseRun,
    CaseTotals,
    MetricResult,
    MetricSummary,
    Outcome,
    RepeatSummary,
    RepeatTotals,
    Simulation,
    Summary,
    TurnCounts,
    TurnPassCount,
    TurnResult,
    sum_costs,
    sum_usages,
)
from .types import TokenUsage


def turn_passed(turn: TurnResult) -> bool:
    return (
        not turn.errors
        and not turn.skipped
        and turn.tools_matched is not False
        and all(m.passed for m in turn.metric_results)
    )


def rollup_metrics(turns: Iterable[TurnResult]) -> list[MetricResult]:
    """One MetricResult per metric name: mean score over the turns that ran it."""
    grouped: dict[str, list[MetricResult]] = {}
    for turn in turns:
        for metric in turn.metric_results:
            grouped.setdefault(metric.metric_name, []).append(metric)
    rolled: list[MetricResult] = []
    for name, results in grouped.items():
        # an errored turn (no score) counts as 0 (SPEC 6.4)
        scores = [
            m.score if m.score is not None else 0.0
            for m in results
            if m.score is not None or m.error is not None
        ]
        failed = sum(1 for m in results if not m.passed)
        rolled.append(
            MetricResult(
                metric_name=name,
                kind=results[0].kind,
                score=sum(scores) / len(scores) if scores else None,
                threshold=results[0].threshold,
                passed=failed == 0,
                reason=(
                    f"passed on {len(results)} of {len(results)} turns"
                    if failed == 0
                    else f"failed on {failed} of {len(results)} turns"
                ),
            )
        )
    return rolled


def case_verdict(
    turns: Sequence[TurnResult],
    conversation: Sequence[MetricResult],
    errors: Sequence[str],
    skipped: bool,
) -> tuple[bool, Outcome]:
    """(passed, outcome) of a test case from its turns and its conversation-level results.

    It passes when it was not skipped, has no case-level error, has turns and every
    turn and every conversation check passed; a failed conversation check outranks
    an infrastructure error (as a failed check does on a turn).
    """
    passed = (
        not skipped
        and not errors
        and bool(turns)
        and all(t.passed for t in turns)
        and all(m.passed for m in conversation)
    )
    outcome = case_outcome(passed, skipped, turns, errors)
    if outcome == "error" and any(not m.passed and m.error is None for m in conversation):
        outcome = "failed"
    return passed, outcome


def case_outcome(
    passed: bool, skipped: bool, turns: Sequence[TurnResult], errors: Sequence[str]
) -> Outcome:
    if skipped:
        return "skipped"
    if passed:
        return "passed"
    # a failed check outranks an infrastructure error: it is what the suite is about
    if any(not t.passed and not t.skipped and not t.infrastructure_error for t in turns):
        return "failed"
    if errors or any(t.infrastructure_error for t in turns):
        return "error"
    return "failed"


class _Sum:
    """A running sum of the known values (None until one is known), added in order."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total: float | None = None

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total = (0 if self.total is None else self.total) + value


def _count(counts: TurnCounts, skipped: bool, passed: bool) -> None:
    """One more test case (or turn) in ``counts``."""
    counts.total += 1
    if skipped:
        counts.skipped += 1
    elif passed:
        counts.passed += 1
    else:
        counts.failed += 1


class _Repeats:
    """pass^K / pass@K of a run: counts over the repeated cases and the cases that ran once."""

    def __init__(self) -> None:
        self.repeated = self.runs = self.pass_all = self.pass_any = self.flaky = 0
        self.invalid = self.runs_per_case = 0
        self.once_ran = self.once_passed = 0

    def add(self, case: CaseResult | CaseTotals) -> None:
        r = case.repeat
        if r is None:
            self.once_ran += not case.skipped
            self.once_passed += case.passed
            return
        self.repeated += 1
        self.runs += r.runs
        self.pass_all += r.pass_all
        self.pass_any += r.pass_any
        self.flaky += r.flaky
        self.invalid += r.invalid_runs or 0
        self.runs_per_case = max(self.runs_per_case, r.planned_runs or r.runs)

    def mean_cost(self, cost: float | None) -> float | None:
        """``cost`` (the run's) per case run; None when no case was repeated or no cost known."""
        case_runs = self.runs + self.once_ran
        if not self.repeated or cost is None or not case_runs:
            return None
        return cost / case_runs

    def totals(self, ran: int) -> RepeatTotals | None:
        """None when no case was repeated; ``ran``: the test cases that ran."""
        if not self.repeated:
            return None
        pass_all, pass_any = self.pass_all + self.once_passed, self.pass_any + self.once_passed
        return RepeatTotals(
            runs_per_case=self.runs_per_case,
            case_runs=self.runs + self.once_ran,
            pass_all=pass_all,
            pass_any=pass_any,
            flaky=self.flaky,
            pass_all_rate=pass_all / ran if ran else None,
            pass_any_rate=pass_any / ran if ran else None,
            invalid_runs=self.invalid or None,
        )


def summarize(results: Iterable[CaseResult | CaseTotals]) -> Summary:
    """The run's totals, in one pass over ``results`` keeping counters and running sums.

    ``results`` may be read from a file one at a time (:mod:`.stored`): no
    result, and no list as long as the results, is kept (issue 23). Sums are
    added in result order, so they equal the sums over a list of the same results.
    A result may be given as its :class:`~multiturn_eval.results.CaseTotals` (the
    fields read here: what a stored result is read as, see ``ResultSequence.totals``).
    """
    cases = TurnCounts()  # the same four counts, of test cases
    turns = TurnCounts()
    metrics: dict[str, MetricSummary] = {}
    metric_scores: dict[str, list[float]] = {}  # [sum, count] a metric
    errored = 0
    token_usage = TokenUsage.sum([])
    cost, judge_cost, user_cost = _Sum(), _Sum(), _Sum()
    judge_usage: TokenUsage | None = None
    user_usage: TokenUsage | None = None
    repeats = _Repeats()
    for case in results:
        _count(cases, case.skipped, case.passed)
        errored += not (case.skipped or case.passed) and case.outcome == "error"
        for turn in case.all_turns():
            _count(turns, turn.skipped, turn.passed)
        for metric in case.metric_results:
            summary = metrics.setdefault(metric.metric_name, MetricSummary())
            if metric.passed:
                summary.passed += 1
            else:
                summary.failed += 1
            score = metric.score
            if score is None and metric.error is not None:  # an errored metric counts as 0
                score = 0.0  # (SPEC 6.4)
            if score is not None:
                acc = metric_scores.setdefault(metric.metric_name, [0, 0])
                acc[0] += score
                acc[1] += 1
        token_usage = token_usage + case.token_usage
        cost.add(case.cost_usd)
        judge_cost.add(case.judge_cost_usd)
        if case.judge_token_usage is not None:
            judge_usage = _add_usage(judge_usage, case.judge_token_usage)
        if case.simulation is not None:
            user_usage = _add_usage(user_usage, case.simulation.user_token_usage)
            user_cost.add(case.simulation.user_cost_usd)
        repeats.add(case)
    for name, (score_sum, count) in metric_scores.items():
        metrics[name].mean_score = score_sum / count
    ran = cases.total - cases.skipped
    return Summary(
        **cases.model_dump(),
        errored=errored,
        pass_rate=cases.passed / ran if ran else None,
        turns=turns,
        token_usage=token_usage,
        cost_usd=cost.total,
        metrics=metrics,
        repeat=repeats.totals(ran),
        mean_cost_per_case_run=repeats.mean_cost(cost.total),
        judge_token_usage=judge_usage,
        judge_cost_usd=judge_cost.total,
        user_token_usage=user_usage,
        user_cost_usd=user_cost.total,
    )


def _add_usage(total: TokenUsage | None, usage: TokenUsage | None) -> TokenUsage | None:
    """``total + usage`` as :meth:`TokenUsage.sum` adds them (from a zero usage)."""
    if total is None:
        total = TokenUsage.sum([])
    return total if usage is None else total + usage


# --------------------------------------------------------------------------- repeats

#: how far below the gate a pass rate may fall by float rounding alone (3/5 vs 0.6)
_RATE_EPSILON = 1e-9


def gate_passed(passes: int, runs: int, min_pass_rate: float) -> bool:
    """passes / runs >= min_pass_rate, exact at the edge (``3 of 5`` passes ``0.6``)."""
    return runs > 0 and passes / runs >= min_pass_rate - _RATE_EPSILON


def aggregate_runs(
    runs: Sequence[CaseResult | None], *, min_pass_rate: float = 1.0, planned: int | None = None
) -> CaseResult:
    """The K runs of one test case (``--repeat K``) as ONE result (SPEC 6.6).

    - ``repeat`` gives passes / K, pass^K (all passed), pass@K (any passed),
      each turn's pass count and the turns whose outcome varied; ``runs``
      holds every run with its turns, in run order.
    - ``passed`` is the gate: pass_rate >= ``min_pass_rate``.
    - The other top-level fields (turns, errors, metric_results, outcome, the
      legacy flattened turn) are ONE representative run, so every reporter
      that shows "the failing turn" shows a real one: the first failing run
      when the case failed the gate; when it passed, the first passing run
      (run 0 whenever run 0 passed; with ``min_pass_rate`` < 1 a passing case
      whose run 0 failed shows a passing run, so its turns agree with its
      verdict).
    - ``duration_ms``, ``token_usage`` and ``cost_usd`` are sums over every run.
    - Warnings: the representative run's, then the others' (``run N: ...``),
      each once.
    - ``runs[i]`` is run i; None (or a not-run, skipped result) is a run that
      did not finish (an interrupted or stopped run). Those are left out: the
      verdict is over the finished runs, ``repeat.planned_runs`` says how many
      were planned (``planned``, else ``len(runs)``), a warning says so, and
      each kept run keeps its own ``run_index``.
    """
    planned = len(runs) if planned is None else planned
    indexed = [(i, r) for i, r in enumerate(runs) if r is not None and not r.skipped]
    finished = [r for _, r in indexed]
    if not finished:
        raise ValueError("aggregate_runs needs at least one finished run")
    # a simulated run whose simulation was invalid says nothing about the agent: left out
    counted = [r for r in finished if counts_for_agent(r)] or []
    invalid = len(finished) - len(counted)
    total = len(counted)
    passes = sum(1 for r in counted if r.passed)
    passed = gate_passed(passes, total, min_pass_rate)
    representative = next(
        (r for r in counted if r.passed == passed), counted[0] if counted else finished[0]
    )  # a failing run when the case failed, a passing one when it passed
    counts: dict[int, list[int]] = {}
    for run in counted:
        for turn in run.all_turns():
            count = counts.setdefault(turn.turn_index, [0, 0])
            count[0] += turn.passed
            count[1] += 1
    turn_counts = [
        TurnPassCount(turn_index=i, passed=p, runs=n) for i, (p, n) in sorted(counts.items())
    ]
    warnings = list(representative.warnings)
    for number, run in indexed:
        if run is representative:
            continue
        for warning in run.warnings:
            text = f"run {number + 1}: {warning}"
            if warning not in warnings and text not in warnings:
                warnings.append(text)
    short = planned > total
    if short:
        warnings.append(
            f"only {total} of {planned} runs finished before the run stopped; "
            "the verdict is over those"
        )
    if invalid:
        warnings.append(
            f"{invalid} of {len(finished)} runs left out of the verdict: their simulation was "
            "invalid (invalid_simulation), which says nothing about the agent"
        )
    summary = RepeatSummary(
        runs=total,
        passes=passes,
        pass_rate=passes / total if total else 0.0,
        pass_all=passes == total,
        pass_any=passes > 0,
        min_pass_rate=min_pass_rate,
        flaky=0 < passes < total,
        turn_pass_counts=turn_counts,
        varying_turns=[c.turn_index for c in turn_counts if 0 < c.passed < c.runs],
        planned_runs=planned if short else None,
        invalid_runs=invalid or None,
        outcomes=_outcomes(finished),
    )
    errors = list(representative.errors)
    if not counted:  # every run was invalid: the case errors, it says nothing about the agent
        errors.append(
            f"all {len(finished)} runs were invalid simulations (invalid_simulation): "
            "no verdict on the agent"
        )
    return representative.model_copy(
        update={
            "passed": passed,
            "outcome": "passed" if passed else ("error" if not counted else representative.outcome),
            "errors": errors,
            "simulation": _simulation_totals(representative, finished),
            "duration_ms": sum(r.duration_ms for r in finished),
            "token_usage": TokenUsage.sum([r.token_usage for r in finished]),
            "cost_usd": sum_costs(r.cost_usd for r in finished),
            "judge_token_usage": sum_usages(r.judge_token_usage for r in finished),
            "judge_cost_usd": sum_costs(r.judge_cost_usd for r in finished),
            "warnings": warnings,
            "repeat": summary,
            "runs": [case_run(i, r) for i, r in indexed],
        }
    )


def counts_for_agent(result: CaseResult) -> bool:
    """Whether a run's result says something about the agent (an invalid simulation does not)."""
    return result.simulation is None or not result.simulation.invalid


def _outcomes(runs: Sequence[CaseResult]) -> dict[str, int] | None:
    """How many simulated runs ended with each outcome (None: not a simulated case)."""
    found: dict[str, int] = {}
    for run in runs:
        if run.simulation is not None:
            found[run.simulation.outcome] = found.get(run.simulation.outcome, 0) + 1
    return found or None


def _simulation_totals(representative: CaseResult, runs: Sequence[CaseResult]) -> Simulation | None:
    """The representative run's simulation block, with the simulator's usage and cost of every
    run (they were all spent)."""
    if representative.simulation is None:
        return None
    simulations = [r.simulation for r in runs if r.simulation is not None]
    return representative.simulation.model_copy(
        update={
            "user_token_usage": TokenUsage.sum([s.user_token_usage for s in simulations]),
            "user_cost_usd": sum_costs(s.user_cost_usd for s in simulations),
        }
    )


def case_run(run_index: int, result: CaseResult) -> CaseRun:
    """One run of a repeated test case, as ``CaseResult.runs`` keeps it."""
    return CaseRun(
        run_index=run_index,
        passed=result.passed,
        outcome=result.outcome,
        errors=list(result.errors),
        duration_ms=result.duration_ms,
        token_usage=result.token_usage,
        cost_usd=result.cost_usd,
        judge_token_usage=result.judge_token_usage,
        judge_cost_usd=result.judge_cost_usd,
        metric_results=result.metric_results,
        turns=result.all_turns(),
        tracebacks=result.tracebacks if result.turns is not None else None,
        fixture=result.fixture,
        simulation=result.simulation,
    )
