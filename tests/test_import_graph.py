"""No import circles in the package, not even type-only ones.

Every ``import`` and ``from ... import`` statement of every module of
``multiturn_eval`` is an edge: at module level, inside ``if TYPE_CHECKING:``,
inside a function (a lazy import), inside ``try:``; relative or absolute. A
name imported from a package that is itself a module (``from . import _view``)
is an edge to that module; any other name, an edge to the module it comes from.
(``importlib.import_module`` with a string, as the backend registry uses, is
not a statement and not an edge.)

A circle in that graph is a failure, printed as the modules in order with the
line of each import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.package_source import Module, modules, write_package

ROOT = "multiturn_eval"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int


def _resolve(name: str, known: Mapping[str, Module]) -> str | None:
    """The module ``name`` lives in: itself, else its nearest enclosing module."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(found: Mapping[str, Module], root: str = ROOT) -> list[Edge]:
    """Every import of a module of ``root`` by a module of ``root``."""
    edges: list[Edge] = []
    for module in found.values():
        for node in ast.walk(module.tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.name.split(".")
                    if not module.is_package:
                        base.pop()
                    base = base[: len(base) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                targets = [
                    f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in found else origin
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                if target != root and not target.startswith(root + "."):
                    continue
                resolved = _resolve(target, found)
                if resolved is not None and resolved != module.name:
                    edges.append(Edge(module.name, resolved, node.lineno))
    return edges


def _components(nodes: Iterable[str], edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for edge in edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _one_circle(component: list[str], edges: Iterable[Edge]) -> list[Edge]:
    """A shortest circle through the first module of ``component``, as its imports."""
    members = set(component)
    out: dict[str, list[Edge]] = {}
    for edge in edges:
        if edge.source in members and edge.target in members:
            out.setdefault(edge.source, []).append(edge)
    start = component[0]
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in sorted(out.get(node, []), key=lambda e: (e.target, e.line)):
                if edge.target == start:
                    return [*paths[node], edge]
                if edge.target not in paths:
                    paths[edge.target] = [*paths[node], edge]
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no circle through {start} in {component}")  # pragma: no cover


def describe(component: list[str], edges: Iterable[Edge], found: Mapping[str, Module]) -> str:
    circle = _one_circle(component, edges)
    short = [name.removeprefix(ROOT + ".") for name in component]
    lines = [f"{len(component)} modules import each other: {', '.join(short)}", "  for example:"]
    for edge in circle:
        where = found[edge.source].path.relative_to(found[ROOT].path.parents[1]).as_posix()
        lines.append(f"    {edge.source} -> {edge.target}  ({where}:{edge.line})")
    return "\n".join(lines)


def circles(found: Mapping[str, Module]) -> list[list[str]]:
    return _components(found, import_edges(found))


# ------------------------------------------------------------------------ the package


def test_the_package_has_no_import_circle() -> None:
    found = modules()
    edges = import_edges(found)
    found_circles = _components(found, edges)
    assert not found_circles, "import circles:\n" + "\n".join(
        describe(c, edges, found) for c in found_circles
    )


def test_the_walk_sees_the_package_layers() -> None:
    """The walk finds the imports it must (so an empty graph cannot pass for a clean one)."""
    found = modules()
    edges = {(e.source, e.target) for e in import_edges(found)}
    assert len(found) > 50
    for source, target in [
        ("multiturn_eval.results", "multiturn_eval.types"),  # from .types import ...
        ("multiturn_eval.reports.markdown", "multiturn_eval.reports._view"),  # from . import _view
        ("multiturn_eval.case_runner", "multiturn_eval.loaded"),  # under TYPE_CHECKING
        ("multiturn_eval.cli", "multiturn_eval.loader"),  # inside a function
    ]:
        assert (source, target) in edges, (source, target)


# ---------------------------------------------------------------- the walk, on its own


@pytest.mark.parametrize(
    "statement",
    [
        "from .b import thing",
        "from . import b",
        "from multiturn_eval.b import thing",
        "from multiturn_eval import b",
        "import multiturn_eval.b",
        "import multiturn_eval.b as bee",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import Thing",
        "def later():\n    from .b import thing\n    return thing",
        "try:\n    from .b import thing\nexcept ImportError:\n    thing = None",
        "class C:\n    def method(self):\n        import multiturn_eval.b",
    ],
)
def test_every_kind_of_import_closes_a_circle(tmp_path: Path, statement: str) -> None:
    found = write_package(tmp_path, {"a.py": statement + "\n", "b.py": "from .a import other\n"})
    assert circles(found) == [["multiturn_eval.a", "multiturn_eval.b"]]
    text = describe(circles(found)[0], import_edges(found), found)
    assert "multiturn_eval.a -> multiturn_eval.b" in text
    assert "multiturn_eval.b -> multiturn_eval.a  (multiturn_eval/b.py:1)" in text


def test_relative_imports_resolve_from_packages_and_parents(tmp_path: Path) -> None:
    files = {
        "core.py": "from .reports.view import facts\n",
        "reports/__init__.py": "from .view import facts\n",
        "reports/view.py": "from ..core import thing\n",
    }
    found = write_package(tmp_path, files)
    assert circles(found) == [["multiturn_eval.core", "multiturn_eval.reports.view"]]
    edges = {(e.source, e.target) for e in import_edges(found)}
    assert ("multiturn_eval.reports", "multiturn_eval.reports.view") in edges


def test_a_long_circle_is_printed_in_order(tmp_path: Path) -> None:
    # d imports into the circle, but is not part of it
    files = {"a.py": "from . import b\n", "b.py": "from . import c\n", "d.py": "from . import a\n"}
    found = write_package(tmp_path, {**files, "c.py": "\n\nfrom .a import x\n"})
    [component] = circles(found)
    assert component == ["multiturn_eval.a", "multiturn_eval.b", "multiturn_eval.c"]
    text = describe(component, import_edges(found), found)
    assert text.splitlines()[2:] == [
        "    multiturn_eval.a -> multiturn_eval.b  (multiturn_eval/a.py:1)",
        "    multiturn_eval.b -> multiturn_eval.c  (multiturn_eval/b.py:1)",
        "    multiturn_eval.c -> multiturn_eval.a  (multiturn_eval/c.py:3)",
    ]


def test_imports_outside_the_package_and_of_itself_are_no_edges(tmp_path: Path) -> None:
    a = "import json\nimport multiturn_eval_extra\nfrom . import a\n"
    found = write_package(tmp_path, {"a.py": a, "b.py": "from .a import x\n"})
    assert circles(found) == []
    assert [(e.source, e.target) for e in import_edges(found)] == [
        ("multiturn_eval.b", "multiturn_eval.a")
    ]
