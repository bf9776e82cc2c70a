"""The semantic-kernel backend: a real Semantic Kernel agent, driven against fake HTTP services.

Semantic Kernel's ``ChatCompletionAgent`` runs on the real ``openai`` client
(and, for ``service: anthropic``, the real ``anthropic`` client) against the
fake servers of :mod:`tests.fakes`; nothing of Semantic Kernel or the SDKs is
mocked.

Only what this backend does; the contract of every chat backend is ``tests/test_chat_backends.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, ConfigError, FatalBackendError, TransientError
from multiturn_eval.types import TurnFile, TurnReply
from tests import tool_funcs
from tests.backend_harness import CASES, PNG, Harness, error, reply
from tests.chat_flavors import CLI_CASES, SemanticKernelFlavor, fixtures
from tests.cli_probe import CLI
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.fakes._server import Slow
from tests.fakes.openai_server import (
    API_KEY,
    FakeOpenAI,
    ToolCall,
    Usage,
    calls,
    text,
    tool_then_answer,
)

AGENT = SemanticKernelFlavor.agent.replace("  max_tokens: 512\n", "")


fake, harness = fixtures(SemanticKernelFlavor(), AGENT)


# ---------------------------------------------------------------- automatic calling


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


# ------------------------------------------------------------------- stop reasons


# ------------------------------------------------------------- retries and errors


def test_a_wrong_base_url_says_what_to_check(harness: Harness, fake: FakeOpenAI) -> None:
    agent = AGENT + f"  base_url: {fake.url}\n"  # without /v1
    failure = error(harness.converse(harness.backend(agent), "hi")[0])
    assert not isinstance(failure, TransientError)
    assert str(failure) == (
        "OpenAI API error 404 invalid_request_error: Invalid URL (POST /chat/completions); "
        "check agent.model and agent.base_url (OpenAI-compatible servers usually serve under /v1)"
    )


# ------------------------------------------------------------------- configuration


def test_key_and_base_url_come_from_the_environment_and_the_key_is_a_secret(
    harness: Harness, fake: FakeOpenAI
) -> None:
    fake.script(text("ok"))
    backend = harness.backend()  # the suite names neither: OPENAI_API_KEY / OPENAI_BASE_URL
    assert API_KEY in backend.secrets  # the backend says what it adds; the suite is left alone
    assert API_KEY not in harness.loaded.secrets
    assert reply(harness.converse(backend, "hi")[0]).response == "ok"


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


@pytest.mark.usefixtures("retiring_sonnet_4_5")
def test_anthropic_service_runs_tools_and_reports_cache_usage(
    harness: Harness, anthropic_fake: fa.FakeAnthropic
) -> None:
    """Semantic Kernel's own Anthropic connector works on anthropic>=2 (not the [anthropic] extra)."""
    anthropic_fake.script(
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
    env = {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": anthropic_fake.url}
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

    body = anthropic_fake.messages_requests()[0].body
    assert body["system"] == "You are a careful analyst.\n\nDocument about ACME."
    assert [t["name"] for t in body["tools"]] == ["tools-subtract", "tools-divide", "tools-lookup"]
    assert body["max_tokens"] == 1024
    assert body["temperature"] == 0  # sent in the body: anthropic>=2.14 has no such argument
    assert harness.loaded.warnings == []  # the backend says it; the suite is left alone
    assert backend.warnings == [
        f"{harness.loaded.display_path}: agent.model 'claude-sonnet-4-5' is deprecated; "
        "Anthropic retires it on November 30th, 2026"
    ]
    second = anthropic_fake.messages_requests()[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert {b["type"] for b in second[2]["content"]} == {"tool_result"}


def test_anthropic_service_keeps_the_tools_defined_after_max_tool_rounds(
    harness: Harness, anthropic_fake: fa.FakeAnthropic
) -> None:
    """A history with tool_use blocks needs tools defined: forbid them with tool_choice none."""
    anthropic_fake.script(fa.tool_uses(("tools-lookup", {"key": "revenue"})), fa.text("206588"))
    agent = (
        AGENT.replace("service: openai", "service: anthropic").replace(
            "gpt-4o-mini", "claude-haiku-4-5"
        )
        + "  max_tool_rounds: 1\n"
    )
    env = {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": anthropic_fake.url}
    result = reply(harness.converse(harness.backend(agent, env=env), "revenue?")[0])
    assert result.response == "206588"
    assert list(result.warnings) == [
        "reached max_tool_rounds = 1: asked for the final reply without tools"
    ]
    first, last = (r.body for r in anthropic_fake.messages_requests())
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


def test_cli_run_reports_verdicts_and_tool_invocations(project: Project, fake: FakeOpenAI) -> None:
    tool_funcs.reset()
    fake.script(
        calls(ToolCall("tools-lookup", {"key": "revenue"}), usage=Usage(100, 10, 40)),
        text("The revenue is 206,588.", Usage(120, 8, 40)),
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
    assert [t["passed"] for t in case["turns"]] == [True, False]
    second = case["turns"][1]
    assert second["tools_matched"] is True
    assert [m["passed"] for m in second["metric_results"]] == [False]
    assert [
        (i["name"], i["args"], i["result"], i["error"])
        for t in case["turns"]
        for i in t["tool_invocations"]
    ] == [
        ("lookup", {"key": "revenue"}, "206588", None),
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
        [*CLI, "run", "suite.yaml", "-o", "out", "--format", "json"],
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
