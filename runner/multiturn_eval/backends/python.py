"""The ``python`` backend: your own agent in Python (SPEC 7).

``agent: {backend: python, factory: "pkg.mod:make_session"}``. The factory is
called once per test case with a :class:`CaseContext` (sync or async) and
returns a session object with ``send(message, files=())`` (sync or async) and
an optional ``close()``. ``send`` may return a :class:`TurnReply`, a plain
string, or a mapping with ``response`` and optional ``tool_invocations`` and
``token_usage``.

Sync factories, ``send`` and ``close`` run on daemon threads
(:class:`multiturn_eval.usercode.DaemonThreads`), so a blocking agent neither
stalls the event loop nor caps concurrency. A sync call that ignores its
timeout keeps its thread until it returns (Python cannot kill a thread); the
thread is abandoned -- the next call gets another one, so a stuck test case
never starves the others -- and the case says so in a warning ("send() of turn
3 still running after its timeout; its thread was abandoned").

Whatever the agent raises, returns or calls (``sys.exit()``,
``KeyboardInterrupt``, a reply JSON cannot hold) stays inside its turn: see
:mod:`multiturn_eval.usercode` and :mod:`multiturn_eval.sanitize`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BackendError
from ..replies import checked_reply
from ..sanitize import safe_repr
from ..types import CaseContext, TurnFile, TurnReply
from ..usercode import THREADS, error_text, note_traceback

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings


def coerce_reply(value: Any) -> TurnReply:
    """Accept a TurnReply, a string, or a mapping; anything else is a clear error.

    The reply is then checked field by field (:func:`checked_reply`): a field of
    the wrong type (``token_usage`` that is text, a negative or NaN
    ``cost_usd``, ...) is a :class:`BackendError` on the turn, and values that
    JSON cannot hold (in tool invocations, lone surrogates in the text) are
    replaced, with a warning on the turn naming them.
    """
    if isinstance(value, TurnReply):
        reply = value
    elif isinstance(value, str):
        reply = TurnReply(response=value)
    elif isinstance(value, Mapping):
        try:
            keys = [k if isinstance(k, str) else safe_repr(k) for k in value]
        except Exception as exc:
            raise BackendError(f"agent reply mapping cannot be read: {error_text(exc)}") from None
        unknown = set(keys) - _REPLY_KEYS
        if unknown:
            raise BackendError(f"agent reply has unknown keys: {', '.join(sorted(unknown))}")
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
    reply = checked_reply(reply)
    assert isinstance(reply, TurnReply)
    return reply


_REPLY_KEYS = {"response", "tool_invocations", "token_usage", "warnings", "cost_usd"}


class _PythonSession:
    def __init__(self, obj: Any, call: Callable[..., Awaitable[Any]]) -> None:
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
            value = await self._call(self._send, message, tuple(files), what="send()")
        elif files:
            raise BackendError(
                "this agent's send() takes no files argument, but the turn has files"
            )
        else:
            value = await self._call(self._send, message, what="send()")
        return coerce_reply(value)

    async def close(self) -> None:
        close = getattr(self._obj, "close", None)
        if callable(close):
            await self._call(close, what="close()")


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
        self.settings = settings

    async def _call(self, fn: Callable[..., Any], *args: Any, what: str) -> Any:
        """Await an async callable; run a sync one on a daemon thread. Awaitables returned are
        awaited. What the user's code raises keeps its traceback for the reports."""
        try:
            if inspect.iscoroutinefunction(fn):
                return await fn(*args)
            value = await THREADS.run(fn, *args, what=what)
            if inspect.isawaitable(value):
                value = await value
            return value
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # sys.exit() too: guarded() words it, the frames are kept here
            note_traceback(what if what == "the factory" else f"the agent's {what}", exc)
            raise

    async def open_session(self, case: CaseContext) -> _PythonSession:
        obj = await self._call(self._factory, case, what="the factory")
        return _PythonSession(obj, self._call)

    async def aclose(self) -> None:
        """Nothing to release: the threads are shared and daemon (stuck ones are left behind)."""
