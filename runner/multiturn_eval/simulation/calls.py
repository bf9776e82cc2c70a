"""The structured calls of a simulated user and of its fidelity judge, on the chat core.

:class:`~.llm.LLMSimulator` and :func:`~.fidelity.judge_fidelity` need a
:class:`~.llm.StructuredCall` (``await call(ask) -> StructuredAnswer``); here they
are made of the chat core's :func:`~multiturn_eval.backends.chat.structured` (SPEC 6.12):

- **the simulated user's** (:meth:`SimulatorService.call`): one
  :class:`~multiturn_eval.backends.chat.ChatClient` per endpoint (backend, base_url,
  api_key, api_version) for the whole run, built before the run like the judges'
  (:meth:`SimulatorService.prepare`), side ``"user"``; the simulator's ``model``,
  ``max_tokens`` and ``retry:`` policy bound here, the temperature and the seed
  from the ask. Its messages name the simulated user: a 401/403 is "the simulated
  user's Anthropic API refused the credentials ...; check ANTHROPIC_API_KEY or
  user_simulator.api_key", a :class:`~multiturn_eval.errors.FatalBackendError`
  that stops the run (exit 3). Each call is priced on its own (the suite's
  ``pricing:``, else genai-prices'). No de-duplication: every run simulates afresh.
- **the fidelity judge's** (:func:`fidelity_call`): the suite's ``judge:`` model
  through the run's :class:`~multiturn_eval.grading.judges.JudgeService` -- the
  judges' clients, retries, de-duplication and wording (side ``"judge"``).

Every request goes through the client's exchange point (``ChatClient.exchange``),
so recorded fixtures hold the simulated user's calls as they hold the agent's and
the judges'. While a simulated user's call is in flight, :data:`USER_TURN` holds
the 0-based turn its message will be (``StructuredAsk.turn``): the exchange point
of that call can tell which turn of a replayed conversation it belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..backends.chat import StructuredRequest, priced, structured
from ..errors import BackendError
from ..in_flight import USER_TURN
from ..pricing import judge_provider, price_for
from ..retry import RetryPolicy, retry_note
from ..run_clients import Endpoint, RunClients
from ..types import TokenUsage
from .llm import StructuredAnswer, StructuredAsk, StructuredCall

if TYPE_CHECKING:
    from ..backends.chat import ChatClient
    from ..grading.judges.service import JudgeService, ResolvedJudge
    from ..loaded import ResolvedSimulator
    from ..suite import ModelPrice

WHO = "the simulated user"
"""How a structured reply that does not fit names who gave it."""


def request_of(ask: StructuredAsk, model: str, max_tokens: int, who: str) -> StructuredRequest:
    """The chat core's request for ``ask``, with what the call binds (model, max_tokens)."""
    return StructuredRequest(
        model=model,
        system=ask.system,
        prompt=ask.prompt,
        name=ask.name,
        description=ask.description,
        schema=dict(ask.schema),
        max_tokens=max_tokens,
        temperature=ask.temperature,
        seed=ask.seed,
        who=who,
    )


class SimulatorService(RunClients["ChatClient"]):
    """The simulated users' model clients of one run (its lifetime: the run).

    Each client answers from and records into the running test case's fixture when the
    run has fixtures (a missing API key is then no error: see replay).
    """

    def client(self, endpoint: Endpoint) -> ChatClient:
        """The client of ``endpoint`` (built on first use; its SDK imported then)."""
        return self._client(endpoint)

    def _make(self, endpoint: Endpoint) -> ChatClient:
        from ..backends.base import NO_KEY_REPLAY
        from ..grading.judges.clients import chat_client

        backend, base_url, api_key, api_version = endpoint
        client = chat_client(
            backend,
            base_url,
            api_key or NO_KEY_REPLAY,
            api_version,
            self.timeout,
            side="user",
            block="user_simulator",
        )
        client.prepare(self.fixtures)
        if self.fixtures != "off":
            client.use_fixtures(self.fixtures, live=bool(api_key))
        return client

    def call(
        self, simulator: ResolvedSimulator, pricing: Mapping[str, ModelPrice] | None = None
    ) -> StructuredCall:
        """The structured call of an LLM simulator (``anthropic`` / ``openai``)."""
        endpoint = simulator.endpoint
        model = simulator.model
        if endpoint is None or model is None:
            raise ValueError(f"a {simulator.backend} simulator makes no model calls")
        client = self.client(endpoint)
        price = price_for(
            model, pricing, provider=judge_provider(simulator.backend, simulator.api_version)
        )
        max_tokens, retry, sleep = simulator.max_tokens, simulator.retry, self._sleep

        async def call(ask: StructuredAsk) -> StructuredAnswer:
            notes: list[str] = []

            def note(error: BackendError, attempt: int, wait: float) -> None:
                notes.append(f"{WHO}'s {retry_note(error, attempt, wait)}")

            request = request_of(ask, model, max_tokens, WHO)
            self.requests_made += 1
            token = USER_TURN.set(ask.turn)
            try:
                reply = await structured(
                    client, request, RetryPolicy(retry, sleep=sleep), side="user", on_retry=note
                )
            finally:
                USER_TURN.reset(token)
            return StructuredAnswer(
                reply.data, reply.problem, reply.usage, priced(price, [reply.usage]), tuple(notes)
            )

        return call

    async def aclose(self) -> None:
        await self._close_clients()


SIMULATORS: ContextVar[SimulatorService | None] = ContextVar(
    "multiturn_eval_simulators", default=None
)
"""The run's simulator service; the run sets it for its tasks (as :data:`~multiturn_eval.
grading.judges.JUDGES`)."""


def fidelity_call(
    judges: JudgeService, judge: ResolvedJudge, pricing: Mapping[str, ModelPrice] | None = None
) -> StructuredCall:
    """The fidelity judge as a structured call: the suite's judge model, the judges' service.

    A call that failed after its retries raises :class:`BackendError` (the step's verdict
    is then an error: failed); a 401/403 raises :class:`FatalBackendError`. An identical
    request made before in the run is not made again, and its usage is not counted twice.
    """
    endpoint: Endpoint = (judge.backend, judge.base_url, judge.api_key, judge.api_version)
    price = price_for(
        judge.model, pricing, provider=judge_provider(judge.backend, judge.api_version)
    )

    async def call(ask: StructuredAsk) -> StructuredAnswer:
        request = request_of(ask, judge.model, judge.max_tokens, "the fidelity judge")
        outcome, fresh = await judges.structured(endpoint, request, judge.retry)
        if outcome.reply is None:
            error = (outcome.error or "no reply").removeprefix("the judge call failed: ")
            raise BackendError(error)
        usage = outcome.reply.usage if fresh else TokenUsage()
        return StructuredAnswer(
            outcome.reply.data,
            outcome.reply.problem,
            usage,
            priced(price, [usage]),
            outcome.notes if fresh else (),
        )

    return call
