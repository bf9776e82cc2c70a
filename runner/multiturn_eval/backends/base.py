"""The backend protocol: open a session, send turns, close.

A backend is created once per suite from its ``agent:`` block; it opens one
session per test case. Sessions keep the conversation state between turns.

Backends translate their SDK's exceptions into :class:`BackendError` (and its
subclasses) in one place each, saying whether the call may be retried and
whether the session survived. The engine treats anything else a session raises
as a turn error too, so a bug in a user's agent fails one turn, not the run.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from ..errors import ConfigError, ConfigIssue, McpServerError
from ..pricing import agent_provider, price_for
from ..retry import RetryPolicy, Sleep
from ..suite import AnthropicAgent, OpenAIAgent, SemanticKernelAgent
from ..tools import ToolSet
from ..types import CaseContext, TurnFile, TurnReply

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..loaded import LoadedSuite
    from ..settings import RunSettings
    from ..tools.mcp_servers.source import CaseTools, McpServers, ServerStart


@runtime_checkable
class Session(Protocol):
    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply: ...

    async def close(self) -> None: ...


class Backend(Protocol):
    """Built once per suite. A backend does not change the suite it is given: what it
    adds to the run is in ``secrets`` (values to redact everywhere, e.g. an API key
    read from the environment) and ``warnings`` (said once at the start)."""

    name: str
    secrets: set[str]
    warnings: list[str]

    async def open_session(self, case: CaseContext) -> Session: ...

    async def aclose(self) -> None:
        """Release what the backend holds (HTTP clients, thread pools) at the end of the run."""
        ...


class CaseSession:
    """What a model backend's session holds for its test case: the case and the case's
    own MCP servers (``scope: case``; None: it has none), ended with the session."""

    def __init__(self, case: CaseContext, tools: CaseTools | None) -> None:
        self.case = case
        self._tools = tools

    async def end_tools(self) -> None:
        if self._tools is not None:
            await self._tools.aclose()


ModelAgent = AnthropicAgent | OpenAIAgent | SemanticKernelAgent

#: the API key a backend's SDK client is built with when the fixtures answer every call
#: (replay, update) and no key is set: never sent (a replayed request leaves nothing)
NO_KEY_REPLAY = "no-key-fixtures-replay"


class ModelBackend:
    """What the model backends (``anthropic``, ``openai``, ``semantic-kernel``) share when built.

    ``ModelBackend(suite, settings, env=None, sleep=None)``: the secrets and
    warnings the backend adds, the environment as read once at start-up (or
    ``env``), the suite's tools, the capped retry policy of ``agent.retry``
    (``sleep``: the tests' clock) and the model's price; then the backend's own
    :meth:`setup` (its keys, files and client).

    The tools (:attr:`tools`) are the suite's Python tools plus, once
    :meth:`start_tools` has run (in the run's event loop, before any agent
    call), the tools of its ``scope: run`` MCP servers. A test case with
    ``scope: case`` servers gets its own set (:meth:`open_tools`: the run's tools
    plus its own servers', closed with its session); :meth:`use_tools` is the
    backend's hook to offer a set to the model.
    """

    name: str
    agent_type: ClassVar[type[ModelAgent]]
    """The ``agent:`` block this backend runs (the loader has checked it is this one)."""
    agent: ModelAgent
    """The suite's ``agent:`` block (a subclass narrows the type)."""

    def __init__(
        self,
        suite: LoadedSuite,
        settings: RunSettings,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        agent = suite.suite.agent
        assert isinstance(agent, self.agent_type)
        self.agent = agent
        self.secrets: set[str] = set()
        """What this backend adds to the run's secrets (its API key)."""
        self.warnings: list[str] = []
        """Said once at the start of the run (a deprecated model)."""
        self.turn_timeout = settings.turn_timeout
        self.loaded = suite
        self.python_tools = ToolSet.from_loaded(
            suite,
            max_workers=max(4, settings.parallel_test_cases),
            max_result_chars=agent.max_tool_result_chars,
        )
        self.tools = self.python_tools
        """The tools every test case is offered (the run's MCP servers' too, once started)."""
        self.policy = RetryPolicy(agent.retry, sleep=sleep)
        self.price = price_for(agent.model, suite.suite.pricing, provider=agent_provider(agent))
        self.max_tool_rounds = agent.max_tool_rounds
        self.max_tokens = agent.max_tokens
        self.fixtures = settings.fixtures
        """The suite's fixtures mode (:mod:`multiturn_eval.fixtures`)."""
        self.fixtures_live = True
        """A live call is possible (False: no API key, which replay and update allow)."""
        # the environment as read once at start-up (empty: built outside the CLI)
        env = settings.env if env is None else env
        self.mcp: McpServers | None = None
        """The suite's MCP servers (None: it has none)."""
        self._started = False
        if agent.mcp_servers:
            from ..suite import server_configs
            from ..tools.mcp_servers.source import McpServers

            self.mcp = McpServers(server_configs(agent.mcp_servers, suite.base_dir), env=env)
        self.setup(suite, settings, env)

    def setup(self, suite: LoadedSuite, settings: RunSettings, env: Mapping[str, str]) -> None:
        """The backend's own checks and clients (a ConfigError for a suite it cannot run)."""
        raise NotImplementedError

    def key_optional(self) -> bool:
        """No API key is needed to build this backend: the fixtures answer its calls.

        Replay never calls live; update records only what misses and says a key is
        needed on such a miss. The backend then runs with ``fixtures_live`` False and a
        placeholder key that never leaves the process.
        """
        if self.fixtures in ("replay", "update"):
            self.fixtures_live = False
            return True
        return False

    # ------------------------------------------------------------------- MCP servers

    async def start_tools(self) -> None:
        """Start the ``scope: run`` MCP servers (all at once) and offer their tools.

        Raises :class:`~multiturn_eval.errors.McpServerError` (every failure in its
        ``errors``) with no server left running; the run makes it a configuration error.
        """
        if self.mcp is None or self._started:
            return
        self.tools = await self.mcp.start(self.python_tools)
        self._started = True
        if self.tools is not self.python_tools:
            self.use_tools(self.tools)

    async def open_tools(self) -> CaseTools | None:
        """A test case's own tools when it has ``scope: case`` servers (None: :attr:`tools`).

        Raises :class:`~multiturn_eval.errors.McpServerError` (the case's error, with the
        server's last stderr lines) with none of its servers left.
        """
        if self.mcp is None:
            return None
        if not self._started:
            raise RuntimeError("start_tools() comes before the first session of a suite")
        if not self.mcp.has_case_servers:
            return None
        return await self.mcp.open_case(self.tools)

    def use_tools(self, toolset: ToolSet) -> None:
        """Offer ``toolset`` to the model from now on (after the run's servers started)."""
        raise NotImplementedError

    def server_starts(self) -> list[ServerStart]:
        """How the suite's MCP servers were started so far (for ``run.mcp_servers``)."""
        return self.mcp.starts() if self.mcp is not None else []

    async def close_tools(self) -> None:
        """End the run's MCP servers and the Python tools' thread pool."""
        try:
            if self.mcp is not None:
                await self.mcp.aclose()
        finally:
            await self.python_tools.aclose()


async def start_tool_servers(backends: Sequence[Backend]) -> None:
    """Start every suite's ``scope: run`` MCP servers, all at once, before any agent call.

    A server that does not start (or lists tools that cannot be offered) is a
    :class:`ConfigError` located at its ``agent.mcp_servers[i]``, every failure of
    every suite at once; the servers that did start are left to the backends'
    ``aclose`` (the caller's, as after a run).
    """
    import asyncio

    from ..tools.mcp_servers.check import server_issues

    model = [b for b in backends if isinstance(b, ModelBackend) and b.mcp is not None]
    outcomes = await asyncio.gather(*(b.start_tools() for b in model), return_exceptions=True)
    issues: list[ConfigIssue] = []
    for backend, outcome in zip(model, outcomes, strict=True):
        if isinstance(outcome, McpServerError):
            issues.extend(server_issues(backend.loaded, outcome))
        elif isinstance(outcome, ConfigError):
            issues.extend(outcome.issues)
        elif isinstance(outcome, BaseException):
            raise outcome
    if issues:
        raise ConfigError(issues)


#: backend name -> (module, class) — imported only when a suite uses it
_REGISTRY = {
    "python": ("multiturn_eval.backends.python", "PythonBackend"),
    "http": ("multiturn_eval.backends.http", "HttpBackend"),
    "anthropic": ("multiturn_eval.backends.anthropic", "AnthropicBackend"),
    "semantic-kernel": ("multiturn_eval.backends.semantic_kernel", "SemanticKernelBackend"),
    "openai": ("multiturn_eval.backends.openai", "OpenAIBackend"),
}

#: the pip command that brings a backend's optional dependencies
INSTALL_HINTS = {
    "semantic-kernel": "pip install 'multiturn-eval[semantic-kernel]'",
    "anthropic": "pip install 'anthropic>=2'",
    "openai": "pip install 'multiturn-eval[openai]'",
}


def backend_issue(suite: LoadedSuite) -> ConfigIssue | None:
    """A configuration issue when the suite's backend cannot be imported here."""
    name = suite.suite.agent.backend
    missing = missing_packages(name)
    if not missing:
        return None
    hint = INSTALL_HINTS.get(name, "")
    return ConfigIssue(
        f"backend '{name}' needs the package '{missing[0]}', which is not installed"
        + (f"; install it with: {hint}" if hint else ""),
        file=suite.display_path,
        line=suite.document.line_of(("agent", "backend")),
        field="agent.backend",
    )


def create_backend(suite: LoadedSuite, settings: RunSettings) -> Backend:
    """Import the backend a suite names (lazily) and build it."""
    issue = backend_issue(suite)
    if issue is not None:
        raise ConfigError(issue)
    module_name, class_name = _REGISTRY[suite.suite.agent.backend]
    backend_class = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = backend_class(suite, settings)
    return backend


#: backend name -> the top-level modules it imports
_REQUIRES = {
    "anthropic": ("anthropic",),
    "semantic-kernel": ("semantic_kernel", "openai"),
    "openai": ("openai",),
}


def missing_packages(backend: str) -> list[str]:
    """Modules a backend needs that are not installed (checked without importing them)."""
    return [m for m in _REQUIRES.get(backend, ()) if importlib.util.find_spec(m) is None]
