"""Helpers for the fixtures tests: a suite's fixtures in a temporary folder, a fixed clock."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from multiturn_eval.fixtures import SuiteFixtures, canonical_request
from multiturn_eval.fixtures.canonical import Body, CanonicalRequest
from multiturn_eval.fixtures.cassette import Cassette, Live, Mode, Replay
from multiturn_eval.fixtures.format import RecordedResponse, Side

T0 = datetime(2025, 6, 1, 9, 30, tzinfo=UTC)


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


def suite_fixtures(
    root: Path,
    mode: Mode,
    names: Sequence[str] = ("refund flow",),
    *,
    clock: Clock | None = None,
    live: bool = True,
    secrets: Sequence[str] = (),
    repeat: int = 1,
    source: str = "recorded against a fake server in the tests",
) -> SuiteFixtures:
    return SuiteFixtures(
        mode=mode,
        root=root,
        suite_file=Path("suites/support.yaml"),
        suite_shown="suites/support.yaml",
        case_names=names,
        live=live,
        secrets=secrets,
        repeat=repeat,
        version="9.9.9",
        source=source,
        clock=clock or Clock(),
        shown_root="fixtures",
    )


def anthropic_body(
    *messages: str | Mapping[str, Any],
    model: str = "claude-test",
    system: str = "You are a support agent.",
    tools: Sequence[Mapping[str, Any]] = (),
    **params: Any,
) -> dict[str, Any]:
    """A Messages API request body; plain strings alternate user / assistant turns."""
    history = [
        m
        if not isinstance(m, str)
        else {"role": "user" if i % 2 == 0 else "assistant", "content": m}
        for i, m in enumerate(messages)
    ]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 256,
        "system": system,
        "messages": history,
    }
    if tools:
        body["tools"] = list(tools)
    body.update(params)
    return body


def request(body: Any, path: str = "/v1/messages") -> CanonicalRequest:
    return canonical_request("POST", path, body)


def reply(text: str, status: int = 200) -> RecordedResponse:
    return RecordedResponse(
        status, Body("json", {"type": "message", "content": [{"type": "text", "text": text}]})
    )


def call(
    cassette: Cassette,
    side: Side,
    body: Any,
    answer: Callable[[], RecordedResponse] | RecordedResponse | None = None,
    path: str = "/v1/messages",
) -> Any:
    """One call through the cassette: the recorded or live answer, or the Miss."""
    decision = cassette.begin(side, cassette.canonical("POST", path, body))
    if isinstance(decision, Replay):
        return decision.call.response
    if isinstance(decision, Live):
        response = answer() if callable(answer) else answer
        assert response is not None, "a live call in a test that gave no live answer"
        cassette.complete(decision.slot, response)
        return response
    return decision


def text_of(response: Any) -> str:
    assert isinstance(response, RecordedResponse), response
    return str(response.body.value["content"][0]["text"])


@contextmanager
def no_network() -> Iterator[list[Any]]:
    """Every outgoing connection attempt fails the test (and is listed)."""
    attempts: list[Any] = []
    original = socket.socket.connect
    original_ex = socket.socket.connect_ex

    def refuse(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        raise AssertionError(f"a connection was attempted in replay: {address}")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]
        socket.socket.connect_ex = original_ex  # type: ignore[method-assign]


def openai_sse(words: list[str]) -> bytes:
    """A Chat Completions stream of ``words`` as the API sends it (server-sent events)."""
    chunks = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}],
        }
        for w in words
    ]
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
