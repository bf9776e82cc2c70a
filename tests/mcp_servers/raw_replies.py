"""An MCP server written by hand (no SDK), whose replies to ``tools/call`` are broken on purpose.

    python raw_replies.py MODE              # over stdio
    python raw_replies.py MODE --http PORT  # streamable HTTP on 127.0.0.1:PORT

It answers ``initialize`` and ``tools/list`` (one tool, ``city``) well, then answers
the call as MODE says: what real servers send that the SDK's parser refuses.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: MODE -> the bytes of the answer to tools/call (``{id}`` is the request's id)
CALL_REPLIES: dict[str, bytes] = {
    # a server writing Latin-1: "Malmö" with the byte 0xF6
    "latin1": b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"Malm\xf6"}]}}',
    # a Node.js server cutting a string in the middle of an emoji (JSON.stringify escapes it)
    "surrogate": (
        b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"Great \\ud83d"}]}}'
    ),
    # an answer to the request that is not JSON-RPC's shape (error is not an object)
    "bad-error": b'{"jsonrpc":"2.0","id":{id},"error":"the upstream API is down"}',
    # a log line on stdout first, then the real answer
    "log-line": (
        b"starting the city lookup...\n"
        b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"Oslo"}]}}'
    ),
}


def answer(message: dict[str, Any]) -> bytes | None:
    ident, method = message.get("id"), message.get("method")
    if ident is None:  # a notification
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-replies", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "city", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        return CALL_REPLIES.get(MODE, b"").replace(b"{id}", json.dumps(ident).encode())
    else:
        result = {}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        body = answer(message)
        if body is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        kind = "application/json"
        if message.get("method") == "tools/call" and MODE == "html":  # a proxy's error page
            body, kind = b"<html><body>502 Bad Gateway</body></html>", "text/html"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.send_header("mcp-session-id", "raw-1")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def main() -> None:
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
        return
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        body = answer(json.loads(line))
        if body is not None:
            sys.stdout.buffer.write(body + b"\n")
            sys.stdout.buffer.flush()


MODE = sys.argv[1] if len(sys.argv) > 1 else "log-line"

if __name__ == "__main__":
    main()
