"""The Anthropic Messages API as a :class:`~.chat.Dialect`: requests, replies, usage, errors.

Used by the ``anthropic`` backend, the ``anthropic`` judges and Semantic
Kernel's ``service: anthropic`` (which shares the error translation,
:func:`usage_from` and the stop reasons of this module). It imports no SDK:
``anthropic`` is imported when :func:`sdk_client` builds the client, on the
first request that goes out (a run whose every call the fixtures answer never
imports it; ``tests/test_lazy_imports.py``).

* **The wire check** (:func:`check`): a 200 must be a Messages API
  response -- ``content`` a list of at most
  :data:`~multiturn_eval.backends.wire.MAX_ITEMS` blocks of types the
  SDK knows (:data:`BLOCK_TYPES`, ``text`` blocks with a string ``text``, ``tool_use``
  blocks with ``id``, ``name`` and an object ``input``), ``usage`` with whole
  token counts, ``stop_reason`` a string or null -- checked on the raw bytes
  before anything reads it.
* **Replies**: a reply that stops with ``tool_use`` asks for its ``tool_use``
  blocks to be run; they are answered in one user message of ``tool_result``
  blocks (``is_error`` for a tool that failed). A tool the suite does not
  offer gets an error result the model can react to (the API validates tool
  names and inputs itself). The blocks go back into the history exactly as the
  API sent them; a final reply keeps its blocks but any unanswered
  ``tool_use`` (a cut-off reply's), which would make the next request invalid.
* **Stop reasons**: ``refusal`` fails the turn; ``max_tokens`` and
  ``model_context_window_exceeded`` keep the text with a warning; any other
  reason than ``end_turn``, ``stop_sequence`` or ``tool_use`` keeps the text
  with a warning naming it.
* **Usage**: ``input_tokens`` -> ``prompt_tokens``, ``output_tokens`` ->
  ``completion_tokens``, and the cache creation/read tokens.
* **Errors** (:func:`status_error`, :func:`~.chat.translate`): 401/403 stop the run
  (exit 3); 408, 409, 429, 5xx, 529, timeouts and connection errors are
  retried, then fail the turn; a prompt too long for the context window and
  every other 4xx fail the turn.
* **A structured call**: the schema as the input schema of a forced tool
  (``tool_choice: {type: tool}``); the tool's input is the answer.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BackendError
from ..tools import ToolOutcome, ToolSet
from ..types import TokenUsage
from .chat import (
    Conversation,
    LoadedErrors,
    Reply,
    StatusReply,
    Structured,
    StructuredRequest,
    ToolCall,
    Wording,
    quote,
    sdk_error_text,
    status_basics,
    usage_of,
)
from .wire import MAX_ITEMS, checked_client, is_int, json_type

if TYPE_CHECKING:
    import anthropic

DEFAULT_BASE_URL = "https://api.anthropic.com"
PATH = "/v1/messages"
#: request options of every call (none beyond the client's own)
OPTIONS: Mapping[str, Any] = {}
#: what a 2xx body must be, in messages
REPLY = "a Messages API response"


def wording(
    base_url: str | None, key_hint: str = "ANTHROPIC_API_KEY or agent.api_key", **more: Any
) -> Wording:
    """How messages name the Messages API at ``base_url``."""
    return Wording("Anthropic", base_url, key_hint, REPLY, **more)


# -------------------------------------------------------------------- the wire check


BLOCK_TYPES = frozenset(
    {
        "bash_code_execution_tool_result",
        "code_execution_tool_result",
        "container_upload",
        "redacted_thinking",
        "server_tool_use",
        "text",
        "text_editor_code_execution_tool_result",
        "thinking",
        "tool_search_tool_result",
        "tool_use",
        "web_fetch_tool_result",
        "web_search_tool_result",
    }
)
"""The content block types of the SDK's ``ContentBlock`` union (anthropic 2.15), kept here so
the wire check imports no SDK; ``tests/test_backend_anthropic.py`` checks it against the installed
SDK's union, so an SDK upgrade that adds a type fails there, not in a user's run."""
_USAGE_COUNTS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def check(data: Any) -> str | None:
    """Why a 200's parsed body is not a Messages API response, or None when it is one.

    Checks what the runner reads: ``content`` (a list of at most
    :data:`~multiturn_eval.backends.wire.MAX_ITEMS` blocks of types the SDK
    knows; ``text`` blocks with a string ``text``, ``tool_use`` blocks with
    ``id``, ``name`` and an object ``input``), ``usage`` (whole token counts)
    and ``stop_reason`` (a string or null). Unknown extra keys are fine.
    """
    if not isinstance(data, dict):
        return f"a JSON {json_type(data)}, not a message object"
    if data.get("type", "message") != "message":
        return f"'type' is {data.get('type')!r}, not 'message'"
    content = data.get("content")
    if not isinstance(content, list):
        return "no 'content'" if "content" not in data else f"'content' is {json_type(content)}"
    if len(content) > MAX_ITEMS:
        return f"'content' has {len(content)} blocks, more than the {MAX_ITEMS} accepted"
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            return f"content[{i}] is a JSON {json_type(block)}, not a block"
        kind = block.get("type")
        if not isinstance(kind, str):
            return f"content[{i}] has no 'type'"
        if kind not in BLOCK_TYPES:
            return f"content[{i}] is a block of unknown type {kind!r}"
        if kind == "text" and not isinstance(block.get("text"), str):
            return f"content[{i}] is a text block whose 'text' is {json_type(block.get('text'))}"
        if kind == "tool_use":
            for key, want in (("id", str), ("name", str), ("input", dict)):
                if not isinstance(block.get(key), want):
                    return f"content[{i}] is a tool_use block whose {key!r} is {json_type(block.get(key))}"
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return "no 'usage'" if "usage" not in data else f"'usage' is {json_type(usage)}"
    for key in ("input_tokens", "output_tokens"):
        if not is_int(usage.get(key)) or usage[key] < 0:
            return f"usage.{key} is {json_type(usage.get(key))}, not a whole number"
    for key in _USAGE_COUNTS:
        value = usage.get(key)
        if value is not None and (not is_int(value) or value < 0):
            return f"usage.{key} is {json_type(value)}, not a whole number"
    stop = data.get("stop_reason")
    if stop is not None and not isinstance(stop, str):
        return f"'stop_reason' is {json_type(stop)}"
    return None


# ----------------------------------------------------------------------------- usage

_USAGE_KEYS = ("input_tokens", "output_tokens", *_USAGE_COUNTS)


def usage_from(raw: Any) -> TokenUsage:
    """TokenUsage from a reply's ``usage`` (the checked JSON, or the SDK's ``Usage`` model)."""
    if not isinstance(raw, Mapping):
        raw = {key: getattr(raw, key, None) for key in _USAGE_KEYS}
    return usage_of(
        raw.get("input_tokens") or 0,
        raw.get("output_tokens") or 0,
        raw.get("cache_creation_input_tokens") or 0,
        raw.get("cache_read_input_tokens") or 0,
    )


# ----------------------------------------------------------------------------- errors


def _too_long(message: str) -> bool:
    text = message.lower()
    return "prompt is too long" in text or (
        "context" in text and ("too long" in text or "exceed" in text)
    )


def status_error(reply: StatusReply, wording: Wording, fallback: str | None = None) -> BackendError:
    """An error status of the Messages API (its body ``{"error": {"type", "message"}}``)."""
    status, body = reply.status, reply.data
    error = body.get("error") if isinstance(body, Mapping) else None
    info: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
    message = str(info.get("message") or fallback or sdk_error_text(status, body))
    kind = str(info.get("type") or "error")
    basic = status_basics(reply, kind, message, wording)
    if basic is not None:
        return basic
    if status == 413 or (status == 400 and _too_long(message)):
        return BackendError(
            f"the conversation no longer fits the model's context window ({status} {kind}: "
            f"{message})",
            status_code=status,
        )
    text = f"{wording.api} API error {status} {kind}: {message}"
    if status == 400 and "temperature" in message and "deprecated" in message:
        text += " (this model takes no sampling parameters: remove agent.temperature)"
    return BackendError(text + (wording.not_found if status == 404 else ""), status_code=status)


# --------------------------------------------------------------------------- dialect

_KNOWN_STOPS = ("end_turn", "stop_sequence", "tool_use", None)
_CUT_OFF = ("max_tokens", "model_context_window_exceeded")


def stop_verdict(
    stop: str | None, refusal: str | None, text: str, max_tokens: int | None
) -> tuple[str | None, str | None]:
    """(turn error, warning) for a final reply's ``stop_reason``."""
    if stop == "refusal":
        return (
            "the model refused to answer (stop_reason: refusal)"
            + (f": {text[:200]}" if text else ""),
            None,
        )
    if stop in _CUT_OFF:
        cap = f" = {max_tokens}" if stop == "max_tokens" and max_tokens is not None else ""
        return None, f"the reply was cut off (stop_reason: {stop}{cap})"
    if stop not in _KNOWN_STOPS:
        return None, f"unexpected stop_reason {stop!r}; the reply's text was kept"
    return None, None


def parse(data: Any) -> Reply:
    content: list[dict[str, Any]] = data["content"]
    stop = data.get("stop_reason")
    calls = (
        [ToolCall(b["id"], b["name"], b["input"]) for b in content if b["type"] == "tool_use"]
        if stop == "tool_use"
        else ()
    )
    text = "".join(b["text"] for b in content if b["type"] == "text")
    return Reply(text, calls, usage_from(data["usage"]), stop, None, content)


def assistant_entry(reply: Reply) -> dict[str, Any]:
    # the blocks go back into the history as the API sent them
    return {"role": "assistant", "content": reply.raw}


def tool_results(
    calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
) -> list[dict[str, Any]]:
    """One user message of ``tool_result`` blocks (``is_error`` for a tool that failed)."""
    results = []
    for call, outcome in zip(calls, outcomes, strict=True):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
        if outcome.content:
            result["content"] = outcome.content
        if outcome.is_error:
            result["is_error"] = True
        results.append(result)
    return [{"role": "user", "content": results}]


def final_entry(reply: Reply) -> dict[str, Any] | None:
    # unanswered tool_use blocks (cut off, or an odd stop) would break the next request
    kept = [b for b in reply.raw if b["type"] != "tool_use"]
    return {"role": "assistant", "content": kept} if kept else None


def refused_calls(calls: Sequence[ToolCall], tools: ToolSet) -> list[str]:
    """None: a tool the suite does not offer is answered with an error result."""
    return []


def structured_body(request: StructuredRequest) -> dict[str, Any]:
    body = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": request.system,
        "messages": [{"role": "user", "content": request.prompt}],
        "tools": [
            {
                "name": request.name,
                "description": request.description,
                "input_schema": request.schema,
            }
        ],
        "tool_choice": {"type": "tool", "name": request.name},
    }
    if request.temperature is not None:
        # anthropic>=1 has no temperature keyword; the API takes it (see MessagesRequests)
        body["temperature"] = request.temperature
    return body  # the Messages API takes no seed


def structured_result(reply: Reply, request: StructuredRequest) -> Structured:
    who, name, text, usage = request.who, request.name, reply.text, reply.usage
    if reply.stop == "refusal":
        return Structured(None, f"{who} refused (stop_reason: refusal): {quote(text)}", usage)
    calls = [b for b in reply.raw if b["type"] == "tool_use"]
    uses = [b for b in calls if b["name"] == name]
    if not uses:
        what = f"called {calls[0]['name']!r} instead" if calls else "replied with text only"
        cut = " (cut off: stop_reason max_tokens)" if reply.stop == "max_tokens" else ""
        return Structured(None, f"{who} did not call {name}: it {what}{cut}: {quote(text)}", usage)
    if len(uses) > 1:
        return Structured(None, f"{who} called {name} {len(uses)} times", usage)
    return Structured(uses[0]["input"], None, usage)


ERRORS = LoadedErrors("anthropic")
"""The SDK's exceptions, for :func:`~.chat.translate` (once the SDK is imported)."""


# ------------------------------------------------------------------- agent requests


class MessagesRequests:
    """The agent's requests: history, system prompt, tools and settings (fixed parts built once).

    ``temperature`` is sent only when set (newer models refuse sampling
    parameters with a 400); ``prompt_caching`` marks the system prompt with
    ``cache_control: {type: ephemeral}`` (the tools' last one is marked by
    :meth:`~multiturn_eval.tools.ToolSet.anthropic_tools`). After
    ``max_tool_rounds`` the request says ``tool_choice: none``.
    """

    def __init__(
        self,
        *,
        model: str,
        max_tokens: int,
        tools: list[dict[str, Any]],
        temperature: float | None = None,
        prompt_caching: bool = False,
    ) -> None:
        self._args: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "prompt_caching": prompt_caching,
        }
        fixed: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        if tools:
            fixed["tools"] = tools
        if temperature is not None:
            # anthropic>=1 dropped the keyword (newer models refuse sampling parameters);
            # the API still takes it for the models that accept it
            fixed["temperature"] = temperature
        self._fixed = fixed
        self._tools = bool(tools)
        self._cache = prompt_caching

    def with_tools(self, tools: list[dict[str, Any]]) -> MessagesRequests:
        """The same requests offering ``tools`` (a test case's own MCP servers' too)."""
        return MessagesRequests(tools=tools, **self._args)

    def conversation(self, instructions: str | None) -> Conversation:
        system = None
        if instructions:
            block: dict[str, Any] = {"type": "text", "text": instructions}
            if self._cache:
                block["cache_control"] = {"type": "ephemeral"}
            system = [block]
        return Conversation([], system)

    def body(self, conversation: Conversation, rounds: int, last_call: bool) -> dict[str, Any]:
        body = {**self._fixed, "messages": conversation.history}
        if conversation.system is not None:
            body["system"] = conversation.system
        if last_call and self._tools:
            body["tool_choice"] = {"type": "none"}
        return body


# --------------------------------------------------------------------------- clients


def sdk_client(
    *,
    api_key: str | None,
    base_url: str,
    timeout: float,
    auth_token: str | None = None,
    http_client: Any = None,
) -> anthropic.AsyncAnthropic:
    """The SDK's client: its own retries off, the reply size cap and wire check on
    (``http_client``: one built with :func:`~.wire.checked_client` and :func:`check`;
    default: the SDK's httpx client). Imports the SDK."""
    import anthropic

    return anthropic.AsyncAnthropic(
        api_key=api_key,
        auth_token=auth_token,
        base_url=base_url,
        max_retries=0,
        timeout=timeout,
        http_client=http_client or checked_client(anthropic, check),
    )


def retirement_warning(model: str, where: str) -> str | None:
    """The warning for a deprecated model (said once by the caller; the SDK's own is silenced)."""
    # said once by the caller; the SDK would repeat it on every request
    warnings.filterwarnings(
        "ignore", message=r"The model '.*' is deprecated", category=DeprecationWarning
    )
    date = deprecated_models().get(model)
    if date is None:
        return None
    return f"{where}: agent.model {model!r} is deprecated; Anthropic retires it on {date}"


def deprecated_models() -> Mapping[str, str]:
    """The SDK's table of deprecated models and their retirement dates (``anthropic._data``,
    private): the SDK's own once it is imported, else read from its file without importing
    the SDK (a replay never does); {} when the SDK moved it."""
    global _DEPRECATED
    imported = sys.modules.get("anthropic._data")
    if imported is not None:
        table = getattr(imported, "DEPRECATED_MODELS", None)
        return table if isinstance(table, dict) else {}
    if _DEPRECATED is None:
        _DEPRECATED = {}
        spec = importlib.util.find_spec("anthropic")  # finds the package, imports nothing
        for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
            source = Path(folder, "_data", "deprecated_models.py")
            try:
                table = runpy.run_path(str(source)).get("DEPRECATED_MODELS")
            except (OSError, SyntaxError):  # pragma: no cover - the SDK moved it
                continue
            if isinstance(table, dict):
                _DEPRECATED = {str(k): str(v) for k, v in table.items()}
                break
    return _DEPRECATED


_DEPRECATED: dict[str, str] | None = None
