"""OpenAI Chat Completions (OpenAI, Azure OpenAI, any compatible server) as a :class:`~.chat.Dialect`.

Used by the ``openai`` backend, the ``openai`` judges and Semantic Kernel's
``service: openai`` / ``azure-openai`` (which share the error translation,
:func:`usage_from`, :func:`check` and the stop reasons of this module). It imports no
SDK: ``openai`` is imported when :func:`sdk_client` builds the client, on the first request
that goes out (a run whose every call the fixtures answer never imports it).

* **The wire check** (:func:`check`): a 200 must hold
  exactly one entry in ``choices`` (the runner asks for one), its ``message``
  an object whose ``content`` and ``refusal`` are strings or null and whose
  ``tool_calls`` (at most :data:`~multiturn_eval.backends.wire.MAX_ITEMS`)
  each have a string ``id`` and a ``function`` with a string ``name`` and
  string ``arguments``; ``finish_reason`` a string or null; ``usage``, when
  present, whole token counts.
* **Replies**: a reply holding ``tool_calls`` asks for them to be run, each
  answered by a ``tool`` message. A call of a tool the suite does not offer,
  or ``arguments`` that are not a JSON object, refuses the whole reply (the
  turn fails saying so, no tool of it runs): OpenAI-compatible servers (vLLM,
  Ollama) pass on what the model wrote, unchecked.
* **Stop reasons**: a ``refusal`` or ``finish_reason: content_filter`` fails
  the turn; ``length`` keeps the text with a warning.
* **Usage**: OpenAI's ``prompt_tokens`` include the cached part:
  ``prompt_tokens_details.cached_tokens`` becomes ``cache_read_tokens`` (and
  ``cache_write_tokens``, where a server reports it, ``cache_creation_tokens``),
  ``prompt_tokens`` keeps the uncached rest (as on the Messages API);
  ``completion_tokens_details.reasoning_tokens`` is ``reasoning_tokens``.
* **Errors** (:func:`status_error`, :func:`~.chat.translate`): 401/403 stop the run
  (exit 3); 408, 409, 429 (``retry-after`` honoured up to
  ``max_retry_after``), 5xx, timeouts and connection errors are retried, then
  fail the turn; a context-length 400 and every other 4xx fail the turn (a 404
  says what to check).
* **A structured call**: a strict ``json_schema`` response format; the reply's
  content is the answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BackendError
from ..tools import ToolOutcome, ToolSet
from ..types import TokenUsage
from .chat import (
    Conversation,
    LoadedErrors,
    Reply,
    Side,
    StatusReply,
    Structured,
    StructuredRequest,
    ToolCall,
    Wording,
    field_of,
    quote,
    sdk_error_text,
    shown_status,
    status_basics,
    usage_of,
)
from .wire import (
    MAX_ITEMS,
    Check,
    chat_choice,
    chat_tail_problem,
    checked_client,
    is_int,
    json_type,
)

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PATH = "/chat/completions"
#: request options of every call (what the SDK's own ``create()`` sets)
OPTIONS: Mapping[str, Any] = {"security": {"bearer_auth": True}}
#: the key sent to an OpenAI-compatible server at a custom base_url when none is set (Ollama)
NO_KEY = "not-needed"
#: what a 2xx body must be, in messages
REPLY = "a Chat Completions response"
#: what a 404 of OpenAI or a compatible server asks to check
NOT_FOUND = (
    "; check agent.model and agent.base_url (OpenAI-compatible servers usually serve under /v1)"
)
#: the tool_choice values the API takes besides a tool's name
TOOL_CHOICES = ("auto", "required", "none")


def wording(
    api: str,
    base_url: str | None,
    key_hint: str,
    *,
    reply: str = REPLY,
    not_found: str = NOT_FOUND,
    side: Side = "agent",
) -> Wording:
    """How messages name a Chat Completions endpoint (``api``: ``OpenAI``, ``Azure OpenAI``...)."""
    return Wording(api, base_url, key_hint, reply, not_found, side)


# -------------------------------------------------------------------- the wire check


def check(data: Any, *, lenient_calls: bool = False) -> str | None:
    """Why a 200's parsed body is not a Chat Completions response, or None when it is one.

    Checks what the runner reads (see the module docstring); unknown extra
    keys are fine. ``lenient_calls``: a tool call needs no ``id`` and its
    ``arguments`` may be an object (what Semantic Kernel reads).
    """
    found = chat_choice(data)
    if isinstance(found, str):
        return found
    choice, message = found
    for key in ("content", "refusal"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            return f"choices[0].message.{key} is {json_type(value)}, not a string"
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return f"choices[0].message.tool_calls is {json_type(calls)}, not an array"
        if len(calls) > MAX_ITEMS:
            return f"{len(calls)} tool calls, more than the {MAX_ITEMS} accepted"
        arguments: type | tuple[type, ...] = (str, dict) if lenient_calls else str
        for i, call in enumerate(calls):
            where = f"choices[0].message.tool_calls[{i}]"
            if not isinstance(call, dict):
                return f"{where} is a JSON {json_type(call)}, not an object"
            if not lenient_calls and not isinstance(call.get("id"), str):
                return f"{where}.id is {json_type(call.get('id'))}, not a string"
            function = call.get("function")
            if not isinstance(function, dict):
                return f"{where} has no 'function' object"
            if not isinstance(function.get("name"), str):
                return f"{where}.function.name is {json_type(function.get('name'))}, not a string"
            if not isinstance(function.get("arguments"), arguments):
                return f"{where}.function.arguments is {json_type(function.get('arguments'))}, " + (
                    "not a string or an object" if lenient_calls else "not a string"
                )
    return chat_tail_problem(
        data,
        choice,
        (
            ("prompt_tokens_details", "cached_tokens"),
            ("prompt_tokens_details", "cache_write_tokens"),
            ("completion_tokens_details", "reasoning_tokens"),
        ),
    )


def lenient_problem(data: Any) -> str | None:
    """:func:`check` for Semantic Kernel (``lenient_calls``)."""
    return check(data, lenient_calls=True)


# ----------------------------------------------------------------------------- usage

_NO_USAGE = TokenUsage()


def usage_from(raw: Any) -> TokenUsage:
    """TokenUsage from a reply's ``usage`` (the checked JSON, or an SDK model of it): cached
    input moved out of ``prompt_tokens``, reasoning tokens kept."""
    if not raw:
        return _NO_USAGE
    get = raw.get if isinstance(raw, dict) else lambda key: field_of(raw, key)
    prompt = get("prompt_tokens") or 0
    details = get("prompt_tokens_details")
    cached = (field_of(details, "cached_tokens") or 0) if details else 0
    written = (field_of(details, "cache_write_tokens") or 0) if details else 0
    spent = get("completion_tokens_details")
    reasoning = field_of(spent, "reasoning_tokens") if spent else None
    return usage_of(
        max(0, prompt - cached - written),
        get("completion_tokens") or 0,
        written,
        cached,
        reasoning if is_int(reasoning) else None,
    )


# ----------------------------------------------------------------------------- errors


def _too_long(kind: str | None, message: str, status: int) -> bool:
    lowered = message.lower()
    return (
        status == 413
        or kind == "context_length_exceeded"
        or "maximum context length" in lowered
        or "context window" in lowered
        or "prompt is too long" in lowered
    )


def status_error(reply: StatusReply, wording: Wording, fallback: str | None = None) -> BackendError:
    """An error status (its body ``{"error": {"message", "type", "code"}}``, or that object)."""
    status, body = reply.status, reply.data
    error = body.get("error", body) if isinstance(body, Mapping) else body
    info: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
    message = str(info.get("message") or fallback or sdk_error_text(status, body))
    code = info.get("code")
    kind = str(code) if code is not None else (str(info["type"]) if info.get("type") else None)
    basic = status_basics(reply, kind, message, wording)
    if basic is not None:
        return basic
    shown = shown_status(status, kind)
    if _too_long(kind, message, status):
        return BackendError(
            f"the conversation no longer fits the model's context window ({shown}: {message})",
            status_code=status,
        )
    text = f"{wording.api} API error {shown}: {message}"
    return BackendError(text + (wording.not_found if status == 404 else ""), status_code=status)


# --------------------------------------------------------------------------- dialect


def stop_verdict(
    stop: str | None, refusal: str | None, text: str, max_tokens: int | None
) -> tuple[str | None, str | None]:
    """(turn error, warning) for a final reply's ``finish_reason`` and ``refusal``."""
    if refusal:
        return f"the model refused to answer: {refusal[:200]}", None
    if stop == "content_filter":
        return (
            "the service's content filter stopped the reply (finish_reason: content_filter)",
            None,
        )
    if stop == "length":
        return None, (
            "the reply was cut off (finish_reason: length"
            + (f", max_tokens = {max_tokens}" if max_tokens else "")
            + ")"
        )
    return None, None


def refused_calls(calls: Sequence[ToolCall], tools: ToolSet) -> list[str]:
    """Calls that cannot be run at all: an unknown tool, arguments that are not a JSON object."""
    problems = []
    for call in calls:
        name = call.name
        if tools.get(name) is None:
            offered = ", ".join(t.name for t in tools) or "none"
            problems.append(f"a tool that does not exist, {name!r} (offered: {offered})")
            continue
        arguments = call.arguments
        if not isinstance(arguments, str) or not arguments.strip():
            continue  # no arguments: {} (some servers send "")
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            problems.append(
                f"{name!r} with arguments that are not JSON ({exc}): {arguments[:200]!r}"
            )
            continue
        if not isinstance(parsed, dict):
            problems.append(
                f"{name!r} with arguments that are not a JSON object: {arguments[:200]!r}"
            )
    return problems


def parse(data: Any) -> Reply:
    choice = data["choices"][0]
    message = choice["message"]
    calls = [
        ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or ()
    ]
    return Reply(
        message.get("content") or "",
        calls,
        usage_from(data.get("usage")),
        choice.get("finish_reason"),
        message.get("refusal"),
        message,
    )


def assistant_entry(reply: Reply) -> dict[str, Any]:
    """The reply's message as it goes back into the history (only what the API takes)."""
    return {
        "role": "assistant",
        "content": reply.raw.get("content"),
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ],
    }


def tool_results(
    calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
) -> list[dict[str, Any]]:
    """One ``tool`` message per call."""
    return [
        {"role": "tool", "tool_call_id": call.id, "content": outcome.content}
        for call, outcome in zip(calls, outcomes, strict=True)
    ]


def final_entry(reply: Reply) -> dict[str, Any] | None:
    return {"role": "assistant", "content": reply.text}


def structured_body(request: StructuredRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.prompt},
        ],
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.seed is not None:
        body["seed"] = request.seed
    body["max_completion_tokens"] = request.max_tokens
    body["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": request.name, "strict": True, "schema": request.schema},
    }
    return body


def structured_result(reply: Reply, request: StructuredRequest) -> Structured:
    who, usage = request.who, reply.usage
    if reply.refusal:
        return Structured(None, f"{who} refused: {quote(reply.refusal)}", usage)
    content = reply.raw.get("content")
    if reply.stop == "length":
        return Structured(
            None,
            f"{who}'s reply was cut off (finish_reason: length): {quote(content or '')}",
            usage,
        )
    if not isinstance(content, str) or not content.strip():
        return Structured(None, f"{who}'s reply has no content", usage)
    try:
        data = json.loads(content)
    except ValueError as exc:
        return Structured(
            None, f"{who}'s reply is not one JSON object ({exc}): {quote(content)}", usage
        )
    return Structured(data, None, usage)


ERRORS = LoadedErrors("openai", json.JSONDecodeError)
"""The SDK's exceptions, for :func:`~.chat.translate` (once the SDK is imported)."""


# ------------------------------------------------------------------- agent requests


class ChatCompletionsRequests:
    """The agent's requests: the fixed parts built once, the history, the round's ``tool_choice``.

    ``tool_choice`` applies to the first request of each turn (the rest of the
    turn's tool loop leaves the choice to the model, since ``required`` on
    every request would never let it answer), except that ``none`` stays
    ``none``; after ``max_tool_rounds`` it is ``none``. ``extra_body`` is
    merged into every body last.
    """

    def __init__(
        self,
        *,
        model: str,
        tools: list[dict[str, Any]],
        temperature: float | None = None,
        max_tokens: int | None = None,
        max_tokens_field: str = "max_completion_tokens",
        tool_choice: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._args: dict[str, Any] = {
            "model": model,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "max_tokens_field": max_tokens_field,
            "tool_choice": tool_choice,
            "extra_body": extra_body,
        }
        fixed: dict[str, Any] = {"model": model}
        if temperature is not None:
            fixed["temperature"] = temperature
        if max_tokens is not None:
            fixed[max_tokens_field] = max_tokens
        if tools:
            fixed["tools"] = tools
        self._fixed = fixed
        self._tools = bool(tools)
        self._first: Any = None
        if tool_choice is not None:
            self._first = (
                tool_choice
                if tool_choice in TOOL_CHOICES
                else {"type": "function", "function": {"name": tool_choice}}
            )
        self._extra = dict(extra_body or {})

    def with_tools(self, tools: list[dict[str, Any]]) -> ChatCompletionsRequests:
        """The same requests offering ``tools`` (a test case's own MCP servers' too)."""
        return ChatCompletionsRequests(tools=tools, **self._args)

    @staticmethod
    def conversation(instructions: str | None) -> Conversation:
        return Conversation([{"role": "system", "content": instructions}] if instructions else [])

    def body(self, conversation: Conversation, rounds: int, last_call: bool) -> dict[str, Any]:
        body = {**self._fixed, "messages": conversation.history}
        if self._tools:
            if last_call:
                body["tool_choice"] = "none"
            elif rounds == 0 and self._first is not None:
                body["tool_choice"] = self._first
            elif self._first == "none":
                body["tool_choice"] = "none"
        if self._extra:
            body.update(self._extra)
        return body


# --------------------------------------------------------------------------- clients


def sdk_client(
    *,
    api_key: str,
    base_url: str,
    timeout: float,
    api_version: str | None = None,
    azure_deployment: str | None = None,
    check: Check = check,
    http_client: Any = None,
) -> openai.AsyncOpenAI:
    """The SDK's client (``AsyncAzureOpenAI`` with an ``api_version``): its own retries off,
    the reply size cap and ``check`` on (``http_client``: one built with
    :func:`~.wire.checked_client`; default: the SDK's httpx client). Imports the SDK."""
    import openai

    http_client = http_client or checked_client(openai, check)
    if api_version is not None:
        return openai.AsyncAzureOpenAI(
            azure_endpoint=base_url,
            azure_deployment=azure_deployment,
            api_version=api_version,
            api_key=api_key,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )
    return openai.AsyncOpenAI(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
    )
