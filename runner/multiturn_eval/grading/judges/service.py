"""Judge settings after merging levels, and the run-wide judge service (clients, dedup).

Precedence (innermost wins), merged key by key::

    evaluation's judge:  >  turn's judge:  >  test case's judge:  >  suite's judge:

A key left out at one level comes from the next level out; then the defaults:
``backend: anthropic``, ``temperature: 0``, ``max_tokens: 1024``, ``retry:`` the
usual capped policy, ``api_key``/``base_url`` from ``ANTHROPIC_API_KEY`` /
``ANTHROPIC_BASE_URL`` (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` for ``openai``),
read from the run's environment. ``model`` must be named at some level.

Why the evaluation's own block wins over the turn's override: the keys an
evaluation sets are part of what that metric *is* (a rubric tuned for one
model, a judge that needs more ``max_tokens``); a turn's ``judge:`` is a default
for the judges of that turn. Keys merge one by one, so a turn's ``model:`` still
reaches every evaluation that does not name its own model; and a turn that wants
another judge for one metric gives itself its own ``evaluations:`` (which replace
the inherited ones, as for every evaluation).

De-duplication: within a run an identical judge request (same backend, endpoint,
key, model, temperature, max_tokens, scale and prompt text) is one call; concurrent
identical requests wait for the same in-flight call. Only the turn that made the
call counts its usage and cost; the others show ``details.deduplicated: true``.

With fixtures (``--fixtures``), the de-duplication moves below them: every test
case makes its own judge call through its own fixture (so a call shared by two
cases is in both fixtures, and ``-k`` replays one case alone), and identical
*live* calls are still made once (:class:`SharedCalls`); the first test case to ask
counts the usage, as without fixtures.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ...backends.base import NO_KEY_REPLAY
from ...backends.chat import Exchange, Side, Structured, StructuredRequest
from ...errors import BackendError, FatalBackendError, JudgeConfigProblem
from ...retry import OnRetry, RetryPolicy, Sleep, retry_note, turn_deadline
from ...run_clients import Endpoint, RunClients
from ...suite import JudgeConfig, RetryConfig
from ...suite.blocks import FixturesMode
from ...types import TokenUsage
from .clients import JudgeClient, JudgeRequest, make_client

DEFAULT_BACKEND = "anthropic"
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 1024
ENV_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
ENV_URLS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
PACKAGES = {"anthropic": "anthropic", "openai": "openai"}
JUDGE_FIELDS = tuple(JudgeConfig.model_fields)


@dataclass(frozen=True)
class ResolvedJudge:
    backend: str
    model: str
    base_url: str | None
    api_key: str
    api_version: str | None
    temperature: float
    max_tokens: int
    retry: RetryConfig

    def request(self, scale: str, prompt: str) -> JudgeRequest:
        """Asking this judge to grade ``prompt`` on ``scale``: every field but ``retry`` goes
        into the request, as each decides the answer."""
        sent = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "retry"
        }
        return JudgeRequest(**sent, scale=scale, prompt=prompt)


def merge_levels(*levels: JudgeConfig | None) -> dict[str, Any]:
    """The keys set at any level, outermost first in ``levels`` (later levels win)."""
    merged: dict[str, Any] = {}
    for level in levels:
        if level is None:
            continue
        for key in level.model_fields_set:
            value = getattr(level, key)
            if value is not None:
                merged[key] = value
    return merged


def resolve(
    merged: Mapping[str, Any], env: Mapping[str, str], *, keyless: bool = False
) -> ResolvedJudge:
    """The judge to call; JudgeConfigProblem when a required key is missing.

    ``keyless``: fixtures replay (or update) answer the judge's calls from recordings, so a
    missing API key is not a problem: ``api_key`` is then ``""`` and the client can make no
    live call (:class:`JudgeService` builds it so).
    """
    backend = merged.get("backend") or DEFAULT_BACKEND
    model = merged.get("model")
    if not model:
        raise JudgeConfigProblem(
            "no judge model: name one in judge: {model: ...} (evaluation, turn, test case "
            "or the suite's top-level judge:)",
            "judge.model",
        )
    key = merged.get("api_key") or env.get(ENV_KEYS[backend]) or None
    if key is None and keyless:
        key = ""
    if key is None:
        raise JudgeConfigProblem(
            f"no API key for the {backend} judge: set {ENV_KEYS[backend]} "
            "(or judge.api_key: ${SOME_VAR})",
            "judge.api_key",
        )
    api_version = merged.get("api_version")
    if api_version is not None and backend != "openai":
        raise JudgeConfigProblem(
            "api_version applies to backend: openai (Azure) only", "judge.api_version"
        )
    base_url = merged.get("base_url") or env.get(ENV_URLS[backend]) or None
    if api_version is not None and base_url is None:
        raise JudgeConfigProblem(
            "an Azure OpenAI judge (api_version) needs base_url: the Azure endpoint",
            "judge.base_url",
        )
    return ResolvedJudge(
        backend=backend,
        model=model,
        base_url=base_url,
        api_key=key,
        api_version=api_version,
        temperature=merged.get("temperature", DEFAULT_TEMPERATURE),
        max_tokens=merged.get("max_tokens", DEFAULT_MAX_TOKENS),
        retry=merged.get("retry") or RetryConfig(),
    )


@dataclass(frozen=True)
class JudgeOutcome:
    """One judge call's result: the raw verdict (or why none), its usage, warnings."""

    reply: Structured | None
    error: str | None
    """A call that failed (after retries): the metric's error."""
    notes: tuple[str, ...] = ()


def request_digest(request: JudgeRequest) -> bytes:
    """What makes two judge requests the same call, as a SHA-256 digest."""
    fields = (
        request.backend,
        request.model,
        request.base_url or "",
        request.api_key,
        request.api_version or "",
        repr(float(request.temperature)),
        str(request.max_tokens),
        request.scale,
    )
    digest = hashlib.sha256("\x00".join(fields).encode())
    digest.update(b"\x00")
    digest.update(request.prompt.encode("utf-8", "surrogatepass"))
    return digest.digest()


def structured_digest(endpoint: Endpoint, request: StructuredRequest) -> bytes:
    """What makes two structured judge requests (the fidelity judge's) the same call."""
    backend, base_url, api_key, api_version = endpoint
    fields = (
        "structured",
        backend,
        base_url or "",
        api_key,
        api_version or "",
        request.model,
        request.name,
        repr(request.temperature),
        repr(request.seed),
        str(request.max_tokens),
        json.dumps(request.schema, sort_keys=True),
        request.system,
    )
    digest = hashlib.sha256("\x00".join(fields).encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(request.prompt.encode("utf-8", "surrogatepass"))
    return digest.digest()


_Call = Callable[[RetryPolicy, OnRetry], Awaitable[Structured]]
"""One judge request, given its retry policy and retry-note callback."""


class SharedCalls:
    """Identical live calls made once: concurrent ones wait for the same call, later ones
    get its answer (a 2xx only: a failure is not kept, the next asker tries again)."""

    def __init__(self) -> None:
        self._calls: dict[bytes, asyncio.Future[tuple[int, Any]]] = {}

    def __call__(self, inner: Exchange) -> Exchange:
        async def shared(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
            digest = hashlib.sha256(path.encode())
            digest.update(json.dumps(body, sort_keys=True, default=str).encode())
            key = digest.digest()
            future = self._calls.get(key)
            if future is None:
                future = self._calls[key] = asyncio.ensure_future(inner(side, path, body))
                future.add_done_callback(lambda done: self._forget(key, done))
            return await asyncio.shield(future)

        return shared

    def _forget(self, key: bytes, done: asyncio.Future[tuple[int, Any]]) -> None:
        if done.cancelled() or done.exception() is not None or not 200 <= done.result()[0] < 300:
            self._calls.pop(key, None)

    def cancel(self) -> None:
        for future in self._calls.values():
            if not future.done():
                future.cancel()
        self._calls.clear()


class JudgeService(RunClients[JudgeClient]):
    """Clients and the de-duplication cache of one run (its lifetime: the run).

    ``fixtures``: the run's fixtures mode for its judges (off: none); it decides what a
    judge call made outside any test case gets (refused in replay). Inside a test case,
    the case's own fixture decides (:mod:`multiturn_eval.fixtures`).
    """

    def __init__(
        self, *, timeout: float = 120.0, sleep: Sleep | None = None, fixtures: FixturesMode = "off"
    ) -> None:
        super().__init__(timeout=timeout, sleep=sleep, fixtures=fixtures)
        self._calls: dict[bytes, asyncio.Future[JudgeOutcome]] = {}
        """Request digest -> its call (in flight or done); digests, not prompts, stay in memory."""
        self._claimed: set[bytes] = set()
        """With fixtures: the requests some test case has already counted the usage of."""
        self._shared = SharedCalls()

    def _make(self, key: Endpoint) -> JudgeClient:
        backend, base_url, api_key, api_version = key
        client = make_client(backend, base_url, api_key or NO_KEY_REPLAY, api_version, self.timeout)
        client.client.prepare(self.fixtures)
        if self.fixtures != "off":
            client.client.use_fixtures(self.fixtures, live=bool(api_key), share=self._shared)
        return client

    def client(self, request: JudgeRequest) -> JudgeClient:
        """The client of the request's endpoint (built on first use); its ``client.exchange``
        is the judge's exchange point (:mod:`multiturn_eval.backends.chat`)."""
        return self._client(
            (request.backend, request.base_url, request.api_key, request.api_version)
        )

    async def judge(self, request: JudgeRequest, retry: RetryConfig) -> tuple[JudgeOutcome, bool]:
        """(outcome, fresh): fresh is False when an identical request already made the call.

        FatalBackendError (401/403) is raised to every caller.
        """
        client = self.client(request)
        return await self._once(
            request_digest(request), lambda policy, note: client.call(request, policy, note), retry
        )

    async def structured(
        self,
        endpoint: Endpoint,
        request: StructuredRequest,
        retry: RetryConfig,
    ) -> tuple[JudgeOutcome, bool]:
        """Any structured request of a judge's model (the fidelity judge's verdicts), with the
        judges' retries and de-duplication: ``endpoint`` is (backend, base_url, api_key,
        api_version)."""
        client = self._client(endpoint)
        return await self._once(
            structured_digest(endpoint, request),
            lambda policy, note: client.structured(request, policy, note),
            retry,
        )

    async def _once(self, key: bytes, call: _Call, retry: RetryConfig) -> tuple[JudgeOutcome, bool]:
        if self.fixtures != "off":
            # every test case calls through its own fixture; SharedCalls makes identical
            # live calls once; the first case to ask counts the usage
            fresh = key not in self._claimed
            self._claimed.add(key)
            return await self._call(call, retry), fresh
        future = self._calls.get(key)
        fresh = future is None
        if future is None:
            future = self._calls[key] = asyncio.ensure_future(self._call(call, retry))
        outcome = await asyncio.shield(future)
        return outcome, fresh

    async def _call(self, call: _Call, retry: RetryConfig) -> JudgeOutcome:
        self.requests_made += 1
        notes: list[str] = []
        policy = RetryPolicy(retry, sleep=self._sleep)

        def note(error: BackendError, attempt: int, wait: float) -> None:
            notes.append(f"judge {retry_note(error, attempt, wait)}")

        with turn_deadline(self.timeout):
            try:
                reply = await call(policy, note)
            except FatalBackendError:
                raise
            except BackendError as exc:
                from ...fixtures.cassette import FixtureMissError

                if isinstance(exc, FixtureMissError):  # not in the fixtures: said as it is
                    return JudgeOutcome(None, str(exc), tuple(notes))
                return JudgeOutcome(None, f"the judge call failed: {exc}", tuple(notes))
        return JudgeOutcome(reply, None, tuple(notes))

    async def aclose(self) -> None:
        self._shared.cancel()
        for future in self._calls.values():
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: no "exception was never retrieved"
        await self._close_clients()


JUDGES: ContextVar[JudgeService | None] = ContextVar("multiturn_eval_judges", default=None)
"""The run's judge service; :func:`judge_service` sets it for the run's tasks."""


@contextlib.contextmanager
def judge_service_var(service: JudgeService) -> Iterator[JudgeService]:
    token = JUDGES.set(service)
    try:
        yield service
    finally:
        JUDGES.reset(token)


def usage_sum(usages: list[TokenUsage]) -> TokenUsage:
    return TokenUsage.sum(usages)
