"""A bare MCP stdio server (the standard library only: it starts in milliseconds).

    python tests/mcp_servers/bare.py [--init-delay SECONDS]

``--init-delay`` sleeps before it answers ``initialize`` (a slow cold start); its one
tool, ``hang``, never answers. With ``BARE_PID_FILE`` set it writes its pid there first.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--init-delay", type=float, default=0.0)
    args = parser.parse_args()
    pid_file = os.environ.get("BARE_PID_FILE")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    for line in sys.stdin:
        message = json.loads(line)
        ident, method = message.get("id"), message.get("method")
        if ident is None:
            continue
        if method == "initialize":
            time.sleep(args.init_delay)
            version = message["params"]["protocolVersion"]
            info = {"name": "bare", "version": "0"}
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            tool = {
                "name": "hang",
                "description": "Never answer.",
                "inputSchema": {"type": "object"},
            }
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [tool]}})
        elif method == "tools/call":
            time.sleep(3600)
        else:
            send({"jsonrpc": "2.0", "id": ident, "result": {}})


if __name__ == "__main__":
    main()
