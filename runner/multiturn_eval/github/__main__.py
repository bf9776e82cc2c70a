"""``python -m multiturn_eval.github``: the action's entry point (see :mod:`.action`)."""

import sys

from ..cli import _exit_despite_stuck_threads
from .action import main

code = main()
_exit_despite_stuck_threads(code)  # a sync agent stuck past its timeout must not hold the step
sys.exit(code)
