"""The documentation as the tests read it: README.md and the site's pages under docs/.

Tests find text by the names it carries, not by the file it happens to be in, so a
section can move between the README and the site (or from one page to another) without
a test changing:

- :func:`section` is the text between ``<!-- section:NAME -->`` and
  ``<!-- /section:NAME -->``, in README.md or any ``docs/**/*.md``. A topic spread over
  several pages (the backends, the reports, the GitHub Action) carries its marker on
  each, and the section is their parts joined in file order.
- :func:`page` is one page of the site.

Both expand what the site includes from the README (``--8<-- "README.md:NAME"``, the
part between ``<!-- --8<-- [start:NAME] -->`` and ``[end:NAME]``; pymdownx.snippets), so
a test reads what a reader of the site reads.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs_workflows import ROOT, doc_files

#: a pymdownx.snippets include on a line of its own: ``--8<-- "FILE"`` or ``"FILE:PART"``
INCLUDE = re.compile(
    r'^[ \t]*-{1,}8<-{1,}[ \t]+"(?P<file>[^":]+)(?::(?P<part>[\w-]+))?"[ \t]*$', re.M
)
#: a snippet part's start or end marker (removed from what is included)
PART_MARKER = re.compile(r"-{1,}8<-{1,}[ \t]+\[(?P<kind>start|end):(?P<name>[\w-]+)\]")


class DocsError(LookupError):
    pass


def snippet(file: str, part: str | None, root: Path = ROOT) -> str:
    """What ``--8<-- "FILE:PART"`` includes: FILE's lines between PART's markers (all of
    FILE without a part), marker lines left out."""
    lines = (root / file).read_text(encoding="utf-8").splitlines()
    if part is not None:
        starts = [n for n, line in enumerate(lines) if _marks(line, "start", part)]
        ends = [n for n, line in enumerate(lines) if _marks(line, "end", part)]
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            raise DocsError(f"{file}: part {part!r} needs one start and one end marker")
        lines = lines[starts[0] + 1 : ends[0]]
    kept = [line for line in lines if not PART_MARKER.search(line)]
    return "\n".join(kept) + "\n"


def _marks(line: str, kind: str, name: str) -> bool:
    found = PART_MARKER.search(line)
    return found is not None and (found["kind"], found["name"]) == (kind, name)


def expand(text: str, root: Path = ROOT) -> str:
    """TEXT with every snippet include replaced by what it includes."""
    return INCLUDE.sub(lambda m: snippet(m["file"], m["part"], root).rstrip("\n"), text)


def page(path: str, root: Path = ROOT) -> str:
    """One page of the site, ``docs/PATH``, with its includes expanded."""
    return expand((root / "docs" / path).read_text(encoding="utf-8"), root)


def section(name: str, root: Path = ROOT) -> str:
    """The text of section NAME, wherever it is: every part of it, in file order."""
    start, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    parts = []
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        pieces = text.split(start)[1:]
        for piece in pieces:
            if end not in piece:
                raise DocsError(f"{path}: section {name!r} is not closed")
            parts.append(expand(piece.split(end)[0], root))
    if not parts:
        raise DocsError(f"no section {name!r} in README.md or docs/")
    return "".join(parts)
