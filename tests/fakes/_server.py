"""A small scriptable HTTP server on 127.0.0.1 for the fake services in the tests.

Subclass :class:`FakeServer` and override :meth:`FakeServer.check` (what the
real service rejects before looking at the script: auth, bad requests) and
:meth:`FakeServer.render` (turn a domain reply, e.g. an Anthropic message,
into a :class:`Response`). Replies come from a queue (:meth:`FakeServer.script`)
and, when it is empty, from a ``responder(request) -> reply`` function, so
concurrent sessions can get answers that depend on their own request.

Generic replies every fake understands: :class:`Response` (anything, verbatim),
:class:`Slow` (wait, then answer: slower than a client timeout), :class:`Drop`
(read the request, close the connection without a response),
:class:`Malformed` (a 200 whose body is not JSON), and the faults a client
must survive without running past its turn: :class:`Drip` (headers at once,
then the body a few bytes at a time) and :class:`Huge` (a body of tens of
megabytes, sent as fast as the client reads it, or dripped). Every request is
recorded in :attr:`FakeServer.requests`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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


@dataclass(frozen=True)
class Drip:
    """Headers (with the full ``content-length``) at once, then ``chunk`` bytes per ``interval``.

    A client whose only bound is a per-read timeout longer than ``interval``
    never times out on it; the bytes keep coming until the body is complete.
    """

    body: bytes = b'{"response": "' + b"x" * 4096 + b'"}'
    chunk: int = 8
    interval: float = 0.2
    status: int = 200
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Huge:
    """A body of ``size`` bytes: ``head``, then ``fill`` repeated, then ``tail``.

    Sent in 64 KiB writes as fast as the client reads (``interval`` = 0), or
    with a pause between writes. ``chunked``: no ``content-length`` (the client
    cannot know the size before reading it).
    """

    size: int = 50 * 1024 * 1024
    head: bytes = b'{"response": "'
    fill: bytes = b"x"
    tail: bytes = b'"}'
    interval: float = 0.0
    chunked: bool = False
    status: int = 200
    content_type: str = "application/json"

    def chunks(self, size: int = 64 * 1024) -> Iterator[bytes]:
        yield self.head
        filler = max(0, self.size - len(self.head) - len(self.tail))
        block = (self.fill * (size // max(1, len(self.fill)) + 1))[:size]
        while filler > 0:
            piece = block[: min(size, filler)]
            filler -= len(piece)
            yield piece
        yield self.tail


Responder = Callable[[Request], Any]
#: what :meth:`FakeServer.render` hands to the wire
Wire = Response | Slow | Drop | Drip | Huge


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

    def render(self, reply: Any, request: Request) -> Wire:
        """Turn a domain reply into a generic one; the base knows only the generic ones."""
        if isinstance(reply, Malformed):
            return Response(200, reply.text, content_type=reply.content_type)
        if isinstance(reply, Response | Slow | Drop | Drip | Huge):
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

    @property
    def client_url(self) -> str:
        """What a client of the service takes as its base URL."""
        return self.url

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

    def _stream(
        self,
        status: int,
        content_type: str,
        headers: Mapping[str, str],
        chunks: Iterable[bytes],
        interval: float,
        length: int | None,
    ) -> None:
        """Headers now, then the chunks (chunked transfer encoding when ``length`` is None)."""
        stopping = self.server_fake._stopping
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            if length is None:
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("content-length", str(length))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            for piece in chunks:
                if interval and stopping.wait(interval):
                    break
                if stopping.is_set():
                    break
                if length is None:
                    piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
                self.wfile.write(piece)
                self.wfile.flush()
            else:
                if length is None:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                return
        except OSError:  # the client went away (it gave up first, as it should)
            pass
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
        if isinstance(reply, Drip):
            body = reply.body
            pieces = (body[i : i + reply.chunk] for i in range(0, len(body), max(1, reply.chunk)))
            self._stream(
                reply.status, reply.content_type, reply.headers, pieces, reply.interval, len(body)
            )
            return
        if isinstance(reply, Huge):
            self._stream(
                reply.status,
                reply.content_type,
                {},
                reply.chunks(),
                reply.interval,
                None if reply.chunked else reply.size,
            )
            return
        self._send(reply)

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_DELETE = _handle


def serve(
    fake_class: Callable[..., FakeServer],
    responders: Mapping[str, Responder],
    api_key: str,
    argv: Sequence[str] | None = None,
    doc: str | None = None,
) -> None:
    """Run a model API's fake standalone (the benchmarks do, so its CPU is not counted as the
    runner's): ``--responder`` one of ``responders``, ``--api-key``, ``--latency`` seconds
    before each reply. Prints the URL a client takes, then serves until stdin closes."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--responder", choices=sorted(responders), default="tool-then-answer")
    parser.add_argument("--api-key", default=api_key)
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds before each reply (a model's latency)"
    )
    args = parser.parse_args(argv)
    responder = responders[args.responder]
    if args.latency > 0:
        base, latency = responder, args.latency

        def responder(request: Request) -> Any:
            return Slow(latency, base(request))

    fake = fake_class(responder, api_key=args.api_key).start()
    print(fake.client_url, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        fake.stop()
