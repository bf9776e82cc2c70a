"""Load-time checks of ``agent.tools`` (called by the loader): located configuration issues."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ToolDefinitionError
from .definition import Tool, where_defined

if TYPE_CHECKING:
    from ..suite import ToolSpec


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
            where = where_defined(fn)
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
