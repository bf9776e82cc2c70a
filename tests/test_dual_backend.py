"""Three-backend acceptance: one suite, three backends, the same verdicts and token usage.

``tests/data/dual/`` holds one suite three times: for ``backend: anthropic``,
``backend: openai`` and ``backend: semantic-kernel`` (``service: openai``);
only the agent block differs. Each runs through the real engine
(``multiturn-eval run``) against its own fake service (the real ``anthropic``
client against the fake Messages API; the real ``openai`` client, directly and
under Semantic Kernel, against the fake chat-completions API), scripted with
the same model behaviour: the same tool calls with the same arguments, the
same answers, the same token counts in each API's own usage format. Every
turn must then get the same verdict, the same tool invocations and the same
token usage on all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import tool_funcs
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.fakes import openai_server as fo

DUAL = Path(__file__).parent / "data" / "dual"
SUITES = {
    "anthropic": DUAL / "suite.anthropic.yaml",
    "openai": DUAL / "suite.openai.yaml",
    "semantic-kernel": DUAL / "suite.semantic-kernel.yaml",
}


@dataclass(frozen=True)
class Tokens:
    """One model call's usage: uncached input, output, cache writes, cache reads."""

    input: int
    output: int
    cache_write: int = 0
    cache_read: int = 0

    def anthropic(self) -> fa.Usage:
        return fa.Usage(self.input, self.output, self.cache_write or None, self.cache_read or None)

    def openai(self) -> fo.Usage:
        # OpenAI counts cached input inside prompt_tokens and details it
        return fo.Usage(
            prompt_tokens=self.input + self.cache_write + self.cache_read,
            completion_tokens=self.output,
            cached_tokens=self.cache_read,
            cache_write_tokens=self.cache_write or None,
        )


@dataclass(frozen=True)
class Step:
    """One turn of the scripted model: one tool call, then the answer."""

    tool: str
    args: dict[str, Any]
    answer: str
    call: Tokens
    reply: Tokens


#: the model's behaviour, turn by turn, test case by test case (suite order)
SCRIPT = [
    # jkhy-cash-flow: every turn right
    Step(
        "lookup", {"key": "net cash 2009"}, "206588", Tokens(900, 40, 1200), Tokens(80, 6, 0, 1200)
    ),
    Step(
        "lookup",
        {"key": "net cash 2008"},
        "181001",
        Tokens(60, 38, 0, 1300),
        Tokens(75, 6, 0, 1300),
    ),
    Step(
        "subtract",
        {"a": 206588, "b": 181001},
        "The difference is 25,587.",
        Tokens(70, 45, 0, 1400),
        Tokens(90, 9, 0, 1400),
    ),
    Step("divide", {"a": 25587, "b": 181001}, "About 14.1%.", Tokens(85, 44), Tokens(95, 7)),
    # jkhy-wrong-turns: turn 2 looks up the wrong row, turn 3 answers a wrong number
    Step("lookup", {"key": "net cash 2009"}, "206588", Tokens(900, 40), Tokens(80, 6)),
    Step("lookup", {"key": "net cash 2007"}, "I could not find it.", Tokens(60, 38), Tokens(75, 9)),
    Step("subtract", {"a": 206588, "b": 181001}, "25,000", Tokens(70, 45), Tokens(90, 5)),
]


def script_anthropic(fake: fa.FakeAnthropic) -> None:
    for step in SCRIPT:
        fake.script(
            fa.tool_uses((step.tool, step.args), usage=step.call.anthropic()),
            fa.text(step.answer, step.reply.anthropic()),
        )


def script_openai(fake: fo.FakeOpenAI, prefix: str = "") -> None:
    for step in SCRIPT:  # Semantic Kernel offers the suite's tools as the plugin "tools"
        fake.script(
            fo.calls(fo.ToolCall(f"{prefix}{step.tool}", step.args), usage=step.call.openai()),
            fo.text(step.answer, step.reply.openai()),
        )


def turn_view(turn: dict[str, Any]) -> dict[str, Any]:
    """What must be equal on both backends: verdict, checks, calls, answer, tokens."""
    return {
        "passed": turn["passed"],
        "skipped": turn["skipped"],
        "errors": turn["errors"],
        "response": turn["response"],
        "tools_matched": turn["tools_matched"],
        "arg_match_details": turn["arg_match_details"],
        "metric_results": turn["metric_results"],
        "tool_invocations": [
            {k: v for k, v in call.items() if k != "duration_ms"}
            for call in turn["tool_invocations"]
        ],
        "token_usage": turn["token_usage"],
        "warnings": turn["warnings"],
    }


def test_the_suites_hold_the_same_test_cases() -> None:
    docs = {name: yaml.safe_load(path.read_text()) for name, path in SUITES.items()}
    for doc in docs.values():
        del doc["agent"]
    assert docs["anthropic"] == docs["openai"] == docs["semantic-kernel"]
    agents = {name: yaml.safe_load(path.read_text())["agent"] for name, path in SUITES.items()}
    for key in ("instructions", "temperature", "max_tokens", "tools"):
        assert agents["anthropic"][key] == agents["openai"][key], key
        assert agents["anthropic"][key] == agents["semantic-kernel"][key], key


def test_same_suite_same_verdicts_and_usage_on_anthropic_openai_and_semantic_kernel(
    project: Project,
) -> None:
    reports: dict[str, dict[str, Any]] = {}
    tool_results: dict[str, list[Any]] = {}
    with (
        fa.FakeAnthropic() as anthropic_fake,
        fo.FakeOpenAI() as openai_fake,
        fo.FakeOpenAI() as sk_fake,
    ):
        script_anthropic(anthropic_fake)
        script_openai(openai_fake)
        script_openai(sk_fake, prefix="tools-")
        envs = {
            "anthropic": {
                "ANTHROPIC_FAKE_URL": anthropic_fake.url,
                "ANTHROPIC_FAKE_KEY": fa.API_KEY,
            },
            "openai": {"OPENAI_FAKE_URL": openai_fake.base_url, "OPENAI_FAKE_KEY": fo.API_KEY},
            "semantic-kernel": {"OPENAI_FAKE_URL": sk_fake.base_url, "OPENAI_FAKE_KEY": fo.API_KEY},
        }
        for name, suite in SUITES.items():
            tool_funcs.reset()
            result = project.run("run", str(suite), "-p", "1", "-o", f"out-{name}", env=envs[name])
            assert result.code == 1, result.out + result.err  # the second test case fails
            reports[name] = result.report
            tool_results[name] = [
                call[0] for call in tool_funcs.CALLS
            ]  # which tools really ran, in order
        assert anthropic_fake.pending == openai_fake.pending == sk_fake.pending == 0
        # what the model was told each tool returned, in order, on each wire format
        tool_results["anthropic-wire"] = [
            block.get("content")
            for request in anthropic_fake.messages_requests()
            for block in request.body["messages"][-1]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        for name, fake in (("openai-wire", openai_fake), ("sk-wire", sk_fake)):
            tool_results[name] = [
                message["content"]
                for request in fake.chat_requests()
                for message in request.body["messages"][-1:]
                if message["role"] == "tool"
            ]

    anthropic_report = reports["anthropic"]
    for name, report in reports.items():
        assert [c["backend"] for c in report["results"]] == [name, name]

    # the expected verdicts, so that "equal" cannot mean "equally broken"
    verdicts = [[t["passed"] for t in c["turns"]] for c in anthropic_report["results"]]
    assert verdicts == [[True, True, True, True], [True, False, False]]
    wrong_lookup = anthropic_report["results"][1]["turns"][1]
    assert wrong_lookup["tools_matched"] is False
    assert wrong_lookup["tool_invocations"][0]["error"] == "KeyError: \"no row 'net cash 2007'\""
    first_usage = anthropic_report["results"][0]["turns"][0]["token_usage"]
    assert first_usage == {
        "prompt_tokens": 980,
        "completion_tokens": 46,
        "total_tokens": 980 + 46 + 1200 + 1200,
        "cache_creation_tokens": 1200,
        "cache_read_tokens": 1200,
    }

    # identical, turn by turn, on every backend
    for other in ("openai", "semantic-kernel"):
        for a_case, o_case in zip(
            anthropic_report["results"], reports[other]["results"], strict=True
        ):
            assert a_case["name"] == o_case["name"]
            assert [turn_view(t) for t in a_case["turns"]] == [
                turn_view(t) for t in o_case["turns"]
            ], other
            assert a_case["passed"] == o_case["passed"]
            assert a_case["token_usage"] == o_case["token_usage"]
            assert a_case["metric_results"] == o_case["metric_results"]
    # cost is the one difference: each model has its own price in the table (gpt-4o-mini's:
    # $0.15 input, $0.075 cached, $0.60 output; no cache-write price, so writes are input)
    summaries = {name: dict(report["summary"]) for name, report in reports.items()}
    usage = summaries["openai"]["token_usage"]
    gpt_4o_mini = (
        (usage["prompt_tokens"] + usage["cache_creation_tokens"]) * 0.15
        + usage["cache_read_tokens"] * 0.075
        + usage["completion_tokens"] * 0.60
    ) / 1e6
    assert summaries["anthropic"].pop("cost_usd") > gpt_4o_mini
    assert summaries["openai"].pop("cost_usd") == pytest.approx(gpt_4o_mini)
    assert summaries["semantic-kernel"].pop("cost_usd") == pytest.approx(gpt_4o_mini)
    assert summaries["anthropic"] == summaries["openai"] == summaries["semantic-kernel"]

    # the same tools ran, and the model read the same tool results on every wire
    assert tool_results["anthropic"] == tool_results["openai"] == tool_results["semantic-kernel"]
    assert tool_results["anthropic-wire"] == tool_results["openai-wire"] == tool_results["sk-wire"]
    assert len(tool_results["openai-wire"]) == len(SCRIPT)
