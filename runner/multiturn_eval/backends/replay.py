"""The ``replay`` backend of ``multiturn-eval regrade``: recorded replies, no agent.

Each session answers a test case's turns with the replies recorded in an
earlier report (response, tool invocations, token usage, cost, warnings), so
every check of the *current* suite runs through the same pipeline as a live run
(``run_suites``), without any agent being called.

A session is matched to its recorded test case by suite file and name; test
cases of the same name in one suite by occurrence (the n-th session opened for
that name gets the n-th recorded case of that name: the scheduler opens
sessions in suite order). A turn is matched by its index. The session refuses,
with :class:`NotRegradable`, a turn whose input is not the recorded one ("input
changed since the report") or that the report does not have ("not in the
report"), and it says the session is dead, so the rest of the case is not sent
either: its recorded replies answered another conversation. :mod:`..regrade`
turns those turns into skipped, not regradable ones.

A recorded turn that got no reply (an error, a skip) is answered with that
error and marked, so the regrade keeps the recorded turn as it was.

A simulated test case (``user:``) is replayed as its recorded conversation (the
recorded user messages sent as scripted input, :mod:`..simulation.case`); the
session refuses it, "not regradable: simulation changed", when its ``user:`` block
or simulator (``Simulation.digest``) or its scripted opening is not the recorded one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import BackendError, NotRegradable
from ..results import CaseResult, TurnResult
from ..types import CaseContext, TurnFile, TurnReply

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

NOT_IN_REPORT = "not regradable: not in the report"
INPUT_CHANGED = "not regradable: input changed since the report"
SIMULATION_CHANGED = "not regradable: simulation changed"
"""A simulated case whose ``user:`` block (or simulator, or scripted opening) is not the one
the report recorded: its recorded conversation answered another simulated user."""
_OPEN_PREFIX = "could not open a session: "


@dataclass
class CaseMarks:
    """What the replay did with one test case of the current suite."""

    key: tuple[str, str, int]
    """(suite, name, occurrence) of the recorded case it replayed."""
    source: Mapping[tuple[str, str, int], CaseResult] = field(repr=False)
    """The recorded cases (read again when asked for: a mark holds no result)."""
    turns: dict[int, str] = field(default_factory=dict)
    """turn index -> ``recorded`` (no reply recorded: kept as it was) or a not-regradable reason."""
    refused: str | None = None
    """Why the whole case is not regradable although the report has it (a simulation
    changed); None: it is replayed."""

    @property
    def recorded(self) -> CaseResult | None:
        """The recorded case it replayed (None: not in the report)."""
        return self.source.get(self.key)


@dataclass
class ReplayState:
    """The recorded report, indexed, and the marks every session leaves (shared by suites)."""

    recorded: Mapping[tuple[str, str, int], CaseResult]
    """(suite, name, occurrence) -> the recorded test case (regrade: read from the report
    file when asked for, :class:`~multiturn_eval.regrade.RecordedCases`)."""
    marks: dict[tuple[str, int], CaseMarks] = field(default_factory=dict)
    """(suite, current case index) -> what the replay did."""
    calls: int = 0
    """Replies replayed (the tests check that no agent was needed for them)."""


class ReplaySession:
    def __init__(self, case: CaseResult, marks: CaseMarks, state: ReplayState) -> None:
        self._turns = {t.turn_index: t for t in case.all_turns()}
        self._marks = marks
        self._state = state
        self._next = 0

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        index = self._next
        self._next += 1
        turn: TurnResult | None = self._turns.get(index)
        if turn is None:
            self._marks.turns[index] = NOT_IN_REPORT
            raise NotRegradable(NOT_IN_REPORT)
        if turn.input != message:
            self._marks.turns[index] = INPUT_CHANGED
            raise NotRegradable(INPUT_CHANGED)
        if turn.response is None:  # an error or a skip was recorded: nothing to grade
            self._marks.turns[index] = "recorded"
            raise BackendError(turn.errors[0] if turn.errors else "no reply was recorded")
        self._state.calls += 1
        return TurnReply(
            response=turn.response,
            tool_invocations=list(turn.tool_invocations),
            token_usage=turn.token_usage,
            warnings=list(turn.warnings),
            cost_usd=turn.cost_usd,
        )

    async def close(self) -> None:
        """Nothing to close."""


class ReplayBackend:
    name = "replay"

    def __init__(self, suite: LoadedSuite, settings: RunSettings, state: ReplayState) -> None:
        self._suite = suite
        self._state = state
        self._opened: dict[str, int] = {}
        self._by_name: dict[str, list[int]] | None = None
        self.secrets: set[str] = set()
        self.warnings: list[str] = []
        self.settings = settings

    def _index(self, name: str, occurrence: int) -> int:
        """The current suite's index of the ``occurrence``-th test case called ``name``."""
        if self._by_name is None:  # once, from the suite's index: not once per case
            self._by_name = {}
            for i, case_name in enumerate(self._suite.cases.names()):
                self._by_name.setdefault(case_name, []).append(i)
        found = self._by_name.get(name, [])
        return found[occurrence] if occurrence < len(found) else -1

    async def open_session(self, case: CaseContext) -> ReplaySession:
        name = case.test_case_name
        occurrence = self._opened.get(name, 0)
        self._opened[name] = occurrence + 1
        suite = self._suite.display_path
        recorded = self._state.recorded.get((suite, name, occurrence))
        marks = CaseMarks((suite, name, occurrence), self._state.recorded)
        index = self._index(name, occurrence)
        self._state.marks[(suite, index)] = marks
        if recorded is None:
            raise NotRegradable(NOT_IN_REPORT)
        if self._simulation_changed(index, recorded):
            marks.refused = SIMULATION_CHANGED
            raise NotRegradable(SIMULATION_CHANGED)
        if not any(t.response is not None for t in recorded.all_turns()):
            opened = [e for e in recorded.errors if e.startswith(_OPEN_PREFIX)]
            if opened:  # the session never opened: the same error again, nothing to grade
                raise BackendError(opened[0][len(_OPEN_PREFIX) :])
        return ReplaySession(recorded, marks, self._state)

    def _simulation_changed(self, index: int, recorded: CaseResult) -> bool:
        """A simulated case (either side) whose recorded conversation is not this case's: the
        simulation (``Simulation.digest``) or its scripted part (the scripted turns and the
        opening, by count) changed, or only one side is simulated."""
        plan = self._suite.simulations.get(index)
        simulation = recorded.simulation
        if plan is None or simulation is None:
            return (plan is None) != (simulation is None)
        if simulation.digest != plan.digest:
            return True
        scripted = self._suite.cases.turns(index) + (1 if plan.user.opening is not None else 0)
        sources = [t.source for t in recorded.turns or ()]
        return sources[:scripted] != ["scripted"] * min(scripted, len(sources)) or (
            "scripted" in sources[scripted:]
        )

    async def aclose(self) -> None:
        """Nothing to release."""
