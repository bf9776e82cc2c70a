"""Console output: a line per finished test case, a progress bar on a terminal,
failing turns with expected vs actual, and a summary line.

On a terminal a progress bar (done/total, failures, elapsed time) sits on the
last line and is redrawn as test cases finish; elsewhere (CI logs, pipes)
output is plain lines, with no carriage returns or colours.

Verbosity:

- ``-q``: a line per failing test case as it finishes, and the summary;
- default: a line per test case, then every failing test case's failing
  turns in detail (input, expected, got, tool calls, each failed check);
- ``-v``: also where each setting came from, every turn of every test case
  as it finishes (failing turns in detail right away, with the traceback of
  every error your code raised: without ``-v`` a line says where it is), and a
  recap of the failing test cases at the end.

A simulated test case says how its simulated user ended (``simulated user:
gave_up``), and its failure details who played the user and why it ended.

A repeated test case (``--repeat K``) is one line too: ``3/5 runs`` after its
turn counts (those are of the run shown: the first failing run of a failing
case), and ``flaky: turn 3 passed 2 of 5`` when its runs disagreed.

Agent text is untrusted: it is redacted *before* it is cut (so a cut cannot
leave half a secret), control characters and ANSI escapes are removed, and
newlines are shown as ``⏎`` so it never starts a line. Under GitHub Actions
the failure details are wrapped in ``::stop-commands::`` so a reply cannot be
read as a workflow command.
"""

from __future__ import annotations

import errno
import secrets
import sys
import time
from typing import TextIO

from ..results import CaseResult, Report, TurnResult, UserTraceback
from ..secrets import Redactor
from . import _view as v
from .escape import strip_control

_BAR_WIDTH = 24
#: characters of a traceback line shown (a line of source or a message; the reports keep it all)
_TRACEBACK_WIDTH = 300
_STATUS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
_COLOUR = {"passed": "32", "failed": "31", "error": "33", "skipped": "2"}


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s"


class Console:
    def __init__(
        self,
        total: int,
        *,
        stream: TextIO | None = None,
        verbosity: int = 0,
        is_tty: bool | None = None,
        github_actions: bool = False,
        redact: Redactor | None = None,
        color: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stdout
        self.total = total
        self.done = 0
        self.failed = 0
        self.verbosity = verbosity
        self.tty = self.stream.isatty() if is_tty is None else is_tty
        self.color = self.tty if color is None else color
        self.github_actions = github_actions
        self.redact = redact or Redactor()
        self._bar_shown = False
        self.closed = False
        """The reader of the console went away (a broken pipe): nothing more is written."""
        self._started = time.monotonic()

    # ------------------------------------------------------------------ primitives

    def _emit(self, text: str) -> None:
        """Write to the console unless its reader has gone (``| head``): then stop writing.

        A closed console never stops the run: the reports are still written and
        the exit code is still the verdict's.
        """
        if self.closed:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            self.closed = True
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.EBADF):
                raise
            self.closed = True

    def write(self, line: str = "") -> None:
        self._clear_bar()
        self._emit(self.redact(line) + "\n")

    def clip(self, text: str | None, limit: int = 200) -> str:
        """Untrusted text on one line: redacted, then cleaned, then cut."""
        if text is None:
            return "—"
        flat = strip_control(self.redact(text)).replace("\r\n", "\n").replace("\r", "\n")
        flat = flat.replace("\n", " ⏎ ")
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"

    def _paint(self, outcome: str, text: str) -> str:
        return f"\x1b[{_COLOUR[outcome]}m{text}\x1b[0m" if self.color else text

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self._bar_shown = False
            self._emit("\r\x1b[2K")

    def _draw_bar(self) -> None:
        if not self.tty or self.total == 0:
            return
        filled = round(_BAR_WIDTH * self.done / self.total)
        bar = "█" * filled + "·" * (_BAR_WIDTH - filled)
        failed = f"  {self._paint('failed', f'{self.failed} failed')}" if self.failed else ""
        elapsed = int(time.monotonic() - self._started)
        clock = f"{elapsed // 60}:{elapsed % 60:02d}"
        self._emit(f"\r[{bar}] {self.done}/{self.total}{failed}  {clock}")
        self._bar_shown = not self.closed

    # ---------------------------------------------------------------------- events

    def start(self, suites: list[str], settings_lines: list[str]) -> None:
        self._started = time.monotonic()
        if self.verbosity >= 0:
            noun = "test case" if self.total == 1 else "test cases"
            self.write(f"multiturn-eval: {self.total} {noun} from {', '.join(suites)}")
        if self.verbosity > 0:
            for line in settings_lines:
                self.write(f"  {line}")
        self._draw_bar()

    def case_finished(self, result: CaseResult) -> None:
        self.done += 1
        failed = not result.passed and not result.skipped
        if failed:
            self.failed += 1
        if self.verbosity >= 0 or not result.passed:
            self.write(self.case_line(result))
        if self.verbosity > 0:
            if failed:
                self._write_failures(result)
            elif result.passed:
                for turn in result.all_turns():
                    self.write(self._turn_oneliner(turn))
        self._draw_bar()

    def case_line(self, result: CaseResult) -> str:
        turns = result.all_turns()
        status = self._paint(result.outcome, f"{_STATUS[result.outcome]:<5}")
        counts = f"{sum(t.passed for t in turns)}/{len(turns)} turns"
        if result.repeat is not None:
            counts += f"  {result.repeat.passes}/{result.repeat.runs} runs"
            if result.repeat.invalid_runs:
                counts += f" ({result.repeat.invalid_runs} invalid left out)"
            if result.repeat.flaky:
                counts += f"  flaky: {', '.join(v.varying_turns(result)) or 'case-level errors'}"
        if result.simulation is not None:
            counts += f"  simulated user: {result.simulation.outcome}"
        name = f"{self.clip(result.suite_name, 60)}::{self.clip(result.name, 120)}"
        line = f"{status} {name}  {counts}  {_seconds(result.duration_ms)}"
        first = v.first_failure(result)
        if first is not None:
            line += f"  — {self.clip(first.reason, 160)}"
        return line

    def _turn_oneliner(self, turn: TurnResult) -> str:
        mark = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "-"}[v.turn_status(turn)]
        return (
            f"    {mark} turn {turn.turn_index + 1}: {self.clip(turn.input, 60)}"
            f" → {self.clip(turn.response, 80)}  {_seconds(turn.duration_ms)}"
        )

    def _turn_lines(self, turn: TurnResult) -> list[str]:
        status = v.turn_status(turn)
        where = f" (line {turn.line})" if turn.line else ""
        lines = [f"    turn {turn.turn_index + 1}{where}: {self._paint(status, status.upper())}"]
        lines.append(f"      input:    {self.clip(turn.input)}")
        if turn.ground_truth is not None:
            lines.append(f"      expected: {self.clip(turn.ground_truth)}")
        lines.append(f"      got:      {self.clip(turn.response)}")
        if turn.tool_invocations:
            lines.append(f"      tools:    {self.clip(v.calls_text(turn.tool_invocations))}")
        for check in v.failed_checks(turn):
            lines.append(f"      ✗ {self.clip(v.check_text(check), 300)}")
        for warning in turn.warnings:
            lines.append(f"      ! {self.clip(warning, 300)}")
        lines += self._traceback_lines(turn.tracebacks, "      ")
        return lines

    def _traceback_lines(self, tracebacks: list[UserTraceback] | None, indent: str) -> list[str]:
        """With ``-v`` each traceback in full (redacted, cleaned, a line each); else a pointer."""
        if not tracebacks:
            return []
        if self.verbosity <= 0:
            where = ", ".join(self.clip(t.where, 60) for t in tracebacks)
            return [f"{indent}traceback of {where}: in the JSON and HTML reports; -v prints it"]
        lines = []
        for shown in tracebacks:
            lines.append(f"{indent}traceback of {self.clip(shown.where, 60)}:")
            text = strip_control(self.redact(shown.traceback))
            lines += [f"{indent}  {line[:_TRACEBACK_WIDTH]}" for line in text.splitlines()]
        return lines

    def _write_failures(self, result: CaseResult) -> None:
        token = secrets.token_hex(8) if self.github_actions else None
        if token:
            self.write(f"::stop-commands::{token}")
        where = result.location
        self.write(
            f"  {self.clip(result.suite_name, 60)}::{self.clip(result.name, 120)} ({self.clip(where)})"
        )
        repeat = v.repeat_reason(result)
        shown = v.representative_run(result)
        if repeat is not None and shown is not None:
            self.write(f"    {self.clip(repeat, 300)}; the turns below are run {shown + 1}")
        simulated = v.simulation_line(result)
        if simulated is not None:
            self.write(f"    {self.clip(simulated, 300)}")
        turns = result.all_turns()
        turn_errors = {e for t in turns for e in t.errors}
        misses = result.fixture.misses if result.fixture is not None else []
        for error in result.errors:
            if error not in turn_errors and error not in misses:  # a miss is shown whole below
                self.write(f"    ✗ {self.clip(error, 300)}")
        if result.turns is not None:  # a legacy case's tracebacks are its turn's, shown below
            for line in self._traceback_lines(result.tracebacks, "    "):
                self.write(line)
        for text in v.conversation_lines(result):
            self.write(f"    ✗ {self.clip(text, 300)}")
        for turn in turns:
            if not turn.passed and not turn.skipped:
                for line in self._turn_lines(turn):
                    self.write(line)
        if misses:  # whole: the command is at the end
            for miss in misses[:3]:
                self.write(f"    ✗ {self.clip(miss, 1500)}")
        skipped = [t for t in turns if t.skipped]
        if skipped:
            reason = skipped[0].errors[0].removeprefix("skipped: ") if skipped[0].errors else ""
            self.write(f"    {len(skipped)} turn(s) skipped: {self.clip(reason)}")
        if token:
            self.write(f"::{token}::")

    def finish(self, report: Report, written: dict[str, str]) -> None:
        self._clear_bar()
        if self.verbosity >= 0 and report.summary.failed:
            # read one at a time: the console keeps counters and what it prints (issue 23)
            heading = False
            for result in report.results:
                if result.passed or result.skipped:
                    continue
                if not heading:
                    self.write("")
                    self.write("Failing test cases")
                    heading = True
                if self.verbosity == 0:
                    self._write_failures(result)
                else:
                    self.write(f"  {self.case_line(result)}")
        s = report.summary
        self.write("")
        parts = [f"{s.passed} passed", f"{s.failed} failed"]
        if s.errored:
            parts[-1] += f" ({s.errored} with errors)"
        if s.skipped:
            parts.append(f"{s.skipped} not run")
        turns = f"turns: {s.turns.passed}/{s.turns.total} passed"
        tokens = f"{s.token_usage.total_tokens:,} tokens" if s.token_usage.total_tokens else ""
        cost = f"est. {v.cost(s.cost_usd)}" if s.cost_usd is not None else ""
        judged = v.judge_usage(s.judge_token_usage, s.judge_cost_usd) or ""
        users = v.run_usage(s) or ""
        extra = "; ".join(p for p in (turns, tokens, cost, judged, users) if p)
        state = (
            ""
            if report.run.complete
            else f" — INCOMPLETE: {self.clip(report.run.stop_reason or 'interrupted')}"
        )
        outcome = "passed" if s.failed == 0 and s.skipped == 0 and report.run.complete else "failed"
        summary = f"{', '.join(parts)} ({extra}) in {_seconds(report.run.duration_ms)}{state}"
        self.write(self._paint(outcome, summary))
        if report.run.fixtures is not None:
            self.write(self.clip(v.fixtures_line(report.run.fixtures), 600))
        self._write_comparisons(report)
        if self.verbosity >= 0 and written:
            self.write("reports: " + ", ".join(written.values()))

    def _write_comparisons(self, report: Report) -> None:
        """The regrade's flips and the baseline's counts, one line each, then each regression."""
        if report.regrade is not None:
            self.write(self.clip(v.flips_line(report.regrade), 400))
        if report.baseline is not None:
            from ..comparison import regressions, summary_line

            comparison = report.baseline
            self.write(
                self._paint(
                    "failed" if comparison.counts.get("regressed") else "passed",
                    self.clip(summary_line(comparison), 400),
                )
            )
            for change in regressions(comparison):
                why = f": {change.failing_check}" if change.failing_check else ""
                self.write(
                    f"  regressed: {self.clip(change.suite, 120)} › {self.clip(change.name, 160)} "
                    f"({change.before} -> {change.after}){self.clip(why, 300)}"
                )
