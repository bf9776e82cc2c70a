"""Turn, test-case and run results, and the roll-up rules (pure; no I/O).

Pass/fail and every total are decided here, once; reporters only format them.

Roll-up (SPEC 6.4):

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
- summary counts are test cases, with separate turn counts.

``outcome`` refines ``passed`` for reporters: ``error`` means the case failed
because of an infrastructure problem (backend error, timeout, broken session)
rather than a failed check; JUnit writes those as ``<error>``.

The top rung of the ladder ``errors``, ``sanitize`` -> ``types`` -> ``results``
(see :mod:`multiturn_eval.types`): it imports ``types`` alone, and re-exports the
:class:`~multiturn_eval.types.MetricResult` defined there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .types import MetricResult as MetricResult  # re-exported: a report model like the rest
from .types import TokenUsage, ToolInvocation, omitted_when_none

SCHEMA_VERSION = "1"

Outcome = Literal["passed", "failed", "error", "skipped"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArgMatchDetail(_Model):
    """How one expected tool was matched against the turn's calls."""

    expected_tool: str
    matched_call_index: int | None = None
    """Index into the turn's ``tool_invocations`` of the (first) matching call."""
    reason: str | None = None
    """Why it did not match; None when it matched."""


class UserTraceback(_Model):
    """Where your own code (agent, factory, tool, grader) raised, as Python prints it.

    Only your frames (the runner's own are left out), redacted like every report text,
    cut to a few thousand characters (the start and the innermost end kept)."""

    where: str
    """What raised: ``the factory``, ``the agent's send()``, ``tool 'subtract'``,
    ``grader 'exact'``, ..."""
    traceback: str


class TurnResult(_Model):
    turn_index: int
    line: int | None = None
    input: str
    response: str | None = None
    ground_truth: str | None = None
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    tools_matched: bool | None = None
    """None when the turn asserts no tools (or never got a reply)."""
    arg_match_details: list[ArgMatchDetail] = Field(default_factory=list)
    metric_results: list[MetricResult] = Field(default_factory=list)
    passed: bool
    skipped: bool = False
    errors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    infrastructure_error: bool = False
    """True when ``errors`` come from the agent or backend (not from a check)."""
    duration_ms: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    judge_token_usage: TokenUsage | None = omitted_when_none(
        "Tokens the LLM judges of this turn used (not in token_usage, which is the agent's)."
    )
    judge_cost_usd: float | None = omitted_when_none(
        "What the LLM judges of this turn cost (not in cost_usd); absent when no price is known."
    )
    tracebacks: list[UserTraceback] | None = omitted_when_none(
        "Where your code raised on this turn (the agent's send(), a tool, a grader): the "
        "traceback of each error, your frames only; absent when none raised."
    )

    def failed_checks(self) -> list[str]:
        """Every reason this turn failed, in words, most telling first."""
        reasons: list[str] = list(self.errors)
        for detail in self.arg_match_details:
            if detail.reason:
                reasons.append(detail.reason)
        for metric in self.metric_results:
            if not metric.passed:
                why = metric.error or metric.reason or "failed"
                reasons.append(f"{metric.metric_name}: {why}")
        return reasons


class TurnPassCount(_Model):
    """How often one turn passed over the runs of a repeated test case (SPEC 6.6)."""

    turn_index: int
    passed: int
    """Runs in which this turn passed."""
    runs: int
    """Runs in which this turn was graded (ran, or was skipped)."""


class RepeatSummary(_Model):
    """A test case run K times (``--repeat K``): the verdict over its runs (SPEC 6.6)."""

    runs: int
    """K."""
    passes: int
    """Runs that passed."""
    pass_rate: float
    """passes / K."""
    pass_all: bool
    """pass^K: every run passed."""
    pass_any: bool
    """pass@K: at least one run passed."""
    min_pass_rate: float
    """The gate: the case passes the run when pass_rate >= min_pass_rate."""
    flaky: bool
    """The runs disagree (some passed, some failed)."""
    turn_pass_counts: list[TurnPassCount] = Field(default_factory=list)
    """Every turn's pass count, in turn order."""
    varying_turns: list[int] = Field(default_factory=list)
    """The turns whose outcome varied between runs (0-based)."""
    planned_runs: int | None = omitted_when_none(
        "Set when fewer runs finished than were planned (an interrupted or stopped run): "
        "the K asked for; ``runs`` and the verdict count the finished runs only."
    )


class CaseRun(_Model):
    """One of the K runs of a repeated test case, in its own fresh session."""

    run_index: int
    passed: bool
    outcome: Outcome
    errors: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    judge_token_usage: TokenUsage | None = omitted_when_none("This run's LLM-judge tokens.")
    judge_cost_usd: float | None = omitted_when_none("What this run's LLM judges cost.")
    metric_results: list[MetricResult] = Field(default_factory=list)
    turns: list[TurnResult] = Field(default_factory=list)
    """This run's turns (a legacy single-turn case: its one turn)."""
    tracebacks: list[UserTraceback] | None = omitted_when_none(
        "Where your code raised in this run outside its turns (see CaseResult.tracebacks)."
    )


class CaseResult(_Model):
    index: int
    """Position of the test case in its suite file (0-based): results are identified by it."""
    name: str
    suite: str
    """The suite file, relative to the working directory when possible."""
    suite_name: str
    line: int | None = None
    tags: list[str] = Field(default_factory=list)
    backend: str
    model: str | None = None
    passed: bool
    skipped: bool = False
    outcome: Outcome
    errors: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    judge_token_usage: TokenUsage | None = omitted_when_none(
        "Tokens the LLM judges of this test case used, all turns (not in token_usage)."
    )
    judge_cost_usd: float | None = omitted_when_none(
        "What the LLM judges of this test case cost (not in cost_usd)."
    )
    turns: list[TurnResult] | None = None
    """Absent for legacy single-turn test cases, whose one turn is flattened below."""
    # Legacy single-turn test cases: the turn's fields at case level.
    input: str | None = None
    response: str | None = None
    ground_truth: str | None = None
    tool_invocations: list[ToolInvocation] | None = None
    tools_matched: bool | None = None
    arg_match_details: list[ArgMatchDetail] | None = None
    warnings: list[str] = Field(default_factory=list)
    repeat: RepeatSummary | None = omitted_when_none(
        "With --repeat K: the verdict over the K runs; the fields above are the run shown first."
    )
    runs: list[CaseRun] | None = omitted_when_none("With --repeat K: every run, in run order.")
    tracebacks: list[UserTraceback] | None = omitted_when_none(
        "Where your code raised outside the turns (the factory, close(), a conversation "
        "grader); for a legacy single-turn case also its turn's. Absent when none raised."
    )

    def all_turns(self) -> list[TurnResult]:
        """The turns of this case; a legacy case's single turn rebuilt from its fields."""
        if self.turns is not None:
            return self.turns
        return [
            TurnResult(
                turn_index=0,
                line=self.line,
                input=self.input or "",
                response=self.response,
                ground_truth=self.ground_truth,
                tool_invocations=self.tool_invocations or [],
                tools_matched=self.tools_matched,
                arg_match_details=self.arg_match_details or [],
                metric_results=self.metric_results,
                passed=self.passed,
                skipped=self.skipped,
                errors=[e for e in self.errors],
                warnings=self.warnings,
                infrastructure_error=self.outcome == "error",
                duration_ms=self.duration_ms,
                token_usage=self.token_usage,
                cost_usd=self.cost_usd,
                judge_token_usage=self.judge_token_usage,
                judge_cost_usd=self.judge_cost_usd,
                tracebacks=self.tracebacks,
            )
        ]

    def first_failing_turn(self) -> TurnResult | None:
        for turn in self.all_turns():
            if not turn.passed and not turn.skipped:
                return turn
        return None


class TurnCounts(_Model):
    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0


class MetricSummary(_Model):
    mean_score: float | None = None
    passed: int = 0
    failed: int = 0


class RepeatTotals(_Model):
    """The run's repeated test cases in numbers (``Summary.repeat``); counts are test cases."""

    runs_per_case: int
    """The largest K of the run's suites."""
    case_runs: int
    """Case runs that finished, over every test case."""
    pass_all: int
    """Test cases with pass^K: every run passed."""
    pass_any: int
    """Test cases with pass@K: at least one run passed."""
    flaky: int
    """Test cases whose runs disagreed."""
    pass_all_rate: float | None
    """pass_all / test cases that ran; None when none ran."""
    pass_any_rate: float | None
    """pass_any / test cases that ran; None when none ran."""


class Summary(_Model):
    total: int
    passed: int
    failed: int
    skipped: int
    errored: int = 0
    """Failed test cases whose failure is an infrastructure error (subset of ``failed``)."""
    pass_rate: float | None
    """passed / (total - skipped); None when no test case ran."""
    turns: TurnCounts
    token_usage: TokenUsage
    cost_usd: float | None = None
    metrics: dict[str, MetricSummary] = Field(default_factory=dict)
    repeat: RepeatTotals | None = omitted_when_none(
        "With --repeat K > 1: pass^K / pass@K and flaky counts over the test cases."
    )
    mean_cost_per_case_run: float | None = omitted_when_none(
        "With --repeat K > 1: cost_usd / case_runs (None when no cost was known)."
    )
    judge_token_usage: TokenUsage | None = omitted_when_none(
        "Tokens every LLM judge of the run used (not in token_usage, which is the agents')."
    )
    judge_cost_usd: float | None = omitted_when_none(
        "What the LLM judges of the run cost (not in cost_usd)."
    )


class GitHubRun(_Model):
    """The GitHub Actions run that produced a report (renderers link to it).

    Absent from ``report.json`` outside GitHub Actions.
    """

    server_url: str
    repository: str
    run_id: str
    run_attempt: str | None = None


class SpendCap(_Model):
    """``--max-cost``: what the run was allowed to spend and what it spent (estimated)."""

    max_cost_usd: float
    spent_usd: float
    """Estimated spend of the finished test cases (:func:`multiturn_eval.spend.spend_of`)."""
    reached: bool
    not_started: int = 0
    """Test cases skipped because the cap was reached."""


class ShardInfo(_Model):
    """Which shard of which split a report is (``--shard I/N``; see :mod:`.sharding`)."""

    index: int
    """1-based, as ``--shard I/N`` shows it (the Action's 0-based ``shard-index`` plus 1)."""
    total: int
    split_id: str = ""
    """Names the split: the algorithm, N and every selected case's key and weight."""


class RunInfo(_Model):
    suites: list[str]
    started_at: str
    finished_at: str
    duration_ms: float
    complete: bool
    git_sha: str | None = None
    pr_number: int | None = None
    version: str | None = None
    """multiturn-eval version that produced the report."""
    stop_reason: str | None = None
    """Why the run did not complete (interrupted, authentication failure, ...)."""
    github: GitHubRun | None = omitted_when_none()
    """The workflow run, when the report was made in GitHub Actions."""
    shard: ShardInfo | None = omitted_when_none(
        "With --shard I/N: which shard of which split this report is."
    )
    suite_hashes: dict[str, str] | None = omitted_when_none(
        "With --shard (and in merged reports): suite path -> sha256 of the file's bytes."
    )
    missing_shards: list[int] | None = omitted_when_none(
        "A merge with --allow-partial: the shards (1-based) whose reports were missing."
    )
    spend_cap: SpendCap | None = omitted_when_none(
        "With --max-cost: the cap, the estimated spend and the test cases it kept from starting."
    )


ChangeClass = Literal[
    "regressed",
    "fixed",
    "still_failing",
    "still_passing",
    "new",
    "removed",
    "not_run",
    "within_noise",
]
"""How a test case or turn changed against a baseline report (see :mod:`.comparison`)."""


class TurnChange(_Model):
    """One turn compared with the same turn (by index) of the baseline."""

    turn_index: int
    change: ChangeClass
    before: str | None = None
    """The baseline's verdict: ``passed``, ``failed``, ``skipped``, or ``3/5`` with repeats."""
    after: str | None = None
    """This run's verdict, in the same words."""
    failing_check: str | None = None
    """This run's first failed check on the turn (regressed and still failing turns)."""


class CaseChange(_Model):
    """One test case compared with its baseline counterpart."""

    suite: str
    name: str
    occurrence: int = 0
    """0 for the first test case of this name in its suite, 1 for the second, ..."""
    index: int | None = None
    """``CaseResult.index`` in this run (None: removed)."""
    baseline_index: int | None = None
    """``CaseResult.index`` in the baseline (None: new)."""
    change: ChangeClass
    before: str | None = None
    after: str | None = None
    pass_rate_before: float | None = None
    pass_rate_after: float | None = None
    p_value: float | None = None
    """With repeats: the one-sided Fisher exact test's p-value for the change in pass rate."""
    failing_check: str | None = None
    """This run's first failed check (turn number included)."""
    turns: list[TurnChange] = Field(default_factory=list)


class TotalsDelta(_Model):
    """A total of this run, the baseline's, and the difference (this run minus baseline)."""

    before: float | None = None
    after: float | None = None
    delta: float | None = None


class BaselineComparison(_Model):
    """This run compared with a baseline report (``--baseline``, SPEC 6.7)."""

    file: str
    """The baseline report as given (path)."""
    schema_version: str
    run: RunInfo
    """The baseline's run information."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Test cases per change class (every class present, 0 when none)."""
    turn_counts: dict[str, int] = Field(default_factory=dict)
    """Turns per change class."""
    noise: str
    """The rule that decided regressions of repeated test cases, in words."""
    pass_rate: TotalsDelta = Field(default_factory=TotalsDelta)
    total_tokens: TotalsDelta = Field(default_factory=TotalsDelta)
    cost_usd: TotalsDelta = Field(default_factory=TotalsDelta)
    duration_ms: TotalsDelta = Field(default_factory=TotalsDelta)
    warnings: list[str] = Field(default_factory=list)
    cases: list[CaseChange] = Field(default_factory=list)
    """Every test case of either report: this run's order, then removed ones."""


class RegradeInfo(_Model):
    """This report is a regrade (``multiturn-eval regrade``) of an earlier one."""

    file: str
    """The regraded report as given (path)."""
    run: RunInfo
    """The regraded report's run information."""
    rejudge: bool = False
    """``--rejudge``: LLM judges were called again instead of reusing recorded verdicts."""
    turns_regraded: int = 0
    """Turns graded again on their recorded reply."""
    flipped_to_failed: int = 0
    """Turns that passed in the report and fail now."""
    flipped_to_passed: int = 0
    """Turns that failed in the report and pass now."""
    turns_not_regradable: int = 0
    """Turns skipped as not regradable (input changed, not in the report)."""
    notes: list[str] = Field(default_factory=list)


class Report(_Model):
    schema_version: str = SCHEMA_VERSION
    run: RunInfo
    summary: Summary
    baseline: BaselineComparison | None = omitted_when_none(
        "With --baseline: this run compared with the baseline report."
    )
    regrade: RegradeInfo | None = omitted_when_none(
        "multiturn-eval regrade: the report this one regraded, and how many verdicts flipped."
    )
    results: list[CaseResult]
    """Last: ``report.json`` is written case by case after the fields above."""


# --------------------------------------------------------------------------- roll-up


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


def sum_costs(costs: Iterable[float | None]) -> float | None:
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def sum_usages(usages: Iterable[TokenUsage | None]) -> TokenUsage | None:
    """The element-wise sum of the usages given; None when every one is None (no judge ran)."""
    known = [u for u in usages if u is not None]
    return TokenUsage.sum(known) if known else None


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


def summarize(results: Sequence[CaseResult]) -> Summary:
    turns = TurnCounts()
    metrics: dict[str, MetricSummary] = {}
    metric_scores: dict[str, list[float]] = {}
    passed = failed = skipped = errored = 0
    for case in results:
        if case.skipped:
            skipped += 1
        elif case.passed:
            passed += 1
        else:
            failed += 1
            if case.outcome == "error":
                errored += 1
        for turn in case.all_turns():
            turns.total += 1
            if turn.skipped:
                turns.skipped += 1
            elif turn.passed:
                turns.passed += 1
            else:
                turns.failed += 1
        for metric in case.metric_results:
            summary = metrics.setdefault(metric.metric_name, MetricSummary())
            if metric.passed:
                summary.passed += 1
            else:
                summary.failed += 1
            if metric.score is not None:
                metric_scores.setdefault(metric.metric_name, []).append(metric.score)
            elif metric.error is not None:  # an errored metric counts as 0 (SPEC 6.4)
                metric_scores.setdefault(metric.metric_name, []).append(0.0)
    for name, scores in metric_scores.items():
        metrics[name].mean_score = sum(scores) / len(scores)
    ran = len(results) - skipped
    repeat, mean_cost = _repeat_totals(results, ran)
    return Summary(
        total=len(results),
        passed=passed,
        failed=failed,
        skipped=skipped,
        errored=errored,
        pass_rate=passed / ran if ran else None,
        turns=turns,
        token_usage=TokenUsage.sum([c.token_usage for c in results]),
        cost_usd=sum_costs(c.cost_usd for c in results),
        metrics=metrics,
        repeat=repeat,
        mean_cost_per_case_run=mean_cost,
        judge_token_usage=sum_usages(c.judge_token_usage for c in results),
        judge_cost_usd=sum_costs(c.judge_cost_usd for c in results),
    )


def _repeat_totals(
    results: Sequence[CaseResult], ran: int
) -> tuple[RepeatTotals | None, float | None]:
    """pass^K / pass@K totals; (None, None) unless some test case ran more than once."""
    repeated = [c.repeat for c in results if c.repeat is not None]
    if not repeated:
        return None, None
    case_runs = sum(r.runs for r in repeated) + sum(
        1 for c in results if c.repeat is None and not c.skipped
    )
    pass_all = sum(1 for r in repeated if r.pass_all) + sum(
        1 for c in results if c.repeat is None and c.passed
    )
    pass_any = sum(1 for r in repeated if r.pass_any) + sum(
        1 for c in results if c.repeat is None and c.passed
    )
    totals = RepeatTotals(
        runs_per_case=max(r.planned_runs or r.runs for r in repeated),
        case_runs=case_runs,
        pass_all=pass_all,
        pass_any=pass_any,
        flaky=sum(1 for r in repeated if r.flaky),
        pass_all_rate=pass_all / ran if ran else None,
        pass_any_rate=pass_any / ran if ran else None,
    )
    cost = sum_costs(c.cost_usd for c in results)
    return totals, (cost / case_runs if cost is not None and case_runs else None)


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
    total = len(finished)
    passes = sum(1 for r in finished if r.passed)
    passed = gate_passed(passes, total, min_pass_rate)
    representative = next(
        (r for r in finished if r.passed == passed), finished[0]
    )  # a failing run when the case failed, a passing one when it passed
    counts: dict[int, list[int]] = {}
    for run in finished:
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
    summary = RepeatSummary(
        runs=total,
        passes=passes,
        pass_rate=passes / total,
        pass_all=passes == total,
        pass_any=passes > 0,
        min_pass_rate=min_pass_rate,
        flaky=0 < passes < total,
        turn_pass_counts=turn_counts,
        varying_turns=[c.turn_index for c in turn_counts if 0 < c.passed < c.runs],
        planned_runs=planned if short else None,
    )
    return representative.model_copy(
        update={
            "passed": passed,
            "outcome": "passed" if passed else representative.outcome,
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
    )
