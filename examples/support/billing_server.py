"""The shop's billing tools as an MCP server, written with the official ``mcp`` SDK.

    python billing_server.py        # stdio: what suite-mcp.yaml starts, one per test case

``lookup_order`` and ``issue_refund`` are the very functions of :mod:`tools` (the same
fixed in-memory table), served over MCP instead of offered as Python tools: the way a
team's agent reaches its billing system in production. A tool that raises (an unknown
order, a second refund) is an ``isError`` result, which the model reads as an error and
the report records on the call. Needs ``pip install 'multiturn-eval[mcp]'``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools.py beside this file
import tools

server = FastMCP("billing", log_level="WARNING")


@server.tool()
def lookup_order(order_id: str) -> dict[str, Any]:
    """An order's status, items, total and whether it was refunded."""
    return tools.lookup_order(order_id)


@server.tool()
def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund ``amount`` of an order to the customer's card; returns the refund reference."""
    return tools.issue_refund(order_id, amount)


if __name__ == "__main__":
    server.run(transport="stdio")
