"""A run's results leave memory as they finish (issue 23): the reports streamed from the
store equal the reports rendered from the same results held in a list, and the run
holds no finished result."""

from __future__ import annotations

import gc
import json
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import stored
from multiturn_eval.interrupts import InterruptGuard
from multiturn_eval.reports import html
from multiturn_eval.reports.writer import RENDERERS, render_reports
from multiturn_eval.results import CaseResult, Report
from multiturn_eval.run import RunOptions, RunOutcome, run_suites
from multiturn_eval.run_store import RunResults
from multiturn_eval.types import CaseContext, TurnFile, TurnReply

SECRET = "sk-test-abcdefghijklmnopqrstuv"
GUARD: dict[str, InterruptGuard] = {}


class Agent:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    async def send(self, message: str, files: Sequence[TurnFile] = ()) -> TurnReply:
        if self.ctx.context.get("stop") and "guard" in GUARD:  # once: a second would exit
            GUARD.pop("guard")._handler(signal.SIGINT, None)  # as Ctrl-C would, mid-run
        reply = str(self.ctx.context["reply"])
        if self.ctx.context.get("leak"):
            reply += f" (key {SECRET})"
        return TurnReply(response=reply)

    async def close(self) -> None:
        return None


def agent(ctx: CaseContext) -> Agent:
    return Agent(ctx)


def write_suite(root: Path, cases: int, *, stop_at: int | None = None, flaky: bool = False) -> Path:
    """``cases`` two-turn cases: every third fails, every fifth leaks the secret."""
    lines = root / "cases.jsonl"
    with lines.open("w", encoding="utf-8") as out:
        for i in range(cases):
            context: dict[str, Any] = {"reply": "10" if i % 3 else "11"}
            if i % 5 == 0:
                context["leak"] = True
            if i == stop_at:
                context["stop"] = True
            turn = {"input": f"q{i}", "ground_truth": "10"}
            case = {"name": f"case-{i:03d}", "context": context, "turns": [turn, turn]}
            out.write(json.dumps(case) + "\n")
    suite = root / "suite.yaml"
    suite.write_text(
        "agent:\n"
        "  backend: python\n"
        "  factory: tests.test_run_store:agent\n"
        "evaluations:\n"
        "  - {type: standard, metric: numeric, absolute_tolerance: 0.5}\n"
        "test_cases_file: cases.jsonl\n",
        encoding="utf-8",
    )
    return suite


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    GUARD.clear()
    return tmp_path


def run(options: RunOptions, guard: InterruptGuard | None = None) -> RunOutcome:
    return run_suites(["suite.yaml"], options, {}, guard=guard, secrets=[SECRET])


def assert_reports_equal_the_in_memory_rendering(outcome: RunOutcome) -> None:
    """Each file written equals the same report rendered from a list of its results."""
    assert isinstance(outcome.report.results, RunResults)
    held = Report.model_construct(
        **{**dict(outcome.report), "results": list(outcome.report.results)}
    )
    formats = list(outcome.written)
    assert formats, "no report was written"
    for fmt, text in render_reports(held, formats, outcome.redactor):
        on_disk = (outcome.report_dir / RENDERERS[fmt][0]).read_text(encoding="utf-8")
        assert on_disk == text, fmt
        assert SECRET not in on_disk
    assert held.results == outcome.report.results


@pytest.mark.parametrize("formats", [None, ("junit", "markdown", "html")], ids=["all", "spool"])
@pytest.mark.parametrize("repeat", [1, 3])
def test_the_streamed_reports_equal_the_in_memory_rendering(
    project: Path, formats: tuple[str, ...] | None, repeat: int
) -> None:
    write_suite(project, 30)
    outcome = run(
        RunOptions(report_dir="out", formats=formats, repeat=repeat, parallel_test_cases=4)
    )
    assert outcome.report.run.complete
    assert [c.name for c in outcome.report.results] == [f"case-{i:03d}" for i in range(30)]
    assert outcome.report.summary.failed == 10
    assert_reports_equal_the_in_memory_rendering(outcome)
    journal = project / "out" / "results.jsonl"
    if formats is None:  # the journal is the store: one redacted line a test case
        lines = journal.read_text(encoding="utf-8").splitlines()
        assert len(lines) == 30 and SECRET not in journal.read_text(encoding="utf-8")
    else:  # a private spool file, never in the report directory
        assert not journal.exists()
        assert isinstance(outcome.report.results, RunResults)
        spool = outcome.report.results.store.path
        assert spool is not None and spool.exists() and spool.parent != project / "out"
        assert SECRET not in spool.read_text(encoding="utf-8")


def test_the_spool_file_goes_with_the_last_report_reading_it(project: Path) -> None:
    write_suite(project, 5)
    outcome = run(RunOptions(report_dir="out", formats=("junit",)))
    assert isinstance(outcome.report.results, RunResults)
    spool = outcome.report.results.store.path
    assert spool is not None and spool.exists()
    del outcome
    gc.collect()
    assert not spool.exists()


@pytest.mark.parametrize("repeat", [1, 2])
def test_an_interrupted_run_streams_the_finished_cases_and_the_rest_as_not_run(
    project: Path, repeat: int
) -> None:
    write_suite(project, 40, stop_at=12)
    guard = InterruptGuard()
    GUARD["guard"] = guard
    outcome = run(RunOptions(report_dir="out", repeat=repeat, parallel_test_cases=3), guard)
    assert outcome.exit_code == 3
    report = outcome.report
    assert not report.run.complete
    assert len(report.results) == 40
    skipped = [c for c in report.results if c.skipped]
    assert skipped and all("not run: interrupted by SIGINT" in c.errors[0] for c in skipped)
    assert report.summary.skipped == len(skipped)
    assert_reports_equal_the_in_memory_rendering(outcome)


def test_a_journal_that_cannot_be_written_keeps_the_later_results_in_memory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, 12)
    real = stored.ResultFile.append
    calls = {"n": 0}

    def failing(self: stored.ResultFile, text: str, newline: bool = True) -> tuple[int, int]:
        calls["n"] += 1
        if calls["n"] > 4:
            raise OSError(28, "No space left on device")
        return real(self, text, newline)

    monkeypatch.setattr(stored.ResultFile, "append", failing)
    outcome = run(RunOptions(report_dir="out", parallel_test_cases=2))
    assert outcome.report.run.complete and len(outcome.report.results) == 12
    assert any("the results from then on are kept in memory" in w for w in outcome.warnings)
    assert len((project / "out" / "results.jsonl").read_text().splitlines()) == 4
    assert_reports_equal_the_in_memory_rendering(outcome)


def _live_results() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, CaseResult))


def _most_alive(project: Path, cases: int, repeat: int) -> int:
    write_suite(project, cases)
    most = [0]

    def seen(result: CaseResult) -> None:
        most[0] = max(most[0], _live_results())

    gc.collect()
    before = _live_results()
    outcome = run_suites(
        ["suite.yaml"],
        RunOptions(report_dir=f"out-{cases}", repeat=repeat, parallel_test_cases=2),
        {},
        on_result=seen,
    )
    assert len(outcome.report.results) == cases
    return most[0] - before


@pytest.mark.parametrize("repeat", [1, 3])
def test_the_run_holds_no_finished_result(project: Path, repeat: int) -> None:
    """The number of CaseResult objects alive while the run goes on does not grow with
    the number of test cases (it did: every result was held until the end)."""
    in_flight = 2 * repeat + 4  # -p 2: two cases' runs, the one being stored, temporaries
    assert _most_alive(project, 6, repeat) <= in_flight
    assert _most_alive(project, 60, repeat) <= in_flight  # not 60 and more, as it was


def _big_report(cases: int, failing: int) -> Report:
    from tests.reports_fixtures import case, report, turn

    results = [
        case(
            i,
            f"case-{i:05d}",
            [turn(0, "q", "a", errors=["wrong answer"] if i < failing else ())],
            line=9 + i,
        )
        for i in range(cases)
    ]
    return report(results)


def test_a_large_html_report_shows_the_failures_first_and_counts_the_rest() -> None:
    cases = html.FULL_CASES + 500
    failing = html.DETAILED_FAILURES + 300
    page = html.render_html(_big_report(cases, failing))
    assert page.count('<details class="case ') == html.DETAILED_FAILURES
    assert page.count('<tr class="failed">') == 300  # the other failing cases, a line each
    assert f"{cases - failing:,} passed" in page  # the passing ones, counted per suite
    assert "case-00000" in page and f"case-{failing - 1:05d}" in page
    assert f"case-{failing:05d}" not in page  # a passing one is not listed
    data = page[page.index('id="case-data">') + len('id="case-data">') :]
    turns = json.loads(data[: data.index("</script>")])  # by position: row ids stay theirs
    assert sorted(map(int, turns)) == list(range(html.DETAILED_FAILURES))
    assert f'id="case-{html.DETAILED_FAILURES - 1}"' in page


def test_a_report_at_the_threshold_lists_every_case() -> None:
    page = html.render_html(_big_report(html.FULL_CASES, 10))
    assert page.count('<details class="case ') == html.FULL_CASES
    assert 'class="more"' not in page


def test_fixture_blocks_read_from_the_store_equal_those_of_the_results() -> None:
    """``run.fixtures`` is summed from the stored JSON without building the results: the
    blocks are those of the results as models, in order, for stored, repeated and made
    (not stored) entries alike."""
    from array import array

    from multiturn_eval.fixtures.outcome import run_fixtures
    from multiturn_eval.results import CaseFixture, CaseRun
    from multiturn_eval.run_store import RunStore, case_fixtures
    from multiturn_eval.secrets import Redactor
    from tests.reports_fixtures import case, turn

    def block(n: int, cost: float | None) -> CaseFixture:
        return CaseFixture(
            file=f"fixtures/s/c{n}.jsonl",
            mode="replay",
            replayed=n,
            missed=n % 2,
            recorded_at=f"2026-0{1 + n % 9}-01T00:00:00Z",
            models={"agent": [f"m{n % 3}"]},
            replayed_cost_usd=cost,
            unused=["x"] * (n % 3),
        )

    plain = [case(i, f"c{i}", [turn(1, "hi", "yo")]) for i in range(4)]
    results = [
        plain[0].model_copy(update={"fixture": block(1, 0.25)}),
        plain[1],  # no fixture
        plain[2].model_copy(
            update={
                "runs": [
                    CaseRun(run_index=1, passed=True, outcome="passed", fixture=block(2, 0.1)),
                    CaseRun(run_index=2, passed=True, outcome="passed"),
                    CaseRun(run_index=3, passed=True, outcome="passed", fixture=block(3, None)),
                ]
            }
        ),
        plain[3].model_copy(update={"fixture": block(4, 1e-9)}),
    ]
    store = RunStore([3], Redactor(), spool=True)
    for i in (0, 1, 2):
        store.put(0, i, results[i])
    offsets = array("q", [*store.offsets[0], -1])
    lengths = array("q", [*store.lengths[0], 0])
    read = RunResults(store, offsets, lengths, {3: lambda: results[3]})  # the last one made
    expected = [b for r in results for b in case_fixtures(r)]
    assert len(expected) == 4
    assert list(read.fixture_blocks()) == expected
    assert run_fixtures(read, ["replay"], ["fixtures"]) == run_fixtures(
        results, ["replay"], ["fixtures"]
    )
