"""The ``anthropic`` backend: Claude through the Messages API, with a client-side tool loop (SPEC 7).

The backend is the chat core (:mod:`.chat`: the tool loop, retries, usage,
price, a failed turn leaving the history as it was) on the Messages API
dialect (:mod:`.messages_api`: requests, replies, stop reasons, errors);
this module holds what is the ``anthropic`` backend's own: its keys, the
turn's files, the client.

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
creation/read tokens); each request is priced with :mod:`multiturn_eval.pricing`
and the costs summed. ``prompt_caching: true`` marks the system prompt and the
last tool with ``cache_control: {type: ephemeral}``.

A failed turn leaves the history as it was before the turn (a half-finished
tool loop would make every later request invalid), so the next turn is sent
on a clean conversation.

Errors (:meth:`~.chat.Dialect.translate`): 401/403 stop the run (exit 3) with
one message; 408, 409, 429, 5xx, 529, timeouts and connection errors are
retried, then fail the turn; a prompt too long for the context window and
every other 4xx fail the turn.

A 200 whose body is not a Messages API response (an HTML page from a proxy,
JSON of another shape, ``content: null``, no ``usage``, a content block of a
type the installed SDK does not know, a cut-off, empty or non-UTF-8 body, a
body over 10 MB) fails the turn with "the Anthropic API at URL returned a
reply that is not a Messages API response (why): <excerpt>", checked on the
wire before anything parses it (:mod:`multiturn_eval.backends.wire`,
:func:`~.messages_api.check`). It is not retried and the session
stays alive: the history is as before the turn, so the next turn is sent as
usual.

Per request, the body (built from dicts the session holds; the history list
itself is its ``messages``) is sent with the SDK client's own ``post`` (its
headers, auth, URL and error mapping) through the client's exchange point
(:attr:`~.chat.ChatClient.exchange`), and the reply is read as the JSON the
wire check has already parsed and checked; its content blocks go back into
the history exactly as the API sent them.

Time: a turn (its tool loop, every retry and back-off included) runs under a
:func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``: each request's
HTTP timeout is the time left in the turn, and no retry wait is started that
would end past it (the turn fails then with the last error, saying it was
being retried).

Environment: ``api_key`` / ``base_url`` come from the suite, else
``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) / ``ANTHROPIC_BASE_URL``.
The environment is read once, when the backend is built (from ``env=`` when
given, else the run's :class:`~multiturn_eval.environment.RunEnvironment`); a
missing key is a configuration error (exit 2) before any request, except under
``--fixtures replay`` or ``update``, where the fixtures answer the calls. The key is
in the backend's ``secrets`` (the run redacts it from every report).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ConfigIssue
from ..suite import AnthropicAgent
from ..tools import ToolSet
from ..types import TurnFile
from . import messages_api
from .base import NO_KEY_REPLAY
from .chat import ChatBackend, ChatClient, ChatSession
from .files import PDF_TYPE, FileParts, file_issues, file_kind
from .messages_api import DEFAULT_BASE_URL, MessagesRequests

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

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


def _base64_source(media_type: str, data: bytes) -> dict[str, str]:
    return {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}


def file_block(file: TurnFile) -> dict[str, Any]:
    """The content block for one file (read now; OSError/UnicodeDecodeError on trouble)."""
    kind = file_kind(file)
    data = file.path.read_bytes()
    if kind == "image":
        media_type = file.media_type.split(";")[0].strip().lower()
        return {"type": "image", "source": _base64_source(media_type, data)}
    if kind == "document":
        return {
            "type": "document",
            "source": _base64_source(PDF_TYPE, data),
            "title": file.path.name,
        }
    text = data.decode("utf-8")
    return {"type": "text", "text": f'<file name="{file.path.name}">\n{text}\n</file>'}


# ---------------------------------------------------------------------------- backend


class AnthropicBackend(ChatBackend):
    """Claude through the Messages API (see the module docstring)."""

    name = "anthropic"
    agent_type = AnthropicAgent
    agent: AnthropicAgent

    def setup(self, suite: LoadedSuite, settings: RunSettings, env: Mapping[str, str]) -> None:
        agent = self.agent
        api_key = agent.api_key or env.get("ANTHROPIC_API_KEY") or None
        auth_token = None if api_key else (env.get("ANTHROPIC_AUTH_TOKEN") or None)
        issues = file_issues(suite, file_problem)
        if api_key is None and auth_token is None and self.key_optional():
            api_key = NO_KEY_REPLAY
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
            if secret and secret != NO_KEY_REPLAY:
                self.secrets.add(secret)
        self.base_url = (
            agent.base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        retired = messages_api.retirement_warning(agent.model, suite.display_path)
        if retired is not None:
            self.warnings.append(retired)
        requests = MessagesRequests(
            model=agent.model,
            max_tokens=agent.max_tokens,
            tools=self.tool_schemas(self.tools),
            temperature=agent.temperature,
            prompt_caching=agent.prompt_caching,
        )
        connect = functools.partial(  # built on the first live request (never in a replay)
            messages_api.sdk_client,
            api_key=api_key,
            auth_token=auth_token,
            base_url=self.base_url,
            timeout=settings.turn_timeout,
        )
        wording = messages_api.wording(self.base_url)
        self.start(
            ChatClient(connect, messages_api, wording, timeout=settings.turn_timeout), requests
        )
        self._files = FileParts(file_problem, file_block)

    def tool_schemas(self, toolset: ToolSet) -> list[dict[str, Any]]:
        return toolset.anthropic_tools(cache=self.agent.prompt_caching)

    def content_for(self, message: str, files: Sequence[TurnFile]) -> list[dict[str, Any]]:
        """The user message's content blocks: the files (read once per run), then the text."""
        return [*map(self._files, files), {"type": "text", "text": message}]


AnthropicSession = ChatSession
"""One conversation (the chat core's session)."""
