"""Python function tools: schema from signature and docstring, validated calls, load-time checks."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.errors import ConfigError
from multiturn_eval.loader import load_suite
from multiturn_eval.tools import Tool, ToolDefinitionError, ToolSet, parse_docstring
from multiturn_eval.types import CaseContext
from tests import tool_funcs
from tests.conftest import Project

CASE = CaseContext(test_case_name="c", context={"table": {"revenue": 206588}})


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ------------------------------------------------------------------------- schemas


def test_schema_from_google_docstring() -> None:
    tool = Tool.from_function(tool_funcs.subtract)
    assert tool.name == "subtract"
    assert tool.description == "Subtract b from a."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "The number to subtract from."},
            "b": {"type": "number", "description": "The number to subtract."},
        },
        "required": ["a", "b"],
    }


def test_schema_from_rest_docstring() -> None:
    tool = Tool.from_function(tool_funcs.divide)
    assert tool.description == "Divide a by b."
    assert tool.parameters["properties"]["b"]["description"] == "the divisor, not zero"


def test_case_context_parameter_is_hidden_and_numpy_docstring_read() -> None:
    tool = Tool.from_function(tool_funcs.lookup)
    assert tool.context_parameter == "ctx"
    assert tool.is_async
    assert list(tool.parameters["properties"]) == ["key"]
    assert tool.parameters["required"] == ["key"]
    assert tool.parameters["properties"]["key"]["description"] == (
        'The row to look up, e.g. "revenue".'
    )
    assert tool.description == "Look a value up in the test case's table."


def test_schema_of_rich_types_is_self_contained() -> None:
    tool = Tool.from_function(tool_funcs.report)
    props = tool.parameters["properties"]
    assert props["metric"] == {
        "type": "string",
        "enum": ["revenue", "cost"],
        "description": "Which metric.",
    }
    assert props["unit"]["enum"] == ["usd", "eur"]
    assert props["unit"]["description"] == "Currency."
    assert props["period"]["type"] == "object"
    assert props["period"]["properties"] == {
        "start": {"type": "integer"},
        "end": {"type": "integer", "default": 0},
    }
    assert props["years"] == {
        "type": "array",
        "items": {"type": "integer"},
        "description": "Years to include.",
    }
    assert props["note"]["description"] == "A free-text note."  # Field wins over the docstring
    assert props["scale"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert props["detailed"] == {"type": "boolean", "default": False, "description": "Add details."}
    assert tool.parameters["required"] == ["metric", "unit", "period", "years"]
    # no $ref / $defs / titles: every provider reads it as is
    text = repr(tool.parameters)
    assert "$ref" not in text and "$defs" not in text and "'title'" not in text
    # the docstring keeps its non-parameter sections
    assert tool.description == "Build a small report.\n\nReturns:\n    A mapping."


def test_override_name_and_description() -> None:
    tool = Tool.from_function(tool_funcs.subtract, name="minus", description="Take b from a.")
    assert (tool.name, tool.description) == ("minus", "Take b from a.")
    assert tool.anthropic_schema()["name"] == "minus"
    assert tool.openai_schema()["function"]["description"] == "Take b from a."


def test_tool_without_docstring_has_no_description_key() -> None:
    tool = Tool.from_function(tool_funcs.no_doc)
    assert tool.description == ""
    assert "description" not in tool.anthropic_schema()


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            "Do.\n\nArgs:\n    x (int): first\n      line two\n    y: second\n",
            {"x": "first line two", "y": "second"},
        ),
        (
            "Do.\n\nParameters\n----------\nx : int\n    first\n    more\ny, z : str\n    shared\n\nReturns\n-------\nint\n",
            {"x": "first more", "y": "shared", "z": "shared"},
        ),
        (
            ":param x: first\n    more\n:param str y: second\n:type y: str\n:returns: none",
            {"x": "first more", "y": "second"},
        ),
    ],
)
def test_parse_docstring_styles(doc: str, expected: dict[str, str]) -> None:
    _, params = parse_docstring(doc)
    assert params == expected


def test_anthropic_tools_cache_marks_the_last_tool_only() -> None:
    toolset = ToolSet(
        [Tool.from_function(tool_funcs.subtract), Tool.from_function(tool_funcs.divide)]
    )
    tools = toolset.anthropic_tools(cache=True)
    assert "cache_control" not in tools[0]
    assert tools[1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in toolset.anthropic_tools())


# ------------------------------------------------------------------------- calling


def test_arguments_are_coerced_before_the_call() -> None:
    tool_funcs.reset()
    toolset = ToolSet([Tool.from_function(tool_funcs.subtract)])
    outcome = run(toolset.call("subtract", {"a": "206588", "b": 181001}, CASE))
    assert not outcome.is_error
    assert outcome.content == "25587.0"
    assert outcome.invocation.name == "subtract"
    assert outcome.invocation.args == {"a": "206588", "b": 181001}  # as the model sent them
    assert outcome.invocation.result == 25587.0
    assert outcome.invocation.error is None
    assert outcome.invocation.duration_ms is not None and outcome.invocation.duration_ms >= 0
    assert tool_funcs.CALLS[0][1] == {"a": 206588.0, "b": 181001.0}


def test_json_string_arguments_and_structured_results() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.report)])
    outcome = run(
        toolset.call(
            "report",
            '{"metric": "cost", "unit": "eur", "period": {"start": 2009, "end": 2012}, "years": ["2010"]}',
        )
    )
    assert not outcome.is_error, outcome.content
    assert outcome.invocation.result == {
        "metric": "cost",
        "unit": "eur",
        "span": 3,
        "years": [2010],
        "scale": None,
        "detailed": False,
    }
    assert outcome.content.startswith('{"metric": "cost"')


def test_invalid_arguments_are_an_error_result_not_a_call() -> None:
    tool_funcs.reset()
    toolset = ToolSet([Tool.from_function(tool_funcs.subtract)])
    outcome = run(toolset.call("subtract", {"a": "lots", "c": 1}, CASE))
    assert outcome.is_error
    error = outcome.invocation.error
    assert error is not None and error.startswith("ToolArgumentError: ")
    assert "argument 'a': Input should be a valid number" in error
    assert "missing required argument 'b'" in error
    assert "unexpected argument 'c'" in error
    assert outcome.content == f"Error: {error}"
    assert outcome.invocation.args == {"a": "lots", "c": 1}
    assert tool_funcs.CALLS == []


def test_malformed_json_arguments() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.subtract)])
    outcome = run(toolset.call("subtract", '{"a": 1,', CASE))
    assert outcome.is_error
    assert outcome.invocation.error is not None
    assert outcome.invocation.error.startswith("ToolArgumentError: arguments are not valid JSON")


def test_a_tool_that_raises_is_an_error_result() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.divide)])
    outcome = run(toolset.call("divide", {"a": 1, "b": 0}, CASE))
    assert outcome.is_error
    assert outcome.invocation.error == "ZeroDivisionError: float division by zero"
    assert outcome.content == "Error: ZeroDivisionError: float division by zero"
    assert outcome.invocation.result is None
    assert outcome.invocation.duration_ms is not None


def test_unknown_tool_is_an_error_result() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.divide)])
    outcome = run(toolset.call("dvide", {"a": 1}, CASE))
    assert outcome.is_error
    assert outcome.invocation.error == "UnknownToolError: no tool named 'dvide'; available: divide"
    assert outcome.invocation.args == {"a": 1}


def test_async_tool_receives_the_case_context() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.lookup)])
    ok = run(toolset.call("lookup", {"key": "revenue"}, CASE))
    assert (ok.is_error, ok.content) == (False, "206588")
    missing = run(toolset.call("lookup", {"key": "cost"}, CASE))
    assert missing.invocation.error == "KeyError: \"no row 'cost'\""
    # the model cannot pass the hidden parameter itself
    sneaky = run(toolset.call("lookup", {"key": "revenue", "ctx": {}}, CASE))
    assert sneaky.is_error and "unexpected argument 'ctx'" in (sneaky.invocation.error or "")


def test_sync_tools_run_in_a_worker_thread() -> None:
    toolset = ToolSet([Tool.from_function(tool_funcs.where)], max_workers=2)

    async def main() -> tuple[str, str]:
        outcome = await toolset.call("where", {}, CASE)
        await toolset.aclose()
        return outcome.content, threading.current_thread().name

    tool_thread, loop_thread = run(main())
    assert tool_thread.startswith("tool")
    assert tool_thread != loop_thread


def test_sync_tools_do_not_block_the_event_loop() -> None:
    release = threading.Event()

    def wait_for_release() -> str:
        """Blocks until released."""
        release.wait(10)
        return "released"

    toolset = ToolSet([Tool.from_function(wait_for_release)])

    async def main() -> str:
        task = asyncio.create_task(toolset.call("wait_for_release", {}, CASE))
        await asyncio.sleep(0.01)
        # the loop is free while the tool blocks: this coroutine runs and releases it
        release.set()
        outcome = await task
        await toolset.aclose()
        return outcome.content

    assert run(main()) == "released"


# ----------------------------------------------------------------- load-time checks

HEAD = """\
agent:
  backend: anthropic
  model: claude-sonnet-4-5
  tools:
"""
CASES = "test_cases:\n  - input: hi\n"


def test_loaded_suite_gives_the_toolset_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(
        HEAD
        + "    - function: tests.tool_funcs:subtract\n"
        + "      name: minus\n"
        + "      description: Take b from a.\n"
        + "    - function: tests.tool_funcs:lookup\n"
        + CASES
    )
    loaded = load_suite(path, env={})
    toolset = ToolSet.from_loaded(loaded)
    assert [t.name for t in toolset] == ["minus", "lookup"]
    minus = toolset.get("minus")
    assert minus is not None and minus.description == "Take b from a."


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "untyped",
            "parameter 'x' has no type annotation; annotate it (e.g. 'x: str') so the model knows what to send",
        ),
        ("star_args", "parameter 'values': *args and **kwargs cannot be offered to a model"),
        ("opaque", "parameter 'conn': unsupported type annotation"),
    ],
)
def test_bad_tool_definitions_are_config_errors(
    project: Project, function: str, message: str
) -> None:
    err = project.rejected(
        HEAD
        + "    - function: tests.tool_funcs:subtract\n"
        + f"    - function: tests.tool_funcs:{function}\n"
        + CASES
    )
    error = err.splitlines()[1].strip()
    assert error.startswith(f"suite.yaml:6 agent.tools[1].function: tests.tool_funcs:{function} (")
    assert "tool_funcs.py:" in error  # where the function is defined
    assert message in error


def test_duplicate_tool_names_are_config_errors(project: Project) -> None:
    err = project.rejected(
        HEAD
        + "    - function: tests.tool_funcs:subtract\n"
        + "    - function: tests.tool_funcs:divide\n"
        + "      name: subtract\n"
        + CASES
    )
    assert (
        "suite.yaml:7 agent.tools[1].name: tool name 'subtract' is already used by agent.tools[0]"
        in err
    )


def test_invalid_tool_name_is_a_config_error(project: Project) -> None:
    err = project.rejected(
        HEAD + "    - function: tests.tool_funcs:subtract\n      name: take away\n" + CASES
    )
    assert "tool name 'take away' is not valid: use 1-64 letters, digits, '_' or '-'" in err


def test_tool_definition_errors_raise_from_the_toolset_too(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError):
        Tool.from_function(tool_funcs.untyped)
    path = tmp_path / "suite.yaml"
    path.write_text(HEAD + "    - function: tests.tool_funcs:subtract\n" + CASES)
    loaded = load_suite(path, env={})
    loaded.tools[0] = tool_funcs.untyped  # as if the loader had not checked it
    with pytest.raises(ConfigError, match=r"agent.tools\[0\].function"):
        ToolSet.from_loaded(loaded)
