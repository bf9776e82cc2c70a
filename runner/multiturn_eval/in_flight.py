"""Which call is in flight, for the interception points that cannot be told (a tiny module:
the simulated users set it, the fixtures read it, neither imports the other).

:data:`USER_TURN` is set while a simulated user works out its next message (the LLM
simulator's structured call, a Python simulator's ``next_message()`` and any HTTP call its
code makes through ``httpx``): the 0-based turn that message will be. The fixtures
(:mod:`multiturn_eval.fixtures.cassette`) record such calls as the ``user`` side's, at that
turn, and say "diverged at turn k" when the request no longer matches the recording's.
"""

from __future__ import annotations

from contextvars import ContextVar

USER_TURN: ContextVar[int | None] = ContextVar("multiturn_eval_user_turn", default=None)
"""The turn (0-based) the simulated user's call in flight is for; None outside one."""
