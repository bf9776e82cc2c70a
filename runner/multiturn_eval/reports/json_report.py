"""``report.json``: the complete result, in the shape of SPEC 8 (schema: schemas/report.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ..results import Report


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


def dump_json(model: BaseModel, indent: int | None = None) -> str:
    """JSON text of a model; text an agent produced with lone surrogates (which
    UTF-8 cannot encode) is written with those characters replaced, not a crash."""
    try:
        return model.model_dump_json(indent=indent)
    except ValueError:  # PydanticSerializationError: "surrogates not allowed"
        data = _replace_surrogates(model.model_dump(mode="json"))
        return json.dumps(data, indent=indent, ensure_ascii=False)


def render_json(report: Report) -> str:
    return dump_json(report, indent=2) + "\n"
