"""Command line: argv -> settings -> run -> reports -> exit code.

The only module that calls ``sys.exit`` and reads ``os.environ`` (once, passed
down as a mapping). Exit codes (pytest-like, one meaning each):

==  =====================================================================
0   every selected test case passed
1   at least one test case failed
2   configuration or usage error, detected before any agent was called
3   the run could not complete (interrupted, fatal backend error, internal
    error); whatever finished is still in the reports
==  =====================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import glob
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ._version import __version__
from .errors import ConfigError, ConfigIssue

if TYPE_CHECKING:
    from .backends.base import Backend
    from .results import CaseResult, Report
    from .scheduler import OnResult, RunState

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors: exit 2, one line, no traceback
        self.print_usage(sys.stderr)
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from .settings import parse_formats, parse_positive_float, parse_positive_int

    def typed(parse: Any, what: str) -> Any:
        def convert(text: str) -> Any:
            try:
                return parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(f"{what}: {exc}") from None

        return convert

    parser = _Parser(
        prog="multiturn-eval",
        description="Conversation-level regression tests for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"multiturn-eval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run suites and write reports")
    run.add_argument("suites", nargs="+", metavar="SUITE", help="suite files (globs allowed)")
    run.add_argument(
        "-p",
        "--parallel-test-cases",
        type=typed(parse_positive_int, "-p"),
        metavar="N",
        help="test cases in flight at once (default 1)",
    )
    run.add_argument(
        "-o",
        "--report-dir",
        metavar="DIR",
        help="where reports go (default multiturn-eval-report/)",
    )
    run.add_argument(
        "--format",
        type=typed(parse_formats, "--format"),
        metavar="LIST",
        help="comma-separated: json,junit,markdown,html (default all)",
    )
    run.add_argument(
        "-k",
        "--filter",
        metavar="PATTERN",
        help="only test cases whose name matches this glob (no wildcard: substring)",
    )
    run.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="only test cases carrying this tag (repeatable: any of them)",
    )
    run.add_argument(
        "--turn-timeout",
        type=typed(parse_positive_float, "--turn-timeout"),
        metavar="S",
        help="seconds one turn may take (default 120)",
    )
    verbosity = run.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-q", "--quiet", action="store_true", help="only failures and the summary"
    )
    verbosity.add_argument(
        "-v", "--verbose", action="store_true", help="failing checks as they happen, settings"
    )

    validate = sub.add_parser("validate", help="load and validate suites; no agent is called")
    validate.add_argument("suites", nargs="+", metavar="SUITE")

    schema = sub.add_parser("schema", help="print a JSON Schema")
    schema.add_argument("kind", choices=["suite", "report"])
    return parser


def expand_suites(patterns: Sequence[str]) -> list[Path]:
    """Paths as given; a pattern with wildcards that names no file is globbed."""
    paths: list[Path] = []
    issues: list[ConfigIssue] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?[") and not Path(pattern).exists():
            matches = sorted(glob.glob(pattern, recursive=True))  # noqa: PTH207 - absolute patterns too
            if not matches:
                issues.append(ConfigIssue(f"no suite file matches {pattern!r}"))
            paths.extend(Path(m) for m in matches)
        else:
            paths.append(Path(pattern))
    if issues:
        raise ConfigError(issues)
    return list(dict.fromkeys(paths))


def _print_config_error(exc: ConfigError, stream: TextIO) -> None:
    count = len(exc.issues)
    stream.write(f"multiturn-eval: configuration error{'s' if count != 1 else ''} ({count}):\n")
    for issue in exc.issues:
        stream.write(f"  {issue}\n")


# ---------------------------------------------------------------------------- commands


def cmd_validate(paths: Sequence[str], env: Mapping[str, str], out: TextIO) -> int:
    from .backends.base import backend_issue
    from .loader import load_suites

    suites = load_suites(expand_suites(paths), env)
    issues = [issue for s in suites if (issue := backend_issue(s)) is not None]
    if issues:
        raise ConfigError(issues)
    for s in suites:
        for warning in s.warnings:
            out.write(f"warning: {warning}\n")
        n = len(s.suite.test_cases)
        turns = sum(len(c.effective_turns()) for c in s.suite.test_cases)
        out.write(f"ok: {s.display_path}: {n} test case{'s' if n != 1 else ''}, {turns} turns\n")
    return EXIT_OK


def cmd_run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    from .backends.base import create_backend
    from .loader import load_suites
    from .reports.console import Console
    from .reports.redact import Redactor
    from .reports.writer import ProgressWriter, build_report, now_iso, write_reports
    from .scheduler import PlannedSuite, RunState, Selection
    from .settings import resolve_settings

    suites = load_suites(expand_suites(args.suites), env)
    cli_values = {
        "parallel_test_cases": args.parallel_test_cases,
        "turn_timeout": args.turn_timeout,
        "report_dir": args.report_dir,
        "format": args.format,
    }
    selection = Selection(pattern=args.filter, tags=tuple(args.tag))
    plan: list[PlannedSuite] = []
    errors: list[ConfigError] = []
    for loaded in suites:
        try:
            settings = resolve_settings(cli_values, env, loaded.suite.execution)
        except ConfigError as exc:
            errors.append(exc)
            continue
        plan.append(PlannedSuite(loaded, settings, selection.select(loaded)))
    if errors:
        raise ConfigError.merge(errors[:1])  # the environment is shared: one copy of its errors
    if not any(p.indices for p in plan):
        raise ConfigError(ConfigIssue("no test case matches the given -k/--tag selection"))
    backends = [create_backend(p.loaded, p.settings) for p in plan]  # a missing SDK: exit 2 here
    # The suites live for the whole run: keep the garbage collector from re-scanning them
    # on every collection (about 20% of the run phase's CPU with 1,000 test cases).
    gc.freeze()

    run_settings = plan[0].settings
    report_dir = Path(run_settings.report_dir)
    redact = Redactor(s for p in plan for s in p.loaded.secrets)
    state = RunState(plan=plan)
    suite_paths = [p.loaded.display_path for p in plan]
    started_at, started = now_iso(), time.perf_counter()
    total = sum(len(p.indices) for p in plan)
    verbosity = -1 if args.quiet else (1 if args.verbose else 0)
    console = Console(
        total,
        stream=out,
        verbosity=verbosity,
        github_actions=env.get("GITHUB_ACTIONS") == "true",
        redact=redact,
        color=False if env.get("NO_COLOR") else None,
    )
    for loaded in suites:
        for warning in loaded.warnings:
            console.write(f"warning: {warning}")
    console.start(
        suite_paths,
        [
            f"{p.loaded.display_path}: "
            + ", ".join(
                f"{k}={getattr(p.settings, k)!r} ({src})" for k, src in p.settings.sources.items()
            )
            for p in plan
        ],
    )

    def snapshot(default_reason: str = "still running when this snapshot was written") -> Report:
        return build_report(
            suite_paths,
            state.final_results(default_reason),
            started_at=started_at,
            started=started,
            complete=False,
            stop_reason=state.stop_reason or "in progress",
            env=env,
        )

    progress = (
        ProgressWriter(report_dir, redact, snapshot) if "json" in run_settings.format else None
    )

    def on_result(result: CaseResult) -> None:
        console.case_finished(result)
        if progress is not None:
            progress.case_finished(result)

    internal_error: BaseException | None = None
    try:
        asyncio.run(_run_with_signals(state, backends, on_result))
    except KeyboardInterrupt:
        state.stop_reason = state.stop_reason or "interrupted by SIGINT"
    except Exception as exc:  # a bug: still write what finished, then show the traceback
        internal_error = exc
        state.stop_reason = f"internal error: {type(exc).__name__}: {exc}"

    if progress is not None:
        progress.close()
    complete = state.complete
    report = build_report(
        suite_paths,
        state.final_results(),
        started_at=started_at,
        started=started,
        complete=complete,
        stop_reason=None if complete else state.stop_reason,
        env=env,
    )
    try:
        written = write_reports(report, report_dir, run_settings.format, redact, env)
    except OSError as exc:
        console.write(f"multiturn-eval: cannot write reports to {report_dir}: {exc}")
        return EXIT_INCOMPLETE
    except Exception:  # a bug in a renderer must not look like "tests failed" (exit 1)
        console.write("multiturn-eval: internal error while writing the reports")
        traceback.print_exc(file=sys.stderr)
        return EXIT_INCOMPLETE
    console.finish(report, {k: str(v) for k, v in written.items()})
    if internal_error is not None:
        traceback.print_exception(internal_error, file=sys.stderr)
    if not complete:
        return EXIT_INCOMPLETE
    return EXIT_OK if report.summary.failed == 0 and report.summary.skipped == 0 else EXIT_FAILED


async def _run_with_signals(
    state: RunState, backends: Sequence[Backend], on_result: OnResult
) -> None:
    """Run the plan; SIGINT/SIGTERM cancel it (the caller then reports what finished)."""
    from .scheduler import run_plan

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(signame: str) -> None:
        if state.stop_reason is None:
            state.stop_reason = f"interrupted by {signame}"
            task.cancel()
        else:  # a second signal: stop waiting for sessions to close
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            raise KeyboardInterrupt

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, sig.name)
            installed.append(sig)
    try:
        await run_plan(state, backends, on_result)
    except asyncio.CancelledError:
        if state.stop_reason is None:
            raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Entry point; returns the exit code (``sys.exit`` is called only from ``__main__``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env = dict(os.environ) if env is None else env
    out = sys.stdout
    try:
        if args.command == "schema":
            from .schema import render

            out.write(render(args.kind))
            return EXIT_OK
        if args.command == "validate":
            return cmd_validate(args.suites, env, out)
        return cmd_run(args, env, out)
    except ConfigError as exc:
        _print_config_error(exc, sys.stderr)
        return EXIT_CONFIG


def _exit_despite_stuck_threads(code: int, grace: float = 1.0) -> None:
    """Exit even when a sync agent's thread is still blocked.

    A sync ``send`` that ignored its turn timeout keeps running in its thread
    (Python cannot kill threads), and the interpreter would wait for it at exit,
    long after the reports were written. Give threads a moment, then leave.
    """
    deadline = time.monotonic() + grace
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def entry() -> None:
    try:
        code = main()
    except KeyboardInterrupt:
        code = EXIT_INCOMPLETE
    except Exception:  # an uncaught bug exits 3, never 1 ("a test case failed")
        traceback.print_exc(file=sys.stderr)
        code = EXIT_INCOMPLETE
    _exit_despite_stuck_threads(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
