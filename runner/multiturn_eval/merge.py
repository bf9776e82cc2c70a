"""``multiturn-eval merge``: the shard reports of one split -> one report set.

The merged report is the one an unsharded run of the same suites would have
written, verdict for verdict: every shard's results, in suite order (the
order of ``run.suites``, then the test case's index in its file), the summary
recomputed from them (:func:`multiturn_eval.rollup.summarize`).

Nothing holds the shards (issue 23): each shard report is read as an index of
its results' spans (:func:`multiturn_eval.reports.reader.load_report`), one
pass collects every result's key (suite, index: the duplicate check), the keys
are sorted, and the merged report's results are a
:class:`~multiturn_eval.stored.StoredAcross` reading each result from its
shard's file when a summary or a report needs it.

Refused (a configuration error naming the files, exit 2):

* a file that is not a report, or a report not made with ``--shard``;
* shards of different splits (another N, other suites, another selection or
  repeat count: the split ids differ);
* shards that ran different suite contents (``run.suite_hashes`` differ:
  a suite file changed between the jobs);
* a shard given twice, or the same test case in two reports;
* a missing shard, unless ``allow_partial``: then the report is incomplete
  (``run.complete`` false, ``run.missing_shards`` and a stop reason that
  every report format shows), and the missing shards' cases are absent
  (the merge does not read the suites, so it cannot name them).

Decisions: the merged ``run`` keeps the first shard's commit, PR number,
version and workflow run; ``started_at`` is the earliest shard's start,
``finished_at`` the latest finish and ``duration_ms`` the time between them
(the wall time of the matrix). It has no ``run.shard``; ``suite_hashes``
stay; ``spend_cap`` is the shards' caps, spends and skipped counts added up
(the cap is per shard). A shard that was interrupted (``run.complete`` false) makes the
merged report incomplete too. Exit code: 0 passed, 1 failed, 3 incomplete
(an interrupted or missing shard), 2 refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from .errors import ConfigError, ConfigIssue, ReportFormatError
from .exit_codes import EXIT_OK
from .results import CaseResult, McpServerRun, Report, RunFixtures, RunInfo, SpendCap
from .rollup import summarize
from .stored import StoredAcross, StoredResults, fields_of


@dataclass
class MergeOutcome:
    report: Report
    written: dict[str, Path] = field(default_factory=dict)
    exit_code: int = EXIT_OK
    markdown: str | None = None


def expand_reports(patterns: Sequence[str | Path]) -> list[Path]:
    """Report paths as given; a pattern with wildcards is globbed (sorted, recursive ``**``)."""
    from .paths import expand_paths

    return expand_paths(patterns, "report")


def load_shards(paths: Sequence[Path]) -> list[tuple[str, Report]]:
    from .reports.reader import load_report

    out: list[tuple[str, Report]] = []
    issues: list[ConfigIssue] = []
    for path in paths:
        try:
            out.append((str(path), load_report(path)))
        except ReportFormatError as exc:
            issues.append(ConfigIssue(f"merge: {exc}"))
    if issues:
        raise ConfigError(issues)
    return out


def _files(names: Sequence[str]) -> str:
    return ", ".join(names)


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def merge_reports(shards: Sequence[tuple[str, Report]], *, allow_partial: bool = False) -> Report:
    """One report from shard reports (file name, report); ConfigError when refused."""
    if not shards:
        raise ConfigError(ConfigIssue("merge: give at least one shard report.json"))
    unsharded = [name for name, report in shards if report.run.shard is None]
    if unsharded:
        raise ConfigError(
            ConfigIssue(f"merge: not a shard report (made without --shard): {_files(unsharded)}")
        )
    splits: dict[tuple[str, int], list[str]] = {}
    for name, report in shards:
        shard = report.run.shard
        assert shard is not None
        splits.setdefault((shard.split_id, shard.total), []).append(name)
    if len(splits) > 1:
        groups = "; ".join(
            f"split {sid} of {total} shard{'s' if total != 1 else ''}: {_files(names)}"
            for (sid, total), names in splits.items()
        )
        raise ConfigError(
            ConfigIssue(
                "merge: the reports are shards of different splits (another shard count, "
                f"other suites or another selection): {groups}"
            )
        )
    first_name, first = shards[0]
    for name, report in shards[1:]:
        if report.run.suites != first.run.suites:
            raise ConfigError(
                ConfigIssue(
                    f"merge: {name} ran the suites {report.run.suites}, but {first_name} "
                    f"ran {first.run.suites}"
                )
            )
        theirs, ours = report.run.suite_hashes or {}, first.run.suite_hashes or {}
        changed = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        if changed:
            raise ConfigError(
                ConfigIssue(
                    f"merge: suite {changed[0]} differs between the shards: {first_name} ran "
                    f"{ours.get(changed[0], '(none)')}, {name} ran "
                    f"{theirs.get(changed[0], '(none)')} (the suite changed between the jobs; "
                    "run every shard on the same commit)"
                )
            )
    by_number: dict[int, list[str]] = {}
    for name, report in shards:
        assert report.run.shard is not None
        by_number.setdefault(report.run.shard.index, []).append(name)
    total = first.run.shard.total if first.run.shard else 1
    twice = {n: names for n, names in by_number.items() if len(names) > 1}
    if twice:
        n, names = min(twice.items())
        raise ConfigError(
            ConfigIssue(f"merge: shard {n}/{total} is given more than once: {_files(names)}")
        )
    missing = [n for n in range(1, total + 1) if n not in by_number]
    if missing and not allow_partial:
        raise ConfigError(
            ConfigIssue(
                f"merge: shard{'s' if len(missing) != 1 else ''} "
                f"{', '.join(f'{n}/{total}' for n in missing)} missing (given: "
                f"{_files([name for name, _ in shards])}); every shard's report.json is "
                "needed, or pass --allow-partial for an incomplete report"
            )
        )
    results = _merged_results(shards, {suite: i for i, suite in enumerate(first.run.suites)})
    return Report.model_construct(
        run=_merged_run(shards, missing, total, results),
        summary=summarize(results),
        results=results,  # type: ignore[arg-type]  # any Sequence stands in (stored.py)
    )


def _merged_results(
    shards: Sequence[tuple[str, Report]], order: Mapping[str, int]
) -> Sequence[CaseResult]:
    """Every shard's results in suite order, without holding them: one pass over each
    shard's results collects their keys, the keys are sorted, and the merged results
    read each from its shard's file (a shard read whole, in a test: its results as given)."""
    seen: dict[tuple[str, int], str] = {}
    keys: list[tuple[int, str, int, int, int]] = []
    for part, (name, report) in enumerate(shards):
        for at, (suite, index, case) in enumerate(
            fields_of(report.results, "suite", "index", "name")
        ):
            if (suite, index) in seen:
                raise ConfigError(
                    ConfigIssue(
                        f"merge: test case {case!r} ({suite}, index {index}) is in two "
                        f"reports: {seen[(suite, index)]}, {name}"
                    )
                )
            seen[(suite, index)] = name
            keys.append((order.get(suite, len(order)), suite, index, part, at))
    del seen
    keys.sort()
    parts = [report.results for _, report in shards]
    if all(isinstance(p, StoredResults) for p in parts):
        stored = [p for p in parts if isinstance(p, StoredResults)]
        return StoredAcross(stored, ((part, at) for *_, part, at in keys))
    return [parts[part][at] for *_, part, at in keys]


def _merged_run(
    shards: Sequence[tuple[str, Report]],
    missing: list[int],
    total: int,
    results: Sequence[CaseResult],
) -> RunInfo:
    first = shards[0][1].run
    starts = [(t, r.run.started_at) for _, r in shards if (t := _time(r.run.started_at))]
    ends = [(t, r.run.finished_at) for _, r in shards if (t := _time(r.run.finished_at))]
    started_at = min(starts)[1] if starts else first.started_at
    finished_at = max(ends)[1] if ends else first.finished_at
    duration = (
        round((max(ends)[0] - min(starts)[0]).total_seconds() * 1000, 3)
        if starts and ends
        else max(r.run.duration_ms for _, r in shards)
    )
    reasons: list[str] = []
    for _, report in sorted(shards, key=lambda s: s[1].run.shard.index if s[1].run.shard else 0):
        shard = report.run.shard
        if not report.run.complete and shard is not None:
            reasons.append(
                f"shard {shard.index}/{shard.total} did not complete "
                f"({report.run.stop_reason or 'interrupted'})"
            )
    if missing:
        reasons.append(
            f"shard{'s' if len(missing) != 1 else ''} "
            f"{', '.join(f'{n}/{total}' for n in missing)} missing from the merge "
            "(their test cases are not in this report)"
        )
    return RunInfo(
        suites=list(first.suites),
        started_at=started_at,
        finished_at=finished_at,
        duration_ms=duration,
        complete=not reasons,
        git_sha=first.git_sha,
        pr_number=first.pr_number,
        version=first.version,
        stop_reason="; ".join(reasons) or None,
        github=first.github,
        suite_hashes=first.suite_hashes,
        missing_shards=missing or None,
        spend_cap=_merged_cap(shards),
        mcp_servers=_merged_servers(shards),
        fixtures=_merged_fixtures(shards, results),
    )


def _merged_fixtures(
    shards: Sequence[tuple[str, Report]], results: Sequence[CaseResult]
) -> RunFixtures | None:
    """``run.fixtures`` of the merged run: computed again from every shard's test cases
    (each carries its fixture block), with the shards' modes and roots."""
    used = [r.run.fixtures for _, r in shards if r.run.fixtures is not None]
    if not used:
        return None
    from .fixtures.outcome import run_fixtures

    return run_fixtures(results, [f.mode for f in used], [f.dir for f in used])


def _merged_servers(shards: Sequence[tuple[str, Report]]) -> list[McpServerRun] | None:
    """Each shard's MCP servers, one entry per (suite, server): starts added up, the mean
    start-up time weighted by them, the longest start kept."""
    merged: dict[tuple[str, str], McpServerRun] = {}
    for _, report in shards:
        for server in report.run.mcp_servers or []:
            key = (server.suite, server.name)
            seen = merged.get(key)
            if seen is None:
                merged[key] = server.model_copy()
                continue
            starts = seen.starts + server.starts
            means = [(s.startup_ms, s.starts) for s in (seen, server) if s.startup_ms is not None]
            longest = [s.max_startup_ms for s in (seen, server) if s.max_startup_ms is not None]
            merged[key] = seen.model_copy(
                update={
                    "starts": starts,
                    "startup_ms": sum(m * n for m, n in means) / sum(n for _, n in means)
                    if means and sum(n for _, n in means)
                    else None,
                    "max_startup_ms": max(longest) if longest else None,
                }
            )
    return list(merged.values()) or None


def _merged_cap(shards: Sequence[tuple[str, Report]]) -> SpendCap | None:
    """The shards' spend caps added up (the cap is per shard: the matrix may spend the sum)."""
    caps = [r.run.spend_cap for _, r in shards if r.run.spend_cap is not None]
    if not caps:
        return None
    return SpendCap(
        max_cost_usd=round(sum(c.max_cost_usd for c in caps), 6),
        spent_usd=round(sum(c.spent_usd for c in caps), 6),
        reached=any(c.reached for c in caps),
        not_started=sum(c.not_started for c in caps),
    )


def exit_code(report: Report, fail_on: str = "failures") -> int:
    """The merged verdict, by the rules of a run (:func:`multiturn_eval.exit_codes.exit_code_of`):
    0 passed, 1 failed (or skipped, or stopped by a spend cap), 3 incomplete; with
    ``fail_on="regressions"`` and a baseline, 1 only on a regression."""
    from .exit_codes import exit_code_of

    return exit_code_of(report, fail_on)


def merge_to_dir(
    patterns: Sequence[str | Path],
    report_dir: Path,
    formats: Sequence[str] | None = None,
    *,
    allow_partial: bool = False,
    baseline: Report | None = None,
    baseline_file: str | None = None,
    fail_on: str = "failures",
) -> MergeOutcome:
    """Read, check and merge the shard reports, then write the report set to ``report_dir``.

    With ``baseline`` the merged report is compared with it (as a run is, over
    every case of the split: the shards' own comparisons are partial and are
    not carried over), and ``fail_on`` decides the exit code as for a run.

    ConfigError (exit 2) when refused or the directory cannot be written;
    nothing is written then.
    """
    from .reports.writer import write_reports
    from .secrets import Redactor
    from .settings import REPORT_FORMATS

    report = merge_reports(load_shards(expand_reports(patterns)), allow_partial=allow_partial)
    if baseline is not None:
        from .comparison import compare

        report.baseline = compare(report, baseline, baseline_file or "baseline")
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            ConfigIssue(f"merge: cannot write reports to {report_dir}: {exc.strerror or exc}")
        ) from None
    outcome = MergeOutcome(report, exit_code=exit_code(report, fail_on))

    def keep(fmt: str, text: str) -> None:
        if fmt == "markdown":
            outcome.markdown = text

    # the shard reports were redacted when they were written
    outcome.written = write_reports(
        report, report_dir, tuple(formats or REPORT_FORMATS), Redactor([]), keep
    )
    return outcome


def summary_line(outcome: MergeOutcome, shards: int | None = None) -> str:
    s = outcome.report.summary
    run = outcome.report.run
    head = f"merged {shards} shard reports" if shards is not None else "merged"
    line = (
        f"{head}: {s.total} test case{'s' if s.total != 1 else ''}, {s.passed} passed, "
        f"{s.failed} failed, {s.skipped} skipped"
    )
    if not run.complete:
        line += f"; INCOMPLETE: {run.stop_reason}"
    return line


def cmd_merge(
    patterns: Sequence[str],
    report_dir: str,
    formats: Sequence[str] | None,
    allow_partial: bool,
    out: TextIO,
    baseline: Mapping[str, Any] | None = None,
) -> int:
    """``multiturn-eval merge``; ``baseline``: the ``--baseline``/``--fail-on`` fields
    (:func:`multiturn_eval.cli.baseline_options`)."""
    outcome = merge_to_dir(
        patterns, Path(report_dir), formats, allow_partial=allow_partial, **(baseline or {})
    )
    out.write(f"multiturn-eval: {summary_line(outcome)}\n")
    for fmt, path in outcome.written.items():
        out.write(f"  {fmt}: {path}\n")
    return outcome.exit_code
