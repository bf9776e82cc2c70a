"""The support example's offline rule-based customer, against the support example's own bot.

The customer (``examples/support/customer.py``) is a python simulator; the bot
(``examples/support/agent.py``) is the offline agent. They talk through the
conversation driver, the customer created by its factory exactly as a run creates it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

from examples.support import agent as bot
from examples.support import customer

from multiturn_eval import CaseContext, ConversationMessage, UserTurn
from multiturn_eval.simulation import (
    AgentAnswer,
    Outgoing,
    PythonSimulator,
    SimulationRun,
    simulate,
    simulator_context,
)

ADA = {"order_id": "A1001", "customer_id": "C100", "card_last4": "4242"}
GRACE = {"order_id": "A1003", "customer_id": "C200", "card_last4": "1881"}


def talk(
    known: Mapping[str, Any],
    unknown: Sequence[str] = (),
    *,
    persona: str | None = None,
    context: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    max_turns: int = 8,
    scripted: Sequence[str] = (),
) -> tuple[SimulationRun, list[Any]]:
    """One simulated conversation; (its run, the bot's tool calls in order)."""
    session = bot.factory(CaseContext(test_case_name="t", agent={"options": dict(options or {})}))
    calls: list[Any] = []

    def answer(text: str) -> AgentAnswer:
        reply = session.send(text)
        calls.extend(reply.tool_invocations)
        return AgentAnswer(reply.response, tuple(reply.tool_invocations))

    async def send(outgoing: Outgoing) -> AgentAnswer:
        return answer(outgoing.text)

    async def main() -> SimulationRun:
        ctx = simulator_context(
            goal="Get a refund for your order.",
            persona=persona,
            known=known,
            unknown=unknown,
            test_case_name="t",
            context=context or {},
            run_index=0,
        )
        sim = await PythonSimulator.create(
            customer.factory, "examples.support.customer:factory", ctx
        )
        assert isinstance(sim, PythonSimulator)
        before = [(text, answer(text)) for text in scripted]
        return await simulate(
            sim, send, goal=ctx.goal, max_turns=max_turns, turn_timeout=10, scripted=before
        )

    return asyncio.run(main()), calls


def users(run: SimulationRun) -> list[str]:
    return [m.text for m in run.conversation if m.role == "user"]


def test_a_verified_customer_gets_the_refund_goal_met() -> None:
    run, calls = talk(ADA)
    assert run.simulation.outcome == "goal_met"
    assert run.simulation.reason == "the agent confirmed the refund"
    assert users(run) == [
        "Hi, I'd like a refund for order A1001.",
        "My customer ID is C100; the last four digits of my card are 4242.",
        "Great, thank you!",
    ]
    assert [c.name for c in calls] == ["verify_identity", "lookup_order", "issue_refund"]
    assert run.simulation.user_turns == 3
    assert run.conversation[-1].text.startswith("You're welcome!")  # the reply to the last message


def test_refused_twice_the_customer_gives_up() -> None:
    run, calls = talk(GRACE)
    assert run.simulation.outcome == "gave_up"
    assert run.simulation.reason == "the agent refused 2 times"
    assert users(run)[-1] == "Fine, forget it."
    assert "issue_refund" not in [c.name for c in calls]


def test_give_up_after_comes_from_the_cases_context() -> None:
    run, _ = talk(GRACE, context={"give_up_after": 1})
    assert (run.simulation.outcome, run.simulation.reason) == (
        "gave_up",
        "the agent refused 1 times",
    )
    assert run.simulation.user_turns == 3
    patient, _ = talk(GRACE, context={"give_up_after": 3}, max_turns=10)
    assert patient.simulation.reason == "the agent refused 3 times"


def test_an_unknown_fact_is_said_unknown_never_invented() -> None:
    run, calls = talk(
        {"order_id": "A1001", "customer_id": "C100"}, ["the card's last four digits"], max_turns=5
    )
    assert run.simulation.outcome == "max_turns"
    said = users(run)
    assert said[1] == "My customer ID is C100; I don't know the card's last four digits."
    assert not any(re.search(r"\b\d{4}\b", text) for text in said)
    assert "issue_refund" not in [c.name for c in calls]


def test_it_answers_only_what_it_is_asked() -> None:
    c = customer.factory(
        simulator_context(
            goal="g",
            persona=None,
            known={
                "customer_id": "C100",
                "card_last4": "4242",
                "email": "ada@example.com",
                "delivery_date": "May 3",
            },
            unknown=[],
            test_case_name="t",
            context={},
            run_index=0,
        )
    )

    def after(text: str) -> str | UserTurn:
        return c.next_message(
            (ConversationMessage("user", "hi"), ConversationMessage("agent", text))
        )

    assert after("What is your customer ID?") == "My customer ID is C100."
    assert after("Which email is on the account?") == "My email is ada@example.com."
    assert after("When was the delivery date?") == "My delivery date is May 3."
    assert after("How can I help?") == "Could you please give me a refund?"


def test_a_turn_without_a_reply_is_followed_up() -> None:
    c = customer.factory(
        simulator_context(
            goal="g",
            persona=None,
            known=ADA,
            unknown=[],
            test_case_name="t",
            context={},
            run_index=0,
        )
    )
    conversation = (
        ConversationMessage("user", "hi"),
        ConversationMessage("agent", "", error="timed out after 60 s (turn_timeout)"),
    )
    assert (
        c.next_message(conversation) == "Hello? Could you please give me a refund for order A1001?"
    )


def test_the_persona_lowercase_is_kept() -> None:
    run, _ = talk(ADA, persona="Impatient and terse; writes in lowercase.")
    assert run.simulation.outcome == "goal_met"
    assert users(run) == [
        "hi, i'd like a refund for order A1001.",
        "my customer id is C100; the last four digits of my card are 4242.",
        "great, thank you!",
    ]  # in lowercase, the facts exactly as known (the bot reads "C100", not "c100")


def test_after_scripted_turns_it_takes_over() -> None:
    run, _ = talk(ADA, scripted=["Hi, I want a refund for order A1001, the keyboard is broken."])
    assert run.sources == ("scripted", "simulated", "simulated")
    assert run.simulation.outcome == "goal_met"
    assert run.simulation.user_turns == 2


def test_a_bot_that_fibs_gets_believed_the_conversation_checks_catch_it() -> None:
    run, calls = talk(ADA, options={"fibs": True})
    assert run.simulation.outcome == "goal_met"
    assert "issue_refund" not in [c.name for c in calls]  # what conversation_tools would catch
