"""``turn_program_equivalence``: do the agent's tool calls reproduce the gold program's steps?"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import pytest
from examples.convfinqa.graders import turn_program_equivalence

from multiturn_eval import GraderContext, GraderResult, PreviousTurn, ToolInvocation

TABLE = {
    "2009": {"net cash from operating activities": 206588.0},
    "2008": {"net cash from operating activities": 181001.0},
}
PERCENT_CHANGE = "subtract(206588, 181001), divide(#0, 181001)"


def call(name: str, result: Any, error: str | None = None, **args: Any) -> ToolInvocation:
    return ToolInvocation(name=name, args=args, result=result, error=error)


def grade(
    program: str,
    calls: Sequence[ToolInvocation],
    previous: Sequence[PreviousTurn] = (),
    response: str = "",
) -> GraderResult:
    ctx = GraderContext(
        turn_input="what percentage change does this represent?",
        agent_response=response,
        ground_truth=None,
        tool_invocations=tuple(calls),
        retrieval_context=None,
        turn_index=len(previous),
        test_case_name="Single_JKHY/2009/page_28.pdf-3",
        turn_config=MappingProxyType({"turn_program": program}),
        case_context=MappingProxyType({"table": TABLE}),
        previous_turns=tuple(previous),
    )
    return turn_program_equivalence(ctx)


def test_a_correct_tool_sequence_passes() -> None:
    result = grade(
        PERCENT_CHANGE,
        [
            call("subtract", 25587.0, a=206588, b=181001),
            call("divide", 0.14136391511, a=25587, b=181001),
        ],
    )
    assert result.passed is True
    assert result.score == 1.0
    assert result.reason == "all 2 program steps reproduced"
    assert result.details is not None
    assert [s["status"] for s in result.details["steps"]] == ["reproduced", "reproduced"]


def test_a_wrong_tool_sequence_fails_and_says_which_step_and_why() -> None:
    result = grade(
        PERCENT_CHANGE,
        [
            call("subtract", 25587.0, a=206588, b=181001),
            call("divide", 0.12385617461, a=25587, b=206588),  # divided by the wrong year
        ],
    )
    assert result.passed is False
    assert result.score == 0.5
    assert result.reason == (
        "1 of 2 program steps reproduced; missing #1 divide(25587, 181001) = 0.14136: "
        "no tool call returned it (closest: divide(a=25587, b=206588) -> 0.12386)"
    )
    assert result.details is not None
    steps = result.details["steps"]
    assert steps[1] == {
        "step": "#1",
        "expression": "divide(#0, 181001)",
        "operands": ["25587", "181001"],
        "expected": "0.14136",
        "status": "missing",
        "actual": None,
        "closest": "call #2: divide(a=25587, b=206588) -> 0.12386",
    }
    assert result.details["actual_calls"] == [
        "call #1: subtract(a=206588, b=181001) -> 25587",
        "call #2: divide(a=25587, b=206588) -> 0.12386",
    ]


def test_reversed_operands_of_a_subtraction_fail() -> None:
    result = grade(
        "subtract(206588, 181001)", [call("math-subtract", -25587.0, a=181001, b=206588)]
    )
    assert result.passed is False
    assert "closest: math-subtract(a=181001, b=206588) -> -25587" in (result.reason or "")


def test_a_step_computed_in_an_earlier_turn_is_reused() -> None:
    earlier = PreviousTurn(
        turn_index=2,
        input="what is the difference?",
        response="25587",
        tool_invocations=(call("subtract", 25587.0, a=206588, b=181001),),
    )
    result = grade(PERCENT_CHANGE, [call("divide", 0.141364, a=25587, b=181001)], [earlier])
    assert result.passed is True
    assert result.reason == "all 2 program steps reproduced (reused #0 from turn 3 call #1)"
    assert result.details is not None
    assert result.details["steps"][0]["status"] == "reused"
    assert (
        result.details["steps"][0]["actual"]
        == "turn 3 call #1: subtract(a=206588, b=181001) -> 25587"
    )


def test_an_earlier_turns_reply_counts_as_its_result() -> None:
    earlier = PreviousTurn(turn_index=0, input="what is the difference?", response="It is 25,587.")
    result = grade(PERCENT_CHANGE, [call("divide", 0.14136, a=25587, b=181001)], [earlier])
    assert result.passed is True
    assert "reused #0 from turn 1 reply" in (result.reason or "")


def test_without_the_earlier_turn_the_reused_step_is_missing() -> None:
    result = grade(PERCENT_CHANGE, [call("divide", 0.141364, a=25587, b=181001)])
    assert result.passed is False
    assert "missing #0 subtract(206588, 181001) = 25587" in (result.reason or "")


def test_no_tool_calls_at_all_is_said_plainly() -> None:
    result = grade(PERCENT_CHANGE, [], response="0.14136")
    assert result.passed is False
    assert result.score == 0.0
    assert (result.reason or "").startswith(
        "0 of 2 program steps reproduced: the agent made no tool calls this turn; missing #0"
    )


def test_a_failed_call_does_not_count() -> None:
    result = grade(
        "subtract(206588, 181001)", [call("subtract", None, error="ValueError: boom", a=1, b=2)]
    )
    assert result.passed is False
    assert "got no result from its calls" in (result.reason or "")
    assert result.details is not None
    assert result.details["actual_calls"] == [
        "call #1: subtract(a=1, b=2) -> error: ValueError: boom"
    ]


def test_commutative_steps_may_come_in_either_order() -> None:
    result = grade("add(448859, 4087587)", [call("add", 4536446.0, a=4087587, b=448859)])
    assert result.passed is True


def test_a_rounded_intermediate_value_passed_on_still_reproduces_the_step() -> None:
    result = grade(
        "divide(36, 45), multiply(#0, const_100)",
        [call("divide", 0.8, a=36, b=45), call("multiply", 80.0, a=0.8, b=100)],
    )
    assert result.passed is True


def test_a_lookup_turn_needs_a_call_that_returned_the_value() -> None:
    read = call(
        "lookup",
        {"row": "net cash from operating activities", "column": "2009", "value": 206588.0},
        row="net cash",
        column="2009",
    )
    assert grade("206588", [read]).passed is True
    missing = grade("206588", [], response="206588")
    assert missing.passed is False
    assert missing.reason == (
        "expected a tool call returning 206588 (table row 'net cash from operating activities', "
        "column '2009'); the agent made no tool calls this turn"
    )


def test_a_value_only_in_the_text_has_no_tool_step_to_check() -> None:
    result = grade("93000", [], response="93000")
    assert result.passed is True
    assert "not in the table" in (result.reason or "")


def test_yes_no_steps_match_boolean_results() -> None:
    program = "subtract(17.84, 4.11), subtract(60.15, 41.30), greater(#0, #1)"
    calls = [
        call("subtract", 13.73, a=17.84, b=4.11),
        call("subtract", 18.85, a=60.15, b=41.3),
        call("greater", False, a=13.73, b=18.85),
    ]
    assert grade(program, calls).passed is True
    calls[-1] = call("greater", True, a=18.85, b=13.73)
    assert grade(program, calls).passed is False


def test_a_turn_without_turn_program_is_an_error() -> None:
    ctx = GraderContext(
        turn_input="q",
        agent_response="1",
        ground_truth="1",
        tool_invocations=(),
        retrieval_context=None,
        turn_index=0,
        test_case_name="x",
        turn_config=MappingProxyType({}),
        case_context=MappingProxyType({}),
    )
    with pytest.raises(ValueError, match="no 'turn_program' key"):
        turn_program_equivalence(ctx)
