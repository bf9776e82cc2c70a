"""MCP servers as tool sources (``agent.mcp_servers``; SPEC 7; issue 22).

A suite's agent may reach tools through MCP servers next to its Python tools:
a stdio command or a streamable-HTTP URL per server, started per test case by
default (``scope: case``: a fresh process, or a fresh MCP session of a URL
server, so no conversation's state leaks into another) or once for the run
(``scope: run``). The suite file's model of ``agent.mcp_servers`` is
:mod:`multiturn_eval.suite.mcp_servers`; the modules here, in the order the data flows:

==============  ==============================================================
:mod:`.config`  :class:`McpServerConfig`, the frozen config a server runs with,
                and :func:`mcp_secrets` (no ``mcp`` import)
:mod:`.stdio`   a stdio server's process: minimal environment, process group,
                stderr tail, shutdown (imports ``mcp``)
:mod:`.server`  ``McpServer``: start, ``initialize``, tool list, calls, crashes,
                restarts (imports ``mcp``)
:mod:`.source`  ``McpTool``, ``offered_tools`` and ``McpServers``, the run's and
                the cases' servers and ToolSets (imports ``mcp`` when a server
                starts)
:mod:`.check`   ``check_servers``: what ``validate --mcp`` does
==============  ==============================================================

The ``mcp`` SDK is the ``[mcp]`` extra and is imported only when a server is
started, so a suite without ``mcp_servers`` never loads it.

Trust: a suite's MCP server is code from the repository, run with the runner's
rights (as the suite's Python tools are); it gets only ``PATH``, ``HOME``,
``LANG``, ``TMPDIR`` and its own ``env`` from the environment, and every value
of ``env`` and ``headers`` is redacted from every report.
"""

from .config import DEFAULT_STARTUP_TIMEOUT, PASSED_ENV, McpServerConfig, mcp_secrets

__all__ = ["DEFAULT_STARTUP_TIMEOUT", "PASSED_ENV", "McpServerConfig", "mcp_secrets"]
