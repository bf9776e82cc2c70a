"""The openai backend, driven through the real ``openai`` client against a fake Chat Completions API."""

from __future__ import annotations

import asyncio
import base64
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.backends.chat import Conversation
from multiturn_eval.backends.openai import OpenAIBackend
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, ConfigError, FatalBackendError, TransientError
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.types import TurnFile, TurnReply
from tests import tool_funcs
from tests.backend_harness import Clock, converse
from tests.conftest import Project
from tests.fakes.openai_server import (
    API_KEY,
    Completion,
    Drop,
    ErrorReply,
    FakeOpenAI,
    Malformed,
    Request,
    Response,
    Slow,
    ToolCall,
    Usage,
    calls,
    context_too_long,
    rate_limited,
    server_error,
    text,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

AGENT = """\
agent:
  backend: openai
  model: gpt-5.4-mini
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
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


class Harness:
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
    ) -> OpenAIBackend:
        path = self.tmp_path / "suite.yaml"
        path.write_text(agent + cases)
        self.loaded = load_suite(path, env={})
        settings = RunSettings(parallel_test_cases=2, turn_timeout=turn_timeout)
        return OpenAIBackend(
            self.loaded, settings, env=self.env if env is None else env, sleep=self.clock.sleep
        )

    def converse(
        self, backend: OpenAIBackend, *messages: str | tuple[str, list[TurnFile]]
    ) -> list[TurnReply | BackendError]:
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


# --------------------------------------------------------------------- tool loop


def test_parallel_tool_calls_run_in_order_and_are_all_answered(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(
            ToolCall("lookup", {"key": "revenue"}),
            ToolCall("lookup", {"key": "cost"}),
            content="Let me look both up.",
            usage=Usage(500, 30, cached_tokens=400),
        ),
        calls(ToolCall("subtract", {"a": 206588, "b": "181001"}), usage=Usage(550, 20, 400)),
        text("The difference is 25587.", Usage(600, 10, 400)),
    )
    result = reply(harness.converse(harness.backend(), "what is the difference?")[0])

    assert result.response == "The difference is 25587."
    assert [(i.name, i.args, i.result, i.error) for i in result.tool_invocations] == [
        ("lookup", {"key": "revenue"}, "206588", None),
        ("lookup", {"key": "cost"}, "181001", None),
        ("subtract", {"a": 206588, "b": "181001"}, 25587.0, None),
    ]
    assert [(name, args) for name, args, _thread in tool_funcs.CALLS] == [
        ("lookup", {"key": "revenue"}),
        ("lookup", {"key": "cost"}),
        ("subtract", {"a": 206588.0, "b": 181001.0}),
    ]
    # usage summed over the three requests; cached input moved out of prompt_tokens
    usage = result.token_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (1650 - 1200, 60)
    assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (0, 1200)
    assert usage.total_tokens == 1650 + 60
    assert usage.reasoning_tokens is None
    # gpt-5.4-mini: $0.75 input, $0.075 cached input, $4.50 output per MTok
    assert result.cost_usd == pytest.approx((450 * 0.75 + 1200 * 0.075 + 60 * 4.50) / 1e6)

    second = fake.chat_requests()[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assistant = second[2]
    assert assistant["content"] == "Let me look both up."
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert [(m["tool_call_id"], m["content"]) for m in second[3:]] == [
        (ids[0], "206588"),
        (ids[1], "181001"),
    ]


def test_request_carries_system_tools_and_agent_settings(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("hi"))
    harness.converse(harness.backend(), "hello")
    request = fake.chat_requests()[0]
    body = request.body
    assert body["model"] == "gpt-5.4-mini"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 512  # a custom base_url: what OpenAI-compatible servers read
    assert "max_completion_tokens" not in body and "tool_choice" not in body
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful analyst.\n\nDocument about ACME."},
        {"role": "user", "content": "hello"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["subtract", "divide", "lookup"]
    assert body["tools"][2]["function"]["parameters"]["properties"] == {
        "key": {"type": "string", "description": 'The row to look up, e.g. "revenue".'}
    }
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["x-stainless-retry-count"] == "0"


def test_unset_sampling_settings_are_not_sent(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(text("hi"))
    agent = AGENT.replace("  temperature: 0\n", "").replace("  max_tokens: 512\n", "")
    harness.converse(harness.backend(agent), "hello")
    body = fake.chat_requests()[0].body
    assert not {"temperature", "max_tokens", "max_completion_tokens"} & set(body)


def test_history_is_kept_across_turns_and_sessions_are_separate(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(calls(ToolCall("lookup", {"key": "revenue"})), text("206588"), text("25587"))
    results = harness.converse(harness.backend(), "what is the revenue?", "and the difference?")
    assert [reply(r).response for r in results] == ["206588", "25587"]
    assert reply(results[1]).tool_invocations == ()  # only calls of that turn
    third = fake.chat_requests()[2].body["messages"]
    assert [m["role"] for m in third] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert third[4] == {"role": "assistant", "content": "206588"}
    assert third[5] == {"role": "user", "content": "and the difference?"}

    fake.responder = lambda request: text(f"seen {len(request.body['messages'])}")
    backend = harness.backend()

    async def run() -> list[str]:
        a = await backend.open_session(case_context(harness.loaded, 0))
        b = await backend.open_session(case_context(harness.loaded, 0))
        out = [(await a.send("1")).response, (await a.send("2")).response]
        out.append((await b.send("1")).response)
        await backend.aclose()
        return out

    assert asyncio.run(run()) == ["seen 2", "seen 4", "seen 2"]


def test_tool_errors_are_reported_to_the_model_and_recorded(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("divide", {"a": 1, "b": 0}), ToolCall("subtract", {"a": "lots"})),
        text("I could not compute it."),
    )
    result = reply(harness.converse(harness.backend(), "divide")[0])
    errors = [i.error for i in result.tool_invocations]
    assert errors[0] == "ZeroDivisionError: float division by zero"
    assert errors[1] is not None and errors[1].startswith("ToolArgumentError: argument 'a'")
    answered = fake.chat_requests()[1].body["messages"][-2:]
    assert [m["role"] for m in answered] == ["tool", "tool"]
    assert answered[0]["content"] == "Error: ZeroDivisionError: float division by zero"
    assert answered[1]["content"].startswith("Error: ToolArgumentError: argument 'a'")


def test_after_max_tool_rounds_the_final_reply_is_asked_without_tools(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("lookup", {"key": "revenue"})),
        calls(ToolCall("lookup", {"key": "cost"})),
        text("25587"),
    )
    result = reply(harness.converse(harness.backend(AGENT + "  max_tool_rounds: 2\n"), "loop")[0])
    assert result.response == "25587"
    assert [i.args["key"] for i in result.tool_invocations] == ["revenue", "cost"]
    assert result.warnings == (
        "reached max_tool_rounds = 2: asked for the final reply without tools",
    )
    assert [b.body.get("tool_choice") for b in fake.chat_requests()] == [None, None, "none"]


def test_still_calling_tools_without_tools_is_a_turn_error_and_history_stays_valid(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(
        calls(ToolCall("lookup", {"key": "revenue"})),
        calls(ToolCall("lookup", {"key": "cost"})),
        calls(ToolCall("lookup", {"key": "revenue"})),  # ignores tool_choice: none
        text("fresh start"),
    )
    first, second = harness.converse(
        harness.backend(AGENT + "  max_tool_rounds: 2\n"), "loop", "next"
    )
    assert str(error(first)) == (
        "the model was still calling tools (lookup) after max_tool_rounds = 2 rounds, even when "
        "asked without tools; calls made this turn: lookup, lookup"
    )
    assert reply(second).response == "fresh start"
    last = fake.chat_requests()[-1]
    assert roles(last) == ["system", "user"]
    assert last.body["messages"][1]["content"] == "next"


@pytest.mark.parametrize(
    ("bad_call", "message"),
    [
        (
            ToolCall("multiply", {"a": 1}),
            "the model called a tool that does not exist, 'multiply' (offered: subtract, divide, "
            "lookup)",
        ),
        (
            ToolCall("subtract", '{"a": 1, "b": '),
            "the model called 'subtract' with arguments that are not JSON (Expecting value: "
            'line 1 column 15 (char 14)): \'{"a": 1, "b": \'',
        ),
        (
            ToolCall("subtract", "a=1, b=2"),
            "the model called 'subtract' with arguments that are not JSON (Expecting value: "
            "line 1 column 1 (char 0)): 'a=1, b=2'",
        ),
        (
            ToolCall("subtract", "[1, 2]"),
            "the model called 'subtract' with arguments that are not a JSON object: '[1, 2]'",
        ),
        (
            ToolCall("lookup", '"revenue"'),
            "the model called 'lookup' with arguments that are not a JSON object: '\"revenue\"'",
        ),
    ],
)
def test_unknown_tools_and_unparseable_arguments_fail_the_turn_and_the_next_is_sent(
    harness: Harness, fake: FakeOpenAI, bad_call: ToolCall, message: str
) -> None:
    fake.script(
        calls(ToolCall("lookup", {"key": "revenue"}), bad_call),
        text("next answer"),
    )
    first, second = harness.converse(harness.backend(), "compute", "next")
    assert str(error(first)) == message + (
        " (no tool of that reply was run; the turn is not kept in the conversation)"
    )
    assert tool_funcs.CALLS == []  # not even the good call of that reply ran
    assert reply(second).response == "next answer"
    # the fake rejects a history with an unanswered tool_call: this one is clean
    last = fake.chat_requests()[-1]
    assert roles(last) == ["system", "user"]
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"] * 2


def test_tool_choice_applies_to_the_first_request_of_a_turn(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(calls(ToolCall("lookup", {"key": "revenue"})), text("206588"), text("again"))
    harness.converse(harness.backend(AGENT + "  tool_choice: lookup\n"), "go", "again")
    choices = [r.body.get("tool_choice") for r in fake.chat_requests()]
    forced = {"type": "function", "function": {"name": "lookup"}}
    assert choices == [forced, None, forced]


@pytest.mark.parametrize("choice", ["multiply", "Auto", "lookup "])
def test_tool_choice_must_name_a_mode_or_a_tool(harness: Harness, choice: str) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(AGENT + f"  tool_choice: '{choice}'\n")
    assert str(info.value) == (
        f"suite.yaml:11 agent.tool_choice: is {choice!r}: give auto, required, none or the name "
        "of one of the suite's tools (subtract, divide, lookup)"
    )


def test_tool_choice_without_tools_is_a_config_error(harness: Harness) -> None:
    agent = AGENT.split("  tools:")[0] + "  tool_choice: required\n"
    with pytest.raises(ConfigError) as info:
        harness.backend(agent)
    assert str(info.value) == (
        "suite.yaml:7 agent.tool_choice: applies to agent.tools; the suite offers none"
    )


def test_extra_body_is_merged_into_every_request(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(calls(ToolCall("lookup", {"key": "revenue"})), text("ok"))
    extra = "  extra_body: {top_k: 20, options: {num_ctx: 8192}, reasoning_effort: low}\n"
    harness.converse(harness.backend(AGENT + extra), "hello")
    for request in fake.chat_requests():
        assert request.body["top_k"] == 20
        assert request.body["options"] == {"num_ctx": 8192}
        assert request.body["reasoning_effort"] == "low"


# ---------------------------------------------------------------- stop reasons


def test_length_keeps_the_text_with_a_warning(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(Completion(content="The answer is 2558", finish_reason="length"), text("ok"))
    first, _ = harness.converse(harness.backend(), "long", "again")
    assert reply(first).response == "The answer is 2558"
    assert reply(first).warnings == (
        "the reply was cut off (finish_reason: length, max_tokens = 512)",
    )


@pytest.mark.parametrize(
    ("completion", "message"),
    [
        (
            Completion(refusal="I can't help with that."),
            "the model refused to answer: I can't help with that.",
        ),
        (
            Completion(content="", finish_reason="content_filter"),
            "the service's content filter stopped the reply (finish_reason: content_filter)",
        ),
    ],
)
def test_refusals_are_turn_errors(
    harness: Harness, fake: FakeOpenAI, completion: Completion, message: str
) -> None:
    fake.script(completion, text("ok"))
    first, second = harness.converse(harness.backend(), "bad", "fine")
    assert str(error(first)) == message
    assert reply(second).response == "ok"
    assert roles(fake.chat_requests()[-1]) == ["system", "user"]


# ------------------------------------------------------------------------ usage


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (Usage(100, 20), (100, 20, 0, 0, None)),
        (Usage(100, 20, cached_tokens=0), (100, 20, 0, 0, None)),
        (Usage(1000, 20, cached_tokens=800), (200, 20, 0, 800, None)),
        (Usage(1000, 20, cached_tokens=600, cache_write_tokens=300), (100, 20, 300, 600, None)),
        (Usage(100, 300, reasoning_tokens=256), (100, 300, 0, 0, 256)),
        (Usage(100, 20, reasoning_tokens=0), (100, 20, 0, 0, 0)),
        (None, (0, 0, 0, 0, None)),  # a server that reports no usage
    ],
)
def test_usage_maps_cached_and_reasoning_tokens(
    harness: Harness, fake: FakeOpenAI, usage: Usage | None, expected: tuple[Any, ...]
) -> None:
    fake.script(Completion(content="ok", usage=usage))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    got = result.token_usage
    assert got is not None
    assert (
        got.prompt_tokens,
        got.completion_tokens,
        got.cache_creation_tokens,
        got.cache_read_tokens,
        got.reasoning_tokens,
    ) == expected
    assert got.total_tokens == sum(expected[:4])


def test_reasoning_tokens_are_summed_over_the_loop(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(
        calls(ToolCall("lookup", {"key": "revenue"}), usage=Usage(100, 50, reasoning_tokens=40)),
        text("ok", Usage(120, 30, reasoning_tokens=16)),
    )
    usage = reply(harness.converse(harness.backend(), "hi")[0]).token_usage
    assert usage is not None and usage.reasoning_tokens == 56
    assert usage.completion_tokens == 80


def test_unknown_price_gives_no_cost_and_suite_pricing_overrides(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("a", Usage(1_000_000, 0)), text("b", Usage(1_000_000, 0)))
    unknown = AGENT.replace("gpt-5.4-mini", "llama3.1:8b")
    assert reply(harness.converse(harness.backend(unknown), "x")[0]).cost_usd is None
    priced = harness.backend(unknown, "pricing:\n  llama3.1:8b: {input: 2, output: 4}\n" + CASES)
    assert reply(harness.converse(priced, "x")[0]).cost_usd == pytest.approx(2)


# ------------------------------------------------------------------------- files


def test_images_are_sent_as_data_url_parts_before_the_text(
    harness: Harness, fake: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "photo.bin").write_bytes(PNG)
    fake.script(text("seen"), text("again"))
    files = [
        TurnFile.from_path(tmp_path / "chart.png"),
        TurnFile(tmp_path / "photo.bin", "image/webp"),
    ]
    harness.converse(harness.backend(), ("describe", files), "and now?")
    content = fake.chat_requests()[0].body["messages"][1]["content"]
    encoded = base64.b64encode(PNG).decode()
    assert content == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{encoded}"}},
        {"type": "text", "text": "describe"},
    ]
    # the files go with their turn only
    assert fake.chat_requests()[1].body["messages"][-1] == {"role": "user", "content": "and now?"}


@pytest.mark.parametrize(
    ("name", "data", "media_type", "shown"),
    [
        ("notes.md", b"# Notes", None, "text/markdown"),
        ("filing.pdf", b"%PDF-1.4 fake", None, "application/pdf"),
        ("blob.bin", b"\x00\x01binary", None, "application/octet-stream"),
        ("data.json", b"{}", None, "application/json"),
        ("chart.png", PNG, "text/plain", "text/plain"),
    ],
)
def test_files_other_than_images_are_located_config_errors(
    harness: Harness,
    fake: FakeOpenAI,
    tmp_path: Path,
    name: str,
    data: bytes,
    media_type: str | None,
    shown: str,
) -> None:
    (tmp_path / name).write_bytes(data)
    ref = f"{{path: {name}" + (f", media_type: {media_type}" if media_type else "") + "}"
    cases = textwrap.dedent(
        f"""\
        test_cases:
          - name: with-file
            turns:
              - input: first
              - input: look
                files: [{ref}]
        """
    )
    with pytest.raises(ConfigError) as info:
        harness.backend(AGENT, cases)
    (issue,) = info.value.issues
    assert str(issue) == (
        f'suite.yaml:16 test_cases[0] ("with-file") turns[1].files[0].path: cannot send '
        f"{name!r} ({shown}) through the openai backend: it sends PNG, JPEG, GIF and WebP images "
        "only (set media_type: if the guess from the file name is wrong; the anthropic backend "
        "also sends PDFs and text files)"
    )
    assert fake.requests == []


# ------------------------------------------------------------------ configuration


def test_key_and_base_url_from_the_suite_win_over_the_environment(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("hi"))
    agent = AGENT + f"  api_key: {API_KEY}\n  base_url: {fake.base_url}\n"
    backend = harness.backend(
        agent, env={"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert reply(harness.converse(backend, "hello")[0]).response == "hi"
    assert API_KEY in backend.secrets
    assert API_KEY not in harness.loaded.secrets


def test_a_custom_server_needs_no_key(harness: Harness, tmp_path: Path) -> None:
    with FakeOpenAI(api_key=None) as keyless:
        keyless.script(text("hi from ollama"))
        backend = harness.backend(env={"OPENAI_BASE_URL": keyless.base_url})
        assert backend.secrets == set()
        assert reply(harness.converse(backend, "hello")[0]).response == "hi from ollama"
        assert keyless.requests[0].headers["authorization"] == "Bearer not-needed"


def test_openai_itself_needs_a_key(harness: Harness) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(env={})
    assert str(info.value) == (
        "suite.yaml:2 agent.api_key: no API key for the openai backend: set OPENAI_API_KEY (or "
        "agent.api_key: ${SOME_VAR}); a server at a custom base_url may need none"
    )


def test_openai_itself_gets_max_completion_tokens(harness: Harness) -> None:
    backend = harness.backend(env={"OPENAI_API_KEY": API_KEY})
    assert backend.base_url == "https://api.openai.com/v1"
    body = backend.requests.body(Conversation([]), 0, False)
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body


# ------------------------------------------------------------------------- Azure

AZURE = AGENT.replace("  model: gpt-5.4-mini\n", "  model: gpt-5.4-mini\n  azure:\n    {azure}\n")


def azure_agent(fake: FakeOpenAI, **keys: str) -> str:
    azure = {"endpoint": fake.azure_endpoint, "api_version": "2024-10-21", **keys}
    inline = "{" + ", ".join(f"{k}: '{v}'" for k, v in azure.items() if v) + "}"
    return AZURE.replace("azure:\n    {azure}", f"azure: {inline}")


def test_azure_path_api_version_and_key_header(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(calls(ToolCall("lookup", {"key": "revenue"})), text("on azure"))
    backend = harness.backend(
        azure_agent(fake, deployment="analyst-prod"), env={"AZURE_OPENAI_API_KEY": API_KEY}
    )
    assert reply(harness.converse(backend, "hello")[0]).response == "on azure"
    requests = fake.chat_requests()
    assert len(requests) == 2
    for request in requests:
        assert request.path == "/openai/deployments/analyst-prod/chat/completions"
        assert request.query["api-version"] == "2024-10-21"
        assert request.headers["api-key"] == API_KEY
        assert "authorization" not in request.headers
    assert requests[0].body["max_completion_tokens"] == 512
    assert API_KEY in backend.secrets


def test_service_azure_reads_the_environment(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(text("from env"))
    env = {
        "AZURE_OPENAI_API_KEY": API_KEY,
        "AZURE_OPENAI_ENDPOINT": fake.azure_endpoint,
        "OPENAI_API_VERSION": "2025-04-01-preview",
    }
    backend = harness.backend(AGENT + "  service: azure\n", env=env)
    assert reply(harness.converse(backend, "hello")[0]).response == "from env"
    request = fake.chat_requests()[0]
    assert request.path == "/openai/deployments/gpt-5.4-mini/chat/completions"  # the model
    assert request.query["api-version"] == "2025-04-01-preview"


@pytest.mark.parametrize(
    ("agent", "env", "messages"),
    [
        (
            AGENT + "  service: azure\n",
            {},
            [
                "suite.yaml:2 agent.azure.endpoint: Azure OpenAI needs the resource endpoint: set "
                "azure.endpoint (https://<resource>.openai.azure.com) or AZURE_OPENAI_ENDPOINT",
                "suite.yaml:2 agent.azure.api_version: Azure OpenAI needs an API version: set "
                "azure.api_version or OPENAI_API_VERSION (e.g. 2024-10-21)",
                "suite.yaml:2 agent.api_key: no API key for Azure OpenAI: set "
                "AZURE_OPENAI_API_KEY (or agent.api_key: ${SOME_VAR})",
            ],
        ),
        (
            AGENT + "  azure: {deployment: d1}\n",
            {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "https://x.openai.azure.com"},
            [
                "suite.yaml:11 agent.azure.api_version: Azure OpenAI needs an API version: set "
                "azure.api_version or OPENAI_API_VERSION (e.g. 2024-10-21)"
            ],
        ),
    ],
)
def test_azure_settings_missing_are_config_errors(
    harness: Harness, agent: str, env: dict[str, str], messages: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(agent, env=env)
    assert [str(i) for i in info.value.issues] == messages


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "  service: openai\n  azure: {deployment: d1}\n",
            "agent.azure: applies to service: azure only",
        ),
        (
            "  service: azure\n  base_url: https://x.openai.azure.com\n",
            "agent.base_url: not used with Azure OpenAI; give the endpoint as azure.endpoint",
        ),
        ("  azure: {endpoint: x.openai.azure.com}\n", "agent.azure.endpoint: "),
        ("  service: bedrock\n", "agent.service: "),
        ("  extra_body: [1]\n", "agent.extra_body: "),
    ],
)
def test_invalid_openai_keys_are_located_at_load(
    harness: Harness, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        harness.backend(AGENT + extra)
    assert message in str(info.value)


# ------------------------------------------------------------- retries and errors


def test_429_waits_for_retry_after_then_succeeds(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after="7"), rate_limited(retry_after="1.5"), text("ok"))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert harness.clock.waits == [7.0, 1.5]
    assert len(fake.chat_requests()) == 3
    assert result.warnings[0] == (
        "attempt 1 failed (OpenAI API error 429 rate_limit_exceeded: Rate limit reached for "
        "requests); retried after 7.00 s"
    )


def test_retry_after_beyond_the_cap_is_not_waited_for(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after="3600"), text("never"))
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert isinstance(failure, TransientError)
    assert "asked to retry after 3600 s, longer than retry.max_retry_after = 60 s" in str(failure)
    assert harness.clock.waits == []
    assert len(fake.chat_requests()) == 1


@pytest.mark.parametrize(
    "failure",
    [
        server_error(500),
        server_error(502),
        server_error(503),
        ErrorReply(408, "timeout", "timeout"),
        ErrorReply(409, "conflict", "conflict"),
        rate_limited(retry_after=None),
        Drop(),
    ],
)
def test_transient_failures_are_retried(harness: Harness, fake: FakeOpenAI, failure: Any) -> None:
    fake.script(failure, text("ok"))
    result = reply(harness.converse(harness.backend(), "hi")[0])
    assert result.response == "ok"
    assert len(harness.clock.waits) == 1
    assert 0 <= harness.clock.waits[0] <= 1.0  # full jitter of initial_delay (1 s)


def test_retries_are_capped(harness: Harness, fake: FakeOpenAI) -> None:
    fake.script(*[server_error(503)] * 3, text("never"))
    failure = error(
        harness.converse(harness.backend(AGENT + "  retry: {max_attempts: 3}\n"), "hi")[0]
    )
    assert isinstance(failure, TransientError)
    assert str(failure) == (
        "OpenAI API error 503 server_error: The server had an error while processing your "
        "request. (gave up after 3 attempts)"
    )
    assert len(fake.chat_requests()) == 3
    assert fake.pending == 1


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_are_fatal(harness: Harness, fake: FakeOpenAI, status: int) -> None:
    fake.script(
        ErrorReply(status, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")
    )
    failure = error(harness.converse(harness.backend(), "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert not failure.session_alive
    assert str(failure) == (
        f"the OpenAI API refused the credentials ({status} invalid_api_key: Incorrect API key "
        "provided); check OPENAI_API_KEY or agent.api_key"
    )
    assert harness.clock.waits == []


def test_a_wrong_key_gets_the_servers_401(harness: Harness, fake: FakeOpenAI) -> None:
    backend = harness.backend(
        env={"OPENAI_API_KEY": "sk-revoked", "OPENAI_BASE_URL": fake.base_url}
    )
    failure = error(harness.converse(backend, "hi")[0])
    assert isinstance(failure, FatalBackendError)
    assert "401 invalid_api_key" in str(failure)


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (
            context_too_long(),
            "the conversation no longer fits the model's context window (400 "
            "context_length_exceeded: This model's maximum context length is 128000 tokens. "
            "However, your messages resulted in 130000 tokens.)",
        ),
        (
            ErrorReply(400, "Unsupported parameter: 'temperature'", "invalid_request_error"),
            "OpenAI API error 400 invalid_request_error: Unsupported parameter: 'temperature'",
        ),
        (
            ErrorReply(
                404, "The model 'gpt-9' does not exist", "invalid_request_error", "model_not_found"
            ),
            "OpenAI API error 404 model_not_found: The model 'gpt-9' does not exist; check "
            "agent.model and agent.base_url (OpenAI-compatible servers usually serve under /v1)",
        ),
    ],
)
def test_client_errors_fail_the_turn_without_retry(
    harness: Harness, fake: FakeOpenAI, failure: ErrorReply, message: str
) -> None:
    fake.script(failure, text("ok"))
    first, second = harness.converse(harness.backend(), "x", "y")
    assert str(error(first)) == message
    assert not isinstance(first, FatalBackendError | TransientError)
    assert reply(second).response == "ok"
    assert harness.clock.waits == []


def _completion_with(**message: Any) -> Response:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Response(200, body)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Malformed(), "not JSON: "),
        (Response(200, "<html>proxy</html>", content_type="text/html"), "not JSON: "),
        (Response(200, b""), "an empty body"),
        (Response(200, b"\xff\xfe{}"), "the body is not UTF-8 text"),
        (Response(200, {"choices": []}), "'choices' has 0 entries; the request asked for one"),
        (Response(200, {"error": "no"}), "no 'choices'"),
        (Response(200, {"choices": [{"message": None}]}), "choices[0].message is null"),
        (_completion_with(content=["a"]), "choices[0].message.content is array, not a string"),
        (
            _completion_with(
                tool_calls=[{"type": "function", "function": {"name": "f", "arguments": "{}"}}]
            ),
            "choices[0].message.tool_calls[0].id is null, not a string",
        ),
        (
            _completion_with(tool_calls=[{"id": "c", "function": {"name": "f", "arguments": {}}}]),
            "choices[0].message.tool_calls[0].function.arguments is object, not a string",
        ),
        (
            Response(
                200,
                {"choices": [{"message": {"content": "a"}}], "usage": {"prompt_tokens": -1}},
            ),
            "usage.prompt_tokens is number, not a whole number",
        ),
    ],
)
def test_replies_that_are_not_chat_completions_fail_the_turn_not_retried(
    harness: Harness, fake: FakeOpenAI, bad: Any, reason: str
) -> None:
    fake.script(bad, text("ok"))
    first, second = harness.converse(harness.backend(), "hi", "again")
    message = str(error(first))
    assert message.startswith(
        f"the OpenAI API at {fake.base_url} returned a reply that is not a Chat Completions "
        f"response ({reason}"
    ), message
    assert reply(second).response == "ok"
    assert harness.clock.waits == []


def test_a_reply_slower_than_the_turn_fails_it_without_a_retry(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(Slow(30, text("too late")), text("ok"))
    first, second = harness.converse(harness.backend(turn_timeout=0.5), "hi", "again")
    assert str(error(first)) == (
        f"the request to the OpenAI API at {fake.base_url} timed out "
        "(not retried: the turn's 0.5 s turn_timeout is used up)"
    )
    assert reply(second).response == "ok"


# ------------------------------------------------------------------ through the CLI

SUITE = """\
agent:
  backend: openai
  model: gpt-5-mini
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
    last = request.body["messages"][-1]
    if last["role"] == "tool":
        return text(f"It is {last['content']}.", Usage(60, 8))
    if "revenue" in last["content"]:
        return calls(ToolCall("lookup", {"key": "revenue"}), usage=Usage(50, 10))
    return calls(ToolCall("subtract", {"a": 206588, "b": 181001}), usage=Usage(55, 12))


def test_cli_run_passes_against_the_fake(project: Project, fake: FakeOpenAI) -> None:
    fake.responder = scripted_analyst
    project.env.update({"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.base_url})
    project.write("suite.yaml", SUITE)
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    case = result.report["results"][0]
    assert case["backend"] == "openai"
    assert [t["passed"] for t in case["turns"]] == [True, True]
    assert case["turns"][0]["token_usage"] == {
        "prompt_tokens": 110,
        "completion_tokens": 18,
        "total_tokens": 128,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 0,
    }
    # gpt-5-mini: $0.25 input, $2.00 output per million tokens
    assert case["cost_usd"] == pytest.approx((225 * 0.25 + 38 * 2.00) / 1e6)
    assert API_KEY not in json.dumps(result.report)


def test_cli_401_stops_the_run_with_exit_3(project: Project, fake: FakeOpenAI) -> None:
    project.env.update({"OPENAI_API_KEY": "sk-revoked-key-000", "OPENAI_BASE_URL": fake.base_url})
    cases = "".join(f"  - {{name: case{i}, input: hi}}\n" for i in range(6))
    project.write("suite.yaml", SUITE.split("test_cases:")[0] + "test_cases:\n" + cases)
    result = project.run("run", "suite.yaml", "-p", "1")
    assert result.code == 3, result.out + result.err
    assert len(fake.requests) == 1  # the first 401 stopped the run
    assert (
        "the OpenAI API refused the credentials (401 invalid_api_key: Incorrect API key provided)"
        in (result.report["run"]["stop_reason"])
    )
    assert "Traceback" not in result.err
    assert "sk-revoked-key-000" not in result.out + result.err + json.dumps(result.report)


def test_cli_unsupported_file_is_exit_2_before_any_request(
    project: Project, fake: FakeOpenAI
) -> None:
    project.env.update({"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.base_url})
    project.write("notes.txt", "hello")
    project.write(
        "suite.yaml",
        SUITE + "        files: [notes.txt]\n".replace("[notes.txt]", "[{path: notes.txt}]"),
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 2, result.out + result.err
    assert "turns[1].files[0].path: cannot send 'notes.txt' (text/plain)" in result.err
    assert fake.requests == []
