"""Where your own code raised: the traceback of every exception from an agent, a factory,
a tool or a grader, your frames only, redacted and bounded, in ``report.json`` (a
``tracebacks`` list on the turn, or on the test case outside its turns), in the HTML
report, and on the console with ``-v``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from multiturn_eval.usercode import MAX_TRACEBACKS, TRACEBACK_LIMIT
from tests.conftest import Project
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, text, tool_uses

AGENTS = '''\
import sys


def helper(message):
    raise ValueError(f"the agent failed on {message!r}")


class Session:
    def __init__(self, ctx):
        self.ctx = ctx

    def send(self, message, files=()):
        if message == "boom":
            return helper(message)
        if message == "exit":
            sys.exit(4)
        if message == "secret":
            raise RuntimeError("the key was " + self.ctx.context["key"])
        if message == "deep":
            return deep(400)
        if message == "huge":
            raise ValueError("x" * 200_000)
        return "ok"


class AsyncSession(Session):
    async def send(self, message, files=()):
        return helper(message)


def deep(n):
    return deep(n - 1) if n else helper("the bottom")


def make(ctx):
    if ctx.context.get("factory_fails"):
        raise ConnectionError("no database for " + ctx.test_case_name)
    return Session(ctx)


def make_async(ctx):
    return AsyncSession(ctx)


def grader(ctx):
    return {"a": 1}["missing"]


def conversation_grader(ctx):
    raise LookupError("the conversation grader failed")


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b
'''

HEAD = 'agent: {backend: python, factory: "agents_under_test:make"}\n'


@pytest.fixture(autouse=True)
def fresh_module() -> Iterator[None]:
    """Each test writes its own agents_under_test.py: import it afresh."""
    sys.modules.pop("agents_under_test", None)
    yield
    sys.modules.pop("agents_under_test", None)


def write(project: Project, body: str, head: str = HEAD) -> None:
    project.write("agents_under_test.py", AGENTS)
    project.write("suite.yaml", head + body)


def turn(report: dict[str, Any], case: int = 0, index: int = 0) -> dict[str, Any]:
    result = report["results"][case]
    found: dict[str, Any] = (result.get("turns") or [result])[index]
    return found


def only_user_frames(text: str) -> None:
    assert text.startswith("Traceback (most recent call last):"), text
    files = re.findall(r'File "([^"]+)"', text)
    assert files, text
    assert all("multiturn_eval" not in f for f in files), files
    assert all(not re.search(r"/(asyncio|threading|concurrent)/", f) for f in files), files
    assert all(f.endswith("agents_under_test.py") for f in files), files


def test_an_agent_exception_keeps_its_traceback(project: Project) -> None:
    write(project, "test_cases:\n  - {name: a, turns: [{input: hi}, {input: boom}]}\n")
    result = project.run("run", "suite.yaml", formats=("json", "html"))
    assert result.code == 1
    first, second = result.report["results"][0]["turns"]
    assert "tracebacks" not in first  # nothing raised: absent (golden reports stay the same)
    [raised] = second["tracebacks"]
    assert raised["where"] == "the agent's send()"
    only_user_frames(raised["traceback"])
    assert "in send" in raised["traceback"] and "in helper" in raised["traceback"]
    assert raised["traceback"].endswith("ValueError: the agent failed on 'boom'")
    assert second["errors"] == ["ValueError: the agent failed on 'boom'"]  # the error as before
    html = (result.report_dir / "report.html").read_text()
    assert "Traceback of the agent&#39;s send()" in html  # the static turn (noscript)
    assert '"tracebacks":[{"where":"the agent\'s send()"' in html  # the script's data


def test_an_async_agent_and_sys_exit(project: Project) -> None:
    write(
        project,
        "test_cases:\n  - {name: a, turns: [{input: boom}]}\n"
        "  - {name: b, context: {}, turns: [{input: exit}]}\n",
        head='agent: {backend: python, factory: "agents_under_test:make_async"}\n',
    )
    result = project.run("run", "suite.yaml")
    only_user_frames(turn(result.report)["tracebacks"][0]["traceback"])
    write(project, "test_cases:\n  - {name: b, turns: [{input: exit}]}\n")
    result = project.run("run", "suite.yaml")
    [raised] = turn(result.report)["tracebacks"]
    assert "sys.exit(4)" in raised["traceback"] and raised["traceback"].endswith("SystemExit: 4")
    assert turn(result.report)["errors"] == ["the agent called sys.exit(4)"]


def test_a_factory_exception_is_on_the_test_case(project: Project) -> None:
    write(
        project,
        "test_cases:\n  - {name: a, context: {factory_fails: true}, turns: [{input: hi}]}\n"
        "  - {name: legacy, context: {factory_fails: true}, input: hi}\n",
    )
    result = project.run("run", "suite.yaml")
    multi, legacy = result.report["results"]
    [raised] = multi["tracebacks"]
    assert raised["where"] == "the factory"
    only_user_frames(raised["traceback"])
    assert raised["traceback"].endswith("ConnectionError: no database for a")
    assert "tracebacks" not in multi["turns"][0]
    assert legacy["tracebacks"][0]["where"] == "the factory"


def test_grader_exceptions_per_turn_and_per_conversation(project: Project) -> None:
    write(
        project,
        "test_cases:\n"
        "  - name: graded\n"
        "    evaluations: [{type: code, grader: 'agents_under_test:grader'}]\n"
        "    conversation_evaluations:\n"
        "      - {type: code, grader: 'agents_under_test:conversation_grader'}\n"
        "    turns: [{input: hi}, {input: hi}]\n",
    )
    result = project.run("run", "suite.yaml")
    case = result.report["results"][0]
    for one in case["turns"]:
        [raised] = one["tracebacks"]
        assert raised["where"] == "grader 'grader'"
        only_user_frames(raised["traceback"])
        assert raised["traceback"].endswith("KeyError: 'missing'")
    [raised] = case["tracebacks"]
    assert raised["where"] == "grader 'conversation_grader'"
    assert raised["traceback"].endswith("LookupError: the conversation grader failed")


@pytest.fixture
def fake() -> Any:
    with FakeAnthropic() as server:
        yield server


def test_a_tool_exception_is_on_its_turn_and_at_most_five_are_kept(
    project: Project, fake: FakeAnthropic
) -> None:
    project.env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
    fake.script(
        tool_uses(("divide", {"a": 1, "b": 0}), ("divide", {"a": "x", "b": 1})),
        text("no"),
        tool_uses(*[("divide", {"a": i, "b": 0}) for i in range(MAX_TRACEBACKS + 2)]),
        text("no"),
    )
    write(
        project,
        "test_cases:\n  - {name: t, turns: [{input: one}, {input: two}]}\n",
        head="agent:\n  backend: anthropic\n  model: claude-sonnet-4-5\n"
        "  tools: [{function: 'agents_under_test:divide'}]\n",
    )
    result = project.run("run", "suite.yaml")
    first, second = result.report["results"][0]["turns"]
    # the argument the model got wrong is not the tool's failure: one traceback, not two
    [raised] = first["tracebacks"]
    assert raised["where"] == "tool 'divide'"
    only_user_frames(raised["traceback"])
    assert raised["traceback"].endswith("ZeroDivisionError: float division by zero")
    assert len(second["tracebacks"]) == MAX_TRACEBACKS
    assert "2 more traceback(s) on this turn were not kept (the first 5 are)" in second["warnings"]


def test_tracebacks_are_bounded(project: Project) -> None:
    write(project, "test_cases:\n  - {name: a, turns: [{input: deep}, {input: huge}]}\n")
    result = project.run("run", "suite.yaml")
    deep, huge = (one["tracebacks"][0]["traceback"] for one in result.report["results"][0]["turns"])
    assert "[Previous line repeated" in deep and deep.endswith("the bottom'")
    assert len(huge) <= TRACEBACK_LIMIT + 100 and "characters cut] …" in huge
    assert huge.startswith("Traceback (most recent call last):")


def test_tracebacks_are_redacted_everywhere(project: Project) -> None:
    secret = "sk-live-0123456789abcdef"
    write(
        project,
        "test_cases:\n  - {name: a, context: {key: '${SERVICE_API_KEY}'}, turns: [{input: secret}]}\n",
    )
    result = project.run(
        "run", "suite.yaml", "-v", env={"SERVICE_API_KEY": secret}, formats=("json", "html")
    )
    raised = turn(result.report)["tracebacks"][0]["traceback"]
    assert raised.endswith("RuntimeError: the key was ***")
    for name in ("report.json", "report.html", "results.jsonl"):
        assert secret not in (result.report_dir / name).read_text(), name
    assert secret not in result.out and "the key was ***" in result.out


def test_the_console_prints_tracebacks_with_v_and_points_at_them_without(
    project: Project,
) -> None:
    write(project, "test_cases:\n  - {name: a, turns: [{input: boom}]}\n")
    verbose = project.run("run", "suite.yaml", "-v").out.splitlines()
    start = verbose.index("      traceback of the agent's send():")
    assert verbose[start + 1] == "        Traceback (most recent call last):"
    assert "        ValueError: the agent failed on 'boom'" in verbose[start:]
    plain = project.run("run", "suite.yaml").out.splitlines()
    assert (
        "      traceback of the agent's send(): in the JSON and HTML reports; -v prints it" in plain
    )
    assert "        Traceback (most recent call last):" not in plain


def test_an_error_of_the_runner_itself_has_no_traceback(project: Project) -> None:
    """A reply of the wrong type is the agent's fault, but raised by the runner's checks:
    there is no frame of the user's to show."""
    project.write(
        "agents_under_test.py",
        AGENTS + "\n\ndef bad(ctx):\n    return Bad()\n\n\n"
        "class Bad:\n    def send(self, message):\n        return 42\n",
    )
    project.write(
        "suite.yaml",
        'agent: {backend: python, factory: "agents_under_test:bad"}\n'
        "test_cases:\n  - {name: a, turns: [{input: hi}]}\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 1, result.out + result.err
    one = turn(result.report)
    assert one["errors"] and "tracebacks" not in one
    assert "tracebacks" not in json.dumps(result.report)
