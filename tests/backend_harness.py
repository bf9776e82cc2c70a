"""Shared by the backend tests: a fake clock for retry waits, a backend built from a suite
file, and driving one session through its turns the way the engine does (errors are values)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError
from multiturn_eval.loaded import LoadedSuite
from multiturn_eval.loader import load_suite
from multiturn_eval.settings import RunSettings
from multiturn_eval.types import TurnFile, TurnReply

Message = str | tuple[str, list[TurnFile]]

#: a 1x1 PNG image, for the turn files the backends send
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

#: the suite's Python tools every model backend test offers
TOOLS = """\
  tools:
    - function: tests.tool_funcs:subtract
    - function: tests.tool_funcs:divide
    - function: tests.tool_funcs:lookup
"""

#: one test case of two turns, with instructions and a context table the tools read
CASES = """\
test_cases:
  - name: analyst
    instructions: Document about ACME.
    context: {table: {revenue: 206588, cost: 181001}}
    turns:
      - input: what is the revenue?
      - input: and the difference?
"""


class Clock:
    """Records the retry policy's waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


class Harness:
    """Builds a backend from a suite file (``agent`` + ``cases``) and talks to it, as the
    engine does; ``env`` is the environment as the entry point read it."""

    def __init__(
        self, tmp_path: Path, backend_class: type[Any], agent: str, env: dict[str, str]
    ) -> None:
        self.tmp_path = tmp_path
        self.backend_class = backend_class
        self.agent = agent
        self.env = env
        self.clock = Clock()
        self.loaded: Any = None

    def backend(
        self,
        agent: str | None = None,
        cases: str = CASES,
        *,
        turn_timeout: float = 10,
        env: dict[str, str] | None = None,
        parallel: int = 2,
    ) -> Any:
        path = self.tmp_path / "suite.yaml"
        path.write_text((self.agent if agent is None else agent) + cases)
        self.loaded = load_suite(path, env={})
        settings = RunSettings(parallel_test_cases=parallel, turn_timeout=turn_timeout)
        return self.backend_class(
            self.loaded, settings, env=self.env if env is None else env, sleep=self.clock.sleep
        )

    def converse(self, backend: Any, *messages: Message) -> list[TurnReply | BackendError]:
        """Send the messages as turns of one session (case 0); errors are values."""
        return converse(backend, self.loaded, messages)


def converse(
    backend: Any, loaded: LoadedSuite, messages: tuple[Message, ...], case: int = 0
) -> list[TurnReply | BackendError]:
    """Send the messages as the turns of one session of test case ``case``, then close it."""

    async def run() -> list[TurnReply | BackendError]:
        if hasattr(backend, "start_tools"):  # the run's MCP servers, as the run starts them
            await backend.start_tools()
        session = await backend.open_session(case_context(loaded, case))
        out: list[TurnReply | BackendError] = []
        try:
            for item in messages:
                message, files = item if isinstance(item, tuple) else (item, [])
                try:
                    out.append(await session.send(message, files))
                except BackendError as exc:
                    out.append(exc)
        finally:
            await session.close()
            await backend.aclose()
        return out

    return asyncio.run(run())


def reply(value: TurnReply | BackendError) -> TurnReply:
    """The turn's reply (the turn must have succeeded)."""
    assert isinstance(value, TurnReply), value
    return value


def error(value: TurnReply | BackendError) -> BackendError:
    """The turn's error (the turn must have failed)."""
    assert isinstance(value, BackendError), value
    return value
