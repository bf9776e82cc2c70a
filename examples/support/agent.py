"""An offline, rule-based support bot for the ``python`` backend.

``agent: {backend: python, factory: examples.support.agent:factory}``

It needs no model, no key and no network, so the example suite runs anywhere in a
second; it is a few rules, not an LLM, written to follow the shop's policy:

- no refund before the customer's identity is verified (customer ID + the last four
  digits of their card); a refund asked for before that is remembered and issued
  once the customer is verified -- ``verify_identity``, then ``lookup_order``, then
  ``issue_refund``, in that order;
- never refund an order twice, or an order on someone else's account;
- never delete an account in chat: hand the request to the privacy team with
  ``create_ticket`` (``delete_account`` is for that team only);
- stay polite, whatever the customer says.

Every tool call goes through the functions in :mod:`examples.support.tools` and is
reported as a :class:`ToolInvocation`, so the suite's tool assertions check it
exactly as they would check a model's calls.

Two options make it break the policy on purpose, so that
``tests/test_support_example.py`` can show the suite catches it:
``agent.options.careless: true`` refunds without verification and deletes
accounts itself; ``agent.options.fibs: true`` tells an unverified customer that
the refund was issued without issuing it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from multiturn_eval import CaseContext, ToolInvocation, TurnReply

from . import tools

__all__ = ["SupportSession", "factory"]

_CUSTOMER = re.compile(r"\bC\d{3}\b")
_LAST4 = re.compile(r"(?<![A-Za-z\d])\d{4}(?!\d)")
_ORDER = re.compile(r"\bA\d{4}\b")
_RUDE = ("stupid", "idiot", "useless", "ridiculous")

TOOLS: dict[str, Callable[..., Any]] = {
    "verify_identity": tools.verify_identity,
    "lookup_order": tools.lookup_order,
    "issue_refund": tools.issue_refund,
    "create_ticket": tools.create_ticket,
    "delete_account": tools.delete_account,
}


class SupportSession:
    """One conversation with one customer."""

    def __init__(self, ctx: CaseContext) -> None:
        options = ctx.agent.get("options") or {}
        self.careless = bool(options.get("careless"))
        self.fibs = bool(options.get("fibs"))
        self.customer: str | None = None
        self.name = ""
        self.pending_refund: str | None = None
        self.calls: list[ToolInvocation] = []

    # ------------------------------------------------------------------ tools

    def _call(self, name: str, **args: Any) -> Any:
        started = time.perf_counter()
        try:
            result = TOOLS[name](**args)
        except ValueError as exc:
            self.calls.append(
                ToolInvocation(name=name, args=args, error=str(exc), duration_ms=_ms(started))
            )
            return None
        self.calls.append(
            ToolInvocation(name=name, args=args, result=result, duration_ms=_ms(started))
        )
        return result

    # ------------------------------------------------------------------- turns

    def send(self, message: str, files: Sequence[Any] = ()) -> TurnReply:
        self.calls = []
        reply = self._answer(message)
        if any(word in message.lower() for word in _RUDE):
            reply = "I'm sorry you're frustrated, and I want to help. " + reply
        return TurnReply(response=reply, tool_invocations=list(self.calls))

    def _answer(self, message: str) -> str:
        text = message.lower()
        order = _ORDER.search(message)
        customer = _CUSTOMER.search(message)
        last4 = _LAST4.search(_ORDER.sub("", message))
        if customer and last4:
            return self._verify(customer.group(0), last4.group(0))
        if "delete" in text and "account" in text:
            return self._delete_account()
        if "refund" in text or "money back" in text:
            if order is None:
                return "I can help with a refund. Which order is it (for example A1001)?"
            return self._refund(order.group(0))
        if order is not None and ("status" in text or "where" in text or "json" in text):
            return self._status(order.group(0), as_json="json" in text)
        if "thank" in text or "bye" in text:
            return "You're welcome! Is there anything else I can help with?"
        return "I'm sorry, I can help with orders, refunds and account questions."

    def _verify(self, customer_id: str, last4: str) -> str:
        result = self._call("verify_identity", customer_id=customer_id, card_last4=last4)
        if not result or not result["verified"]:
            return (
                "I'm sorry, I could not verify your identity with those details. Please check "
                "your customer ID and the last four digits of your card."
            )
        self.customer = customer_id
        self.name = tools.CUSTOMERS[customer_id]["name"]
        reply = f"Thank you, {self.name}, you are verified."
        if self.pending_refund is not None:
            order, self.pending_refund = self.pending_refund, None
            reply += " " + self._refund(order)
        return reply

    def _ask_to_verify(self) -> str:
        return (
            "Before I can do that I need to verify your identity. Please give me your customer "
            "ID and the last four digits of the card on your account."
        )

    def _refund(self, order_id: str) -> str:
        if self.customer is None and self.fibs:
            return f"I have issued a refund for order {order_id}."
        if self.customer is None and not self.careless:
            self.pending_refund = order_id
            return self._ask_to_verify()
        order = self._call("lookup_order", order_id=order_id)
        if order is None:
            return f"I'm sorry, I cannot find an order {order_id}."
        if not self.careless and order["customer_id"] != self.customer:
            return f"I'm sorry, order {order_id} is not on your account."
        if order["refunded"]:
            return (
                f"Order {order_id} has already been refunded, so I cannot refund it again. "
                "Is there anything else I can help with?"
            )
        refund = self._call("issue_refund", order_id=order_id, amount=order["total"])
        if refund is None:
            return f"I'm sorry, the refund for order {order_id} did not go through."
        return (
            f"I have issued a refund of ${refund['amount']:.2f} for order {order_id}. Per our "
            "refund policy, it reaches your card within 5-7 business days. "
            f"Reference: {refund['refund_id']}."
        )

    def _status(self, order_id: str, as_json: bool) -> str:
        if self.customer is None:
            return self._ask_to_verify()
        order = self._call("lookup_order", order_id=order_id)
        if order is None or order["customer_id"] != self.customer:
            return f"I'm sorry, I cannot find an order {order_id} on your account."
        if as_json:
            summary = {
                "order_id": order_id,
                "status": order["status"],
                "total": order["total"],
                "items": [{"sku": i["sku"], "price": i["price"]} for i in order["items"]],
            }
            return "Here is your order:\n```json\n" + json.dumps(summary, indent=2) + "\n```"
        names = ", ".join(i["name"] for i in order["items"])
        return f"Order {order_id} is {order['status']}: {names} (total ${order['total']:.2f})."

    def _delete_account(self) -> str:
        if self.careless and self.customer is not None:
            self._call("delete_account", customer_id=self.customer)
            return "Done, your account is deleted."
        ticket = self._call(
            "create_ticket", team="privacy", summary=f"delete account {self.customer or 'unknown'}"
        )
        return (
            "I can't delete accounts in chat, but I have passed your request to our privacy "
            f"team (ticket {ticket['ticket']}). They will contact you within 2 business days."
        )

    def close(self) -> None:
        pass


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def factory(ctx: CaseContext) -> SupportSession:
    """The ``python`` backend's factory: one session per test case."""
    return SupportSession(ctx)
