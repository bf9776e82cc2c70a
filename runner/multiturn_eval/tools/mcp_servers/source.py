"""MCP servers as a tool source: their tools in the ToolSet, per run and per test case.

* :class:`McpTool` is a :class:`~multiturn_eval.tools.Tool` like a Python one:
  the name the server gives it (the model sees that name), its description, its
  own ``inputSchema``; :meth:`McpTool.call` sends the model's arguments as they
  are (the server checks them) and records a
  :class:`~multiturn_eval.types.ToolInvocation` with ``server`` set: arguments,
  result text, ``error`` when the result has ``isError`` (the model reads
  ``Error: <text>``, as for a Python tool that raised), ``duration_ms``.
* :func:`offered_tools` turns a started server's listing into those tools: the
  ``tools:`` allow-list (a name the server does not list is an error), a name a
  model cannot take (``^[A-Za-z0-9_-]{1,64}$``), an ``inputSchema`` that is not
  a JSON Schema of an object (``jsonschema``'s ``check_schema``), a name listed
  twice: each an :class:`~multiturn_eval.errors.McpServerError` naming the
  server and the tool.
* :class:`McpServers` owns the run's servers: :meth:`McpServers.start` starts the
  ``scope: run`` ones (all at once) and gives the run's ToolSet (the Python tools
  plus theirs); :meth:`McpServers.open_case` starts a case's own ``scope: case``
  servers (a fresh process, or a fresh MCP session of a URL server) and gives
  :class:`CaseTools`, the case's ToolSet, closed with the case. A tool name two
  sources share is an error naming both.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from ...errors import McpServerError, ToolArgumentError, ToolClashError
from ...types import CaseContext, ToolInvocation
from ..calls import ToolSet
from ..definition import TOOL_NAME, Tool
from ..outcome import ToolOutcome, error_text, failed_outcome, parse_arguments
from .config import McpServerConfig

if TYPE_CHECKING:
    import mcp.types

    from .server import McpServer


@dataclasses.dataclass(frozen=True, eq=False)
class McpTool(Tool):
    """A tool an MCP server serves, as the model sees it; calls go to ``handle``."""

    handle: McpServer

    @property
    def server(self) -> str:
        return self.handle.name

    async def call(
        self,
        arguments: Mapping[str, Any] | str | None,
        case: CaseContext | None = None,
        *,
        executor: Executor | None = None,
    ) -> ToolOutcome:
        """Send one call; a tool error is a value, a crash raises ``McpServerCrashed``."""
        started = time.perf_counter()
        try:
            args = parse_arguments(arguments)
        except ToolArgumentError as exc:
            return failed_outcome(self.name, {}, error_text(exc), started, server=self.server)
        result = await self.handle.call(self.name, args)
        if result.is_error:
            return failed_outcome(self.name, args, result.text, started, server=self.server)
        return ToolOutcome(
            invocation=ToolInvocation.model_construct(
                name=self.name,
                args=args,
                result=result.text,
                error=None,
                duration_ms=(time.perf_counter() - started) * 1000,
                server=self.server,
            ),
            content=result.text,
            is_error=False,
        )


def offered_tools(server: McpServer) -> list[McpTool]:
    """The listed tools of a started ``server`` that the model is offered (allow-list applied)."""
    config = server.config
    listed: dict[str, mcp.types.Tool] = {}
    for tool in server.tools:
        if tool.name in listed:
            raise _error(config, tool.name, "lists two tools with this name")
        listed[tool.name] = tool
    names = list(listed) if config.tools is None else list(config.tools)
    missing = [name for name in names if name not in listed]
    if missing:
        offers = ", ".join(repr(n) for n in listed) or "no tools"
        raise McpServerError(
            f"MCP server {config.describe()}: its 'tools:' allow-list names "
            f"{', '.join(repr(n) for n in missing)}, which the server does not offer; it offers "
            f"{offers}",
            server=config.name,
            index=config.index,
            tool=missing[0],
        )
    return [_tool(server, listed[name]) for name in names]


def _tool(server: McpServer, listed: mcp.types.Tool) -> McpTool:
    from jsonschema import SchemaError, validators

    config = server.config
    if not TOOL_NAME.match(listed.name):
        raise _error(
            config,
            listed.name,
            "has a name a model cannot be given (1-64 letters, digits, '_' or '-'); leave it out "
            "with the server's 'tools:' allow-list",
        )
    schema = listed.inputSchema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise _error(
            config, listed.name, "has an inputSchema that is not a JSON Schema of an object"
        )
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(the root)"
        raise _error(
            config,
            listed.name,
            f"has an inputSchema that is not a valid JSON Schema: at {where}: {exc.message}",
        ) from None
    return McpTool(
        name=listed.name,
        description=(listed.description or getattr(listed, "title", None) or "").strip(),
        parameters=copy.deepcopy(schema),
        handle=server,
    )


def _error(config: McpServerConfig, tool: str, what: str) -> McpServerError:
    return McpServerError(
        f"MCP server {config.describe()}: its tool {tool!r} {what}",
        server=config.name,
        index=config.index,
        tool=tool,
    )


def with_server_tools(base: ToolSet, servers: Sequence[McpServer]) -> ToolSet:
    """``base`` plus every server's offered tools; a clash names both sources."""
    toolset = base
    for server in servers:
        tools = offered_tools(server)
        try:
            toolset = toolset.with_tools(tools)
        except ToolClashError as exc:
            raise McpServerError(str(exc), server=server.name, index=server.config.index) from None
    return toolset


async def _start_all(servers: Sequence[McpServer]) -> None:
    """Start every server at once; if any fails, close them all and raise every failure."""
    outcomes = await asyncio.gather(*(s.start() for s in servers), return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if not failures:
        return
    await close_all(servers)
    for failure in failures:
        if not isinstance(failure, McpServerError):
            raise failure
    raise combined([f for f in failures if isinstance(f, McpServerError)])


def combined(errors: Sequence[McpServerError]) -> McpServerError:
    """One error for several (each still in ``.errors``, to locate it)."""
    if len(errors) == 1:
        return errors[0]
    first = errors[0]
    out = McpServerError(
        "\n".join(str(e) for e in errors), server=first.server, index=first.index, tool=first.tool
    )
    out.errors = list(errors)
    return out


async def close_all(servers: Sequence[McpServer]) -> None:
    await asyncio.gather(*(s.aclose() for s in servers), return_exceptions=True)


@dataclasses.dataclass(frozen=True)
class ServerStart:
    """One server start, for the report's ``run.mcp_servers``."""

    name: str
    scope: str
    transport: str
    startup_ms: float | None


class CaseTools:
    """One test case's tools: the run's, plus its own ``scope: case`` servers' (closed with it)."""

    def __init__(self, toolset: ToolSet, servers: Sequence[McpServer]) -> None:
        self.toolset = toolset
        self.servers = tuple(servers)

    @property
    def starts(self) -> list[ServerStart]:
        return [_start_of(s) for s in self.servers]

    async def aclose(self) -> None:
        """End the case's servers: no process of theirs is left."""
        await close_all(self.servers)


def _start_of(server: McpServer) -> ServerStart:
    config = server.config
    return ServerStart(config.name, config.scope, config.transport, server.startup_ms)


class McpServers:
    """The suite's MCP servers for one run (all in one event loop: the run's)."""

    def __init__(self, configs: Sequence[McpServerConfig], *, env: Mapping[str, str]) -> None:
        self.configs = tuple(configs)
        self._env = env
        self._run_servers: list[McpServer] = []
        self._toolset: ToolSet | None = None

    @property
    def run_servers(self) -> tuple[McpServer, ...]:
        return tuple(self._run_servers)

    async def start(self, base: ToolSet) -> ToolSet:
        """Start the ``scope: run`` servers and give the run's ToolSet (``base`` plus theirs).

        Raises :class:`McpServerError` (every failure in ``.errors``) with no server left.
        """
        from .server import McpServer

        servers = [McpServer(c, env=self._env) for c in self.configs if c.scope == "run"]
        await _start_all(servers)
        try:
            self._toolset = with_server_tools(base, servers)
        except McpServerError:
            await close_all(servers)
            raise
        self._run_servers = servers
        return self._toolset

    async def open_case(self, base: ToolSet | None = None) -> CaseTools:
        """Start a case's ``scope: case`` servers; its tools are ``base`` (default: the run's) plus theirs.

        Raises :class:`McpServerError` (the case's error) with none of them left.
        """
        from .server import McpServer

        toolset = base if base is not None else self._toolset
        if toolset is None:
            raise RuntimeError("McpServers.start() comes before open_case()")
        servers = [McpServer(c, env=self._env) for c in self.configs if c.scope == "case"]
        await _start_all(servers)
        try:
            return CaseTools(with_server_tools(toolset, servers), servers)
        except BaseException:
            await close_all(servers)
            raise

    def run_starts(self) -> list[ServerStart]:
        """The ``scope: run`` servers as started, for the report."""
        return [_start_of(s) for s in self._run_servers]

    async def aclose(self) -> None:
        """End the run's servers."""
        servers, self._run_servers = self._run_servers, []
        await close_all(servers)
