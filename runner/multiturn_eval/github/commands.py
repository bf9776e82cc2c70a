"""Workflow commands (``::error file=...::message``) and their escaping (pure).

The runner reads any output line whose text, after leading whitespace, starts
with ``::`` as a command, so untrusted text (agent replies, suite content) is
either escaped into a command's message, where it cannot end the line, or
printed between ``::stop-commands::TOKEN`` and ``::TOKEN::`` with a token it
cannot guess. Escaping follows the runner's ``ActionCommand`` rules: in the
message ``%``, ``\\r`` and ``\\n`` become ``%25``, ``%0D`` and ``%0A``; in
property values also ``:`` and ``,`` become ``%3A`` and ``%2C``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TextIO

from ..reports.escape import strip_control

Level = Literal["error", "warning", "notice"]

#: GitHub shows at most this many annotations of each level per step
ANNOTATIONS_PER_STEP = 10
#: a single annotation message longer than this is cut (GitHub truncates long ones anyway)
MAX_MESSAGE_CHARS = 4000


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_command(name: str, properties: Mapping[str, str | int | None], message: str) -> str:
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None and value != ""
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def clean(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Untrusted text for a message: no control characters or ANSI escapes, bounded."""
    flat = strip_control(text.replace("\r\n", "\n").replace("\r", "\n"))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Annotation:
    level: Level
    message: str
    title: str | None = None
    file: str | None = None
    line: int | None = None

    def command(self) -> str:
        props: dict[str, str | int | None] = {"file": self.file, "line": self.line}
        if self.title:
            props["title"] = clean(self.title, 200)
        return format_command(self.level, props, clean(self.message))


class Log:
    """The step's log (stdout): plain lines, annotations, groups, masked values."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def annotate(self, annotation: Annotation) -> None:
        self.line(annotation.command())

    def error(self, message: str, title: str | None = None) -> None:
        self.annotate(Annotation("error", message, title))

    def warning(self, message: str, title: str | None = None) -> None:
        self.annotate(Annotation("warning", message, title))

    def notice(self, message: str, title: str | None = None) -> None:
        self.annotate(Annotation("notice", message, title))

    def mask(self, value: str) -> None:
        """Ask the runner to hide ``value`` in the rest of the log (one line per line)."""
        for part in value.splitlines():
            if part.strip():
                self.line(f"::add-mask::{escape_data(part)}")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self.line(f"::group::{escape_data(clean(title, 200))}")
        try:
            yield
        finally:
            self.line("::endgroup::")

    @contextmanager
    def commands_stopped(self) -> Iterator[str]:
        """Nothing printed inside is read as a workflow command (until the token line)."""
        token = secrets.token_hex(16)
        self.line(f"::stop-commands::{token}")
        try:
            yield token
        finally:
            self.stream.flush()
            self.line(f"::{token}::")
