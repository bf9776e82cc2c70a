"""The anthropic backend, driven through the real ``anthropic`` client against a fake Messages API."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.backends.anthropic import AnthropicBackend, AnthropicSession
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, ConfigError, FatalBackendError, TransientError
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.suite import Suite
from multiturn_eval.types import TurnFile, TurnReply
from multiturn_eval.yaml_source import parse_yaml
from tests import docs_pages, tool_funcs
from tests.backend_harness import Clock, converse
from tests.conftest import Project
from tests.fakes.anthropic_server import (
    API_KEY,
    ApiError,
    Drop,
    FakeAnthropic,
    Malformed,
    Request,
    Slow,
    ToolUse,
    Usage,
    context_too_long,
    overloaded,
    rate_limited,
    server_error,
    text,
    tool_uses,
    unauthorized,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

AGENT = """\
agent:
  backend: anthropic
  model: claude-sonnet-4-5-20250929
  instructions: You are a careful analyst.
  temperature: 0
  max_tokens: 512
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
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


class Harness:
    """Builds the backend from a suite file and talks to it, as the engine does."""

    def __init__(self, tmp_path: Path, fake: FakeAnthropic) -> None:
        self.tmp_path = tmp_path
        self.fake = fake
        self.clock = Clock()
        self.env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}

    def backend(
        self,
        agent: str = AGENT,
        cases: str = CASES,
        *,
        turn_timeout: float = 10,
        env: dict[str, str] | None = None,
    ) -> AnthropicBackend:
        path = self.tmp_path / "suite.yaml"
        path.write_text(agent + cases)
        self.loaded = load_suite(path, env={})
        settings = RunSettings(parallel_test_cases=2, turn_timeout=turn_timeout)
        return AnthropicBackend(
            self.loaded, settings, env=self.env if env is None else env, sleep=self.clock.sleep
        )

    def converse(
        self, backend: AnthropicBackend, *messages: str | tuple[str, list[TurnFile]]
    ) -> list[TurnReply | BackendError]:
        """Send the messages as turns of one session (case 0); errors are values, as in the engine."""

        return converse(backend, self.loaded, messages)


@pytest.fixture
def harness(tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.chdir(tmp_path)
    tool_funcs.reset()
    return Harness(tmp_path, fake)


def reply(value: TurnReply | BackendError) -> TurnReply:
    assert isinstance(value, TurnReply), value
    return value


def error(value: TurnReply | BackendError) -> BackendError:
    assert isinstance(value, BackendError), value
    return value


# --------------------------------------------------------------------- tool loop


def test_several_tool_uses_run_and_are_answered_together(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(
        tool_uses(
            ("lookup", {"key": "revenue"}),
            ("lookup", {"key": "cost"}),
            text="Let me look both up.",
            usage=Usage(100, 30, cache_creation_input_tokens=400),
        ),
        tool_uses(("subtract", {"a": 206588, "b": "181001"}), usage=Usage(150, 20, None, 400)),
        text("The difference is 25587.", Usage(200, 10, None, 400)),
    )
    result = reply(harness.converse(harness.backend(), "what is the difference?")[0])

    assert result.response == "The difference is 25587."
    assert [(i.name, i.args, i.result, i.error) for i in result.tool_invocations] == [
        ("lookup", {"key": "revenue"}, "206588", None),
        ("lookup", {"key": "cost"}, "181001", None),
        ("subtract", {"a": 206588, "b": "181001"}, 25587.0, None),
    ]
    assert all(i.duration_ms is not None for i in result.tool_invocations)
    # usage summed over the three calls of the turn, cache tokens included
    usage = result.token_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (450, 60)
    assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (400, 800)
    assert usage.total_tokens == 450 + 60 + 400 + 800
    # claude-sonnet-4-5-20250929 priced as claude-sonnet-4-5: $3 / $15 / $3.75 / $0.30 per MTok
    assert result.cost_usd == pytest.approx((450 * 3 + 60 * 15 + 400 * 3.75 + 800 * 0.30) / 1e6)

    requests = fake.messages_requests()
    assert len(requests) == 3
    second = requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assistant_blocks = second[1]["content"]
    assert [b["type"] for b in assistant_blocks] == ["text", "tool_use", "tool_use"]
    results = second[2]["content"]
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
        ("tool_result", assistant_blocks[1]["id"], "206588"),
        ("tool_result", assistant_blocks[2]["id"], "181001"),
    ]
    assert all("is_error" not in b for b in results)


def test_request_carries_system_tools_and_agent_settings(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(text("hi"))
    harness.converse(harness.backend(), "hello")
    body = fake.messages_requests()[0].body
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert body["max_tokens"] == 512
    assert body["temperature"] == 0
    assert body["system"] == [
        {"type": "text", "text": "You are a careful analyst.\n\nDocument about ACME."}
    ]
    assert [t["name"] for t in body["tools"]] == ["subtract", "divide", "lookup"]
    assert body["tools"][2]["input_schema"]["properties"] == {
        "key": {"type": "string", "description": 'The row to look up, e.g. "revenue".'}
    }
    assert all("cache_control" not in t for t in body["tools"])
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    headers = fake.messages_requests()[0].headers
    assert headers["x-stainless-retry-count"] == "0"


def test_prompt_caching_marks_system_prompt_and_tools(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(text("hi"))
    harness.converse(harness.backend(AGENT + "  prompt_caching: true\n"), "hello")
    body = fake.messages_requests()[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in body["tools"][:-1])


def test_history_is_kept_across_turns(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(
        tool_uses(("lookup", {"key": "revenue"})),
        text("206588"),
        text("25587"),
    )
    results = harness.converse(harness.backend(), "what is the revenue?", "and the difference?")
    assert [reply(r).response for r in results] == ["206588", "25587"]
    assert reply(results[1]).tool_invocations == ()  # only calls of that turn
    third = fake.messages_requests()[2].body["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert third[0]["content"][-1]["text"] == "what is the revenue?"
    assert third[2]["content"][0]["type"] == "tool_result"
    assert third[3]["content"] == [{"type": "text", "text": "206588", "citations": None}]
    assert third[4]["content"] == [{"type": "text", "text": "and the difference?"}]


def test_sessions_do_not_share_history(harness: Harness, fake: FakeAnthropic) -> None:
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
        await backend.aclose()
        return out

    assert asyncio.run(run()) == ["seen 1", "seen 3", "seen 1"]


def test_tool_errors_are_answered_as_error_results(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(
        tool_uses(
            ("divide", {"a": 1, "b": 0}),
            ("subtract", {"a": "lots"}),
            ("multiply", {"a": 1}),
        ),
        text("I could not compute it."),
    )
    result = reply(harness.converse(harness.backend(), "divide")[0])
    errors = [i.error for i in result.tool_invocations]
    assert errors[0] == "ZeroDivisionError: float division by zero"
    assert errors[1] is not None and errors[1].startswith("ToolArgumentError: argument 'a'")
    assert errors[2] == (
        "UnknownToolError: no tool named 'multiply'; available: subtract, divide, lookup"
    )
    answered = fake.messages_requests()[1].body["messages"][2]["content"]
    assert [b["is_error"] for b in answered] == [True, True, True]
    assert answered[0]["content"] == "Error: ZeroDivisionError: float division by zero"


def test_after_max_tool_rounds_the_final_reply_is_asked_without_tools(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(
        tool_uses(("lookup", {"key": "revenue"})),
        tool_uses(("lookup", {"key": "cost"})),
        text("25587"),
    )
    result = reply(harness.converse(harness.backend(AGENT + "  max_tool_rounds: 2\n"), "loop")[0])
    assert result.response == "25587"
    assert [i.args["key"] for i in result.tool_invocations] == ["revenue", "cost"]
    assert result.warnings == (
        "reached max_tool_rounds = 2: asked for the final reply without tools",
    )
    bodies = [r.body for r in fake.messages_requests()]
    assert ["tool_choice" in b for b in bodies] == [False, False, True]
    assert bodies[2]["tool_choice"] == {"type": "none"}


def test_still_calling_tools_without_tools_is_a_turn_error_and_history_stays_valid(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(
        tool_uses(("lookup", {"key": "revenue"})),
        tool_uses(("lookup", {"key": "cost"})),
        tool_uses(("lookup", {"key": "revenue"})),  # ignores tool_choice: none
        text("fresh start"),
    )
    backend = harness.backend(AGENT + "  max_tool_rounds: 2\n")
    first, second = harness.converse(backend, "loop", "next")
    assert str(error(first)) == (
        "the model was still calling tools (lookup) after max_tool_rounds = 2 rounds, even when "
        "asked without tools; calls made this turn: lookup, lookup"
    )
    assert reply(second).response == "fresh start"
    assert reply(second).warnings == ()
    # the failed turn left no trace: the fake would have rejected unanswered tool_use blocks
    last = fake.messages_requests()[-1].body["messages"]
    assert [m["role"] for m in last] == ["user"]
    assert last[0]["content"][-1]["text"] == "next"


def test_max_tokens_keeps_the_text_with_a_warning(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(text("The answer is 2558", stop_reason="max_tokens"), text("ok"))
    first, _ = harness.converse(harness.backend(), "long", "again")
    assert reply(first).response == "The answer is 2558"
    assert reply(first).warnings == ("the reply was cut off (stop_reason: max_tokens = 512)",)


def test_refusal_is_a_turn_error(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(text("I can't help with that.", stop_reason="refusal"), text("ok"))
    first, second = harness.converse(harness.backend(), "bad", "fine")
    assert str(error(first)) == (
        "the model refused to answer (stop_reason: refusal): I can't help with that."
    )
    assert reply(second).response == "ok"
    assert [m["role"] for m in fake.messages_requests()[-1].body["messages"]] == ["user"]


def test_unknown_price_gives_no_cost_and_suite_pricing_overrides(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(text("a", Usage(1_000_000, 0)), text("b", Usage(1_000_000, 0)))
    unknown = AGENT.replace("claude-sonnet-4-5-20250929", "claude-unreleased-9")
    assert reply(harness.converse(harness.backend(unknown), "x")[0]).cost_usd is None
    priced = harness.backend(
        unknown, "pricing:\n  claude-unreleased-9: {input: 2, output: 4}\n" + CASES
    )
    assert reply(harness.converse(priced, "x")[0]).cost_usd == pytest.approx(2)


# ------------------------------------------------------------------------- files


def test_files_are_sent_as_content_blocks_before_the_text(
    harness: Harness, fake: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "filing.pdf").write_bytes(b"%PDF-1.4 fake")
    (tmp_path / "notes.md").write_text("# Notes\nrevenue up")
    (tmp_path / "data.yaml").write_text("a: 1\n")  # no registered media type: sniffed as text
    fake.script(text("seen"))
    files = [
        TurnFile.from_path(tmp_path / "chart.png"),
        TurnFile.from_path(tmp_path / "filing.pdf"),
        TurnFile.from_path(tmp_path / "notes.md"),
        TurnFile(tmp_path / "data.yaml", "application/octet-stream"),
    ]
    harness.converse(harness.backend(), ("describe", files))
    content = fake.messages_requests()[0].body["messages"][0]["content"]
    assert content[0] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG).decode(),
        },
    }
    assert content[1]["type"] == "document"
    assert content[1]["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(content[1]["source"]["data"]) == b"%PDF-1.4 fake"
    assert content[2] == {
        "type": "text",
        "text": '<file name="notes.md">\n# Notes\nrevenue up\n</file>',
    }
    assert content[3]["text"] == '<file name="data.yaml">\na: 1\n\n</file>'
    assert content[4] == {"type": "text", "text": "describe"}


def test_files_go_with_their_turn_only(
    harness: Harness, fake: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    fake.script(text("one"), text("two"))
    harness.converse(
        harness.backend(), ("look", [TurnFile.from_path(tmp_path / "chart.png")]), "again"
    )
    last = fake.messages_requests()[1].body["messages"]
    assert [b["type"] for b in last[0]["content"]] == ["image", "text"]
    assert last[2]["content"] == [{"type": "text", "text": "again"}]


def test_unsupported_files_are_config_errors_before_any_request(
    harness: Harness, fake: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    cases = textwrap.dedent(
        """\
        test_cases:
          - name: with-file
            turns:
              - input: first
              - input: look
                files: [{path: blob.bin}]
        """
    )
    with pytest.raises(ConfigError) as info:
        harness.backend(AGENT, cases)
    (issue,) = info.value.issues
    assert str(issue) == (
        'suite.yaml:16 test_cases[0] ("with-file") turns[1].files[0].path: cannot send '
        "'blob.bin' (application/octet-stream) to Claude: it takes PNG, JPEG, GIF and WebP "
        "images, PDF documents and text files (set media_type: if the guess from the file "
        "name is wrong)"
    )
    assert fake.requests == []


# ------------------------------------------------------------------ configuration


def test_key_and_base_url_from_the_suite_win_over_the_environment(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(text("hi"))
    agent = AGENT + f"  api_key: {API_KEY}\n  base_url: {fake.url}\n"
    backend = harness.backend(
        agent,
        env={"ANTHROPIC_API_KEY": "sk-ant-wrong-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    assert reply(harness.converse(backend, "hello")[0]).response == "hi"
    assert API_KEY in backend.secrets  # the backend says what it adds; the suite is left alone
    assert API_KEY not in harness.loaded.secrets


def test_auth_token_from_the_environment(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(text("hi"))
    backend = harness.backend(env={"ANTHROPIC_AUTH_TOKEN": API_KEY, "ANTHROPIC_BASE_URL": fake.url})
    assert reply(harness.converse(backend, "hello")[0]).response == "hi"
    assert fake.messages_requests()[0].headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.usefixtures("retiring_sonnet_4_5")
def test_a_deprecated_model_is_warned_about_once(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(text("a"), text("b"))
    backend = harness.backend()  # claude-sonnet-4-5-20250929: retired 2026-11-30
    assert harness.loaded.warnings == []  # the backend says it; the suite is left alone
    assert backend.warnings == [
        "suite.yaml: agent.model 'claude-sonnet-4-5-20250929' is deprecated; Anthropic "
        "retires it on November 30th, 2026"
    ]
    with warnings.catch_warnings(record=True) as caught:
        results = harness.converse(backend, "1", "2")
    assert [reply(r).response for r in results] == ["a", "b"]
    assert [str(w.message) for w in caught] == []  # the SDK's own, on every request, is off


def test_missing_api_key_is_a_config_error(harness: Harness) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(env={})
    assert str(info.value) == (
        "suite.yaml:2 agent.api_key: no API key for the anthropic backend: set "
        "ANTHROPIC_API_KEY (or agent.api_key: ${SOME_VAR})"
    )


# ------------------------------------------------------------- retries and errors


def test_429_waits_for_retry_after_then_succeeds(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(
        rate_limited(retry_after="7"),
        rate_limited(retry_after=None, retry_after_ms="1500"),
        text("ok"),
    )
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert harness.clock.waits == [7.0, 1.5]
    assert len(fake.messages_requests()) == 3
    assert result.warnings[0].startswith(
        "attempt 1 failed (Anthropic API error 429 rate_limit_error: "
    )
    assert result.warnings[0].endswith("retried after 7.00 s")


@pytest.mark.parametrize("failure", [overloaded(), server_error(500), server_error(503), Drop()])
def test_transient_failures_are_retried(
    harness: Harness, fake: FakeAnthropic, failure: Any
) -> None:
    fake.script(failure, text("ok"))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert len(harness.clock.waits) == 1
    assert 0 <= harness.clock.waits[0] <= 1.0  # full jitter of initial_delay (1 s)


def test_retries_are_capped(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(*[overloaded()] * 3, text("never"))
    agent = AGENT + "  retry: {max_attempts: 3}\n"
    failure = error(harness.converse(harness.backend(agent), "hi")[0])
    assert isinstance(failure, TransientError)
    assert (
        str(failure)
        == "Anthropic API error 529 overloaded_error: Overloaded (gave up after 3 attempts)"
    )
    assert len(fake.messages_requests()) == 3
    assert fake.pending == 1


def test_retry_after_beyond_the_cap_is_not_waited_for(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(rate_limited(retry_after="3600"), text("never"))
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert "asked to retry after 3600 s, longer than retry.max_retry_after = 60 s" in str(failure)
    assert harness.clock.waits == []
    assert len(fake.messages_requests()) == 1


def test_dropped_connection_error_names_the_endpoint(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(Drop(), text("late"))
    failure = error(
        harness.converse(harness.backend(AGENT + "  retry: {max_attempts: 1}\n"), "hi")[0]
    )
    assert str(failure).startswith(f"cannot reach the Anthropic API at {fake.url}: ")


def test_a_reply_slower_than_the_turn_fails_it_without_a_retry(
    harness: Harness, fake: FakeAnthropic
) -> None:
    """turn_timeout bounds the turn, retries included: a request that used it up is not retried."""
    fake.script(Slow(30, text("too late")), text("ok"))
    backend = harness.backend(turn_timeout=0.5)
    first, second = harness.converse(backend, "hi", "again")
    assert str(error(first)) == (
        f"the request to the Anthropic API at {fake.url} timed out "
        "(not retried: the turn's 0.5 s turn_timeout is used up)"
    )
    assert reply(second).response == "ok"  # the next turn is sent on the same session
    assert harness.clock.waits == []


def test_malformed_json_is_a_turn_error_not_retried(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(Malformed(), text("ok"))
    first, second = harness.converse(harness.backend(), "hi", "again")
    assert str(error(first)).startswith(
        f"the Anthropic API at {fake.url} returned a reply that is not a Messages API response ("
    )
    assert reply(second).response == "ok"
    assert harness.clock.waits == []


def test_context_too_long_is_a_turn_error(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(context_too_long(), text("ok"))
    first, second = harness.converse(harness.backend(), "huge", "small")
    failure = error(first)
    assert not isinstance(failure, FatalBackendError | TransientError)
    assert str(failure) == (
        "the conversation no longer fits the model's context window (400 invalid_request_error: "
        "prompt is too long: 208573 tokens > 200000 maximum)"
    )
    assert failure.status_code == 400
    assert reply(second).response == "ok"


def test_other_client_errors_are_turn_errors(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(text("ok"))
    # a history the API rejects (a tool_result for no tool_use) comes back as a 400
    backend = harness.backend()

    async def run() -> BackendError:
        session = await backend.open_session(case_context(harness.loaded, 0))
        assert isinstance(session, AnthropicSession)
        session.history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}
        )
        try:
            await session.send("hi")
        except BackendError as exc:
            return exc
        finally:
            await backend.aclose()
        raise AssertionError("no error")

    failure = asyncio.run(run())
    assert str(failure).startswith(
        "Anthropic API error 400 invalid_request_error: messages.0.content:"
    )
    assert harness.clock.waits == []


def test_a_model_that_refuses_temperature_names_the_fix(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(
        ApiError(400, "invalid_request_error", "`temperature` is deprecated for this model.")
    )
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert str(failure) == (
        "Anthropic API error 400 invalid_request_error: `temperature` is deprecated for this "
        "model. (this model takes no sampling parameters: remove agent.temperature)"
    )


def test_no_temperature_is_sent_unless_the_suite_sets_it(
    harness: Harness, fake: FakeAnthropic
) -> None:
    fake.script(text("hi"))
    harness.converse(harness.backend(AGENT.replace("  temperature: 0\n", "")), "hello")
    assert "temperature" not in fake.messages_requests()[0].body


def test_401_is_fatal(harness: Harness, fake: FakeAnthropic) -> None:
    fake.script(unauthorized())
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert str(failure) == (
        "the Anthropic API refused the credentials (401 authentication_error: invalid x-api-key); "
        "check ANTHROPIC_API_KEY or agent.api_key"
    )


# ------------------------------------------------------------------ through the CLI

SUITE = """\
agent:
  backend: anthropic
  model: claude-haiku-4-5
  instructions: Answer with numbers.
  tools:
    - function: tests.tool_funcs:lookup
    - function: tests.tool_funcs:subtract
evaluations:
  - {type: standard, metric: numeric, absolute_tolerance: 0.5}
test_cases:
  - name: revenue
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
        ground_truth: "206588"
        expected_tools:
          - {name: lookup, args: {key: revenue}}
      - input: and minus the cost?
        ground_truth: "25587"
        expected_tools:
          - {name: subtract, args: {a: 206588, b: {fuzzy: "181,001"}}}
"""


def scripted_analyst(request: Request) -> Any:
    """Answers the suite above like a good model, whatever order the requests come in."""
    messages = request.body["messages"]
    last = messages[-1]["content"]
    if last[0]["type"] == "tool_result":
        return text(f"It is {last[0]['content']}.", Usage(60, 8))
    question = last[-1]["text"]
    if "revenue" in question:
        return tool_uses(ToolUse("lookup", {"key": "revenue"}), usage=Usage(50, 10))
    if "wrong" in question:
        return text("No idea.", Usage(20, 3))
    return tool_uses(ToolUse("subtract", {"a": 206588, "b": 181001}), usage=Usage(55, 12))


def test_cli_run_passes_against_the_fake(
    project: Project, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.responder = scripted_analyst
    # the environment as the entry point read it (no module below it reads os.environ)
    project.env.update({"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url})
    project.write("suite.yaml", SUITE)
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    report = result.report
    case = report["results"][0]
    assert [t["passed"] for t in case["turns"]] == [True, True]
    assert case["turns"][0]["token_usage"]["prompt_tokens"] == 50 + 60
    # Haiku 4.5: $1 input, $5 output per million tokens
    assert case["turns"][0]["cost_usd"] == pytest.approx((110 * 1 + 18 * 5) / 1e6)
    assert case["cost_usd"] == pytest.approx((225 * 1 + 38 * 5) / 1e6)
    assert report["summary"]["cost_usd"] == pytest.approx(case["cost_usd"])
    assert API_KEY not in json.dumps(report)


def test_cli_run_fails_a_wrong_turn_with_exit_1(
    project: Project, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.responder = scripted_analyst
    # the environment as the entry point read it (no module below it reads os.environ)
    project.env.update({"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url})
    project.write("suite.yaml", SUITE.replace("and minus the cost?", "something wrong?"))
    result = project.run("run", "suite.yaml")
    assert result.code == 1, result.out + result.err
    turns = result.report["results"][0]["turns"]
    assert [t["passed"] for t in turns] == [True, False]
    assert turns[1]["response"] == "No idea."


def test_cli_401_stops_the_run_with_exit_3(
    project: Project, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the environment as the entry point read it (no module below it reads os.environ)
    project.env.update(
        {"ANTHROPIC_API_KEY": "sk-ant-revoked-key-000", "ANTHROPIC_BASE_URL": fake.url}
    )
    cases = "".join(f"  - {{name: case{i}, input: hi}}\n" for i in range(6))
    project.write("suite.yaml", SUITE.split("test_cases:")[0] + "test_cases:\n" + cases)
    result = project.run("run", "suite.yaml")
    assert result.code == 3, result.out + result.err
    assert len(fake.requests) == 1  # the first 401 stopped the run (-p 1)
    message = (
        "the Anthropic API refused the credentials (401 authentication_error: invalid x-api-key)"
    )
    assert message in result.report["run"]["stop_reason"]
    assert "Traceback" not in result.err
    assert "sk-ant-revoked-key-000" not in result.out + result.err + json.dumps(result.report)


# ---------------------------------------------------------------------------- docs


def test_the_backend_pages_examples_are_valid_suites() -> None:
    """Every suite snippet of the backends' pages validates (placeholders filled)."""
    section = docs_pages.section("backends")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", section, re.S) if "agent:" in b]
    assert len(blocks) >= 2
    for block in blocks:
        data = parse_yaml(re.sub(r"\$\{\w+\}", "value", block)).data  # the loader's YAML rules
        data.setdefault("test_cases", [{"input": "hi"}])
        Suite.model_validate(data)
