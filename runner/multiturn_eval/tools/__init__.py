"""Python function tools offered to a model (SPEC 4 ``agent.tools``, SPEC 7).

A tool is any Python callable named in the suite as ``function: "pkg.mod:callable"``.
From it this module derives what the model sees and checks what the model sends:

* **name**: ``ToolSpec.name`` or the callable's ``__name__``
  (``^[A-Za-z0-9_-]{1,64}$``, unique in the suite);
* **description**: ``ToolSpec.description`` or the docstring, minus its
  parameter section;
* **parameters**: a JSON Schema object built with pydantic from the signature
  and type hints (``str``, ``int``, ``float``, ``bool``, ``list[...]``,
  ``dict[str, ...]``, ``Literal``, ``Optional``, enums, dataclasses, pydantic
  models, ``Annotated[..., Field(...)]``), with each parameter's text from the
  docstring (Google ``Args:``, numpy ``Parameters``, reST ``:param x:``) unless
  ``Field(description=...)`` gives one;
* a parameter annotated :class:`~multiturn_eval.types.CaseContext` is filled by
  the runner with the test case's context and never appears in the schema.

Every parameter needs a type annotation (the model must know what to send);
``*args``/``**kwargs``, a missing or unsupported annotation, an invalid or
duplicate name are configuration errors found at load
(:func:`tool_definition_issues`, called by the loader), located at
``agent.tools[i]`` with the function's own file and line.

Calling (:meth:`ToolSet.call`): the model's arguments are validated and coerced
(pydantic lax mode: ``"5"`` becomes ``5`` for an ``int``; numbers become
strings for a ``str``; unknown arguments are refused) before the function runs.
Sync functions run in a thread pool, async ones on the event loop. Whatever
happens -- invalid arguments, an unknown tool, the function raising -- the
model gets a result (an error text it can react to) and the call is recorded
as a :class:`~multiturn_eval.types.ToolInvocation` with the arguments as the
model sent them, the result (JSON-safe), ``error`` as
``"ExceptionType: message"`` and ``duration_ms``. Only cancellation propagates.

Results are capped (:meth:`ToolSet.call`): a text longer than
``max_result_chars`` (``max_tool_result_chars``, default 100,000) is cut, with a
marker saying how much was cut, for the model and the reports alike.

MCP servers are a second tool source (:mod:`multiturn_eval.tools.mcp_servers`):
their tools are :class:`Tool` s too, added to a case's set with
:meth:`ToolSet.with_tools`; a name two sources share is an error naming both.

The model backends (``anthropic``, ``openai``, ``semantic-kernel``) use this module::

    toolset = ToolSet.from_loaded(loaded, max_workers=settings.parallel_test_cases)
    toolset.anthropic_tools(cache=True)      # or toolset.openai_tools(), or per Tool:
    tool.name, tool.description, tool.parameters   # JSON Schema object
    outcome = await toolset.call("subtract", {"a": 5, "b": 3}, case_context)
    outcome.content      # text for the model ("2.0", or "Error: ValueError: ...")
    outcome.is_error     # True when the model should be told it failed
    outcome.invocation   # the ToolInvocation for the report
    await toolset.aclose()
"""

from ..errors import ToolArgumentError, ToolClashError, ToolDefinitionError, UnknownToolError
from .calls import ToolSet
from .checks import tool_definition_issues
from .definition import TOOL_NAME, FunctionTool, Tool
from .docstrings import parse_docstring
from .outcome import DEFAULT_MAX_TOOL_RESULT_CHARS, ToolOutcome, error_text

__all__ = [
    "DEFAULT_MAX_TOOL_RESULT_CHARS",
    "TOOL_NAME",
    "FunctionTool",
    "Tool",
    "ToolArgumentError",
    "ToolClashError",
    "ToolDefinitionError",
    "ToolOutcome",
    "ToolSet",
    "UnknownToolError",
    "error_text",
    "parse_docstring",
    "tool_definition_issues",
]
