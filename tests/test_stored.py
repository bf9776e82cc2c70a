"""Results kept in a file: what goes in comes back, in the order asked for, one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from multiturn_eval.reports.json_report import dump_json
from multiturn_eval.results import CaseResult
from multiturn_eval.stored import ResultFile, StoredResults, stored


def _case(index: int, passed: bool = True) -> CaseResult:
    return CaseResult(
        index=index,
        name=f"case {index} – ünïcode",
        suite="s.yaml",
        suite_name="s",
        line=index + 1,
        backend="python",
        passed=passed,
        outcome="passed" if passed else "failed",
        turns=[],
    )


def test_results_come_back_in_span_order_not_write_order(tmp_path: Path) -> None:
    file = ResultFile(tmp_path / "results.jsonl")
    spans = {i: file.append(dump_json(_case(i, passed=i % 2 == 0))) for i in (3, 0, 2, 1)}
    file.close()
    results = stored(tmp_path / "results.jsonl", [spans[i] for i in range(4)])
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert [r.passed for r in results] == [True, False, True, False]
    assert results[-1].name == "case 3 – ünïcode"
    assert [r.index for r in results[1:3]] == [1, 2]
    assert isinstance(results[1:3], StoredResults)
    with pytest.raises(IndexError):
        results[4]
    # the journal is still one JSON text a line, as `tail -f` readers expect
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [CaseResult.model_validate_json(line).index for line in lines] == [3, 0, 2, 1]


def test_an_empty_store_is_empty_and_falsy(tmp_path: Path) -> None:
    ResultFile(tmp_path / "r.jsonl").close()
    results = stored(tmp_path / "r.jsonl", [])
    assert not results and list(results) == []


def test_a_truncated_file_is_an_error_not_a_short_result(tmp_path: Path) -> None:
    file = ResultFile(tmp_path / "r.jsonl")
    span = file.append(dump_json(_case(0)))
    file.close()
    (tmp_path / "r.jsonl").write_bytes((tmp_path / "r.jsonl").read_bytes()[:10])
    with pytest.raises(OSError, match="truncated"):
        list(stored(tmp_path / "r.jsonl", [span]))
