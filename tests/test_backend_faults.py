"""Backend faults: replies that are not what the API promises, and turns that must end on time.

Every model backend is driven through its real SDK (``anthropic``, ``openai``
under Semantic Kernel) against the fake servers of :mod:`tests.fakes`; the
``http`` backend through its own client. Two families:

* **malformed 200s** -- each is one turn error that says what is wrong and
  quotes a bounded, single-line excerpt; it is not retried, and the next turn
  is still sent on the same session;
* **time faults** (a 529 storm with ``retry-after``, headers that never come,
  a body dripping in, a huge body) -- run through the CLI, each ends its turn
  by ``turn_timeout``: the turn's error says why, the next turn is sent, the
  run exits 1 with every result in the report. Elapsed time is asserted only
  as a hang detector (``turn_timeout + 5 s``), never as a performance bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.reliability.backend_faults import agent_block

from multiturn_eval.backends.anthropic import AnthropicBackend
from multiturn_eval.backends.http import HttpBackend
from multiturn_eval.backends.semantic_kernel import SemanticKernelBackend
from multiturn_eval.backends.wire import MAX_ITEMS, MAX_REPLY_BYTES
from multiturn_eval.errors import BackendError, TransientError
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.types import TurnReply
from tests.backend_harness import Clock, converse
from tests.chat_flavors import AnthropicFlavor, Flavor, OpenAIFlavor
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.fakes import http_agent as fh
from tests.fakes import openai_server as fo
from tests.fakes._server import Drip, FakeServer, Huge, Request, Response, Slow

ANTHROPIC, OPENAI = AnthropicFlavor(), OpenAIFlavor()

CASES = """\
test_cases:
  - name: faulty
    turns:
      - input: first
      - input: second
"""

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}

HTML = "<html>\x1b[31m<head><title>502 Bad Gateway</title></head>\n\n<body>" + "x" * 5000


def changed(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``base`` with keys replaced (a value of ``...`` removes the key)."""
    out = {k: v for k, v in base.items() if changes.get(k) is not ...}
    out.update({k: v for k, v in changes.items() if v is not ...})
    return out


def choice(**changes: Any) -> dict[str, Any]:
    return changed(COMPLETION, choices=[changed(COMPLETION["choices"][0], **changes)])


def body(value: Any) -> Any:
    """A scripted reply: a JSON value as a 200, anything the fakes know as it is."""
    return Response(200, value) if isinstance(value, dict | list) else value


def check_turn_error(failure: TurnReply | BackendError, prefix: str, reason: str) -> str:
    assert isinstance(failure, BackendError), failure
    assert not isinstance(failure, TransientError)  # not retried
    assert failure.session_alive
    text = str(failure)
    assert text.startswith(prefix), text
    assert reason in text, text
    assert "\n" not in text and "\x1b" not in text and "Traceback" not in text
    quoted = text.split("): ", 1)[1] if "): " in text else '""'
    if quoted != "an empty body":
        assert len(json.loads(quoted)) <= 200  # the excerpt is bounded
    return text


def check_bad_then_fine(
    backend: Any,
    loaded: Any,
    prefix: str,
    reason: str,
    requests: Callable[[], list[Request]] | None = None,
) -> None:
    """Two turns against a fake scripted with a bad 200 then "fine": the first is a clean turn
    error (see check_turn_error), the second goes on; with ``requests``, the fake's requests
    of the model API: two (not retried), the second without a trace of the failed turn."""
    first, second = converse(backend, loaded, ("first", "second"))
    check_turn_error(first, prefix, reason)
    assert isinstance(second, TurnReply) and second.response == "fine"
    if requests is not None:
        assert len(requests()) == 2  # not retried
        # the failed turn left no trace in the history the next request carries
        assert [m["role"] for m in requests()[1].body["messages"]] == ["user"]


# ---------------------------------------------------------------------- anthropic

ANTHROPIC_BODIES = [
    (Response(200, HTML, content_type="text/html"), "not JSON"),
    ({"hello": "world"}, "no 'content'"),
    (changed(MESSAGE, content=None), "'content' is null"),
    (changed(MESSAGE, content="hi"), "'content' is string"),
    (changed(MESSAGE, usage=...), "no 'usage'"),
    (changed(MESSAGE, usage=None), "'usage' is null"),
    (changed(MESSAGE, usage={"input_tokens": "ten", "output_tokens": 1}), "usage.input_tokens"),
    (changed(MESSAGE, content=[{"type": "hologram", "data": 1}]), "unknown type 'hologram'"),
    (changed(MESSAGE, content=[{"text": "no type"}]), "content[0] has no 'type'"),
    (changed(MESSAGE, content=["hi"]), "content[0] is a JSON string"),
    (changed(MESSAGE, content=[{"type": "text", "text": None}]), "content[0] is a text block"),
    (
        changed(MESSAGE, content=[{"type": "tool_use", "id": "t", "name": "lookup"}]),
        "content[0] is a tool_use block whose 'input' is null",
    ),
    (changed(MESSAGE, stop_reason=7), "'stop_reason' is number"),
    (
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        "'type' is 'error'",
    ),
    (changed(MESSAGE, content=[{"type": "text", "text": ""}] * (MAX_ITEMS + 1)), "more than"),
    (Response(200, '{"id": "msg_1", "type": "message", "content": ['), "not JSON"),
    (Response(200, b'{"id": "\xff\xfe\xfa"}'), "the body is not UTF-8"),
    (Response(200, b""), "an empty body"),
    (Response(200, "   \n"), "an empty body"),
    (Response(200, "[1, 2, 3]"), "a JSON array, not a message object"),
    (Response(200, "null"), "a JSON null"),
    (Response(200, "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    (Response(200, b"x" * (MAX_REPLY_BYTES + 1)), "over the 10 MB cap"),
    (Huge(chunked=True), "larger than 10 MB"),
]


def backend_of(tmp_path: Path, agent: str, make: Callable[..., Any], **options: Any) -> Any:
    """The backend ``make(loaded, settings, sleep=..., **options)`` for a suite of ``agent``
    and CASES, on a clock that does not wait, and the loaded suite."""
    path = tmp_path / "suite.yaml"
    path.write_text(agent + CASES)
    loaded = load_suite(path, env={})
    return make(loaded, RunSettings(turn_timeout=20), sleep=Clock().sleep, **options), loaded


def anthropic_backend(tmp_path: Path, env: dict[str, str]) -> Any:
    agent = "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n"
    return backend_of(tmp_path, agent, AnthropicBackend, env=env)


def test_anthropic_the_excerpt_is_one_short_clean_line(
    tmp_path: Path, anthropic_fake: fa.FakeAnthropic
) -> None:
    anthropic_fake.script(Response(200, HTML, content_type="text/html"))
    backend, loaded = anthropic_backend(tmp_path, ANTHROPIC.env(anthropic_fake))
    (failure,) = converse(backend, loaded, ("first",))
    quoted = json.loads(str(failure).split("): ", 1)[1])
    assert quoted.startswith("<html> [31m<head><title>502 Bad Gateway</title></head> <body>xxx")
    assert len(quoted) == 200 and quoted.endswith("…")


def test_anthropic_a_known_non_text_block_is_kept_not_refused(
    tmp_path: Path, anthropic_fake: fa.FakeAnthropic
) -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    anthropic_fake.script(
        Response(200, changed(MESSAGE, content=[thinking, {"type": "text", "text": "42"}]))
    )
    backend, loaded = anthropic_backend(tmp_path, ANTHROPIC.env(anthropic_fake))
    (result,) = converse(backend, loaded, ("first",))
    assert isinstance(result, TurnReply) and result.response == "42"


# ----------------------------------------------------------------- semantic-kernel

SK_BODIES = [
    (Response(200, HTML, content_type="text/html"), "not JSON"),
    ({"hello": "world"}, "no 'choices'"),
    (changed(COMPLETION, choices=[]), "'choices' has 0 entries"),
    (changed(COMPLETION, choices=None), "'choices' is null"),
    (changed(COMPLETION, choices=COMPLETION["choices"] * 2), "'choices' has 2 entries"),
    (changed(COMPLETION, choices=[7]), "choices[0] is a JSON number"),
    (choice(message=None), "choices[0].message is null"),
    (choice(message=...), "choices[0].message is null"),
    (choice(message={"role": "assistant", "content": 42}), "message.content is number"),
    (choice(message={"role": "assistant", "content": None, "tool_calls": {}}), "tool_calls is"),
    (
        choice(message={"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}),
        "tool_calls[0] has no 'function' object",
    ),
    (
        choice(
            message={
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": 3}}],
            }
        ),
        "tool_calls[0].function.name is number",
    ),
    (choice(finish_reason=1), "choices[0].finish_reason is number"),
    (changed(COMPLETION, usage="lots"), "'usage' is string"),
    (changed(COMPLETION, usage={"prompt_tokens": "3"}), "usage.prompt_tokens is string"),
    (Response(200, '{"id": "chatcmpl-1", "choices": [{"index": 0, "mess'), "not JSON"),
    (Response(200, b'{"choices": "\xc3\x28"}'), "the body is not UTF-8"),
    (Response(200, b""), "an empty body"),
    (Response(200, "[]"), "a JSON array, not a chat completion object"),
    (Response(200, b"x" * (MAX_REPLY_BYTES + 1)), "over the 10 MB cap"),
    (Huge(chunked=True), "larger than 10 MB"),
]


def sk_backend(tmp_path: Path, env: dict[str, str], service: str = "openai") -> Any:
    model = "claude-haiku-4-5" if service == "anthropic" else "gpt-4o-mini"
    agent = f"agent:\n  backend: semantic-kernel\n  service: {service}\n  model: {model}\n"
    return backend_of(tmp_path, agent, SemanticKernelBackend, env=env)


#: a backend, the service its fake stands for, and the 200s tried that are not its replies
NOT_THE_SERVICES_REPLY = [
    ("anthropic", ANTHROPIC, ANTHROPIC_BODIES),
    ("semantic-kernel", OPENAI, SK_BODIES),
    ("semantic-kernel", ANTHROPIC, ANTHROPIC_BODIES[:8] + ANTHROPIC_BODIES[15:19]),
]


@pytest.mark.parametrize(
    ("backend", "service", "reply", "reason"),
    [
        pytest.param(backend, service, *bad, id=f"{backend}-{service}-{n}")
        for backend, service, bodies in NOT_THE_SERVICES_REPLY
        for n, bad in enumerate(bodies)
    ],
)
def test_a_200_that_is_not_the_services_reply_is_a_turn_error(
    tmp_path: Path, backend: str, service: Flavor, reply: Any, reason: str
) -> None:
    with service.server() as fake:
        fake.script(body(reply), service.text("fine"))
        env = service.env(fake)
        if backend == "anthropic":
            made, loaded = anthropic_backend(tmp_path, env)
        else:
            made, loaded = sk_backend(tmp_path, env, service.name)
        prefix = service.bad_reply_error(service.url(fake))
        check_bad_then_fine(made, loaded, prefix, reason, lambda: service.requests(fake))


# --------------------------------------------------------------------------- http

HTTP_BODIES = [
    (
        Response(200, HTML, content_type="text/html"),
        "answered HTTP 200 with a body that is not JSON",
    ),
    (Response(200, b'{"response": "\xff"}'), "answered HTTP 200 with a body that is not JSON"),
    (
        Response(200, b""),
        "answered HTTP 200 with a body that is not JSON (application/json): an empty body",
    ),
    (Response(200, "[" * 100_000 + "]" * 100_000), "with a body that is not JSON"),
    (Response(200, '"just a string"'), "answered with a JSON string, not an object"),
    ({"response": None}, "answered with 'response' as a JSON null, not a string"),
    ({"response": ["a"]}, "answered with 'response' as a JSON array, not a string"),
    ({"response": {"text": "a"}}, "answered with 'response' as a JSON object"),
    (
        {"response": "x", "tool_invocations": "calc"},
        "malformed tool_invocations: must be a JSON array",
    ),
    ({"response": "x", "tool_invocations": [1, 2]}, "malformed tool_invocations[0]"),
    ({"response": "x", "tool_invocations": [["calc"]]}, "malformed tool_invocations[0]"),
    (
        {"response": "x", "tool_invocations": [{"name": "t", "args": "a=1"}]},
        "malformed tool_invocations[0].args",
    ),
    (
        {"response": "x", "tool_invocations": [{"name": "t"}] * (MAX_ITEMS + 1)},
        f"more than the {MAX_ITEMS} accepted",
    ),
    ({"response": "x", "token_usage": "lots"}, "malformed token_usage"),
    ({"response": "x", "token_usage": [1, 2]}, "malformed token_usage"),
    (
        {"response": "x", "token_usage": {"prompt_tokens": "ten"}},
        "malformed token_usage.prompt_tokens: Input should be a valid integer",
    ),
    (
        {"response": "x", "cost_usd": "0.01"},
        "malformed cost_usd: must be a number, got a JSON string",
    ),
    (
        {"response": "x", "cost_usd": True},
        "malformed cost_usd: must be a number, got a JSON boolean",
    ),
    (
        Response(200, '{"response": "x", "cost_usd": NaN}'),
        "malformed cost_usd: must be a finite number",
    ),
    ({"response": "x", "cost_usd": -1}, "malformed cost_usd: must be a finite number >= 0"),
    ({"response": "x", "warnings": "careful"}, "malformed warnings: must be a JSON array"),
    (
        Response(200, b"x" * (MAX_REPLY_BYTES + 1)),
        "answered with a body too large to read (the body is 10.0 MB, over the 10 MB cap",
    ),
    (Huge(), "answered with a body too large to read (the body is 50 MB, over the 10 MB cap"),
    (Huge(chunked=True), "answered with a body too large to read (the body is larger than 10 MB"),
]


@pytest.fixture
def http_fake() -> Iterator[fh.FakeHttpAgent]:
    with fh.FakeHttpAgent() as server:
        yield server


@pytest.mark.parametrize(("reply", "message"), HTTP_BODIES)
def test_http_a_reply_of_the_wrong_shape_is_a_turn_error(
    tmp_path: Path, http_fake: fh.FakeHttpAgent, reply: Any, message: str
) -> None:
    http_fake.script(body(reply), fh.AgentReply("fine"))
    agent = f"agent:\n  backend: http\n  url: {http_fake.endpoint}\n"
    backend, loaded = backend_of(tmp_path, agent, HttpBackend)
    first, second = converse(backend, loaded, ("first", "second"))
    assert isinstance(first, BackendError), first
    assert not isinstance(first, TransientError) and first.session_alive
    text = str(first)
    assert text.startswith(f"the agent at {http_fake.endpoint} "), text
    assert message in text, text
    assert "\n" not in text and len(text) < 600
    assert isinstance(second, TurnReply) and second.response == "fine"
    assert [r.body["turn_index"] for r in http_fake.requests] == [0, 1]  # not retried


# -------------------------------------------------------- time faults, through the CLI

TURN_TIMEOUT = 1.5


def storm(kind: str) -> list[Any]:
    """529s with retry-after: 1, more than any turn can retry."""
    one = {
        "anthropic": fa.ApiError(529, "overloaded_error", "Overloaded", {"retry-after": "1"}),
        "semantic-kernel": fo.ErrorReply(529, "Overloaded", headers={"retry-after": "1"}),
        "http": Response(529, "busy", headers={"retry-after": "1"}, content_type="text/plain"),
    }[kind]
    return [one] * 8


TIME_FAULTS: dict[str, tuple[Any, str]] = {
    "storm": (None, "gave up after 2 attempts, waiting 1.00 s more would run past the turn's"),
    "slow headers": (Slow(60), f"timed out after {TURN_TIMEOUT:g} s (turn_timeout)"),
    "slow drip": (
        Drip(chunk=4, interval=0.2),
        f"timed out after {TURN_TIMEOUT:g} s (turn_timeout)",
    ),
    "huge slow body": (
        Huge(interval=0.05, chunked=True),
        f"timed out after {TURN_TIMEOUT:g} s (turn_timeout)",
    ),
}


def serve(kind: str) -> FakeServer:
    if kind == "anthropic":
        return fa.FakeAnthropic(lambda request: fa.text("fine"))
    if kind == "semantic-kernel":
        return fo.FakeOpenAI(lambda request: fo.text("fine"))
    return fh.FakeHttpAgent(lambda request: fh.AgentReply("fine"))


@pytest.mark.parametrize("fault", list(TIME_FAULTS))
@pytest.mark.parametrize("kind", ["anthropic", "semantic-kernel", "http"])
def test_a_time_fault_ends_the_turn_by_its_timeout_and_the_next_turn_is_sent(
    project: Project, kind: str, fault: str
) -> None:
    reply, expected = TIME_FAULTS[fault]
    with serve(kind) as server:
        if fault == "storm":
            server.script(*storm(kind))
        else:
            server.script(reply)
        project.write(
            "suite.yaml",
            "agent:\n" + agent_block(kind, server) + "  retry: {max_attempts: 10}\n" + CASES,
        )
        env = {"ANTHROPIC_API_KEY": fa.API_KEY, "OPENAI_API_KEY": fo.API_KEY}
        started = time.monotonic()
        result = project.run("run", "suite.yaml", "--turn-timeout", str(TURN_TIMEOUT), env=env)
        elapsed = time.monotonic() - started
    assert result.code == 1, result.out + result.err
    assert "Traceback" not in result.out + result.err
    turns = result.report["results"][0]["turns"]
    assert expected in turns[0]["errors"][0], turns[0]["errors"]
    assert f"{TURN_TIMEOUT:g} s turn_timeout" in turns[0]["errors"][0] or fault != "storm"
    assert turns[0]["duration_ms"] < (TURN_TIMEOUT + 5) * 1000  # hang detector only
    if fault == "storm":  # the storm goes on: the second turn gives up the same way
        assert expected in turns[1]["errors"][0]
    else:
        assert turns[1]["response"] == "fine" and turns[1]["errors"] == []
    assert elapsed < 2 * TURN_TIMEOUT + 30  # hang detector only (imports included)


# ------------------------------------------------------------------ the harness


def test_the_fault_harness_quick_run_finds_nothing_escaping() -> None:
    """``bench/reliability/backend_faults.py --quick``: every count in its table is 0."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "reliability" / "backend_faults.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [
        line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len(rows) == 1 + 3 * 5  # header + every backend x family
    for row in rows[1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == "2" and cells[3:7] == ["0", "0", "0", "0"], row
