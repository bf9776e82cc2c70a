"""The one pipeline every entry point runs: suites in, a :class:`RunOutcome` out.

::

    run_suites(paths, options, environment)
      -> load and validate every suite (loader.py)            ConfigError: exit 2
      -> resolve the settings of each suite (settings.py)
      -> check the report directory, create the backends      ConfigError: exit 2
      -> run the plan: bounded concurrency (scheduler.py),
         one CaseRunner per test case (case_runner.py),
         backends (backends/), grading (grading/)
      -> roll up (results.py), write the reports (reports/)
      -> RunOutcome(report, written files, exit code)

The CLI (``cli.py``), the GitHub Action (``github/action.py``) and the
benchmarks call :func:`run_suites`; none of them rebuilds the pipeline.
Signals are handled in every phase by :class:`~.interrupts.InterruptGuard`:
the outcome of an interrupted run has ``complete: false``, holds every
finished test case and exit code 3.

One job, kept whole: the phases of a run share one state (the plan, the
run's state, the redactor the backends extend, what is on disk), and the
reports are built from it at any moment -- a snapshot, the watchdog's
emergency write, the catch-up on a second signal, the final write -- so the
phases and the report writing read best side by side. What is not the
pipeline lives elsewhere: the paths it names (:mod:`.paths`), the exit code
of a report (:mod:`.exit_codes`), the settings (:mod:`.settings`), selection
and scheduling (:mod:`.scheduler`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import traceback
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .environment import RunEnvironment
from .errors import ConfigError, ConfigIssue
from .exit_codes import EXIT_INCOMPLETE, exit_code_of
from .interrupts import Interrupted, InterruptGuard
from .paths import check_report_dir, expand_suites, remove_created
from .secrets import Redactor, secrets_in

if TYPE_CHECKING:
    from .backends.base import Backend
    from .fixtures.cassette import SuiteFixtures
    from .grading.judges.service import JudgeService
    from .loaded import LoadedSuite, PlannedSuite
    from .reports.console import Console
    from .results import CaseResult, McpServerRun, Report
    from .scheduler import RunState
    from .settings import RunSettings
    from .sharding import ShardSpec
    from .simulation.calls import SimulatorService
    from .suite.blocks import FixturesMode


OnResult = Callable[["CaseResult"], None]


@dataclass(frozen=True)
class RunOptions:
    """What the command line (or the Action's inputs) asks of a run; None: not given.

    Execution settings given here win over the suite's ``execution:`` block,
    which wins over ``MULTITURN_EVAL_*`` variables (see :mod:`.settings`).
    """

    parallel_test_cases: int | None = None
    turn_timeout: float | None = None
    session_timeout: float | None = None
    grader_timeout: float | None = None
    repeat: int | None = None
    """``--repeat K``: runs of every test case, each in a fresh session (SPEC 6.6)."""
    report_dir: str | None = None
    formats: tuple[str, ...] | None = None
    pattern: str | None = None
    """``-k``: a glob, or a substring when it has no wildcard."""
    tags: tuple[str, ...] = ()
    verbosity: int = 0
    """-1 quiet, 0 normal, 1 verbose (console only)."""
    report_dir_label: str | None = None
    """How errors name ``report_dir`` when it did not come from ``-o`` (the Action's input)."""
    baseline: Report | None = None
    """``--baseline``: the report this run is compared with (read by the caller)."""
    baseline_file: str | None = None
    """How the report names the baseline (its path as given)."""
    fail_on: str = "failures"
    """``--fail-on``: ``failures`` (exit 1 on any failure) or ``regressions`` (exit 1 only on
    a regression against ``baseline``; without a baseline it acts as ``failures``)."""
    backend_factory: Callable[[LoadedSuite, RunSettings], Backend] | None = None
    """Builds each suite's backend instead of its ``agent:`` block (regrade's replay)."""
    finish_case: Callable[[CaseResult], CaseResult] | None = None
    """Rewrites each finished result before anyone sees it: the console, ``results.jsonl``,
    ``on_result`` and the report (regrade marks what it could not grade). Must be idempotent."""
    judges_called: bool = True
    """False for a regrade that reuses recorded judge verdicts: judge API keys need not resolve."""
    agent_called: bool = True
    """False for a regrade (no agent is called): the ``agent:`` block's variables need not
    be set."""
    finish_report: Callable[[Report], None] | None = None
    """Amends the final report before it is written (regrade adds its block)."""
    shard: ShardSpec | None = None
    """``--shard I/N``: run only this shard's test cases (:mod:`.sharding`)."""
    max_cost: float | None = None
    """``--max-cost``: the spend cap in US dollars (:mod:`.spend`)."""
    rerun_failed: str | Path | None = None
    """``--rerun-failed REPORT.json``: only the cases that did not pass in that report."""
    keep_passed: bool = False
    """``--keep-passed``: the new report also holds that report's passed results, in place."""
    fixtures: str | None = None
    """``--fixtures``: off, replay, record or update (:mod:`.fixtures`)."""
    fixtures_dir: str | None = None
    """``--fixtures-dir``: the root of the fixture folders, relative to the current directory."""
    fixtures_source: str | None = None
    """What new recordings' meta entries say they were recorded against (default: the
    fixtures package's ``recorded by multiturn-eval``)."""

    def settings_values(self) -> dict[str, object]:
        return {
            "max_cost": self.max_cost,
            "parallel_test_cases": self.parallel_test_cases,
            "turn_timeout": self.turn_timeout,
            "session_timeout": self.session_timeout,
            "grader_timeout": self.grader_timeout,
            "repeat": self.repeat,
            "report_dir": self.report_dir,
            "format": self.formats,
            "fixtures": self.fixtures,
            "fixtures_dir": self.fixtures_dir,
        }


@dataclass
class RunOutcome:
    """What a run produced."""

    report: Report
    written: dict[str, Path]
    """format -> file written (absolute: resolved when the run started)"""
    exit_code: int
    report_dir: Path
    """Absolute: a relative ``-o`` is taken from the directory the run started in."""
    redactor: Redactor
    """Redacts every secret of the run (the suites', the backends', the environment's)."""
    internal_error: BaseException | None = None
    write_error: str | None = None
    warnings: list[str] = field(default_factory=list)
    markdown: str | None = None
    """``summary.md`` as written (None when it was not asked for or not written)."""
    run_seconds: float | None = None
    """From the first session opened to the last one closed (the benchmarks read it)."""
    max_in_flight: int = 0
    """The most test cases that were running at once."""
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    """CPU time of each phase: ``load`` (suites and backends), ``run``, ``reports``."""
    spend_notice: str | None = None
    """The one line saying the spend cap kept test cases from starting (None: it did not)."""
    fixture_dirs: list[Path] = field(default_factory=list)
    """The suites' fixture folders this run may have written (``--fixtures record/update``)."""


#: the deepest field path whose YAML line a run still needs (a turn's files: 6)
_LINE_DEPTH = 6


def _compact(loaded: LoadedSuite) -> None:
    """Drop what only loading needed: the raw YAML data and the lines of deep fields.

    Once every error that names a field is found (loader, backends), a run
    needs the lines of test cases and turns only. On a 50,000-case suite the
    line of every argument matcher and the parsed YAML are about a third of the
    suite's memory.
    """
    loaded.document.compact(_LINE_DEPTH)


def _cwd() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # the working directory was removed: paths stay as given
        return None


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """``asyncio.run`` without its wait for the default executor's threads at the end.

    A sync agent or grader stuck past its timeout keeps a thread busy forever
    (Python cannot kill threads); ``asyncio.run`` would wait for it before
    returning, after every result is in. Here the loop is closed without
    waiting, and the CLI exits even with such a thread alive.
    """
    loop = asyncio.new_event_loop()
    seen: list[asyncio.Task[Any]] = []
    try:
        asyncio.set_event_loop(loop)
        seen.append(loop.create_task(main))
        loop.run_until_complete(seen[0])
    finally:
        try:
            # Cancel what is left (a BaseException from one task, e.g. SystemExit, leaves the
            # others running); what they end with is the caller's to handle, not asyncio's log.
            for grace in (0.5, 0.1):  # bounded: user code may ignore its cancellation
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                if not pending:
                    break
                seen.extend(pending)
                for pending_task in pending:
                    pending_task.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(asyncio.wait(pending, timeout=grace))
            for done in seen:
                if done.done() and not done.cancelled():
                    done.exception()  # retrieved: no "Task exception was never retrieved"
            with contextlib.suppress(BaseException):
                loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


class _Pipeline:
    """The state of one :func:`run_suites` call (so its phases can be read one by one)."""

    def __init__(
        self,
        options: RunOptions,
        environment: RunEnvironment,
        guard: InterruptGuard,
        stream: TextIO | None,
        on_result: OnResult | None,
        secrets: Iterable[str] = (),
    ) -> None:
        from .reports.writer import now_iso
        from .settings import resolve_settings

        self.options = options
        self.environment = environment
        self.guard = guard
        self.stream = stream
        self.on_result = on_result
        self.run_settings = resolve_settings(options.settings_values(), environment)
        self.start_dir = _cwd()
        """The working directory when the run started: relative paths are relative to it,
        whatever directory the agent (or a module it imports) changes to later."""
        self.report_dir = self.resolved(self.run_settings.report_dir)
        self.formats = self.run_settings.format
        self.redact = Redactor([*secrets, *secrets_in(environment.variables)])
        self.suite_paths: list[str] = []
        self.started_at = now_iso()
        self.started = time.perf_counter()
        self.state: RunState | None = None
        self.console: Console | None = None
        self.progress_error: str | None = None
        """Why ``results.jsonl`` / the snapshots stopped being written, if they did."""
        self.created_dir: Path | None = None
        """The report directory (or its outermost parent) if this run created it."""
        self.markdown: str | None = None
        """``summary.md`` as written (the PR comment's body)."""
        self.known_secrets = frozenset(secrets)
        self.shard_info: dict[str, Any] | None = None
        """``--shard``: the report's ``run.shard`` and ``run.suite_hashes``."""
        self.kept: Mapping[tuple[int, int], CaseResult] = {}
        """``--keep-passed``: earlier results carried into this report."""
        self.judges: JudgeService | None = None
        """The run's LLM-judge clients and de-duplication cache (built with the backends)."""
        self.fixtures: dict[int, SuiteFixtures] = {}
        """Suite position -> its fixtures (``--fixtures``; suites that use them)."""
        self.simulators: SimulatorService | None = None
        """The run's simulated-user model clients (built with the backends)."""
        from .reports.writer import OnDisk

        self.disk = OnDisk()
        """How far ``results.jsonl`` and ``report.json`` have got (the second signal's exit)."""
        self.backends: Sequence[Backend] = ()
        """The suites' backends, once the run starts (``run.mcp_servers`` comes from them)."""

    def resolved(self, path: str | Path) -> Path:
        """``path`` as an absolute path, relative paths taken from :attr:`start_dir`."""
        given = Path(path)
        return given if given.is_absolute() or self.start_dir is None else self.start_dir / given

    def shown(self, path: Path) -> str:
        """``path`` as the console shows it: relative to :attr:`start_dir` when inside it."""
        if self.start_dir is not None:
            with contextlib.suppress(ValueError):
                return path.relative_to(self.start_dir).as_posix()
        return str(path)

    # ------------------------------------------------------------------ reports

    def build(
        self, complete: bool, stop_reason: str | None, default_reason: str, snapshot: bool = False
    ) -> Report:
        from .reports.writer import build_report

        results: Sequence[CaseResult] = []
        if self.state is not None:
            stored = self.state.final_results(default_reason)
            stored.finish = self.options.finish_case  # what is made now, not stored, needs it
            results = stored
        elif self.options.finish_case is not None:
            results = [self.options.finish_case(result) for result in results]
        report = build_report(
            self.suite_paths,
            results,
            started_at=self.started_at,
            started=self.started,
            complete=complete,
            stop_reason=stop_reason,
            environment=self.environment,
        )
        self._annotate_run(report)
        if self.options.finish_report is not None:
            self.options.finish_report(report)
        if self.options.baseline is not None and not snapshot:  # snapshots stay cheap
            from .comparison import compare

            report.baseline = compare(
                report,
                self.options.baseline,
                self.options.baseline_file or "baseline",
                not_selected=self._not_selected(),
            )
        return report

    def _not_selected(self) -> set[tuple[str, str]]:
        """(suite, name) of the cases in the loaded suites this run did not select."""
        if self.state is None:
            return set()
        out: set[tuple[str, str]] = set()
        for position, planned in enumerate(self.state.plan):
            chosen = set(planned.indices)
            kept = {i for (s, i) in self.state.kept if s == position}
            loaded = planned.loaded
            for i, name in enumerate(loaded.cases.names()):
                if i not in chosen and i not in kept:
                    out.add((loaded.display_path, name))
        return out

    def _annotate_run(self, report: Report) -> None:
        """The run fields of the shard, spend-cap and rerun features (absent when unused)."""
        from .results import ShardInfo, SpendCap

        if self.shard_info is not None:
            report.run.shard = ShardInfo.model_validate(self.shard_info["shard"])
            report.run.suite_hashes = dict(self.shard_info["suite_hashes"])
        report.run.mcp_servers = self._mcp_servers()
        state = self.state
        if state is None:
            return
        if self.fixtures:
            from .fixtures.outcome import run_fixtures

            report.run.fixtures = run_fixtures(
                report.results,
                [f.mode for f in self.fixtures.values()],
                [f.shown_root for f in self.fixtures.values()],
            )
        caps = [p.settings.max_cost for p in state.plan if p.settings.max_cost is not None]
        if caps:  # the cap that stopped the run, else the lowest one in force
            cap = state.capped if state.capped is not None else min(caps)
            report.run.spend_cap = SpendCap(
                max_cost_usd=cap,
                spent_usd=round(state.spent, 6),
                reached=state.capped is not None,
                not_started=state.not_started,
            )

    def _mcp_servers(self) -> list[McpServerRun] | None:
        """``run.mcp_servers``: every MCP server started so far, suite by suite."""
        from .backends.base import ModelBackend
        from .results import McpServerRun

        if self.state is None:
            return None
        out = [
            McpServerRun(suite=planned.loaded.display_path, **asdict(start))
            for planned, backend in zip(self.state.plan, self.backends, strict=False)
            if isinstance(backend, ModelBackend)
            for start in backend.server_starts()
        ]
        return out or None

    def write(
        self,
        report: Report,
        written: dict[str, Path] | None = None,
        *,
        covers: int | None = None,
        formats: Sequence[str] | None = None,
    ) -> dict[str, Path]:
        """Write ``report`` (in the run's formats, or ``formats``).

        ``covers``: how many ``results.jsonl`` lines the report holds (``disk.journaled``
        read before it was built); recorded once ``report.json`` is in place.
        """
        from .reports.writer import write_reports

        def keep(fmt: str, text: str) -> None:
            if fmt == "markdown":
                self.markdown = text
            if fmt == "json" and covers is not None:
                self.disk.covered(covers)

        chosen = self.formats if formats is None else formats
        return write_reports(report, self.report_dir, chosen, self.redact, keep, written)

    def emergency(self, reason: str) -> None:
        """The watchdog's way out: the reports of what finished, from another thread
        (while the suites load, a report of no test case: the main thread is stuck in C)."""
        if self.state is None:
            self.write_unloaded(self.unloaded(reason))
            return
        covers = self.disk.journaled
        self.write(self.build(False, reason, reason), covers=covers)

    def unloaded(self, reason: str) -> Report:
        """The report of a run a signal stopped while the suites loaded: no test case."""
        return self.build(False, f"{reason} while loading the suites", reason)

    def write_unloaded(
        self,
        report: Report,
        written: dict[str, Path] | None = None,
        formats: Sequence[str] | None = None,
    ) -> None:
        """Write :meth:`unloaded`'s report; the report directory is checked first
        (:meth:`load` checks it only once the suites are loaded)."""
        check_report_dir(self.run_settings, self.options.report_dir_label, self.report_dir)
        self.write(report, written, covers=0, formats=formats)

    def catch_up(self, deadline: float) -> None:
        """Before the exit on a second signal: ``report.json`` holds every case of
        ``results.jsonl`` (written now, atomically, if it does not; by ``deadline``).

        Called from the signal watchdog's exit thread. Holding the journal's lock
        until the process exits stops further lines; the write lock keeps this from
        racing a snapshot or the final reports (which write ``report.json`` first:
        once they have, this has nothing to do).
        """
        if "json" not in self.formats:
            return
        disk = self.disk
        if not disk.journal_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return
        while disk.behind:
            if self.guard.write_lock.acquire(timeout=0.05):
                try:
                    if disk.behind:
                        self._write_json_now()
                finally:
                    self.guard.write_lock.release()
                return
            if time.monotonic() >= deadline:
                return

    def _write_json_now(self) -> None:
        if self.state is None:  # still loading
            reason = self.guard.stop_reason or "interrupted"
            self.write_unloaded(self.unloaded(reason), formats=("json",))
            return
        reason = self.state.stop_reason or self.guard.stop_reason or "interrupted"
        covers = self.disk.journaled
        self.write(self.build(False, reason, reason), covers=covers, formats=("json",))

    # -------------------------------------------------------------------- phases

    def plan(self, paths: Sequence[str | Path]) -> list[PlannedSuite]:
        """Load, validate and select (``-k``, ``--tag``, ``--rerun-failed``, ``--shard``)."""
        from .backends.base import backend_issue
        from .loaded import PlannedSuite
        from .loader import display_path, load_suites
        from .scheduler import Selection
        from .settings import resolve_settings

        expanded = expand_suites(paths)
        self.suite_paths = [display_path(p) for p in expanded]
        suites = load_suites(
            expanded,
            self.environment.variables,
            judges_called=self.options.judges_called,
            agent_called=self.options.agent_called,
            fixtures=self.options.fixtures,
        )
        missing = [issue for s in suites if (issue := backend_issue(s)) is not None]
        if missing and self.options.backend_factory is None:  # a replay needs no SDK
            raise ConfigError(missing)
        selection = Selection(pattern=self.options.pattern, tags=self.options.tags)
        plan: list[PlannedSuite] = [
            PlannedSuite(
                loaded,
                resolve_settings(
                    self.options.settings_values(), self.environment, loaded.suite.execution
                ),
                selection.select(loaded),
            )
            for loaded in suites
        ]
        if self.options.rerun_failed is not None:
            from .scheduler import rerun_selection

            self.kept = rerun_selection(
                plan, Path(self.options.rerun_failed), keep_passed=self.options.keep_passed
            )
        elif not any(p.indices for p in plan):
            raise ConfigError(ConfigIssue("no test case matches the given -k/--tag selection"))
        if self.options.shard is not None:
            from .sharding import apply_shard, keep_for_shard

            self.shard_info = apply_shard(plan, self.options.shard)
            self.kept = keep_for_shard(plan, self.kept, self.options.shard)
        from .spend import price_issues

        self.open_fixtures(plan)  # first: a replay prices at the rates its fixtures recorded
        unpriced, spend_warnings = price_issues(plan)
        if unpriced:
            raise ConfigError(unpriced)
        if plan and spend_warnings:
            plan[0].loaded.warnings.extend(spend_warnings)
        for planned in plan:
            planned.loaded.warnings.extend(_startup_cut_short(planned))
        return plan

    def open_fixtures(self, plan: Sequence[PlannedSuite]) -> None:
        """The fixtures of every suite that uses them, each file read now, before any call
        (a damaged one is a ConfigError naming its file and line: exit 2).

        A recording writes the rates of the table prices this run looks up into each
        fixture's meta entry; when every suite replays, the run prices its calls at the
        rates the fixtures recorded (:mod:`.pricing`: no table read)."""
        from .pricing import current_run_prices
        from .settings import fixtures_root

        prices = current_run_prices()

        problems: list[ConfigError] = []
        for position, planned in enumerate(plan):
            settings = planned.settings
            if settings.fixtures == "off" or not planned.indices:
                continue
            from .fixtures.cassette import DEFAULT_SOURCE, SuiteFixtures

            loaded = planned.loaded
            root = fixtures_root(settings, loaded.base_dir, self.start_dir)
            repeat = max(1, settings.repeat)
            suite = SuiteFixtures(
                mode=settings.fixtures,
                root=root,
                suite_file=loaded.path,
                suite_shown=loaded.display_path,
                case_names=list(loaded.cases.names()),
                secrets=self.redact,
                repeat=repeat,
                source=self.options.fixtures_source or DEFAULT_SOURCE,
                shown_root=self.shown(root),
                prices=prices.recordable if prices is not None else None,
            )
            try:  # each file held until its case runs, unless there are many (memory stays flat)
                suite.load(planned.indices, repeat, keep=len(planned.indices) * repeat <= 2000)
            except ConfigError as exc:
                problems.append(exc)
            self.fixtures[position] = suite
        if problems:
            raise ConfigError.merge(problems)
        if prices is not None and all(p.settings.fixtures == "replay" for p in plan):
            found: dict[tuple[str, str], set[tuple[str, ...]]] = {}
            for suite in self.fixtures.values():
                for key, rates in suite.recorded_prices.items():
                    found.setdefault(key, set()).update(rates)
            prices.use_recorded(found)

    def load(self, paths: Sequence[str | Path]) -> list[PlannedSuite]:
        plan = self.plan(paths)
        self.created_dir = check_report_dir(
            self.run_settings, self.options.report_dir_label, self.report_dir
        )
        return plan

    @staticmethod
    def _price_callers(plan: Sequence[PlannedSuite]) -> None:
        """Look up the judges' and simulated users' prices now, while the run sets up (as an
        agent backend's is looked up when it is made): reading genai-prices' table costs about
        40 ms once, which the first judged turn or simulated message would pay otherwise. A
        price the suite's ``pricing:`` gives reads no table."""
        from .pricing import judge_provider, price_for

        for p in plan:
            callers = set(p.loaded.judge_models)
            for index in p.indices:  # the selected test cases only (as the spend cap's check)
                case = p.loaded.simulations.get(index)
                simulator = case.simulator if case is not None else None
                if simulator is not None and simulator.endpoint is not None and simulator.model:
                    provider = judge_provider(simulator.backend, simulator.api_version)
                    callers.add((simulator.model, provider))
            for model, provider in callers:
                price_for(model, p.loaded.suite.pricing, provider=provider)

    def create_backends(self, plan: Sequence[PlannedSuite]) -> list[Backend]:
        from .backends.base import create_backend

        make = self.options.backend_factory or create_backend
        backends = [make(p.loaded, p.settings) for p in plan]  # missing SDK: exit 2
        endpoints = {e for p in plan for e in p.loaded.judge_endpoints}
        modes = {p.settings.fixtures for p in plan}
        # replay refuses a judge's or simulated user's call made outside any test case only
        # when no suite calls live
        outside: FixturesMode = (
            "off" if modes == {"off"} else "replay" if modes == {"replay"} else "record"
        )
        if endpoints or modes != {"off"}:  # the judges' clients (and SDKs) are built now
            from .grading.judges.service import JudgeService

            self.judges = JudgeService(timeout=self.run_settings.turn_timeout, fixtures=outside)
            self.judges.prepare(endpoints)
        users = {
            endpoint
            for p in plan
            for case in p.loaded.simulations.values()
            if (endpoint := case.simulator.endpoint) is not None
        }
        if users and self.options.agent_called:  # a regrade never calls a simulated user
            from .simulation.calls import SimulatorService

            self.simulators = SimulatorService(
                timeout=self.run_settings.turn_timeout, fixtures=outside
            )
            self.simulators.prepare(users)
        if endpoints or self.simulators is not None:
            self._price_callers(plan)
        secrets: set[str] = set()
        for planned, backend in zip(plan, backends, strict=True):
            secrets |= planned.loaded.secrets
            secrets |= backend.secrets
        self.redact = self.redact.with_secrets(secrets)
        for position, fixtures in self.fixtures.items():
            fixtures.redact = self.redact  # what the backends added is redacted from fixtures too
            fixtures.live = getattr(backends[position], "fixtures_live", True)
        return backends

    def start_console(self, plan: Sequence[PlannedSuite], warnings: Sequence[str]) -> None:
        if self.stream is None:
            return
        from .reports.console import Console

        total = sum(len(p.indices) for p in plan)
        self.console = Console(
            total,
            stream=self.stream,
            verbosity=self.options.verbosity,
            github_actions=self.environment.github.actions,
            redact=self.redact,
            color=False if self.environment.no_color else None,
        )
        for warning in warnings:
            self.console.write(f"warning: {warning}")
        self.console.start(
            self.suite_paths,
            [
                f"{p.loaded.display_path}: "
                + ", ".join(
                    f"{k}={getattr(p.settings, k)!r} ({src})"
                    for k, src in p.settings.sources.items()
                )
                for p in plan
            ],
        )
        if self.options.verbosity >= 0:
            for line in self._scope_lines(plan):
                self.console.write(f"  {line}")

    def _scope_lines(self, plan: Sequence[PlannedSuite]) -> list[str]:
        """What ``--shard``, ``--keep-passed`` and ``--max-cost`` make of this run."""
        lines = []
        if self.shard_info is not None:
            shard = self.shard_info["shard"]
            lines.append(
                f"shard {shard['index']}/{shard['total']} (split {shard['split_id']}): "
                f"{sum(len(p.indices) for p in plan)} of {self.shard_info['selected']} "
                "selected test cases"
            )
        if self.kept:
            lines.append(
                f"--keep-passed: {len(self.kept)} passed result{'s' if len(self.kept) != 1 else ''} "
                f"kept from {self.options.rerun_failed}"
            )
        from .backends.base import ModelBackend

        for backend in self.backends:
            if isinstance(backend, ModelBackend) and backend.mcp is not None:
                for start in backend.server_starts():
                    when = (
                        f"started in {start.startup_ms:.0f} ms, shared by every test case"
                        if start.scope == "run" and start.startup_ms is not None
                        else "one per test case"
                    )
                    lines.append(f"MCP server {start.name} ({start.transport}): {when}")
        caps = sorted({p.settings.max_cost for p in plan if p.settings.max_cost is not None})
        if caps:
            from .spend import dollars

            lines.append(
                f"spend cap: {dollars(caps[0])}" + (" (per suite: see -v)" if len(caps) > 1 else "")
            )
        return lines

    def execute(
        self, backends: Sequence[Backend], warnings: Sequence[str] = ()
    ) -> BaseException | None:
        """Start the MCP servers the whole run shares, show the console's start, run the
        plan; returns an internal error (a bug) if one ended it. A ``scope: run`` server
        that does not start raises :class:`ConfigError` (no agent was called)."""
        from .reports.writer import ProgressWriter
        from .run_store import RunStore

        assert self.state is not None
        state = self.state
        journal = "json" in self.formats
        # the finished results go to results.jsonl (the journal is the store), else to a
        # private spool file: the run holds none of them (issue 23)
        store = RunStore(
            state.sizes(),
            self.redact,
            journal=self.report_dir / ProgressWriter.JOURNAL if journal else None,
            disk=self.disk,
            spool=not journal,
        )
        state.store = store
        state.finish_case = self.options.finish_case
        progress = (
            ProgressWriter(
                self.report_dir,
                self.redact,
                self._snapshot,
                lock=self.guard.write_lock,
                disk=self.disk,
                failed=lambda: store.error,
            )
            if journal
            else None
        )

        def on_result(result: CaseResult) -> None:
            if self.console is not None:
                self.console.case_finished(result)
            if progress is not None:
                progress.case_finished(result)
            if self.on_result is not None:
                self.on_result(result)

        internal_error: BaseException | None = None
        try:
            run_loop(self._run(backends, on_result, warnings))
        except ConfigError:
            raise
        except (KeyboardInterrupt, Interrupted):
            state.stop_reason = state.stop_reason or self.guard.stop_reason or "interrupted"
        except SystemExit as exc:  # user code is guarded; this is a last line: never exit 0 here
            internal_error = RuntimeError(f"SystemExit({exc.code!r}) escaped into the run")
            state.stop_reason = f"internal error: {internal_error}"
        except Exception as exc:  # a bug: still write what finished, then show the traceback
            internal_error = exc
            cause: BaseException = exc  # the bug itself, not the TaskGroup's wrapper around it
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            state.stop_reason = f"internal error: {type(cause).__name__}: {cause}"
        finally:
            store.close()
            self.progress_error = progress.error if progress is not None else store.error
        if self.guard.stop_reason and state.stop_reason is None:
            state.stop_reason = self.guard.stop_reason
        return internal_error

    def remove_empty_journal(self) -> None:
        """Take back the ``results.jsonl`` this run opened, while it holds no line."""
        from .reports.writer import ProgressWriter

        journal = self.report_dir / ProgressWriter.JOURNAL
        with contextlib.suppress(OSError):
            if journal.stat().st_size == 0:
                journal.unlink()

    def _snapshot(self) -> Report:
        # the periodic snapshot never races the final (or the watchdog's) writing
        assert self.state is not None
        return self.build(
            False, self.state.stop_reason or "in progress", "still running", snapshot=True
        )

    async def _run(
        self, backends: Sequence[Backend], on_result: OnResult, warnings: Sequence[str] = ()
    ) -> None:
        from .backends.base import start_tool_servers
        from .scheduler import run_plan

        assert self.state is not None
        state = self.state
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop() -> None:
            if state.stop_reason is None:
                state.stop_reason = self.guard.stop_reason or "interrupted"
            loop.call_soon_threadsafe(task.cancel)

        self.guard.on_stop = stop

        def ping(callback: Callable[[], None]) -> None:
            loop.call_soon_threadsafe(callback)

        self.guard.ping = ping
        if self.guard.interrupted:  # a signal came before the loop started
            stop()
        from .grading.judges.service import JUDGES, JudgeService

        # one judge service per run: its de-duplication cache and clients live as long as the run
        judges = self.judges or JudgeService(timeout=self.run_settings.turn_timeout)
        judges_token = JUDGES.set(judges)
        from .simulation.calls import SIMULATORS, SimulatorService

        simulators = self.simulators or SimulatorService(timeout=self.run_settings.turn_timeout)
        simulators_token = SIMULATORS.set(simulators)
        try:
            try:  # in the run's event loop: the servers' tasks live in it
                await start_tool_servers(backends)
            except BaseException:
                for backend in backends:
                    with contextlib.suppress(Exception):
                        await backend.aclose()
                raise
            self.start_console(state.plan, warnings)
            await run_plan(state, backends, on_result)
        except asyncio.CancelledError:
            if state.stop_reason is None:
                raise
        finally:
            JUDGES.reset(judges_token)
            SIMULATORS.reset(simulators_token)
            await judges.aclose()
            await simulators.aclose()
            self.guard.on_stop = None
            self.guard.ping = None


def run_suites(
    paths: Sequence[str | Path],
    options: RunOptions,
    environment: RunEnvironment | Mapping[str, str],
    *,
    stream: TextIO | None = None,
    on_result: OnResult | None = None,
    guard: InterruptGuard | None = None,
    secrets: Iterable[str] = (),
) -> RunOutcome:
    """Load, run, grade and report ``paths``; raise :class:`ConfigError` before any agent call.

    Secrets redacted from every report and console line: ``secrets`` (the
    caller's, e.g. the Action's inputs), the values of the environment's
    secret-looking variables, those the suites substituted and those the
    backends use (see :mod:`.secrets`).

    ``stream`` gets the console output (None: silent); ``on_result`` is called
    with each test case's result as it finishes (in completion order). Pass a
    ``guard`` already installed to cover the time before this call (the CLI
    does, from its first line); otherwise one is installed for the call.
    """
    from .pricing import run_prices

    with run_prices():  # the prices of this run's fixtures, for this run only
        return _run_suites(paths, options, environment, stream, on_result, guard, secrets)


def _run_suites(
    paths: Sequence[str | Path],
    options: RunOptions,
    environment: RunEnvironment | Mapping[str, str],
    stream: TextIO | None,
    on_result: OnResult | None,
    guard: InterruptGuard | None,
    secrets: Iterable[str],
) -> RunOutcome:
    from .reports.writer import now_iso
    from .scheduler import RunState

    if not isinstance(environment, RunEnvironment):
        environment = RunEnvironment.from_mapping(environment)
    cpu_started = time.process_time()
    own_guard = guard is None
    guard = guard or InterruptGuard()
    if own_guard:
        guard.install()
    try:
        # still "starting" (a signal is only noted): the settings say where reports go
        pipeline = _Pipeline(options, environment, guard, stream, on_result, secrets)
        guard.catch_up = pipeline.catch_up
        guard.emergency = pipeline.emergency  # the watchdog can write reports from here on
        try:
            guard.enter("loading")
            if guard.interrupted:  # a signal came before the run (argv, imports)
                raise Interrupted(guard.stop_reason or "a signal")
            plan = pipeline.load(paths)
            backends = pipeline.create_backends(plan)
            for planned in plan:
                _compact(planned.loaded)
            pipeline.state = RunState(plan=plan, kept=pipeline.kept, fixtures=pipeline.fixtures)
            # from here on a signal stops the run (the run's task checks for one when it starts)
            guard.enter("running")
        except Interrupted:
            return _interrupted_early(pipeline)
        except ConfigError:  # no agent was called: leave no empty report directory behind
            remove_created(pipeline.created_dir, pipeline.report_dir)
            raise
        cpu_loaded = time.process_time()
        warnings = [w for p in plan for w in p.loaded.warnings]
        for backend in backends:
            warnings.extend(backend.warnings)
        # The suites live for the whole run: keep the garbage collector from re-scanning them
        # on every collection (about 20% of the run phase's CPU with 1,000 test cases).
        gc.freeze()
        pipeline.started_at, pipeline.started = now_iso(), time.perf_counter()
        pipeline.backends = backends
        try:  # the console starts once the run's MCP servers have (execute)
            internal_error = pipeline.execute(backends, warnings)
        except ConfigError:  # a scope: run MCP server did not start: still no agent called
            pipeline.remove_empty_journal()
            remove_created(pipeline.created_dir, pipeline.report_dir)
            raise
        cpu_ran = time.process_time()
        outcome = _finish(pipeline, internal_error, warnings)
        outcome.cpu_seconds = {
            "load": cpu_loaded - cpu_started,
            "run": cpu_ran - cpu_loaded,
            "reports": time.process_time() - cpu_ran,
        }
        return outcome
    finally:
        guard.emergency = None
        guard.catch_up = None
        guard.enter("done")  # a signal from here on is only noted: the outcome is ready
        gc.unfreeze()  # what this run froze goes back to the collector (run_suites in a loop)
        if own_guard:
            guard.uninstall()


def _interrupted_early(pipeline: _Pipeline) -> RunOutcome:
    """A signal while the suites were loading: a report of no test cases, exit 3."""
    report = pipeline.unloaded(pipeline.guard.stop_reason or "interrupted")
    written: dict[str, Path] = {}
    write_error = None
    with pipeline.guard.writing():
        try:
            pipeline.write_unloaded(report, written)
        except (ConfigError, OSError) as exc:
            write_error = str(exc)
    return RunOutcome(
        report,
        written,
        EXIT_INCOMPLETE,
        pipeline.report_dir,
        pipeline.redact,
        write_error=write_error,
        markdown=pipeline.markdown,
    )


def _startup_cut_short(planned: PlannedSuite) -> list[str]:
    """A ``scope: case`` server starts as its case's session opens, within
    ``session_timeout``: a longer ``startup_timeout`` is cut short, and the case's error
    would then say only that the session timed out."""
    session = planned.settings.session_timeout
    out = []
    for spec in getattr(planned.loaded.suite.agent, "mcp_servers", None) or ():
        if spec.scope == "case" and spec.startup_timeout > session:
            out.append(
                f"{planned.loaded.display_path}: MCP server {spec.name!r} has startup_timeout "
                f"{spec.startup_timeout:g} s, but a scope: case server starts within its "
                f"case's session_timeout ({session:g} s): raise session_timeout to at least "
                f"{spec.startup_timeout:g} s, or use scope: run"
            )
    return out


def _finish(
    pipeline: _Pipeline, internal_error: BaseException | None, warnings: list[str]
) -> RunOutcome:
    assert pipeline.state is not None
    state = pipeline.state
    written: dict[str, Path] = {}
    write_error: str | None = None
    with pipeline.guard.writing():
        complete = state.complete and not pipeline.guard.interrupted
        reason = state.stop_reason or pipeline.guard.stop_reason
        covers = pipeline.disk.journaled  # the journal is closed: the report holds every line
        report = pipeline.build(complete, None if complete else reason, "the run was interrupted")
        try:
            pipeline.write(report, written, covers=covers)
            if pipeline.guard.interrupted and report.run.complete:
                # the signal came while the reports were written: they hold every test
                # case, but the run did not end on its own. Every report says so again
                # (report.json first), and the exit code is 3.
                report.run.complete = False
                report.run.stop_reason = (
                    f"{pipeline.guard.stop_reason} while the reports were written"
                )
                pipeline.write(report, written, covers=covers)
        except OSError as exc:
            write_error = f"cannot write reports to {pipeline.shown(pipeline.report_dir)}: {exc}"
        except Exception:  # a bug in a renderer must not look like "tests failed" (exit 1)
            write_error = "internal error while writing the reports:\n" + pipeline.redact(
                traceback.format_exc()
            )
    written = {fmt: written[fmt] for fmt in pipeline.formats if fmt in written}
    if pipeline.progress_error is not None:
        warnings.append(pipeline.progress_error)
        if pipeline.console is not None:
            pipeline.console.write(f"warning: {pipeline.progress_error}")
    code = exit_code_of(report, pipeline.options.fail_on)
    if write_error is not None or internal_error is not None:
        code = EXIT_INCOMPLETE
    spend_notice = None
    if state.capped is not None and state.not_started:
        from .spend import cap_notice

        spend_notice = cap_notice(state.capped, state.spent, state.not_started)
    if pipeline.console is None and not report.run.complete:
        # stopped before the console started (a signal while the scope: run MCP servers
        # started): it is shown now, so the stop reason and the reports written are printed
        with contextlib.suppress(Interrupted):
            pipeline.start_console(state.plan, warnings)
    if pipeline.console is not None:
        with contextlib.suppress(Interrupted):
            if write_error is not None:
                pipeline.console.write(f"multiturn-eval: {write_error}")
            else:
                pipeline.console.finish(report, {k: pipeline.shown(v) for k, v in written.items()})
            if spend_notice is not None:
                pipeline.console.write(f"multiturn-eval: {spend_notice}")
    return RunOutcome(
        report=report,
        written=written,
        exit_code=code,
        report_dir=pipeline.report_dir,
        redactor=pipeline.redact,
        internal_error=internal_error,
        write_error=write_error,
        warnings=warnings,
        markdown=pipeline.markdown,
        run_seconds=(
            state.last_session_closed - state.first_session_opened
            if state.first_session_opened is not None and state.last_session_closed is not None
            else None
        ),
        max_in_flight=state.max_in_flight,
        spend_notice=spend_notice,
        fixture_dirs=[
            f.directory for f in pipeline.fixtures.values() if f.mode in ("record", "update")
        ],
    )
