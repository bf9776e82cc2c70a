"""The chat backends as the contract tests see them (:mod:`tests.test_chat_backends`).

A :class:`Flavor` is one backend (``anthropic``, ``openai``, ``semantic-kernel``)
with its fake server: how its suite's ``agent:`` block reads, how a reply of its
API is scripted (tool calls, text, a cut-off or refused reply, error statuses),
how its requests are read back (a neutral transcript of the history each
request carries), and what its messages say. The tests are written once,
against this vocabulary; each backend's own wire details are here, in one
place per backend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from multiturn_eval.backends.anthropic import AnthropicBackend
from multiturn_eval.backends.openai import OpenAIBackend
from multiturn_eval.backends.semantic_kernel import SemanticKernelBackend
from tests import tool_funcs
from tests.backend_harness import CASES, TOOLS, Harness
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.fakes import openai_server as fo
from tests.fakes._server import Drop, Malformed, Request

INSTRUCTIONS = "You are a careful analyst.\n\nDocument about ACME."


@dataclass(frozen=True)
class U:
    """Token usage as the runner reports it: uncached input, output, cache reads and writes."""

    prompt: int = 10
    completion: int = 5
    cache_read: int = 0
    cache_write: int = 0


Call = tuple[str, Mapping[str, Any] | str]
Turn = tuple[str, str]
"""One entry of a neutral transcript: (``system`` | ``user`` | ``assistant`` | ``call`` |
``result``, its text or the tool's name)."""


class Flavor:
    """One chat backend and its fake server."""

    name: str
    api: str
    backend_class: type[Any]
    agent: str
    key: str
    prefix = ""
    """What the backend puts before a tool's name (Semantic Kernel's plugin)."""
    system_in_history = True
    """Whether the system prompt is the history's first message (else a field of its own)."""
    text_beside_calls = True
    """Whether a reply's text beside its tool calls goes back into the history."""
    results_in_call_order = True
    """Whether a round's tool results are answered in the order of the calls (else as they
    finish: Semantic Kernel runs a round's calls concurrently)."""
    price: tuple[float, float, float, float] | None
    """USD per million tokens of the agent's model: input, output, cache write, cache read."""

    def __str__(self) -> str:
        return self.name

    # ---------------------------------------------------------------- the fake
    fakes: ModuleType
    """The fake's module: its reply builders (``rate_limited``, ``server_error``, ``text``)."""
    fake_class: type[Any]
    key_variable: str
    """The variable the backend reads its API key from (and its base URL from, ``_KEY`` ->
    ``_BASE_URL``)."""

    def server(self, **kw: Any) -> Any:
        return self.fake_class(**kw)

    def env(self, fake: Any, key: str | None = None) -> dict[str, str]:
        url_variable = self.key_variable.removesuffix("_API_KEY") + "_BASE_URL"
        return {self.key_variable: key or self.key, url_variable: self.url(fake)}

    def url(self, fake: Any) -> str:
        """The fake's URL as the backend takes it."""
        return str(fake.client_url)

    def requests(self, fake: Any) -> list[Request]:
        """The requests that reached the model (a valid key)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- replies
    def calls(self, *calls: Call, usage: U | None = None, text: str | None = None) -> Any:
        raise NotImplementedError

    def text(self, content: str, usage: U | None = None) -> Any:
        raise NotImplementedError

    def cut_off(self, content: str) -> Any:
        raise NotImplementedError

    cut_off_warning: str

    def refusals(self) -> list[tuple[Any, str]]:
        """Replies that refuse, with the turn error each gives."""
        raise NotImplementedError

    def verdict(self, **fields: Any) -> Any:
        raise NotImplementedError

    def rate_limits(self) -> list[tuple[Any, float]]:
        """Two 429s with a retry-after, and the wait each asks for."""
        raise NotImplementedError

    rate_limit_warning: str

    def rate_limit_body(self) -> dict[str, Any]:
        """The JSON body of the first of :meth:`rate_limits` (as a recording would hold it)."""
        raise NotImplementedError

    def transients(self) -> list[Any]:
        raise NotImplementedError

    def capped(self) -> tuple[Any, int, str]:
        """A transient failure, its status, and the error after three attempts of it."""
        raise NotImplementedError

    def unauthorized(self, status: int) -> tuple[Any, str]:
        raise NotImplementedError

    def too_long(self) -> tuple[Any, str]:
        raise NotImplementedError

    def long_retry_after(self) -> Any:
        return self.fakes.rate_limited(retry_after="3600")

    missing_key: str
    unknown_model: str
    reply_kind: str
    """What the API's replies are called in a turn error about one that is not such a reply."""

    def bad_reply_error(self, url: str) -> str:
        """How the turn error about a reply from ``url`` that is not the API's begins."""
        return f"the {self.api} API at {url} returned a reply that is not a {self.reply_kind} response ("

    # ---------------------------------------------------------------- reading requests
    def transcript(self, request: Request) -> list[Turn]:
        """The history a request carries, neutral: [("system", ...), ("user", ...), ...]."""
        raise NotImplementedError

    def roles(self, request: Request) -> list[str]:
        """The roles of the request's messages, as the API sees them."""
        return [m["role"] for m in request.body["messages"]]

    def tool_results(self, request: Request) -> list[tuple[str, str, bool | None]]:
        """The last tool results a request carries: (call id, content, is_error or None)."""
        raise NotImplementedError

    def answers(self, request: Request) -> list[str]:
        """The contents of the last round's tool results, in the order of its calls."""
        by_id = {call_id: content for call_id, content, _ in self.tool_results(request)}
        ids = self.call_ids(request)
        results = self.tool_results(request)
        if self.results_in_call_order:
            assert [call_id for call_id, _, _ in results] == ids
        assert sorted(by_id) == sorted(ids)  # every call answered, once
        return [by_id[call_id] for call_id in ids]

    def call_ids(self, request: Request) -> list[str]:
        """The ids of the tool calls of the request's last assistant message."""
        raise NotImplementedError

    def assistant_entry(self, text: str) -> dict[str, Any]:
        """A final assistant reply as it goes back into the history."""
        raise NotImplementedError

    def user_entry(self, text: str) -> dict[str, Any]:
        """A user message without files as the history holds it."""
        raise NotImplementedError

    def check_final_request_without_tools(self, bodies: Sequence[dict[str, Any]]) -> None:
        """The last request asks for the final reply without tools; the others do not."""
        raise NotImplementedError

    def check_first_round_answers(self, request: Request) -> None:
        """Backend-specific checks of the request answering a round of parallel calls."""

    # ---------------------------------------------------------------- as a judge
    judge_model: str
    verdict_usage: tuple[int, int]
    """The usage (input, output tokens) of :meth:`verdict`."""
    judge_api: str
    """The API as the judge's messages name it."""
    not_a_reply: str
    """What a judge's error says of a body that is not this API's reply."""

    def check_judge_request(self, request: Request, scale: str) -> None:
        """A judge's request asks for ``scale``'s verdict and a reason in this API's structured
        form, at temperature 0 and 1,024 tokens at most."""
        raise NotImplementedError

    def judge(self, **retry: float) -> str:
        """A suite's ``judge:`` line: this backend and its judge model, retried at once."""
        settings = ", ".join(f"{k}: {v}" for k, v in {"initial_delay": 0, **retry}.items())
        return f"judge: {{backend: {self.name}, model: {self.judge_model}, retry: {{{settings}}}}}"

    # ---------------------------------------------------------------- through the CLI
    cli_model: str
    cli_price: tuple[float, float]

    def responder(self, answer: Callable[[Turn], tuple[str, Any, U]]) -> Callable[[Request], Any]:
        """A fake responder: ``answer(last turn)`` -> ("text", content, usage) or
        ("call", (name, args), usage), whatever order the requests come in."""

        def respond(request: Request) -> Any:
            kind, value, usage = answer(self.transcript(request)[-1])
            if kind == "call":
                return self.calls(value, usage=usage)
            return self.text(value, usage)

        return respond


# ------------------------------------------------------------------------- anthropic


class AnthropicFlavor(Flavor):
    name = "anthropic"
    api = "Anthropic"
    backend_class = AnthropicBackend
    fakes = fa
    fake_class = fa.FakeAnthropic
    key_variable = "ANTHROPIC_API_KEY"
    key = fa.API_KEY
    system_in_history = False
    agent = (
        "agent:\n  backend: anthropic\n  model: claude-sonnet-4-5-20250929\n"
        "  instructions: You are a careful analyst.\n  temperature: 0\n  max_tokens: 512\n" + TOOLS
    )
    # claude-sonnet-4-5-20250929 priced as claude-sonnet-4-5
    price = (3, 15, 3.75, 0.30)
    cut_off_warning = "the reply was cut off (stop_reason: max_tokens = 512)"
    rate_limit_warning = (
        "attempt 1 failed (Anthropic API error 429 rate_limit_error: This request would exceed "
        "the rate limit for your organization of 50 requests per minute.); retried after 7.00 s"
    )
    missing_key = (
        "suite.yaml:2 agent.api_key: no API key for the anthropic backend: set "
        "ANTHROPIC_API_KEY (or agent.api_key: ${SOME_VAR})"
    )
    unknown_model = "claude-unreleased-9"
    cli_model = "claude-haiku-4-5"
    judge_model = "claude-haiku-4-5"
    verdict_usage = (200, 30)
    judge_api = "Anthropic API"
    not_a_reply = "not a Messages API response"
    reply_kind = "Messages API"
    cli_price = (1, 5)  # Haiku 4.5: $1 input, $5 output per million tokens

    def requests(self, fake: Any) -> list[Request]:
        return list(fake.messages_requests())

    @staticmethod
    def usage(usage: U | None) -> fa.Usage:
        """``usage`` on the wire (none: the fake's default, as ``U()``)."""
        u = usage or U()
        return fa.Usage(u.prompt, u.completion, u.cache_write or None, u.cache_read or None)

    def calls(self, *calls: Call, usage: U | None = None, text: str | None = None) -> Any:
        uses = [fa.ToolUse(name, args) for name, args in calls]  # type: ignore[arg-type]
        return fa.tool_uses(*uses, text=text, usage=self.usage(usage))

    def text(self, content: str, usage: U | None = None) -> Any:
        return fa.text(content, self.usage(usage))

    def cut_off(self, content: str) -> Any:
        return fa.text(content, stop_reason="max_tokens")

    def verdict(self, **fields: Any) -> Any:
        """A judge's structured answer (the forced tool's input)."""
        return fa.verdict(fa.Usage(*self.verdict_usage), **fields)

    def check_judge_request(self, request: Request, scale: str) -> None:
        body = request.body
        # a forced tool whose schema is the scale's
        assert body["tool_choice"] == {"type": "tool", "name": "record_verdict"}
        (tool,) = body["tools"]
        schema = tool["input_schema"]
        key = "verdict" if scale == "pass_fail" else "score"
        assert schema["required"] == [key, "reason"] and schema["additionalProperties"] is False
        assert body["model"] == self.judge_model
        assert body["temperature"] == 0 and body["max_tokens"] == 1024

    def refusals(self) -> list[tuple[Any, str]]:
        return [
            (
                fa.text("I can't help with that.", stop_reason="refusal"),
                "the model refused to answer (stop_reason: refusal): I can't help with that.",
            )
        ]

    def rate_limits(self) -> list[tuple[Any, float]]:
        return [
            (fa.rate_limited(retry_after="7"), 7.0),
            (fa.rate_limited(retry_after=None, retry_after_ms="1500"), 1.5),
        ]

    def rate_limit_body(self) -> dict[str, Any]:
        limited = fa.rate_limited()
        return {"type": "error", "error": {"type": limited.type, "message": limited.message}}

    def transients(self) -> list[Any]:
        return [fa.overloaded(), fa.server_error(500), fa.server_error(503), Drop()]

    def capped(self) -> tuple[Any, int, str]:
        return (
            fa.overloaded(),
            529,
            "Anthropic API error 529 overloaded_error: Overloaded (gave up after 3 attempts)",
        )

    def unauthorized(self, status: int) -> tuple[Any, str]:
        if status == 401:
            reply, kind, message = fa.unauthorized(), "authentication_error", "invalid x-api-key"
        else:
            kind, message = "permission_error", "no access to this model"
            reply = fa.ApiError(403, kind, message)
        return reply, (
            f"the Anthropic API refused the credentials ({status} {kind}: {message}); "
            "check ANTHROPIC_API_KEY or agent.api_key"
        )

    def too_long(self) -> tuple[Any, str]:
        return fa.context_too_long(), (
            "the conversation no longer fits the model's context window (400 "
            "invalid_request_error: prompt is too long: 208573 tokens > 200000 maximum)"
        )

    def transcript(self, request: Request) -> list[Turn]:
        body = request.body
        out: list[Turn] = [("system", b["text"]) for b in body.get("system") or []]
        for message in body["messages"]:
            content = message["content"]
            for block in (
                content if isinstance(content, list) else [{"type": "text", "text": content}]
            ):
                kind = block["type"]
                if kind == "text":
                    out.append((message["role"], block["text"]))
                elif kind == "tool_use":
                    out.append(("call", block["name"]))
                elif kind == "tool_result":
                    out.append(("result", block.get("content", "")))
        return out

    def tool_results(self, request: Request) -> list[tuple[str, str, bool | None]]:
        last = request.body["messages"][-1]["content"]
        return [
            (b["tool_use_id"], b.get("content", ""), b.get("is_error", False))
            for b in last
            if b["type"] == "tool_result"
        ]

    def call_ids(self, request: Request) -> list[str]:
        assistant = [m for m in request.body["messages"] if m["role"] == "assistant"][-1]
        return [b["id"] for b in assistant["content"] if b["type"] == "tool_use"]

    def assistant_entry(self, text: str) -> dict[str, Any]:
        # the blocks go back as the API sent them
        return {"role": "assistant", "content": [{"type": "text", "text": text, "citations": None}]}

    def user_entry(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": text}]}

    def check_final_request_without_tools(self, bodies: Sequence[dict[str, Any]]) -> None:
        assert ["tool_choice" in b for b in bodies] == [False] * (len(bodies) - 1) + [True]
        assert bodies[-1]["tool_choice"] == {"type": "none"}

    def check_first_round_answers(self, request: Request) -> None:
        assert self.roles(request) == ["user", "assistant", "user"]
        assistant = request.body["messages"][1]["content"]
        assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
        results = request.body["messages"][2]["content"]
        assert [b["type"] for b in results] == ["tool_result", "tool_result"]
        assert all("is_error" not in b for b in results)


# ---------------------------------------------------------------------------- openai


class OpenAIFlavor(Flavor):
    name = "openai"
    api = "OpenAI"
    backend_class = OpenAIBackend
    fakes = fo
    fake_class = fo.FakeOpenAI
    key_variable = "OPENAI_API_KEY"
    key = fo.API_KEY
    agent = (
        "agent:\n  backend: openai\n  model: gpt-5.4-mini\n"
        "  instructions: You are a careful analyst.\n  temperature: 0\n  max_tokens: 512\n" + TOOLS
    )
    # gpt-5.4-mini from the price table: $0.75 input, $0.075 cached input, $4.50 output per
    # MTok; it has no cache-write price, so a reported write is priced as input
    price: tuple[float, float, float, float] | None = (0.75, 4.50, 0.75, 0.075)
    cut_off_warning = "the reply was cut off (finish_reason: length, max_tokens = 512)"
    rate_limit_warning = (
        "attempt 1 failed (OpenAI API error 429 rate_limit_exceeded: Rate limit reached for "
        "requests); retried after 7.00 s"
    )
    missing_key = (
        "suite.yaml:2 agent.api_key: no API key for the openai backend: set OPENAI_API_KEY (or "
        "agent.api_key: ${SOME_VAR}); a server at a custom base_url may need none"
    )
    key_hint = "OPENAI_API_KEY or agent.api_key"
    unknown_model = "llama3.1:8b"
    cli_model = "gpt-5-mini"
    judge_model = "gpt-judge-test"
    verdict_usage = (300, 40)
    judge_api = "OpenAI-compatible API"
    not_a_reply = "not a chat completion"
    reply_kind = "Chat Completions"
    cli_price = (0.25, 2.00)  # gpt-5-mini: $0.25 input, $2.00 output per million tokens

    def requests(self, fake: Any) -> list[Request]:
        return list(fake.chat_requests())

    @staticmethod
    def usage(usage: U | None) -> fo.Usage:
        """``usage`` on the wire (none: the fake's default, as ``U()``)."""
        u = usage or U()
        # OpenAI counts the cached input (read and written) inside prompt_tokens
        return fo.Usage(
            u.prompt + u.cache_read + u.cache_write,
            u.completion,
            cached_tokens=u.cache_read or None,
            cache_write_tokens=u.cache_write or None,
        )

    def calls(self, *calls: Call, usage: U | None = None, text: str | None = None) -> Any:
        tool_calls = [fo.ToolCall(self.prefix + name, args) for name, args in calls]
        return fo.calls(*tool_calls, usage=self.usage(usage), content=text)

    def text(self, content: str, usage: U | None = None) -> Any:
        return fo.text(content, self.usage(usage))

    def cut_off(self, content: str) -> Any:
        return fo.Completion(content=content, finish_reason="length")

    def verdict(self, **fields: Any) -> Any:
        """A judge's structured answer (the strict JSON schema's content)."""
        return fo.text(json.dumps(fields), fo.Usage(*self.verdict_usage))

    def check_judge_request(self, request: Request, scale: str) -> None:
        body = request.body
        # a strict JSON schema as the response format, the scale's
        schema = body["response_format"]
        assert schema["type"] == "json_schema" and schema["json_schema"]["strict"] is True
        properties = schema["json_schema"]["schema"]["properties"]
        assert set(properties) == {"verdict" if scale == "pass_fail" else "score", "reason"}
        assert schema["json_schema"]["schema"]["additionalProperties"] is False
        assert body["model"] == self.judge_model
        assert body["temperature"] == 0 and body["max_completion_tokens"] == 1024
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert request.headers["authorization"] == f"Bearer {fo.API_KEY}"

    def refusals(self) -> list[tuple[Any, str]]:
        return [
            (
                fo.Completion(refusal="I can't help with that."),
                "the model refused to answer: I can't help with that.",
            ),
            (
                fo.Completion(content="", finish_reason="content_filter"),
                "the service's content filter stopped the reply (finish_reason: content_filter)",
            ),
        ]

    def rate_limits(self) -> list[tuple[Any, float]]:
        return [(fo.rate_limited(retry_after="7"), 7.0), (fo.rate_limited(retry_after="1.5"), 1.5)]

    def rate_limit_body(self) -> dict[str, Any]:
        limited = fo.rate_limited()
        error = {"message": limited.message, "type": limited.type, "code": limited.code}
        return {"error": {**error, "param": None}}

    def transients(self) -> list[Any]:
        return [
            fo.server_error(500),
            fo.server_error(502),
            fo.server_error(503),
            fo.ErrorReply(408, "timeout", "timeout"),
            fo.ErrorReply(409, "conflict", "conflict"),
            fo.ErrorReply(529, "Overloaded"),
            fo.rate_limited(retry_after=None),
            Drop(),
        ]

    def capped(self) -> tuple[Any, int, str]:
        return (
            fo.server_error(503),
            503,
            "OpenAI API error 503 server_error: The server had an error while processing your "
            "request. (gave up after 3 attempts)",
        )

    def unauthorized(self, status: int) -> tuple[Any, str]:
        reply = fo.ErrorReply(
            status, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
        )
        return reply, (
            f"the OpenAI API refused the credentials ({status} invalid_api_key: Incorrect API key "
            f"provided); check {self.key_hint}"
        )

    def too_long(self) -> tuple[Any, str]:
        return fo.context_too_long(), (
            "the conversation no longer fits the model's context window (400 "
            "context_length_exceeded: This model's maximum context length is 128000 tokens. "
            "However, your messages resulted in 130000 tokens.)"
        )

    def transcript(self, request: Request) -> list[Turn]:
        out: list[Turn] = []
        for message in request.body["messages"]:
            role, content = message["role"], message.get("content")
            if role == "tool":
                out.append(("result", content))
                continue
            if isinstance(content, list):
                out.extend((role, p["text"]) for p in content if p.get("type") == "text")
            elif content:
                out.append((role, content))
            for call in message.get("tool_calls") or ():
                name = call["function"]["name"]
                out.append(("call", name.removeprefix(self.prefix)))
        return out

    def tool_results(self, request: Request) -> list[tuple[str, str, bool | None]]:
        messages = request.body["messages"]
        tail: list[dict[str, Any]] = []
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            tail.insert(0, message)
        return [(m["tool_call_id"], m["content"], None) for m in tail]

    def call_ids(self, request: Request) -> list[str]:
        assistant = [m for m in request.body["messages"] if m["role"] == "assistant"][-1]
        return [c["id"] for c in assistant["tool_calls"]]

    def assistant_entry(self, text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text}

    def user_entry(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def check_final_request_without_tools(self, bodies: Sequence[dict[str, Any]]) -> None:
        assert [b.get("tool_choice") for b in bodies] == [None] * (len(bodies) - 1) + ["none"]

    def check_first_round_answers(self, request: Request) -> None:
        assert self.roles(request) == ["system", "user", "assistant", "tool", "tool"]
        assistant = request.body["messages"][2]
        assert assistant["content"] == "Let me look both up."


# --------------------------------------------------------------------- semantic-kernel


class SemanticKernelFlavor(OpenAIFlavor):
    name = "semantic-kernel"
    backend_class = SemanticKernelBackend
    prefix = "tools-"
    agent = (
        "agent:\n  backend: semantic-kernel\n  service: openai\n  model: gpt-4o-mini\n"
        "  instructions: You are a careful analyst.\n  temperature: 0\n  max_tokens: 512\n" + TOOLS
    )
    # gpt-4o-mini from the price table: $0.15 input, $0.60 output, $0.075 cached input (a cache
    # write, which OpenAI does not report, is priced as input)
    price = (0.15, 0.60, 0.15, 0.075)
    text_beside_calls = False  # Semantic Kernel keeps the calls of such a reply only
    results_in_call_order = False
    missing_key = (
        "suite.yaml:3 agent.api_key: no API key for the semantic-kernel backend's 'openai' "
        "service: set OPENAI_API_KEY (or agent.api_key: ${SOME_VAR})"
    )
    key_hint = "agent.api_key or OPENAI_API_KEY"

    def rate_limits(self) -> list[tuple[Any, float]]:
        return [(fo.rate_limited(retry_after="7"), 7.0), (fo.rate_limited(retry_after="2"), 2.0)]

    def check_final_request_without_tools(self, bodies: Sequence[dict[str, Any]]) -> None:
        # Semantic Kernel drops the tools from the last request
        assert all("tools" in b for b in bodies[:-1])
        assert "tools" not in bodies[-1] and "tool_choice" not in bodies[-1]

    def check_first_round_answers(self, request: Request) -> None:
        assert self.roles(request) == ["system", "user", "assistant", "tool", "tool"]
        assert request.body["stream"] is False and request.body["tool_choice"] == "auto"


FLAVORS: list[Flavor] = [AnthropicFlavor(), OpenAIFlavor(), SemanticKernelFlavor()]


def fixtures(flavor: Flavor, agent: str | None = None) -> tuple[Any, Any]:
    """The ``fake`` and ``harness`` fixtures of a backend's own tests: its fake server, and a
    :class:`~tests.backend_harness.Harness` of ``agent`` (default: the flavor's) against it."""

    @pytest.fixture
    def fake() -> Iterator[Any]:
        with flavor.server() as server:
            yield server

    @pytest.fixture
    def harness(tmp_path: Path, fake: Any, monkeypatch: pytest.MonkeyPatch) -> Harness:
        monkeypatch.chdir(tmp_path)
        tool_funcs.reset()
        return Harness(tmp_path, flavor.backend_class, agent or flavor.agent, flavor.env(fake))

    return fake, harness


class FlavorHarness(Harness):
    """One flavor's backend built from a suite file, its fake server, and its requests."""

    def __init__(
        self, flavor: Flavor, tmp_path: Path, fake: Any, env: dict[str, str] | None = None
    ) -> None:
        super().__init__(tmp_path, flavor.backend_class, flavor.agent, env or flavor.env(fake))
        self.flavor = flavor
        self.fake = fake

    def script(self, *replies: Any) -> None:
        self.fake.script(*replies)

    @property
    def requests(self) -> list[Any]:
        return self.flavor.requests(self.fake)


H = TypeVar("H", bound=FlavorHarness)


def flavored(harness: Callable[[Flavor, Path, Any], H], name: str) -> Any:
    """A fixture ``name``: ``harness(flavor, tmp_path, fake)`` on the test's ``flavor`` parameter
    (its fake server running, the test in ``tmp_path``, the test tools' calls forgotten)."""

    @pytest.fixture(name=name)
    def fixture(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> Iterator[H]:
        flavor: Flavor = request.node.callspec.params["flavor"]
        monkeypatch.chdir(tmp_path)
        tool_funcs.reset()
        with flavor.server() as fake:
            yield harness(flavor, tmp_path, fake)

    return fixture


def judge_fixtures(flavor: Flavor | None = None) -> tuple[Any, Any]:
    """The ``fake`` and ``judged`` fixtures of the judge tests: the fake server of ``flavor``
    (none: of the test's ``flavor`` parameter), and the project with its judge on the fake --
    every test runs on both SDK transports."""

    def flavor_of(request: pytest.FixtureRequest) -> Flavor:
        return flavor or request.node.callspec.params["flavor"]

    @pytest.fixture
    def fake(request: pytest.FixtureRequest) -> Iterator[Any]:
        with flavor_of(request).server() as server:
            yield server

    @pytest.fixture(params=["auto", "httpx"], ids=["aiohttp", "httpx"])
    def judged(
        project: Project, fake: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
    ) -> Project:
        from multiturn_eval.grading.judges import clients

        monkeypatch.setattr(clients, "TRANSPORT", request.param)
        project.env.update(flavor_of(request).env(fake))
        return project

    return fake, judged


#: the judge evaluation of the judge tests' suites
POLITE = "{type: judge, rubric: The reply is polite.}"


def check_an_unusable_verdict(
    judged: Project, fake: Any, flavor: Flavor, suite: str, reply: Any, why: str
) -> None:
    """``reply``, the judge's answer on a run of ``suite``, is a metric error saying ``why``:
    never a pass, no traceback, not retried (the reply came; it is just unusable)."""
    fake.script(reply)
    judged.write("suite.yaml", suite)
    result = judged.run("run", "suite.yaml")
    assert result.code == 1, result.out + result.err
    got = result.report["results"][0]["turns"][0]["metric_results"][0]
    assert got["passed"] is False and got["score"] is None
    assert why in got["error"], got["error"]
    assert "Traceback" not in result.err
    assert len(flavor.requests(fake)) == 1
    assert result.report["results"][0]["outcome"] == "failed"


def judge_suite(
    evaluation: str = POLITE,
    *,
    top: str,
    case_judge: str = "",
    turn_judge: str = "",
    replies: tuple[str, ...] = ("Hello there, happy to help.",),
    ground_truth: str | None = None,
    cases: int = 1,
    same_reply: bool = True,
) -> str:
    """A suite of the scripted python agent and ``evaluation``: ``top`` is its judge line(s),
    ``case_judge``/``turn_judge`` each test case's and turn's ``judge:``, ``replies`` the
    agent's (one turn each; ``same_reply=False``: each case's own), ``ground_truth`` every
    turn's."""
    lines = [
        "agent:",
        "  backend: python",
        "  factory: tests.agents:scripted",
        top,
        "evaluations:",
        f"  - {evaluation}",
        "test_cases:",
    ]
    for c in range(cases):
        script = [{"response": reply if same_reply else f"{reply} ({c})"} for reply in replies]
        lines += [f"  - name: case{c}", f"    context: {{script: {json.dumps(script)}}}"]
        if case_judge:
            lines.append(f"    judge: {case_judge}")
        lines.append("    turns:")
        for t in range(len(replies)):
            lines.append(f"      - input: question {t}")
            if ground_truth is not None:
                lines.append(f"        ground_truth: {json.dumps(ground_truth)}")
            if turn_judge:
                lines.append(f"        judge: {turn_judge}")
    return "\n".join(lines) + "\n"


def cli_suite(flavor: Flavor) -> str:
    """A two-turn suite for a CLI run of ``flavor`` (its CLI model, two tools, checks)."""
    model = flavor.agent.split("model: ")[1].split("\n")[0]
    header = flavor.agent.split("  instructions:")[0].replace(model, flavor.cli_model)
    return header + CLI_TAIL


#: the two-turn test case of the CLI runs: look the revenue up, then subtract the cost
CLI_CASES = """\
test_cases:
  - name: revenue
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
        ground_truth: "206588"
        expected_tools:
          - {name: lookup, args: {key: revenue}}
      - input: and minus the cost?
        ground_truth: "25587"
        expected_tools:
          - {name: subtract, args: {a: 206588, b: {fuzzy: "181,001"}}}
"""

CLI_TAIL = (
    """\
  instructions: Answer with numbers.
  tools:
    - function: tests.tool_funcs:lookup
    - function: tests.tool_funcs:subtract
evaluations:
  - {type: standard, metric: numeric, absolute_tolerance: 0.5}
"""
    + CLI_CASES
)


def fenced(prompt: str, label: str) -> str | None:
    """The text inside the data fence labelled ``label`` (the judges' and the simulated users'
    :func:`~multiturn_eval.grading.judges.prompt.data_block`), as a careful reader finds it."""
    start = prompt.find(f"=== DATA: {label}")
    if start < 0:
        return None
    rest = prompt[prompt.index("\n", start) + 1 :]
    fence = re.match(r"`{3,}", rest)
    assert fence is not None
    body_start = rest.index("\n") + 1
    end = rest.find("\n" + fence.group(0) + "\n", body_start)
    return rest[body_start:end] if end >= 0 else None


__all__ = [
    "CASES",
    "FLAVORS",
    "INSTRUCTIONS",
    "Flavor",
    "Malformed",
    "U",
    "cli_suite",
    "fenced",
    "fixtures",
    "judge_fixtures",
]
