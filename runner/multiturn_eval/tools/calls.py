"""Running a tool call the model made: validate, run, record, cap; never raises.

See :mod:`multiturn_eval.tools` for the rules.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import (
    ConfigError,
    ConfigIssue,
    ToolArgumentError,
    ToolClashError,
    ToolDefinitionError,
    UnknownToolError,
)
from ..types import CaseContext
from .definition import Tool
from .outcome import (
    DEFAULT_MAX_TOOL_RESULT_CHARS,
    ToolOutcome,
    capped,
    failed_from,
    parse_arguments,
)

if TYPE_CHECKING:
    from ..loaded import LoadedSuite


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
            return failed_from(
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
