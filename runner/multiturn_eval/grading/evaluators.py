"""Evaluators: ``equality``, ``numeric`` and ``code`` graders (SPEC 6.3).

Every result says in words why it passed or failed.

``numeric`` reads the number out of a reply that has words around it: if the
whole reply is a number it uses that; otherwise it uses the *last* number in the
reply ("... so the difference is 25,587.") and says which one it used and how
many there were. With ``accept_thousands_separators: false`` (the default)
``25,587`` reads as two numbers, and the reason says so. With
``accept_percent: true`` a value is also compared as a percentage of the
other (``14.1%`` / ``14.1`` vs ``0.14136``, and ``0.141`` vs ``14.1%``).
"""

from __future__ import annotations

import asyncio
import inspect
import math
import re
import string
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..results import MetricResult
from ..sanitize import clean_text, json_safe, safe_repr
from ..suite import CodeEvaluation, StandardEvaluation
from ..types import ConversationContext, GraderContext, GraderResult
from ..usercode import THREADS, error_text, guarded, note_traceback

# ---------------------------------------------------------------------------- numbers

_SIGN = r"(?:(?<![\w.])[-+\u2212])?"
_PLAIN = r"(?:\d+(?:\.\d+)?|\.\d+)"
_GROUPED = r"\d{1,3}(?:[,_\u202f]\d{3})+(?:\.\d+)?"
_TAIL = r"(?:[eE][-+]?\d+)?(?:\s?%)?"
_NUMBER_PLAIN = re.compile(rf"{_SIGN}(?<![\w.,]){_PLAIN}{_TAIL}")
_NUMBER_GROUPED = re.compile(rf"{_SIGN}(?<![\w.,])(?:{_GROUPED}|{_PLAIN}){_TAIL}")
_HAS_GROUPED = re.compile(rf"(?<![\w.,]){_GROUPED}")


class ParsedNumber(NamedTuple):
    """A number found in a text: as written, its value, and whether it ends in ``%``."""

    text: str
    value: float
    percent: bool


def _to_number(text: str) -> ParsedNumber | None:
    raw = text.strip()
    body = raw.replace("\u2212", "-")
    percent = body.endswith("%")
    if percent:
        body = body[:-1].strip()
    body = re.sub(r"[,_\u202f]", "", body)
    try:
        value = float(body)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return ParsedNumber(raw, value, percent)


def parse_ground_truth_number(text: str) -> ParsedNumber | None:
    """A ground truth must be one number (separators and a leading $ allowed)."""
    return _to_number(text.strip().lstrip("$").strip())


def find_numbers(reply: str, separators: bool) -> list[ParsedNumber]:
    pattern = _NUMBER_GROUPED if separators else _NUMBER_PLAIN
    found = []
    for match in pattern.finditer(reply):
        number = _to_number(match.group(0))
        if number is not None:
            found.append(number)
    return found


def _fmt(value: float) -> str:
    return f"{value:.10g}"


# --------------------------------------------------------------------------- equality

_PUNCT = str.maketrans("", "", string.punctuation)


def _normalise_text(text: str, spec: StandardEvaluation) -> str:
    if spec.strip_punctuation:
        text = text.translate(_PUNCT)
    if spec.strip_whitespace:
        text = " ".join(text.split())
    if spec.case_insensitive:
        text = text.casefold()
    return text


def _preview(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def evaluate_equality(spec: StandardEvaluation, response: str, ground_truth: str) -> MetricResult:
    got, want = _normalise_text(response, spec), _normalise_text(ground_truth, spec)
    passed = got == want
    if passed:
        reason = f"reply equals {_preview(ground_truth)}"
    else:
        at = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        reason = f"expected {_preview(ground_truth)}, got {_preview(response)} (first difference at character {at + 1})"
        hints = []
        if not spec.case_insensitive and got.casefold() == want.casefold():
            hints.append("case_insensitive")
        if not spec.strip_whitespace and " ".join(got.split()) == " ".join(want.split()):
            hints.append("strip_whitespace")
        if hints:
            reason += f"; it would pass with {' and '.join(hints)}: true"
    return standard_result(spec, passed, reason)


def standard_result(
    spec: StandardEvaluation, passed: bool, reason: str, details: dict[str, Any] | None = None
) -> MetricResult:
    """Built-in evaluators are binary: score 1.0 or 0.0."""
    return MetricResult(
        metric_name=spec.metric_name,
        kind="standard",
        score=1.0 if passed else 0.0,
        threshold=spec.threshold,
        passed=passed,
        reason=reason,
        details=details,
    )


# ---------------------------------------------------------------------------- numeric


def _within(actual: float, expected: float, spec: StandardEvaluation) -> bool:
    allowed = max(spec.absolute_tolerance, spec.relative_tolerance * abs(expected))
    return abs(actual - expected) <= allowed + 1e-12 * max(1.0, abs(expected))


def _candidates(number: ParsedNumber, spec: StandardEvaluation) -> list[tuple[float, str]]:
    """(value, how it was read) pairs for one side of the comparison."""
    if not spec.accept_percent:
        return [(number.value, "")]
    if number.percent:
        return [
            (number.value / 100, f" ({number.text} read as {_fmt(number.value / 100)})"),
            (number.value, ""),
        ]
    return [(number.value, ""), (number.value * 100, f" (read as {_fmt(number.value * 100)}%)")]


def evaluate_numeric(spec: StandardEvaluation, response: str, ground_truth: str) -> MetricResult:
    expected = parse_ground_truth_number(ground_truth)

    if expected is None:  # the loader rejects this; kept for direct callers
        return standard_result(spec, False, f"ground truth {ground_truth!r} is not a number")
    pattern = _NUMBER_GROUPED if spec.accept_thousands_separators else _NUMBER_PLAIN
    stripped = response.strip().lstrip("$").strip()
    whole = _to_number(stripped) if pattern.fullmatch(stripped) else None
    if whole is not None:
        used, numbers, note = whole, [whole], ""
    else:
        numbers = find_numbers(response, spec.accept_thousands_separators)
        if not numbers:
            return standard_result(
                spec, False, f"no number in the reply {_preview(response)}; expected {ground_truth}"
            )
        used = numbers[-1]
        note = (
            f" (the last of {len(numbers)} numbers in the reply)"
            if len(numbers) > 1
            else " (the number in the reply)"
        )
    allowed = max(spec.absolute_tolerance, spec.relative_tolerance * abs(expected.value))
    tolerance = f"±{_fmt(allowed)}"
    details = {
        "used": used.text,
        "value": used.value,
        "expected": expected.value,
        "tolerance": allowed,
    }
    for got_value, got_how in _candidates(used, spec):
        for want_value, want_how in _candidates(expected, spec):
            if _within(got_value, want_value, spec):
                return standard_result(
                    spec,
                    True,
                    f"used {used.text}{note}{got_how}: matches {ground_truth}{want_how} within {tolerance}",
                    details,
                )
    off = used.value - expected.value
    reason = f"expected {ground_truth} ({tolerance}), got {used.text}{note}: off by {_fmt(off)}"
    grouped = None if spec.accept_thousands_separators else _HAS_GROUPED.search(response)
    if grouped is not None:
        reason += (
            f"; the reply writes thousands separators ({grouped.group(0)!r}): "
            "set accept_thousands_separators: true to read them"
        )
    elif not spec.accept_percent and (used.percent or expected.percent):
        reason += "; set accept_percent: true to compare percentages with fractions"
    return standard_result(spec, False, reason, details)


def evaluate_standard(spec: StandardEvaluation, response: str, ground_truth: str) -> MetricResult:
    if spec.metric == "equality":
        return evaluate_equality(spec, response, ground_truth)
    return evaluate_numeric(spec, response, ground_truth)


# ------------------------------------------------------------------------------- code


def _code_metric(name: str, spec: CodeEvaluation, **fields: Any) -> MetricResult:
    """A code grader's metric: ``fields`` say how it went (score, passed, reason, ...)."""
    return MetricResult(metric_name=name, kind="code", threshold=spec.threshold, **fields)


def _grader_failure(name: str, spec: CodeEvaluation, error: str) -> MetricResult:
    return _code_metric(name, spec, score=None, passed=False, error=error)


def _is_score(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


async def _call_grader(
    grader: Callable[..., Any], ctx: GraderContext | ConversationContext, what: str
) -> Any:
    """The grader's outcome; a sync grader runs on a daemon thread."""
    if inspect.iscoroutinefunction(grader):
        outcome = await guarded(grader(ctx), "grader", abandon_as=f"async {what}")
    else:
        outcome = await guarded(THREADS.run(grader, ctx, what=what), "grader")
    if inspect.isawaitable(outcome):
        outcome = await guarded(outcome, "grader", abandon_as=f"async {what}")
    return outcome


def _is_bool(value: Any) -> bool:
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"))


async def run_code_grader(
    spec: CodeEvaluation,
    grader: Callable[..., Any],
    ctx: GraderContext | ConversationContext,
    grader_timeout: float | None = None,
) -> MetricResult:
    """Call a grader; whatever it raises, returns or does wrongly fails this metric only.

    ``ctx`` is a GraderContext for a turn's evaluation, a ConversationContext for
    a test case's ``conversation_evaluations`` (same rules for both).

    - An exception is the metric's error (``ExceptionType: message``), and so is
      ``sys.exit()``/``KeyboardInterrupt`` in a grader (``the grader called
      sys.exit(1)``).
    - A sync grader runs on a daemon thread (never on the event loop, where it
      would hold up every other test case); sync or async, it is bounded by
      ``grader_timeout``: past it the metric fails with
      ``grader did not finish within N s (grader_timeout)``, and a sync grader
      still running is abandoned in its thread (the case warns about it).
    - What it returns must be a :class:`GraderResult`, a bool, or a finite
      number in [0, 1]; ``passed`` must be a bool or None, ``reason`` text or
      None, ``details`` a mapping JSON can hold (SPEC 5). Anything else --
      including a ``GraderResult`` changed after it was built to a score of 7,
      or a ``passed`` whose ``__bool__`` raises -- fails the metric and says why;
      ``details`` JSON cannot hold (bytes, sets, NaN, cycles, ...) are an error
      naming the first such value, never stored as ``repr``.
    """
    name = spec.metric_name
    what = f"grader {name!r}"
    try:
        async with asyncio.timeout(grader_timeout) as deadline:
            outcome = await _call_grader(grader, ctx, what)
    except TimeoutError as exc:
        if deadline.expired():  # ours; a TimeoutError the grader raised is its own error
            return _grader_failure(
                name, spec, f"grader did not finish within {grader_timeout:g} s (grader_timeout)"
            )
        note_traceback(what, exc)
        return _grader_failure(name, spec, error_text(exc))
    except Exception as exc:
        note_traceback(what, exc)
        return _grader_failure(name, spec, error_text(exc))
    try:
        return _grader_result(spec, outcome)
    except Exception as exc:  # the outcome's own methods raised (a __bool__, __float__ ...)
        note_traceback(what, exc)
        return _grader_failure(name, spec, f"grader returned an unusable value: {error_text(exc)}")


def _grader_result(spec: CodeEvaluation, outcome: Any) -> MetricResult:
    name = spec.metric_name
    reason: Any = None
    details: Any = None
    explicit: Any = None
    if isinstance(outcome, GraderResult):
        if not _is_score(outcome.score):
            return _grader_failure(
                name,
                spec,
                f"grader returned GraderResult(score={safe_repr(outcome.score)}); "
                "a score must be a number within [0, 1]",
            )
        score, explicit, reason, details = (
            float(outcome.score),
            outcome.passed,
            outcome.reason,
            outcome.details,
        )
        if explicit is not None and not _is_bool(explicit):
            return _grader_failure(
                name,
                spec,
                f"grader returned GraderResult(passed={safe_repr(explicit)}); "
                "passed must be True, False or None",
            )
        if reason is not None and not isinstance(reason, str):
            return _grader_failure(
                name,
                spec,
                f"grader returned GraderResult(reason={safe_repr(reason)}); reason must be text or None",
            )
    elif isinstance(outcome, bool):
        score, explicit = (1.0 if outcome else 0.0), outcome
    elif isinstance(outcome, int | float):
        if not _is_score(outcome):
            return _grader_failure(
                name, spec, f"grader returned {safe_repr(outcome)}; a score must be within [0, 1]"
            )
        score = float(outcome)
    else:
        return _grader_failure(
            name,
            spec,
            f"grader returned {type(outcome).__name__} {safe_repr(outcome, 60)}; "
            "expected GraderResult, bool or a float in [0, 1]",
        )
    if explicit is not None:
        passed = bool(explicit)
    else:
        passed = score >= (spec.threshold if spec.threshold is not None else 0.5)
    if reason is None:
        reason = f"score {score:g}" + (
            f" (threshold {spec.threshold:g})"
            if spec.threshold is not None and explicit is None
            else ""
        )
    safe_details: dict[str, Any] | None = None
    if details is not None:
        if not isinstance(details, Mapping):
            return _grader_failure(
                name,
                spec,
                f"grader details must be a mapping, got {type(details).__name__}",
            )
        safe_details, problems = json_safe(details, "details")
        if problems:
            first = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return _grader_failure(
                name,
                spec,
                f"grader details must be JSON-safe (SPEC 5): {first.where} is {first.what}{more}",
            )
    return _code_metric(
        name, spec, score=score, passed=passed, reason=clean_text(reason), details=safe_details
    )
