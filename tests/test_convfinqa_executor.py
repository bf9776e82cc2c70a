"""The ConvFinQA program executor reproduces the dataset's executed answers.

Every turn of the committed subset is checked here; the full dev split is
measured by ``bench/convfinqa_bench.py`` (agreement rate in the example's README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from examples.convfinqa.graders import ProgramError, execute_program, parse_number

REPO = Path(__file__).resolve().parents[1]
SUBSET = REPO / "examples" / "convfinqa" / "data" / "convfinqa_subset.json"


def _subset_turns() -> list[Any]:
    records = json.loads(SUBSET.read_text(encoding="utf-8"))["dev"]
    params = []
    for record in records:
        dialogue = record["dialogue"]
        for i, (program, answer) in enumerate(
            zip(dialogue["turn_program"], dialogue["executed_answers"], strict=True)
        ):
            params.append(
                pytest.param(program, answer, record["doc"]["table"], id=f"{record['id']}#{i + 1}")
            )
    return params


def test_the_subset_is_the_committed_twenty_dialogues() -> None:
    records = json.loads(SUBSET.read_text(encoding="utf-8"))["dev"]
    assert len(records) == 20
    assert len({r["id"] for r in records}) == 20


@pytest.mark.parametrize(("program", "answer", "table"), _subset_turns())
def test_executor_reproduces_executed_answers(program: str, answer: Any, table: Any) -> None:
    assert execute_program(program, table).value == answer


def test_steps_refer_to_earlier_steps_and_keep_their_operands() -> None:
    result = execute_program("subtract(206588, 181001), divide(#0, 181001)")
    assert [s.expression for s in result.steps] == [
        "subtract(206588, 181001)",
        "divide(#0, 181001)",
    ]
    assert result.steps[1].operands == (25587.0, 181001.0)
    assert result.steps[1].refs == (0, None)
    assert result.value == 0.14136


def test_only_the_last_step_is_rounded_to_five_decimals() -> None:
    # 1/3 rounded early would give 0.99999; FinQA rounds the final value only
    assert execute_program("divide(1, 3), multiply(#0, 3)").value == 1.0
    assert execute_program("divide(2, 3)").value == 0.66667


@pytest.mark.parametrize(
    ("token", "value"),
    [
        ("const_100", 100.0),
        ("const_1000000", 1_000_000.0),
        ("const_m1", -1.0),
        ("13.4%", 0.134),
        ("1,234.5", 1234.5),
        ("$5", 5.0),
        (".3", 0.3),
        ("-319", -319.0),
    ],
)
def test_arguments_constants_and_percent_literals(token: str, value: float) -> None:
    assert parse_number(token) == pytest.approx(value)


def test_a_bare_percent_literal_is_a_program_value() -> None:
    result = execute_program("13.4%")
    assert result.steps == ()
    assert result.value == 0.134


def test_greater_answers_yes_or_no() -> None:
    assert (
        execute_program("subtract(17.84, 4.11), subtract(60.15, 41.30), greater(#0, #1)").value
        == "no"
    )
    assert execute_program("greater(2, 1)").value == "yes"


def test_exp_and_constant_minus_one() -> None:
    assert execute_program("exp(2, 10)").value == 1024.0
    assert execute_program("multiply(5, const_m1)").value == -5.0


def test_table_operations_read_a_row_whose_label_has_commas_and_parentheses() -> None:
    table = {
        "2009": {"net sales , total ( a )": 10.0, "other": 1.0},
        "2008": {"net sales , total ( a )": 20.0, "other": 2.0},
        "2007": {"net sales , total ( a )": 60.0, "other": 3.0},
    }
    assert execute_program("table_sum(net sales , total ( a ), none)", table).value == 90.0
    assert execute_program("table_average(net sales , total ( a ), none)", table).value == 30.0
    assert execute_program("table_max(other, none)", table).value == 3.0
    assert execute_program("table_min(other, none), multiply(#0, const_100)", table).value == 100.0


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("divide(#1, 2)", "not an earlier step"),
        ("modulo(5, 2)", "unknown operation 'modulo'"),
        ("add(1, 2, 3)", "takes 2 arguments"),
        ("add(1, 2", "unbalanced"),
        ("add(1, two)", "'two' is not a number"),
        ("divide(1, 0)", "division by zero"),
        ("table_sum(anything, none)", "needs the document's table"),
        ("", "empty"),
    ],
)
def test_bad_programs_are_clear_errors(program: str, message: str) -> None:
    with pytest.raises(ProgramError, match=message):
        execute_program(program)
