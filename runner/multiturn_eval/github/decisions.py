"""What the Action says and does after a run, decided without any I/O (pure).

:mod:`.action` is the thin shell around these: it reads the environment and
the inputs, runs the suites, then asks here what to write to
``$GITHUB_OUTPUT``, the step summary, the annotations and the PR comment,
and performs it. Everything here is tested without a process, a file or a
server (``tests/test_action_decisions.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigIssue
from ..exit_codes import EXIT_CONFIG, EXIT_FAILED, EXIT_OK
from ..reports.escape import md_text as escape
from ..results import Report
from .annotations import rank_annotations
from .commands import Annotation
from .comment import PullRequestRef

OUTPUTS = (
    "total",
    "passed",
    "failed",
    "pass-rate",
    "report-dir",
    "json-report",
    "junit-report",
    "markdown-report",
    "html-report",
    "comment-url",
)
#: output name -> report format
REPORT_OUTPUTS = {
    "json-report": "json",
    "junit-report": "junit",
    "markdown-report": "markdown",
    "html-report": "html",
}

_SKIPPED = "multiturn-eval: comment skipped"


def md_text(text: str) -> str:
    """Untrusted text as inert Markdown (the reports' own escaping)."""
    return escape(text, 500)


# ------------------------------------------------------------------------ outputs


def report_outputs(report: Report | None, written: Mapping[str, str]) -> dict[str, str]:
    """The step's outputs from the report; ``written`` is format -> workspace path."""
    out: dict[str, str] = {}
    if report is not None:
        s = report.summary
        out.update(
            {
                "total": str(s.total),
                "passed": str(s.passed),
                "failed": str(s.failed),
                "pass-rate": "" if s.pass_rate is None else f"{round(s.pass_rate, 4):g}",
            }
        )
    for output, fmt in REPORT_OUTPUTS.items():
        if fmt in written:
            out[output] = written[fmt]
    return out


def final_exit_code(code: int, fail_on_failure: bool) -> int:
    """``fail-on-failure: false`` turns "test cases failed" (1) into a passing step."""
    return EXIT_OK if code == EXIT_FAILED and not fail_on_failure else code


# ------------------------------------------------------------------ step summary


def step_summary(
    report: Report | None,
    markdown: str | None,
    code: int,
    config_issues: Sequence[ConfigIssue],
    report_dir: str,
) -> str:
    """The Markdown appended to ``$GITHUB_STEP_SUMMARY``."""
    if report is None and code == EXIT_CONFIG:
        lines = ["### ❌ multiturn-eval: configuration error (no agent was called)", ""]
        lines += [f"- {md_text(str(issue))}" for issue in config_issues]
        if len(lines) == 2:
            lines.append("See the step's log.")
        return "\n".join(lines) + "\n"
    if report is None:
        return (
            f"### ⚠️ multiturn-eval: no report was written (exit {code})\n\n"
            "The run stopped before writing its reports; the step's log says why.\n"
        )
    if markdown is None:
        return f"### multiturn-eval\n\nNo `summary.md` was written; see `{report_dir}`.\n"
    return markdown


# ------------------------------------------------------------------- annotations


def issue_annotation(issue: ConfigIssue, file: str | None) -> Annotation:
    """A configuration error at its suite line (``file`` relative to the workspace)."""
    where = " ".join(p for p in (issue.test_case, issue.field) if p)
    return Annotation(
        "error",
        f"{where}: {issue.message}" if where else issue.message,
        title="multiturn-eval: configuration error",
        file=file,
        line=issue.line if file else None,
    )


def failure_annotations(
    report: Report, suite_file: Callable[[str], str | None], budget: int, report_dir: str
) -> list[Annotation]:
    """The failing turns (most important first, within ``budget`` errors), then a notice."""
    ranked = rank_annotations(report, suite_file, budget)
    out = list(ranked.annotations) + flaky_annotations(report, suite_file)
    if not report.results or report.summary.failed == 0:
        return out
    shown = len(ranked.annotations)
    more = (
        f"; {ranked.omitted} more failing turn{'s' if ranked.omitted != 1 else ''} "
        "not annotated (GitHub shows 10 per step)"
        if ranked.omitted
        else ""
    )
    out.append(
        Annotation(
            "notice",
            f"{report.summary.failed} of {report.summary.total} test cases failed; "
            f"{shown} failing turn{'s' if shown != 1 else ''} annotated{more}. "
            f"Every failure is in the job summary and in {report_dir}/ "
            "(report.html, junit.xml, report.json).",
            title="multiturn-eval",
        )
    )
    return out


#: warning annotations for flaky test cases that passed the gate (GitHub shows 10 per step)
FLAKY_ANNOTATIONS = 10


def flaky_annotations(
    report: Report, suite_file: Callable[[str], str | None], budget: int = FLAKY_ANNOTATIONS
) -> list[Annotation]:
    """A warning at the first varying turn of each flaky test case that passed the gate.

    (A flaky case that failed the gate already has its error annotation at its
    first failing run's failing turn, which says how many runs passed.)
    """
    from ..reports._view import repeat_reason

    out: list[Annotation] = []
    for case in report.results:
        r = case.repeat
        if r is None or not r.flaky or not case.passed:
            continue
        if len(out) == budget:
            break
        varying = r.varying_turns[0] if r.varying_turns else None
        turn = next((t for t in case.all_turns() if t.turn_index == varying), None)
        title = f"{case.suite_name} › {case.name}"
        if varying is not None:
            title += f" › turn {varying + 1}"
        out.append(
            Annotation(
                "warning",
                f"Flaky (passed the gate): {repeat_reason(case)}",
                title=f"{title} (flaky)",
                file=suite_file(case.written_in),
                line=(turn.line if turn is not None else None) or case.line,
            )
        )
    return out


# ------------------------------------------------------------------------ comment


@dataclass(frozen=True)
class CommentSkip:
    """No comment; say why (a log line, or a notice annotation)."""

    message: str
    as_notice: bool = True


@dataclass(frozen=True)
class CommentPost:
    """Write (or update) the sticky comment with ``body``."""

    body: str
    number: int | None
    """The pull request; None: look it up from ``sha``."""
    sha: str


def decide_comment(
    mode: Literal["auto", "always", "never"],
    pr: PullRequestRef,
    *,
    event_name: str,
    token: bool,
    repository: str,
    fallback_sha: str,
    body: str | None,
) -> CommentSkip | CommentPost | None:
    """Whether and where to comment; None for ``comment: never`` (nothing to say)."""
    if mode == "never":
        return None
    if mode == "auto" and not pr.is_pr_run:
        return CommentSkip(
            f"multiturn-eval: no PR comment ({event_name or 'no'} event is not "
            "a pull request; comment: always also comments on the commit's pull request)",
            as_notice=False,
        )
    if pr.read_only:
        return CommentSkip(
            "Pull request from a fork: its token is read-only, so no PR comment was "
            "written; the results are in the job summary. See the README "
            "('Fork pull requests') for the pull_request + workflow_run split."
        )
    if not token:
        return CommentSkip("github-token is empty: no PR comment was written.")
    if not repository:
        return CommentSkip("GITHUB_REPOSITORY is not set: no PR comment.")
    if body is None:
        return CommentSkip("No summary.md was written, so there is nothing to comment.")
    return CommentPost(body=body, number=pr.number, sha=pr.head_sha or fallback_sha)


def no_pull_request(sha: str) -> Annotation:
    return Annotation(
        "notice",
        f"No open pull request found for commit {sha[:12] or '(unknown)'}: no PR comment.",
        title=_SKIPPED,
    )


def skip_annotation(skip: CommentSkip) -> Annotation:
    return Annotation("notice", skip.message, title=_SKIPPED)


def comment_failed(status: int, message: str, rate_limited: bool) -> Annotation:
    """A comment that could not be written: a notice for permissions, else a warning."""
    if status in (401, 403, 404) and not rate_limited:
        hint = (
            "the token cannot write PR comments. Give the job `permissions: "
            "pull-requests: write` (fork PRs never get it; see the README)"
        )
        return Annotation(
            "notice", f"No PR comment: {message} (HTTP {status}); {hint}.", title=_SKIPPED
        )
    return Annotation(
        "warning",
        f"Could not write the PR comment: {message}",
        title="multiturn-eval: comment failed",
    )


def truncation_note(run_url: str | None) -> str:
    where = f"[the workflow run]({run_url})" if run_url else "the workflow run"
    return (
        "> [!NOTE]\n> This comment was cut to fit GitHub's size limit. Every result is in "
        f"the job summary and the report artifacts of {where}."
    )


def config_error_body(marker: str, issues: Sequence[ConfigIssue], run_url: str | None) -> str:
    """A comment saying the suites did not load (so a stale green comment does not stay)."""
    lines = [marker, "### ❌ multiturn-eval: configuration error", ""]
    lines.append("The suites did not load, so no agent was called:")
    lines.append("")
    lines += [f"- {md_text(str(issue))}" for issue in issues]
    if run_url:
        lines += ["", f"[workflow run]({run_url})"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- baseline


def choose_baseline(candidates: Sequence[tuple[str, Report]]) -> tuple[str, Report, str | None]:
    """The newest of several baseline reports (by ``run.finished_at``), and a note saying so.

    ``finished_at`` is an ISO 8601 UTC timestamp, so text order is time order;
    equal timestamps keep the first path in sorted order.
    """
    assert candidates
    ordered = sorted(candidates, key=lambda item: item[0])
    path, report = max(ordered, key=lambda item: item[1].run.finished_at)
    if len(candidates) == 1:
        return path, report, None
    note = (
        f"baseline: {len(candidates)} reports match; using the newest, {path} "
        f"(finished {report.run.finished_at})"
    )
    return path, report, note
