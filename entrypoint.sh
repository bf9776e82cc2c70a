#!/bin/bash
# The action's entrypoint: hand over to Python at once. Inputs arrive as INPUT_* variables
# with hyphens kept (INPUT_PARALLEL-TEST-CASES); bash passes such variables on to Python,
# while dash (Debian's /bin/sh) silently drops them, hence bash, not sh.
# The interpreter is the image's own, by absolute path: the runner passes the job's
# environment into the container, so a job-level `env: PATH:` or a PATH= line in GITHUB_ENV
# replaces the image's PATH, and `python` would be some other interpreter or none.
# MULTITURN_EVAL_PYTHON overrides it, for running this script outside the image (the tests).
# stderr joins stdout so the log keeps its order: everything the suites print sits between
# the ::stop-commands:: lines the action writes, and cannot be read as a workflow command.
set -euo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python=${MULTITURN_EVAL_PYTHON:-/opt/multiturn-eval/bin/python}
if [ ! -x "$python" ]; then
  echo "::error title=multiturn-eval%3A no interpreter::$python is not an executable file (the action's image has it; MULTITURN_EVAL_PYTHON names another)"
  exit 2
fi
exec "$python" -m multiturn_eval.github "$@" 2>&1
