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

Both model backends (``anthropic``, ``semantic-kernel``) use this module::

    toolset = ToolSet.from_loaded(loaded, max_workers=settings.parallel_test_cases)
    toolset.anthropic_tools(cache=True)      # or toolset.openai_tools(), or per Tool:
    tool.name, tool.description, tool.parameters   # JSON Schema object
    outcome = await toolset.call("subtract", {"a": 5, "b": 3}, case_context)
    outcome.content      # text for the model ("2.0", or "Error: ValueError: ...")
    outcome.is_error     # True when the model should be told it failed
    outcome.invocation   # the ToolInvocation for the report
    await toolset.aclose()
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
import json
import re
import time
import types
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated, Any

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
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .errors import (
    ConfigError,
    ConfigIssue,
    ToolArgumentError,
    ToolDefinitionError,
    UnknownToolError,
)
from .types import CaseContext, ToolInvocation

if TYPE_CHECKING:
    from .loader import LoadedSuite
    from .suite import ToolSpec

__all__ = [
    "Tool",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolOutcome",
    "ToolSet",
    "UnknownToolError",
    "parse_docstring",
    "tool_definition_issues",
]

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: how much of a bad argument value an error message quotes
_QUOTE = 80


# ------------------------------------------------------------------------- docstrings

_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters):\s*$"
)
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")
_NUMPY_ITEM = re.compile(r"^\*{0,2}(?P<names>\w+(?:\s*,\s*\w+)*)\s*(?::.*)?$")
_REST_FIELD = re.compile(r"^:(?P<kind>\w+)(?:\s+(?P<args>[^:]+))?:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: Sequence[str]) -> str:
    return " ".join(part.strip() for part in lines if part.strip())


def _numpy_section(lines: Sequence[str], i: int, params: dict[str, str]) -> int:
    """Read a numpy ``Parameters`` block whose header is at ``i``; return the next line."""
    base = _indent(lines[i])
    i += 2
    names: list[str] = []
    text: list[str] = []
    while i < len(lines):
        current = lines[i]
        if current.strip() and _indent(current) <= base:
            if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip()):
                break  # the next section's header
            match = _NUMPY_ITEM.match(current.strip())
            if match is None:
                break
            params.update(dict.fromkeys(names, _join(text)))
            names = [n.strip().lstrip("*") for n in match["names"].split(",")]
            text = []
        elif current.strip():
            text.append(current)
        i += 1
    params.update(dict.fromkeys(names, _join(text)))
    return i


def _google_section(lines: Sequence[str], i: int, params: dict[str, str]) -> int:
    """Read a Google ``Args:`` block whose header is at ``i``; return the next line."""
    i += 1
    item_indent: int | None = None
    name: str | None = None
    text: list[str] = []
    while i < len(lines):
        current = lines[i]
        if current.strip():
            indent = _indent(current)
            if indent == 0:
                break
            if item_indent is None:
                item_indent = indent
            match = _GOOGLE_ITEM.match(current.strip()) if indent <= item_indent else None
            if match is not None:
                if name is not None:
                    params[name] = _join(text)
                name, text = match["name"], [match["text"]]
            elif name is not None:
                text.append(current)
        i += 1
    if name is not None:
        params[name] = _join(text)
    return i


def _rest_field(lines: Sequence[str], i: int, params: dict[str, str]) -> int | None:
    """Read a reST ``:param x:`` field at ``i``; None when the line is not one."""
    line = lines[i]
    match = _REST_FIELD.match(line.strip())
    if match is None or match["kind"] not in _REST_PARAM_KINDS:
        return None
    text = [match["text"]]
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > _indent(line):
        text.append(lines[i])
        i += 1
    if match["kind"] != "type" and match["args"]:
        params[match["args"].split()[-1].lstrip("*")] = _join(text)
    return i


_REST_PARAM_KINDS = ("param", "parameter", "arg", "argument", "key", "keyword", "type")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description without parameter sections, {parameter: text}).

    Understands Google (``Args:`` with ``name (type): text``), numpy
    (``Parameters`` underlined with dashes, ``name : type`` then indented text)
    and reST (``:param name: text``, ``:param type name: text``; ``:type x:``
    lines are dropped) styles. Continuation lines are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if (
            stripped in ("Parameters", "Other Parameters", "Arguments")
            and i + 1 < len(lines)
            and re.fullmatch(r"-{3,}", lines[i + 1].strip())
        ):
            i = _numpy_section(lines, i, params)
        elif _GOOGLE_HEADER.match(stripped) and _indent(line) == 0:
            i = _google_section(lines, i, params)
        else:
            after = _rest_field(lines, i, params)
            if after is None:
                kept.append(line)
                i += 1
            else:
                i = after
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept).strip())
    return description, params


# ------------------------------------------------------------------------------ tools


def _where(fn: Callable[..., Any]) -> str:
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


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _QUOTE else text[: _QUOTE - 1] + "…"


def _argument_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "missing":
            parts.append(f"missing required argument '{loc}'")
        elif error["type"] == "extra_forbidden":
            parts.append(f"unexpected argument '{loc}'")
        else:
            parts.append(f"argument '{loc}': {error['msg']} (got {_quote(error.get('input'))})")
    return "; ".join(parts)


def _jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value, fallback=repr)
    except (PydanticSerializationError, ValueError, TypeError):
        return repr(value)


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), ensure_ascii=False)


def error_text(exc: BaseException) -> str:
    """``ExceptionType: message`` (just the type when there is no message)."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """One tool call's result: what the model is told, and what the report records."""

    invocation: ToolInvocation
    content: str
    """Text answered to the model: the result (a string as is, anything else as JSON),
    or ``"Error: ExceptionType: message"``."""
    is_error: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A Python callable as a model sees it, plus a validated way to call it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON Schema (``type: object``) of the arguments the model sends."""
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    context_parameter: str | None = None
    """The parameter that receives the test case's CaseContext, if any."""
    positional_only: tuple[str, ...] = ()
    is_async: bool = False

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Build a tool; :class:`ToolDefinitionError` says what is wrong with the callable."""
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
        return cls(
            name=tool_name,
            description=(description if description is not None else doc_text).strip(),
            parameters=schema,
            function=fn,
            arguments_model=model,
            context_parameter=context_parameter,
            positional_only=tuple(positional_only),
            is_async=_is_async(fn),
        )

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
        started = time.perf_counter()
        args: dict[str, Any] = {}
        try:
            args = _parse_arguments(arguments)
            kwargs = self.validate(args)
            if self.context_parameter is not None:
                kwargs[self.context_parameter] = case
            result = await self._run(kwargs, executor)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return _failed(self.name, args, exc, started)
        duration = (time.perf_counter() - started) * 1000
        return ToolOutcome(
            invocation=ToolInvocation.model_construct(
                name=self.name,
                args=args,
                result=_jsonable(result),
                error=None,
                duration_ms=duration,
            ),
            content=_content(result),
            is_error=False,
        )

    async def _run(self, kwargs: dict[str, Any], executor: Executor | None) -> Any:
        positional = [kwargs.pop(name) for name in self.positional_only]
        if self.is_async:
            return await self.function(*positional, **kwargs)
        loop = asyncio.get_running_loop()
        value = await loop.run_in_executor(
            executor, functools.partial(self.function, *positional, **kwargs)
        )
        if inspect.isawaitable(value):
            value = await value
        return value

    # ----------------------------------------------------------------- provider shapes

    def anthropic_schema(self) -> dict[str, Any]:
        """The Messages API ``tools`` entry."""
        out: dict[str, Any] = {
            "name": self.name,
            "input_schema": copy.deepcopy(dict(self.parameters)),
        }
        if self.description:
            out["description"] = self.description
        return out

    def openai_schema(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry."""
        function: dict[str, Any] = {
            "name": self.name,
            "parameters": copy.deepcopy(dict(self.parameters)),
        }
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


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


def _parse_arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"arguments are not valid JSON ({exc.msg}): {_quote(arguments)}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(
            f"arguments must be a JSON object, got {type(arguments).__name__}: {_quote(arguments)}"
        )
    return dict(arguments)


def _failed(name: str, args: dict[str, Any], exc: BaseException, started: float) -> ToolOutcome:
    error = error_text(exc)
    return ToolOutcome(
        invocation=ToolInvocation.model_construct(
            name=name,
            args=_jsonable(args),
            result=None,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
        ),
        content=f"Error: {error}",
        is_error=True,
    )


# ---------------------------------------------------------------------------- toolset


class ToolSet:
    """The suite's tools, by name, with a thread pool for the sync ones."""

    def __init__(self, tools: Sequence[Tool] = (), *, max_workers: int = 4) -> None:
        self.tools: tuple[Tool, ...] = tuple(tools)
        self._by_name = {tool.name: tool for tool in self.tools}
        if len(self._by_name) != len(self.tools):
            seen: set[str] = set()
            for tool in self.tools:
                if tool.name in seen:
                    raise ValueError(f"two tools are named {tool.name!r}")
                seen.add(tool.name)
        self._max_workers = max(1, max_workers)
        self._executor: ThreadPoolExecutor | None = None

    @classmethod
    def from_loaded(cls, loaded: LoadedSuite, *, max_workers: int = 4) -> ToolSet:
        """The tools of a loaded suite (already checked by the loader)."""
        specs = loaded.suite.agent.tools
        tools = []
        for i, (spec, fn) in enumerate(zip(specs, loaded.tools, strict=True)):
            try:
                tools.append(Tool.from_function(fn, name=spec.name, description=spec.description))
            except ToolDefinitionError as exc:
                raise ConfigError(
                    ConfigIssue(
                        f"{spec.function}: {exc}",
                        file=loaded.display_path,
                        line=loaded.document.line_of(("agent", "tools", i)),
                        field=f"agent.tools[{i}].function",
                    )
                ) from None
        return cls(tools, max_workers=max_workers)

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    @property
    def executor(self) -> Executor:
        """The pool sync tools run in (created on first use)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="tool"
            )
        return self._executor

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        case: CaseContext | None = None,
    ) -> ToolOutcome:
        """Call the tool ``name`` as the model asked; an unknown name is an error result."""
        tool = self._by_name.get(name)
        if tool is None:
            started = time.perf_counter()
            known = ", ".join(self._by_name) or "none"
            try:
                args = _parse_arguments(arguments)
            except ToolArgumentError:
                args = {}
            return _failed(
                name,
                args,
                UnknownToolError(f"no tool named {name!r}; available: {known}"),
                started,
            )
        return await tool.call(arguments, case, executor=self.executor)

    def anthropic_tools(self, *, cache: bool = False) -> list[dict[str, Any]]:
        """Messages API ``tools``; ``cache`` marks the last one with ``cache_control``."""
        out = [tool.anthropic_schema() for tool in self.tools]
        if cache and out:
            out[-1]["cache_control"] = {"type": "ephemeral"}
        return out

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.tools]

    async def aclose(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


# ------------------------------------------------------------------------ loader hook


def tool_definition_issues(
    specs: Sequence[ToolSpec], functions: Sequence[Callable[..., Any]]
) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems with the suite's tool definitions, as (field path, message) pairs.

    Called by the loader once every ``agent.tools[i].function`` has been
    imported; the loader turns each pair into a located ConfigIssue.
    """
    issues: list[tuple[tuple[str | int, ...], str]] = []
    names: dict[str, int] = {}
    for i, (spec, fn) in enumerate(zip(specs, functions, strict=True)):
        try:
            tool = Tool.from_function(fn, name=spec.name, description=spec.description)
        except ToolDefinitionError as exc:
            where = _where(fn)
            issues.append(
                (
                    ("agent", "tools", i, "function"),
                    f"{spec.function}{f' ({where})' if where else ''}: {exc}",
                )
            )
            continue
        if tool.name in names:
            field = "name" if spec.name else "function"
            issues.append(
                (
                    ("agent", "tools", i, field),
                    f"tool name {tool.name!r} is already used by agent.tools[{names[tool.name]}]; "
                    "give one of them a distinct 'name:'",
                )
            )
        names.setdefault(tool.name, i)
    return issues
