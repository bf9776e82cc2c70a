"""The ``python`` backend: your own agent in Python (SPEC 7).

``agent: {backend: python, factory: "pkg.mod:make_session"}``. The factory is
called once per test case with a :class:`CaseContext` (sync or async) and
returns a session object with ``send(message, files=())`` (sync or async) and
an optional ``close()``. ``send`` may return a :class:`TurnReply`, a plain
string, or a mapping with ``response`` and optional ``tool_invocations`` and
``token_usage``.

Sync factories, ``send`` and ``close`` run in a thread pool as large as the
run's parallelism, so a blocking agent neither stalls the event loop nor caps
concurrency; a sync call that ignores the turn timeout keeps its thread busy
until it returns (Python cannot kill a thread), but the run moves on.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import BackendError
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply

if TYPE_CHECKING:
    from ..loader import LoadedSuite
    from ..settings import RunSettings


def coerce_reply(value: Any) -> TurnReply:
    """Accept a TurnReply, a string, or a mapping; anything else is a clear error."""
    if isinstance(value, TurnReply):
        reply = value
    elif isinstance(value, str):
        return TurnReply(response=value)
    elif isinstance(value, Mapping):
        unknown = set(value) - {
            "response",
            "tool_invocations",
            "token_usage",
            "warnings",
            "cost_usd",
        }
        if unknown:
            raise BackendError(
                f"agent reply has unknown keys: {', '.join(sorted(map(str, unknown)))}"
            )
        if not isinstance(value.get("response"), str):
            raise BackendError("agent reply mapping needs 'response' as a string")
        reply = TurnReply(
            response=value["response"],
            tool_invocations=value.get("tool_invocations") or (),
            token_usage=value.get("token_usage"),
            warnings=value.get("warnings") or (),
            cost_usd=value.get("cost_usd"),
        )
    else:
        raise BackendError(
            f"agent returned {type(value).__name__}; expected TurnReply, str or a mapping with 'response'"
        )
    if not isinstance(reply.response, str):
        raise BackendError(f"agent response is {type(reply.response).__name__}, not str")
    try:
        invocations = tuple(
            inv if isinstance(inv, ToolInvocation) else ToolInvocation.model_validate(inv)
            for inv in reply.tool_invocations
        )
        usage = reply.token_usage
        if usage is not None and not isinstance(usage, TokenUsage):
            usage = TokenUsage.model_validate(usage)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BackendError(f"agent reply is malformed: {where}: {first['msg']}") from None
    if invocations is not reply.tool_invocations or usage is not reply.token_usage:
        reply = TurnReply(
            response=reply.response,
            tool_invocations=invocations,
            token_usage=usage,
            warnings=tuple(reply.warnings),
            cost_usd=reply.cost_usd,
        )
    return reply


class _PythonSession:
    def __init__(self, obj: Any, call: Callable[..., Any]) -> None:
        self._obj = obj
        self._call = call
        send = getattr(obj, "send", None)
        if not callable(send):
            raise BackendError(
                f"the factory returned {type(obj).__name__}, which has no send(message, files=()) method",
                session_alive=False,
            )
        self._send = send
        self._send_takes_files = _accepts_files(send)

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        if self._send_takes_files:
            value = await self._call(self._send, message, tuple(files))
        elif files:
            raise BackendError(
                "this agent's send() takes no files argument, but the turn has files"
            )
        else:
            value = await self._call(self._send, message)
        return coerce_reply(value)

    async def close(self) -> None:
        close = getattr(self._obj, "close", None)
        if callable(close):
            await self._call(close)


def _accepts_files(send: Callable[..., Any]) -> bool:
    """Whether ``send`` takes a second (files) argument."""
    function = getattr(send, "__func__", None)
    if function is None:  # not a bound method: inspect it as it is
        return _takes_files(send, skip_self=False)
    # every session of a suite usually has the same class: inspect its send() once
    return _method_takes_files(function)


@functools.lru_cache(maxsize=256)
def _method_takes_files(function: Callable[..., Any]) -> bool:
    return _takes_files(function, skip_self=True)


def _takes_files(fn: Callable[..., Any], skip_self: bool) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    if skip_self:
        params = params[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return True
    return len(params) >= 2


class PythonBackend:
    name = "python"

    def __init__(self, suite: LoadedSuite, settings: RunSettings) -> None:
        assert suite.factory is not None
        self._factory = suite.factory
        self.secrets: set[str] = set()
        self.warnings: list[str] = []
        self._pool = ThreadPoolExecutor(
            max_workers=max(4, settings.parallel_test_cases), thread_name_prefix="agent"
        )

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Await an async callable; run a sync one in the pool. Awaitables returned are awaited."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        loop = asyncio.get_running_loop()
        value = await loop.run_in_executor(self._pool, functools.partial(fn, *args))
        if inspect.isawaitable(value):
            value = await value
        return value

    async def open_session(self, case: CaseContext) -> _PythonSession:
        obj = await self._call(self._factory, case)
        return _PythonSession(obj, self._call)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
