"""``evaluations:``: the standard metrics and response checks, code graders and LLM judges.

A list of them may stand on a suite, a test case or a turn (the innermost
level that has one wins) and, for code graders and judges, as a test case's
``conversation_evaluations``; metric names are unique within a list.
"""

from __future__ import annotations

import contextlib
import unicodedata
from typing import Annotated, Any, Literal

import regex as regex_engine
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from .blocks import JudgeConfig
from .common import CALLABLE_PATTERN, PlainData, ScalarText, _Strict, at_path
from .tool_checks import compile_regex


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


# ---------------------------------------------------------------------------- judges

JudgeScale = Literal["pass_fail", "0-1", "1-5"]

#: the threshold a scale uses when the evaluation gives none (score >= threshold passes)
DEFAULT_THRESHOLDS: dict[str, float] = {"0-1": 0.5, "1-5": 3.0}
_SCALE_RANGES: dict[str, tuple[float, float]] = {"0-1": (0.0, 1.0), "1-5": (1.0, 5.0)}


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
