"""Building the run report and writing every report file.

Renderers are pure functions ``Report -> str``; this module is the only place
that writes report files. Each file is written atomically (temporary file, then
rename), and every secret the suites substituted is redacted from it.

While a run is going, :class:`ProgressWriter` appends every finished test
case to ``results.jsonl`` and rewrites ``report.json`` (with ``run.complete:
false``) now and then, so even a run killed without warning leaves a valid
report of nearly everything that finished; :func:`multiturn_eval.run.run_suites`
writes the final set at the end, on Ctrl-C or SIGTERM.

:class:`OnDisk` keeps count of how far each file has got, so that the exit on
a second signal can keep the one invariant a user relies on: ``report.json``
exists and holds every test case ``results.jsonl`` holds (it is brought up to
date, atomically, before the process exits; see :mod:`multiturn_eval.interrupts`).
"""

from __future__ import annotations

import importlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from .._version import __version__
from ..environment import RunEnvironment
from ..results import CaseResult, GitHubRun, Report, RunInfo
from ..rollup import summarize
from ..secrets import Redactor, redacted_model
from ..stored import ResultSequence
from .json_report import dump_json

#: format -> (file name, "module:function") rendering a Report to text
RENDERERS: dict[str, tuple[str, str]] = {
    "json": ("report.json", "multiturn_eval.reports.json_report:render_json"),
    "junit": ("junit.xml", "multiturn_eval.reports.junit:render_junit"),
    "markdown": ("summary.md", "multiturn_eval.reports.markdown:render_markdown"),
    "html": ("report.html", "multiturn_eval.reports.html:render_html"),
}

#: format -> "module:function" rendering a Report as pieces of text (joined: the renderer's
#: text); a piece never splits one test case's text, so each piece is redacted on its own.
#: Each renderer's module has it: ``stream_X`` beside ``render_X``.
STREAMS: dict[str, str] = {
    fmt: target.replace(":render_", ":stream_") for fmt, (_, target) in RENDERERS.items()
}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def github_run(environment: RunEnvironment | None) -> GitHubRun | None:
    """The workflow run a report links to, when the environment names one."""
    if environment is None:
        return None
    github = environment.github
    if not (github.repository and github.run_id):
        return None
    return GitHubRun(
        server_url=github.server_url,
        repository=github.repository,
        run_id=github.run_id,
        run_attempt=github.run_attempt or None,
    )


def build_report(
    suites: Sequence[str],
    results: Sequence[CaseResult],
    *,
    started_at: str,
    started: float,
    complete: bool,
    stop_reason: str | None = None,
    environment: RunEnvironment | None = None,
) -> Report:
    report = Report(
        run=RunInfo(
            suites=list(suites),
            started_at=started_at,
            finished_at=now_iso(),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            complete=complete,
            git_sha=environment.git_sha if environment else None,
            pr_number=environment.pr_number if environment else None,
            version=__version__,
            stop_reason=stop_reason,
            github=github_run(environment),
        ),
        summary=summarize(results.totals() if isinstance(results, ResultSequence) else results),
        results=[],
    )
    # a run's results are kept as given: read from its store one at a time (issue 23)
    report.results = list(results) if isinstance(results, list | tuple) else results  # type: ignore[assignment]
    return report


def renderer(fmt: str) -> Callable[[Report], str]:
    module_name, _, func = RENDERERS[fmt][1].partition(":")
    fn: Callable[[Report], str] = getattr(importlib.import_module(module_name), func)
    return fn


def streamer(fmt: str) -> Callable[[Report], Iterator[str]]:
    module_name, _, func = STREAMS[fmt].partition(":")
    fn: Callable[[Report], Iterator[str]] = getattr(importlib.import_module(module_name), func)
    return fn


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, one after another) to a temporary file, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                for piece in text:
                    handle.write(piece)
        Path(tmp).chmod(0o644)  # mkstemp makes 0600; reports are read by CI and other users
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def redact_report(report: Report, redact: Redactor) -> Report:
    """The report with every secret replaced in its data, before any renderer sees it.

    Renderers escape and cut text (Markdown writes ``_`` as ``&#95;``, long
    replies are cut), which can split a secret so that redacting their output
    alone would miss it; the output is still redacted as well.

    The run, summary and comparison are redacted now; the results as each one is
    read (:class:`RedactedResults`), unless they already went through ``redact``
    (a run's results are stored redacted: :mod:`multiturn_eval.run_store`).
    """
    if not redact.active:
        return report
    shell = report.model_copy(update={"results": []})
    clean = redacted_model(Report, dump_json(shell), redact)[1] or shell
    results: Sequence[CaseResult] = report.results
    if getattr(results, "redacted_by", None) is not redact:
        results = RedactedResults(results, redact)
    clean.results = results  # type: ignore[assignment]
    return clean


class RedactedResults(ResultSequence):
    """``results`` with every secret replaced in each one's data, as each is read."""

    def __init__(self, results: Sequence[CaseResult], redact: Redactor) -> None:
        self.results = results
        self.redacted_by = redact

    def _clean(self, case: CaseResult) -> CaseResult:
        return redacted_model(CaseResult, dump_json(case), self.redacted_by)[1] or case

    def __len__(self) -> int:
        return len(self.results)

    def _get(self, index: int) -> CaseResult:
        return self._clean(self.results[index])

    def _slice(self, index: slice) -> Sequence[CaseResult]:
        return [self._clean(case) for case in self.results[index]]

    def __iter__(self) -> Iterator[CaseResult]:
        for case in self.results:
            yield self._clean(case)


def stream_reports(
    report: Report, formats: Sequence[str], redact: Redactor
) -> Iterator[tuple[str, Iterator[str]]]:
    """(format, its redacted text in pieces) for each format, ``report.json`` first.

    ``report.json`` first: it is the one a signal arriving during the writing
    must not cost. Each piece is redacted on its own (a piece never splits a test
    case's text, so never a secret the data held); nothing holds a whole report.
    That pass leaves the runner's own numbers whole
    (:meth:`~multiturn_eval.secrets.Redactor.keeping_numbers`): ``***`` in place of
    a number would make ``report.json``, ``junit.xml``'s ``time`` and the HTML
    report's embedded JSON unreadable.
    """
    clean = redact_report(report, redact)
    for fmt in sorted(formats, key=lambda f: f != "json"):
        pieces = streamer(fmt)(clean)
        yield fmt, (map(redact.keeping_numbers, pieces) if redact.active else pieces)


def render_reports(
    report: Report, formats: Sequence[str], redact: Redactor
) -> Iterator[tuple[str, str]]:
    """(format, redacted text) for each format, ``report.json`` first whatever the order."""
    for fmt, pieces in stream_reports(report, formats, redact):
        yield fmt, "".join(pieces)


def write_reports(
    report: Report,
    report_dir: Path,
    formats: Sequence[str],
    redact: Redactor,
    on_text: Callable[[str, str], None] | None = None,
    written: dict[str, Path] | None = None,
) -> dict[str, Path]:
    """Render and write each requested format; returns format -> path (in ``formats`` order).

    Each file is streamed to its temporary file piece by piece. ``on_text(format,
    text)`` sees ``summary.md``'s text as written (the Action keeps it for the
    comment instead of reading the file back; it is at most 65,536 characters),
    and is called with ``""`` for the other formats, once each is written.
    ``written``, when given, is filled as each file is written, so a caller
    still knows what is on disk when a later format fails.
    """
    written = {} if written is None else written
    for fmt, pieces in stream_reports(report, formats, redact):
        path = report_dir / RENDERERS[fmt][0]
        text = ""
        if fmt == "markdown":
            text = "".join(pieces)
            write_atomic(path, text)
        else:
            write_atomic(path, pieces)
        written[fmt] = path
        if on_text is not None:
            on_text(fmt, text)
    return {fmt: written[fmt] for fmt in formats if fmt in written}


class OnDisk:
    """How far ``results.jsonl`` and ``report.json`` have got in this run (test cases).

    ``journaled`` counts the lines flushed to ``results.jsonl``; ``reported`` how
    many of them the ``report.json`` on disk holds (None: this run wrote none yet).
    Whoever writes ``report.json`` reads ``journaled`` *before* building it from the
    run's state (a result is in the state before its line is written) and calls
    :meth:`covered` once the file is in place.
    """

    def __init__(self) -> None:
        self.journaled = 0
        self.reported: int | None = None
        self.journal_lock = threading.Lock()
        """Held while a line is appended to ``results.jsonl`` (and by the exit, to stop them)."""

    def covered(self, lines: int) -> None:
        self.reported = lines if self.reported is None else max(self.reported, lines)

    @property
    def behind(self) -> bool:
        """``report.json`` is missing, or holds fewer test cases than ``results.jsonl``."""
        return self.reported is None or self.reported < self.journaled


class ProgressWriter:
    """Keeps ``report.json`` current while the run goes on.

    - ``results.jsonl``: one line per finished test case (a ``CaseResult``, in
      the shape of ``report.json``'s ``results`` items), in completion order,
      appended and flushed as each finishes; the file is started afresh by each
      run. Useful to follow a long run (``tail -f``), and what is left when a
      run is killed with SIGKILL. It is the run's store
      (:class:`multiturn_eval.run_store.RunStore` writes it): reports are
      streamed from it.
    - ``report.json``: rewritten from the run's snapshot (``run.complete:
      false`` until the final write) when ``interval`` seconds have passed
      *and* at least ``cost_factor`` times as long as the last snapshot took to
      write. A snapshot costs time proportional to the run's size, so this keeps
      all snapshots together under ``1 / cost_factor`` of the run's time (5%
      by default): a 50,000-case run does not spend its time re-rendering
      itself, and a small one still has a snapshot every two seconds.
    """

    JOURNAL = "results.jsonl"

    def __init__(
        self,
        report_dir: Path,
        redact: Redactor,
        snapshot: Callable[[], Report],
        interval: float = 2.0,
        cost_factor: float = 20.0,
        lock: threading.Lock | None = None,
        disk: OnDisk | None = None,
        failed: Callable[[], str | None] | None = None,
    ) -> None:
        self.disk = disk or OnDisk()
        self.path = report_dir / RENDERERS["json"][0]
        self.redact = redact
        self.snapshot = snapshot
        self.interval = interval
        self.cost_factor = cost_factor
        self.lock = lock or threading.Lock()
        """Held while report files are written: a snapshot is skipped rather than waited for."""
        self._next = time.monotonic() + interval
        self.snapshots = 0
        self._store_error = failed or (lambda: None)
        self._error: str | None = None

    @property
    def error(self) -> str | None:
        """Why the progress files stopped being written (a full disk, ...); the run goes on."""
        return self._error or self._store_error()

    def case_finished(self, result: CaseResult) -> None:
        """Never raises for a file problem: the run matters more than its progress files."""
        if self.error is not None:
            return
        try:
            now = time.monotonic()
            if now >= self._next and self.lock.acquire(blocking=False):
                try:
                    mark = self.disk.journaled
                    report = redact_report(self.snapshot(), self.redact)
                    pieces = streamer("json")(report)
                    write_atomic(self.path, map(self.redact.keeping_numbers, pieces))
                    self.disk.covered(mark)
                finally:
                    self.lock.release()
                done = time.monotonic()
                self.snapshots += 1
                self._next = done + max(self.interval, self.cost_factor * (done - now))
        except OSError as exc:
            self._error = f"progress files stopped: {exc.strerror or exc}"

    def close(self) -> None:
        """Nothing to close: the store owns ``results.jsonl``."""
