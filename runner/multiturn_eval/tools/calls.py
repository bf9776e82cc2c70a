"""Running a tool call the model made: validate, run, record; never raises.

See :mod:`multiturn_eval.tools` for the rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..errors import (
    ConfigError,
    ConfigIssue,
    ToolArgumentError,
    ToolDefinitionError,
    UnknownToolError,
    UserCodeAbort,
)
from ..types import CaseContext, ToolInvocation
from ..usercode import abort_text, note_traceback
from .definition import Tool, quote_value

if TYPE_CHECKING:
    from ..loaded import LoadedSuite


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
    """``ExceptionType: message`` (just the type when there is no message; an abort in words)."""
    if isinstance(exc, UserCodeAbort):
        return str(exc)
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


async def call_tool(
    tool: Tool,
    arguments: Mapping[str, Any] | str | None,
    case: CaseContext | None = None,
    *,
    executor: Executor | None = None,
) -> ToolOutcome:
    """Validate, run and record one call; never raises (except cancellation)."""
    started = time.perf_counter()
    args: dict[str, Any] = {}
    running = False  # past validation: what is raised from here on is the tool's own
    try:
        args = _parse_arguments(arguments)
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
        return _failed(tool.name, args, UserCodeAbort(abort_text(exc, "tool")), started)
    except Exception as exc:
        if running:
            note_traceback(f"tool {tool.name!r}", exc)
        return _failed(tool.name, args, exc, started)
    except BaseException as exc:  # sys.exit(), KeyboardInterrupt in a tool: that call failed
        # (Semantic Kernel runs tool calls in tasks of their own, from which asyncio would
        # re-raise such an exception out of the whole run.)
        note_traceback(f"tool {tool.name!r}", exc)
        return _failed(tool.name, args, UserCodeAbort(abort_text(exc, "tool")), started)
    duration = (time.perf_counter() - started) * 1000
    return ToolOutcome(
        invocation=ToolInvocation.model_construct(
            name=tool.name,
            args=args,
            result=_jsonable(result),
            error=None,
            duration_ms=duration,
        ),
        content=_content(result),
        is_error=False,
    )


async def _run(tool: Tool, kwargs: dict[str, Any], executor: Executor | None) -> Any:
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
                f"arguments are not valid JSON ({exc.msg}): {quote_value(arguments)}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(
            f"arguments must be a JSON object, got {type(arguments).__name__}: {quote_value(arguments)}"
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
        return await call_tool(tool, arguments, case, executor=self.executor)

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
