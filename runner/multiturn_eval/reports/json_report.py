"""``report.json``: the complete result, in the shape of SPEC 8 (schema: schemas/report.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ..results import CaseResult, Report


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


#: a test case's fields that only a legacy single-turn case carries (its one turn, flattened)
LEGACY_FIELDS = frozenset(
    {"input", "response", "ground_truth", "tool_invocations", "tools_matched", "arg_match_details"}
)


def _case_exclude(case: CaseResult) -> set[str]:
    """SPEC 8: ``turns`` is absent for legacy single-turn cases; the flattened turn
    fields are absent for multi-turn ones."""
    return {"turns"} if case.turns is None else set(LEGACY_FIELDS)


def _dump(model: BaseModel, indent: int | None, exclude: Any) -> str:
    try:
        return model.model_dump_json(indent=indent, exclude=exclude)
    except ValueError:  # PydanticSerializationError: "surrogates not allowed"
        data = _replace_surrogates(model.model_dump(mode="json", exclude=exclude))
        return json.dumps(data, indent=indent, ensure_ascii=False)


def _dump_report(report: Report, indent: int | None) -> str:
    """The report's JSON, each test case dumped on its own.

    One ``model_dump_json`` of the whole report with a per-result ``exclude``
    costs time quadratic in the number of test cases in pydantic-core (8 s for
    4,000 cases); dumping each case with its own ``exclude`` and joining the
    texts is linear, and gives the same bytes (``tests/test_report_reader.py``).
    """
    shell = report.model_copy(update={"results": []})
    head = _dump(shell, indent, {"run": {"github"}} if report.run.github is None else None)
    if not report.results:
        return head
    cases = [dump_json(case, indent) for case in report.results]
    if indent is None:
        tail = '"results":[]}'
        assert head.endswith(tail)
        return head[: -len(tail)] + '"results":[' + ",".join(cases) + "]}"
    pad = " " * indent
    tail = '"results": []\n}'
    assert head.endswith(tail)
    body = ",\n".join(pad * 2 + case.replace("\n", "\n" + pad * 2) for case in cases)
    return head[: -len(tail)] + f'"results": [\n{body}\n{pad}]\n}}'


def dump_json(model: BaseModel, indent: int | None = None) -> str:
    """JSON text of a report or test-case result, in the shape of SPEC 8.

    Text an agent produced with lone surrogates (which UTF-8 cannot encode) is
    written with those characters replaced, not a crash.
    """
    if isinstance(model, Report):
        return _dump_report(model, indent)
    exclude = _case_exclude(model) if isinstance(model, CaseResult) else None
    return _dump(model, indent, exclude)


def render_json(report: Report) -> str:
    return dump_json(report, indent=2) + "\n"
