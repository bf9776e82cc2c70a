"""``agent.mcp_servers``: the MCP servers whose tools are offered next to ``agent.tools``.

The agent models of the ``anthropic``, ``openai`` and ``semantic-kernel``
backends take ``mcp_servers: McpServerList`` (:mod:`.agents`); what runs a server
is :mod:`multiturn_eval.tools.mcp_servers` (this module imports only its config).

Rules (each a located error, through :func:`.common.at_path`):
a name (``^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$``) unique in the suite; exactly one
of ``command`` (stdio) and ``url`` (streamable HTTP); ``args``, ``env`` and
``cwd`` only with ``command``, ``headers`` only with ``url``; no name twice in
the ``tools`` allow-list; positive timeouts. ``${VAR}`` in any value is
substituted by the loader before validation, and every value of ``env`` and
``headers`` is a secret (:func:`.config.mcp_secrets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ..tools.mcp_servers.config import (
    DEFAULT_STARTUP_TIMEOUT,
    SERVER_NAME,
    McpServerConfig,
    Scope,
)
from .common import URL_PATTERN, ScalarText, at_path


class McpServerSpec(BaseModel):
    """One MCP server whose tools are offered to the model next to the Python tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=SERVER_NAME,
        description="Unique in the suite; reports say which server served a call.",
    )
    command: str | None = Field(
        default=None, min_length=1, description="stdio: the program to start."
    )
    args: list[ScalarText] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, ScalarText] = Field(
        default_factory=dict,
        description="stdio: added to PATH, HOME, LANG and TMPDIR (nothing else is passed); "
        "every value is treated as a secret.",
    )
    cwd: str | None = Field(
        default=None, description="stdio: working directory, relative to the suite file."
    )
    url: str | None = Field(
        default=None, pattern=URL_PATTERN, description="Streamable HTTP: the MCP endpoint."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Streamable HTTP: sent with every request; every value is treated as a secret.",
    )
    tools: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None, description="Allow-list: offer only these of the server's tools."
    )
    scope: Scope = Field(
        default="case",
        description="case: one server (or MCP session) per test case; run: one for the run.",
    )
    startup_timeout: float = Field(
        default=DEFAULT_STARTUP_TIMEOUT,
        gt=0,
        description="Seconds to start, answer initialize and list the tools.",
    )
    call_timeout: float | None = Field(
        default=None, gt=0, description="Seconds one call may take; default: the turn's time left."
    )

    @model_validator(mode="after")
    def _check(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise at_path(
                ("command",) if self.command is not None else ("url",),
                "give exactly one of 'command' (a stdio server) and 'url' (streamable HTTP)",
            )
        if self.url is not None:
            for key in ("args", "env", "cwd"):
                if key in self.model_fields_set:
                    raise at_path((key,), "applies to a stdio server ('command:') only")
        elif "headers" in self.model_fields_set:
            raise at_path(("headers",), "applies to a streamable HTTP server ('url:') only")
        if self.tools is not None:
            seen: dict[str, int] = {}
            for i, name in enumerate(self.tools):
                if name in seen:
                    raise at_path(
                        ("tools", i), f"{name!r} is already listed at tools[{seen[name]}]"
                    )
                seen[name] = i
        return self

    def config(self, base_dir: Path, index: int | None = None) -> McpServerConfig:
        """The config to run: ``cwd`` relative to ``base_dir`` (the suite file's directory)."""
        cwd: Path | None = None
        if self.command is not None:
            cwd = base_dir / self.cwd if self.cwd is not None else base_dir
        return McpServerConfig(
            name=self.name,
            command=self.command,
            args=tuple(self.args),
            env=MappingProxyType(dict(self.env)),
            cwd=cwd,
            url=self.url,
            headers=MappingProxyType(dict(self.headers)),
            tools=tuple(self.tools) if self.tools is not None else None,
            scope=self.scope,
            startup_timeout=self.startup_timeout,
            call_timeout=self.call_timeout,
            index=index,
        )


def _unique_names(servers: list[McpServerSpec]) -> list[McpServerSpec]:
    seen: dict[str, int] = {}
    for i, server in enumerate(servers):
        if server.name in seen:
            raise at_path(
                (i, "name"),
                f"MCP server name {server.name!r} is already used by mcp_servers[{seen[server.name]}]; "
                "give one of them a distinct 'name:'",
            )
        seen[server.name] = i
    return servers


McpServerList = Annotated[list[McpServerSpec], AfterValidator(_unique_names)]
"""``agent.mcp_servers``: the servers, their names unique."""


def server_configs(specs: Sequence[McpServerSpec], base_dir: Path) -> list[McpServerConfig]:
    """Every spec as the config to run, located by its position."""
    return [spec.config(base_dir, i) for i, spec in enumerate(specs)]
