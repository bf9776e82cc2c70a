"""A fake OpenAI chat-completions server on 127.0.0.1, speaking the real wire format.

The real ``openai`` client (and Semantic Kernel on top of it) talks to it over
HTTP, so the tests prove the bytes on the wire, not a mock's idea of them.

Endpoints:

- ``POST /v1/chat/completions`` (OpenAI, and OpenAI-compatible servers such
  as Ollama or vLLM): ``Authorization: Bearer <key>``;
- ``POST /openai/deployments/{deployment}/chat/completions?api-version=...``
  (Azure OpenAI): ``api-key: <key>`` header, ``api-version`` required.

Each request is checked the way the real service checks it (a JSON body with
``model`` and ``messages``; every assistant ``tool_calls`` entry answered by a
``tool`` message before the conversation goes on; the key, when the server
has one) and a violation gets OpenAI's 400/401 error shape, so a client that
builds a wrong conversation fails the test. Every request is recorded.

What the server answers is scripted per test: :meth:`FakeOpenAI.script`
queues replies, consumed one per request in order; when the queue is empty a
``responder`` callable (request -> reply) decides, which lets concurrent
sessions (and the benchmark) get answers that depend on their own history.

Replies: :class:`Completion` (text and/or several ``tool_calls``, ``usage``
with ``prompt_tokens_details.cached_tokens``, a ``finish_reason``, a
``refusal``), :class:`ErrorReply` (any status, OpenAI's error body,
``retry-after``), and the generic ones of :mod:`tests.fakes._server`:
``Slow`` (wait, then answer: slower than a timeout), ``Drop`` (close the
connection without answering), ``Malformed`` (200 with a body that is not
JSON), ``Response`` (anything verbatim).

Run it standalone (the benchmark does, so its CPU is not the runner's)::

    python -m tests.fakes.openai_server --responder tool-then-answer
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from tests.fakes._server import Drop, FakeServer, Malformed, Request, Response, Slow, Wire, serve

__all__ = [
    "API_KEY",
    "Completion",
    "ErrorReply",
    "FakeOpenAI",
    "ToolCall",
    "Usage",
    "calls",
    "context_too_long",
    "rate_limited",
    "server_error",
    "text",
    "unauthorized",
]

API_KEY = "sk-test-openai-0123456789"

# ------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class ToolCall:
    """One entry of ``message.tool_calls``; ``arguments`` is JSON-encoded unless already a string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int | None = None
    """``prompt_tokens_details.cached_tokens`` (included in ``prompt_tokens``, as OpenAI counts)."""
    cache_write_tokens: int | None = None
    """``prompt_tokens_details.cache_write_tokens`` (included in ``prompt_tokens`` too)."""
    reasoning_tokens: int | None = None
    """``completion_tokens_details.reasoning_tokens`` (included in ``completion_tokens``)."""

    def wire(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        details: dict[str, Any] = {}
        if self.cached_tokens is not None:
            details.update(cached_tokens=self.cached_tokens, audio_tokens=0)
        if self.cache_write_tokens is not None:
            details["cache_write_tokens"] = self.cache_write_tokens
        if details:
            data["prompt_tokens_details"] = details
        if self.reasoning_tokens is not None:
            data["completion_tokens_details"] = {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            }
        return data


@dataclass(frozen=True)
class Completion:
    """A 200 chat completion with one choice."""

    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    usage: Usage | None = field(default_factory=Usage)
    finish_reason: str | None = None
    """Default: ``tool_calls`` when there are tool calls, else ``stop``."""
    refusal: str | None = None


@dataclass(frozen=True)
class ErrorReply:
    """An error status with OpenAI's error body."""

    status: int
    message: str = "error"
    type: str = "api_error"
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


Reply: TypeAlias = Completion | ErrorReply | Slow | Drop | Malformed | Response


def text(content: str, usage: Usage | None = None, **kw: Any) -> Completion:
    return Completion(content=content, usage=usage or Usage(), **kw)


def calls(
    *tool_calls: ToolCall, usage: Usage | None = None, content: str | None = None
) -> Completion:
    return Completion(content=content, tool_calls=tool_calls, usage=usage or Usage())


def rate_limited(
    retry_after: str | None = "0", message: str = "Rate limit reached for requests"
) -> ErrorReply:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return ErrorReply(429, message, "requests", "rate_limit_exceeded", headers)


def server_error(
    status: int = 500, message: str = "The server had an error while processing your request."
) -> ErrorReply:
    return ErrorReply(status, message, "server_error")


def unauthorized(message: str = "Incorrect API key provided") -> ErrorReply:
    return ErrorReply(401, message, "invalid_request_error", "invalid_api_key")


def context_too_long() -> ErrorReply:
    return ErrorReply(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "invalid_request_error",
        "context_length_exceeded",
    )


def _error(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return Response(status, body, headers={"x-request-id": "req_fake", **(headers or {})})


# ------------------------------------------------------------------------ requests


def messages_of(request: Request) -> list[dict[str, Any]]:
    body = request.body
    messages = body.get("messages") if isinstance(body, dict) else None
    return list(messages) if isinstance(messages, list) else []


def azure_deployment(request: Request) -> str | None:
    """The deployment of an Azure path ``/openai/deployments/{deployment}/chat/completions``."""
    parts = request.path.strip("/").split("/")
    if (
        len(parts) == 5
        and parts[:2] == ["openai", "deployments"]
        and parts[3:] == ["chat", "completions"]
    ):
        return parts[2]
    return None


def request_key(request: Request) -> str | None:
    """The key a request carries: Azure's ``api-key`` header, else ``Authorization: Bearer``."""
    if azure_deployment(request) is not None:
        return request.headers.get("api-key")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" else None


def check_conversation(body: Any) -> str | None:
    """What the real API would reject with a 400 before running the model, or None."""
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'"
    pending: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value for 'messages[{i}].role'."
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{i}].tool_call_id={call_id!r})."
                )
            pending.remove(call_id)
            if not isinstance(message.get("content"), str):
                return f"Invalid type for 'messages[{i}].content': expected a string."
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding "
                "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                + ", ".join(pending)
            )
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
                    return (
                        f"Invalid type for 'messages[{i}].tool_calls': arguments must be a string."
                    )
                pending.append(call["id"])
    if pending:
        return "An assistant message with 'tool_calls' must be followed by tool messages."
    return None


# -------------------------------------------------------------------------- server


class FakeOpenAI(FakeServer):
    """The server: ``with FakeOpenAI() as fake: ... base_url=fake.base_url``."""

    name = "fake-openai"

    def __init__(
        self, responder: Callable[[Request], Any] | None = None, *, api_key: str | None = API_KEY
    ) -> None:
        super().__init__(responder)
        self.api_key = api_key
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return f"{self.url}/v1"

    client_url = base_url

    @property
    def azure_endpoint(self) -> str:
        return self.url

    def chat_requests(self) -> list[Request]:
        """The requests that reached the model (a chat-completions path, a valid key)."""
        with self._lock:
            requests = list(self.requests)
        return [r for r in requests if self.check(r) is None]

    def check(self, request: Request) -> Any | None:
        azure = azure_deployment(request) is not None
        if request.method != "POST" or not (
            azure or request.path.rstrip("/") == "/v1/chat/completions"
        ):
            return _error(
                404, f"Invalid URL ({request.method} {request.path})", "invalid_request_error"
            )
        if azure and "api-version" not in request.query:
            return _error(404, "Resource not found", "invalid_request_error", "404")
        if self.api_key is not None and request_key(request) != self.api_key:
            return unauthorized()
        problem = check_conversation(request.body)
        return _error(400, problem, "invalid_request_error") if problem else None

    def no_reply(self, request: Request) -> Any:
        return server_error(message="fake server: no scripted reply left for this request")

    def render(self, reply: Any, request: Request) -> Wire:
        if isinstance(reply, ErrorReply):
            return _error(reply.status, reply.message, reply.type, reply.code, reply.headers)
        if isinstance(reply, Completion):
            return Response(
                200, self.completion_body(reply, request), headers={"x-request-id": "req_fake"}
            )
        return super().render(reply, request)

    def completion_body(self, reply: Completion, request: Request) -> dict[str, Any]:
        with self._id_lock:
            n = next(self._ids)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.content,
            "refusal": reply.refusal,
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{n}_{i}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(dict(call.arguments)),
                    },
                }
                for i, call in enumerate(reply.tool_calls)
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        model = request.body.get("model") if isinstance(request.body, dict) else None
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": azure_deployment(request) or model or "gpt-fake",
            "system_fingerprint": "fp_fake",
            "service_tier": "default",
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
        }
        if reply.usage is not None:
            body["usage"] = reply.usage.wire()
        return body


# ----------------------------------------------------------------------- responders


def tool_then_answer(request: Request) -> Completion:
    """Call the first offered tool for a new user message; answer with its result after.

    Numeric arguments are 1, strings "x" (as the anthropic fake's responder);
    usage is fixed: 100 in (80 of them cached) and 20 out for the call, 120 in
    and 12 out for the answer.
    """
    messages = messages_of(request)
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return text(f"The answer is {last.get('content')}.", Usage(120, 12))
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    if not tools:
        return text(f"You said: {last.get('content')}", Usage(50, 8))
    function = tools[0]["function"]
    props = function.get("parameters", {}).get("properties", {})
    args = {k: 1 if v.get("type") in ("number", "integer") else "x" for k, v in props.items()}
    return calls(ToolCall(function["name"], args), usage=Usage(100, 20, 80))


def echo(request: Request) -> Completion:
    """Reply with the user's text (no tools)."""
    messages = messages_of(request)
    return text(str(messages[-1].get("content") if messages else ""))


RESPONDERS = {"tool-then-answer": tool_then_answer, "echo": echo}


def main(argv: Sequence[str] | None = None) -> None:
    serve(FakeOpenAI, RESPONDERS, API_KEY, argv, __doc__)


if __name__ == "__main__":
    main()
