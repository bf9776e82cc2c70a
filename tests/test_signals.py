"""SIGTERM and SIGINT in every phase of a real ``python -m multiturn_eval run`` subprocess.

The scenarios and checks are :mod:`bench.reliability.signals` (the harness that
counts the same outcomes over many tries): start-up, suite loading (a factory
module that sleeps at import), the run (cases finished and in flight), an
event loop blocked by an async agent's ``time.sleep``, the final report
writing, and a second signal. Every phase must end in exit 3, without a
traceback, within a generous hang limit, with a ``report.json`` that loads as a
:class:`~multiturn_eval.results.Report`, says ``run.complete: false`` and
holds every test case ``results.jsonl`` says finished, and with the other
reports readable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.reliability.signals import ROOT, Trial, run_trial

from multiturn_eval.results import Report

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="needs Linux /proc (SigCgt)"
)

SIGNALS = ("SIGTERM", "SIGINT")


def trial(phase: str, signame: str, tmp_path: Path) -> Trial:
    result = run_trial(phase, signame, tmp_path / "work")
    assert result.problems == [], result.explain()
    return result


def report(tmp_path: Path) -> Report:
    return Report.model_validate_json((tmp_path / "work" / "out" / "report.json").read_text())


def journal(tmp_path: Path) -> list[str]:
    path = tmp_path / "work" / "out" / "results.jsonl"
    return [json.loads(line)["name"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("signame", SIGNALS)
def test_signal_at_start_up_writes_an_empty_incomplete_report(signame: str, tmp_path: Path) -> None:
    trial("startup", signame, tmp_path)
    written = report(tmp_path)
    assert written.results == []
    assert written.run.stop_reason == f"interrupted by {signame} while loading the suites"


@pytest.mark.parametrize("signame", SIGNALS)
def test_signal_while_a_factory_import_sleeps_stops_the_loading(
    signame: str, tmp_path: Path
) -> None:
    result = trial("loading", signame, tmp_path)
    assert report(tmp_path).results == []
    assert "while loading the suites" in (result.stop_reason or "")


@pytest.mark.parametrize("signame", SIGNALS)
def test_signal_during_the_run_keeps_finished_cases_and_skips_the_rest(
    signame: str, tmp_path: Path
) -> None:
    trial("running", signame, tmp_path)
    written = report(tmp_path)
    outcome = {r.name: (r.passed, r.skipped) for r in written.results}
    assert [n for n, (passed, _) in outcome.items() if passed] == [f"quick-{i}" for i in range(4)]
    assert set(journal(tmp_path)) == {f"quick-{i}" for i in range(4)}
    never_started = [written.results[i] for i in (6, 7)]
    for result in never_started:
        assert result.skipped and result.errors == [f"not run: interrupted by {signame}"]
    assert written.run.stop_reason == f"interrupted by {signame}"


@pytest.mark.parametrize("signame", SIGNALS)
def test_signal_while_the_event_loop_is_blocked_is_rescued_by_the_watchdog(
    signame: str, tmp_path: Path
) -> None:
    result = trial("blocked", signame, tmp_path)
    assert "the run did not stop within" in result.stderr  # the watchdog wrote the reports
    written = report(tmp_path)
    assert [r.name for r in written.results if r.passed] == ["quick-0", "quick-1"]
    assert [r.skipped for r in written.results[2:]] == [True, True]


@pytest.mark.parametrize("signame", SIGNALS)
def test_signal_while_the_reports_are_written_still_finishes_them(
    signame: str, tmp_path: Path
) -> None:
    trial("writing", signame, tmp_path)
    written = report(tmp_path)
    assert len(written.results) == 30 and all(r.passed for r in written.results)
    assert len(journal(tmp_path)) == 30


@pytest.mark.parametrize("signame", SIGNALS)
def test_a_second_signal_exits_at_once_and_leaves_results_jsonl_intact(
    signame: str, tmp_path: Path
) -> None:
    result = trial("second", signame, tmp_path)
    assert f"{signame} again: exiting at once" in result.stderr
    assert journal(tmp_path) == ["quick-0", "quick-1"]


def test_the_harness_prints_its_table_and_passes(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "reliability" / "signals.py"),
            "--quick",
            "--phases",
            "running",
            "--signals",
            "SIGTERM",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| phase / signal | tried | landed in phase | tracebacks | hangs")
    assert lines[2].startswith("| running / SIGTERM | 1 | 1 | 0 | 0 | 0 | 0 | 0 |")
