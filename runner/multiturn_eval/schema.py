"""JSON Schemas generated from the models (``multiturn-eval schema suite|report``).

The committed copies in ``schemas/`` are checked against these by the tests;
regenerate them with ``python -m multiturn_eval.schema``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_BASE = "https://raw.githubusercontent.com/multiturn-eval/multiturn-eval/v1/schemas/"


def _document(kind: str, title: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_BASE + f"{kind}.schema.json",
        **schema,
        "title": title,
    }


def suite_schema() -> dict[str, Any]:
    from .suite import Suite

    return _document("suite", "multiturn-eval suite", Suite.model_json_schema(mode="validation"))


def report_schema() -> dict[str, Any]:
    from .results import Report

    schema = Report.model_json_schema(mode="serialization")
    return _document("report", "multiturn-eval report", schema)


SCHEMAS = {"suite": suite_schema, "report": report_schema}


def render(kind: str) -> str:
    return json.dumps(SCHEMAS[kind](), indent=2, sort_keys=False) + "\n"


def main() -> None:  # pragma: no cover - maintenance entry point
    out = Path(__file__).resolve().parents[2] / "schemas"
    for kind in SCHEMAS:
        (out / f"{kind}.schema.json").write_text(render(kind), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()
