"""Reading a ``report.json`` back into a :class:`~multiturn_eval.results.Report`.

Baseline comparison, regrade and shard merge start from reports written
earlier, possibly by another version of multiturn-eval. A report of the same
major schema version (``schema_version`` ``"1"``, ``"1.x"``) is read; another
major version, a file that is not JSON, or JSON that is not a report is a
:class:`~multiturn_eval.errors.ReportFormatError` naming the file and what is
wrong (the CLI makes it exit 2).

Reading is exact: ``render(load_report(path))`` gives the same files the run
wrote (``tests/test_report_reader.py`` checks it for every format).
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ReportFormatError
from ..results import SCHEMA_VERSION, Report

#: the largest report.json read back (a 50,000-case run writes about 300 MB)
MAX_BYTES = 2 * 1024**3


def _major(version: object) -> str:
    return str(version).split(".", 1)[0]


def parse_report(text: str | bytes, source: str = "report.json") -> Report:
    """A report from its JSON text; ``source`` names it in errors."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportFormatError(f"{source}: not JSON ({exc})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ReportFormatError(f"{source}: not a multiturn-eval report (no schema_version)")
    version = data["schema_version"]
    if _major(version) != _major(SCHEMA_VERSION):
        raise ReportFormatError(
            f"{source}: report schema version {version!r} cannot be read by this version, "
            f"which reads version {SCHEMA_VERSION} (re-run the suites, or use the "
            "multiturn-eval release that wrote it)"
        )
    try:
        return Report.model_validate(_known(Report, data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ReportFormatError(
            f"{source}: not a valid report: {where}: {first['msg']} "
            f"({exc.error_count()} problem{'s' if exc.error_count() != 1 else ''})"
        ) from None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds (``X``, ``list[X]``, ``X | None``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _known(model: type[BaseModel], data: Any) -> Any:
    """``data`` without the keys ``model`` does not know, at every depth.

    The models refuse unknown keys (a typo in the runner must not pass
    silently), but a report of a later 1.x version may carry optional fields
    this version has not heard of (SPEC 8: "more optional fields may be
    added"); they are dropped, not an error.
    """
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            continue
        inner = _models_in(field.annotation)
        if inner and isinstance(value, dict) and typing.get_origin(field.annotation) is not dict:
            value = _known(inner[0], value)
        elif inner and isinstance(value, list):
            value = [_known(inner[0], item) for item in value]
        elif inner and isinstance(value, dict):  # dict[str, Model]
            value = {k: _known(inner[0], v) for k, v in value.items()}
        out[key] = value
    return out


def load_report(path: Path) -> Report:
    """Read ``path`` (a report.json); :class:`ReportFormatError` when it cannot be."""
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise ReportFormatError(f"{path}: {what}")
        if path.stat().st_size > MAX_BYTES:
            raise ReportFormatError(f"{path}: larger than {MAX_BYTES // 1024**2} MB")
        data = path.read_bytes()
    except OSError as exc:
        raise ReportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_report(data, str(path))


def read_baseline(path: str | Path) -> tuple[Report | None, str | None]:
    """A baseline report for ``--baseline``, or (None, a notice saying why there is none).

    A missing or unreadable baseline is never an error (SPEC 6.7): the run goes
    on as without one, and the notice is shown on the console (and as a
    ``::notice`` in the Action).
    """
    try:
        return load_report(Path(path)), None
    except ReportFormatError as exc:
        return None, f"no baseline comparison: {exc}"
