"""Simulated users (SPEC 6.11): an LLM, or your own Python code, plays the user toward a goal.

The pipeline, one module each::

    models     the user_simulator: / user: models (suite.py takes them as they are)
    config     merging and the load-time rules (Issues with paths), one case's plan
    prompt     the packaged template (prompt.md), {{goal}} ... {{transcript}}, agent text fenced
    base       the simulator protocol: next_step(conversation) -> Step (a turn, or a fault)
    llm        the LLM simulator over a structured call: schema, checking, retry, seed, temperature
    python     your simulator: factory(SimulatorContext) -> obj.next_message(conversation)
    driver     simulate(): the simulated part of a case, after its scripted turns
    fidelity   the fidelity judge of each simulated step: prompt, verdict, judging
    record     the report's simulation block, the user_goal metric, invalid runs

The public types (``SimulatorContext``, ``ConversationMessage``, ``UserTurn``)
live in :mod:`multiturn_eval.types` and are exported from ``multiturn_eval``.
"""

from __future__ import annotations

from ..loaded import CaseSimulation, ResolvedSimulator
from .base import Simulator, Step
from .config import (
    Issue,
    MergedSimulator,
    check_case,
    merge_simulator,
    resolve_simulator,
    step_bound,
)
from .driver import (
    AgentAnswer,
    Outgoing,
    SendMessage,
    SimulatedStep,
    SimulationRun,
    simulate,
    simulation_failed,
    simulator_context,
)
from .fidelity import judge_fidelity
from .llm import LLMSimulator, StructuredAnswer, StructuredAsk, StructuredCall, Temperatures
from .models import SimulatorConfig, UserConfig, UserSimulatorConfig
from .python import PythonSimulator
from .record import (
    Fidelity,
    FidelityVerdict,
    Simulation,
    SimulatorInfo,
    counts_for_agent,
    user_goal_metric,
    with_fidelity,
)

__all__ = [
    "AgentAnswer",
    "CaseSimulation",
    "Fidelity",
    "FidelityVerdict",
    "Issue",
    "LLMSimulator",
    "MergedSimulator",
    "Outgoing",
    "PythonSimulator",
    "ResolvedSimulator",
    "SendMessage",
    "SimulatedStep",
    "Simulation",
    "SimulationRun",
    "Simulator",
    "SimulatorConfig",
    "SimulatorInfo",
    "Step",
    "StructuredAnswer",
    "StructuredAsk",
    "StructuredCall",
    "Temperatures",
    "UserConfig",
    "UserSimulatorConfig",
    "check_case",
    "counts_for_agent",
    "judge_fidelity",
    "merge_simulator",
    "resolve_simulator",
    "simulate",
    "simulation_failed",
    "simulator_context",
    "step_bound",
    "user_goal_metric",
    "with_fidelity",
]
