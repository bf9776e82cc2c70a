#!/bin/bash
# The action's entrypoint: hand over to Python at once. Inputs arrive as INPUT_* variables
# with hyphens kept (INPUT_PARALLEL-TEST-CASES); bash passes such variables on to Python,
# while dash (Debian's /bin/sh) silently drops them, hence bash, not sh.
# stderr joins stdout so the log keeps its order: everything the suites print sits between
# the ::stop-commands:: lines the action writes, and cannot be read as a workflow command.
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
exec python -m multiturn_eval.github "$@" 2>&1
