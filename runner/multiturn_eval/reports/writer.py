"""Building the run report and writing every report file.

Renderers are pure functions ``Report -> str``; this module is the only place
that writes report files. Each file is written atomically (temporary file, then
rename), and every secret the suites substituted is redacted from it.

While a run is going, :class:`ProgressWriter` rewrites ``report.json`` (with
``run.complete: false``) at most every ``interval`` seconds as test cases
finish, so even a run killed without warning leaves a valid report of nearly
everything that finished; the CLI writes the final set at the end or on Ctrl-C /
SIGTERM.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from .._version import __version__
from ..results import CaseResult, Report, RunInfo, summarize
from .json_report import dump_json
from .redact import Redactor

#: format -> (file name, "module:function") rendering a Report to text
RENDERERS: dict[str, tuple[str, str]] = {
    "json": ("report.json", "multiturn_eval.reports.json_report:render_json"),
    "junit": ("junit.xml", "multiturn_eval.reports.junit:render_junit"),
    "markdown": ("summary.md", "multiturn_eval.reports.markdown:render_markdown"),
    "html": ("report.html", "multiturn_eval.reports.html:render_html"),
}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def git_context(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """(commit sha, pull-request number) when running in GitHub Actions."""
    sha = env.get("MULTITURN_EVAL_GIT_SHA") or env.get("GITHUB_SHA") or None
    pr: int | None = None
    raw_pr = env.get("MULTITURN_EVAL_PR_NUMBER", "")
    ref = env.get("GITHUB_REF", "")
    if raw_pr.isdigit():
        pr = int(raw_pr)
    elif ref.startswith("refs/pull/"):
        number = ref.split("/")[2]
        pr = int(number) if number.isdigit() else None
    return sha, pr


def build_report(
    suites: Sequence[str],
    results: Sequence[CaseResult],
    *,
    started_at: str,
    started: float,
    complete: bool,
    stop_reason: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Report:
    sha, pr = git_context(env or {})
    return Report(
        run=RunInfo(
            suites=list(suites),
            started_at=started_at,
            finished_at=now_iso(),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            complete=complete,
            git_sha=sha,
            pr_number=pr,
            version=__version__,
            stop_reason=stop_reason,
        ),
        summary=summarize(results),
        results=list(results),
    )


def renderer(fmt: str) -> Callable[[Report], str]:
    module_name, _, func = RENDERERS[fmt][1].partition(":")
    fn: Callable[[Report], str] = getattr(importlib.import_module(module_name), func)
    return fn


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        Path(tmp).chmod(0o644)  # mkstemp makes 0600; reports are read by CI and other users
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: renderers that also take the environment (``GITHUB_*``: links to the workflow run)
TAKES_ENV = frozenset({"markdown"})


def redact_report(report: Report, redact: Redactor) -> Report:
    """The report with every secret replaced in its data, before any renderer sees it.

    Renderers escape and cut text (Markdown writes ``_`` as ``&#95;``, long
    replies are cut), which can split a secret so that redacting their output
    alone would miss it; the output is still redacted as well.
    """
    if not redact.active:
        return report
    try:
        return Report.model_validate_json(redact(dump_json(report)))
    except ValueError:  # a "secret" that matched inside JSON syntax: rely on output redaction
        return report


def write_reports(
    report: Report,
    report_dir: Path,
    formats: Sequence[str],
    redact: Redactor,
    env: Mapping[str, str] | None = None,
) -> dict[str, Path]:
    """Render and write each requested format; returns format -> path."""
    written: dict[str, Path] = {}
    clean = redact_report(report, redact)
    for fmt in formats:
        name, _ = RENDERERS[fmt]
        path = report_dir / name
        render: Callable[..., str] = renderer(fmt)
        text = render(clean, env) if fmt in TAKES_ENV and env is not None else render(clean)
        write_atomic(path, redact(text))
        written[fmt] = path
    return written


class ProgressWriter:
    """Writes each test case out as it finishes, and keeps ``report.json`` current.

    - ``results.jsonl``: one line per finished test case (a ``CaseResult``), in
      completion order, appended and flushed as each finishes; the file is
      started afresh by each run. Useful to follow a long run (``tail -f``).
    - ``report.json``: rewritten from the run's snapshot at most every
      ``interval`` seconds (``run.complete: false`` until the final write).
    """

    JOURNAL = "results.jsonl"

    def __init__(
        self,
        report_dir: Path,
        redact: Redactor,
        snapshot: Callable[[], Report],
        interval: float = 2.0,
    ) -> None:
        self.path = report_dir / RENDERERS["json"][0]
        self.redact = redact
        self.snapshot = snapshot
        self.interval = interval
        self._last = time.monotonic()
        report_dir.mkdir(parents=True, exist_ok=True)
        self._journal = (report_dir / self.JOURNAL).open("w", encoding="utf-8")

    def case_finished(self, result: CaseResult) -> None:
        self._journal.write(self.redact(dump_json(result)) + "\n")
        self._journal.flush()
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            write_atomic(self.path, self.redact(renderer("json")(self.snapshot())))

    def close(self) -> None:
        self._journal.close()
