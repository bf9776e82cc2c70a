"""Evaluator matrix (SPEC 6.3): equality flags, numeric tolerances, percent, separators."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from multiturn_eval.grading.evaluators import evaluate_standard, run_code_grader
from multiturn_eval.suite import CodeEvaluation, StandardEvaluation
from multiturn_eval.types import GraderContext
from tests import graders


def spec(**kwargs: Any) -> StandardEvaluation:
    return StandardEvaluation.model_validate({"type": "standard", **kwargs})


# (evaluation settings, response, ground truth, passes?)
EVALUATOR_CASES: list[tuple[dict[str, Any], str, str, bool]] = [
    ({"metric": "equality"}, "hi there", "hi there", True),
    ({"metric": "equality"}, "Hi there", "hi there", False),
    ({"metric": "equality", "case_insensitive": True}, "HI THERE", "hi there", True),
    ({"metric": "equality"}, " hi  there ", "hi there", False),
    ({"metric": "equality", "strip_whitespace": True}, " hi \n there ", "hi there", True),
    ({"metric": "equality"}, "hi there!", "hi there", False),
    ({"metric": "equality", "strip_punctuation": True}, "hi, there!", "hi there", True),
    ({"metric": "numeric"}, "25587", "25587", True),
    ({"metric": "numeric"}, "25587.0000001", "25587", True),  # within the 1e-6 default
    ({"metric": "numeric"}, "25587.01", "25587", False),
    (
        {"metric": "numeric", "absolute_tolerance": 0.5},
        "25587.5",
        "25587",
        True,
    ),  # boundary is inclusive
    ({"metric": "numeric", "absolute_tolerance": 0.5}, "25587.51", "25587", False),
    ({"metric": "numeric", "relative_tolerance": 0.01}, "101", "100", True),
    ({"metric": "numeric", "relative_tolerance": 0.01}, "101.5", "100", False),
    ({"metric": "numeric", "relative_tolerance": 0.01}, "-101", "-100", True),
    ({"metric": "numeric"}, "-3.5", "-3.5", True),
    ({"metric": "numeric"}, "3.5", "-3.5", False),
    ({"metric": "numeric"}, "The difference is 25587.", "25587", True),
    ({"metric": "numeric"}, "In 2009 it was 206588 and in 2008 181001, so 25587.", "25587", True),
    ({"metric": "numeric"}, "I cannot tell.", "25587", False),
    ({"metric": "numeric"}, "The difference is 25,587.", "25587", False),
    (
        {"metric": "numeric", "accept_thousands_separators": True},
        "The difference is 25,587.",
        "25587",
        True,
    ),
    ({"metric": "numeric", "accept_thousands_separators": True}, "206,588", "206588", True),
    (
        {"metric": "numeric", "accept_percent": True, "absolute_tolerance": 0.001},
        "14.1%",
        "0.14136",
        True,
    ),
    (
        {"metric": "numeric", "accept_percent": True, "absolute_tolerance": 0.001},
        "0.141",
        "14.1%",
        True,
    ),
    (
        {"metric": "numeric", "accept_percent": True, "absolute_tolerance": 0.05},
        "14.14",
        "0.14136",
        True,
    ),
    ({"metric": "numeric", "absolute_tolerance": 0.001}, "14.1%", "0.14136", False),
    (
        {"metric": "numeric", "accept_percent": True, "absolute_tolerance": 0.001},
        "15.1%",
        "0.14136",
        False,
    ),
    ({"metric": "numeric"}, "−7", "-7", True),  # unicode minus
    ({"metric": "numeric"}, "$1,000", "1000", False),
    ({"metric": "numeric", "accept_thousands_separators": True}, "$1,000", "1000", True),
]


@pytest.mark.parametrize(("settings", "response", "truth", "passes"), EVALUATOR_CASES)
def test_evaluator(settings: dict[str, Any], response: str, truth: str, passes: bool) -> None:
    result = evaluate_standard(spec(**settings), response, truth)
    assert result.passed is passes
    assert result.score == (1.0 if passes else 0.0)
    assert result.reason  # every verdict says why


def test_numeric_says_which_number_it_used() -> None:
    result = evaluate_standard(
        spec(metric="numeric"), "In 2009 it was 206588, so the change is 25000", "25587"
    )
    assert not result.passed
    assert (
        result.reason
        == "expected 25587 (±1e-06), got 25000 (the last of 3 numbers in the reply): off by -587"
    )
    assert result.details is not None and result.details["used"] == "25000"


def test_numeric_explains_thousands_separators() -> None:
    result = evaluate_standard(spec(metric="numeric"), "It is 25,587.", "25587")
    assert result.reason is not None
    assert "accept_thousands_separators: true" in result.reason


def test_numeric_no_number() -> None:
    result = evaluate_standard(spec(metric="numeric"), "I cannot tell.", "25587")
    assert result.reason == "no number in the reply 'I cannot tell.'; expected 25587"


def test_equality_hints_at_the_flag_that_would_pass() -> None:
    result = evaluate_standard(spec(metric="equality"), "Hi There", "hi there")
    assert result.reason is not None
    assert "first difference at character 1" in result.reason
    assert "case_insensitive: true" in result.reason


def _ctx(response: str = "ok", truth: str | None = "ok") -> GraderContext:
    return GraderContext(
        turn_input="q",
        agent_response=response,
        ground_truth=truth,
        tool_invocations=(),
        retrieval_context=None,
        turn_index=0,
        test_case_name="t",
        turn_config={},
        case_context={},
    )


def grade(fn: Any, threshold: float | None = None, response: str = "ok") -> Any:
    evaluation = CodeEvaluation(type="code", grader="tests.graders:x", threshold=threshold)
    return asyncio.run(run_code_grader(evaluation, fn, _ctx(response)))


def test_code_grader_forms() -> None:
    assert grade(graders.exact).passed is True
    assert grade(graders.exact, response="no").passed is False
    assert grade(graders.half).passed is True  # 0.5 >= default 0.5
    assert grade(graders.half, threshold=0.6).passed is False
    result = grade(graders.explains, response="nope")
    assert (result.passed, result.reason, result.details) == (
        False,
        "does not start with ok",
        {"turn": 0},
    )
    assert grade(graders.async_grader).passed is True


def test_code_grader_failures_are_contained() -> None:
    raised = grade(graders.boom)
    assert (raised.passed, raised.error) == (False, "KeyError: 'missing'")
    wrong = grade(graders.bad_type)
    assert wrong.passed is False and "expected GraderResult, bool or a float" in wrong.error
    out_of_range = grade(lambda ctx: 1.5)
    assert out_of_range.passed is False and "[0, 1]" in out_of_range.error
