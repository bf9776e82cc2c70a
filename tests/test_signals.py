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
import os
import signal as signals
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.reliability.signals import ROOT, Trial, asleep_deaf, reached, run_trial, scenario

from multiturn_eval.results import Report
from tests.cli_probe import run_bench

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="needs Linux /proc (SigCgt)"
)


@pytest.fixture(params=["SIGTERM", "SIGINT"])
def signame(request: pytest.FixtureRequest) -> str:
    """Each test that takes ``signame`` runs once with each signal."""
    name: str = request.param
    return name


def trial(phase: str, signame: str, tmp_path: Path) -> Trial:
    result = run_trial(phase, signame, tmp_path / "work")
    assert result.problems == [], result.explain()
    return result


def report(tmp_path: Path) -> Report:
    return Report.model_validate_json((tmp_path / "work" / "out" / "report.json").read_text())


def journal(tmp_path: Path) -> list[str]:
    path = tmp_path / "work" / "out" / "results.jsonl"
    return [json.loads(line)["name"] for line in path.read_text().splitlines()]


def test_signal_at_start_up_writes_an_empty_incomplete_report(signame: str, tmp_path: Path) -> None:
    trial("startup", signame, tmp_path)
    written = report(tmp_path)
    assert written.results == []
    assert written.run.stop_reason == f"interrupted by {signame} while loading the suites"


def test_signal_while_a_factory_import_sleeps_stops_the_loading(
    signame: str, tmp_path: Path
) -> None:
    result = trial("loading", signame, tmp_path)
    assert report(tmp_path).results == []
    assert "while loading the suites" in (result.stop_reason or "")


def test_signal_the_main_thread_cannot_handle_while_loading_is_rescued_by_the_watchdog(
    signame: str, tmp_path: Path
) -> None:
    """The factory's import is inside C code no signal interrupts: Python's handler cannot
    run until it returns (30 s), so the watchdog writes the report of no test case itself.
    A signal landing just before a blocking call starts leaves the process in this state
    (the flaky "loading" failure: no exit, no output, no report.json)."""
    result = trial("loading-c", signame, tmp_path)
    assert "writing a report of no test case" in result.stderr  # the watchdog's, not main's
    assert report(tmp_path).results == []
    assert result.stop_reason == f"interrupted by {signame} while loading the suites"


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


def test_signal_while_the_event_loop_is_blocked_is_rescued_by_the_watchdog(
    signame: str, tmp_path: Path
) -> None:
    result = trial("blocked", signame, tmp_path)
    assert "the run did not stop within" in result.stderr  # the watchdog wrote the reports
    written = report(tmp_path)
    assert [r.name for r in written.results if r.passed] == ["quick-0", "quick-1"]
    assert [r.skipped for r in written.results[2:]] == [True, True]


def test_signal_while_the_reports_are_written_still_finishes_them(
    signame: str, tmp_path: Path
) -> None:
    trial("writing", signame, tmp_path)
    written = report(tmp_path)
    assert len(written.results) == 30 and all(r.passed for r in written.results)
    assert len(journal(tmp_path)) == 30


def test_a_second_signal_exits_with_report_json_holding_every_finished_case(
    signame: str, tmp_path: Path
) -> None:
    """The run is shorter than the snapshot interval, so no report.json existed yet: the
    exit writes it (the loop is blocked by the agent) before it leaves."""
    result = trial("second", signame, tmp_path)
    assert f"{signame} again: exiting (exit 3) once report.json holds" in result.stderr
    assert journal(tmp_path) == ["quick-0", "quick-1"]
    written = report(tmp_path)
    assert not written.run.complete
    assert [r.name for r in written.results if r.passed] == ["quick-0", "quick-1"]
    assert [r.skipped for r in written.results[2:]] == [True, True]
    assert written.run.stop_reason == f"interrupted by {signame}"


GUARDED = """\
import sys, time
from multiturn_eval.interrupts import InterruptGuard

guard = InterruptGuard()
guard.install()
guard.enter("running")
started = []

def stuck(deadline):  # bringing report.json up to date never finishes
    started.append(deadline)
    print("catching up", flush=True)
    time.sleep(60)

guard.catch_up = stuck
guard.ping = lambda callback: callback()  # "the loop answers": the rescue waits, never exits
guard.on_stop = lambda: print("stopping", flush=True)  # the first signal, handled
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def guarded(script: str, *args: str) -> subprocess.Popen[str]:
    """``python -c script args`` with the package importable, once it prints "ready"."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_a_third_signal_exits_at_once_while_report_json_is_still_being_written(
    tmp_path: Path,
) -> None:
    with guarded(GUARDED) as proc:
        assert proc.stdout is not None
        # one at a time: two signals sent before the first is delivered count as one
        os.kill(proc.pid, signals.SIGTERM)
        assert proc.stdout.readline() == "stopping\n"
        os.kill(proc.pid, signals.SIGTERM)
        assert proc.stdout.readline() == "catching up\n"  # the second signal: waits for it
        assert proc.poll() is None
        os.kill(proc.pid, signals.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 3
    assert "SIGTERM again: exiting (exit 3) once report.json holds" in err
    assert "SIGTERM again: exiting at once" in err
    assert "Traceback" not in err


STUCK_WHILE_LOADING = """\
import signal, sys, time
from multiturn_eval.interrupts import InterruptGuard

guard = InterruptGuard(grace=0.1, writing_limit=float(sys.argv[1]))
guard.install()
guard.enter("loading")

def stuck(reason):  # the watchdog's writing never finishes (a renderer's import waits)
    print("writing:", reason, flush=True)
    time.sleep(60)

guard.emergency = stuck
# the main thread is inside C code the signal does not interrupt: it never runs the handler
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
print("ready", flush=True)
time.sleep(60)
print("the handler ran at last", flush=True)
"""


def test_a_main_thread_that_never_sees_the_signal_while_loading_cannot_keep_the_process(
    tmp_path: Path,
) -> None:
    """The watchdog writes the reports itself, and its writing is bounded too: exit 3,
    long before the main thread's 60 s C call returns."""
    with guarded(STUCK_WHILE_LOADING, "0.5") as proc:
        while not asleep_deaf(proc.pid):  # still running bytecode: it would see the signal
            assert proc.poll() is None
            time.sleep(0.002)
        os.kill(proc.pid, signals.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert out == "writing: interrupted by SIGTERM\n"  # not "the handler ran at last"
    assert "the loading of the suites did not stop within 0.2 s" in err
    assert "writing the reports takes too long; exiting (exit 3)" in err
    assert "Traceback" not in err


def test_validate_stuck_in_a_c_import_exits_3_without_waiting_for_it(
    signame: str, tmp_path: Path
) -> None:
    """``validate`` has no reports to write: the watchdog exits 3 once it sees the main
    thread has not run the handler (it waited ``writing_limit`` for it, then said "the run
    did not stop")."""
    plan = scenario("loading-c", tmp_path)
    (tmp_path / "suite.yaml").write_text(plan.suite)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),
        **plan.env,
    }
    with subprocess.Popen(
        [sys.executable, "-m", "multiturn_eval", "validate", "suite.yaml"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        while not reached("loading-c", proc.pid, tmp_path):
            assert proc.poll() is None
            time.sleep(0.002)
        os.kill(proc.pid, getattr(signals, signame))
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert "the loading of the suites did not stop within 0.8 s" in err
    assert err.endswith("; exiting (exit 3)\n")
    assert "Traceback" not in err + out


def test_the_harness_prints_its_table_and_passes(tmp_path: Path) -> None:
    done = run_bench(
        "reliability/signals.py", "--quick", "--phases", "running", "--signals", "SIGTERM"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| phase / signal | tried | landed in phase | tracebacks | hangs")
    assert lines[2].startswith("| running / SIGTERM | 1 | 1 | 0 | 0 | 0 | 0 | 0 |")
