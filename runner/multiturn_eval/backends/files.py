"""Classifying the files a turn sends (``files:``), shared by the model backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BackendError, ConfigIssue
from ..types import TurnFile

if TYPE_CHECKING:
    from ..loaded import LoadedSuite

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
PDF_TYPE = "application/pdf"
#: media types read as text besides text/*
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/csv",
        "application/x-ndjson",
        "application/javascript",
        "application/x-sh",
        "application/sql",
    }
)
#: how much of a file is read to decide whether an unknown type is text
_SNIFF = 8192


def file_kind(file: TurnFile) -> str | None:
    """``image``, ``document`` (PDF) or ``text``; None for anything else.

    A file whose media type is unknown (``application/octet-stream``) counts as
    text when its start decodes as UTF-8 without NUL bytes.
    """
    media_type = file.media_type.split(";")[0].strip().lower()
    if media_type in IMAGE_TYPES:
        return "image"
    if media_type == PDF_TYPE:
        return "document"
    if media_type.startswith("text/") or media_type in TEXT_TYPES or media_type.endswith("+json"):
        return "text"
    if media_type == "application/octet-stream":
        try:
            with file.path.open("rb") as handle:
                head = handle.read(_SNIFF)
        except OSError:
            return None
        if b"\0" in head:
            return None
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # not just a character cut at the sniff boundary
                return None
        return "text"
    return None


def file_issues(suite: LoadedSuite, problem: Callable[[TurnFile], str | None]) -> list[ConfigIssue]:
    """Every turn file of the suite a backend cannot send (``problem`` says why), located.

    Checked when the backend is built, so such a suite is a configuration
    error (exit 2) before any agent is called.
    """
    issues: list[ConfigIssue] = []
    for use in suite.cases.turn_files:  # collected while loading, the file's cases' too
        path = suite.base_dir / use.path
        file = (
            TurnFile.from_path(path) if use.media_type is None else TurnFile(path, use.media_type)
        )
        why = problem(file)
        if why is None:
            continue
        shown, line, test_case = use.where
        issues.append(
            ConfigIssue(
                why,
                file=shown,
                line=line,
                test_case=test_case,
                field=(f"turns[{use.turn}]." if not use.legacy else "") + f"files[{use.file}].path",
            )
        )
    return issues


class FileParts:
    """Each turn file as the content part a backend sends, read once per run.

    ``problem(file)``: why the backend cannot send it (a turn error), or None;
    ``build(file)``: its part (``OSError`` / ``UnicodeDecodeError`` on trouble:
    a turn error naming the file).
    """

    def __init__(
        self,
        problem: Callable[[TurnFile], str | None],
        build: Callable[[TurnFile], dict[str, Any]],
    ) -> None:
        self._problem = problem
        self._build = build
        self._parts: dict[tuple[Path, str], dict[str, Any]] = {}

    def __call__(self, file: TurnFile) -> dict[str, Any]:
        key = (file.path, file.media_type)
        part = self._parts.get(key)
        if part is None:
            why = self._problem(file)
            if why is not None:
                raise BackendError(why)
            try:
                part = self._build(file)
            except (OSError, UnicodeDecodeError) as exc:
                raise BackendError(f"cannot read {file.path}: {exc}") from exc
            self._parts[key] = part
        return part
