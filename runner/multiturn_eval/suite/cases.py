"""``test_cases:``: a test case, its turns, its files and its conversation-level tool checks.

A turn keeps keys the format does not know as ``turn_config`` for graders,
unless a key looks like a misspelling of a known one (``ground_truht``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..scalars import plain_numbers
from .blocks import JudgeConfig
from .common import PlainData, ScalarText, _Strict, _suggest, at_path
from .evaluations import Evaluation, _unique_metric_names
from .tool_checks import ArgsMode, ExpectedTool, ExpectedToolItem, ToolOrder, _normalise_tools
from .users import UserConfig


class FileRef(_Strict):
    path: str = Field(description="Relative to the suite file's directory.")
    media_type: str | None = Field(default=None, description="Default: guessed from the name.")


TURN_KEYS = (
    "input",
    "ground_truth",
    "expected_tools",
    "evaluations",
    "files",
    "retrieval_context",
    "judge",
    "forbidden_tools",
    "tool_order",
    "args_mode",
)


def likely_misspellings(known: Sequence[str]) -> list[str]:
    """One-slip variants of ``known`` keys that :func:`_suggest` takes for those keys.

    A letter dropped, doubled or swapped with the next, ``_`` written as ``-``, a
    space or nothing, a plural ``s`` added or dropped, a capital first letter: the
    editor schema rejects these turn keys, as the loader does (it rejects any key
    close to a known one; a schema can only list them).
    """
    found: set[str] = set()
    for key in known:
        variants = {key.capitalize(), key + "s", key.removesuffix("s")}
        for i in range(len(key)):
            variants.add(key[:i] + key[i + 1 :])
            variants.add(key[:i] + key[i] + key[i:])
            if i + 1 < len(key):
                variants.add(key[:i] + key[i + 1] + key[i] + key[i + 2 :])
        for joint in ("-", " ", ""):
            variants.add(key.replace("_", joint))
        found |= {v for v in variants if v and v not in known and _suggest(v, list(known))}
    return sorted(found)


def _turn_schema(schema: dict[str, Any]) -> None:
    """The editor schema's share of ``_reject_misspellings``."""
    schema["propertyNames"] = {
        "description": "a key close to a known turn key is taken for a misspelling",
        "not": {"enum": likely_misspellings(TURN_KEYS)},
    }


class Turn(BaseModel):
    """One user message and what to check about the reply.

    Keys other than the known ones are kept in ``turn_config`` for graders.
    """

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_turn_schema)

    input: ScalarText
    ground_truth: ScalarText | None = None
    expected_tools: list[ExpectedToolItem] | None = None
    evaluations: list[Evaluation] | None = None
    files: list[FileRef] = Field(default_factory=list)
    retrieval_context: list[ScalarText] | None = None
    judge: JudgeConfig | None = Field(
        default=None, description="Overrides the judge settings for this turn's judges."
    )
    forbidden_tools: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None,
        description="A call in this turn whose name contains one of these fails the turn.",
    )
    tool_order: ToolOrder = Field(
        default="any",
        description="in_order: expected_tools must match calls in that order (others may come between).",
    )
    args_mode: ArgsMode = Field(
        default="partial",
        description="Default args_mode of this turn's expected_tools (partial or exact).",
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_misspellings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key in data:
                if isinstance(key, str) and key not in TURN_KEYS:
                    hint = _suggest(key, list(TURN_KEYS))
                    if hint:
                        raise at_path((key,), f"unknown turn key{hint}")
            if any(key not in TURN_KEYS for key in data):  # turn_config: free-form data
                data = {k: v if k in TURN_KEYS else plain_numbers(v) for k, v in data.items()}
        return data

    @field_validator("evaluations")
    @classmethod
    def _check_names(cls, value: list[Evaluation] | None) -> list[Evaluation] | None:
        return _unique_metric_names(value)

    @property
    def turn_config(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def tools(self) -> list[ExpectedTool]:
        return _normalise_tools(self.expected_tools) or []


# ------------------------------------------------------------------------- test cases


class ConversationTools(_Strict):
    """Tool assertions over every call of the conversation, in call order (all turns)."""

    expected_tools: list[ExpectedToolItem] | None = Field(
        default=None, description="Counts (count, max_count) are over the whole conversation."
    )
    forbidden_tools: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None, description="No call of the conversation may have a name containing one."
    )
    tool_order: ToolOrder = "any"
    args_mode: ArgsMode = "partial"

    @property
    def tools(self) -> list[ExpectedTool]:
        return _normalise_tools(self.expected_tools) or []


CONVERSATION_KEYS = ("conversation_evaluations", "conversation_tools")
"""Test-case keys that check the whole conversation (not allowed on a legacy ``input:`` case)."""


class TestCase(_Strict):
    """A conversation: ``input`` (legacy single turn), ``turns``, or a simulated ``user``.

    A test case with ``user:`` is simulated: its optional scripted ``turns`` are sent
    first, then the simulated user takes over (SPEC 6.11).
    """

    __test__ = False  # not a pytest class

    name: str | None = Field(default=None, description="Default: test_case_<index>.")
    tags: list[str] = Field(default_factory=list)
    instructions: str | None = Field(
        default=None, description="Appended to agent.instructions for this session only."
    )
    context: dict[str, PlainData] = Field(
        default_factory=dict,
        description="Free-form data for this case's agent factory, tools (CaseContext) and graders.",
    )
    evaluations: list[Evaluation] | None = None
    judge: JudgeConfig | None = Field(
        default=None, description="Overrides the suite's judge settings for this test case."
    )
    conversation_evaluations: list[Evaluation] | None = Field(
        default=None,
        description=(
            "Run once after the last turn on the whole conversation (also when the session "
            "died: graded on the turns that ran). A code grader receives a ConversationContext."
        ),
    )
    conversation_tools: ConversationTools | None = Field(
        default=None,
        description="Tool assertions over every call of the conversation (a case-level check).",
    )
    turns: list[Turn] | None = None
    user: UserConfig | None = Field(
        default=None,
        description=(
            "A simulated user: after the scripted turns (optional), it talks to the agent "
            "toward its goal (SPEC 6.11)."
        ),
    )
    # legacy single-turn shape
    input: ScalarText | None = None
    ground_truth: ScalarText | None = None
    expected_tools: list[ExpectedToolItem] | None = None
    files: list[FileRef] | None = None
    retrieval_context: list[ScalarText] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> TestCase:
        if self.turns is not None:
            if self.input is not None:
                raise at_path(("input",), "a test case has either 'input' or 'turns', not both")
            if not self.turns:
                instead = "leave 'turns:' out" if self.user is not None else "use 'input:'"
                raise at_path(("turns",), f"is empty; give at least one turn, or {instead}")
            for key in ("ground_truth", "expected_tools", "files", "retrieval_context"):
                if getattr(self, key) is not None:
                    raise at_path(
                        (key,), "not allowed beside 'turns'; put it on the turn it belongs to"
                    )
        elif self.user is not None:
            pass  # simulated: scripted turns are optional ('input:' beside 'user:' is a load error)
        elif self.input is None:
            raise at_path(
                ("turns",),
                "a test case needs 'turns' (or 'input' for a single turn, or 'user' for a "
                "simulated user)",
            )
        else:
            for key in CONVERSATION_KEYS:
                if getattr(self, key, None) is not None:
                    raise at_path(
                        (key,),
                        "needs a conversation: write this test case with 'turns:' "
                        "(a single-turn 'input:' case is checked with 'evaluations:')",
                    )
        return self

    @field_validator("conversation_evaluations")
    @classmethod
    def _check_conversation_names(cls, value: list[Evaluation] | None) -> list[Evaluation] | None:
        for i, evaluation in enumerate(value or []):
            if evaluation.type == "standard":
                raise at_path(
                    (i, "type"),
                    "a conversation evaluation is a code grader (type: code) or a judge; "
                    "'standard' checks belong to a turn's evaluations",
                )
        return _unique_metric_names(value)

    @field_validator("evaluations")
    @classmethod
    def _check_names(cls, value: list[Evaluation] | None) -> list[Evaluation] | None:
        return _unique_metric_names(value)

    @property
    def is_legacy(self) -> bool:
        return self.turns is None and self.user is None

    @property
    def turn_bound(self) -> int:
        """The most turns one run may have: the scripted ones, and a simulated user's
        ``max_turns`` (its opening included)."""
        return len(self.effective_turns()) + (self.user.max_turns if self.user else 0)

    def effective_turns(self) -> list[Turn]:
        """The scripted turns to run; a legacy case becomes one turn (a simulated case's
        simulated turns are not known before it runs)."""
        if self.turns is not None:
            return self.turns
        if self.user is not None:
            return []
        return [
            Turn(
                input=self.input or "",
                ground_truth=self.ground_truth,
                expected_tools=self.expected_tools,
                files=self.files or [],
                retrieval_context=self.retrieval_context,
            )
        ]
