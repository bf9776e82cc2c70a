"""SIGINT and SIGTERM in every phase of a run: exit 3 with the reports of what finished.

A cancelled CI job sends SIGTERM and, a few seconds later, SIGKILL. What a
user needs from those seconds is the reports of every test case that
finished. :class:`InterruptGuard` owns both signals for the whole run and
knows which phase the run is in:

=========  ==========================================================
phase      first signal
=========  ==========================================================
starting   (from :meth:`InterruptGuard.install` until the run starts
           loading: argv, settings, imports) the signal is noted;
           :func:`~multiturn_eval.run.run_suites` sees it as it starts
           and writes a report of no test cases (``complete: false``)
loading    :class:`Interrupted` is raised in the main thread; the caller
           writes a report of no test cases (``complete: false``); if
           the main thread is inside C code and does not run the
           handler, the watchdog writes that report (see below)
running    the run's task is cancelled: no new test case starts, running
           ones stop, the finished ones are reported
writing    the reports being written are finished (``report.json`` first)
=========  ==========================================================

A second signal ends the process with exit 3 as soon as ``report.json`` is
safe: the invariant a user relies on is that ``report.json`` exists and holds
every test case ``results.jsonl`` holds (``results.jsonl`` is flushed after
every test case). If the last snapshot is behind (or there is none yet: a run
shorter than the snapshot interval), the watchdog's exit thread writes
``report.json`` from the run's state, atomically, then exits; if the final
reports are being written it waits for their ``report.json`` (written first),
at most :attr:`InterruptGuard.exit_limit` seconds. A third signal exits at
once, whatever is being written.

The event loop may be blocked when the signal comes (a sync grader, a huge
snapshot): Python runs signal handlers only between bytecodes of the main
thread. So a watchdog thread also hears every signal (through
``signal.set_wakeup_fd``) and, if the main thread has not started writing the
final reports and its event loop does not answer within twice
:attr:`InterruptGuard.grace` seconds, writes them itself from the run's state
and exits 3.

Before the run's event loop exists (starting, loading) the main thread's
answer is the handler itself: if it has run within twice the grace, the main
thread is on its way to the reports (imports of the renderers can take longer
than the grace on a busy machine) and the watchdog waits for it, up to
:attr:`InterruptGuard.writing_limit`. If it has not, the main thread is inside
C code that the signal did not interrupt and that may not return for a long
time: a C extension's import, a large suite in the YAML parser, or any
blocking call (a sleep, a read) the signal reached just before it started
(the C-level handler then only sets a flag, and the call runs to its end
before Python looks at it). The watchdog then writes the report of no test
case itself (:attr:`InterruptGuard.emergency` is set as soon as the run knows
where reports go) and exits 3 (``validate``, which has no reports, just exits
3); before the run knows where reports go (argv, settings) it waits for the
main thread, the only one that can write them. Reports are written under one lock, so the main
thread's writing, the periodic snapshot and the watchdog's never mix. The
watchdog's own writing is bounded by :attr:`InterruptGuard.writing_limit` too
(it may need a module the stuck main thread is importing), so every wait is
bounded: whatever the main thread does, the process exits 3 within a few
``writing_limit`` of the first signal.

Every such exit skips ``atexit``; what must happen anyway (MCP server processes
killed) is registered with :func:`before_hard_exit` and runs first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Literal, NoReturn

from .errors import Interrupted
from .exit_codes import EXIT_INCOMPLETE

__all__ = ["InterruptGuard", "Interrupted"]

Phase = Literal["starting", "loading", "running", "writing", "done"]
SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: called in order before the process ends with os._exit (which skips atexit)
_HARD_EXIT_HOOKS: list[Callable[[], None]] = []


def before_hard_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` (quick, synchronous, any thread) before an ``os._exit`` of this module."""
    if hook not in _HARD_EXIT_HOOKS:
        _HARD_EXIT_HOOKS.append(hook)


def _hard_exit() -> NoReturn:
    for hook in list(_HARD_EXIT_HOOKS):
        with contextlib.suppress(BaseException):
            hook()
    os._exit(EXIT_INCOMPLETE)  # no flush: stdout's lock may be held by a blocked main thread


def _write_stderr(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.write(2, text.encode("utf-8", "replace"))


class InterruptGuard:
    """Owns SIGINT/SIGTERM while it is installed (a context manager)."""

    def __init__(
        self, grace: float = 0.4, writing_limit: float = 20.0, exit_limit: float = 10.0
    ) -> None:
        self.grace = grace
        """How long the main thread has to start writing the reports after a signal."""
        self.writing_limit = writing_limit
        """How long the main thread's writing may then take before the watchdog exits anyway."""
        self.exit_limit = exit_limit
        """How long the exit on a second signal may spend bringing ``report.json`` up to date."""
        self.catch_up: Callable[[float], None] | None = None
        """Brings ``report.json`` up to ``results.jsonl`` by a deadline (``time.monotonic``);
        called by the exit thread on a second signal."""
        self.phase: Phase = "starting"
        self.stop_reason: str | None = None
        self.write_lock = threading.Lock()
        self.emergency: Callable[[str], None] | None = None
        """Writes the reports from what is known (a report of no test case while loading);
        called by the watchdog thread, holding :attr:`write_lock`."""
        self.on_stop: Callable[[], None] | None = None
        """Called in the main thread when the first signal comes during the ``running`` phase."""
        self.ping: Callable[[Callable[[], None]], None] | None = None
        """Schedules a callback on the run's event loop from another thread (liveness check)."""
        self._signals = 0
        self._watchdog_signals = 0
        self._done = threading.Event()
        self._previous: dict[int, object] = {}
        self._previous_fd: int | None = None
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._thread: threading.Thread | None = None
        self._installed = False

    # ------------------------------------------------------------------ install

    def __enter__(self) -> InterruptGuard:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals can only be handled in the main thread: leave them alone
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)
        reader, writer = socket.socketpair()
        reader.setblocking(True)
        writer.setblocking(False)
        self._pair = (reader, writer)
        self._previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="interrupt-watchdog", daemon=True)
        self._thread.start()
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        self.phase = "done"  # a signal while this runs is only noted (the handler stays ours)
        self._done.set()
        if self._pair is not None:  # the watchdog first, while our handler still answers
            reader, writer = self._pair
            with contextlib.suppress(OSError):
                writer.send(b"\0")  # wake the watchdog so it sees _done and ends
            if self._thread is not None:
                self._thread.join(1.0)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(self._previous_fd if self._previous_fd is not None else -1)
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous)  # type: ignore[arg-type]
        if self._pair is not None:
            reader, writer = self._pair
            reader.close()
            writer.close()
            self._pair = None

    # ------------------------------------------------------------------- phases

    def enter(self, phase: Phase) -> None:
        self.phase = phase
        if phase == "done":
            self._done.set()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The final reports are being written: signals wait for them, the watchdog too."""
        with self.write_lock:
            self.phase = "writing"
            try:
                yield
            finally:
                self.enter("done")

    @property
    def interrupted(self) -> bool:
        return self.stop_reason is not None

    # ------------------------------------------------------------------ signals

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self._signals += 1
        if self._signals > 2 or (self._signals == 2 and not self._watching):
            self._exit_now(name)
        if self._signals == 2:
            return  # the watchdog heard it too: it exits once report.json is safe
        self.stop_reason = self.stop_reason or f"interrupted by {name}"
        if self.phase == "starting":
            return  # noted: run_suites stops as it starts (raising here could hit install())
        if self.phase == "loading":
            raise Interrupted(name)
        if self.phase == "running" and self.on_stop is not None:
            self.on_stop()
        # writing / done: the reports are being finished; exit 3 afterwards

    @property
    def _watching(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _exit_now(self, name: str) -> None:
        _write_stderr(f"multiturn-eval: {name} again: exiting at once (exit 3)\n")
        _hard_exit()

    def _exit_soon(self, name: str) -> None:
        """The second signal: exit 3 once ``report.json`` holds what ``results.jsonl`` holds."""
        _write_stderr(
            f"multiturn-eval: {name} again: exiting (exit 3) once report.json holds every "
            f"finished test case; {name} a third time exits at once\n"
        )
        catch_up = self.catch_up
        if catch_up is not None:
            try:
                catch_up(time.monotonic() + self.exit_limit)
            except BaseException as exc:  # nothing may stop the exit
                _write_stderr(f"multiturn-eval: could not bring report.json up to date: {exc!r}\n")
        _hard_exit()  # the hooks first: no MCP server process outlives the runner

    def _watch(self) -> None:
        assert self._pair is not None
        reader = self._pair[0]
        while not self._done.is_set():
            try:
                data = reader.recv(64)
            except OSError:
                return
            if self._done.is_set() or not data:
                return
            signums = [b for b in data if b in (signal.SIGINT, signal.SIGTERM)]
            if not signums:
                continue
            before = self._watchdog_signals
            self._watchdog_signals += len(signums)
            name = signal.Signals(signums[-1]).name
            if self._watchdog_signals > 2:
                self._exit_now(name)
            if self._watchdog_signals == 2:  # in a thread of its own: a third signal still exits
                threading.Thread(
                    target=self._exit_soon, args=(name,), name="interrupt-exit", daemon=True
                ).start()
            if before > 0:
                continue
            self.stop_reason = (
                self.stop_reason or f"interrupted by {signal.Signals(signums[0]).name}"
            )
            threading.Thread(
                target=self._rescue, args=(name,), name="interrupt-rescue", daemon=True
            ).start()

    def _handled_within(self, seconds: float) -> bool:
        """Whether the main thread runs the handler (it counts the signals) within ``seconds``."""
        deadline = time.monotonic() + seconds
        while self._signals == 0 and time.monotonic() < deadline and not self._done.wait(0.02):
            pass
        return self._signals > 0

    def _rescue(self, name: str) -> None:
        """Let the main thread stop the run; if it cannot (blocked), write the reports and exit."""
        if self._done.wait(self.grace):
            return
        # No event loop yet. If the main thread ran the handler (Interrupted was raised, or the
        # signal was noted) it is on its way to the reports: give it time. If it has not, it is
        # inside C code that may not return for long (see the module's docstring): write the
        # report of no test case from here. Before the run knows where reports go (starting,
        # no writer yet) the main thread is the only one that can write them: wait for it.
        # Loading without a writer (validate) has no reports: exit.
        before_the_loop = self.phase in ("starting", "loading")
        only_main_can_write = self.phase == "starting" and self.emergency is None
        if before_the_loop and (only_main_can_write or self._handled_within(self.grace)):
            deadline = time.monotonic() + self.writing_limit
            while (
                self.phase in ("starting", "loading")
                and time.monotonic() < deadline
                and not self._done.wait(0.05)
            ):
                pass
        if self._done.is_set():
            return
        if self.phase == "running" and self.ping is not None:
            alive = threading.Event()
            with contextlib.suppress(RuntimeError):  # the loop is closed: not alive
                self.ping(alive.set)
            # the loop turns: the main thread is stopping the run, let it finish
            if alive.wait(self.grace) and self._done.wait(self.writing_limit):
                return
        if self.phase == "writing":  # the main thread is writing the final reports
            if self._done.wait(self.writing_limit):
                return
            _write_stderr("multiturn-eval: writing the reports takes too long; exiting (exit 3)\n")
            _hard_exit()
        if not self.write_lock.acquire(timeout=self.writing_limit):
            _hard_exit()
        if self._done.is_set():
            self.write_lock.release()
            return
        reason = self.stop_reason or f"interrupted by {name}"
        emergency = self.emergency
        stuck_loading = (
            f"multiturn-eval: {name}: the loading of the suites did not stop within "
            f"{2 * self.grace:g} s (the main thread is inside C code the signal did not "
            "interrupt); "
        )
        if emergency is None and self.phase == "loading":  # validate: no reports to write
            _write_stderr(stuck_loading + "exiting (exit 3)\n")
        elif emergency is None:
            _write_stderr(
                f"multiturn-eval: {name}: the run did not stop (blocked before any test case "
                "started); exiting without reports (exit 3)\n"
            )
        else:
            if self.phase in ("starting", "loading"):
                _write_stderr(stuck_loading + "writing a report of no test case\n")
            else:
                _write_stderr(
                    f"multiturn-eval: {name}: the run did not stop within {2 * self.grace:g} s "
                    "(blocked by user code?); writing the reports of what finished\n"
                )
            self._write_bounded(emergency, reason)
        _hard_exit()

    def _write_bounded(self, emergency: Callable[[str], None], reason: str) -> None:
        """``emergency(reason)``, given at most :attr:`writing_limit` seconds.

        It may import a renderer, and the import waits forever if the main thread is stuck
        importing a module the renderer needs too (or holds the import lock: a signal
        handled inside importlib can leave it held)."""

        def write() -> None:
            try:
                emergency(reason)
            except BaseException as exc:  # nothing may stop the exit
                _write_stderr(f"multiturn-eval: could not write the reports: {exc!r}\n")

        writer = threading.Thread(target=write, name="interrupt-writer", daemon=True)
        writer.start()
        writer.join(self.writing_limit)
        if writer.is_alive():
            _write_stderr("multiturn-eval: writing the reports takes too long; exiting (exit 3)\n")
