"""``python -m multiturn_eval.github``: the action's entry point (see :mod:`.action`)."""

import sys

from .action import main

sys.exit(main())
