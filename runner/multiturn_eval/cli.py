"""Command line: argv -> settings -> run -> reports -> exit code.

With ``github/action.py``, the only module that reads ``os.environ`` (once,
into a :class:`~.environment.RunEnvironment` passed down); the only one that
calls ``sys.exit``. The run itself is :func:`multiturn_eval.run.run_suites`.

Exit codes: :mod:`.exit_codes` (0 passed, 1 failed, 2 configuration, 3 incomplete).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ._version import __version__
from .environment import RunEnvironment
from .errors import ConfigError, ConfigIssue
from .exit_codes import EXIT_CONFIG, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK
from .interrupts import Interrupted, InterruptGuard

if TYPE_CHECKING:
    from .run import RunOptions, RunOutcome

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_INCOMPLETE", "EXIT_OK", "entry", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        """A usage error: exit 2 with one line (no usage block: ``--help`` has it)."""
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args_suggesting(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """``parse_args``, with a "did you mean" for an option the command does not have.

        argparse takes an unambiguous prefix of an option (``--repea 3`` is
        ``--repeat 3``; an ambiguous one, ``--rep``, is an error naming the
        candidates), but says only "unrecognized arguments" for a near miss such
        as ``--repeats``: the command's own options are searched for it here.
        """
        args, extras = self.parse_known_args(argv)
        if not extras:
            return args
        command = self._commands.get(getattr(args, "command", None) or "", self)
        hint = ""
        for extra in extras:
            if extra.startswith("--"):
                known = [
                    o for a in command._actions for o in a.option_strings if o.startswith("--")
                ]
                match = difflib.get_close_matches(extra.partition("=")[0], known, n=1, cutoff=0.6)
                if match:
                    hint = f"; did you mean '{match[0]}'?"
                    break
        command.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        raise AssertionError("unreachable: error() exits")  # pragma: no cover

    @property
    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


def build_parser() -> _Parser:
    from .fixtures_command import parse_age
    from .settings import (
        parse_cost,
        parse_dir,
        parse_fixtures,
        parse_formats,
        parse_positive_float,
        parse_positive_int,
    )
    from .sharding import parse_shard

    def typed(parse: Any) -> Any:
        # argparse names the option itself ("argument -p/--parallel-test-cases: ...")
        def convert(text: str) -> Any:
            try:
                return parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

        return convert

    # options that several commands take, alike
    formats: dict[str, Any] = {
        "type": typed(parse_formats),
        "metavar": "LIST",
        "help": "comma-separated: json,junit,markdown,html (default all)",
    }
    fixtures_dir: dict[str, Any] = {
        "type": typed(parse_dir),
        "metavar": "DIR",
        "help": "the fixtures root, one folder per suite (DIR/<suite file stem>/), relative "
        "to the current directory (default: fixtures/ next to each suite file)",
    }

    def seconds(help: str) -> dict[str, Any]:
        return {"type": typed(parse_positive_float), "metavar": "S", "help": help}

    grader_timeout = seconds("seconds one code grader may take on one turn (default 60)")

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
        type=typed(parse_positive_int),
        metavar="N",
        help="test cases in flight at once (default 1; with --repeat: case runs)",
    )
    run.add_argument(
        "-o",
        "--report-dir",
        metavar="DIR",
        help="where reports go (default multiturn-eval-report/)",
    )
    run.add_argument("--format", **formats)
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
    run.add_argument("--turn-timeout", **seconds("seconds one turn may take (default 120)"))
    run.add_argument(
        "--session-timeout", **seconds("seconds opening a session may take (default 60)")
    )
    run.add_argument("--grader-timeout", **grader_timeout)
    run.add_argument(
        "--repeat",
        type=typed(parse_positive_int),
        metavar="K",
        help="run every test case K times, each in a fresh session (default 1); the case "
        "passes when passes/K >= the suite's execution.min_pass_rate (default 1.0)",
    )
    run.add_argument(
        "--shard",
        type=typed(parse_shard),
        metavar="I/N",
        help=(
            "run only shard I of N (1-based: 1/4 .. 4/4; the Action's shard-index input is "
            "0-based, as strategy.job-index); merge the reports with 'multiturn-eval merge'"
        ),
    )
    run.add_argument(
        "--max-cost",
        type=typed(parse_cost),
        metavar="USD",
        help=(
            "spend cap in US dollars: once the estimated spend reaches it, no new test case "
            "starts (the rest are skipped; exit 1); per shard with --shard"
        ),
    )
    run.add_argument(
        "--rerun-failed",
        metavar="REPORT",
        help="only the test cases that failed, errored or were skipped in this report.json",
    )
    run.add_argument(
        "--keep-passed",
        action="store_true",
        help="with --rerun-failed: the new report also holds that report's passed results",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would run (cases, turns, model calls, spend bound, the fixtures "
        "each case has); call nothing",
    )
    run.add_argument(
        "--fixtures",
        type=typed(parse_fixtures),
        metavar="MODE",
        help="recorded model traffic: off (default), replay (answer every model call from "
        "the fixtures: no API key, nothing sent), record (call live, rewrite the selected "
        "cases' fixtures), update (replay what matches, record the rest)",
    )
    run.add_argument("--fixtures-dir", **fixtures_dir)
    verbosity = run.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-q", "--quiet", action="store_true", help="only failures and the summary"
    )
    verbosity.add_argument(
        "-v", "--verbose", action="store_true", help="failing checks as they happen, settings"
    )

    _add_baseline_options(run)

    regrade = sub.add_parser(
        "regrade",
        help="re-run the current suite's checks on the replies recorded in a report; "
        "no agent is called",
    )
    regrade.add_argument("report", metavar="REPORT.json", help="the report to regrade")
    regrade.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="S",
        help="the suite files to grade with (repeatable; default: the report's run.suites)",
    )
    regrade.add_argument(
        "-o", "--report-dir", metavar="DIR", required=True, help="where the new reports go"
    )
    regrade.add_argument("--format", **formats)
    regrade.add_argument(
        "--rejudge",
        action="store_true",
        help="call LLM judges again instead of reusing the verdicts recorded in the report",
    )
    regrade.add_argument("--grader-timeout", **grader_timeout)
    regrade_verbosity = regrade.add_mutually_exclusive_group()
    regrade_verbosity.add_argument("-q", "--quiet", action="store_true", help="only the summary")
    regrade_verbosity.add_argument("-v", "--verbose", action="store_true", help="more detail")
    _add_baseline_options(regrade)

    merge = sub.add_parser(
        "merge", help="merge the report.json files of the shards of one split into one report set"
    )
    merge.add_argument(
        "reports", nargs="+", metavar="REPORT", help="report.json files (globs allowed)"
    )
    merge.add_argument(
        "-o",
        "--report-dir",
        metavar="DIR",
        default="multiturn-eval-report",
        help="where the merged reports go (default multiturn-eval-report/)",
    )
    merge.add_argument("--format", **formats)
    merge.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge even with shards missing: the report says it is incomplete (exit 3)",
    )
    _add_baseline_options(merge)

    validate = sub.add_parser("validate", help="load and validate suites; no agent is called")
    validate.add_argument("suites", nargs="+", metavar="SUITE")
    validate.add_argument(
        "--mcp",
        action="store_true",
        help="also start each MCP server (agent.mcp_servers), list its tools and check the "
        "allow-lists and the suite's expected, forbidden and conversation tool names against "
        "them; no model is called (without --mcp nothing is started)",
    )

    fixtures = sub.add_parser("fixtures", help="recorded model traffic: check the fixtures")
    fixtures_sub = fixtures.add_subparsers(dest="fixtures_command", required=True)
    check = fixtures_sub.add_parser(
        "check",
        help="what is wrong with the suites' fixtures (no model call): exit 1 on any finding",
        description="Fixtures of test cases that no longer exist, test cases without "
        "fixtures, fixtures recorded for another name, recordings older than --max-age, "
        "models that differ from the suite's, damaged files. No model is called. Exit 0 when "
        "clean, 1 on any finding, 2 on a usage or configuration error.",
    )
    check.add_argument("suites", nargs="+", metavar="SUITE", help="suite files (globs allowed)")
    check.add_argument("--fixtures-dir", **fixtures_dir)
    check.add_argument(
        "--max-age",
        type=typed(parse_age),
        metavar="AGE",
        help="a recording older than this is a finding: 30d, 12h, 2w (a bare number: days)",
    )
    check.add_argument(
        "--repeat",
        type=typed(parse_positive_int),
        metavar="K",
        help="runs each test case should have fixtures for (default: the suite's repeat)",
    )

    schema = sub.add_parser("schema", help="print a JSON Schema")
    schema.add_argument("kind", choices=["suite", "report"])
    return parser


def _add_baseline_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        metavar="REPORT.json",
        help="compare with this earlier report: each case and turn regressed, fixed, ... "
        "(missing or unreadable: a notice, and no comparison)",
    )
    parser.add_argument(
        "--fail-on",
        choices=["failures", "regressions"],
        default="failures",
        help="exit 1 on any failure (default), or only on a regression against --baseline "
        "(without a baseline: as failures)",
    )


def baseline_options(path: str | None, fail_on: str) -> tuple[dict[str, Any], list[str]]:
    """RunOptions fields for ``--baseline``/``--fail-on``, and the notices to show.

    A baseline that is missing or cannot be read is a notice, never an error:
    the run goes on without a comparison, and ``--fail-on regressions`` then
    acts as ``failures`` (a PR cannot pass the gate by deleting the baseline).
    """
    from .reports.reader import read_baseline

    notices: list[str] = []
    fields: dict[str, Any] = {"fail_on": fail_on}
    if path:
        report, notice = read_baseline(path)
        if report is not None:
            fields.update(baseline=report, baseline_file=path)
        elif notice is not None:
            notices.append(notice)
    if fail_on == "regressions" and "baseline" not in fields:
        notices.append(
            "fail-on regressions needs a baseline report; without one, any failure fails the run"
        )
    return fields, notices


def _print_config_error(exc: ConfigError, stream: TextIO, environment: RunEnvironment) -> None:
    """The issues, one after another, redacted and cleaned of control characters.

    An issue may quote what a user's program printed (an MCP server's last
    stderr lines), one line of it each: under GitHub Actions the issues are
    printed between ``::stop-commands::`` lines, so no such line is read as a
    workflow command.
    """
    import secrets as tokens

    from .reports.escape import strip_control
    from .secrets import Redactor, secrets_in

    redact = Redactor(secrets_in(environment.variables))
    count = len(exc.issues)
    stream.write(f"multiturn-eval: configuration error{'s' if count != 1 else ''} ({count}):\n")
    token = tokens.token_hex(16) if environment.github.actions else None
    if token is not None:
        stream.write(f"::stop-commands::{token}\n")
    for issue in exc.issues:
        stream.write(f"  {strip_control(redact(str(issue)))}\n")
    if token is not None:
        stream.write(f"::{token}::\n")


# ---------------------------------------------------------------------------- commands


def cmd_validate(
    paths: Sequence[str], environment: RunEnvironment, out: TextIO, *, mcp: bool = False
) -> int:
    from .backends.base import backend_issue
    from .loader import load_suites
    from .paths import expand_suites

    suites = load_suites(expand_suites(paths), environment.variables)
    issues = [issue for s in suites if (issue := backend_issue(s)) is not None]
    if issues:
        raise ConfigError(issues)
    if mcp:  # the servers' listings first; a problem is a configuration error (no "ok")
        _validate_mcp(suites, environment, out)
    for s in suites:
        for warning in s.warnings:
            out.write(f"warning: {warning}\n")
        n = len(s.cases)
        turns = sum(entry.turns for entry in s.cases)
        source = s.cases.file
        written = s.cases.inline_count
        from_file = (
            ""
            if source is None
            else f" (from {source.shown})"
            if not written
            else f" ({n - written} from {source.shown})"
        )
        out.write(
            f"ok: {s.display_path}: {n} test case{'s' if n != 1 else ''}{from_file}, {turns} turns\n"
        )
    return EXIT_OK


def _validate_mcp(suites: Sequence[Any], environment: RunEnvironment, out: TextIO) -> None:
    """``validate --mcp``: every suite's servers started at once, listed, checked, closed."""
    import asyncio

    from .suite import server_configs
    from .tools.mcp_servers.check import check_issues, check_suite, listing_lines

    with_servers = [s for s in suites if getattr(s.suite.agent, "mcp_servers", None)]
    if not with_servers:
        out.write("mcp: no suite has agent.mcp_servers; nothing to start\n")
        return

    async def check_all() -> list[Any]:
        return list(
            await asyncio.gather(*(check_suite(s, environment.variables) for s in with_servers))
        )

    issues: list[ConfigIssue] = []
    for loaded, found in zip(with_servers, asyncio.run(check_all()), strict=True):
        configs = server_configs(loaded.suite.agent.mcp_servers, loaded.base_dir)
        for line in listing_lines(found, configs):
            out.write(f"{loaded.display_path}: {line}\n")
        issues.extend(check_issues(loaded, found))
    if issues:
        raise ConfigError(issues)


#: the ``run`` options whose flag and RunOptions field have the same name
_SAME_NAMED = (
    "parallel_test_cases",
    "turn_timeout",
    "session_timeout",
    "grader_timeout",
    "repeat",
    "report_dir",
    "shard",
    "max_cost",
    "rerun_failed",
    "keep_passed",
    "fixtures",
    "fixtures_dir",
)


def run_options(args: argparse.Namespace) -> RunOptions:
    """The ``run`` command's options as the pipeline takes them."""
    from .run import RunOptions

    return RunOptions(
        **{name: getattr(args, name) for name in _SAME_NAMED},
        formats=args.format,
        pattern=args.filter,
        tags=tuple(args.tag),
        verbosity=-1 if args.quiet else (1 if args.verbose else 0),
    )


def _with_baseline(options: RunOptions, args: argparse.Namespace, out: TextIO) -> RunOptions:
    import dataclasses

    fields, notices = baseline_options(args.baseline, args.fail_on)
    for notice in notices:
        out.write(f"notice: {notice}\n")
    return dataclasses.replace(options, **fields)


def cmd_run(
    args: argparse.Namespace,
    environment: RunEnvironment,
    out: TextIO,
    guard: InterruptGuard | None = None,
) -> int:
    from .run import run_suites

    if args.keep_passed and args.rerun_failed is None:
        raise ConfigError(ConfigIssue("--keep-passed needs --rerun-failed REPORT.json"))
    options = _with_baseline(run_options(args), args, out)
    if args.dry_run:
        from .dryrun import dry_run

        return dry_run(args.suites, options, environment, out)
    outcome = run_suites(args.suites, options, environment, stream=out, guard=guard)
    return _report_outcome(outcome)


def cmd_regrade(
    args: argparse.Namespace,
    environment: RunEnvironment,
    out: TextIO,
    guard: InterruptGuard | None = None,
) -> int:
    from .regrade import regrade
    from .run import RunOptions

    options = RunOptions(
        grader_timeout=args.grader_timeout,
        report_dir=args.report_dir,
        formats=args.format,
        verbosity=-1 if args.quiet else (1 if args.verbose else 0),
    )
    options = _with_baseline(options, args, out)
    outcome = regrade(
        args.report,
        args.suite or None,
        options,
        environment,
        rejudge=args.rejudge,
        stream=out,
        guard=guard,
    )
    return _report_outcome(outcome)


def _report_outcome(outcome: RunOutcome) -> int:
    if outcome.write_error is not None:
        sys.stderr.write(f"multiturn-eval: {outcome.write_error}\n")
    if outcome.internal_error is not None:
        sys.stderr.write(
            outcome.redactor("".join(traceback.format_exception(outcome.internal_error)))
        )
    code: int = outcome.exit_code
    return code


def _unless_interrupted(code: int, guard: InterruptGuard | None) -> int:
    """``validate`` and ``schema`` only note a signal (no run to stop): it still exits 3."""
    if guard is not None and guard.interrupted:
        sys.stderr.write(f"multiturn-eval: {guard.stop_reason}\n")
        return EXIT_INCOMPLETE
    return code


def main(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    guard: InterruptGuard | None = None,
) -> int:
    """Entry point; returns the exit code (``sys.exit`` is called only from :func:`entry`)."""
    parser = build_parser()
    args = parser.parse_args_suggesting(argv)
    environment = RunEnvironment.from_mapping(os.environ if env is None else env)
    out = sys.stdout
    try:
        if args.command == "schema":
            from .schema import render

            out.write(render(args.kind))
            return _unless_interrupted(EXIT_OK, guard)
        if args.command == "merge":
            from .merge import cmd_merge

            fields, notices = baseline_options(args.baseline, args.fail_on)
            for notice in notices:
                out.write(f"notice: {notice}\n")
            return cmd_merge(
                args.reports, args.report_dir, args.format, args.allow_partial, out, fields
            )
        if args.command == "validate":
            if guard is not None:
                guard.enter("loading")  # a signal stops the loading (exit 3)
            code = cmd_validate(args.suites, environment, out, mcp=args.mcp)
            return _unless_interrupted(code, guard)
        if args.command == "regrade":
            return cmd_regrade(args, environment, out, guard)
        if args.command == "fixtures":
            from .fixtures_command import cmd_fixtures_check

            if guard is not None:
                guard.enter("loading")
            code = cmd_fixtures_check(
                args.suites, environment, out, args.fixtures_dir, args.max_age, args.repeat
            )
            return _unless_interrupted(code, guard)
        return cmd_run(args, environment, out, guard)
    except ConfigError as exc:
        _print_config_error(exc, sys.stderr, environment)
        return EXIT_CONFIG
    except Interrupted as exc:
        sys.stderr.write(f"multiturn-eval: {exc}\n")
        return EXIT_INCOMPLETE


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


def _quiet_closed_stdout() -> None:
    """``multiturn-eval run ... | head``: once the reader has gone, write nothing more.

    The console stops writing at the first broken pipe (the run goes on, and
    its exit code is the verdict's); this points stdout at /dev/null so that
    the interpreter's own flush at exit cannot fail either.
    """
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def entry(guard: InterruptGuard | None = None) -> None:
    """The process's entry: ``main`` with exit codes, and nothing left hanging at exit."""
    if guard is None:  # SIGINT/SIGTERM are ours from here on (exit 3, reports of what finished)
        guard = InterruptGuard()
        guard.install()
    try:
        code = main(guard=guard)
    except (KeyboardInterrupt, Interrupted):
        code = EXIT_INCOMPLETE
    except Exception:  # an uncaught bug exits 3, never 1 ("a test case failed")
        from .secrets import Redactor, secrets_in

        redact = Redactor(secrets_in(os.environ))
        sys.stderr.write(redact(traceback.format_exc()))
        code = EXIT_INCOMPLETE
    guard.uninstall()
    _quiet_closed_stdout()
    _exit_despite_stuck_threads(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
