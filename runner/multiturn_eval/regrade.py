"""``multiturn-eval regrade REPORT.json``: the current suite's checks on recorded replies.

Every assertion, evaluator and code grader of the *current* suites (those of
``run.suites`` in the report, unless ``--suite`` is given) runs again on the
responses and tool calls the report recorded, without calling any agent: the
normal pipeline (:func:`~multiturn_eval.run.run_suites`) runs with the replay
backend (:mod:`.backends.replay`) in place of each suite's ``agent:``, so a
regrade grades through exactly the code a live run does.

Rules (the README's "Regrade without calling the agent"):

- a turn whose input is not the recorded one is skipped as "not regradable:
  input changed since the report", and so is every later turn of its test case
  (their recorded replies answered another conversation); a test case or turn
  the report does not have is "not regradable: not in the report". A test case
  with such a turn is reported as not run (skipped) with that reason, never
  graded on the wrong data; its earlier turns keep their new verdicts;
- a recorded turn with no reply (an error, a skip) is kept as it was;
- durations, token usage and cost are the recorded ones (no agent ran);
- LLM judges reuse their recorded verdicts through
  :data:`~multiturn_eval.grading.recorded.RECORDED_JUDGEMENTS`, unless
  ``--rejudge``;
- a simulated test case (``user:``) replays its recorded conversation: the
  recorded user messages are sent as scripted input, the simulator is never
  called, the recorded outcome is kept, and the fidelity judge's recorded verdicts
  too unless ``--rejudge`` (:data:`~multiturn_eval.simulation.case.RECORDED_CONVERSATIONS`);
  a case whose ``user:`` block, simulator or scripted opening changed since the
  report is "not regradable: simulation changed";
- the report gets a ``regrade`` block and the summary says how many turn
  verdicts flipped each way against the regraded report;
- **restriction:** of a repeated report (``--repeat``: ``runs``), the run shown
  at case level is regraded (the case's ``repeat`` and ``runs`` are not
  carried over, so pass^K and flakiness are not recomputed), and the regrade
  block says so; the case's token usage and cost stay the recorded totals of
  all its runs.

Exit codes are those of ``run`` (a test case that is not regradable counts as
not run: exit 1 with ``--fail-on failures``); ``--baseline`` works as in ``run``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .backends.replay import INPUT_CHANGED, NOT_IN_REPORT, ReplayBackend, ReplayState
from .comparison import CaseIndex
from .errors import ConfigError, ConfigIssue, ReportFormatError
from .grading.recorded import RECORDED_JUDGEMENTS, JudgeKey
from .reports.reader import load_report
from .results import CaseResult, MetricResult, RegradeInfo, Report, TurnResult, sum_costs
from .rollup import case_verdict, rollup_metrics
from .simulation.case import RECORDED_CONVERSATIONS
from .types import TokenUsage

if TYPE_CHECKING:
    from .environment import RunEnvironment
    from .interrupts import InterruptGuard
    from .loaded import LoadedSuite
    from .run import RunOptions, RunOutcome
    from .settings import RunSettings

EARLIER_CHANGED = "not regradable: an earlier turn's input changed since the report"


class RecordedCases(Mapping[tuple[str, str, int], CaseResult]):
    """The regraded report's cases by (suite, name, occurrence), not held: an index of
    positions in its results (read from the report file when the report was read by
    :func:`~multiturn_eval.reports.reader.load_report`), the last :data:`KEEP` read kept
    (a case's judges, its fix and its flips ask for it while it is in flight)."""

    KEEP = 256

    def __init__(self, results: Sequence[CaseResult]) -> None:
        self.results = results
        self.index = CaseIndex(results).at
        self._recent: OrderedDict[int, CaseResult] = OrderedDict()

    def __getitem__(self, key: tuple[str, str, int]) -> CaseResult:
        position = self.index[key]
        case = self._recent.get(position)
        if case is None:
            case = self._recent[position] = self.results[position]
            if len(self._recent) > self.KEEP:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(position)
        return case

    def __iter__(self) -> Iterator[tuple[str, str, int]]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class _Recorded:
    """:class:`~.grading.recorded.RecordedJudgements` over the regraded report."""

    def __init__(self, state: ReplayState) -> None:
        self._state = state

    def lookup(self, key: JudgeKey) -> MetricResult | None:
        marks = self._state.marks.get((key.suite, key.case_index))
        case = marks.recorded if marks is not None else None
        if case is None:
            return None
        if key.turn_index is None:
            metrics = case.metric_results
        else:
            turn = next((t for t in case.all_turns() if t.turn_index == key.turn_index), None)
            metrics = turn.metric_results if turn is not None else []
        return next((m for m in metrics if m.metric_name == key.metric_name), None)


def _rebuild(
    case: CaseResult,
    turns: list[TurnResult],
    *,
    errors: list[str],
    skipped: bool,
    duration_ms: float,
) -> CaseResult:
    """``case`` with new turns, rolled up as :func:`~.case_runner.build_case_result` does.

    The conversation-level results the pipeline graded (``scope: conversation``:
    ``conversation_evaluations`` and ``conversation_tools``) are kept and decide the
    verdict too; a case that was not regraded at all keeps none.
    """
    conversation = [] if skipped else [m for m in case.metric_results if m.scope == "conversation"]
    passed, outcome = case_verdict(turns, conversation, errors, skipped)
    update: dict[str, object] = {
        "passed": passed,
        "skipped": skipped,
        "outcome": outcome,
        "errors": errors,
        "duration_ms": duration_ms,
        "token_usage": TokenUsage.sum([t.token_usage for t in turns]),
        "cost_usd": sum_costs(t.cost_usd for t in turns),
        "metric_results": [*rollup_metrics(turns), *conversation],
    }
    if case.turns is not None:
        update["turns"] = turns
        return case.model_copy(update=update)
    turn = turns[0] if turns else None
    if turn is not None and not turn.skipped:
        update["errors"] = [*errors, *turn.errors]
        update["metric_results"] = turn.metric_results
        if turn.infrastructure_error and update["outcome"] == "failed":
            update["outcome"] = "error"
    if turn is not None:
        update.update(
            response=turn.response,
            tool_invocations=turn.tool_invocations,
            tools_matched=turn.tools_matched,
            arg_match_details=turn.arg_match_details,
            tracebacks=turn.tracebacks,
        )
    return case.model_copy(update=update)


def _case_level_errors(case: CaseResult) -> list[str]:
    if case.turns is not None:
        return list(case.errors)
    turn_errors = set(case.all_turns()[0].errors) if not case.skipped else set()
    return [e for e in case.errors if e not in turn_errors]


class _Conversations:
    """:class:`~.simulation.case.RecordedConversations` over the regraded report."""

    def __init__(self, state: ReplayState, rejudge: bool) -> None:
        self._state = state
        self.rejudge = rejudge

    def lookup(self, suite: str, case_index: int) -> CaseResult | None:
        marks = self._state.marks.get((suite, case_index))
        return marks.recorded if marks is not None else None


class Regrader:
    """The regrade of one report: its replay state and the hooks the pipeline calls."""

    def __init__(self, original: Report, file: str, *, rejudge: bool = False) -> None:
        self.original = original
        self.file = file
        self.rejudge = rejudge
        self.state = ReplayState(recorded=RecordedCases(original.results))

    def backend(self, loaded: LoadedSuite, settings: RunSettings) -> ReplayBackend:
        return ReplayBackend(loaded, settings, self.state)

    def fix(self, case: CaseResult) -> CaseResult:
        """A regraded case as reported: recorded no-reply turns back, not regradable ones skipped.

        Idempotent: the pipeline applies it when the case finishes (console, results.jsonl)
        and again when it builds the report.
        """
        marks = self.state.marks.get((case.suite, case.index))
        if marks is None:  # never started (an interrupted regrade): as the pipeline says
            return case
        original = marks.recorded
        if original is None or marks.refused is not None:
            reason = marks.refused or NOT_IN_REPORT
            unsent = [
                t.model_copy(
                    update={
                        "skipped": True,
                        "passed": False,
                        "errors": [reason],
                        "infrastructure_error": False,
                    }
                )
                for t in case.all_turns()
            ]
            return _rebuild(
                case.model_copy(update={"simulation": None}),
                unsent,
                errors=[reason],
                skipped=True,
                duration_ms=0.0,
            )
        recorded = {t.turn_index: t for t in original.all_turns()}
        turns: list[TurnResult] = []
        blocked: str | None = None
        for turn in case.all_turns():
            mark = marks.turns.get(turn.turn_index)
            if blocked is not None or (mark is not None and mark != "recorded"):
                reason = blocked or mark or NOT_IN_REPORT
                turns.append(
                    turn.model_copy(
                        update={
                            "skipped": True,
                            "passed": False,
                            "errors": [reason],
                            "infrastructure_error": False,
                        }
                    )
                )
                if blocked is None:
                    blocked = EARLIER_CHANGED if reason == INPUT_CHANGED else NOT_IN_REPORT
                continue
            old = recorded.get(turn.turn_index)
            if mark == "recorded" and old is not None:
                turns.append(old.model_copy(update={"line": turn.line}))
            elif old is not None:
                turns.append(turn.model_copy(update={"duration_ms": old.duration_ms}))
            else:
                turns.append(turn)
        not_regradable = [
            t
            for t in turns
            if t.skipped and t.errors[:1] and t.errors[0].startswith("not regradable")
        ]
        errors = [e for e in _case_level_errors(case) if not e.startswith("not regradable")]
        if not_regradable:
            first = not_regradable[0]
            errors = [f"{first.errors[0]} (turn {first.turn_index + 1})"]
        rebuilt = _rebuild(
            case,
            turns,
            errors=errors,
            skipped=bool(not_regradable),
            duration_ms=original.duration_ms,
        )
        if original.runs:  # a repeated case: what all its recorded runs used
            rebuilt = rebuilt.model_copy(
                update={"token_usage": original.token_usage, "cost_usd": original.cost_usd}
            )
        return rebuilt

    def annotate(self, report: Report) -> None:
        """The ``regrade`` block: flips against the regraded report, what could not be graded."""
        to_failed = to_passed = 0
        for case in report.results:
            marks = self.state.marks.get((case.suite, case.index))
            recorded = marks.recorded if marks is not None else None
            if recorded is None:
                continue
            before = {t.turn_index: t for t in recorded.all_turns()}
            for turn in case.all_turns():
                old = before.get(turn.turn_index)
                if old is None or old.skipped or turn.skipped:
                    continue
                to_failed += old.passed and not turn.passed
                to_passed += turn.passed and not old.passed
        not_regradable = sum(
            1
            for case in report.results
            for t in case.all_turns()
            if t.skipped and t.errors[:1] and t.errors[0].startswith("not regradable")
        )
        notes: list[str] = []
        repeated = sum(1 for c in self.original.results if c.repeat is not None or c.runs)
        if repeated:
            notes.append(
                f"{repeated} repeated test case(s): only the run shown at case level was regraded"
            )
        if self.rejudge:
            notes.append("--rejudge: LLM judges were called again")
        report.regrade = RegradeInfo(
            file=self.file,
            run=self.original.run,
            rejudge=self.rejudge,
            turns_regraded=self.state.calls,
            flipped_to_failed=to_failed,
            flipped_to_passed=to_passed,
            turns_not_regradable=not_regradable,
            notes=notes,
        )


def regrade(
    report_path: str,
    suites: Sequence[str] | None,
    options: RunOptions,
    environment: RunEnvironment,
    *,
    rejudge: bool = False,
    stream: TextIO | None = None,
    guard: InterruptGuard | None = None,
) -> RunOutcome:
    """Regrade ``report_path`` with the current ``suites`` (default: the report's own)."""
    from .run import run_suites

    try:
        original = load_report(Path(report_path))
    except ReportFormatError as exc:
        raise ConfigError(ConfigIssue(f"cannot regrade: {exc}")) from None
    paths = list(suites) if suites else list(original.run.suites)
    if not paths:
        raise ConfigError(ConfigIssue(f"{report_path}: the report names no suite; give --suite"))
    regrader = Regrader(original, report_path, rejudge=rejudge)
    once: dict[str, Any] = {}
    if "repeat" in {f.name for f in fields(options)}:
        once["repeat"] = 1  # each recorded case is replayed once (see the restriction above)
    options = replace(
        options,
        **once,
        backend_factory=regrader.backend,
        finish_case=regrader.fix,
        finish_report=regrader.annotate,
        judges_called=rejudge,
        agent_called=False,
        fixtures="off",  # the replies come from the report; judges (--rejudge) are called live
    )
    token = RECORDED_JUDGEMENTS.set(None if rejudge else _Recorded(regrader.state))
    conversations = RECORDED_CONVERSATIONS.set(_Conversations(regrader.state, rejudge))
    try:
        return run_suites(paths, options, environment, stream=stream, guard=guard)
    finally:
        RECORDED_CONVERSATIONS.reset(conversations)
        RECORDED_JUDGEMENTS.reset(token)
