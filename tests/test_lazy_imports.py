"""Heavy SDKs are imported only by the backend that needs them (SPEC 2).

Each check runs the real CLI in a fresh interpreter and looks at ``sys.modules``
afterwards: ``validate`` and ``schema`` (whatever the backend) and a run on the
``python`` backend must not import ``anthropic``, ``semantic_kernel`` or
``openai``; a run on the ``anthropic`` backend does import ``anthropic`` (so
the check can fail), and one on the ``openai`` backend imports ``openai`` alone.

A replay imports no SDK at all: a suite of the ``anthropic`` or ``openai`` backend (tools
and an LLM judge included), recorded against the fake server, then replayed with the
server stopped and no key, never imports ``anthropic`` or ``openai`` (the fixtures answer
every call; the SDK is imported, and its client built, for the first live request only),
while the recording run of the same suite does (the counter-check).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.cli_probe import run_probe
from tests.fakes import anthropic_server as fa
from tests.fakes import openai_server as fo
from tests.fakes._server import Request

HEAVY = ("anthropic", "semantic_kernel", "openai")

PROBE = textwrap.dedent(
    """
    import json, sys
    from multiturn_eval.cli import main
    code = main(sys.argv[1:])
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
    print("\\nPROBE " + json.dumps({{"code": code, "heavy": sorted({{m.split(".")[0] for m in heavy}})}}))
    """
).format(heavy=set(HEAVY))

#: the python, anthropic and openai suites offer a Python tool; each has one test case
TOOL = "  tools:\n    - function: tests.tool_funcs:subtract\n"
CASE = "test_cases:\n  - input: hello\n"
RETRY = "  retry: {max_attempts: 1}\n"

PYTHON_SUITE = "agent:\n  backend: python\n  factory: tests.agents:scripted\n" + TOOL + CASE
ANTHROPIC_SUITE = "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n" + RETRY + TOOL + CASE
OPENAI_SUITE = "agent:\n  backend: openai\n  model: gpt-5-mini\n" + RETRY + TOOL + CASE
SK_SUITE = "agent:\n  backend: semantic-kernel\n  service: openai\n  model: gpt-4o-mini\n" + CASE


def probe(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> dict[str, object]:
    for name, text in (
        ("python.yaml", PYTHON_SUITE),
        ("anthropic.yaml", ANTHROPIC_SUITE),
        ("sk.yaml", SK_SUITE),
        ("openai.yaml", OPENAI_SUITE),
    ):
        (tmp_path / name).write_text(text)
    return run_probe(PROBE, tmp_path, argv, env)


@pytest.mark.parametrize("suite", ["python.yaml", "anthropic.yaml", "sk.yaml", "openai.yaml"])
def test_validate_imports_no_sdk(tmp_path: Path, suite: str) -> None:
    assert probe(tmp_path, "validate", suite) == {"code": 0, "heavy": []}


@pytest.mark.parametrize("kind", ["suite", "report"])
def test_schema_imports_no_sdk(tmp_path: Path, kind: str) -> None:
    assert probe(tmp_path, "schema", kind) == {"code": 0, "heavy": []}


def test_python_backend_run_imports_no_sdk(tmp_path: Path) -> None:
    assert probe(tmp_path, "run", "python.yaml", "-o", "out") == {"code": 0, "heavy": []}


def test_anthropic_backend_run_imports_anthropic(tmp_path: Path) -> None:
    """The counter-check: the probe does see an SDK when one is used."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    result = probe(tmp_path, "run", "anthropic.yaml", "-o", "out", "--turn-timeout", "5", env=env)
    assert "anthropic" in result["heavy"]  # type: ignore[operator]
    assert "semantic_kernel" not in result["heavy"]  # type: ignore[operator]


def test_openai_backend_run_imports_openai_only(tmp_path: Path) -> None:
    """The lean backend brings the openai SDK, not Semantic Kernel or anthropic."""
    env = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    result = probe(tmp_path, "run", "openai.yaml", "-o", "out", "--turn-timeout", "5", env=env)
    assert result["heavy"] == ["openai"]


REPLAYED_SUITE = """\
agent:
  backend: {backend}
  model: {model}
  retry: {{max_attempts: 1}}
  tools:
    - function: tests.tool_funcs:subtract
judge: {{backend: {backend}, model: {model}}}
test_cases:
  - name: greeting
    turns:
      - input: hello
        evaluations:
          - {{type: judge, name: polite, rubric: The reply is polite.}}
      - input: and again
"""


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_a_replayed_suite_imports_no_sdk(tmp_path: Path, backend: str) -> None:
    """Recorded with the SDK (the agent's calls and the judge's), replayed without it."""
    server: fa.FakeAnthropic | fo.FakeOpenAI
    if backend == "anthropic":
        model = "claude-haiku-4-5"

        def answer(request: Request) -> fa.Message:
            if (request.body.get("tool_choice") or {}).get("type") == "tool":
                return fa.verdict(verdict="pass", reason="Polite.")
            return fa.echo(request)

        server = fa.FakeAnthropic(answer)
    else:
        model = "gpt-5-mini"

        def chat(request: Request) -> fo.Completion:
            if "response_format" in request.body:
                return fo.text('{"verdict": "pass", "reason": "Polite."}')
            return fo.echo(request)

        server = fo.FakeOpenAI(chat)
    (tmp_path / "replayed.yaml").write_text(REPLAYED_SUITE.format(backend=backend, model=model))
    argv = ("run", "replayed.yaml", "-o", "out", "--turn-timeout", "20", "--fixtures")
    with server as fake:
        live = (
            {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}
            if isinstance(fake, fa.FakeAnthropic)
            else {"OPENAI_API_KEY": fo.API_KEY, "OPENAI_BASE_URL": fake.base_url}
        )
        recorded = probe(tmp_path, *argv, "record", env=live)
    assert recorded == {"code": 0, "heavy": [backend]}
    no_key = {k: v for k, v in live.items() if "KEY" not in k}  # the server is stopped
    assert probe(tmp_path, *argv, "replay", env=no_key) == {"code": 0, "heavy": []}
