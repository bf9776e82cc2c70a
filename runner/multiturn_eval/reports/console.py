"""Console output: a line per finished test case, a progress bar on a terminal,
failing turns with expected vs actual, and a summary line.

Verbosity: ``-q`` prints only failures' one-liners and the summary; default adds
a line per test case and the failing turns at the end; ``-v`` also prints every
failing check as soon as its test case finishes and where each setting came from.

Agent text is untrusted: control characters and ANSI escapes are removed, long
text is cut, and under GitHub Actions the failure details are wrapped in
``::stop-commands::`` so a reply cannot be read as a workflow command.
"""

from __future__ import annotations

import secrets
import sys
from typing import TextIO

from ..results import CaseResult, Report, TurnResult
from .redact import Redactor, strip_control

_BAR_WIDTH = 24


def _clip(text: str | None, limit: int = 200) -> str:
    if text is None:
        return "—"
    flat = strip_control(text).replace("\n", " ⏎ ")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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
    ) -> None:
        self.stream = stream or sys.stdout
        self.total = total
        self.done = 0
        self.failed = 0
        self.verbosity = verbosity
        self.tty = self.stream.isatty() if is_tty is None else is_tty
        self.github_actions = github_actions
        self.redact = redact or Redactor()
        self._bar_shown = False

    # ------------------------------------------------------------------ primitives

    def write(self, line: str = "") -> None:
        self._clear_bar()
        self.stream.write(self.redact(line) + "\n")
        self.stream.flush()

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.stream.write("\r\x1b[2K")
            self._bar_shown = False

    def _draw_bar(self) -> None:
        if not self.tty or self.total == 0 or self.verbosity < 0:
            return
        filled = round(_BAR_WIDTH * self.done / self.total)
        bar = "█" * filled + "·" * (_BAR_WIDTH - filled)
        failed = f"  {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r[{bar}] {self.done}/{self.total}{failed}")
        self.stream.flush()
        self._bar_shown = True

    # ---------------------------------------------------------------------- events

    def start(self, suites: list[str], settings_lines: list[str]) -> None:
        if self.verbosity >= 0:
            noun = "test case" if self.total == 1 else "test cases"
            self.write(f"multiturn-eval: {self.total} {noun} from {', '.join(suites)}")
        if self.verbosity > 0:
            for line in settings_lines:
                self.write(f"  {line}")
        self._draw_bar()

    def case_finished(self, result: CaseResult) -> None:
        self.done += 1
        if not result.passed and not result.skipped:
            self.failed += 1
        if self.verbosity >= 0 or not result.passed:
            self.write(self.case_line(result))
        if self.verbosity > 0 and not result.passed:
            self._write_failures(result)
        self._draw_bar()

    def case_line(self, result: CaseResult) -> str:
        turns = result.all_turns()
        ran = [t for t in turns if not t.skipped]
        status = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}[
            result.outcome
        ]
        counts = f"{sum(t.passed for t in turns)}/{len(turns)} turns"
        line = f"{status:<5} {result.suite_name}::{_clip(result.name, 120)}  {counts}  {_seconds(result.duration_ms)}"
        if result.outcome != "passed":
            first = result.first_failing_turn()
            if first is not None and ran:
                checks = first.failed_checks()
                line += f"  — turn {first.turn_index + 1}: {_clip(checks[0] if checks else 'failed', 160)}"
            elif result.errors:
                line += f"  — {_clip(result.errors[0], 160)}"
        return line

    def _turn_lines(self, turn: TurnResult) -> list[str]:
        lines = [f"    turn {turn.turn_index + 1}" + (f" (line {turn.line})" if turn.line else "")]
        lines.append(f"      input:    {_clip(turn.input)}")
        if turn.ground_truth is not None:
            lines.append(f"      expected: {_clip(turn.ground_truth)}")
        lines.append(f"      got:      {_clip(turn.response)}")
        if turn.tool_invocations:
            calls = ", ".join(
                f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.args.items())})"
                for c in turn.tool_invocations
            )
            lines.append(f"      tools:    {_clip(calls)}")
        for check in turn.failed_checks():
            lines.append(f"      ✗ {_clip(check, 300)}")
        return lines

    def _write_failures(self, result: CaseResult) -> None:
        token = secrets.token_hex(8) if self.github_actions else None
        if token:
            self.write(f"::stop-commands::{token}")
        where = f"{result.suite}:{result.line}" if result.line else result.suite
        self.write(f"  {result.suite_name}::{_clip(result.name, 120)} ({where})")
        for error in result.errors:
            self.write(f"    ✗ {_clip(error, 300)}")
        for turn in result.all_turns():
            if not turn.passed and not turn.skipped:
                for line in self._turn_lines(turn):
                    self.write(line)
        skipped = [t for t in result.all_turns() if t.skipped]
        if skipped and not result.skipped:
            self.write(
                f"    {len(skipped)} turn(s) skipped: {_clip(skipped[0].errors[0] if skipped[0].errors else '', 200)}"
            )
        if token:
            self.write(f"::{token}::")

    def finish(self, report: Report, written: dict[str, str]) -> None:
        self._clear_bar()
        failures = [r for r in report.results if not r.passed and not r.skipped]
        if failures and self.verbosity == 0:
            self.write("")
            self.write("Failing test cases")
            for result in failures:
                self._write_failures(result)
        s = report.summary
        self.write("")
        parts = [f"{s.passed} passed", f"{s.failed} failed"]
        if s.skipped:
            parts.append(f"{s.skipped} skipped")
        turns = f"turns: {s.turns.passed}/{s.turns.total} passed"
        tokens = f"{s.token_usage.total_tokens} tokens" if s.token_usage.total_tokens else ""
        cost = f"${s.cost_usd:.4f}" if s.cost_usd is not None else ""
        extra = "; ".join(p for p in (turns, tokens, cost) if p)
        state = (
            ""
            if report.run.complete
            else f" — INCOMPLETE: {report.run.stop_reason or 'interrupted'}"
        )
        self.write(f"{', '.join(parts)} ({extra}) in {_seconds(report.run.duration_ms)}{state}")
        if self.verbosity >= 0 and written:
            self.write("reports: " + ", ".join(written.values()))
