"""Bounded concurrency over test cases, ordering, stopping, partial results (SPEC 6.5).

Suites run one after another, each with its own settings. Inside a suite, a
fixed pool of ``parallel_test_cases`` workers pulls test cases in suite order
(no unbounded ``gather``: at most that many cases, and so sessions, exist at
once). Results are stored by position and listed in suite order whatever the
completion order.

``RunState`` holds everything finished so far, so whoever cancels the run (the
CLI on Ctrl-C or SIGTERM) can still report it: :meth:`RunState.final_results`
marks every test case that did not finish as not run.

Repeats (``repeat`` K > 1, SPEC 6.6): the work is (test case, run) pairs in
suite order, case by case (case 1 run 1, case 1 run 2, ..., case 2 run 1, ...);
the ``parallel_test_cases`` workers pull them from one queue, so with
``-p`` > 1 the runs of one case overlap, and at most ``-p`` sessions are open
at once whatever K is. Each run is its own :class:`CaseRunner`, so its own
fresh session. When the K runs of a case are in, they are rolled into one
result (:func:`multiturn_eval.results.aggregate_runs`) and reported; a case
interrupted part-way is reported over the runs that finished (with a warning
and ``repeat.planned_runs``), a case none of whose runs finished as not run.
With K = 1 nothing of this applies: one run, reported as it is.
"""

from __future__ import annotations

import asyncio
import fnmatch
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .backends.base import Backend
from .case_runner import CaseRunner, not_run_result
from .errors import FatalRunError
from .loader import LoadedSuite
from .results import CaseResult, aggregate_runs
from .settings import RunSettings


@dataclass(frozen=True)
class Selection:
    """Which test cases to run: ``-k`` glob and ``--tag`` (any of them)."""

    pattern: str | None = None
    tags: tuple[str, ...] = ()

    def matches(self, name: str, tags: Sequence[str]) -> bool:
        if self.pattern is not None:
            if any(ch in self.pattern for ch in "*?["):
                if not fnmatch.fnmatchcase(name, self.pattern):
                    return False
            elif self.pattern not in name:  # no wildcard: substring, as pytest -k
                return False
        return not self.tags or any(tag in tags for tag in self.tags)

    def select(self, loaded: LoadedSuite) -> list[int]:
        return [
            i
            for i, case in enumerate(loaded.suite.test_cases)
            if self.matches(loaded.case_name(i), case.tags)
        ]


@dataclass
class PlannedSuite:
    loaded: LoadedSuite
    settings: RunSettings
    indices: list[int]


OnResult = Callable[[CaseResult], None]


@dataclass
class RunState:
    plan: list[PlannedSuite]
    results: dict[tuple[int, int], CaseResult] = field(default_factory=dict)
    """(suite position, test-case index) -> result"""
    partial_runs: dict[tuple[int, int], list[CaseResult | None]] = field(default_factory=dict)
    """With repeats: the runs of a test case finished so far (None: not yet), until all are in."""
    stop_reason: str | None = None
    first_session_opened: float | None = None
    last_session_closed: float | None = None
    in_flight: int = 0
    max_in_flight: int = 0

    def final_results(self, default_reason: str = "the run was interrupted") -> list[CaseResult]:
        """Every planned test case in order; the unfinished ones as not run."""
        reason = self.stop_reason or default_reason
        out: list[CaseResult] = []
        for s, planned in enumerate(self.plan):
            for index in planned.indices:
                result = self.results.get((s, index))
                if result is None:
                    result = self._partial(s, index, planned)
                out.append(
                    result if result is not None else not_run_result(planned.loaded, index, reason)
                )
        return out

    def _partial(self, s: int, index: int, planned: PlannedSuite) -> CaseResult | None:
        """A repeated case whose runs did not all finish: the finished ones, else None."""
        runs = self.partial_runs.get((s, index))
        if runs is None or all(r is None for r in runs):
            return None
        return aggregate_runs(runs, min_pass_rate=planned.settings.min_pass_rate)

    def add_run(
        self, s: int, index: int, run: int, result: CaseResult, planned: PlannedSuite
    ) -> CaseResult | None:
        """Store one run; the test case's result once its last run is in (else None)."""
        repeat = planned.settings.repeat
        if repeat <= 1:
            self.results[(s, index)] = result
            return result
        runs = self.partial_runs.setdefault((s, index), [None] * repeat)
        runs[run] = result
        if any(r is None for r in runs):
            return None
        del self.partial_runs[(s, index)]
        combined = aggregate_runs(runs, min_pass_rate=planned.settings.min_pass_rate)
        self.results[(s, index)] = combined
        return combined

    @property
    def complete(self) -> bool:
        return self.stop_reason is None and all(
            (s, i) in self.results for s, p in enumerate(self.plan) for i in p.indices
        )


async def run_plan(
    state: RunState, backends: Sequence[Backend], on_result: OnResult | None = None
) -> None:
    """Run every planned suite on its backend; results land in ``state`` as they finish.

    Backends are created by the caller before the run (so a missing SDK is a
    configuration error before any agent is called) and closed here.
    """
    try:
        for s, (planned, backend) in enumerate(zip(state.plan, backends, strict=True)):
            if state.stop_reason is not None:
                return
            await _run_suite(state, s, planned, backend, on_result)
    finally:
        for backend in backends:
            await backend.aclose()


async def _run_suite(
    state: RunState, s: int, planned: PlannedSuite, backend: Backend, on_result: OnResult | None
) -> None:
    repeat = max(1, planned.settings.repeat)
    pending = ((index, run) for index in planned.indices for run in range(repeat))

    async def worker() -> None:
        for index, run in pending:  # the shared iterator hands each run to exactly one worker
            if state.stop_reason is not None:
                return
            runner = CaseRunner(
                planned.loaded,
                index,
                backend,
                planned.settings.turn_timeout,
                settings=planned.settings,
            )
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
            if state.first_session_opened is None:
                state.first_session_opened = time.perf_counter()
            try:
                result = await runner.run()
            except FatalRunError as exc:
                result = exc.result
                if state.stop_reason is None:
                    state.stop_reason = f"stopped after a fatal backend error: {exc.message}"
            finally:
                state.in_flight -= 1
                state.last_session_closed = time.perf_counter()
            finished = state.add_run(s, index, run, result, planned)
            if finished is not None and on_result is not None:
                on_result(finished)

    workers = max(1, min(planned.settings.parallel_test_cases, len(planned.indices) * repeat))
    async with asyncio.TaskGroup() as group:
        for _ in range(workers):
            group.create_task(worker())
