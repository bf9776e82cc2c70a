"""An agent that takes its time: each turn waits as many seconds as the message says."""

from __future__ import annotations

import asyncio
from typing import Any


class SlowSession:
    async def send(self, message: str) -> str:
        await asyncio.sleep(float(message.split()[-1]))
        return "done"


def make_session(context: Any) -> SlowSession:
    return SlowSession()
