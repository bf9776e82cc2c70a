"""Calling the user's code (agents, factories, graders) without letting it take the run down.

Three things live here:

- :func:`error_text`: an exception as one line of text, even when its
  ``__str__`` raises or returns something that is not a string.
- :func:`guarded`: awaits user code and turns the ``BaseException`` s that are
  not errors -- ``KeyboardInterrupt``, ``SystemExit`` (``sys.exit()``),
  ``GeneratorExit`` and an ``asyncio.CancelledError`` the user's code raised
  itself -- into :class:`UserCodeAbort`, an ordinary exception the case runner
  records as a turn (or metric) error. **What ``sys.exit()`` in an agent means:**
  nothing for the run. It is the agent's failure on that turn (``the agent
  called sys.exit(0)``), the next turn is still sent, the test case fails, and
  the run's exit code is decided by the results as usual (so never 0 because of
  it). The same holds in a factory (the session could not be opened), in
  ``close()`` (a warning on the case) and in a grader (that metric fails). A
  ``CancelledError`` is the run's own only when the running task is being
  cancelled (``asyncio.current_task().cancelling()``: SIGINT/SIGTERM or our own
  timeout); then it propagates, otherwise it is the user's code's failure.
- :func:`note_traceback`: where the user's code raised, kept for the reports.
  The runner's own frames (and the standard library's above the first frame
  of the user's) are left out, so the traceback starts in the user's code;
  each is cut to :data:`TRACEBACK_LIMIT` characters and a turn keeps at most
  :data:`MAX_TRACEBACKS`. The case runner collects them per turn and per test
  case (:func:`collect_tracebacks`); the reports redact them like every other
  text (the run's :class:`~multiturn_eval.secrets.Redactor`).
- :class:`DaemonThreads`: where sync user code runs. Python cannot kill a
  thread, so a sync ``send()``/factory/``close()``/grader that ignores its
  timeout keeps its thread. The pool never waits for it: every call takes an
  idle thread or starts a new one, so a stuck call costs one thread and never
  a slot that later, healthy test cases need. Threads are daemon threads, so
  the process still exits once the reports are written. A call whose await
  was cancelled while its thread was still running is recorded (see
  :func:`watch_abandoned`) so the case can say which work was left behind.
  There is no cap on abandoned threads: each one costs a blocked thread, and a
  suite would need thousands of stuck calls before that matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import sysconfig
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .errors import BackendError, UserCodeAbort

T = TypeVar("T")

#: characters of an exception message kept in a report (a 100 MB message is a bug, not a reason)
MESSAGE_LIMIT = 4_000


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException as inner:  # a broken __str__ must not spread
        try:
            name = type(inner).__name__
        except BaseException:
            name = "an exception"
        return f"<its str() raised {name}>"
    if not isinstance(text, str):  # pragma: no cover -- str() guarantees a str
        return ""
    text = text.strip()
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT] + f"… [{len(text) - MESSAGE_LIMIT:,} more characters cut]"
    return text


def error_text(exc: BaseException) -> str:
    """``Type: message`` (a :class:`BackendError`'s message alone, it is written for people)."""
    text = _safe_str(exc)
    if isinstance(exc, BackendError | UserCodeAbort):
        return text or type(exc).__name__
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def abort_text(exc: BaseException, who: str) -> str:
    """What a non-error BaseException raised by user code means, in words."""
    if isinstance(exc, SystemExit):
        try:
            code = "" if exc.code is None else repr(exc.code)
        except BaseException:  # a code whose repr raises
            code = "?"
        return f"the {who} called sys.exit({code})"
    if isinstance(exc, asyncio.CancelledError):
        return f"the {who} raised asyncio.CancelledError (the run was not cancelled)"
    text = _safe_str(exc)
    return f"the {who} raised {type(exc).__name__}" + (f": {text}" if text else "")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


#: how long async user code may take to stop once cancelled, before it is left behind
CANCEL_GRACE = 0.5
#: tasks left behind (still running after their cancellation): kept from the collector
_LEFT_BEHIND: set[asyncio.Future[Any]] = set()


async def guarded(awaitable: Awaitable[T], who: str, *, abandon_as: str | None = None) -> T:
    """Await user code; a BaseException that is not an error becomes :class:`UserCodeAbort`.

    A ``CancelledError`` while this task is being cancelled (the run is
    interrupted, or an enclosing ``asyncio.timeout`` expired) is ours and propagates.

    With ``abandon_as`` the code runs in a task of its own, so that async code
    that catches and ignores its cancellation cannot hold its caller past a
    deadline: once cancelled it has :data:`CANCEL_GRACE` seconds to stop, then
    it is left running, reported like a stuck thread ("``abandon_as`` still
    running after its timeout"), and the caller goes on.
    """
    if abandon_as is not None:
        return await _in_own_task(awaitable, who, abandon_as)
    try:
        return await awaitable
    except asyncio.CancelledError as exc:
        if _cancelling():
            raise
        raise UserCodeAbort(abort_text(exc, who)) from None
    except (KeyboardInterrupt, SystemExit, GeneratorExit) as exc:
        raise UserCodeAbort(abort_text(exc, who)) from None
    except Exception:
        raise
    except BaseException as exc:  # a user-defined BaseException subclass
        raise UserCodeAbort(abort_text(exc, who)) from None


async def _in_own_task(awaitable: Awaitable[T], who: str, label: str) -> T:
    inner: asyncio.Future[T] = asyncio.ensure_future(guarded(awaitable, who))
    try:
        await asyncio.wait({inner})
    except asyncio.CancelledError:
        inner.cancel()
        done, _ = await asyncio.wait({inner}, timeout=CANCEL_GRACE)
        if not done:  # it swallowed its cancellation: leave it, say so, go on
            _LEFT_BEHIND.add(inner)
            inner.add_done_callback(_LEFT_BEHIND.discard)
            found = _ABANDONED.get()
            if found is not None:
                found.append(label)
        elif not inner.cancelled():
            inner.exception()  # retrieved: the caller reports the timeout
        raise
    return inner.result()


# ------------------------------------------------------------------------- tracebacks

#: characters of one traceback kept (the innermost frames and the exception last)
TRACEBACK_LIMIT = 8_000
#: tracebacks kept per turn, or per test case outside its turns
MAX_TRACEBACKS = 5
_HEAD = 1_500
"""Of a traceback cut to the limit: the characters kept from its start (the rest from its end)."""

_PACKAGE = str(Path(__file__).resolve().parent)


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib") if k in paths})


_STDLIB = _library_dirs()
_SITE = tuple(
    {str(Path(p).resolve()) for k in ("purelib", "platlib") if (p := sysconfig.get_paths().get(k))}
)


def _inside(filename: str, roots: tuple[str, ...]) -> bool:
    return any(filename == r or filename.startswith(r + "/") for r in roots)


def _ours(frame: traceback.FrameSummary) -> bool:
    return _inside(frame.filename, (_PACKAGE,))


def _stdlib(frame: traceback.FrameSummary) -> bool:
    name = frame.filename
    if name.startswith("<frozen "):
        return True
    return _inside(name, _STDLIB) and not _inside(name, _SITE)


def _trim(stack: traceback.StackSummary) -> traceback.StackSummary:
    """The user's frames: from the first frame that is neither ours nor the standard
    library's (asyncio, threading, concurrent.futures) on, without ours."""
    frames = list(stack)
    start = next((i for i, f in enumerate(frames) if not _ours(f) and not _stdlib(f)), None)
    if start is None:
        return traceback.StackSummary.from_list([])
    return traceback.StackSummary.from_list([f for f in frames[start:] if not _ours(f)])


def user_traceback(exc: BaseException) -> str | None:
    """``exc``'s traceback as Python prints it, the user's frames only, at most
    :data:`TRACEBACK_LIMIT` characters; None when no frame of it is the user's (the
    runner's own error, or a call that failed before the user's code ran)."""
    if isinstance(exc, UserCodeAbort) and exc.__context__ is not None:
        exc = exc.__context__  # sys.exit() & co: where the user's code called it
    try:
        summary = traceback.TracebackException.from_exception(exc, limit=None)
        seen: set[int] = set()
        pending = [summary]
        while pending:  # the chain (cause, context) and groups, each trimmed once
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            current.stack = _trim(current.stack)
            pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
            pending.extend(getattr(current, "exceptions", None) or ())
        if not summary.stack:
            return None
        text = "".join(summary.format()).rstrip("\n")
    except Exception:  # a traceback is a help, never a reason to fail a turn differently
        return None
    if len(text) > TRACEBACK_LIMIT:
        cut = len(text) - TRACEBACK_LIMIT
        tail = TRACEBACK_LIMIT - _HEAD
        text = f"{text[:_HEAD]}\n… [{cut:,} characters cut] …\n{text[-tail:]}"
    return text


class Tracebacks(list[tuple[str, str]]):
    """(where, traceback) of user code that raised, in order; at most MAX_TRACEBACKS."""

    dropped: int = 0
    """How many more were not kept."""


_TRACEBACKS: contextvars.ContextVar[Tracebacks | None] = contextvars.ContextVar(
    "multiturn_eval_tracebacks", default=None
)


@contextmanager
def collect_tracebacks() -> Iterator[Tracebacks]:
    """Collect the tracebacks user code leaves in this task (and the tasks it starts)."""
    found = Tracebacks()
    token = _TRACEBACKS.set(found)
    try:
        yield found
    finally:
        _TRACEBACKS.reset(token)


def note_traceback(where: str, exc: BaseException) -> None:
    """Keep where user code raised ``exc`` (``where``: "send()", "tool 'subtract'", ...)."""
    found = _TRACEBACKS.get()
    if found is None:
        return
    if len(found) >= MAX_TRACEBACKS:
        found.dropped += 1
        return
    text = user_traceback(exc)
    if text is not None:
        found.append((where, text))


# ---------------------------------------------------------------------- abandoned work

_ABANDONED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "multiturn_eval_abandoned", default=None
)


@contextmanager
def watch_abandoned() -> Iterator[list[str]]:
    """Collect the labels of sync calls left running in their thread (in this task)."""
    found: list[str] = []
    token = _ABANDONED.set(found)
    try:
        yield found
    finally:
        _ABANDONED.reset(token)


# ---------------------------------------------------------------------------- threads


@dataclass
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    context: contextvars.Context
    finished: threading.Event = field(default_factory=threading.Event)


class _Carried(Exception):
    """A BaseException from a thread (SystemExit, GeneratorExit...) on its way to the caller.

    asyncio gives some BaseExceptions special treatment when they are set on a
    future and thrown into a task; wrapped, they travel as an ordinary error.
    """

    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller gave up (timeout, interrupted run)
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class DaemonThreads:
    """Runs sync callables on daemon threads; a stuck call never blocks the next one.

    Up to ``keep_idle`` finished threads wait for more work; the rest exit.
    """

    def __init__(self, name: str, keep_idle: int = 32) -> None:
        self._name = name
        self._keep_idle = keep_idle
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Job | None]] = []
        self._started = 0
        self.abandoned = 0
        """Calls whose caller stopped waiting while they still ran."""

    @property
    def threads_started(self) -> int:
        return self._started

    async def run(self, fn: Callable[..., T], *args: Any, what: str) -> T:
        """Call ``fn(*args)`` on a thread; ``what`` names it if it is abandoned."""
        loop = asyncio.get_running_loop()
        job = _Job(fn, args, loop, loop.create_future(), contextvars.copy_context())
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self._started += 1
                number = self._started
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(
                target=self._serve, args=(inbox,), name=f"{self._name}-{number}", daemon=True
            )
            inbox.put(job)
            thread.start()
        else:
            inbox.put(job)
        try:
            result: T = await job.future
            return result
        except _Carried as carried:  # re-raised here, in this coroutine's own frame
            raise carried.exc from None
        except asyncio.CancelledError:
            if not job.finished.is_set():
                self.abandoned += 1
                found = _ABANDONED.get()
                if found is not None:
                    found.append(what)
            raise

    def _serve(self, inbox: queue.SimpleQueue[_Job | None]) -> None:
        while True:
            job = inbox.get()
            if job is None:
                return
            ok, value = True, None
            try:
                value = job.context.run(job.fn, *job.args)
            except Exception as exc:  # handed to the awaiting coroutine
                ok, value = False, exc
            except BaseException as exc:  # sys.exit() & co: carried, never set on a future as is
                ok, value = False, _Carried(exc)
            job.finished.set()
            # back in the idle list *before* the caller hears of the result, so its next
            # call finds this thread instead of starting another one
            with self._lock:
                park = len(self._idle) < self._keep_idle
                if park:
                    self._idle.append(inbox)
            # RuntimeError: the event loop is closed, nobody is waiting any more
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(_settle, job.future, ok, value)
            del job, value
            if not park:
                return


#: one pool for the whole process: agents' sync calls and sync graders
THREADS = DaemonThreads("user-code")


async def call_user_code(fn: Callable[..., Any], *args: Any, who: str, what: str) -> Any:
    """``fn(*args)`` through the guarded path: async awaited in its own task, sync on a
    daemon thread (:data:`THREADS`), an awaitable it returns awaited too.

    ``who`` words a non-error BaseException (``the {who} called sys.exit(0)``); ``what``
    names the call if it is left behind after its timeout (``async {what}`` for async
    code, which the case runner's warnings tell apart).
    """
    if inspect.iscoroutinefunction(fn):
        value = await guarded(fn(*args), who, abandon_as=f"async {what}")
    else:
        value = await guarded(THREADS.run(fn, *args, what=what), who)
    if inspect.isawaitable(value):
        value = await guarded(value, who, abandon_as=f"async {what}")
    return value
