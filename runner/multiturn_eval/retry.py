"""The capped retry policy every remote backend uses (SPEC 6.2).

SDKs' own retries are switched off (the anthropic SDK, for one, obeys any
``retry-after``, even an hour). Instead each backend translates a failure into
a :class:`~multiturn_eval.errors.BackendError` in one place and hands it to
:meth:`RetryPolicy.run`, which retries the ones marked ``retryable`` (429,
529, 5xx, connection errors, timeouts of one request):

* at most ``RetryConfig.max_attempts`` attempts in all (default 4);
* between attempts, exponential backoff with full jitter: a random wait in
  ``[0, min(max_delay, initial_delay * 2 ** (attempt - 1))]``;
* a server's ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) is
  honoured exactly when it is at most ``RetryConfig.max_retry_after``
  (default 60 s); a longer one gives up at once with a clear error rather
  than sleep through the run;
* when the attempts run out the last error is raised, its message saying how
  many attempts were made.

The whole turn stays bounded by ``turn_timeout``: the engine cancels a turn
that runs past it (``asyncio.timeout`` around ``session.send``), sleeping
included. On top of that the policy knows the turn's deadline, so a retry
never *plans* to outlive the turn: each backend's session opens a
:func:`turn_deadline` (from the ``turn_timeout`` the backend was built with)
around its ``send``, and

* a back-off or ``retry-after`` wait that would end at or after the deadline
  is not started: the last error is raised at once, saying that it was being
  retried and that the turn's time is up (rather than the bare "timed out"
  the engine would record a few seconds later);
* :func:`request_timeout` gives each attempt's HTTP timeout as the time left
  in the turn (never more than the backend's own per-request timeout).

The deadline is a ``ContextVar``, so tasks a backend (or Semantic Kernel)
starts inside ``send`` see it, and parallel test cases never see each
other's. Sleeping and randomness are injectable, so tests neither wait nor
depend on luck.

Backends::

    policy = RetryPolicy(agent.retry)
    reply = await policy.run(lambda: client.call(...), translate, on_retry=notes.append)

where ``translate(exc) -> BackendError`` is the backend's single exception
mapping; it marks transient failures ``retryable`` and may return a
:class:`TransientError` carrying the server's ``retry_after``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from .errors import BackendError
from .suite import RetryConfig

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]
#: called before each wait with the error, the attempt that failed (1-based) and the wait
OnRetry = Callable[[BackendError, int, float], None]


@dataclass(frozen=True)
class Deadline:
    """When the current turn must end: ``when`` on the clock ``time.monotonic``."""

    when: float
    budget: float
    """The turn's ``turn_timeout`` in seconds (for messages)."""

    def remaining(self) -> float:
        return self.when - time.monotonic()


_DEADLINE: ContextVar[Deadline | None] = ContextVar("multiturn_eval_turn_deadline", default=None)


@contextlib.contextmanager
def turn_deadline(seconds: float | None) -> Iterator[Deadline | None]:
    """The turn that runs inside this block ends ``seconds`` from now (None: unbounded).

    A deadline already set (an enclosing turn) is kept when it is earlier.
    """
    current = _DEADLINE.get()
    if seconds is None:
        yield current
        return
    deadline = Deadline(time.monotonic() + seconds, seconds)
    if current is not None and current.when <= deadline.when:
        deadline = current
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the turn being sent, if a backend set one."""
    return _DEADLINE.get()


#: the shortest HTTP timeout handed to an attempt (an already-past deadline still gets a try)
MIN_REQUEST_TIMEOUT = 0.01


def request_timeout(default: float) -> float:
    """Seconds one HTTP attempt may take: ``default``, or less when the turn ends sooner."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return default
    return max(MIN_REQUEST_TIMEOUT, min(default, deadline.remaining()))


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date).

    ``headers`` is any case-insensitive mapping (httpx.Headers) or a plain
    mapping with lower-case keys. None when absent or unreadable.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if seconds >= 0 else None


def _with_suffix(error: BackendError, suffix: str) -> BackendError:
    error.args = (f"{error}{suffix}", *error.args[1:])
    return error


class RetryPolicy:
    """Runs one request with capped retries of transient failures."""

    def __init__(
        self,
        config: RetryConfig | None = None,
        *,
        sleep: Sleep | None = None,
        rand: Callable[[], float] | None = None,
    ) -> None:
        self.config = config or RetryConfig()
        self._sleep: Sleep = sleep or asyncio.sleep
        self._rand = rand or random.random

    def backoff(self, attempt: int) -> float:
        """Full-jitter wait after the ``attempt``-th (1-based) failed attempt."""
        cap = min(self.config.max_delay, self.config.initial_delay * 2.0 ** (attempt - 1))
        return self._rand() * cap

    async def run(
        self,
        call: Callable[[], Awaitable[T]],
        translate: Callable[[Exception], BackendError],
        *,
        on_retry: OnRetry | None = None,
    ) -> T:
        """Await ``call()``, retrying transient failures; raise the final BackendError.

        Within a :func:`turn_deadline` no wait is started that would end past it.
        """
        attempts = self.config.max_attempts
        attempt = 1
        while True:
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc if isinstance(exc, BackendError) else translate(exc)
                if error is not exc:
                    error.__cause__ = exc
                if not error.retryable:
                    raise error from error.__cause__
                retry_after = getattr(error, "retry_after", None)
                if retry_after is not None and retry_after > self.config.max_retry_after:
                    raise _with_suffix(
                        error,
                        f" (the server asked to retry after {retry_after:g} s, longer than "
                        f"retry.max_retry_after = {self.config.max_retry_after:g} s: not retried)",
                    ) from error.__cause__
                if attempt >= attempts:
                    if attempts > 1:
                        _with_suffix(error, f" (gave up after {attempts} attempts)")
                    raise error from error.__cause__
                wait = retry_after if retry_after is not None else self.backoff(attempt)
                late = _past_deadline(wait)
                if late is not None:
                    raise _with_suffix(
                        error,
                        f" (not retried: {late})"
                        if attempt == 1
                        else f" (was retrying: gave up after {attempt} attempts, {late})",
                    ) from error.__cause__
                if on_retry is not None:
                    on_retry(error, attempt, wait)
                await self._sleep(wait)
                attempt += 1


def _past_deadline(wait: float) -> str | None:
    """Why a wait of ``wait`` seconds cannot be started in this turn, or None when it can."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    left = deadline.remaining()
    if wait < left:
        return None
    if left <= 0:
        return f"the turn's {deadline.budget:g} s turn_timeout is used up"
    return (
        f"waiting {wait:.2f} s more would run past the turn's {deadline.budget:g} s "
        f"turn_timeout ({left:.2f} s left)"
    )


def retry_note(error: BackendError, attempt: int, wait: float) -> str:
    """A one-line warning for a turn that needed a retry."""
    return f"attempt {attempt} failed ({error}); retried after {wait:.2f} s"
