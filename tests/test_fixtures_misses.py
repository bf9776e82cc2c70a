"""A replay whose request changed: every kind of change, worded the same in every report.

One suite (two turns, two tools) is recorded through the real anthropic SDK
against the fake server; then the suite is changed one way at a time and
replayed with the server stopped and no key. Each change is a turn error naming
the case, run, turn, side and call, the JSON path of the first difference with
both values, the kind of change, and the command that re-records that case
(quoted for the shell); the case fails, the others go on; the message is the same
in report.json, junit.xml, summary.md and on the console. A recorded call no
longer made is reported, not a failure.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest

from tests import tool_funcs
from tests.cassettes import no_network
from tests.chat_flavors import AnthropicFlavor, cli_suite
from tests.conftest import CliResult, Project
from tests.test_chat_backends import analyst

FLAVOR = AnthropicFlavor()
SUITE = cli_suite(FLAVOR)
OTHER = """\
  - name: "it's another case"
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
        ground_truth: "206588"
"""
COMMAND = "multiturn-eval run 'suite.yaml' --fixtures update -k 'revenue'"
WHERE = 'test case "revenue", run 1, turn {turn}, agent call {call} (POST /v1/messages)'


@pytest.fixture
def recorded(project: Project) -> Iterator[Project]:
    """The suite (and a second case) recorded; the fake server stopped afterwards."""
    tool_funcs.reset()
    project.write("suite.yaml", with_other(SUITE))
    with FLAVOR.server() as fake:
        fake.responder = FLAVOR.responder(analyst)
        result = project.run("run", "suite.yaml", "--fixtures", "record", env=FLAVOR.env(fake))
        assert result.code == 0, result.out + result.err
    yield project
    tool_funcs.reset()


def with_other(suite: str) -> str:
    return suite + OTHER


def replay(project: Project, suite: str) -> CliResult:
    project.write("suite.yaml", with_other(suite))
    with no_network() as attempts:
        result = project.run(
            "run", "suite.yaml", "--fixtures", "replay", formats=("json", "junit", "markdown")
        )
    assert attempts == []
    return result


def the_error(result: CliResult, *, suite_wide: bool = False) -> str:
    """The first turn error of case "revenue"; the other case fails too only when the change
    was to the whole suite (its instructions, tools, model), else it goes on, replayed."""
    assert result.code == 1, result.out + result.err
    revenue, other = result.report["results"]
    assert other["passed"] is not suite_wide, other
    assert not revenue["passed"]
    failed = [t for t in revenue["turns"] if t["errors"]]
    error: str = failed[0]["errors"][0]
    assert revenue["fixture"]["misses"][0] == error
    return error


def same_everywhere(result: CliResult, message: str) -> None:
    """The message, whole, in junit.xml, summary.md (the PR comment) and on the console."""
    junit = ET.parse(result.report_dir / "junit.xml").getroot()
    texts = " ".join(
        (f.get("message") or "") + (f.text or "")
        for f in junit.iter()
        if f.tag in ("failure", "error")
    )
    assert message in texts
    summary = (result.report_dir / "summary.md").read_text()
    reason = message.removeprefix("not in the fixtures: ").removesuffix(
        f". Re-record this test case: {COMMAND}"
    )
    assert f"**Not in the fixtures:** {md(reason)}" in summary
    assert "Re-record this test case: <code>" + md(COMMAND) + "</code>" in summary
    assert message in result.out


def md(text: str) -> str:
    from multiturn_eval.reports.escape import md_text

    return md_text(text, 10_000)


def test_changed_instructions(recorded: Project) -> None:
    result = replay(recorded, SUITE.replace("Answer with numbers.", "Answer in words."))
    error = the_error(result, suite_wide=True)
    assert error == (
        f"not in the fixtures: {WHERE.format(turn=1, call=1)}: the instructions changed: "
        'system[0].text: recorded "Answer with numbers." / now "Answer in words." (compared with '
        f"fixtures/suite/revenue.jsonl:2). Re-record this test case: {COMMAND}"
    )
    same_everywhere(result, error)


def test_a_changed_tool_schema_names_the_tool(recorded: Project) -> None:
    changed = SUITE.replace(
        "    - function: tests.tool_funcs:subtract\n",
        "    - function: tests.tool_funcs:subtract\n      description: Take b away from a.\n",
    )
    error = the_error(replay(recorded, changed), suite_wide=True)
    assert error.startswith(
        f'not in the fixtures: {WHERE.format(turn=1, call=1)}: a tool\'s schema changed (tool "subtract"): '
        "tools[1].description: recorded "
    )
    assert error.endswith(
        '/ now "Take b away from a." (compared with fixtures/suite/revenue.jsonl:2). '
        f"Re-record this test case: {COMMAND}"
    )


def test_a_changed_model_or_parameter(recorded: Project) -> None:
    changed = SUITE.replace("model: claude-haiku-4-5", "model: claude-sonnet-4-5")
    error = the_error(replay(recorded, changed), suite_wide=True)
    assert error == (
        f"not in the fixtures: {WHERE.format(turn=1, call=1)}: the model or its parameters "
        'changed: model: recorded "claude-haiku-4-5" / now "claude-sonnet-4-5" (compared with '
        f"fixtures/suite/revenue.jsonl:2). Re-record this test case: {COMMAND}"
    )


def test_changed_conversation_content_in_a_later_turn(recorded: Project) -> None:
    result = replay(recorded, SUITE.replace("and minus the cost?", "and minus the costs?"))
    revenue = result.report["results"][0]
    assert [t["passed"] for t in revenue["turns"]] == [True, False]
    assert [t["replayed"] for t in revenue["turns"]] == [True, False]
    error = the_error(result)
    assert error == (
        f"not in the fixtures: {WHERE.format(turn=2, call=3)}: the conversation content "
        'changed: messages[4].content[0].text: recorded "and minus the cost?" / now "and minus '
        'the costs?" (compared with fixtures/suite/revenue.jsonl:4). Re-record this test case: '
        f"{COMMAND}"
    )
    same_everywhere(result, error)


def test_an_extra_call(recorded: Project) -> None:
    extra = SUITE + "      - input: and what is the revenue again?\n"
    error = the_error(replay(recorded, extra))
    assert error == (
        f"not in the fixtures: {WHERE.format(turn=3, call=5)}: an extra call: the recording "
        "(fixtures/suite/revenue.jsonl) holds 4 agent calls. Re-record this test case: "
        f"{COMMAND}"
    )


def test_a_call_no_longer_made_is_reported_not_failed(recorded: Project) -> None:
    one_turn = SUITE.split("      - input: and minus the cost?")[0]
    result = replay(recorded, one_turn)
    assert result.code == 0, result.out + result.err
    revenue = result.report["results"][0]
    assert revenue["passed"]
    unused = revenue["fixture"]["unused"]
    assert unused == [
        "recorded agent call 3 (turn 2, POST /v1/messages, fixtures/suite/revenue.jsonl:4) is "
        "no longer made",
        "recorded agent call 4 (turn 2, POST /v1/messages, fixtures/suite/revenue.jsonl:5) is "
        "no longer made",
    ]
    assert [f"fixtures: unused: {u}" for u in unused] == [
        w for w in revenue["warnings"] if w.startswith("fixtures: unused")
    ]
    assert result.report["run"]["fixtures"]["unused"] == 2
    summary = (result.report_dir / "summary.md").read_text()
    assert "2 recorded calls no longer made" in summary


def test_the_command_quotes_the_case_name_and_suite_for_the_shell(recorded: Project) -> None:
    other = OTHER.replace("what is the revenue?", "what is the profit?")
    recorded.write("suite.yaml", SUITE + other)
    with no_network():
        result = recorded.run("run", "suite.yaml", "--fixtures", "replay")
    assert result.code == 1
    error = result.report["results"][1]["turns"][0]["errors"][0]
    assert error.endswith(
        "Re-record this test case: multiturn-eval run 'suite.yaml' --fixtures update -k "
        "'it'\"'\"'s another case'"
    )
    assert error.startswith('not in the fixtures: test case "it\'s another case", run 1, turn 1')


def test_a_case_without_a_fixture_misses_at_its_first_call(project: Project) -> None:
    tool_funcs.reset()
    project.write("suite.yaml", SUITE)
    with no_network():
        result = project.run("run", "suite.yaml", "--fixtures", "replay")
    assert result.code == 1
    turns = result.report["results"][0]["turns"]
    assert turns[0]["errors"] == [
        f"not in the fixtures: {WHERE.format(turn=1, call=1)}: no recording: "
        f"fixtures/suite/revenue.jsonl does not exist. Re-record this test case: {COMMAND}"
    ]
    assert turns[1]["errors"][0].startswith(f"not in the fixtures: {WHERE.format(turn=2, call=2)}")
    run: dict[str, Any] = result.report["run"]["fixtures"]
    assert (run["replayed"], run["missed"], run["recorded_at"]) == (0, 2, None)
    assert json.dumps(result.report).count("Re-record this test case") >= 2
