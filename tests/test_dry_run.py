"""``run --dry-run``: the plan printed, nothing called, nothing written, exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import agents
from tests.conftest import Project
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic

ANTHROPIC = """\
agent:
  backend: anthropic
  model: claude-sonnet-4-5
  max_tokens: 1000
  tools:
    - function: tests.tool_funcs:subtract
  max_tool_rounds: 4
test_cases:
  - {name: a, turns: [{input: one}, {input: two}, {input: three}]}
  - {name: b, input: single}
"""

PYTHON = """\
agent: {backend: python, factory: "recorder:factory"}
test_cases:
  - {name: x, turns: [{input: one}, {input: two}]}
  - {name: y, turns: [{input: one}]}
  - {name: z, turns: [{input: one}]}
"""

RECORDER = """\
import pathlib

pathlib.Path("imported.txt").write_text("imported")  # importing is part of loading


def factory(context):
    pathlib.Path("factory-called.txt").write_text("called")
    raise AssertionError("a dry run must not call the factory")
"""


@pytest.fixture
def both(project: Project, anthropic_fake: FakeAnthropic) -> Project:
    project.env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": anthropic_fake.url}
    project.write("model.yaml", ANTHROPIC)
    project.write("mine.yaml", PYTHON)
    project.write("recorder.py", RECORDER)
    return project


def test_prints_cases_turns_and_calls_and_calls_nothing(
    both: Project, anthropic_fake: FakeAnthropic
) -> None:
    result = both.run("run", "model.yaml", "mine.yaml", "--dry-run")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("multiturn-eval: dry run: no agent, tool or grader is called")
    assert "model.yaml (anthropic, claude-sonnet-4-5): 2 test cases, 4 turns" in lines
    # every turn is at least one call; with tools up to max_tool_rounds + 1
    assert "  anthropic calls: 4 to 20 (tool rounds)" in lines
    # 20 calls x 1,000 max_tokens x $15 per million output tokens
    assert (
        "  output-token bound: $0.30 (max_tokens x output price on every call; input tokens not counted)"
        in lines
    )
    assert "mine.yaml (python): 3 test cases, 4 turns" in lines
    assert "  python calls: 4" in lines
    assert lines[-1] == (
        "total: 5 test cases, 8 turns; calls per backend: anthropic 4-20, python 4"
    )
    assert anthropic_fake.requests == []
    assert not (both.root / "factory-called.txt").exists()
    assert not (both.root / "out").exists()  # no report, not even the directory
    assert agents.OPENED == []


@pytest.mark.parametrize(
    ("cap", "verdict"),
    [("1", "the cap leaves headroom over that bound"), ("0.10", "the run may reach the cap")],
)
def test_shows_the_spend_caps_headroom(both: Project, cap: str, verdict: str) -> None:
    result = both.run("run", "model.yaml", "--dry-run", "--max-cost", cap)
    assert result.code == 0, result.err
    last = result.out.splitlines()[-1]
    assert last.startswith(f"spend cap: ${float(cap):,.2f}; rough output-token bound $0.30: ")
    assert verdict in last


def test_a_python_agent_under_a_cap_claims_no_bound_and_no_headroom(both: Project) -> None:
    result = both.run("run", "mine.yaml", "--dry-run", "--max-cost", "1")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "  output-token bound: none (a python agent's spend is the cost_usd it reports)" in lines
    assert lines[-1] == (
        "spend cap: $1.00; no bound for mine.yaml (a python agent's spend is the cost_usd it "
        "reports), so the headroom is unknown"
    )
    assert "$0.00" not in result.out and "leaves headroom" not in result.out


def test_with_a_model_and_a_python_agent_the_bound_is_said_for_the_model_only(
    both: Project,
) -> None:
    result = both.run("run", "model.yaml", "mine.yaml", "--dry-run", "--max-cost", "1")
    assert result.out.splitlines()[-1] == (
        "spend cap: $1.00; rough output-token bound $0.30 for model.yaml; no bound for "
        "mine.yaml (a python agent's spend is the cost_usd it reports), so the headroom is unknown"
    )


def test_verbose_lists_the_selected_test_cases(both: Project) -> None:
    both.write("mine.yaml", PYTHON.replace("{name: y,", "{name: y, tags: [smoke, slow],"))
    result = both.run("run", "model.yaml", "mine.yaml", "--dry-run", "-v", "-k", "[abxy]")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    start = lines.index("mine.yaml (python): 2 test cases, 3 turns")
    assert lines[start + 1 : start + 5] == [
        "  python calls: 3",
        "  test cases:",
        "    x (line 3): 2 turns",
        "    y (line 4): 1 turn, tags: smoke, slow",
    ]
    assert "    a (line 9): 3 turns" in lines and "    b (line 10): 1 turn" in lines
    quiet = both.run("run", "model.yaml", "mine.yaml", "--dry-run")
    assert "  test cases:" not in quiet.out


def test_follows_the_shard_and_the_selection(both: Project) -> None:
    shown = []
    for number in (1, 2):
        result = both.run("run", "mine.yaml", "--dry-run", "--shard", f"{number}/2")
        assert result.code == 0
        assert f"shard {number}/2 (split " in result.out
        line = next(t for t in result.out.splitlines() if t.startswith("mine.yaml"))
        shown.append(int(line.split(": ")[1].split(" ")[0]))
    assert sum(shown) == 3
    result = both.run("run", "mine.yaml", "--dry-run", "-k", "x")
    assert "mine.yaml (python): 1 test case, 2 turns" in result.out


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        (
            "agent: {backend: python, factory: 'nowhere:factory'}\ntest_cases: [{input: a}]\n",
            "nowhere",
        ),
        (
            "agent: {backend: anthropic, model: claude-x-1}\ntest_cases: [{input: a}]\n",
            "no known price",
        ),
        ("agent: {backend: python, factory: 'recorder:factory'}\ntest_cases: []\n", "is empty"),
    ],
)
def test_configuration_errors_are_still_exit_2(both: Project, suite: str, message: str) -> None:
    both.write("bad.yaml", suite)
    result = both.run("run", "bad.yaml", "--dry-run", "--max-cost", "1")
    assert result.code == 2
    assert message in result.err
    assert not Path(both.root / "out").exists()
