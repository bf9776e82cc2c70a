"""``report.json``: the complete result, in the shape of SPEC 8 (schema: schemas/report.schema.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pydantic_core
from pydantic import BaseModel

from ..results import CaseResult, Report
from ..sanitize import json_safe
from ..usercode import error_text

#: a test case's fields that only a legacy single-turn case carries (its one turn, flattened)
LEGACY_FIELDS = frozenset(
    {"input", "response", "ground_truth", "tool_invocations", "tools_matched", "arg_match_details"}
)


def _case_exclude(case: CaseResult) -> set[str]:
    """SPEC 8: ``turns`` is absent for legacy single-turn cases; the flattened turn
    fields are absent for multi-turn ones."""
    return {"turns"} if case.turns is None else set(LEGACY_FIELDS)


def dump_json(model: BaseModel, indent: int | None = None) -> str:
    """JSON text of a report or test-case result, in the shape of SPEC 8.

    The last line of defence between user values and the report file; for a
    :class:`CaseResult` (and so a :class:`Report`) it never raises:

    1. the fast path: pydantic's own serialiser;
    2. if that fails (lone surrogates UTF-8 cannot encode, a value the runner's
       boundary checks missed, a cycle), the model's fields walked by
       :func:`multiturn_eval.sanitize.json_safe` (surrogates become ``?``,
       anything JSON cannot hold its stand-in);
    3. if even that fails, a test case is written as a failed stub that keeps
       its identity (index, name, suite, line) and says why in ``errors``.

    A report is assembled case by case (:func:`_dump_report`), so one bad case
    never loses the others.
    """
    if isinstance(model, Report):
        return _dump_report(model, indent)
    exclude: Any = _case_exclude(model) if isinstance(model, CaseResult) else None
    try:
        return model.model_dump_json(indent=indent, exclude=exclude)
    except Exception:  # PydanticSerializationError: "surrogates not allowed", unknown types
        pass
    try:
        return _dump_safe(model, indent)
    except Exception as exc:
        if isinstance(model, CaseResult):
            return json.dumps(_case_stub(model, exc), indent=indent, ensure_ascii=False)
        raise


def reindent(text: str | bytes, indent: int) -> str:
    """Compact JSON text laid out as pydantic's ``model_dump_json(indent=indent)`` lays out
    the same values: the values as they are (strings, numbers, key order), only the layout
    changes; a fraction of the cost of validating the model and dumping it again."""
    return pydantic_core.to_json(pydantic_core.from_json(text), indent=indent).decode("utf-8")


def _case_texts(results: Sequence[CaseResult], indent: int | None) -> Iterator[str]:
    """``dump_json(case, indent)`` of each result in order; a run's stored results
    (:meth:`multiturn_eval.run_store.RunResults.json_texts`) copy their stored text
    when it is those bytes."""
    own = getattr(results, "json_texts", None)
    if own is not None:
        texts: Iterator[str] = own(indent)
        yield from texts
        return
    for case in results:
        yield dump_json(case, indent)


def _dump_report(report: Report, indent: int | None) -> str:
    """The report's JSON, each test case dumped on its own (:func:`_report_pieces`)."""
    return "".join(_report_pieces(report, indent))


def _report_pieces(report: Report, indent: int | None) -> Iterator[str]:
    """The report's JSON in pieces: the head, each test case, the tail.

    One ``model_dump_json`` of the whole report with a per-result ``exclude``
    costs time quadratic in the number of test cases in pydantic-core (8 s for
    4,000 cases); dumping each case with its own ``exclude`` and joining the
    texts is linear, and gives the same bytes (``tests/test_report_reader.py``).
    Each case is read from ``report.results`` as it is written, so a report of
    results kept in a file (:mod:`multiturn_eval.stored`) is never held whole.
    """
    shell = report.model_copy(update={"results": []})
    try:
        head = shell.model_dump_json(indent=indent)
    except Exception:  # the run and summary hold runner-made values; still never raise
        head = _dump_safe(shell, indent)
        if indent is None:
            head = json.dumps(json.loads(head), separators=(",", ":"), ensure_ascii=False)
    if not report.results:
        yield head
        return
    if indent is None:
        tail = '"results":[]}'
        assert head.endswith(tail)
        yield head[: -len(tail)] + '"results":['
        for i, text in enumerate(_case_texts(report.results, None)):
            yield ("," if i else "") + text
        yield "]}"
        return
    pad = " " * indent
    tail = '"results": []\n}'
    assert head.endswith(tail)
    yield head[: -len(tail)] + '"results": [\n'
    for i, text in enumerate(_case_texts(report.results, indent)):
        yield (",\n" if i else "") + pad * 2 + text.replace("\n", "\n" + pad * 2)
    yield f"\n{pad}]\n}}"


def _dump_safe(model: BaseModel, indent: int | None) -> str:
    """The model's fields walked by :func:`json_safe` (no pydantic serialiser involved)."""
    data, _ = json_safe(model, "report")
    if isinstance(model, CaseResult):
        _drop(data, _case_exclude(model))
    elif isinstance(model, Report):
        for case, item in zip(model.results, data["results"], strict=True):
            _drop(item, _case_exclude(case))
    return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)


def _drop(data: dict[str, Any], keys: set[str]) -> None:
    for key in keys:
        data.pop(key, None)


def _case_stub(case: CaseResult, exc: BaseException) -> dict[str, Any]:
    """What is left of a test case whose result cannot be written at all."""
    fields = case.__dict__

    def get(name: str, default: Any = None) -> Any:
        value = fields.get(name, default)
        return value if isinstance(value, str | int | float | bool | type(None)) else default

    return {
        "index": get("index", 0),
        "name": get("name", "?"),
        "suite": get("suite", "?"),
        "suite_name": get("suite_name", "?"),
        "line": get("line"),
        "tags": [],
        "backend": get("backend", "?"),
        "model": get("model"),
        "passed": False,
        "skipped": False,
        "outcome": "error",
        "errors": [
            f"internal error: this test case's result could not be written: {error_text(exc)}"
        ],
        "duration_ms": get("duration_ms", 0.0),
        "token_usage": {},
        "metric_results": [],
        **({} if fields.get("turns") is None else {"turns": []}),
        "warnings": [],
    }


def render_json(report: Report) -> str:
    return dump_json(report, indent=2) + "\n"


def stream_json(report: Report) -> Iterator[str]:
    """:func:`render_json`'s text in pieces (the head, each test case, the tail)."""
    yield from _report_pieces(report, 2)
    yield "\n"
