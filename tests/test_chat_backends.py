"""The contract of every chat backend: ``anthropic``, ``openai`` and ``semantic-kernel``.

Each test runs once per backend (:data:`tests.chat_flavors.FLAVORS`), through the
real SDK (under Semantic Kernel for ``semantic-kernel``) against the backend's fake
server, and asserts what a user relies on whatever the backend: the tool loop
(parallel calls in the order the model made them, tool errors answered, the final
reply asked without tools after ``max_tool_rounds``), the history every request
carries, a failed turn leaving it as it was, usage and cost, retries (capped,
``retry-after``, the turn's deadline), 401/403, replies that are not the API's,
refusals and cut-off replies, configuration errors, and the CLI run. What only
one backend does stays in its own ``tests/test_backend_*.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from multiturn_eval.backends.chat import Side
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import ConfigError, FatalBackendError, TransientError
from multiturn_eval.pricing import Price
from multiturn_eval.types import TokenUsage
from tests import tool_funcs
from tests.backend_harness import CASES, error, reply
from tests.chat_flavors import (
    FLAVORS,
    INSTRUCTIONS,
    Flavor,
    FlavorHarness,
    Turn,
    U,
    cli_suite,
    flavored,
)
from tests.conftest import Project
from tests.fakes._server import Malformed, Slow

each = pytest.mark.parametrize("flavor", FLAVORS, ids=str)


class Contract(FlavorHarness):
    """One backend built from a suite file, its fake server, and its requests."""

    def with_agent(self, extra: str, **kw: Any) -> Any:
        """The backend of the flavor's agent block plus ``extra`` keys."""
        return self.backend(self.flavor.agent + extra, **kw)

    @property
    def url(self) -> str:
        return self.flavor.url(self.fake)

    def system(self) -> list[Turn]:
        return [("system", INSTRUCTIONS)]


contract = flavored(Contract, "contract")


def cost(price: tuple[float, float, float, float] | None, usage: U) -> float | None:
    if price is None:
        return None
    into, out, write, read = price
    return (
        usage.prompt * into
        + usage.completion * out
        + usage.cache_write * write
        + usage.cache_read * read
    ) / 1e6


# ------------------------------------------------------------------------- tool loop


@each
def test_parallel_tool_calls_run_in_order_and_are_all_answered(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(
        flavor.calls(
            ("lookup", {"key": "revenue"}),
            ("lookup", {"key": "cost"}),
            text="Let me look both up.",
            usage=U(100, 30, cache_write=400),
        ),
        flavor.calls(("subtract", {"a": 206588, "b": "181001"}), usage=U(150, 20, cache_read=400)),
        flavor.text("The difference is 25587.", U(200, 10, cache_read=400)),
    )
    result = reply(contract.converse(contract.backend(), "what is the difference?")[0])

    assert result.response == "The difference is 25587."
    # parsed arguments as the model sent them, results as the tools returned them
    assert [(i.name, i.args, i.result, i.error) for i in result.tool_invocations] == [
        ("lookup", {"key": "revenue"}, "206588", None),
        ("lookup", {"key": "cost"}, "181001", None),
        ("subtract", {"a": 206588, "b": "181001"}, 25587.0, None),
    ]
    assert all(i.duration_ms is not None for i in result.tool_invocations)
    # the tools really ran, in order, with validated and coerced arguments
    assert [(name, args) for name, args, _thread in tool_funcs.CALLS] == [
        ("lookup", {"key": "revenue"}),
        ("lookup", {"key": "cost"}),
        ("subtract", {"a": 206588.0, "b": 181001.0}),
    ]
    # usage summed over the three requests: uncached input, output, cache writes and reads
    usage = result.token_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (450, 60)
    assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (400, 800)
    assert usage.total_tokens == 450 + 60 + 400 + 800
    assert usage.reasoning_tokens is None
    # each request priced, the costs summed (None: the model has no price)
    expected = cost(flavor.price, U(450, 60, cache_read=800, cache_write=400))
    assert result.cost_usd == (None if expected is None else pytest.approx(expected))

    requests = contract.requests
    assert len(requests) == 3
    second = requests[1]
    assert flavor.transcript(second) == [
        *contract.system(),
        ("user", "what is the difference?"),
        *([("assistant", "Let me look both up.")] if flavor.text_beside_calls else []),
        ("call", "lookup"),
        ("call", "lookup"),
        ("result", "206588"),
        ("result", "181001"),
    ]
    ids = flavor.call_ids(second)
    assert len(ids) == 2 and len(set(ids)) == 2
    # each call answered under its id (in the order of the calls where the backend runs them so)
    assert flavor.answers(second) == ["206588", "181001"]
    assert not any(e for _, _, e in flavor.tool_results(second))  # no error flag: they answered
    flavor.check_first_round_answers(second)


@each
def test_history_is_kept_across_turns_and_sessions_are_separate(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(
        flavor.calls(("lookup", {"key": "revenue"})), flavor.text("206588"), flavor.text("25587")
    )
    backend = contract.backend()
    results = contract.converse(backend, "what is the revenue?", "and the difference?")
    assert [reply(r).response for r in results] == ["206588", "25587"]
    assert [i.name for i in reply(results[0]).tool_invocations] == ["lookup"]
    assert list(reply(results[1]).tool_invocations) == []  # only calls of that turn
    # every request carries the whole conversation so far
    first, second, third = contract.requests
    assert flavor.transcript(first) == [*contract.system(), ("user", "what is the revenue?")]
    assert flavor.transcript(second) == [
        *contract.system(),
        ("user", "what is the revenue?"),
        ("call", "lookup"),
        ("result", "206588"),
    ]
    assert flavor.transcript(third) == [
        *contract.system(),
        ("user", "what is the revenue?"),
        ("call", "lookup"),
        ("result", "206588"),
        ("assistant", "206588"),
        ("user", "and the difference?"),
    ]
    base = ["system"] if flavor.system_in_history else []
    tool_turn = ["user"] if flavor.name == "anthropic" else ["tool"]
    assert flavor.roles(third) == [*base, "user", "assistant", *tool_turn, "assistant", "user"]
    entries = [{"role": m["role"], "content": m.get("content")} for m in third.body["messages"]]
    assert entries[-2:] == [
        flavor.assistant_entry("206588"),
        flavor.user_entry("and the difference?"),
    ]

    contract.fake.responder = lambda request: flavor.text(f"seen {len(request.body['messages'])}")
    backend = contract.backend()
    assert contract.loaded is not None
    loaded = contract.loaded

    async def run() -> list[str]:
        a = await backend.open_session(case_context(loaded, 0))
        b = await backend.open_session(case_context(loaded, 0))
        out = [(await a.send("1")).response, (await a.send("2")).response]
        out.append((await b.send("1")).response)
        await a.close()
        await b.close()
        await backend.aclose()
        return out

    n = len(base)
    assert asyncio.run(run()) == [f"seen {n + 1}", f"seen {n + 3}", f"seen {n + 1}"]


@each
def test_tool_errors_are_answered_to_the_model_and_recorded(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(
        flavor.calls(("divide", {"a": 1, "b": 0}), ("subtract", {"a": "lots", "b": 1})),
        flavor.text("I could not compute it."),
    )
    result = reply(contract.converse(contract.backend(), "divide")[0])
    assert result.response == "I could not compute it."
    errors = [i.error for i in result.tool_invocations]
    assert errors[0] == "ZeroDivisionError: float division by zero"
    assert errors[1] is not None and errors[1].startswith("ToolArgumentError: argument 'a'")
    answered = flavor.answers(contract.requests[1])
    assert answered[0] == "Error: ZeroDivisionError: float division by zero"
    assert answered[1].startswith("Error: ToolArgumentError: argument 'a'")
    if flavor.name == "anthropic":
        assert [e for _, _, e in flavor.tool_results(contract.requests[1])] == [True, True]


@each
def test_after_max_tool_rounds_the_final_reply_is_asked_without_tools(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(
        flavor.calls(("lookup", {"key": "revenue"})),
        flavor.calls(("lookup", {"key": "cost"})),
        flavor.text("25587"),
    )
    backend = contract.with_agent("  max_tool_rounds: 2\n")
    result = reply(contract.converse(backend, "loop")[0])
    assert result.response == "25587"
    assert [i.args["key"] for i in result.tool_invocations] == ["revenue", "cost"]
    assert list(result.warnings) == [
        "reached max_tool_rounds = 2: asked for the final reply without tools"
    ]
    flavor.check_final_request_without_tools([r.body for r in contract.requests])


@pytest.mark.parametrize("rounds", [1, 2])
@each
def test_still_calling_tools_without_tools_is_a_turn_error_and_history_stays_valid(
    contract: Contract, flavor: Flavor, rounds: int
) -> None:
    contract.script(
        *[flavor.calls(("lookup", {"key": "revenue"}))] * rounds,
        flavor.calls(("lookup", {"key": "cost"})),  # ignores the request without tools
        flavor.text("fresh start"),
    )
    backend = contract.with_agent(f"  max_tool_rounds: {rounds}\n")
    first, second = contract.converse(backend, "loop", "next")
    assert str(error(first)) == (
        f"the model was still calling tools (lookup) after max_tool_rounds = {rounds} rounds, "
        f"even when asked without tools; calls made this turn: {', '.join(['lookup'] * rounds)}"
    )
    assert reply(second).response == "fresh start"
    assert list(reply(second).warnings) == []
    # the failed turn left no trace: the fake would have rejected unanswered tool calls
    assert flavor.transcript(contract.requests[-1]) == [*contract.system(), ("user", "next")]


@each
def test_a_retry_in_the_middle_of_the_tool_loop_does_not_rerun_the_tools(
    contract: Contract, flavor: Flavor
) -> None:
    failure, _status, _message = flavor.capped()
    contract.script(flavor.calls(("subtract", {"a": 5, "b": 3})), failure, flavor.text("2"))
    result = reply(contract.converse(contract.backend(), "5-3?")[0])
    assert result.response == "2"
    assert len(tool_funcs.CALLS) == 1
    assert len(result.tool_invocations) == 1
    assert len(contract.requests) == 3
    assert flavor.answers(contract.requests[2]) == ["2.0"]


# ------------------------------------------------------------------- stop reasons


@each
def test_a_reply_cut_off_at_max_tokens_keeps_its_text_with_a_warning(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(flavor.cut_off("The answer is 2558"), flavor.text("ok"))
    first, second = contract.converse(contract.backend(), "long", "again")
    assert reply(first).response == "The answer is 2558"
    assert list(reply(first).warnings) == [flavor.cut_off_warning]
    assert reply(second).response == "ok"


@pytest.mark.parametrize(
    ("flavor", "index"),
    [(f, i) for f in FLAVORS for i in range(len(f.refusals()))],
    ids=lambda v: str(v),
)
def test_refusals_are_turn_errors(contract: Contract, flavor: Flavor, index: int) -> None:
    refusal, message = flavor.refusals()[index]
    contract.script(refusal, flavor.text("ok"))
    first, second = contract.converse(contract.backend(), "bad", "fine")
    assert str(error(first)) == message
    assert reply(second).response == "ok"
    assert flavor.transcript(contract.requests[-1]) == [*contract.system(), ("user", "fine")]


# ------------------------------------------------------------ retries and errors


@each
def test_429_waits_for_retry_after_then_succeeds(contract: Contract, flavor: Flavor) -> None:
    (first, first_wait), (second, second_wait) = flavor.rate_limits()
    contract.script(first, second, flavor.text("ok"))
    result = reply(contract.converse(contract.backend(), "hi")[0])
    assert result.response == "ok"
    assert contract.clock.waits == [first_wait, second_wait]
    assert len(contract.requests) == 3
    assert result.warnings[0] == flavor.rate_limit_warning


@pytest.mark.parametrize(
    ("flavor", "index"),
    [(f, i) for f in FLAVORS for i in range(len(f.transients()))],
    ids=lambda v: str(v),
)
def test_transient_failures_are_retried(contract: Contract, flavor: Flavor, index: int) -> None:
    contract.script(flavor.transients()[index], flavor.text("ok"))
    result = reply(contract.converse(contract.backend(), "hi")[0])
    assert result.response == "ok"
    assert len(contract.clock.waits) == 1
    assert 0 <= contract.clock.waits[0] <= 1.0  # full jitter of initial_delay (1 s)


@each
def test_retries_are_capped_and_the_next_turn_continues_cleanly(
    contract: Contract, flavor: Flavor
) -> None:
    failure, status, message = flavor.capped()
    contract.script(*[failure] * 3, flavor.text("ok"))
    backend = contract.with_agent("  retry: {max_attempts: 3}\n")
    first, second = contract.converse(backend, "lost", "next")
    failed = error(first)
    assert isinstance(failed, TransientError)
    assert str(failed) == message
    assert failed.status_code == status
    assert reply(second).response == "ok"
    assert len(contract.requests) == 4  # three attempts, then the next turn
    # the failed turn's message is not in the conversation the next turn continues
    assert flavor.transcript(contract.requests[-1]) == [*contract.system(), ("user", "next")]


@each
def test_retry_after_beyond_the_cap_is_not_waited_for(contract: Contract, flavor: Flavor) -> None:
    contract.script(flavor.long_retry_after(), flavor.text("never"))
    failure = error(contract.converse(contract.backend(), "hi")[0])
    assert isinstance(failure, TransientError)
    assert "asked to retry after 3600 s, longer than retry.max_retry_after = 60 s" in str(failure)
    assert contract.clock.waits == []
    assert len(contract.requests) == 1


@each
def test_a_dropped_connection_names_the_endpoint(contract: Contract, flavor: Flavor) -> None:
    from tests.fakes._server import Drop

    contract.script(Drop(), flavor.text("late"))
    backend = contract.with_agent("  retry: {max_attempts: 1}\n")
    failure = error(contract.converse(backend, "hi")[0])
    assert isinstance(failure, TransientError)
    assert str(failure).startswith(f"cannot reach the {flavor.api} API at {contract.url}: ")


@each
def test_a_reply_slower_than_the_turn_fails_it_without_a_retry(
    contract: Contract, flavor: Flavor
) -> None:
    """turn_timeout bounds the turn, retries included: a request that used it up is not retried."""
    contract.script(Slow(30, flavor.text("too late")), flavor.text("ok"))
    first, second = contract.converse(contract.backend(turn_timeout=0.5), "hi", "again")
    assert str(error(first)) == (
        f"the request to the {flavor.api} API at {contract.url} timed out "
        "(not retried: the turn's 0.5 s turn_timeout is used up)"
    )
    assert reply(second).response == "ok"  # the next turn is sent on the same session
    assert contract.clock.waits == []


@each
def test_a_reply_that_is_not_json_is_a_turn_error_not_retried(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(Malformed(), flavor.text("ok"))
    first, second = contract.converse(contract.backend(), "hi", "again")
    assert str(error(first)).startswith(flavor.bad_reply_error(contract.url) + "not JSON: ")
    assert reply(second).response == "ok"
    assert contract.clock.waits == []
    assert len(contract.requests) == 2


@each
def test_context_too_long_is_a_turn_error(contract: Contract, flavor: Flavor) -> None:
    too_long, message = flavor.too_long()
    contract.script(too_long, flavor.text("ok"))
    first, second = contract.converse(contract.backend(), "huge", "small")
    failure = error(first)
    assert not isinstance(failure, FatalBackendError | TransientError)
    assert str(failure) == message
    assert failure.status_code == 400
    assert reply(second).response == "ok"
    assert contract.clock.waits == []


@pytest.mark.parametrize("status", [401, 403])
@each
def test_401_and_403_are_fatal(contract: Contract, flavor: Flavor, status: int) -> None:
    refused, message = flavor.unauthorized(status)
    contract.script(refused)
    failure = error(contract.converse(contract.backend(), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert not failure.session_alive
    assert failure.status_code == status
    assert str(failure) == message
    assert contract.clock.waits == []


@each
def test_a_wrong_key_gets_the_servers_401(contract: Contract, flavor: Flavor) -> None:
    env = flavor.env(contract.fake, key="sk-wrong-key-000000")
    failure = error(contract.converse(contract.backend(env=env), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert failure.status_code == 401
    assert str(failure) == flavor.unauthorized(401)[1]
    assert contract.requests == []  # none reached the model


# ------------------------------------------------------------------- usage and cost


@each
def test_unknown_price_gives_no_cost_and_suite_pricing_overrides(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(flavor.text("a", U(1_000_000, 0)), flavor.text("b", U(1_000_000, 0)))
    model = flavor.agent.split("model: ")[1].split("\n")[0]
    unknown = flavor.agent.replace(model, flavor.unknown_model)
    result = reply(contract.converse(contract.backend(unknown), "x")[0])
    assert result.cost_usd is None
    assert result.token_usage is not None and result.token_usage.prompt_tokens == 1_000_000
    pricing = f"pricing:\n  {flavor.unknown_model}: {{input: 2, output: 4}}\n"
    priced = contract.backend(unknown, pricing + CASES)
    assert reply(contract.converse(priced, "x")[0]).cost_usd == pytest.approx(2)


class TieredPrice(Price):
    """A price whose rate depends on each request's input (as long-context tiers do):
    $1 per million input tokens up to 1,000 in one request, $10 above; unpriced above 5,000."""

    def cost(self, usage: TokenUsage) -> float:
        if usage.prompt_tokens > 5000:
            return None  # type: ignore[return-value]  # a tier the table does not know
        return usage.prompt_tokens * (1 if usage.prompt_tokens <= 1000 else 10) / 1e6


def priced_backend(contract: Contract) -> Any:
    backend = contract.backend()
    price = TieredPrice(0, 0, 0, 0)
    backend.price = price  # semantic-kernel prices with the backend's own
    if hasattr(backend, "chat"):
        backend.chat.price = price
    return backend


@each
@pytest.mark.parametrize(
    ("second", "cost"),
    [
        # each under 1,000 tokens: $1 each, not the $10 tier of their sum (1,700)
        (900, pytest.approx((800 + 900) / 1e6)),
        (6000, None),  # the second request has no price: nor has the turn
    ],
    ids=["each-request-priced-on-its-own", "an-unpriced-request-no-cost"],
)
def test_a_turns_cost_is_the_sum_of_its_requests_costs(
    contract: Contract, flavor: Flavor, second: int, cost: Any
) -> None:
    """A turn's cost is the sum of its requests' costs, not the cost of their summed usage;
    a turn with an unpriced request has no cost."""
    contract.script(
        flavor.calls(("lookup", {"key": "revenue"}), usage=U(800, 0)),
        flavor.text("206588", U(second, 0)),
    )
    result = reply(contract.converse(priced_backend(contract), "revenue?")[0])
    assert result.token_usage is not None and result.token_usage.prompt_tokens == 800 + second
    assert result.cost_usd == cost


CORE = [f for f in FLAVORS if f.name in ("anthropic", "openai")]


@pytest.mark.parametrize("flavor", CORE, ids=str)
def test_every_request_goes_through_the_exchange_point(contract: Contract, flavor: Flavor) -> None:
    """A recorder wrapping ``client.exchange`` sees every request with its side, path and body,
    and the reply as the wire check passed it; a replayer replacing it answers with no server."""
    contract.script(
        flavor.calls(("lookup", {"key": "revenue"})), flavor.text("206588"), flavor.text("25587")
    )
    backend = contract.backend()
    client = backend.chat.client
    live = client.exchange
    recorded: list[tuple[str, str, dict[str, Any], tuple[int, Any]]] = []

    async def record(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        got = await live(side, path, body)
        recorded.append((side, path, json.loads(json.dumps(body)), got))
        return got

    client.exchange = record
    live_replies = contract.converse(backend, "what is the revenue?", "and the difference?")
    requests = contract.requests
    assert [r.body for r in requests] == [body for _, _, body, _ in recorded]
    path = "/v1/messages" if flavor.name == "anthropic" else "/chat/completions"
    assert {(side, p) for side, p, _, _ in recorded} == {("agent", path)}
    assert all(status == 200 and isinstance(data, dict) for *_, (status, data) in recorded)

    # the same conversation replayed from the recording, the fake stopped: nothing is sent
    contract.fake.stop()
    backend = contract.backend()
    replies = iter(got for *_, got in recorded)

    async def replay(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        return next(replies)

    backend.chat.client.exchange = replay
    replayed = contract.converse(backend, "what is the revenue?", "and the difference?")
    assert [reply(r).response for r in replayed] == [reply(r).response for r in live_replies]
    assert [len(reply(r).tool_invocations) for r in replayed] == [1, 0]


@pytest.mark.parametrize("flavor", CORE, ids=str)
def test_a_replayed_error_status_is_translated_as_a_live_one(
    contract: Contract, flavor: Flavor
) -> None:
    """An error reply returned by the exchange point (a recording of a 429, say) is retried and
    worded exactly as the live one; a live error status raises through the exchange point."""
    contract.script(flavor.text("ok"))
    backend = contract.backend()
    live = backend.chat.client.exchange
    answers: list[tuple[int, Any]] = [(429, flavor.rate_limit_body())]

    async def replay_then_live(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        return answers.pop(0) if answers else await live(side, path, body)

    backend.chat.client.exchange = replay_then_live
    result = reply(contract.converse(backend, "hi")[0])
    assert result.response == "ok"
    assert result.warnings[0].startswith(flavor.rate_limit_warning.split("; retried")[0])
    assert len(contract.clock.waits) == 1  # no retry-after in a recording: the backoff
    assert 0 <= contract.clock.waits[0] <= 1.0
    assert len(contract.requests) == 1  # the replayed 429 was never sent


@pytest.mark.parametrize("flavor", CORE, ids=str)
def test_a_judges_request_goes_through_its_clients_exchange_point(
    contract: Contract, flavor: Flavor
) -> None:
    from multiturn_eval.grading.judges.clients import JudgeRequest
    from multiturn_eval.grading.judges.service import JudgeService
    from multiturn_eval.suite import RetryConfig

    contract.script(flavor.verdict(verdict="pass", reason="Polite."))
    request = JudgeRequest(
        backend=flavor.name,
        model="judge-model",
        base_url=contract.url,
        api_key=flavor.key,
        api_version=None,
        temperature=0,
        max_tokens=100,
        scale="pass_fail",
        prompt="Grade the reply.",
    )
    seen: list[tuple[str, str, Any]] = []

    async def run() -> Any:
        service = JudgeService(timeout=10)
        client = service.client(request).client
        live = client.exchange

        async def record(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
            status, data = await live(side, path, body)
            seen.append((side, path, data))
            return status, data

        client.exchange = record
        try:
            outcome, fresh = await service.judge(request, RetryConfig())
            assert fresh  # the first call of this request: not de-duplicated
        finally:
            await service.aclose()
        return outcome

    outcome = asyncio.run(run())
    assert outcome.error is None and outcome.reply is not None
    assert outcome.reply.data == {"verdict": "pass", "reason": "Polite."}
    path = "/v1/messages" if flavor.name == "anthropic" else "/chat/completions"
    assert [(side, p) for side, p, _ in seen] == [("judge", path)]
    assert [r.body["model"] for r in contract.requests] == ["judge-model"]


@pytest.mark.parametrize("flavor", CORE, ids=str)
def test_a_structured_call_for_another_side_without_temperature_and_with_a_seed(
    contract: Contract, flavor: Flavor
) -> None:
    """The simulated user's call: side ``user``, no temperature sent, a seed where the API
    takes one (Chat Completions), the answer unchecked, a refusal named after who answers."""
    from multiturn_eval.backends.chat import StructuredRequest, structured
    from multiturn_eval.grading.judges.clients import JudgeRequest
    from multiturn_eval.grading.judges.service import JudgeService
    from multiturn_eval.retry import RetryPolicy

    refusal, _ = flavor.refusals()[0]
    contract.script(flavor.verdict(message="hello", done=False), refusal)
    endpoint = JudgeRequest(flavor.name, "m", contract.url, flavor.key, None, 0, 1, "", "")
    ask = StructuredRequest(
        model="user-model",
        system="You play the user.",
        prompt="Say hello.",
        name="verdict" if flavor.name == "openai" else "record_verdict",
        description="The user's next message.",
        schema={"type": "object"},
        max_tokens=200,
        temperature=None,
        seed=7,
        who="the user simulator",
    )
    sides: list[str] = []

    async def run() -> list[Any]:
        service = JudgeService(timeout=10)
        client = service.client(endpoint).client
        live = client.exchange

        async def record(side: Side, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
            sides.append(side)
            return await live(side, path, body)

        client.exchange = record
        try:
            return [await structured(client, ask, RetryPolicy(), side="user") for _ in range(2)]
        finally:
            await service.aclose()

    answer, refused = asyncio.run(run())
    assert (answer.data, answer.problem) == ({"message": "hello", "done": False}, None)
    assert refused.data is None and refused.problem.startswith("the user simulator refused")
    assert sides == ["user", "user"]
    body = contract.requests[0].body
    assert body["model"] == "user-model" and "temperature" not in body
    assert body.get("seed") == (7 if flavor.name == "openai" else None)


# ------------------------------------------------------------------ configuration


@each
def test_key_and_base_url_from_the_suite_win_over_the_environment(
    contract: Contract, flavor: Flavor
) -> None:
    contract.script(flavor.text("hi"))
    extra = f"  api_key: {flavor.key}\n  base_url: {contract.url}\n"
    wrong = {
        k: "sk-wrong-key" if "KEY" in k else "http://127.0.0.1:9" for k in flavor.env(contract.fake)
    }
    backend = contract.with_agent(extra, env=wrong)
    assert reply(contract.converse(backend, "hello")[0]).response == "hi"
    assert flavor.key in backend.secrets  # the backend says what it adds; the suite is left alone
    assert contract.loaded is not None and flavor.key not in contract.loaded.secrets


@each
def test_missing_api_key_is_a_config_error(contract: Contract, flavor: Flavor) -> None:
    with pytest.raises(ConfigError) as info:
        contract.backend(env={})
    assert str(info.value) == flavor.missing_key
    assert contract.fake.requests == []


# ------------------------------------------------------------------ through the CLI


def analyst(last: Turn) -> tuple[str, Any, U]:
    """Answers the suite above like a good model, whatever order the requests come in."""
    kind, value = last
    if kind == "result":
        return "text", f"It is {value}.", U(60, 8)
    if "revenue" in value:
        return "call", ("lookup", {"key": "revenue"}), U(50, 10)
    if "wrong" in value:
        return "text", "No idea.", U(20, 3)
    return "call", ("subtract", {"a": 206588, "b": 181001}), U(55, 12)


def run_analyst(contract: Contract, project: Project, suite: str) -> Any:
    """``multiturn-eval run`` of ``suite`` against the fake answering as :func:`analyst`."""
    contract.fake.responder = contract.flavor.responder(analyst)
    # the environment as the entry point read it (no module below it reads os.environ)
    project.env.update(contract.flavor.env(contract.fake))
    project.write("suite.yaml", suite)
    return project.run("run", "suite.yaml")


@each
def test_cli_run_passes_against_the_fake(
    contract: Contract, flavor: Flavor, project: Project
) -> None:
    result = run_analyst(contract, project, cli_suite(flavor))
    assert result.code == 0, result.out + result.err
    report = result.report
    case = report["results"][0]
    assert case["backend"] == flavor.name
    assert [t["passed"] for t in case["turns"]] == [True, True]
    assert case["turns"][0]["token_usage"] == {
        "prompt_tokens": 110,
        "completion_tokens": 18,
        "total_tokens": 128,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 0,
    }
    into, out = flavor.cli_price
    assert case["turns"][0]["cost_usd"] == pytest.approx((110 * into + 18 * out) / 1e6)
    assert case["cost_usd"] == pytest.approx((225 * into + 38 * out) / 1e6)
    assert report["summary"]["cost_usd"] == pytest.approx(case["cost_usd"])
    assert flavor.key not in json.dumps(report)


@each
def test_cli_run_fails_a_wrong_turn_with_exit_1(
    contract: Contract, flavor: Flavor, project: Project
) -> None:
    result = run_analyst(
        contract, project, cli_suite(flavor).replace("and minus the cost?", "something wrong?")
    )
    assert result.code == 1, result.out + result.err
    turns = result.report["results"][0]["turns"]
    assert [t["passed"] for t in turns] == [True, False]
    assert turns[1]["response"] == "No idea."


@each
def test_cli_401_stops_the_run_with_exit_3(
    contract: Contract, flavor: Flavor, project: Project
) -> None:
    revoked = "sk-revoked-key-000-" + flavor.name
    project.env.update(flavor.env(contract.fake, key=revoked))
    cases = "".join(f"  - {{name: case{i}, input: hi}}\n" for i in range(6))
    project.write("suite.yaml", cli_suite(flavor).split("test_cases:")[0] + "test_cases:\n" + cases)
    result = project.run("run", "suite.yaml", "-p", "1")
    assert result.code == 3, result.out + result.err
    assert len(contract.fake.requests) == 1  # the first 401 stopped the run
    _, message = flavor.unauthorized(401)
    assert message.split("; check")[0] in result.report["run"]["stop_reason"]
    assert result.report["run"]["complete"] is False
    assert "Traceback" not in result.err
    assert revoked not in result.out + result.err + json.dumps(result.report)


def test_every_flavor_is_a_chat_backend() -> None:
    """The contract covers every backend that talks to a chat model (none is left out)."""
    from multiturn_eval.backends.base import _REGISTRY

    chat = {name for name in _REGISTRY if name not in ("python", "http")}
    assert {f.name for f in FLAVORS} == chat
