"""The load harness's quick run: every size completes with every test case reported.

Timings are figures for bench/reliability/README.md, never asserted here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_load_harness_quick_run_reports_every_case() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reliability" / "load.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "INCOMPLETE" not in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| new |")]
    assert len(rows) == 2, proc.stdout
    print(proc.stdout)
