"""A real MCP server written with the mcp SDK, for the tests and the benchmark.

    python tests/mcp_servers/toolbox.py [--http PORT] [--mode MODE]

Over stdio by default; ``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp.
Modes: ``normal`` (the billing-style tools below), ``no-init`` (never answers
``initialize``), ``exit-at-start`` (exits 1 before it answers), ``bad-schema``
(one tool's inputSchema is not a JSON Schema), ``clash`` (a tool named like the
Python tools of the tests), ``dotted`` (a tool name a model cannot take),
``paged`` (seven tools, listed three a page), ``endless-pages`` (a cursor that
never ends).
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ACCOUNTS = {"A-1": 120.5, "A-2": 0.0, "A-3": 9876.25}
_counts: dict[object, int] = {}  # MCP session -> calls of increment (sessions kept: a test server)


def normal_server(port: int | None) -> Any:
    global Context, Image
    from mcp.server.fastmcp import Context, FastMCP, Image

    server = FastMCP("toolbox", port=port or 8000, log_level="WARNING")

    @server.tool()
    def get_balance(account_id: str) -> str:
        """The balance of an account, in EUR."""
        if account_id not in ACCOUNTS:
            raise ValueError(f"no account {account_id!r}")
        return f"{ACCOUNTS[account_id]:.2f} EUR"

    @server.tool()
    def refund(invoice_id: str, amount: float) -> str:
        """Refund part of an invoice."""
        return f"refunded {amount:.2f} EUR on {invoice_id}"

    @server.tool()
    def increment(ctx: Context) -> int:  # type: ignore[type-arg]
        """Count calls: 1 on the first call of a server process (or of an MCP session)."""
        # by the session object itself: an id() is reused once a closed session is collected,
        # and a new session then went on counting from the old one's calls
        _counts[ctx.session] = _counts.get(ctx.session, 0) + 1
        return _counts[ctx.session]

    @server.tool()
    def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        """Facts about this process (and the HTTP request's headers), as JSON."""
        headers: dict[str, str] = {}
        request = getattr(ctx.request_context, "request", None)
        if request is not None:
            headers = {k: v for k, v in request.headers.items() if k.startswith("x-")}
        return json.dumps(
            {
                "pid": os.getpid(),
                "pgid": os.getpgid(0),
                "env": dict(os.environ),
                "cwd": str(Path.cwd()),
                "headers": headers,
            }
        )

    @server.tool()
    def spawn_child() -> int:
        """Start a grandchild process that sleeps; its pid."""
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=False
        )
        return child.pid

    @server.tool()
    def crash() -> str:
        """Die in the middle of the call (first leaving TOOLBOX_CRASH_MARK, if set)."""
        mark = os.environ.get("TOOLBOX_CRASH_MARK")
        if mark:
            Path(mark).write_text("crashed")
        sys.stderr.write("toolbox: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool()
    async def hang() -> str:
        """Never answer."""
        await asyncio.sleep(3600)
        return "late"

    @server.tool()
    def slow(seconds: float) -> str:
        """Answer after some seconds."""
        time.sleep(seconds)
        return "slept"

    @server.tool()
    def flood(megabytes: int) -> str:
        """Write megabytes of lines to stderr, then answer."""
        line = ("e" * 99 + "\n").encode()
        for i in range(megabytes * 10486):
            os.write(2, line if i % 1000 else f"flood line {i}\n".encode())
        os.write(2, b"flood: the last line\n")
        return "flooded"

    @server.tool()
    def picture() -> Image:
        """A small PNG (content that is not text)."""
        return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 56, format="png")

    @server.tool()
    def huge(chars: int) -> str:
        """A result of this many characters."""
        return "x" * chars

    return server


def lowlevel_server(tools: list[Any], page_size: int = 0, endless: bool = False) -> Any:
    """The SDK's low-level server; with ``page_size`` its tool list comes in pages."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    server: Any = Server("toolbox")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    async def paged(request: types.ListToolsRequest | None) -> types.ServerResult:
        if request is None:  # the SDK's own look-up before a call: every tool
            return types.ServerResult(types.ListToolsResult(tools=tools))
        params = request.params
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + page_size
        more = endless or end < len(tools)
        return types.ServerResult(
            types.ListToolsResult(
                tools=tools[start % len(tools) : end] if not endless else tools[:1],
                nextCursor=str(end) if more else None,
            )
        )

    if page_size:  # registered as the handler itself: a cursor works with every 1.x server
        server.request_handlers[types.ListToolsRequest] = paged

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=f"{name} called")]

    return server


async def run_lowlevel(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--mode", default="normal")
    args = parser.parse_args()
    pid_file = os.environ.get("TOOLBOX_PID_FILE")
    if pid_file:  # where the tests find a server they cannot ask
        Path(pid_file).write_text(str(os.getpid()))
    if args.mode == "no-init":
        sys.stderr.write("toolbox: warming up a cache that never finishes\n")
        sys.stderr.flush()
        for _ in sys.stdin:  # read everything, answer nothing
            pass
        time.sleep(3600)
        return
    if args.mode == "exit-at-start":
        sys.stderr.write("toolbox: fatal: BILLING_DB is not set\n")
        sys.exit(1)
    if args.mode == "leaky-exit":  # its token, escapes and a workflow command, then exit
        token = os.environ.get("BILLING_TOKEN", "")
        sys.stderr.write(f"toolbox: connecting with token {token}\n")
        sys.stderr.write("\x1b[2J\x1b[31mtoolbox: red alert\x1b[0m\x07\n")
        sys.stderr.write("::error file=README.md,line=1::from the server's stderr\n")
        sys.exit(1)
    if args.mode in ("paged", "endless-pages"):
        import mcp.types as types

        many = [
            types.Tool(name=f"echo_{i}", description=f"Echo {i}.", inputSchema={"type": "object"})
            for i in range(7)
        ]
        server = lowlevel_server(many, page_size=3, endless=args.mode == "endless-pages")
        asyncio.run(run_lowlevel(server))
        return
    if args.mode in ("bool-props", "odd-dialect", "twice", "long-name"):
        import mcp.types as types

        def tool(name: str, **schema: Any) -> Any:
            return types.Tool(name=name, description=name, inputSchema={"type": "object", **schema})

        listed = {
            # JSON Schema's true (anything) and false (nothing) as property schemas
            "bool-props": [tool("anything", properties={"q": True, "never": False})],
            "odd-dialect": [tool("echo"), tool("odd", **{"$schema": ["draft-07"]})],
            "twice": [tool("search"), tool("search"), tool("echo")],  # a gateway's listing
            "long-name": [tool("echo"), tool("get_" + "x" * 53 + "_v2")],  # 60 characters
        }[args.mode]
        asyncio.run(run_lowlevel(lowlevel_server(listed)))
        return
    if args.mode in ("bad-schema", "clash", "dotted"):
        import mcp.types as types

        good = types.Tool(
            name="echo", description="Echo.", inputSchema={"type": "object", "properties": {}}
        )
        other = {
            "bad-schema": types.Tool(
                name="broken",
                description="Its schema is not JSON Schema.",
                inputSchema={"type": "object", "properties": {"n": {"type": "integr"}}},
            ),
            "clash": types.Tool(
                name="lookup", description="Clashes.", inputSchema={"type": "object"}
            ),
            "dotted": types.Tool(
                name="billing.lookup", description="A dotted name.", inputSchema={"type": "object"}
            ),
        }[args.mode]
        asyncio.run(run_lowlevel(lowlevel_server([good, other])))
        return
    mark = os.environ.get("TOOLBOX_CRASH_MARK")
    if mark and Path(mark).exists():  # started again after a crash: refuse
        sys.stderr.write("toolbox: refusing to start after a crash\n")
        sys.exit(2)
    server = normal_server(args.http)
    if args.http is not None:
        server.run(transport="streamable-http")
    else:
        server.run(transport="stdio")


if __name__ == "__main__":
    main()
