"""conversation_evaluations: run once per test case on the whole conversation (issue 11 part 3)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest

from multiturn_eval import ConversationContext, ConversationTurn
from tests import conversation_graders
from tests.conftest import CliResult, Project

AGENT = 'agent: {backend: python, factory: "tests.agents:scripted"}\n'


@pytest.fixture(autouse=True)
def _clear_seen() -> Iterator[None]:
    conversation_graders.SEEN.clear()
    yield
    conversation_graders.SEEN.clear()


def suite(case: dict[str, Any], *, execution: str = "") -> str:
    return AGENT + execution + "test_cases:\n  - " + json.dumps(case) + "\n"


def grader(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "code", "grader": f"tests.conversation_graders:{name}", **extra}


def run(project: Project, text: str, *formats: str) -> CliResult:
    project.write("suite.yaml", text)
    return project.run("run", "suite.yaml", formats=formats or ("json",))


def conversation_metrics(result: CliResult) -> list[dict[str, Any]]:
    case = result.report["results"][0]
    return [m for m in case["metric_results"] if m.get("scope") == "conversation"]


THREE_TURNS = {
    "name": "three",
    "context": {
        "tier": "gold",
        "script": [
            {"response": "10", "tools": [{"name": "lookup", "args": {"id": 1}}]},
            {"response": "wrong"},
            {"response": "30"},
        ],
    },
    "turns": [
        {"input": "a", "ground_truth": "10", "mood": "calm"},
        {"input": "b", "ground_truth": "20"},
        {"input": "c", "ground_truth": "30"},
    ],
    "evaluations": [{"type": "standard", "metric": "equality"}],
}


def test_grader_sees_every_turn_with_results_and_the_case_context(project: Project) -> None:
    result = run(project, suite({**THREE_TURNS, "conversation_evaluations": [grader("record")]}))
    assert result.code == 1  # turn 2 fails; the conversation check passes
    (ctx,) = conversation_graders.SEEN
    assert isinstance(ctx, ConversationContext)
    assert ctx.test_case_name == "three"
    assert dict(ctx.case_context)["tier"] == "gold"
    assert ctx.session_error is None
    assert [t.turn_index for t in ctx.turns] == [0, 1, 2]
    assert all(isinstance(t, ConversationTurn) for t in ctx.turns)
    assert [t.input for t in ctx.turns] == ["a", "b", "c"]
    assert [t.response for t in ctx.turns] == ["10", "wrong", "30"]
    assert [t.ground_truth for t in ctx.turns] == ["10", "20", "30"]
    assert [t.passed for t in ctx.turns] == [True, False, True]
    assert [m.passed for m in ctx.turns[1].metric_results] == [False]
    assert "expected '20'" in (ctx.turns[1].metric_results[0].reason or "")
    assert ctx.turns[0].tool_invocations[0].name == "lookup"
    assert [c.name for c in ctx.tool_invocations] == ["lookup"]
    assert dict(ctx.turns[0].turn_config) == {"mood": "calm"}
    with pytest.raises(AttributeError):
        ctx.turns = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        ctx.case_context["tier"] = "x"  # type: ignore[index]
    (metric,) = conversation_metrics(result)
    assert metric == {
        "metric_name": "record",
        "kind": "code",
        "score": 1.0,
        "threshold": None,
        "passed": True,
        "error": None,
        "reason": "saw 3 turns",
        "details": None,
        "scope": "conversation",
    }


def test_grader_sees_failed_and_skipped_turns_when_the_session_dies(project: Project) -> None:
    case = {
        "name": "dies",
        "context": {"script": [{"response": "ok"}, {"raise": "dead"}]},
        "turns": [{"input": "a"}, {"input": "b"}, {"input": "c"}],
        "conversation_evaluations": [grader("record"), grader("all_replied")],
    }
    result = run(project, suite(case))
    assert result.code == 1
    (ctx,) = conversation_graders.SEEN
    assert [(t.skipped, t.passed, t.response) for t in ctx.turns] == [
        (False, True, "ok"),
        (False, False, None),
        (True, False, None),
    ]
    assert "the agent process exited" in ctx.turns[1].errors[0]
    assert ctx.turns[2].errors[0].startswith("skipped: session unrecoverable after turn 2")
    assert [t.turn_index for t in ctx.turns_run] == [0, 1]
    assert ctx.session_error is not None
    assert "session unrecoverable after turn 2" in ctx.session_error
    record, replied = conversation_metrics(result)
    assert record["passed"] is True
    assert "graded on the 2 of 3 turns that ran" in record["reason"]
    assert record["details"] == {"turns_run": 2, "turns_total": 3}
    assert replied["passed"] is False
    assert replied["reason"].startswith("turns without a reply: [2, 3]")


def test_a_session_that_never_opened_is_still_graded_and_says_so(project: Project) -> None:
    case = {
        "context": {"factory_raises": True},
        "turns": [{"input": "a"}],
        "conversation_evaluations": [grader("record")],
    }
    result = run(project, suite(case))
    (ctx,) = conversation_graders.SEEN
    assert ctx.turns[0].skipped
    assert ctx.session_error is not None
    assert ctx.session_error == "could not open a session: RuntimeError: cannot start the agent"
    (metric,) = conversation_metrics(result)
    assert "graded on the 0 of 1 turns that ran: could not open a session" in metric["reason"]


def test_a_failed_conversation_check_fails_a_case_whose_turns_all_pass(project: Project) -> None:
    case = {
        "name": "rude",
        "context": {"script": [{"response": "fine"}, {"response": "that is a stupid question"}]},
        "turns": [{"input": "a"}, {"input": "b"}],
        "conversation_evaluations": [grader("polite")],
    }
    result = run(project, suite(case), "json", "junit", "markdown", "html")
    assert result.code == 1
    case_result = result.report["results"][0]
    assert case_result["passed"] is False
    assert case_result["outcome"] == "failed"
    assert all(t["passed"] for t in case_result["turns"])
    (metric,) = conversation_metrics(result)
    assert metric["reason"] == "rude on turn(s) [2]"
    assert metric["details"] == {"rude_turns": [2]}
    summary = result.report["summary"]
    assert summary["metrics"]["polite"] == {"mean_score": 0.0, "passed": 0, "failed": 1}
    assert summary["failed"] == 1
    wanted = "conversation polite: rude on turn(s) [2]"
    # every report shows the failed conversation check with its reason
    assert wanted in result.out
    junit = ET.parse(result.report_dir / "junit.xml").getroot()
    failure = junit.find(".//testcase/failure")
    assert failure is not None
    assert failure.get("message") == wanted
    assert wanted in (failure.text or "")
    summary_md = (result.report_dir / "summary.md").read_text()
    assert (
        "**Conversation check failed:** <b>conversation polite</b>: rude on turn(s) &#91;2&#93;"
        in summary_md
    )
    html = (result.report_dir / "report.html").read_text()
    assert "conversation polite: rude on turn(s) [2]" in html


def test_conversation_metrics_follow_the_rollup_and_count_in_the_summary(project: Project) -> None:
    result = run(project, suite({**THREE_TURNS, "conversation_evaluations": [grader("polite")]}))
    names = [
        (m["metric_name"], m.get("scope")) for m in result.report["results"][0]["metric_results"]
    ]
    assert names == [("equality", None), ("polite", "conversation")]
    metrics = result.report["summary"]["metrics"]
    assert set(metrics) == {"equality", "polite"}
    assert metrics["polite"]["passed"] == 1


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("boom", "RuntimeError: conversation grader broke"),
        ("garbage", "grader returned str 'yes'; expected GraderResult, bool or a float in [0, 1]"),
        ("hangs", "grader did not finish within 0.2 s (grader_timeout)"),
        ("hangs_async", "grader did not finish within 0.2 s (grader_timeout)"),
    ],
)
def test_a_grader_that_raises_or_hangs_is_a_metric_error_on_that_case_only(
    project: Project, name: str, error: str
) -> None:
    bad = {
        "name": "bad",
        "context": {"script": [{"response": "ok"}]},
        "turns": [{"input": "a"}],
        "conversation_evaluations": [grader(name)],
    }
    good = {
        "name": "good",
        "context": {"script": [{"response": "ok"}]},
        "turns": [{"input": "a"}],
        "conversation_evaluations": [grader("polite")],
    }
    text = (
        AGENT
        + "execution: {grader_timeout: 0.2}\n"
        + "test_cases:\n  - "
        + json.dumps(bad)
        + "\n  - "
        + json.dumps(good)
        + "\n"
    )
    result = run(project, text)
    assert result.code == 1
    bad_result, good_result = result.report["results"]
    (metric,) = [m for m in bad_result["metric_results"] if m.get("scope")]
    assert metric["passed"] is False
    assert metric["score"] is None
    assert metric["error"] == error
    assert bad_result["outcome"] == "failed"
    assert bad_result["turns"][0]["passed"] is True
    assert good_result["passed"] is True
    assert f"conversation {name}: error: {error}" in result.out
    if name == "hangs":
        assert any("still running after its timeout" in w for w in bad_result["warnings"])


def test_a_grader_cannot_change_the_report(project: Project) -> None:
    case = {
        "context": {"script": [{"response": "no", "tools": [{"name": "lookup"}]}]},
        "turns": [{"input": "a", "ground_truth": "yes"}],
        "evaluations": [{"type": "standard", "metric": "equality"}],
        "conversation_evaluations": [grader("mutate")],
    }
    result = run(project, suite(case))
    turn = result.report["results"][0]["turns"][0]
    assert turn["metric_results"][0]["passed"] is False
    assert turn["tool_invocations"][0]["name"] == "lookup"


def test_disabled_conversation_graders_do_not_run(project: Project) -> None:
    case = {
        "context": {"script": [{"response": "ok"}]},
        "turns": [{"input": "a"}],
        "conversation_evaluations": [grader("record", enabled=False)],
    }
    result = run(project, suite(case))
    assert result.code == 0
    assert conversation_graders.SEEN == []
    assert conversation_metrics(result) == []


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            {"input": "a", "conversation_evaluations": [grader("record")]},
            "suite.yaml:3 test_cases[0] conversation_evaluations: needs a conversation",
        ),
        (
            {
                "turns": [{"input": "a"}],
                "conversation_evaluations": [{"type": "standard", "metric": "equality"}],
            },
            "conversation_evaluations[0].type: a conversation evaluation is a code grader",
        ),
        (
            {"turns": [{"input": "a"}], "conversation_evaluations": [grader("nope")]},
            "conversation_evaluations[0].grader: ",
        ),
        (
            {
                "turns": [{"input": "a"}],
                "conversation_evaluations": [grader("record"), grader("record")],
            },
            "conversation_evaluations[1].name: metric name 'record' is already used",
        ),
        (
            {
                "turns": [{"input": "a", "evaluations": [grader("record")]}],
                "conversation_evaluations": [grader("record")],
            },
            "conversation_evaluations[0].name: metric name 'record' is also a per-turn metric",
        ),
        (
            {
                "turns": [{"input": "a"}],
                "conversation_tools": {"forbidden_tools": ["x"]},
                "conversation_evaluations": [{**grader("record"), "name": "conversation_tools"}],
            },
            "conversation_evaluations[0].name: metric name 'conversation_tools' is also a "
            "per-turn metric (or conversation_tools)",
        ),
    ],
)
def test_bad_conversation_evaluations_are_located_config_errors(
    project: Project, case: dict[str, Any], message: str
) -> None:
    result = run(project, suite(case))
    assert result.code == 2
    assert message in result.err, result.err


def test_the_github_annotation_of_a_case_failing_only_a_conversation_check(
    project: Project,
) -> None:
    from multiturn_eval.github.annotations import rank_annotations
    from multiturn_eval.results import Report

    case = {
        "name": "rude",
        "context": {"script": [{"response": "that is a stupid question"}]},
        "turns": [{"input": "a"}],
        "conversation_evaluations": [grader("polite")],
    }
    result = run(project, suite(case))
    report = Report.model_validate(result.report)
    (annotation,) = rank_annotations(report, lambda path: path).annotations
    assert annotation.message == "Test case failed: conversation polite: rude on turn(s) [1]"
