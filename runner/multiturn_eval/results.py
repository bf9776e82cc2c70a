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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .types import TokenUsage, ToolInvocation

SCHEMA_VERSION = "1"

Outcome = Literal["passed", "failed", "error", "skipped"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _is_none(value: object) -> bool:
    return value is None


def omitted_when_none(description: str | None = None) -> Any:
    """An optional field that ``report.json`` leaves out while it is None.

    Every field added to the report after 1.0 uses it, so a run that does not use
    the feature writes the very bytes it wrote before (and readers of 1.0 reports
    keep working): ``Field(default=None, exclude_if=...)``, honoured by pydantic's
    serialiser and by the fallback walker in :mod:`multiturn_eval.sanitize`.
    """
    return Field(default=None, exclude_if=_is_none, description=description)


class MetricResult(_Model):
    """One metric on one turn, or rolled up over a test case's turns."""

    metric_name: str
    kind: Literal["standard", "code", "judge"]
    score: float | None = None
    threshold: float | None = None
    passed: bool
    error: str | None = None
    """Set when the metric could not be computed (a grader raised): the metric fails."""
    reason: str | None = None
    details: dict[str, Any] | None = None
    scope: Literal["conversation"] | None = omitted_when_none(
        "'conversation' for a test case's conversation-level checks (conversation_evaluations, "
        "conversation_tools), run once on the whole conversation; absent on per-turn metrics "
        "and on their roll-up."
    )


class ArgMatchDetail(_Model):
    """How one expected tool was matched against the turn's calls."""

    expected_tool: str
    matched_call_index: int | None = None
    """Index into the turn's ``tool_invocations`` of the (first) matching call."""
    reason: str | None = None
    """Why it did not match; None when it matched."""


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


class CaseRun(_Model):
    """One of the K runs of a repeated test case, in its own fresh session."""

    run_index: int
    passed: bool
    outcome: Outcome
    errors: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    turns: list[TurnResult] = Field(default_factory=list)
    """This run's turns (a legacy single-turn case: its one turn)."""


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


class Report(_Model):
    schema_version: str = SCHEMA_VERSION
    run: RunInfo
    summary: Summary
    results: list[CaseResult]


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
        judge_token_usage=sum_usages(c.judge_token_usage for c in results),
        judge_cost_usd=sum_costs(c.judge_cost_usd for c in results),
    )
