"""The structured verdict a judge must return, and its checking.

The judge answers through a schema, never free text read with a regex:

- ``pass_fail``: ``{"verdict": "pass" | "fail", "reason": str}``;
- ``0-1``: ``{"score": number in [0, 1], "reason": str}``;
- ``1-5``: ``{"score": whole number 1..5, "reason": str}``.

Anthropic gets it as the input schema of a forced tool (``record_verdict``),
OpenAI-compatible endpoints as a strict ``json_schema`` response format.
Whatever does not fit (no tool call, missing or extra keys, wrong types, a
score out of range, a refusal, text around the JSON) is a :class:`VerdictProblem`:
the metric errors with an excerpt of what came back; it never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...backends.chat import quote
from ...errors import VerdictProblem
from ...sanitize import json_kind

excerpt = quote
"""A short, single-line ``repr`` of a reply's text or object (the chat core's)."""

TOOL_NAME = "record_verdict"


def verdict_schema(scale: str) -> dict[str, Any]:
    """The JSON Schema of the verdict object (valid as an OpenAI strict schema too)."""
    reason = {"type": "string", "description": "One or two sentences: why, citing the reply."}
    if scale == "pass_fail":
        main: dict[str, Any] = {"type": "string", "enum": ["pass", "fail"]}
        key = "verdict"
    elif scale == "1-5":
        main = {"type": "integer", "enum": [1, 2, 3, 4, 5], "description": "1 (worst) to 5 (best)"}
        key = "score"
    else:
        main = {"type": "number", "description": "0 (worst) to 1 (best)"}
        key = "score"
    return {
        "type": "object",
        "properties": {key: main, "reason": reason},
        "required": [key, "reason"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Verdict:
    """A checked verdict: ``raw`` is the scale's value (pass/fail, 0-1, 1-5)."""

    scale: str
    raw: str | float
    reason: str

    @property
    def score(self) -> float:
        """Normalised to [0, 1] (what reports and roll-ups use)."""
        if isinstance(self.raw, str):
            return 1.0 if self.raw == "pass" else 0.0
        if self.scale == "1-5":
            return (self.raw - 1) / 4
        return float(self.raw)


def check_verdict(data: Any, scale: str) -> Verdict:
    """``data`` as a :class:`Verdict`; VerdictProblem says what does not fit."""
    key = "verdict" if scale == "pass_fail" else "score"
    if not isinstance(data, dict):
        raise VerdictProblem(f"the verdict is {json_kind(data)}, not an object: {excerpt(data)}")
    missing = [k for k in (key, "reason") if k not in data]
    if missing:
        raise VerdictProblem(f"the verdict has no {missing[0]!r}: {excerpt(data)}")
    extra = sorted(str(k) for k in data if k not in (key, "reason"))
    if extra:
        raise VerdictProblem(f"the verdict has an unexpected key {extra[0]!r}: {excerpt(data)}")
    reason = data["reason"]
    if not isinstance(reason, str) or not reason.strip():
        raise VerdictProblem(
            f"the verdict's reason is {json_kind(reason) if reason != '' else 'empty'}, "
            f"not text: {excerpt(data)}"
        )
    value = data[key]
    if scale == "pass_fail":
        if value not in ("pass", "fail") or not isinstance(value, str):
            raise VerdictProblem(
                f"the verdict is {excerpt(value, 40)}, not 'pass' or 'fail': {excerpt(data)}"
            )
        return Verdict(scale, value, reason.strip())
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise VerdictProblem(f"the score is {json_kind(value)}, not a number: {excerpt(data)}")
    low, high = (0.0, 1.0) if scale == "0-1" else (1.0, 5.0)
    if not low <= value <= high:
        raise VerdictProblem(
            f"the score {value:g} is outside the scale {scale} ({low:g} to {high:g}): {excerpt(data)}"
        )
    if scale == "1-5" and value != int(value):
        raise VerdictProblem(
            f"the score {value:g} is not a whole number (scale 1-5): {excerpt(data)}"
        )
    return Verdict(scale, float(value), reason.strip())
