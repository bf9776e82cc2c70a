"""A number written where the suite takes text is compared as written (``1.10``, ``007``)."""

from __future__ import annotations

import copy
import math
import pickle

import pytest

from multiturn_eval.scalars import WrittenFloat, WrittenInt, number_text, written_number
from multiturn_eval.yaml_source import parse_yaml
from tests import agents
from tests.conftest import Project


@pytest.mark.parametrize(
    ("yaml", "text", "value"),
    [
        ("1.10", "1.10", 1.1),
        ("007", "007", 7),
        ("010", "010", 8),  # YAML 1.1 reads a leading zero as octal; the text stays "010"
        ("+5", "+5", 5),
        ("1_000", "1_000", 1000),
        ("0x1F", "0x1F", 31),
        ("1.0e+3", "1.0e+3", 1000.0),
        (".5", ".5", 0.5),
        ("-0.0", "-0.0", -0.0),
        ("!!float 2", "2", 2.0),
        ("206588", "206588", 206588),
        ("25.14", "25.14", 25.14),
        (".inf", "inf", math.inf),
        ("-.Inf", "-inf", -math.inf),
    ],
)
def test_a_yaml_number_keeps_its_text_and_its_value(yaml: str, text: str, value: float) -> None:
    parsed = parse_yaml(f"n: {yaml}\n").data["n"]
    assert parsed == value and type(parsed) is not bool
    assert isinstance(parsed, float if isinstance(value, float) else int)
    assert number_text(parsed) == text


def test_nan_is_nan() -> None:
    parsed = parse_yaml("n: .nan\n").data["n"]
    assert math.isnan(parsed) and number_text(parsed) == "nan"


def test_numbers_built_in_python_use_their_shortest_form() -> None:
    assert number_text(7) == "7"
    assert number_text(1.10) == "1.1"
    assert written_number(1.5, "1.5") == 1.5 and type(written_number(1.5, "1.5")) is float
    assert written_number(True, "true") is True


@pytest.mark.parametrize("number", [WrittenInt(7, "007"), WrittenFloat(1.1, "1.10")])
def test_the_text_survives_copies_and_pickles(number: float) -> None:
    for same in (copy.copy(number), copy.deepcopy(number), pickle.loads(pickle.dumps(number))):
        assert same == number and number_text(same) == number_text(number)


SUITE = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: equality}]
test_cases:
  - name: as-written
    context:
      n: 1.10
      script: [{response: "1.10"}, {response: "007"}, {response: "1e3"}]
    turns:
      - {input: 1.10, ground_truth: 1.10}
      - {input: 007, ground_truth: 007}
      - {input: 1e3, ground_truth: 1e3}
"""


def test_equality_compares_with_the_ground_truth_as_written(project: Project) -> None:
    project.write("suite.yaml", SUITE)
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out
    [case] = result.report["results"]
    assert [t["ground_truth"] for t in case["turns"]] == ["1.10", "007", "1e3"]
    assert [t["input"] for t in case["turns"]] == ["1.10", "007", "1e3"]
    assert [m for _, m in agents.SENT] == ["1.10", "007", "1e3"]  # the agent got the text too
    # where the suite means a number, it is one: the context value reaches the agent as 1.1
    [ctx] = agents.CONTEXTS
    assert ctx.context["n"] == 1.1 and type(ctx.context["n"]) is float


def test_free_form_data_holds_plain_numbers(project: Project) -> None:
    """The kept texts never leave the loader: context, options, matchers, turn_config."""
    from multiturn_eval.loader import load_suite

    project.write(
        "suite.yaml",
        """\
agent: {backend: python, factory: "tests.agents:scripted", options: {t: 0.50, n: [007]}}
test_cases:
  - name: free-form
    context: {n: 1.10, deep: {list: [1.10, {007: 1.0e+3}]}}
    turns:
      - input: q
        ground_truth: 1.10
        weight: 1.10
        expected_tools: [{name: f, args: {a: 1.10, b: [007]}}]
""",
    )
    suite = load_suite(project.root / "suite.yaml", {}).suite
    case = suite.test_cases[0]
    turn = case.effective_turns()[0]
    found: list[object] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        else:
            found.append(value)

    walk([case.context, suite.agent.options, turn.turn_config])  # type: ignore[union-attr]
    walk(dict(turn.tools[0].args or {}))
    assert found and all(type(v) in (int, float, str) for v in found), found
    assert case.context == {"n": 1.1, "deep": {"list": [1.1, {7: 1000.0}]}}
    assert turn.ground_truth == "1.10" and turn.turn_config == {"weight": 1.1}


def test_numbers_stay_numbers_where_the_format_takes_numbers(project: Project) -> None:
    project.write(
        "suite.yaml",
        """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric, absolute_tolerance: 0.50}]
test_cases:
  - name: numbers
    context:
      script:
        - {response: "7.4", tools: [{name: subtract, args: {a: 1.1, b: 7}}]}
    turns:
      - input: q
        ground_truth: 007
        expected_tools: [{name: subtract, args: {a: 1.10, b: 007}, count: 01}]
""",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out
    [turn] = result.report["results"][0]["turns"]
    assert turn["ground_truth"] == "007" and turn["tools_matched"] is True
    [metric] = turn["metric_results"]
    assert metric["passed"] is True, metric
