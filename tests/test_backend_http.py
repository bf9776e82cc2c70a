"""The http backend against a fake HTTP agent: request shape, reply parsing, errors, secrets."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.backends.http import HttpBackend, display_url
from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError, FatalBackendError, TransientError
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.types import TurnFile, TurnReply
from tests.backend_harness import Clock, converse, error, reply
from tests.conftest import Project
from tests.fakes._server import Drop, Malformed, Response, Slow
from tests.fakes.http_agent import AgentReply, FakeHttpAgent, remembering

TOKEN = "tok-s3cr3t-0123456789"


@pytest.fixture
def agent() -> Iterator[FakeHttpAgent]:
    with FakeHttpAgent(require_headers={"Authorization": f"Bearer {TOKEN}"}) as server:
        yield server


class Harness:
    def __init__(self, tmp_path: Path, agent: FakeHttpAgent) -> None:
        self.tmp_path = tmp_path
        self.agent = agent
        self.clock = Clock()

    def backend(
        self, extra: str = "", cases: str | None = None, *, turn_timeout: float = 10
    ) -> HttpBackend:
        path = self.tmp_path / "suite.yaml"
        path.write_text(
            "agent:\n"
            "  backend: http\n"
            "  url: ${AGENT_URL}\n"
            "  headers:\n"
            "    Authorization: Bearer ${AGENT_TOKEN}\n"
            "    X-Team: evals\n" + extra + (cases or CASES)
        )
        self.loaded = load_suite(path, env={"AGENT_URL": self.agent.endpoint, "AGENT_TOKEN": TOKEN})
        settings = RunSettings(parallel_test_cases=2, turn_timeout=turn_timeout)
        return HttpBackend(self.loaded, settings, sleep=self.clock.sleep)

    def converse(
        self, backend: HttpBackend, *messages: str | tuple[str, list[TurnFile]], case: int = 0
    ) -> list[TurnReply | BackendError]:
        return converse(backend, self.loaded, messages, case)


CASES = """\
test_cases:
  - name: memory
    instructions: Be brief.
    context: {user: alice, plan: {tier: gold}}
    turns:
      - input: hello
      - input: again
      - input: bye
"""


@pytest.fixture
def harness(tmp_path: Path, agent: FakeHttpAgent, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.chdir(tmp_path)
    return Harness(tmp_path, agent)


# ------------------------------------------------------------------------- requests


def test_each_turn_is_one_post_on_one_session(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.responder = remembering()
    results = harness.converse(
        harness.backend("  options: {temperature: 0}\n"), "hello", "again", "bye"
    )
    assert [reply(r).response for r in results] == ["1: hello", "2: again", "3: bye"]
    bodies = [r.body for r in agent.requests]
    assert [b["turn_index"] for b in bodies] == [0, 1, 2]
    assert len({b["session_id"] for b in bodies}) == 1
    assert bodies[0] == {
        "session_id": bodies[0]["session_id"],
        "turn_index": 0,
        "test_case": "memory",
        "input": "hello",
        "context": {"user": "alice", "plan": {"tier": "gold"}},
        "instructions": "Be brief.",
        "options": {"temperature": 0},
    }
    headers = agent.requests[0].headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["x-team"] == "evals"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("multiturn-eval/")
    # parsed reply
    last = reply(results[2])
    assert [(i.name, i.args, i.result) for i in last.tool_invocations] == [
        ("remember", {"turn": 2}, 3)
    ]
    assert last.token_usage is not None and last.token_usage.prompt_tokens == 30


def test_sessions_get_their_own_ids(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.responder = remembering()
    backend = harness.backend()

    async def run() -> list[str]:
        a = await backend.open_session(case_context(harness.loaded, 0))
        b = await backend.open_session(case_context(harness.loaded, 0))
        out = [
            (await a.send("x")).response,
            (await b.send("y")).response,
            (await a.send("z")).response,
        ]
        await backend.aclose()
        return out

    assert asyncio.run(run()) == ["1: x", "1: y", "2: z"]


def test_files_are_sent_base64(harness: Harness, agent: FakeHttpAgent, tmp_path: Path) -> None:
    agent.script(AgentReply("ok"), AgentReply("ok"))
    (tmp_path / "chart.png").write_bytes(b"\x89PNG fake")
    harness.converse(
        harness.backend(), ("look", [TurnFile.from_path(tmp_path / "chart.png")]), "again"
    )
    assert agent.requests[0].body["files"] == [
        {
            "name": "chart.png",
            "media_type": "image/png",
            "data": base64.b64encode(b"\x89PNG fake").decode(),
        }
    ]
    assert "files" not in agent.requests[1].body


# -------------------------------------------------------------------------- replies


def test_full_reply_with_extra_keys_warns(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(
        AgentReply(
            "42",
            tool_invocations=[{"name": "calc", "args": {"x": 1}, "result": 42, "duration_ms": 3.5}],
            token_usage={"prompt_tokens": 7, "completion_tokens": 3, "cache_read_tokens": 100},
            extra={"cost_usd": 0.002, "warnings": ["slow model"], "tool_invocation": []},
        )
    )
    result = reply(harness.converse(harness.backend(), "q")[0])
    assert result.response == "42"
    assert result.tool_invocations[0].duration_ms == 3.5
    assert result.token_usage is not None and result.token_usage.total_tokens == 110
    assert result.cost_usd == 0.002
    assert result.warnings == (
        "the agent's reply has keys multiturn-eval does not read: tool_invocation "
        "(it reads response, tool_invocations, token_usage, cost_usd, warnings)",
        "slow model",
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            ["a", "list"],
            'answered with a JSON array, not an object with \'response\': "[\\"a\\", \\"list\\"]"',
        ),
        ({"answer": "42"}, "answered without 'response' (keys: answer): "),
        ({"response": 42}, "answered with 'response' as a JSON number, not a string: \"42\""),
        (
            {"response": "x", "tool_invocations": [{"name": "a"}, {"args": {}}]},
            "answered with a malformed tool_invocations[1].name: Field required",
        ),
        (
            {"response": "x", "tool_invocations": {"name": "a"}},
            "answered with a malformed tool_invocations: must be a JSON array, got a JSON object",
        ),
        (
            {"response": "x", "token_usage": {"prompt_tokens": -1}},
            "answered with a malformed token_usage: Value error, prompt_tokens must be >= 0",
        ),
        (
            {"response": "x", "cost_usd": "cheap"},
            "answered with a malformed cost_usd: must be a number, got a JSON string",
        ),
    ],
)
def test_wrong_shape_replies_say_what_is_wrong(
    harness: Harness, agent: FakeHttpAgent, body: Any, message: str
) -> None:
    agent.script(Response(200, body), AgentReply("fine"))
    first, second = harness.converse(harness.backend(), "q", "q2")
    assert str(error(first)).startswith(f"the agent at {agent.endpoint} {message}")
    assert reply(second).response == "fine"  # the next turn is still sent


def test_non_json_reply_quotes_a_sanitised_excerpt(harness: Harness, agent: FakeHttpAgent) -> None:
    page = (
        "<html>\x1b[31m<title>Oops</title>\n\n   token was "
        + TOKEN
        + "\x07 "
        + "x" * 500
        + "</html>"
    )
    agent.script(Response(200, page, content_type="text/html"))
    failure = str(error(harness.converse(harness.backend(), "q")[0]))
    prefix = f"the agent at {agent.endpoint} answered HTTP 200 with a body that is not JSON (text/html): "
    assert failure.startswith(prefix)
    quoted = json.loads(failure[len(prefix) :])
    assert quoted.startswith("<html> [31m<title>Oops</title> token was *** ")
    assert TOKEN not in failure
    assert len(quoted) == 200 and quoted.endswith("…")
    assert "\x1b" not in failure and "\n" not in failure


def test_malformed_json_reply(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(Malformed('{"response": "cut'))
    failure = str(error(harness.converse(harness.backend(), "q")[0]))
    assert failure == (
        f"the agent at {agent.endpoint} answered HTTP 200 with a body that is not JSON "
        '(application/json): "{\\"response\\": \\"cut"'
    )


# --------------------------------------------------------------------------- errors


def test_401_is_fatal_and_quotes_no_header(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.require_headers = {"authorization": "Bearer other-token-xyz"}
    failure = error(harness.converse(harness.backend(), "q")[0])
    assert isinstance(failure, FatalBackendError)
    assert str(failure) == (
        f"the agent at {agent.endpoint} refused the request (HTTP 401: "
        '"{\\"error\\": \\"missing or wrong authorization header\\"}"); check agent.headers'
    )
    assert TOKEN not in str(failure)


@pytest.mark.parametrize(
    "failure",
    [
        Response(503, "busy", headers={"retry-after": "2"}, content_type="text/plain"),
        Response(429, {"error": "slow down"}, headers={"retry-after": "2"}),
        Response(500, {"error": "bug"}, headers={"retry-after": "2"}),
    ],
)
def test_transient_statuses_are_retried(
    harness: Harness, agent: FakeHttpAgent, failure: Response
) -> None:
    agent.script(failure, AgentReply("ok"))
    result = reply(harness.converse(harness.backend(), "q")[0])
    assert result.response == "ok"
    assert harness.clock.waits == [2.0]
    assert result.warnings[0].startswith(
        f"attempt 1 failed (the agent at {agent.endpoint} answered HTTP {failure.status}"
    )
    # the retry is the same turn: same session and turn index
    assert [r.body["turn_index"] for r in agent.requests] == [0, 0]
    assert agent.requests[0].body["session_id"] == agent.requests[1].body["session_id"]


def test_retries_are_capped(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(*[Response(502, "")] * 2, AgentReply("never"))
    failure = error(harness.converse(harness.backend("  retry: {max_attempts: 2}\n"), "q")[0])
    assert isinstance(failure, TransientError)
    assert str(failure) == (
        f"the agent at {agent.endpoint} answered HTTP 502: an empty body (gave up after 2 attempts)"
    )


def test_client_errors_fail_the_turn_without_retry(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(Response(422, {"detail": "input too long"}), AgentReply("ok"))
    first, second = harness.converse(harness.backend(), "q", "q2")
    assert str(error(first)) == (
        f'the agent at {agent.endpoint} answered HTTP 422: "{{\\"detail\\": \\"input too long\\"}}"'
    )
    assert harness.clock.waits == []
    assert reply(second).response == "ok"


def test_redirects_are_not_followed(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(Response(307, "", headers={"location": "https://example.test/v2?key=abc"}))
    failure = str(error(harness.converse(harness.backend(), "q")[0]))
    assert failure == (
        f"the agent at {agent.endpoint} answered HTTP 307, a redirect to https://example.test/v2; "
        "set agent.url to the final address (POSTs are not redirected)"
    )


def test_dropped_connection_is_retried(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(Drop(), AgentReply("ok"))
    result = reply(harness.converse(harness.backend(), "q")[0])
    assert result.response == "ok"
    assert f"the connection to the agent at {agent.endpoint} broke" in result.warnings[0]


def test_a_reply_slower_than_the_timeout(harness: Harness, agent: FakeHttpAgent) -> None:
    agent.script(Slow(30, AgentReply("late")), AgentReply("ok"))
    backend = harness.backend("  timeout: 0.3\n  retry: {max_attempts: 1}\n")
    first, second = harness.converse(backend, "q", "q2")
    assert str(error(first)) == f"the agent at {agent.endpoint} did not answer within 0.3 s"
    assert reply(second).response == "ok"


def test_unreachable_agent(harness: Harness, agent: FakeHttpAgent) -> None:
    backend = harness.backend("  retry: {max_attempts: 1}\n")
    agent.stop()
    failure = error(harness.converse(backend, "q")[0])
    assert str(failure).startswith(f"cannot connect to the agent at {agent.endpoint}")


def test_display_url_hides_credentials_and_query() -> None:
    assert (
        display_url("https://user:pw@agent.test:8443/v1/chat?key=abc#x")
        == "https://agent.test:8443/v1/chat"
    )


# --------------------------------------------------------------------- through the CLI

SUITE = """\
agent:
  backend: http
  url: ${AGENT_URL}
  headers: {Authorization: "Bearer ${AGENT_TOKEN}"}
test_cases:
  - name: memory
    turns:
      - {input: hello, ground_truth: "1: hello", expected_tools: [remember]}
      - {input: again, ground_truth: "2: again", expected_tools: [{name: remember, args: {turn: 1}}]}
evaluations:
  - {type: standard, metric: equality}
"""


def test_cli_run_against_the_fake_agent(project: Project, agent: FakeHttpAgent) -> None:
    agent.responder = remembering()
    project.write("suite.yaml", SUITE)
    result = project.run(
        "run", "suite.yaml", env={"AGENT_URL": agent.endpoint, "AGENT_TOKEN": TOKEN}
    )
    assert result.code == 0, result.out + result.err
    turns = result.report["results"][0]["turns"]
    assert [t["passed"] for t in turns] == [True, True]
    assert turns[1]["token_usage"]["prompt_tokens"] == 20


def test_cli_secret_echoed_by_the_agent_never_reaches_a_report(
    project: Project, agent: FakeHttpAgent
) -> None:
    agent.responder = lambda request: Response(400, {"error": f"bad token {TOKEN}"})
    project.write("suite.yaml", SUITE)
    result = project.run(
        "run", "suite.yaml", env={"AGENT_URL": agent.endpoint, "AGENT_TOKEN": TOKEN}
    )
    assert result.code == 1
    text = (result.report_dir / "report.json").read_text()
    assert "bad token ***" in text
    assert TOKEN not in text + result.out + result.err


def test_cli_wrong_token_exits_3(project: Project, agent: FakeHttpAgent) -> None:
    project.write("suite.yaml", SUITE)
    result = project.run(
        "run", "suite.yaml", env={"AGENT_URL": agent.endpoint, "AGENT_TOKEN": "wrong-token-123"}
    )
    assert result.code == 3, result.out + result.err
    assert "refused the request (HTTP 401" in result.report["run"]["stop_reason"]
    assert len(agent.requests) == 1
