"""MCP tool calls: the runner's cost per call, and a server's start per test case.

    python bench/mcp.py                       # 2,000 calls per kind, 20 case starts, 3 runs
    python bench/mcp.py --calls 500 --starts 5 --repeats 1

The server is ``tests/mcp_servers/toolbox.py`` (FastMCP, the SDK's own server) over
stdio, ``scope: run`` (one process for every call); the tool is ``get_balance``,
which looks a number up in a dict. Per run, in this process, sequentially:

* **python**: the same lookup as a Python tool, through ``ToolSet.call`` (argument
  validation, the thread pool, the invocation record, the result cap);
* **mcp**: ``get_balance`` on the server through ``ToolSet.call`` (the McpTool,
  the server manager's race with the server's end, the SDK's ClientSession, our
  stdio pumps, the server's work);
* **sdk**: the same call with the SDK alone (``stdio_client`` + ``ClientSession``
  + ``call_tool``), no runner: the floor the SDK and the server set.

Each gives wall ms per call (median over the calls, and mean) and this process's
CPU ms per call (the server's CPU is its own process's). The numbers the issue
asks for: **mcp - python** (what an MCP call costs over a direct Python tool
call; target <= 2 ms) and **mcp - sdk** (the runner's own share on top of the
SDK). Then **case start**: ``McpServers.open_case`` + ``CaseTools.aclose`` for a
``scope: case`` stdio server (process start, ``initialize``, tool list, and its
shutdown), per case. Numbers go in ``bench/README.md`` ("MCP servers"); nothing
here is asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# run as a script, this file's folder comes first on sys.path, and this file is "mcp" there
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT / "runner"))

from multiturn_eval.tools import Tool, ToolSet  # noqa: E402
from multiturn_eval.tools.mcp_servers.config import McpServerConfig  # noqa: E402
from multiturn_eval.tools.mcp_servers.source import McpServers  # noqa: E402

TOOLBOX = ROOT / "tests" / "mcp_servers" / "toolbox.py"
ACCOUNTS = {"A-1": 120.5, "A-2": 0.0, "A-3": 9876.25}


def get_balance(account_id: str) -> str:
    """The balance of an account, in EUR."""
    return f"{ACCOUNTS[account_id]:.2f} EUR"


def config(scope: str) -> McpServerConfig:
    return McpServerConfig(
        name="billing", command=sys.executable, args=(str(TOOLBOX),), scope=scope, cwd=ROOT
    )


async def timed(calls: int, call: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    for _ in range(min(100, calls)):  # warm-up
        await call()
    walls = []
    cpu0 = time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        await call()
        walls.append((time.perf_counter() - t0) * 1000)
    cpu = (time.process_time() - cpu0) * 1000 / calls
    return {
        "median_ms": statistics.median(walls),
        "mean_ms": statistics.fmean(walls),
        "p95_ms": sorted(walls)[int(len(walls) * 0.95)],
        "cpu_ms": cpu,
    }


async def one_run(calls: int, starts: int) -> dict[str, Any]:
    env = dict(os.environ)
    args = {"account_id": "A-3"}
    python = ToolSet([Tool.from_function(get_balance)])
    out: dict[str, Any] = {"python": await timed(calls, lambda: python.call("get_balance", args))}
    await python.aclose()

    servers = McpServers([config("run")], env=env)
    toolset = await servers.start(ToolSet())
    outcome = await toolset.call("get_balance", args)
    assert outcome.content == "9876.25 EUR", outcome
    out["mcp"] = await timed(calls, lambda: toolset.call("get_balance", args))
    await servers.aclose()

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(TOOLBOX)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        out["sdk"] = await timed(calls, lambda: session.call_tool("get_balance", args))

    per_case = McpServers([config("case")], env=env)
    await per_case.start(ToolSet())
    opens, closes = [], []
    for _ in range(starts):
        t0 = time.perf_counter()
        case = await per_case.open_case()
        t1 = time.perf_counter()
        await case.aclose()
        opens.append((t1 - t0) * 1000)
        closes.append((time.perf_counter() - t1) * 1000)
    out["case_start"] = {
        "open_median_ms": statistics.median(opens),
        "close_median_ms": statistics.median(closes),
        "startup_ms_reported": case.starts[0].startup_ms,
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = [asyncio.run(one_run(args.calls, args.starts)) for _ in range(args.repeats)]
    for i, result in enumerate(runs, 1):
        python, mcp, sdk = result["python"], result["mcp"], result["sdk"]
        print(
            f"run {i}: per call median ms  python {python['median_ms']:.3f}  mcp {mcp['median_ms']:.3f}"
            f"  sdk {sdk['median_ms']:.3f}  | mcp-python {mcp['median_ms'] - python['median_ms']:.3f}"
            f"  mcp-sdk {mcp['median_ms'] - sdk['median_ms']:.3f}"
        )
        print(
            f"       mean ms  python {python['mean_ms']:.3f}  mcp {mcp['mean_ms']:.3f}  sdk "
            f"{sdk['mean_ms']:.3f};  p95 mcp {mcp['p95_ms']:.3f} sdk {sdk['p95_ms']:.3f}"
        )
        print(
            f"       CPU ms/call (this process)  python {python['cpu_ms']:.3f}  mcp {mcp['cpu_ms']:.3f}"
            f"  sdk {sdk['cpu_ms']:.3f}"
        )
        start = result["case_start"]
        print(
            f"       case start (scope: case, stdio)  open {start['open_median_ms']:.0f} ms"
            f"  close {start['close_median_ms']:.0f} ms  (startup_ms reported "
            f"{start['startup_ms_reported']:.0f})"
        )
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
