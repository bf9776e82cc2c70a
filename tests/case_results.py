"""One builder for the :class:`CaseResult` values the unit tests make by hand.

A test names only what it is about; the rest is the same small case every time:
the test case ``c`` (index 0) of ``s.yaml`` (suite ``s``) on the python backend,
its outcome ``passed`` or ``failed`` as ``passed`` says unless the test gives one.
"""

from __future__ import annotations

from typing import Any

from multiturn_eval.results import CaseResult


def case_result(index: int = 0, *, passed: bool = True, **fields: Any) -> CaseResult:
    """A :class:`CaseResult` of ``s.yaml`` with ``fields`` over the defaults above."""
    defaults: dict[str, Any] = {
        "name": "c",
        "suite": "s.yaml",
        "suite_name": "s",
        "backend": "python",
        "outcome": "passed" if passed else "failed",
    }
    return CaseResult(index=index, passed=passed, **{**defaults, **fields})
