"""What a turn says about tool calls: ``expected_tools`` entries and their argument matchers.

An argument matcher is a literal, ``{fuzzy: text}`` or ``{regex: pattern}``;
:func:`compile_regex` is the one way a user's pattern is compiled (here and for
``metric: regex``), bounded so that no pattern can hang a run.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import regex as regex_engine
from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .common import PlainData, ScalarText, _Strict, at_path


class FuzzyMatcher(_Strict):
    """``{fuzzy: "206,588"}``: compare as text after normalisation, or as numbers if both parse."""

    fuzzy: ScalarText


class RegexMatcher(_Strict):
    """``{regex: "181001(\\\\.0+)?"}``: ``re.fullmatch`` on ``str(actual)``."""

    # (the docstring above is the JSON Schema's description: keep it one line)
    # The pattern must compile both with Python's re (its syntax and error messages are the
    # documented contract) and with the `regex` package in its V0 (re-compatible) mode, which
    # runs the match: unlike re it takes a timeout, so a pattern such as (a+)+$ cannot hang a
    # run on a long agent value (grading.matchers.REGEX_TIMEOUT). Compiling at load with the
    # engine that matches at run time means a pattern that loads always runs.
    regex: str
    _compiled: regex_engine.Pattern[str] = PrivateAttr()

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        compile_regex(value)
        return value

    def model_post_init(self, __context: Any) -> None:
        self._compiled = compile_regex(self.regex)

    @property
    def pattern(self) -> regex_engine.Pattern[str]:
        return self._compiled


MAX_REGEX_SIZE = 100_000
"""Items a pattern may stand for once its counted repeats are unrolled."""


def compile_regex(pattern: str, *, ignore_case: bool = False) -> regex_engine.Pattern[str]:
    """A user's pattern compiled for bounded matching; ValueError says why it cannot be.

    Counted repeats that nest to more than :data:`MAX_REGEX_SIZE` items (such as
    ``(?:a{1000}){1000}``) are refused: the ``regex`` engine unrolls them when
    compiling, and ``(?:a{65535}){65535}`` alone would take gigabytes.
    """
    try:
        with (
            warnings.catch_warnings()
        ):  # re's FutureWarnings: _inspect_regex reports the one that matters
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ValueError(f"cannot compile: {exc}") from None
    except RecursionError:
        raise ValueError("cannot compile: its groups nest too deeply") from None
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"cannot compile: {exc}") from None
    size, ambiguous = _inspect_regex(pattern)
    if ambiguous:
        raise ValueError(
            f"cannot compile: {ambiguous}; Python's re and the regex engine that runs the match "
            "read '[[:name:]]' differently (write the class out, e.g. [a-zA-Z], or escape the '[')"
        )
    if size > MAX_REGEX_SIZE:
        raise ValueError(
            f"cannot compile: its counted repeats unroll to more than {MAX_REGEX_SIZE:,} items "
            "(nested {n} counts multiply); use + or * instead of large counts"
        )
    try:
        flags = regex_engine.V0 | (regex_engine.IGNORECASE if ignore_case else 0)
        return regex_engine.compile(pattern, flags=flags)
    except Exception as exc:  # regex.error, ValueError, OverflowError, ...
        raise ValueError(f"cannot compile: {exc} (with the regex engine that runs it)") from None


def _inspect_regex(pattern: str) -> tuple[int, str | None]:
    """(items ``pattern`` stands for with each counted repeat written out, re's warning).

    :mod:`re` warns (FutureWarning) about constructs that other engines, ``regex``
    among them, read another way, such as the POSIX class in ``[[:alpha:]]``.
    """
    try:
        parser: Any = importlib.import_module("re._parser")
        unbounded = importlib.import_module("re._constants").MAXREPEAT
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tree = parser.parse(pattern)
    except Exception:  # another Python's internals: skip these checks
        return 0, None
    # only a POSIX class reads differently in regex.V0 (set operations are V1-only there)
    ambiguous = next(
        (
            str(w.message)
            for w in caught
            if issubclass(w.category, FutureWarning)
            and re.search(r"\[:\w+:\]", pattern)
            and "nested set" in str(w.message)
        ),
        None,
    )

    def size(items: Any) -> int:
        total = 0
        for op, arg in items:
            name = str(op)
            if name.endswith("REPEAT"):  # MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT
                low, high, sub = arg
                total += size(sub) * max(1, low if high == unbounded else high)
            elif name == "SUBPATTERN":
                total += size(arg[-1])
            elif name == "BRANCH":
                total += sum(size(branch) for branch in arg[1])
            elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                total += size(arg[-1] if name != "ATOMIC_GROUP" else arg)
            else:
                total += 1
            if total > MAX_REGEX_SIZE:
                break
        return total

    return size(tree), ambiguous


def _matcher_tag(value: Any) -> str:
    if isinstance(value, Mapping):
        if "regex" in value:
            return "regex-matcher"
        if "fuzzy" in value:
            return "fuzzy-matcher"
    if isinstance(value, FuzzyMatcher):
        return "fuzzy-matcher"
    if isinstance(value, RegexMatcher):
        return "regex-matcher"
    return "literal-matcher"


def _check_matcher_keys(value: Any) -> Any:
    if isinstance(value, Mapping) and ("fuzzy" in value or "regex" in value) and len(value) != 1:
        raise PydanticCustomError(
            "matcher_keys",
            "a matcher mapping has exactly one key, 'fuzzy' or 'regex'; got {keys}",
            {"keys": ", ".join(repr(k) for k in value)},
        )
    return value


ArgMatcher = Annotated[
    Annotated[FuzzyMatcher, Tag("fuzzy-matcher")]
    | Annotated[RegexMatcher, Tag("regex-matcher")]
    | Annotated[
        PlainData,
        Tag("literal-matcher"),
        WithJsonSchema(
            {
                "description": "A literal value (any mapping without 'fuzzy'/'regex' keys).",
                "not": {
                    "type": "object",
                    "anyOf": [{"required": ["fuzzy"]}, {"required": ["regex"]}],
                },
            }
        ),
    ],
    Discriminator(_matcher_tag),
    BeforeValidator(_check_matcher_keys),
    Field(
        description=(
            "A literal (equal after int/float equivalence, compared element-wise), "
            "{fuzzy: text} or {regex: pattern}."
        )
    ),
]


# ----------------------------------------------------------------------- expectations


class ExpectedTool(_Strict):
    """A tool the agent must call during the turn."""

    name: str = Field(min_length=1, description="Matches any call whose name contains it.")
    args: dict[str, ArgMatcher] | None = Field(
        default=None,
        description="Arguments one single call must have; unasserted arguments are ignored.",
    )
    count: int = Field(default=1, ge=1, description="At least this many matching calls.")
    max_count: int | None = Field(
        default=None,
        ge=1,
        description="At most this many matching calls (count: 1, max_count: 1 = exactly once).",
    )
    args_mode: Literal["partial", "exact"] | None = Field(
        default=None,
        description=(
            "partial: unasserted arguments are ignored; exact: the call has no other arguments. "
            "Default: the turn's (or conversation_tools') args_mode, else partial."
        ),
    )

    @model_validator(mode="after")
    def _counts(self) -> ExpectedTool:
        if self.max_count is not None and self.max_count < self.count:
            raise at_path(
                ("max_count",),
                f"is {self.max_count}, below count ({self.count}): no number of calls can "
                "satisfy both",
            )
        return self


ToolOrder = Literal["any", "in_order"]
ArgsMode = Literal["partial", "exact"]


def _tool_tag(value: Any) -> str:
    return "tool-name" if isinstance(value, str) else "tool-spec"


ExpectedToolItem = Annotated[
    Annotated[str, Tag("tool-name")] | Annotated[ExpectedTool, Tag("tool-spec")],
    Discriminator(_tool_tag),
]


def _normalise_tools(items: list[str | ExpectedTool] | None) -> list[ExpectedTool] | None:
    if items is None:
        return None
    return [ExpectedTool(name=item) if isinstance(item, str) else item for item in items]
