"""Test-case results kept in a file instead of in memory (issue 23: memory flat in cases).

A finished :class:`~multiturn_eval.results.CaseResult` is about 10-100 KB as a
pydantic model; 50,000 of them do not fit a CI runner. What stays in memory is
where each result's JSON text lies in a file (two machine integers a case), and
a result is read back and validated when someone asks for it.

- :class:`ResultFile` is an append-only file of JSON texts (the run's
  ``results.jsonl`` journal, one result a line; or a private spool file).
- :class:`StoredResults` is a read-only :class:`~collections.abc.Sequence` of
  results over spans of one file, in the order the spans are given (the run's
  plan order, whatever order the results finished in). It can stand in for the
  ``results`` list of a :class:`~multiturn_eval.results.Report` built with
  ``Report.model_construct``: code that iterates or indexes ``report.results``
  works unchanged, and reads one result at a time.

Iterating reads the file sequentially through one handle; each pass re-reads
and re-validates (nothing is cached, so a pass over 50,000 cases holds one).
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, overload

from .results import CaseResult, CaseTotals

#: one stored result's bytes -> the result
Parse = Callable[[bytes], CaseResult]


class ResultFile:
    """An append-only file of result texts; :meth:`append` returns where each one lies."""

    def __init__(self, path: Path, *, truncate: bool = True) -> None:
        self.path = path
        self._handle = path.open("w+b" if truncate else "a+b")
        self._handle.seek(0, os.SEEK_END)
        self._end = self._handle.tell()
        self._lock = threading.Lock()

    def append(self, text: str, newline: bool = True) -> tuple[int, int]:
        """Write ``text`` (UTF-8, then a newline) and flush; (offset, length) of ``text``."""
        data = text.encode("utf-8", "surrogatepass")
        with self._lock:
            offset = self._end
            self._handle.write(data + b"\n" if newline else data)
            self._handle.flush()
            self._end = self._handle.tell()
        return offset, len(data)

    def close(self) -> None:
        self._handle.close()


class Spans:
    """(offset, length) pairs in compact arrays: 16 bytes a result."""

    __slots__ = ("lengths", "offsets")

    def __init__(self, pairs: Iterable[tuple[int, int]] = ()) -> None:
        self.offsets = array("q")
        self.lengths = array("q")
        for offset, length in pairs:
            self.add(offset, length)

    def add(self, offset: int, length: int) -> None:
        self.offsets.append(offset)
        self.lengths.append(length)

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: int) -> tuple[int, int]:
        return self.offsets[index], self.lengths[index]


def _read(handle: BinaryIO, offset: int, length: int) -> bytes:
    if handle.tell() != offset:
        handle.seek(offset)
    data = handle.read(length)
    if len(data) != length:
        raise OSError(f"result file truncated at byte {offset + len(data)}")
    return data


class ResultSequence(Sequence[CaseResult]):
    """What every read-only sequence of results shares (these here, the run's
    :class:`~multiturn_eval.run_store.RunResults`, the writer's
    :class:`~multiturn_eval.reports.writer.RedactedResults`): an index (negative from
    the end, :class:`IndexError` outside) reads entry :meth:`_get`; a slice is a list
    unless :meth:`_slice` makes a sequence of its own kind; truth by length; equal to
    any sequence of equal results (a report read back == the run's).

    A subclass gives ``__len__`` and ``_get(i)`` (``0 <= i < len``), and an
    ``__iter__`` of its own where a pass can read faster than ``_get`` after ``_get``.
    """

    def _get(self, index: int) -> CaseResult:
        raise NotImplementedError

    def _slice(self, index: slice) -> Sequence[CaseResult]:
        return [self._get(i) for i in range(*index.indices(len(self)))]

    @overload
    def __getitem__(self, index: int) -> CaseResult: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[CaseResult]: ...
    def __getitem__(self, index: int | slice) -> CaseResult | Sequence[CaseResult]:
        if isinstance(index, slice):
            return self._slice(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._get(index)

    def __iter__(self) -> Iterator[CaseResult]:
        for i in range(len(self)):
            yield self._get(i)

    def totals(self) -> Iterator[CaseResult | CaseTotals]:
        """Each result as the run's summary reads it (:func:`multiturn_eval.rollup.summarize`),
        in order: the results themselves, unless a subclass reads less of each."""
        yield from self

    def __bool__(self) -> bool:
        return len(self) > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} results)"


class StoredResults(ResultSequence):
    """The results at ``spans`` of ``path``, read and validated one at a time.

    ``parse`` turns one span's bytes into a result (default: exact validation of
    the runner's own JSON; a report written by another version needs its unknown
    keys dropped first, see :mod:`multiturn_eval.reports.reader`).
    """

    def __init__(self, path: Path, spans: Spans, parse: Parse | None = None) -> None:
        self.path = path
        self.spans = spans
        self.parse: Parse = parse or CaseResult.model_validate_json

    def __len__(self) -> int:
        return len(self.spans)

    def text(self, index: int) -> bytes:
        """Result ``index``'s stored JSON text."""
        offset, length = self.spans[index]
        with self.path.open("rb") as handle:
            return _read(handle, offset, length)

    def _over(self, spans: Spans) -> StoredResults:
        """The same file's results at ``spans``."""
        return StoredResults(self.path, spans, self.parse)

    def _get(self, index: int) -> CaseResult:
        return self.parse(self.text(index))

    def _slice(self, index: slice) -> StoredResults:
        return self._over(Spans(self.spans[i] for i in range(*index.indices(len(self)))))

    def __iter__(self) -> Iterator[CaseResult]:
        for text in _texts(self):
            yield self.parse(text)


def stored(
    path: Path, spans: Iterable[tuple[int, int]] | Spans, parse: Parse | None = None
) -> StoredResults:
    """:class:`StoredResults` over ``spans`` (any (offset, length) pairs)."""
    return StoredResults(path, spans if isinstance(spans, Spans) else Spans(spans), parse)


class StoredAcross(ResultSequence):
    """Results kept in several :class:`StoredResults` (``merge``: one per shard report), in
    any order across them: entry ``i`` is result ``at[i]`` of part ``part[i]``.

    8 bytes an entry over the parts' 16; iterating keeps one handle open per part.
    """

    def __init__(self, parts: Sequence[StoredResults], order: Iterable[tuple[int, int]]) -> None:
        self.parts = list(parts)
        self.part = array("i")
        self.at = array("i")
        for part, at in order:
            self.part.append(part)
            self.at.append(at)

    def __len__(self) -> int:
        return len(self.part)

    def _get(self, index: int) -> CaseResult:
        return self.parts[self.part[index]][self.at[index]]

    def _slice(self, index: slice) -> StoredAcross:
        picked = range(*index.indices(len(self)))
        return StoredAcross(self.parts, ((self.part[i], self.at[i]) for i in picked))

    def __iter__(self) -> Iterator[CaseResult]:
        handles: dict[int, BinaryIO] = {}
        try:
            for part, at in zip(self.part, self.at, strict=True):
                results = self.parts[part]
                if isinstance(results, PinnedResults):
                    yield results.parse(results.text(at))
                    continue
                handle = handles.get(part)
                if handle is None:
                    handle = handles[part] = results.path.open("rb")
                offset, length = results.spans[at]
                yield results.parse(_read(handle, offset, length))
        finally:
            for handle in handles.values():
                handle.close()


class KeptResults(Mapping[tuple[int, int], CaseResult]):
    """Results of an earlier report by (suite position, case index), read when asked for:
    ``--keep-passed`` carries them into a run's report without holding them (an int a
    result here, the results themselves a :class:`StoredResults` over the earlier file)."""

    def __init__(self, results: Sequence[CaseResult], positions: dict[tuple[int, int], int]):
        self.results = results
        self.positions = positions

    def __getitem__(self, key: tuple[int, int]) -> CaseResult:
        return self.results[self.positions[key]]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __contains__(self, key: object) -> bool:  # Mapping's would read the result
        return key in self.positions

    def restricted(self, keys: Iterable[tuple[int, int]]) -> KeptResults:
        """The same results, only those of ``keys`` (``--shard``: the shard's own)."""
        return KeptResults(self.results, {key: self.positions[key] for key in keys})


def fields_of(results: Sequence[CaseResult], *names: str) -> Iterator[tuple[Any, ...]]:
    """The top-level fields ``names`` of each result, in order. Over a
    :class:`StoredResults` (whose results were validated when it was made: a report
    read back) from each stored text's JSON alone: a pass that needs a few fields
    (merge's and the baseline's keys) skips building whole results."""
    if not isinstance(results, StoredResults):
        for result in results:
            yield tuple(getattr(result, name) for name in names)
        return
    for text in _texts(results):
        item = json.loads(text)
        yield tuple(item[name] for name in names)


def _texts(results: StoredResults) -> Iterator[bytes]:
    if isinstance(results, PinnedResults):
        yield from (results.text(i) for i in range(len(results)))
        return
    if not len(results):
        return
    with results.path.open("rb") as handle:
        for i in range(len(results)):
            offset, length = results.spans[i]
            yield _read(handle, offset, length)


class _Descriptor:
    """A file opened for reading, closed when the last sequence over it goes."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("rb")
        self.lock = threading.Lock()
        weakref.finalize(self, self.handle.close)

    def read(self, offset: int, length: int) -> bytes:
        with self.lock:  # one position for every reader (os.pread is not on every platform)
            return _read(self.handle, offset, length)


class PinnedResults(StoredResults):
    """A :class:`StoredResults` that keeps reading the file it was made over, as it was
    then: a report read back stays readable when a run writes a new report over it (the
    writer replaces the file; ``run --rerun-failed out/report.json --keep-passed`` reads
    its kept results from the replaced one while it writes ``out/``)."""

    def __init__(
        self,
        path: Path,
        spans: Spans,
        parse: Parse | None = None,
        *,
        file: _Descriptor | None = None,
    ) -> None:
        super().__init__(path, spans, parse)
        self.file = file or _Descriptor(path)

    def text(self, index: int) -> bytes:
        """Result ``index``'s stored JSON text."""
        offset, length = self.spans[index]
        return self.file.read(offset, length)

    def _over(self, spans: Spans) -> PinnedResults:
        return PinnedResults(self.path, spans, self.parse, file=self.file)
