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
* **token usage** summed over every model call of the turn, counted as the
  ``anthropic`` and ``openai`` backends count it (the dialects' ``usage_from``):
  OpenAI's ``prompt_tokens`` include the cached part, which is moved to
  ``cache_read_tokens`` (``cache_write_tokens`` where reported to
  ``cache_creation_tokens``), so ``prompt_tokens`` means uncached input as on
  the ``anthropic`` backend, and reasoning tokens are kept; Anthropic's usage
  maps one to one.
* **cost** from :mod:`multiturn_eval.pricing` (the suite's ``pricing:``
  overrides the built-in table), each model call priced on its own.

Errors: the SDK's own retries are off (``max_retries=0``); every model call is
retried by :class:`~multiturn_eval.retry.RetryPolicy` (``agent.retry``), and
every exception is translated to a :class:`BackendError` in one place,
:func:`translate` (the SDK's error found in Semantic Kernel's wrapping, then
the dialects' translation, worded as on the ``openai`` and ``anthropic``
backends): 401/403 stop the run (:class:`FatalBackendError`, exit 3);
429, 5xx, 529, timeouts and dropped connections are retried; a reply that is
not JSON, a context-length 400, a refusal or a content filter fail the turn
(the refusals, content filters and cut-off replies of the dialects'
``stop_verdict``).
A failed turn is taken back out of the thread (user message included), so the
conversation the next turn continues is always one the service accepts.

A 200 whose body is not a Chat Completions response (``choices: []``,
``message: null``, an HTML page, a cut-off, empty or non-UTF-8 body, JSON of
another shape, a body over 10 MB, ...; :func:`~.chat_completions.lenient_problem`) or,
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

from ..errors import BackendError, ConfigError, ConfigIssue, McpServerError, SessionError
from ..retry import retry_note, turn_deadline
from ..suite import SemanticKernelAgent
from ..tools import Tool, ToolOutcome, ToolSet, error_text
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from . import chat_completions
from .base import NO_KEY_REPLAY, CaseSession, ModelBackend
from .chat import Dialect, Wording, priced, rounds_warning, still_calling
from .chat import translate as translate_error
from .files import file_issues, file_kind
from .wire import ReplyProblem, find_in_chain

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.filters import AutoFunctionInvocationContext, FunctionInvocationContext

    from ..loaded import LoadedSuite
    from ..settings import RunSettings
    from ..tools.mcp_servers.source import CaseTools

#: the plugin the suite's tools are registered in (the model sees ``tools-<name>``)
PLUGIN = "tools"
#: the longest tool name OpenAI's and Anthropic's APIs take (``tools[].function.name``, ``tools[].name``)
MAX_FUNCTION_NAME = 64
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
    crash: SessionError | None = None
    """An MCP server that died during a call of this turn (the turn fails with it)."""


_TURN: ContextVar[_Turn | None] = ContextVar("multiturn_eval_sk_turn", default=None)
_CALL: ContextVar[_Call | None] = ContextVar("multiturn_eval_sk_call", default=None)


# ------------------------------------------------------------------- exception mapping


def wording(service: str, base_url: str | None) -> Wording:
    """How messages name the service (as the ``openai`` and ``anthropic`` backends do)."""
    if service == "anthropic":
        from . import messages_api

        return messages_api.wording(base_url or messages_api.DEFAULT_BASE_URL)
    return chat_completions.wording(
        DISPLAY[service],
        base_url,
        f"agent.api_key or {ENV_VARS[service][0]}",
        not_found="; check agent.model (the deployment name), agent.base_url and api_version"
        if service == "azure-openai"
        else chat_completions.NOT_FOUND,
    )


def translate(
    exc: BaseException, service: str = "openai", base_url: str | None = None
) -> BackendError:
    """The one place where SDK and Semantic Kernel exceptions become BackendErrors.

    Semantic Kernel wraps the SDK's exception (``ServiceResponseException``
    from ``openai.RateLimitError``, ...): the SDK's one is looked up in the
    cause chain and translated as the ``openai`` and ``anthropic`` backends
    translate it (:func:`~.chat_completions.translate`,
    :func:`~.messages_api.translate`); anything else is a turn error naming it.
    """
    if isinstance(exc, BackendError):
        return exc
    named = wording(service, base_url)
    if service == "anthropic":
        import anthropic

        from . import messages_api

        sdk_error = find_in_chain(exc, (anthropic.APIError, ReplyProblem))
        if sdk_error is not None:
            return translate_error(messages_api, sdk_error, named)
    else:
        found = find_in_chain(exc, (openai.APIError, json.JSONDecodeError, ReplyProblem))
        if found is not None:
            return translate_error(chat_completions, found, named)
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
        raw = reply.metadata.get("usage")
        if raw is not None:
            turn.usage.append(backend.usage_from(raw))
        if any(isinstance(item, FunctionCallContent) for item in reply.items):
            turn.tool_rounds += 1
        backend.check_stop(reply, turn)
    return replies


class _Metered:
    """Every model call of a Semantic Kernel chat service goes through :func:`_metered`."""

    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings
    ) -> list[ChatMessageContent]:
        parent = super()._inner_get_chat_message_contents  # type: ignore[misc]
        replies: list[ChatMessageContent] = await _metered(lambda: parent(chat_history, settings))
        return replies


class _OpenAIService(_Metered, OpenAIChatCompletion):
    pass


class _AzureService(_Metered, AzureChatCompletion):
    pass


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

    class _AnthropicService(_Metered, AnthropicChatCompletion):
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

    return _AnthropicService, _AnthropicSettings


# ------------------------------------------------------------------------- the tools


class _SuiteTool(KernelFunction):
    """A suite tool as a Semantic Kernel function; the call goes through the ToolSet."""

    tool: Tool
    toolset: ToolSet

    async def _invoke_internal(self, context: FunctionInvocationContext) -> None:
        call = _CALL.get()
        turn = _TURN.get()
        try:
            outcome = await self.toolset.call(
                self.tool.name, dict(context.arguments), turn.case if turn else None
            )
        except SessionError as exc:
            # An MCP server crashed: Semantic Kernel would hand the model an error text and
            # go on. The turn fails instead (the filter stops the loop; _send raises it).
            if turn is not None and turn.crash is None:
                turn.crash = exc
            context.result = FunctionResult(function=self.metadata, value=f"Error: {exc}")
            return
        if call is not None:
            call.outcome = outcome
        # the model reads the same text as on the anthropic backend (result or "Error: ...")
        context.result = FunctionResult(function=self.metadata, value=outcome.content)

    async def _invoke_internal_stream(self, context: FunctionInvocationContext) -> None:
        raise NotImplementedError("suite tools are not streamed")


def _property_schema(prop: Any) -> dict[str, Any]:
    """A property's schema as a dict: JSON Schema's ``true`` (anything) is ``{}``, ``false``
    (nothing) ``{"not": {}}`` (an MCP server may list either)."""
    if isinstance(prop, dict):
        return prop
    return {} if prop is True else {"not": {}}


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
        for name, prop in (
            (name, _property_schema(prop))
            for name, prop in (schema.get("properties") or {}).items()
        )
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
    if turn is not None and turn.crash is not None:
        context.terminate = True  # no further request: the turn fails with the crash


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


class _SKSession(CaseSession):
    def __init__(
        self,
        backend: SemanticKernelBackend,
        case: CaseContext,
        kernel: Kernel,
        tools: CaseTools | None = None,
    ) -> None:
        super().__init__(case, tools)
        self._backend = backend
        self._kernel = kernel
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
        turn = _Turn(backend, self.case)
        token = _TURN.set(turn)
        try:
            response = await backend.kernel_agent.get_response(
                messages=user, thread=self._thread, kernel=self._kernel
            )
            if turn.crash is not None:  # an MCP server died mid-call: the turn fails
                raise turn.crash
            final = response.message
            rounds = backend.agent.max_tool_rounds
            if turn.tool_rounds > rounds:
                # unanswered tool calls in the thread would make the next request invalid
                asked = [i.function_name for i in final.items if isinstance(i, FunctionCallContent)]
                called = [c.content.function_name for c in turn.calls.values()]
                raise BackendError(still_calling(asked, rounds, called))
        except BaseException as exc:
            del self._history.messages[before:]  # a failed turn leaves no trace in the thread
            if isinstance(exc, Exception) and not isinstance(exc, BackendError):
                raise backend.translate(exc) from exc
            raise
        finally:
            _TURN.reset(token)
        if turn.tool_rounds == rounds:
            turn.warnings.append(rounds_warning(rounds))
        return TurnReply(
            response="".join(item.text for item in final.items if isinstance(item, TextContent)),
            tool_invocations=_invocations(self._history.messages[before + 1 :], turn),
            token_usage=TokenUsage.sum(turn.usage),
            warnings=tuple(turn.warnings),
            cost_usd=priced(backend.price, turn.usage),
        )

    async def close(self) -> None:
        self._history.messages.clear()
        try:
            await self._thread.delete()
        finally:
            await self.end_tools()


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


class SemanticKernelBackend(ModelBackend):
    """One ChatCompletionAgent for the suite, one thread per test case (see the module
    docstring); Semantic Kernel runs the tool loop."""

    name = "semantic-kernel"
    agent_type = SemanticKernelAgent
    agent: SemanticKernelAgent

    def setup(self, suite: LoadedSuite, settings: RunSettings, env: Mapping[str, str]) -> None:
        config = self.agent
        self.suite = suite
        self.service_name = config.service
        _quiet_logs()
        issues = file_issues(suite, self.file_problem)
        api_key, self.base_url = self._credentials(env)
        keyed = api_key is not None or (self.service_name == "openai" and self.base_url)
        if not keyed and self.key_optional():
            api_key = NO_KEY_REPLAY
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
        if api_key and api_key != NO_KEY_REPLAY:
            self.secrets.add(api_key)  # from the environment too: no report may show it
        self._client: Any = None
        if self.service_name == "anthropic":
            from . import messages_api

            self.dialect: Dialect = messages_api
            self.usage_from: Callable[[Any], TokenUsage] = messages_api.usage_from
            """TokenUsage from what a connector puts into ``metadata['usage']`` (the SDK's
            ``Usage``, or Semantic Kernel's ``CompletionUsage``), as the backends count it."""
        else:
            self.dialect = chat_completions
            self.usage_from = chat_completions.usage_from
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
        self._service_object = service
        self.kernel = self.kernel_for(self.tools)
        behavior = None
        if self.tools or config.mcp_servers:
            behavior = FunctionChoiceBehavior.Auto(
                maximum_auto_invoke_attempts=config.max_tool_rounds
            )
        self.kernel_agent = ChatCompletionAgent(
            kernel=self.kernel,
            service=service,
            name=AGENT_NAME,
            function_choice_behavior=behavior,
            arguments=KernelArguments(settings=self._execution_settings(behavior)),
        )

    def kernel_for(self, toolset: ToolSet) -> Kernel:
        """A kernel with the chat service and ``toolset`` as the ``tools`` plugin (a tool
        Semantic Kernel cannot register: a ConfigError at agent.tools[i], or an
        McpServerError naming the server)."""
        kernel = Kernel()
        kernel.add_service(self._service_object)
        if not toolset:
            return kernel
        functions = []
        for tool in toolset:
            sent = f"{PLUGIN}-{tool.name}"
            if len(sent) > MAX_FUNCTION_NAME:
                raise self._unregistered(
                    tool,
                    f"the model would be given it as {sent!r}, {len(sent)} characters (Semantic "
                    f"Kernel puts its plugin's name '{PLUGIN}-' before it), over the "
                    f"{MAX_FUNCTION_NAME} that OpenAI's and Anthropic's APIs take: a tool's name "
                    "can be "
                    f"at most {MAX_FUNCTION_NAME - len(PLUGIN) - 1} characters on this backend",
                )
            try:
                functions.append(_suite_function(tool, toolset))
            except ValidationError as exc:
                why = exc.errors(include_url=False)[0]["msg"]
                raise self._unregistered(tool, why) from None
        kernel.add_plugin(KernelPlugin(name=PLUGIN, functions=functions))
        kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, _on_auto_invocation)
        kernel.add_filter(FilterTypes.FUNCTION_INVOCATION, _on_invocation)
        return kernel

    def _unregistered(self, tool: Tool, why: str) -> Exception:
        message = f"Semantic Kernel cannot register tool {tool.name!r}: {why}"
        if tool.server is not None:
            index = next(
                (i for i, s in enumerate(self.agent.mcp_servers) if s.name == tool.server), None
            )
            return McpServerError(
                f"MCP server {tool.server!r}: {message}", server=tool.server, index=index
            )
        i = next(i for i, t in enumerate(self.python_tools) if t.name == tool.name)
        return ConfigError(
            ConfigIssue(
                message,
                file=self.suite.display_path,
                line=self.suite.document.line_of(("agent", "tools", i)),
                field=f"agent.tools[{i}]",
            )
        )

    def use_tools(self, toolset: ToolSet) -> None:
        self.kernel = self.kernel_for(toolset)

    # ------------------------------------------------------------------ construction

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
        api_key = self.agent.api_key or env.get(key_var) or None
        base_url = self.agent.base_url or (env.get(url_var) if url_var else None) or None
        return api_key, base_url.rstrip("/") if base_url else None

    def _service(
        self, api_key: str | None, env: Mapping[str, str], timeout: float
    ) -> ChatCompletionClientBase:
        model = self.agent.model
        if self.service_name in ("openai", "azure-openai"):
            azure = self.service_name == "azure-openai"
            client = chat_completions.sdk_client(
                api_key=api_key or NO_KEY,
                # None: the SDK's default (what the run's environment does not override)
                base_url=self.base_url or ("" if azure else chat_completions.DEFAULT_BASE_URL),
                timeout=timeout,
                api_version=(
                    self.agent.api_version
                    or env.get("AZURE_OPENAI_API_VERSION")
                    or DEFAULT_AZURE_API_VERSION
                )
                if azure
                else None,
                check=chat_completions.lenient_problem,
            )
            self._client = client
            _direct_chat_completions(client)
            # the pydantic plugin mistypes SK's own __init__
            if azure:
                azure_class: Any = _AzureService
                azure_service: ChatCompletionClientBase = azure_class(
                    deployment_name=model, async_client=client
                )
                return azure_service
            openai_class: Any = _OpenAIService
            openai_service: ChatCompletionClientBase = openai_class(
                ai_model_id=model, async_client=client
            )
            return openai_service
        from . import messages_api

        retired = messages_api.retirement_warning(model, self.suite.display_path)
        if retired is not None:
            self.warnings.append(retired)
        anthropic_client = messages_api.sdk_client(
            api_key=api_key,
            base_url=self.base_url or messages_api.DEFAULT_BASE_URL,
            timeout=timeout,
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
        config = self.agent
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
        """A refusal or a content filter fails the turn; a reply cut off at the limit warns
        (the dialect's stop reasons, as on the ``anthropic`` and ``openai`` backends)."""
        inner = reply.inner_content
        limit: int | None
        if self.service_name == "anthropic":
            stop, refusal = getattr(inner, "stop_reason", None), None
            limit = self.agent.max_tokens or ANTHROPIC_MAX_TOKENS
        else:
            choices = getattr(inner, "choices", None) or []
            message = getattr(choices[0], "message", None) if choices else None
            stop = getattr(choices[0], "finish_reason", None) if choices else None
            refusal, limit = getattr(message, "refusal", None), self.agent.max_tokens
        # the refusal is named alone: Semantic Kernel's reply is not read for its text here
        error, warning = self.dialect.stop_verdict(stop, refusal, "", limit)
        if error is not None:
            raise BackendError(error)
        if warning is not None:
            turn.warnings.append(warning)

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
        tools = await self.open_tools()
        if tools is None:
            return _SKSession(self, case, self.kernel)
        try:
            kernel = self.kernel_for(tools.toolset)
        except BaseException:
            await tools.aclose()
            raise
        return _SKSession(self, case, kernel, tools)

    async def aclose(self) -> None:
        try:
            await self.close_tools()
        finally:
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
