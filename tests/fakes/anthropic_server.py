"""A fake Anthropic Messages API on 127.0.0.1, speaking the real wire format.

The real ``anthropic`` client talks to it over HTTP (``base_url`` = :attr:`FakeAnthropic.url`),
so tests prove the bytes on the wire, not a mock's idea of them.

``POST /v1/messages``: checked the way the real API checks it before the
model runs -- ``x-api-key`` or ``Authorization: Bearer`` (when the fake has a key; else a 401
``authentication_error``), ``anthropic-version``, a JSON body with ``model``,
``max_tokens`` and non-empty ``messages`` that start with a user turn, and
every ``tool_use`` of an assistant turn answered by a ``tool_result`` in the
very next user turn (else the API's 400 ``invalid_request_error``) -- so a
backend that builds a broken history fails its test.

Replies (scripted per test with :meth:`FakeAnthropic.script`, or decided by a
``responder(request)``): :class:`Message` (text and ``tool_use`` blocks,
``usage`` with the cache fields, a ``stop_reason``), :class:`ApiError` (any
status with Anthropic's error body, ``retry-after`` headers), and the generic
``Slow``, ``Drop``, ``Malformed``, ``Response`` of :mod:`tests.fakes._server`.

Run it standalone (the benchmark does, so the server's CPU is not counted as
the runner's)::

    python -m tests.fakes.anthropic_server --responder tool-then-answer
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.fakes._server import FakeServer, Request, Response, Wire, serve

__all__ = [
    "ApiError",
    "FakeAnthropic",
    "Message",
    "ToolUse",
    "Usage",
    "agreeable_judge",
    "context_too_long",
    "overloaded",
    "rate_limited",
    "server_error",
    "text",
    "tool_uses",
    "unauthorized",
    "verdict",
]

API_KEY = "sk-ant-test-key-0123456789"


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 10
    output_tokens: int = 5
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None

    def wire(self) -> dict[str, Any]:
        """The ``usage`` object: these fields by their API names, then the API's others."""
        return {**asdict(self), "server_tool_use": None, "service_tier": "standard"}


@dataclass(frozen=True)
class Message:
    """A 200 ``message``: optional text, then ``tool_use`` blocks."""

    text: str | None = None
    tool_uses: Sequence[ToolUse] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    """Default: ``tool_use`` when there are tool uses, else ``end_turn``."""


@dataclass(frozen=True)
class ApiError:
    """An error status with Anthropic's error body."""

    status: int
    type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


def text(content: str, usage: Usage | None = None, stop_reason: str | None = None) -> Message:
    return Message(text=content, usage=usage or Usage(), stop_reason=stop_reason)


def tool_uses(
    *uses: ToolUse | tuple[str, Mapping[str, Any]],
    text: str | None = None,
    usage: Usage | None = None,
) -> Message:
    items = [u if isinstance(u, ToolUse) else ToolUse(u[0], u[1]) for u in uses]
    return Message(text=text, tool_uses=items, usage=usage or Usage())


def rate_limited(retry_after: str | None = "0", retry_after_ms: str | None = None) -> ApiError:
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    return ApiError(
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per minute.",
        headers,
    )


def overloaded() -> ApiError:
    return ApiError(529, "overloaded_error", "Overloaded")


def server_error(status: int = 500) -> ApiError:
    return ApiError(status, "api_error", "Internal server error")


def unauthorized() -> ApiError:
    return ApiError(401, "authentication_error", "invalid x-api-key")


def context_too_long() -> ApiError:
    return ApiError(
        400, "invalid_request_error", "prompt is too long: 208573 tokens > 200000 maximum"
    )


def request_key(request: Request) -> str | None:
    """The key a request carries: ``x-api-key``, or ``Authorization: Bearer`` (SDK 2.x sends that)."""
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" else None


def _error(
    status: int, type_: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_fake"}
    return Response(status, body, headers={"request-id": "req_fake", **(headers or {})})


def _invalid(message: str) -> Response:
    return _error(400, "invalid_request_error", message)


def check_conversation(body: Any) -> str | None:
    """What the real API would reject with a 400 before running the model, or None."""
    if not isinstance(body, dict):
        return "There was an error parsing the body of your request"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    pending: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if not blocks:
            return f"messages.{i}: all messages must have non-empty content"
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if pending:
            if role != "user" or sorted(results) != sorted(pending):
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(pending)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        elif results:
            return (
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{results[0]}. Each `tool_result` block must have a corresponding `tool_use` block "
                "in the previous message."
            )
        pending = (
            [b["id"] for b in blocks if b.get("type") == "tool_use"] if role == "assistant" else []
        )
    if pending:
        return "messages: the last assistant message's `tool_use` blocks have no `tool_result`"
    return None


class FakeAnthropic(FakeServer):
    """The server: ``with FakeAnthropic() as fake: ... base_url=fake.url``."""

    name = "fake-anthropic"

    def __init__(self, responder: Any = None, *, api_key: str | None = API_KEY) -> None:
        super().__init__(responder)
        self.api_key = api_key
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()

    def messages_requests(self) -> list[Request]:
        """The requests that reached the model (POST /v1/messages with a valid key)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path == "/v1/messages"
                and (self.api_key is None or request_key(r) == self.api_key)
            ]

    def check(self, request: Request) -> Any | None:
        if request.method != "POST" or request.path != "/v1/messages":
            return _error(404, "not_found_error", f"Not found: {request.method} {request.path}")
        if self.api_key is not None and request_key(request) != self.api_key:
            return unauthorized()
        if "anthropic-version" not in request.headers:
            return _invalid("anthropic-version: header is required")
        problem = check_conversation(request.body)
        return _invalid(problem) if problem else None

    def no_reply(self, request: Request) -> Any:
        return server_error()

    def render(self, reply: Any, request: Request) -> Wire:
        if isinstance(reply, ApiError):
            return _error(reply.status, reply.type, reply.message, reply.headers)
        if isinstance(reply, Message):
            return Response(
                200, self.message_body(reply, request), headers={"request-id": "req_fake"}
            )
        return super().render(reply, request)

    def message_body(self, reply: Message, request: Request) -> dict[str, Any]:
        with self._id_lock:
            n = next(self._ids)
        content: list[dict[str, Any]] = []
        if reply.text is not None:
            content.append({"type": "text", "text": reply.text, "citations": None})
        for i, use in enumerate(reply.tool_uses):
            content.append(
                {
                    "type": "tool_use",
                    "id": use.id or f"toolu_{n:04d}_{i}",
                    "name": use.name,
                    "input": dict(use.input),
                }
            )
        stop = reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")
        return {
            "id": f"msg_fake_{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model", "claude-fake")
            if isinstance(request.body, dict)
            else "claude-fake",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": reply.usage.wire(),
        }


# ------------------------------------------------------------------------ responders


def last_user_blocks(request: Request) -> list[dict[str, Any]]:
    messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
    content = messages[-1].get("content") if messages else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def tool_then_answer(request: Request) -> Message:
    """Call the first offered tool for a new user message; answer with its result after."""
    blocks = last_user_blocks(request)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        content = results[0].get("content")
        value = content if isinstance(content, str) else json.dumps(content)
        return text(f"The answer is {value}.", Usage(120, 12, None, 100))
    tools = request.body.get("tools") or []
    if not tools:
        said = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        return text(f"You said: {said}", Usage(50, 8))
    name = tools[0]["name"]
    props = tools[0].get("input_schema", {}).get("properties", {})
    args = {k: 1 if v.get("type") in ("number", "integer") else "x" for k, v in props.items()}
    return tool_uses((name, args), usage=Usage(100, 20, 80, None))


def echo(request: Request) -> Message:
    """Reply with the user's text (no tools)."""
    said = " ".join(b.get("text", "") for b in last_user_blocks(request) if b.get("type") == "text")
    return text(said, Usage(10, 5))


def verdict(usage: Usage | None = None, **fields: Any) -> Message:
    """A judge's structured verdict: one forced ``record_verdict`` tool call with ``fields``."""
    return Message(tool_uses=[ToolUse("record_verdict", fields)], usage=usage or Usage(200, 30))


def judge_pass(request: Request) -> Message:
    """A judge that passes every reply (usage 200 in, 30 out)."""
    return verdict(verdict="pass", reason="The reply meets the rubric.")


def agreeable_judge(request: Request) -> Message:
    """A judge that agrees with every rubric on its scale: ``pass``, 5 of 1-5, 0.9 of 0-1."""
    required = request.body["tools"][0]["input_schema"]["required"]
    if required[0] == "verdict":
        return verdict(verdict="pass", reason="Meets the rubric.")
    schema = request.body["tools"][0]["input_schema"]["properties"]["score"]
    return verdict(score=5 if "enum" in schema else 0.9, reason="Meets the rubric.")


def user_turn(request: Request) -> Message:
    """A simulated user that never ends: one ``user_turn`` message per request (usage 900/40)."""
    fields = {"message": "my order is W123", "done": False, "outcome": None, "reason": None}
    return Message(tool_uses=[ToolUse("user_turn", fields)], usage=Usage(900, 40))


RESPONDERS = {
    "tool-then-answer": tool_then_answer,
    "echo": echo,
    "judge-pass": judge_pass,
    "user-turn": user_turn,
}


def main(argv: Sequence[str] | None = None) -> None:
    serve(FakeAnthropic, RESPONDERS, API_KEY, argv, __doc__)


if __name__ == "__main__":
    main()
