"""Run the CLI, a probe script or a benchmark as a user's shell would: a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: the CLI as a fresh process: ``[*CLI, "run", "suite.yaml"]``
CLI = (sys.executable, "-m", "multiturn_eval")

#: variables of this environment a probe never inherits (keys, endpoints, proxies)
SCRUBBED = ("ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_", "MULTITURN_EVAL_")
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def run_command(
    argv: Sequence[str],
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd``, its output captured as text; a non-zero exit is the caller's to check."""
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_bench(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``bench/<script>`` with this interpreter, from the repository (a harness's --quick run)."""
    return run_command([sys.executable, str(ROOT / "bench" / script), *args], timeout=timeout)


def repo_env(**extra: str) -> dict[str, str]:
    """This environment with the repository and ``runner/`` importable, plus ``extra``."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),
        **extra,
    }


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
    done = run_command([sys.executable, "-c", script, *argv], cwd, full_env)
    line = next((x for x in done.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(line[len("PROBE ") :])
    return result
