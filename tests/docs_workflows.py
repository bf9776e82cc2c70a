"""The workflows the documentation shows, found where they are written.

Every ```yaml block in ``README.md`` and ``docs/**/*.md`` that is a workflow
(a mapping with ``on:`` and ``jobs:``) carries a marker on the line before its
fence::

    <!-- workflow: quick-pr -->
    ```yaml
    name: evals
    ...

The act end-to-end harness (``tests/act_e2e.py``) runs each marked workflow by
its name and zizmor audits them (``.ci/run``), so what a user copies is what CI
runs, wherever the block lives: moving it to another page keeps its name.

Command line (``.ci/run`` uses it for zizmor)::

    python -m tests.docs_workflows extract DIR    # DIR/<name>.yml for every marked workflow
    python -m tests.docs_workflows list           # name, file:line
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^\s*<!--\s*workflow:\s*([a-z0-9][a-z0-9-]*)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown file."""

    path: Path
    line: int
    """1-based line of the block's first content line"""
    info: str
    text: str
    marker: str | None
    """the name of the ``<!-- workflow: NAME -->`` marker on the line before the fence"""

    @property
    def where(self) -> str:
        return _where(self.path, self.line)

    @property
    def is_yaml(self) -> bool:
        return self.info.lower() in ("yaml", "yml")

    @property
    def is_workflow(self) -> bool:
        if not self.is_yaml:
            return False
        try:
            data = yaml.safe_load(self.text)
        except yaml.YAMLError:
            return False
        # YAML 1.1 (PyYAML) reads the key `on` as True
        return isinstance(data, dict) and "jobs" in data and ("on" in data or True in data)


@dataclass(frozen=True)
class Workflow:
    name: str
    path: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return _where(self.path, self.line)

    def data(self) -> dict[Any, Any]:
        loaded: dict[Any, Any] = yaml.safe_load(self.text)
        return loaded


class MarkerError(ValueError):
    pass


def _where(path: Path, line: int) -> str:
    """``file:line``, the file relative to this project when it is in it."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{shown}:{line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    docs = root / "docs"
    if docs.is_dir():
        files += sorted(p for p in docs.rglob("*.md") if p.is_file())
    return files


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file (CommonMark fences, any indentation)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        marker_match = MARKER.match(lines[i - 1]) if i > 0 else None
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = FENCE.match(lines[j])
            if (
                closing
                and closing.group("fence")[0] == fence[0]
                and len(closing.group("fence")) >= len(fence)
                and not closing.group("info")
            ):
                break
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:])
            j += 1
        found.append(
            Block(
                path=path,
                line=i + 2,
                info=opening.group("info"),
                text="\n".join(body) + "\n",
                marker=marker_match.group(1) if marker_match else None,
            )
        )
        i = j + 1
    return found


def stray_markers(path: Path) -> list[str]:
    """Markers that do not sit on the line right before a fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    problems = []
    for n, line in enumerate(lines):
        if re.match(r"\s*<!--\s*workflow\b", line):  # a comment line, not prose quoting one
            if not MARKER.match(line):
                problems.append(f"{path}:{n + 1}: malformed marker {line.strip()!r}")
            elif n + 1 >= len(lines) or not FENCE.match(lines[n + 1]):
                problems.append(f"{path}:{n + 1}: marker not followed by a ```yaml fence")
    return problems


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [b for path in doc_files(root) for b in blocks(path)]


def unmarked_workflows(root: Path = ROOT) -> list[Block]:
    return [b for b in all_blocks(root) if b.is_workflow and b.marker is None]


def marked_workflows(root: Path = ROOT) -> dict[str, Workflow]:
    """Every marked workflow by name; a marker on anything but a workflow, or a name used
    twice, is a :class:`MarkerError` naming the place."""
    problems = [p for path in doc_files(root) for p in stray_markers(path)]
    found: dict[str, Workflow] = {}
    for block in all_blocks(root):
        if block.marker is None:
            continue
        if not block.is_workflow:
            problems.append(
                f"{block.where}: marker {block.marker!r} on a block that is no workflow"
            )
            continue
        if block.marker in found:
            problems.append(
                f"{block.where}: workflow {block.marker!r} already marked at "
                f"{found[block.marker].where}"
            )
            continue
        found[block.marker] = Workflow(block.marker, block.path, block.line, block.text)
    if problems:
        raise MarkerError("\n".join(problems))
    return found


def extract(directory: Path, root: Path = ROOT) -> list[Path]:
    """Write every marked workflow to DIRECTORY/<name>.yml, unchanged."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, workflow in marked_workflows(root).items():
        path = directory / f"{name}.yml"
        path.write_text(workflow.text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.docs_workflows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this one)")
    sub = parser.add_subparsers(dest="command", required=True)
    ext = sub.add_parser("extract", help="write DIR/<name>.yml for every marked workflow")
    ext.add_argument("directory", type=Path)
    sub.add_parser("list", help="the marked workflows and where they are")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            unmarked = unmarked_workflows(args.root)
            if unmarked:
                for block in unmarked:
                    print(f"{block.where}: a workflow without a <!-- workflow: NAME --> marker")
                return 1
            for path in extract(args.directory, args.root):
                print(path)
        else:
            for name, workflow in marked_workflows(args.root).items():
                print(f"{name}\t{workflow.where}")
    except MarkerError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
