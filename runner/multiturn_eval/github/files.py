"""The runner's environment files: ``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY``.

Every output is written in the heredoc form ``name<<DELIMITER`` / value /
``DELIMITER`` with a fresh random delimiter (as ``@actions/core`` does), so no
value, whatever it contains, can end early or set another output.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
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
