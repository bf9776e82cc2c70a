"""MCP servers as tool sources: real servers written with the mcp SDK, over stdio and HTTP.

Every server here is ``tests/mcp_servers/toolbox.py`` (FastMCP, or the SDK's
low-level server for the broken listings), started as a real process; nothing of
the SDK is mocked. What a user relies on: the tools reach the ToolSet with the
server's own schemas and report which server served a call; a server that does
not start, never answers, hangs, crashes, floods stderr, lists a bad schema or
returns a huge result is a clear error and never a hang; every process (the
server's children too) is gone when its case ends, on SIGTERM and on SIGINT;
each case sees its own server state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel, ValidationError

from multiturn_eval.errors import McpServerCrashed, McpServerError, ToolClashError
from multiturn_eval.retry import turn_deadline
from multiturn_eval.secrets import Redactor
from multiturn_eval.suite.mcp_servers import McpServerList, server_configs
from multiturn_eval.tools import Tool, ToolSet
from multiturn_eval.tools.mcp_servers.check import ToolNameUse, check_servers
from multiturn_eval.tools.mcp_servers.config import PASSED_ENV, McpServerConfig, mcp_secrets
from multiturn_eval.tools.mcp_servers.source import CaseTools, McpServers
from multiturn_eval.tools.mcp_servers.stdio import STDERR_LINES, StderrTail
from multiturn_eval.types import ToolInvocation

from . import tool_funcs

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
TOOLBOX = ROOT / "tests" / "mcp_servers" / "toolbox.py"
#: the runner's environment: everything of this one, plus a secret no server may see
RUN_ENV = {**os.environ, "RUNNER_ONLY_SECRET_TOKEN": "do-not-pass-this-on"}


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


@contextlib.asynccontextmanager
async def case_of(configs: list[McpServerConfig]) -> AsyncIterator[CaseTools]:
    """One test case's tools from ``configs`` (the servers started; the case ended after)."""
    servers = McpServers(configs, env=RUN_ENV)
    await servers.start(ToolSet())
    case = await servers.open_case()
    try:
        yield case
    finally:
        await case.aclose()


async def crash_of(toolset: ToolSet, tool: str) -> McpServerCrashed:
    """What a call of ``tool`` raises: McpServerCrashed (anything else fails the test)."""
    with pytest.raises(McpServerCrashed) as crashed:
        await toolset.call(tool, {})
    return crashed.value


def stdio(name: str = "billing", mode: str | None = None, **fields: Any) -> McpServerConfig:
    args = [str(TOOLBOX)] + (["--mode", mode] if mode else [])
    return McpServerConfig(name=name, command=sys.executable, args=tuple(args), **fields)


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], seconds: float = 15.0) -> list[int]:
    """The pids still alive after waiting up to ``seconds`` (bounded polling)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def http_toolbox(*server: str) -> Iterator[str]:
    """The toolbox (or the ``server`` script and arguments) over streamable HTTP on
    127.0.0.1; its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *(server or (str(TOOLBOX),)), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert process.poll() is None, "the HTTP toolbox exited"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_toolbox() as url:
        yield url


async def start_and_open(*configs: McpServerConfig) -> None:
    """Start the run's servers, then open a case (each step may raise)."""
    servers = McpServers(configs, env=RUN_ENV)
    await servers.start(ToolSet())
    case = await servers.open_case()
    await case.aclose()
    await servers.aclose()


def python_tools() -> ToolSet:
    return ToolSet([Tool.from_function(tool_funcs.subtract)])


# ------------------------------------------------------------------ tools and calls


def test_a_servers_tools_join_the_python_tools_with_their_own_schemas() -> None:
    async def go() -> tuple[ToolSet, list[Any]]:
        servers = McpServers([stdio(scope="run")], env=RUN_ENV)
        toolset = await servers.start(python_tools())
        try:
            outcomes = [
                await toolset.call("get_balance", {"account_id": "A-1"}),
                await toolset.call("subtract", {"a": 5, "b": 3}),
                await toolset.call("refund", '{"invoice_id": "INV-7", "amount": 12.5}'),
            ]
        finally:
            await servers.aclose()
        return toolset, outcomes

    toolset, (balance, subtract, refund) = run(go())
    assert toolset.get("subtract") is not None and toolset.get("subtract").server is None  # type: ignore[union-attr]
    tool = toolset.get("get_balance")
    assert tool is not None and tool.server == "billing"
    assert tool.description == "The balance of an account, in EUR."
    assert tool.parameters["properties"]["account_id"]["type"] == "string"
    assert tool.parameters["required"] == ["account_id"]
    shapes = {t["name"]: t for t in toolset.anthropic_tools()}
    assert shapes["get_balance"]["input_schema"] == tool.parameters
    assert {t["function"]["name"] for t in toolset.openai_tools()} >= {"get_balance", "subtract"}
    assert toolset.source("get_balance") == "MCP server 'billing'"
    assert (balance.content, balance.is_error) == ("120.50 EUR", False)
    assert balance.invocation.server == "billing"
    assert balance.invocation.args == {"account_id": "A-1"}
    assert balance.invocation.result == "120.50 EUR"
    assert balance.invocation.error is None and balance.invocation.duration_ms > 0
    assert subtract.invocation.server is None and subtract.content == "2.0"
    assert refund.content == "refunded 12.50 EUR on INV-7"  # arguments as JSON text


def test_an_is_error_result_reaches_the_model_like_a_python_tools_exception() -> None:
    async def go() -> Any:
        async with case_of([stdio()]) as case:
            return [
                await case.toolset.call("get_balance", {"account_id": "nope"}),
                await case.toolset.call("get_balance", "{not json"),
                await case.toolset.call("get_balance", {}),
                await case.toolset.call("picture", {}),
            ]

    missing, not_json, no_args, picture = run(go())
    assert not picture.is_error and picture.content == "[image: image/png, 88 bytes of base64]"
    assert missing.is_error and missing.content.startswith("Error: ")
    assert "no account 'nope'" in missing.invocation.error
    assert missing.invocation.result is None and missing.invocation.server == "billing"
    assert not_json.is_error and "not valid JSON" in not_json.invocation.error
    assert no_args.is_error and "account_id" in no_args.invocation.error  # the server checks


def test_a_stdio_server_gets_a_minimal_environment_and_its_cwd_relative_to_the_suite(
    tmp_path: Path,
) -> None:
    (tmp_path / "servers").mkdir()

    class Agent(BaseModel):
        mcp_servers: McpServerList

    agent = Agent.model_validate(
        {
            "mcp_servers": [
                {
                    "name": "billing",
                    "command": sys.executable,
                    "args": [str(TOOLBOX)],
                    "env": {"BILLING_DB": "sqlite:///billing.db", "RETRIES": 3},
                    "cwd": "servers",
                }
            ]
        }
    )
    (config,) = server_configs(agent.mcp_servers, tmp_path)

    async def go() -> dict[str, Any]:
        async with case_of([config]) as case:
            facts: dict[str, Any] = json.loads((await case.toolset.call("whoami", {})).content)
            return facts

    facts = run(go())
    passed = {k for k in PASSED_ENV if k in RUN_ENV}
    # the server's interpreter may add a few of its own (LC_CTYPE); nothing of ours beyond these
    assert {k for k in facts["env"] if k in RUN_ENV} <= passed | {"BILLING_DB", "RETRIES"}
    assert "RUNNER_ONLY_SECRET_TOKEN" not in facts["env"]
    assert facts["env"]["BILLING_DB"] == "sqlite:///billing.db"
    assert facts["env"]["RETRIES"] == "3"
    assert facts["env"]["PATH"] == RUN_ENV["PATH"]
    assert Path(facts["cwd"]) == tmp_path / "servers"
    assert facts["pgid"] == facts["pid"]  # a process group of its own


# --------------------------------------------------------------------- isolation


def test_eight_cases_at_once_each_see_the_counter_start_at_zero() -> None:
    async def go() -> tuple[list[list[str]], list[int]]:
        servers = McpServers([stdio()], env=RUN_ENV)
        await servers.start(ToolSet())
        cases = await asyncio.gather(*(servers.open_case() for _ in range(8)))
        pids = [s.pid for c in cases for s in c.servers if s.pid is not None]

        async def count(case: Any) -> list[str]:
            try:
                return [(await case.toolset.call("increment", {})).content for _ in range(3)]
            finally:
                await case.aclose()

        return list(await asyncio.gather(*(count(c) for c in cases))), pids

    counts, pids = run(go())
    assert counts == [["1", "2", "3"]] * 8
    assert len(set(pids)) == 8
    assert wait_gone(pids) == []


def test_scope_run_shares_one_server_between_cases() -> None:
    async def go() -> tuple[list[str], set[int | None], Any]:
        servers = McpServers([stdio(scope="run")], env=RUN_ENV)
        await servers.start(ToolSet())
        seen, pids = [], set()
        for _ in range(3):
            case = await servers.open_case()
            seen.append((await case.toolset.call("increment", {})).content)
            pids.add(servers.run_servers[0].pid)
            await case.aclose()  # a case's end leaves the run's server running
        starts = servers.run_starts()
        await servers.aclose()
        return seen, pids, starts

    seen, pids, starts = run(go())
    assert seen == ["1", "2", "3"]
    assert len(pids) == 1
    (start,) = starts
    assert (start.name, start.scope, start.transport) == ("billing", "run", "stdio")
    assert start.startup_ms is not None and start.startup_ms > 0
    assert wait_gone([p for p in pids if p is not None]) == []


def test_a_url_server_gets_a_fresh_mcp_session_per_case_and_the_headers(http_url: str) -> None:
    headers = {"X-Tenant": "acme", "X-Api-Token": "tok-very-secret-123"}
    per_case = McpServerConfig(name="search", url=http_url, headers=headers)
    shared = McpServerConfig(name="search", url=http_url, headers=headers, scope="run")

    async def go(config: McpServerConfig) -> tuple[list[list[str]], dict[str, Any]]:
        servers = McpServers([config], env=RUN_ENV)
        await servers.start(ToolSet())
        counts = []
        facts: dict[str, Any] = {}
        for _ in range(2):
            case = await servers.open_case()
            try:
                counts.append([(await case.toolset.call("increment", {})).content for _ in "ab"])
                facts = json.loads((await case.toolset.call("whoami", {})).content)
                outcome = await case.toolset.call("get_balance", {"account_id": "A-3"})
                assert outcome.content == "9876.25 EUR" and outcome.invocation.server == "search"
            finally:
                await case.aclose()
        await servers.aclose()
        return counts, facts

    counts, facts = run(go(per_case))
    assert counts == [["1", "2"], ["1", "2"]]  # the server keeps state per MCP session
    assert facts["headers"]["x-tenant"] == "acme"
    assert facts["headers"]["x-api-token"] == "tok-very-secret-123"
    counts, _ = run(go(shared))
    assert counts == [["1", "2"], ["3", "4"]]


# ---------------------------------------------------------------- start failures


@pytest.mark.parametrize("scope", ["run", "case"])
def test_a_server_that_cannot_start_is_an_error_naming_it(scope: str) -> None:
    config = McpServerConfig(
        name="billing", command="/nonexistent/billing-server", scope=scope, index=2
    )

    with pytest.raises(McpServerError) as caught:
        run(start_and_open(config))
    assert caught.value.server == "billing" and caught.value.index == 2
    assert "MCP server 'billing' (stdio: /nonexistent/billing-server) could not be started" in str(
        caught.value
    )
    assert "No such file or directory" in str(caught.value)


def test_a_server_that_exits_at_start_gives_its_stderr_lines() -> None:
    async def go() -> None:
        servers = McpServers([stdio(mode="exit-at-start", scope="run")], env=RUN_ENV)
        await servers.start(ToolSet())

    with pytest.raises(McpServerError) as caught:
        run(go())
    message = str(caught.value)
    assert "exited with code 1 while answering initialize" in message
    assert "its last stderr lines:\n    toolbox: fatal: BILLING_DB is not set" in message


@pytest.mark.parametrize("scope", ["run", "case"])
def test_a_server_that_never_answers_initialize_is_bounded_by_startup_timeout(
    scope: str,
) -> None:
    with pytest.raises(McpServerError) as caught:
        run(start_and_open(stdio(mode="no-init", scope=scope, startup_timeout=1.0)))
    message = str(caught.value)
    assert "did not finish answering initialize within 1 s (startup_timeout)" in message
    assert "toolbox: warming up a cache that never finishes" in message


def test_a_server_that_failed_to_start_leaves_no_process() -> None:
    from multiturn_eval.tools.mcp_servers.server import McpServer

    server = McpServer(stdio(mode="no-init", startup_timeout=0.5), env=RUN_ENV)
    with pytest.raises(McpServerError):
        run(server.start())
    assert server.pid is not None and wait_gone([server.pid]) == []


def test_a_case_given_up_while_its_server_starts_leaves_no_process(tmp_path: Path) -> None:
    """The case runner's session_timeout cancels open_case: the half-started server goes."""
    pid_file = tmp_path / "pid"
    config = stdio(mode="no-init", env={"TOOLBOX_PID_FILE": str(pid_file)})

    async def go() -> None:
        servers = McpServers([config], env=RUN_ENV)
        await servers.start(ToolSet())
        async with asyncio.timeout(3):
            await servers.open_case()

    with pytest.raises(TimeoutError):
        run(go())
    assert wait_gone([int(pid_file.read_text())]) == []


def test_a_url_nobody_answers_is_a_start_error() -> None:
    config = McpServerConfig(
        name="search", url=f"http://127.0.0.1:{free_port()}/mcp", startup_timeout=10
    )

    with pytest.raises(McpServerError) as caught:
        run(start_and_open(config))
    assert "MCP server 'search' (streamable HTTP: http://127.0.0.1:" in str(caught.value)
    assert "ConnectError" in str(caught.value) or "onnect" in str(caught.value)


def test_several_servers_failing_are_each_reported() -> None:
    configs = [
        McpServerConfig(name="a", command="/nonexistent/a", scope="run", index=0),
        stdio("ok", scope="run", index=1),
        McpServerConfig(name="c", command="/nonexistent/c", scope="run", index=2),
    ]

    async def go() -> None:
        await McpServers(configs, env=RUN_ENV).start(ToolSet())

    with pytest.raises(McpServerError) as caught:
        run(go())
    assert [(e.server, e.index) for e in caught.value.errors] == [("a", 0), ("c", 2)]


# ----------------------------------------------------- listings that cannot be offered


def test_an_input_schema_that_is_not_json_schema_names_server_and_tool() -> None:
    async def go() -> None:
        await McpServers([stdio("broken-one", mode="bad-schema", scope="run")], env=RUN_ENV).start(
            ToolSet()
        )

    with pytest.raises(McpServerError) as caught:
        run(go())
    message = str(caught.value)
    assert caught.value.tool == "broken"
    assert "MCP server 'broken-one'" in message and "its tool 'broken'" in message
    assert "not a valid JSON Schema: at properties/n/type" in message


def test_a_schema_jsonschema_cannot_read_is_an_error_naming_the_tool_and_no_server_is_left(
    tmp_path: Path,
) -> None:
    """A ``$schema`` that is not a string (``["draft-07"]``) made jsonschema's own look-up
    raise TypeError: an internal error (exit 3), the server left running until exit."""
    pid_file = tmp_path / "pid"
    config = stdio(
        "weird", mode="odd-dialect", scope="run", env={"TOOLBOX_PID_FILE": str(pid_file)}
    )

    async def go() -> None:
        await McpServers([config], env=RUN_ENV).start(ToolSet())

    with pytest.raises(McpServerError) as caught:
        run(go())
    assert caught.value.tool == "odd"
    assert "MCP server 'weird'" in str(caught.value) and "its tool 'odd'" in str(caught.value)
    assert "not a valid JSON Schema: at $schema: list ['draft-07'] is not a URI" in str(
        caught.value
    )
    assert wait_gone([int(pid_file.read_text())]) == []


@pytest.mark.parametrize(
    ("tools", "offered"),
    [
        pytest.param(None, None, id="everything"),
        pytest.param(("search",), None, id="the-twice-listed-one"),
        pytest.param(("echo",), ["echo"], id="the-others"),
    ],
)
def test_a_tool_listed_twice_is_an_error_only_when_it_is_offered(
    tools: tuple[str, ...] | None, offered: list[str] | None
) -> None:
    """A gateway may list a tool twice: the allow-list can leave it out, as it can a tool
    with a bad schema or name."""

    async def go() -> list[str]:
        servers = McpServers([stdio("gw", mode="twice", scope="run", tools=tools)], env=RUN_ENV)
        toolset = await servers.start(ToolSet())
        await servers.aclose()
        return [t.name for t in toolset]

    if offered is not None:
        assert run(go()) == offered
        return
    with pytest.raises(McpServerError, match=r"its tool 'search' lists two tools with this name"):
        run(go())


RAW = ROOT / "tests" / "mcp_servers" / "raw_replies.py"


def call_city(config: McpServerConfig) -> tuple[str, bool]:
    """What a call of the raw server's ``city`` tool gives (content, is_error)."""

    async def go() -> tuple[str, bool]:
        servers = McpServers([config], env=RUN_ENV)
        toolset = await servers.start(ToolSet())
        try:
            outcome = await toolset.call("city", {})
            return outcome.content, outcome.is_error
        finally:
            await servers.aclose()

    return run(go())


def raw(mode: str) -> McpServerConfig:
    # a call_timeout far past the test's time: a reply left waiting would show as its message
    args = (str(RAW), mode)
    return McpServerConfig(
        name="raw", command=sys.executable, args=args, scope="run", call_timeout=600
    )


@pytest.mark.parametrize(
    ("mode", "content"),
    [
        pytest.param("latin1", "Malm\ufffd", id="a-byte-not-utf-8"),
        pytest.param("surrogate", "Great \ufffd", id="a-lone-surrogate-escape"),
        pytest.param("log-line", "Oslo", id="a-log-line-before-the-answer"),
    ],
)
def test_a_reply_the_sdks_parser_refuses_is_read_as_json_reads_it(mode: str, content: str) -> None:
    """The SDK's parser refused these and the call waited for its timeout: the answer had
    come, and was dropped."""
    assert call_city(raw(mode)) == (content, False)


def test_an_answer_that_is_not_json_rpc_fails_its_call_at_once_saying_so() -> None:
    content, is_error = call_city(raw("bad-error"))
    assert is_error
    assert content == (
        "Error: the MCP server 'raw' failed: its reply is not a JSON-RPC message the runner "
        "can read (error: Input should be a valid dictionary or instance of ErrorData)"
    ), content
    assert "did not answer" not in content


def test_an_http_answer_that_is_not_json_or_an_event_stream_fails_its_call_at_once() -> None:
    """A proxy's ``200 text/html`` error page: the SDK only logged it."""
    with http_toolbox(str(RAW), "html") as url:
        config = McpServerConfig(name="gw", url=url, scope="run", call_timeout=600)
        with pytest.raises(McpServerCrashed) as caught:
            call_city(config)
    assert (
        "lost its connection (ValueError: it answered with status 200 and content type "
        "text/html, neither JSON nor an event stream) during the call to 'city'"
    ) in str(caught.value)


def test_a_tool_list_in_pages_is_read_whole_and_an_endless_one_is_an_error() -> None:
    async def go(mode: str) -> tuple[list[str], str]:
        servers = McpServers([stdio(mode=mode, scope="run")], env=RUN_ENV)
        toolset = await servers.start(ToolSet())
        try:
            return [t.name for t in toolset], (await toolset.call("echo_6", {})).content
        finally:
            await servers.aclose()

    names, called = run(go("paged"))
    assert names == [f"echo_{i}" for i in range(7)] and called == "echo_6 called"
    with pytest.raises(McpServerError, match=r"listed more than 100 pages of tools"):
        run(go("endless-pages"))


def test_a_tool_name_a_model_cannot_take_is_an_error_unless_left_out() -> None:
    async def go(tools: tuple[str, ...] | None) -> list[str]:
        servers = McpServers([stdio(mode="dotted", scope="run", tools=tools)], env=RUN_ENV)
        toolset = await servers.start(ToolSet())
        await servers.aclose()
        return [t.name for t in toolset]

    with pytest.raises(McpServerError, match=r"its tool 'billing\.lookup' has a name a model"):
        run(go(None))
    assert run(go(("echo",))) == ["echo"]


def test_a_name_clash_with_a_python_tool_names_both_sources() -> None:
    from multiturn_eval.tools.definition import FunctionTool

    lookup = Tool.from_function(tool_funcs.subtract, name="lookup")
    base = ToolSet([lookup], sources={"lookup": "agent.tools[0] (tests.tool_funcs:subtract)"})
    assert isinstance(lookup, FunctionTool)

    async def go() -> None:
        await McpServers([stdio(mode="clash", scope="run", index=1)], env=RUN_ENV).start(base)

    with pytest.raises(McpServerError) as caught:
        run(go())
    message = str(caught.value)
    assert "two tools are named 'lookup'" in message
    assert "agent.tools[0] (tests.tool_funcs:subtract)" in message
    assert "MCP server 'billing'" in message
    assert caught.value.index == 1


def test_a_toolset_given_two_tools_of_one_name_names_both_sources() -> None:
    def lookup() -> str:
        return "x"

    first = Tool.from_function(tool_funcs.subtract, name="lookup")
    with pytest.raises(ToolClashError) as caught:
        ToolSet([first, Tool.from_function(lookup)], sources={"lookup": "agent.tools[0] (a:b)"})
    assert "one from agent.tools[0] (a:b), one from Python tool 'lookup'" in str(caught.value)
    with pytest.raises(ToolClashError, match="one from Python tool 'lookup', one from Python"):
        ToolSet([first]).with_tools([Tool.from_function(lookup)])


def test_two_servers_offering_one_tool_name_is_an_error_naming_both() -> None:
    with pytest.raises(McpServerError) as caught:
        run(start_and_open(stdio("billing"), stdio("billing-eu")))
    assert "MCP server 'billing'" in str(caught.value)
    assert "MCP server 'billing-eu'" in str(caught.value)


def test_the_allow_list_offers_only_its_tools_and_must_name_real_ones() -> None:
    async def go(tools: tuple[str, ...]) -> list[str]:
        servers = McpServers([stdio(scope="run", tools=tools)], env=RUN_ENV)
        toolset = await servers.start(python_tools())
        await servers.aclose()
        return [t.name for t in toolset]

    assert run(go(("refund", "get_balance"))) == ["subtract", "refund", "get_balance"]
    with pytest.raises(McpServerError) as caught:
        run(go(("get_balance", "get_balanse")))
    assert "allow-list names 'get_balanse', which the server does not offer" in str(caught.value)
    assert "'get_balance'" in str(caught.value) and caught.value.tool == "get_balanse"


# -------------------------------------------------------------------- calls in time


def test_a_call_past_call_timeout_is_a_tool_error_and_the_server_goes_on() -> None:
    async def go() -> list[Any]:
        async with case_of([stdio(call_timeout=0.5)]) as case:
            return [
                await case.toolset.call("hang", {}),
                await case.toolset.call("get_balance", {"account_id": "A-2"}),
            ]

    hung, after = run(go())
    assert hung.is_error
    assert hung.invocation.error == (
        "the MCP server 'billing' did not answer the call to 'hang' within 0.5 s (call_timeout)"
    )
    assert after.content == "0.00 EUR"


def test_without_call_timeout_a_call_is_bounded_by_the_turns_time_left() -> None:
    async def go() -> Any:
        async with case_of([stdio()]) as case:
            with turn_deadline(0.8):
                return await case.toolset.call("hang", {})

    hung = run(go())
    assert hung.is_error
    assert "within the turn's time left (turn_timeout 0.8 s)" in hung.invocation.error


def test_a_hung_call_cancelled_by_the_turns_timeout_leaves_no_process() -> None:
    pids: list[int] = []

    async def go() -> None:
        async with case_of([stdio()]) as case:
            pids.extend(s.pid for s in case.servers if s.pid)
            async with asyncio.timeout(0.5):  # the case runner's own turn_timeout
                await case.toolset.call("hang", {})

    with pytest.raises(TimeoutError):
        run(go())
    assert pids and wait_gone(pids) == []


# ------------------------------------------------------------------------ crashes


def test_a_crash_fails_the_turn_the_next_call_restarts_and_two_in_a_row_end_the_session() -> None:
    async def go() -> dict[str, Any]:
        async with case_of([stdio()]) as case:
            (server,) = case.servers
            out: dict[str, Any] = {"first_pid": server.pid}
            out["first"] = await crash_of(case.toolset, "crash")
            out["after"] = (await case.toolset.call("increment", {})).content
            out["second_pid"] = server.pid
            out["again"] = await crash_of(case.toolset, "crash")
            out["twice"] = await crash_of(case.toolset, "crash")
            out["third_pid"] = server.pid
        return out

    out = run(go())
    first = out["first"]
    assert first.session_alive
    assert "MCP server 'billing'" in str(first)
    assert "exited with code 3 during the call to 'crash'; the next call restarts it" in str(first)
    assert "toolbox: crashing on purpose" in str(first)
    assert out["after"] == "1"  # a fresh process: its state starts again
    assert out["second_pid"] != out["first_pid"]
    assert out["again"].session_alive  # a good call came between
    assert not out["twice"].session_alive and "crashed twice in a row" in str(out["twice"])
    assert wait_gone([out["first_pid"], out["second_pid"], out["third_pid"]]) == []


def test_a_url_server_that_dies_mid_call_fails_the_turn_and_cannot_come_back() -> None:
    async def go(url: str) -> tuple[McpServerCrashed, McpServerCrashed]:
        async with case_of([McpServerConfig(name="search", url=url, startup_timeout=5)]) as case:
            assert (await case.toolset.call("increment", {})).content == "1"
            return await crash_of(case.toolset, "crash"), await crash_of(case.toolset, "increment")

    with http_toolbox() as url:
        crash, restart = run(go(url))
    assert crash.session_alive and "MCP server 'search' (streamable HTTP" in str(crash)
    assert "lost its connection" in str(crash) and "during the call to 'crash'" in str(crash)
    assert not restart.session_alive and "restarting it after it stopped" in str(restart)


def test_a_server_that_cannot_restart_ends_the_session(tmp_path: Path) -> None:
    mark = tmp_path / "crashed"

    async def go() -> tuple[McpServerCrashed, McpServerCrashed]:
        async with case_of([stdio(env={"TOOLBOX_CRASH_MARK": str(mark)})]) as case:
            await crash_of(case.toolset, "crash")
            restart = await crash_of(case.toolset, "increment")
            return restart, await crash_of(case.toolset, "increment")

    restart, later = run(go())
    assert not restart.session_alive
    assert "exited with code 2 while answering initialize" in str(restart)
    assert "refusing to start after a crash" in str(restart)
    assert str(later) == str(restart)  # no second restart


# -------------------------------------------------------- floods and huge results


def test_a_4_mb_stderr_flood_does_not_stall_a_call_and_the_tail_is_kept() -> None:
    async def go() -> tuple[Any, str]:
        servers = McpServers([stdio(scope="run")], env=RUN_ENV)
        toolset = await servers.start(ToolSet())
        try:
            outcome = await toolset.call("flood", {"megabytes": 4})
            return outcome, servers.run_servers[0].stderr_text()
        finally:
            await servers.aclose()

    outcome, tail = run(go())
    assert outcome.content == "flooded"
    lines = tail.split("\n")[1:]
    assert len(lines) == STDERR_LINES
    assert lines[-1] == "    flood: the last line"


def test_the_stderr_tail_stays_bounded_whatever_comes() -> None:
    tail = StderrTail(lines=3, width=10)
    tail.feed(b"a" * 5_000_000)  # one endless line
    tail.feed(b"\nsecond\nthird\xff\xfe\n")
    tail.feed(b"partial")
    assert tail.lines() == ["second", "third\ufffd\ufffd", "partial"]
    tail.feed(b"-line\n")
    assert tail.lines() == ["second", "third\ufffd\ufffd", "partial-li…"]


def test_huge_results_are_cut_for_the_model_and_the_report_mcp_and_python_alike() -> None:
    def big_python() -> str:
        return "p" * 5_000_000

    def big_dict() -> dict[str, str]:
        return {"rows": "r" * 300}

    def big_error() -> str:
        raise ValueError("e" * 2_000)

    async def go() -> list[Any]:
        servers = McpServers([stdio(scope="run")], env=RUN_ENV)
        toolset = await servers.start(
            ToolSet([Tool.from_function(f) for f in (big_python, big_dict, big_error)])
        )
        small = ToolSet(list(toolset), max_result_chars=100)
        uncapped = ToolSet(list(toolset), max_result_chars=None)
        try:
            return [
                await toolset.call("huge", {"chars": 5_000_000}),
                await toolset.call("big_python", {}),
                await small.call("big_dict", {}),
                await small.call("big_error", {}),
                await toolset.call("huge", {"chars": 100_000}),
                await uncapped.call("huge", {"chars": 300_000}),
            ]
        finally:
            await servers.aclose()

    mcp_big, python_big, dict_big, error_big, exact, uncapped = run(go())
    marker = "… [4,900,000 of 5,000,000 characters cut: max_tool_result_chars is 100,000]"
    assert mcp_big.content == "x" * 100_000 + marker
    assert mcp_big.invocation.result == mcp_big.content and mcp_big.invocation.server == "billing"
    assert python_big.content == "p" * 100_000 + marker
    assert python_big.invocation.result == python_big.content
    assert dict_big.content.startswith('{"rows": "rrr') and "characters cut" in dict_big.content
    assert dict_big.invocation.result == dict_big.content  # the cut JSON text
    assert error_big.is_error and len(error_big.invocation.error) < 200
    assert error_big.content == "Error: " + error_big.invocation.error
    assert "characters cut: max_tool_result_chars is 100]" in error_big.content
    assert exact.content == "x" * 100_000  # at the limit: untouched
    assert len(uncapped.content) == 300_000


# ------------------------------------------------------------------------ shutdown


def test_no_process_outlives_its_case_grandchildren_included() -> None:
    async def go() -> list[int]:
        servers = McpServers([stdio()], env=RUN_ENV)
        await servers.start(ToolSet())
        case = await servers.open_case()
        child = int((await case.toolset.call("spawn_child", {})).content)
        pids = [child, *(s.pid for s in case.servers if s.pid)]
        assert all(alive(p) for p in pids)
        await case.aclose()
        return pids

    assert wait_gone(run(go())) == []


@pytest.mark.parametrize(
    ("sig", "stall", "twice"),
    [
        (signal.SIGTERM, False, False),
        (signal.SIGINT, False, False),
        (signal.SIGTERM, True, False),
        (signal.SIGTERM, True, True),
        (signal.SIGINT, True, True),
        (signal.SIGKILL, False, False),
    ],
    ids=[
        "SIGTERM",
        "SIGINT",
        "SIGTERM-loop-blocked",
        "SIGTERM-twice-loop-blocked",
        "SIGINT-twice-loop-blocked",
        "SIGKILL",
    ],
)
def test_a_runner_stopped_mid_call_leaves_no_server_process(
    sig: signal.Signals, stall: bool, twice: bool
) -> None:
    """SIGTERM and SIGINT: every server and grandchild, also when the loop is blocked and the
    watchdog ends the process (os._exit), and when a second signal does (the exit that first
    brings report.json up to date); SIGKILL: the servers (they die with the runner)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(ROOT)])}
    if stall:
        env["SIGNAL_RUNNER_STALL"] = "1"
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp_servers" / "signal_runner.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert runner.stdout is not None
        line = runner.stdout.readline()
        assert line, runner.stderr.read() if runner.stderr else ""
        pids = json.loads(line)
        servers, children = pids["servers"], pids["children"]
        assert len(servers) == 3 and all(alive(p) for p in servers + children)
        time.sleep(0.3)  # every case is inside its hanging call
        runner.send_signal(sig)
        if twice:  # before the watchdog's grace ends: the second signal's exit ends the process
            time.sleep(0.1)
            runner.send_signal(sig)
        code = runner.wait(30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(10)
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
        assert wait_gone(servers) == []
        for child in children:  # the servers' own children are out of reach: tidy up
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        return
    assert code == 3, runner.stderr.read() if runner.stderr else ""
    assert wait_gone(servers + children) == []


# --------------------------------------------------------------- suite model, secrets


class _Agent(BaseModel):
    mcp_servers: McpServerList


def _errors(items: list[dict[str, Any]]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        _Agent.model_validate({"mcp_servers": items})
    out = []
    for error in caught.value.errors(include_url=False):
        ctx = error.get("ctx") or {}
        out.append((tuple(error["loc"]) + tuple(ctx.get("path", ())), error["msg"]))
    return out


def test_the_suite_model_rules_are_located_errors() -> None:
    assert _errors([{"name": "a"}]) == [
        (
            ("mcp_servers", 0, "url"),
            "give exactly one of 'command' (a stdio server) and 'url' (streamable HTTP)",
        )
    ]
    both = _errors([{"name": "a", "command": "x", "url": "http://h/mcp"}])
    assert both[0][0] == ("mcp_servers", 0, "command")
    assert _errors([{"name": "a", "url": "http://h/mcp", "env": {"A": "b"}}]) == [
        (("mcp_servers", 0, "env"), "applies to a stdio server ('command:') only")
    ]
    assert _errors([{"name": "a", "command": "x", "headers": {"A": "b"}}]) == [
        (("mcp_servers", 0, "headers"), "applies to a streamable HTTP server ('url:') only")
    ]
    assert _errors([{"name": "a", "command": "x"}, {"name": "a", "url": "http://h/mcp"}]) == [
        (
            ("mcp_servers", 1, "name"),
            "MCP server name 'a' is already used by mcp_servers[0]; give one of them a distinct 'name:'",
        )
    ]
    assert _errors([{"name": "a", "command": "x", "tools": ["t", "u", "t"]}]) == [
        (("mcp_servers", 0, "tools", 2), "'t' is already listed at tools[0]")
    ]
    located = {
        loc
        for loc, _ in _errors(
            [{"name": "a b", "command": "x", "scope": "suite", "startup_timeout": 0}]
        )
    }
    assert located == {
        ("mcp_servers", 0, "name"),
        ("mcp_servers", 0, "scope"),
        ("mcp_servers", 0, "startup_timeout"),
    }
    assert _errors([{"name": "a", "url": "ftp://h"}])[0][0] == ("mcp_servers", 0, "url")


def test_the_loader_locates_them_by_file_line_and_field() -> None:
    """As phase 2's suite.py will: the loader's own mapping of validation errors."""
    from multiturn_eval.locate import Locator, validation_issues
    from multiturn_eval.yaml_source import parse_yaml

    text = (
        "mcp_servers:\n"
        "  - name: billing\n"
        "    command: python\n"
        "  - name: billing\n"
        "    url: http://127.0.0.1:8931/mcp\n"
    )
    doc = parse_yaml(text)
    with pytest.raises(ValidationError) as caught:
        _Agent.model_validate(doc.data)
    (issue,) = validation_issues(caught.value, doc.data, Locator("suite.yaml", doc))
    assert str(issue) == (
        "suite.yaml:4 mcp_servers[1].name: MCP server name 'billing' is already used by "
        "mcp_servers[0]; give one of them a distinct 'name:'"
    )


def test_every_env_and_header_value_is_a_secret_and_is_redacted() -> None:
    agent = _Agent.model_validate(
        {
            "mcp_servers": [
                {"name": "a", "command": "x", "env": {"BILLING_DB": "postgres://u:pw@db/billing"}},
                {
                    "name": "b",
                    "url": "http://h/mcp",
                    "headers": {"Authorization": "Bearer abcdef123"},
                },
                {"name": "c", "command": "x", "env": {"SHORT": "1"}},
            ]
        }
    )
    secrets = mcp_secrets(agent.mcp_servers)
    assert secrets == {"postgres://u:pw@db/billing", "Bearer abcdef123"}
    assert mcp_secrets(server_configs(agent.mcp_servers, Path())) == secrets
    redact = Redactor(secrets)
    message = (
        "MCP server 'a' exited; its last stderr lines:\n    cannot reach postgres://u:pw@db/billing"
    )
    assert "postgres://u:pw@db/billing" not in redact(message)
    assert redact('{"error": "Bearer abcdef123"}') == '{"error": "***"}'


def test_a_tool_invocation_without_a_server_keeps_the_report_bytes() -> None:
    python = ToolInvocation(name="subtract", args={"a": 1}, result=0, duration_ms=1.0)
    served = ToolInvocation(name="get_balance", args={}, result="x", server="billing")
    assert "server" not in python.model_dump(mode="json")
    assert served.model_dump(mode="json")["server"] == "billing"
    assert ToolInvocation.model_validate(served.model_dump(mode="json")).server == "billing"


# ------------------------------------------------------------------ validate --mcp


def test_check_servers_lists_tools_and_checks_the_suites_tool_names(http_url: str) -> None:
    configs = [
        stdio("billing", tools=("get_balance", "refund"), index=0),
        McpServerConfig(name="search", url=http_url, tools=("whoami",), scope="run", index=1),
        stdio("broken", mode="bad-schema", index=2),
    ]
    uses = [
        ToolNameUse("get_balance", "expected", "test_cases[0] turns[0].expected_tools[0]"),
        ToolNameUse("balance", "expected", "test_cases[0] turns[1].expected_tools[0]"),
        ToolNameUse("subtract", "expected", "test_cases[1] expected_tools[0]"),
        ToolNameUse("increment", "expected", "test_cases[2] turns[0].expected_tools[0]"),
        ToolNameUse("delete_account", "forbidden", "test_cases[2] turns[0].forbidden_tools[0]"),
    ]
    found = run(check_servers(configs, env=RUN_ENV, python_tools=python_tools(), uses=uses))
    assert not found.ok
    listing = {s.name: s for s in found.servers}
    assert listing["billing"].offered == ("get_balance", "refund")
    assert "increment" in listing["billing"].listed
    assert listing["search"].offered == ("whoami",)
    assert listing["broken"].offered == ()
    assert [(e.server, e.tool) for e in found.server_errors] == [("broken", "broken")]
    problems = {use.name: text for use, text in found.name_problems}
    assert set(problems) == {"increment", "delete_account"}
    assert "expected tool 'increment' matches no tool offered to the model" in problems["increment"]
    assert "this check can never fail" in problems["delete_account"]
    assert "'subtract', 'get_balance', 'refund', 'whoami'" in problems["increment"]


@pytest.mark.parametrize(
    "code",
    [
        "import multiturn_eval.suite.mcp_servers, multiturn_eval.tools.mcp_servers.source\n"
        "import multiturn_eval.tools.mcp_servers.check",
        "from multiturn_eval.cli import main\nassert main(['validate', sys.argv[1]]) == 0",
        "from multiturn_eval.cli import main\nmain(['run', sys.argv[1], '-o', sys.argv[2]])",
    ],
    ids=["modules", "validate", "run"],
)
def test_the_sdk_is_not_imported_without_a_server_started(tmp_path: Path, code: str) -> None:
    """The config, the tool source and a suite without mcp_servers never load ``mcp``;
    starting a server does (the counter-check)."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "agent:\n  backend: python\n  factory: tests.agents:scripted\n"
        "  tools:\n    - function: tests.tool_funcs:subtract\n"
        "test_cases:\n  - input: hello\n"
    )
    probe = f"import sys\n{code}\nprint('MCP', sorted({{m.split('.')[0] for m in sys.modules}} & {{'mcp'}}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(suite), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert "MCP []" in done.stdout, done.stdout + done.stderr


def test_starting_a_server_imports_the_sdk() -> None:
    probe = (
        "import asyncio, sys\n"
        "from multiturn_eval.tools.mcp_servers.server import McpServer\n"
        "print('MCP', 'mcp' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "runner")}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
    )
    assert "MCP True" in done.stdout, done.stderr
