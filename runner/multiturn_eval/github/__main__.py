"""``python -m multiturn_eval.github``: the action's entry point (see :mod:`.action`)."""

import signal
import sys


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # a cancelled job while the action starts: exit 3, no traceback


signal.signal(signal.SIGTERM, _terminate)  # as PID 1 the action would otherwise ignore it
try:
    from ..cli import _exit_despite_stuck_threads
    from .action import main
except KeyboardInterrupt:
    sys.exit(3)

code = main()
_exit_despite_stuck_threads(code)  # a sync agent stuck past its timeout must not hold the step
sys.exit(code)
