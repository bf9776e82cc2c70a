"""The Action's decisions (``github/decisions.py``) as pure functions: no files, no processes.

Every function of the module: outputs, the exit code with ``fail-on-failure``,
the step summary, annotations (configuration errors, failing turns within the
budget, the closing notice), whether and where to comment, and the notices of
a comment that was skipped or failed.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from multiturn_eval.errors import ConfigIssue
from multiturn_eval.github import decisions as d
from multiturn_eval.github.comment import PullRequestRef
from tests.reports_fixtures import failing_report, report, sample_report

ALL_WRITTEN = {
    "json": "out/report.json",
    "junit": "out/junit.xml",
    "markdown": "out/summary.md",
    "html": "out/report.html",
}


# ------------------------------------------------------------------------ outputs


def test_report_outputs_give_counts_and_every_written_file() -> None:
    rep = failing_report(3)
    out = d.report_outputs(rep, ALL_WRITTEN)
    assert out == {
        "total": "3",
        "passed": "0",
        "failed": "3",
        "pass-rate": "0",
        "json-report": "out/report.json",
        "junit-report": "out/junit.xml",
        "markdown-report": "out/summary.md",
        "html-report": "out/report.html",
    }
    assert set(out) <= set(d.OUTPUTS)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ({}, set()),
        ({"json": "r.json"}, {"json-report"}),
        ({"markdown": "s.md", "html": "r.html"}, {"markdown-report", "html-report"}),
    ],
)
def test_report_outputs_name_only_the_files_written(
    written: dict[str, str], expected: set[str]
) -> None:
    assert set(d.report_outputs(None, written)) == expected


def test_pass_rate_is_rounded_and_empty_without_cases() -> None:
    assert d.report_outputs(report([]), {})["pass-rate"] == ""
    sample = sample_report()
    rate = d.report_outputs(sample, {})["pass-rate"]
    assert sample.summary.pass_rate is not None
    assert float(rate) == round(sample.summary.pass_rate, 4) and len(rate) <= 6


@pytest.mark.parametrize(
    ("code", "fail_on_failure", "final"),
    [
        (0, True, 0),
        (0, False, 0),
        (1, True, 1),
        (1, False, 0),
        (2, False, 2),
        (2, True, 2),
        (3, False, 3),
        (3, True, 3),
    ],
)
def test_final_exit_code_only_forgives_failed_test_cases(
    code: int, fail_on_failure: bool, final: int
) -> None:
    assert d.final_exit_code(code, fail_on_failure) == final


# ------------------------------------------------------------------ step summary


def test_step_summary_is_the_markdown_as_written() -> None:
    assert d.step_summary(sample_report(), "<!-- m -->\nbody\n", 1, [], "out") == (
        "<!-- m -->\nbody\n"
    )


def test_step_summary_of_a_config_error_lists_each_issue_escaped() -> None:
    issues = [
        ConfigIssue("unknown key 'evalutions'", file="evals/a.yaml", line=3),
        ConfigIssue("bad <b>regex</b> @team", test_case='test_cases[0] ("x")', field="turns"),
    ]
    text = d.step_summary(None, None, d.EXIT_CONFIG, issues, "out")
    assert text.startswith("### ❌ multiturn-eval: configuration error (no agent was called)")
    assert "- evals/a.yaml:3: unknown key 'evalutions'" in text
    assert "<b>" not in text and "@team" not in text  # inert Markdown: no markup, no ping


def test_step_summary_of_a_config_error_without_issues_points_at_the_log() -> None:
    assert "See the step's log." in d.step_summary(None, None, d.EXIT_CONFIG, [], "out")


@pytest.mark.parametrize("code", [1, 3])
def test_step_summary_without_a_report_says_none_was_written(code: int) -> None:
    text = d.step_summary(None, None, code, [], "out")
    assert f"no report was written (exit {code})" in text


def test_step_summary_without_markdown_points_at_the_report_dir() -> None:
    assert "see `out/reports`" in d.step_summary(sample_report(), None, 0, [], "out/reports")


# ------------------------------------------------------------------- annotations


def test_issue_annotation_sits_at_the_suite_line() -> None:
    issue = ConfigIssue("must be >= 1", file="x.yaml", line=12, test_case="tc", field="count")
    note = d.issue_annotation(issue, "evals/x.yaml")
    assert (note.level, note.file, note.line) == ("error", "evals/x.yaml", 12)
    assert note.message == "tc count: must be >= 1"
    assert note.title == "multiturn-eval: configuration error"


def test_issue_annotation_outside_the_workspace_has_no_line() -> None:
    note = d.issue_annotation(ConfigIssue("no suite", line=4), None)
    assert (note.file, note.line, note.message) == (None, None, "no suite")


@pytest.mark.parametrize(("failing", "budget"), [(1, 10), (5, 10), (15, 10), (15, 3), (4, 0)])
def test_failure_annotations_stay_within_the_budget_and_end_with_a_notice(
    failing: int, budget: int
) -> None:
    rep = failing_report(failing)
    notes = d.failure_annotations(rep, lambda suite: f"ws/{suite}", budget, "out")
    errors = [n for n in notes if n.level == "error"]
    assert len(errors) == min(failing, budget)
    assert all(n.file and n.file.startswith("ws/") and n.line for n in errors)
    *_, notice = notes
    assert notice.level == "notice"
    assert f"{failing} of {failing} test cases failed" in notice.message
    omitted = failing - len(errors)
    if omitted:
        assert f"{omitted} more failing turn" in notice.message
    else:
        assert "more failing" not in notice.message
    assert "out/" in notice.message


def test_failure_annotations_of_a_passing_run_are_empty() -> None:
    passing = report([])
    assert d.failure_annotations(passing, lambda s: s, 10, "out") == []


# ------------------------------------------------------------------------ comment

PR = PullRequestRef(is_pr_run=True, number=7, head_sha="abc123")
Mode = Literal["auto", "always", "never"]


def decide(mode: Mode = "auto", pr: PullRequestRef = PR, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "event_name": "pull_request",
        "token": True,
        "repository": "octo/calc",
        "fallback_sha": "f" * 40,
        "body": "<!-- m -->\nbody",
    }
    args.update(kw)
    return d.decide_comment(mode, pr, **args)


def test_comment_on_a_pull_request() -> None:
    assert decide() == d.CommentPost(body="<!-- m -->\nbody", number=7, sha="abc123")


def test_never_means_nothing_at_all() -> None:
    assert decide("never") is None
    assert decide("never", PullRequestRef(is_pr_run=False), token=False) is None


def test_auto_on_a_push_is_a_log_line_not_a_notice() -> None:
    skip = decide("auto", PullRequestRef(is_pr_run=False), event_name="push")
    assert isinstance(skip, d.CommentSkip) and skip.as_notice is False
    assert "push event is not a pull request" in skip.message


def test_always_on_a_push_looks_up_the_commits_pull_request() -> None:
    plan = decide("always", PullRequestRef(is_pr_run=False), event_name="push")
    assert plan == d.CommentPost(body="<!-- m -->\nbody", number=None, sha="f" * 40)


@pytest.mark.parametrize(
    ("pr", "kw", "says"),
    [
        (PullRequestRef(is_pr_run=True, number=7, read_only=True), {}, "fork"),
        (PR, {"token": False}, "github-token is empty"),
        (PR, {"repository": ""}, "GITHUB_REPOSITORY is not set"),
        (PR, {"body": None}, "No summary.md was written"),
    ],
)
def test_a_comment_that_cannot_be_written_is_skipped_with_a_notice(
    pr: PullRequestRef, kw: dict[str, Any], says: str
) -> None:
    for mode in ("auto", "always"):
        skip = decide(mode, pr, **kw)
        assert isinstance(skip, d.CommentSkip) and skip.as_notice, skip
        assert says in skip.message


def test_skip_and_no_pull_request_notices() -> None:
    note = d.skip_annotation(d.CommentSkip("why"))
    assert (note.level, note.message, note.title) == (
        "notice",
        "why",
        "multiturn-eval: comment skipped",
    )
    none = d.no_pull_request("0123456789abcdef0123")
    assert none.level == "notice" and "0123456789ab:" in none.message
    assert "(unknown)" in d.no_pull_request("").message


@pytest.mark.parametrize(
    ("status", "rate_limited", "level"),
    [
        (401, False, "notice"),
        (403, False, "notice"),
        (404, False, "notice"),
        (403, True, "warning"),
        (422, False, "warning"),
        (500, False, "warning"),
        (0, False, "warning"),
    ],
)
def test_a_failed_comment_is_a_notice_for_permissions_else_a_warning(
    status: int, rate_limited: bool, level: str
) -> None:
    note = d.comment_failed(status, "Resource not accessible", rate_limited)
    assert note.level == level
    assert "Resource not accessible" in note.message
    if level == "notice":
        assert f"HTTP {status}" in note.message and "pull-requests: write" in note.message


def test_truncation_note_links_the_run_when_known() -> None:
    linked = d.truncation_note("https://github.com/o/r/actions/runs/1")
    assert "[the workflow run](https://github.com/o/r/actions/runs/1)" in linked
    assert linked.startswith("> [!NOTE]")
    assert "](" not in d.truncation_note(None)


def test_config_error_body_starts_with_the_marker_and_lists_the_issues() -> None:
    body = d.config_error_body(
        "<!-- multiturn-eval:abc -->",
        [ConfigIssue("bad [link](https://evil.example)", file="a.yaml", line=2)],
        "https://github.com/o/r/actions/runs/1",
    )
    lines = body.splitlines()
    assert lines[0] == "<!-- multiturn-eval:abc -->"
    assert "no agent was called" in body
    assert "](https://evil.example)" not in body  # the issue text cannot smuggle a link
    assert body.rstrip().endswith("[workflow run](https://github.com/o/r/actions/runs/1)")
    assert "workflow run" not in d.config_error_body("<!-- m -->", [], None)


@pytest.mark.parametrize(
    "hostile",
    ["@octocat please", "<img src=x onerror=alert(1)>", "[x](https://evil.example)", "a\x1b[31mb"],
)
def test_md_text_makes_untrusted_text_inert(hostile: str) -> None:
    text = d.md_text(hostile)
    assert "<img" not in text and "](https://evil" not in text and "\x1b" not in text
    assert "@octocat" not in text


def test_md_text_is_bounded() -> None:
    assert len(d.md_text("x" * 10_000)) < 1_000
