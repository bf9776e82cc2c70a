"""Simulated users and fakes for the simulation tests (``tests/test_simulation_*.py``).

- :class:`FakeCall`: a :class:`~multiturn_eval.simulation.StructuredCall` that answers
  from a script and keeps every request it got (the phase-2 chat core is the real one);
- :class:`Agent`: an agent for the driver's ``send`` that answers from a script and keeps
  every message it received;
- python simulators (factories named ``tests.simulators:...`` in suites).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from multiturn_eval import ConversationMessage, SimulatorContext, TokenUsage, UserTurn
from multiturn_eval.errors import BackendError
from multiturn_eval.simulation import AgentAnswer, Outgoing, StructuredAnswer, StructuredAsk

# ------------------------------------------------------------------------ the LLM side

ScriptItem = dict[str, Any] | StructuredAnswer | BaseException | Callable[[StructuredAsk], Any]


def reply(
    message: str | None = None,
    done: bool = False,
    outcome: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """A well-formed simulator reply."""
    return {"message": message, "done": done, "outcome": outcome, "reason": reason}


@dataclass
class FakeCall:
    """Answers each structured request with the next scripted item.

    An item is the reply object (a dict or anything else: sent as ``data``), a
    :class:`StructuredAnswer` as it is, an exception to raise, or a callable of the
    request returning one of those.
    """

    script: list[ScriptItem]
    usage: TokenUsage = field(
        default_factory=lambda: TokenUsage(prompt_tokens=100, completion_tokens=20)
    )
    cost: float | None = 0.001
    asks: list[StructuredAsk] = field(default_factory=list)

    async def __call__(self, ask: StructuredAsk) -> StructuredAnswer:
        self.asks.append(ask)
        if not self.script:
            raise AssertionError(f"no scripted answer left for request {len(self.asks)}")
        item = self.script.pop(0)
        if callable(item) and not isinstance(item, BaseException):
            item = item(ask)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, StructuredAnswer):
            return item
        return StructuredAnswer(data=item, problem=None, usage=self.usage, cost_usd=self.cost)


def status_error(status: int, message: str) -> BackendError:
    return BackendError(message, status_code=status)


# ----------------------------------------------------------------------- the agent side


@dataclass
class Agent:
    """The case runner's side of the driver, reduced to answers from a script.

    Each item is a reply text, an :class:`AgentAnswer`, or a callable of the
    message returning either. Past the script, it echoes.
    """

    script: list[str | AgentAnswer | Callable[[str], str | AgentAnswer]] = field(
        default_factory=list
    )
    received: list[Outgoing] = field(default_factory=list)

    async def __call__(self, outgoing: Outgoing) -> AgentAnswer:
        self.received.append(outgoing)
        item = self.script.pop(0) if self.script else f"you said: {outgoing.text}"
        if callable(item):
            item = item(outgoing.text)
        return item if isinstance(item, AgentAnswer) else AgentAnswer(item)


def session_error(message: str = "SessionError: lost") -> AgentAnswer:
    return AgentAnswer(None, error=message, session_error=True)


# -------------------------------------------------------------------- python simulators


CONTEXTS: list[SimulatorContext] = []
"""Every SimulatorContext a factory here was called with (in order; :func:`reset` clears it)."""
SEEN: list[tuple[str, int, tuple[ConversationMessage, ...]]] = []
"""(test case, run index, the conversation) of every next_message() call here."""


def reset() -> None:
    CONTEXTS.clear()
    SEEN.clear()


class ScriptedUser:
    """Says the items of ``ctx.context['say']`` in order (strings or UserTurn keyword dicts);
    with ``ctx.context['runs']`` (a list of such lists), the list of its run index.

    An item ``{raise: text}`` raises ``ValueError(text)``; ``{sleep: s}`` sleeps (sync).
    """

    def __init__(self, ctx: SimulatorContext) -> None:
        CONTEXTS.append(ctx)
        self.ctx = ctx
        runs = ctx.context.get("runs")
        items = runs[ctx.run_index % len(runs)] if runs else ctx.context.get("say", [])
        self.items = list(items)
        self.seen: list[tuple[ConversationMessage, ...]] = []

    def next_message(self, conversation: tuple[ConversationMessage, ...]) -> str | UserTurn:
        self.seen.append(conversation)
        SEEN.append((self.ctx.test_case_name, self.ctx.run_index, conversation))
        item = self.items.pop(0)
        if isinstance(item, dict) and "raise" in item:
            raise ValueError(item["raise"])
        if isinstance(item, dict) and "sleep" in item:
            time.sleep(float(item["sleep"]))
            return "late"
        return UserTurn(**item) if isinstance(item, dict) else item


def scripted(ctx: SimulatorContext) -> ScriptedUser:
    return ScriptedUser(ctx)


class Saying:
    """A python simulator object built in a test: returns ``items`` one by one."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)
        self.seen: list[tuple[ConversationMessage, ...]] = []

    def next_message(self, conversation: tuple[ConversationMessage, ...]) -> Any:
        self.seen.append(conversation)
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


class AsyncSaying(Saying):
    async def next_message(self, conversation: tuple[ConversationMessage, ...]) -> Any:
        await asyncio.sleep(0)
        return Saying.next_message(self, conversation)


class Stuck:
    """A sync next_message that never returns (until ``release`` is set)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def next_message(self, conversation: tuple[ConversationMessage, ...]) -> str:
        self.release.wait(30)
        return "too late"


class AsyncStuck:
    """An async next_message that never returns."""

    async def next_message(self, conversation: tuple[ConversationMessage, ...]) -> str:
        await asyncio.Event().wait()
        return "never"


class Stubborn:
    """An async next_message that swallows its cancellation and keeps going for a while."""

    async def next_message(self, conversation: tuple[ConversationMessage, ...]) -> str:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return "finally"


def no_args() -> Saying:  # a factory with the wrong signature
    return Saying([])


def two_args(ctx: SimulatorContext, extra: int) -> Saying:
    return Saying([])


async def async_factory(ctx: SimulatorContext) -> Saying:
    return Saying(["hello from an async factory"])


def broken_factory(ctx: SimulatorContext) -> Saying:
    raise RuntimeError("the factory is broken")


def no_method(ctx: SimulatorContext) -> object:
    return object()


NOT_CALLABLE = 42


# ------------------------------------------------- an LLM customer, played by the fake server

_ENTRY = re.compile(
    r"\[message \d+\] user:\n(?P<user>.*?)(?=\n\n\[message \d+\] |\Z)"
    r"|\[message \d+\] agent: \(no reply\)"
    r"|\[message \d+\] agent:\n=== DATA: [^\n]*\n(?P<fence>`{3,})text\n(?P<agent>.*?)\n(?P=fence)\n"
    r"=== END DATA: [^\n]*",
    re.DOTALL,
)


def _block(prompt: str, tag: str) -> list[str]:
    found = re.search(f"<{tag}>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    text = found.group(1) if found else ""
    return [] if text in ("(none)", "(none given: write plainly)") else text.splitlines()


def conversation_in(prompt: str) -> tuple[ConversationMessage, ...]:
    """The conversation a simulated user's prompt shows (the packaged template's transcript)."""
    start = prompt.index("decide only from what the agent has actually done.\n\n") + 51
    end = prompt.index("\n\nAnswer with the `user_turn` tool")
    messages: list[ConversationMessage] = []
    for match in _ENTRY.finditer(prompt[start:end]):
        if match.group("user") is not None:
            messages.append(ConversationMessage(role="user", text=match.group("user")))
        elif match.group("agent") is not None:
            messages.append(ConversationMessage(role="agent", text=match.group("agent")))
        else:
            messages.append(ConversationMessage(role="agent", text="", error="no reply"))
    return tuple(messages)


def customer_fields(prompt: str) -> dict[str, Any]:
    """What the support example's rule-based customer would answer to this prompt, as the
    simulated user's structured reply: how the fake server plays an LLM customer."""
    from examples.support.customer import Customer

    known = dict(line[2:].split(": ", 1) for line in _block(prompt, "known"))
    unknown = [line[2:] for line in _block(prompt, "unknown")]
    persona = " ".join(_block(prompt, "persona")) or None
    goal = " ".join(_block(prompt, "goal"))
    ctx = SimulatorContext(
        goal=goal,
        persona=persona,
        known=known,
        unknown=tuple(unknown),
        test_case_name="fake",
        context={},
        run_index=0,
    )
    conversation = conversation_in(prompt)
    customer = Customer(ctx)
    # the rule-based customer counts refusals as it goes: replay the conversation so far
    said: str | UserTurn = ""
    for i, message in enumerate(conversation):
        if message.role == "agent":
            said = customer.next_message(conversation[: i + 1])
    said = customer.next_message(conversation) if not conversation else said
    if isinstance(said, str):
        return {"message": said, "done": False, "outcome": None, "reason": None}
    return {
        "message": said.message,
        "done": said.done,
        "outcome": said.outcome,
        "reason": said.reason,
    }
