"""A stdio MCP server's process, and the two message streams the SDK's ClientSession uses.

The SDK's own ``stdio_client`` passes more of the runner's environment than the
suite allows (``LOGNAME``, ``SHELL``, ``TERM``, ``USER``, read from
``os.environ``) and writes the server's stderr to a file of ours; so the process
is ours, and the protocol the SDK's (``mcp.types.JSONRPCMessage`` one per line,
as the MCP stdio transport says):

* **environment**: ``PATH``, ``HOME``, ``LANG``, ``TMPDIR`` from the run's
  environment (as the entry point read it) plus the server's ``env``; nothing else;
* **process group**: the server starts a session of its own, so it and every
  process it spawns can be signalled at once (``os.killpg``); on Linux the server
  also gets ``SIGKILL`` when the runner dies (``PR_SET_PDEATHSIG``), so even a
  ``kill -9`` of the runner leaves no server behind;
* **stderr** is read all the time (a 4 MB flood never fills the pipe and stalls
  the server), keeping the last :data:`STDERR_LINES` lines, each cut at
  :data:`STDERR_LINE_CHARS` characters, for error messages;
* **stdout** lines longer than :data:`MAX_MESSAGE_BYTES` end the server (a
  protocol failure, said so in the error);
* **shutdown** (:meth:`StdioProcess.aclose`), as the MCP spec says: close the
  server's stdin, wait up to ``grace``, then ``SIGTERM`` to the group, then
  ``SIGKILL``; the group gets a last ``SIGKILL`` even when the server exited on
  its own, so no grandchild outlives it. Cancelled mid-way (an interrupted run),
  the group is killed at once, synchronously, and its exit waited for up to
  :data:`REAP_WAIT` (so the loop sees it before it closes). Every group still alive when the
  interpreter exits is killed too (:func:`kill_all`, an ``atexit`` hook, also
  called before the second-signal ``os._exit``).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage

from ...interrupts import before_hard_exit
from .config import PASSED_ENV, McpServerConfig

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

#: lines of a server's stderr kept for its error messages
STDERR_LINES = 20
#: characters kept of one stderr line
STDERR_LINE_CHARS = 500
#: the longest JSON-RPC message a server may send (one line of its stdout)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: after closing stdin, how long a server has to exit before SIGTERM (then as long before SIGKILL)
CLOSE_GRACE = 1.0
#: after the group's SIGKILL, how long the exit is waited for (also when the run is interrupted)
REAP_WAIT = 0.2

#: process groups of the servers now running (killed at exit, whatever happens)
_LIVE: set[int] = set()


def kill_all() -> None:
    """SIGKILL every server process group still alive (synchronous; safe in any thread)."""
    for pgid in list(_LIVE):
        _killpg(pgid, signal.SIGKILL)
        _LIVE.discard(pgid)


atexit.register(kill_all)
before_hard_exit(kill_all)  # a second signal, or a run that could not stop: os._exit


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def server_environment(config: McpServerConfig, run_env: Mapping[str, str]) -> dict[str, str]:
    """What a stdio server sees: :data:`PASSED_ENV` from the run's environment, then its ``env``."""
    env = {name: run_env[name] for name in PASSED_ENV if name in run_env}
    env.update(config.env)
    return env


class StderrTail:
    """The last lines of a stream, each cut to a width; memory stays bounded whatever comes."""

    def __init__(self, lines: int = STDERR_LINES, width: int = STDERR_LINE_CHARS) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=lines)
        self._width = width
        self._partial = bytearray()
        self._partial_cut = False
        self.bytes_seen = 0

    def feed(self, chunk: bytes) -> None:
        self.bytes_seen += len(chunk)
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            self._take(piece)
            self._add_line()
        self._take(rest)

    def _take(self, piece: bytes) -> None:
        room = self._width * 4 - len(self._partial)  # bytes: up to 4 per character
        if len(piece) > room:
            self._partial_cut = True
            piece = piece[: max(room, 0)]
        self._partial += piece

    def _add_line(self) -> None:
        text = self._partial.decode("utf-8", "replace").rstrip("\r")
        if len(text) > self._width or self._partial_cut:
            text = text[: self._width] + "…"
        self._lines.append(text)
        self._partial.clear()
        self._partial_cut = False

    def close(self) -> None:
        if self._partial:
            self._add_line()

    def lines(self) -> list[str]:
        """The last lines, oldest first (a line still being written included)."""
        out = list(self._lines)
        if self._partial:
            out.append(self._partial.decode("utf-8", "replace")[: self._width])
        return out[-(self._lines.maxlen or len(out)) :]

    def text(self) -> str:
        """``; its last stderr lines:`` and the lines, indented; empty when there were none."""
        lines = [line for line in self.lines() if line.strip()]
        if not lines:
            return ""
        return "; its last stderr lines:\n" + "\n".join(f"    {line}" for line in lines)


# ------------------------------------------------------------------ dying with the runner

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):
        _prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl


def _child_setup(parent: int) -> Callable[[], None] | None:
    """Runs in the child between fork and exec: die with the runner (Linux)."""
    prctl = _prctl
    if prctl is None:
        return None

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the runner died before prctl took effect
            os._exit(1)

    return setup


# ------------------------------------------------------------------------ the process


class StdioProcess:
    """One running stdio server: its process group, its stderr, its message streams."""

    def __init__(self, process: asyncio.subprocess.Process, config: McpServerConfig) -> None:
        self.process = process
        self.pid = process.pid
        self.pgid = process.pid  # start_new_session: the server leads its own group
        self.config = config
        self.stderr = StderrTail()
        self.exited = asyncio.Event()
        self.failure: str | None = None
        """Why the server's stdout was given up (a message over the size limit)."""
        read_send, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
            0
        )
        self.write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
        self._read_send: MemoryObjectSendStream[SessionMessage | Exception] = read_send
        self._write_receive: MemoryObjectReceiveStream[SessionMessage] = write_receive
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name=f"mcp-{config.name}-stdout"),
            asyncio.create_task(self._write_stdin(), name=f"mcp-{config.name}-stdin"),
            asyncio.create_task(self._read_stderr(), name=f"mcp-{config.name}-stderr"),
            asyncio.create_task(self._wait(), name=f"mcp-{config.name}-wait"),
        ]

    @classmethod
    async def start(cls, config: McpServerConfig, run_env: Mapping[str, str]) -> StdioProcess:
        """Start the server; OSError (no such program, no such directory) says why not."""
        assert config.command is not None
        if config.cwd is not None and not config.cwd.is_dir():
            raise NotADirectoryError(f"its cwd {str(config.cwd)!r} is not a directory")
        process = await asyncio.create_subprocess_exec(
            config.command,
            *config.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=server_environment(config, run_env),
            cwd=config.cwd,
            start_new_session=True,
            preexec_fn=_child_setup(os.getpid()),
            limit=MAX_MESSAGE_BYTES,
        )
        _LIVE.add(process.pid)
        return cls(process, config)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def exit_text(self) -> str:
        """``exited with code 1`` / ``was killed by SIGKILL`` / ``stopped answering``."""
        if self.failure is not None:
            return self.failure
        code = self.process.returncode
        if code is None:
            return "closed its stdout"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"

    # ----------------------------------------------------------------- the pumps

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            async with self._read_send:
                while True:
                    try:
                        line = await stdout.readline()
                    except ValueError:  # asyncio's LimitOverrunError, as readline raises it
                        self.failure = (
                            f"sent a message over {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB "
                            "(the most one JSON-RPC line may have) and was stopped"
                        )
                        self.kill_now()
                        return
                    if not line:
                        return
                    if not line.strip():
                        continue
                    await self._read_send.send(read_message(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return

    async def _write_stdin(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            async with self._write_receive:
                async for message in self._write_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    stdin.write(data.encode("utf-8") + b"\n")
                    await stdin.drain()
        except (ConnectionError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the server is gone: the reader and the wait task tell the session

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        while True:
            chunk = await stderr.read(65536)
            if not chunk:
                self.stderr.close()
                return
            self.stderr.feed(chunk)

    async def _wait(self) -> None:
        try:
            await self.process.wait()
        finally:
            self.exited.set()

    # ------------------------------------------------------------------ shutdown

    def kill_now(self) -> None:
        """SIGKILL the whole group, synchronously (the process is reaped in the background)."""
        _killpg(self.pgid, signal.SIGKILL)
        _LIVE.discard(self.pgid)

    async def aclose(self, grace: float = CLOSE_GRACE) -> None:
        """Close stdin, wait ``grace``, SIGTERM the group, wait ``grace``, SIGKILL the group."""
        try:
            stdin = self.process.stdin
            if stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    stdin.close()
            if not await self._exits_within(grace):
                _killpg(self.pgid, signal.SIGTERM)
                await self._exits_within(grace)
        finally:
            self.kill_now()  # the grandchildren too, and the server if it ignored SIGTERM
            self._read_send.close()
            self.write_stream.close()
            for task in self._tasks[:-1]:  # not the wait task: the exit is seen below
                if not task.done():
                    task.cancel()
            await self._reap()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _reap(self) -> None:
        """After the SIGKILL: wait (at most :data:`REAP_WAIT`, even when cancelled) until the
        exit is seen, then close the transport. Left to a closed loop, the child watcher
        logs "Loop ... that handles pid N is closed" and the transport's ``__del__`` raises
        "Event loop is closed". The exit status is polled (the wait task may be cancelled
        by the run's end, and ``exited`` set by that)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REAP_WAIT
        cancelled = False
        try:
            while self.process.returncode is None and loop.time() < deadline:
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:  # bounded: the wait goes on, the cancel after
                    cancelled = True
        finally:
            wait_task = self._tasks[-1]
            if not wait_task.done():
                wait_task.cancel()
            transport = getattr(self.process, "_transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
        if cancelled:
            raise asyncio.CancelledError

    async def _exits_within(self, seconds: float) -> bool:
        if seconds <= 0:
            return self.exited.is_set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.exited.wait()
        return self.exited.is_set()


def first_leaf(exc: BaseException) -> BaseException:
    """An exception group's first exception that is not a group (else ``exc``)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


#: the ``data`` of the JSON-RPC error that stands in for a reply the runner could not read
UNREADABLE = {"multiturn_eval": "unreadable reply"}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def read_message(line: bytes) -> SessionMessage | Exception:
    """One line of a stdio server's stdout as the session's next message.

    pydantic's JSON parser refuses some replies Python's own reads: a byte that is
    not UTF-8 (a server writing Latin-1), a lone surrogate escape (``"\\ud83d"``: a
    Node.js server cutting a string in the middle of an emoji), JSON nested deeper
    than its limit (a tool's schema). Those are read with ``json`` instead, the
    bad byte or surrogate becoming U+FFFD. A line that still is not a JSON-RPC
    message but answers a request (it has an ``id`` and a ``result`` or ``error``)
    becomes a JSON-RPC error for that request, saying why (:data:`UNREADABLE`): the
    call fails at once with that reason, instead of waiting for an answer that
    came. Any other line (a log line printed to stdout) goes to the session as an
    exception, which the SDK logs and skips.
    """
    try:
        return SessionMessage(types.JSONRPCMessage.model_validate_json(line))
    except Exception as exc:
        first = exc
    try:
        data = _without_lone_surrogates(json.loads(line.decode("utf-8", "replace")))
    except (ValueError, RecursionError):  # not JSON (a log line), or too deep even for json
        return first
    try:
        return SessionMessage(types.JSONRPCMessage.model_validate(data))
    except Exception as exc:
        why = exc
    if not isinstance(data, dict) or ("result" not in data and "error" not in data):
        return why
    ident = data.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return why
    reason = _shape_problem(why, "JSONRPCError" if "error" in data else "JSONRPCResponse")
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=ident,
        error=types.ErrorData(
            code=types.INVALID_REQUEST,
            message=f"its reply is not a JSON-RPC message the runner can read ({reason})",
            data=UNREADABLE,
        ),
    )
    return SessionMessage(types.JSONRPCMessage(error))


def _shape_problem(exc: Exception, member: str) -> str:
    """``error: Input should be a valid dictionary``: what is wrong with the reply, as the
    JSON-RPC message it tried to be (``member``) sees it."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        chosen = next(
            (e for e in errors if e["loc"][:1] == (member,)), errors[0] if errors else None
        )
        if chosen is not None:
            loc = [str(part) for part in chosen["loc"] if part != member]
            return f"{'.'.join(loc) or '(the message)'}: {chosen['msg']}"[:300]
    return exception_text(exc).splitlines()[0][:300]


def _without_lone_surrogates(value: object) -> object:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def exception_text(exc: BaseException) -> str:
    """An exception (an SDK's exception group unwrapped to its first leaf) as one line."""
    exc = first_leaf(exc)
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


__all__ = [
    "MAX_MESSAGE_BYTES",
    "STDERR_LINES",
    "StderrTail",
    "StdioProcess",
    "exception_text",
    "first_leaf",
    "kill_all",
    "server_environment",
]
