"""The chat core: one turn against a chat model, for every caller that talks to one (SPEC 6.12).

The ``anthropic`` and ``openai`` backends, the LLM judges and (next) the
simulated user share this module; what differs between the Anthropic Messages
API and OpenAI Chat Completions (Azure included) is a :class:`Dialect`: the
modules :mod:`.messages_api` and :mod:`.chat_completions`, which only build
requests, parse replies into a neutral :class:`Reply` (text, tool calls,
usage, stop reason) and word error statuses; :func:`translate` maps either
SDK's exceptions. Semantic Kernel keeps its own kernel loop
(:mod:`.semantic_kernel`) and shares the dialects' error translation, usage
and stop-reason handling.

The pieces: :class:`ChatClient` (one SDK client of one endpoint: its dialect,
its :class:`Wording` for messages, its exchange point, the retried
:meth:`ChatClient.request`); :class:`ChatAgent` (the tool loop over a client,
a request builder -- the dialects' ``MessagesRequests`` and
``ChatCompletionsRequests`` -- the ToolSet, the retry policy and the price);
:class:`ChatSession` (one test case's :class:`Conversation`);
:class:`ChatBackend` (a model backend made of these); :func:`structured`.

**A turn** (:meth:`ChatAgent.turn`): the user's message joins the history;
each request sends the whole history; while the reply asks for tool calls,
they run through the :class:`~multiturn_eval.tools.ToolSet` one after another
in the order the model made them (a tool from anywhere -- the suite's Python
functions, an MCP server's tools -- is just a name in the ToolSet: the loop
never asks where it comes from) and their results join the history. A test
case with MCP servers of its own (``scope: case``) has its own ToolSet, and its
requests offer that set's tools (:meth:`Requests.with_tools`). After
``max_tool_rounds`` rounds the next request asks for the final reply without
tools and the turn gets a warning; a model that still calls tools fails the
turn. A refusal (or a content filter) fails the turn; a reply cut off at the
token limit keeps its text with a warning. A turn that fails for any reason
leaves the history exactly as it was before the turn, so the next turn is sent
on a conversation the API accepts.

The history is kept in the provider's own wire form: each message is encoded
once, when it joins the conversation (the dialect's ``*_entry`` methods), and
the history list itself is every request's ``messages``: no request copies or
re-encodes the conversation (CPU per request stays flat over a long dialogue,
``bench/overhead``).

**Usage and cost**: each request's usage is priced on its own
(:func:`priced`: ``Price.cost(usage)`` per request, summed; None when any
request is unpriced), since long-context tiers are per request; the turn
reports the summed usage and that cost.

**The exchange point** (:attr:`ChatClient.exchange`): every model request of a
client -- the agent's, a judge's, a simulated user's -- goes through one
awaitable ``exchange(side, path, body) -> (status, data)``: ``side`` is who
asks (``"agent"``, ``"judge"``, ``"user"``), ``path`` the API path
(``/v1/messages``, ``/chat/completions``), ``body`` the JSON body; it returns
the HTTP status and the parsed JSON body, after the wire checks of
:mod:`.wire`. A live error status raises the SDK's exception (its headers
carry ``retry-after``), and so does a reply that never came or failed the
wire check. The retry policy, the translation (:func:`translate`) and the
tool loop sit above it, so a recorder can wrap it (``client.exchange =
record(client.exchange)``) and a replayer replace it without touching the
loop: a replayed 2xx should be checked with the dialect's ``check`` first (a
hand-edited fixture); a replayed error status (a non-2xx returned) is worded
by the dialect as a live one (:meth:`Dialect.status_error`, without
``retry-after``); a replayer's own failure is a BackendError
(``FixtureMissError``), passed through as the turn's error. Where the clients are: ``backend.chat.client`` of
the ``anthropic`` and ``openai`` backends, ``JudgeService.client(request).client``
of a judge; :meth:`ChatClient.use_fixtures` wraps it with the fixtures (SPEC 6.10).
(Semantic Kernel's requests do not go through one: its SDK clients' requests are
recorded at their ``httpx2`` transport, as a python agent's are.)

**A structured call** (:func:`structured`): one request whose answer must be
one JSON object of a schema -- Anthropic through a forced tool, OpenAI through
a strict ``json_schema`` response format -- returned unchecked with its usage,
or why there is none (a refusal, text instead of the object, a cut-off
reply). The judges' verdicts use it, and so do a simulated user's turns and the
fidelity judge (:mod:`multiturn_eval.simulation.calls`, side ``"user"`` and
``"judge"``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import BackendError, FatalBackendError, TransientError
from ..retry import (
    OnRetry,
    RetryPolicy,
    parse_retry_after,
    request_timeout,
    retry_note,
    turn_deadline,
)
from ..suite.blocks import FixturesMode
from ..tools import ToolOutcome, ToolSet, error_text
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from .base import CaseSession, ModelBackend

if TYPE_CHECKING:
    from ..pricing import Price
    from ..tools.mcp_servers.source import CaseTools

# This module is imported while suites load (the judges' verdicts use quote()), so it
# imports no HTTP stack at the top: .wire (and httpx2) come with the first ChatClient.

Side = Literal["agent", "judge", "user"]
"""Who makes a model request: the agent under test, an LLM judge, a simulated user."""

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
"""The headers of a reply that needs none (every 2xx)."""


# ------------------------------------------------------------------- neutral messages


# The per-request records are plain slotted dataclasses: a frozen one costs an
# object.__setattr__ per field on every request.


Exchange = Callable[[Side, str, Mapping[str, Any]], Awaitable[tuple[int, Any]]]
"""``exchange(side, path, body) -> (status, parsed JSON)``: one model request (see the module
docstring)."""


@dataclass(slots=True)
class StatusReply:
    """An error reply, as a dialect words it (:meth:`Dialect.status_error`)."""

    status: int
    data: Any
    """The parsed JSON body (its text when it is not JSON; None when unread)."""
    headers: Mapping[str, str] | None = None
    """Its headers (``retry-after``); None when not known (a replayed reply)."""


@dataclass(slots=True)
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str
    """As the model sent them: an object (Messages API) or JSON text (Chat Completions)."""


@dataclass(slots=True)
class Reply:
    """One assistant reply, neutral: what the loop needs from any provider."""

    text: str
    tool_calls: Sequence[ToolCall]
    """The calls the model asks the runner to run now (empty: the reply is final)."""
    usage: TokenUsage
    stop: str | None
    """The provider's own stop reason (``end_turn``, ``tool_use``, ``stop``, ``length``...)."""
    refusal: str | None
    """A refusal the provider reports apart from the text (Chat Completions' ``refusal``)."""
    raw: Any
    """The provider's message as the API sent it (what goes back into the history)."""


@dataclass(slots=True)
class Conversation:
    """One session's history, in the provider's wire form; ``system`` for APIs that send it apart."""

    history: list[dict[str, Any]]
    system: Any = None


@dataclass(frozen=True)
class Wording:
    """How messages name the service a client talks to, for whom."""

    api: str
    """``Anthropic``, ``OpenAI``, ``Azure OpenAI``, ``OpenAI-compatible``."""
    base_url: str | None
    key_hint: str
    """What to check after a 401/403: ``ANTHROPIC_API_KEY or agent.api_key``."""
    reply: str
    """What a 2xx body must be: ``a Messages API response``."""
    not_found: str = ""
    """Appended to a 404's message (what to check)."""
    side: Side = "agent"

    @property
    def at(self) -> str:
        return f" at {self.base_url}" if self.base_url else ""

    def not_a_reply(self) -> str:
        """``the X API at URL returned a reply that is not <reply>``."""
        return f"the {self.api} API{self.at} returned a reply that is not {self.reply}"

    def refused(self, status: int, kind: str | None, message: str) -> str:
        """The message of a 401/403 (the agent's names the error type; a judge's or a simulated
        user's, the status and whose key it was)."""
        if self.side == "agent":
            return (
                f"the {self.api} API refused the credentials ({shown_status(status, kind)}: "
                f"{message}); check {self.key_hint}"
            )
        who = "simulated user" if self.side == "user" else self.side
        return (
            f"the {who}'s {self.api} API refused the credentials ({status}: {message}); "
            f"check {self.key_hint}"
        )


def shown_status(status: int, kind: str | None) -> str:
    return f"{status} {kind}" if kind else str(status)


@dataclass(frozen=True)
class StructuredRequest:
    """A request for one JSON object of ``schema`` (a judge's verdict, a simulated user's turn)."""

    model: str
    system: str
    prompt: str
    name: str
    """The forced tool's name (Anthropic) and the response format's (OpenAI)."""
    description: str
    schema: dict[str, Any]
    max_tokens: int
    temperature: float | None
    """None: send no temperature (a model that refuses one)."""
    seed: int | None = None
    """Sent where the API takes one (Chat Completions); None: none sent."""
    who: str = "the judge"
    """Who answers, in the messages of a reply that does not fit."""


@dataclass(frozen=True)
class Structured:
    """What a structured call gave: the object (unchecked) or why there is none, and its usage."""

    data: Any
    problem: str | None
    usage: TokenUsage


# ------------------------------------------------------------------------ the dialect


@dataclass(frozen=True)
class SdkErrors:
    """An SDK's exception classes (``anthropic`` and ``openai`` share their layout)."""

    status: type[Exception]
    """An error status (the exchange point returns such a reply as a reply)."""
    timeout: type[Exception]
    connection: type[Exception]
    invalid: tuple[type[Exception], ...]
    """A reply the SDK could not read."""

    @classmethod
    def of(cls, sdk: Any, *invalid: type[Exception]) -> SdkErrors:
        """The classes of ``sdk`` (the module), and more exceptions of an unreadable reply."""
        return cls(
            sdk.APIStatusError,
            sdk.APITimeoutError,
            sdk.APIConnectionError,
            (sdk.APIResponseValidationError, *invalid),
        )


class LoadedErrors:
    """An SDK's :class:`SdkErrors` once the SDK is imported, without importing it.

    A replayed run never imports the SDK (the fixtures answer every call), and no
    exception can be one of the SDK's classes while the SDK is not imported, so
    :func:`translate` asks for them only when they can matter: ``errors()`` is None
    until the SDK is in ``sys.modules``; ``invalid`` are the SDK-free exceptions of an
    unreadable reply, looked for either way.
    """

    def __init__(self, module: str, *invalid: type[Exception]) -> None:
        self.module = module
        self.invalid = invalid
        self._errors: SdkErrors | None = None

    def __call__(self) -> SdkErrors | None:
        if self._errors is None:
            sdk = sys.modules.get(self.module)
            if sdk is None:
                return None
            self._errors = SdkErrors.of(sdk, *self.invalid)
        return self._errors


class Dialect(Protocol):
    """A provider API: builds and parses its messages, translates its errors; nothing else.

    The dialects are modules: :mod:`.messages_api` (Anthropic) and
    :mod:`.chat_completions` (OpenAI, Azure, compatible servers).
    """

    PATH: str
    """The request path (``/v1/messages``, ``/chat/completions``)."""
    OPTIONS: Mapping[str, Any]
    """The SDK's request options every call takes (what its own ``create()`` would set)."""
    ERRORS: LoadedErrors
    """The SDK's exceptions, once it is imported (a replay never imports it)."""

    def check(self, data: Any) -> str | None:
        """The wire check of a 2xx body (:func:`~.wire.response_hook`): why it is unusable."""
        ...

    def parse(self, data: Any) -> Reply:
        """A checked 2xx body as a neutral reply."""
        ...

    def status_error(
        self, reply: StatusReply, wording: Wording, fallback: str | None = None
    ) -> BackendError:
        """An error reply as a BackendError (``fallback``: the SDK's message, for a body that
        says none): 401/403 fatal, 408/409/429/5xx transient (:func:`status_basics`)."""
        ...

    def assistant_entry(self, reply: Reply) -> dict[str, Any]:
        """The history entry of a reply that asked for tool calls."""
        ...

    def tool_results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
    ) -> list[dict[str, Any]]:
        """The history entries answering a round of tool calls."""
        ...

    def final_entry(self, reply: Reply) -> dict[str, Any] | None:
        """The history entry of the final reply (None: nothing to keep)."""
        ...

    def refused_calls(self, calls: Sequence[ToolCall], tools: ToolSet) -> list[str]:
        """Calls the turn cannot run at all (the whole reply is refused), or []."""
        ...

    def stop_verdict(
        self, stop: str | None, refusal: str | None, text: str, max_tokens: int | None
    ) -> tuple[str | None, str | None]:
        """(turn error, warning) of a final reply's stop reason."""
        ...

    def structured_body(self, request: StructuredRequest) -> dict[str, Any]: ...

    def structured_result(self, reply: Reply, request: StructuredRequest) -> Structured: ...


# ---------------------------------------------------------------------- translation


def translate(dialect: Dialect, exc: BaseException, wording: Wording) -> BackendError:
    """The one translation of an SDK's failures (and the wire check's) into BackendErrors."""
    if isinstance(exc, BackendError):
        return exc
    from .wire import find_in_chain, find_problem  # a failed request only

    problem = find_problem(exc)
    if problem is not None:
        return BackendError(problem.describe(wording.not_a_reply()))
    loaded = dialect.ERRORS
    errors = loaded()  # None: the SDK is not imported, so exc is none of its exceptions
    if errors is not None:
        if isinstance(exc, errors.status):
            response: Any = getattr(exc, "response", None)
            reply = StatusReply(
                getattr(exc, "status_code", 0),
                getattr(exc, "body", None),
                response.headers if response is not None else None,
            )
            return dialect.status_error(reply, wording, getattr(exc, "message", None))
        if isinstance(exc, errors.timeout):
            return TransientError(f"the request to the {wording.api} API{wording.at} timed out")
        if isinstance(exc, errors.connection):
            cause = exc.__cause__ or exc.__context__
            detail = f": {error_text(cause)}" if cause is not None else ""
            return TransientError(f"cannot reach the {wording.api} API{wording.at}{detail}")
    found = find_in_chain(exc, loaded.invalid if errors is None else errors.invalid)
    if found is not None or isinstance(exc, ValueError):
        shown = found or exc
        return BackendError(f"{wording.not_a_reply()} ({type(shown).__name__}: {str(shown)[:200]})")
    return BackendError(f"{type(exc).__name__}: {exc}")


def sdk_error_text(status: int, body: Any) -> str:
    """The message the SDKs give an error status whose body says none."""
    if body is None:
        return f"Error code: {status}"
    if isinstance(body, str):
        return body or f"Error code: {status}"
    return f"Error code: {status} - {body}"


def transient_status(status: int) -> bool:
    """Statuses worth retrying: 408, 409, 429 and every 5xx (529 included)."""
    return status in (408, 409, 429) or status >= 500


def status_basics(
    reply: StatusReply, kind: str | None, message: str, wording: Wording
) -> BackendError | None:
    """The answer every provider gives alike: 401/403 fatal, transient statuses retried."""
    status = reply.status
    if status in (401, 403):
        return FatalBackendError(
            wording.refused(status, kind, message), status_code=status, session_alive=False
        )
    if transient_status(status):
        return TransientError(
            f"{wording.api} API error {shown_status(status, kind)}: {message}",
            retry_after=parse_retry_after(reply.headers or _NO_HEADERS),
            status_code=status,
        )
    return None


# -------------------------------------------------------------------------- the client


class ChatClient:
    """One SDK client of one endpoint, with its dialect, wording and exchange point.

    ``connect()`` builds the SDK's client (importing the SDK): :meth:`prepare` calls it
    before the run, as the backend, judge or simulated user is set up, unless the
    fixtures answer every call (``replay``); then the first request that goes out would,
    and none does: a replayed run imports no SDK and builds no client (bench/README.md,
    "Fixtures end to end").
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        dialect: Dialect,
        wording: Wording,
        *,
        timeout: float,
    ) -> None:
        self._connect = connect
        self._sdk: Any = None
        self.dialect = dialect
        self.wording = wording
        self.timeout = timeout
        self._options = dict(dialect.OPTIONS)
        self.exchange: Exchange = self._post
        """Every model request of this client goes through here (see the module docstring)."""

    @property
    def sdk(self) -> Any:
        """The SDK's client, built on first use."""
        if self._sdk is None:
            self._sdk = self._connect()
        return self._sdk

    def prepare(self, fixtures: FixturesMode) -> None:
        """Build the SDK's client now (its import and TLS context paid while loading, not by
        the first request), unless ``fixtures`` is ``replay``: no request goes out then."""
        if fixtures != "replay":
            self.sdk  # noqa: B018 - built by the property

    async def _post(self, side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        """One request with the SDK client's own ``post`` (its headers, auth, URL, Azure paths).

        The reply is read as the JSON the wire check has already parsed and
        checked, not built into the SDK's models. An error status raises the
        SDK's exception (its headers carry ``retry-after``), translated above.
        """
        import httpx2

        from .wire import parsed_body

        response = await self.sdk.post(
            path,
            body=body,
            cast_to=httpx2.Response,
            options={"timeout": request_timeout(self.timeout), **self._options},
        )
        return response.status_code, parsed_body(response)

    def use_fixtures(
        self, mode: FixturesMode, *, live: bool, share: Callable[[Exchange], Exchange] | None = None
    ) -> None:
        """Answer this client's requests from the running test case's fixture, and record
        them into it (:func:`multiturn_eval.fixtures.with_fixtures`).

        ``mode``: what a request made outside any test case gets (refused in replay);
        ``live``: the client has what a live call needs (its API key); ``share``: wraps
        the live call below the fixtures (the judges share one live call between the
        test cases that make the same request, and each case still records it). A
        replayed 2xx meets the dialect's wire check, as a live reply does.
        """
        from ..fixtures.exchange import with_fixtures

        inner: Any = self.exchange if share is None else share(self.exchange)  # side: a str there
        self.exchange = with_fixtures(inner, mode=mode, live=live, check=self._check_replayed)

    def _check_replayed(self, status: int, data: Any) -> None:
        if not 200 <= status < 300:
            return  # worded by the dialect as a live error reply (request())
        reason = self.dialect.check(data)
        if reason is not None:
            from .wire import excerpt

            shown = json.dumps(data, ensure_ascii=False, default=str)
            raise BackendError(
                f"the recorded reply in the fixture is not {self.wording.reply} ({reason}): "
                f"{excerpt(shown)}; re-record this test case (--fixtures update)"
            )

    def translate(self, exc: BaseException) -> BackendError:
        return translate(self.dialect, exc, self.wording)

    async def request(
        self,
        side: Side,
        body: dict[str, Any],
        policy: RetryPolicy,
        on_retry: OnRetry | None = None,
    ) -> Reply:
        """One model call through the exchange point, retried by ``policy``: the neutral reply."""
        dialect = self.dialect
        path = dialect.PATH

        async def attempt() -> Reply:
            status, data = await self.exchange(side, path, body)
            if not 200 <= status < 300:  # a replayed error reply: worded as a live one
                raise dialect.status_error(StatusReply(status, data), self.wording)
            return dialect.parse(data)

        return await policy.run(attempt, self.translate, on_retry=on_retry)

    async def aclose(self) -> None:
        if self._sdk is not None:  # never built: nothing to close
            await self._sdk.close()


# ------------------------------------------------------------------------- the loop


def rounds_warning(limit: int) -> str:
    return f"reached max_tool_rounds = {limit}: asked for the final reply without tools"


def still_calling(asked: Sequence[str], limit: int, called: Sequence[str]) -> str:
    """The turn error of a model still calling tools when asked for the final reply."""
    return (
        f"the model was still calling tools ({', '.join(asked)}) after max_tool_rounds = "
        f"{limit} rounds, even when asked without tools; calls made this turn: "
        f"{', '.join(called) or 'none'}"
    )


def priced(price: Price | None, usages: Sequence[TokenUsage]) -> float | None:
    """The cost of a turn's requests, each priced on its own (None when any is unpriced)."""
    if price is None:
        return None
    total = 0.0
    for usage in usages:
        cost: float | None = price.cost(usage)
        if cost is None:
            return None
        total += cost
    return total


Body = Callable[[Conversation, int, bool], dict[str, Any]]
"""``body(conversation, rounds, last_call)``: a request of the tool loop."""


class Requests(Protocol):
    """An agent's requests in a dialect: a session's start, each request of the tool loop."""

    def conversation(self, instructions: str | None) -> Conversation: ...

    def body(self, conversation: Conversation, rounds: int, last_call: bool) -> dict[str, Any]: ...

    def with_tools(self, tools: list[dict[str, Any]]) -> Requests:
        """The same requests offering ``tools`` (the dialect's tool schemas) instead."""
        ...


@dataclass
class ChatAgent:
    """A chat model as an agent under test: a client, its requests, tools, retries, price."""

    client: ChatClient
    body: Body
    tools: ToolSet
    policy: RetryPolicy
    price: Price | None
    max_tool_rounds: int
    max_tokens: int | None = None
    """For the cut-off warning (``max_tokens = N``); None: not shown."""
    side: Side = "agent"

    async def turn(
        self, conversation: Conversation, message: dict[str, Any], case: CaseContext
    ) -> TurnReply:
        """One turn: ``message`` (the user's history entry), the tool loop, the final reply."""
        client = self.client
        dialect = client.dialect
        history = conversation.history
        start = len(history)
        history.append(message)
        usages: list[TokenUsage] = []
        invocations: list[ToolInvocation] = []
        warnings: list[str] = []
        limit = self.max_tool_rounds

        def note(error: BackendError, attempt: int, wait: float) -> None:
            warnings.append(retry_note(error, attempt, wait))

        try:
            for rounds in itertools.count():
                last_call = rounds >= limit
                if last_call:
                    warnings.append(rounds_warning(limit))
                # the history list itself is the request's messages: nothing is copied
                reply = await client.request(
                    self.side, self.body(conversation, rounds, last_call), self.policy, note
                )
                usages.append(reply.usage)
                calls = reply.tool_calls
                if calls:
                    if last_call:
                        raise BackendError(
                            still_calling(
                                [c.name for c in calls], limit, [i.name for i in invocations]
                            )
                        )
                    problems = dialect.refused_calls(calls, self.tools)
                    if problems:
                        raise BackendError(
                            "the model called "
                            + "; and ".join(problems)
                            + " (no tool of that reply was run; the turn is not kept in the "
                            "conversation)"
                        )
                    history.append(dialect.assistant_entry(reply))
                    outcomes = []
                    for call in calls:  # in the order the model made them
                        outcome = await self.tools.call(call.name, call.arguments, case)
                        invocations.append(outcome.invocation)
                        outcomes.append(outcome)
                    history.extend(dialect.tool_results(calls, outcomes))
                    continue
                error, warning = dialect.stop_verdict(
                    reply.stop, reply.refusal, reply.text, self.max_tokens
                )
                if error is not None:
                    raise BackendError(error)
                if warning is not None:
                    warnings.append(warning)
                entry = dialect.final_entry(reply)
                if entry is not None:
                    history.append(entry)
                break
        except BaseException:
            del history[start:]  # a failed turn leaves the conversation as it was
            raise
        return TurnReply(
            response=reply.text,
            tool_invocations=tuple(invocations),
            token_usage=TokenUsage.sum(usages),
            warnings=tuple(warnings),
            cost_usd=priced(self.price, usages),
        )


class ChatSession(CaseSession):
    """One test case's conversation with a chat-core backend (the history lives here).

    ``content(message, files)`` is the backend's user message content (its
    files' blocks, then the text). The turn, tool loop and retries included,
    runs under a :func:`~multiturn_eval.retry.turn_deadline` of ``turn_timeout``.
    """

    def __init__(
        self,
        chat: ChatAgent,
        conversation: Conversation,
        case: CaseContext,
        content: Callable[[str, Sequence[TurnFile]], Any],
        turn_timeout: float | None,
        tools: CaseTools | None = None,
    ) -> None:
        super().__init__(case, tools)
        self.chat = chat
        self.conversation = conversation
        self._content = content
        self._timeout = turn_timeout

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.conversation.history

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        with turn_deadline(self._timeout):
            entry = {"role": "user", "content": self._content(message, files)}
            return await self.chat.turn(self.conversation, entry, self.case)

    async def close(self) -> None:
        self.history.clear()
        await self.end_tools()


class ChatBackend(ModelBackend):
    """A model backend that is the chat core on a dialect (``anthropic``, ``openai``).

    Its :meth:`~.base.ModelBackend.setup` checks its keys and files and calls
    :meth:`start` with its client and requests; :meth:`content_for` is its
    user message's content (the turn's files, then the text).
    """

    chat: ChatAgent
    requests: Requests

    def start(self, client: ChatClient, requests: Requests) -> None:
        self.requests = requests
        client.prepare(self.fixtures)
        if self.fixtures != "off":
            client.use_fixtures(self.fixtures, live=self.fixtures_live)
        self.chat = ChatAgent(
            client,
            requests.body,
            self.tools,
            self.policy,
            self.price,
            self.max_tool_rounds,
            self.max_tokens,
        )

    def content_for(self, message: str, files: Sequence[TurnFile]) -> Any:
        raise NotImplementedError

    def tool_schemas(self, toolset: ToolSet) -> list[dict[str, Any]]:
        """``toolset`` as the dialect's request offers it."""
        raise NotImplementedError

    def _offering(self, toolset: ToolSet) -> tuple[ChatAgent, Requests]:
        requests = self.requests.with_tools(self.tool_schemas(toolset))
        return dataclasses.replace(self.chat, body=requests.body, tools=toolset), requests

    def use_tools(self, toolset: ToolSet) -> None:
        self.chat, self.requests = self._offering(toolset)

    async def open_session(self, case: CaseContext) -> ChatSession:
        tools = await self.open_tools()
        chat, requests = self.chat, self.requests
        if tools is not None:
            try:
                chat, requests = self._offering(tools.toolset)
            except BaseException:
                await tools.aclose()
                raise
        conversation = requests.conversation(case.instructions)
        return ChatSession(chat, conversation, case, self.content_for, self.turn_timeout, tools)

    async def aclose(self) -> None:
        try:
            await self.close_tools()
        finally:
            await self.chat.client.aclose()


async def structured(
    client: ChatClient,
    request: StructuredRequest,
    policy: RetryPolicy,
    *,
    side: Side = "judge",
    on_retry: OnRetry | None = None,
) -> Structured:
    """One structured call (see the module docstring): retried; its failures raise BackendError."""
    dialect = client.dialect
    reply = await client.request(side, dialect.structured_body(request), policy, on_retry)
    return dialect.structured_result(reply, request)


def quote(value: Any, limit: int = 200) -> str:
    """A short, single-line ``repr`` of a reply's text or object, for a structured call's problems."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def field_of(obj: Any, key: str) -> Any:
    """``obj[key]`` of a parsed body, or ``obj.key`` of an SDK model (Semantic Kernel's usage)."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def usage_of(
    prompt: int, completion: int, cache_write: int, cache_read: int, reasoning: int | None = None
) -> TokenUsage:
    """TokenUsage from counts already checked on the wire (no validation per request)."""
    return TokenUsage.model_construct(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion + cache_write + cache_read,
        cache_creation_tokens=cache_write,
        cache_read_tokens=cache_read,
        reasoning_tokens=reasoning,
    )


__all__ = [
    "ChatAgent",
    "ChatBackend",
    "ChatClient",
    "ChatSession",
    "Conversation",
    "Dialect",
    "Exchange",
    "LoadedErrors",
    "Reply",
    "Side",
    "StatusReply",
    "Structured",
    "StructuredRequest",
    "ToolCall",
    "Wording",
    "priced",
    "quote",
    "structured",
]
