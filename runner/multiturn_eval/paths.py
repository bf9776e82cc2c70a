"""The files a run names: suite (and report) globs expanded, the report directory made.

The report directory is created and checked writable before any agent is called
(a problem is a :class:`~multiturn_eval.errors.ConfigError`, exit 2), and removed
again when a configuration error ends the run before it started.
"""

from __future__ import annotations

import contextlib
import glob
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError, ConfigIssue

if TYPE_CHECKING:
    from .settings import RunSettings


def expand_suites(patterns: Sequence[str | Path]) -> list[Path]:
    """Paths as given; a pattern with wildcards that names no file is globbed."""
    return expand_paths(patterns, "suite")


def expand_paths(patterns: Sequence[str | Path], kind: str) -> list[Path]:
    """Paths as given; a pattern with wildcards that names no file is globbed (sorted,
    recursive ``**``); duplicates once. ``kind`` names the files in the error when a
    pattern matches nothing (``no suite file matches '...'``)."""
    paths: list[Path] = []
    issues: list[ConfigIssue] = []
    for raw in patterns:
        pattern = str(raw)
        if any(ch in pattern for ch in "*?[") and not _exists(Path(pattern)):
            matches = sorted(glob.glob(pattern, recursive=True))  # noqa: PTH207 - absolute patterns too
            if not matches:
                issues.append(ConfigIssue(f"no {kind} file matches {pattern!r}"))
            paths.extend(Path(m) for m in matches)
        else:
            paths.append(Path(pattern))
    if issues:
        raise ConfigError(issues)
    return list(dict.fromkeys(paths))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long, a NUL byte: not a file (the loader says why)
        return False


def _report_dir_source(settings: RunSettings) -> str:
    source = settings.sources.get("report_dir", "default")
    if source == "cli":
        return "-o/--report-dir"
    if source == "env":
        return "environment variable MULTITURN_EVAL_REPORT_DIR"
    return "the default report directory"


def check_report_dir(
    settings: RunSettings, label: str | None = None, path: Path | None = None
) -> Path | None:
    """Create the report directory and make sure it is writable; else a ConfigError (exit 2).

    ``path`` is the directory as the run resolved it (default: ``settings.report_dir``
    as it is); errors name it as it was given. Returns the outermost directory this
    created (None if it existed), so a configuration error found later can take it
    away again.
    """
    path = Path(settings.report_dir) if path is None else path
    where = f"{label or _report_dir_source(settings)} {settings.report_dir!r}"
    if not settings.report_dir.strip():
        raise ConfigError(ConfigIssue(f"{where}: give a directory"))
    try:
        return _make_report_dir(path, where)
    except OSError as exc:  # a name too long, a parent that cannot be searched, ...
        reason = exc.strerror or str(exc)
        raise ConfigError(ConfigIssue(f"{where}: cannot write reports there: {reason}")) from None


def _make_report_dir(path: Path, where: str) -> Path | None:
    if path.exists() and not path.is_dir():
        raise ConfigError(ConfigIssue(f"{where}: is a file, not a directory"))
    ancestor = path
    while not ancestor.exists() and ancestor.parent != ancestor:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise ConfigError(
            ConfigIssue(f"{where}: {ancestor} is a file, so no directory can be made under it")
        )
    created = None
    if not path.exists():
        created = path
        while not created.parent.exists() and created.parent != created:
            created = created.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".multiturn-eval-write-test-"):
            pass
    except OSError as exc:
        remove_created(created, path)
        reason = exc.strerror or str(exc)
        raise ConfigError(ConfigIssue(f"{where}: cannot write reports there: {reason}")) from None
    return created


def remove_created(created: Path | None, path: Path) -> None:
    """Remove the empty directories from ``path`` up to ``created`` (made by this run)."""
    if created is None:
        return
    current = path
    while True:
        with contextlib.suppress(OSError):
            current.rmdir()
        if current == created or current.parent == current:
            return
        current = current.parent
