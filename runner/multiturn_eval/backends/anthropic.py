"""The ``anthropic`` backend: Claude through the Messages API, with a client-side tool loop (SPEC 7).

One ``anthropic.AsyncAnthropic`` client per run (shared connection pool), its
own retries off (``max_retries=0``): every request goes through the capped
:class:`~multiturn_eval.retry.RetryPolicy` of the agent's ``retry:`` block.

Per session (one test case) the conversation is kept client-side. A turn:

1. sends the history plus the new user message -- the turn's ``files`` first
   (PNG/JPEG/GIF/WebP as base64 ``image`` blocks, PDF as a ``document`` block,
   text files inlined as a text block ``<file name="...">...</file>``), then
   the text -- with the effective instructions
   (:attr:`CaseContext.instructions`) as ``system``, the suite's Python tools,
   ``max_tokens`` and, only when the suite sets it, ``temperature`` (newer
   models refuse sampling parameters with a 400, which names the fix);
2. while the reply stops with ``tool_use``, runs every ``tool_use`` block of
   the reply in order and answers them all in one user message of
   ``tool_result`` blocks (``is_error`` for a tool that raised or got invalid
   arguments). After ``max_tool_rounds`` such rounds the next request says
   ``tool_choice: none``, asking for the final reply without tools, and the
   turn gets a warning (as on the ``semantic-kernel`` backend); a model that
   still calls tools then fails the turn, naming the calls;
3. returns the final reply's text. ``max_tokens`` (or
   ``model_context_window_exceeded``) keeps the text and adds a warning;
   ``refusal`` is a turn error.

Token usage is summed over every request of the turn (``input_tokens`` ->
``prompt_tokens``, ``output_tokens`` -> ``completion_tokens``, and the cache
creation/read tokens), and priced with :mod:`multiturn_eval.pricing`.
``prompt_caching: true`` marks the system prompt and the last tool with
``cache_control: {type: ephemeral}``.

A failed turn leaves the history as it was before the turn (a half-finished
tool loop would make every later request invalid), so the next turn is sent
on a clean conversation.

Errors are translated in one place (:func:`translate`): 401/403 stop the run
(exit 3) with one message; 408, 409, 429, 5xx, 529, timeouts and connection
errors are retried, then fail the turn; a prompt too long for the context
window and every other 4xx fail the turn.

A 200 whose body is not a Messages API response (an HTML page from a proxy,
JSON of another shape, ``content: null``, no ``usage``, a content block of a
type the installed SDK does not know, a cut-off, empty or non-UTF-8 body, a
body over 10 MB) fails the turn with "the Anthropic API at URL returned a
reply that is not a Messages API response (why): <excerpt>", checked on the
wire before the SDK parses it (:mod:`multiturn_eval.backends.wire`,
:func:`message_problem`). It is not retried and the session stays alive: the
history is as before the turn, so the next turn is sent as usual.

Per request, the body (built from dicts the session holds) is sent with the SDK
client's own ``post`` (its headers, auth, URL and error mapping), and the
reply is read as the JSON the wire check has already parsed and checked; its
content blocks go back into the history exactly as the API sent them.

Time: a turn (its tool loop, every retry and back-off included) runs under a
:func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``: each request's
HTTP timeout is the time left in the turn, and no retry wait is started that
would end past it (the turn fails then with the last error, saying it was
being retried).

Environment: ``api_key`` / ``base_url`` come from the suite, else
``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) / ``ANTHROPIC_BASE_URL``.
The environment is read once, when the backend is built (from ``env=`` when
given, else the run's :class:`~multiturn_eval.environment.RunEnvironment`); a
missing key is a configuration error (exit 2) before any request. The key is
in the backend's ``secrets`` (the run redacts it from every report).
"""

from __future__ import annotations

import base64
import itertools
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

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
from ..suite import AnthropicAgent
from ..tools import ToolSet
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from .files import PDF_TYPE, file_kind
from .wire import MAX_ITEMS, find_problem, is_int, json_type, parsed_body, response_hook

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

DEFAULT_BASE_URL = "https://api.anthropic.com"

#: the API's per-request limits (https://docs.claude.com/en/docs/build-with-claude/vision, /pdf-support)
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_PDF_BYTES = 32 * 1024 * 1024


# ------------------------------------------------------------------------------ files


def file_problem(file: TurnFile) -> str | None:
    """Why ``file`` cannot be sent to Claude, or None."""
    kind = file_kind(file)
    if kind is None:
        return (
            f"cannot send {file.path.name!r} ({file.media_type}) to Claude: it takes PNG, JPEG, "
            "GIF and WebP images, PDF documents and text files (set media_type: if the "
            "guess from the file name is wrong)"
        )
    try:
        size = file.path.stat().st_size
    except OSError as exc:
        return f"cannot read {file.path}: {exc}"
    limit = {"image": MAX_IMAGE_BYTES, "document": MAX_PDF_BYTES}.get(kind)
    if limit is not None and size > limit:
        return (
            f"{file.path.name!r} is {size / 1024 / 1024:.1f} MB; the API takes "
            f"{kind}s up to {limit // 1024 // 1024} MB"
        )
    return None


def file_block(file: TurnFile) -> dict[str, Any]:
    """The content block for one file (read now; OSError/UnicodeDecodeError on trouble)."""
    kind = file_kind(file)
    data = file.path.read_bytes()
    if kind == "image":
        media_type = file.media_type.split(";")[0].strip().lower()
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": media_type,
                "data": base64.b64encode(data).decode(),
            },
        }
    if kind == "document":
        return {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": PDF_TYPE,
                "data": base64.b64encode(data).decode(),
            },
            "title": file.path.name,
        }
    text = data.decode("utf-8")
    return {"type": "text", "text": f'<file name="{file.path.name}">\n{text}\n</file>'}


def _check_files(suite: LoadedSuite) -> list[ConfigIssue]:
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
                name = case.name
                issues.append(
                    ConfigIssue(
                        problem,
                        file=suite.display_path,
                        line=suite.document.line_of((*turn_path, "files", f)),
                        test_case=f"test_cases[{i}]" + (f' ("{name}")' if name else ""),
                        field=(f"turns[{t}]." if not case.is_legacy else "") + f"files[{f}].path",
                    )
                )
    return issues


# ----------------------------------------------------------------------------- errors


def _too_long(message: str) -> bool:
    text = message.lower()
    return "prompt is too long" in text or (
        "context" in text and ("too long" in text or "exceed" in text)
    )


def _block_types() -> frozenset[str]:
    """The content block types the installed SDK knows (read from its ``ContentBlock`` union)."""
    try:
        from anthropic.types import ContentBlock

        (union, *_) = typing.get_args(ContentBlock)
        return frozenset(
            value
            for cls in typing.get_args(union)
            for value in typing.get_args(cls.model_fields["type"].annotation)
        )
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover - SDK moved it
        return frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


BLOCK_TYPES = _block_types()
_USAGE_COUNTS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def message_problem(data: Any) -> str | None:
    """Why a 200's parsed body is not a Messages API response, or None when it is one.

    Checks what the backend reads: ``content`` (a list of at most
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


def translate(exc: Exception, base_url: str = DEFAULT_BASE_URL) -> BackendError:
    """The one place where the SDK's exceptions become BackendErrors."""
    problem = find_problem(exc)
    if problem is not None:
        return BackendError(
            problem.describe(
                f"the Anthropic API at {base_url} returned a reply that is not a Messages API "
                "response"
            )
        )
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        message = exc.api_message or exc.message
        kind = exc.type or "error"
        text = f"Anthropic API error {status} {kind}: {message}"
        if status in (401, 403):
            return FatalBackendError(
                f"the Anthropic API refused the credentials ({status} {kind}: {message}); "
                "check ANTHROPIC_API_KEY or agent.api_key",
                status_code=status,
                session_alive=False,
            )
        if status in (408, 409, 429) or status >= 500:
            return TransientError(
                text, retry_after=parse_retry_after(exc.response.headers), status_code=status
            )
        if status == 413 or (status == 400 and _too_long(message)):
            return BackendError(
                f"the conversation no longer fits the model's context window ({status} {kind}: "
                f"{message})",
                status_code=status,
            )
        if status == 400 and "temperature" in message and "deprecated" in message:
            text += " (this model takes no sampling parameters: remove agent.temperature)"
        return BackendError(text, status_code=status)
    if isinstance(exc, anthropic.APITimeoutError):
        return TransientError(f"the request to the Anthropic API at {base_url} timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
        return TransientError(f"cannot reach the Anthropic API at {base_url}{detail}")
    if isinstance(exc, anthropic.APIResponseValidationError | ValueError):
        return BackendError(
            f"the Anthropic API at {base_url} returned a reply that is not a Messages API "
            f"response ({type(exc).__name__}: {str(exc)[:200]})"
        )
    return BackendError(f"{type(exc).__name__}: {exc}")


def checked_http_client() -> Any:
    """The SDK's default HTTP client, with the reply size cap and :func:`message_problem`."""
    return anthropic.DefaultAsyncHttpxClient(
        event_hooks={"response": [response_hook(message_problem)]}
    )


# ---------------------------------------------------------------------------- backend


def _end_of_life(model: str) -> str | None:
    """The retirement date the SDK knows for a deprecated model (its table is private)."""
    try:
        from anthropic._data import DEPRECATED_MODELS
    except ImportError:  # pragma: no cover - the SDK moved it
        return None
    date = DEPRECATED_MODELS.get(model)
    return str(date) if date is not None else None


def _usage(response: Mapping[str, Any]) -> TokenUsage:
    usage = response["usage"]  # whole counts (checked on the wire)
    return TokenUsage(
        prompt_tokens=usage.get("input_tokens") or 0,
        completion_tokens=usage.get("output_tokens") or 0,
        cache_creation_tokens=usage.get("cache_creation_input_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
    )


class AnthropicBackend:
    name = "anthropic"

    def __init__(
        self,
        suite: LoadedSuite,
        settings: RunSettings,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        agent = suite.suite.agent
        assert isinstance(agent, AnthropicAgent)
        self.agent = agent
        self.secrets: set[str] = set()
        """What this backend adds to the run's secrets (its API key)."""
        self.warnings: list[str] = []
        """Said once at the start of the run (a deprecated model)."""
        if env is None:  # the environment as read once at start-up (empty: built outside the CLI)
            env = settings.env
        api_key = agent.api_key or env.get("ANTHROPIC_API_KEY") or None
        auth_token = None if api_key else (env.get("ANTHROPIC_AUTH_TOKEN") or None)
        issues = _check_files(suite)
        if api_key is None and auth_token is None:
            issues.insert(
                0,
                ConfigIssue(
                    "no API key for the anthropic backend: set ANTHROPIC_API_KEY "
                    "(or agent.api_key: ${SOME_VAR})",
                    file=suite.display_path,
                    line=suite.document.line_of(("agent", "backend")),
                    field="agent.api_key",
                ),
            )
        if issues:
            raise ConfigError(issues)
        for secret in (api_key, auth_token):
            if secret:
                self.secrets.add(secret)
        self.base_url = (
            agent.base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        retired = _end_of_life(agent.model)
        if retired is not None:
            self.warnings.append(
                f"{suite.display_path}: agent.model {agent.model!r} is deprecated; Anthropic "
                f"retires it on {retired}"
            )
        # said once above; the SDK would repeat it on every request
        warnings.filterwarnings(
            "ignore", message=r"The model '.*' is deprecated", category=DeprecationWarning
        )
        self.turn_timeout = settings.turn_timeout
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            auth_token=auth_token,
            base_url=self.base_url,
            max_retries=0,
            timeout=settings.turn_timeout,
            http_client=checked_http_client(),
        )
        self.tools = ToolSet.from_loaded(suite, max_workers=max(4, settings.parallel_test_cases))
        self.tool_params = self.tools.anthropic_tools(cache=agent.prompt_caching)
        self.policy = RetryPolicy(agent.retry, sleep=sleep)
        self.price = price_for(agent.model, suite.suite.pricing, provider=agent_provider(agent))
        self._files: dict[tuple[Path, str], dict[str, Any]] = {}

    async def open_session(self, case: CaseContext) -> AnthropicSession:
        return AnthropicSession(self, case)

    async def aclose(self) -> None:
        await self.tools.aclose()
        await self.client.close()

    # ------------------------------------------------------------------------ helpers

    def content_for(self, message: str, files: Sequence[TurnFile]) -> list[dict[str, Any]]:
        blocks = []
        for file in files:
            key = (file.path, file.media_type)
            block = self._files.get(key)
            if block is None:
                problem = file_problem(file)
                if problem is not None:
                    raise BackendError(problem)
                try:
                    block = file_block(file)
                except (OSError, UnicodeDecodeError) as exc:
                    raise BackendError(f"cannot read {file.path}: {exc}") from exc
                self._files[key] = block
            blocks.append(block)
        blocks.append({"type": "text", "text": message})
        return blocks

    def request(
        self, system: str | None, messages: list[dict[str, Any]], *, no_tools: bool = False
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.agent.model,
            "max_tokens": self.agent.max_tokens,
            "messages": messages,
        }
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            if self.agent.prompt_caching:
                block["cache_control"] = {"type": "ephemeral"}
            params["system"] = [block]
        if self.tool_params:
            params["tools"] = self.tool_params
            if no_tools:
                params["tool_choice"] = {"type": "none"}
        if self.agent.temperature is not None:
            # anthropic>=1 dropped the keyword (newer models refuse sampling parameters);
            # the API still takes it for the models that accept it
            params["temperature"] = self.agent.temperature
        return params

    async def create(self, params: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        """One Messages API call (retried): the reply's JSON, as checked on the wire.

        Sent with the SDK client's own ``post`` (its headers, auth, URL and error
        mapping), reading the JSON the wire check has already parsed and checked
        instead of building the SDK's ``Message`` models (13% of this backend's
        CPU per request, profiled in ``bench/overhead``).
        """

        def note(error: BackendError, attempt: int, wait: float) -> None:
            notes.append(retry_note(error, attempt, wait))

        client = self.client

        async def post() -> dict[str, Any]:
            response = await client.post(
                "/v1/messages",
                body=params,
                cast_to=httpx2.Response,
                options={"timeout": request_timeout(self.turn_timeout)},
            )
            data: dict[str, Any] = parsed_body(response)
            return data

        return await self.policy.run(post, lambda exc: translate(exc, self.base_url), on_retry=note)


class AnthropicSession:
    """One conversation; the history lives here."""

    def __init__(self, backend: AnthropicBackend, case: CaseContext) -> None:
        self.backend = backend
        self.case = case
        self.history: list[dict[str, Any]] = []

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        with turn_deadline(self.backend.turn_timeout):
            return await self._send(message, files)

    async def _send(self, message: str, files: Sequence[TurnFile]) -> TurnReply:
        backend = self.backend
        turn: list[dict[str, Any]] = [
            {"role": "user", "content": backend.content_for(message, files)}
        ]
        usages: list[TokenUsage] = []
        invocations: list[ToolInvocation] = []
        warnings: list[str] = []
        limit = backend.agent.max_tool_rounds
        for rounds in itertools.count():
            last_call = rounds >= limit
            if last_call:
                warnings.append(
                    f"reached max_tool_rounds = {limit}: asked for the final reply without tools"
                )
            response = await backend.create(
                backend.request(self.case.instructions, [*self.history, *turn], no_tools=last_call),
                warnings,
            )
            usages.append(_usage(response))
            content: list[dict[str, Any]] = response["content"]
            uses = [b for b in content if b["type"] == "tool_use"]
            if response.get("stop_reason") == "tool_use" and uses:
                if last_call:
                    called = ", ".join(i.name for i in invocations) or "none"
                    asked = ", ".join(u["name"] for u in uses)
                    raise BackendError(
                        f"the model was still calling tools ({asked}) after max_tool_rounds = "
                        f"{limit} rounds, even when asked without tools; calls made this turn: "
                        f"{called}"
                    )
                # the blocks go back into the history as the API sent them
                turn.append({"role": "assistant", "content": content})
                results = []
                for use in uses:
                    outcome = await backend.tools.call(use["name"], use["input"], self.case)
                    invocations.append(outcome.invocation)
                    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": use["id"]}
                    if outcome.content:
                        result["content"] = outcome.content
                    if outcome.is_error:
                        result["is_error"] = True
                    results.append(result)
                turn.append({"role": "user", "content": results})
                continue
            text = "".join(b["text"] for b in content if b["type"] == "text")
            stop = response.get("stop_reason")
            if stop == "refusal":
                raise BackendError(
                    "the model refused to answer (stop_reason: refusal)"
                    + (f": {text[:200]}" if text else "")
                )
            if stop in ("max_tokens", "model_context_window_exceeded"):
                cap = f" = {backend.agent.max_tokens}" if stop == "max_tokens" else ""
                warnings.append(f"the reply was cut off (stop_reason: {stop}{cap})")
            elif stop not in ("end_turn", "stop_sequence", "tool_use", None):
                warnings.append(f"unexpected stop_reason {stop!r}; the reply's text was kept")
            # unanswered tool_use blocks (cut off, or an odd stop) would break the next request
            kept = [b for b in content if b["type"] != "tool_use"]
            if kept:
                turn.append({"role": "assistant", "content": kept})
            break
        self.history.extend(turn)
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
