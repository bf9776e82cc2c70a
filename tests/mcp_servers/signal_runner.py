"""Runs MCP servers the way a run does, until SIGTERM or SIGINT stops it mid-call.

    python tests/mcp_servers/signal_runner.py

The real InterruptGuard owns the signals and cancels the run's task (as
``run.py`` wires it); two test cases' servers (``scope: case``) and a shared one
(``scope: run``) each spawn a grandchild, then every case hangs in a tool call.
Prints one JSON line with every process id, then waits to be stopped. The test
checks that none of those processes is left once this one has exited.

With ``SIGNAL_RUNNER_STALL=1`` the event loop blocks once the run is stopped (a
stuck sync close): the guard's watchdog then ends the process with ``os._exit``,
which skips ``atexit`` but not the hook that kills the server groups.
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from multiturn_eval.interrupts import InterruptGuard
from multiturn_eval.tools import ToolSet
from multiturn_eval.tools.mcp_servers.config import McpServerConfig
from multiturn_eval.tools.mcp_servers.source import McpServers

TOOLBOX = Path(__file__).with_name("toolbox.py")


def config(scope: str) -> McpServerConfig:
    return McpServerConfig(
        name=f"toolbox-{scope}", command=sys.executable, args=(str(TOOLBOX),), scope=scope
    )


async def run(guard: InterruptGuard) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    guard.on_stop = lambda: loop.call_soon_threadsafe(task.cancel)
    guard.ping = lambda callback: loop.call_soon_threadsafe(callback)
    env = dict(os.environ)
    shared = McpServers([config("run")], env=env)
    per_case = McpServers([config("case")], env=env)
    run_tools = await shared.start(ToolSet())
    await per_case.start(ToolSet())
    cases = [await per_case.open_case() for _ in range(2)]
    try:
        toolsets = [run_tools, *(case.toolset for case in cases)]
        children = [(await t.call("spawn_child", {})).content for t in toolsets]
        pids = [s.pid for s in shared.run_servers] + [s.pid for c in cases for s in c.servers]
        print(json.dumps({"servers": pids, "children": [int(c) for c in children]}), flush=True)
        await asyncio.gather(*(t.call("hang", {}) for t in toolsets))
    finally:  # as the case runner and the run do: each case closes, then the run
        if os.environ.get("SIGNAL_RUNNER_STALL"):
            time.sleep(60)  # noqa: ASYNC251 - blocks the loop: only the watchdog can end the process
        for case in cases:
            await case.aclose()
        await per_case.aclose()
        await shared.aclose()


def main() -> None:
    guard = InterruptGuard()
    guard.install()
    guard.enter("running")
    try:
        asyncio.run(run(guard))
    except asyncio.CancelledError:
        print("stopped", flush=True)
    finally:
        guard.uninstall()
    sys.exit(3)


if __name__ == "__main__":
    main()
