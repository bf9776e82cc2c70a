"""Shared by the backend tests: a fake clock for retry waits, and driving one session
through its turns the way the engine does (errors are values)."""

from __future__ import annotations

import asyncio
from typing import Any

from multiturn_eval.case_runner import case_context
from multiturn_eval.errors import BackendError
from multiturn_eval.loaded import LoadedSuite
from multiturn_eval.types import TurnFile, TurnReply

Message = str | tuple[str, list[TurnFile]]


class Clock:
    """Records the retry policy's waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def converse(
    backend: Any, loaded: LoadedSuite, messages: tuple[Message, ...], case: int = 0
) -> list[TurnReply | BackendError]:
    """Send the messages as the turns of one session of test case ``case``, then close it."""

    async def run() -> list[TurnReply | BackendError]:
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
