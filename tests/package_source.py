"""The package's own source, parsed: every module of ``multiturn_eval`` and its syntax tree.

Shared by the tests that check the package's shape from its text (the import
graph, the exception tree) without importing it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "runner" / "multiturn_eval"


@dataclass(frozen=True)
class Module:
    name: str
    """Dotted, e.g. ``multiturn_eval.reports.markdown`` (a package: its ``__init__``)."""
    path: Path
    is_package: bool
    tree: ast.Module


def modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Module]:
    """Every ``.py`` file below ``package_dir`` (a package directory), by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        found[name] = Module(name, path, is_package, ast.parse(path.read_text(), str(path)))
    return found


def write_package(root: Path, files: Mapping[str, str]) -> dict[str, Module]:
    """A package ``multiturn_eval`` of ``files`` (path -> text) under ``root``, parsed.

    Every directory gets an empty ``__init__.py`` unless ``files`` gives one.
    """
    package = root / "multiturn_eval"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return modules(package)
