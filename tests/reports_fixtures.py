"""Fixed, hand-built reports for the report renderers' tests (no run, no clock).

Everything is deterministic (timestamps, durations, version) so golden files
stay stable. ``UPDATE_GOLDEN=1 pytest tests/test_reports_*.py`` rewrites the
golden files; review the diff before committing it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from multiturn_eval.results import (
    ArgMatchDetail,
    CaseResult,
    MetricResult,
    Report,
    RunInfo,
    TurnResult,
    sum_costs,
)
from multiturn_eval.rollup import case_outcome, rollup_metrics, summarize, turn_passed
from multiturn_eval.types import TokenUsage, ToolInvocation

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"
ARTIFACTS_DIR = Path(__file__).resolve().parent.parent / "test-artifacts"

GITHUB_ENV = {
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/agents",
    "GITHUB_RUN_ID": "4242",
    "GITHUB_RUN_ATTEMPT": "1",
}


def with_github(report: Report, env: Mapping[str, str]) -> Report:
    """``report`` as made in the GitHub Actions run the ``GITHUB_*`` variables of ``env`` name."""
    from multiturn_eval.environment import RunEnvironment
    from multiturn_eval.reports.writer import github_run

    copy = report.model_copy(deep=True)
    copy.run.github = github_run(RunEnvironment.from_mapping(env))
    return copy


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (rewrite it when UPDATE_GOLDEN=1)."""
    path = GOLDEN_DIR / name
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        return
    assert path.exists(), f"no golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"{name} differs from its golden file; if the change is intended, "
        "rerun with UPDATE_GOLDEN=1 and review the diff"
    )


# ------------------------------------------------------------------------- builders


def metric(
    name: str = "numeric",
    passed: bool = True,
    reason: str | None = None,
    *,
    score: float | None = None,
    error: str | None = None,
    kind: str = "standard",
) -> MetricResult:
    return MetricResult(
        metric_name=name,
        kind=kind,  # type: ignore[arg-type]
        score=score if score is not None else (1.0 if passed else 0.0),
        passed=passed,
        reason=reason,
        error=error,
    )


def call(name: str, result: Any = None, error: str | None = None, **args: Any) -> ToolInvocation:
    return ToolInvocation(name=name, args=args, result=result, error=error, duration_ms=1.5)


def turn(
    index: int,
    input: str,
    response: str | None,
    *,
    ground_truth: str | None = None,
    tools: Sequence[ToolInvocation] = (),
    expected_tools: Sequence[tuple[str, int | None, str | None]] = (),
    metrics: Sequence[MetricResult] = (),
    errors: Sequence[str] = (),
    skipped: bool = False,
    infrastructure_error: bool = False,
    line: int | None = None,
    duration_ms: float = 800.0,
    tokens: int = 0,
    cost_usd: float | None = None,
    warnings: Sequence[str] = (),
) -> TurnResult:
    details = [
        ArgMatchDetail(expected_tool=name, matched_call_index=matched, reason=reason)
        for name, matched, reason in expected_tools
    ]
    result = TurnResult(
        turn_index=index,
        line=line,
        input=input,
        response=response,
        ground_truth=ground_truth,
        tool_invocations=list(tools),
        tools_matched=all(d.reason is None for d in details) if details else None,
        arg_match_details=details,
        metric_results=list(metrics),
        passed=False,
        skipped=skipped,
        errors=list(errors),
        warnings=list(warnings),
        infrastructure_error=infrastructure_error,
        duration_ms=duration_ms,
        token_usage=TokenUsage(
            prompt_tokens=tokens * 4 // 5, completion_tokens=tokens - tokens * 4 // 5
        ),
        cost_usd=cost_usd,
    )
    result.passed = turn_passed(result)
    return result


def case(
    index: int,
    name: str,
    turns: Sequence[TurnResult],
    *,
    suite: str = "evals/convfinqa.yaml",
    suite_name: str = "convfinqa-smoke",
    line: int | None = None,
    legacy: bool = False,
    errors: Sequence[str] = (),
    skipped: bool = False,
    tags: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> CaseResult:
    """A test-case result rolled up the way the session does (SPEC 6.4)."""
    turns = list(turns)
    passed = not skipped and not errors and bool(turns) and all(t.passed for t in turns)
    common: dict[str, Any] = {
        "index": index,
        "name": name,
        "suite": suite,
        "suite_name": suite_name,
        "line": line,
        "tags": list(tags),
        "backend": "python",
        "model": None,
        "passed": passed,
        "skipped": skipped,
        "outcome": case_outcome(passed, skipped, turns, errors),
        "errors": list(errors),
        "duration_ms": sum(t.duration_ms for t in turns) + 15.0,
        "token_usage": TokenUsage.sum([t.token_usage for t in turns]),
        "cost_usd": sum_costs(t.cost_usd for t in turns),
        "metric_results": rollup_metrics(turns),
        "warnings": [*warnings, *(w for t in turns for w in t.warnings)],
    }
    if not legacy:
        return CaseResult(**common, turns=turns)
    (only,) = turns
    common["errors"] = [*common["errors"], *only.errors]
    common["metric_results"] = only.metric_results
    if only.infrastructure_error and common["outcome"] == "failed":
        common["outcome"] = "error"
    return CaseResult(**common, **{name: getattr(only, name) for name in LEGACY_FIELDS})


#: what a legacy (one-turn) test case's result shows of its turn, in the case's own fields
LEGACY_FIELDS = (
    "input",
    "response",
    "ground_truth",
    "tool_invocations",
    "tools_matched",
    "arg_match_details",
)


def not_run(index: int, name: str, inputs: Sequence[str], reason: str, **kw: Any) -> CaseResult:
    turns = [turn(i, text, None, skipped=True, duration_ms=0.0) for i, text in enumerate(inputs)]
    return case(index, name, turns, errors=[f"not run: {reason}"], skipped=True, **kw)


def report(
    results: Sequence[CaseResult],
    suites: Sequence[str] | None = None,
    *,
    complete: bool = True,
    stop_reason: str | None = None,
    git_sha: str | None = "0123456789abcdef0123456789abcdef01234567",
) -> Report:
    if suites is None:
        suites = list(dict.fromkeys(c.suite for c in results))
    return Report(
        run=RunInfo(
            suites=list(suites),
            started_at="2025-01-02T03:04:05.000Z",
            finished_at="2025-01-02T03:05:17.250Z",
            duration_ms=72_250.0,
            complete=complete,
            git_sha=git_sha,
            pr_number=7,
            version="0.0.0-test",
            stop_reason=stop_reason,
        ),
        summary=summarize(results),
        results=list(results),
    )


# --------------------------------------------------------------------------- samples

SUPPORT = {"suite": "evals/support.yaml", "suite_name": "support-bot"}


def sample_report() -> Report:
    """A finished run over two suites with every kind of outcome a reader meets."""
    numeric_ok = metric("numeric", True, "expected 206588, got 206588")
    results = [
        case(
            0,
            "Single_JKHY_2009",
            [
                turn(
                    0,
                    "what is the net cash from operating activities in 2009?",
                    "206588",
                    ground_truth="206588",
                    tools=[call("lookup", 206588, row="net cash", year="2009")],
                    expected_tools=[("lookup", 0, None)],
                    metrics=[numeric_ok],
                    line=14,
                    tokens=420,
                    cost_usd=0.0021,
                ),
                turn(
                    1,
                    "what about in 2008?",
                    "181001",
                    ground_truth="181001",
                    metrics=[metric("numeric", True, "expected 181001, got 181001")],
                    line=17,
                    tokens=380,
                    cost_usd=0.0019,
                ),
            ],
            line=12,
            tags=["convfinqa", "smoke"],
        ),
        case(
            1,
            "Double_AAPL_2015",
            [
                turn(
                    0,
                    "what was the revenue in 2015?",
                    "233715",
                    ground_truth="233715",
                    metrics=[metric("numeric", True, "expected 233715, got 233715")],
                    line=23,
                    tokens=400,
                    cost_usd=0.002,
                ),
                turn(
                    1,
                    "and the difference from 2014?",
                    "The difference is 51,000 | roughly. cc @octocat </details>",
                    ground_truth="50920",
                    tools=[call("math-subtract", 51000, a=233715, b="182,795")],
                    expected_tools=[
                        (
                            "subtract",
                            None,
                            "subtract: no call matched; closest call #1: arg 'b' expected "
                            "/182795(\\.0+)?/ (regex), got '182,795'",
                        )
                    ],
                    metrics=[
                        metric(
                            "numeric",
                            False,
                            "expected 50920 (±0.5), got 51 (the number in the reply): off by -50869",
                        )
                    ],
                    line=26,
                    tokens=510,
                    cost_usd=0.0026,
                ),
                turn(
                    2,
                    "what percentage change is that?",
                    "27.9%",
                    ground_truth="27.9",
                    metrics=[metric("numeric", True, "expected 27.9, got 27.9%")],
                    line=33,
                    tokens=300,
                    cost_usd=0.0015,
                ),
            ],
            line=21,
        ),
        case(
            2,
            "Slow_backend",
            [
                turn(
                    0,
                    "what is the total debt?",
                    None,
                    ground_truth="1200",
                    errors=["timed out after 60 s (turn_timeout)"],
                    infrastructure_error=True,
                    line=38,
                    duration_ms=60_000.0,
                ),
                turn(
                    1,
                    "and in 2010?",
                    "1100",
                    ground_truth="1100",
                    metrics=[metric("numeric", True, "expected 1100, got 1100")],
                    line=40,
                    tokens=200,
                ),
            ],
            line=36,
        ),
        case(
            3,
            "Broken_session",
            [
                turn(
                    0,
                    "first question",
                    None,
                    errors=["SessionError: connection reset by peer"],
                    infrastructure_error=True,
                    line=45,
                ),
                turn(
                    1,
                    "second question",
                    None,
                    errors=["SessionError: connection reset by peer"],
                    infrastructure_error=True,
                    line=46,
                ),
                turn(
                    2,
                    "third question",
                    None,
                    errors=[
                        "skipped: session unrecoverable after turn 2: 2 consecutive session errors"
                    ],
                    skipped=True,
                    line=47,
                    duration_ms=0.0,
                ),
            ],
            line=43,
        ),
        case(
            0,
            "refund-policy",
            [
                turn(
                    0,
                    "Can I get a refund after 30 days?",
                    "No. See ![policy](http://evil.example/p.png) or email refunds@example.com",
                    ground_truth="Refunds are possible within 60 days.",
                    metrics=[
                        metric(
                            "equality",
                            False,
                            "expected 'Refunds are possible within 60 days.', got 'No. See …'",
                        )
                    ],
                    line=9,
                    tokens=150,
                )
            ],
            legacy=True,
            line=8,
            **SUPPORT,
        ),
        case(
            1,
            "greeting",
            [
                turn(
                    0,
                    "hello",
                    "Hi! How can I help?",
                    ground_truth="Hi! How can I help?",
                    metrics=[metric("equality", True, "equal")],
                    line=14,
                    tokens=90,
                )
            ],
            legacy=True,
            line=13,
            **SUPPORT,
        ),
        case(
            2,
            "tone-grader",
            [
                turn(
                    0,
                    "I am angry!",
                    "I understand, let me help.",
                    metrics=[
                        metric(
                            "graders.tone:polite",
                            False,
                            None,
                            error="ZeroDivisionError: division by zero",
                            kind="code",
                        )
                    ],
                    line=19,
                    tokens=120,
                )
            ],
            line=17,
            **SUPPORT,
        ),
    ]
    return report(results, ["evals/convfinqa.yaml", "evals/support.yaml"])


def interrupted_report() -> Report:
    """A run stopped by SIGTERM: one case finished, one never started."""
    results = [
        case(
            0,
            "finished",
            [
                turn(
                    0,
                    "q1",
                    "a1",
                    ground_truth="a1",
                    metrics=[metric("equality", True, "equal")],
                    line=6,
                )
            ],
            line=5,
        ),
        not_run(1, "never-started", ["q1", "q2"], "interrupted by SIGTERM", line=9),
    ]
    return report(results, complete=False, stop_reason="interrupted by SIGTERM", git_sha=None)


def failing_report(count: int, *, response: str = "The answer is 41.", turns: int = 3) -> Report:
    """``count`` failing test cases of ``turns`` turns each (the last turn fails)."""
    results = []
    for i in range(count):
        case_turns = [
            turn(
                t,
                f"question {t + 1} of case {i}",
                response if t == turns - 1 else "42",
                ground_truth="42",
                metrics=[
                    metric("numeric", t != turns - 1, "expected 42 (±1e-06), got 41: off by -1")
                ],
                line=10 + i * 8 + t * 2,
                tokens=100,
            )
            for t in range(turns)
        ]
        results.append(case(i, f"case-{i:04d}", case_turns, line=9 + i * 8))
    return report(results)


def large_report(cases: int = 1000, turns: int = 4, fail_every: int = 10) -> Report:
    """A big run: ``cases`` test cases of ``turns`` turns with tool calls; every Nth fails."""
    results = []
    for i in range(cases):
        failing = i % fail_every == 0
        case_turns = []
        for t in range(turns):
            bad = failing and t == turns - 1
            case_turns.append(
                turn(
                    t,
                    f"Turn {t + 1}: what is the value of item {i}-{t} in the filing table?",
                    f"The value of item {i}-{t} is {1000 + t if not bad else 7}. " * 3,
                    ground_truth=str(1000 + t),
                    tools=[call("lookup", 1000 + t, row=f"item {i}-{t}", year="2009")],
                    expected_tools=[("lookup", 0, None)],
                    metrics=[
                        metric(
                            "numeric",
                            not bad,
                            f"expected {1000 + t}, got {7 if bad else 1000 + t}",
                        )
                    ],
                    line=10 + i * 12 + t * 3,
                    tokens=350,
                    cost_usd=0.001,
                )
            )
        results.append(case(i, f"Case_{i:04d}", case_turns, line=9 + i * 12))
    return report(results)
