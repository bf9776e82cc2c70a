"""The ``openai`` backend: any OpenAI-compatible Chat Completions endpoint, with a client-side tool loop.

OpenAI itself, Azure OpenAI, Ollama, vLLM, LM Studio, LiteLLM proxies: one
``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) client per run (one
connection pool shared by every session), its own retries off
(``max_retries=0``): every request goes through the capped
:class:`~multiturn_eval.retry.RetryPolicy` of the agent's ``retry:`` block.
The semantics are those of the ``anthropic`` backend.

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

Token usage is summed over every request of the turn. OpenAI's
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

Errors are translated in one place (:func:`translate`): 401/403 stop the run
(exit 3); 408, 409, 429 (``retry-after`` honoured up to ``max_retry_after``),
5xx, timeouts and connection errors are retried, then fail the turn; a
context-length 400 and every other 4xx fail the turn. A 200 whose body is not
a Chat Completions response (:func:`chat_completion_problem`), a cut-off,
empty or non-UTF-8 body, or one over 10 MB, fails the turn on the wire, before
the SDK parses it (:mod:`multiturn_eval.backends.wire`); not retried. A turn,
retries and back-off included, runs under a
:func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``.

Per-request cost: the request body is built once per request from dicts this
module already holds (no copy of the history), and sent with the SDK client's
own ``post`` so its request-param transformation does not walk the whole
history again on every request (that walk grows with the conversation), and
the reply is read as the JSON the wire check already parsed and checked
(``cast_to=httpx2.Response``) instead of being built into the SDK's
``ChatCompletion`` models: the SDK still builds the request (auth headers,
Azure paths and ``api-version``), sends it and maps every error status.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx2
import openai

from ..errors import BackendError, ConfigError, ConfigIssue, FatalBackendError, TransientError
from ..pricing import agent_provider, price_for
from ..retry import (
    RetryPolicy,
    Sleep,
    parse_retry_after,
    request_timeout,
    retry_note,
    turn_deadline,
)
from ..suite import OpenAIAgent
from ..tools import ToolSet, error_text
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from .files import file_kind
from .wire import (
    MAX_ITEMS,
    chat_choice,
    chat_tail_problem,
    find_in_chain,
    find_problem,
    is_int,
    json_type,
    parsed_body,
    response_hook,
)

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the key sent to an OpenAI-compatible server at a custom base_url when none is set (Ollama)
NO_KEY = "not-needed"
#: the largest image sent (OpenAI's per-image limit)
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: the tool_choice values the API takes besides a tool's name
TOOL_CHOICES = ("auto", "required", "none")


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


def _file_issues(suite: LoadedSuite) -> list[ConfigIssue]:
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
                problem = file_problem(file)
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
                        test_case=f"test_cases[{i}]" + (f' ("{case.name}")' if case.name else ""),
                        field=(f"turns[{t}]." if not case.is_legacy else "") + f"files[{f}].path",
                    )
                )
    return issues


# -------------------------------------------------------------------- the wire check


def chat_completion_problem(data: Any) -> str | None:
    """Why a 200's parsed body is not a Chat Completions response, or None when it is one.

    Checks what the backend reads: exactly one entry in ``choices`` (the
    request asks for one), its ``message`` an object whose ``content`` and
    ``refusal`` are strings or null and whose ``tool_calls`` (at most
    :data:`~multiturn_eval.backends.wire.MAX_ITEMS`) each have a string ``id``
    and a ``function`` with a string ``name`` and string ``arguments``;
    ``finish_reason`` a string or null; ``usage``, when present, with whole
    token counts. Unknown extra keys are fine.
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
        for i, call in enumerate(calls):
            where = f"choices[0].message.tool_calls[{i}]"
            if not isinstance(call, dict):
                return f"{where} is a JSON {json_type(call)}, not an object"
            if not isinstance(call.get("id"), str):
                return f"{where}.id is {json_type(call.get('id'))}, not a string"
            function = call.get("function")
            if not isinstance(function, dict):
                return f"{where} has no 'function' object"
            for key in ("name", "arguments"):
                if not isinstance(function.get(key), str):
                    return f"{where}.function.{key} is {json_type(function.get(key))}, not a string"
    return chat_tail_problem(
        data,
        choice,
        (
            ("prompt_tokens_details", "cached_tokens"),
            ("prompt_tokens_details", "cache_write_tokens"),
            ("completion_tokens_details", "reasoning_tokens"),
        ),
    )


def checked_http_client() -> Any:
    """The SDK's default HTTP client, with the reply size cap and :func:`chat_completion_problem`."""
    return openai.DefaultAsyncHttpxClient(
        event_hooks={"response": [response_hook(chat_completion_problem)]}
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


def translate(
    exc: BaseException, api: str = "OpenAI", base_url: str = DEFAULT_BASE_URL
) -> BackendError:
    """The one place where the SDK's exceptions become BackendErrors.

    ``api`` names the service in messages (``OpenAI``, ``Azure OpenAI``).
    """
    if isinstance(exc, BackendError):
        return exc
    problem = find_problem(exc)
    if problem is not None:
        return BackendError(
            problem.describe(
                f"the {api} API at {base_url} returned a reply that is not a Chat Completions "
                "response"
            )
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = exc.body if isinstance(exc.body, Mapping) else {}
        message = str(body.get("message") or exc.message)
        kind = exc.code or (str(body["type"]) if body.get("type") else None)
        shown = f"{status}{f' {kind}' if kind else ''}"
        text = f"{api} API error {shown}: {message}"
        if status in (401, 403):
            key_var = "AZURE_OPENAI_API_KEY" if api.startswith("Azure") else "OPENAI_API_KEY"
            return FatalBackendError(
                f"the {api} API refused the credentials ({shown}: {message}); check "
                f"{key_var} or agent.api_key",
                status_code=status,
                session_alive=False,
            )
        if status in (408, 409, 429) or status >= 500:
            return TransientError(
                text, retry_after=parse_retry_after(exc.response.headers), status_code=status
            )
        if _too_long(kind, message, status):
            return BackendError(
                f"the conversation no longer fits the model's context window ({shown}: {message})",
                status_code=status,
            )
        if status == 404:
            text += (
                "; check agent.model, agent.azure.deployment and agent.azure.api_version"
                if api.startswith("Azure")
                else "; check agent.model and agent.base_url (OpenAI-compatible servers usually "
                "serve under /v1)"
            )
        return BackendError(text, status_code=status)
    if isinstance(exc, openai.APITimeoutError):
        return TransientError(f"the request to the {api} API at {base_url} timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {error_text(cause)}" if cause is not None else ""
        return TransientError(f"cannot reach the {api} API at {base_url}{detail}")
    found = find_in_chain(exc, (openai.APIResponseValidationError, json.JSONDecodeError))
    if found is not None or isinstance(exc, ValueError):
        shown_exc = found or exc
        return BackendError(
            f"the {api} API at {base_url} returned a reply that is not a Chat Completions "
            f"response ({type(shown_exc).__name__}: {str(shown_exc)[:200]})"
        )
    return BackendError(f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------- usage


def usage_from(raw: Mapping[str, Any] | None) -> TokenUsage:
    """TokenUsage from a reply's ``usage`` (checked on the wire; cached input moved out of
    prompt_tokens)."""
    if not raw:
        return TokenUsage()
    prompt = raw.get("prompt_tokens") or 0
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    completion = raw.get("completion_tokens") or 0
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return TokenUsage.model_construct(
        prompt_tokens=max(0, prompt - cached - written),
        completion_tokens=completion,
        total_tokens=max(0, prompt - cached - written) + completion + cached + written,
        cache_creation_tokens=written,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning if is_int(reasoning) else None,
    )


# ---------------------------------------------------------------------------- backend


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        suite: LoadedSuite,
        settings: RunSettings,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        agent = suite.suite.agent
        assert isinstance(agent, OpenAIAgent)
        self.agent = agent
        self.secrets: set[str] = set()
        """What this backend adds to the run's secrets (its API key)."""
        self.warnings: list[str] = []
        if env is None:  # the environment as read once at start-up (empty: built outside the CLI)
            env = settings.env
        self.tools = ToolSet.from_loaded(suite, max_workers=max(4, settings.parallel_test_cases))
        issues = _file_issues(suite)
        where = suite.document.line_of

        def issue(message: str, path: tuple[str | int, ...], field: str) -> None:
            line = where(path) if path else None
            issues.append(ConfigIssue(message, file=suite.display_path, line=line, field=field))

        choice = agent.tool_choice
        if choice is not None and not self.tools:
            issue(
                "applies to agent.tools; the suite offers none",
                ("agent", "tool_choice"),
                "agent.tool_choice",
            )
        elif choice is not None and choice not in TOOL_CHOICES and self.tools.get(choice) is None:
            offered = ", ".join(t.name for t in self.tools) or "none"
            issue(
                f"is {choice!r}: give auto, required, none or the name of one of the suite's "
                f"tools ({offered})",
                ("agent", "tool_choice"),
                "agent.tool_choice",
            )
        self.azure = agent.on_azure
        self.api = "Azure OpenAI" if self.azure else "OpenAI"
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
            if api_key is None and not self.custom_server:
                issue(
                    "no API key for the openai backend: set OPENAI_API_KEY (or agent.api_key: "
                    "${SOME_VAR}); a server at a custom base_url may need none",
                    ("agent", "backend"),
                    "agent.api_key",
                )
        if issues:
            raise ConfigError(issues)
        if api_key:
            self.secrets.add(api_key)
        self.turn_timeout = settings.turn_timeout
        self.client: openai.AsyncOpenAI
        if self.azure:
            self.client = openai.AsyncAzureOpenAI(
                azure_endpoint=self.base_url,
                azure_deployment=self.deployment,
                api_version=version,
                api_key=api_key,
                max_retries=0,
                timeout=settings.turn_timeout,
                http_client=checked_http_client(),
            )
        else:
            self.client = openai.AsyncOpenAI(
                api_key=api_key or NO_KEY,
                base_url=self.base_url,
                max_retries=0,
                timeout=settings.turn_timeout,
                http_client=checked_http_client(),
            )
        self.tool_params = self.tools.openai_tools()
        self.policy = RetryPolicy(agent.retry, sleep=sleep)
        self.price = price_for(agent.model, suite.suite.pricing, provider=agent_provider(agent))
        self._images: dict[tuple[Any, str], dict[str, Any]] = {}
        # the parts of every request that do not change: built once
        fixed: dict[str, Any] = {"model": agent.model}
        if agent.temperature is not None:
            fixed["temperature"] = agent.temperature
        if agent.max_tokens is not None:
            fixed["max_tokens" if self.custom_server else "max_completion_tokens"] = (
                agent.max_tokens
            )
        if self.tool_params:
            fixed["tools"] = self.tool_params
        self._fixed = fixed
        self._first_choice: Any = None
        if choice is not None:
            self._first_choice = (
                choice
                if choice in TOOL_CHOICES
                else {"type": "function", "function": {"name": choice}}
            )

    async def open_session(self, case: CaseContext) -> OpenAISession:
        return OpenAISession(self, case)

    async def aclose(self) -> None:
        await self.tools.aclose()
        await self.client.close()

    # ------------------------------------------------------------------------ helpers

    def content_for(self, message: str, files: Sequence[TurnFile]) -> str | list[dict[str, Any]]:
        if not files:
            return message
        parts: list[dict[str, Any]] = []
        for file in files:
            key = (file.path, file.media_type)
            part = self._images.get(key)
            if part is None:
                problem = file_problem(file)
                if problem is not None:
                    raise BackendError(problem)
                try:
                    part = image_part(file)
                except OSError as exc:
                    raise BackendError(f"cannot read {file.path}: {exc}") from exc
                self._images[key] = part
            parts.append(part)
        parts.append({"type": "text", "text": message})
        return parts

    def body(self, messages: list[dict[str, Any]], rounds: int, no_tools: bool) -> dict[str, Any]:
        """The request body: fixed parts, the messages, the round's tool_choice, extra_body."""
        body = {**self._fixed, "messages": messages}
        if self.tool_params:
            if no_tools:
                body["tool_choice"] = "none"
            elif rounds == 0 and self._first_choice is not None:
                body["tool_choice"] = self._first_choice
            elif self._first_choice == "none":
                body["tool_choice"] = "none"
        if self.agent.extra_body:
            body.update(self.agent.extra_body)
        return body

    async def create(self, body: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        """One chat completion (retried): the reply's JSON, as checked on the wire."""

        def note(error: BackendError, attempt: int, wait: float) -> None:
            notes.append(retry_note(error, attempt, wait))

        client = self.client

        async def post() -> dict[str, Any]:
            # the SDK's own client, auth, URL and error mapping; not its per-request walk of the
            # body nor its models of the reply (the wire check has parsed and checked it)
            response = await client.post(
                "/chat/completions",
                body=body,
                cast_to=httpx2.Response,
                options={
                    "timeout": request_timeout(self.turn_timeout),
                    "security": {"bearer_auth": True},
                },
            )
            data: dict[str, Any] = parsed_body(response)
            return data

        return await self.policy.run(post, self.translate, on_retry=note)

    def translate(self, exc: BaseException) -> BackendError:
        return translate(exc, self.api, self.base_url)

    def call_problems(self, calls: Sequence[Any]) -> list[str]:
        """Calls that cannot be run at all: an unknown tool, arguments that are not a JSON object."""
        problems = []
        for call in calls:
            name = call["function"]["name"]
            if self.tools.get(name) is None:
                offered = ", ".join(t.name for t in self.tools) or "none"
                problems.append(f"a tool that does not exist, {name!r} (offered: {offered})")
                continue
            arguments = call["function"]["arguments"]
            if not arguments.strip():
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


def _assistant_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The reply's message as it goes back into the history (only what the API takes)."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in calls
        ]
    return out


class OpenAISession:
    """One conversation; the history lives here."""

    def __init__(self, backend: OpenAIBackend, case: CaseContext) -> None:
        self.backend = backend
        self.case = case
        self.history: list[dict[str, Any]] = []
        if case.instructions:
            self.history.append({"role": "system", "content": case.instructions})

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        with turn_deadline(self.backend.turn_timeout):
            return await self._send(message, files)

    async def _send(self, message: str, files: Sequence[TurnFile]) -> TurnReply:
        backend = self.backend
        history = self.history
        start = len(history)
        history.append({"role": "user", "content": backend.content_for(message, files)})
        usages: list[TokenUsage] = []
        invocations: list[ToolInvocation] = []
        warnings: list[str] = []
        limit = backend.agent.max_tool_rounds
        try:
            for rounds in itertools.count():
                last_call = rounds >= limit
                if last_call:
                    warnings.append(
                        f"reached max_tool_rounds = {limit}: asked for the final reply without tools"
                    )
                # the history list itself is the request's messages: nothing is copied
                response = await backend.create(backend.body(history, rounds, last_call), warnings)
                usages.append(usage_from(response.get("usage")))
                choice = response["choices"][0]
                reply = choice["message"]
                calls: list[dict[str, Any]] = reply.get("tool_calls") or []
                if calls:
                    if last_call:
                        called = ", ".join(i.name for i in invocations) or "none"
                        asked = ", ".join(c["function"]["name"] for c in calls)
                        raise BackendError(
                            f"the model was still calling tools ({asked}) after max_tool_rounds = "
                            f"{limit} rounds, even when asked without tools; calls made this "
                            f"turn: {called}"
                        )
                    problems = backend.call_problems(calls)
                    if problems:
                        raise BackendError(
                            "the model called "
                            + "; and ".join(problems)
                            + " (no tool of that reply was run; the turn is not kept in the "
                            "conversation)"
                        )
                    history.append(_assistant_message(reply))
                    for call in calls:
                        function = call["function"]
                        outcome = await backend.tools.call(
                            function["name"], function["arguments"], self.case
                        )
                        invocations.append(outcome.invocation)
                        history.append(
                            {"role": "tool", "tool_call_id": call["id"], "content": outcome.content}
                        )
                    continue
                text = reply.get("content") or ""
                refusal = reply.get("refusal")
                if refusal:
                    raise BackendError(f"the model refused to answer: {refusal[:200]}")
                reason = choice.get("finish_reason")
                if reason == "content_filter":
                    raise BackendError(
                        "the service's content filter stopped the reply (finish_reason: "
                        "content_filter)"
                    )
                if reason == "length":
                    cap = backend.agent.max_tokens
                    warnings.append(
                        "the reply was cut off (finish_reason: length"
                        + (f", max_tokens = {cap}" if cap else "")
                        + ")"
                    )
                history.append({"role": "assistant", "content": text})
                break
        except BaseException:
            del history[start:]  # a failed turn leaves the conversation as it was
            raise
        usage = TokenUsage.sum(usages)
        price = backend.price
        return TurnReply(
            response=text,
            tool_invocations=tuple(invocations),
            token_usage=usage,
            warnings=tuple(warnings),
            cost_usd=None if price is None else price.cost(usage),
        )

    async def close(self) -> None:
        self.history.clear()
