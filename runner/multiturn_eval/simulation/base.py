"""The one small protocol every simulator meets: ``next_step(conversation) -> Step``.

A simulator -- your Python object (:mod:`.python`) or an LLM (:mod:`.llm`) --
is asked for the user's next step with the whole conversation so far. What it
gives is a value: a :class:`Step` holding a :class:`~multiturn_eval.types.UserTurn`,
or a ``fault`` in words that names the simulator (its replies did not fit, it
raised, it returned garbage). Only a :class:`~multiturn_eval.errors.FatalBackendError`
(the simulator's API key was refused) is raised; the driver stops the run on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..types import ConversationMessage, TokenUsage, UserTurn
from .record import SimulatorInfo


@dataclass(frozen=True)
class Step:
    """One answer of a simulator: the user's turn, or why there is none."""

    turn: UserTurn | None
    fault: str | None = None
    """Set when ``turn`` is None: what went wrong, naming the simulator."""
    usage: TokenUsage | None = None
    """The tokens this step cost (an LLM simulator; both calls when a reply was retried)."""
    cost_usd: float | None = None
    notes: tuple[str, ...] = ()
    """Things worth a warning that did not stop the step (a retried reply)."""


class Simulator(Protocol):
    @property
    def info(self) -> SimulatorInfo:
        """Which simulator this is, for the report and for messages."""
        ...

    @property
    def label(self) -> str:
        """How messages name it: ``the simulated user (anthropic claude-haiku-4-5)``."""
        ...

    async def next_step(self, conversation: tuple[ConversationMessage, ...]) -> Step:
        """The user's next step after ``conversation`` (see the module docstring)."""
        ...


def label_of(info: SimulatorInfo) -> str:
    what = info.model if info.model is not None else info.factory
    return f"the simulated user ({info.backend}{f' {what}' if what else ''})"


class Named:
    """The ``info`` and ``label`` of a simulator (both simulators' base)."""

    def __init__(self, info: SimulatorInfo) -> None:
        self._info = info

    @property
    def info(self) -> SimulatorInfo:
        return self._info

    @property
    def label(self) -> str:
        return label_of(self._info)
