"""Heavy SDKs are imported only by the backend that needs them (SPEC 2).

Each check runs the real CLI in a fresh interpreter and looks at ``sys.modules``
afterwards: ``validate`` and ``schema`` (whatever the backend) and a run on the
``python`` backend must not import ``anthropic``, ``semantic_kernel`` or
``openai``; a run on the ``anthropic`` backend does import ``anthropic`` (so
the check can fail), and one on the ``openai`` backend imports ``openai`` alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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

PYTHON_SUITE = """\
agent:
  backend: python
  factory: tests.agents:scripted
  tools:
    - function: tests.tool_funcs:subtract
test_cases:
  - input: hello
"""

ANTHROPIC_SUITE = """\
agent:
  backend: anthropic
  model: claude-haiku-4-5
  retry: {max_attempts: 1}
  tools:
    - function: tests.tool_funcs:subtract
test_cases:
  - input: hello
"""

OPENAI_SUITE = """\
agent:
  backend: openai
  model: gpt-5-mini
  retry: {max_attempts: 1}
  tools:
    - function: tests.tool_funcs:subtract
test_cases:
  - input: hello
"""

SK_SUITE = """\
agent:
  backend: semantic-kernel
  service: openai
  model: gpt-4o-mini
test_cases:
  - input: hello
"""


def probe(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> dict[str, object]:
    for name, text in (
        ("python.yaml", PYTHON_SUITE),
        ("anthropic.yaml", ANTHROPIC_SUITE),
        ("sk.yaml", SK_SUITE),
        ("openai.yaml", OPENAI_SUITE),
    ):
        (tmp_path / name).write_text(text)
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_", "MULTITURN_EVAL_"))
    }
    full_env["PYTHONPATH"] = str(ROOT)
    full_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, object] = json.loads(line[len("PROBE ") :])
    return result


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
