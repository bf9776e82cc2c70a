"""Agents for the signal tests and ``bench/reliability/signals.py`` (``python`` backend).

Each test case's ``context`` says how its session behaves on every turn:

- ``delay: S``: ``await asyncio.sleep(S)`` before replying (a slow, well-behaved agent);
- ``block: S``: ``time.sleep(S)`` *inside* ``async def send``: the event loop thread is
  blocked, so nothing in the loop (timeouts, cancellation, signal callbacks) runs;
- ``size: N``: the reply is ``N`` characters long (so the reports take a while to write);
- ``response``: the reply's text (default ``"ok"``, padded to ``size``);
- ``marker: PATH``: this file is created when the turn starts (so a test knows the
  agent is now in flight, or now blocking, before it sends its signal).

:mod:`tests.slow_import_agents` is the same agent behind a module that takes
``SLOW_IMPORT_SECONDS`` to import (a factory import that sleeps, during loading).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from multiturn_eval import CaseContext


class SlowSession:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    async def send(self, message: str) -> str:
        marker = self.context.get("marker")
        if marker:
            Path(str(marker)).touch()  # noqa: ASYNC240 - a test marker, on purpose
        delay = float(self.context.get("delay", 0))
        if delay:
            await asyncio.sleep(delay)
        block = float(self.context.get("block", 0))
        if block:
            time.sleep(block)  # on purpose: blocks the event loop  # noqa: ASYNC251
        text = str(self.context.get("response", "ok"))
        size = int(self.context.get("size", 0))
        if size > len(text):
            text = text + " " + "x" * (size - len(text) - 1)
        return text


def make_session(ctx: CaseContext) -> SlowSession:
    return SlowSession(dict(ctx.context))
