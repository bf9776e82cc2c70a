"""The openai backend, driven through the real ``openai`` client against a fake Chat Completions API.

Only what this backend does; the contract of every chat backend is ``tests/test_chat_backends.py``.
"""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.backends.chat import Conversation
from multiturn_eval.errors import BackendError, ConfigError, FatalBackendError, TransientError
from multiturn_eval.types import TurnFile
from tests import tool_funcs
from tests.backend_harness import PNG, Harness, error, reply
from tests.chat_flavors import OpenAIFlavor, cli_suite, fixtures
from tests.conftest import Project
from tests.fakes._server import Malformed, Request, Response
from tests.fakes.openai_server import (
    API_KEY,
    Completion,
    ErrorReply,
    FakeOpenAI,
    ToolCall,
    Usage,
    calls,
    text,
)

AGENT = OpenAIFlavor.agent


FLAVOR = OpenAIFlavor()
fake, harness = fixtures(FLAVOR)


def roles(request: Request) -> list[str]:
    return [m["role"] for m in request.body["messages"]]


# --------------------------------------------------------------------- tool loop


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


def test_a_custom_server_needs_no_key(harness: Harness, tmp_path: Path) -> None:
    with FakeOpenAI(api_key=None) as keyless:
        keyless.script(text("hi from ollama"))
        backend = harness.backend(env={"OPENAI_BASE_URL": keyless.base_url})
        assert backend.secrets == set()
        assert reply(harness.converse(backend, "hello")[0]).response == "hi from ollama"
        assert keyless.requests[0].headers["authorization"] == "Bearer not-needed"


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


def failed_once(harness: Harness, fake: FakeOpenAI, bad: Any) -> BackendError:
    """The error of a turn answered ``bad``: not retried (no wait), the next turn answered."""
    fake.script(bad, text("ok"))
    first, second = harness.converse(harness.backend(), "hi", "again")
    assert reply(second).response == "ok"
    assert harness.clock.waits == []
    return error(first)


@pytest.mark.parametrize(
    ("failure", "message"),
    [
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
    failed = failed_once(harness, fake, failure)
    assert str(failed) == message
    assert not isinstance(failed, FatalBackendError | TransientError)


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
    message = str(failed_once(harness, fake, bad))
    assert message.startswith(FLAVOR.bad_reply_error(fake.base_url) + reason), message


# ------------------------------------------------------------------ through the CLI

SUITE = cli_suite(OpenAIFlavor())


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
