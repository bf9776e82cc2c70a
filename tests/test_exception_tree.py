"""Every exception class of the package is in the tree drawn in ``errors.py``'s docstring.

The walk reads the package's source (not its objects), so a class defined in a
module nobody imports yet is found too: a class is an exception when one of
its bases is a built-in exception, another exception class of the package, or
a third-party ``...Error`` / ``...Exception``. Each must be named in the
docstring, with the module it lives in when that is not ``errors.py``; each in
the drawn tree must sit under the class it derives from.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.package_source import Module, modules, write_package

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


@dataclass(frozen=True)
class ExceptionClass:
    name: str
    module: str
    """Dotted, without ``multiturn_eval.``."""
    bases: tuple[str, ...]
    line: int


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[...] and the like
        return _base_name(node.value)
    return None


def exception_classes(found: Mapping[str, Module]) -> list[ExceptionClass]:
    classes: list[ExceptionClass] = []
    for module in found.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                bases = tuple(b for b in map(_base_name, node.bases) if b is not None)
                short = module.name.partition(".")[2] or module.name
                classes.append(ExceptionClass(node.name, short, bases, node.lineno))
    names = set(BUILTIN_EXCEPTIONS)
    while True:  # a class is an exception when a base is (to the fixpoint)
        more = {
            c.name
            for c in classes
            if c.name not in names
            and any(b in names or b.endswith(("Error", "Exception")) for b in c.bases)
        }
        if not more:
            return [c for c in classes if c.name in names and c.name not in BUILTIN_EXCEPTIONS]
        names |= more


_TREE_LINE = re.compile(r"^    (?:((?:[│ ]   )*)[├└]── )?([A-Z][A-Za-z]+)\b")


def drawn_tree(docstring: str) -> dict[str, str | None]:
    """The tree of the docstring's ``::`` block: each class -> the class it hangs under."""
    block = docstring.split("::\n", 1)[1].split("\n\n\n", 1)[0]
    block = block.split("\nInternal", 1)[0]
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in block.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        prefix, name = match.groups()
        glyph = prefix is not None
        if not glyph and line[4:5] == " ":
            continue
        depth = len(prefix) // 4 + 1 if glyph else 0
        del path[depth:]
        parents[name] = path[-1] if path else None
        path.append(name)
    return parents


def _errors_docstring(found: Mapping[str, Module]) -> str:
    doc = ast.get_docstring(found["multiturn_eval.errors"].tree, clean=False)
    assert doc is not None
    return doc


def test_every_exception_class_is_named_in_the_tree() -> None:
    found = modules()
    doc = _errors_docstring(found)
    words = set(re.findall(r"\w+", doc))
    missing = []
    for cls in exception_classes(found):
        where = f"{cls.module}.py:{cls.line}"
        if cls.name not in words:
            missing.append(f"{cls.name} ({where}) is not in errors.py's docstring")
        elif cls.module != "errors" and cls.module not in doc:
            missing.append(
                f"{cls.name} ({where}): the docstring does not say it is in {cls.module}"
            )
    assert not missing, "\n".join(missing)


def test_the_tree_draws_each_class_under_its_base() -> None:
    found = modules()
    tree = drawn_tree(_errors_docstring(found))
    by_name = {c.name: c for c in exception_classes(found)}
    assert {"MultiturnEvalError", "ConfigError", "Interrupted", "RateLimited"} <= set(tree)
    wrong = []
    for name, parent in tree.items():
        if parent is None:
            continue
        cls = by_name.get(name)
        if cls is None:
            wrong.append(f"{name} is drawn in the tree but no such exception class exists")
        elif parent not in cls.bases:
            wrong.append(f"{name} is drawn under {parent}, but derives from {', '.join(cls.bases)}")
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------- the walk, on its own


def test_the_walk_finds_exceptions_by_their_bases(tmp_path: Path) -> None:
    inner = (
        "from ..errors import Base\n"
        "import httpx\n"
        "class Child(Base): ...\n"
        "class Grandchild(Child, dict): ...\n"
        "class Wrapped(httpx.HTTPError): ...\n"
        "class Stop(BaseException): ...\n"
        "def f():\n    class Local(KeyError): ...\n"
        "class NotOne(dict): ...\n"
    )
    errors = "class Base(Exception): ...\nclass Plain: ...\n"
    found = write_package(tmp_path, {"errors.py": errors, "deep/inner.py": inner})
    got = {(c.name, c.module) for c in exception_classes(found)}
    assert got == {
        ("Base", "errors"),
        ("Child", "deep.inner"),
        ("Grandchild", "deep.inner"),
        ("Wrapped", "deep.inner"),
        ("Stop", "deep.inner"),
        ("Local", "deep.inner"),
    }


def test_the_tree_is_read_with_its_depths() -> None:
    doc = """The tree.

::

    Top                     the base
    ├── One                 first
    │     a line that goes on
    │   ├── OneA            under One
    │   └── OneB            under One
    │                       More text
    └── Two                 second
        └── TwoA            under Two

    BaseException
    └── Stop                a signal

Internal: Hidden.
"""
    assert drawn_tree(doc) == {
        "Top": None,
        "One": "Top",
        "OneA": "One",
        "OneB": "One",
        "Two": "Top",
        "TwoA": "Two",
        "BaseException": None,
        "Stop": "BaseException",
    }
