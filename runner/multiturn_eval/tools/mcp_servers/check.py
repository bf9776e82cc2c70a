"""Checks of a suite's MCP servers: at load (nothing started), and ``validate --mcp``.

**At load** (:func:`load_problems`, called by the loader; every problem exit 2,
located at ``agent.mcp_servers[i]``): the ``mcp`` package is installed; a stdio
server's ``cwd`` is a directory and its ``command`` is a program that can be
started (found on the ``PATH`` it will get, or a file relative to its ``cwd``);
the ``tools:`` allow-list names only tools a model can be given and none that a
Python tool of the suite already has. Nothing is started and nothing is listed:
what a server offers is known only once it runs.

**validate --mcp** (:func:`check_suite`, :func:`check_servers`): no model is called. Every server (``scope: case`` ones too) is started once, all
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
import importlib.util
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ...errors import ConfigIssue, McpServerError
from ..calls import ToolSet
from ..definition import TOOL_NAME
from .config import McpServerConfig
from .source import close_all, offered_tools, with_server_tools

if TYPE_CHECKING:
    from ...loaded import LoadedSuite

#: how the loader's message says what installs the SDK
INSTALL_HINT = "pip install 'multiturn-eval[mcp]'"

Problem = tuple[tuple[str | int, ...], str]
"""(field path below ``agent.mcp_servers``, message)."""


def load_problems(
    configs: Sequence[McpServerConfig],
    *,
    env: Mapping[str, str],
    python_tools: Collection[str] = (),
) -> list[Problem]:
    """What can be found wrong with the servers without starting one (see the module docstring).

    ``env`` is the run's environment (a stdio server's ``PATH`` comes from it, unless its
    own ``env`` sets one); ``python_tools`` the names of the suite's Python tools.
    """
    problems: list[Problem] = []
    if configs and importlib.util.find_spec("mcp") is None:
        problems.append(
            (
                (),
                f"MCP servers need the package 'mcp', which is not installed; install it with: "
                f"{INSTALL_HINT}",
            )
        )
    for i, config in enumerate(configs):
        at = config.index if config.index is not None else i
        if config.command is not None:
            problem = _command_problem(config, env)
            if problem is not None:
                problems.append(((at, problem[0]), problem[1]))
        for j, name in enumerate(config.tools or ()):
            if not TOOL_NAME.match(name):
                problems.append(
                    (
                        (at, "tools", j),
                        f"{name!r} is a name a model cannot be given (1-64 letters, digits, "
                        "'_' or '-')",
                    )
                )
            elif name in python_tools:
                problems.append(
                    (
                        (at, "tools", j),
                        f"{name!r} is also the name of a Python tool of agent.tools; the model "
                        "must tell them apart: rename the Python tool ('name:') or leave this one "
                        "out",
                    )
                )
    return problems


def _command_problem(config: McpServerConfig, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(field, why) when a stdio server's program cannot be started, else None."""
    assert config.command is not None
    command, cwd = config.command, config.cwd
    if cwd is not None and not cwd.is_dir():
        return "cwd", f"is not a directory: {cwd}"
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        target = Path(command) if Path(command).is_absolute() else (cwd or Path()) / command
        if not target.is_file():
            return "command", f"{command!r}: no such file (relative to the server's cwd, {cwd})"
        if not os.access(target, os.X_OK):
            return "command", f"{command!r} is not executable"
        return None
    # as the server gets it (stdio.server_environment; that module imports the SDK)
    path = config.env.get("PATH") or env.get("PATH") or os.defpath
    if shutil.which(command, path=path) is None:
        return (
            "command",
            f"{command!r} is not a program on the PATH the server gets (the runner's, unless "
            "its env sets one); give its path, or set PATH in the server's env",
        )
    return None


@dataclasses.dataclass(frozen=True)
class ToolNameUse:
    """A tool name one of the suite's checks uses, and where (for the message)."""

    name: str
    kind: Literal["expected", "forbidden"]
    where: str
    """e.g. ``test_cases[2] turns[0].expected_tools[1]``."""
    line: int | None = None
    file: str | None = None
    """The file it is written in (None: the suite file; else its ``test_cases_file``)."""


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


# ------------------------------------------------------------------- a whole suite


def tool_name_uses(loaded: LoadedSuite) -> list[ToolNameUse]:
    """Every tool name the suite's checks use: each turn's ``expected_tools`` and
    ``forbidden_tools``, each case's ``conversation_tools``, with where they are."""
    uses: list[ToolNameUse] = []
    for i in range(len(loaded.cases)):
        case = loaded.cases.materialize(i)  # a line of the test_cases_file is read back
        found: list[tuple[str, Literal["expected", "forbidden"], str, int | None]] = []
        for t, turn in enumerate(case.effective_turns()):
            at = f"test_cases[{i}]" if case.is_legacy else f"test_cases[{i}].turns[{t}]"
            line = loaded.turn_line(i, t)
            for j, tool in enumerate(turn.tools):
                found.append((tool.name, "expected", f"{at}.expected_tools[{j}]", line))
            for j, name in enumerate(turn.forbidden_tools or ()):
                found.append((name, "forbidden", f"{at}.forbidden_tools[{j}]", line))
        checks = case.conversation_tools
        if checks is not None:
            at, line = f"test_cases[{i}].conversation_tools", loaded.case_line(i)
            for j, tool in enumerate(checks.tools):
                found.append((tool.name, "expected", f"{at}.expected_tools[{j}]", line))
            for j, name in enumerate(checks.forbidden_tools or ()):
                found.append((name, "forbidden", f"{at}.forbidden_tools[{j}]", line))
        file = loaded.cases.file_of(i)
        uses.extend(ToolNameUse(*use, file=file) for use in found)
    return uses


async def check_suite(loaded: LoadedSuite, env: Mapping[str, str]) -> McpCheck:
    """``validate --mcp`` of one loaded suite: its servers started, listed and checked."""
    from ...suite import server_configs

    specs = getattr(loaded.suite.agent, "mcp_servers", None) or []
    return await check_servers(
        server_configs(specs, loaded.base_dir),
        env=env,
        python_tools=ToolSet.from_loaded(loaded),
        uses=tool_name_uses(loaded),
    )


def server_issues(loaded: LoadedSuite, error: McpServerError) -> list[ConfigIssue]:
    """An MCP server's failure as configuration issues, each at ``agent.mcp_servers[i]``.

    The message quotes the server (its stderr, its URL): the suite's secrets (the
    servers' ``env`` and ``headers`` values, ``${VAR}`` keys) are redacted from it and
    control characters and ANSI escapes removed here, so that every printer of a
    configuration error (the console, the Action's log, annotations, the comment)
    gets it clean.
    """
    from ...reports.escape import strip_control
    from ...secrets import Redactor

    redact = Redactor(loaded.secrets)
    issues = []
    for each in error.errors:
        path: tuple[str | int, ...] = ("agent", "mcp_servers")
        field = "agent.mcp_servers"
        if each.index is not None:
            path, field = (*path, each.index), f"{field}[{each.index}]"
        issues.append(
            ConfigIssue(
                strip_control(redact(str(each))),
                file=loaded.display_path,
                line=loaded.document.line_of(path),
                field=field,
            )
        )
    return issues


def check_issues(loaded: LoadedSuite, found: McpCheck) -> list[ConfigIssue]:
    """What ``validate --mcp`` found wrong, located (exit 2)."""
    issues = [i for error in found.server_errors for i in server_issues(loaded, error)]
    issues.extend(
        ConfigIssue(message, file=use.file or loaded.display_path, line=use.line, field=use.where)
        for use, message in found.name_problems
    )
    return issues


def listing_lines(found: McpCheck, configs: Sequence[McpServerConfig]) -> list[str]:
    """``validate --mcp``'s account of each server: how it started and what it offers."""
    scope = {c.name: (c.scope, c.transport) for c in configs}
    lines = []
    for server in found.servers:
        where = "{1}, scope: {0}".format(*scope.get(server.name, ("?", "?")))
        if server.startup_ms is None:
            lines.append(f"mcp {server.name} ({where}): did not start")
            continue
        offered = ", ".join(server.offered) or "none"
        lines.append(
            f"mcp {server.name} ({where}): started in {server.startup_ms:.0f} ms; offers "
            f"{len(server.offered)} of its {len(server.listed)} tools: {offered}"
        )
    return lines
