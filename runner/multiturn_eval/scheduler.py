"""Bounded concurrency over test cases, ordering, stopping, partial results (SPEC 6.5).

Suites run one after another, each with its own settings. Inside a suite, a
fixed pool of ``parallel_test_cases`` workers pulls test cases in suite order
(no unbounded ``gather``: at most that many cases, and so sessions, exist at
once). Results are stored by position and listed in suite order whatever the
completion order.

``RunState`` knows where everything finished so far lies (its ``store``: each
result goes to a file as it finishes, :mod:`.run_store`), so whoever cancels the
run (the CLI on Ctrl-C or SIGTERM) can still report it: :meth:`RunState.final_results`
marks every test case that did not finish as not run.

Repeats (``repeat`` K > 1, SPEC 6.6): the work is (test case, run) pairs in
suite order, case by case (case 1 run 1, case 1 run 2, ..., case 2 run 1, ...);
the ``parallel_test_cases`` workers pull them from one queue, so with
``-p`` > 1 the runs of one case overlap, and at most ``-p`` sessions are open
at once whatever K is. Each run is its own :class:`CaseRunner`, so its own
fresh session. When the K runs of a case are in, they are rolled into one
result (:func:`multiturn_eval.rollup.aggregate_runs`) and reported; a case
interrupted part-way is reported over the runs that finished (with a warning
and ``repeat.planned_runs``), a case none of whose runs finished as not run.
With K = 1 nothing of this applies: one run, reported as it is.

The spend cap (``--max-cost``, :mod:`.spend`): a worker checks the spend of
the finished cases before it starts the next one; once it reaches the cap,
each case left is recorded as skipped (``not started: spend cap ...``)
without being started. ``RunState.kept`` holds the results ``--keep-passed``
carries over from an earlier report; they take their place in suite order. With repeats the
cap is checked before the first run of each test case: a case that has
started runs all its K runs (its verdict needs them), so the cap can be
passed by up to ``-p`` test cases' worth of runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .backends.base import Backend
from .case_runner import CaseRunner, FatalRunError, not_run_result, unreadable_result
from .errors import CaseReadError
from .loaded import LoadedSuite, PlannedSuite
from .results import CaseResult
from .rollup import aggregate_runs
from .stored import KeptResults

if TYPE_CHECKING:
    from .fixtures.cassette import SuiteFixtures
    from .run_store import RunResults, RunStore


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
        """The indices of the suite's cases that match (from its index: no case is read)."""
        cases = loaded.cases
        if self.pattern is None and not self.tags:
            return list(range(len(cases)))
        return [i for i in range(len(cases)) if self.matches(cases.name(i), cases.tags(i))]


OnResult = Callable[[CaseResult], None]


@dataclass
class RunState:
    plan: list[PlannedSuite]
    partial_runs: dict[tuple[int, int], list[CaseResult | None]] = field(default_factory=dict)
    """With repeats: the runs of a test case in flight (None: not yet), until all are in."""
    stop_reason: str | None = None
    first_session_opened: float | None = None
    last_session_closed: float | None = None
    in_flight: int = 0
    max_in_flight: int = 0
    kept: Mapping[tuple[int, int], CaseResult] = field(default_factory=dict)
    """``--keep-passed``: earlier results shown in place of cases not run again."""
    spent: float = 0.0
    """Estimated spend of the finished test cases (US dollars, :func:`.spend.spend_of`)."""
    capped: float | None = None
    """The cap that stopped the run from starting cases, once one did."""
    not_started: int = 0
    """Test cases the spend cap kept from starting."""
    fixtures: dict[int, SuiteFixtures] = field(default_factory=dict)
    """Suite position -> its fixtures (``--fixtures``; only suites that use them)."""
    store: RunStore | None = None
    """Where each finished test case's result goes (:mod:`.run_store`; None: in memory).
    The state itself holds no finished result (issue 23: memory flat in test cases)."""
    finish_case: Callable[[CaseResult], CaseResult] | None = None
    """``RunOptions.finish_case``: applied to each result before it is stored or shown."""

    def __post_init__(self) -> None:
        if self.store is None:
            from .run_store import RunStore
            from .secrets import Redactor

            self.store = RunStore(self.sizes(), Redactor())

    def sizes(self) -> list[int]:
        """The number of test cases of each planned suite (what a :class:`RunStore` indexes)."""
        return [len(p.loaded.cases) for p in self.plan]

    @property
    def saved(self) -> RunStore:
        assert self.store is not None
        return self.store

    def finish(self, s: int, index: int, result: CaseResult, on_result: OnResult | None) -> None:
        """A test case is done: its result is stored, then shown to ``on_result``."""
        if self.finish_case is not None:
            result = self.finish_case(result)
        self.saved.put(s, index, result)  # before anyone sees it: a snapshot reads the store
        if on_result is not None:
            on_result(result)

    def final_results(self, default_reason: str = "the run was interrupted") -> RunResults:
        """Every planned test case in order; the unfinished ones as not run.

        Built now from the store (where each finished result lies) and made when
        read: a case not run, a repeated case whose runs did not all finish (over
        the runs that did) and a kept one are built as they are read.
        """
        from .run_store import KEY_BITS, RunResults

        store = self.saved
        reason = self.stop_reason or default_reason
        offsets: array[int] = array("q")
        lengths: array[int] = array("q")
        keys: array[int] = array("q")
        made: dict[int, Callable[[], CaseResult]] = {}
        kept_by_suite: dict[int, list[int]] = {}
        for ks, ki in self.kept:
            kept_by_suite.setdefault(ks, []).append(ki)
        for s, planned in enumerate(self.plan):
            indices: Sequence[int] = planned.indices
            kept = kept_by_suite.get(s)
            if kept:
                indices = sorted(set(indices) | set(kept))
            suite_offsets, suite_lengths = store.offsets[s], store.lengths[s]
            for index in indices:
                position = len(offsets)
                offset = suite_offsets[index]
                offsets.append(offset if offset >= 0 else -1)
                lengths.append(suite_lengths[index])
                keys.append(s << KEY_BITS | index if offset >= 0 else -1)
                if offset >= 0:
                    continue
                held = store.held.get((s, index))
                if held is not None:
                    made[position] = _given(held)
                    continue
                if (s, index) in self.kept:  # read from the earlier report when shown
                    made[position] = _kept_maker(self.kept, (s, index))
                    continue
                partial = self._partial(s, index, planned)
                made[position] = (
                    _given(partial)
                    if partial is not None
                    else _not_run_maker(planned.loaded, index, reason)
                )
        return RunResults(store, offsets, lengths, made, keys=keys)

    def _partial(self, s: int, index: int, planned: PlannedSuite) -> CaseResult | None:
        """A repeated case whose runs did not all finish: the finished ones, else None."""
        runs = self.partial_runs.get((s, index))
        if runs is None or all(r is None for r in runs):
            return None
        return aggregate_runs(runs, min_pass_rate=planned.settings.min_pass_rate)

    def add_run(
        self, s: int, index: int, run: int, result: CaseResult, planned: PlannedSuite
    ) -> CaseResult | None:
        """One run is in; the test case's result once its last run is in (else None).

        With repeats, the runs of a case are held until its last one is in (only
        the cases in flight: at most ``-p`` of them).
        """
        repeat = planned.settings.repeat
        if repeat <= 1:
            return result
        runs = self.partial_runs.setdefault((s, index), [None] * repeat)
        runs[run] = result
        if any(r is None for r in runs):
            return None
        del self.partial_runs[(s, index)]
        return aggregate_runs(runs, min_pass_rate=planned.settings.min_pass_rate)

    @property
    def complete(self) -> bool:
        store = self.saved
        return self.stop_reason is None and all(
            store.has(s, i) for s, p in enumerate(self.plan) for i in p.indices
        )


def _given(result: CaseResult) -> Callable[[], CaseResult]:
    return lambda: result


def _kept_maker(
    kept: Mapping[tuple[int, int], CaseResult], key: tuple[int, int]
) -> Callable[[], CaseResult]:
    return lambda: kept[key]


def _not_run_maker(loaded: LoadedSuite, index: int, reason: str) -> Callable[[], CaseResult]:
    return lambda: not_run_result(loaded, index, reason)


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
    from .spend import cap_reason, spend_of

    repeat = max(1, planned.settings.repeat)
    pending = ((index, run) for index in planned.indices for run in range(repeat))
    cap = planned.settings.max_cost
    capped: set[int] = set()
    fixtures = state.fixtures.get(s)

    async def worker() -> None:
        for index, run in pending:  # the shared iterator hands each run to exactly one worker
            if state.stop_reason is not None:
                return
            if index in capped:
                continue  # a later run of a case the cap kept from starting
            if run == 0 and cap is not None and state.spent >= cap:
                capped.add(index)
                state.capped = cap if state.capped is None else state.capped
                state.not_started += 1
                state.finish(
                    s,
                    index,
                    _not_started(planned.loaded, index, cap_reason(cap, state.spent)),
                    on_result,
                )
                continue
            try:
                runner = CaseRunner(
                    planned.loaded,
                    index,
                    backend,
                    planned.settings.turn_timeout,
                    settings=planned.settings,
                    cassette=fixtures.cassette(index, run + 1) if fixtures is not None else None,
                    run_index=run,
                )
            except CaseReadError as exc:  # its line of the test_cases_file changed: this case only
                result = unreadable_result(planned.loaded, index, str(exc))
            else:
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
            state.spent += spend_of(result)
            finished = state.add_run(s, index, run, result, planned)
            if finished is not None:
                state.finish(s, index, finished, on_result)

    workers = max(1, min(planned.settings.parallel_test_cases, len(planned.indices) * repeat))
    with contextlib.ExitStack() as stack:
        if fixtures is not None:
            # what no exchange point sees (a python agent's own httpx clients, the http and
            # semantic-kernel backends' clients) is recorded at the httpx transports (patched
            # once httpx2 or httpx is imported: a replay of a chat backend imports neither)
            from .fixtures.intercept import intercept_httpx

            stack.enter_context(intercept_httpx(fixtures.mode))
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())


def _not_started(loaded: LoadedSuite, index: int, reason: str) -> CaseResult:
    """A test case the spend cap kept from starting: skipped, every turn too, with the reason."""
    return not_run_result(loaded, index, reason, prefix="")


#: outcomes ``--rerun-failed`` runs again
RERUN_OUTCOMES = frozenset({"failed", "error", "skipped"})


def rerun_selection(
    plan: Sequence[PlannedSuite], report_path: Path, *, keep_passed: bool = False
) -> Mapping[tuple[int, int], CaseResult]:
    """``--rerun-failed``: narrow ``plan`` to the cases that did not pass in ``report_path``.

    A case of the suites is run again when the earlier report has a result of
    the same suite path (as reports show it, relative to the working
    directory), the same name *and* the same index whose outcome is failed,
    error or skipped (a case that was not run, interrupted or kept from
    starting by the spend cap). A case the report does not know at all (added
    since) is run too: nothing says it passed. A case renamed or moved counts
    as new. ``-k``/``--tag`` narrow the selection further.

    Returns, with ``keep_passed``, the report's passed results of the cases
    not run again ((suite position, index) -> result), which the new report
    shows in their place, so it is complete: a :class:`~.stored.KeptResults`
    over the report's file (an index of positions; nothing is held).
    """
    from .errors import ConfigError, ConfigIssue, ReportFormatError
    from .reports.reader import load_report

    try:
        earlier = load_report(report_path)
    except ReportFormatError as exc:
        raise ConfigError(ConfigIssue(f"--rerun-failed: {exc}")) from None
    # one pass: (suite, name, index) -> (position, run again?, runs); the results stay in
    # the file, and the kept ones are read from it when the report is written
    by_key: dict[tuple[str, str, int], tuple[int, bool, int]] = {}
    for position, r in enumerate(earlier.results):
        runs = r.repeat.planned_runs or r.repeat.runs if r.repeat else 1
        by_key[(r.suite, r.name, r.index)] = (position, r.outcome in RERUN_OUTCOMES, runs)
    kept: dict[tuple[int, int], int] = {}
    for s, planned in enumerate(plan):
        loaded = planned.loaded
        again: list[int] = []
        for index in planned.indices:
            before = by_key.get((loaded.display_path, loaded.case_name(index), index))
            if before is None or before[1]:
                again.append(index)
            elif keep_passed:
                position, _, runs = before
                if runs != max(1, planned.settings.repeat):
                    raise ConfigError(
                        ConfigIssue(
                            f"--keep-passed: {report_path} ran {loaded.case_name(index)!r} "
                            f"{runs} time(s) and this run repeats each case "
                            f"{max(1, planned.settings.repeat)} time(s); one report cannot mix "
                            f"them (give --repeat {runs}, or drop --keep-passed)",
                            file=loaded.case_file(index),
                            line=loaded.case_line(index),
                            field=f"test_cases[{index}]",
                        )
                    )
                kept[(s, index)] = position
        planned.indices = again
    if not any(p.indices for p in plan) and not kept:
        raise ConfigError(
            ConfigIssue(
                f"--rerun-failed {report_path}: nothing to run again (no test case of the "
                "selected suites failed, errored or was skipped in that report)"
            )
        )
    return KeptResults(earlier.results, kept)
