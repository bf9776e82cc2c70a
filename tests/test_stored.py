"""Results kept in a file: what goes in comes back, in the order asked for, one at a time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from multiturn_eval.reports.json_report import dump_json
from multiturn_eval.reports.writer import RedactedResults
from multiturn_eval.results import CaseResult
from multiturn_eval.run_store import RunResults, RunStore
from multiturn_eval.secrets import Redactor
from multiturn_eval.stored import PinnedResults, ResultFile, StoredAcross, StoredResults, stored


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


def _sequences(tmp_path: Path) -> dict[str, Sequence[CaseResult]]:
    """Cases 0-4 in each kind of result sequence the runner builds."""
    cases = [_case(i, passed=i % 2 == 0) for i in range(5)]
    file = ResultFile(tmp_path / "r.jsonl")
    spans = [file.append(dump_json(case)) for case in cases]
    file.close()
    whole = stored(tmp_path / "r.jsonl", spans)
    store = RunStore([5], Redactor(), spool=True)
    for i in (0, 1, 2, 4):
        store.put(0, i, cases[i])
    return {
        "stored": whole,
        "pinned": PinnedResults(tmp_path / "r.jsonl", whole.spans),
        "across": StoredAcross([whole[3:], whole[:3]], [(1, 0), (1, 1), (1, 2), (0, 0), (0, 1)]),
        "run": RunResults(store, store.offsets[0], store.lengths[0], {3: lambda: cases[3]}),
        "redacted": RedactedResults(whole, Redactor(["never in a case"])),
    }


@pytest.mark.parametrize("kind", ["stored", "pinned", "across", "run", "redacted"])
def test_every_result_sequence_indexes_slices_and_compares_as_the_list_would(
    tmp_path: Path, kind: str
) -> None:
    results = _sequences(tmp_path)[kind]
    cases = [_case(i, passed=i % 2 == 0) for i in range(5)]
    assert results and len(results) == 5
    assert list(results) == cases and results == cases and cases == results
    assert results != cases[:4] and results != cases[::-1] and results != "abc"
    assert [results[i] for i in range(-5, 5)] == cases + cases
    for index in (5, -6, 10**9, -(10**9)):
        with pytest.raises(IndexError):
            results[index]
    for cut in (slice(1, 3), slice(None, None, -2), slice(4, 1, -1), slice(7, 9), slice(-2, None)):
        assert list(results[cut]) == cases[cut]
    assert results.index(cases[2]) == 2 and cases[3] in results
    with pytest.raises(TypeError):
        hash(results)
    assert repr(results).startswith(type(results).__name__ + "(5 results")
