"""Secrets given only through the environment never reach a report, the console, stderr,
the step summary or the PR comment, in any form an output can hold them.

The agents (the fake HTTP agent of ``tests/fakes/http_agent.py`` and the fake
Anthropic API of ``tests/fakes/anthropic_server.py``, driven by the real
clients) echo the secret back: in the reply, in a tool's arguments and
result, in a tool's error, in an error message of the backend, JSON-escaped
inside a JSON string (twice), HTML-escaped, inside Markdown emphasis and
URL-encoded. Every secret carries an alphanumeric core that no encoding
changes, so "the core appears nowhere" catches a leak in *any* encoding (a
test oracle independent of the :class:`Redactor`'s own list of forms).

Then the :class:`Redactor` itself, as a matrix of secrets x encodings, and the
last-resort traceback handler of ``cli.entry``.
"""

from __future__ import annotations

import html
import io
import json
import sys
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.reports.markdown import md_text
from multiturn_eval.run import RunOptions, run_suites
from multiturn_eval.secrets import REDACTED, Redactor, encoded_forms, secrets_in
from tests.cli_probe import repo_env, run_command
from tests.fakes._server import Request, Response
from tests.fakes.anthropic_server import ApiError, FakeAnthropic, request_key, text, tool_uses
from tests.fakes.github_api import FakeGitHub, Token, serve
from tests.fakes.http_agent import AgentReply, FakeHttpAgent

ROOT = Path(__file__).resolve().parent.parent
HEADER_CORE = "Zq7vKx9wPm"
#: an http header value from ``${AGENT_HEADER}`` (a variable whose *name* is not secret):
#: HTML specials, Markdown specials, URL-unsafe characters, a backslash and a quote
HEADER_SECRET = f"tok_{HEADER_CORE}*<&>\"'/ +\\end"
KEY_CORE = "Wm3pQ8rTz1"
ANTHROPIC_KEY = f"sk-ant-api03-{KEY_CORE}_x*y"

REPORT_FILES = ("report.json", "junit.xml", "summary.md", "report.html", "results.jsonl")


def leaks(text: str) -> list[str]:
    return [core for core in (HEADER_CORE, KEY_CORE) if core in text]


# ------------------------------------------------------------------ the echoing agents

ECHOES: dict[str, Callable[[str], Any]] = {
    "reply": lambda s: AgentReply(f"the header was {s}"),
    "tool-args": lambda s: AgentReply(
        "looked it up",
        tool_invocations=[
            {"name": "lookup", "args": {"auth": s, "deep": {"list": [s]}}, "result": {"echo": s}}
        ],
    ),
    "tool-error": lambda s: AgentReply(
        "the tool failed",
        tool_invocations=[{"name": "lookup", "args": {}, "error": f"PermissionError: {s} denied"}],
    ),
    "json-in-json": lambda s: AgentReply(json.dumps({"inner": json.dumps({"token": s})})),
    "html": lambda s: AgentReply(f"<b>{html.escape(s)}</b> {html.escape(s, quote=False)}"),
    "markdown": lambda s: AgentReply(f"**{s}** _{s}_ `{s}`"),
    "url": lambda s: AgentReply(
        f"https://x.example/?t={urllib.parse.quote(s, safe='')}&u={urllib.parse.quote_plus(s)}"
    ),
    "bad-shape": lambda s: Response(200, {"answer": s}),  # a backend error quoting the body
    "http-error": lambda s: Response(400, {"error": f"bad credential {s}"}),
}


def echo_header(request: Request) -> Any:
    secret = request.headers["x-session"]
    return ECHOES[request.body["input"]](secret)


HTTP_SUITE = """\
agent:
  backend: http
  url: ${AGENT_URL}
  headers:
    X-Session: ${AGENT_HEADER}
  retry: {max_attempts: 1}
evaluations: [{type: standard, metric: equality}]
test_cases:
"""


def http_suite(path: Path) -> Path:
    cases = "".join(
        f"  - {{name: {kind}, turns: [{{input: {kind}, ground_truth: nothing}}]}}\n"
        for kind in ECHOES
    )
    path.write_text(HTTP_SUITE + cases)
    return path


def anthropic_echo(request: Request) -> Any:
    messages = request.body["messages"]
    said = messages[0]["content"]
    said = said if isinstance(said, str) else said[0]["text"]
    key = request_key(request) or ""
    if "error" in said:
        return ApiError(400, "invalid_request_error", f"key {key} is not allowed here")
    if "tool" in said and len(messages) == 1:
        return tool_uses(("subtract", {"a": 1, "b": 2, "note": key}))
    return text(f"my key is {key} ({urllib.parse.quote(key)})")


ANTHROPIC_SUITE = """\
agent:
  backend: anthropic
  model: claude-haiku-4-5
  retry: {max_attempts: 1}
  tools:
    - function: tests.tool_funcs:subtract
evaluations: [{type: standard, metric: equality}]
test_cases:
  - {name: key-reply, turns: [{input: say your key, ground_truth: nothing}]}
  - {name: key-tool, turns: [{input: use a tool, ground_truth: nothing}]}
  - {name: key-error, turns: [{input: make an error, ground_truth: nothing}]}
"""


@pytest.fixture
def http_agent() -> Iterator[FakeHttpAgent]:
    with FakeHttpAgent(echo_header, require_headers={"X-Session": HEADER_SECRET}) as agent:
        yield agent


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(anthropic_echo, api_key=ANTHROPIC_KEY) as fake:
        yield fake


# ------------------------------------------------------------------ (a) run_suites


def test_secrets_from_the_environment_are_redacted_everywhere_run_suites_writes(
    tmp_path: Path,
    http_agent: FakeHttpAgent,
    anthropic: FakeAnthropic,
    capfd: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "anthropic.yaml").write_text(ANTHROPIC_SUITE)
    suites = [http_suite(tmp_path / "http.yaml"), tmp_path / "anthropic.yaml"]
    console = io.StringIO()
    env = {
        "AGENT_URL": http_agent.endpoint,
        "AGENT_HEADER": HEADER_SECRET,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "ANTHROPIC_BASE_URL": anthropic.url,
    }
    outcome = run_suites(
        [str(p) for p in suites],
        RunOptions(report_dir=str(tmp_path / "out"), parallel_test_cases=3, verbosity=1),
        env,
        stream=console,
    )
    assert outcome.exit_code == 1, console.getvalue()
    # the agents really got (and echoed) the secrets: every case reached its agent
    assert len(http_agent.requests) == len(ECHOES)
    assert len(anthropic.messages_requests()) == 4  # the tool case makes two calls
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    by_name = {r["name"]: r for r in report["results"]}
    assert by_name["reply"]["turns"][0]["response"] == f"the header was {REDACTED}"
    assert by_name["key-reply"]["turns"][0]["response"].startswith(f"my key is {REDACTED}")
    for name in ("bad-shape", "http-error", "key-error"):
        assert REDACTED in " ".join(by_name[name]["turns"][0]["errors"]), by_name[name]
    assert by_name["tool-args"]["turns"][0]["tool_invocations"][0]["args"]["auth"] == REDACTED
    for name in REPORT_FILES:
        content = (tmp_path / "out" / name).read_text(encoding="utf-8")
        assert REDACTED in content or name == "junit.xml", name
        assert leaks(content) == [], f"{name} holds a secret"
    assert leaks(console.getvalue()) == [], console.getvalue()
    assert leaks(outcome.markdown or "") == []
    captured = capfd.readouterr()
    assert leaks(captured.out + captured.err) == []


def test_an_internal_error_quoting_a_secret_is_redacted_in_reports_and_traceback(
    tmp_path: Path, http_agent: FakeHttpAgent
) -> None:
    suite = http_suite(tmp_path / "http.yaml")

    def on_result(result: Any) -> None:  # a bug in the caller's machinery, holding the secret
        raise RuntimeError(f"cannot store {result.turns[0].input}: {HEADER_SECRET}")

    console = io.StringIO()
    outcome = run_suites(
        [str(suite)],
        RunOptions(report_dir=str(tmp_path / "out")),
        {"AGENT_URL": http_agent.endpoint, "AGENT_HEADER": HEADER_SECRET},
        stream=console,
        on_result=on_result,
    )
    assert outcome.exit_code == 3
    assert outcome.internal_error is not None
    shown = outcome.redactor("".join(traceback.format_exception(outcome.internal_error)))
    assert "RuntimeError: cannot store" in shown and leaks(shown) == []
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run"]["complete"] is False
    assert report["run"]["stop_reason"].startswith("internal error: RuntimeError")
    for name in REPORT_FILES:
        assert leaks((tmp_path / "out" / name).read_text(encoding="utf-8")) == [], name
    assert leaks(console.getvalue()) == []


def test_the_last_resort_handler_of_cli_entry_redacts_environment_secrets(
    tmp_path: Path,
) -> None:
    program = (
        "import os, multiturn_eval.cli as cli\n"
        "def broken(*a, **k):\n"
        "    raise RuntimeError('crashed with ' + os.environ['MY_API_KEY'])\n"
        "cli.main = broken\n"
        "cli.entry()\n"
    )
    done = run_command(
        [sys.executable, "-c", program], tmp_path, repo_env(MY_API_KEY=ANTHROPIC_KEY), timeout=60
    )
    assert done.returncode == 3
    assert "RuntimeError: crashed with ***" in done.stderr, done.stderr
    assert leaks(done.stdout + done.stderr) == []


# ------------------------------------------------------------------ (b) the Action


def test_secrets_never_reach_the_actions_reports_log_summary_or_comment(
    tmp_path: Path, http_agent: FakeHttpAgent, anthropic: FakeAnthropic
) -> None:
    from tests.test_action_entrypoint import TOKEN, Runner

    fake = FakeGitHub(tokens={TOKEN: Token("github-actions[bot]", "bot", write=True)})
    with serve(fake) as github:
        runner = Runner(tmp_path, github)
        http_suite(runner.workspace / "evals" / "secret-http.yaml")
        (runner.workspace / "evals" / "secret-anthropic.yaml").write_text(ANTHROPIC_SUITE)
        # tests.tool_funcs must be importable from the workspace: copy it in
        (runner.workspace / "tests").mkdir()
        (runner.workspace / "tests" / "__init__.py").write_text("")
        (runner.workspace / "tests" / "tool_funcs.py").write_text(
            (ROOT / "tests" / "tool_funcs.py").read_text()
        )
        step = runner.run(
            {
                "suite": "evals/secret-*.yaml",
                "anthropic-api-key": ANTHROPIC_KEY,
            },
            env={
                "AGENT_URL": http_agent.endpoint,
                "AGENT_HEADER": HEADER_SECRET,
                "ANTHROPIC_BASE_URL": anthropic.url,
            },
        )
        bodies = [c["body"] for c in github.issue_comments("octo/calc", 7)]
    assert step.code == 1, step.log
    assert len(http_agent.requests) == len(ECHOES) and anthropic.messages_requests()
    report_dir = step.workspace / step.outputs["report-dir"]
    report = json.loads((report_dir / "report.json").read_text())
    assert report["summary"]["total"] == len(ECHOES) + 3
    for name in REPORT_FILES:
        assert leaks((report_dir / name).read_text(encoding="utf-8")) == [], name
    assert bodies and REDACTED in bodies[0] and leaks(bodies[0]) == []
    assert REDACTED in step.summary and leaks(step.summary) == []
    masked = [c.message for c in step.commands if c.name == "add-mask"]
    assert ANTHROPIC_KEY in masked  # the runner is told to mask the key input...
    log = "\n".join(line for line in step.log.splitlines() if not line.startswith("::add-mask::"))
    assert leaks(log) == [], log  # ...and nothing else in the log holds either secret


# ------------------------------------------------------------------ the Redactor matrix

SECRETS = {
    "plain": "sk-ant-api03-AbC123xyz",
    "html-special": "p<&>\"'w0rd-42",
    "markdown": "my_secret*key_99",
    "url-unsafe": "a/b+c d=e&f?g#h",
    "backslash-quote": 'back\\slash"quote\\n',
    "unicode": "clé-sécrète-ünï",
    "control": "tab\there\u2028line",
}


def _json(depth: int, ascii_only: bool) -> Callable[[str], str]:
    def encode(s: str) -> str:
        for _ in range(depth):
            s = json.dumps(s, ensure_ascii=ascii_only)[1:-1]
        return s

    return encode


FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda s: s,
    "json": _json(1, False),
    "json-ascii": _json(1, True),
    "json-in-json": _json(2, False),
    "json-in-json-in-json-ascii": _json(3, True),
    "html": lambda s: html.escape(s, quote=True),
    "html-no-quotes": lambda s: html.escape(s, quote=False),
    "html-&#39;": lambda s: html.escape(s).replace("&#x27;", "&#39;"),
    "json-of-html": lambda s: _json(1, True)(html.escape(s)),
    "markdown-renderer": md_text,
    "url-quote": lambda s: urllib.parse.quote(s, safe=""),
    "url-quote-path": urllib.parse.quote,
    "url-quote-plus": urllib.parse.quote_plus,
    "json-of-url": lambda s: _json(1, False)(urllib.parse.quote_plus(s)),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", SECRETS)
def test_the_redactor_replaces_every_encoding_of_every_secret(kind: str, form: str) -> None:
    secret = SECRETS[kind]
    encoded = FORMS[form](secret)
    redact = Redactor([secret])
    assert redact(f"before [{encoded}] after") == f"before [{REDACTED}] after"
    assert redact(encoded + encoded) == REDACTED * 2


@pytest.mark.parametrize(
    "text",
    ["", "nothing secret here", "sk-ant-api03-AbC123xy", "AbC123xyz", "sk-ant-api03-AbC123xyZ"],
)
def test_the_redactor_leaves_other_text_alone(text: str) -> None:
    assert Redactor([SECRETS["plain"]])(text) == text


def test_a_secret_holding_another_is_replaced_whole() -> None:
    redact = Redactor(["abcdef", "xxabcdefyy"])
    assert redact("1 xxabcdefyy 2 abcdef 3") == "1 *** 2 *** 3"
    assert Redactor().active is False and Redactor([""]).active is False
    assert Redactor(["abcdef"]).with_secrets(["abcdef"]).secrets == {"abcdef"}


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({"ANTHROPIC_API_KEY": "sk-123456"}, ["sk-123456"]),
        ({"GITHUB_TOKEN": "ghs_abcdef"}, ["ghs_abcdef"]),
        ({"DB_PASSWORD": "hunter22"}, ["hunter22"]),
        ({"my_secret": " padded-value "}, ["padded-value"]),
        ({"X_AUTH": "abcdefg", "HOME": "/root/home"}, ["abcdefg"]),
        ({"SESSION_COOKIE": "c00kie!"}, ["c00kie!"]),
        ({"API_KEY": "short"}, []),  # under six characters: would blank out words
        ({"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, []),
    ],
)
def test_secrets_in_picks_values_by_name_and_length(env: dict[str, str], found: list[str]) -> None:
    assert secrets_in(env) == found


def test_encoded_forms_include_the_secret_itself() -> None:
    for secret in SECRETS.values():
        forms = encoded_forms(secret)
        assert secret in forms and "" not in forms
