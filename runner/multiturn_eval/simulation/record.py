"""What a simulated conversation leaves in the report, and the rules decided on it (pure).

:class:`Simulation` is the test case's ``simulation`` block in ``report.json``
(``CaseResult.simulation``): the goal, how the conversation ended, the simulator,
its usage and cost (apart from the agent's and the judges'), and the fidelity
judge's verdicts. The rules:

- **outcome**: ``goal_met`` / ``gave_up`` / ``out_of_scope`` (the simulated user
  ended the conversation so), ``max_turns`` (it sent ``max_turns`` messages
  without ending), ``agent_error`` (the agent's session became unrecoverable:
  two consecutive session errors, or the backend said it is dead),
  ``invalid_simulation`` (the simulator broke: its replies did not fit twice, it
  raised, returned garbage or never returned; or the fidelity judge failed one of
  its messages). An invalid simulation says nothing about the agent: with one run
  the test case errors with that reason; with ``--repeat`` the run is left out of
  pass^k (:func:`counts_for_agent`).
- **user_goal** (:func:`user_goal_metric`): a conversation-level metric (the
  evaluators' :class:`~multiturn_eval.results.MetricResult`, ``kind: standard``,
  ``scope: conversation``) that passes only when the outcome is ``goal_met``;
  ``require_goal: false`` leaves it out. On an invalid simulation it errors
  ("not judged"), so it never passes on one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..results import MetricResult, omitted_when_none
from ..types import TokenUsage

SimulationOutcome = Literal[
    "goal_met", "gave_up", "out_of_scope", "max_turns", "invalid_simulation", "agent_error"
]
Source = Literal["scripted", "simulated"]
"""Who wrote a turn's input: the suite (``turns:``, ``opening``) or the simulated user."""
USER_GOAL = "user_goal"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


def counts_for_agent(simulation: Simulation) -> bool:
    """Whether this run's result says something about the agent (an invalid one does not)."""
    return simulation.outcome != "invalid_simulation"


def with_fidelity(simulation: Simulation, fidelity: Fidelity) -> Simulation:
    """The simulation with the fidelity judge's verdicts: any failed step makes it invalid.

    An outcome that is already ``invalid_simulation`` keeps its own reason.
    """
    update: dict[str, object] = {"fidelity": fidelity}
    if fidelity.failed and simulation.outcome != "invalid_simulation":
        first = next(v for v in fidelity.verdicts if not v.passed)
        where = "an end" if first.turn_index is None else f"turn {first.turn_index + 1}"
        why = first.error or first.reason or "failed"
        update["outcome"] = "invalid_simulation"
        update["reason"] = (
            f"the fidelity judge failed {fidelity.failed} of {fidelity.judged} simulated "
            f"messages (first: {where}: {why}); the simulated user, not the agent, broke its "
            f"rules (it had ended with {simulation.outcome})"
        )
    return simulation.model_copy(update=update)


def user_goal_metric(simulation: Simulation, require_goal: bool) -> MetricResult | None:
    """The case-level ``user_goal`` metric; None when ``require_goal`` is false."""
    if not require_goal:
        return None
    outcome = simulation.outcome
    details: dict[str, object] = {"outcome": outcome}
    if outcome == "invalid_simulation":
        return MetricResult(
            metric_name=USER_GOAL,
            kind="standard",
            passed=False,
            error=f"not judged: the simulation is invalid: {simulation.reason or outcome}",
            details=details,
            scope="conversation",
        )
    passed = outcome == "goal_met"
    said = f": {simulation.reason}" if simulation.reason else ""
    return MetricResult(
        metric_name=USER_GOAL,
        kind="standard",
        score=1.0 if passed else 0.0,
        passed=passed,
        reason=f"the simulated user ended with {outcome}{said}",
        details=details,
        scope="conversation",
    )
