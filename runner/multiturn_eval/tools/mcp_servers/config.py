"""One MCP server as the manager runs it: a frozen config (paths resolved, ``${VAR}`` substituted).

No ``mcp`` import and no ``suite`` import here: ``suite.py`` may import this module.
The suite file's model of ``agent.mcp_servers`` is :mod:`multiturn_eval.suite.mcp_servers`. Every value of
``env`` and ``headers`` is a secret (:func:`mcp_secrets`): the loader adds them to
the suite's secrets, so no report, log or comment shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol

from ...secrets import is_secret_value

#: an MCP server's name: it prefixes nothing the model sees, but names the server in reports
SERVER_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
#: ``startup_timeout`` when the suite gives none: start, ``initialize`` and the tool list
DEFAULT_STARTUP_TIMEOUT = 20.0
#: the variables of the runner's environment a stdio server gets (plus its own ``env``)
PASSED_ENV = ("PATH", "HOME", "LANG", "TMPDIR")

Scope = Literal["case", "run"]


class HasSecrets(Protocol):
    """A server's ``env`` and ``headers`` (a :class:`McpServerConfig` or the suite's spec)."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server as the manager starts it (paths resolved, ``${VAR}`` substituted).

    Exactly one of ``command`` (stdio) and ``url`` (streamable HTTP) is set.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    """Added to :data:`PASSED_ENV` from the runner's environment; nothing else is passed."""
    cwd: Path | None = None
    """The server's working directory (from a suite: ``cwd`` relative to the suite file,
    else the suite file's directory; None: the runner's)."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=_empty)
    tools: tuple[str, ...] | None = None
    """The allow-list: only these of the server's tools are offered (None: all)."""
    scope: Scope = "case"
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float | None = None
    """Seconds one call may take (None: the turn's time left)."""
    index: int | None = None
    """Position in ``agent.mcp_servers`` (to locate an error in the suite file)."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command and url")

    @property
    def transport(self) -> Literal["stdio", "streamable-http"]:
        return "stdio" if self.command is not None else "streamable-http"

    @property
    def field(self) -> str:
        """``agent.mcp_servers[i]`` (or the name when the position is unknown)."""
        return f"agent.mcp_servers[{self.index}]" if self.index is not None else self.name

    def describe(self) -> str:
        """``'billing' (stdio: python -m billing_server)``: no env or header values."""
        if self.command is not None:
            shown = " ".join([self.command, *self.args])
            if len(shown) > 120:
                shown = shown[:119] + "…"
            return f"{self.name!r} (stdio: {shown})"
        return f"{self.name!r} (streamable HTTP: {self.url})"


def mcp_secrets(servers: Iterable[HasSecrets]) -> set[str]:
    """Every value of the servers' ``env`` and ``headers``: secrets for the redactor."""
    out: set[str] = set()
    for server in servers:
        values: list[Any] = [*server.env.values(), *server.headers.values()]
        out.update(v.strip() for v in values if isinstance(v, str) and is_secret_value(v))
    return out
