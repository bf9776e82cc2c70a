"""Live smoke test against the real Anthropic API.

Runs only when asked for and a key is there::

    ANTHROPIC_API_KEY=sk-ant-... .venv/bin/python -m pytest -m live tests/test_live.py

``MULTITURN_EVAL_LIVE_MODEL`` picks the model (default ``claude-haiku-4-5``,
the cheapest current one; the run costs a fraction of a cent). The default
``pytest`` options exclude the ``live`` marker, so CI never calls the API.
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import Project

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY is not set"
    ),
]

MODEL = os.environ.get("MULTITURN_EVAL_LIVE_MODEL", "claude-haiku-4-5")

SUITE = f"""\
agent:
  backend: anthropic
  model: {MODEL}
  max_tokens: 300
  prompt_caching: true
  instructions: |
    You are a calculator assistant. Always use the tools for arithmetic and
    answer with the number only.
  tools:
    - function: tests.tool_funcs:subtract
    - function: tests.tool_funcs:divide
evaluations:
  - {{type: standard, metric: numeric, absolute_tolerance: 0.01, accept_thousands_separators: true}}
test_cases:
  - name: live-two-turns
    turns:
      - input: What is 206588 minus 181001?
        ground_truth: "25587"
        expected_tools:
          - {{name: subtract, args: {{a: {{fuzzy: "206588"}}, b: {{fuzzy: "181001"}}}}}}
      - input: Now divide that result by 3.
        ground_truth: "8529"
        expected_tools: [divide]
"""


def test_live_two_turn_conversation_with_tools(project: Project) -> None:
    project.write("suite.yaml", SUITE)
    result = project.run("run", "suite.yaml", "--turn-timeout", "120")
    assert result.code == 0, result.out + result.err
    case = result.report["results"][0]
    assert [t["passed"] for t in case["turns"]] == [True, True]
    for turn in case["turns"]:
        assert turn["token_usage"]["prompt_tokens"] > 0
        assert turn["token_usage"]["completion_tokens"] > 0
    assert case["cost_usd"] is not None and case["cost_usd"] > 0


def test_live_claude_plays_the_support_examples_customer(project: Project) -> None:
    """``examples/support/suite-simulated-claude.yaml``: Claude as the simulated customer."""
    from pathlib import Path

    suite = (
        Path(__file__).resolve().parents[1] / "examples" / "support" / "suite-simulated-claude.yaml"
    )
    result = project.run("run", str(suite), "--turn-timeout", "120", "-p", "4")
    assert result.code in (0, 1), result.out + result.err  # a model may play it differently
    for case in result.report["results"]:
        simulation = case["simulation"]
        assert simulation["simulator"]["backend"] == "anthropic"
        assert simulation["user_token_usage"]["total_tokens"] > 0
        assert simulation["outcome"] != "invalid_simulation" or simulation.get("fidelity")
    assert result.report["summary"]["user_cost_usd"] > 0
