"""One test case: open a session, send turns in order, grade each, close (SPEC 6.1-6.3).

Failures are values: a timeout, a backend error or an exception from the
user's agent becomes an error on that turn, and the next turn is still sent on
the same session. The session is given up (remaining turns ``skipped``) after
two consecutive session errors -- a :class:`SessionError` or a turn timeout --
or as soon as the backend says the session is dead (``session_alive=False``).
Only cancellation (an interrupted run) and :class:`FatalBackendError` leave
this module as exceptions, and the session is closed either way.

Misbehaving user code stays inside its test case (see :mod:`.usercode`):

- ``sys.exit()``, ``KeyboardInterrupt``, ``GeneratorExit`` or a
  ``CancelledError`` the agent raised itself (the run was not being
  cancelled) is a turn error in words: ``the agent called sys.exit(0)``. In the
  factory it means the session could not be opened, in ``close()`` a warning,
  in a grader a metric error. So ``sys.exit(0)`` in an agent fails its test
  case; it never ends the run, and never makes it exit 0.
- Only our own deadline is a timeout: a ``TimeoutError`` the agent raises is
  an ordinary turn error with its message (``TimeoutError: upstream took too
  long``), and it does not count towards the two-session-errors rule.
- Each step has its own bound: opening the session ``session_timeout``
  (default 60 s), each turn ``turn_timeout`` (120 s), each code grader
  ``grader_timeout`` (60 s), closing :data:`CLOSE_TIMEOUT`. Sync user code
  that ignores its bound keeps its (daemon) thread; the case gets a warning
  naming it ("send() of turn 3 still running after its timeout; its thread
  was abandoned") and the run goes on without it.
- A bug in the runner itself while a case runs (it should not happen) fails
  that test case with ``internal error: ...`` instead of the run.

One job, kept whole (about 700 lines): a case's session, its turns, their
grading and its conversation-level checks share the case's state (results so
far, consecutive session errors, tracebacks, the judges of the conversation),
and the rules above are about how those steps follow each other. The checks
themselves are in :mod:`.grading`, the verdicts in :mod:`.rollup`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .errors import (
    BackendError,
    CaseReadError,
    FatalBackendError,
    MultiturnEvalError,
    SessionError,
)
from .grading.conversation import conversation_turns, evaluate_conversation
from .grading.evaluators import evaluate_standard, run_code_grader
from .grading.matchers import RegexBudget
from .grading.response_checks import evaluate_response_check, no_reply, suite_validator
from .grading.tool_assertions import check_conversation_tools, check_turn_tools
from .replies import checked_reply
from .results import (
    CaseResult,
    MetricResult,
    Outcome,
    Simulation,
    Source,
    TurnResult,
    UserTraceback,
    sum_costs,
    sum_usages,
)
from .rollup import case_verdict, rollup_metrics, turn_passed
from .suite import (
    CodeEvaluation,
    JudgeConfig,
    JudgeEvaluation,
    StandardEvaluation,
    TestCase,
    Turn,
)
from .types import (
    CaseContext,
    ConversationContext,
    GraderContext,
    PreviousTurn,
    TokenUsage,
    TurnFile,
    TurnReply,
    read_only,
)
from .usercode import Tracebacks, collect_tracebacks, error_text, guarded, watch_abandoned

if TYPE_CHECKING:
    from .backends.base import Backend, Session
    from .fixtures.cassette import Cassette
    from .grading.judges import ConversationJudging, JudgeResult, Judging
    from .loaded import LoadedSuite
    from .settings import RunSettings
    from .simulation import AgentAnswer, Outgoing

#: marks the label of async user code that ignored its cancellation (see usercode.guarded)
_ASYNC = "async "
#: the usage of a turn whose reply reports none (TokenUsage is frozen: one serves every turn)
_NO_USAGE = TokenUsage()
#: consecutive session errors (or timeouts) after which a session is given up
MAX_CONSECUTIVE_SESSION_ERRORS = 2
#: how long closing a session may take before the run moves on
CLOSE_TIMEOUT = 10.0
#: the same while the run is being interrupted
INTERRUPTED_CLOSE_TIMEOUT = 0.5


class FatalRunError(MultiturnEvalError):
    """Raised out of the case runner when the whole run must stop; carries the case's result.

    Here, not in :mod:`multiturn_eval.errors`, because it carries a
    :class:`~multiturn_eval.results.CaseResult` (``errors`` imports nothing of the
    package); the scheduler catches it.
    """

    def __init__(self, result: CaseResult, message: str) -> None:
        super().__init__(message)
        self.result = result
        self.message = message


def user_tracebacks(raised: Tracebacks) -> list[UserTraceback] | None:
    """The tracebacks collected, for a result (None: none, so report.json leaves it out)."""
    return [UserTraceback(where=w, traceback=t) for w, t in raised] or None


def attach_tracebacks(result: TurnResult, raised: Tracebacks) -> None:
    result.tracebacks = user_tracebacks(raised)
    if raised.dropped:
        result.warnings.append(
            f"{raised.dropped} more traceback(s) on this turn were not kept "
            f"(the first {len(raised)} are)"
        )


def effective_instructions(loaded: LoadedSuite, case: TestCase) -> str | None:
    parts = [p for p in (loaded.instructions, case.instructions) if p]
    return "\n\n".join(parts) if parts else None


def case_context(loaded: LoadedSuite, index: int, case: TestCase | None = None) -> CaseContext:
    """What the agent's factory and the tools get for test case ``index`` (``case``: the
    case itself when the caller has it, else it is read from ``loaded.cases``)."""
    case = case if case is not None else loaded.cases.materialize(index)
    return CaseContext(
        test_case_name=loaded.case_name(index),
        agent=read_only(loaded.agent_mapping),
        instructions=effective_instructions(loaded, case),
        context=read_only(case.context),
    )


_error_text = error_text


def _step_timeouts(loaded: LoadedSuite, settings: RunSettings | None) -> tuple[float, float]:
    """(session_timeout, grader_timeout) from the run's settings, else the suite's, else defaults."""
    from .settings import DEFAULTS

    if settings is not None:
        return settings.session_timeout, settings.grader_timeout
    execution = loaded.suite.execution
    session = execution.session_timeout if execution is not None else None
    grader = execution.grader_timeout if execution is not None else None
    return (
        session if session is not None else DEFAULTS["session_timeout"],
        grader if grader is not None else DEFAULTS["grader_timeout"],
    )


def unanswered_turn(
    loaded: LoadedSuite, case_index: int, turn_index: int, turn: Turn, **fields: Any
) -> TurnResult:
    """A failed turn that got no reply (an error, a skip, a case never run)."""
    if "source" not in fields and case_index in loaded.simulations:
        fields["source"] = "scripted"  # a simulated case's scripted turn
    return TurnResult(
        turn_index=turn_index,
        line=loaded.turn_line(case_index, turn_index),
        input=turn.input,
        ground_truth=turn.ground_truth,
        passed=False,
        **fields,
    )


class CaseRunner:
    """Runs the test case at ``index`` of ``loaded`` on ``backend``.

    ``settings`` (the suite's resolved :class:`RunSettings`) gives
    ``session_timeout`` and ``grader_timeout``; without it they come from the
    suite's ``execution:`` block, else their defaults. ``run_index`` is the run
    (``--repeat``); a simulated user's seed comes from it.

    A simulated test case (``user:``) runs its scripted turns, then hands the open
    session to the simulated user (:mod:`multiturn_eval.simulation.case`): each
    simulated message is one more turn, sent and graded exactly like a scripted one
    (:meth:`send`).
    """

    def __init__(
        self,
        loaded: LoadedSuite,
        index: int,
        backend: Backend,
        turn_timeout: float,
        *,
        settings: RunSettings | None = None,
        cassette: Cassette | None = None,
        run_index: int = 0,
    ) -> None:
        self.loaded = loaded
        self.cassette = cassette
        """This run's fixture (``--fixtures``; None: off): current while the case runs."""
        self.index = index
        self.run_index = run_index
        """Which run of the test case this is (``--repeat``: 0..K-1; a simulated user's seed)."""
        self.case = loaded.cases.materialize(index)  # CaseReadError: see unreadable_result
        self.backend = backend
        self.turn_timeout = turn_timeout
        self.session_timeout, self.grader_timeout = _step_timeouts(loaded, settings)
        self.env: Mapping[str, str] = settings.env if settings is not None else {}
        """The run's environment variables (a judge's default API key and base URL)."""
        self.turns = list(self.case.effective_turns())
        """The turns sent so far and to send: the scripted ones, then (a simulated case) one
        per simulated message, as it is sent."""
        self.simulated = loaded.simulations.get(index)
        """The simulated user (None: the case has no ``user:``)."""
        self.simulation: Simulation | None = None
        self._consecutive = 0
        """Consecutive session errors (SessionError or the turn timeout) of the session."""
        self._sources: dict[int, Source] = {}
        """Who wrote each simulated turn's input (the others are scripted)."""
        self._scripted: list[tuple[str, AgentAnswer]] = []
        """The scripted turns sent and what each got (a simulated user sees them)."""
        self._fidelity: tuple[TokenUsage | None, float | None] = (None, None)
        """The fidelity judge's usage and cost (counted with the case's judges)."""
        self.results: list[TurnResult] = []
        self.case_errors: list[str] = []
        self.warnings: list[str] = []
        self.conversation_metrics: list[MetricResult] = []
        self._judging: ConversationJudging | None = None
        """The conversation-level judges' settings and usage (None: the case has none)."""
        self._started = time.perf_counter()
        self._skip_reason: str | None = None
        self._abandoned: list[str] = []
        self._raised = Tracebacks()
        """Where user code raised outside a turn (each turn collects its own)."""
        self._runner_failed = False

    # -------------------------------------------------------------------------- run

    async def run(self) -> CaseResult:
        if self.cassette is None:
            return await self._guarded_run()
        from .fixtures.cassette import use_cassette
        from .fixtures.outcome import with_fixture

        # every model call of the case (agent, judges, simulated user, a python agent's own
        # httpx) finds this case's fixture through the context, threads included
        with use_cassette(self.cassette):
            try:
                result = await self._guarded_run()
            except FatalRunError as exc:
                exc.result = with_fixture(exc.result, self.cassette, completed=False)
                raise
            except BaseException:
                self.cassette.finish(completed=False)  # interrupted: the fixture stays as it was
                raise
        return with_fixture(result, self.cassette, completed=not self._runner_failed)

    async def _guarded_run(self) -> CaseResult:
        started = self._started = time.perf_counter()
        with watch_abandoned() as abandoned, collect_tracebacks() as raised:
            self._abandoned = abandoned
            self._raised = raised  # the factory's, close()'s, the conversation graders'
            try:
                return await self._run(started)
            except (FatalRunError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug in the runner: this case fails, the run goes on
                self._runner_failed = True
                self.case_errors.append(f"internal error: {error_text(exc)}")
                self._skip_rest("the runner failed on this test case")
                return self._finish(started)

    def _set_turn(self, turn: int | None) -> None:
        """The turn whose model calls come next (1-based; None: the conversation checks)."""
        if self.cassette is not None:
            self.cassette.set_turn(turn)

    def _turn_done(self, turn_index: int) -> None:
        """The last result is that turn's: say whether its calls came from the fixture."""
        if self.cassette is not None and self.results:
            self.results[-1].replayed = self.cassette.turn_replayed(turn_index + 1)

    def _user_left_recording(self, turn_index: int) -> str | None:
        """Why the simulated user's calls for turn ``turn_index`` missed (None: they did not)."""
        assert self.cassette is not None
        misses = self.cassette.user_misses(turn_index + 1)
        return misses[0].headline if misses else None

    def _fixture_miss(self, turn_index: int) -> str | None:
        """The turn's error when its agent left the recording (the first such miss), whatever
        the agent made of the refused request (a python agent may have swallowed the 404)."""
        if self.cassette is None:
            return None
        for miss in self.cassette.turn_misses(turn_index + 1):
            if miss.side == "agent":  # a judge's miss is its metric's error, a user's the case's
                return miss.message
        return None

    async def _run(self, started: float) -> CaseResult:
        ctx = case_context(self.loaded, self.index, self.case)
        session: Session | None = None
        try:
            try:
                async with asyncio.timeout(self.session_timeout) as deadline:
                    session = await guarded(
                        self.backend.open_session(ctx), "factory", abandon_as=_ASYNC + "the factory"
                    )
            except FatalBackendError as exc:
                self.case_errors.append(f"could not open a session: {_error_text(exc)}")
                self._skip_rest("the session could not be opened")
                raise FatalRunError(self._finish(started), _error_text(exc)) from exc
            except Exception as exc:
                if isinstance(exc, TimeoutError) and deadline.expired():
                    why = f"timed out after {self.session_timeout:g} s (session_timeout)"
                else:
                    why = _error_text(exc)
                self.case_errors.append(f"could not open a session: {why}")
                self._note_abandoned("")
                self._skip_rest("the session could not be opened")
                if self.simulated is not None:
                    from .simulation.case import not_simulated

                    self.simulation = not_simulated(
                        self.simulated, f"could not open a session: {why}"
                    )
                await self._grade_conversation()
                return self._finish(started)
            await self._run_turns(session, started)
            if self.simulated is not None:
                await self._simulate(session, started)
        finally:
            if session is not None:
                await self._close(session)
        await self._grade_conversation()
        return self._finish(started)  # after closing: close()'s warnings belong to the case

    def _note_abandoned(self, where: str) -> None:
        """Warn about user code left running past its timeout (since the last call)."""
        for what in self._abandoned:
            if what.startswith(_ASYNC):
                self.warnings.append(
                    f"{what[len(_ASYNC) :]}{where} ignored its cancellation and is still "
                    "running after its timeout; it was left behind"
                )
            else:
                self.warnings.append(
                    f"{what}{where} still running after its timeout; its thread was abandoned"
                )
        self._abandoned.clear()

    async def _close(self, session: Session) -> None:
        # When the run is being interrupted, CI gives the process a few seconds before
        # SIGKILL: close briefly so that the reports still get written.
        task = asyncio.current_task()
        limit = (
            INTERRUPTED_CLOSE_TIMEOUT if task is not None and task.cancelling() else CLOSE_TIMEOUT
        )
        try:
            async with asyncio.timeout(limit) as deadline:
                await guarded(session.close(), "agent", abandon_as=_ASYNC + "close()")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                self.warnings.append(f"closing the session timed out after {limit:g} s")
            else:
                self.warnings.append(f"closing the session failed: {_error_text(exc)}")
        self._note_abandoned("")

    async def _run_turns(self, session: Session, started: float) -> None:
        """The scripted turns, in order; the rest skipped once the session is unrecoverable."""
        for turn_index, turn in enumerate(self.case.effective_turns()):
            answer = await self.send_turn(session, turn_index, turn, started)
            self._scripted.append((turn.input, answer))
            dead_reason = (
                "the backend reported the session dead"
                if answer.session_dead
                else f"{self._consecutive} consecutive session errors"
                if self._consecutive >= MAX_CONSECUTIVE_SESSION_ERRORS
                else None
            )
            if dead_reason is not None:
                self._skip_rest(f"session unrecoverable after turn {turn_index + 1}: {dead_reason}")
                return

    async def send_turn(
        self, session: Session, turn_index: int, turn: Turn, started: float
    ) -> AgentAnswer:
        """Send one turn on the session and grade it; its result joins :attr:`results`.

        Failures are values (the turn's error); only a FatalBackendError leaves, as
        :class:`FatalRunError` with the case's result so far.
        """
        from .simulation import AgentAnswer

        with self._turn_tracebacks(turn_index):
            files = tuple(
                TurnFile.from_path(self.loaded.base_dir / f.path)
                if f.media_type is None
                else TurnFile(self.loaded.base_dir / f.path, f.media_type)
                for f in turn.files
            )
            t0 = time.perf_counter()
            reply: TurnReply | None = None
            error: str | None = None
            session_error = dead = False
            self._set_turn(turn_index + 1)
            try:
                async with asyncio.timeout(self.turn_timeout) as deadline:
                    sent = guarded(
                        session.send(turn.input, files), "agent", abandon_as=_ASYNC + "send()"
                    )
                    reply = checked_reply(await sent)
            except FatalBackendError as exc:
                self._record_error(turn_index, turn, _error_text(exc), t0)
                self._skip_rest("the run stopped")
                raise FatalRunError(self._finish(started), _error_text(exc)) from exc
            except SessionError as exc:
                error = _error_text(exc)
                session_error = True
                dead = not exc.session_alive
            except BackendError as exc:
                error = _error_text(exc)
                dead = not exc.session_alive
            except TimeoutError as exc:
                if deadline.expired():  # our deadline, not the agent's own TimeoutError
                    error = f"timed out after {self.turn_timeout:g} s (turn_timeout)"
                    session_error = True
                else:
                    error = _error_text(exc)
            except Exception as exc:  # the agent's own failure (UserCodeAbort too): this turn only
                error = _error_text(exc)
            self._note_abandoned(f" of turn {turn_index + 1}")
            missed = self._fixture_miss(turn_index)
            if missed is not None:  # not in the fixtures: that is the turn's error
                error, session_error, dead = missed, False, False
            self._consecutive = self._consecutive + 1 if session_error else 0
            if error is not None:
                self._record_error(turn_index, turn, error, t0)
                self._turn_done(turn_index)
                return AgentAnswer(
                    None, error=error, session_error=session_error, session_dead=dead
                )
            assert reply is not None
            duration_ms = (time.perf_counter() - t0) * 1000
            try:
                result = await self._grade(turn_index, turn, reply, duration_ms)
            except FatalBackendError as exc:  # a judge refused its credentials: stop the run
                self._record_error(turn_index, turn, f"judge: {_error_text(exc)}", t0)
                self._skip_rest("the run stopped")
                raise FatalRunError(self._finish(started), _error_text(exc)) from exc
            except Exception as exc:  # a bug while grading: this turn fails, the case goes on
                self._record_error(
                    turn_index, turn, f"internal error while grading: {error_text(exc)}", t0
                )
            else:
                self.results.append(result)
            finally:
                self._note_abandoned(f" of turn {turn_index + 1}")
            self._turn_done(turn_index)
            return AgentAnswer(reply.response, tuple(reply.tool_invocations))

    async def _simulate(self, session: Session, started: float) -> None:
        """The simulated user's part, after the scripted turns (:mod:`.simulation.case`)."""
        from .simulation.case import CaseInfo, run_simulation

        plan = self.simulated
        assert plan is not None
        suite = self.loaded.suite

        async def send(outgoing: Outgoing) -> AgentAnswer:
            turn = Turn(input=outgoing.text)  # no ground truth: the case's evaluations apply
            self.turns.append(turn)
            self._sources[outgoing.turn_index] = outgoing.source
            try:
                return await self.send_turn(session, outgoing.turn_index, turn, started)
            finally:  # what follows a turn: the simulated user's calls (their own turn, see
                self._set_turn(None)  # USER_TURN) or the fidelity judge's (the conversation's)

        info = CaseInfo(
            suite=self.loaded.display_path,
            index=self.index,
            name=self.loaded.case_name(self.index),
            context=self.case.context,
            run_index=self.run_index,
            turn_timeout=self.turn_timeout,
            session_timeout=self.session_timeout,
            env=self.env,
            pricing=suite.pricing,
            suite_judge=suite.judge,
            case_judge=self.case.judge,
            keyless=self.cassette is not None and self.cassette.mode in ("replay", "update"),
            left_recording=self._user_left_recording if self.cassette is not None else None,
        )
        self._set_turn(None)
        part = await run_simulation(plan, send, self._scripted, info)
        self._note_abandoned(" (the simulated user)")
        self.simulation = part.simulation
        self.warnings.extend(part.warnings)
        self._fidelity = (part.judge_usage, part.judge_cost)
        if part.simulation.outcome == "invalid_simulation":
            self.case_errors.append(f"invalid_simulation: {part.simulation.reason}")
        if part.simulation.outcome == "diverged" and self.cassette is not None:
            first = self.cassette.user_misses()  # the fixture's miss, in full, is the error
            self.case_errors.append(first[0].message if first else part.simulation.reason or "")
        if part.fatal is not None:
            self._skip_rest("the run stopped")
            raise FatalRunError(self._finish(started), _error_text(part.fatal)) from part.fatal

    @contextmanager
    def _turn_tracebacks(self, turn_index: int) -> Iterator[None]:
        """Collect what user code raised during one turn onto that turn's result."""
        with collect_tracebacks() as raised:
            try:
                yield
            finally:  # the turn's result is at its index, however the turn ended
                if raised and turn_index < len(self.results):
                    attach_tracebacks(self.results[turn_index], raised)

    def _record_error(self, turn_index: int, turn: Turn, error: str, t0: float) -> None:
        # a response check on a turn without a reply fails, saying so (never skipped silently)
        checks = [
            no_reply(e, error)
            for e in self.loaded.evaluations_for(self.case, turn)
            if isinstance(e, StandardEvaluation) and e.is_response_check
        ]
        self._unanswered(
            turn_index,
            turn,
            errors=[error],
            infrastructure_error=True,
            duration_ms=(time.perf_counter() - t0) * 1000,
            **({"metric_results": checks} if checks else {}),
        )

    def _unanswered(self, turn_index: int, turn: Turn, **fields: Any) -> None:
        """Record turn ``turn_index`` as one that got no reply (:func:`unanswered_turn`)."""
        self.results.append(
            unanswered_turn(
                self.loaded, self.index, turn_index, turn, source=self._source(turn_index), **fields
            )
        )

    def _source(self, turn_index: int) -> Source | None:
        """Who wrote turn ``turn_index``'s input, on a simulated case (else None: not said)."""
        if self.simulated is None:
            return None
        return self._sources.get(turn_index, "scripted")

    def _skip_rest(self, reason: str) -> None:
        if self._skip_reason is None:
            self._skip_reason = reason
        for turn_index in range(len(self.results), len(self.turns)):
            turn = self.turns[turn_index]
            self._unanswered(turn_index, turn, skipped=True, errors=[f"skipped: {reason}"])

    # ---------------------------------------------------------------------- grading

    async def _grade(
        self, turn_index: int, turn: Turn, reply: TurnReply, duration_ms: float
    ) -> TurnResult:
        calls = list(reply.tool_invocations)
        budget = RegexBudget()  # one for the turn: its tool assertions and its regex checks
        tools_matched, details = check_turn_tools(turn, calls, budget)
        metrics: list[MetricResult] = []
        grader_ctx: GraderContext | None = None
        judge_usages: list[TokenUsage] = []
        judge_costs: list[float | None] = []
        judge_warnings: list[str] = []
        evaluations = self.loaded.evaluations_for(self.case, turn)
        # a turn's judges run side by side (each is a model call); results keep their order
        judges = [e for e in evaluations if isinstance(e, JudgeEvaluation)]
        verdicts: dict[int, JudgeResult] = {}
        if judges:
            outcomes = await asyncio.gather(
                *(self._judge(turn_index, turn, reply, e) for e in judges),
                return_exceptions=True,
            )
            for outcome in outcomes:  # a 401 (FatalBackendError) or a bug: raised as before
                if isinstance(outcome, BaseException):
                    raise outcome
            verdicts = {
                id(e): o
                for e, o in zip(judges, outcomes, strict=True)
                if not isinstance(o, BaseException)
            }
        for evaluation in evaluations:
            if isinstance(evaluation, JudgeEvaluation):
                judged = verdicts[id(evaluation)]
                metrics.append(judged.metric)
                judge_warnings.extend(judged.warnings)
                if judged.usage is not None:
                    judge_usages.append(judged.usage)
                    judge_costs.append(judged.cost_usd)
            elif isinstance(evaluation, CodeEvaluation):
                if grader_ctx is None:
                    grader_ctx = self._grader_context(turn_index, turn, reply)
                grader = self.loaded.graders[evaluation.grader]
                metrics.append(
                    await run_code_grader(evaluation, grader, grader_ctx, self.grader_timeout)
                )
            elif isinstance(evaluation, StandardEvaluation) and evaluation.is_response_check:
                metrics.append(
                    evaluate_response_check(
                        evaluation,
                        reply.response,
                        budget=budget,
                        validator=suite_validator(self.loaded, evaluation),
                    )
                )
            elif turn.ground_truth is not None:
                metrics.append(evaluate_standard(evaluation, reply.response, turn.ground_truth))
        result = TurnResult(
            turn_index=turn_index,
            line=self.loaded.turn_line(self.index, turn_index),
            input=turn.input,
            source=self._source(turn_index),
            response=reply.response,
            ground_truth=turn.ground_truth,
            tool_invocations=calls,
            tools_matched=tools_matched,
            arg_match_details=details,
            metric_results=metrics,
            passed=False,
            warnings=[*reply.warnings, *judge_warnings],
            duration_ms=duration_ms,
            token_usage=reply.token_usage or _NO_USAGE,
            cost_usd=reply.cost_usd,
            judge_token_usage=sum_usages(judge_usages),
            judge_cost_usd=sum_costs(judge_costs),
        )
        result.passed = turn_passed(result)
        return result

    async def _judge(
        self, turn_index: int, turn: Turn, reply: TurnReply, spec: JudgeEvaluation
    ) -> JudgeResult:
        from .grading.judges import judge_turn
        from .grading.recorded import JudgeKey

        return await judge_turn(
            spec,
            self._judging_at(self.case.judge, turn.judge),
            key=JudgeKey(self.loaded.display_path, self.index, turn_index, spec.metric_name),
            turn_input=turn.input,
            reply=reply.response,
            ground_truth=turn.ground_truth,
        )

    def _judging_at(self, *levels: JudgeConfig | None) -> Judging:
        """What a judge of this test case is graded with; ``levels``: the case's judge block
        (and the turn's), under the suite's."""
        from .grading.judges import JudgeTexts, Judging

        suite = self.loaded.suite
        return Judging(
            JudgeTexts(self.loaded.judge_files), (suite.judge, *levels), self.env, suite.pricing
        )

    def _grader_context(self, turn_index: int, turn: Turn, reply: TurnReply) -> GraderContext:
        return GraderContext(
            turn_input=turn.input,
            agent_response=reply.response,
            ground_truth=turn.ground_truth,
            tool_invocations=tuple(reply.tool_invocations),
            retrieval_context=tuple(turn.retrieval_context)
            if turn.retrieval_context is not None
            else None,
            turn_index=turn_index,
            test_case_name=self.loaded.case_name(self.index),
            turn_config=read_only(turn.turn_config),
            case_context=read_only(self.case.context),
            previous_turns=tuple(
                PreviousTurn(
                    turn_index=r.turn_index,
                    input=r.input,
                    response=r.response,
                    tool_invocations=tuple(r.tool_invocations),
                )
                for r in self.results
            ),
        )

    # ----------------------------------------------------------- conversation level

    def conversation_context(self) -> ConversationContext:
        """The finished conversation as ``conversation_evaluations`` graders see it."""
        # the case-level error (a session that never opened) says it all; else why turns were skipped
        errors = [*self.case_errors] or ([self._skip_reason] if self._skip_reason else [])
        return ConversationContext(
            test_case_name=self.loaded.case_name(self.index),
            case_context=read_only(self.case.context),
            turns=conversation_turns(self.results, [t.turn_config for t in self.turns]),
            instructions=effective_instructions(self.loaded, self.case),
            session_error="; ".join(errors) if errors else None,
        )

    async def _grade_conversation(self) -> None:
        """Run the case's conversation-level checks once, after its last turn."""
        self._set_turn(None)
        evaluations = [
            e
            for e in self.case.conversation_evaluations or []
            if not (isinstance(e, CodeEvaluation) and not e.enabled)
        ]
        if not evaluations and self.case.conversation_tools is None:
            self._user_goal()
            return
        ctx = self.conversation_context()
        if self.case.conversation_tools is not None:
            self.conversation_metrics.append(
                check_conversation_tools(self.case.conversation_tools, ctx)
            )
        if any(isinstance(e, JudgeEvaluation) for e in evaluations):
            from .grading.judges import ConversationJudging

            self._judging = ConversationJudging(
                judging=self._judging_at(self.case.judge),
                suite=self.loaded.display_path,
                case_index=self.index,
            )
        for evaluation in evaluations:
            try:
                metric = await evaluate_conversation(
                    evaluation,
                    ctx,
                    graders=self.loaded.graders,
                    grader_timeout=self.grader_timeout,
                    judging=self._judging,
                )
            except FatalBackendError as exc:  # a judge refused its credentials: stop the run
                self.conversation_metrics.append(
                    MetricResult(
                        metric_name=evaluation.metric_name,
                        kind=evaluation.type,
                        passed=False,
                        error=f"judge: {_error_text(exc)}",
                        scope="conversation",
                    )
                )
                raise FatalRunError(self._finish(self._started), _error_text(exc)) from exc
            except (FatalRunError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug while grading: this metric fails, the case goes on
                metric = MetricResult(
                    metric_name=evaluation.metric_name,
                    kind=evaluation.type,
                    passed=False,
                    error=f"internal error while grading: {error_text(exc)}",
                    scope="conversation",
                )
            finally:
                self._note_abandoned(" of the conversation evaluations")
            self.conversation_metrics.append(metric)
        if self._judging is not None:
            self.warnings.extend(self._judging.warnings)
        self._user_goal()

    def _user_goal(self) -> None:
        """The simulated user's verdict, ``user_goal`` (unless ``require_goal: false``)."""
        if self.simulation is None or self.simulated is None:
            return
        from .simulation.record import user_goal_metric

        metric = user_goal_metric(self.simulation, self.simulated.require_goal)
        if metric is not None:
            self.conversation_metrics.append(metric)

    # ---------------------------------------------------------------------- results

    def _finish(self, started: float) -> CaseResult:
        judging = self._judging
        return build_case_result(
            self.loaded,
            self.index,
            self.results,
            case=self.case,
            errors=self.case_errors,
            warnings=self.warnings,
            duration_ms=(time.perf_counter() - started) * 1000,
            conversation_metrics=self.conversation_metrics,
            conversation_judge_usage=sum_usages(
                [*(judging.usages if judging else []), self._fidelity[0]]
            ),
            conversation_judge_cost=sum_costs(
                [*(judging.costs if judging else []), self._fidelity[1]]
            ),
            tracebacks=user_tracebacks(self._raised),
            simulation=self.simulation,
        )


def _identity(loaded: LoadedSuite, index: int, tags: Sequence[str]) -> dict[str, Any]:
    """The fields of a CaseResult that say which test case it is and which agent ran it."""
    agent = loaded.suite.agent
    return {
        "index": index,
        "name": loaded.case_name(index),
        "suite": loaded.display_path,
        "suite_name": loaded.name,
        "line": loaded.case_line(index),
        "file": loaded.cases.file_of(index),
        "tags": list(tags),
        "backend": agent.backend,
        "model": agent.model,
    }


def build_case_result(
    loaded: LoadedSuite,
    index: int,
    turns: Sequence[TurnResult],
    *,
    case: TestCase | None = None,
    errors: Sequence[str] = (),
    warnings: Sequence[str] = (),
    duration_ms: float = 0.0,
    skipped: bool = False,
    conversation_metrics: Sequence[MetricResult] = (),
    conversation_judge_usage: TokenUsage | None = None,
    conversation_judge_cost: float | None = None,
    tracebacks: Sequence[UserTraceback] | None = None,
    simulation: Simulation | None = None,
) -> CaseResult:
    """Roll turn results up into a test-case result (SPEC 6.4).

    The case's ``judge_token_usage`` / ``judge_cost_usd`` are its turns' plus those of
    its conversation-level judges (``conversation_judge_*``).

    ``conversation_metrics`` (``scope: conversation``) follow the roll-up of the
    per-turn metrics in ``metric_results``; the case passes only if they pass. A
    failed conversation check makes the outcome ``failed`` (a failed check
    outranks an infrastructure error, as for turns).
    """
    case = case if case is not None else loaded.cases.materialize(index)
    turns = list(turns)
    conversation = list(conversation_metrics)
    passed, outcome = case_verdict(turns, conversation, errors, skipped)
    common: dict[str, Any] = {
        **_identity(loaded, index, case.tags),
        "passed": passed,
        "skipped": skipped,
        "outcome": outcome,
        "errors": list(errors),
        "duration_ms": duration_ms,
        "token_usage": TokenUsage.sum([t.token_usage for t in turns]),
        "cost_usd": sum_costs(t.cost_usd for t in turns),
        "judge_token_usage": sum_usages(
            [*(t.judge_token_usage for t in turns), conversation_judge_usage]
        ),
        "judge_cost_usd": sum_costs([*(t.judge_cost_usd for t in turns), conversation_judge_cost]),
        "metric_results": [*rollup_metrics(turns), *conversation],
        "warnings": [*warnings, *(w for t in turns for w in t.warnings)],
        "tracebacks": list(tracebacks) if tracebacks else None,
        "simulation": simulation,
    }
    if not case.is_legacy:
        return CaseResult(**common, turns=turns)
    turn = turns[0] if turns else None
    if turn is not None and turn.tracebacks:  # the case's fields are its one turn's
        common["tracebacks"] = [*(common["tracebacks"] or []), *turn.tracebacks]
    if turn is not None and not turn.skipped:
        common["errors"] = [*common["errors"], *turn.errors]
        common["metric_results"] = [*turn.metric_results, *conversation]
        if turn.infrastructure_error and common["outcome"] == "failed":
            common["outcome"] = "error"
    return CaseResult(
        **common,
        input=case.input,
        response=turn.response if turn else None,
        ground_truth=case.ground_truth,
        tool_invocations=turn.tool_invocations if turn else None,
        tools_matched=turn.tools_matched if turn else None,
        arg_match_details=turn.arg_match_details if turn else None,
        replayed=turn.replayed if turn else None,
    )


def not_run_result(
    loaded: LoadedSuite, index: int, reason: str, *, prefix: str = "not run: "
) -> CaseResult:
    """A test case that was never started (interrupted run, stopped run): every turn skipped."""
    try:
        case = loaded.cases.materialize(index)
    except CaseReadError as exc:
        return unreadable_result(loaded, index, f"{prefix}{reason}; {exc}", skipped=True)
    turns = [
        unanswered_turn(loaded, index, i, turn, skipped=True)
        for i, turn in enumerate(case.effective_turns())
    ]
    return build_case_result(
        loaded, index, turns, case=case, errors=[f"{prefix}{reason}"], skipped=True
    )


def unreadable_result(
    loaded: LoadedSuite, index: int, error: str, *, skipped: bool = False
) -> CaseResult:
    """A case of a ``test_cases_file`` whose line could not be read back to run it.

    Its index entry still names it (name, tags, line); its turns are unknown, so the
    result has none. It fails (or, never started anyway, is skipped) with ``error``;
    the other cases run.
    """
    outcome: Outcome = "skipped" if skipped else "error"
    return CaseResult(
        **_identity(loaded, index, loaded.cases.tags(index)),
        passed=False,
        skipped=skipped,
        outcome=outcome,
        errors=[error],
        turns=[],
    )
