"""The support example's tools: a tiny fake shop behind plain Python functions.

Every backend can offer them (``agent.tools: [{function: examples.support.tools:lookup_order}]``)
and the offline rule-based agent (:mod:`examples.support.agent`) calls the very same
functions. The data is a fixed in-memory table, so every run gives the same answers;
nothing is changed by a call (``issue_refund`` returns a confirmation, it does not
remember it), so test cases never depend on each other.
"""

from __future__ import annotations

from typing import Any

CUSTOMERS: dict[str, dict[str, Any]] = {
    "C100": {"name": "Ada", "card_last4": "4242", "orders": ["A1001", "A1002"]},
    "C200": {"name": "Grace", "card_last4": "1881", "orders": ["A1003"]},
}

ORDERS: dict[str, dict[str, Any]] = {
    "A1001": {
        "customer_id": "C100",
        "status": "delivered",
        "total": 59.9,
        "items": [{"sku": "KB-01", "name": "keyboard", "price": 59.9}],
        "refunded": False,
    },
    "A1002": {
        "customer_id": "C100",
        "status": "shipped",
        "total": 24.5,
        "items": [
            {"sku": "MS-02", "name": "mouse", "price": 19.5},
            {"sku": "PD-03", "name": "mouse pad", "price": 5.0},
        ],
        "refunded": False,
    },
    "A1003": {
        "customer_id": "C200",
        "status": "delivered",
        "total": 12.0,
        "items": [{"sku": "CB-04", "name": "cable", "price": 12.0}],
        "refunded": True,
    },
}


def verify_identity(customer_id: str, card_last4: str) -> dict[str, Any]:
    """Check a customer's identity: their customer ID and the last four digits of their card."""
    customer = CUSTOMERS.get(customer_id)
    verified = customer is not None and customer["card_last4"] == card_last4
    return {"customer_id": customer_id, "verified": verified}


def lookup_order(order_id: str) -> dict[str, Any]:
    """An order's status, items, total and whether it was refunded."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ValueError(f"no order {order_id}")
    return {"order_id": order_id, **order}


def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund ``amount`` of an order to the customer's card; returns the refund reference."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ValueError(f"no order {order_id}")
    if order["refunded"]:
        raise ValueError(f"order {order_id} was already refunded")
    if amount > order["total"]:
        raise ValueError(f"{amount} is more than the order total {order['total']}")
    return {"refund_id": f"R-{order_id}", "order_id": order_id, "amount": amount}


def create_ticket(team: str, summary: str) -> dict[str, Any]:
    """Hand a request over to a human team (privacy, billing, ...); returns the ticket number."""
    number = 1000 + sum(ord(c) for c in team + summary) % 9000
    return {"ticket": f"T-{number}", "team": team}


def delete_account(customer_id: str) -> dict[str, Any]:
    """Delete a customer's account and data. Only the privacy team may do this (never in chat)."""
    return {"customer_id": customer_id, "deleted": True}
