"""One MCP server in use: started, initialized, its tools listed; calls; crashes; shutdown.

Built on the official SDK's :class:`mcp.ClientSession` over a stdio process of
ours (:mod:`.stdio`) or the SDK's streamable-HTTP transport. Each instance of a
server lives in a task of its own (the SDK's anyio contexts must be entered and
left in one task; a case opens and closes its session in different ones), and
every call races the instance's end, so a server that dies never leaves a call
waiting, whatever the SDK version does with pending requests.

Rules (the issue's settled details):

* **start** (:meth:`McpServer.start`): start the process (or connect), answer
  ``initialize`` and list the tools (every page), all within ``startup_timeout``;
  otherwise :class:`~multiturn_eval.errors.McpServerError` saying which step did
  not finish, with the server's last stderr lines;
* **call** (:meth:`McpServer.call`): bounded by ``call_timeout`` and the time
  left in the turn (:func:`~multiturn_eval.retry.current_deadline`); past it the
  call is a tool error the model reads ("did not answer within 5 s
  (call_timeout)"); a JSON-RPC error or a result that is not MCP's shape is a
  tool error too;
* **crash**: the server exited or its connection broke during a call: that call
  raises :class:`~multiturn_eval.errors.McpServerCrashed` (a ``SessionError``: the
  turn fails). The next call restarts the server, once per crash; a second crash
  with no good call between them, or a restart that fails, says the session is
  dead (``session_alive=False``); after a failed restart no call tries again;
* **shutdown** (:meth:`McpServer.aclose`): the session is left, the process group
  closed as :mod:`.stdio` says (an HTTP server's MCP session is ended with a
  DELETE); when the caller is being cancelled the group is killed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio
import mcp.types as types
from mcp import ClientSession, McpError
from pydantic import ValidationError

from ..._version import __version__
from ...errors import McpServerCrashed, McpServerError
from ...retry import current_deadline
from .config import McpServerConfig
from .stdio import CLOSE_GRACE, UNREADABLE, StdioProcess, exception_text, first_leaf

#: the most pages of ``tools/list`` followed (a server whose cursor never ends)
MAX_TOOL_PAGES = 100
#: how long leaving a session and closing its process may take before it is killed
CLOSE_LIMIT = 5.0
#: the same while the run is being interrupted
INTERRUPTED_CLOSE_LIMIT = 0.3
#: the HTTP client's connect/write timeout (reads are bounded by the call's own timeout)
HTTP_TIMEOUT = 30.0
#: how long a crash's error waits for the process's exit status
EXIT_STATUS_WAIT = 0.5
#: the JSON-RPC error code the SDK gives pending requests when the connection closed
CONNECTION_CLOSED = -32000

_CLIENT = types.Implementation(name="multiturn-eval", version=__version__)

_Streams = tuple[Any, Any]


@dataclass(frozen=True)
class CallResult:
    """What a call gave: the text for the model and whether it is an error."""

    text: str
    is_error: bool


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@dataclass(eq=False)
class _Instance:
    """One start of a server: its task, session, process and how it ended."""

    generation: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    """Done when ``ended`` is set: every call waits on this one future (no task per call)."""
    step: str = "start"
    session: ClientSession | None = None
    process: StdioProcess | None = None
    owner: asyncio.Task[None] | None = None
    end_reason: str | None = None
    lost: bool = False
    """A call found the connection gone (the instance is on its way out)."""

    @property
    def alive(self) -> bool:
        return self.session is not None and not self.ended.is_set() and not self.lost

    async def wait_for_end(self) -> None:
        """Until the instance is told to stop, or its process exits."""
        waits = [asyncio.ensure_future(self.stop.wait())]
        if self.process is not None:
            waits.append(asyncio.ensure_future(self.process.exited.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    def stderr_text(self) -> str:
        return self.process.stderr.text() if self.process is not None else ""


class McpServer:
    """One MCP server for a case (``scope: case``) or for the run (``scope: run``)."""

    def __init__(self, config: McpServerConfig, *, env: Mapping[str, str]) -> None:
        self.config = config
        self._env = env
        self.tools: tuple[types.Tool, ...] = ()
        """The tools listed at the first start."""
        self.startup_ms: float | None = None
        """How long the first start took (process, ``initialize``, tool list)."""
        self.starts = 0
        self._current: _Instance | None = None
        self._generation = 0
        self._crashed_generation = -1
        self._crashes_in_a_row = 0
        self._broken: str | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def pid(self) -> int | None:
        """The process id of the running stdio server (its process group's id too)."""
        current = self._current
        return current.process.pid if current is not None and current.process else None

    def stderr_text(self) -> str:
        """``; its last stderr lines: ...`` of the current (or last) process; empty if none."""
        return self._current.stderr_text() if self._current is not None else ""

    # -------------------------------------------------------------------- starting

    async def start(self) -> None:
        """Start, ``initialize`` and list the tools within ``startup_timeout``.

        :class:`McpServerError` says what did not happen, with the last stderr lines.
        """
        async with self._lock:
            await self._start_instance()

    async def _start_instance(self) -> None:
        config = self.config
        started = time.perf_counter()
        self._generation += 1
        instance = self._current = _Instance(self._generation)
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # a start given up (cancelled) never reads how it failed: mark it read
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        instance.owner = asyncio.create_task(
            self._own(instance, ready), name=f"mcp-server-{config.name}"
        )
        try:
            async with asyncio.timeout(config.startup_timeout):
                await asyncio.wait({ready, instance.finished}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            pass
        except BaseException:
            await self._stop_instance(at_once=True)
            raise
        if ready.done() and not ready.cancelled() and ready.exception() is None:
            tools = ready.result()
            if self.starts == 0:
                self.tools = tools
                self.startup_ms = (time.perf_counter() - started) * 1000
            self.starts += 1
            return
        why = self._failure_text(instance, ready)
        await self._stop_instance(at_once=True)
        raise McpServerError(
            f"MCP server {config.describe()} {why}{instance.stderr_text()}",
            server=config.name,
            index=config.index,
        )

    def _failure_text(
        self, instance: _Instance, ready: asyncio.Future[tuple[types.Tool, ...]]
    ) -> str:
        step = _STEPS[instance.step]
        if ready.done() and not ready.cancelled() and ready.exception() is not None:
            exc = ready.exception()
            assert exc is not None
            if isinstance(exc, McpServerError):
                return str(exc)
            if instance.step == "start":
                return f"could not be started: {exception_text(exc)}"
            if instance.process is not None and instance.process.exited.is_set():
                return f"{instance.process.exit_text()} while {step}"
            return f"failed while {step}: {_error_text(exc)}"
        if instance.process is not None and instance.process.exited.is_set():
            return f"{instance.process.exit_text()} while {step}"
        if instance.end_reason is not None:
            return f"failed while {step}: {instance.end_reason}"
        return f"did not finish {step} within {self.config.startup_timeout:g} s (startup_timeout)"

    async def _own(
        self, instance: _Instance, ready: asyncio.Future[tuple[types.Tool, ...]]
    ) -> None:
        """The task an instance lives in: transport, session, tool list; then it waits."""
        try:
            async with self._transport(instance) as (read, write):
                instance.step = "initialize"
                async with ClientSession(read, write, client_info=_CLIENT) as session:
                    await session.initialize()
                    instance.step = "list"
                    tools = await _list_tools(session, self.config)
                    instance.session = session
                    ready.set_result(tools)
                    await instance.wait_for_end()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except Exception as raised:
            exc = first_leaf(raised)  # the SDK's task groups wrap what they raise
            if not ready.done():
                ready.set_exception(exc)
            else:
                instance.end_reason = _error_text(exc)
        finally:
            instance.session = None
            instance.ended.set()
            if not instance.finished.done():
                instance.finished.set_result(None)

    @contextlib.asynccontextmanager
    async def _transport(self, instance: _Instance) -> AsyncIterator[_Streams]:
        config = self.config
        if config.command is not None:
            process = await StdioProcess.start(config, self._env)
            instance.process = process
            try:
                yield process.read_stream, process.write_stream
            finally:
                await process.aclose(0 if _cancelling() else CLOSE_GRACE)
            return

        def broken(exc: BaseException) -> None:
            if not instance.stop.is_set():
                instance.end_reason = exception_text(exc)
                instance.lost = True
                instance.stop.set()

        async with _http_streams(config, broken) as streams:
            yield streams

    # --------------------------------------------------------------------- calling

    def call_timeout(self) -> tuple[float | None, str]:
        """Seconds the next call may take, and why that long (for the error message)."""
        budget = self.config.call_timeout
        why = f"{budget:g} s (call_timeout)" if budget is not None else ""
        deadline = current_deadline()
        if deadline is not None:
            left = max(deadline.remaining(), 0.0)
            if budget is None or left < budget:
                budget = left
                why = f"the turn's time left (turn_timeout {deadline.budget:g} s)"
        return budget, why

    async def call(self, name: str, arguments: Mapping[str, Any]) -> CallResult:
        """Call the tool ``name``; :class:`McpServerCrashed` when the server died meanwhile."""
        instance = await self._running()
        assert instance.session is not None
        timeout, why = self.call_timeout()
        request: asyncio.Future[Any] = asyncio.ensure_future(
            _call_tool(instance.session, name, dict(arguments))
        )
        try:
            done, _ = await asyncio.wait(
                {request, instance.finished}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            request.cancel()
            raise
        if request not in done:
            request.cancel()
            with contextlib.suppress(BaseException):
                await request
            if instance.ended.is_set():
                await self._crashed(instance, f"during the call to {name!r}")
            return CallResult(
                f"the MCP server {self.name!r} did not answer the call to {name!r} within {why}",
                is_error=True,
            )
        exc = request.exception()
        if exc is None:
            self._crashes_in_a_row = 0
            return _result(request.result())
        if _connection_lost(exc) or instance.ended.is_set():
            await self._crashed(instance, f"during the call to {name!r}")
        return CallResult(f"the MCP server {self.name!r} failed: {_error_text(exc)}", is_error=True)

    async def _running(self) -> _Instance:
        """The live instance (the server restarted once after a crash)."""
        current = self._current
        if current is not None and current.alive:
            return current
        async with self._lock:
            current = self._current
            if current is not None and current.alive:
                return current
            if self._closed:
                raise McpServerCrashed(f"MCP server {self.name!r} was shut down")
            if self._broken is not None:
                raise McpServerCrashed(self._broken, session_alive=False)
            if current is not None:
                self._count_crash(current)
            await self._stop_instance(at_once=True)
            try:
                await self._start_instance()
            except McpServerError as exc:
                self._broken = f"{exc} (restarting it after it stopped)"
                raise McpServerCrashed(self._broken, session_alive=False) from None
            assert self._current is not None
            return self._current

    def _count_crash(self, instance: _Instance) -> None:
        if self._crashed_generation != instance.generation:
            self._crashed_generation = instance.generation
            self._crashes_in_a_row += 1

    async def _crashed(self, instance: _Instance, when: str) -> NoReturn:
        instance.lost = True
        instance.stop.set()  # its task leaves the session and closes what is left
        self._count_crash(instance)
        if instance.process is not None:
            # the pipe closes a moment before the exit status is known: wait for it, briefly
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EXIT_STATUS_WAIT):
                    await instance.process.exited.wait()
            what = instance.process.exit_text()
        else:
            what = f"lost its connection ({instance.end_reason or 'closed'})"
        again = self._crashes_in_a_row >= 2
        raise McpServerCrashed(
            f"MCP server {self.config.describe()} {what} {when}"
            + ("; it crashed twice in a row" if again else "; the next call restarts it")
            + instance.stderr_text(),
            session_alive=not again,
        )

    # -------------------------------------------------------------------- shutdown

    async def aclose(self) -> None:
        """Leave the session and end the server (no process is left)."""
        self._closed = True
        await self._stop_instance(at_once=_cancelling())

    async def _stop_instance(self, *, at_once: bool) -> None:
        instance = self._current
        if instance is None or instance.owner is None:
            return
        owner, process = instance.owner, instance.process
        instance.stop.set()
        limit = INTERRUPTED_CLOSE_LIMIT if at_once else CLOSE_LIMIT
        try:
            if at_once and process is not None:
                process.kill_now()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limit):
                    await asyncio.wait({owner})
        finally:
            if not owner.done():
                owner.cancel()
            elif not owner.cancelled():
                owner.exception()  # retrieved: _own kept what it needs
            if instance.process is not None:
                instance.process.kill_now()
            instance.owner = None


async def _call_tool(
    session: ClientSession, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """``tools/call``, as ``ClientSession.call_tool`` sends it, without its output check.

    ``call_tool`` also validates a result's ``structuredContent`` against the tool's
    ``outputSchema`` (checking the schema itself on every call: most of the SDK's CPU
    per call, see bench/README.md). The model reads the text content, which that check
    does not look at, so the request goes out through ``send_request`` directly.
    """
    request = types.CallToolRequest(
        method="tools/call", params=types.CallToolRequestParams(name=name, arguments=arguments)
    )
    return await session.send_request(types.ClientRequest(request), types.CallToolResult)


_STEPS = {
    "start": "starting",
    "initialize": "answering initialize",
    "list": "listing its tools",
}


async def _list_tools(session: ClientSession, config: McpServerConfig) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await (session.list_tools() if cursor is None else _next_page(session, cursor))
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tuple(tools)
    raise McpServerError(
        f"listed more than {MAX_TOOL_PAGES} pages of tools (its cursor never ends)",
        server=config.name,
        index=config.index,
    )


async def _next_page(session: ClientSession, cursor: str) -> types.ListToolsResult:
    try:
        return await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    except (AttributeError, TypeError):  # older 1.x: list_tools(cursor)
        return await session.list_tools(cursor)  # type: ignore[call-overload,unused-ignore]


@contextlib.asynccontextmanager
async def _http_streams(
    config: McpServerConfig, on_broken: Callable[[BaseException], None]
) -> AsyncIterator[_Streams]:
    """The SDK's streamable-HTTP transport, with the server's headers on every request.

    The SDK only logs a POST whose response stream breaks (the server died
    mid-call) and leaves the request waiting; the client's transport is wrapped so
    that such a break calls ``on_broken``, and the call fails as a crash.
    """
    import httpx
    from mcp.client import streamable_http

    assert config.url is not None
    watched = _watched_transport(httpx, on_broken)

    def client(**extra: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx.Timeout(HTTP_TIMEOUT, read=None),
            follow_redirects=True,
            transport=watched,
            **{k: v for k, v in extra.items() if k == "auth" and v is not None},
        )

    modern = getattr(streamable_http, "streamable_http_client", None)
    if modern is not None:
        async with client() as http, modern(config.url, http_client=http) as (read, write, _):
            yield read, write
        return

    def factory(headers: Any = None, timeout: Any = None, auth: Any = None) -> httpx.AsyncClient:
        return client(auth=auth)

    async with streamable_http.streamablehttp_client(  # older 1.x (tested on 1.10)
        config.url, httpx_client_factory=factory
    ) as (read, write, _):
        yield read, write


def _watched_transport(httpx: Any, on_broken: Callable[[BaseException], None]) -> Any:
    """An httpx transport that reports a POST whose connection or response stream broke.

    Its requests go past the fixtures' interception of httpx (``--fixtures``): an MCP
    server's tools run live in every mode, as the suite's Python tools do.
    """
    from ...fixtures.cassette import bypass

    class WatchedStream(httpx.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    yield chunk
            except httpx.TransportError as exc:
                on_broken(exc)
                raise

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Watched(httpx.AsyncBaseTransport):  # type: ignore[misc]
        def __init__(self) -> None:
            self._inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            post = request.method == "POST"
            try:
                with bypass():  # a tool call, not model traffic: never in the fixtures
                    response = await self._inner.handle_async_request(request)
            except httpx.TransportError as exc:
                if post:
                    on_broken(exc)
                raise
            if not post:
                return response
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if (
                200 <= response.status_code < 300
                and response.status_code != 202
                and kind
                not in (
                    "application/json",
                    "text/event-stream",
                )
            ):  # a proxy's error page: the SDK only logs it, and the request would wait
                on_broken(
                    ValueError(
                        f"it answered with status {response.status_code} and content type "
                        f"{kind or '(none)'}, neither JSON nor an event stream"
                    )
                )
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=WatchedStream(response.stream),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Watched()


def _connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, McpError):  # -32000 alone is any server's error: the SDK's own words too
        return exc.error.code == CONNECTION_CLOSED and exc.error.message == "Connection closed"
    return isinstance(
        exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
    )


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, McpError):
        if exc.error.data == UNREADABLE:  # the runner's words, not the server's
            return exc.error.message
        return f"MCP error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"its reply is not MCP's shape ({where}: {first['msg']})"
    return exception_text(exc)


def _result(result: types.CallToolResult) -> CallResult:
    return CallResult(result_text(result), is_error=bool(result.isError))


def result_text(result: types.CallToolResult) -> str:
    """A tool result as the text the model reads: its text blocks, joined by newlines.

    Blocks that are not text are named with their size (``[image: image/png, 2,048
    bytes of base64]``); a result with only ``structuredContent`` is that as JSON.
    """
    import json

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            parts.append(f"[{kind}: {block.mimeType}, {len(block.data):,} bytes of base64]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[resource {resource.uri}: {len(resource.blob):,} bytes of base64]")
        else:
            uri = getattr(block, "uri", None)
            parts.append(f"[{getattr(block, 'type', 'content')}: {uri}]" if uri else "[content]")
    if not parts and result.structuredContent is not None:
        return json.dumps(result.structuredContent, ensure_ascii=False)
    return "\n".join(parts)


__all__ = ["CallResult", "McpServer", "result_text"]
