"""The public data types: what agents return and what graders receive.

These are stable API (SPEC 5): fields may be added, never removed or renamed.
:class:`MetricResult` (what a metric on a turn comes to) is here too, not in
:mod:`multiturn_eval.results`, because a conversation grader receives the turns'
metric results.

The bottom of the package is a ladder, each rung importing only those below it:
:mod:`~multiturn_eval.errors` and :mod:`~multiturn_eval.sanitize` (nothing of the
package) -> ``types`` (``sanitize``) -> :mod:`~multiturn_eval.results` (``types``).
"""

from __future__ import annotations

import copy
import math
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler


def read_only(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only view of a private deep copy (so nobody can change the suite's data)."""
    return MappingProxyType(copy.deepcopy(dict(mapping or {})))


def _is_none(value: object) -> bool:
    return value is None


def omitted_when_none(description: str | None = None) -> Any:
    """An optional field that ``report.json`` leaves out while it is None.

    Every field added to the report after 1.0 uses it, so a run that does not use
    the feature writes the very bytes it wrote before (and readers of 1.0 reports
    keep working): ``Field(default=None, exclude_if=...)``, honoured by pydantic's
    serialiser and by the fallback walker in :mod:`multiturn_eval.sanitize`. (Here, below
    :mod:`multiturn_eval.results`, so the public types use it too.)
    """
    return Field(default=None, exclude_if=_is_none, description=description)


#: the validation context of a result read back from the run's own JSON (its store,
#: :mod:`multiturn_eval.run_store`): made by these models, so already JSON-safe and
#: totalled; the validators that clean or fill values pass it through unchanged
STORED: Mapping[str, bool] = MappingProxyType({"stored": True})


def _stored(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, Mapping) and context.get("stored") is True


class MetricResult(BaseModel):
    """One metric on one turn, or rolled up over a test case's turns."""

    model_config = ConfigDict(extra="forbid")

    metric_name: str
    kind: Literal["standard", "code", "judge"]
    score: float | None = None
    threshold: float | None = None
    passed: bool
    error: str | None = None
    """Set when the metric could not be computed (a grader raised): the metric fails."""
    reason: str | None = None
    details: dict[str, Any] | None = None
    scope: Literal["conversation"] | None = omitted_when_none(
        "'conversation' for a test case's conversation-level checks (conversation_evaluations, "
        "conversation_tools), run once on the whole conversation; absent on per-turn metrics "
        "and on their roll-up."
    )


class TokenUsage(BaseModel):
    """Tokens spent; additive (``a + b`` sums every field).

    ``prompt_tokens`` counts input tokens as the provider bills them outside the
    cache; ``cache_creation_tokens`` and ``cache_read_tokens`` are the cached
    parts, so ``total_tokens >= prompt_tokens + completion_tokens``.
    ``reasoning_tokens``, when the provider reports them, are the part of
    ``completion_tokens`` the model spent reasoning (not counted twice).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int | None = omitted_when_none(
        "Of completion_tokens, those spent reasoning (OpenAI's "
        "completion_tokens_details.reasoning_tokens); absent when not reported."
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_total(cls, data: Any, info: ValidationInfo) -> Any:
        if _stored(info):
            return data
        if isinstance(data, Mapping) and not data.get("total_tokens"):
            parts = [
                data.get(k)
                for k in (
                    "prompt_tokens",
                    "completion_tokens",
                    "cache_creation_tokens",
                    "cache_read_tokens",
                )
            ]
            # only plain counts are summed; anything else is left to the fields' own checks
            if all(p is None or (type(p) is int) for p in parts):
                data = dict(data)
                data["total_tokens"] = sum(p or 0 for p in parts)
        return data

    @model_validator(mode="after")
    def _check(self) -> TokenUsage:
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.total_tokens < self.prompt_tokens + self.completion_tokens:
            raise ValueError("total_tokens must be >= prompt_tokens + completion_tokens")
        return self

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage.model_construct(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            reasoning_tokens=None
            if self.reasoning_tokens is None and other.reasoning_tokens is None
            else (self.reasoning_tokens or 0) + (other.reasoning_tokens or 0),
        )

    @classmethod
    def sum(cls, usages: Sequence[TokenUsage | None]) -> TokenUsage:
        """The usages added up (``+`` over them, one model built instead of one per addition)."""
        present = [usage for usage in usages if usage is not None]
        counts = {
            name: sum(getattr(usage, name) for usage in present)
            for name in (
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
                "cache_creation_tokens",
                "cache_read_tokens",
            )
        }
        if not present:
            return cls.model_construct(**counts)
        reasoning = [u.reasoning_tokens for u in present if u.reasoning_tokens is not None]
        return cls.model_construct(**counts, reasoning_tokens=sum(reasoning) if reasoning else None)


# ``args`` and ``result`` are stored JSON-safe (so every report can hold them):
# values JSON cannot hold -- bytes, sets, arbitrary objects, cycles, NaN, very deep
# nesting, non-string keys, lone surrogates -- are replaced by stand-ins when the
# invocation is built (see multiturn_eval.sanitize), and the runner warns on the
# turn about what was replaced. Graders see the stored values. (A comment, not the
# docstring: the docstring is the report schema's description.)
class ToolInvocation(BaseModel):
    """One tool call the agent made during a turn, in call order."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = {}
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    # left out of report.json while None, so reports without MCP servers keep their bytes
    server: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The MCP server that served the call (agent.mcp_servers[].name); "
        "absent for a Python tool.",
    )
    # None, not default_factory=list: pydantic inspects a factory's signature on every
    # model_construct (~0.1 ms, more than a whole Python tool call)
    _replaced: list[Any] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _json_safe(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        if not isinstance(data, Mapping) or _stored(info):
            return handler(data)
        from .sanitize import clean_text, json_safe

        data = dict(data)
        problems = []
        if isinstance(data.get("args"), Mapping):
            data["args"], found = json_safe(data["args"], "tool_invocation.args")
            problems.extend(found)
        if "result" in data:
            data["result"], found = json_safe(data["result"], "tool_invocation.result")
            problems.extend(found)
        for key in ("name", "error", "server"):
            if isinstance(data.get(key), str):
                data[key] = clean_text(data[key])
        duration = data.get("duration_ms")
        if isinstance(duration, float) and not math.isfinite(duration):
            data["duration_ms"] = None
        invocation = handler(data)
        if problems:
            invocation._replaced = problems
        return invocation


@dataclass(frozen=True)
class TurnFile:
    """A file sent with one turn (``files:`` in the suite)."""

    path: Path
    media_type: str

    @classmethod
    def from_path(cls, path: Path) -> TurnFile:
        media_type, _ = mimetypes.guess_type(path.name)
        return cls(path=path, media_type=media_type or "application/octet-stream")


@dataclass
class TurnReply:
    """What a session returns for one turn."""

    response: str
    tool_invocations: Sequence[ToolInvocation] = ()
    token_usage: TokenUsage | None = None
    warnings: Sequence[str] = ()
    """Things worth showing that do not fail the turn (e.g. ``max_tokens`` reached)."""
    cost_usd: float | None = None
    """Set by model backends that know the price; None when unknown."""


@dataclass(frozen=True)
class CaseContext:
    """Everything about the test case a session, tool or factory may use.

    ``context`` is the test case's ``context:`` mapping (read-only); ``agent``
    the suite's ``agent:`` mapping; ``instructions`` the effective system
    instructions for this session (suite instructions plus the test case's).
    """

    test_case_name: str
    agent: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    instructions: str | None = None
    context: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class PreviousTurn:
    """An earlier turn of the same session, as a grader sees it."""

    turn_index: int
    input: str
    response: str | None
    tool_invocations: tuple[ToolInvocation, ...] = ()


@dataclass(frozen=True)
class GraderContext:
    """What a ``type: code`` grader receives for one turn."""

    turn_input: str
    agent_response: str
    ground_truth: str | None
    tool_invocations: tuple[ToolInvocation, ...]
    retrieval_context: tuple[str, ...] | None
    turn_index: int
    test_case_name: str | None
    turn_config: Mapping[str, Any]
    case_context: Mapping[str, Any]
    previous_turns: tuple[PreviousTurn, ...] = ()


@dataclass(frozen=True)
class ConversationTurn:
    """One turn of a finished conversation, as a conversation-level grader sees it.

    Every turn of the test case is here, in order, including turns that failed
    (``errors`` says why, ``response`` is None when there was no reply) and
    turns that were skipped after the session died (``skipped`` True).
    ``metric_results`` are the turn's own metric results (copies: changing them
    changes nothing in the report).
    """

    turn_index: int
    input: str
    response: str | None
    ground_truth: str | None
    tool_invocations: tuple[ToolInvocation, ...]
    passed: bool
    skipped: bool
    errors: tuple[str, ...]
    metric_results: tuple[MetricResult, ...]
    turn_config: Mapping[str, Any]


@dataclass(frozen=True)
class ConversationContext:
    """What a ``type: code`` grader in ``conversation_evaluations`` receives, once per test case.

    It runs after the last turn, also when the session died or could not be
    opened: then ``session_error`` says why, and the turns that did not run are
    in ``turns`` with ``skipped`` True. ``case_context`` is the test case's
    ``context:`` mapping and ``instructions`` the effective system instructions
    (both read-only).
    """

    test_case_name: str
    case_context: Mapping[str, Any]
    turns: tuple[ConversationTurn, ...]
    instructions: str | None = None
    session_error: str | None = None

    @property
    def tool_invocations(self) -> tuple[ToolInvocation, ...]:
        """Every tool call of the conversation, in call order."""
        return tuple(call for turn in self.turns for call in turn.tool_invocations)

    @property
    def turns_run(self) -> tuple[ConversationTurn, ...]:
        """The turns that were sent (not skipped)."""
        return tuple(turn for turn in self.turns if not turn.skipped)


@dataclass
class GraderResult:
    """A grader's verdict. ``passed=None`` means: derive it from the score."""

    score: float
    passed: bool | None = None
    reason: str | None = None
    details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.score, bool) or not isinstance(self.score, int | float):
            raise TypeError(f"GraderResult.score must be a number, got {self.score!r}")
        if not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"GraderResult.score must be within [0, 1], got {self.score}")


# ------------------------------------------------------------------- simulated users

UserOutcome = Literal["goal_met", "gave_up", "out_of_scope"]
"""How a simulated user may end a conversation (``UserTurn.outcome``)."""
USER_OUTCOMES: tuple[UserOutcome, ...] = ("goal_met", "gave_up", "out_of_scope")


@dataclass(frozen=True, kw_only=True)
class SimulatorContext:
    """What a ``backend: python`` simulator's factory receives, once per run of a test case.

    ``goal``, ``persona``, ``known`` and ``unknown`` are the test case's ``user:``
    block (``known`` read-only); ``context`` is the test case's ``context:``
    mapping (read-only); ``run_index`` is 0 on a single run and counts the
    runs of ``--repeat`` (0, 1, ...), so a simulator can vary between runs.
    """

    goal: str
    persona: str | None = None
    known: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    unknown: tuple[str, ...] = ()
    test_case_name: str
    context: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    run_index: int = 0


@dataclass(frozen=True)
class ConversationMessage:
    """One message of a conversation, as a simulator sees it.

    ``role`` is ``"user"`` (a scripted turn's input, the opening, or a simulated
    message) or ``"agent"``; on an agent message, ``tool_invocations`` are the
    calls the agent made in that turn, and ``error`` says why the turn got no
    reply (then ``text`` is empty).
    """

    role: Literal["user", "agent"]
    text: str
    tool_invocations: tuple[ToolInvocation, ...] = ()
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class UserTurn:
    """A simulated user's next step: a message, the end of the conversation, or both.

    - ``UserTurn(message="...")``: send it and go on (a plain ``str`` means the same);
    - ``UserTurn(message="thanks!", done=True, outcome="goal_met")``: send it; the
      agent's reply to it ends the conversation;
    - ``UserTurn(done=True, outcome="gave_up", reason="...")``: end now, sending nothing.

    ``outcome`` (``"goal_met"``, ``"gave_up"`` or ``"out_of_scope"``) is given with
    ``done=True`` and only then; ``reason`` says why in a sentence.
    """

    message: str | None = None
    done: bool = False
    outcome: UserOutcome | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.message is not None and not isinstance(self.message, str):
            raise TypeError(
                f"UserTurn.message must be a str or None, got {type(self.message).__name__}"
            )
        if not isinstance(self.done, bool):
            raise TypeError(f"UserTurn.done must be True or False, got {self.done!r}")
        if self.reason is not None and not isinstance(self.reason, str):
            raise TypeError(
                f"UserTurn.reason must be a str or None, got {type(self.reason).__name__}"
            )
        if self.outcome is not None and self.outcome not in USER_OUTCOMES:
            raise ValueError(
                f"UserTurn.outcome must be one of {', '.join(map(repr, USER_OUTCOMES))}; "
                f"got {self.outcome!r}"
            )
        if self.message is not None and not self.message.strip():
            raise ValueError(
                "UserTurn.message is empty; give the text to send, or message=None with done=True"
            )
        if self.done and self.outcome is None:
            raise ValueError(
                "UserTurn(done=True) needs an outcome: 'goal_met', 'gave_up' or 'out_of_scope'"
            )
        if not self.done and self.outcome is not None:
            raise ValueError(
                f"UserTurn.outcome={self.outcome!r} ends the conversation: give it with done=True"
            )
        if not self.done and self.message is None:
            raise ValueError(
                "UserTurn has no message and does not end the conversation; give message=... "
                "or done=True with an outcome"
            )
