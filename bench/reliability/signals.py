"""Signals in every phase of ``multiturn-eval run``: real subprocesses, real ``os.kill``.

For each phase x signal (SIGTERM, SIGINT) x N tries, this starts
``python -m multiturn_eval run`` on a ``python``-backend suite
(``tests/slow_agents.py``), waits for the phase, sends the signal and checks
what a cancelled CI job needs: exit 3, no Python traceback, an exit within
:data:`HANG_AFTER` seconds, a ``report.json`` that loads as a ``Report`` with
``run.complete: false`` and every test case that ``results.jsonl`` says
finished, and every other report present and readable. Phases:

=========  ===================================================================
spawn      right after ``Popen`` returns, before the interpreter has run any of
           our code: the one window no handler covers (the interpreter's
           start-up and the package's imports); reported, never counted as a
           failure of the run (exit status 0 whatever it shows)
startup    as soon as the process has its signal handlers (``SigCgt`` in
           ``/proc/PID/status`` shows SIGTERM caught): during imports/argv
loading    while the suite loads: its factory module sleeps at import time
loading-c  the same, but the sleep is inside C code no signal interrupts (the
           module blocks SIGINT/SIGTERM in the main thread): Python's handler
           cannot run, only the watchdog thread can write the reports. What a
           signal landing just before the sleep starts looks like, every time
running    4 test cases finished, 2 in flight (``-p 2``), 2 not started
blocked    an *async* agent calls ``time.sleep(30)``: the event loop is blocked,
           only the watchdog thread can write the reports
writing    every test case finished; the final reports (12 MB of replies) are
           being written
second     a second signal 0.1 s after the first, while the loop is blocked:
           exit 3 without waiting for the loop, ``results.jsonl`` intact and a
           ``report.json`` that holds every test case it holds (the exit brings
           ``report.json`` up to date first; the other reports are not required)
=========  ===================================================================

Usage (from the repository root)::

    .venv/bin/python bench/reliability/signals.py             # 5 tries of each
    .venv/bin/python bench/reliability/signals.py --quick     # 1 try of each (CI)
    .venv/bin/python bench/reliability/signals.py --tries 20 --phases blocked,writing

Prints a table (phase / tried / landed in phase (report.json's stop reason
says so; for ``second``, stderr's "exiting at once") / tracebacks / hangs / wrong exit codes / cases
lost / bad reports / max seconds from signal to exit / max seconds from spawn
to the phase: for ``startup``, how long the process is unguarded) and exits 1 if any try
had a problem. Figures are in ``bench/reliability/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from bench.reliability.tally import Tally  # noqa: E402

PHASES = ("startup", "loading", "loading-c", "running", "blocked", "writing", "second")
#: phases measured but not held to the contract (see the module's docstring)
UNGUARDED = ("spawn",)
ALL_PHASES = UNGUARDED + PHASES
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}
#: seconds from the signal to the exit after which a try counts as a hang
HANG_AFTER = 15.0
#: seconds a phase may take to be reached before the try is abandoned
REACH_WITHIN = 60.0
TRACEBACK = "Traceback (most recent call last)"

_AGENT = "tests.slow_agents:make_session"
_SLOW_IMPORT = "tests.slow_import_agents:make_session"


def _case(name: str, **context: object) -> str:
    ctx = json.dumps(context)
    return f"  - {{name: {name}, context: {ctx}, turns: [{{input: hi}}]}}\n"


def _suite(factory: str, cases: Sequence[str]) -> str:
    return f"agent: {{backend: python, factory: '{factory}'}}\ntest_cases:\n" + "".join(cases)


@dataclass(frozen=True)
class Scenario:
    suite: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    second_signal: bool = False


def scenario(phase: str, work: Path) -> Scenario:
    if phase in ("spawn", "startup"):
        return Scenario(_suite(_AGENT, [_case(f"quick-{i}") for i in range(3)]))
    if phase in ("loading", "loading-c"):
        env = {"SLOW_IMPORT_MARKER": str(work / "importing"), "SLOW_IMPORT_SECONDS": "30"}
        if phase == "loading-c":
            env["SLOW_IMPORT_BLOCK_SIGNALS"] = "1"
        return Scenario(_suite(_SLOW_IMPORT, [_case("never-loaded")]), env=env)
    if phase == "running":
        quick = [_case(f"quick-{i}") for i in range(4)]
        slow = [_case(f"slow-{i}", delay=60, marker=str(work / f"inflight-{i}")) for i in range(4)]
        return Scenario(_suite(_AGENT, quick + slow), args=("-p", "2"))
    if phase in ("blocked", "second"):
        cases = [
            _case("quick-0"),
            _case("quick-1"),
            _case("blocks-the-loop", block=30, marker=str(work / "blocking")),
            _case("after"),
        ]
        return Scenario(_suite(_AGENT, cases), second_signal=phase == "second")
    if phase == "writing":
        cases = [_case(f"big-{i}", size=400_000) for i in range(30)]
        return Scenario(_suite(_AGENT, cases), args=("-p", "4"))
    raise ValueError(f"unknown phase {phase!r}")


def _status(pid: int) -> dict[str, str]:
    """``/proc/PID/status`` (its main thread's state and signal masks) as a mapping."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {
        key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())
    }


def _in_mask(status: dict[str, str], mask: str, sig: int) -> bool:
    return bool(int(status.get(mask, "0"), 16) & (1 << (sig - 1)))


def caught(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux: SigCgt in /proc)."""
    return _in_mask(_status(pid), "SigCgt", sig)


def asleep_deaf(pid: int) -> bool:
    """Whether the main thread of ``pid`` sleeps (state S) with SIGINT and SIGTERM blocked.

    After the marker, only the factory module's sleep puts it there; a signal sent
    earlier, while it still runs bytecode, would be handled by Python as usual."""
    status = _status(pid)
    return status.get("State", "").startswith("S") and all(
        _in_mask(status, "SigBlk", sig) for sig in (signal.SIGINT, signal.SIGTERM)
    )


def _journal_lines(out: Path) -> int:
    try:
        return len((out / "results.jsonl").read_text().splitlines())
    except OSError:
        return 0


def reached(phase: str, pid: int, work: Path) -> bool:
    """Whether the process is in ``phase`` (polled until it is)."""
    out = work / "out"
    if phase == "spawn":
        return True
    if phase == "startup":
        return caught(pid, signal.SIGTERM)
    if phase == "loading":
        return (work / "importing").exists()
    if phase == "loading-c":
        return (work / "importing").exists() and asleep_deaf(pid)
    if phase == "running":
        return _journal_lines(out) >= 4 and (work / "inflight-0").exists()
    if phase in ("blocked", "second"):
        return (work / "blocking").exists()
    if phase == "writing":
        return _journal_lines(out) >= 30
    raise ValueError(phase)


@dataclass
class Trial:
    phase: str
    signal: str
    exit_code: int | None = None
    seconds: float | None = None
    """From the (first) signal to the exit."""
    hang: bool = False
    traceback: bool = False
    lost: list[str] = field(default_factory=list)
    """Finished per results.jsonl but missing from report.json (or not as finished)."""
    bad_reports: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    ready_after: float | None = None
    """Seconds from the spawn to the phase being reached (startup: handlers installed)."""
    stdout: str = ""
    stderr: str = ""

    @property
    def landed(self) -> bool:
        """Whether report.json's stop reason shows the signal came in the intended phase."""
        reason = self.stop_reason or ""
        if self.phase in ("startup", "loading", "loading-c"):
            return reason.endswith("while loading the suites")
        if self.phase == "writing":
            return reason.endswith("while the reports were written")
        if self.phase in ("running", "blocked"):
            return reason == f"interrupted by {self.signal}"
        if self.phase == "second":  # the exit on the second signal says so on stderr
            return f"{self.signal} again: exiting" in self.stderr
        return False

    @property
    def wrong_exit(self) -> bool:
        return self.exit_code != 3

    @property
    def problems(self) -> list[str]:
        found = []
        if self.hang:
            found.append(f"no exit within {HANG_AFTER:g} s of the signal")
        if self.wrong_exit:
            found.append(f"exit code: expected 3, got {self.exit_code}")
        if self.traceback:
            found.append("a Python traceback was printed")
        if self.lost:
            found.append(f"finished per results.jsonl but not in report.json: {self.lost}")
        found += self.bad_reports
        return found

    def explain(self) -> str:
        return (
            f"{self.phase}/{self.signal}: " + "; ".join(self.problems) + "\n--- stdout:\n"
            f"{self.stdout[-3000:]}\n--- stderr:\n{self.stderr[-3000:]}"
        )


def check_reports(trial: Trial, out: Path, *, need_reports: bool = True) -> None:
    """Fill ``trial.lost`` / ``trial.bad_reports`` from the report directory.

    ``report.json`` is always required; the other reports only with ``need_reports``
    (a second signal exits once ``report.json`` is safe, without the rest)."""
    sys.path.insert(0, str(ROOT / "runner"))
    from multiturn_eval.results import Report

    finished: list[str] = []
    journal = out / "results.jsonl"
    if journal.exists():
        for number, line in enumerate(journal.read_text().splitlines(), 1):
            try:
                finished.append(json.loads(line)["name"])
            except (ValueError, KeyError):
                trial.bad_reports.append(f"results.jsonl line {number} is not a test case result")
    try:
        report = Report.model_validate_json((out / "report.json").read_text())
    except (OSError, ValueError) as exc:
        trial.bad_reports.append(f"report.json: {type(exc).__name__}: {str(exc)[:300]}")
        trial.lost = finished
        return
    trial.stop_reason = report.run.stop_reason
    if report.run.complete:
        trial.bad_reports.append("report.json says run.complete: true")
    reported = {r.name for r in report.results if not r.skipped}
    trial.lost = [name for name in finished if name not in reported]
    if not need_reports:
        return
    try:
        root = ET.parse(out / "junit.xml").getroot()
        if root.tag not in ("testsuites", "testsuite"):
            trial.bad_reports.append(f"junit.xml: root element is <{root.tag}>")
    except (OSError, ET.ParseError) as exc:
        trial.bad_reports.append(f"junit.xml: {exc}")
    for name in ("summary.md", "report.html"):
        path = out / name
        if not path.is_file() or path.stat().st_size == 0:
            trial.bad_reports.append(f"{name} was not written")


def prepared(phase: str, work: Path) -> tuple[Scenario, list[str], dict[str, str]]:
    """``phase``'s scenario written to ``work``, the command of its run and the run's environment."""
    work.mkdir(parents=True, exist_ok=True)
    plan = scenario(phase, work)
    (work / "suite.yaml").write_text(plan.suite)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),
        "PYTHONUNBUFFERED": "1",
        **plan.env,
    }
    env.pop("MULTITURN_EVAL_REPORT_DIR", None)
    return plan, [sys.executable, "-m", "multiturn_eval", "run", "suite.yaml", "-o", "out"], env


def run_trial(phase: str, signame: str, work: Path) -> Trial:
    """One try: start the run, wait for ``phase``, signal, check the outcome."""
    plan, command, env = prepared(phase, work)
    trial = Trial(phase, signame)
    sig = SIGNALS[signame]
    with (
        (work / "stdout").open("w+") as stdout,
        (work / "stderr").open("w+") as stderr,
        subprocess.Popen(
            [*command, *plan.args], cwd=work, env=env, stdout=stdout, stderr=stderr
        ) as proc,
    ):
        spawned = time.monotonic()
        deadline = spawned + REACH_WITHIN
        while not reached(phase, proc.pid, work):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                stdout.seek(0)
                stderr.seek(0)
                trial.stdout, trial.stderr = stdout.read(), stderr.read()
                trial.bad_reports.append(
                    f"phase {phase!r} never reached (exit {proc.returncode} before the signal)"
                )
                trial.exit_code = proc.returncode
                return trial
            time.sleep(0.002)
        trial.ready_after = time.monotonic() - spawned
        if phase in ("blocked", "second"):
            time.sleep(0.1)  # the agent is now inside time.sleep
        sent = time.monotonic()
        os.kill(proc.pid, sig)
        if plan.second_signal:
            time.sleep(0.1)
            os.kill(proc.pid, sig)
        wait_for_exit(trial, proc, sent, stdout, stderr)
    check_reports(trial, work / "out", need_reports=not plan.second_signal)
    return trial


def wait_for_exit(
    trial: Trial, proc: subprocess.Popen[Any], sent: float, stdout: IO[str], stderr: IO[str]
) -> None:
    """The signalled run's end: its exit code (a hang after :data:`HANG_AFTER` is killed),
    the seconds from the signal, its output and whether a traceback is in it."""
    try:
        trial.exit_code = proc.wait(timeout=HANG_AFTER)
    except subprocess.TimeoutExpired:
        trial.hang = True
        proc.kill()
        proc.wait()
    trial.seconds = time.monotonic() - sent
    stdout.seek(0)
    stderr.seek(0)
    trial.stdout, trial.stderr = stdout.read(), stderr.read()
    trial.traceback = TRACEBACK in trial.stderr or TRACEBACK in trial.stdout


@dataclass
class Row(Tally):
    phase: str
    bad_reports: int = 0
    max_seconds: float = 0.0
    max_ready: float = 0.0
    landed: int = 0

    def add(self, trial: Trial) -> None:
        self.tried += 1
        self.tracebacks += trial.traceback
        self.hangs += trial.hang
        self.wrong_exit += trial.wrong_exit
        self.lost += len(trial.lost)
        self.bad_reports += bool(trial.bad_reports)
        self.max_seconds = max(self.max_seconds, trial.seconds or 0.0)
        self.landed += trial.landed
        self.max_ready = max(self.max_ready, trial.ready_after or 0.0)


def run_all(
    phases: Sequence[str],
    signals: Sequence[str],
    tries: int,
    on_trial: Callable[[Trial], None] | None = None,
) -> tuple[list[Row], list[Trial]]:
    rows: list[Row] = []
    failed: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="mte-signals-") as tmp:
        for phase in phases:
            for signame in signals:
                row = Row(f"{phase} / {signame}")
                for n in range(tries):
                    trial = run_trial(phase, signame, Path(tmp) / f"{phase}-{signame}-{n}")
                    row.add(trial)
                    if trial.problems:
                        failed.append(trial)
                    if on_trial is not None:
                        on_trial(trial)
                rows.append(row)
    return rows, failed


def table(rows: Sequence[Row]) -> str:
    head = (
        "| phase / signal | tried | landed in phase | tracebacks | hangs | wrong exit codes "
        "| cases lost | bad reports | max s signal→exit | max s spawn→phase |"
    )
    body = [
        f"| {r.phase} | {r.tried} | {r.landed} | {r.tracebacks} | {r.hangs} | {r.wrong_exit} "
        f"| {r.lost} | {r.bad_reports} | {r.max_seconds:.2f} | {r.max_ready:.2f} |"
        for r in rows
    ]
    return "\n".join([head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *body])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tries", type=int, default=5, help="tries per phase and signal")
    parser.add_argument("--quick", action="store_true", help="one try of each (CI)")
    parser.add_argument("--phases", default=",".join(ALL_PHASES), help="comma-separated")
    parser.add_argument("--signals", default="SIGTERM,SIGINT", help="comma-separated")
    args = parser.parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    signals = [s for s in args.signals.split(",") if s]
    for p in phases:
        if p not in ALL_PHASES:
            parser.error(f"--phases: unknown phase {p!r} (known: {', '.join(ALL_PHASES)})")
    for s in signals:
        if s not in SIGNALS:
            parser.error(f"--signals: unknown signal {s!r} (known: SIGTERM, SIGINT)")
    tries = 1 if args.quick else args.tries
    rows, failed = run_all(phases, signals, tries)
    print(table(rows))
    for trial in failed:
        print("\n" + trial.explain(), file=sys.stderr)
    return 1 if any(t.phase not in UNGUARDED for t in failed) else 0


if __name__ == "__main__":
    sys.exit(main())
