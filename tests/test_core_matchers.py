"""Acceptance matrix for tool assertions and argument matchers (SPEC 6.3)."""

from __future__ import annotations

from typing import Any

import pytest

from multiturn_eval.grading.matchers import (
    check_tool,
    check_tools,
    fuzzy_equal,
    literal_equal,
    match_value,
)
from multiturn_eval.suite import ExpectedTool
from multiturn_eval.types import ToolInvocation


def tool(spec: Any) -> ExpectedTool:
    return ExpectedTool.model_validate({"name": spec} if isinstance(spec, str) else spec)


def calls(*items: tuple[str, dict[str, Any]]) -> list[ToolInvocation]:
    return [ToolInvocation(name=name, args=args) for name, args in items]


def matcher(value: Any) -> Any:
    """A matcher as the suite loader builds it."""
    return ExpectedTool.model_validate({"name": "t", "args": {"x": value}}).args["x"]  # type: ignore[index]


# (matcher as written in YAML, actual argument value, expected verdict)
MATCHER_CASES: list[tuple[Any, Any, bool]] = [
    # literal: int/float equivalence, bool is not a number, no string normalisation
    (206588, 206588.0, True),
    (206588.0, 206588, True),
    (0.1, 0.1, True),
    (1, True, False),
    (True, 1, False),
    (True, True, True),
    (False, 0.0, False),
    ("206588", 206588, False),
    (206588, "206588", False),
    ("Paris", "paris", False),
    ("Paris", " Paris", False),
    (None, None, True),
    ([1, 2], [1.0, 2.0], True),
    ([1, 2], [2, 1], False),
    ({"y": 1}, {"y": 1.0}, True),
    ({"y": 1}, {"y": 1, "z": 2}, False),
    ({"y": [True]}, {"y": [1]}, False),
    # fuzzy: text normalisation, separators, percent, numbers
    ({"fuzzy": "206,588"}, 206588, True),
    ({"fuzzy": "206588"}, "206_588", True),
    ({"fuzzy": "206588"}, "206\u202f588", True),
    ({"fuzzy": "14.1%"}, 0.141, True),
    ({"fuzzy": "0.141"}, "14.1 %", True),
    ({"fuzzy": "14.1%"}, 14.1, False),
    ({"fuzzy": "Net  Income "}, "net income", True),
    ({"fuzzy": "net income"}, "net-income", False),
    ({"fuzzy": "25587"}, 25587.0, True),
    ({"fuzzy": "25587"}, 25588, False),
    ({"fuzzy": "-5"}, -5.0, True),
    ({"fuzzy": "true"}, True, True),
    # regex: anchored full match on str(actual)
    ({"regex": r"181001(\.0+)?"}, 181001, True),
    ({"regex": r"181001(\.0+)?"}, 181001.0, True),
    ({"regex": r"181001(\.0+)?"}, 1181001, False),
    ({"regex": r"181001(\.0+)?"}, "181001.5", False),
    ({"regex": "pa.*"}, "paris", True),
    ({"regex": "pa"}, "paris", False),
    ({"regex": "(?i)PARIS"}, "paris", True),
]


@pytest.mark.parametrize(("written", "actual", "verdict"), MATCHER_CASES)
def test_argument_matcher(written: Any, actual: Any, verdict: bool) -> None:
    assert match_value(matcher(written), actual) is verdict


def test_matrix_is_large_enough() -> None:
    assert len(MATCHER_CASES) + len(ASSERTION_CASES) >= 30


# (expected tool, calls in this turn, matched?, reason fragment when not)
ASSERTION_CASES: list[tuple[Any, list[ToolInvocation], bool, str | None]] = [
    ("subtract", calls(("math-subtract", {})), True, None),
    (
        "subtract",
        calls(("Subtract", {})),
        False,
        "not called in this turn (tools called: Subtract)",
    ),
    ("subtract", [], False, "not called in this turn (tools called: none)"),
    (
        {"name": "subtract", "args": {"a": 206588, "b": 181001}},
        calls(("subtract", {"a": 206588.0, "b": 181001, "extra": "ignored"})),
        True,
        None,
    ),
    (
        {"name": "subtract", "args": {"a": 206588, "b": 181001}},
        calls(("subtract", {"a": 206588, "b": 180000})),
        False,
        "subtract: no call matched; closest call #1: arg 'b' expected 181001, got 180000",
    ),
    (
        {"name": "subtract", "args": {"b": 1}},
        calls(("subtract", {"a": 1})),
        False,
        "arg 'b' missing (expected 1)",
    ),
    (
        {"name": "subtract", "args": {"a": 1, "b": 2}},
        calls(
            ("subtract", {"a": 1, "b": 9}),
            ("subtract", {"a": 5, "b": 9}),
            ("subtract", {"a": 1, "b": 2}),
        ),
        True,
        None,
    ),
    (
        # one single call must satisfy every asserted argument
        {"name": "subtract", "args": {"a": 1, "b": 2}},
        calls(("subtract", {"a": 1, "b": 9}), ("subtract", {"a": 9, "b": 2})),
        False,
        "no call matched",
    ),
    ({"name": "lookup", "count": 2}, calls(("lookup", {}), ("lookup", {})), True, None),
    (
        {"name": "lookup", "count": 3},
        calls(("lookup", {}), ("lookup", {})),
        False,
        "lookup: expected at least 3 matching calls, got 2",
    ),
    (
        {"name": "divide", "args": {"b": {"regex": r"181001(\.0+)?"}}},
        calls(("divide", {"b": "181001.00"})),
        True,
        None,
    ),
]


@pytest.mark.parametrize(("spec", "turn_calls", "matched", "reason"), ASSERTION_CASES)
def test_tool_assertion(
    spec: Any, turn_calls: list[ToolInvocation], matched: bool, reason: str | None
) -> None:
    detail = check_tool(tool(spec), turn_calls)
    assert (detail.reason is None) is matched
    if reason is not None:
        assert detail.reason is not None and reason in detail.reason
    if matched:
        assert detail.matched_call_index is not None


def test_closest_call_is_the_one_with_fewest_mismatches() -> None:
    detail = check_tool(
        tool({"name": "subtract", "args": {"a": 1, "b": 2}}),
        calls(("subtract", {"a": 7, "b": 8}), ("subtract", {"a": 1, "b": 3})),
    )
    assert detail.reason == "subtract: no call matched; closest call #2: arg 'b' expected 2, got 3"


def test_no_expected_tools_means_nothing_asserted() -> None:
    assert check_tools([], calls(("x", {}))) == (None, [])


def test_every_expected_tool_is_reported() -> None:
    matched, details = check_tools([tool("lookup"), tool("divide")], calls(("lookup", {})))
    assert matched is False
    assert [d.reason is None for d in details] == [True, False]


def test_literal_and_fuzzy_helpers_are_symmetric_where_they_should_be() -> None:
    assert literal_equal(1, 1.0) and literal_equal(1.0, 1)
    assert fuzzy_equal("1,000", "1000") and fuzzy_equal("1000", "1,000")
