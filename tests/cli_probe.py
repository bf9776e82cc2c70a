"""Run a probe script in a fresh interpreter, as a user's shell would start the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: variables of this environment a probe never inherits (keys, endpoints, proxies)
SCRUBBED = ("ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_", "MULTITURN_EVAL_")
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def run_probe(
    script: str, cwd: Path, argv: tuple[str, ...], env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``python -c script *argv`` with the repository on ``sys.path``; the script prints one
    ``PROBE {json}`` line, returned parsed."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SCRUBBED) and k.lower() not in PROXIES
    }
    full_env["PYTHONPATH"] = str(ROOT)
    full_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(line[len("PROBE ") :])
    return result
