"""A Python callable as a model sees it: name, description, JSON Schema; argument checks.

See :mod:`multiturn_eval.tools` for the rules.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
import re
import time
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import PydanticJsonSchemaWarning

from ..errors import ToolArgumentError, ToolDefinitionError, UserCodeAbort
from ..types import CaseContext, ToolInvocation
from ..usercode import abort_text, note_traceback
from .docstrings import parse_docstring
from .outcome import ToolOutcome, content_of, failed_from, jsonable, parse_arguments, quote_value

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: how much of a bad argument value an error message quotes


def where_defined(fn: Callable[..., Any]) -> str:
    """``file.py:12`` of a callable, best effort."""
    target: Any = inspect.unwrap(fn.func if isinstance(fn, functools.partial) else fn)
    try:
        path = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return ""
    return f"{path}:{line}" if path else ""


def _hint_source(fn: Callable[..., Any]) -> Any:
    if isinstance(fn, functools.partial):
        return _hint_source(fn.func)
    if inspect.isclass(fn):
        return fn.__init__
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    return type(fn).__call__


def _default_name(fn: Callable[..., Any]) -> str:
    target: Any = fn.func if isinstance(fn, functools.partial) else fn
    return str(getattr(target, "__name__", None) or type(target).__name__)


def _is_async(fn: Callable[..., Any]) -> bool:
    target: Any = fn.func if isinstance(fn, functools.partial) else fn
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - a callable object's own method
    return not inspect.isroutine(target) and inspect.iscoroutinefunction(call)


def _is_case_context(hint: Any) -> bool:
    if hint is CaseContext:
        return True
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _is_case_context(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(args) == 1 and args[0] is CaseContext
    return False


def _has_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description for meta in typing.get_args(hint)[1:]
    )


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace ``$ref``s into ``$defs`` by the definitions (kept as they are when recursive)."""
    defs = schema.get("$defs")
    if not defs:
        return schema

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref[len("#/$defs/") :]
                if key in stack:
                    raise RecursionError(key)
                target = resolve(copy.deepcopy(defs[key]), (*stack, key))
                extra = {k: resolve(v, stack) for k, v in node.items() if k != "$ref"}
                return {**target, **extra}
            return {k: resolve(v, stack) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v, stack) for v in node]
        return node

    try:
        inlined: dict[str, Any] = resolve(schema, ())
    except RecursionError:
        return schema
    return inlined


def _drop_titles(node: Any, *, in_properties: bool = False) -> Any:
    """pydantic's ``title`` keys repeat the names; models do not need them."""
    if isinstance(node, dict):
        return {
            k: _drop_titles(v, in_properties=(k == "properties" and not in_properties))
            for k, v in node.items()
            if in_properties or k != "title"
        }
    if isinstance(node, list):
        return [_drop_titles(v) for v in node]
    return node


def _argument_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "missing":
            parts.append(f"missing required argument '{loc}'")
        elif error["type"] == "extra_forbidden":
            parts.append(f"unexpected argument '{loc}'")
        else:
            parts.append(
                f"argument '{loc}': {error['msg']} (got {quote_value(error.get('input'))})"
            )
    return "; ".join(parts)


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A tool as a model sees it -- name, description, JSON Schema -- and a way to call it.

    Two kinds: :class:`FunctionTool`, a Python callable of the suite's ``agent.tools``
    (:meth:`Tool.from_function`), and an MCP server's tool
    (:class:`~multiturn_eval.tools.mcp_servers.McpTool`). A backend needs no more
    than this class: the provider shapes, and :meth:`call` (through
    :meth:`ToolSet.call <multiturn_eval.tools.ToolSet.call>`).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON Schema (``type: object``) of the arguments the model sends."""

    @property
    def server(self) -> str | None:
        """The MCP server that serves this tool; None for a Python tool."""
        return None

    async def call(
        self,
        arguments: Mapping[str, Any] | str | None,
        case: CaseContext | None = None,
        *,
        executor: Executor | None = None,
    ) -> ToolOutcome:
        """Run one call and record it; never raises (except cancellation).

        An MCP tool also raises a :class:`~multiturn_eval.errors.SessionError` when
        its server crashed: the turn fails, as the crash rule says.
        """
        raise NotImplementedError

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> FunctionTool:
        """A Python callable as a tool; :class:`ToolDefinitionError` says what is wrong with it."""
        if not callable(fn):
            raise ToolDefinitionError(f"{type(fn).__name__} is not callable")
        tool_name = name or _default_name(fn)
        if not TOOL_NAME.match(tool_name):
            raise ToolDefinitionError(
                f"tool name {tool_name!r} is not valid: use 1-64 letters, digits, '_' or '-'"
                + ("" if name else "; give the tool a 'name:'")
            )
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(f"cannot read the signature: {exc}") from None
        try:
            hints = typing.get_type_hints(_hint_source(fn), include_extras=True)
        except Exception as exc:  # NameError for an unresolvable string annotation, and more
            raise ToolDefinitionError(
                f"cannot resolve the type hints: {type(exc).__name__}: {exc}"
            ) from None
        doc_text, doc_params = parse_docstring(
            inspect.getdoc(fn.func if isinstance(fn, functools.partial) else fn)
        )
        fields: dict[str, Any] = {}
        context_parameter: str | None = None
        positional_only: list[str] = []
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"parameter '{param.name}': *args and **kwargs cannot be offered to a model; "
                    "name every parameter"
                )
            if param.name not in hints:
                raise ToolDefinitionError(
                    f"parameter '{param.name}' has no type annotation; annotate it "
                    f"(e.g. '{param.name}: str') so the model knows what to send"
                )
            hint = hints[param.name]
            if _is_case_context(hint):
                if context_parameter is not None:
                    raise ToolDefinitionError(
                        f"parameters '{context_parameter}' and '{param.name}' are both CaseContext; "
                        "one is enough"
                    )
                context_parameter = param.name
                continue
            if param.name.startswith("_"):
                raise ToolDefinitionError(
                    f"parameter '{param.name}': names starting with '_' cannot be tool arguments"
                )
            if param.kind == param.POSITIONAL_ONLY:
                positional_only.append(param.name)
            _check_annotation(param.name, hint)
            default = ... if param.default is param.empty else param.default
            text = doc_params.get(param.name)
            if text and not _has_description(hint):  # Field(description=...) wins over the doc
                fields[param.name] = (hint, Field(default, description=text))
            else:
                fields[param.name] = (hint, Field(default))
        try:
            with warnings.catch_warnings():  # a default JSON cannot show is left out, quietly
                warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
                model = create_model(
                    f"{tool_name}_arguments",
                    __config__=ConfigDict(extra="forbid", coerce_numbers_to_str=True),
                    **fields,
                )
                schema = model.model_json_schema()
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise ToolDefinitionError(f"unsupported parameters: {_first_sentence(exc)}") from None
        schema = _drop_titles(_inline_refs(schema))
        schema.setdefault("properties", {})
        schema.pop("additionalProperties", None)
        return FunctionTool(
            name=tool_name,
            description=(description if description is not None else doc_text).strip(),
            parameters=schema,
            function=fn,
            arguments_model=model,
            context_parameter=context_parameter,
            positional_only=tuple(positional_only),
            is_async=_is_async(fn),
        )

    # ----------------------------------------------------------------- provider shapes

    def _entry(self, schema_key: str) -> dict[str, Any]:
        """Name, a copy of the parameters' schema under ``schema_key``, and the description."""
        out: dict[str, Any] = {
            "name": self.name,
            schema_key: copy.deepcopy(dict(self.parameters)),
        }
        if self.description:
            out["description"] = self.description
        return out

    def anthropic_schema(self) -> dict[str, Any]:
        """The Messages API ``tools`` entry."""
        return self._entry("input_schema")

    def openai_schema(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry."""
        return {"type": "function", "function": self._entry("parameters")}


@dataclasses.dataclass(frozen=True, eq=False)
class FunctionTool(Tool):
    """A Python callable as a model sees it, plus a validated way to call it."""

    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    context_parameter: str | None = None
    """The parameter that receives the test case's CaseContext, if any."""
    positional_only: tuple[str, ...] = ()
    is_async: bool = False

    # ------------------------------------------------------------------------ calling

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments for the function; :class:`ToolArgumentError` if they don't fit."""
        try:
            model = self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentError(_argument_error(exc)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def call(
        self,
        arguments: Mapping[str, Any] | str | None,
        case: CaseContext | None = None,
        *,
        executor: Executor | None = None,
    ) -> ToolOutcome:
        """Validate, run and record one call; never raises (except cancellation)."""
        return await _call_function(self, arguments, case, executor=executor)


def _first_sentence(exc: Exception) -> str:
    text = str(exc).strip().split("\n")[0]
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def _check_annotation(name: str, hint: Any) -> None:
    """A ToolDefinitionError naming the parameter when pydantic cannot handle its type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            TypeAdapter(hint).json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"parameter '{name}': unsupported type annotation {_type_name(hint)} "
            f"({_first_sentence(exc)}); use JSON-like types: str, int, float, bool, list, "
            "dict, Literal, enums, dataclasses or pydantic models"
        ) from None


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return str(hint).replace("typing.", "")


async def _call_function(
    tool: FunctionTool,
    arguments: Mapping[str, Any] | str | None,
    case: CaseContext | None = None,
    *,
    executor: Executor | None = None,
) -> ToolOutcome:
    """Validate, run and record one call of a Python tool; never raises (except cancellation)."""
    started = time.perf_counter()
    args: dict[str, Any] = {}
    running = False  # past validation: what is raised from here on is the tool's own
    try:
        args = parse_arguments(arguments)
        kwargs = tool.validate(args)
        if tool.context_parameter is not None:
            kwargs[tool.context_parameter] = case
        running = True
        result = await _run(tool, kwargs, executor)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():  # the run (or the turn's deadline) stops it
            raise
        note_traceback(f"tool {tool.name!r}", exc)
        return failed_from(tool.name, args, UserCodeAbort(abort_text(exc, "tool")), started)
    except Exception as exc:
        if running:
            note_traceback(f"tool {tool.name!r}", exc)
        return failed_from(tool.name, args, exc, started)
    except BaseException as exc:  # sys.exit(), KeyboardInterrupt in a tool: that call failed
        # (Semantic Kernel runs tool calls in tasks of their own, from which asyncio would
        # re-raise such an exception out of the whole run.)
        note_traceback(f"tool {tool.name!r}", exc)
        return failed_from(tool.name, args, UserCodeAbort(abort_text(exc, "tool")), started)
    duration = (time.perf_counter() - started) * 1000
    return ToolOutcome(
        invocation=ToolInvocation.model_construct(
            name=tool.name,
            args=args,
            result=jsonable(result),
            error=None,
            duration_ms=duration,
        ),
        content=content_of(result),
        is_error=False,
    )


async def _run(tool: FunctionTool, kwargs: dict[str, Any], executor: Executor | None) -> Any:
    positional = [kwargs.pop(name) for name in tool.positional_only]
    if tool.is_async:
        return await tool.function(*positional, **kwargs)
    loop = asyncio.get_running_loop()
    value = await loop.run_in_executor(
        executor, functools.partial(tool.function, *positional, **kwargs)
    )
    if inspect.isawaitable(value):
        value = await value
    return value
