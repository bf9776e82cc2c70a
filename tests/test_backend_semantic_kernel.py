"""The semantic-kernel backend: a real Semantic Kernel agent, driven against fake HTTP services.

Semantic Kernel's ``ChatCompletionAgent`` runs on the real ``openai`` client
(and, for ``service: anthropic``, the real ``anthropic`` client) against the
fake servers of :mod:`tests.fakes`; nothing of Semantic Kernel or the SDKs is
mocked.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.backends.semantic_kernel import SemanticKernelBackend
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, ConfigError, FatalBackendError, TransientError
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.types import TurnFile, TurnReply
from tests import tool_funcs
from tests.backend_harness import Clock, converse
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.fakes.openai_server import (
    API_KEY,
    Drop,
    ErrorReply,
    FakeOpenAI,
    Malformed,
    Request,
    Slow,
    ToolCall,
    Usage,
    calls,
    context_too_long,
    rate_limited,
    server_error,
    text,
    tool_then_answer,
    unauthorized,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

AGENT = """\
agent:
  backend: semantic-kernel
  service: openai
  model: gpt-4o-mini
  instructions: You are a careful analyst.
  temperature: 0
  tools:
    - function: tests.tool_funcs:subtract
    - function: tests.tool_funcs:divide
    - function: tests.tool_funcs:lookup
"""

CASES = """\
test_cases:
  - name: analyst
    instructions: Document about ACME.
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
      - input: and the difference?
"""


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


class Harness:
    """Builds the backend from a suite file and talks to it as the engine does."""

    def __init__(self, tmp_path: Path, fake: FakeOpenAI) -> None:
        self.tmp_path = tmp_path
        self.fake = fake
        self.clock = Clock()
        self.env = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.base_url}

    def backend(
        self,
        agent: str = AGENT,
        cases: str = CASES,
        *,
        turn_timeout: float = 10,
        env: dict[str, str] | None = None,
        parallel: int = 2,
    ) -> SemanticKernelBackend:
        path = self.tmp_path / "suite.yaml"
        path.write_text(agent + cases)
        self.loaded = load_suite(path, env={})
        settings = RunSettings(parallel_test_cases=parallel, turn_timeout=turn_timeout)
        return SemanticKernelBackend(
            self.loaded, settings, env=self.env if env is None else env, sleep=self.clock.sleep
        )

    def converse(
        self, backend: SemanticKernelBackend, *messages: str | tuple[str, list[TurnFile]]
    ) -> list[TurnReply | BackendError]:
        """Send the messages as turns of one session (case 0); errors are values, as in the engine."""

        return converse(backend, self.loaded, messages)


@pytest.fixture
def harness(tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.chdir(tmp_path)
    tool_funcs.reset()
    return Harness(tmp_path, fake)


def reply(value: TurnReply | BackendError) -> TurnReply:
    assert isinstance(value, TurnReply), value
    return value


def error(value: TurnReply | BackendError) -> BackendError:
    assert isinstance(value, BackendError), value
    return value


def roles(request: Request) -> list[str]:
    return [m["role"] for m in request.body["messages"]]


# ---------------------------------------------------------------- automatic calling


def test_several_tool_calls_in_one_response_are_all_recorded_in_call_order(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(
            ToolCall("tools-lookup", {"key": "revenue"}),
            ToolCall("tools-lookup", {"key": "cost"}),
            usage=Usage(100, 30, cached_tokens=60),
        ),
        calls(ToolCall("tools-subtract", {"a": 206588, "b": "181001"}), usage=Usage(150, 20, 60)),
        text("The difference is 25587.", Usage(200, 10, 60)),
    )
    result = reply(harness.converse(harness.backend(), "what is the difference?")[0])

    assert result.response == "The difference is 25587."
    # parsed arguments as the model sent them, results as the tools returned them
    assert [(i.name, i.args, i.result, i.error) for i in result.tool_invocations] == [
        ("lookup", {"key": "revenue"}, "206588", None),
        ("lookup", {"key": "cost"}, "181001", None),
        ("subtract", {"a": 206588, "b": "181001"}, 25587.0, None),
    ]
    assert all(i.duration_ms is not None for i in result.tool_invocations)
    # the tools really ran, with validated and coerced arguments ("181001" -> 181001.0)
    assert [(name, args) for name, args, _ in tool_funcs.CALLS] == [
        ("lookup", {"key": "revenue"}),
        ("lookup", {"key": "cost"}),
        ("subtract", {"a": 206588.0, "b": 181001.0}),
    ]
    # usage summed over the three model calls; OpenAI's cached tokens are part of prompt_tokens
    usage = result.token_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cache_read_tokens) == (450 - 180, 180)
    assert (usage.completion_tokens, usage.cache_creation_tokens) == (60, 0)
    assert usage.total_tokens == 450 + 60
    # gpt-4o-mini from the price table: $0.15 input, $0.075 cached input, $0.60 output
    assert result.cost_usd == pytest.approx((270 * 0.15 + 180 * 0.075 + 60 * 0.60) / 1e6)

    requests = fake.chat_requests()
    assert len(requests) == 3
    second = requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    call_ids = [c["id"] for c in second[2]["tool_calls"]]
    answers = {m["tool_call_id"]: m["content"] for m in second[3:]}
    assert answers == {call_ids[0]: "206588", call_ids[1]: "181001"}


def test_request_carries_instructions_tools_and_settings(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("hi"))
    agent = AGENT.replace("temperature: 0", "temperature: 0\n  max_tokens: 300")
    harness.converse(harness.backend(agent), "hello")
    request = fake.chat_requests()[0]
    body = request.body
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert body["model"] == "gpt-4o-mini"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 300  # a custom base_url: the field OpenAI-compatible servers read
    assert "max_completion_tokens" not in body
    assert body["stream"] is False
    assert body["tool_choice"] == "auto"
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful analyst.\n\nDocument about ACME."},
        {"role": "user", "content": "hello"},
    ]
    # the suite's tools as one Semantic Kernel plugin, schemas from multiturn_eval.tools
    assert [t["function"]["name"] for t in body["tools"]] == [
        "tools-subtract",
        "tools-divide",
        "tools-lookup",
    ]
    lookup = body["tools"][2]["function"]
    assert lookup["description"] == "Look a value up in the test case's table."
    assert lookup["parameters"] == {
        "type": "object",
        "properties": {
            "key": {"type": "string", "description": 'The row to look up, e.g. "revenue".'}
        },
        "required": ["key"],
    }  # the CaseContext parameter is never shown to the model
    assert request.headers["x-stainless-retry-count"] == "0"  # the SDK's own retries are off


def test_instructions_are_sent_verbatim_not_as_a_template(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("ok"))
    agent = AGENT.replace(
        "instructions: You are a careful analyst.",
        "instructions: 'Reply as JSON like {{$answer}} or {{time.now}}.'",
    )
    harness.converse(harness.backend(agent), "hello")
    system = fake.chat_requests()[0].body["messages"][0]
    assert system["content"].startswith("Reply as JSON like {{$answer}} or {{time.now}}.")


def test_history_is_kept_across_turns_and_calls_belong_to_their_turn(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("tools-lookup", {"key": "revenue"})),
        text("206588"),
        text("25587"),
    )
    first, second = harness.converse(harness.backend(), "what is the revenue?", "the difference?")
    assert [reply(first).response, reply(second).response] == ["206588", "25587"]
    assert [i.name for i in reply(first).tool_invocations] == ["lookup"]
    assert reply(second).tool_invocations == []
    third = fake.chat_requests()[2]
    assert roles(third) == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert third.body["messages"][4]["content"] == "206588"
    assert third.body["messages"][5]["content"] == "the difference?"


def test_sessions_do_not_share_history(harness: Harness, fake: FakeOpenAI) -> None:
    fake.responder = lambda request: text(f"seen {len(request.body['messages'])}")
    backend = harness.backend()

    async def run() -> list[str]:
        a = await backend.open_session(case_context(harness.loaded, 0))
        b = await backend.open_session(case_context(harness.loaded, 0))
        out = [
            (await a.send("1")).response,
            (await a.send("2")).response,
            (await b.send("1")).response,
        ]
        await a.close()
        await b.close()
        await backend.aclose()
        return out

    assert asyncio.run(run()) == ["seen 2", "seen 4", "seen 2"]


def test_tool_errors_are_recorded_and_answered_to_the_model(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(
            ToolCall("tools-divide", {"a": 1, "b": 0}),
            ToolCall("tools-lookup", {"key": "profit"}),
            ToolCall("tools-subtract", {"a": "ten", "b": 1}),
            ToolCall("tools-subtract", {"a": 1}),
            ToolCall("tools-multiply", {"a": 1, "b": 2}),
            ToolCall("tools-divide", "{not json"),
        ),
        text("I could not compute it."),
    )
    result = reply(harness.converse(harness.backend(), "divide")[0])
    got = [(i.name, i.args, i.result, i.error) for i in result.tool_invocations]
    assert got[0] == ("divide", {"a": 1, "b": 0}, None, "ZeroDivisionError: float division by zero")
    assert got[1] == ("lookup", {"key": "profit"}, None, "KeyError: \"no row 'profit'\"")
    assert got[2][:3] == ("subtract", {"a": "ten", "b": 1}, None)
    assert got[2][3].startswith("ToolArgumentError: argument 'a': Input should be a valid number")
    # calls Semantic Kernel refuses before running anything: recorded with what the model was told
    assert got[3][:3] == ("subtract", {"a": 1}, None)
    assert "Missing required argument(s): ['b']" in str(got[3][3])
    assert got[4][:3] == ("multiply", {"a": 1, "b": 2}, None)
    assert "`tools-multiply` is not part of the provided tools" in str(got[4][3])
    assert got[5][:3] == ("divide", {}, None)
    assert "arguments are malformed" in str(got[5][3])
    assert len(result.tool_invocations) == 6

    # the model read the same error texts the anthropic backend sends
    tool_messages = {
        m["tool_call_id"]: m["content"]
        for m in fake.chat_requests()[1].body["messages"]
        if m["role"] == "tool"
    }
    ids = [c["id"] for c in fake.chat_requests()[1].body["messages"][2]["tool_calls"]]
    assert tool_messages[ids[0]] == "Error: ZeroDivisionError: float division by zero"
    assert tool_messages[ids[1]] == "Error: KeyError: \"no row 'profit'\""


def test_a_tool_that_raises_inside_semantic_kernel_is_recorded_by_the_filter(
    harness: Harness, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception Semantic Kernel swallows (it tells the model and logs) still reaches the report."""
    from multiturn_eval.tools import ToolSet

    async def broken(self: ToolSet, name: str, arguments: Any, case: Any = None) -> Any:
        raise RuntimeError("the tool runner broke")

    monkeypatch.setattr(ToolSet, "call", broken)
    fake.script(calls(ToolCall("tools-subtract", {"a": 2, "b": 1})), text("sorry"))
    result = reply(harness.converse(harness.backend(), "go")[0])
    [invocation] = result.tool_invocations
    assert (invocation.name, invocation.args) == ("subtract", {"a": 2, "b": 1})
    assert invocation.error == "RuntimeError: the tool runner broke"
    assert invocation.duration_ms is not None


def test_case_context_reaches_the_tools_of_concurrent_sessions(
    harness: Harness, fake: FakeOpenAI
) -> None:
    """One agent serves every session; each turn's calls and usage stay with their own session."""
    cases = "test_cases:\n" + "".join(
        f"  - name: c{i}\n    context: {{table: {{key: 'value-{i}'}}}}\n    input: go\n"
        for i in range(8)
    )
    agent = AGENT.replace("    - function: tests.tool_funcs:subtract\n", "").replace(
        "    - function: tests.tool_funcs:divide\n", ""
    )
    fake.responder = tool_then_answer
    backend = harness.backend(agent, cases, parallel=8)

    async def one(index: int) -> TurnReply:
        session = await backend.open_session(case_context(harness.loaded, index))
        try:
            return await session.send("go")
        finally:
            await session.close()

    async def run() -> list[TurnReply]:
        try:
            return list(await asyncio.gather(*(one(i) for i in range(8))))
        finally:
            await backend.aclose()

    results = asyncio.run(run())
    for i, result in enumerate(results):
        [invocation] = result.tool_invocations
        assert invocation.name == "lookup"
        assert invocation.error == "KeyError: \"no row 'x'\""  # the responder asks for key "x"
        assert result.token_usage is not None
        assert result.token_usage.prompt_tokens == (100 - 80) + 120
        assert result.token_usage.cache_read_tokens == 80, i


def test_case_context_values_reach_the_tool(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(calls(ToolCall("tools-lookup", {"key": "cost"})), text("181001"))
    result = reply(harness.converse(harness.backend(), "cost?")[0])
    assert result.tool_invocations[0].result == "181001"  # from this case's context.table


# ------------------------------------------------------------------ max_tool_rounds


def test_max_tool_rounds_asks_for_the_final_reply_without_tools(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("tools-lookup", {"key": "revenue"})),
        calls(ToolCall("tools-lookup", {"key": "cost"})),
        text("Here is what I found."),
    )
    agent = AGENT + "  max_tool_rounds: 2\n"
    result = reply(harness.converse(harness.backend(agent), "go")[0])
    assert result.response == "Here is what I found."
    assert [i.args["key"] for i in result.tool_invocations] == ["revenue", "cost"]
    assert list(result.warnings) == [
        "reached max_tool_rounds = 2: asked for the final reply without tools"
    ]
    last = fake.chat_requests()[-1].body
    assert "tools" not in last and "tool_choice" not in last


def test_a_model_calling_tools_past_max_tool_rounds_fails_the_turn_not_the_session(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("tools-lookup", {"key": "revenue"})),
        calls(ToolCall("tools-lookup", {"key": "cost"})),  # even when asked without tools
        text("next turn works"),
    )
    agent = AGENT + "  max_tool_rounds: 1\n"
    first, second = harness.converse(harness.backend(agent), "go", "again")
    assert str(error(first)) == (
        "the model was still calling tools (lookup) after max_tool_rounds = 1 rounds, "
        "even when asked without tools; calls made this turn: lookup"
    )
    assert reply(second).response == "next turn works"
    # the failed turn left nothing behind: the next request is a valid conversation
    assert roles(fake.chat_requests()[-1]) == ["system", "user"]
    assert fake.chat_requests()[-1].body["messages"][1]["content"] == "again"


# ------------------------------------------------------------------- stop reasons


def test_a_reply_cut_off_at_max_tokens_keeps_its_text_with_a_warning(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("The answer is", finish_reason="length"))
    agent = AGENT + "  max_tokens: 5\n"
    result = reply(harness.converse(harness.backend(agent), "hi")[0])
    assert result.response == "The answer is"
    assert list(result.warnings) == [
        "the reply was cut off (finish_reason: length, max_tokens = 5)"
    ]


def test_a_refusal_is_a_turn_error(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(text("", refusal="I can't help with that."), text("fine"))
    first, second = harness.converse(harness.backend(), "bad", "good")
    assert str(error(first)) == "the model refused to answer: I can't help with that."
    assert reply(second).response == "fine"


def test_a_content_filter_stop_is_a_turn_error(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(text("", finish_reason="content_filter"))
    failure = error(harness.converse(harness.backend(), "bad")[0])
    assert "content filter" in str(failure)


# ------------------------------------------------------------- retries and errors


def test_429_waits_for_retry_after_then_succeeds(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after="7"), rate_limited(retry_after="2"), text("ok"))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert harness.clock.waits == [7.0, 2.0]
    assert len(fake.chat_requests()) == 3
    assert result.warnings[0] == (
        "attempt 1 failed (OpenAI API error 429 rate_limit_exceeded: Rate limit reached for "
        "requests); retried after 7.00 s"
    )


@pytest.mark.parametrize(
    "failure", [server_error(500), server_error(503), ErrorReply(529, "Overloaded"), Drop()]
)
def test_transient_failures_are_retried(harness: Harness, fake: FakeOpenAI, failure: Any) -> None:
    fake.script(failure, text("ok"))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert len(harness.clock.waits) == 1
    assert 0 <= harness.clock.waits[0] <= 1.0  # full jitter of initial_delay (1 s)


def test_a_retry_in_the_middle_of_the_tool_loop_does_not_rerun_the_tools(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("tools-subtract", {"a": 5, "b": 3})),
        server_error(502),
        text("2"),
    )
    result = reply(harness.converse(harness.backend(), "5-3?")[0])
    assert result.response == "2"
    assert len(tool_funcs.CALLS) == 1
    assert len(result.tool_invocations) == 1
    assert len(fake.chat_requests()) == 3


def test_retries_are_capped_and_the_next_turn_continues_cleanly(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(*[server_error(500)] * 3, text("ok"))
    agent = AGENT + "  retry: {max_attempts: 3}\n"
    first, second = harness.converse(harness.backend(agent), "lost", "next")
    failure = error(first)
    assert isinstance(failure, TransientError)
    assert str(failure) == (
        "OpenAI API error 500 server_error: The server had an error while processing your "
        "request. (gave up after 3 attempts)"
    )
    assert failure.status_code == 500
    assert reply(second).response == "ok"
    # the failed turn's message is not in the conversation the next turn continues
    assert [m["content"] for m in fake.chat_requests()[-1].body["messages"][1:]] == ["next"]


def test_retry_after_beyond_the_cap_is_not_waited_for(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after="3600"), text("never"))
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert "asked to retry after 3600 s, longer than retry.max_retry_after = 60 s" in str(failure)
    assert harness.clock.waits == []
    assert len(fake.chat_requests()) == 1


def test_a_dropped_connection_names_the_endpoint(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(Drop(), text("late"))
    agent = AGENT + "  retry: {max_attempts: 1}\n"
    failure = error(harness.converse(harness.backend(agent), "hi")[0])
    assert isinstance(failure, TransientError)
    assert str(failure).startswith(f"cannot reach the OpenAI API at {fake.base_url}: ")


def test_a_reply_slower_than_the_turn_fails_it_without_a_retry(
    harness: Harness, fake: FakeOpenAI
) -> None:
    """turn_timeout bounds the turn, retries included: a request that used it up is not retried."""
    fake.script(Slow(30, text("too late")), text("ok"))
    first, second = harness.converse(harness.backend(turn_timeout=0.5), "hi", "again")
    assert str(error(first)) == (
        f"the request to the OpenAI API at {fake.base_url} timed out "
        "(not retried: the turn's 0.5 s turn_timeout is used up)"
    )
    assert reply(second).response == "ok"  # the next turn is sent on the same session
    assert harness.clock.waits == []


def test_malformed_json_is_a_turn_error_not_retried(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(Malformed(), text("ok"))
    first, second = harness.converse(harness.backend(), "hi", "again")
    assert str(error(first)).startswith(
        f"the OpenAI API at {fake.base_url} returned a reply that is not a Chat Completions "
        "response ("
    )
    assert reply(second).response == "ok"
    assert harness.clock.waits == []


def test_context_too_long_is_a_turn_error(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(context_too_long(), text("ok"))
    first, second = harness.converse(harness.backend(), "huge", "small")
    failure = error(first)
    assert not isinstance(failure, FatalBackendError | TransientError)
    assert str(failure).startswith(
        "the conversation no longer fits the model's context window (400 "
        "context_length_exceeded: This model's maximum context length is 128000 tokens."
    )
    assert reply(second).response == "ok"


def test_a_wrong_base_url_says_what_to_check(harness: Harness, fake: FakeOpenAI) -> None:
    agent = AGENT + f"  base_url: {fake.url}\n"  # without /v1
    failure = error(harness.converse(harness.backend(agent), "hi")[0])
    assert not isinstance(failure, TransientError)
    assert str(failure) == (
        "OpenAI API error 404 invalid_request_error: Invalid URL (POST /chat/completions); "
        "check agent.model and agent.base_url (OpenAI-compatible servers usually serve under /v1)"
    )


def test_401_is_fatal(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(unauthorized())
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert str(failure) == (
        "the OpenAI API refused the credentials (401 invalid_api_key: Incorrect API key "
        "provided); check agent.api_key or OPENAI_API_KEY"
    )
    assert harness.clock.waits == []


def test_a_wrong_key_is_refused_by_the_server_and_fatal(harness: Harness, fake: FakeOpenAI) -> None:
    env = {"OPENAI_API_KEY": "sk-wrong-key-000000", "OPENAI_BASE_URL": fake.base_url}
    failure = error(harness.converse(harness.backend(env=env), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert failure.status_code == 401


# ------------------------------------------------------------------- configuration


def test_key_and_base_url_come_from_the_environment_and_the_key_is_a_secret(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("ok"))
    backend = harness.backend()  # the suite names neither: OPENAI_API_KEY / OPENAI_BASE_URL
    assert API_KEY in backend.secrets  # the backend says what it adds; the suite is left alone
    assert API_KEY not in harness.loaded.secrets
    assert reply(harness.converse(backend, "hi")[0]).response == "ok"


def test_missing_api_key_is_a_config_error(harness: Harness) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(env={})
    [issue] = info.value.issues
    assert issue.field == "agent.api_key"
    assert issue.line == 3
    assert "OPENAI_API_KEY" in issue.message


def test_a_local_openai_compatible_server_needs_no_key(harness: Harness, fake: FakeOpenAI) -> None:
    fake.api_key = None  # Ollama, vLLM
    fake.script(text("ok"))
    agent = AGENT + f"  base_url: {fake.base_url}\n"
    assert reply(harness.converse(harness.backend(agent, env={}), "hi")[0]).response == "ok"


def test_azure_openai_uses_the_deployment_path_and_api_key_header(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(calls(ToolCall("tools-subtract", {"a": 3, "b": 1})), text("2"))
    agent = AGENT.replace("service: openai", "service: azure-openai").replace(
        "model: gpt-4o-mini",
        f"model: my-gpt4o\n  base_url: {fake.azure_endpoint}\n  api_version: 2024-10-21\n  max_tokens: 50",
    )
    result = reply(
        harness.converse(harness.backend(agent, env={"AZURE_OPENAI_API_KEY": API_KEY}), "3-1")[0]
    )
    assert result.response == "2"
    assert result.tool_invocations[0].result == 2.0
    request = fake.chat_requests()[0]
    assert request.path == "/openai/deployments/my-gpt4o/chat/completions"
    assert request.query == {"api-version": "2024-10-21"}
    assert request.headers["api-key"] == API_KEY
    assert "authorization" not in request.headers
    assert request.body["max_completion_tokens"] == 50


def test_azure_openai_without_a_key_is_a_config_error(harness: Harness, fake: FakeOpenAI) -> None:
    agent = AGENT.replace("service: openai", "service: azure-openai") + (
        f"  base_url: {fake.azure_endpoint}\n"
    )
    with pytest.raises(ConfigError) as info:
        harness.backend(agent, env={"OPENAI_API_KEY": API_KEY})
    assert "AZURE_OPENAI_API_KEY" in str(info.value)


def test_semantic_kernel_settings_it_reads_itself_are_config_errors(
    harness: Harness, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "not a url")  # Semantic Kernel reads it itself
    agent = AGENT.replace("service: openai", "service: azure-openai") + (
        f"  base_url: {fake.azure_endpoint}\n"
    )
    with pytest.raises(ConfigError) as info:
        harness.backend(agent, env={"AZURE_OPENAI_API_KEY": API_KEY})
    [issue] = info.value.issues
    assert (issue.field, issue.line) == ("agent.service", 3)
    assert "(endpoint: Input should be a valid URL" in issue.message
    assert fake.requests == []


def test_files_text_inlined_and_images_as_parts(harness: Harness, fake: FakeOpenAI) -> None:
    (harness.tmp_path / "notes.md").write_text("# Notes\nrevenue is up")
    (harness.tmp_path / "chart.png").write_bytes(PNG)
    fake.script(text("seen"), text("plain"))
    files = [
        TurnFile(harness.tmp_path / "notes.md", "text/markdown"),
        TurnFile(harness.tmp_path / "chart.png", "image/png"),
    ]
    first, _ = harness.converse(harness.backend(), ("look", files), "and now?")
    assert reply(first).response == "seen"
    content = fake.chat_requests()[0].body["messages"][1]["content"]
    assert content == [
        {"type": "text", "text": '<file name="notes.md">\n# Notes\nrevenue is up\n</file>'},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        },
        {"type": "text", "text": "look"},
    ]
    # files go with their turn only
    assert fake.chat_requests()[1].body["messages"][-1] == {"role": "user", "content": "and now?"}


def test_files_its_connector_cannot_send_are_config_errors(
    harness: Harness, fake: FakeOpenAI
) -> None:
    (harness.tmp_path / "report.pdf").write_bytes(b"%PDF-1.4\n")
    cases = CASES.replace(
        "      - input: and the difference?\n",
        "      - input: and the difference?\n        files: [{path: report.pdf}]\n",
    )
    with pytest.raises(ConfigError) as info:
        harness.backend(cases=cases)
    [issue] = info.value.issues
    assert issue.field == "turns[1].files[0].path"
    assert issue.test_case == 'test_cases[0] ("analyst")'
    assert "cannot send 'report.pdf' (application/pdf)" in issue.message
    assert fake.requests == []


# ----------------------------------------------------------- service: anthropic


@pytest.fixture
def fake_anthropic() -> Iterator[fa.FakeAnthropic]:
    with fa.FakeAnthropic() as server:
        yield server


@pytest.mark.usefixtures("retiring_sonnet_4_5")
def test_anthropic_service_runs_tools_and_reports_cache_usage(
    harness: Harness, fake_anthropic: fa.FakeAnthropic
) -> None:
    """Semantic Kernel's own Anthropic connector works on anthropic>=2 (not the [anthropic] extra)."""
    fake_anthropic.script(
        fa.tool_uses(
            ("tools-lookup", {"key": "revenue"}),
            ("tools-lookup", {"key": "cost"}),
            usage=fa.Usage(100, 30, cache_creation_input_tokens=400),
        ),
        fa.text("The difference is 25587.", fa.Usage(200, 10, None, 400)),
        fa.text("no", stop_reason="refusal"),
        fa.text("cut", stop_reason="max_tokens"),
        fa.text("stopped at the sequence", stop_reason="stop_sequence"),
        fa.unauthorized(),
    )
    agent = AGENT.replace("service: openai", "service: anthropic").replace(
        "gpt-4o-mini", "claude-sonnet-4-5"
    )
    env = {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake_anthropic.url}
    backend = harness.backend(agent, env=env)
    results = harness.converse(backend, "diff?", "bad", "long", "stop", "again")
    first = reply(results[0])
    assert first.response == "The difference is 25587."
    assert [(i.name, i.args, i.result) for i in first.tool_invocations] == [
        ("lookup", {"key": "revenue"}, "206588"),
        ("lookup", {"key": "cost"}, "181001"),
    ]
    usage = first.token_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (300, 40)
    assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (400, 400)
    assert first.cost_usd == pytest.approx((300 * 3 + 40 * 15 + 400 * 3.75 + 400 * 0.30) / 1e6)
    assert str(error(results[1])) == "the model refused to answer (stop_reason: refusal)"
    assert list(reply(results[2]).warnings) == [
        "the reply was cut off (stop_reason: max_tokens = 1024)"
    ]
    # stop reasons Semantic Kernel's connector has no mapping for (it would raise KeyError)
    assert reply(results[3]).response == "stopped at the sequence"
    assert isinstance(error(results[4]), FatalBackendError)

    body = fake_anthropic.messages_requests()[0].body
    assert body["system"] == "You are a careful analyst.\n\nDocument about ACME."
    assert [t["name"] for t in body["tools"]] == ["tools-subtract", "tools-divide", "tools-lookup"]
    assert body["max_tokens"] == 1024
    assert body["temperature"] == 0  # sent in the body: anthropic>=2.14 has no such argument
    assert harness.loaded.warnings == []  # the backend says it; the suite is left alone
    assert backend.warnings == [
        f"{harness.loaded.display_path}: agent.model 'claude-sonnet-4-5' is deprecated; "
        "Anthropic retires it on November 30th, 2026"
    ]
    second = fake_anthropic.messages_requests()[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert {b["type"] for b in second[2]["content"]} == {"tool_result"}


def test_anthropic_service_keeps_the_tools_defined_after_max_tool_rounds(
    harness: Harness, fake_anthropic: fa.FakeAnthropic
) -> None:
    """A history with tool_use blocks needs tools defined: forbid them with tool_choice none."""
    fake_anthropic.script(fa.tool_uses(("tools-lookup", {"key": "revenue"})), fa.text("206588"))
    agent = (
        AGENT.replace("service: openai", "service: anthropic").replace(
            "gpt-4o-mini", "claude-haiku-4-5"
        )
        + "  max_tool_rounds: 1\n"
    )
    env = {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake_anthropic.url}
    result = reply(harness.converse(harness.backend(agent, env=env), "revenue?")[0])
    assert result.response == "206588"
    assert list(result.warnings) == [
        "reached max_tool_rounds = 1: asked for the final reply without tools"
    ]
    first, last = (r.body for r in fake_anthropic.messages_requests())
    assert first["tool_choice"] == {"type": "auto"}
    assert last["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in last["tools"]] == [t["name"] for t in first["tools"]]


def test_an_error_inside_semantic_kernel_names_its_root_cause() -> None:
    from semantic_kernel.exceptions import ServiceResponseException

    from multiturn_eval.backends.semantic_kernel import translate

    try:
        try:
            raise TypeError("create() got an unexpected keyword argument 'temperature'")
        except TypeError as exc:
            raise ServiceResponseException(
                "<class 'pkg.mod.<locals>._AnthropicService'> service failed to complete the request",
                exc,
            ) from exc
    except ServiceResponseException as exc:
        error = translate(exc, "anthropic")
    assert type(error) is BackendError and not error.retryable
    assert str(error) == (
        "Semantic Kernel: ServiceResponseException: _AnthropicService service failed to complete "
        "the request (TypeError: create() got an unexpected keyword argument 'temperature')"
    )


# ------------------------------------------------------------------ the whole run


def write_suite(project: Project, fake: FakeOpenAI, cases: str, extra: str = "") -> Path:
    return project.write(
        "suite.yaml",
        AGENT
        + "  base_url: ${OPENAI_URL}\n  api_key: ${MY_OPENAI_KEY}\n"
        + extra
        + "evaluations:\n  - {type: standard, metric: numeric, absolute_tolerance: 0.5, accept_thousands_separators: true}\n"
        + cases,
    )


CLI_CASES = """\
test_cases:
  - name: analyst
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
        ground_truth: "206588"
        expected_tools: [{name: lookup, args: {key: revenue}}]
      - input: and the cost?
        ground_truth: "181001"
        expected_tools: [{name: lookup, args: {key: cost}}]
      - input: what is the difference?
        ground_truth: "25587"
        expected_tools: [{name: subtract, args: {a: 206588, b: {fuzzy: "181,001"}}}]
"""


def test_cli_run_reports_verdicts_and_tool_invocations(project: Project, fake: FakeOpenAI) -> None:
    tool_funcs.reset()
    fake.script(
        calls(ToolCall("tools-lookup", {"key": "revenue"}), usage=Usage(100, 10, 40)),
        text("The revenue is 206,588.", Usage(120, 8, 40)),
        calls(ToolCall("tools-lookup", {"key": "cost"})),
        text("181001"),
        calls(ToolCall("tools-subtract", {"a": 206588, "b": 181001})),
        text("The difference is 9999."),  # wrong: the turn fails on its answer only
    )
    write_suite(project, fake, CLI_CASES)
    result = project.run(
        "run", "suite.yaml", env={"OPENAI_URL": fake.base_url, "MY_OPENAI_KEY": API_KEY}
    )
    assert result.code == 1, result.out + result.err
    case = result.report["results"][0]
    assert case["backend"] == "semantic-kernel"
    assert [t["passed"] for t in case["turns"]] == [True, True, False]
    third = case["turns"][2]
    assert third["tools_matched"] is True
    assert [m["passed"] for m in third["metric_results"]] == [False]
    assert [
        (i["name"], i["args"], i["result"], i["error"])
        for t in case["turns"]
        for i in t["tool_invocations"]
    ] == [
        ("lookup", {"key": "revenue"}, "206588", None),
        ("lookup", {"key": "cost"}, "181001", None),
        ("subtract", {"a": 206588, "b": 181001}, 25587.0, None),
    ]
    first_usage = case["turns"][0]["token_usage"]
    assert first_usage["prompt_tokens"] == 220 - 80
    assert first_usage["cache_read_tokens"] == 80
    assert first_usage["completion_tokens"] == 18
    # the key never reaches a report
    assert API_KEY not in (result.report_dir / "report.json").read_text()


def test_cli_reads_key_and_base_url_from_the_environment_and_never_reports_the_key(
    project: Project, fake: FakeOpenAI
) -> None:
    fake.script(calls(ToolCall("tools-lookup", {"key": API_KEY})), text(f"echo {API_KEY}"))
    project.write("suite.yaml", AGENT + CASES.replace("      - input: and the difference?\n", ""))
    result = project.run(
        "run", "suite.yaml", env={"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.base_url}
    )
    assert result.code == 0, result.out + result.err
    assert fake.chat_requests()[0].headers["authorization"] == f"Bearer {API_KEY}"
    report = (result.report_dir / "report.json").read_text()
    assert "echo " in report
    assert API_KEY not in report + result.out + result.err


def test_cli_401_stops_the_run_with_exit_3(project: Project, fake: FakeOpenAI) -> None:
    fake.api_key = "sk-the-real-key-0000"
    cases = "test_cases:\n" + "".join(f"  - name: c{i}\n    input: hi\n" for i in range(5))
    write_suite(project, fake, cases)
    result = project.run(
        "run", "suite.yaml", env={"OPENAI_URL": fake.base_url, "MY_OPENAI_KEY": API_KEY}
    )
    assert result.code == 3, result.out + result.err
    assert len(fake.requests) == 1  # the first refusal stopped the run
    assert "refused the credentials (401" in result.out + result.err
    assert result.report["run"]["complete"] is False


def test_cli_turn_timeout_fails_the_turn_and_the_next_turn_is_sent(
    project: Project, fake: FakeOpenAI
) -> None:
    fake.script(Slow(30, text("too late")), text("181001"))
    cases = textwrap.dedent(
        """\
        test_cases:
          - name: slow
            turns:
              - input: first
                ground_truth: "1"
              - input: second
                ground_truth: "181001"
        """
    )
    write_suite(project, fake, cases, "  retry: {max_attempts: 1}\n")
    result = project.run(
        "run",
        "suite.yaml",
        "--turn-timeout",
        "0.5",
        env={"OPENAI_URL": fake.base_url, "MY_OPENAI_KEY": API_KEY},
    )
    turns = result.report["results"][0]["turns"]
    assert [t["passed"] for t in turns] == [False, True]
    assert "timed out" in turns[0]["errors"][0]


def test_without_semantic_kernel_installed_the_suite_says_which_pip_install_fixes_it(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "semantic_kernel" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)  # as if not installed
    project.write("suite.yaml", AGENT + "  api_key: sk-test-000000\n" + CASES)
    for command in ("validate", "run"):
        result = project.run(command, "suite.yaml")
        assert result.code == 2, result.err
        assert (
            "suite.yaml:2 agent.backend: backend 'semantic-kernel' needs the package "
            "'semantic_kernel', which is not installed; install it with: "
            "pip install 'multiturn-eval[semantic-kernel]'"
        ) in result.err


def test_semantic_kernel_log_noise_stays_off_the_console(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Semantic Kernel logs an unknown tool with a traceback; a CLI run's console shows none of it."""
    fake.script(
        calls(ToolCall("tools-multiply", {"a": 1}), ToolCall("tools-divide", {"a": 1, "b": 0})),
        text("sorry"),
    )
    (tmp_path / "suite.yaml").write_text(
        AGENT
        + f"  base_url: {fake.base_url}\n  api_key: {API_KEY}\n"
        + "test_cases:\n  - input: hi\n"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "multiturn_eval",
            "run",
            "suite.yaml",
            "-o",
            "out",
            "--format",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    errors = [i["error"] for i in report["results"][0]["tool_invocations"]]
    assert "not part of the provided tools" in errors[0]  # recorded in the report...
    assert errors[1] == "ZeroDivisionError: float division by zero"
    assert "Traceback" not in out.stderr + out.stdout  # ...and not printed
    assert "not part of the provided" not in out.stderr + out.stdout
