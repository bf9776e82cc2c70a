"""MCP servers as tool sources end to end: real servers, real SDKs, the fake model servers.

Every server is ``tests/mcp_servers/toolbox.py`` (written with the ``mcp`` SDK), a real
process over stdio or streamable HTTP; the model is the fake Anthropic or OpenAI server
driven through the real ``anthropic``, ``openai`` and ``semantic-kernel`` clients
(:mod:`tests.chat_flavors`). What a user relies on: the server's tools are offered with
their own schemas next to the Python tools and run in the tool loop (parallel calls
included); the report says which server served each call; an ``isError`` result, a hung
call, a crash, a server that does not start or lists a bad schema each end as the issue
says; every test case sees its own server (``scope: case``, at ``-p 8``) or shares one
(``scope: run``); results are capped; secrets never reach an artifact.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.errors import McpServerCrashed, McpServerError
from tests.backend_harness import CASES, error, reply
from tests.chat_flavors import FLAVORS, Flavor, FlavorHarness, Turn, U, flavored
from tests.conftest import Project
from tests.test_mcp_servers import TOOLBOX, http_toolbox, wait_gone

each = pytest.mark.parametrize("flavor", FLAVORS, ids=str)


def server(
    name: str = "billing",
    *,
    mode: str | None = None,
    scope: str | None = None,
    tools: list[str] | None = None,
    **extra: Any,
) -> str:
    """One ``agent.mcp_servers`` entry: the toolbox over stdio."""
    args = [str(TOOLBOX), *(["--mode", mode] if mode else [])]
    lines = [
        f"    - name: {name}",
        f"      command: {sys.executable}",
        f"      args: {json.dumps(args)}",
    ]
    if scope is not None:
        lines.append(f"      scope: {scope}")
    if tools is not None:
        lines.append(f"      tools: {json.dumps(tools)}")
    lines += [f"      {key}: {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def servers(*entries: str) -> str:
    return "  mcp_servers:\n" + "".join(entries)


#: the billing tools of the toolbox the tests offer (not whoami/crash/... unless asked)
BILLING = ["get_balance", "refund", "increment"]


class McpHarness(FlavorHarness):
    def __init__(self, flavor: Flavor, tmp_path: Path, fake: Any) -> None:
        env = {**flavor.env(fake), "PATH": os.environ.get("PATH", "")}
        super().__init__(flavor, tmp_path, fake, env)

    def with_servers(self, *entries: str, cases: str = CASES, **kw: Any) -> Any:
        return self.backend(self.flavor.agent + servers(*entries), cases, **kw)


harness = flavored(McpHarness, "harness")


def offered(flavor: Flavor, request: Any) -> dict[str, dict[str, Any]]:
    """The tools a request offers the model: name (without SK's plugin prefix) -> schema."""
    out = {}
    for tool in request.body.get("tools") or []:
        if "input_schema" in tool:  # Messages API
            out[tool["name"]] = tool["input_schema"]
        else:
            function = tool["function"]
            out[function["name"].removeprefix(flavor.prefix)] = function["parameters"]
    return out


# ------------------------------------------------------------------------- tool loop


@each
def test_a_servers_tools_run_in_the_tool_loop_next_to_the_python_tools(
    harness: McpHarness, flavor: Flavor
) -> None:
    harness.script(
        flavor.calls(("get_balance", {"account_id": "A-1"}), ("lookup", {"key": "revenue"})),
        flavor.text("The balance is 120.50 EUR; revenue 206588."),
    )
    backend = harness.with_servers(server(tools=BILLING))
    result = reply(harness.converse(backend, "what is the balance?")[0])

    assert result.response == "The balance is 120.50 EUR; revenue 206588."
    calls = [(i.name, i.args, i.result, i.error, i.server) for i in result.tool_invocations]
    assert calls == [
        ("get_balance", {"account_id": "A-1"}, "120.50 EUR", None, "billing"),
        ("lookup", {"key": "revenue"}, "206588", None, None),
    ]
    first, second = harness.requests
    tools = offered(flavor, first)
    # the server's tools with their own JSON schemas, next to the suite's Python tools
    assert set(tools) == {"subtract", "divide", "lookup", *BILLING}
    assert tools["get_balance"]["properties"]["account_id"]["type"] == "string"
    assert tools["get_balance"]["required"] == ["account_id"]
    assert set(tools["refund"]["required"]) == {"invoice_id", "amount"}
    assert offered(flavor, second) == tools
    assert flavor.answers(second) == ["120.50 EUR", "206588"]


@each
def test_an_is_error_result_is_handed_to_the_model_and_recorded(
    harness: McpHarness, flavor: Flavor
) -> None:
    harness.script(
        flavor.calls(("get_balance", {"account_id": "nope"})),
        flavor.text("There is no such account."),
    )
    backend = harness.with_servers(server(tools=BILLING))
    result = reply(harness.converse(backend, "balance of nope?")[0])
    (call,) = result.tool_invocations
    assert call.server == "billing" and call.result is None
    assert "no account 'nope'" in (call.error or "")
    (answer,) = flavor.answers(harness.requests[1])
    assert answer.startswith("Error: ") and "no account 'nope'" in answer
    (_, _, is_error) = flavor.tool_results(harness.requests[1])[0]
    assert is_error in (True, None)  # the Messages API's flag; Chat Completions has none


@each
def test_a_call_past_call_timeout_is_a_tool_error_and_the_turn_goes_on(
    harness: McpHarness, flavor: Flavor
) -> None:
    harness.script(
        flavor.calls(("hang", {})),
        flavor.calls(("increment", {})),
        flavor.text("The server did not answer; the counter is 1."),
    )
    backend = harness.with_servers(server(tools=["hang", "increment"], call_timeout=0.5))
    result = reply(harness.converse(backend, "try it")[0])
    hang, increment = result.tool_invocations
    assert hang.error == (
        "the MCP server 'billing' did not answer the call to 'hang' within 0.5 s (call_timeout)"
    )
    assert (increment.result, increment.error) == ("1", None)  # the same server goes on
    assert result.response == "The server did not answer; the counter is 1."


@each
def test_a_crash_fails_the_turn_the_next_turn_restarts_and_two_in_a_row_end_the_session(
    harness: McpHarness, flavor: Flavor
) -> None:
    harness.script(
        flavor.calls(("crash", {})),  # turn 1: the server dies mid-call
        flavor.calls(("increment", {})),  # turn 2: restarted, a fresh process
        flavor.text("The counter is 1."),
        flavor.calls(("crash", {})),  # turn 3: a good call came between: restarts again
        flavor.calls(("crash", {})),  # turn 4: crashes right after its restart
    )
    backend = harness.with_servers(server(tools=["crash", "increment"]))
    first, second, third, fourth = harness.converse(backend, "one", "two", "three", "four")

    crash = error(first)
    assert isinstance(crash, McpServerCrashed) and crash.session_alive
    assert "MCP server 'billing'" in str(crash) and "during the call to 'crash'" in str(crash)
    assert "the next call restarts it" in str(crash)
    assert "toolbox: crashing on purpose" in str(crash)  # the server's last stderr lines
    assert [i.result for i in reply(second).tool_invocations] == ["1"]
    assert error(third).session_alive
    dead = error(fourth)
    assert not dead.session_alive and "crashed twice in a row" in str(dead)
    requests = harness.requests
    assert len(requests) == 5  # no request after a crash: the turn ended there
    # a failed turn left no trace: turn 2's first request holds turn 2 alone (and the system)
    turn_two = [t for t in flavor.transcript(requests[1]) if t[0] != "system"]
    assert turn_two == [("user", "two")]


@each
def test_huge_results_are_cut_at_max_tool_result_chars_for_the_model_and_the_report(
    harness: McpHarness, flavor: Flavor
) -> None:
    harness.script(flavor.calls(("huge", {"chars": 50_000})), flavor.text("Cut."))
    agent = flavor.agent + "  max_tool_result_chars: 1000\n" + servers(server(tools=["huge"]))
    backend = harness.backend(agent, CASES)
    result = reply(harness.converse(backend, "big")[0])
    (call,) = result.tool_invocations
    assert isinstance(call.result, str) and call.result.startswith("x" * 1000)
    assert len(call.result) < 1200 and "49,000" in call.result  # the marker says how much
    (answer,) = flavor.answers(harness.requests[1])
    assert answer == call.result


#: a case's server that cannot be used, and what its error must say (each names both sources)
CASE_START_FAILURES = {
    "exit-at-start": ["MCP server 'billing'", "toolbox: fatal: BILLING_DB is not set"],
    "bad-schema": [
        "MCP server 'billing'",
        "its tool 'broken' has an inputSchema that is not a valid JSON Schema",
    ],
    "clash": [
        "two tools are named 'lookup'",
        "agent.tools[2] (tests.tool_funcs:lookup)",
        "MCP server 'billing'",
    ],
}


@each
@pytest.mark.parametrize("mode", list(CASE_START_FAILURES))
def test_a_case_servers_failure_is_the_sessions_error_with_its_stderr(
    harness: McpHarness, flavor: Flavor, mode: str
) -> None:
    backend = harness.with_servers(server(mode=mode))
    with pytest.raises(Exception) as caught:
        harness.converse(backend, "hello")
    for part in CASE_START_FAILURES[mode]:
        assert part in str(caught.value), str(caught.value)
    assert harness.requests == []


@each
def test_boolean_property_schemas_are_offered_as_what_they_mean(
    harness: McpHarness, flavor: Flavor
) -> None:
    """JSON Schema's ``true`` (anything) and ``false`` (nothing) as a property's schema:
    Semantic Kernel crashed on them (``'bool' object has no attribute 'get'``)."""
    harness.script(flavor.text("ok"))
    backend = harness.with_servers(server(mode="bool-props"))
    assert reply(harness.converse(backend, "hi")[0]).response == "ok"
    properties = offered(flavor, harness.requests[0])["anything"]["properties"]
    if flavor.prefix:  # Semantic Kernel: the dict forms of the same schemas
        assert properties == {"q": {}, "never": {"not": {}}}
    else:
        assert properties == {"q": True, "never": False}


@each
def test_a_name_too_long_for_the_backends_prefix_is_an_error_naming_it(
    harness: McpHarness, flavor: Flavor
) -> None:
    """Semantic Kernel gives the model ``tools-<name>``: a 60-character name would reach the
    API as 66 characters, over the 64 OpenAI's and Anthropic's APIs take."""
    long_name = "get_" + "x" * 53 + "_v2"
    assert len(long_name) == 60
    harness.script(flavor.text("ok"))
    backend = harness.with_servers(server(mode="long-name"))
    if not flavor.prefix:
        assert reply(harness.converse(backend, "hi")[0]).response == "ok"
        assert long_name in offered(flavor, harness.requests[0])
        return
    with pytest.raises(McpServerError) as caught:
        harness.converse(backend, "hi")
    assert f"Semantic Kernel cannot register tool {long_name!r}" in str(caught.value)
    assert "66 characters" in str(caught.value) and "at most 58 characters" in str(caught.value)
    assert harness.requests == []


@each
def test_a_4_mb_stderr_flood_does_not_stall_a_call(harness: McpHarness, flavor: Flavor) -> None:
    harness.script(
        flavor.calls(("flood", {"megabytes": 4})),
        flavor.calls(("increment", {})),
        flavor.text("Flooded; the counter is 1."),
    )
    backend = harness.with_servers(server(tools=["flood", "increment"], call_timeout=60))
    result = reply(harness.converse(backend, "flood it")[0])
    assert [(i.result, i.error) for i in result.tool_invocations] == [
        ("flooded", None),
        ("1", None),
    ]


# ---------------------------------------------------------------------- through the CLI


def cli_suite(flavor: Flavor, entries: str, cases: int = 1, checks: str = "") -> str:
    header = flavor.agent.split("  instructions:")[0]
    lines = [header + "  instructions: Count.\n" + servers(entries), "test_cases:\n"]
    for i in range(cases):
        lines.append(
            f"  - name: case-{i}\n    turns:\n      - input: count {i}\n"
            f"        expected_tools: [increment]\n{checks}"
        )
    return "".join(lines)


def counting(flavor: Flavor, tool: str = "increment") -> Any:
    """A model that calls ``tool`` for each new user message and answers with its result."""

    def answer(last: Turn) -> tuple[str, Any, U]:
        kind, content = last
        if kind == "result":
            return "text", f"The count is {content}.", U(20, 5)
        return "call", (tool, {}), U(10, 5)

    return flavor.responder(answer)


@pytest.fixture
def fake(request: pytest.FixtureRequest, project: Project) -> Iterator[Any]:
    """The fake server of the test's ``flavor``, with ``project``'s CLI runs pointed at it."""
    flavor: Flavor = request.node.callspec.params["flavor"]
    with flavor.server() as running:
        project.env.update(flavor.env(running))
        project.env["PATH"] = os.environ.get("PATH", "")
        yield running


def report(result: Any) -> dict[str, Any]:
    return json.loads((result.report_dir / "report.json").read_text())


def assert_nowhere(secret: str, result: Any) -> None:
    """No report file and no console line holds ``secret``."""
    for path in result.report_dir.iterdir():
        assert secret not in path.read_text(errors="replace"), path.name
    assert secret not in result.out + result.err


def counts(data: dict[str, Any]) -> list[str]:
    return [
        call["result"]
        for case in data["results"]
        for turn in case["turns"]
        for call in turn["tool_invocations"]
    ]


def counted_run(
    fake: Any,
    project: Project,
    flavor: Flavor,
    entries: str,
    cases: int,
    *options: str,
    formats: tuple[str, ...] = ("json",),
) -> tuple[Any, dict[str, Any]]:
    """A passing CLI run of ``cases`` counting cases (the model calls increment once each)."""
    fake.responder = counting(flavor)
    project.write("suite.yaml", cli_suite(flavor, entries, cases=cases))
    result = project.run("run", "suite.yaml", *options, formats=formats)
    assert result.code == 0, result.out + result.err
    return result, report(result)


@each
def test_every_case_sees_its_own_server_at_p_8(fake: Any, project: Project, flavor: Flavor) -> None:
    result, data = counted_run(fake, project, flavor, server(tools=BILLING), 8, "-p", "8")
    assert counts(data) == ["1"] * 8  # a fresh server per case: the counter starts at 0
    for case in data["results"]:
        (call,) = case["turns"][0]["tool_invocations"]
        assert call["server"] == "billing"
    (entry,) = data["run"]["mcp_servers"]
    assert entry["name"] == "billing" and entry["scope"] == "case"
    assert entry["transport"] == "stdio" and entry["starts"] == 8
    assert entry["startup_ms"] > 0 and entry["max_startup_ms"] >= entry["startup_ms"]
    assert "MCP server billing (stdio): one per test case" in result.out


@pytest.mark.parametrize("flavor", FLAVORS[:1], ids=str)
def test_every_repeat_run_gets_a_fresh_server_too(
    fake: Any, project: Project, flavor: Flavor
) -> None:
    _, data = counted_run(
        fake, project, flavor, server(tools=BILLING), 2, "-p", "4", "--repeat", "3"
    )
    runs = [run for case in data["results"] for run in case["runs"]]
    assert len(runs) == 6
    assert data["run"]["mcp_servers"][0]["starts"] == 6


@each
def test_scope_run_shares_one_server_started_before_any_agent_call(
    fake: Any, project: Project, flavor: Flavor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    entry = server(tools=BILLING, scope="run", env={"TOOLBOX_PID_FILE": str(pid_file)})
    result, data = counted_run(fake, project, flavor, entry, 4, "-p", "2", formats=("json", "html"))
    assert sorted(counts(data), key=int) == ["1", "2", "3", "4"]  # one counter for the run
    (entry,) = data["run"]["mcp_servers"]
    assert (entry["scope"], entry["starts"]) == ("run", 1)
    assert re.search(r"MCP server billing \(stdio\): started in \d+ ms, shared", result.out)
    html = (result.report_dir / "report.html").read_text()
    assert "MCP server billing" in html  # the server of each call, shown
    assert wait_gone([int(pid_file.read_text())]) == []  # gone with the run


@each
def test_a_scope_run_server_that_does_not_start_is_exit_2_before_any_agent_call(
    fake: Any, project: Project, flavor: Flavor
) -> None:
    fake.responder = counting(flavor)
    entries = server(tools=BILLING, scope="run") + server("broken", mode="bad-schema", scope="run")
    project.write("suite.yaml", cli_suite(flavor, entries))
    result = project.run("run", "suite.yaml")
    assert result.code == 2, result.out + result.err
    assert re.search(
        r"suite\.yaml:\d+ agent\.mcp_servers\[1\]: MCP server 'broken' .*its tool 'broken' "
        r"has an inputSchema that is not a valid JSON Schema",
        result.err,
    ), result.err
    assert flavor.requests(fake) == []
    assert not result.report_dir.exists()  # no agent was called: no report directory left


@each
@pytest.mark.parametrize("clash", ["python tool", "two servers"])
def test_a_tool_name_clash_of_a_scope_run_server_is_exit_2_naming_both_sources(
    fake: Any, project: Project, flavor: Flavor, clash: str
) -> None:
    if clash == "python tool":  # the server lists a tool 'lookup', as the Python tool is named
        entries = server("catalog", mode="clash", scope="run")
        wanted = [
            r"two tools are named 'lookup'",
            r"agent\.tools\[0\] \(tests\.tool_funcs:lookup\)",
        ]
    else:  # two servers, each listing get_balance
        entries = server(tools=BILLING, scope="run") + server("billing-eu", scope="run")
        wanted = [r"'get_balance'", r"MCP server 'billing'", r"MCP server 'billing-eu'"]
    suite = cli_suite(flavor, entries).replace(
        "  mcp_servers:\n", "  tools:\n    - function: tests.tool_funcs:lookup\n  mcp_servers:\n"
    )
    project.write("suite.yaml", suite)
    result = project.run("run", "suite.yaml")
    assert result.code == 2, result.out + result.err
    assert re.search(r"suite\.yaml:\d+ agent\.mcp_servers\[\d\]: ", result.err), result.err
    for part in wanted:
        assert re.search(part, result.err), result.err
    assert flavor.requests(fake) == []


@pytest.mark.parametrize("flavor", FLAVORS[1:2], ids=str)
def test_a_url_server_gets_a_fresh_mcp_session_per_case_and_its_headers_stay_secret(
    fake: Any, project: Project, flavor: Flavor
) -> None:
    token = "search-token-0123456789"
    project.env["SEARCH_TOKEN"] = token
    with http_toolbox() as url:
        entry = (
            f"    - name: search\n      url: {url}\n      tools: [increment, whoami]\n"
            "      headers: {X-Search-Token: '${SEARCH_TOKEN}'}\n"
        )
        _, data = counted_run(fake, project, flavor, entry, 3, "-p", "3")
        assert counts(data) == ["1"] * 3  # one MCP session per case
        fake.responder = counting(flavor, "whoami")
        result = project.run(
            "run", "suite.yaml", "-k", "case-0", formats=("json", "junit", "markdown", "html")
        )
    (seen,) = counts(report(result))
    assert token not in seen  # the header reached the server, redacted in the report
    assert '"x-search-token": "***"' in seen
    assert_nowhere(token, result)


@pytest.mark.parametrize("flavor", FLAVORS[:1], ids=str)
def test_env_values_are_secrets_in_every_artifact(
    fake: Any, project: Project, flavor: Flavor
) -> None:
    secret = "postgres://billing:hunter2-hunter2@db/billing"
    project.env["BILLING_DB"] = secret
    fake.responder = counting(flavor, "whoami")
    entry = server(tools=["whoami"], env={"BILLING_DB": "${BILLING_DB}"})
    project.write("suite.yaml", cli_suite(flavor, entry))
    result = project.run("run", "suite.yaml", formats=("json", "junit", "markdown", "html"))
    assert result.code == 1  # expected increment, got whoami
    (seen,) = counts(report(result))
    assert '"BILLING_DB": "***"' in seen  # the server got it; no report shows it
    assert "RUNNER_ONLY" not in seen and '"PATH"' in seen
    assert_nowhere(secret, result)


@pytest.mark.parametrize("flavor", FLAVORS[:1], ids=str)
def test_a_hung_call_without_call_timeout_is_bounded_by_the_turn_and_leaves_no_process(
    fake: Any, project: Project, flavor: Flavor, tmp_path: Path
) -> None:
    fake.responder = counting(flavor, "hang")
    pid_file = tmp_path / "server.pid"
    entry = server(tools=["hang"], env={"TOOLBOX_PID_FILE": str(pid_file)})
    project.write("suite.yaml", cli_suite(flavor, entry))
    result = project.run("run", "suite.yaml", "--turn-timeout", "3")
    assert result.code == 1, result.out + result.err
    (turn,) = report(result)["results"][0]["turns"]
    assert turn["errors"] and "turn_timeout" in turn["errors"][0]
    assert wait_gone([int(pid_file.read_text())]) == []


# ---------------------------------------------------------------------- validate --mcp


def test_validate_mcp_lists_the_tools_and_checks_the_suites_tool_names(
    project: Project, tmp_path: Path
) -> None:
    pid_file = tmp_path / "started.pid"
    suite = (
        "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n"
        "  tools:\n    - function: tests.tool_funcs:subtract\n"
        + servers(
            server(tools=BILLING, env={"TOOLBOX_PID_FILE": str(pid_file)}),
            server("shared", tools=["whoami"], scope="run"),
        )
        + "test_cases:\n"
        "  - name: a\n    turns:\n      - input: x\n"
        "        expected_tools: [get_balance, subtract]\n"
        "        forbidden_tools: [delete_account]\n"
        "    conversation_tools: {expected_tools: [lookup_order]}\n"
    )
    project.env["ANTHROPIC_API_KEY"] = "sk-ant-validate-0123456789"
    project.env["PATH"] = os.environ.get("PATH", "")
    project.write("suite.yaml", suite)

    plain = project.run("validate", "suite.yaml")
    assert plain.code == 0 and "ok: suite.yaml" in plain.out
    assert not pid_file.exists()  # plain validate starts nothing

    checked = project.run("validate", "--mcp", "suite.yaml")
    assert checked.code == 2
    assert pid_file.exists()
    assert re.search(
        r"mcp billing \(stdio, scope: case\): started in \d+ ms; offers 3 of its 11 tools: "
        "get_balance, refund, increment",
        checked.out,
    ), checked.out
    assert "mcp shared (stdio, scope: run)" in checked.out and "ok:" not in checked.out
    assert re.search(
        r"suite\.yaml:\d+ test_cases\[0\]\.turns\[0\]\.forbidden_tools\[0\]: forbidden tool "
        r"'delete_account' matches no tool offered to the model \(this check can never fail\)",
        checked.err,
    ), checked.err
    assert "test_cases[0].conversation_tools.expected_tools[0]: expected tool 'lookup_order'" in (
        checked.err
    )
    assert "get_balance" not in checked.err.split("offered:")[0]  # it is offered: no problem
    assert wait_gone([int(pid_file.read_text())]) == []

    fixed = suite.replace("forbidden_tools: [delete_account]", "forbidden_tools: [refund]")
    project.write("suite.yaml", fixed.replace("lookup_order", "increment"))
    assert project.run("validate", "--mcp", "suite.yaml").code == 0


def test_validate_mcp_reports_a_server_that_does_not_start(project: Project) -> None:
    project.env["ANTHROPIC_API_KEY"] = "sk-ant-validate-0123456789"
    project.write(
        "suite.yaml",
        "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n"
        + servers(server(mode="no-init", startup_timeout=1))
        + "test_cases:\n  - input: x\n",
    )
    result = project.run("validate", "--mcp", "suite.yaml")
    assert result.code == 2
    assert "mcp billing (stdio, scope: case): did not start" in result.out
    assert re.search(
        r"suite\.yaml:5 agent\.mcp_servers\[0\]: MCP server 'billing' .*did not finish "
        r"answering initialize within 1 s \(startup_timeout\)",
        result.err,
    ), result.err
    assert "warming up a cache that never finishes" in result.err


@pytest.mark.parametrize("command", ["run", "validate --mcp"])
@pytest.mark.parametrize("actions", [False, True], ids=["terminal", "github-actions"])
def test_a_start_error_quoting_the_servers_stderr_is_redacted_and_inert(
    project: Project, command: str, actions: bool
) -> None:
    """A server that prints its token (from its ``env``), ANSI escapes and a workflow command
    to stderr, then exits: the configuration error holds none of them live."""
    token = "tok-s3cr3t-value-xyz"
    project.env.update({"ANTHROPIC_API_KEY": "sk-ant-validate-0123456789", "BILLING_DSN": token})
    if actions:
        project.env["GITHUB_ACTIONS"] = "true"
    scope = "run" if command == "run" else "case"
    entry = server(mode="leaky-exit", scope=scope, env={"BILLING_TOKEN": "${BILLING_DSN}"})
    project.write(
        "suite.yaml",
        "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n"
        + servers(entry)
        + "test_cases:\n  - input: x\n",
    )
    result = project.run(*command.split(), "suite.yaml")
    assert result.code == 2, result.out + result.err
    assert "toolbox: connecting with token ***" in result.err
    assert token not in result.err + result.out
    assert "\x1b" not in result.err and "\x07" not in result.err
    assert "toolbox: red alert" in result.err
    lines = result.err.splitlines()
    command_at = next(i for i, line in enumerate(lines) if "::error file=README.md" in line)
    if actions:  # between ::stop-commands::TOKEN and ::TOKEN::
        opened = [i for i, line in enumerate(lines) if line.startswith("::stop-commands::")]
        assert len(opened) == 1 and opened[0] < command_at
        stop = lines[opened[0]].removeprefix("::stop-commands::")
        assert lines.index(f"::{stop}::") > command_at
    else:
        assert not any(line.startswith("::stop-commands::") for line in lines)


@pytest.mark.parametrize(
    ("scope", "session_timeout", "warned"),
    [("case", 3, True), ("case", 10, False), ("run", 3, False)],
)
def test_a_case_servers_startup_timeout_past_the_session_timeout_is_a_warning(
    project: Project, scope: str, session_timeout: int, warned: bool
) -> None:
    """A ``scope: case`` server starts within its case's ``session_timeout``: a longer
    ``startup_timeout`` would be cut short (the case then says only "session_timeout")."""
    project.env["ANTHROPIC_API_KEY"] = "sk-ant-validate-0123456789"
    project.write(
        "suite.yaml",
        "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n"
        + servers(server(scope=scope, startup_timeout=10))
        + "test_cases:\n  - input: x\n",
    )
    result = project.run(
        "run", "suite.yaml", "--dry-run", "--session-timeout", str(session_timeout)
    )
    assert result.code == 0, result.out + result.err
    warning = (
        "warning: suite.yaml: MCP server 'billing' has startup_timeout 10 s, but a scope: case "
        "server starts within its case's session_timeout (3 s): raise session_timeout to at "
        "least 10 s, or use scope: run"
    )
    assert (warning in result.out + result.err) is warned, result.out + result.err


# ------------------------------------------------------------------------ the loader


def test_the_loader_checks_what_it_can_without_starting_anything(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "servers").mkdir()
    script = tmp_path / "servers" / "run.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    err = project.rejected(
        "agent:\n  backend: openai\n  model: gpt-5-mini\n  api_key: sk-test-0123456789\n"
        "  tools:\n    - function: tests.tool_funcs:subtract\n"
        "  mcp_servers:\n"
        "    - {name: a, command: no-such-program-here}\n"
        "    - {name: b, command: ./run.sh, cwd: servers}\n"
        "    - {name: c, command: python, cwd: nowhere}\n"
        "    - {name: d, url: 'http://127.0.0.1:9/mcp', tools: [subtract, 'x.y']}\n"
        "test_cases:\n  - input: x\n"
    )
    lines = [line.strip() for line in err.splitlines()[1:]]
    assert lines == [
        "suite.yaml:8 agent.mcp_servers[0].command: 'no-such-program-here' is not a program on "
        "the PATH the server gets (the runner's, unless its env sets one); give its path, or "
        "set PATH in the server's env",
        "suite.yaml:9 agent.mcp_servers[1].command: './run.sh' is not executable",
        f"suite.yaml:10 agent.mcp_servers[2].cwd: is not a directory: {tmp_path / 'nowhere'}",
        "suite.yaml:11 agent.mcp_servers[3].tools[0]: 'subtract' is also the name of a Python "
        "tool of agent.tools; the model must tell them apart: rename the Python tool ('name:') "
        "or leave this one out",
        "suite.yaml:11 agent.mcp_servers[3].tools[1]: 'x.y' is a name a model cannot be given "
        "(1-64 letters, digits, '_' or '-')",
    ]
    script.chmod(0o755)
    project.write(
        "suite.yaml",
        "agent:\n  backend: openai\n  model: gpt-5-mini\n  api_key: sk-test-0123456789\n"
        "  mcp_servers:\n    - {name: b, command: ./run.sh, cwd: servers}\n"
        "test_cases:\n  - input: x\n",
    )
    assert project.run("validate", "suite.yaml").code == 0


def test_a_suite_with_servers_needs_the_mcp_package(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    err = project.rejected(
        "agent:\n  backend: openai\n  model: gpt-5-mini\n  api_key: sk-test-0123456789\n"
        f"  mcp_servers:\n    - {{name: a, command: {sys.executable}}}\n"
        "test_cases:\n  - input: x\n"
    )
    assert (
        "suite.yaml:5 agent.mcp_servers: MCP servers need the package 'mcp', which is not "
        "installed; install it with: pip install 'multiturn-eval[mcp]'"
    ) in err


def test_mcp_servers_are_not_a_key_of_the_python_and_http_backends(project: Project) -> None:
    err = project.rejected(
        "agent:\n  backend: python\n  factory: tests.agents:scripted\n"
        "  mcp_servers: [{name: a, command: x}]\ntest_cases:\n  - input: x\n"
    )
    assert "'mcp_servers' is not a key of the python agent (backend: python)" in err


# ----------------------------------------------------------------- signals, by PID


def written_pid(pid_file: Path, seconds: float = 120.0) -> int:
    """The pid a test server wrote to ``pid_file`` once it started (bounded polling)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.05)
    return int(pid_file.read_text())


def cli_process(flavor: Flavor, fake: Any, cwd: Path, *args: str) -> subprocess.Popen[str]:
    """The real CLI in a process of its own, talking to ``fake`` (stdout, stderr piped)."""
    env = {**os.environ, **flavor.env(fake), "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.Popen(
        [sys.executable, "-m", "multiturn_eval", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("flavor", [FLAVORS[0], FLAVORS[2]], ids=str)
def test_no_server_process_outlives_a_signal_to_the_cli(
    flavor: Flavor, signame: str, tmp_path: Path
) -> None:
    """The real CLI in a process of its own, two cases hung in an MCP call (each with its
    own server and that server's grandchild, plus the run's shared server): after the
    signal it exits 3 with its reports, and not one of those processes is left."""
    import signal
    import threading

    seen: dict[str, list[int]] = {"run": [], "case": [], "children": []}
    hung = threading.Semaphore(0)
    lock = threading.Lock()

    def answer(last: Turn) -> tuple[str, Any, U]:
        kind, content = last
        if kind == "user":
            return "call", ("whoami", {}), U()
        if content.startswith("{"):  # whoami: the run's server
            with lock:
                seen["run"].append(json.loads(content)["pid"])
            return "call", ("spawn_child", {}), U()
        child = int(content)  # spawn_child: the case's server's grandchild
        with lock:
            seen["children"].append(child)
            seen["case"].append(_parent_of(child))
        hung.release()
        return "call", ("hang", {}), U()

    suite = tmp_path / "suite.yaml"
    header = flavor.agent.split("  instructions:")[0]
    suite.write_text(
        header
        + servers(
            server("shared", tools=["whoami"], scope="run"),
            server("own", tools=["spawn_child", "hang"]),
        )
        + "test_cases:\n"
        + "".join(f"  - name: case-{i}\n    input: go {i}\n" for i in range(2))
    )
    with flavor.server() as fake:
        fake.responder = flavor.responder(answer)
        with cli_process(flavor, fake, tmp_path, "run", str(suite), "-p", "2", "-o", "out") as cli:
            for _ in range(2):
                assert hung.acquire(timeout=120), "the cases never reached their hung call"
            time.sleep(0.5)  # the hang calls reach the servers
            cli.send_signal(getattr(signal, signame))
            out, err = cli.communicate(timeout=120)
    assert cli.returncode == 3, out + err
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["run"]["complete"] is False and len(written["results"]) == 2
    assert len(set(seen["run"])) == 1 and len(set(seen["case"])) == 2
    pids = seen["run"] + seen["case"] + seen["children"]
    assert all(pid > 1 for pid in pids)
    assert wait_gone(pids) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    ("command", "scope"),
    [("run", "run"), ("run", "case"), ("validate", "run")],
    ids=["run-start", "case-start", "validate-mcp"],
)
def test_no_server_process_outlives_a_signal_while_it_starts(
    command: str, scope: str, signame: str, tmp_path: Path
) -> None:
    """The real CLI signalled while a server it starts has not answered ``initialize``
    (the run's, before any agent call; a case's; ``validate --mcp``'s): it exits 3 and the
    server's process is gone."""
    import signal

    flavor = FLAVORS[0]
    pid_file = tmp_path / "server.pid"
    entry = server(
        mode="no-init", scope=scope, startup_timeout=120, env={"TOOLBOX_PID_FILE": str(pid_file)}
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text(cli_suite(flavor, entry))
    options = ["-o", "out"] if command == "run" else ["--mcp"]
    with flavor.server() as fake:
        with cli_process(flavor, fake, tmp_path, command, str(suite), *options) as cli:
            pid = written_pid(pid_file)  # the server has started and waits for ever
            time.sleep(0.5)  # initialize sent, unanswered
            cli.send_signal(getattr(signal, signame))
            out, err = cli.communicate(timeout=120)
        assert flavor.requests(fake) == []
    assert cli.returncode == 3, out + err
    assert wait_gone([pid]) == []
