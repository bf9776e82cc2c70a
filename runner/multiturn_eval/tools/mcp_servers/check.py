"""``validate --mcp``: start each server, list its tools, check the suite's tool names against them.

No model is called. Every server (``scope: case`` ones too) is started once, all
at once, its tools listed and checked as at a real start (allow-list, names,
schemas, clashes with the Python tools and with other servers), then closed.
The tool names the suite's checks use (``expected_tools``, ``forbidden_tools``,
``conversation_tools``) are matched as the checks match calls (SPEC 6.3: a
name matches a tool whose name contains it): a name that matches no offered
tool is a problem (an expected tool the model can never call, a forbidden one
whose check can never fail).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

from ...errors import McpServerError
from ..calls import ToolSet
from .config import McpServerConfig
from .source import close_all, offered_tools, with_server_tools


@dataclasses.dataclass(frozen=True)
class ToolNameUse:
    """A tool name one of the suite's checks uses, and where (for the message)."""

    name: str
    kind: Literal["expected", "forbidden"]
    where: str
    """e.g. ``test_cases[2] turns[0].expected_tools[1]``."""
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class ServerListing:
    """A server as ``validate --mcp`` found it."""

    name: str
    listed: tuple[str, ...]
    """Every tool the server listed."""
    offered: tuple[str, ...]
    """Those offered to the model (the allow-list applied); empty when the server failed."""
    startup_ms: float | None


@dataclasses.dataclass(frozen=True)
class McpCheck:
    """What ``validate --mcp`` found: the listings, and every problem."""

    servers: tuple[ServerListing, ...]
    server_errors: tuple[McpServerError, ...]
    name_problems: tuple[tuple[ToolNameUse, str], ...]

    @property
    def ok(self) -> bool:
        return not self.server_errors and not self.name_problems


async def check_servers(
    configs: Sequence[McpServerConfig],
    *,
    env: Mapping[str, str],
    python_tools: ToolSet,
    uses: Sequence[ToolNameUse] = (),
) -> McpCheck:
    """Start every server once, list and check its tools, check ``uses`` against them."""
    from .server import McpServer

    servers = [McpServer(c, env=env) for c in configs]
    try:
        outcomes = await asyncio.gather(*(s.start() for s in servers), return_exceptions=True)
        errors: list[McpServerError] = []
        listings: list[ServerListing] = []
        toolset = python_tools
        for server, outcome in zip(servers, outcomes, strict=True):
            listed = tuple(t.name for t in server.tools)
            offered: tuple[str, ...] = ()
            if isinstance(outcome, McpServerError):
                errors.extend(outcome.errors)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                try:
                    toolset = with_server_tools(toolset, [server])
                    offered = tuple(t.name for t in offered_tools(server))
                except McpServerError as exc:
                    errors.append(exc)
            listings.append(ServerListing(server.name, listed, offered, server.startup_ms))
    finally:
        await close_all(servers)
    names = [tool.name for tool in toolset]
    problems: list[tuple[ToolNameUse, str]] = []
    failed = {e.server for e in errors}
    for use in uses:
        if any(use.name in name for name in names):
            continue
        offered_text = ", ".join(repr(n) for n in names) or "none"
        what = (
            "the model can never call it" if use.kind == "expected" else "this check can never fail"
        )
        note = (
            f" (not checked against the failed server(s) {', '.join(sorted(failed))})"
            if failed
            else ""
        )
        problems.append(
            (
                use,
                f"{use.kind} tool {use.name!r} matches no tool offered to the model ({what}); "
                f"offered: {offered_text}{note}",
            )
        )
    return McpCheck(tuple(listings), tuple(errors), tuple(problems))
