"""The report's models: turn, test-case and run results, summary, comparison (pure data).

``report.json`` is these models serialised (its schema is generated from them);
every reporter reads them and only formats. The rules that decide pass/fail and
every total are in :mod:`multiturn_eval.rollup`, decided there once; the two sums
every total is made of (:func:`sum_costs`, :func:`sum_usages`) are here.

``outcome`` refines ``passed`` for reporters: ``error`` means the case failed
because of an infrastructure problem (backend error, timeout, broken session)
rather than a failed check; JUnit writes those as ``<error>``.

The top rung of the ladder ``errors``, ``sanitize`` -> ``types`` -> ``results``
(see :mod:`multiturn_eval.types`): it imports ``types`` alone, and re-exports the
:class:`~multiturn_eval.types.MetricResult` and ``omitted_when_none`` defined there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# MetricResult and omitted_when_none are defined in types (a grader receives metric
# results) and re-exported: the report's models and the rule for their new fields
from .types import MetricResult as MetricResult
from .types import TokenUsage, ToolInvocation
from .types import omitted_when_none as omitted_when_none

SCHEMA_VERSION = "1"

Outcome = Literal["passed", "failed", "error", "skipped"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------ simulated users

SimulationOutcome = Literal[
    "goal_met",
    "gave_up",
    "out_of_scope",
    "max_turns",
    "invalid_simulation",
    "agent_error",
    "diverged",
]
"""How a simulated conversation ended (see :mod:`multiturn_eval.simulation.record`)."""
Source = Literal["scripted", "simulated"]
"""Who wrote a turn's input: the suite (``turns:``, ``opening``) or the simulated user."""


class SimulatorInfo(_Model):
    """Which simulator played the user."""

    backend: str
    """anthropic | openai | python."""
    model: str | None = None
    """The LLM simulator's model; None for a python simulator."""
    factory: str | None = omitted_when_none("A python simulator's factory (module:callable).")


class FidelityVerdict(_Model):
    """The fidelity judge on one simulated step (a message, or an end without one)."""

    turn_index: int | None
    """The turn whose input the message was; None for an end without a message."""
    passed: bool
    reason: str | None = None
    error: str | None = None
    """Set when the judge gave no usable verdict (the step then counts as failed)."""


class Fidelity(_Model):
    """``fidelity: true``: the judge's verdict on every simulated step of the run."""

    judged: int
    failed: int
    verdicts: list[FidelityVerdict] = Field(default_factory=list)
    judge_token_usage: TokenUsage | None = None
    """The fidelity judge's tokens (they are judges' tokens: counted with the case's judges)."""
    judge_cost_usd: float | None = None
    ended_with: SimulationOutcome | None = omitted_when_none(
        "When the judge made the run invalid: the outcome the simulated user had ended with."
    )
    ended_reason: str | None = omitted_when_none("...and the reason it had given.")


class Simulation(_Model):
    """How the simulated user's part of a test case went (``CaseResult.simulation``)."""

    goal: str
    outcome: SimulationOutcome
    reason: str | None = None
    user_turns: int
    """Messages the simulated part sent (the opening included, scripted turns not)."""
    simulator: SimulatorInfo
    user_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    """The simulator's tokens (not in token_usage, the agent's, nor in judge_token_usage)."""
    user_cost_usd: float | None = None
    """What the simulator cost; None when no price is known (a python simulator)."""
    fidelity: Fidelity | None = omitted_when_none(
        "With fidelity: true, the fidelity judge's verdicts on the simulated messages."
    )
    silent_end: bool | None = omitted_when_none(
        "True when the simulated user ended without a last message (done, no message): "
        "regrade replays that end as it was."
    )
    digest: str | None = omitted_when_none(
        "What decided the conversation (the user: block and the simulator), hashed: "
        "regrade replays the recorded conversation only while it is unchanged."
    )

    @property
    def invalid(self) -> bool:
        """The simulator broke its rules (or broke): the run says nothing about the agent."""
        return self.outcome == "invalid_simulation"


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
    source: Source | None = omitted_when_none(
        "A simulated test case's turns: who wrote the input (scripted: the suite's turns "
        "and the opening; simulated: the simulated user). Absent on other test cases."
    )
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
    replayed: bool | None = omitted_when_none(
        "With --fixtures: true when every model call of this turn was answered from the "
        "fixtures, false when one was made live or was not in them; absent when fixtures "
        "are off or the turn made no model call."
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
    invalid_runs: int | None = omitted_when_none(
        "A simulated test case: runs whose simulation was invalid (invalid_simulation), "
        "left out of runs, passes and pass^K; they say nothing about the agent."
    )
    outcomes: dict[str, int] | None = omitted_when_none(
        "A simulated test case: how many runs ended with each outcome (goal_met, gave_up, "
        "invalid_simulation, ...), every finished run counted."
    )


class CaseFixture(_Model):
    """With ``--fixtures``: what one run of a test case did with its fixture file."""

    file: str
    """The fixture, as messages name it (``fixtures/support/refund-flow.jsonl``)."""
    mode: str
    """replay, record or update."""
    replayed: int = 0
    """Model calls answered from the fixture."""
    recorded: int = 0
    """Model calls made live and recorded."""
    missed: int = 0
    """Model calls the fixture did not answer (each is a turn's or a metric's error)."""
    misses: list[str] = Field(default_factory=list)
    """Why each of them missed: where (case, run, turn, side, call), the first difference
    with both values, the kind of change, and the command that re-records the case."""
    rerecord: str | None = None
    """The command that re-records just this test case (``--fixtures update -k NAME``)."""
    unused: list[str] = Field(default_factory=list)
    """Replay: recorded calls no call of this run used (a call no longer made; reported, not
    a failure). Update: the recordings dropped."""
    notes: list[str] = Field(default_factory=list)
    """What else happened (re-recorded from turn 3, a damaged fixture replaced, ...)."""
    written: bool = False
    """The fixture file was (re)written (record, update)."""
    recorded_at: str | None = None
    """When the fixture now on disk was recorded (UTC, ``2025-06-01T09:30:00Z``)."""
    models: dict[str, list[str]] = Field(default_factory=dict)
    """The models in the fixture, per side (agent, judge, user)."""
    replayed_cost_usd: float | None = None
    """The recorded cost of the calls answered from the fixture: not spent, not counted by
    --max-cost (None: none, or no price known)."""
    error: str | None = None
    """Why the fixture was not written (it would hold a secret): the test case errors."""


class RunFixtures(_Model):
    """With ``--fixtures``: the run's model calls replayed, recorded and missed."""

    mode: str
    """replay, record or update (``mixed`` when the suites differ)."""
    dir: str
    """The fixtures root (``DIR`` of ``DIR/<suite stem>/``), or the roots, comma-separated."""
    replayed: int = 0
    recorded: int = 0
    missed: int = 0
    unused: int = 0
    """Recorded calls no call used (replay), or dropped (update)."""
    recorded_at: list[str] | None = None
    """[first, last]: when the oldest and the newest fixture of the run were recorded."""
    models: dict[str, list[str]] = Field(default_factory=dict)
    """Every model in the fixtures, per side (agent, judge, user)."""
    replayed_cost_usd: float | None = None
    """The recorded cost of the calls answered from fixtures: not spent."""
    written: int = 0
    """Fixture files (re)written."""


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
    simulation: Simulation | None = omitted_when_none(
        "A simulated test case: how this run's simulated conversation went."
    )
    fixture: CaseFixture | None = omitted_when_none("With --fixtures: this run's fixture.")


class CaseResult(_Model):
    index: int
    """Position of the test case in its suite file (0-based): results are identified by it."""
    name: str
    suite: str
    """The suite file, relative to the working directory when possible."""
    suite_name: str
    line: int | None = None
    """The test case's line in the file it is written in (``file`` when set, else ``suite``)."""
    file: str | None = omitted_when_none(
        "The JSON Lines file (the suite's test_cases_file) this test case was read from, "
        "as shown like suite; line and the turns' lines are that file's. Absent for a "
        "test case written in the suite file."
    )
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
    simulation: Simulation | None = omitted_when_none(
        "A simulated test case (user:): the goal, how the conversation ended, the simulator "
        "and its usage and cost (apart from the agent's and the judges'). With --repeat, the "
        "run shown's, with the usage and cost of every run."
    )
    fixture: CaseFixture | None = omitted_when_none(
        "With --fixtures: what this test case did with its fixture (with --repeat, the run "
        "shown; every run's is in runs)."
    )
    replayed: bool | None = omitted_when_none(
        "With --fixtures, a legacy single-turn case: its turn's replayed (see TurnResult)."
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
                replayed=self.replayed,
            )
        ]

    @property
    def written_in(self) -> str:
        """The file the test case is written in: its ``file``, else its suite."""
        return self.file or self.suite

    @property
    def location(self) -> str:
        """``file:line`` of the test case as messages show it (the file alone without a line)."""
        return f"{self.written_in}:{self.line}" if self.line else self.written_in

    def first_failing_turn(self) -> TurnResult | None:
        for turn in self.all_turns():
            if not turn.passed and not turn.skipped:
                return turn
        return None


# What the roll-up reads of a stored result (:func:`multiturn_eval.rollup.summarize`): a
# run's snapshot and final report total the results read back from its store, and these
# read a result's JSON some five times faster than a whole CaseResult (the rest of the
# text is skipped). Each field, and its default, is CaseResult's.


class _Totals(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TurnTotals(_Totals):
    passed: bool
    skipped: bool = False


class MetricTotals(_Totals):
    metric_name: str
    passed: bool
    score: float | None = None
    error: str | None = None


class SimulationTotals(_Totals):
    user_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    user_cost_usd: float | None = None


class RepeatCounts(_Totals):
    runs: int
    pass_all: bool
    pass_any: bool
    flaky: bool
    planned_runs: int | None = None
    invalid_runs: int | None = None


class CaseTotals(_Totals):
    """The fields of a :class:`CaseResult` its roll-up into the summary reads."""

    passed: bool
    skipped: bool = False
    outcome: Outcome
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    metric_results: list[MetricTotals] = Field(default_factory=list)
    judge_token_usage: TokenUsage | None = None
    judge_cost_usd: float | None = None
    turns: list[TurnTotals] | None = None
    repeat: RepeatCounts | None = None
    simulation: SimulationTotals | None = None

    def all_turns(self) -> list[TurnTotals]:
        """As :meth:`CaseResult.all_turns`: a legacy case's one turn is the case's verdict."""
        if self.turns is not None:
            return self.turns
        return [TurnTotals(passed=self.passed, skipped=self.skipped)]


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
    invalid_runs: int | None = omitted_when_none(
        "Runs of simulated test cases left out of pass^K and pass@K: their simulation was "
        "invalid (invalid_simulation)."
    )


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
    user_token_usage: TokenUsage | None = omitted_when_none(
        "Tokens the simulated users of the run used (not in token_usage nor judge_token_usage)."
    )
    user_cost_usd: float | None = omitted_when_none(
        "What the simulated users of the run cost (not in cost_usd nor judge_cost_usd)."
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


class McpServerRun(_Model):
    """One MCP server of a suite's agent (``agent.mcp_servers``), as the run started it."""

    suite: str
    name: str
    scope: Literal["case", "run"]
    """``run``: one server shared by every test case; ``case``: one per test case (and run)."""
    transport: Literal["stdio", "streamable-http"]
    starts: int
    """How many times it started: once for the run or once per case run, plus restarts
    after crashes."""
    startup_ms: float | None = None
    """The mean time a start took (process, ``initialize``, tool list)."""
    max_startup_ms: float | None = None
    """The longest start."""


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
    mcp_servers: list[McpServerRun] | None = omitted_when_none(
        "With agent.mcp_servers: every MCP server the run started, its scope and start-up time."
    )
    fixtures: RunFixtures | None = omitted_when_none(
        "With --fixtures: the mode, the directory, the calls replayed, recorded and missed, "
        "when the fixtures were recorded and with which models."
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


# The two sums every total is made of (the roll-up rules in rollup.py use them, and so
# do the case runner, regrade and the simulated user's accounting).


def sum_costs(costs: Iterable[float | None]) -> float | None:
    """The sum of the known costs; None when none is known."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def sum_usages(usages: Iterable[TokenUsage | None]) -> TokenUsage | None:
    """The element-wise sum of the usages given; None when every one is None (no judge ran)."""
    known = [u for u in usages if u is not None]
    return TokenUsage.sum(known) if known else None
