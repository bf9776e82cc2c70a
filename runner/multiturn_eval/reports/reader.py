"""Reading a ``report.json`` back into a :class:`~multiturn_eval.results.Report`.

Baseline comparison, regrade and shard merge start from reports written
earlier, possibly by another version of multiturn-eval. A report of the same
major schema version (``schema_version`` ``"1"``, ``"1.x"``) is read; another
major version, a file that is not JSON, or JSON that is not a report is a
:class:`~multiturn_eval.errors.ReportFormatError` naming the file and what is
wrong (the CLI makes it exit 2).

Reading is exact: ``render(load_report(path))`` gives the same files the run
wrote (``tests/test_report_reader.py`` checks it for every format).

Reading does not hold the report (issue 23): :func:`load_report` makes one
streaming pass over the file through a window of about :data:`CHUNK` bytes
(more only while one value is larger), keeps everything but ``results`` (the
run, the summary, a comparison: small) and each result's byte span (16 bytes
a result), and validates each result as it passes (an invalid one is named by
its position, ``results.N.field``). The report it returns has a
:class:`~multiturn_eval.stored.StoredResults` over the file as its results,
which reads one result at a time. Any key order and whitespace read the same
(a report re-indented or key-sorted by ``jq`` included: when ``results`` comes
before ``schema_version`` the results are validated in a second pass over
their spans). Refused as before: not JSON (named with the byte where it
stops, a truncated file included), not a report, another major version.
Results are read from the file as it was when it was read (its descriptor is
kept open: :class:`~multiturn_eval.stored.PinnedResults`), so a run that writes
its report over the one it reads (``--rerun-failed out/report.json
--keep-passed``, ``regrade out/report.json``, the default ``-o out``) still
reads the old one; a file changed in place under it is an error when read.
"""

from __future__ import annotations

import codecs
import json
import typing
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ValidationError

from ..errors import ReportFormatError
from ..results import SCHEMA_VERSION, CaseResult, Report
from ..stored import PinnedResults, Spans

#: the largest report.json read back: a sanity bound, no longer a memory one (reading
#: holds 16 bytes a result; a 50,000-case run writes about 300 MB)
MAX_BYTES = 64 * 1024**3

#: bytes read at a time (the window grows only while one JSON value is larger)
CHUNK = 1024 * 1024


def _major(version: object) -> str:
    return str(version).split(".", 1)[0]


def parse_report(text: str | bytes, source: str = "report.json") -> Report:
    """A report from its JSON text (held whole: :func:`load_report` reads a file without);
    ``source`` names it in errors."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportFormatError(f"{source}: not JSON ({exc})") from None
    except RecursionError:
        raise ReportFormatError(f"{source}: not JSON (a value nested too deeply)") from None
    _check_version(data, source)
    try:
        return Report.model_validate(_known(Report, data))
    except ValidationError as exc:
        raise _report_error(source, exc) from None


def _check_version(data: Any, source: str) -> None:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ReportFormatError(f"{source}: not a multiturn-eval report (no schema_version)")
    version = data["schema_version"]
    if _major(version) != _major(SCHEMA_VERSION):
        raise ReportFormatError(
            f"{source}: report schema version {version!r} cannot be read by this version, "
            f"which reads version {SCHEMA_VERSION} (re-run the suites, or use the "
            "multiturn-eval release that wrote it)"
        )


def _report_error(
    source: str, exc: ValidationError, prefix: tuple[str | int, ...] = ()
) -> ReportFormatError:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in (*prefix, *first["loc"])) or "(top level)"
    return ReportFormatError(
        f"{source}: not a valid report: {where}: {first['msg']} "
        f"({exc.error_count()} problem{'s' if exc.error_count() != 1 else ''})"
    )


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


def result_from(data: Any) -> CaseResult:
    """One result of a report from its parsed JSON (unknown keys of a later 1.x dropped)."""
    try:
        return CaseResult.model_validate(data)
    except ValidationError:
        if not isinstance(data, dict):
            raise
        return CaseResult.model_validate(_known(CaseResult, data))


def parse_result(data: bytes) -> CaseResult:
    """One result's JSON text (a span of a report.json) -> the result; the reader's ``parse``."""
    return result_from(json.loads(data))


class _NotJSON(Exception):
    pass


_SPACE = " \t\n\r"


class _Scan:
    """A JSON text read in chunks: a window ``buf`` of it, the read position ``pos`` in
    characters of the window and ``at`` in bytes of the file (spans are in bytes)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.decode = codecs.getincrementaldecoder("utf-8")("surrogatepass").decode
        self.decoder = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.at = 0
        self.eof = False
        head = handle.read(3)
        if head == codecs.BOM_UTF8:  # json.loads(bytes) reads a BOM'd file too
            self.at = 3
        else:
            self.buf = self.decode(head)

    def more(self) -> bool:
        """Read the next chunk (at least as much as the window holds: doubling); False at EOF."""
        if self.eof:
            return False
        data = self.handle.read(max(CHUNK, len(self.buf) - self.pos))
        if self.pos > len(self.buf) // 2:  # drop what was consumed
            self.buf, self.pos = self.buf[self.pos :], 0
        if not data:
            self.eof = True
            self.buf += self.decode(b"", True)
            return False
        self.buf += self.decode(data)
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the text)."""
        while True:
            buf, pos, end = self.buf, self.pos, len(self.buf)
            while pos < end and buf[pos] in _SPACE:
                pos += 1
            self.at += pos - self.pos
            self.pos = pos
            if pos < end:
                return buf[pos]
            if not self.more():
                return ""

    def take(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise _NotJSON(f"expecting {what} at byte {self.at}")
        self.pos += 1
        self.at += 1

    def value(self) -> tuple[Any, int, int]:
        """The JSON value at the read position: (value, byte offset, byte length)."""
        if not self.peek():
            raise _NotJSON(f"expecting a value at byte {self.at} (the file ends there)")
        start = self.pos
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, start)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - 16 or exc.msg.startswith("Unterminated")
                if cut and self.more():
                    start = self.pos
                    continue
                where = self.at + len(self.buf[start : exc.pos].encode("utf-8", "surrogatepass"))
                raise _NotJSON(f"{exc.msg}: byte {where}") from None
            except RecursionError:  # arrays or objects nested thousands deep
                raise _NotJSON(f"a value nested too deeply at byte {self.at}") from None
            if end >= len(self.buf) and self.more():  # a number may go on in the next chunk
                start = self.pos
                continue
            text = self.buf[start:end]
            length = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            offset = self.at
            self.pos, self.at = end, self.at + length
            return value, offset, length


_Scanned = tuple[Any, Spans | None, bool, tuple[int, ValidationError] | None]


def _scan(path: Path, source: str) -> _Scanned:
    """One pass over a report.json: (everything but ``results``, the results' spans,
    whether the results were validated on the way, and the first invalid one).

    Results are validated as they pass when ``schema_version`` came before them and
    is of this major version (our own reports: ``results`` is last); otherwise the
    caller validates them once the head is checked. A document that is not an
    object comes back as itself (the caller says it is not a report).
    """
    with path.open("rb") as handle:
        scan = _Scan(handle)
        try:
            if scan.peek() != "{":
                value, _, _ = scan.value()
                if scan.peek():
                    raise _NotJSON(f"extra data at byte {scan.at}")
                return value, None, False, None
            scan.take("{", "'{'")
            head: dict[str, Any] = {}
            spans: Spans | None = None
            validated = False
            invalid: tuple[int, ValidationError] | None = None
            if scan.peek() == "}":
                scan.take("}", "'}'")
            else:
                while True:
                    if scan.peek() != '"':
                        raise _NotJSON(f"expecting a property name at byte {scan.at}")
                    key, _, _ = scan.value()
                    scan.take(":", "':'")
                    if key == "results" and scan.peek() == "[":
                        version = head.get("schema_version")
                        validated = "schema_version" in head and _major(version) == _major(
                            SCHEMA_VERSION
                        )
                        spans, invalid = _results(scan, validated)
                        head.pop("results", None)
                    else:
                        head[key], _, _ = scan.value()
                        if key == "results":
                            spans, invalid = None, None
                    if scan.peek() == ",":
                        scan.take(",", "','")
                        continue
                    scan.take("}", "',' or '}'")
                    break
            if scan.peek():
                raise _NotJSON(f"extra data at byte {scan.at}")
        except _NotJSON as exc:
            raise ReportFormatError(f"{source}: not JSON ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ReportFormatError(f"{source}: not JSON (not UTF-8 text: {exc})") from None
        return head, spans, validated, invalid


def _results(scan: _Scan, validate: bool) -> tuple[Spans, tuple[int, ValidationError] | None]:
    """The spans of the ``results`` array's items; with ``validate`` also the first invalid
    one (position, error), raised once the whole file is known to be JSON, as today."""
    spans = Spans()
    invalid: tuple[int, ValidationError] | None = None
    scan.take("[", "'['")
    if scan.peek() == "]":
        scan.take("]", "']'")
        return spans, invalid
    while True:
        value, offset, length = scan.value()
        if validate and invalid is None:
            try:
                result_from(value)
            except ValidationError as exc:
                invalid = (len(spans), exc)
        del value
        spans.add(offset, length)
        if scan.peek() == ",":
            scan.take(",", "','")
            continue
        scan.take("]", "',' or ']'")
        return spans, invalid


def load_report(path: Path) -> Report:
    """Read ``path`` (a report.json) without holding it; :class:`ReportFormatError` when it
    cannot be. The results are a :class:`PinnedResults` over the file."""
    source = str(path)
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise ReportFormatError(f"{path}: {what}")
        if path.stat().st_size > MAX_BYTES:
            raise ReportFormatError(f"{path}: larger than {MAX_BYTES // 1024**3} GB")
        with path.open("rb") as handle:
            if json.detect_encoding(handle.read(4)) not in ("utf-8", "utf-8-sig"):
                # UTF-16/32 (json.loads reads them): rare, read whole as before
                return parse_report(path.read_bytes(), source)
        head, spans, validated, invalid = _scan(path, source)
    except OSError as exc:
        raise ReportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    _check_version(head, source)
    try:
        shell = Report.model_validate(
            _known(Report, {**head, "results": []} if spans is not None else head)
        )
    except ValidationError as exc:
        raise _report_error(source, exc) from None
    if spans is None:  # no results array: the error above said so
        return shell
    if invalid is not None:
        raise _report_error(source, invalid[1], ("results", invalid[0]))
    results = PinnedResults(path, spans, parse_result)
    if not validated:
        done = 0
        try:
            for _ in results:
                done += 1
        except ValidationError as exc:
            raise _report_error(source, exc, ("results", done)) from None
    return shell.model_copy(update={"results": results})


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
