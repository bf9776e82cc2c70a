"""Running a tool call the model made: validate, run, record, cap; never raises.

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
    ToolClashError,
    ToolDefinitionError,
    UnknownToolError,
    UserCodeAbort,
)
from ..types import CaseContext, ToolInvocation
from ..usercode import abort_text, note_traceback
from .definition import FunctionTool, Tool, quote_value

if TYPE_CHECKING:
    from ..loader import LoadedSuite


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
    tool: FunctionTool,
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


def parse_arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """The model's arguments as a mapping (JSON text parsed); :class:`ToolArgumentError` if not."""
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
    return failed_outcome(name, args, error_text(exc), started)


def failed_outcome(
    name: str, args: Mapping[str, Any], error: str, started: float, *, server: str | None = None
) -> ToolOutcome:
    """A call that failed with ``error``: the model reads ``Error: <error>``."""
    return ToolOutcome(
        invocation=ToolInvocation.model_construct(
            name=name,
            args=_jsonable(dict(args)),
            result=None,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            server=server,
        ),
        content=f"Error: {error}",
        is_error=True,
    )


# ------------------------------------------------------------------------------ the cap

#: ``max_tool_result_chars`` when the agent block gives none
DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"… [{len(text) - limit:,} of {len(text):,} characters cut: "
        f"max_tool_result_chars is {limit:,}]"
    )


def capped(outcome: ToolOutcome, limit: int | None) -> ToolOutcome:
    """``outcome`` with its text cut to ``limit`` characters, for the model and the reports.

    The model reads the cut text; the invocation records it as its ``result`` (a
    result that was not text becomes the cut JSON text) or its ``error``.
    """
    if limit is None or len(outcome.content) <= limit:
        return outcome
    invocation = outcome.invocation
    if outcome.is_error and invocation.error is not None:
        error = cut_text(invocation.error, limit)
        update: dict[str, Any] = {"error": error}
        content = f"Error: {error}"
    else:
        content = cut_text(outcome.content, limit)
        update = {"result": content}
    return ToolOutcome(
        invocation=invocation.model_copy(update=update),
        content=content,
        is_error=outcome.is_error,
    )


# ---------------------------------------------------------------------------- toolset


class ToolSet:
    """The tools offered to the model, by name, with a thread pool for the sync ones.

    ``max_result_chars`` caps every call's text (Python and MCP tools alike; None:
    no cap). ``sources`` says where each tool comes from, for the messages about
    two tools with one name (default: ``Python tool 'name'``, or the MCP server).
    """

    def __init__(
        self,
        tools: Sequence[Tool] = (),
        *,
        max_workers: int = 4,
        max_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS,
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.tools: tuple[Tool, ...] = tuple(tools)
        self._by_name: dict[str, Tool] = {}
        self._sources = dict(sources or {})
        for tool in self.tools:
            if tool.name in self._by_name:
                first = self._sources.get(tool.name) or source_of(self._by_name[tool.name])
                raise ToolClashError(clash_message(tool.name, first, source_of(tool)))
            self._by_name[tool.name] = tool
            self._sources.setdefault(tool.name, source_of(tool))
        self._max_workers = max(1, max_workers)
        self.max_result_chars = max_result_chars
        self._executor: ThreadPoolExecutor | None = None
        self._parent: ToolSet | None = None

    @classmethod
    def from_loaded(
        cls,
        loaded: LoadedSuite,
        *,
        max_workers: int = 4,
        max_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS,
    ) -> ToolSet:
        """The Python tools of a loaded suite (already checked by the loader)."""
        specs = loaded.suite.agent.tools
        tools: list[Tool] = []
        sources: dict[str, str] = {}
        for i, (spec, fn) in enumerate(zip(specs, loaded.tools, strict=True)):
            try:
                tool = Tool.from_function(fn, name=spec.name, description=spec.description)
            except ToolDefinitionError as exc:
                raise ConfigError(
                    ConfigIssue(
                        f"{spec.function}: {exc}",
                        file=loaded.display_path,
                        line=loaded.document.line_of(("agent", "tools", i)),
                        field=f"agent.tools[{i}].function",
                    )
                ) from None
            tools.append(tool)
            sources[tool.name] = f"agent.tools[{i}] ({spec.function})"
        return cls(
            tools, max_workers=max_workers, max_result_chars=max_result_chars, sources=sources
        )

    def with_tools(self, more: Sequence[Tool]) -> ToolSet:
        """These tools and ``more`` (an MCP server's), sharing this set's pool and cap.

        A name already taken is a :class:`ToolClashError` naming both sources.
        """
        for tool in more:
            if tool.name in self._by_name:
                raise ToolClashError(
                    clash_message(tool.name, self._sources[tool.name], source_of(tool))
                )
        merged = ToolSet(
            [*self.tools, *more],
            max_workers=self._max_workers,
            max_result_chars=self.max_result_chars,
            sources=self._sources,
        )
        merged._parent = self._parent or self
        return merged

    def source(self, name: str) -> str | None:
        """Where the tool ``name`` comes from, in words (None: no such tool)."""
        return self._sources.get(name) if name in self._by_name else None

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
        """The pool sync tools run in (created on first use; shared with :meth:`with_tools` sets)."""
        if self._parent is not None:
            return self._parent.executor
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
        """Call the tool ``name`` as the model asked; an unknown name is an error result.

        The outcome's text is capped at ``max_result_chars``. Never raises, except
        cancellation and the :class:`~multiturn_eval.errors.SessionError` of an MCP
        server that crashed (the turn fails).
        """
        tool = self._by_name.get(name)
        if tool is None:
            started = time.perf_counter()
            known = ", ".join(self._by_name) or "none"
            try:
                args = parse_arguments(arguments)
            except ToolArgumentError:
                args = {}
            return _failed(
                name,
                args,
                UnknownToolError(f"no tool named {name!r}; available: {known}"),
                started,
            )
        outcome = await tool.call(arguments, case, executor=self.executor)
        return capped(outcome, self.max_result_chars)

    def anthropic_tools(self, *, cache: bool = False) -> list[dict[str, Any]]:
        """Messages API ``tools``; ``cache`` marks the last one with ``cache_control``."""
        out = [tool.anthropic_schema() for tool in self.tools]
        if cache and out:
            out[-1]["cache_control"] = {"type": "ephemeral"}
        return out

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.tools]

    async def aclose(self) -> None:
        """Shut the pool down (a :meth:`with_tools` set leaves its parent's pool alone)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def source_of(tool: Tool) -> str:
    """Where a tool comes from, in words, when nothing more precise is known."""
    if tool.server is not None:
        return f"MCP server {tool.server!r}"
    return f"Python tool {tool.name!r}"


def clash_message(name: str, first: str, second: str) -> str:
    """Two sources offer a tool named ``name``."""
    return (
        f"two tools are named {name!r}: one from {first}, one from {second}; the model must "
        "tell them apart: rename the Python tool ('name:') or leave the MCP tool out with its "
        "server's 'tools:' allow-list"
    )
