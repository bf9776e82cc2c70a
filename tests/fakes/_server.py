"""A small scriptable HTTP server on 127.0.0.1 for the fake services in the tests.

Subclass :class:`FakeServer` and override :meth:`FakeServer.check` (what the
real service rejects before looking at the script: auth, bad requests) and
:meth:`FakeServer.render` (turn a domain reply, e.g. an Anthropic message,
into a :class:`Response`). Replies come from a queue (:meth:`FakeServer.script`)
and, when it is empty, from a ``responder(request) -> reply`` function, so
concurrent sessions can get answers that depend on their own request.

Generic replies every fake understands: :class:`Response` (anything, verbatim),
:class:`Slow` (wait, then answer: slower than a client timeout), :class:`Drop`
(read the request, close the connection without a response) and
:class:`Malformed` (a 200 whose body is not JSON). Every request is recorded
in :attr:`FakeServer.requests`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    """One request as the server received it."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Lower-cased names."""
    raw: bytes
    body: Any
    """The JSON body, or None when it is not JSON."""


@dataclass(frozen=True)
class Response:
    """An HTTP response, sent as given (``body`` not bytes/str is sent as JSON)."""

    status: int = 200
    body: Any = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


@dataclass(frozen=True)
class Slow:
    """Wait ``seconds`` (a client timeout should fire first), then send ``then``."""

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class Drop:
    """Read the request, then close the connection without a response."""


@dataclass(frozen=True)
class Malformed:
    """A 200 whose body is not JSON (cut off mid-way)."""

    text: str = '{"id": "broken", "content": ['
    content_type: str = "application/json"


Responder = Callable[[Request], Any]


class FakeServer:
    """A threaded HTTP server on a random port. Use as a context manager."""

    name = "fake"

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[Request] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ scripting

    def script(self, *replies: Any) -> None:
        """Queue replies, answered one per request in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # ----------------------------------------------------------------- subclassing

    def check(self, request: Request) -> Any | None:
        """A reply for a request the real service would reject up front, else None."""
        return None

    def render(self, reply: Any, request: Request) -> Response | Slow | Drop:
        """Turn a domain reply into a generic one; the base knows only the generic ones."""
        if isinstance(reply, Malformed):
            return Response(200, reply.text, content_type=reply.content_type)
        if isinstance(reply, Response | Slow | Drop):
            return reply
        raise TypeError(f"{type(self).__name__} cannot send {reply!r}")

    def no_reply(self, request: Request) -> Any:
        return Response(500, {"error": "fake server: no scripted reply left for this request"})

    # ------------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------- internals

    def _reply_for(self, request: Request) -> Any:
        with self._lock:
            self.requests.append(request)
        rejected = self.check(request)
        if rejected is not None:
            return rejected
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return self.no_reply(request)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # listen() backlog: the default 5 drops bursts of connections


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real services
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, response: Response) -> None:
        body = response.encoded()
        try:
            self.send_response(response.status)
            self.send_header("content-type", response.content_type)
            self.send_header("content-length", str(len(body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            # headers and body in one write: two small writes meet delayed ACKs (40 ms stalls)
            self._headers_buffer.append(b"\r\n" + body)
            self.flush_headers()
        except OSError:  # the client went away (it timed out first)
            self.close_connection = True

    def _handle(self) -> None:
        fake = self.server_fake
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = Request(
            method=self.command,
            path=url.path,
            query={k: v[-1] for k, v in parse_qs(url.query).items()},
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
        )
        reply = fake.render(fake._reply_for(request), request)
        while isinstance(reply, Slow):
            if fake._stopping.wait(reply.seconds):
                self.close_connection = True
                return
            reply = fake.render(reply.then, request) if reply.then is not None else Drop()
        if isinstance(reply, Drop):
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(reply)

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_DELETE = _handle
