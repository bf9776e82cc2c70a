"""The load harness's quick run: every size completes with every test case reported.

Timings are figures for bench/reliability/README.md, never asserted here.
"""

from __future__ import annotations

import pytest

from tests.cli_probe import run_bench


@pytest.mark.parametrize(
    "mode", [(), ("--jsonl",), ("--jsonl", "--validate")], ids=["yaml", "jsonl", "validate"]
)
def test_the_load_harness_quick_run_reports_every_case(mode: tuple[str, ...]) -> None:
    proc = run_bench("reliability/load.py", "--quick", *mode)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "INCOMPLETE" not in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| new |")]
    assert len(rows) == 2, proc.stdout
    print(proc.stdout)
