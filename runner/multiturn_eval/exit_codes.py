"""Exit codes (pytest-like, one meaning each); see the README's "Command line".

==  =====================================================================
0   every selected test case passed
1   at least one test case failed
2   configuration or usage error, detected before any agent was called
3   the run could not complete (interrupted, fatal backend error, internal
    error); whatever finished is still in the reports
==  =====================================================================

:func:`exit_code_of` is the one rule from a report to its code (a run's, a merge's,
a regrade's). Importable before pydantic (the signal handlers' first import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import Report

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3


def exit_code_of(report: Report, fail_on: str = "failures") -> int:
    """3 incomplete; 1 when the spend cap kept test cases from starting (SPEC 6.8: a budget
    stop is never a green check, whatever ``fail_on``); else with ``fail_on="regressions"``
    and a baseline: 1 only on a regression (failures and not-run cases alone exit 0); else 1
    on any failed or not-run case."""
    if not report.run.complete:
        return EXIT_INCOMPLETE
    cap = report.run.spend_cap
    if cap is not None and cap.reached and cap.not_started:
        return EXIT_FAILED
    if fail_on == "regressions" and report.baseline is not None:
        return EXIT_FAILED if report.baseline.counts.get("regressed", 0) else EXIT_OK
    s = report.summary
    return EXIT_OK if s.failed == 0 and s.skipped == 0 else EXIT_FAILED
