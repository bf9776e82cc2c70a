"""Pydantic models of the suite file (SPEC 4).

Unknown keys are errors everywhere except inside a turn, where they are kept as
``turn_config`` for graders; a turn key that looks like a misspelling of a known
one (``ground_truht``) is still an error that suggests the known key.

The models only check shape and local rules. Whatever needs the file system or
an import (``instructions_file``, ``files``, tools, graders, the python
factory) is checked by :mod:`multiturn_eval.loader`, which also turns every
validation error into a located :class:`~multiturn_eval.errors.ConfigIssue`.

Errors that belong to a sub-field are raised with :func:`at_path`, which the
loader appends to the location pydantic reports, so a message points at the
exact key (``test_cases[3].ground_truth``) rather than at its parent.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import re
import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import regex as regex_engine
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .scalars import number_text, plain_numbers

# ---------------------------------------------------------------------------- helpers

AT_PATH_ERROR = "multiturn_eval_at_path"
CALLABLE_PATTERN = r"^[\w.]+:[\w.]+$"
"""``module.path:callable`` (tools, graders, factories); the loader words its error."""
URL_PATTERN = r"^(https?://|\$\{)"
"""A URL; or a ``${VAR}`` the run leaves as written (regrade calls no agent), which is
also how an editor sees the suite file before any substitution."""

#: discriminator tags that pydantic puts into error locations; the loader drops them
UNION_TAGS = frozenset(
    {
        "fuzzy-matcher",
        "regex-matcher",
        "literal-matcher",
        "tool-name",
        "tool-spec",
        "standard",
        "code",
        "judge",
        "python",
        "http",
        "anthropic",
        "semantic-kernel",
        "openai",
        "str",
        "int",
        "float",
    }
)


def at_path(path: tuple[str | int, ...], message: str) -> PydanticCustomError:
    """An error located ``path`` below the model that raises it."""
    return PydanticCustomError(AT_PATH_ERROR, "{message}", {"message": message, "path": path})


def _suggest(word: str, known: list[str]) -> str:
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return f"; did you mean '{match[0]}'?" if match else ""


def _scalar_to_str(value: Any) -> Any:
    """YAML reads ``ground_truth: 1.10`` as a number; the suite means the text as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_text(value)
    return value


ScalarText = Annotated[
    str,
    BeforeValidator(_scalar_to_str),
    WithJsonSchema({"type": ["string", "number", "boolean"]}),
]

PlainData = Annotated[Any, AfterValidator(plain_numbers)]
"""Free-form data: numbers in it are plain int / float (see :mod:`.scalars`)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- matchers


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


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def json_schema_problem(schema: Any) -> tuple[tuple[str | int, ...], str] | None:
    """(path inside the schema, why) when ``schema`` is not a valid JSON Schema; else None.

    Checked with the meta-schema of the draft the schema names in ``$schema``
    (default: the latest draft jsonschema knows), by ``check_schema``.
    """
    import jsonschema  # a runtime dependency; imported when a suite uses a schema

    if not isinstance(schema, dict | bool):
        return (), f"a JSON Schema is a mapping (or true/false); got {type(schema).__name__}"
    try:
        cls: Any = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = tuple(exc.path)
        return where, f"is not a valid JSON Schema: {exc.message}"
    except Exception as exc:  # an unknown $schema, a broken $ref...
        return (), f"is not a valid JSON Schema: {type(exc).__name__}: {exc}"
    return None


def _matcher_tag(value: Any) -> str:
    if isinstance(value, Mapping):
        if "regex" in value:
            return "regex-matcher"
        if "fuzzy" in value:
            return "fuzzy-matcher"
        if isinstance(value, FuzzyMatcher):
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


# ------------------------------------------------------------------------ evaluations

_EQUALITY_FLAGS = ("case_insensitive", "strip_whitespace", "strip_punctuation")
_NUMERIC_FLAGS = (
    "absolute_tolerance",
    "relative_tolerance",
    "accept_percent",
    "accept_thousands_separators",
)


RESPONSE_CHECKS = ("contains", "not_contains", "regex", "json")
"""Standard metrics that check the reply itself: they run on every turn, ground_truth or not."""

METRIC_FLAGS: dict[str, tuple[str, ...]] = {
    "equality": _EQUALITY_FLAGS,
    "numeric": _NUMERIC_FLAGS,
    "contains": ("value", "mode", "case_insensitive"),
    "not_contains": ("value", "mode", "case_insensitive"),
    "regex": ("pattern", "fullmatch", "case_insensitive"),
    "json": ("strip_code_fence", "json_schema", "schema_file"),
}
_ALL_FLAGS = tuple(dict.fromkeys(f for flags in METRIC_FLAGS.values() for f in flags))
_FLAG_KEYS = {"json_schema": "schema"}
"""Fields whose suite key differs from the field name."""


_NEEDS = {"contains": "value", "not_contains": "value", "regex": "pattern"}
"""The key each metric cannot do without (the model's validator says so at load)."""


def _standard_schema(schema: dict[str, Any]) -> None:
    """The editor schema's share of ``_flags_fit_metric``: per metric, the flags of the
    other metrics are not allowed and the key it needs is required."""
    rules = []
    for metric, allowed in METRIC_FLAGS.items():
        then: dict[str, Any] = {
            "properties": {
                _FLAG_KEYS.get(flag, flag): False for flag in _ALL_FLAGS if flag not in allowed
            }
        }
        needed = _NEEDS.get(metric)
        if needed is not None:
            then["required"] = [needed]
            then["properties"][needed] = {"not": {"type": "null"}}
        rules.append({"if": {"properties": {"metric": {"const": metric}}}, "then": then})
    schema["allOf"] = rules


class StandardEvaluation(_Strict):
    """A built-in evaluator: equality/numeric against ``ground_truth``, or a check of the reply."""

    model_config = ConfigDict(json_schema_extra=_standard_schema)

    type: Literal["standard"]
    metric: Literal["equality", "numeric", "contains", "not_contains", "regex", "json"]
    name: str | None = Field(default=None, description="Metric name in reports; default: metric.")
    threshold: float | None = Field(default=None, ge=0, le=1)
    case_insensitive: bool = False
    strip_whitespace: bool = False
    strip_punctuation: bool = False
    absolute_tolerance: float = Field(default=1e-6, ge=0)
    relative_tolerance: float = Field(default=0.0, ge=0)
    accept_percent: bool = False
    accept_thousands_separators: bool = False
    # response checks (README "Checks")
    value: ScalarText | list[ScalarText] | None = Field(
        default=None, description="contains / not_contains: the text, or a list of texts."
    )
    mode: Literal["all", "any"] = Field(
        default="all",
        description=(
            "contains: all (every text) or any (at least one); not_contains: all (none may "
            "appear) or any (at least one must be absent)."
        ),
    )
    pattern: str | None = Field(
        default=None, description="regex: searched for in the reply (fullmatch: true to anchor)."
    )
    fullmatch: bool = Field(default=False, description="regex: the whole reply must match.")
    strip_code_fence: bool = Field(
        default=False,
        description="json: parse the inside of one ```fenced``` block if there is one.",
    )
    json_schema: dict[str, PlainData] | bool | None = Field(
        default=None, alias="schema", description="json: a JSON Schema the parsed reply must meet."
    )
    schema_file: str | None = Field(
        default=None, description="json: a JSON Schema file, relative to the suite file."
    )
    _pattern: regex_engine.Pattern[str] | None = PrivateAttr(default=None)
    _needles: tuple[regex_engine.Pattern[str], ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _flags_fit_metric(self) -> StandardEvaluation:
        allowed = METRIC_FLAGS[self.metric]
        for flag in _ALL_FLAGS:
            if flag in self.model_fields_set and flag not in allowed:
                raise at_path(
                    (_FLAG_KEYS.get(flag, flag),),
                    f"applies to another metric, not to '{self.metric}'",
                )
        if self.metric in ("contains", "not_contains"):
            self._check_values()
        elif self.metric == "regex":
            if self.pattern is None:
                raise at_path(
                    ("pattern",), f"required key missing: metric '{self.metric}' needs a pattern"
                )
            try:
                compile_regex(self.pattern, ignore_case=self.case_insensitive)
            except ValueError as exc:
                raise at_path(("pattern",), str(exc)) from None
        elif self.metric == "json":
            if self.json_schema is not None and self.schema_file is not None:
                raise at_path(("schema_file",), "give either 'schema' or 'schema_file'")
            if self.json_schema is not None:
                problem = json_schema_problem(self.json_schema)
                if problem is not None:
                    raise at_path(("schema", *problem[0]), problem[1])
        return self

    def _check_values(self) -> None:
        if self.value is None:
            raise at_path(
                ("value",),
                f"required key missing: metric '{self.metric}' needs a value (a text or a list)",
            )
        values = self.values
        if not values:
            raise at_path(("value",), "is an empty list; give at least one text")
        for i, text in enumerate(values):
            if not text:
                where: tuple[str | int, ...] = (
                    ("value", i) if isinstance(self.value, list) else ("value",)
                )
                raise at_path(where, "is empty; an empty text is found in every reply")

    def model_post_init(self, __context: Any) -> None:
        if self.metric == "regex" and self.pattern is not None:
            # runs before _flags_fit_metric, which reports a pattern that cannot compile
            with contextlib.suppress(ValueError):
                self._pattern = compile_regex(self.pattern, ignore_case=self.case_insensitive)
        elif self.metric in ("contains", "not_contains") and self.case_insensitive:
            flags = regex_engine.V0 | regex_engine.IGNORECASE | regex_engine.FULLCASE
            self._needles = tuple(
                regex_engine.compile(regex_engine.escape(_nfc(v)), flags=flags) for v in self.values
            )

    @property
    def values(self) -> list[str]:
        """contains / not_contains: the texts looked for, always as a list."""
        if self.value is None:
            return []
        return list(self.value) if isinstance(self.value, list) else [self.value]

    @property
    def compiled_pattern(self) -> regex_engine.Pattern[str] | None:
        """regex: the pattern compiled at load (with case_insensitive applied)."""
        return self._pattern

    @property
    def needles(self) -> tuple[regex_engine.Pattern[str], ...]:
        """contains / not_contains with case_insensitive: one full-case-folding pattern per text."""
        return self._needles

    @property
    def is_response_check(self) -> bool:
        return self.metric in RESPONSE_CHECKS

    @property
    def metric_name(self) -> str:
        return self.name or self.metric


class CodeEvaluation(_Strict):
    """A Python grader: ``grader: "module.path:callable"``, imported at load."""

    type: Literal["code"]
    grader: str = Field(pattern=CALLABLE_PATTERN, description="module.path:callable")
    name: str | None = Field(default=None, description="Metric name; default: the callable's name.")
    threshold: float | None = Field(default=None, ge=0, le=1)
    enabled: bool = True

    @property
    def metric_name(self) -> str:
        return self.name or self.grader.rsplit(":", 1)[1].rsplit(".", 1)[-1]


class RetryConfig(_Strict):
    """Capped retries of transient provider errors (429, 529, 5xx, connection errors)."""

    max_attempts: int = Field(
        default=4, ge=1, le=20, description="Attempts in all, first included."
    )
    initial_delay: float = Field(default=1.0, ge=0, description="Seconds before the first retry.")
    max_delay: float = Field(default=20.0, ge=0, description="Cap on one backoff wait.")
    max_retry_after: float = Field(
        default=60.0, ge=0, description="Cap on an honoured retry-after; longer waits give up."
    )


# ---------------------------------------------------------------------------- judges

JudgeScale = Literal["pass_fail", "0-1", "1-5"]

#: the threshold a scale uses when the evaluation gives none (score >= threshold passes)
DEFAULT_THRESHOLDS: dict[str, float] = {"0-1": 0.5, "1-5": 3.0}
_SCALE_RANGES: dict[str, tuple[float, float]] = {"0-1": (0.0, 1.0), "1-5": (1.0, 5.0)}


class JudgeConfig(_Strict):
    """The model that grades a ``type: judge`` evaluation; every key optional at every level.

    Levels merge key by key, innermost wins: the evaluation's own ``judge:``, then the
    turn's, the test case's, the suite's top-level ``judge:``. After merging, ``model``
    is required; ``backend`` defaults to anthropic, ``temperature`` to 0, ``max_tokens``
    to 1024, ``api_key`` to ANTHROPIC_API_KEY / OPENAI_API_KEY.
    """

    backend: Literal["anthropic", "openai"] | None = Field(
        default=None, description="Default: anthropic."
    )
    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="Default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL, else the provider's.",
    )
    api_key: str | None = Field(
        default=None, description="Default: ANTHROPIC_API_KEY / OPENAI_API_KEY."
    )
    api_version: str | None = Field(
        default=None,
        description="openai only: an Azure OpenAI api-version (base_url is the Azure endpoint).",
    )
    temperature: float | None = Field(default=None, ge=0, description="Default: 0.")
    max_tokens: int | None = Field(default=None, ge=1, description="Default: 1024.")
    retry: RetryConfig | None = None


class JudgeEvaluation(_Strict):
    """An LLM judge grading the reply against a rubric (structured verdict)."""

    type: Literal["judge"]
    name: str | None = Field(default=None, description="Metric name in reports; default: judge.")
    rubric: str | None = Field(default=None, min_length=1)
    rubric_file: str | None = Field(
        default=None, description="Path relative to the suite file; read at load."
    )
    use_ground_truth: bool | None = Field(
        default=None,
        description=(
            "Show the turn's ground_truth to the judge as the reference answer. Default: yes "
            "when the turn has one; true on a turn without one is an error."
        ),
    )
    scale: JudgeScale = "pass_fail"
    threshold: float | None = Field(
        default=None,
        description="0-1: default 0.5; 1-5: default 3; pass_fail: not used (the verdict decides).",
    )
    prompt_file: str | None = Field(
        default=None,
        description="Replaces the packaged prompt template (path relative to the suite).",
    )
    judge: JudgeConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> JudgeEvaluation:
        if (self.rubric is None) == (self.rubric_file is None):
            raise at_path(("rubric",), "give exactly one of 'rubric' and 'rubric_file'")
        if self.threshold is not None:
            if self.scale == "pass_fail":
                raise at_path(
                    ("threshold",), "scale: pass_fail has no threshold (the verdict decides)"
                )
            low, high = _SCALE_RANGES[self.scale]
            if not low <= self.threshold <= high:
                raise at_path(
                    ("threshold",),
                    f"must be within [{low:g}, {high:g}] for scale {self.scale}; got {self.threshold!r}",
                )
        return self

    @property
    def metric_name(self) -> str:
        return self.name or "judge"

    @property
    def effective_threshold(self) -> float | None:
        if self.scale == "pass_fail":
            return None
        return self.threshold if self.threshold is not None else DEFAULT_THRESHOLDS[self.scale]


Evaluation = Annotated[
    StandardEvaluation | CodeEvaluation | JudgeEvaluation, Field(discriminator="type")
]


def _unique_metric_names(evaluations: list[Evaluation] | None) -> list[Evaluation] | None:
    seen: dict[str, int] = {}
    for i, evaluation in enumerate(evaluations or []):
        name = evaluation.metric_name
        if name in seen:
            raise at_path(
                (i, "name"),
                f"metric name '{name}' is already used by evaluations[{seen[name]}]; "
                "give one of them a distinct 'name:'",
            )
        seen[name] = i
    return evaluations


# ------------------------------------------------------------------------------ turns


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
    """A conversation: either ``input`` (legacy single turn) or ``turns``."""

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
                raise at_path(("turns",), "is empty; give at least one turn, or use 'input:'")
            for key in ("ground_truth", "expected_tools", "files", "retrieval_context"):
                if getattr(self, key) is not None:
                    raise at_path(
                        (key,), "not allowed beside 'turns'; put it on the turn it belongs to"
                    )
        elif self.input is None:
            raise at_path(("turns",), "a test case needs 'turns' (or 'input' for a single turn)")
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
        return self.turns is None

    def effective_turns(self) -> list[Turn]:
        """The turns to run; a legacy case becomes one turn."""
        if self.turns is not None:
            return self.turns
        return [
            Turn(
                input=self.input or "",
                ground_truth=self.ground_truth,
                expected_tools=self.expected_tools,
                files=self.files or [],
                retrieval_context=self.retrieval_context,
            )
        ]


# ------------------------------------------------------------------------------ agent


class ToolSpec(_Strict):
    """A Python callable offered to the model as a tool."""

    function: str = Field(pattern=CALLABLE_PATTERN, description="module.path:callable")
    name: str | None = Field(default=None, description="Default: the callable's name.")
    description: str | None = Field(default=None, description="Default: the docstring.")


class _AgentCommon(_Strict):
    model: str | None = None
    instructions: str | None = None
    instructions_file: str | None = Field(
        default=None, description="Path relative to the suite file; read at load."
    )
    temperature: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    tools: list[ToolSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_instructions(self) -> _AgentCommon:
        if self.instructions is not None and self.instructions_file is not None:
            raise at_path(
                ("instructions_file",), "give either 'instructions' or 'instructions_file'"
            )
        return self


class PythonAgent(_AgentCommon):
    """Your own agent in Python: ``factory(CaseContext) -> session``."""

    backend: Literal["python"]
    factory: str = Field(pattern=CALLABLE_PATTERN, description="module.path:callable")
    options: dict[str, PlainData] = Field(
        default_factory=dict, description="Free-form settings for your factory (CaseContext.agent)."
    )


class HttpAgent(_AgentCommon):
    """Your agent behind an HTTP endpoint: one POST per turn."""

    backend: Literal["http"]
    url: str = Field(pattern=URL_PATTERN, description="Receives one JSON POST per turn.")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, description="Seconds; default: turn_timeout.")
    retry: RetryConfig = Field(default_factory=RetryConfig)
    options: dict[str, PlainData] = Field(
        default_factory=dict, description="Sent as 'options' per request."
    )


class AnthropicAgent(_AgentCommon):
    """Claude through the anthropic SDK's Messages API with a client-side tool loop."""

    backend: Literal["anthropic"]
    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int = Field(default=1024, ge=1)
    max_tool_rounds: int = Field(default=10, ge=1)
    prompt_caching: bool = False
    retry: RetryConfig = Field(default_factory=RetryConfig)


class SemanticKernelAgent(_AgentCommon):
    """A Semantic Kernel ChatCompletionAgent with automatic function calling."""

    backend: Literal["semantic-kernel"]
    service: Literal["openai", "azure-openai", "anthropic"]
    model: str
    base_url: str | None = None
    api_key: str | None = None
    api_version: str | None = Field(default=None, description="azure-openai only.")
    max_tool_rounds: int = Field(default=10, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _azure_only(self) -> SemanticKernelAgent:
        if self.api_version is not None and self.service != "azure-openai":
            raise at_path(("api_version",), "applies to service: azure-openai only")
        if self.service == "azure-openai" and not self.base_url:
            raise at_path(("base_url",), "service: azure-openai needs base_url (the endpoint)")
        return self


class AzureConfig(_Strict):
    """Azure OpenAI: the resource endpoint, the API version and the deployment."""

    endpoint: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="https://<resource>.openai.azure.com; default: AZURE_OPENAI_ENDPOINT.",
    )
    api_version: str | None = Field(
        default=None,
        min_length=1,
        description="Default: OPENAI_API_VERSION, else AZURE_OPENAI_API_VERSION.",
    )
    deployment: str | None = Field(default=None, min_length=1, description="Default: agent.model.")


class OpenAIAgent(_AgentCommon):
    """Any OpenAI-compatible Chat Completions endpoint through the openai SDK, with a client-side tool loop."""

    backend: Literal["openai"]
    model: str = Field(min_length=1)
    service: Literal["openai", "azure"] = Field(
        default="openai", description="azure: Azure OpenAI (also implied by an 'azure:' block)."
    )
    base_url: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="Default: OPENAI_BASE_URL, else https://api.openai.com/v1.",
    )
    api_key: str | None = Field(
        default=None, description="Default: OPENAI_API_KEY (AZURE_OPENAI_API_KEY on Azure)."
    )
    azure: AzureConfig | None = None
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description="auto, required, none, or a tool's name; applies to a turn's first request.",
    )
    extra_body: dict[str, PlainData] = Field(
        default_factory=dict,
        description="Merged into every request body (server-specific options).",
    )
    max_tool_rounds: int = Field(default=10, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _one_endpoint(self) -> OpenAIAgent:
        if self.azure is not None and "service" in self.model_fields_set and not self.on_azure:
            raise at_path(("azure",), "applies to service: azure only")
        if self.on_azure and self.base_url is not None:
            raise at_path(
                ("base_url",), "not used with Azure OpenAI; give the endpoint as azure.endpoint"
            )
        return self

    @property
    def on_azure(self) -> bool:
        """Azure OpenAI: ``service: azure``, or an ``azure:`` block without a ``service:``."""
        return self.service == "azure" or (
            self.azure is not None and "service" not in self.model_fields_set
        )


AgentConfig = Annotated[
    PythonAgent | HttpAgent | AnthropicAgent | SemanticKernelAgent | OpenAIAgent,
    Field(discriminator="backend"),
]


# -------------------------------------------------------------------------- execution


class ExecutionConfig(_Strict):
    """Run settings; the command line overrides them, they override the environment."""

    parallel_test_cases: int | None = Field(default=None, ge=1, le=1024)
    turn_timeout: float | None = Field(default=None, gt=0)
    session_timeout: float | None = Field(
        default=None, gt=0, description="Seconds opening a session may take (default 60)."
    )
    grader_timeout: float | None = Field(
        default=None, gt=0, description="Seconds one code grader may take on a turn (default 60)."
    )
    repeat: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Runs of every test case, each in a fresh session (default 1; --repeat).",
    )
    min_pass_rate: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "With repeat > 1: a test case passes when passes / runs >= this (0 < rate <= 1, "
            "default 1.0: every run must pass). Per suite."
        ),
    )
    max_cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Spend cap in US dollars (as --max-cost): once the estimated spend reaches it, "
            "no new test case starts."
        ),
    )


class ModelPrice(_Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0, description="Default: 1.25 x input.")
    cache_read: float | None = Field(default=None, ge=0, description="Default: 0.1 x input.")


class Suite(_Strict):
    """A suite file."""

    name: str | None = Field(default=None, description="Default: the file name without extension.")
    agent: AgentConfig
    evaluations: list[Evaluation] = Field(default_factory=list)
    judge: JudgeConfig | None = Field(
        default=None, description="Default judge settings of every type: judge evaluation."
    )
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Prices by model id (US dollars per million tokens), winning over genai-prices.",
    )
    test_cases: list[TestCase]

    @field_validator("test_cases")
    @classmethod
    def _not_empty(cls, value: list[TestCase]) -> list[TestCase]:
        if not value:
            raise ValueError("is empty; a suite needs at least one test case")
        return value

    @field_validator("evaluations")
    @classmethod
    def _check_names(cls, value: list[Evaluation] | None) -> list[Evaluation] | None:
        return _unique_metric_names(value)
