"""The capped retry policy: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import asyncio
import email.utils
from typing import Any

import pytest

from multiturn_eval.errors import BackendError, FatalBackendError, TransientError
from multiturn_eval.retry import (
    RetryPolicy,
    current_deadline,
    parse_retry_after,
    request_timeout,
    retry_note,
    turn_deadline,
)
from multiturn_eval.suite import RetryConfig


class Clock:
    """Records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def script(*outcomes: Any) -> Any:
    """A call that raises/returns the given outcomes in order; counts the attempts."""
    queue = list(outcomes)
    state = {"calls": 0}

    async def call() -> Any:
        state["calls"] += 1
        item = queue.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    call.state = state  # type: ignore[attr-defined]
    return call


def translate(exc: Exception) -> BackendError:
    if isinstance(exc, ConnectionResetError):
        return TransientError(f"connection reset: {exc}")
    return BackendError(f"bug: {exc}")


def policy(clock: Clock, **config: Any) -> RetryPolicy:
    return RetryPolicy(RetryConfig(**config), sleep=clock.sleep, rand=lambda: 0.5)


def test_transient_errors_are_retried_with_exponential_full_jitter() -> None:
    clock = Clock()
    call = script(
        TransientError("HTTP 529", status_code=529),
        TransientError("HTTP 500", status_code=500),
        ConnectionResetError("peer"),
        "ok",
    )
    notes: list[str] = []
    result = asyncio.run(
        policy(clock, max_attempts=4, initial_delay=1, max_delay=3).run(
            call, translate, on_retry=lambda e, a, w: notes.append(retry_note(e, a, w))
        )
    )
    assert result == "ok"
    assert call.state["calls"] == 4
    # rand() = 0.5 of min(max_delay, 1 * 2**(n-1)): 0.5, 1.0, then capped at 3 -> 1.5
    assert clock.waits == [0.5, 1.0, 1.5]
    assert notes[0] == "attempt 1 failed (HTTP 529); retried after 0.50 s"
    assert notes[2].startswith("attempt 3 failed (connection reset: peer)")


def test_jitter_spans_zero_to_the_cap() -> None:
    low = RetryPolicy(RetryConfig(initial_delay=2, max_delay=10), rand=lambda: 0.0)
    high = RetryPolicy(RetryConfig(initial_delay=2, max_delay=10), rand=lambda: 1.0)
    assert [low.backoff(n) for n in (1, 2, 3, 4)] == [0, 0, 0, 0]
    assert [high.backoff(n) for n in (1, 2, 3, 4)] == [2, 4, 8, 10]


def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    clock = Clock()
    call = script(*(TransientError(f"HTTP 503 #{i}", status_code=503) for i in range(3)))
    with pytest.raises(TransientError) as info:
        asyncio.run(policy(clock, max_attempts=3).run(call, translate))
    assert str(info.value) == "HTTP 503 #2 (gave up after 3 attempts)"
    assert info.value.status_code == 503
    assert call.state["calls"] == 3
    assert len(clock.waits) == 2


def test_single_attempt_means_no_retry() -> None:
    clock = Clock()
    call = script(TransientError("HTTP 429"))
    with pytest.raises(TransientError, match=r"^HTTP 429$"):
        asyncio.run(policy(clock, max_attempts=1).run(call, translate))
    assert clock.waits == []


@pytest.mark.parametrize(
    "error",
    [
        BackendError("HTTP 400: bad request"),
        FatalBackendError("HTTP 401: invalid x-api-key"),
    ],
)
def test_non_retryable_errors_are_raised_at_once(error: BackendError) -> None:
    clock = Clock()
    call = script(error, "never")
    with pytest.raises(type(error)) as info:
        asyncio.run(policy(clock).run(call, translate))
    assert info.value is error
    assert str(info.value) == str(error)  # no "gave up" note on what was never retried
    assert call.state["calls"] == 1
    assert clock.waits == []


def test_other_exceptions_go_through_translate() -> None:
    clock = Clock()
    call = script(KeyError("x"))
    with pytest.raises(BackendError, match="bug: 'x'") as info:
        asyncio.run(policy(clock).run(call, translate))
    assert isinstance(info.value.__cause__, KeyError)


def test_retry_after_is_honoured_exactly() -> None:
    clock = Clock()
    call = script(TransientError("HTTP 429", retry_after=7.0, status_code=429), "ok")
    assert asyncio.run(policy(clock).run(call, translate)) == "ok"
    assert clock.waits == [7.0]


def test_retry_after_longer_than_the_cap_gives_up_at_once() -> None:
    clock = Clock()
    call = script(TransientError("HTTP 429: rate limited", retry_after=3600, status_code=429), "ok")
    with pytest.raises(TransientError) as info:
        asyncio.run(policy(clock, max_retry_after=60).run(call, translate))
    assert str(info.value) == (
        "HTTP 429: rate limited (the server asked to retry after 3600 s, longer than "
        "retry.max_retry_after = 60 s: not retried)"
    )
    assert clock.waits == []
    assert call.state["calls"] == 1


def test_cancellation_is_not_retried() -> None:
    clock = Clock()

    async def call() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(policy(clock).run(call, translate))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one wins
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0


# ------------------------------------------------------------- the turn's deadline


def run_in_turn(seconds: float, policy_: RetryPolicy, call: Any) -> BaseException | Any:
    async def main() -> Any:
        with turn_deadline(seconds):
            try:
                return await policy_.run(call, translate)
            except BackendError as exc:
                return exc

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        (2.0, "(not retried: waiting 2.00 s more would run past the turn's 0.5 s turn_timeout ("),
        (0.5, "(not retried: waiting 0.50 s more would run past the turn's 0.5 s turn_timeout ("),
        (60.0, "(not retried: waiting 60.00 s more would run past the turn's 0.5 s turn_timeout"),
    ],
)
def test_a_wait_that_would_outlive_the_turn_is_not_started(
    retry_after: float, expected: str
) -> None:
    clock = Clock()
    call = script(TransientError("HTTP 529", retry_after=retry_after), "never")
    failure = run_in_turn(0.5, policy(clock), call)
    assert isinstance(failure, TransientError)
    assert str(failure).startswith("HTTP 529 " + expected), str(failure)
    assert clock.waits == [] and call.state["calls"] == 1


def test_retries_inside_the_turn_then_gives_up_saying_it_was_retrying() -> None:
    clock = Clock()
    call = script(*[TransientError("HTTP 529", retry_after=w) for w in (1, 2, 30)], "never")
    failure = run_in_turn(10, policy(clock, max_attempts=10), call)
    assert clock.waits == [1, 2]  # the fake clock does not move the deadline: 30 s > 10 s left
    assert str(failure).startswith(
        "HTTP 529 (was retrying: gave up after 3 attempts, waiting 30.00 s more would run past "
        "the turn's 10 s turn_timeout ("
    )


def test_an_attempt_that_used_up_the_turn_is_not_retried() -> None:
    async def slow_failure() -> Any:
        await asyncio.sleep(0.05)
        raise TransientError("timed out")

    failure = run_in_turn(0.01, policy(Clock()), slow_failure)
    assert str(failure) == "timed out (not retried: the turn's 0.01 s turn_timeout is used up)"


def test_without_a_deadline_nothing_changes() -> None:
    clock = Clock()
    call = script(TransientError("HTTP 529", retry_after=50), "ok")
    assert asyncio.run(policy(clock).run(call, translate)) == "ok"
    assert clock.waits == [50]


def test_request_timeout_is_the_time_left_in_the_turn() -> None:
    assert request_timeout(30) == 30
    assert current_deadline() is None
    with turn_deadline(5) as deadline:
        assert deadline is not None and deadline.budget == 5
        assert 4 < request_timeout(30) <= 5
        assert request_timeout(2) == 2
        with turn_deadline(60):  # an enclosing, earlier deadline wins
            assert current_deadline() is deadline
        with turn_deadline(1):
            assert request_timeout(30) <= 1
    assert current_deadline() is None


def test_deadlines_of_concurrent_turns_do_not_mix() -> None:
    async def turn(seconds: float) -> float | None:
        with turn_deadline(seconds):
            await asyncio.sleep(0.01)
            deadline = current_deadline()
            return deadline.budget if deadline else None

    async def main() -> list[float | None]:
        return list(await asyncio.gather(turn(1), turn(7), turn(3)))

    assert asyncio.run(main()) == [1, 7, 3]
