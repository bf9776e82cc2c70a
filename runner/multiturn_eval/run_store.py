"""Where a run's finished results go as they finish: a file, not memory (issue 23).

A finished :class:`~multiturn_eval.results.CaseResult` is written once, as its
redacted JSON text (``redact(dump_json(result))``), and the run keeps where it
lies: two machine integers a test case, in per-suite arrays indexed by the
case's position in its suite. Reports are built from the file, one result at a
time (:class:`RunResults`).

The file is the progress journal ``results.jsonl`` when ``report.json`` is
among the formats (its lines are what users ``tail -f``); otherwise a private
spool file in the system's temporary directory (``multiturn-eval-results-*.jsonl``),
deleted once the store and every report reading it are gone (or at exit).

If the file cannot be written (a full disk), nothing is lost: the result that
failed and every later one are kept in memory, already redacted, and
:attr:`RunStore.error` says so (the run shows it as a warning).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .results import CaseFixture, CaseResult, CaseTotals
from .stored import ResultFile, ResultSequence
from .stored import _read as read_span
from .types import STORED

if TYPE_CHECKING:
    from .reports.writer import OnDisk
    from .secrets import Redactor

#: an entry of :class:`RunResults` that is not in the file: a case to show as not run
_NOT_RUN = -1
#: an entry of :class:`RunResults` held as a model (kept, partial repeat, memory fallback)
_HELD = -2

#: :attr:`RunStore.checked` flags: whether a stored text was compared with what reading it
#: back and dumping it gives (compact, and indented by 2 as report.json is), and was the same
_COMPACT_CHECKED, _COMPACT_SAME, _PRETTY_CHECKED, _PRETTY_SAME = 1, 2, 4, 8
#: :class:`RunResults` ``keys``: ``suite << KEY_BITS | case index``
KEY_BITS = 32


def redacted_text(result: CaseResult, redact: Redactor) -> str:
    """``result``'s JSON (as ``report.json`` holds it) with every secret replaced
    (:func:`multiturn_eval.secrets.redacted_model`: a numeric secret inside a
    number of a tool's arguments makes that number ``"***"``)."""
    from .reports.json_report import dump_json
    from .secrets import redacted_model

    return redacted_model(CaseResult, dump_json(result), redact)[0]


def _parse(data: bytes | str) -> CaseResult:
    """A result from the run's own JSON (skipping the validators that clean user values)."""
    return CaseResult.model_validate_json(data, context=STORED)


class RunStore:
    """The finished results of one run: (suite position, case index) -> where it lies.

    ``sizes`` are the number of test cases of each planned suite (the length of
    its case index). With ``journal`` the file is that path (``results.jsonl``,
    started afresh) and every append holds ``disk.journal_lock`` and counts in
    ``disk.journaled``; with ``spool`` a private temporary file; with neither,
    results are kept in memory (tests, and the fallback).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        redact: Redactor,
        *,
        journal: Path | None = None,
        disk: OnDisk | None = None,
        spool: bool = False,
    ) -> None:
        self.redact = redact
        self.offsets = [array("q", [_NOT_RUN]) * n for n in sizes]
        self.lengths = [array("q", [0]) * n for n in sizes]
        self.checked = [bytearray(n) for n in sizes]
        """Per case, what :meth:`RunResults.json_texts` found of its stored text (the flags
        above; 0 until a report wrote it): one byte a case, no result is kept."""
        self.held: dict[tuple[int, int], CaseResult] = {}
        """Results kept in memory (redacted), once the file failed or without one."""
        self.count = 0
        """Test cases stored so far."""
        self.disk = disk if journal is not None else None
        self.error: str | None = None
        """Why results are kept in memory (the file could not be opened or written)."""
        self.file: ResultFile | None = None
        self.path: Path | None = None
        try:
            if journal is not None:
                journal.parent.mkdir(parents=True, exist_ok=True)
                self.file = ResultFile(journal)
                self.path = journal
            elif spool:
                fd, name = tempfile.mkstemp(prefix="multiturn-eval-results-", suffix=".jsonl")
                os.close(fd)
                self.path = Path(name)
                weakref.finalize(self, _unlink, self.path)
                self.file = ResultFile(self.path)
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        what = "progress files stopped" if self.disk is not None else "cannot spool results"
        self.error = f"{what}: {exc.strerror or exc}; the results from then on are kept in memory"
        self.close()

    def put(self, s: int, index: int, result: CaseResult) -> None:
        """Store ``result`` as (suite ``s``, case ``index``)'s; never raises for a file problem."""
        text = redacted_text(result, self.redact)
        if self.file is not None:
            try:
                if self.disk is not None:
                    with self.disk.journal_lock:
                        offset, length = self.file.append(text)
                        self.disk.journaled += 1
                else:
                    offset, length = self.file.append(text)
            except OSError as exc:
                self._failed(exc)
            else:
                self.offsets[s][index] = offset
                self.lengths[s][index] = length
                self.checked[s][index] = 0
                self.count += 1
                return
        self.held[(s, index)] = _parse(text)
        self.offsets[s][index] = _HELD
        self.count += 1

    def has(self, s: int, index: int) -> bool:
        return self.offsets[s][index] != _NOT_RUN

    def close(self) -> None:
        """Stop writing (what is stored stays readable)."""
        file, self.file = self.file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


Make = Callable[[], CaseResult]


class RunResults(ResultSequence):
    """A report's results, in plan order, read from a :class:`RunStore` one at a time.

    Built when a report is built (:meth:`multiturn_eval.scheduler.RunState.final_results`):
    it holds where each stored result lies then (16 bytes a case), so the run may go
    on storing results meanwhile. A case not in the file is made when it is read:
    ``made[i]`` builds entry ``i`` (a not-run result, a partial repeat, a kept one).
    ``finish`` (``RunOptions.finish_case``) is applied to the made ones (the stored
    ones went through it before they were stored); ``redacted_by`` is the redactor
    every result read has gone through (see :func:`multiturn_eval.reports.writer.redact_report`).
    ``keys``, when given, names each stored entry's place in the store (``suite << 32 |
    case index``, -1 for the others): where :meth:`json_texts` notes what it found.
    """

    def __init__(
        self,
        store: RunStore,
        offsets: array[int],
        lengths: array[int],
        made: dict[int, Make],
        finish: Callable[[CaseResult], CaseResult] | None = None,
        keys: array[int] | None = None,
    ) -> None:
        self.store = store  # keeps the spool file alive as long as a report reads it
        self.offsets = offsets
        self.lengths = lengths
        self.made = made
        self.finish = finish
        self.keys = keys
        self.redacted_by = store.redact

    def __len__(self) -> int:
        return len(self.offsets)

    def _made(self, i: int) -> CaseResult:
        result = self.made[i]()
        if self.finish is not None:
            result = self.finish(result)
        if self.redacted_by.active:
            result = _parse(redacted_text(result, self.redacted_by))
        return result

    def _read(self, i: int, handle: BinaryIO | None) -> CaseResult:
        offset = self.offsets[i]
        if offset < 0:
            return self._made(i)
        assert handle is not None
        return _parse(read_span(handle, offset, self.lengths[i]))

    def _get(self, index: int) -> CaseResult:
        if self.offsets[index] < 0:
            return self._made(index)
        assert self.store.path is not None
        with self.store.path.open("rb") as handle:
            return self._read(index, handle)

    def __iter__(self) -> Iterator[CaseResult]:
        for i, data in self._stored():
            yield self._made(i) if data is None else _parse(data)

    def _stored(self) -> Iterator[tuple[int, bytes | None]]:
        """(position, stored bytes) of every entry in order; None for a made one."""
        handle: BinaryIO | None = None
        try:
            for i in range(len(self)):
                offset = self.offsets[i]
                if offset < 0:
                    yield i, None
                    continue
                if handle is None:
                    assert self.store.path is not None
                    handle = self.store.path.open("rb")
                yield i, read_span(handle, offset, self.lengths[i])
        finally:
            if handle is not None:
                handle.close()

    def totals(self) -> Iterator[CaseResult | CaseTotals]:
        """What the summary reads of each result: a stored one is read as its
        :class:`~multiturn_eval.results.CaseTotals` (not the whole result), a made one made."""
        for i, data in self._stored():
            yield (
                self._made(i)
                if data is None
                else CaseTotals.model_validate_json(data, context=STORED)
            )

    def json_texts(self, indent: int | None = None) -> Iterator[str]:
        """Each result's ``dump_json(result, indent)``, in order (what report.json joins).

        A stored result's text is ``dump_json`` of the result that was stored; read back
        and dumped again it gives the same bytes for anything the runner makes, but not
        necessarily for what a ``finish_case`` hook made (a value of the wrong type, keys
        that collide once made strings). So the first report to write a stored result
        reads it back and dumps it as before, and notes in :attr:`RunStore.checked`
        whether the stored text (compact) or the stored text re-indented (``indent=2``,
        :func:`~multiturn_eval.reports.json_report.reindent`) was those same bytes; the
        reports after it copy that instead of reading the result back (a snapshot of a
        long run writes every result again and again). Other indents dump each result.
        """
        from .reports.json_report import dump_json

        if indent is None:
            checked, same = _COMPACT_CHECKED, _COMPACT_SAME
        elif indent == 2:
            checked, same = _PRETTY_CHECKED, _PRETTY_SAME
        else:
            checked = same = 0
        keys, flags = self.keys, self.store.checked
        mask = (1 << KEY_BITS) - 1
        for i, data in self._stored():
            if data is None:
                yield dump_json(self._made(i), indent)
                continue
            key = keys[i] if keys is not None and same else -1
            found = flags[key >> KEY_BITS][key & mask] if key >= 0 else 0
            if found & same:
                yield _copied(data, indent)
                continue
            text = dump_json(_parse(data), indent)
            if key >= 0 and not found & checked:
                try:
                    alike = _copied(data, indent) == text
                except ValueError:  # not JSON pydantic reads (a fallback's lone surrogate)
                    alike = False
                flags[key >> KEY_BITS][key & mask] = found | checked | (same if alike else 0)
            yield text

    def fixture_blocks(self) -> Iterator[CaseFixture]:
        """The ``fixture`` block of every result in order (a repeated case's: its runs'), read
        from the stored JSON without building the results: what ``run.fixtures`` sums
        (a whole result costs some ten times more to read as a model)."""
        for i, stored in self._stored():
            if stored is None:
                yield from case_fixtures(self._made(i))
                continue
            data = json.loads(stored)
            runs = data.get("runs")
            blocks = [run.get("fixture") for run in runs] if runs else [data.get("fixture")]
            for block in blocks:
                if block is not None:
                    yield CaseFixture.model_validate(block, context=STORED)

    def __repr__(self) -> str:
        return f"RunResults({len(self)} results from {self.store.path or 'memory'})"


def _copied(data: bytes, indent: int | None) -> str:
    """A stored text as ``dump_json`` would write it with ``indent`` (None or 2)."""
    if indent is None:
        return data.decode("utf-8", "surrogatepass")
    from .reports.json_report import reindent

    return reindent(data, indent)


def case_fixtures(result: CaseResult) -> list[CaseFixture]:
    """A result's ``fixture`` blocks: its runs' when it was repeated, else its own."""
    if result.runs:
        return [run.fixture for run in result.runs if run.fixture is not None]
    return [result.fixture] if result.fixture is not None else []
