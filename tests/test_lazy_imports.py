"""Heavy SDKs are imported only by the backend that needs them (SPEC 2).

Each check runs the real CLI in a fresh interpreter and looks at ``sys.modules``
afterwards: ``validate`` and ``schema`` (whatever the backend) and a run on the
``python`` backend must not import ``anthropic``, ``semantic_kernel`` or
``openai``; a run on the ``anthropic`` backend does import ``anthropic`` (so
the check can fail), and one on the ``openai`` backend imports ``openai`` alone.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.cli_probe import run_probe

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
