"""Tool assertions beyond "was called" (issue 11 part 2).

forbidden_tools, max_count, tool_order: in_order, args_mode: exact per turn, and
conversation_tools over every call of the conversation; bad configurations as
located config errors; the failures as every report shows them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from multiturn_eval.grading.tool_assertions import check_conversation_tools, check_turn_tools
from multiturn_eval.suite import ConversationTools, Turn
from multiturn_eval.types import ConversationContext, ConversationTurn, ToolInvocation
from tests.conftest import Project


def calls(*specs: tuple[str, dict[str, Any]] | str) -> list[ToolInvocation]:
    out = []
    for spec in specs:
        name, args = (spec, {}) if isinstance(spec, str) else spec
        out.append(ToolInvocation(name=name, args=args))
    return out


def turn(**keys: Any) -> Turn:
    return Turn.model_validate({"input": "q", **keys})


# (turn keys, calls, tools_matched, reason fragment ("" = every detail passed))
TURN_MATRIX: list[tuple[dict[str, Any], list[ToolInvocation], bool | None, str]] = [
    # ---- forbidden_tools: substring, naming the call
    ({"forbidden_tools": ["delete_account"]}, calls("lookup_order"), True, ""),
    (
        {"forbidden_tools": ["delete"]},
        calls("lookup_order", ("delete_account_v2", {"user": "u1"})),
        False,
        "delete: forbidden, but called in this turn 1 time: call #2 delete_account_v2(user='u1')",
    ),
    (
        {"forbidden_tools": ["refund"]},
        calls("issue_refund", "x", "refund_all", "refund_more", "refund_again"),
        False,
        "called in this turn 4 times: call #1 issue_refund(); call #3 refund_all(); call #4 refund_more() and 1 more",
    ),
    ({"forbidden_tools": ["Delete"]}, calls("delete_account"), True, ""),  # case-sensitive
    (
        {"expected_tools": ["lookup"], "forbidden_tools": ["delete"]},
        calls(),
        False,
        "lookup: not called in this turn (tools called: none)",
    ),
    # ---- max_count beside count
    (
        {"expected_tools": [{"name": "refund", "count": 1, "max_count": 1}]},
        calls("issue_refund"),
        True,
        "",
    ),
    (
        {"expected_tools": [{"name": "refund", "count": 1, "max_count": 1}]},
        calls("issue_refund", "lookup", "issue_refund"),
        False,
        "refund: expected exactly 1 matching call in this turn, got 2: call #1, call #3",
    ),
    (
        {"expected_tools": [{"name": "lookup", "count": 1, "max_count": 2}]},
        calls("lookup", "lookup", "lookup"),
        False,
        "lookup: expected at most 2 matching calls in this turn, got 3: call #1, call #2, call #3",
    ),
    (
        {"expected_tools": [{"name": "lookup", "max_count": 2, "args": {"id": 1}}]},
        calls(("lookup", {"id": 1}), ("lookup", {"id": 2}), ("lookup", {"id": 2})),
        True,  # only matching calls count
        "",
    ),
    (
        {"expected_tools": [{"name": "lookup", "count": 2, "max_count": 3}]},
        calls("lookup"),
        False,
        "lookup: expected at least 2 matching calls in this turn, got 1",
    ),
    # ---- tool_order: in_order, other calls in between
    (
        {
            "tool_order": "in_order",
            "expected_tools": ["verify_identity", "lookup_order", "issue_refund"],
        },
        calls("verify_identity", "search", "lookup_order", "log", "issue_refund"),
        True,
        "",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["verify_identity", "issue_refund"]},
        calls("issue_refund", "verify_identity"),
        False,
        "issue_refund: out of order (tool_order: in_order): expected a matching call after verify_identity (call #2), but its matching calls are call #1",
    ),
    (
        {"expected_tools": ["verify_identity", "issue_refund"]},  # tool_order: any (default)
        calls("issue_refund", "verify_identity"),
        True,
        "",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["a", "b", "a"]},
        calls("a", "b", "c", "a"),
        True,
        "",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["a", "b", "a"]},
        calls("a", "a", "b"),
        False,
        "a: out of order (tool_order: in_order): expected a matching call after b (call #3), but its matching calls are call #1, call #2",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["lookup", {"name": "refund", "count": 2}]},
        calls("issue_refund", "lookup", "issue_refund"),
        False,
        "refund: out of order (tool_order: in_order): expected 2 matching calls after lookup (call #2), but its matching calls are call #1, call #3",
    ),
    (
        {
            "tool_order": "in_order",
            "expected_tools": [{"name": "lookup", "args": {"id": 2}}, "refund"],
        },
        calls(("lookup", {"id": 1}), "refund", ("lookup", {"id": 2}), "refund"),
        True,  # greedy on matching calls: lookup(id=2) is call #3, refund call #4
        "",
    ),
    # ---- args_mode: exact
    (
        {"expected_tools": [{"name": "refund", "args": {"order": "A1"}, "args_mode": "exact"}]},
        calls(("issue_refund", {"order": "A1"})),
        True,
        "",
    ),
    (
        {"expected_tools": [{"name": "refund", "args": {"order": "A1"}, "args_mode": "exact"}]},
        calls(("issue_refund", {"order": "A1", "amount": 500, "note": "x"})),
        False,
        "refund: no call matched; closest call #1: unexpected args 'amount', 'note' (args_mode: exact)",
    ),
    (
        {"args_mode": "exact", "expected_tools": [{"name": "refund", "args": {"order": "A1"}}]},
        calls(("issue_refund", {"order": "A1", "amount": 5})),
        False,
        "unexpected arg 'amount' (args_mode: exact)",
    ),
    (
        {
            "args_mode": "exact",
            "expected_tools": [{"name": "refund", "args": {"order": "A1"}, "args_mode": "partial"}],
        },
        calls(("issue_refund", {"order": "A1", "amount": 5})),
        True,  # the expected tool's own setting wins
        "",
    ),
    (
        {"args_mode": "exact", "expected_tools": ["refund"]},
        calls(("issue_refund", {"order": "A1"})),
        True,  # no args: asserted, nothing to be exact about
        "",
    ),
    (
        {"expected_tools": [{"name": "ping", "args": {}, "args_mode": "exact"}]},
        calls(("ping", {"verbose": True})),
        False,
        "unexpected arg 'verbose' (args_mode: exact)",
    ),
    (
        {"expected_tools": [{"name": "refund", "args": {"order": "A1"}, "args_mode": "exact"}]},
        calls(("issue_refund", {"order": "A2"})),
        False,
        "refund: no call matched; closest call #1: arg 'order' expected 'A1', got 'A2'",
    ),
    # ---- nothing asserted
    ({}, calls("x"), None, ""),
]


@pytest.mark.parametrize(("keys", "made", "matched", "fragment"), TURN_MATRIX)
def test_turn_tool_assertions(
    keys: dict[str, Any], made: list[ToolInvocation], matched: bool | None, fragment: str
) -> None:
    tools_matched, details = check_turn_tools(turn(**keys), made)
    assert tools_matched is matched, details
    reasons = "; ".join(d.reason for d in details if d.reason)
    if fragment:
        assert fragment in reasons, reasons
    else:
        assert reasons == ""


def test_the_matrices_are_big_enough() -> None:
    assert len(TURN_MATRIX) + len(CONVERSATION_MATRIX) >= 20


def test_turns_without_the_new_keys_keep_todays_words() -> None:
    matched, details = check_turn_tools(turn(expected_tools=["lookup"]), calls("divide"))
    assert matched is False
    assert details[0].reason == "lookup: not called in this turn (tools called: divide)"


def test_matched_call_index_points_at_the_call_used_in_order() -> None:
    keys = {"tool_order": "in_order", "expected_tools": ["b", "a"], "forbidden_tools": ["zz"]}
    _, details = check_turn_tools(turn(**keys), calls("a", "b", "a"))
    assert [(d.expected_tool, d.matched_call_index, d.reason) for d in details] == [
        ("b", 1, None),
        ("a", 2, None),
        ("not zz", None, None),
    ]


# ----------------------------------------------------------------- conversation level


def conversation(*turns: list[ToolInvocation], skipped: int = 0) -> ConversationContext:
    views = [
        ConversationTurn(
            turn_index=i,
            input="q",
            response="r",
            ground_truth=None,
            tool_invocations=tuple(made),
            passed=True,
            skipped=False,
            errors=(),
            metric_results=(),
            turn_config={},
        )
        for i, made in enumerate(turns)
    ]
    views += [
        ConversationTurn(len(views) + i, "q", None, None, (), False, True, ("skipped: x",), (), {})
        for i in range(skipped)
    ]
    return ConversationContext(
        test_case_name="c",
        case_context={},
        turns=tuple(views),
        session_error="the session died" if skipped else None,
    )


EXACTLY_ONCE = {"expected_tools": [{"name": "issue_refund", "count": 1, "max_count": 1}]}

CONVERSATION_MATRIX: list[tuple[dict[str, Any], ConversationContext, bool, str]] = [
    (
        EXACTLY_ONCE,
        conversation(calls("lookup"), calls("issue_refund")),
        True,
        "1 tool assertion holds over 2 calls",
    ),
    (
        EXACTLY_ONCE,
        conversation(calls("issue_refund"), calls("lookup"), calls("issue_refund")),
        False,
        "issue_refund: expected exactly 1 matching call in the conversation, got 2: call #1 (turn 1), call #3 (turn 3)",
    ),
    (
        EXACTLY_ONCE,
        conversation(calls("lookup"), calls("lookup")),
        False,
        "issue_refund: not called in the conversation (tools called: lookup)",
    ),
    (
        {"forbidden_tools": ["delete_account"]},
        conversation(calls("lookup"), calls("lookup", ("delete_account", {"id": 7}))),
        False,
        "delete_account: forbidden, but called in the conversation 1 time: call #3 (turn 2) delete_account(id=7)",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["verify_identity", "issue_refund"]},
        conversation(calls("verify_identity"), calls("lookup"), calls("issue_refund")),
        True,
        "hold over 3 calls",
    ),
    (
        {"tool_order": "in_order", "expected_tools": ["verify_identity", "issue_refund"]},
        conversation(calls("issue_refund"), calls("verify_identity")),
        False,
        "issue_refund: out of order (tool_order: in_order): expected a matching call after verify_identity (call #2 (turn 2)), but its matching calls are call #1 (turn 1)",
    ),
    (
        {"expected_tools": [{"name": "lookup", "count": 3}]},
        conversation(calls("lookup"), calls("lookup", "lookup")),
        True,
        "",
    ),
    (
        {"expected_tools": [{"name": "lookup", "count": 3}]},
        conversation(calls("lookup"), calls("lookup"), skipped=2),
        False,
        "lookup: expected at least 3 matching calls in the conversation, got 2 (graded on the 2 of 4 turns that ran: the session died)",
    ),
    (
        {"args_mode": "exact", "expected_tools": [{"name": "refund", "args": {"order": "A1"}}]},
        conversation(calls(("issue_refund", {"order": "A1", "amount": 9}))),
        False,
        "closest call #1 (turn 1): unexpected arg 'amount' (args_mode: exact)",
    ),
]


@pytest.mark.parametrize(("keys", "ctx", "passed", "fragment"), CONVERSATION_MATRIX)
def test_conversation_tool_assertions(
    keys: dict[str, Any], ctx: ConversationContext, passed: bool, fragment: str
) -> None:
    result = check_conversation_tools(ConversationTools.model_validate(keys), ctx)
    assert result.passed is passed, result.reason
    assert result.scope == "conversation"
    assert result.metric_name == "conversation_tools"
    assert result.score == (1.0 if passed else 0.0)
    assert fragment in (result.reason or ""), result.reason


# --------------------------------------------------------------------- configuration

AGENT = 'agent: {backend: python, factory: "tests.agents:scripted"}\ntest_cases:\n'

BAD: list[tuple[str, str]] = [
    (
        "  - turns: [{input: q, expected_tools: [{name: refund, count: 2, max_count: 1}]}]\n",
        "suite.yaml:3 test_cases[0] turns[0].expected_tools[0].max_count: is 1, below count (2): no number of calls can satisfy both",
    ),
    (
        "  - turns: [{input: q, expected_tools: [{name: refund, max_count: 0}]}]\n",
        "turns[0].expected_tools[0].max_count: must be >= 1; got 0",
    ),
    (
        "  - turns: [{input: q, tool_order: sorted}]\n",
        "turns[0].tool_order: must be 'any' or 'in_order'; got 'sorted'",
    ),
    (
        "  - turns: [{input: q, args_mode: strict}]\n",
        "turns[0].args_mode: must be 'partial' or 'exact'; got 'strict'",
    ),
    (
        "  - turns: [{input: q, expected_tools: [{name: x, args_mode: full}]}]\n",
        "turns[0].expected_tools[0].args_mode: must be 'partial' or 'exact'; got 'full'",
    ),
    (
        '  - turns: [{input: q, forbidden_tools: [""]}]\n',
        "turns[0].forbidden_tools[0]: ",
    ),
    (
        "  - turns: [{input: q, forbiden_tools: [x]}]\n",
        "turns[0].forbiden_tools: unknown turn key; did you mean 'forbidden_tools'?",
    ),
    (
        "  - turns: [{input: q}]\n    conversation_tools: {expected_tools: [{name: a, count: 3, max_count: 2}]}\n",
        "suite.yaml:4 test_cases[0] conversation_tools.expected_tools[0].max_count: is 2, below count (3)",
    ),
    (
        "  - turns: [{input: q}]\n    conversation_tools: {forbidden: [x]}\n",
        "conversation_tools.forbidden: unknown key; did you mean 'forbidden_tools'?",
    ),
    (
        "  - input: q\n    conversation_tools: {forbidden_tools: [x]}\n",
        "test_cases[0] conversation_tools: needs a conversation",
    ),
]


@pytest.mark.parametrize(("cases", "message"), BAD)
def test_bad_tool_assertions_are_located_config_errors(
    project: Project, cases: str, message: str
) -> None:
    project.write("suite.yaml", AGENT + cases)
    result = project.run("run", "suite.yaml")
    assert result.code == 2
    assert message in result.err, result.err
    assert "Traceback" not in result.err


# ------------------------------------------------------------------------ end to end


def test_tool_assertion_failures_in_every_report(project: Project) -> None:
    script = [
        {
            "response": "done",
            "tools": [
                {"name": "issue_refund", "args": {"order": "A1"}},
                {"name": "verify_identity"},
            ],
        },
        {
            "response": "bye",
            "tools": [
                {"name": "delete_account", "args": {"user": "u1"}},
                {"name": "issue_refund", "args": {"order": "A1"}},
            ],
        },
    ]
    case = {
        "name": "refund",
        "context": {"script": script},
        "conversation_tools": {
            "expected_tools": [{"name": "issue_refund", "count": 1, "max_count": 1}],
            "forbidden_tools": ["delete_account"],
        },
        "turns": [
            {
                "input": "refund",
                "tool_order": "in_order",
                "expected_tools": ["verify_identity", "issue_refund"],
            },
            {"input": "close", "forbidden_tools": ["delete"]},
        ],
    }
    project.write("suite.yaml", AGENT + "  - " + json.dumps(case) + "\n")
    result = project.run("run", "suite.yaml", formats=("json", "junit", "markdown", "html"))
    assert result.code == 1
    data = result.report["results"][0]
    order = "issue_refund: out of order (tool_order: in_order): expected a matching call after verify_identity (call #2), but its matching calls are call #1"
    forbidden = (
        "delete: forbidden, but called in this turn 1 time: call #1 delete_account(user='u1')"
    )
    once = "issue_refund: expected exactly 1 matching call in the conversation, got 2: call #1 (turn 1), call #4 (turn 2)"
    never = "delete_account: forbidden, but called in the conversation 1 time: call #3 (turn 2) delete_account(user='u1')"
    assert data["turns"][0]["tools_matched"] is False
    assert data["turns"][0]["arg_match_details"][1]["reason"] == order
    assert data["turns"][1]["arg_match_details"] == [
        {"expected_tool": "not delete", "matched_call_index": 0, "reason": forbidden}
    ]
    (conv,) = [m for m in data["metric_results"] if m.get("scope") == "conversation"]
    assert conv["reason"] == f"{once}; {never}"
    for text in (order, forbidden, f"conversation conversation_tools: {once}"):
        assert text in result.out
    junit = ET.parse(result.report_dir / "junit.xml").getroot().find(".//failure")
    assert junit is not None
    for text in (order, forbidden, once, never):
        assert text in (junit.text or "")
    md = (result.report_dir / "summary.md").read_text()
    assert "tools: verify&#95;identity, issue&#95;refund" in md
    assert "not delete" in md
    assert "**Conversation check failed:** <b>conversation conversation&#95;tools</b>" in md
    html = (result.report_dir / "report.html").read_text()
    assert "forbidden, but called in the conversation" in html
