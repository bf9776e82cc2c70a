"""The exception tree of multiturn-eval: every exception type the runner defines.

::

    MultiturnEvalError                  base of everything raised on purpose
    ├── ConfigError                     bad suite / CLI / environment input (exit 2)
    │     carries a list of ConfigIssue (file, line, test case, field path, message)
    ├── YamlSyntaxError                 a suite file is not YAML (the loader makes it a ConfigError)
    ├── InputError                      bad GitHub Action input (exit 2); a list of InputProblem
    ├── ReportFormatError               a report.json that cannot be read back (exit 2)
    ├── BackendError                    one agent call failed; says whether to retry
    │   ├── SessionError                the session may be broken (public API)
    │   │   └── McpServerCrashed        an MCP server died during a call (the turn fails)
    │   ├── TransientError              worth retrying (429, 529, 5xx, dropped connection)
    │   ├── FatalBackendError           nothing will work (bad API key): stop the run (exit 3)
    │   ├── FixtureMissError            a model call the fixtures do not answer (never sent live;
    │   │                               ``fixtures.cassette``, beside the ``Miss`` it carries)
    │   └── NotRegradable               regrade: the report holds no reply for this turn
    │                                   (raised by ``backends.replay``, a turn error)
    ├── TurnTimeout                     a turn ran past ``turn_timeout``
    ├── CaseReadError                   a test case of a ``test_cases_file`` could not be read
    │                                   again when it was about to run (the file changed or
    │                                   went away since loading): that case's error
    ├── FatalRunError                   carries a case's result out of the case runner when
    │                                   the whole run must stop (after a FatalBackendError;
    │                                   ``case_runner``, beside the result it carries)
    ├── ToolError                       the suite's Python tools
    │   ├── ToolDefinitionError         a callable cannot be a tool (a configuration error)
    │   ├── ToolClashError              two tools with one name (names both sources)
    │   ├── McpServerError              an MCP server did not start, answer initialize or
    │   │                               list valid tools (at load: exit 2; at a case's start:
    │   │                               that case's error)
    │   ├── ToolArgumentError           the model's arguments do not fit (the model is told)
    │   └── UnknownToolError            the model called a tool the suite does not offer
    ├── FixtureRefused                  a fixture not written: it would hold a secret
    ├── UserCodeAbort                   user code raised a BaseException that is not an
    │                                   error (sys.exit, KeyboardInterrupt): a turn error
    ├── JudgeConfigProblem              a judge: block unusable after merging its levels
    │                                   (also a ValueError; the loader makes it a located
    │                                   ConfigError, a direct caller a metric error)
    ├── VerdictProblem                  a judge's reply does not fit the verdict schema
    │                                   (``grading.judges.verdict``; a metric error)
    └── GitHubError                     the GitHub REST API refused or failed a request
        └── RateLimited                 ... because of a rate limit

    BaseException
    └── Interrupted                     SIGINT/SIGTERM while suites load (like KeyboardInterrupt:
                                        not an error; the run reports what it has, exit 3)

Internal, defined next to the one function that raises and the one that
catches them, never leaving their module: ``backends.wire.ReplyProblem`` (and
``ReplyTooLarge``; a reply that is not the API's shape, translated into a
``BackendError`` by ``backends.chat.translate`` and the http backend), ``backends.http._StatusError`` and
``_Shape`` (the same for the http backend), ``usercode._Carried`` (a
BaseException from a thread, carried to the awaiting task),
``fixtures.canonical._NotJson`` (NaN or Infinity in a body: not JSON, a ValueError
like any other parse failure), ``reports.reader._NotJSON`` (where the streaming
read of a report.json stops being JSON, made a ``ReportFormatError`` by its caller).

Every class is defined in this module unless the tree names another (``FatalRunError``
and ``FixtureMissError`` carry a result or a miss, types above this module: they are
defined beside them). This module imports nothing of the package: it is the bottom
rung, with :mod:`multiturn_eval.sanitize`, of the ladder ``errors``, ``sanitize`` ->
``types`` -> ``results`` (see :mod:`multiturn_eval.types`).

Only ``ConfigError`` and real bugs propagate out of a run: everything a backend
or a grader raises is turned into a value (an error string on the turn) by
:mod:`multiturn_eval.case_runner`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


class FixtureRefused(MultiturnEvalError):
    """A fixture that was not written because a value in it looks like a secret.

    ``file`` and ``line`` are where the entry would have been written, ``field``
    the JSON path inside it; the message never quotes the value.
    """

    def __init__(self, message: str, *, file: str, line: int, field: str) -> None:
        super().__init__(f"{file}:{line} {field}: {message}")
        self.file = file
        self.line = line
        self.field = field


class TurnTimeout(MultiturnEvalError):
    """A turn did not complete within ``turn_timeout`` seconds."""


class CaseReadError(MultiturnEvalError):
    """A test case of a ``test_cases_file`` that could not be read again when it was
    about to run: the file changed or went away since the suite was loaded. The case
    fails with this message; the others run."""


class YamlSyntaxError(MultiturnEvalError):
    """A suite file that YAML cannot parse; ``line`` is 1-based where known."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class InputProblem:
    """One bad GitHub Action input."""

    input: str
    message: str

    def __str__(self) -> str:
        return f"input '{self.input}': {self.message}"


class InputError(MultiturnEvalError):
    """The action's inputs are invalid (exit 2, one annotation per problem)."""

    def __init__(self, problems: list[InputProblem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class ReportFormatError(MultiturnEvalError):
    """A ``report.json`` that is not one this version can read (another major schema, not JSON)."""


class TransientError(BackendError):
    """A failure worth retrying; ``retry_after`` is the server's requested wait, if any."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, retryable=True, status_code=status_code)
        self.retry_after = retry_after


class ToolError(MultiturnEvalError):
    """Base of the errors about the tools offered to the model (Python and MCP)."""


class ToolDefinitionError(ToolError, ValueError):
    """A callable cannot be offered as a tool (reported as a configuration error)."""


class ToolArgumentError(ToolError, ValueError):
    """The model's arguments do not fit the tool's parameters (the model is told why)."""


class UnknownToolError(ToolError, LookupError):
    """The model called a tool the suite does not offer."""


class ToolClashError(ToolError, ValueError):
    """Two tools offered to the model have one name; the message names both sources."""


class McpServerError(ToolError):
    """An MCP server could not be used: it did not start, did not answer ``initialize``
    within its ``startup_timeout``, or listed tools that cannot be offered.

    ``server`` is the server's name, ``index`` its position in ``agent.mcp_servers``
    (to locate the error in the suite file), ``tool`` the tool at fault, if any.
    """

    def __init__(
        self, message: str, *, server: str, index: int | None = None, tool: str | None = None
    ) -> None:
        super().__init__(message)
        self.server = server
        self.index = index
        self.tool = tool
        self.errors: list[McpServerError] = [self]
        """Each failure on its own (several servers may fail at once)."""


class McpServerCrashed(SessionError):
    """An MCP server died (or its connection broke) during a call: the turn fails.

    The next call restarts it, once per crash; ``session_alive`` is False when it
    cannot be restarted or crashed twice in a row.
    """


class UserCodeAbort(MultiturnEvalError):
    """User code raised a BaseException that is not an error (sys.exit, KeyboardInterrupt, ...)."""


class NotRegradable(BackendError):
    """Regrade: a turn (or test case) the report holds no reply for; the session ends."""

    def __init__(self, message: str) -> None:
        super().__init__(message, session_alive=False)


class JudgeConfigProblem(MultiturnEvalError, ValueError):
    """A judge block that cannot be used after merging; ``field`` is the key at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class VerdictProblem(MultiturnEvalError):
    """A judge's reply does not fit the verdict schema; the message says why, with an excerpt."""


class Interrupted(BaseException):
    """A signal stopped the run outside the event loop (while loading suites)."""

    def __init__(self, signame: str) -> None:
        super().__init__(f"interrupted by {signame}")
        self.signame = signame


class GitHubError(MultiturnEvalError):
    """A GitHub REST API request failed; ``status`` is 0 when no HTTP answer came."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})

    @property
    def too_long(self) -> bool:
        return self.status == 422 and "too long" in self.message.lower()


class RateLimited(GitHubError):
    """GitHub's primary or secondary rate limit."""
