"""A fake HTTP agent on 127.0.0.1: what a team's own agent behind ``backend: http`` looks like.

It takes the runner's JSON POSTs (``session_id``, ``turn_index``, ``input``,
``context``, ...) on any path, checks the headers it was told to require
(else a 401), and answers from a script (:meth:`FakeHttpAgent.script`) or a
``responder(request)``. :class:`AgentReply` is the reply shape the runner
expects; the generic ``Response``, ``Slow``, ``Drop``, ``Malformed`` of
:mod:`tests.fakes._server` cover everything that goes wrong.

:func:`remembering` is a stateful responder keeping each session's history,
so a test can see turns arrive in order on one session.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes._server import FakeServer, Request, Response, Wire

__all__ = [
    "AgentReply",
    "FakeHttpAgent",
    "remembering",
]


@dataclass(frozen=True)
class AgentReply:
    """A 200 with the runner's reply shape; ``extra`` keys are added as they are."""

    response: str
    tool_invocations: Sequence[Mapping[str, Any]] | None = None
    token_usage: Mapping[str, int] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"response": self.response}
        if self.tool_invocations is not None:
            body["tool_invocations"] = [dict(i) for i in self.tool_invocations]
        if self.token_usage is not None:
            body["token_usage"] = dict(self.token_usage)
        body.update(self.extra)
        return body


class FakeHttpAgent(FakeServer):
    name = "fake-http-agent"

    def __init__(
        self, responder: Any = None, *, require_headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(responder)
        self.require_headers = {k.lower(): v for k, v in (require_headers or {}).items()}

    @property
    def endpoint(self) -> str:
        return f"{self.url}/agent"

    def check(self, request: Request) -> Any | None:
        for name, value in self.require_headers.items():
            if request.headers.get(name) != value:
                return Response(401, {"error": f"missing or wrong {name} header"})
        if request.method != "POST":
            return Response(405, {"error": "POST only"})
        return None

    def render(self, reply: Any, request: Request) -> Wire:
        if isinstance(reply, AgentReply):
            return Response(200, reply.body())
        return super().render(reply, request)


def remembering() -> Any:
    """A responder answering ``"<turns seen in this session>: <input>"``, with one tool call per turn."""
    sessions: dict[str, list[str]] = defaultdict(list)
    lock = threading.Lock()

    def respond(request: Request) -> AgentReply:
        body = request.body
        with lock:
            history = sessions[body["session_id"]]
            history.append(body["input"])
            seen = len(history)
        return AgentReply(
            f"{seen}: {body['input']}",
            tool_invocations=[
                {"name": "remember", "args": {"turn": body["turn_index"]}, "result": seen}
            ],
            token_usage={"prompt_tokens": 10 * seen, "completion_tokens": 2},
        )

    return respond
