"""The Action's ``repeat`` input: validated like the others, and end to end through ``entrypoint.sh``.

The end-to-end tests use the entrypoint tests' machinery (a copy of the sample
workspace, the runner's ``INPUT_*`` variables, a fake GitHub API) with a coin
agent written into the workspace: its second turn is wrong in every second
session of a test case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from multiturn_eval.errors import InputError
from multiturn_eval.github.inputs import read_inputs
from tests.fakes.github_api import FakeGitHub
from tests.test_action_entrypoint import Runner, Step, comments, github, runner

__all__ = ["github", "runner"]  # the fixtures, used by name

COIN = '''\
"""Turn 2 is wrong in every second session of a test case (sessions counted per case)."""

SESSIONS: dict[str, int] = {}


class Coin:
    def __init__(self, name: str) -> None:
        self.number = SESSIONS.get(name, 0)
        SESSIONS[name] = self.number + 1
        self.turn = 0

    def send(self, message: str) -> str:
        self.turn += 1
        if self.turn == 2 and self.number % 2 == 1:
            return "-1"
        return str(self.turn)


def make_session(ctx):
    return Coin(ctx.test_case_name)
'''

SUITE = """\
name: coin
agent:
  backend: python
  factory: agents.coin:make_session
evaluations:
  - type: standard
    metric: numeric
{execution}test_cases:
  - name: toss
    turns:
      - input: first
        ground_truth: "1"
      - input: second
        ground_truth: "2"
"""


def _ws(tmp_path: Path) -> Path:
    (tmp_path / "evals").mkdir()
    return tmp_path


@pytest.mark.parametrize("value", ["0", "-2", "1025", "two", "2.5", "1e3"])
def test_a_bad_repeat_input_is_named(tmp_path: Path, value: str) -> None:
    with pytest.raises(InputError) as caught:
        read_inputs({"INPUT_SUITE": "a.yaml", "INPUT_REPEAT": value}, _ws(tmp_path))
    [problem] = caught.value.problems
    assert f"input 'repeat': {value!r} is not a whole number from 1 to 1024" in str(problem)


@pytest.mark.parametrize(("value", "repeat"), [("", None), (" 3 ", 3), ("1024", 1024)])
def test_the_repeat_input(tmp_path: Path, value: str, repeat: int | None) -> None:
    inputs = read_inputs({"INPUT_SUITE": "a.yaml", "INPUT_REPEAT": value}, _ws(tmp_path))
    assert inputs.repeat == repeat


def _coin_step(runner: Runner, repeat: str, execution: str = "") -> Step:
    """The Action's step on the coin suite (``execution``: its block) with ``repeat``."""
    (runner.workspace / "agents" / "coin.py").write_text(COIN, encoding="utf-8")
    (runner.workspace / "evals" / "coin.yaml").write_text(
        SUITE.format(execution=execution), encoding="utf-8"
    )
    return runner.run({"suite": "evals/coin.yaml", "repeat": repeat})


def test_repeat_input_end_to_end_fails_a_flaky_case_at_its_varying_turn(
    runner: Runner, github: FakeGitHub
) -> None:
    step = _coin_step(runner, "4")
    assert step.code == 1, step.log
    assert (step.outputs["total"], step.outputs["passed"], step.outputs["failed"]) == (
        "1",
        "0",
        "1",
    )
    report = json.loads((runner.workspace / step.outputs["json-report"]).read_text())
    [case] = report["results"]
    assert case["repeat"]["runs"] == 4 and case["repeat"]["passes"] == 2
    assert case["repeat"]["varying_turns"] == [1]
    [error] = step.annotations("error")
    assert error.properties["file"] == "evals/coin.yaml"
    assert error.properties["line"] == "13"  # the varying turn's line
    assert "2/4 runs passed" in error.message and "turn 2 passed 2 of 4" in error.message
    assert "#### Flaky" in step.summary and "turn 2 passed 2 of 4" in step.summary
    [comment] = comments(github)
    assert "pass^4" in comment["body"]


def test_repeat_input_end_to_end_a_flaky_case_within_the_gate_passes_with_a_warning(
    runner: Runner, github: FakeGitHub
) -> None:
    step = _coin_step(runner, "4", "execution:\n  min_pass_rate: 0.5\n")
    assert step.code == 0, step.log
    assert step.outputs["passed"] == "1"
    assert step.annotations("error") == []
    [warning] = [w for w in step.annotations("warning") if "flaky" in w.properties.get("title", "")]
    assert warning.properties["title"] == "coin › toss › turn 2 (flaky)"
    assert (warning.properties["file"], warning.properties["line"]) == ("evals/coin.yaml", "15")
    assert "turn 2 passed 2 of 4" in warning.message
    assert "#### Flaky" in step.summary


def test_a_bad_repeat_input_fails_the_step_before_any_agent_call(
    runner: Runner, github: FakeGitHub
) -> None:
    step = _coin_step(runner, "zero")
    assert step.code == 2, step.log
    assert any("repeat" in e.message for e in step.annotations("error")), step.log
    assert not (runner.workspace / "multiturn-eval-report" / "report.json").exists()
