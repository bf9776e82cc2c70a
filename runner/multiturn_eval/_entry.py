"""The console script and ``python -m multiturn_eval``: signals are ours before anything loads."""

from __future__ import annotations


def main() -> None:
    from .exit_codes import EXIT_INCOMPLETE
    from .interrupts import Interrupted, InterruptGuard

    guard = InterruptGuard()
    guard.install()  # a SIGTERM from here on: exit 3, never a traceback or -15
    try:
        from .cli import entry
    except (Interrupted, KeyboardInterrupt):
        raise SystemExit(EXIT_INCOMPLETE) from None
    entry(guard)
