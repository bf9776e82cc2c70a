"""The race behind the rare "loading" hang: a signal that lands after Python's last
check for signals, just before the factory module's sleep starts.

``signals.py``'s ``loading`` phase sends the signal the instant the factory
module's marker exists, just before the module calls ``time.sleep(30)``. If the
main thread is preempted between the interpreter's last check for signals and
the ``clock_nanosleep`` system call, and the signal comes then, the C-level
handler only sets a flag: the sleep starts and runs its 30 s before Python's
handler can run. On a loaded 2-core machine that happened about once in a full
test run. Three ways to send the signal (``--mode``), each on the real
``loading`` scenario and checked as ``signals.py`` checks that phase (exit 3
within 15 s, no traceback, every report written, ``report.json`` incomplete):

======  =====================================================================
gdb     the race every time: gdb attaches once the signal handlers are
        installed, stops the main thread at the entry of ``clock_nanosleep``
        once the marker exists, sends the signal while it is stopped there and
        detaches (needs gdb with its Python, and the right to attach to a child)
marker  the race as it comes: the signal as soon as the marker exists (polled
        every 0.5 ms); run it under CPU load (``--busy N`` starts N busy loops)
random  a signal at a random instant from the handlers' installation to at most
        ``--within`` seconds later (or the marker, whichever comes first): any
        instant of start-up and loading (argv, imports, the YAML, the import
        locks, the factory module's own code)
======  =====================================================================

Usage (from the repository root)::

    .venv/bin/python bench/reliability/signal_race.py --tries 10
    .venv/bin/python bench/reliability/signal_race.py --mode marker --tries 100 --busy 4

Prints ``signals.py``'s table (the last column: seconds from the spawn to the
signal) and how many tries the watchdog rescued (the main thread had not run
the handler within twice the grace). Figures are in
``bench/reliability/README.md``.
"""

from __future__ import annotations

import argparse
import os
import random
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
    REACH_WITHIN,
    SIGNALS,
    Row,
    Trial,
    caught,
    check_reports,
    prepared,
    table,
    wait_for_exit,
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


def _send(mode: str, proc: subprocess.Popen[bytes], sig: int, work: Path, within: float) -> str:
    """Send ``sig`` to ``proc`` the ``mode``'s way; an empty string, or why it could not."""
    marker = work / "importing"
    if mode == "gdb":
        (work / "race.py").write_text(GDB_SCRIPT)
        env = {**os.environ, "RACE_MARKER": str(marker), "RACE_PID": str(proc.pid)}
        gdb = subprocess.run(
            ["gdb", "-p", str(proc.pid), "-batch", "-nx", "-x", str(work / "race.py")],
            env={**env, "RACE_SIG": str(sig)},
            capture_output=True,
            text=True,
            timeout=REACH_WITHIN,
            check=False,
        )
        # detached: the signal is pending, the sleep about to start
        return "" if "RACE: signal sent" in gdb.stdout else f"gdb: {gdb.stdout[-500:]}"
    deadline = time.monotonic() + (random.uniform(0, within) if mode == "random" else REACH_WITHIN)
    while not marker.exists() and time.monotonic() < deadline:
        if proc.poll() is not None:
            return "the run ended before the signal"
        time.sleep(0.0005)
    if mode == "marker" and not marker.exists():
        return "the factory module never started importing"
    os.kill(proc.pid, sig)
    return ""


def run_race(signame: str, work: Path, mode: str, within: float) -> Trial:
    """One try of the ``loading`` scenario, the signal sent the ``mode``'s way."""
    _, command, env = prepared("loading", work)
    trial = Trial("loading", signame)
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
        problem = _send(mode, proc, SIGNALS[signame], work, within)
        sent = time.monotonic()
        trial.ready_after = sent - spawned
        if problem:
            proc.kill()
            proc.wait()
            trial.bad_reports.append(problem)
            return trial
        wait_for_exit(trial, proc, sent, stdout, stderr)
    check_reports(trial, work / "out")
    return trial


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=("gdb", "marker", "random"), default="gdb")
    parser.add_argument("--tries", type=int, default=5, help="tries per signal")
    parser.add_argument("--signals", default="SIGTERM,SIGINT", help="comma-separated")
    parser.add_argument("--within", type=float, default=4.0, help="random: latest signal, s")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run meanwhile")
    parser.add_argument("--seed", type=int, default=0, help="random: the instants' seed")
    args = parser.parse_args(argv)
    signals = [s for s in args.signals.split(",") if s]
    for signame in signals:
        if signame not in SIGNALS:
            parser.error(f"--signals: unknown signal {signame!r} (known: SIGTERM, SIGINT)")
    if args.mode == "gdb" and shutil.which("gdb") is None:
        parser.error("--mode gdb needs gdb on PATH")
    random.seed(args.seed)
    rows: list[Row] = []
    failed: list[Trial] = []
    rescued = 0
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        with tempfile.TemporaryDirectory(prefix="mte-signal-race-") as tmp:
            for signame in signals:
                row = Row(f"loading, {args.mode} / {signame}")
                for n in range(args.tries):
                    trial = run_race(signame, Path(tmp) / f"{signame}-{n}", args.mode, args.within)
                    row.add(trial)
                    rescued += "did not stop within" in trial.stderr
                    if trial.problems:
                        failed.append(trial)
                rows.append(row)
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()
    print(table(rows))
    print(f"\nthe watchdog wrote the reports in {rescued} of {sum(r.tried for r in rows)} tries")
    for trial in failed:
        print("\n" + trial.explain(), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
