"""An offline, rule-based customer: a simulated user for the support bot (``backend: python``).

``user_simulator: {backend: python, factory: examples.support.customer:factory}``

It needs no model, no key and no network. It plays a customer who wants a refund,
from the test case's ``user:`` block (:class:`~multiturn_eval.SimulatorContext`):

- it opens with "Hi, I'd like a refund for order <order_id>." (``known.order_id``);
- it answers what the agent asks, and only that, from ``known`` (``customer_id``,
  ``card_last4``, ``order_id``, ``email``; any other known fact when the agent names
  it, ``delivery_date`` as "delivery date");
- asked for one of its ``unknown`` facts, it says it does not know it;
- once the agent confirms the refund ("I have issued a refund of $59.90 ..."), it
  thanks the agent and ends: ``goal_met``;
- after ``give_up_after`` refusals (the case's ``context.give_up_after``, default 2:
  "already been refunded", "could not verify", "not on your account" ...), it ends:
  ``gave_up``;
- otherwise it asks for the refund again;
- a persona that says "lowercase" makes it write in lowercase (the facts as written).

The customer believes what the agent says: a bot that claims a refund it never
issued (``agent.options.fibs``) gets a ``goal_met``; the conversation-level
checks (``conversation_tools``, ``no_unbacked_refund_promise``) are what catch it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from multiturn_eval import ConversationMessage, SimulatorContext, UserTurn

__all__ = ["Customer", "factory"]

GIVE_UP_AFTER = 2
FACT_WORDS: Mapping[str, tuple[str, ...]] = {
    "customer_id": ("customer id", "customer number"),
    "card_last4": ("last four", "last 4"),
    "order_id": ("which order", "order number", "order id"),
    "email": ("email", "e-mail"),
}
"""What an agent says when it asks for one of the usual facts."""
SAYING: Mapping[str, str] = {
    "customer_id": "my customer ID is {}",
    "card_last4": "the last four digits of my card are {}",
    "order_id": "the order is {}",
    "email": "my email is {}",
}
CONFIRMED = re.compile(r"issued a refund|refunded you|refund of \$", re.IGNORECASE)
REFUSED = re.compile(
    r"already been refunded|cannot refund|can't refund|could not verify|not on your account|"
    r"cannot find|did not go through",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_SMALL = frozenset({"the", "my", "of", "a", "an", "your", "s", "to", "for", "on", "in"})


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _SMALL}


class Customer:
    """One customer, for one run of one test case."""

    def __init__(self, ctx: SimulatorContext) -> None:
        self.known = dict(ctx.known)
        self.unknown = list(ctx.unknown)
        self.lowercase = "lowercase" in (ctx.persona or "").lower()
        limit = ctx.context.get("give_up_after", GIVE_UP_AFTER)
        self.give_up_after = limit if isinstance(limit, int) and limit >= 1 else GIVE_UP_AFTER
        self.refusals = 0

    # ------------------------------------------------------------------ the rules

    def next_message(self, conversation: Sequence[ConversationMessage]) -> str | UserTurn:
        last = conversation[-1] if conversation else None
        if last is None or last.role != "agent":
            return self._say(self._ask_for_refund(first=True))
        if last.error is not None and not last.text:
            return self._say("Hello? " + self._ask_for_refund())
        said = last.text
        if CONFIRMED.search(said) and not REFUSED.search(said):
            return UserTurn(
                message=self._say("Great, thank you!"),
                done=True,
                outcome="goal_met",
                reason="the agent confirmed the refund",
            )
        if REFUSED.search(said):
            self.refusals += 1
            if self.refusals >= self.give_up_after:
                return UserTurn(
                    message=self._say("Fine, forget it."),
                    done=True,
                    outcome="gave_up",
                    reason=f"the agent refused {self.refusals} times",
                )
        answer = self._answer(said)
        return self._say(answer or self._ask_for_refund())

    def _ask_for_refund(self, *, first: bool = False) -> str:
        order = self.known.get("order_id")
        what = f"a refund for order {order}" if order else "a refund"
        return f"Hi, I'd like {what}." if first else f"Could you please give me {what}?"

    def _answer(self, said: str) -> str | None:
        """The known facts the agent asked for, and the unknown ones it asked about."""
        lowered = said.lower()
        parts = [
            SAYING.get(name, "my " + name.replace("_", " ") + " is {}").format(value)
            for name, value in self.known.items()
            if self._asked(name, lowered)
        ]
        words = _content_words(said)
        for fact in self.unknown:
            wanted = _content_words(fact)
            if wanted and len(wanted & words) >= min(2, len(wanted)):
                parts.append(f"I don't know {fact}")
        if not parts:
            return None
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "."

    @staticmethod
    def _asked(name: str, lowered: str) -> bool:
        phrases = FACT_WORDS.get(name, (name.replace("_", " "),))
        return any(phrase in lowered for phrase in phrases)

    def _say(self, text: str) -> str:
        """``text`` in the persona's voice; the known facts stay exactly as written."""
        if not self.lowercase:
            return text
        text = text.lower()
        for value in self.known.values():
            text = text.replace(str(value).lower(), str(value))
        return text


def factory(ctx: SimulatorContext) -> Customer:
    """The simulator's factory: one customer per run of a test case."""
    return Customer(ctx)
