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
from typing import TYPE_CHECKING, Any, Literal

from ...errors import McpServerError, ToolArgumentError, ToolClashError
from ...types import CaseContext, ToolInvocation
from ..calls import ToolSet
from ..definition import TOOL_NAME, Tool
from ..outcome import ToolOutcome, error_text, failed_outcome, parse_arguments
from .config import McpServerConfig, Scope

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
    twice: set[str] = set()
    for tool in server.tools:
        if tool.name in listed:
            twice.add(tool.name)
        listed.setdefault(tool.name, tool)
    names = list(listed) if config.tools is None else list(config.tools)
    for name in names:  # a tool the allow-list leaves out may be listed twice (a gateway's)
        if name in twice:
            raise _error(config, name, "lists two tools with this name")
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
    dialect = schema.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        raise _error(
            config,
            listed.name,
            "has an inputSchema that is not a valid JSON Schema: at $schema: "
            f"{type(dialect).__name__} {_short(dialect)} is not a URI",
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
    except (RecursionError, TypeError, ValueError, AttributeError, LookupError) as exc:
        raise _error(  # jsonschema's own checks tripping over a schema (too deep, odd types)
            config,
            listed.name,
            f"has an inputSchema jsonschema cannot check: {type(exc).__name__}: {_short(exc)}",
        ) from None
    return McpTool(
        name=listed.name,
        description=(listed.description or getattr(listed, "title", None) or "").strip(),
        parameters=copy.deepcopy(schema),
        handle=server,
    )


def _short(value: object, limit: int = 120) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    """How one server of the suite was started in a run, for the report's ``run.mcp_servers``."""

    name: str
    scope: Scope
    transport: Literal["stdio", "streamable-http"]
    startup_ms: float | None
    """The mean time of its first starts (process, ``initialize``, tool list); None: never
    started."""
    starts: int = 1
    """How many times it started: once (``scope: run``) or once per case run (``scope:
    case``), plus the restarts after crashes."""
    max_startup_ms: float | None = None
    """The longest of those first starts."""


@dataclasses.dataclass
class _Tally:
    """The starts of one ``scope: case`` server over the run (memory stays flat)."""

    starts: int = 0
    timed: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0

    def add(self, server: McpServer) -> None:
        self.starts += server.starts
        if server.startup_ms is not None:
            self.timed += 1
            self.total_ms += server.startup_ms
            self.max_ms = max(self.max_ms, server.startup_ms)


class CaseTools:
    """One test case's tools: the run's, plus its own ``scope: case`` servers' (closed with it)."""

    def __init__(
        self,
        toolset: ToolSet,
        servers: Sequence[McpServer],
        tallies: Mapping[str, _Tally] | None = None,
    ) -> None:
        self.toolset = toolset
        self.servers = tuple(servers)
        self._tallies = tallies or {}
        self._closed = False

    @property
    def starts(self) -> list[ServerStart]:
        return [_start_of(s) for s in self.servers]

    async def aclose(self) -> None:
        """End the case's servers: no process of theirs is left (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            await close_all(self.servers)
        finally:
            for server in self.servers:
                tally = self._tallies.get(server.name)
                if tally is not None:
                    tally.add(server)


def _start_of(server: McpServer) -> ServerStart:
    config = server.config
    ms = server.startup_ms
    return ServerStart(config.name, config.scope, config.transport, ms, server.starts, ms)


class McpServers:
    """The suite's MCP servers for one run (all in one event loop: the run's)."""

    def __init__(self, configs: Sequence[McpServerConfig], *, env: Mapping[str, str]) -> None:
        self.configs = tuple(configs)
        self._env = env
        self._run_servers: list[McpServer] = []
        self._run_started: list[McpServer] = []
        """The run's servers as started (kept after :meth:`aclose`, for the report)."""
        self._toolset: ToolSet | None = None
        self._tallies = {c.name: _Tally() for c in self.configs if c.scope == "case"}

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
        except BaseException:  # whatever went wrong, no server is left running
            await close_all(servers)
            raise
        self._run_servers = servers
        self._run_started = list(servers)
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
            return CaseTools(with_server_tools(toolset, servers), servers, self._tallies)
        except BaseException:
            await close_all(servers)
            raise

    @property
    def has_case_servers(self) -> bool:
        """Whether each case starts servers of its own (``scope: case``)."""
        return bool(self._tallies)

    def run_starts(self) -> list[ServerStart]:
        """The ``scope: run`` servers as started, for the report."""
        return [_start_of(s) for s in self._run_started]

    def starts(self) -> list[ServerStart]:
        """Every server of the suite, in the suite's order: the run's as started, the cases'
        summed over the cases closed so far (for the report's ``run.mcp_servers``)."""
        run = {s.name: _start_of(s) for s in self._run_started}
        out: list[ServerStart] = []
        for config in self.configs:
            if config.name in run:
                out.append(run[config.name])
            elif config.name in self._tallies:  # listed even when no case could start it
                t = self._tallies[config.name]
                mean = t.total_ms / t.timed if t.timed else None
                out.append(
                    ServerStart(
                        config.name,
                        config.scope,
                        config.transport,
                        mean,
                        t.starts,
                        t.max_ms if t.timed else None,
                    )
                )
        return out

    async def aclose(self) -> None:
        """End the run's servers."""
        servers, self._run_servers = self._run_servers, []
        await close_all(servers)
