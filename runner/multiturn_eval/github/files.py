"""The files the Action writes: ``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``, the workspace.

Every output is written in the heredoc form ``name<<DELIMITER`` / value /
``DELIMITER`` with a fresh random delimiter (as ``@actions/core`` does), so no
value, whatever it contains, can end early or set another output. The step
summary stays within GitHub's 1 MiB. The workspace is checked before anything
runs, the report directory always exists once the step ends, and what the
container (root) wrote is handed back to the workspace's owner.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

#: GitHub rejects a step summary larger than 1 MiB; keep a margin for the note
SUMMARY_LIMIT_BYTES = 1024 * 1024 - 4096


def format_output(name: str, value: str, token: Callable[[], str] | None = None) -> str:
    make = token or (lambda: secrets.token_hex(16))
    while True:
        delimiter = f"ghadelimiter_{make()}"
        if delimiter not in name and delimiter not in value:
            break
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    with path.open("a", encoding="utf-8", newline="") as handle:
        for name, value in outputs.items():
            handle.write(format_output(name, value))


def clip_utf8(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` UTF-8 bytes at a line end; (text, was it cut)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    cut = data[:limit].decode("utf-8", errors="ignore")
    newline = cut.rfind("\n")
    return (cut[: newline + 1] if newline > 0 else cut), True


def append_summary(path: Path, markdown: str, limit: int = SUMMARY_LIMIT_BYTES) -> bool:
    """Append to the step summary within GitHub's 1 MiB; True when it had to be cut."""
    text, cut = clip_utf8(markdown, limit)
    if cut:
        text += "\n\n_Summary cut to fit GitHub's 1 MiB step-summary limit; see the reports._\n"
    if not text.endswith("\n"):
        text += "\n"
    with path.open("a", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return cut


def workspace_problem(workspace: Path | None) -> str | None:
    """Why the runner's workspace cannot be used (None: it can).

    Named as what it is: without it, ``working-directory`` and ``report-dir``
    (relative to it) cannot be checked, so they are not blamed.
    """
    if workspace is None:
        return (
            "GITHUB_WORKSPACE is not set: the action runs as a step of a GitHub Actions job, "
            "whose runner sets it to the job's workspace (to run suites elsewhere, use the "
            "multiturn-eval command line)"
        )
    if not workspace.is_dir():
        return f"GITHUB_WORKSPACE is {str(workspace)!r}, which is not a directory"
    return None


def ensure_directory(path: Path) -> bool:
    """Make sure ``path`` is a directory, so the ``report-dir`` output never names a missing one.

    A run stopped before writing reports (a configuration error) leaves it empty, and
    the steps after it (``actions/upload-artifact``, a script listing the reports) find
    the directory the output names. (An empty output instead would fail
    upload-artifact, whose ``path`` is a required input.) False if it cannot be made.
    """
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True)
    return path.is_dir()


def first_missing(path: Path, workspace: Path) -> Path:
    """The outermost directory of ``path`` the run will create (``path`` if it exists)."""
    current = path
    while current.parent != current and workspace in current.parents:
        if current.parent.exists():
            break
        current = current.parent
    return current


def _walk(root: Path) -> Iterator[Path]:
    yield root
    if root.is_dir() and not root.is_symlink():
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (*dirnames, *filenames):
                yield Path(dirpath) / name


def hand_back(root: Path, workspace: Path) -> None:
    """Give what the action wrote to the workspace's owner (we run as root in a container)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not root.exists():
        return
    try:
        owner = workspace.stat()
    except OSError:
        return
    if owner.st_uid == 0 and owner.st_gid == 0:
        return
    for path in _walk(root):
        with contextlib.suppress(OSError):
            os.lchown(path, owner.st_uid, owner.st_gid)


def hand_back_written(path: Path, workspace: Path) -> None:
    """Give a folder the run wrote into (a suite's fixtures) to the workspace's owner: its
    files, and the folders above it up to the workspace that the run created (root's)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not path.exists():
        return
    top = path
    while top.parent != top and workspace in top.parent.parents:
        try:
            if top.parent.stat().st_uid != 0:
                break
        except OSError:
            break
        top = top.parent
    hand_back(top, workspace)
