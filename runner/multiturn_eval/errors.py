"""The exception tree of multiturn-eval.

::

    MultiturnEvalError                  base of everything raised on purpose
    ├── ConfigError                     bad suite / CLI / environment input (exit 2)
    │     carries a list of ConfigIssue (file, line, test case, field path, message)
    ├── BackendError                    one agent call failed; says whether to retry
    │   ├── SessionError                the session may be broken (public API)
    │   └── FatalBackendError           nothing will work (bad API key): stop the run (exit 3)
    └── TurnTimeout                     a turn ran past ``turn_timeout``

Only ``ConfigError`` and real bugs propagate out of a run: everything a backend
or a grader raises is turned into a value (an error string on the turn) by
:mod:`multiturn_eval.session`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class MultiturnEvalError(Exception):
    """Base class of every error multiturn-eval raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One configuration problem, located as precisely as the input allows."""

    message: str
    file: str | None = None
    line: int | None = None
    test_case: str | None = None
    """Rendered as ``test_cases[3] ("name")``; None when not inside a test case."""
    field: str | None = None
    """The path inside the test case (or the whole path when outside one)."""

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        parts = [p for p in (self.test_case, self.field) if p]
        loc = " ".join(parts)
        if where and loc:
            return f"{where} {loc}: {self.message}"
        if where or loc:
            return f"{where or loc}: {self.message}"
        return self.message


class ConfigError(MultiturnEvalError):
    """Invalid configuration, detected before any agent is called (exit code 2)."""

    def __init__(self, issues: ConfigIssue | str | Iterable[ConfigIssue]) -> None:
        if isinstance(issues, str):
            issues = [ConfigIssue(issues)]
        elif isinstance(issues, ConfigIssue):
            issues = [issues]
        self.issues: list[ConfigIssue] = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))

    @classmethod
    def merge(cls, errors: Sequence[ConfigError]) -> ConfigError:
        return cls([issue for err in errors for issue in err.issues])


class BackendError(MultiturnEvalError):
    """An agent call failed.

    ``retryable``: the same request may succeed later (429, 529, 5xx, dropped
    connection); the backend's retry policy has already been applied when this
    reaches the engine. ``session_alive``: False when the backend knows the
    session cannot take another turn.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        session_alive: bool = True,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.session_alive = session_alive
        self.status_code = status_code


class SessionError(BackendError):
    """A turn failed in a way that may have broken the session.

    Raise it from your own agent (``python`` backend) to signal trouble with the
    session; two in a row, or one with ``session_alive=False``, end the test
    case and mark its remaining turns as skipped.
    """


class FatalBackendError(BackendError):
    """A failure no other test case can escape (authentication, permissions).

    The run stops starting new test cases and exits 3 with this message.
    """


class TurnTimeout(MultiturnEvalError):
    """A turn did not complete within ``turn_timeout`` seconds."""
