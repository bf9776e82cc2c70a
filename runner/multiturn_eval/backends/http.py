"""The ``http`` backend: your agent behind an HTTP endpoint, one JSON POST per turn (SPEC 7).

Request (``Content-Type: application/json``) to ``agent.url``::

    {"session_id": "mte-3f2a...",      # one per test case, the same on every turn
     "turn_index": 0,                  # 0-based position of the turn in the test case
     "test_case": "Single_JKHY_2009",  # the test case's name
     "input": "what is the net cash ...?",
     "context": {...},                 # the test case's context: mapping
     "instructions": "...",            # only when the suite has any
     "options": {...},                 # agent.options, only when given
     "files": [{"name": "chart.png", "media_type": "image/png", "data": "<base64>"}]}
                                       # only on turns with files

Reply: a JSON object ``{"response": str, "tool_invocations": [{name, args,
result, error, duration_ms}], "token_usage": {prompt_tokens, completion_tokens,
cache_creation_tokens, cache_read_tokens}, "cost_usd": float, "warnings":
[str]}``; only ``response`` is required. Other keys are kept out of the
report and named in a warning on the turn (a misspelt ``tool_invocation``
would otherwise vanish silently).

Headers come from ``agent.headers`` (values may use ``${VAR}``). Their values
are secrets: those from ``${VAR}`` and those of credential-looking headers
(``Authorization``, ``*key*``, ``*token*``, ``*secret*``, ``Cookie``) are
redacted from every report, log line and error message, and no error
message ever quotes a request header.

Each POST, reading the whole reply included, is bounded by ``agent.timeout``
(default: the turn timeout), and never by more than the time left in the turn;
it goes through the capped retry policy of ``agent.retry`` (408, 429, 5xx,
timeouts, refused or dropped connections; ``retry-after`` honoured up to its
cap), which starts no wait that would end past the turn's ``turn_timeout``. A
retried turn is sent again with the same ``session_id`` and ``turn_index``:
treat that pair as an idempotency key if your agent must not see a turn twice.
401 and 403 stop the run (exit 3): a wrong token would fail every test case.
Any other status, a body that is not JSON, or a JSON reply of the wrong shape
(``response`` not a string, ``tool_invocations`` not an array of objects or
more than 10,000 of them, ``token_usage`` not an object of whole numbers,
``cost_usd`` not a finite number, ``warnings`` not an array) fails the turn
with a message quoting a short, sanitised excerpt of what came back; so does
a reply body over 10 MB, which is not read past that
(:mod:`multiturn_eval.backends.wire`). Such a turn is not retried and the
session stays alive: the next turn is sent with the next ``turn_index``.

The HTTP client is ``httpx2``, the client the ``anthropic`` and ``openai``
SDKs are built on (so it is always installed with multiturn-eval).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx2
from pydantic import BaseModel, ValidationError

from .._version import __version__
from ..errors import BackendError, FatalBackendError, TransientError
from ..retry import (
    RetryPolicy,
    Sleep,
    parse_retry_after,
    request_timeout,
    retry_note,
    turn_deadline,
)
from ..secrets import Redactor, secrets_in
from ..suite import HttpAgent
from ..types import CaseContext, TokenUsage, ToolInvocation, TurnFile, TurnReply
from .wire import MAX_ITEMS, excerpt, find_problem, json_type, response_hook

if TYPE_CHECKING:
    from ..loaded import LoadedSuite
    from ..settings import RunSettings

M = TypeVar("M", bound=BaseModel)

#: reply keys the runner reads
REPLY_KEYS = ("response", "tool_invocations", "token_usage", "cost_usd", "warnings")


def display_url(url: str) -> str:
    """The URL without credentials, query or fragment (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class _StatusError(Exception):
    """A non-2xx response (internal: :func:`translate` turns it into a BackendError)."""

    def __init__(self, response: httpx2.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class HttpBackend:
    name = "http"

    def __init__(
        self, suite: LoadedSuite, settings: RunSettings, *, sleep: Sleep | None = None
    ) -> None:
        agent = suite.suite.agent
        assert isinstance(agent, HttpAgent)
        self.agent = agent
        self.url = agent.url
        self.shown_url = display_url(agent.url)
        self.timeout = agent.timeout or settings.turn_timeout
        self.turn_timeout = settings.turn_timeout
        self.secrets: set[str] = set(secrets_in(agent.headers))
        """Credential-looking header values (the run redacts them from every report)."""
        self.warnings: list[str] = []
        self.redact = Redactor(suite.secrets | self.secrets)
        parallel = max(1, settings.parallel_test_cases)
        self.client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(self.timeout),
            limits=httpx2.Limits(
                max_connections=max(10, parallel), max_keepalive_connections=parallel
            ),
            headers={"user-agent": f"multiturn-eval/{__version__}", **agent.headers},
            follow_redirects=False,
            event_hooks={"response": [response_hook(None)]},  # the 10 MB body cap
        )
        self.policy = RetryPolicy(agent.retry, sleep=sleep)

    async def open_session(self, case: CaseContext) -> HttpSession:
        return HttpSession(self, case)

    async def aclose(self) -> None:
        await self.client.aclose()

    # ------------------------------------------------------------------------ helpers

    def excerpt(self, text: str | bytes) -> str:
        """A short, single-line, secret-free quote of what the agent sent."""
        return excerpt(text, redact=self.redact)

    def translate(self, exc: Exception) -> BackendError:
        """The one place where transport failures and statuses become BackendErrors."""
        where = f"the agent at {self.shown_url}"
        problem = find_problem(exc)
        if problem is not None:  # the only check on this client is the size cap
            return BackendError(f"{where} answered with a body too large to read ({problem})")
        if isinstance(exc, _StatusError):
            response = exc.response
            status = response.status_code
            body = self.excerpt(response.content) if response.content else "an empty body"
            text = f"{where} answered HTTP {status}: {body}"
            if status in (401, 403):
                return FatalBackendError(
                    f"{where} refused the request (HTTP {status}: {body}); check agent.headers",
                    status_code=status,
                    session_alive=False,
                )
            if status in (408, 429) or status >= 500:
                return TransientError(
                    text, retry_after=parse_retry_after(response.headers), status_code=status
                )
            if 300 <= status < 400:
                target = display_url(response.headers.get("location", "")) or "elsewhere"
                return BackendError(
                    f"{where} answered HTTP {status}, a redirect to {target}; set agent.url to "
                    "the final address (POSTs are not redirected)",
                    status_code=status,
                )
            return BackendError(text, status_code=status)
        if isinstance(exc, httpx2.TimeoutException):
            return self.timed_out(self.timeout)
        if isinstance(exc, httpx2.ConnectError):
            return TransientError(f"cannot connect to {where}: {self.redact(str(exc))}")
        if isinstance(exc, httpx2.TransportError):
            detail = self.redact(str(exc)) or type(exc).__name__
            return TransientError(f"the connection to {where} broke: {detail}")
        return BackendError(f"{type(exc).__name__}: {self.redact(str(exc))}")

    def timed_out(self, limit: float) -> TransientError:
        where = f"the agent at {self.shown_url}"
        if limit >= self.timeout:
            return TransientError(f"{where} did not answer within {self.timeout:g} s")
        return TransientError(
            f"{where} did not answer in the {limit:.2f} s left of the turn's "
            f"{self.turn_timeout:g} s turn_timeout"
        )

    async def post(self, payload: dict[str, Any], notes: list[str]) -> httpx2.Response:
        async def attempt() -> httpx2.Response:
            limit = request_timeout(self.timeout)
            try:
                async with asyncio.timeout(limit):  # a slow drip of a body included
                    response = await self.client.post(self.url, json=payload, timeout=limit)
            except (TimeoutError, httpx2.TimeoutException):
                raise self.timed_out(limit) from None
            if not 200 <= response.status_code < 300:
                raise _StatusError(response)
            return response

        def note(error: BackendError, attempt_no: int, wait: float) -> None:
            notes.append(retry_note(error, attempt_no, wait))

        return await self.policy.run(attempt, self.translate, on_retry=note)

    def parse(self, response: httpx2.Response, warnings: list[str]) -> TurnReply:
        """The agent's JSON reply as a TurnReply, or a BackendError saying what is wrong."""
        where = f"the agent at {self.shown_url}"
        try:
            data = response.json()
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
            kind = response.headers.get("content-type", "no content type")
            body = self.excerpt(response.content) if response.content else "an empty body"
            raise BackendError(
                f"{where} answered HTTP {response.status_code} with a body that is not JSON "
                f"({kind}): {body}"
            ) from None
        if not isinstance(data, dict):
            raise BackendError(
                f"{where} answered with a JSON {_json_type(data)}, not an object with "
                f"'response': {self.excerpt(response.content)}"
            )
        if "response" not in data:
            raise BackendError(
                f"{where} answered without 'response' (keys: "
                f"{', '.join(map(str, data)) or 'none'}): {self.excerpt(response.content)}"
            )
        if not isinstance(data["response"], str):
            raise BackendError(
                f"{where} answered with 'response' as a JSON {_json_type(data['response'])}, "
                f"not a string: {self.excerpt(_dumps(data['response']))}"
            )
        unknown = [k for k in data if k not in REPLY_KEYS]
        if unknown:
            warnings.append(
                f"the agent's reply has keys multiturn-eval does not read: {', '.join(unknown)} "
                f"(it reads {', '.join(REPLY_KEYS)})"
            )
        try:
            items = _list(data, "tool_invocations")
            if len(items) > MAX_ITEMS:
                raise _Shape(
                    "tool_invocations", f"{len(items)} entries, more than the {MAX_ITEMS} accepted"
                )
            invocations = [
                _validate(ToolInvocation, item, f"tool_invocations[{i}]")
                for i, item in enumerate(items)
            ]
            usage = (
                _validate(TokenUsage, data["token_usage"], "token_usage")
                if data.get("token_usage") is not None
                else None
            )
            cost = data.get("cost_usd")
            if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
                raise _Shape("cost_usd", f"must be a number, got a JSON {_json_type(cost)}")
            if cost is not None and not (math.isfinite(cost) and cost >= 0):
                raise _Shape("cost_usd", f"must be a finite number >= 0, got {cost}")
            extra = [str(w) for w in _list(data, "warnings")]
        except _Shape as exc:
            raise BackendError(f"{where} answered with a malformed {exc.field}: {exc}") from None
        return TurnReply(
            response=data["response"],
            tool_invocations=tuple(invocations),
            token_usage=usage,
            warnings=(*warnings, *extra),
            cost_usd=None if cost is None else float(cost),
        )


class _Shape(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


_json_type = json_type


def _dumps(value: Any) -> str:
    return json.dumps(value)


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Shape(key, f"must be a JSON array, got a JSON {_json_type(value)}")
    return value


def _validate(model: type[M], value: Any, field: str) -> M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _Shape(field + (f".{loc}" if loc else ""), str(first["msg"])) from None


class HttpSession:
    """One conversation on the agent's side, identified by ``session_id``."""

    def __init__(self, backend: HttpBackend, case: CaseContext) -> None:
        self.backend = backend
        self.case = case
        self.session_id = f"mte-{uuid.uuid4().hex}"
        self.turn_index = 0

    def payload(self, message: str, files: Sequence[TurnFile]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "test_case": self.case.test_case_name,
            "input": message,
            "context": dict(self.case.context),
        }
        if self.case.instructions:
            body["instructions"] = self.case.instructions
        if self.backend.agent.options:
            body["options"] = self.backend.agent.options
        if files:
            body["files"] = [_file(f) for f in files]
        return body

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        with turn_deadline(self.backend.turn_timeout):
            payload = self.payload(message, files)
            self.turn_index += 1
            warnings: list[str] = []
            response = await self.backend.post(payload, warnings)
            return self.backend.parse(response, warnings)

    async def close(self) -> None:
        return None


def _file(file: TurnFile) -> dict[str, str]:
    try:
        data = file.path.read_bytes()
    except OSError as exc:
        raise BackendError(f"cannot read {file.path}: {exc}") from exc
    return {
        "name": file.path.name,
        "media_type": file.media_type,
        "data": base64.b64encode(data).decode(),
    }
