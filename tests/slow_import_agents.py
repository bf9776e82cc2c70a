"""A factory module that takes a while to import (the signal tests' "loading" phase).

Importing it creates the file named by ``SLOW_IMPORT_MARKER`` (if set), then
sleeps ``SLOW_IMPORT_SECONDS`` (default 30) in the main thread, as a heavy
agent framework's import would; the suite loader imports factories while the
suites load, so a signal sent once the marker exists lands in that phase.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.slow_agents import SlowSession, make_session

__all__ = ["SlowSession", "make_session"]

_marker = os.environ.get("SLOW_IMPORT_MARKER")
if _marker:
    Path(_marker).touch()
time.sleep(float(os.environ.get("SLOW_IMPORT_SECONDS", "30")))
