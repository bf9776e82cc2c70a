"""The simulated user's public API: ``UserTurn``, ``SimulatorContext``, ``ConversationMessage``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest

import multiturn_eval
from multiturn_eval import ConversationMessage, SimulatorContext, ToolInvocation, UserTurn
from multiturn_eval.simulation import simulator_context


def test_exported_from_the_package() -> None:
    for name in ("SimulatorContext", "ConversationMessage", "UserTurn"):
        assert name in multiturn_eval.__all__
        assert getattr(multiturn_eval, name) is getattr(multiturn_eval.types, name)


def test_the_public_types_import_without_pydantic_models_of_the_runner() -> None:
    # `from multiturn_eval import UserTurn` in a fresh interpreter: no SDK, no loader
    code = (
        "import sys; from multiturn_eval import UserTurn, SimulatorContext, ConversationMessage; "
        "print(sorted(m for m in ('anthropic', 'openai', 'multiturn_eval.loader', "
        "'multiturn_eval.simulation') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"message": "hi"},
        {"message": "thanks!", "done": True, "outcome": "goal_met", "reason": "refunded"},
        {"done": True, "outcome": "gave_up", "reason": "refused twice"},
        {"done": True, "outcome": "out_of_scope"},
        {"message": "hi", "reason": "a note nobody reads"},
    ],
)
def test_user_turn_good_combinations(kwargs: dict[str, Any]) -> None:
    turn = UserTurn(**kwargs)
    for key, value in kwargs.items():
        assert getattr(turn, key) == value


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({}, ValueError, "has no message and does not end the conversation"),
        ({"done": True}, ValueError, "needs an outcome"),
        ({"message": "x", "done": True}, ValueError, "needs an outcome"),
        ({"message": "x", "outcome": "goal_met"}, ValueError, "give it with done=True"),
        ({"done": True, "outcome": "won"}, ValueError, "must be one of 'goal_met', 'gave_up'"),
        ({"message": ""}, ValueError, "message is empty"),
        ({"message": "  \n"}, ValueError, "message is empty"),
        ({"message": 42}, TypeError, "message must be a str or None, got int"),
        ({"message": b"hi"}, TypeError, "got bytes"),
        ({"message": "x", "done": 1}, TypeError, "done must be True or False, got 1"),
        ({"message": "x", "done": "yes"}, TypeError, "done must be True or False"),
        ({"message": "x", "reason": 3}, TypeError, "reason must be a str or None"),
        ({"done": True, "outcome": ["goal_met"]}, ValueError, "must be one of"),
    ],
)
def test_user_turn_bad_combinations_say_what_is_wrong(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        UserTurn(**kwargs)


def test_user_turn_takes_keywords_only_and_is_frozen() -> None:
    with pytest.raises(TypeError):
        UserTurn("hi")  # type: ignore[misc]
    turn = UserTurn(message="hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.done = True  # type: ignore[misc]


def test_simulator_context_is_frozen_and_read_only() -> None:
    known = {"order_id": "W123", "nested": {"a": [1]}}
    context = {"give_up_after": 3}
    ctx = simulator_context(
        goal="refund",
        persona="terse",
        known=known,
        unknown=["the card's last four digits"],
        test_case_name="refund-case",
        context=context,
        run_index=2,
    )
    assert isinstance(ctx, SimulatorContext)
    assert (ctx.goal, ctx.persona, ctx.test_case_name, ctx.run_index) == (
        "refund",
        "terse",
        "refund-case",
        2,
    )
    assert ctx.unknown == ("the card's last four digits",)
    assert ctx.known["order_id"] == "W123"
    with pytest.raises(TypeError):
        ctx.known["order_id"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        ctx.context["give_up_after"] = 9  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.goal = "other"  # type: ignore[misc]
    # a private copy: changing the suite's data later changes nothing here
    known["nested"]["a"].append(2)  # type: ignore[index]
    assert ctx.known["nested"] == {"a": [1]}


def test_conversation_message_is_frozen() -> None:
    call = ToolInvocation(name="issue_refund", args={"order_id": "W123"})
    message = ConversationMessage(role="agent", text="done", tool_invocations=(call,))
    assert message.tool_invocations[0].name == "issue_refund"
    assert message.error is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "x"  # type: ignore[misc]
