"""The simulated part of one run of a test case: simulator, conversation, fidelity (SPEC 6.11).

The case runner (:mod:`multiturn_eval.case_runner`) runs a simulated test case's
scripted ``turns:`` first, then calls :func:`run_simulation` with its ``send``
(one graded turn of the open session) and the scripted turns' answers. Here:

1. **the simulator is built once per run**: a python simulator's factory is called
   with the run's :class:`~multiturn_eval.types.SimulatorContext`, bounded by
   ``session_timeout`` like the agent's factory (a factory that fails makes the run
   ``invalid_simulation``, naming the simulator); an LLM simulator is the chat
   core's structured call (:mod:`.calls`) with the run's seed and its own
   temperature rule (:class:`~.llm.Temperatures`, one per run);
2. **the conversation** is :func:`~.driver.simulate`;
   A simulated user that ends before any message was sent (no scripted turn, no
   opening) is ``invalid_simulation``: nothing was tested;
3. **the fidelity judge** (``fidelity: true``) judges every simulated step with the
   suite's ``judge:`` (one call per step, the judges' service); a failed step makes
   the run ``invalid_simulation`` (:func:`~.record.with_fidelity`). A run that is
   already invalid (the simulator broke) is not judged.

What comes back (:class:`SimulatedPart`) is applied by the case runner: each turn's
``source``, the warnings, the ``simulation`` block, the ``user_goal`` metric, and a
refused key (the simulator's or the fidelity judge's) that stops the run.

**Regrade** (:data:`RECORDED_CONVERSATIONS` set): the simulator is never called.
The recorded user messages are sent again as scripted input, in order, through the
same ``send`` (the replay backend answers them with the recorded replies); the
outcome, reason, usage and cost are the recorded ones; the fidelity judge's verdicts
are the recorded ones too, unless ``--rejudge`` (then it judges the recorded steps
again). The replay backend refuses a case whose simulation changed since the report
("not regradable: simulation changed", :mod:`multiturn_eval.backends.replay`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import FatalBackendError
from ..results import CaseResult, Simulation, SimulatorInfo, Source, TurnResult
from ..types import ConversationMessage, TokenUsage, UserTurn
from .base import Simulator, label_of
from .driver import AgentAnswer, SendMessage, SimulatedStep, simulate, simulation_failed
from .driver import simulator_context as make_context

if TYPE_CHECKING:
    from ..grading.judges.service import JudgeService
    from ..loaded import CaseSimulation
    from ..suite import JudgeConfig, ModelPrice
    from .calls import SimulatorService


class RecordedConversations(Protocol):
    """What ``regrade`` recorded: the simulated cases of the regraded report."""

    rejudge: bool
    """``--rejudge``: the fidelity judge is called again on the recorded steps."""

    def lookup(self, suite: str, case_index: int) -> CaseResult | None:
        """The recorded result of a case (the current suite's numbering), or None."""
        ...


RECORDED_CONVERSATIONS: ContextVar[RecordedConversations | None] = ContextVar(
    "multiturn_eval_recorded_conversations", default=None
)
"""Set by ``regrade`` for the whole run: simulated cases replay their recorded conversation."""


@dataclass(frozen=True)
class CaseInfo:
    """What the simulated part needs of its test case and run."""

    suite: str
    """The suite file as reports show it."""
    index: int
    name: str
    context: Mapping[str, object]
    run_index: int
    turn_timeout: float
    session_timeout: float
    env: Mapping[str, str]
    pricing: Mapping[str, ModelPrice] | None
    suite_judge: JudgeConfig | None
    case_judge: JudgeConfig | None


@dataclass
class SimulatedPart:
    """What :func:`run_simulation` gives the case runner to apply."""

    simulation: Simulation
    sources: tuple[Source, ...]
    """``sources[i]``: who wrote turn i's input."""
    warnings: list[str] = field(default_factory=list)
    judge_usage: TokenUsage | None = None
    """The fidelity judge's tokens (counted with the case's judges)."""
    judge_cost: float | None = None
    fatal: FatalBackendError | None = None
    """A key was refused (the simulator's, the fidelity judge's): the run stops, exit 3."""


def info_of(plan: CaseSimulation) -> SimulatorInfo:
    simulator = plan.simulator
    return SimulatorInfo(
        backend=simulator.backend, model=simulator.model, factory=simulator.factory
    )


def not_simulated(plan: CaseSimulation, reason: str) -> Simulation:
    """The simulation block of a run whose agent session never opened."""
    return Simulation(
        goal=plan.user.goal,
        outcome="agent_error",
        reason=reason,
        user_turns=0,
        simulator=info_of(plan),
        digest=plan.digest or None,
    )


async def _simulator(
    plan: CaseSimulation, case: CaseInfo, service: SimulatorService
) -> Simulator | str:
    """The run's simulator, or why it could not be made (a fault naming it)."""
    user, resolved = plan.user, plan.simulator
    if resolved.backend == "python":
        from .python import PythonSimulator

        assert plan.factory is not None and resolved.factory is not None
        ctx = make_context(
            goal=user.goal,
            persona=user.persona,
            known=user.known,
            unknown=user.unknown,
            test_case_name=case.name,
            context=case.context,
            run_index=case.run_index,
        )
        try:
            async with asyncio.timeout(case.session_timeout) as deadline:
                return await PythonSimulator.create(plan.factory, resolved.factory, ctx)
        except TimeoutError:
            if not deadline.expired():
                raise
            return (
                f"{label_of(info_of(plan))}: the factory gave no simulator within "
                f"{case.session_timeout:g} s (session_timeout)"
            )
    from .llm import LLMSimulator, Temperatures

    assert resolved.model is not None
    return LLMSimulator(
        service.call(resolved, case.pricing),
        backend=resolved.backend,
        model=resolved.model,
        goal=user.goal,
        persona=user.persona,
        known=user.known,
        unknown=user.unknown,
        run_index=case.run_index,
        temperature=resolved.temperature,
        temperatures=Temperatures(),
        template=plan.template,
    )


@contextlib.asynccontextmanager
async def _services() -> AsyncIterator[tuple[SimulatorService, JudgeService]]:
    """The run's simulator and judge services; fresh ones outside a run (closed after)."""
    from ..grading.judges.service import JUDGES, JudgeService
    from .calls import SIMULATORS, SimulatorService

    own: list[SimulatorService | JudgeService] = []
    simulators = SIMULATORS.get()
    if simulators is None:
        simulators = SimulatorService()
        own.append(simulators)
    judges = JUDGES.get()
    if judges is None:
        judges = JudgeService()
        own.append(judges)
    try:
        yield simulators, judges
    finally:
        for service in own:
            await service.aclose()


async def run_simulation(
    plan: CaseSimulation,
    send: SendMessage,
    scripted: Sequence[tuple[str, AgentAnswer]],
    case: CaseInfo,
) -> SimulatedPart:
    """The simulated part of one run (see the module docstring)."""
    recorded = RECORDED_CONVERSATIONS.get()
    if recorded is not None:
        return await _replay(plan, send, scripted, case, recorded)
    async with _services() as (simulators, judges):
        made = await _simulator(plan, case, simulators)
        user = plan.user
        if isinstance(made, str):
            run = simulation_failed(info_of(plan), goal=user.goal, reason=made, scripted=scripted)
        else:
            run = await simulate(
                made,
                send,
                goal=user.goal,
                max_turns=user.max_turns,
                turn_timeout=case.turn_timeout,
                opening=user.opening,
                scripted=scripted,
            )
        simulation = run.simulation.model_copy(
            update={"digest": plan.digest or None, "silent_end": _silent(run.steps)}
        )
        if not run.sources and not simulation.invalid:  # nothing was sent: nothing was tested
            simulation = simulation.model_copy(
                update={
                    "outcome": "invalid_simulation",
                    "reason": f"{label_of(simulation.simulator)} ended the conversation "
                    f"({simulation.outcome}) before any message was sent: nothing was tested",
                }
            )
        part = SimulatedPart(simulation, run.sources, list(run.warnings), fatal=run.fatal)
        if plan.fidelity and run.fatal is None and simulation.outcome != "invalid_simulation":
            await _judge_fidelity(part, plan, run.steps, case, judges)
        return part


def _silent(steps: Sequence[SimulatedStep]) -> bool | None:
    """True when the last step ended the conversation without a message."""
    return True if steps and steps[-1].turn_index is None else None


async def _judge_fidelity(
    part: SimulatedPart,
    plan: CaseSimulation,
    steps: Sequence[SimulatedStep],
    case: CaseInfo,
    judges: JudgeService,
) -> None:
    from ..grading.judges.service import merge_levels, resolve
    from .calls import fidelity_call
    from .fidelity import judge_fidelity
    from .record import with_fidelity

    if not steps:
        return
    judge = resolve(merge_levels(case.suite_judge, case.case_judge), case.env)
    user = plan.user
    try:
        fidelity = await judge_fidelity(
            fidelity_call(judges, judge, case.pricing),
            steps,
            goal=user.goal,
            persona=user.persona,
            known=user.known,
            unknown=user.unknown,
            temperature=judge.temperature,
        )
    except FatalBackendError as exc:
        part.fatal = exc
        return
    part.simulation = with_fidelity(part.simulation, fidelity)
    part.judge_usage = fidelity.judge_token_usage
    part.judge_cost = fidelity.judge_cost_usd


# ------------------------------------------------------------------------------ regrade


def recorded_steps(
    turns: Sequence[TurnResult], simulation: Simulation
) -> tuple[tuple[str, ...], tuple[Source, ...], list[SimulatedStep]]:
    """The recorded conversation: every turn's input, who wrote it, and the simulator's steps
    (for the fidelity judge under ``--rejudge``), rebuilt from the report."""
    inputs = tuple(t.input for t in turns)
    sources: tuple[Source, ...] = tuple(t.source or "scripted" for t in turns)
    steps: list[SimulatedStep] = []
    conversation: list[ConversationMessage] = []
    simulated = [i for i, source in enumerate(sources) if source == "simulated"]
    ended = simulation.outcome in ("goal_met", "gave_up", "out_of_scope")
    for i, turn in enumerate(turns):
        if sources[i] == "simulated":
            last = ended and not simulation.silent_end and i == simulated[-1]
            step = UserTurn(
                message=turn.input,
                done=last,
                outcome=simulation.outcome if last else None,  # type: ignore[arg-type]
                reason=simulation.reason if last else None,
            )
            steps.append(SimulatedStep(step, i, tuple(conversation)))
        conversation.append(ConversationMessage(role="user", text=turn.input))
        conversation.append(
            ConversationMessage(
                role="agent",
                text=turn.response or "",
                tool_invocations=tuple(turn.tool_invocations),
                error=(turn.errors[0] if turn.errors else "no reply")
                if turn.response is None
                else None,
            )
        )
    if ended and simulation.silent_end:
        end = UserTurn(
            message=None,
            done=True,
            outcome=simulation.outcome,  # type: ignore[arg-type]
            reason=simulation.reason,
        )
        steps.append(SimulatedStep(end, None, tuple(conversation)))
    return inputs, sources, steps


async def _replay(
    plan: CaseSimulation,
    send: SendMessage,
    scripted: Sequence[tuple[str, AgentAnswer]],
    case: CaseInfo,
    recorded: RecordedConversations,
) -> SimulatedPart:
    """Regrade: the recorded conversation sent again as scripted input; no simulator call.

    The replay backend has already refused a case whose simulation changed (its digest,
    its scripted opening); here the recorded turns are sent after the scripted ones.
    """
    from .driver import Outgoing

    found = recorded.lookup(case.suite, case.index)
    if found is None or found.simulation is None or found.turns is None:
        raise RuntimeError("no recorded conversation")  # the replay backend refused it before
    simulation, turns = found.simulation, found.turns
    unjudged = before_fidelity(simulation)
    inputs, sources, steps = recorded_steps(turns, unjudged)
    for index in range(len(scripted), len(inputs)):
        answer = await send(Outgoing(index, inputs[index], sources[index]))
        if answer.session_dead:
            break
    part = SimulatedPart(simulation, sources)
    if not recorded.rejudge:
        if plan.fidelity and simulation.fidelity is None:
            part.warnings.append(
                "fidelity: true, but the report has no fidelity verdicts for this test case; "
                "run regrade with --rejudge to judge the recorded conversation"
            )
        return part
    part.simulation = unjudged
    if plan.fidelity and unjudged.outcome != "invalid_simulation":
        async with _services() as (_, judges):
            await _judge_fidelity(part, plan, steps, case, judges)
    return part


def before_fidelity(simulation: Simulation) -> Simulation:
    """A recorded simulation as it was before the fidelity judge (a ``--rejudge`` judges it
    again): no verdicts, and the outcome it had ended with if the judge had made it invalid."""
    fidelity = simulation.fidelity
    if fidelity is None:
        return simulation
    update: dict[str, object] = {"fidelity": None}
    if fidelity.ended_with is not None:
        update["outcome"] = fidelity.ended_with
        update["reason"] = fidelity.ended_reason
    return simulation.model_copy(update=update)
