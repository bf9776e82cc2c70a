"""Your own simulated user in Python: ``user_simulator: {backend: python, factory: "pkg.mod:make"}``.

The factory (sync or async) is called once per run of a test case with a frozen
:class:`~multiturn_eval.types.SimulatorContext` and returns an object whose
``next_message(conversation)`` (sync or async) receives the whole conversation
so far -- a tuple of frozen :class:`~multiturn_eval.types.ConversationMessage`,
scripted turns included -- and returns a ``str`` (a message; it never ends the
conversation) or a :class:`~multiturn_eval.types.UserTurn`.

Both are called through the same guarded path as every other piece of user code
(:func:`~multiturn_eval.usercode.call_user_code`): sync code on a daemon thread,
``sys.exit()`` and its kin turned into errors. Whatever goes wrong -- the factory
or ``next_message`` raises, returns something else, builds a bad ``UserTurn`` --
is a fault that names the simulator (the test case's outcome is
``invalid_simulation``), never the agent's failure; where your code raised is kept
with its traceback for the reports (the test case's ``tracebacks``). A call that never returns is
bounded by the driver (the turn timeout). A fault is not retried: unlike a
model's reply, code that failed once fails again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import UserCodeAbort
from ..sanitize import safe_repr
from ..types import ConversationMessage, SimulatorContext, UserTurn
from ..usercode import call_user_code, error_text, note_traceback
from .base import Named, Step, label_of
from .record import SimulatorInfo

WHO = "simulator"


def coerce_turn(value: Any) -> UserTurn | str:
    """What ``next_message`` returned, as a UserTurn, or why it cannot be one.

    A UserTurn is checked again as it is now (a frozen dataclass can still be changed
    with ``object.__setattr__`` after it was built); text is taken as plain ``str``.
    """
    if isinstance(value, UserTurn):
        message = value.message
        return UserTurn(
            message=str.__str__(message) if isinstance(message, str) else message,
            done=value.done,
            outcome=value.outcome,
            reason=value.reason,
        )
    if isinstance(value, str):
        if not value.strip():
            return "next_message() returned an empty message"
        return UserTurn(message=str.__str__(value))
    return (
        f"next_message() returned {type(value).__name__} ({safe_repr(value)[:80]}); expected "
        "a str or a UserTurn"
    )


class PythonSimulator(Named):
    """A ``backend: python`` simulated user: the object its factory returned."""

    def __init__(self, obj: Any, factory: str) -> None:
        super().__init__(SimulatorInfo(backend="python", factory=factory))
        self._next = getattr(obj, "next_message", None)
        if not callable(self._next):
            raise TypeError(
                f"the simulator factory returned {type(obj).__name__}, which has no "
                "next_message(conversation) method"
            )

    @classmethod
    async def create(
        cls, factory: Callable[..., Any], ref: str, ctx: SimulatorContext
    ) -> PythonSimulator | str:
        """Call the factory once (for this run); the simulator, or the fault in words.

        The caller bounds it (the driver's turn timeout, or the case's session timeout).
        """
        label = label_of(SimulatorInfo(backend="python", factory=ref))
        try:
            obj = await call_user_code(factory, ctx, who=WHO, what="the simulator factory")
            return cls(obj, ref)
        except UserCodeAbort as exc:
            return f"{label}: in the factory, {error_text(exc)}"
        except Exception as exc:
            note_traceback("the simulator factory", exc)
            return f"{label}: the factory failed: {error_text(exc)}"

    async def next_step(self, conversation: tuple[ConversationMessage, ...]) -> Step:
        assert self._next is not None
        try:
            value = await call_user_code(
                self._next, conversation, who=WHO, what="the simulator's next_message()"
            )
        except UserCodeAbort as exc:  # sys.exit(), KeyboardInterrupt...: said in words
            return Step(None, f"{self.label}: in next_message(), {error_text(exc)}")
        except Exception as exc:
            note_traceback("the simulator's next_message()", exc)
            return Step(None, f"{self.label}: next_message() raised {error_text(exc)}")
        try:
            turn = coerce_turn(value)
        except Exception as exc:  # a bad UserTurn, or a str subclass whose methods raise
            turn = f"next_message() returned an unusable value: {error_text(exc)}"
        if isinstance(turn, str):
            return Step(None, f"{self.label}: {turn}")
        return Step(turn)
