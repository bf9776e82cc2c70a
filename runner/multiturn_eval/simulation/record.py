"""What a simulated conversation leaves in the report, and the rules decided on it (pure).

:class:`Simulation` is the test case's ``simulation`` block in ``report.json``
(``CaseResult.simulation``; the models are the report's, in :mod:`multiturn_eval.results`,
re-exported here): the goal, how the conversation ended, the simulator,
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

from ..results import (
    Fidelity,
    FidelityVerdict,
    MetricResult,
    Simulation,
    SimulationOutcome,
    SimulatorInfo,
    Source,
)

USER_GOAL = "user_goal"

__all__ = [
    "USER_GOAL",
    "Fidelity",
    "FidelityVerdict",
    "Simulation",
    "SimulationOutcome",
    "SimulatorInfo",
    "Source",
    "counts_for_agent",
    "user_goal_metric",
    "with_fidelity",
]


def counts_for_agent(simulation: Simulation) -> bool:
    """Whether this run's result says something about the agent (an invalid one does not)."""
    return not simulation.invalid


def with_fidelity(simulation: Simulation, fidelity: Fidelity) -> Simulation:
    """The simulation with the fidelity judge's verdicts: any failed step makes it invalid.

    An outcome that is already ``invalid_simulation`` keeps its own reason.
    """
    update: dict[str, object] = {"fidelity": fidelity}
    if fidelity.failed and simulation.outcome != "invalid_simulation":
        update["fidelity"] = fidelity.model_copy(
            update={"ended_with": simulation.outcome, "ended_reason": simulation.reason}
        )
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
