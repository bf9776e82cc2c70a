"""The anthropic backend, driven through the real ``anthropic`` client against a fake Messages API.

Only what this backend does; the contract of every chat backend is ``tests/test_chat_backends.py``.
"""

from __future__ import annotations

import asyncio
import base64
import re
import textwrap
import warnings
from pathlib import Path

import pytest

from multiturn_eval.backends.anthropic import AnthropicSession
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, ConfigError
from multiturn_eval.suite import Suite
from multiturn_eval.types import TurnFile
from multiturn_eval.yaml_source import parse_yaml
from tests import docs_pages
from tests.backend_harness import PNG, Harness, error, reply
from tests.chat_flavors import AnthropicFlavor, fixtures
from tests.fakes.anthropic_server import (
    API_KEY,
    ApiError,
    FakeAnthropic,
    text,
    tool_uses,
)

AGENT = AnthropicFlavor.agent


fake, harness = fixtures(AnthropicFlavor())


# --------------------------------------------------------------------- tool loop


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


def test_a_tool_the_suite_does_not_offer_is_answered_as_an_error_result(
    harness: Harness, fake: FakeAnthropic
) -> None:
    """Unlike Chat Completions servers, the Messages API checks tool names and inputs itself:
    an unknown tool is the model's mistake to correct, not a turn error (the tool errors every
    chat backend answers alike are in tests/test_chat_backends.py)."""
    fake.script(
        tool_uses(("divide", {"a": 1, "b": 0}), ("multiply", {"a": 1})),
        text("I could not compute it."),
    )
    result = reply(harness.converse(harness.backend(), "divide")[0])
    assert result.response == "I could not compute it."
    errors = [i.error for i in result.tool_invocations]
    assert errors == [
        "ZeroDivisionError: float division by zero",
        "UnknownToolError: no tool named 'multiply'; available: subtract, divide, lookup",
    ]
    answered = fake.messages_requests()[1].body["messages"][2]["content"]
    assert [b["is_error"] for b in answered] == [True, True]
    assert answered[1]["content"] == (
        "Error: UnknownToolError: no tool named 'multiply'; available: subtract, divide, lookup"
    )


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


# ------------------------------------------------------------- retries and errors


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


# ------------------------------------------------------------------ through the CLI

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


def test_the_wire_check_knows_the_block_types_of_the_installed_sdk() -> None:
    """:data:`~multiturn_eval.backends.messages_api.BLOCK_TYPES` is kept in the module (the
    check imports no SDK, so a replay never does): it must be the SDK's ``ContentBlock``
    union, or an SDK upgrade would refuse (or let through) a block type unseen."""
    import typing

    from anthropic.types import ContentBlock

    from multiturn_eval.backends.messages_api import BLOCK_TYPES

    (union, *_) = typing.get_args(ContentBlock)
    sdk = {
        value
        for cls in typing.get_args(union)
        for value in typing.get_args(cls.model_fields["type"].annotation)
    }
    assert BLOCK_TYPES == sdk
