"""Argument matchers and tool assertions (SPEC 6.3); pure functions.

- literal: equal after int/float equivalence; ``bool`` is not a number; no
  string normalisation; lists and mappings compared element-wise by the same rule;
- fuzzy: both sides as text, lower-cased, whitespace collapsed and trimmed,
  thousands separators removed, a trailing ``%`` read as /100, then compared as
  numbers if both parse, else as text. A thousands separator is ``,``, ``_``, a
  space, a no-break space (U+00A0) or a narrow no-break space (U+202F) between
  two digits where the digits after it come in groups of exactly three
  (``206 588``, ``1 234 567``, ``206\u00a0588`` all read 206588); ``12 34``
  stays the text "12 34", so two separate numbers are not glued together;
- regex: a full match (``re.fullmatch`` semantics) on ``str(actual)`` (a bool as
  JSON writes it, ``true``/``false``, since tool arguments come from JSON), run by
  the ``regex`` package with a timeout of :data:`REGEX_TIMEOUT` seconds per
  match and :data:`REGEX_TURN_BUDGET` seconds for all the regex matches of one
  turn's tool assertions. A match that does not finish in time is a failed
  check that says so ("did not finish within 1 s on a 50,000-character
  value"), never a hang and never a pass; once the turn's budget is spent the
  remaining regex matches of that turn fail without running, saying why.

A tool assertion matches calls *of this turn only* whose name contains the
expected name (case-sensitive). With ``args``, a single call must satisfy every
asserted argument; ``count: N`` needs N such calls.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import regex as regex_engine

from ..results import ArgMatchDetail
from ..suite import ExpectedTool, FuzzyMatcher, RegexMatcher
from ..types import ToolInvocation

_MISSING = object()
# tuples, not ``int | float``: isinstance with a union is several times slower on this hot path
_NUMBER_TYPES = (int, float)
_SEQUENCES = (list, tuple)


def _is_number(value: Any) -> bool:
    return type(value) in _NUMBER_TYPES


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)  # never float(10**400): OverflowError


def literal_equal(expected: Any, actual: Any) -> bool:
    if _is_number(expected) and _is_number(actual):
        return bool(expected == actual) or (_is_nan(expected) and _is_nan(actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return expected.keys() == actual.keys() and all(
            literal_equal(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, _SEQUENCES) and isinstance(actual, _SEQUENCES):
        return len(expected) == len(actual) and all(
            literal_equal(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return type(expected) is type(actual) and bool(expected == actual)


_SEPARATORS = re.compile(r"(?<=\d)[,_\u202f \u00a0](?=\d{3}(?!\d))")
_WS = re.compile(r"\s+")


def fuzzy_normalise(value: Any) -> str:
    text = value if isinstance(value, str) else _text_of(value)
    # separators first: the narrow no-break space is also whitespace
    return _WS.sub(" ", _SEPARATORS.sub("", text).lower()).strip()


def _text_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fuzzy_number(text: str) -> float | None:
    """The number a normalised fuzzy text stands for, or None."""
    percent = text.endswith("%")
    body = text[:-1].strip() if percent else text
    if "_" in body:  # float() reads "12_34" as 1234: only separators before groups of three
        return None
    try:
        number = float(body)
    except ValueError:
        return None
    if not math.isfinite(number):  # NaN, or out of range ("1e309"): compared as text
        return None
    return number / 100 if percent else number


def fuzzy_equal(expected: Any, actual: Any) -> bool:
    left, right = fuzzy_normalise(expected), fuzzy_normalise(actual)
    a, b = fuzzy_number(left), fuzzy_number(right)
    if a is not None and b is not None:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return left == right


REGEX_TIMEOUT = 1.0
"""Seconds one regex match may run on one value."""
REGEX_TURN_BUDGET = 5.0
"""Seconds all regex matches of one turn's tool assertions may run together."""


class RegexBudget:
    """What is left of one turn's regex time (:data:`REGEX_TURN_BUDGET`)."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = REGEX_TURN_BUDGET if seconds is None else seconds
        self.left = self.seconds

    def run(self, matcher: RegexMatcher, text: str) -> bool | str:
        """True/False for match/no match, or why the match did not run to the end."""
        outcome = self.match(
            matcher.pattern, matcher.regex, text, f"a {len(text):,}-character value"
        )
        return outcome if isinstance(outcome, str) else outcome is not None

    def match(
        self,
        pattern: regex_engine.Pattern[str],
        written: str,
        text: str,
        what: str,
        *,
        anchored: bool = True,
    ) -> regex_engine.Match[str] | str | None:
        """``pattern`` (``written`` so) on ``text`` (``what`` names it) within the budget:
        the match or None, or why the match did not run to the end."""
        shown = f"/{clip(written, 60)}/"
        if self.left <= 0:
            return (
                f"regex {shown} was not tried on {what}: this turn's regex matches already "
                f"used their {_seconds(self.seconds)} budget"
            )
        limit = min(REGEX_TIMEOUT, self.left)
        started = time.monotonic()
        try:
            if anchored:
                return pattern.fullmatch(text, timeout=limit)
            return pattern.search(text, timeout=limit)
        except TimeoutError:
            return (
                f"regex {shown} did not finish within {_seconds(limit)} on {what} (a pattern "
                "with nested repeats, such as (a+)+, can take exponential time)"
            )
        finally:
            self.left -= time.monotonic() - started


def _seconds(value: float) -> str:
    return f"{value:g} s"


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, the last one ``…`` when it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _regex_text(actual: Any) -> str:
    return _text_of(actual) if isinstance(actual, bool) else str(actual)


def value_mismatch(matcher: Any, actual: Any, budget: RegexBudget | None = None) -> str | None:
    """None when ``actual`` satisfies ``matcher``; else the reason it does not."""
    if isinstance(matcher, RegexMatcher):
        outcome = (budget or RegexBudget()).run(matcher, _regex_text(actual))
        if outcome is True:
            return None
        if outcome is False:
            return f"expected {describe_matcher(matcher)}, got {_short(actual)}"
        return str(outcome)
    if match_value(matcher, actual):
        return None
    return f"expected {describe_matcher(matcher)}, got {_short(actual)}"


def match_value(matcher: Any, actual: Any) -> bool:
    """Whether ``actual`` satisfies ``matcher`` (a regex that times out does not)."""
    if isinstance(matcher, FuzzyMatcher):
        return fuzzy_equal(matcher.fuzzy, actual)
    if isinstance(matcher, RegexMatcher):
        return RegexBudget().run(matcher, _regex_text(actual)) is True
    return literal_equal(matcher, actual)


def describe_matcher(matcher: Any) -> str:
    if isinstance(matcher, FuzzyMatcher):
        return f"~{matcher.fuzzy!r} (fuzzy)"
    if isinstance(matcher, RegexMatcher):
        return f"/{matcher.regex}/ (regex)"
    return _short(matcher)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def arg_mismatches(
    expected: ExpectedTool, call: ToolInvocation, budget: RegexBudget | None = None
) -> list[str]:
    """Why ``call`` does not satisfy the expected arguments (empty when it does)."""
    problems: list[str] = []
    budget = budget or RegexBudget()
    for arg, matcher in (expected.args or {}).items():
        actual = call.args.get(arg, _MISSING)
        if actual is _MISSING:
            problems.append(f"arg '{arg}' missing (expected {describe_matcher(matcher)})")
        else:
            problem = value_mismatch(matcher, actual, budget)
            if problem is not None:
                problems.append(f"arg '{arg}' {problem}")
    return problems


def check_tool(
    expected: ExpectedTool, calls: Sequence[ToolInvocation], budget: RegexBudget | None = None
) -> ArgMatchDetail:
    """Match one expected tool against the turn's calls; the reason says why not.

    Calls are numbered from 1 in reasons (``closest call #1`` is the first call);
    ``matched_call_index`` is the 0-based index into the turn's invocations.
    """
    named = [(i, c) for i, c in enumerate(calls) if expected.name in c.name]
    label = expected.name
    if not named:
        made = ", ".join(sorted({c.name for c in calls})) or "none"
        return ArgMatchDetail(
            expected_tool=label,
            reason=f"{label}: not called in this turn (tools called: {made})",
        )
    matching: list[int] = []
    closest: tuple[int, list[str]] | None = None
    budget = budget or RegexBudget()
    for i, call in named:
        problems = arg_mismatches(expected, call, budget)
        if not problems:
            matching.append(i)
        elif closest is None or len(problems) < len(closest[1]):
            closest = (i, problems)
    if len(matching) >= expected.count:
        return ArgMatchDetail(expected_tool=label, matched_call_index=matching[0])
    if expected.count > 1:
        reason = f"{label}: expected at least {expected.count} matching calls, got {len(matching)}"
        if closest is not None:
            reason += f"; closest other call #{closest[0] + 1}: {'; '.join(closest[1])}"
        return ArgMatchDetail(
            expected_tool=label,
            matched_call_index=matching[0] if matching else None,
            reason=reason,
        )
    assert closest is not None
    return ArgMatchDetail(
        expected_tool=label,
        reason=f"{label}: no call matched; closest call #{closest[0] + 1}: {'; '.join(closest[1])}",
    )


def check_tools(
    expected: Sequence[ExpectedTool],
    calls: Sequence[ToolInvocation],
    budget: RegexBudget | None = None,
) -> tuple[bool | None, list[ArgMatchDetail]]:
    """(tools_matched, details); tools_matched is None when nothing is expected.

    ``budget``: the turn's regex budget (default: a fresh one for this call).
    """
    if not expected:
        return None, []
    budget = budget or RegexBudget()  # one for the whole turn
    details = [check_tool(e, calls, budget) for e in expected]
    return all(d.reason is None for d in details), details
