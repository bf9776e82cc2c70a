"""A loaded suite's test cases: a compact index of all of them, each case in full only when used.

Every stage after the loader reaches a suite's test cases through
``LoadedSuite.cases``, a :class:`CaseSource`, and never through
``Suite.test_cases`` (which holds only the cases written in the suite file):

- ``len(cases)``, ``iter(cases)`` (one :class:`CaseEntry` per case, in suite
  order), ``cases.entry(i)``, ``cases.name(i)``, ``cases.names()``: what
  selection (``-k``, ``--tag``, ``--rerun-failed``), sharding, the dry run,
  ``validate`` and the reports' placeholders need, from the index alone;
- ``cases.materialize(i)``: the validated :class:`~multiturn_eval.suite.TestCase`,
  for the stage about to run it (or report it).

The index order is the suite's: the cases written under ``test_cases:``
first, then the lines of ``test_cases_file`` (blank lines skipped), and a
case's position in it is the ``index`` every report and error gives it.

A case written in the suite file is already a model (the suite file was
parsed whole): ``materialize`` returns it. A case of the JSON Lines file is
not held: the index keeps its name, tags, turn counts, line, byte offset,
length and CRC-32 (about 120 bytes a case), and ``materialize`` reads that one
line again, checks it is the line that was validated, and parses and
validates it with the loader's own rules (``reader``), so 50,000 cases take a
few MB while loaded instead of a model each. A line that changed or went away
since loading raises :class:`~multiturn_eval.errors.CaseReadError`, which fails
that case only.

This module imports the suite models and the file reader only: the loader fills
a :class:`CaseSource` in, every later stage reads it (``loaded.py`` holds it).
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CaseReadError
from .reading import open_binary
from .suite import TestCase


@dataclass(frozen=True, slots=True)
class CaseEntry:
    """One test case as the index holds it (no model, nothing of its turns but their count)."""

    index: int
    """Its position in the suite (0-based; the cases written in the suite file first)."""
    name: str
    """Its name, or ``test_case_<index>`` when it has none."""
    tags: tuple[str, ...]
    turns: int
    """How many scripted turns one run sends (a legacy ``input:`` case: 1)."""
    max_turns: int
    """A simulated user's ``max_turns`` (its opening included); 0: no simulated user."""
    line: int | None
    """Its line: in the suite file, or in ``file`` when it comes from there."""
    file: str | None
    """The JSON Lines file it comes from, as reports show it (None: the suite file)."""
    judge_calls: int
    """LLM-judge calls one run of it makes at most (per-turn judges, the simulated turns'
    included, and conversation judges; not the fidelity judge's)."""

    @property
    def turn_bound(self) -> int:
        """The most turns one run may have (:attr:`~multiturn_eval.suite.TestCase.turn_bound`)."""
        return self.turns + self.max_turns


@dataclass(frozen=True)
class TurnFileUse:
    """One ``files:`` entry of one turn of one test case (what the model backends check)."""

    index: int
    turn: int
    file: int
    path: str
    media_type: str | None
    legacy: bool
    """The case is a legacy ``input:`` case (its files are the case's, not ``turns[t]``'s)."""
    where: tuple[str, int | None, str | None]
    """(file, line, test case label) of the entry, as a located error names it."""


Reader = Callable[[int, int, bytes], TestCase]
"""(index, line, the line's bytes) -> the validated test case; raises CaseReadError."""


@dataclass(frozen=True)
class CasesFile:
    """The suite's ``test_cases_file`` as the index reads it back."""

    path: Path
    """Absolute (the run may change directory)."""
    shown: str
    """As reports and errors show it (relative to the working directory when inside it)."""
    reader: Reader


class CaseSource:
    """Every test case of one loaded suite: the index, and :meth:`materialize`."""

    def __init__(self, inline: Sequence[TestCase] = (), file: CasesFile | None = None) -> None:
        self._inline = inline
        self.file = file
        self._names: list[str | None] = []
        self._tags: list[tuple[str, ...]] = []
        self._tag_sets: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._turns = array("i")
        self._max_turns = array("i")
        self._judges = array("i")
        self._lines = array("q")
        self._offsets = array("q")
        self._lengths = array("q")
        self._crcs = array("L")
        self.turn_files: list[TurnFileUse] = []
        """Every turn file of every case, in suite order (collected while loading)."""

    # ------------------------------------------------------------------ building

    def add(
        self,
        name: str | None,
        tags: Sequence[str],
        turns: int,
        line: int | None,
        judge_calls: int = 0,
        data: bytes | None = None,
        offset: int = -1,
        max_turns: int = 0,
    ) -> int:
        """Index the next case (``data``: its line of the file, read back by offset); its index.

        ``turns``: its scripted turns; ``max_turns``: its simulated user's (0: none)."""
        shown = tuple(tags)
        self._names.append(name)
        self._tags.append(self._tag_sets.setdefault(shown, shown))  # one tuple per tag set
        self._turns.append(turns)
        self._max_turns.append(max_turns)
        self._judges.append(judge_calls)
        self._lines.append(line or 0)
        self._offsets.append(offset if data is not None else -1)
        self._lengths.append(len(data) if data is not None else 0)
        self._crcs.append(zlib.crc32(data) if data is not None else 0)
        return len(self._names) - 1

    @property
    def inline_count(self) -> int:
        """How many cases are written in the suite file (they come first)."""
        return len(self._inline)

    # ------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[CaseEntry]:
        return (self.entry(i) for i in range(len(self._names)))

    def entry(self, index: int) -> CaseEntry:
        line = self._lines[index]
        return CaseEntry(
            index=index,
            name=self.name(index),
            tags=self._tags[index],
            turns=self._turns[index],
            max_turns=self._max_turns[index],
            line=line or None,
            file=self.file_of(index),
            judge_calls=self._judges[index],
        )

    def name(self, index: int) -> str:
        """The case's name, or ``test_case_<index>`` when it has none."""
        return self._names[index] or f"test_case_{index}"

    def written_name(self, index: int) -> str | None:
        """The name as the case writes it (None: it has none)."""
        return self._names[index]

    def names(self) -> list[str]:
        """Every case's name, in suite order."""
        return [name or f"test_case_{i}" for i, name in enumerate(self._names)]

    def tags(self, index: int) -> tuple[str, ...]:
        return self._tags[index]

    def turns(self, index: int) -> int:
        """Its scripted turns (a legacy ``input:`` case: 1; a simulated case may have none)."""
        return self._turns[index]

    def turn_bound(self, index: int) -> int:
        """The most turns one run may have: the scripted ones and a simulated user's."""
        return self._turns[index] + self._max_turns[index]

    def line(self, index: int) -> int | None:
        return self._lines[index] or None

    def in_file(self, index: int) -> bool:
        """Whether the case comes from the ``test_cases_file`` (not the suite file)."""
        return self._offsets[index] >= 0

    def file_of(self, index: int) -> str | None:
        """The JSON Lines file the case comes from, as shown (None: the suite file)."""
        return self.file.shown if self.file is not None and self.in_file(index) else None

    def materialize(self, index: int) -> TestCase:
        """The validated test case at ``index``; CaseReadError when its line cannot be read back."""
        if not self.in_file(index):
            return self._inline[index]
        assert self.file is not None
        offset, length, line = self._offsets[index], self._lengths[index], self._lines[index]
        where = f"{self.file.shown}:{line}"
        try:
            with open_binary(self.file.path) as handle:
                handle.seek(offset)
                data = handle.read(length)
        except (ValueError, OSError) as exc:
            raise CaseReadError(f"cannot read the test case again at {where}: {exc}") from None
        if len(data) != length or zlib.crc32(data) != self._crcs[index]:
            raise CaseReadError(
                f"the test case at {where} changed since the suite was loaded (the file was "
                "edited during the run); run again"
            )
        return self.file.reader(index, line, data)
