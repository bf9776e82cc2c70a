"""The LLM simulator's prompt: the packaged template (``prompt.md``) or a suite's ``prompt_file``.

A template is text with ``{{name}}`` placeholders, filled in one pass exactly like
the judges' (:data:`~multiturn_eval.grading.judges.prompt.PLACEHOLDER`: text put
in is never scanned again, so an agent reply containing ``{{goal}}`` stays as it
is):

- ``{{goal}}``, ``{{persona}}``: the test case's ``user:`` texts (trusted: they
  come from the suite); a missing persona reads "(none given: write plainly)";
- ``{{known}}``: one ``- name: value`` line per known fact (values that are not
  text as JSON), or "(none)";
- ``{{unknown}}``: one ``- fact`` line per unknown fact, or "(none)";
- ``{{transcript}}``: the conversation so far, oldest first. The user's messages
  (scripted turns, the opening, the simulator's own) are written plainly; every
  agent message is fenced and labelled as untrusted data with the judges' own
  :func:`~multiturn_eval.grading.judges.prompt.data_block`, so a reply saying "end
  the conversation as goal met" arrives inside a fence it cannot close. An agent
  turn that got no reply reads "(no reply)". The agent's tool calls are not
  shown: a user does not see them.

The goal, persona, known and unknown facts go to the simulator only; nothing of
the template is ever sent to the agent (the driver sends the simulator's
``message`` and nothing else).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..grading.judges.prompt import PLACEHOLDER, data_block, packaged_prompt, placeholders_of
from ..types import ConversationMessage

PLACEHOLDERS = frozenset({"goal", "persona", "known", "unknown", "transcript"})
REQUIRED = ("goal", "transcript")
"""A prompt without the goal or the conversation cannot play the user."""
NO_PERSONA = "(none given: write plainly)"
NONE = "(none)"
EMPTY_TRANSCRIPT = "(nothing yet: write the first message of the conversation)"


def packaged_template() -> str:
    """The template shipped in the package (``simulation/prompt.md``)."""
    return packaged_prompt(__package__)


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be a simulated user's prompt (unknown placeholders...), or None."""
    return placeholders_of(template, PLACEHOLDERS, "a simulated user's prompt", REQUIRED)[1]


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return " ".join(text.split())


def known_text(known: Mapping[str, Any]) -> str:
    return "\n".join(f"- {name}: {_value(value)}" for name, value in known.items()) or NONE


def unknown_text(unknown: Sequence[str]) -> str:
    return "\n".join(f"- {_value(fact)}" for fact in unknown) or NONE


def _transcript_parts(
    conversation: Sequence[ConversationMessage], parts: list[str], user_count: int
) -> int:
    """Append each message's part of the transcript to ``parts`` (``user_count``: the user
    messages before these); the user messages counted after them."""
    for message in conversation:
        if message.role == "user":
            user_count += 1
            parts.append(f"[message {user_count}] user:\n{message.text}")
        elif message.error is not None and not message.text:
            parts.append(f"[message {user_count}] agent: (no reply)")
        else:
            parts.append(
                f"[message {user_count}] agent:\n"
                + data_block(f"the agent's reply to message {user_count}", message.text)
            )
    return user_count


def transcript_text(conversation: Sequence[ConversationMessage]) -> str:
    """The conversation for the simulator: user messages plain, agent messages fenced."""
    parts: list[str] = []
    _transcript_parts(conversation, parts, 0)
    return "\n\n".join(parts) if parts else EMPTY_TRANSCRIPT


def render(
    template: str,
    *,
    goal: str,
    persona: str | None,
    known: Mapping[str, Any],
    unknown: Sequence[str],
    conversation: Sequence[ConversationMessage],
) -> str:
    """The prompt for the simulated user's next step (see the module docstring)."""
    values = {
        "goal": goal.strip(),
        "persona": persona.strip() if persona and persona.strip() else NO_PERSONA,
        "known": known_text(known),
        "unknown": unknown_text(unknown),
        "transcript": transcript_text(conversation),
    }
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


class Prompts:
    """:func:`render` of one simulator's template and texts, step after step of its conversation.

    The same text as :func:`render`, made with less work: the template is split at its
    placeholders once, the goal, persona, known and unknown texts are made once, and the
    transcript's part of each message is made once -- a step whose conversation goes on
    from the last step's (the same messages, then more) only adds the parts of the new
    ones. Any other conversation is rendered from its start.
    """

    def __init__(
        self,
        template: str,
        *,
        goal: str,
        persona: str | None,
        known: Mapping[str, Any],
        unknown: Sequence[str],
    ) -> None:
        self._values = {
            "goal": goal.strip(),
            "persona": persona.strip() if persona and persona.strip() else NO_PERSONA,
            "known": known_text(known),
            "unknown": unknown_text(unknown),
        }
        # the template as (text before a placeholder, its name, the placeholder as written)
        self._pieces: list[tuple[str, str, str]] = []
        start = 0
        for match in PLACEHOLDER.finditer(template):
            self._pieces.append((template[start : match.start()], match.group(1), match.group(0)))
            start = match.end()
        self._tail = template[start:]
        self._said: tuple[ConversationMessage, ...] = ()
        self._parts: list[str] = []
        self._users = 0

    def _transcript(self, conversation: Sequence[ConversationMessage]) -> str:
        said = self._said
        known = len(said)
        if len(conversation) < known or any(
            a is not b for a, b in zip(said, conversation[:known], strict=True)
        ):
            self._parts, self._users, known = [], 0, 0
        self._users = _transcript_parts(conversation[known:], self._parts, self._users)
        self._said = tuple(conversation)
        return "\n\n".join(self._parts) if self._parts else EMPTY_TRANSCRIPT

    def render(self, conversation: Sequence[ConversationMessage]) -> str:
        """``render(template, goal=..., ..., conversation=conversation)``."""
        values = self._values
        transcript: str | None = None
        out: list[str] = []
        for text, name, written in self._pieces:
            out.append(text)
            if name == "transcript":
                if transcript is None:
                    transcript = self._transcript(conversation)
                out.append(transcript)
            else:
                out.append(values.get(name, written))
        out.append(self._tail)
        return "".join(out)
