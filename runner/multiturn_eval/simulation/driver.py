"""The conversation driver: the simulated part of a test case, after its scripted turns.

:func:`simulate` alternates the simulator and the agent. The agent's side is the
case runner's: ``send(Outgoing) -> AgentAnswer`` sends one user message as one
turn of the open session (with the turn's timeout, grading and result, exactly
like a scripted turn) and says what came back. The driver never sees the
suite's checks, and the simulator never sees the agent's session: the only
thing that crosses is the simulator's ``message``. The goal, persona, known and
unknown facts stay on the simulator's side.

**Counting.** Scripted ``turns:`` do not count toward ``max_turns``; the
``opening`` does (it is the first user message, reported as ``scripted``).
``max_turns`` is the number of messages the simulated part may send; when it is
reached without an end the outcome is ``max_turns`` (the simulator is not asked
once more: ``--dry-run`` bounds its calls by ``max_turns``).

**Ending.** A step ``done`` with a message: the message is still sent, and the
agent's reply to it ends the conversation (with the step's outcome, even if that
reply failed: the user had decided). ``done`` without a message ends at once.

**The agent's failures** follow the session rules of the case runner (SPEC 6.2):
a turn that failed is shown to the simulator as an agent message without a reply
and the conversation goes on; two consecutive session errors (``SessionError``
or the turn timeout), or a backend that says the session is dead, end it with
the outcome ``agent_error``. Scripted turns' trailing session errors count.

**The simulator's failures** are the simulator's, never the agent's: a fault
(replies that did not fit twice, an exception, garbage, a message over
:data:`MAX_MESSAGE_CHARS`), or no answer within ``turn_timeout`` (like any user
code: a sync call stuck in its thread is abandoned with a warning), ends the
conversation as ``invalid_simulation`` with a reason naming the simulator. Code
left running past its timeout is reported like every user call's: its label
(``the simulator's next_message()``, ``async ...`` for async code) goes to the
enclosing :func:`~multiturn_eval.usercode.watch_abandoned` -- the case runner's,
whose warnings name the turn. A 401/403 from an LLM simulator ends it too and is
handed back in
:attr:`SimulationRun.fatal`: the caller stops the run (exit 3), as for an agent's
or a judge's refused key.

**Replaying fixtures** (``--fixtures replay``): while the simulator works out the
message of turn i, :data:`~multiturn_eval.in_flight.USER_TURN` is i, so its model
calls (and a Python simulator's own ``httpx`` calls) are recorded and replayed as
the ``user`` side's at that turn. When such a call is not in the fixture (the
conversation it answers is not the recorded one: the agent's reply changed), the
``left_recording`` hook says why and the conversation ends at once with the
outcome ``diverged`` -- the case's error, never a user turn that answers a reply
the recording never gave.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import FatalBackendError
from ..in_flight import USER_TURN
from ..results import sum_costs
from ..retry import turn_deadline
from ..sanitize import clean_text
from ..types import (
    ConversationMessage,
    SimulatorContext,
    TokenUsage,
    ToolInvocation,
    UserTurn,
    read_only,
)
from ..usercode import error_text
from .base import Simulator, Step
from .record import Simulation, SimulationOutcome, SimulatorInfo, Source

#: the longest message a simulated user may send (a larger one is the simulator's fault)
MAX_MESSAGE_CHARS = 100_000
#: consecutive session errors after which the session is given up (as in the case runner)
MAX_CONSECUTIVE_SESSION_ERRORS = 2


@dataclass(frozen=True)
class Outgoing:
    """One user message for the agent: the turn it is, its text, who wrote it."""

    turn_index: int
    """0-based, over the whole conversation (scripted turns first)."""
    text: str
    source: Source


@dataclass(frozen=True)
class AgentAnswer:
    """What one turn gave back, as the driver needs it (the case runner keeps the rest)."""

    text: str | None
    """The agent's reply; None when the turn got none (``error`` says why)."""
    tool_invocations: tuple[ToolInvocation, ...] = ()
    error: str | None = None
    session_error: bool = False
    """The turn failed with a SessionError or the turn timeout (two in a row end it)."""
    session_dead: bool = False
    """The backend said the session cannot take another turn."""


SendMessage = Callable[[Outgoing], Awaitable[AgentAnswer]]
"""The case runner's side: send ``Outgoing`` as one graded turn of the open session.

Ordinary failures are an :class:`AgentAnswer` with ``error``; what must stop the
run (a FatalBackendError as FatalRunError, cancellation) is raised and passes
through the driver untouched.
"""


@dataclass(frozen=True)
class SimulatedStep:
    """One step the simulator took (for the fidelity judge)."""

    turn: UserTurn
    turn_index: int | None
    """The turn its message became; None for an end without a message."""
    before: tuple[ConversationMessage, ...]
    """The conversation the simulator saw when it took this step."""


@dataclass(frozen=True)
class SimulationRun:
    """What :func:`simulate` returns."""

    simulation: Simulation
    conversation: tuple[ConversationMessage, ...]
    """The whole conversation, scripted turns included, user and agent alternating."""
    sources: tuple[Source, ...]
    """``sources[i]``: who wrote turn i's input (scripted turns, the opening: scripted)."""
    steps: tuple[SimulatedStep, ...] = ()
    warnings: tuple[str, ...] = ()
    fatal: FatalBackendError | None = None
    """The simulator's key was refused: the caller stops the run (exit 3) after recording."""


def simulator_context(
    *,
    goal: str,
    persona: str | None,
    known: Mapping[str, Any],
    unknown: Sequence[str],
    test_case_name: str,
    context: Mapping[str, Any],
    run_index: int,
) -> SimulatorContext:
    """The frozen context a python simulator's factory gets (read-only copies)."""
    return SimulatorContext(
        goal=goal,
        persona=persona,
        known=read_only(known),
        unknown=tuple(unknown),
        test_case_name=test_case_name,
        context=read_only(context),
        run_index=run_index,
    )


def _agent_message(answer: AgentAnswer) -> ConversationMessage:
    return ConversationMessage(
        role="agent",
        text=answer.text or "",
        tool_invocations=tuple(answer.tool_invocations),
        error=answer.error if answer.text is None else None,
    )


@dataclass
class _Driver:
    simulator: Simulator
    send: SendMessage
    goal: str
    max_turns: int
    turn_timeout: float | None
    conversation: list[ConversationMessage] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    steps: list[SimulatedStep] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    usages: list[TokenUsage] = field(default_factory=list)
    costs: list[float | None] = field(default_factory=list)
    sent: int = 0
    """Messages of the simulated part sent (the opening included)."""
    consecutive: int = 0
    fatal: FatalBackendError | None = None
    scripted_dead: str | None = None
    """Why the session was already over after the scripted turns."""
    left_recording: Callable[[int], str | None] | None = None
    """With fixtures: why the simulator's calls for turn i (0-based) left the recording
    (None: they did not)."""

    def finish(self, outcome: SimulationOutcome, reason: str | None) -> SimulationRun:
        info: SimulatorInfo = self.simulator.info
        return SimulationRun(
            simulation=Simulation(
                goal=self.goal,
                outcome=outcome,
                reason=reason,
                user_turns=self.sent,
                simulator=info,
                user_token_usage=TokenUsage.sum(self.usages),
                user_cost_usd=sum_costs(self.costs),
            ),
            conversation=tuple(self.conversation),
            sources=tuple(self.sources),
            steps=tuple(self.steps),
            warnings=tuple(self.warnings),
            fatal=self.fatal,
        )

    def take(self, text: str, answer: AgentAnswer, source: Source) -> str | None:
        """Record one exchange; why the session is over, or None."""
        self.sources.append(source)
        self.conversation.append(ConversationMessage(role="user", text=text))
        self.conversation.append(_agent_message(answer))
        self.consecutive = self.consecutive + 1 if answer.session_error else 0
        if answer.session_dead:
            return "the backend reported the session dead"
        if self.consecutive >= MAX_CONSECUTIVE_SESSION_ERRORS:
            return f"{self.consecutive} consecutive session errors"
        return None

    async def exchange(self, text: str, source: Source) -> str | None:
        index = len(self.sources)
        answer = await self.send(Outgoing(index, text, source))
        self.sent += 1
        dead = self.take(text, answer, source)
        if dead is None:
            return None
        return f"the agent's session became unrecoverable after turn {index + 1}: {dead}"

    async def ask(self) -> Step:
        """The simulator's next step, bounded by the turn timeout; faults as values."""
        label = self.simulator.label
        turn = len(self.sources) + 1
        token = USER_TURN.set(turn - 1)
        try:
            async with asyncio.timeout(self.turn_timeout) as deadline:
                with turn_deadline(self.turn_timeout):
                    step = await self.simulator.next_step(tuple(self.conversation))
        except FatalBackendError as exc:
            self.fatal = exc
            step = Step(None, f"{label}: {error_text(exc)}")
        except TimeoutError as exc:
            if deadline.expired():
                why = f"gave no answer within {self.turn_timeout:g} s (turn_timeout)"
            else:
                why = f"failed: {error_text(exc)}"
            step = Step(None, f"{label} {why} for turn {turn}")
        except Exception as exc:  # a bug on our side of the simulator: this case only
            step = Step(None, f"{label}: internal error: {error_text(exc)}")
        finally:
            USER_TURN.reset(token)
        if step.usage is not None:
            self.usages.append(step.usage)
        self.costs.append(step.cost_usd)
        self.warnings.extend(step.notes)
        return step

    def checked(self, step: Step) -> UserTurn | str:
        """The step's turn with its message made sendable, or the simulator's fault."""
        if step.turn is None:
            return step.fault or f"{self.simulator.label} gave no answer"
        turn = step.turn
        if turn.message is None:
            return turn
        if len(turn.message) > MAX_MESSAGE_CHARS:
            return (
                f"{self.simulator.label}: its message has {len(turn.message):,} characters, "
                f"more than {MAX_MESSAGE_CHARS:,}"
            )
        text = clean_text(turn.message)
        if text == turn.message:
            return turn
        return UserTurn(message=text, done=turn.done, outcome=turn.outcome, reason=turn.reason)

    async def run(self, opening: str | None) -> SimulationRun:
        if self.scripted_dead is not None:
            return self.finish(
                "agent_error",
                f"the agent's session became unrecoverable in the scripted turns: "
                f"{self.scripted_dead}",
            )
        if opening is not None:
            dead = await self.exchange(opening, "scripted")
            if dead is not None:
                return self.finish("agent_error", dead)
        while self.sent < self.max_turns:
            before = tuple(self.conversation)
            step = await self.ask()
            left = self.left_recording(len(self.sources)) if self.left_recording else None
            if left is not None:  # the fixture's user answered another conversation
                return self.finish("diverged", left)
            turn = self.checked(step)
            if isinstance(turn, str):
                return self.finish("invalid_simulation", turn)
            if turn.message is None:  # done without a message: ends at once
                self.steps.append(SimulatedStep(turn, None, before))
                assert turn.outcome is not None
                return self.finish(turn.outcome, turn.reason)
            self.steps.append(SimulatedStep(turn, len(self.sources), before))
            dead = await self.exchange(turn.message, "simulated")
            if turn.done:  # the agent's reply to the last message ends the conversation
                assert turn.outcome is not None
                return self.finish(turn.outcome, turn.reason)
            if dead is not None:
                return self.finish("agent_error", dead)
        return self.finish(
            "max_turns",
            f"the simulated user sent {self.max_turns} message"
            f"{'s' if self.max_turns != 1 else ''} (max_turns) without ending the conversation",
        )


async def simulate(
    simulator: Simulator,
    send: SendMessage,
    *,
    goal: str,
    max_turns: int,
    turn_timeout: float | None,
    opening: str | None = None,
    scripted: Sequence[tuple[str, AgentAnswer]] = (),
    left_recording: Callable[[int], str | None] | None = None,
) -> SimulationRun:
    """Run the simulated part of a test case (see the module docstring).

    ``scripted`` are the scripted turns already sent (their input and answer, in
    order); ``opening`` is only for a case without them; ``left_recording``: the
    fixtures' word on the simulator's calls of a turn (see "Replaying fixtures").
    """
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    if opening is not None and scripted:
        raise ValueError("an opening is only for a test case without scripted turns")
    driver = _Driver(simulator, send, goal, max_turns, turn_timeout)
    driver.left_recording = left_recording
    for text, answer in scripted:
        dead = driver.take(text, answer, "scripted")
        driver.scripted_dead = driver.scripted_dead or dead
    return await driver.run(opening)


def simulation_failed(
    info: SimulatorInfo,
    *,
    goal: str,
    reason: str,
    scripted: Sequence[tuple[str, AgentAnswer]] = (),
    fatal: FatalBackendError | None = None,
) -> SimulationRun:
    """The run of a simulator that could not even start (its factory failed): invalid."""
    sources: tuple[Source, ...] = tuple("scripted" for _ in scripted)
    conversation = tuple(
        message
        for text, answer in scripted
        for message in (ConversationMessage(role="user", text=text), _agent_message(answer))
    )
    return SimulationRun(
        simulation=Simulation(
            goal=goal, outcome="invalid_simulation", reason=reason, user_turns=0, simulator=info
        ),
        conversation=conversation,
        sources=sources,
        fatal=fatal,
    )
