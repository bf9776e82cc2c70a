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


def dump_json(model: BaseModel, indent: int | None = None) -> str:
    """JSON text of a report or test-case result, in the shape of SPEC 8.

    Text an agent produced with lone surrogates (which UTF-8 cannot encode) is
    written with those characters replaced, not a crash.
    """
    exclude: Any = None
    if isinstance(model, Report):
        exclude = {"results": {i: _case_exclude(c) for i, c in enumerate(model.results)}}
        if model.run.github is None:  # absent outside GitHub Actions, not null
            exclude["run"] = {"github"}
    elif isinstance(model, CaseResult):
        exclude = _case_exclude(model)
    try:
        return model.model_dump_json(indent=indent, exclude=exclude)
    except ValueError:  # PydanticSerializationError: "surrogates not allowed"
        data = _replace_surrogates(model.model_dump(mode="json", exclude=exclude))
        return json.dumps(data, indent=indent, ensure_ascii=False)


def render_json(report: Report) -> str:
    return dump_json(report, indent=2) + "\n"
