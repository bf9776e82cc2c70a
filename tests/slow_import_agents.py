"""A factory module that takes a while to import (the signal tests' "loading" phases).

Importing it creates the file named by ``SLOW_IMPORT_MARKER`` (if set), then
sleeps ``SLOW_IMPORT_SECONDS`` (default 30) in the main thread, as a heavy
agent framework's import would; the suite loader imports factories while the
suites load, so a signal sent once the marker exists lands in that phase.

With ``SLOW_IMPORT_BLOCK_SIGNALS=1`` the main thread first blocks SIGINT and
SIGTERM, so the kernel hands a signal to another thread and the sleep is never
interrupted: Python's handler cannot run until the import returns. That is,
every time, what a signal landing between the interpreter's last check for
signals and the start of a blocking call looks like (the sleep then runs to
its end before the handler runs), and what the import of a C extension that
does long work without checking for signals looks like.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.slow_agents import SlowSession, make_session

__all__ = ["SlowSession", "make_session"]

if os.environ.get("SLOW_IMPORT_BLOCK_SIGNALS") == "1":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
_marker = os.environ.get("SLOW_IMPORT_MARKER")
if _marker:
    Path(_marker).touch()
time.sleep(float(os.environ.get("SLOW_IMPORT_SECONDS", "30")))
