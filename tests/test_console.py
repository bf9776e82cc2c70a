"""Console output: progress bar on a terminal, plain lines in CI, failing turns, -q and -v."""

from __future__ import annotations

import io
import re

from multiturn_eval.reports.console import Console
from multiturn_eval.reports.escape import strip_control
from multiturn_eval.results import Report
from multiturn_eval.secrets import Redactor

from .reports_fixtures import (
    case,
    interrupted_report,
    metric,
    report,
    sample_report,
    turn,
)


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_console(rep: Report, stream: io.StringIO | None = None, **kw: object) -> str:
    out = stream if stream is not None else io.StringIO()
    console = Console(len(rep.results), stream=out, **kw)  # type: ignore[arg-type]
    console.start(rep.run.suites, ["evals/convfinqa.yaml: parallel_test_cases=4 (cli)"])
    for result in rep.results:
        console.case_finished(result)
    console.finish(rep, {"json": "out/report.json", "html": "out/report.html"})
    return out.getvalue()


def test_plain_lines_when_not_a_terminal() -> None:
    text = run_console(sample_report())
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == "multiturn-eval: 7 test cases from evals/convfinqa.yaml, evals/support.yaml"
    assert lines[1] == "PASS  convfinqa-smoke::Single_JKHY_2009  2/2 turns  1.61s"
    assert lines[2].startswith(
        "FAIL  convfinqa-smoke::Double_AAPL_2015  2/3 turns  2.42s  — turn 2: tools: subtract:"
    )
    assert lines[3] == (
        "ERROR convfinqa-smoke::Slow_backend  1/2 turns  60.81s  — turn 1: timed out after 60 s "
        "(turn_timeout)"
    )
    assert text.endswith(
        "2 passed, 5 failed (2 with errors) (turns: 6/13 passed; 2,570 tokens; est. $0.0101) "
        "in 72.25s\nreports: out/report.json, out/report.html\n"
    )


def test_failing_turns_in_detail_at_the_end() -> None:
    text = run_console(sample_report())
    details = text[text.index("Failing test cases") :]
    assert "  convfinqa-smoke::Double_AAPL_2015 (evals/convfinqa.yaml:21)" in details
    block = details[details.index("Double_AAPL_2015") : details.index("Slow_backend")]
    assert "    turn 2 (line 26): FAILED" in block
    assert "turn 1 (line 23)" not in block  # passing turns are not repeated
    assert "      input:    and the difference from 2014?" in block
    assert "      expected: 50920" in block
    assert "      got:      The difference is 51,000 | roughly. cc @octocat </details>" in block
    assert '      tools:    math-subtract(a=233715, b="182,795") -> 51000' in block
    assert "      ✗ tools: subtract: no call matched" in block
    assert "      ✗ numeric: expected 50920 (±0.5), got 51" in block
    assert "    1 turn(s) skipped: session unrecoverable after turn 2" in details


def test_progress_bar_on_a_terminal() -> None:
    text = run_console(sample_report(), FakeTTY())
    bars = re.findall(r"\r\[([█·]{24})\] (\d+)/7", text)
    assert [int(done) for _, done in bars] == list(range(8))
    assert bars[-1][0] == "█" * 24
    assert "\r\x1b[2K" in text  # the bar is erased before every line, never mixed into one
    for line in text.split("\n"):
        assert line.count("\r[") <= 1
    assert "\x1b[31m" in text  # FAIL in red on a terminal
    assert "\x1b[" not in run_console(sample_report(), FakeTTY(), color=False).replace(
        "\r\x1b[2K", ""
    )


def test_quiet_shows_only_failures_and_the_summary() -> None:
    text = run_console(sample_report(), verbosity=-1)
    lines = text.splitlines()
    assert not any(line.startswith("PASS") for line in lines)
    assert sum(1 for line in lines if line.startswith(("FAIL", "ERROR"))) == 5
    assert "Failing test cases" not in text
    assert "input:" not in text
    assert "multiturn-eval: 7 test cases" not in text
    assert lines[-1].startswith("2 passed, 5 failed")


def test_verbose_shows_settings_every_turn_and_failures_as_they_happen() -> None:
    text = run_console(sample_report(), verbosity=1)
    assert "  evals/convfinqa.yaml: parallel_test_cases=4 (cli)" in text
    first = text.index("PASS  convfinqa-smoke::Single_JKHY_2009")
    second = text.index("FAIL  convfinqa-smoke::Double_AAPL_2015")
    assert (
        "    ✓ turn 1: what is the net cash from operating activities in 2009? → 206588"
        in (text[first:second])
    )
    # the failing turns right after their test case, before the next one
    assert "      ✗ numeric: expected 50920" in text[second : text.index("Slow_backend")]
    recap = text[text.index("Failing test cases") :]
    assert "input:" not in recap  # only the recap lines at the end
    assert "  FAIL  convfinqa-smoke::Double_AAPL_2015" in recap


def test_agent_text_never_starts_a_line_or_carries_escapes() -> None:
    payload = "ok\n::error::pwned\r\n\x1b[31mred\x1b[0m \x1b]0;title\x07\x00done"
    bad = case(
        0,
        "hostile",
        [turn(0, payload, payload, ground_truth="x", metrics=[metric("equality", False, payload)])],
    )
    text = run_console(report([bad]))
    for line in text.splitlines():
        assert not line.lstrip().startswith("::")
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert "got:      ok ⏎ ::error::pwned ⏎ red done" in text


def test_failure_details_are_wrapped_in_stop_commands_under_github_actions() -> None:
    payload = "::error::pwned"
    bad = case(0, "hostile", [turn(0, "q", "x", metrics=[metric("equality", False, payload)])])
    lines = run_console(report([bad]), github_actions=True).splitlines()
    stops = [i for i, line in enumerate(lines) if line.startswith("::stop-commands::")]
    assert len(stops) == 1
    token = lines[stops[0]].removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{16}", token)
    resume = lines.index(f"::{token}::")
    inside = "\n".join(lines[stops[0] : resume])
    assert "✗ equality: ::error::pwned" in inside
    outside = lines[: stops[0]] + lines[resume + 1 :]
    assert not any(line.lstrip().startswith("::") for line in outside)


def test_secrets_are_redacted_before_text_is_cut() -> None:
    secret = "sk-ant-api03-" + "s" * 40
    reply = "x" * 180 + secret  # the cut at 200 characters falls inside the secret
    bad = case(0, "leaky", [turn(0, "q", reply, metrics=[metric("equality", False, "no")])])
    text = run_console(report([bad]), redact=Redactor([secret]))
    assert "sk-ant" not in text
    assert "x" * 180 + "***" in text


def test_interrupted_run_says_incomplete() -> None:
    text = run_console(interrupted_report())
    assert "SKIP  convfinqa-smoke::never-started  0/2 turns" in text
    assert "— not run: interrupted by SIGTERM" in text
    assert text.splitlines()[-2].endswith("— INCOMPLETE: interrupted by SIGTERM")
    assert "1 not run" in text


def test_strip_control_removes_whole_escape_sequences() -> None:
    assert strip_control("a\x1b[1;31mred\x1b[0m b") == "ared b"
    assert strip_control("t\x1b]0;window title\x07ext") == "text"
    assert strip_control("link \x1b]8;;http://x\x1b\\here\x1b]8;;\x1b\\ end") == "link here end"
    assert strip_control("keep\ttab\nnewline\x00\x7f\x9b") == "keep\ttab\nnewline"
    assert strip_control("unterminated \x1b]not a title") == "unterminated ]not a title"
