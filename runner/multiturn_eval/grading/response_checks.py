"""Response checks: ``contains``, ``not_contains``, ``regex``, ``json`` (issue 11 part 1).

They are ``type: standard`` metrics that check the reply itself, so unlike
``equality`` and ``numeric`` they need no ``ground_truth`` and run on every
turn that got a reply. Each is binary (score 1 or 0) and its reason says what
was looked for and shows an excerpt of the reply around the relevant point
(the match, the stray text, the JSON syntax error), marked ``«like this»``.

Decisions (README "Checks"):

- Texts are compared after Unicode NFC normalisation of both sides (so a
  composed ``é`` equals ``e`` + combining accent); ``case_insensitive`` uses
  full case folding (``STRASSE`` contains ``straße``).
- ``contains`` with ``mode: all`` (default) needs every text, ``mode: any``
  one of them; ``not_contains`` with ``mode: all`` needs every text absent,
  ``mode: any`` at least one absent.
- ``regex`` searches (``fullmatch: true`` anchors it to the whole reply), with
  the ``regex`` engine and the same time limits as the tool-argument regexes
  (:data:`~.matchers.REGEX_TIMEOUT` per match, one
  :data:`~.matchers.REGEX_TURN_BUDGET` per turn shared by all its regex work);
  a match that runs out of time fails the check and says so.
- ``json`` parses the reply (strict JSON: ``NaN`` and ``Infinity`` are not
  JSON); ``strip_code_fence: true`` parses the inside of the first fenced code
  block when the reply has one. With ``schema`` / ``schema_file`` the value is
  validated with ``jsonschema`` (the draft named by ``$schema``, default the
  latest; ``format`` checked where jsonschema can), and the reason names the
  JSON path of the most relevant failure (``$.items[1].price``).
- A turn that ended in an error has no reply to check: each of its response
  checks fails with ``no reply to check: ...`` (never skipped silently). A
  skipped turn runs no checks at all (the skip is the turn's failure).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from ..loaded import LoadedSuite
from ..results import MetricResult
from ..suite import StandardEvaluation
from .evaluators import standard_result
from .matchers import RegexBudget, clip

EXCERPT_CONTEXT = 40
"""Characters of the reply shown on each side of the relevant point."""
HEAD = 100
"""Characters of the reply shown when there is no particular point to show."""
MAX_LISTED = 3
"""Texts or schema errors named in one reason before ``and N more``."""

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n[ \t]*)?```", re.DOTALL)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def excerpt(text: str, start: int, end: int, context: int = EXCERPT_CONTEXT) -> str:
    """``'…before «relevant» after…'`` (quoted, control characters escaped)."""
    lo, hi = max(0, start - context), min(len(text), end + context)
    shown = text[lo:start] + "«" + text[start:end] + "»" + text[end:hi]
    return repr(("…" if lo else "") + shown + ("…" if hi < len(text) else ""))


def head(text: str, limit: int = HEAD) -> str:
    """The start of the reply, quoted: ``'Hello, I can…'``."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _texts(values: list[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:MAX_LISTED])
    return shown + (f" and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else "")


def no_reply(spec: StandardEvaluation, why: str) -> MetricResult:
    """A response check on a turn that ended without a reply: failed, saying why."""
    return standard_result(spec, False, f"no reply to check: {clip(why, 200)}")


# ------------------------------------------------------------------ contains / not_contains


def _find(spec: StandardEvaluation, reply: str, index: int, value: str) -> tuple[int, int] | None:
    """(start, end) of ``value`` in the (normalised) reply, or None."""
    if spec.case_insensitive:
        match = spec.needles[index].search(reply)
        return (match.start(), match.end()) if match is not None else None
    needle = _nfc(value)
    at = reply.find(needle)
    return (at, at + len(needle)) if at >= 0 else None


def _case_hint(spec: StandardEvaluation, reply: str, values: list[str]) -> str:
    if spec.case_insensitive:
        return ""
    folded = reply.casefold()
    if any(_nfc(v).casefold() in folded for v in values):
        return "; it would pass with case_insensitive: true"
    return ""


def evaluate_contains(spec: StandardEvaluation, response: str) -> MetricResult:
    reply = _nfc(response)
    values = spec.values
    found = {i: _find(spec, reply, i, v) for i, v in enumerate(values)}
    present = [i for i, at in found.items() if at is not None]
    absent = [i for i, at in found.items() if at is None]
    how = " (ignoring case)" if spec.case_insensitive else ""
    details: dict[str, Any] = {
        "found": [values[i] for i in present],
        "missing": [values[i] for i in absent],
    }
    shown = "the reply is empty" if not reply else f"reply: {head(reply)}"
    if spec.metric == "contains":
        passed = not absent if spec.mode == "all" else bool(present)
        if passed:
            first = present[0]
            start, end = found[first] or (0, 0)
            if len(values) > 1 and spec.mode == "all":
                which = f"found all of {_texts(values)}{how}; the first"
            else:
                which = f"found {values[first]!r}{how}"
            return standard_result(
                spec,
                True,
                f"{which} at character {start + 1}: {excerpt(reply, start, end)}",
                details,
            )
        if spec.mode == "all":
            missing = [values[i] for i in absent]
            of = f" ({len(missing)} of {len(values)} texts)" if len(values) > 1 else ""
            reason = f"expected the reply to contain {_texts(missing)}{how}{of}; {shown}"
        else:
            reason = (
                f"expected the reply to contain one of {_texts(values)}{how}; none found; {shown}"
            )
        return standard_result(
            spec, False, reason + _case_hint(spec, reply, [values[i] for i in absent]), details
        )
    # not_contains
    passed = not present if spec.mode == "all" else bool(absent)
    if passed:
        if present:  # mode any: some appear, but not all
            reason = f"{_texts([values[i] for i in absent])} absent{how} (mode: any)"
        else:
            reason = f"none of {_texts(values)} in the reply{how}"
        return standard_result(spec, True, reason, details)
    first = present[0]
    start, end = found[first] or (0, 0)
    if spec.mode == "all":
        listed = [values[i] for i in present]
        of = f" ({len(listed)} of {len(values)} texts)" if len(values) > 1 else ""
        reason = (
            f"expected the reply not to contain {_texts(listed)}{how}{of}; "
            f"found {values[first]!r} at character {start + 1}: {excerpt(reply, start, end)}"
        )
    else:
        reason = (
            f"expected at least one of {_texts(values)} to be absent{how}; all appear, "
            f"first {values[first]!r} at character {start + 1}: {excerpt(reply, start, end)}"
        )
    return standard_result(spec, False, reason, details)


# -------------------------------------------------------------------------------- regex


def _run_regex(spec: StandardEvaluation, budget: RegexBudget, reply: str, anchored: bool) -> Any:
    """The match (or None), or a string saying why it did not run to the end."""
    pattern = spec.compiled_pattern
    assert pattern is not None
    what = f"the {len(reply):,}-character reply"
    return budget.match(pattern, spec.pattern or "", reply, what, anchored=anchored)


def evaluate_regex(
    spec: StandardEvaluation, response: str, budget: RegexBudget | None = None
) -> MetricResult:
    budget = budget or RegexBudget()
    shown = f"/{clip(spec.pattern or '', 80)}/" + ("i" if spec.case_insensitive else "")
    outcome = _run_regex(spec, budget, response, spec.fullmatch)
    if isinstance(outcome, str):
        return standard_result(spec, False, outcome)
    if outcome is not None:
        start, end = outcome.span()
        if spec.fullmatch:
            return standard_result(spec, True, f"the whole reply matches {shown}")
        return standard_result(
            spec,
            True,
            f"{shown} matched at character {start + 1}: {excerpt(response, start, end)}",
            {"match": clip(outcome.group(0), 200)},
        )
    if not response:
        return standard_result(spec, False, f"expected a match for {shown}; the reply is empty")
    if spec.fullmatch:
        partial = _run_regex(spec, budget, response, False)
        reason = (
            f"expected the whole reply to match {shown} (fullmatch: true); reply: {head(response)}"
        )
        if partial is not None and not isinstance(partial, str):
            start, end = partial.span()
            reason += f"; it matches only part of it, at character {start + 1}: {excerpt(response, start, end)}"
        return standard_result(spec, False, reason)
    return standard_result(
        spec, False, f"expected a match for {shown} in the reply: {head(response)}"
    )


# --------------------------------------------------------------------------------- json


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def json_path(path: Any) -> str:
    """``$.items[1].price`` for a jsonschema error's ``absolute_path``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def evaluate_json(
    spec: StandardEvaluation, response: str, validator: Any | None = None
) -> MetricResult:
    """``validator``: a jsonschema validator for the spec's schema (None: syntax only)."""
    text, where = response, ""
    offset = 0
    if spec.strip_code_fence:
        fence = _FENCE.search(response)
        if fence is not None:
            text, offset, where = fence.group(1), fence.start(1), " (inside the fenced block)"
    if not text.strip():
        empty = "the fenced block is empty" if where else "the reply is empty"
        return standard_result(spec, False, f"expected JSON; {empty}")
    try:
        value = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        at = offset + exc.pos
        reason = (
            f"expected JSON{where}; not valid JSON: {exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}: {excerpt(response, at, min(at + 1, len(response)))}"
        )
        if not spec.strip_code_fence and "```" in response:
            reason += (
                "; the reply has a ``` fenced block: set strip_code_fence: true to parse its inside"
            )
        return standard_result(spec, False, reason)
    except (ValueError, RecursionError) as exc:
        text_of = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return standard_result(
            spec, False, f"expected JSON{where}; not valid JSON: {text_of}: {head(text)}"
        )
    kind = (
        type(value).__name__
        if not isinstance(value, dict | list)
        else ("an object" if isinstance(value, dict) else "an array")
    )
    if validator is None:
        return standard_result(spec, True, f"the reply is valid JSON{where} ({kind})")
    import jsonschema

    errors = list(validator.iter_errors(value))
    if not errors:
        return standard_result(spec, True, f"the reply is valid JSON{where} and matches the schema")
    best = jsonschema.exceptions.best_match(errors)
    assert best is not None
    ordered = [best, *(e for e in errors if e is not best)]
    listed = [
        {"path": json_path(e.absolute_path), "message": clip(e.message, 200)} for e in ordered[:10]
    ]
    more = (
        f" (and {len(errors) - 1} more schema error{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    reason = (
        f"the reply{where} is JSON but does not match the schema: at {listed[0]['path']}: "
        f"{listed[0]['message']}{more}"
    )
    return standard_result(spec, False, reason, {"schema_errors": listed})


# ------------------------------------------------------------------------------ dispatch


def evaluate_response_check(
    spec: StandardEvaluation,
    response: str,
    *,
    budget: RegexBudget | None = None,
    validator: Any | None = None,
) -> MetricResult:
    """One response check on one reply."""
    if spec.metric in ("contains", "not_contains"):
        return evaluate_contains(spec, response)
    if spec.metric == "regex":
        return evaluate_regex(spec, response, budget)
    return evaluate_json(spec, response, validator)


def schema_validator(schema: Any) -> Any:
    """A jsonschema validator for ``schema`` (checked at load), with format checking."""
    import jsonschema

    cls: Any = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def suite_validator(loaded: LoadedSuite, evaluation: StandardEvaluation) -> Any | None:
    """The validator of a ``metric: json`` evaluation of ``loaded`` (None: no schema).

    Compiled once per evaluation and kept on the suite, as the loader read its schema.
    """
    schema = (
        loaded.json_schemas.get(evaluation.schema_file)
        if evaluation.schema_file is not None
        else evaluation.json_schema
    )
    if schema is None:
        return None
    key = id(evaluation)
    if key not in loaded.schema_validators:
        loaded.schema_validators[key] = schema_validator(schema)
    return loaded.schema_validators[key]
