"""The ConvFinQA tools: forgiving table lookups and the program's arithmetic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from examples.convfinqa import tools
from examples.convfinqa.tools import TableLookupError, lookup

from multiturn_eval import CaseContext

REPO = Path(__file__).resolve().parents[1]

TABLE: dict[str, dict[str, Any]] = {
    "for the years ended december 31 , 2009": {
        "net cash from operating activities": 206588.0,
        "net cash used in investing activities": -86011.0,
        "total debt": 300.0,
        "total equity": 900.0,
    },
    "for the years ended december 31 , 2008": {
        "net cash from operating activities": 181001.0,
        "net cash used in investing activities": -59294.0,
        "total debt": 250.0,
        "total equity": 800.0,
    },
}


def ctx(table: Any = TABLE) -> CaseContext:
    return CaseContext(test_case_name="t", context=MappingProxyType({"table": table}))


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ("net cash from operating activities", "for the years ended december 31 , 2009"),
        ("Net Cash, from operating   activities.", "2009"),  # case, punctuation, spacing; a year
        ("operating activities", "2009"),  # every word of a unique label
        ("net cash from operating activites", "2009"),  # a typo: difflib
    ],
)
def test_lookup_is_forgiving(row: str, column: str) -> None:
    assert lookup(ctx(), row, column) == {
        "row": "net cash from operating activities",
        "column": "for the years ended december 31 , 2009",
        "value": 206588.0,
    }


def test_ambiguous_row_lists_the_candidates() -> None:
    with pytest.raises(TableLookupError) as err:
        lookup(ctx(), "total", "2009")
    assert "'total debt'" in str(err.value) and "'total equity'" in str(err.value)


def test_missing_column_lists_the_columns() -> None:
    with pytest.raises(TableLookupError, match=r"no column matches '2015'.*december 31 , 2009"):
        lookup(ctx(), "total debt", "2015")


def test_missing_row_lists_the_rows() -> None:
    with pytest.raises(
        TableLookupError, match=r"no row matches 'goodwill'; the rows are: .*'total equity'"
    ):
        lookup(ctx(), "goodwill", "2009")


def test_swapped_row_and_column_are_found_and_said() -> None:
    result = lookup(ctx(), "2008", "total debt")
    assert result["value"] == 250.0
    assert "swapped" in result["note"]


def test_duplicate_column_names_with_suffixes_are_told_apart() -> None:
    table = {
        "2008 annual average (1)": {"foreign exchange products": 1.8},
        "2008 annual average (2)": {"foreign exchange products": 2.3},
    }
    assert (
        lookup(ctx(table), "foreign exchange products", "2008 annual average (2)")["value"] == 2.3
    )
    with pytest.raises(TableLookupError, match="ambiguous"):
        lookup(ctx(table), "foreign exchange products", "2008")


def test_single_column_table_needs_no_column_and_string_cells_come_back_as_text() -> None:
    table = {"location": {"kelvin": "south africa", "mountainview": "united states"}}
    assert lookup(ctx(table), "kelvin", "")["value"] == "south africa"


def test_a_case_without_a_table_is_a_clear_error() -> None:
    with pytest.raises(TableLookupError, match="has no table"):
        lookup(CaseContext(test_case_name="doc-1"), "x", "y")


def test_table_reductions_skip_text_cells_and_say_so() -> None:
    table = {"2009": {"sales": 10.0}, "2008": {"sales": 20.0}, "note": {"sales": "n/a"}}
    result = tools.table_sum(ctx(table), "Sales")
    assert result["value"] == 30.0
    assert result["skipped"] == {"note": "n/a"}
    assert tools.table_average(ctx(table), "sales")["value"] == 15.0
    assert tools.table_max(ctx(table), "sales")["value"] == 20.0
    assert tools.table_min(ctx(table), "sales")["value"] == 10.0


def test_arithmetic() -> None:
    assert tools.subtract(206588, 181001) == 25587.0
    assert tools.subtract(60.94, 25.14) == 35.8  # no binary noise (35.800000000000004)
    assert tools.divide(25587, 181001) == pytest.approx(0.141364, abs=1e-6)
    assert tools.add(1.1, 2.2) == 3.3
    assert tools.multiply(2.5, 1000) == 2500.0
    assert tools.exp(2, 3) == 8.0
    assert tools.greater(3, 2) is True
    assert tools.greater(2, 3) is False
    # text a direct Python caller may pass (a model backend validates types first)
    assert tools.divide("932", "13.4%") == pytest.approx(6955.22388, abs=1e-5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: tools.divide(1, 0), ZeroDivisionError, "cannot divide by zero"),
        (lambda: tools.exp(-8, 0.5), ValueError, "no real result"),
        (lambda: tools.add("ten", 1), ValueError, "a must be a number, got 'ten'"),  # type: ignore[arg-type]
        (lambda: tools.add(True, 1), TypeError, "a must be a number"),
    ],
)
def test_arithmetic_errors_name_the_problem(
    call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call()


def test_every_tool_has_a_docstring_and_type_hints() -> None:
    assert len(tools.TOOL_NAMES) == 11
    for name in tools.TOOL_NAMES:
        fn = getattr(tools, name)
        assert fn.__doc__ and "Args:" in fn.__doc__, name
        assert "return" in fn.__annotations__, name


def test_a_model_backend_sees_lookup_without_its_case_context(tmp_path: Path) -> None:
    """Through the runner's tool layer (as the anthropic backend uses it): ctx is injected."""
    from multiturn_eval.loader import load_suite
    from multiturn_eval.tools import ToolSet

    loaded = load_suite(REPO / "examples" / "convfinqa" / "suite-claude.yaml", env={})
    toolset = ToolSet.from_loaded(loaded)
    case = loaded.suite.test_cases[0]
    case_ctx = CaseContext(test_case_name=case.name or "", context=MappingProxyType(case.context))

    async def go() -> Any:
        try:
            return await toolset.call(
                "lookup",
                {"row": "weighted average exercise price per share", "column": "2007"},
                case_ctx,
            )
        finally:
            await toolset.aclose()

    tool = next(t for t in toolset.tools if t.name == "lookup")
    assert set(tool.parameters["properties"]) == {"row", "column"}
    outcome = asyncio.run(go())
    assert not outcome.is_error, outcome.content
    assert json.loads(outcome.content)["value"] == 60.94
