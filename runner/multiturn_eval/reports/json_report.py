"""``report.json``: the complete result, in the shape of SPEC 8 (schema: schemas/report.schema.json)."""

from __future__ import annotations

from ..results import Report


def render_json(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"
