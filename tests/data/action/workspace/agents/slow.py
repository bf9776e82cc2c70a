"""Agents that take their time: each turn waits as many seconds as the message says.

``make_session`` waits politely (``asyncio.sleep``, cancellable);
``make_blocking_session`` blocks its thread (``time.sleep``), which no turn
timeout can interrupt.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


class SlowSession:
    async def send(self, message: str) -> str:
        await asyncio.sleep(float(message.split()[-1]))
        return "done"


def make_session(context: Any) -> SlowSession:
    return SlowSession()


class BlockingSession:
    def send(self, message: str) -> str:
        time.sleep(float(message.split()[-1]))
        return "done"


def make_blocking_session(context: Any) -> BlockingSession:
    return BlockingSession()
