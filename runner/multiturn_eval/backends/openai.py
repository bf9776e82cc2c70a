"""The ``openai`` backend: any OpenAI-compatible Chat Completions endpoint, with a client-side tool loop.

OpenAI itself, Azure OpenAI, Ollama, vLLM, LM Studio, LiteLLM proxies: one
``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) client per run (one
connection pool shared by every session), its own retries off
(``max_retries=0``): every request goes through the capped
:class:`~multiturn_eval.retry.RetryPolicy` of the agent's ``retry:`` block.
The semantics are those of the ``anthropic`` backend: both are the chat core
(:mod:`.chat`: the tool loop, retries, usage, price, a failed turn leaving the
history as it was) on a dialect, here Chat Completions
(:mod:`.chat_completions`: requests, replies, stop reasons, errors); this
module holds the ``openai`` backend's own keys, files and clients.

Per session (one test case) the conversation is kept client-side. A turn:

1. sends the history plus the new user message -- the turn's image ``files``
   (PNG, JPEG, GIF, WebP) first, as ``image_url`` parts holding ``data:`` URLs,
   then the text -- after a ``system`` message with the effective instructions
   (:attr:`CaseContext.instructions`), with the suite's Python tools as
   ``tools``, ``temperature`` and ``max_tokens`` only when the suite sets them,
   and ``extra_body`` merged into the body last;
2. while the reply holds ``tool_calls``, runs every call of the reply in order
   and answers each with a ``tool`` message (a tool that raised, or got
   arguments its signature refuses, answers ``Error: Type: message`` and the
   invocation records the error). After ``max_tool_rounds`` rounds the next
   request says ``tool_choice: none`` and the turn gets a warning; a model that
   still calls tools then fails the turn, naming the calls;
3. returns the final reply's text. ``finish_reason: length`` keeps the text
   with a warning; a ``refusal`` or ``finish_reason: content_filter`` is a
   turn error.

A model that calls a tool the suite does not offer, or sends ``arguments``
that are not a JSON object, fails the turn with an error that says so (no
tool of that reply runs). As on every failed turn the history is left as it
was before the turn, so the conversation the next turn continues holds no
unanswered ``tool_calls`` and the next turn is sent as usual.

Token usage is summed over every request of the turn, and each request is
priced on its own (the costs summed). OpenAI's
``prompt_tokens`` include the cached part: ``prompt_tokens_details.cached_tokens``
becomes ``cache_read_tokens`` (and ``cache_write_tokens``, where a server
reports it, ``cache_creation_tokens``), and ``prompt_tokens`` keeps the uncached
rest, as on the ``anthropic`` and ``semantic-kernel`` backends, so one suite
gives the same usage on all three. ``completion_tokens_details.reasoning_tokens``
is recorded as ``TokenUsage.reasoning_tokens`` (a part of ``completion_tokens``,
left out of the report when the server does not send it). Cost comes from
:mod:`multiturn_eval.pricing` (``pricing:`` overrides it; unknown -> null).

Keys (see the README): ``model``, ``base_url`` (default ``OPENAI_BASE_URL``,
else ``https://api.openai.com/v1``), ``api_key`` (default ``OPENAI_API_KEY``;
a server at a custom ``base_url`` may need none: the client then sends
``not-needed``), ``temperature``, ``max_tokens``, ``tool_choice``,
``extra_body``, ``max_tool_rounds``, ``retry``; Azure OpenAI with ``service:
azure`` or an ``azure: {endpoint, api_version, deployment}`` block (defaults
``AZURE_OPENAI_ENDPOINT``, ``OPENAI_API_VERSION`` or ``AZURE_OPENAI_API_VERSION``,
the model name; key ``api_key`` or ``AZURE_OPENAI_API_KEY``) through the SDK's
``AsyncAzureOpenAI``. The environment is read once, when the backend is built;
a missing key or Azure setting is a configuration error (exit 2) before any
request. The key is in the backend's ``secrets``.

Decisions where the spec is silent:

* ``max_tokens`` is sent as ``max_completion_tokens`` to OpenAI and Azure
  (reasoning models refuse ``max_tokens``) and as ``max_tokens`` to a custom
  ``base_url`` (what OpenAI-compatible servers read), as on ``semantic-kernel``.
* ``tool_choice`` (``auto``, ``required``, ``none`` or the name of one of the
  suite's tools) applies to the first request of each turn; the rest of the
  turn's tool loop leaves the choice to the model (``required`` on every
  request would never let it answer), except that ``none`` stays ``none``.
* Only images can be sent as ``files``: other files (text, PDF) are a located
  configuration error at load, since Chat Completions has no portable way to
  send them. Images over 20 MB are refused the same way.

Errors are translated in one place (:meth:`~.chat.Dialect.translate`): 401/403 stop the run
(exit 3); 408, 409, 429 (``retry-after`` honoured up to ``max_retry_after``),
5xx, timeouts and connection errors are retried, then fail the turn; a
context-length 400 and every other 4xx fail the turn. A 200 whose body is not
a Chat Completions response (:func:`~.chat_completions.check`), a cut-off,
empty or non-UTF-8 body, or one over 10 MB, fails the turn on the wire, before
the SDK parses it (:mod:`multiturn_eval.backends.wire`); not retried. A turn,
retries and back-off included, runs under a
:func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``.

Per-request cost: the request body is built once per request from dicts this
module already holds (no copy of the history), and sent with the SDK client's
own ``post`` (through the client's exchange point,
:attr:`~.chat.ChatClient.exchange`) so its request-param transformation does
not walk the whole history again on every request (that walk grows with the
conversation), and
the reply is read as the JSON the wire check already parsed and checked
(``cast_to=httpx2.Response``) instead of being built into the SDK's
``ChatCompletion`` models: the SDK still builds the request (auth headers,
Azure paths and ``api-version``), sends it and maps every error status.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ConfigIssue
from ..suite import OpenAIAgent
from ..tools import ToolSet
from ..types import TurnFile
from . import chat_completions
from .base import NO_KEY_REPLAY
from .chat import ChatBackend, ChatClient, ChatSession
from .chat_completions import DEFAULT_BASE_URL, NO_KEY, TOOL_CHOICES, ChatCompletionsRequests
from .files import FileParts, file_issues, file_kind

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

#: the largest image sent (OpenAI's per-image limit)
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: what a 404 from Azure OpenAI asks to check
AZURE_NOT_FOUND = "; check agent.model, agent.azure.deployment and agent.azure.api_version"


# ------------------------------------------------------------------------------ files


def file_problem(file: TurnFile) -> str | None:
    """Why ``file`` cannot be sent through Chat Completions, or None."""
    if file_kind(file) != "image":
        return (
            f"cannot send {file.path.name!r} ({file.media_type}) through the openai backend: it "
            "sends PNG, JPEG, GIF and WebP images only (set media_type: if the guess from the "
            "file name is wrong; the anthropic backend also sends PDFs and text files)"
        )
    try:
        size = file.path.stat().st_size
    except OSError as exc:
        return f"cannot read {file.path}: {exc}"
    if size > MAX_IMAGE_BYTES:
        return (
            f"{file.path.name!r} is {size / 1024 / 1024:.1f} MB; the API takes images up to "
            f"{MAX_IMAGE_BYTES // 1024 // 1024} MB"
        )
    return None


def image_part(file: TurnFile) -> dict[str, Any]:
    """The ``image_url`` content part for one image (read now; OSError on trouble)."""
    media_type = file.media_type.split(";")[0].strip().lower()
    data = base64.b64encode(file.path.read_bytes()).decode()
    return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}


# ---------------------------------------------------------------------------- backend


class OpenAIBackend(ChatBackend):
    """An OpenAI-compatible Chat Completions endpoint, Azure OpenAI included (see the module
    docstring): its key, endpoint and Azure settings checked once, before any request."""

    name = "openai"
    agent_type = OpenAIAgent
    agent: OpenAIAgent

    def setup(self, suite: LoadedSuite, settings: RunSettings, env: Mapping[str, str]) -> None:
        agent = self.agent
        issues = file_issues(suite, file_problem)
        where = suite.document.line_of

        def issue(message: str, path: tuple[str | int, ...], field: str) -> None:
            line = where(path) if path else None
            issues.append(ConfigIssue(message, file=suite.display_path, line=line, field=field))

        choice = agent.tool_choice
        if choice is not None and not self.tools and not agent.mcp_servers:
            issue(
                "applies to agent.tools; the suite offers none",
                ("agent", "tool_choice"),
                "agent.tool_choice",
            )
        elif not agent.mcp_servers:  # else: checked once the servers' tools are listed
            problem = self._tool_choice_problem(self.tools)
            if problem is not None:
                issue(problem, ("agent", "tool_choice"), "agent.tool_choice")
        self.azure = agent.on_azure
        self.api = "Azure OpenAI" if self.azure else "OpenAI"
        version: str | None = None
        if self.azure:
            block = agent.azure
            endpoint = (block.endpoint if block else None) or env.get("AZURE_OPENAI_ENDPOINT")
            version = (
                (block.api_version if block else None)
                or env.get("OPENAI_API_VERSION")
                or env.get("AZURE_OPENAI_API_VERSION")
            )
            self.deployment = (block.deployment if block else None) or agent.model
            api_key = agent.api_key or env.get("AZURE_OPENAI_API_KEY") or None
            at: tuple[str | int, ...] = ("agent", "azure") if block else ("agent", "backend")
            if not endpoint:
                issue(
                    "Azure OpenAI needs the resource endpoint: set azure.endpoint "
                    "(https://<resource>.openai.azure.com) or AZURE_OPENAI_ENDPOINT",
                    at,
                    "agent.azure.endpoint",
                )
            if not version:
                issue(
                    "Azure OpenAI needs an API version: set azure.api_version or "
                    "OPENAI_API_VERSION (e.g. 2024-10-21)",
                    at,
                    "agent.azure.api_version",
                )
            if api_key is None and self.key_optional():
                api_key = NO_KEY_REPLAY
            if api_key is None:
                issue(
                    "no API key for Azure OpenAI: set AZURE_OPENAI_API_KEY (or agent.api_key: "
                    "${SOME_VAR})",
                    ("agent", "backend"),
                    "agent.api_key",
                )
            self.base_url = (endpoint or "").rstrip("/")
            self.custom_server = False
        else:
            api_key = agent.api_key or env.get("OPENAI_API_KEY") or None
            configured = agent.base_url or env.get("OPENAI_BASE_URL") or None
            self.base_url = (configured or DEFAULT_BASE_URL).rstrip("/")
            self.custom_server = configured is not None and self.base_url != DEFAULT_BASE_URL
            if api_key is None and not self.custom_server and self.key_optional():
                api_key = NO_KEY_REPLAY
            if api_key is None and not self.custom_server:
                issue(
                    "no API key for the openai backend: set OPENAI_API_KEY (or agent.api_key: "
                    "${SOME_VAR}); a server at a custom base_url may need none",
                    ("agent", "backend"),
                    "agent.api_key",
                )
        if issues:
            raise ConfigError(issues)
        if api_key and api_key != NO_KEY_REPLAY:
            self.secrets.add(api_key)
        connect = functools.partial(  # built on the first live request (never in a replay)
            chat_completions.sdk_client,
            api_key=api_key or NO_KEY,
            base_url=self.base_url,
            timeout=settings.turn_timeout,
            api_version=version if self.azure else None,
            azure_deployment=self.deployment if self.azure else None,
        )
        key_var = "AZURE_OPENAI_API_KEY" if self.azure else "OPENAI_API_KEY"
        wording = chat_completions.wording(
            self.api,
            self.base_url,
            f"{key_var} or agent.api_key",
            not_found=AZURE_NOT_FOUND if self.azure else chat_completions.NOT_FOUND,
        )
        requests = ChatCompletionsRequests(
            model=agent.model,
            tools=self.tools.openai_tools(),  # the Python tools (their name checked above)
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            max_tokens_field="max_tokens" if self.custom_server else "max_completion_tokens",
            tool_choice=choice,
            extra_body=agent.extra_body,
        )
        self.start(
            ChatClient(connect, chat_completions, wording, timeout=settings.turn_timeout), requests
        )
        self._images = FileParts(file_problem, image_part)

    def _tool_choice_problem(self, toolset: ToolSet) -> str | None:
        choice = self.agent.tool_choice
        if choice is None or choice in TOOL_CHOICES or toolset.get(choice) is not None:
            return None
        offered = ", ".join(t.name for t in toolset) or "none"
        return (
            f"is {choice!r}: give auto, required, none or the name of one of the suite's "
            f"tools ({offered})"
        )

    def tool_schemas(self, toolset: ToolSet) -> list[dict[str, Any]]:
        """The tools' schemas; a ``tool_choice`` naming none of them (an MCP server's tools
        are known once it has started) is a configuration error."""
        problem = self._tool_choice_problem(toolset)
        if problem is not None:
            loaded = self.loaded
            raise ConfigError(
                ConfigIssue(
                    problem,
                    file=loaded.display_path,
                    line=loaded.document.line_of(("agent", "tool_choice")),
                    field="agent.tool_choice",
                )
            )
        return toolset.openai_tools()

    def content_for(self, message: str, files: Sequence[TurnFile]) -> str | list[dict[str, Any]]:
        """The user message's content: the text, or the images (read once per run), then it."""
        if not files:
            return message
        return [*map(self._images, files), {"type": "text", "text": message}]


OpenAISession = ChatSession
"""One conversation (the chat core's session)."""
