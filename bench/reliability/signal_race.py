"""The race behind the rare "loading" hang, forced with gdb: the signal lands after
Python's last check for signals, just before the factory module's sleep starts.

``signals.py``'s ``loading`` phase sends the signal the instant the factory
module's marker exists, just before the module calls ``time.sleep(30)``. If the
main thread is preempted between the interpreter's last check for signals and
the ``clock_nanosleep`` system call, and the signal comes then, the C-level
handler only sets a flag: the sleep starts and runs its 30 s before Python's
handler can run. On a loaded 2-core machine that happened about once in a full
test run. This harness makes it happen every time: it attaches gdb to the run
once the signal handlers are installed, stops the main thread at the entry of
``clock_nanosleep`` once the marker exists, sends the signal while it is
stopped there, and lets it go. The outcome is checked as ``signals.py`` checks
the ``loading`` phase (exit 3 within 15 s, no traceback, every report written,
``report.json`` incomplete).

Needs gdb (with its Python) and the right to attach to a child process; Linux
only. Usage (from the repository root)::

    .venv/bin/python bench/reliability/signal_race.py --tries 5

Prints the same table as ``signals.py`` (the last column is the time from the
spawn to the signal). Figures are in ``bench/reliability/README.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from bench.reliability.signals import (
    HANG_AFTER,
    REACH_WITHIN,
    ROOT,
    SIGNALS,
    TRACEBACK,
    Row,
    Trial,
    caught,
    check_reports,
    scenario,
    table,
)

#: gdb's part: stop at clock_nanosleep once the marker exists, signal, detach
GDB_SCRIPT = """\
import os
import gdb

MARKER, PID, SIG = os.environ["RACE_MARKER"], int(os.environ["RACE_PID"]), int(os.environ["RACE_SIG"])


class AtSleep(gdb.Breakpoint):
    def stop(self):
        if not os.path.exists(MARKER):
            return False
        os.kill(PID, SIG)  # the thread is at the call's entry: Python has checked for signals
        print("RACE: signal sent at clock_nanosleep in thread", gdb.selected_thread().num)
        return True


for name in ("SIGINT", "SIGTERM"):
    gdb.execute(f"handle {name} nostop noprint pass")
AtSleep("clock_nanosleep")
gdb.execute("continue")
gdb.execute("delete")
gdb.execute("detach")
"""


def run_race(signame: str, work: Path) -> Trial:
    """One try of the ``loading`` phase with the signal forced into the race's window."""
    work.mkdir(parents=True, exist_ok=True)
    plan = scenario("loading", work)
    (work / "suite.yaml").write_text(plan.suite)
    (work / "race.py").write_text(GDB_SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),
        "PYTHONUNBUFFERED": "1",
        **plan.env,
    }
    env.pop("MULTITURN_EVAL_REPORT_DIR", None)
    command = [sys.executable, "-m", "multiturn_eval", "run", "suite.yaml", "-o", "out"]
    trial = Trial("loading", signame)
    sig = SIGNALS[signame]
    with (
        (work / "stdout").open("w+") as stdout,
        (work / "stderr").open("w+") as stderr,
        subprocess.Popen(command, cwd=work, env=env, stdout=stdout, stderr=stderr) as proc,
    ):
        spawned = time.monotonic()
        while not caught(proc.pid, signal.SIGTERM):
            if proc.poll() is not None or time.monotonic() > spawned + REACH_WITHIN:
                proc.kill()
                proc.wait()
                trial.bad_reports.append("the handlers were never installed")
                return trial
            time.sleep(0.001)
        race_env = {
            **os.environ,
            "RACE_MARKER": str(work / "importing"),
            "RACE_PID": str(proc.pid),
            "RACE_SIG": str(int(sig)),
        }
        gdb = subprocess.run(
            ["gdb", "-p", str(proc.pid), "-batch", "-nx", "-x", str(work / "race.py")],
            env=race_env,
            capture_output=True,
            text=True,
            timeout=REACH_WITHIN,
            check=False,
        )
        sent = time.monotonic()  # detached: the signal is pending, the sleep about to start
        trial.ready_after = sent - spawned
        if "RACE: signal sent" not in gdb.stdout:
            proc.kill()
            proc.wait()
            trial.bad_reports.append(f"gdb did not force the race: {gdb.stdout[-500:]}")
            return trial
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
    check_reports(trial, work / "out")
    return trial


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tries", type=int, default=5, help="tries per signal")
    parser.add_argument("--signals", default="SIGTERM,SIGINT", help="comma-separated")
    args = parser.parse_args(argv)
    if shutil.which("gdb") is None:
        parser.error("needs gdb on PATH")
    rows: list[Row] = []
    failed: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="mte-signal-race-") as tmp:
        for signame in [s for s in args.signals.split(",") if s]:
            if signame not in SIGNALS:
                parser.error(f"--signals: unknown signal {signame!r} (known: SIGTERM, SIGINT)")
            row = Row(f"loading, race forced / {signame}")
            for n in range(args.tries):
                trial = run_race(signame, Path(tmp) / f"{signame}-{n}")
                row.add(trial)
                if trial.problems:
                    failed.append(trial)
            rows.append(row)
    print(table(rows))
    for trial in failed:
        print("\n" + trial.explain(), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
