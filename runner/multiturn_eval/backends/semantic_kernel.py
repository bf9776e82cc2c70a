"""The ``semantic-kernel`` backend: a Semantic Kernel agent (SPEC 7).

One :class:`ChatCompletionAgent` per suite, one :class:`ChatHistoryAgentThread`
per test case. The chat service comes from ``agent.service``:

==============  ==================================================================
``openai``      ``OpenAIChatCompletion`` on an ``openai.AsyncOpenAI`` client;
                ``base_url`` (or ``OPENAI_BASE_URL``) points it at any
                OpenAI-compatible server (Ollama, vLLM, LM Studio); ``api_key``
                or ``OPENAI_API_KEY`` (a server at a custom ``base_url`` may
                need none).
``azure-openai`` ``AzureChatCompletion`` on an ``openai.AsyncAzureOpenAI``
                client: ``base_url`` is the resource endpoint, ``model`` the
                deployment name, ``api_version`` (or ``AZURE_OPENAI_API_VERSION``,
                else Semantic Kernel's default), ``api_key`` or
                ``AZURE_OPENAI_API_KEY`` (Entra ID tokens are not supported).
``anthropic``   Semantic Kernel's own ``AnthropicChatCompletion`` on an
                ``anthropic.AsyncAnthropic`` client (``ANTHROPIC_API_KEY`` /
                ``ANTHROPIC_BASE_URL``). It works with ``anthropic>=2``; install
                plain ``semantic-kernel``, not ``semantic-kernel[anthropic]``
                (that extra pins an anthropic older than 1.0).
==============  ==================================================================

The suite's Python tools (:mod:`multiturn_eval.tools`) are registered as one
plugin named ``tools``, so the model sees them as ``tools-<name>`` (Semantic
Kernel's ``plugin-function`` naming); reports record the tool's own name.
Calls go through :class:`~multiturn_eval.tools.ToolSet`, so arguments are
validated and coerced, ``CaseContext`` is injected and the model reads the
same result and error texts as on the ``anthropic`` backend. Automatic
function calling (``FunctionChoiceBehavior.Auto``) runs up to
``max_tool_rounds`` rounds of tool calls per turn; after that Semantic Kernel
asks the model once more without tools, and the turn gets a warning.

What a turn records:

* **tool invocations**, every call of the turn in the order the model made
  them (several per response included): read from the thread's
  ``FunctionCallContent`` / ``FunctionResultContent`` items, joined with the
  :class:`~multiturn_eval.tools.ToolOutcome` of each call (parsed arguments,
  result, error, duration). An auto-function-invocation filter ties each call
  to its outcome and a function-invocation filter records any exception that
  Semantic Kernel would otherwise turn into text and swallow. Calls Semantic
  Kernel refuses before running anything (an unknown tool, arguments that are
  not JSON, a missing required argument) are recorded with the text the model
  was given as their ``error``.
* **token usage** summed over every model call of the turn: OpenAI's
  ``prompt_tokens`` include the cached part, which is moved to
  ``cache_read_tokens`` (``cache_write_tokens`` where reported to
  ``cache_creation_tokens``), so ``prompt_tokens`` means uncached input as on
  the ``anthropic`` backend; Anthropic's usage maps one to one.
* **cost** from :mod:`multiturn_eval.pricing` (the suite's ``pricing:``
  overrides the built-in table, which knows Claude models only).

Errors: the SDK's own retries are off (``max_retries=0``); every model call is
retried by :class:`~multiturn_eval.retry.RetryPolicy` (``agent.retry``), and
every exception is translated to a :class:`BackendError` in one place,
:func:`translate`: 401/403 stop the run (:class:`FatalBackendError`, exit 3);
429, 5xx, 529, timeouts and dropped connections are retried; a reply that is
not JSON, a context-length 400, a refusal or a content filter fail the turn.
A failed turn is taken back out of the thread (user message included), so the
conversation the next turn continues is always one the service accepts.

A 200 whose body is not a Chat Completions response (``choices: []``,
``message: null``, an HTML page, a cut-off, empty or non-UTF-8 body, JSON of
another shape, a body over 10 MB, ...; :func:`chat_completion_problem`) or,
for ``service: anthropic``, not a Messages API response, is checked on the
wire before the SDK and Semantic Kernel parse it
(:mod:`multiturn_eval.backends.wire`) and fails the turn with "the OpenAI API
at URL returned a reply that is not a Chat Completions response (why):
<excerpt>". Not retried; the session stays alive (the thread is as before the
turn). A turn, retries and back-off included, runs under a
:func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``: no retry wait
is started that would end past it.

Decisions where the spec is silent:

* ``instructions`` are sent verbatim as the thread's system message, never
  rendered as a Semantic Kernel prompt template (``{{...}}`` stays as is).
* ``max_tokens`` is sent as ``max_completion_tokens`` to OpenAI and Azure
  OpenAI, and as ``max_tokens`` to a custom ``base_url`` (what
  OpenAI-compatible servers understand); unset, nothing is sent.
* Per-turn ``files``: text files are inlined into the message; images (PNG,
  JPEG, GIF, WebP) are sent as image parts to ``openai`` / ``azure-openai``.
  Semantic Kernel's connectors cannot send PDFs (nor images to Anthropic):
  such a suite is a configuration error before any agent is called.
* Semantic Kernel logs every tool error it handles with a traceback at ERROR
  level; unless logging is configured (root handlers, or a level on the
  ``semantic_kernel`` logger), its loggers are set to CRITICAL, since the
  report records those errors (:func:`_quiet_logs`).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai
from pydantic import ValidationError
from semantic_kernel import Kernel
from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import (
    AzureChatCompletion,
    OpenAIChatCompletion,
    OpenAIChatPromptExecutionSettings,
)
from semantic_kernel.connectors.ai.open_ai.const import DEFAULT_AZURE_API_VERSION
from semantic_kernel.contents import (
    ChatHistory,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
    ImageContent,
    TextContent,
)
from semantic_kernel.contents.utils.author_role import AuthorRole
from semantic_kernel.exceptions import ServiceInitializationError
from semantic_kernel.filters import FilterTypes
from semantic_kernel.functions import KernelArguments, KernelFunction, KernelPlugin
from semantic_kernel.functions.function_result import FunctionResult
from semantic_kernel.functions.kernel_function_metadata import KernelFunctionMetadata
from semantic_kernel.functions.kernel_parameter_metadata import KernelParameterMetadata

from ..errors import BackendError, ConfigError, ConfigIssue, FatalBackendError, TransientError
from ..pricing import agent_provider, price_for
from ..retry import RetryPolicy, Sleep, parse_retry_after, retry_note, turn_deadline
from ..suite import SemanticKernelAgent
from ..tools import Tool, ToolOutcome, ToolSet, error_text
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from .files import file_kind
from .wire import (
    MAX_ITEMS,
    chat_choice,
    chat_tail_problem,
    find_in_chain,
    find_problem,
    json_type,
    response_hook,
)

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.filters import AutoFunctionInvocationContext, FunctionInvocationContext

    from ..loaded import LoadedSuite
    from ..settings import RunSettings

#: the plugin the suite's tools are registered in (the model sees ``tools-<name>``)
PLUGIN = "tools"
#: the agent's name (sent as the ``name`` of its messages)
AGENT_NAME = "assistant"
#: how messages name each service
DISPLAY = {"openai": "OpenAI", "azure-openai": "Azure OpenAI", "anthropic": "Anthropic"}
#: per service: (API key variable, base URL variable)
ENV_VARS = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "azure-openai": ("AZURE_OPENAI_API_KEY", None),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}
#: the key sent to an OpenAI-compatible server at a custom base_url when none is set (Ollama)
NO_KEY = "not-needed"
#: the max_tokens Anthropic requires when the suite sets none (as Semantic Kernel's default)
ANTHROPIC_MAX_TOKENS = 1024


# ---------------------------------------------------------------------- per-turn state


@dataclass
class _Call:
    """One tool call of the turn, as the filters saw it."""

    content: FunctionCallContent
    outcome: ToolOutcome | None = None
    error: str | None = None
    """An exception Semantic Kernel swallowed (seen by the function-invocation filter)."""
    started: float = field(default_factory=time.perf_counter)


@dataclass
class _Turn:
    """What one ``send`` collects while Semantic Kernel runs (reached through a ContextVar,
    which the tasks Semantic Kernel gathers for parallel tool calls inherit)."""

    backend: SemanticKernelBackend
    case: CaseContext
    usage: list[TokenUsage] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    """id(FunctionCallContent) -> call (the same objects end up in the thread)."""
    warnings: list[str] = field(default_factory=list)
    tool_rounds: int = 0


_TURN: ContextVar[_Turn | None] = ContextVar("multiturn_eval_sk_turn", default=None)
_CALL: ContextVar[_Call | None] = ContextVar("multiturn_eval_sk_call", default=None)


# ------------------------------------------------------------------- exception mapping


_find = find_in_chain  # SK wraps the SDKs' errors in its own


def _status_error(
    service: str, status: int, kind: str | None, message: str, headers: Any
) -> BackendError:
    api = DISPLAY[service]
    text = f"{api} API error {status}{f' {kind}' if kind else ''}: {message}"
    if status in (401, 403):
        return FatalBackendError(
            f"the {api} API refused the credentials ({status}{f' {kind}' if kind else ''}: "
            f"{message}); check agent.api_key or {ENV_VARS[service][0]}",
            status_code=status,
            session_alive=False,
        )
    if status in (408, 409, 429) or status >= 500:
        return TransientError(text, retry_after=parse_retry_after(headers), status_code=status)
    lowered = message.lower()
    if (
        status == 413
        or kind == "context_length_exceeded"
        or "maximum context length" in lowered
        or "prompt is too long" in lowered
    ):
        return BackendError(
            f"the conversation no longer fits the model's context window ({status}"
            f"{f' {kind}' if kind else ''}: {message})",
            status_code=status,
        )
    if status == 404:
        text += (
            "; check agent.model (the deployment name), agent.base_url and api_version"
            if service == "azure-openai"
            else "; check agent.model and agent.base_url (OpenAI-compatible servers usually "
            "serve under /v1)"
        )
    return BackendError(text, status_code=status)


def translate(
    exc: BaseException, service: str = "openai", base_url: str | None = None
) -> BackendError:
    """The one place where SDK and Semantic Kernel exceptions become BackendErrors.

    Semantic Kernel wraps the SDK's exception (``ServiceResponseException``
    from ``openai.RateLimitError``, ...): the SDK's one is looked up in the
    cause chain and mapped; anything else is a turn error naming it.
    """
    if isinstance(exc, BackendError):
        return exc
    api = DISPLAY[service]
    at = f" at {base_url}" if base_url else ""
    problem = find_problem(exc)
    if problem is not None and service != "anthropic":
        return BackendError(
            problem.describe(
                f"the {api} API{at} returned a reply that is not a Chat Completions response"
            )
        )
    if service == "anthropic":
        import anthropic

        from .anthropic import DEFAULT_BASE_URL
        from .anthropic import translate as translate_anthropic

        sdk_error = _find(exc, (anthropic.APIError,))
        if isinstance(sdk_error, anthropic.APIError):  # the same messages as backend: anthropic
            return translate_anthropic(sdk_error, base_url or DEFAULT_BASE_URL)
    found = _find(exc, (openai.APIError, json.JSONDecodeError))
    if isinstance(found, openai.APIStatusError):
        body = found.body if isinstance(found.body, Mapping) else {}
        message = str(body.get("message") or found.message)
        kind = found.code or (str(body["type"]) if body.get("type") else None)
        return _status_error(service, found.status_code, kind, message, found.response.headers)
    if isinstance(found, openai.APITimeoutError):
        return TransientError(f"the request to the {api} API{at} timed out")
    if isinstance(found, openai.APIConnectionError):
        cause = found.__cause__ or found.__context__
        detail = f": {error_text(cause)}" if cause is not None else ""
        return TransientError(f"cannot reach the {api} API{at}{detail}")
    if isinstance(found, openai.APIResponseValidationError | json.JSONDecodeError):
        return BackendError(
            f"the {api} API{at} returned a reply that is not a Chat Completions response "
            f"({type(found).__name__}: {str(found)[:200]})"
        )
    return BackendError(f"Semantic Kernel: {_sk_error_text(exc)}")


def _sk_error_text(exc: BaseException) -> str:
    """``Type: first line``, plus the root cause (SK wraps it and repeats it in its args)."""
    text = str(exc.args[0]).strip() if exc.args else str(exc).strip()
    first = _CLASS_REPR.sub(r"\1", text.splitlines()[0]) if text else ""
    out = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    root = exc
    seen = {id(exc)}
    while (cause := root.__cause__ or root.__context__) is not None and id(cause) not in seen:
        seen.add(id(cause))
        root = cause
    if root is exc:
        return out
    if isinstance(root, ValidationError):
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in root.errors(include_url=False)
        )
        return f"{out} ({detail})"
    return f"{out} ({error_text(root).splitlines()[0]})"


#: ``<class 'pkg.mod.Name'>`` in Semantic Kernel's messages -> ``Name``
_CLASS_REPR = re.compile(r"<class '(?:[\w.<>]+\.)?(\w+)'>")


# -------------------------------------------------------------------- the wire check


def chat_completion_problem(data: Any) -> str | None:
    """Why a 200's parsed body is not a Chat Completions response, or None when it is one.

    Checks what Semantic Kernel reads: exactly one entry in ``choices`` (the
    runner never asks for more), its ``message`` an object whose ``content``
    is a string or null and whose ``tool_calls`` (at most
    :data:`~multiturn_eval.backends.wire.MAX_ITEMS`) each name a function with
    arguments; ``finish_reason`` a string or null; ``usage``, when present,
    with whole token counts. Unknown extra keys are fine.
    """
    found = chat_choice(data)
    if isinstance(found, str):
        return found
    choice, message = found
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        return f"choices[0].message.content is {json_type(content)}, not a string"
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return f"choices[0].message.tool_calls is {json_type(calls)}, not an array"
        if len(calls) > MAX_ITEMS:
            return f"{len(calls)} tool calls, more than the {MAX_ITEMS} accepted"
        for i, call in enumerate(calls):
            where = f"choices[0].message.tool_calls[{i}]"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                return f"{where} has no 'function' object"
            if not isinstance(function.get("name"), str):
                return f"{where}.function.name is {json_type(function.get('name'))}"
            if not isinstance(function.get("arguments"), str | dict):
                return f"{where}.function.arguments is {json_type(function.get('arguments'))}"
    return chat_tail_problem(data, choice)


#: keyword arguments of ``create()`` that are request options, not body fields
_REQUEST_OPTIONS = {
    "extra_headers": "headers",
    "extra_query": "params",
    "extra_body": "extra_json",
    "timeout": "timeout",
}


def _direct_chat_completions(client: openai.AsyncOpenAI) -> None:
    """Make ``client.chat.completions.create()`` post the body as Semantic Kernel built it.

    The SDK's ``create()`` first runs its request-param transformation over the
    whole body, which walks every message of the history against the param
    TypedDicts on every request: most of this backend's CPU, and growing with the
    conversation (4.8 ms per request at turn 1, 11.3 ms at turn 6, in
    ``bench/overhead``). Semantic Kernel hands it plain dicts (its settings'
    ``model_dump``), for which that walk changes nothing, so non-streaming calls
    go straight to the client's own ``post`` (same URL, auth, Azure deployment
    path, ``api-version``, errors and ``ChatCompletion`` reply).
    """
    from openai.types.chat import ChatCompletion

    completions = client.chat.completions
    create = completions.create

    async def direct(**params: Any) -> Any:
        if params.get("stream"):
            return await create(**params)
        options: Any = {"security": {"bearer_auth": True}}  # the SDK's RequestOptions
        for key, option in _REQUEST_OPTIONS.items():
            value = params.pop(key, None)
            if value is not None and not isinstance(value, openai.NotGiven):
                options[option] = value
        body = {k: v for k, v in params.items() if not isinstance(v, openai.NotGiven | openai.Omit)}
        return await client.post(
            "/chat/completions", body=body, cast_to=ChatCompletion, options=options
        )

    completions.create = direct  # type: ignore[method-assign]


def _openai_http_client() -> Any:
    """The openai SDK's default HTTP client, with the reply size cap and the wire check."""
    return openai.DefaultAsyncHttpxClient(
        event_hooks={"response": [response_hook(chat_completion_problem)]}
    )


# ------------------------------------------------------------------------- usage


def usage_from(raw: Any) -> TokenUsage | None:
    """TokenUsage from what a Semantic Kernel connector puts into ``metadata['usage']``."""
    if raw is None:
        return None
    if hasattr(raw, "input_tokens"):  # anthropic.types.Usage
        return TokenUsage(
            prompt_tokens=raw.input_tokens or 0,
            completion_tokens=raw.output_tokens or 0,
            cache_creation_tokens=getattr(raw, "cache_creation_input_tokens", None) or 0,
            cache_read_tokens=getattr(raw, "cache_read_input_tokens", None) or 0,
        )
    prompt = getattr(raw, "prompt_tokens", None) or 0  # SK's CompletionUsage (OpenAI)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details is not None else 0
    return TokenUsage(
        prompt_tokens=max(0, prompt - cached - written),
        completion_tokens=getattr(raw, "completion_tokens", None) or 0,
        cache_read_tokens=cached,
        cache_creation_tokens=written,
    )


# ---------------------------------------------------------------------- the services


async def _metered(
    call: Callable[[], Awaitable[list[ChatMessageContent]]],
) -> list[ChatMessageContent]:
    """One model call: retried, translated, its usage and stop reason recorded on the turn."""
    turn = _TURN.get()
    if turn is None:  # not inside a send(): nothing to record
        return await call()
    backend = turn.backend
    replies = await backend.policy.run(
        call,
        backend.translate,
        on_retry=lambda error, attempt, wait: turn.warnings.append(
            retry_note(error, attempt, wait)
        ),
    )
    for reply in replies:
        usage = usage_from(reply.metadata.get("usage"))
        if usage is not None:
            turn.usage.append(usage)
        if any(isinstance(item, FunctionCallContent) for item in reply.items):
            turn.tool_rounds += 1
        backend.check_stop(reply, turn)
    return replies


class _OpenAIService(OpenAIChatCompletion):
    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings
    ) -> list[ChatMessageContent]:
        parent = super()._inner_get_chat_message_contents
        return await _metered(lambda: parent(chat_history, settings))


class _AzureService(AzureChatCompletion):
    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings
    ) -> list[ChatMessageContent]:
        parent = super()._inner_get_chat_message_contents
        return await _metered(lambda: parent(chat_history, settings))


#: sampling parameters anthropic>=2.14's ``messages.create()`` no longer takes as arguments
_BODY_ONLY = ("temperature", "top_p", "top_k")


@functools.cache
def _anthropic_classes() -> tuple[type[ChatCompletionClientBase], type[PromptExecutionSettings]]:
    """Semantic Kernel's Anthropic connector, metered, and fitted to ``anthropic>=2``.

    Incompatibilities of Semantic Kernel 1.45's connector worked around here:
    it passes ``temperature`` (``top_p``, ``top_k``) as arguments of
    ``messages.create()``, which anthropic 2.14 no longer has (TypeError), so
    they are moved into ``extra_body``, where the API still reads them; and it
    raises KeyError on stop reasons it has no mapping for (``refusal``,
    ``stop_sequence``, ``pause_turn``, ``model_context_window_exceeded``), which
    are mapped here (without touching Semantic Kernel's own table); and after
    ``max_tool_rounds`` it sends the history's ``tool_use`` blocks without
    ``tools``, which the API refuses, so the tools stay, with ``tool_choice: none``.
    """
    from semantic_kernel.connectors.ai.anthropic import (
        AnthropicChatCompletion,
        AnthropicChatPromptExecutionSettings,
    )
    from semantic_kernel.connectors.ai.anthropic.services import anthropic_chat_completion as module
    from semantic_kernel.contents.utils.finish_reason import FinishReason

    known_stops = module.ANTHROPIC_TO_SEMANTIC_KERNEL_FINISH_REASON_MAP

    class _AnthropicSettings(AnthropicChatPromptExecutionSettings):
        # replaces SK's validator that bans {"type": "none"}, which the API takes
        def validate_tool_choice(self) -> Any:  # type: ignore[override]
            return self

        def prepare_settings_dict(self, **kwargs: Any) -> dict[str, Any]:
            data: dict[str, Any] = super().prepare_settings_dict(**kwargs)
            moved = {key: data.pop(key) for key in _BODY_ONLY if key in data}
            if moved:
                data["extra_body"] = {**(data.get("extra_body") or {}), **moved}
            return data

    class _AnthropicService(AnthropicChatCompletion):
        def get_prompt_execution_settings_class(self) -> type[PromptExecutionSettings]:
            return _AnthropicSettings

        def _reset_function_choice_settings(self, settings: PromptExecutionSettings) -> None:
            # after max_tool_rounds SK drops the tools; a history with tool_use blocks needs
            # them defined, so keep them and forbid their use instead
            if getattr(settings, "tools", None):
                settings.tool_choice = {"type": "none"}  # type: ignore[attr-defined]
            else:
                super()._reset_function_choice_settings(settings)

        def _create_chat_message_content(
            self, response: Any, response_metadata: dict[str, Any]
        ) -> ChatMessageContent:
            stop = response.stop_reason
            if stop is None or stop in known_stops:
                message: ChatMessageContent = super()._create_chat_message_content(
                    response, response_metadata
                )
                return message
            # a stop reason SK does not know: build the message as for end_turn, keep the truth
            as_known = response.model_copy(update={"stop_reason": "end_turn"})
            message = super()._create_chat_message_content(as_known, response_metadata)
            message.inner_content = response  # check_stop reads the real stop reason
            message.finish_reason = (
                FinishReason.CONTENT_FILTER if stop == "refusal" else FinishReason.STOP
            )
            return message

        async def _inner_get_chat_message_contents(
            self, chat_history: ChatHistory, settings: PromptExecutionSettings
        ) -> list[ChatMessageContent]:
            parent = super()._inner_get_chat_message_contents
            return await _metered(lambda: parent(chat_history, settings))

    return _AnthropicService, _AnthropicSettings


# ------------------------------------------------------------------------- the tools


class _SuiteTool(KernelFunction):
    """A suite tool as a Semantic Kernel function; the call goes through the ToolSet."""

    tool: Tool
    toolset: ToolSet

    async def _invoke_internal(self, context: FunctionInvocationContext) -> None:
        call = _CALL.get()
        turn = _TURN.get()
        outcome = await self.toolset.call(
            self.tool.name, dict(context.arguments), turn.case if turn else None
        )
        if call is not None:
            call.outcome = outcome
        # the model reads the same text as on the anthropic backend (result or "Error: ...")
        context.result = FunctionResult(function=self.metadata, value=outcome.content)

    async def _invoke_internal_stream(self, context: FunctionInvocationContext) -> None:
        raise NotImplementedError("suite tools are not streamed")


def _suite_function(tool: Tool, toolset: ToolSet) -> _SuiteTool:
    schema = dict(tool.parameters)
    required = set(schema.get("required") or ())
    parameters = [
        KernelParameterMetadata(
            name=name,
            description=prop.get("description"),
            is_required=name in required,
            schema_data=dict(prop),
            type_=str(prop.get("type", "object")),
        )
        for name, prop in (schema.get("properties") or {}).items()
    ]
    metadata = KernelFunctionMetadata(
        name=tool.name,
        plugin_name=PLUGIN,
        description=tool.description,
        parameters=parameters,
        return_parameter=KernelParameterMetadata(name="return", schema_data={}),
        is_prompt=False,
        is_asynchronous=True,
    )
    return _SuiteTool(metadata=metadata, tool=tool, toolset=toolset)


async def _on_auto_invocation(
    context: AutoFunctionInvocationContext, next: Callable[[Any], Awaitable[None]]
) -> None:
    """Ties each tool call of the turn to what happens to it."""
    turn = _TURN.get()
    content = context.function_call_content
    if content is None:  # not a model's tool call: nothing to record
        await next(context)
        return
    call = _Call(content)
    if turn is not None:
        turn.calls[id(content)] = call
    token = _CALL.set(call)
    try:
        await next(context)
    finally:
        _CALL.reset(token)


async def _on_invocation(
    context: FunctionInvocationContext, next: Callable[[Any], Awaitable[None]]
) -> None:
    """Records an exception before Semantic Kernel turns it into text for the model."""
    try:
        await next(context)
    except Exception as exc:
        call = _CALL.get()
        if call is not None and call.outcome is None:
            call.error = error_text(exc)
        raise


# ------------------------------------------------------------------------ the backend


class _SKSession:
    def __init__(self, backend: SemanticKernelBackend, case: CaseContext) -> None:
        self._backend = backend
        self._case = case
        self._history = ChatHistory()
        if case.instructions:
            self._history.add_system_message(case.instructions)
        self._thread = ChatHistoryAgentThread(chat_history=self._history)

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        with turn_deadline(self._backend.turn_timeout):
            return await self._send(message, files)

    async def _send(self, message: str, files: Sequence[TurnFile]) -> TurnReply:
        backend = self._backend
        user = backend.user_message(message, files)
        before = len(self._history.messages)
        turn = _Turn(backend, self._case)
        token = _TURN.set(turn)
        try:
            response = await backend.agent.get_response(messages=user, thread=self._thread)
            final = response.message
            rounds = backend.config.max_tool_rounds
            if turn.tool_rounds > rounds:
                # unanswered tool calls in the thread would make the next request invalid
                asked = ", ".join(
                    item.function_name
                    for item in final.items
                    if isinstance(item, FunctionCallContent)
                )
                called = ", ".join(c.content.function_name for c in turn.calls.values()) or "none"
                raise BackendError(
                    f"the model was still calling tools ({asked}) after max_tool_rounds = "
                    f"{rounds} rounds, even when asked without tools; calls made this turn: "
                    f"{called}"
                )
        except BaseException as exc:
            del self._history.messages[before:]  # a failed turn leaves no trace in the thread
            if isinstance(exc, Exception) and not isinstance(exc, BackendError):
                raise backend.translate(exc) from exc
            raise
        finally:
            _TURN.reset(token)
        if turn.tool_rounds == rounds:
            turn.warnings.append(
                f"reached max_tool_rounds = {rounds}: asked for the final reply without tools"
            )
        usage = TokenUsage.sum(turn.usage)
        price = backend.price
        return TurnReply(
            response="".join(item.text for item in final.items if isinstance(item, TextContent)),
            tool_invocations=_invocations(self._history.messages[before + 1 :], turn),
            token_usage=usage,
            warnings=tuple(turn.warnings),
            cost_usd=None if price is None else price.cost(usage),
        )

    async def close(self) -> None:
        self._history.messages.clear()
        await self._thread.delete()


def _invocations(messages: Sequence[ChatMessageContent], turn: _Turn) -> list[ToolInvocation]:
    """Every tool call of the turn in call order, from the thread's items plus the filters' records."""
    results: dict[str | None, FunctionResultContent] = {}
    calls: list[FunctionCallContent] = []
    for message in messages:
        for item in message.items:
            if isinstance(item, FunctionCallContent) and message.role == AuthorRole.ASSISTANT:
                calls.append(item)
            elif isinstance(item, FunctionResultContent):
                results.setdefault(item.id, item)
    by_call_id = {c.content.id: c for c in turn.calls.values()}
    out: list[ToolInvocation] = []
    for content in calls:
        record = turn.calls.get(id(content)) or by_call_id.get(content.id)
        result = results.get(content.id)
        if record is None and result is None:
            continue  # never processed (cannot happen in a successful turn; kept defensive)
        name = content.function_name if content.plugin_name == PLUGIN else (content.name or "")
        if record is not None and record.outcome is not None:
            out.append(record.outcome.invocation)
            continue
        try:
            args = dict(content.parse_arguments() or {})
        except Exception:
            args = {}
        if record is not None and record.error is not None:
            error = record.error
            duration = (time.perf_counter() - record.started) * 1000
        else:  # refused by Semantic Kernel before any function ran: the model was told why
            error = str(result.result) if result is not None else "not run"
            duration = None
        out.append(
            ToolInvocation.model_construct(
                name=name, args=args, result=None, error=error, duration_ms=duration
            )
        )
    return out


class SemanticKernelBackend:
    name = "semantic-kernel"

    def __init__(
        self,
        suite: LoadedSuite,
        settings: RunSettings,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        config = suite.suite.agent
        assert isinstance(config, SemanticKernelAgent)
        self.config = config
        self.suite = suite
        self.service_name = config.service
        self.secrets: set[str] = set()
        """What this backend adds to the run's secrets (its API key)."""
        self.warnings: list[str] = []
        """Said once at the start of the run (a deprecated model)."""
        if env is None:
            env = settings.env  # read once at start-up
        _quiet_logs()
        issues = self._file_issues()
        api_key, self.base_url = self._credentials(env)
        if api_key is None and not (self.service_name == "openai" and self.base_url):
            key_var = ENV_VARS[self.service_name][0]
            issues.insert(
                0,
                ConfigIssue(
                    f"no API key for the semantic-kernel backend's '{self.service_name}' service: "
                    f"set {key_var} (or agent.api_key: ${{SOME_VAR}})",
                    file=suite.display_path,
                    line=suite.document.line_of(("agent", "service")),
                    field="agent.api_key",
                ),
            )
        if issues:
            raise ConfigError(issues)
        if api_key:
            self.secrets.add(api_key)  # from the environment too: no report may show it
        self.policy = RetryPolicy(config.retry, sleep=sleep)
        self.turn_timeout = settings.turn_timeout
        self.price = price_for(config.model, suite.suite.pricing, provider=agent_provider(config))
        self.toolset = ToolSet.from_loaded(suite, max_workers=max(4, settings.parallel_test_cases))
        self._client: Any = None
        try:
            service = self._service(api_key, env, settings.turn_timeout)
        except ServiceInitializationError as exc:  # e.g. a bad AZURE_OPENAI_* in the environment
            raise ConfigError(
                ConfigIssue(
                    f"Semantic Kernel cannot set up the '{self.service_name}' service: "
                    f"{_sk_error_text(exc)}; it also reads OPENAI_*, AZURE_OPENAI_* and "
                    "ANTHROPIC_* variables and a .env file",
                    file=suite.display_path,
                    line=suite.document.line_of(("agent", "service")),
                    field="agent.service",
                )
            ) from None
        kernel = Kernel()
        behavior = None
        if self.toolset:
            functions = []
            for i, tool in enumerate(self.toolset):
                try:
                    functions.append(_suite_function(tool, self.toolset))
                except ValidationError as exc:
                    raise ConfigError(
                        ConfigIssue(
                            f"Semantic Kernel cannot register tool {tool.name!r}: "
                            f"{exc.errors(include_url=False)[0]['msg']}",
                            file=suite.display_path,
                            line=suite.document.line_of(("agent", "tools", i)),
                            field=f"agent.tools[{i}]",
                        )
                    ) from None
            kernel.add_plugin(KernelPlugin(name=PLUGIN, functions=functions))
            kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, _on_auto_invocation)
            kernel.add_filter(FilterTypes.FUNCTION_INVOCATION, _on_invocation)
            behavior = FunctionChoiceBehavior.Auto(
                maximum_auto_invoke_attempts=config.max_tool_rounds
            )
        self.agent = ChatCompletionAgent(
            kernel=kernel,
            service=service,
            name=AGENT_NAME,
            function_choice_behavior=behavior,
            arguments=KernelArguments(settings=self._execution_settings(behavior)),
        )

    # ------------------------------------------------------------------ construction

    def _file_issues(self) -> list[ConfigIssue]:
        """Files Semantic Kernel's connectors cannot send: configuration errors, before any call."""
        suite = self.suite
        issues: list[ConfigIssue] = []
        for i, case in enumerate(suite.suite.test_cases):
            for t, turn in enumerate(case.effective_turns()):
                for f, ref in enumerate(turn.files):
                    path = suite.base_dir / ref.path
                    file = (
                        TurnFile.from_path(path)
                        if ref.media_type is None
                        else TurnFile(path, ref.media_type)
                    )
                    problem = self.file_problem(file)
                    if problem is None:
                        continue
                    turn_path: tuple[str | int, ...] = (
                        ("test_cases", i) if case.is_legacy else ("test_cases", i, "turns", t)
                    )
                    issues.append(
                        ConfigIssue(
                            problem,
                            file=suite.display_path,
                            line=suite.document.line_of((*turn_path, "files", f)),
                            test_case=f"test_cases[{i}]"
                            + (f' ("{case.name}")' if case.name else ""),
                            field=(f"turns[{t}]." if not case.is_legacy else "")
                            + f"files[{f}].path",
                        )
                    )
        return issues

    def file_problem(self, file: TurnFile) -> str | None:
        """Why Semantic Kernel's connector for this service cannot send ``file``, or None."""
        kind = file_kind(file)
        if kind == "text" or (kind == "image" and self.service_name != "anthropic"):
            return None
        takes = (
            "text files only (its Anthropic connector sends no images or documents)"
            if self.service_name == "anthropic"
            else "text files and PNG, JPEG, GIF and WebP images"
        )
        return (
            f"cannot send {file.path.name!r} ({file.media_type}) through Semantic Kernel's "
            f"{DISPLAY[self.service_name]} connector: it takes {takes}; the anthropic backend "
            "sends PDFs and images to Claude"
        )

    def _credentials(self, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        key_var, url_var = ENV_VARS[self.service_name]
        api_key = self.config.api_key or env.get(key_var) or None
        base_url = self.config.base_url or (env.get(url_var) if url_var else None) or None
        return api_key, base_url.rstrip("/") if base_url else None

    def _service(
        self, api_key: str | None, env: Mapping[str, str], timeout: float
    ) -> ChatCompletionClientBase:
        model = self.config.model
        if self.service_name == "openai":
            client = openai.AsyncOpenAI(
                api_key=api_key or NO_KEY,
                base_url=self.base_url,
                max_retries=0,
                timeout=timeout,
                http_client=_openai_http_client(),
            )
            self._client = client
            _direct_chat_completions(client)
            openai_class: Any = _OpenAIService  # the pydantic plugin mistypes SK's own __init__
            openai_service: ChatCompletionClientBase = openai_class(
                ai_model_id=model, async_client=client
            )
            return openai_service
        if self.service_name == "azure-openai":
            version = (
                self.config.api_version
                or env.get("AZURE_OPENAI_API_VERSION")
                or DEFAULT_AZURE_API_VERSION
            )
            azure = openai.AsyncAzureOpenAI(
                azure_endpoint=self.base_url or "",
                api_key=api_key,
                api_version=version,
                max_retries=0,
                timeout=timeout,
                http_client=_openai_http_client(),
            )
            self._client = azure
            _direct_chat_completions(azure)
            azure_class: Any = _AzureService
            azure_service: ChatCompletionClientBase = azure_class(
                deployment_name=model, async_client=azure
            )
            return azure_service
        import anthropic

        from .anthropic import _end_of_life, checked_http_client

        retired = _end_of_life(model)
        if retired is not None:
            self.warnings.append(
                f"{self.suite.display_path}: agent.model {model!r} is deprecated; Anthropic "
                f"retires it on {retired}"
            )
        # said once above; the SDK would repeat it on every request
        warnings.filterwarnings(
            "ignore", message=r"The model '.*' is deprecated", category=DeprecationWarning
        )
        anthropic_client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout,
            http_client=checked_http_client(),
        )
        self._client = anthropic_client
        # SK's AnthropicSettings wants the key even beside a client
        service: ChatCompletionClientBase = _anthropic_classes()[0](
            ai_model_id=model, api_key=api_key, async_client=anthropic_client
        )
        return service

    def _execution_settings(
        self, behavior: FunctionChoiceBehavior | None
    ) -> PromptExecutionSettings:
        config = self.config
        settings: PromptExecutionSettings
        if self.service_name == "anthropic":
            settings = _anthropic_classes()[1](
                max_tokens=config.max_tokens or ANTHROPIC_MAX_TOKENS,
                temperature=config.temperature,
                function_choice_behavior=behavior,
            )
            return settings
        settings = OpenAIChatPromptExecutionSettings(
            temperature=config.temperature, function_choice_behavior=behavior
        )
        if config.max_tokens is not None:
            if self.service_name == "openai" and self.base_url is not None:
                settings.max_tokens = config.max_tokens  # what OpenAI-compatible servers read
            else:
                settings.max_completion_tokens = config.max_tokens
        return settings

    # ------------------------------------------------------------------------ turns

    def translate(self, exc: BaseException) -> BackendError:
        return translate(exc, self.service_name, self.base_url)

    def check_stop(self, reply: ChatMessageContent, turn: _Turn) -> None:
        """A refusal or a content filter fails the turn; a reply cut off at the limit warns."""
        inner = reply.inner_content
        if self.service_name == "anthropic":
            stop = getattr(inner, "stop_reason", None)
            if stop == "refusal":
                raise BackendError("the model refused to answer (stop_reason: refusal)")
            if stop in ("max_tokens", "model_context_window_exceeded"):
                limit = self.config.max_tokens or ANTHROPIC_MAX_TOKENS
                turn.warnings.append(
                    f"the reply was cut off (stop_reason: {stop}"
                    + (f" = {limit}" if stop == "max_tokens" else "")
                    + ")"
                )
            return
        choices = getattr(inner, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise BackendError(f"the model refused to answer: {refusal}")
        reason = getattr(choices[0], "finish_reason", None) if choices else None
        if reason == "content_filter":
            raise BackendError(
                "the service's content filter stopped the reply (finish_reason: content_filter)"
            )
        if reason == "length":
            shown = f" = {self.config.max_tokens}" if self.config.max_tokens else ""
            turn.warnings.append(
                f"the reply was cut off (finish_reason: length, max_tokens{shown})"
            )

    def user_message(self, message: str, files: Sequence[TurnFile]) -> ChatMessageContent:
        """The turn's message; files first (text inlined as ``<file name="...">``), then the text."""
        if not files:
            return ChatMessageContent(role=AuthorRole.USER, content=message)
        items: list[Any] = []
        texts: list[str] = []
        for file in files:
            problem = self.file_problem(file)
            if problem is not None:
                raise BackendError(problem)
            try:
                data = file.path.read_bytes()
                if file_kind(file) == "text":
                    texts.append(f'<file name="{file.path.name}">\n{data.decode("utf-8")}\n</file>')
                    continue
            except (OSError, UnicodeDecodeError) as exc:
                raise BackendError(f"cannot read {file.path}: {exc}") from exc
            media_type = file.media_type.split(";")[0].strip().lower()
            encoded = base64.b64encode(
                data
            ).decode()  # SK 1.45 cannot take raw bytes (it decodes them)
            items.append(ImageContent(data_uri=f"data:{media_type};base64,{encoded}"))
        if self.service_name == "anthropic":
            # SK's Anthropic connector sends only a user message's text: one text, files first
            return ChatMessageContent(role=AuthorRole.USER, content="\n\n".join([*texts, message]))
        parts = [TextContent(text=t) for t in texts]
        return ChatMessageContent(
            role=AuthorRole.USER, items=[*parts, *items, TextContent(text=message)]
        )

    async def open_session(self, case: CaseContext) -> _SKSession:
        return _SKSession(self, case)

    async def aclose(self) -> None:
        await self.toolset.aclose()
        if self._client is not None:
            await self._client.close()


def _quiet_logs() -> None:
    """Keep Semantic Kernel's log lines off the console (the report has what they say).

    It logs each tool error it handles at ERROR level with a traceback, and
    more at INFO. Unless logging was configured by whoever runs us (handlers on
    the root logger, or a level set on ``semantic_kernel``), its loggers are set
    to CRITICAL; Python's last-resort handler would otherwise print them.
    """
    sk_logger = logging.getLogger("semantic_kernel")
    if sk_logger.level == logging.NOTSET and not logging.getLogger().handlers:
        sk_logger.setLevel(logging.CRITICAL)
