"""report.json reads back exactly: run -> write -> load -> render gives identical files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from multiturn_eval.errors import ReportFormatError
from multiturn_eval.reports.reader import load_report, parse_report
from multiturn_eval.reports.writer import RENDERERS, render_reports
from multiturn_eval.run import RunOptions, run_suites
from multiturn_eval.secrets import Redactor

from . import agents

DATA = Path(__file__).parent / "data" / "pipeline"
GITHUB = {
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/agents",
    "GITHUB_RUN_ID": "4242",
    "GITHUB_SHA": "abcdef1234567",
    "GITHUB_REF": "refs/pull/7/merge",
}


@pytest.mark.parametrize("env", [{}, GITHUB], ids=["local", "github"])
def test_run_write_load_render_gives_identical_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    agents.reset()
    shutil.copy(DATA / "mixed.yaml", tmp_path / "mixed.yaml")
    monkeypatch.chdir(tmp_path)
    outcome = run_suites(["mixed.yaml"], RunOptions(report_dir="out"), env)
    assert outcome.exit_code == 1
    assert set(outcome.written) == {"json", "junit", "markdown", "html"}
    report = load_report(tmp_path / "out" / "report.json")
    assert report == outcome.report
    for fmt, text in render_reports(report, list(RENDERERS), Redactor()):
        written = (tmp_path / "out" / RENDERERS[fmt][0]).read_text(encoding="utf-8")
        assert text == written, f"{fmt} differs after a round trip"
    assert outcome.markdown == (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    if env:
        assert report.run.github is not None and report.run.pr_number == 7
        assert "https://github.com/acme/agents/actions/runs/4242" in (outcome.markdown or "")
    else:
        assert '"github"' not in (tmp_path / "out" / "report.json").read_text()


def _report_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    agents.reset()
    shutil.copy(DATA / "mixed.yaml", tmp_path / "mixed.yaml")
    monkeypatch.chdir(tmp_path)
    run_suites(["mixed.yaml"], RunOptions(report_dir="out", formats=("json",)), {})
    return (tmp_path / "out" / "report.json").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: {**d, "schema_version": "2"}, "schema version '2' cannot be read"),
        (lambda d: {**d, "schema_version": "2.1"}, "schema version '2.1' cannot be read"),
        (lambda d: {k: v for k, v in d.items() if k != "schema_version"}, "no schema_version"),
        (lambda d: {k: v for k, v in d.items() if k != "summary"}, "summary: Field required"),
        (lambda d: {**d, "results": "x"}, "results: Input should be a valid list"),
        (lambda d: [d], "no schema_version"),
    ],
    ids=["major-2", "major-2.1", "no-version", "no-summary", "results-not-list", "a-list"],
)
def test_a_report_that_cannot_be_read_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: object, message: str
) -> None:
    data = json.loads(_report_text(tmp_path, monkeypatch))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(change(data)))  # type: ignore[operator]
    with pytest.raises(ReportFormatError, match=r"bad\.json") as info:
        load_report(path)
    assert message in str(info.value)


def test_a_minor_version_of_the_same_major_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(_report_text(tmp_path, monkeypatch))
    data["schema_version"] = "1.3"
    assert parse_report(json.dumps(data)).schema_version == "1.3"


@pytest.mark.parametrize("content", [b"", b"{", b"\xff\xfe", b"null", b"<html>"])
def test_files_that_are_not_json_reports(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(ReportFormatError, match=r"r\.json: not"):
        load_report(path)


_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [
        '{"schema_version": "1", "run": ' + _DEEP + ', "results": []}',
        '{"schema_version": "1", "results": [' + _DEEP + "]}",
        '{"results": [' + _DEEP + '], "schema_version": "1"}',
    ],
    ids=["in-the-head", "a-result", "results-first"],
)
def test_json_nested_too_deeply_is_not_json_not_a_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ReportFormatError, match=r"r\.json: not JSON.*nested too deeply"):
        load_report(path)
    with pytest.raises(ReportFormatError, match=r"r\.json: not JSON.*nested too deeply"):
        parse_report(text, str(path))


def test_missing_and_non_regular_files(tmp_path: Path) -> None:
    with pytest.raises(ReportFormatError, match="does not exist"):
        load_report(tmp_path / "nope.json")
    with pytest.raises(ReportFormatError, match="not a regular file"):
        load_report(tmp_path)


@pytest.mark.parametrize("env", [{}, GITHUB], ids=["local", "github"])
@pytest.mark.parametrize("indent", [None, 2])
def test_the_report_dump_is_the_same_bytes_as_one_pydantic_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], indent: int | None
) -> None:
    """report.json is assembled case by case (linear); it must equal the whole-model dump."""
    from multiturn_eval.reports.json_report import _case_exclude, dump_json

    agents.reset()
    shutil.copy(DATA / "mixed.yaml", tmp_path / "mixed.yaml")
    monkeypatch.chdir(tmp_path)
    report = run_suites(["mixed.yaml"], RunOptions(report_dir="out"), env).report
    report.results = list(report.results) * 7  # legacy and multi-turn cases, interleaved
    exclude: dict[str, object] = {
        "results": {i: _case_exclude(c) for i, c in enumerate(report.results)}
    }
    if report.run.github is None:
        exclude["run"] = {"github"}
    assert dump_json(report, indent) == report.model_dump_json(indent=indent, exclude=exclude)
    report.results = []
    assert dump_json(report, indent) == report.model_dump_json(indent=indent, exclude=exclude)


# -- reading without holding the report (issue 23): any layout a JSON writer produces reads
# as today's in-memory path (parse_report) reads it; what cannot be read says where


@pytest.fixture
def written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    data: dict[str, object] = json.loads(_report_text(tmp_path, monkeypatch))
    return data


def _layouts(data: dict[str, object]) -> dict[str, str]:
    """The same report as other JSON writers (jq, another language's serialiser) lay it out."""
    results_first = {
        "results": data["results"],
        **{k: v for k, v in data.items() if k != "results"},
    }
    return {
        "compact": json.dumps(data, separators=(",", ":")),
        "jq-indented": json.dumps(data, indent=4),
        "jq-sorted": json.dumps(data, indent=2, sort_keys=True),
        "results-first": json.dumps(results_first),
        "tabs-crlf": json.dumps(data, indent="\t").replace("\n", "\r\n"),
        "ascii-escaped": json.dumps(data, ensure_ascii=True),
        "utf-8-bom": "\ufeff" + json.dumps(data, ensure_ascii=False),
        "padded": "\n\n  " + json.dumps(data, indent=1) + "\n\n\t ",
    }


@pytest.mark.parametrize(
    "layout",
    [
        "compact",
        "jq-indented",
        "jq-sorted",
        "results-first",
        "tabs-crlf",
        "ascii-escaped",
        "utf-8-bom",
        "padded",
    ],
)
@pytest.mark.parametrize("chunk", [7, 1024 * 1024])
def test_any_layout_reads_as_the_in_memory_path_reads_it(
    tmp_path: Path,
    written: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    chunk: int,
) -> None:
    """A tiny window (7 bytes) cuts every value, string, escape and number somewhere."""
    from multiturn_eval.reports import reader

    monkeypatch.setattr(reader, "CHUNK", chunk)
    text = _layouts(written)[layout]
    path = tmp_path / "r.json"
    path.write_bytes(text.encode("utf-8"))
    report = load_report(path)
    expected = parse_report(text.lstrip("\ufeff"))
    assert report == expected
    assert [r.model_dump() for r in report.results] == [r.model_dump() for r in expected.results]
    assert len(report.results) == len(written["results"])  # type: ignore[arg-type]


def test_unknown_fields_of_a_later_minor_version_are_dropped_at_every_depth(
    tmp_path: Path, written: dict[str, object]
) -> None:
    data = json.loads(json.dumps(written))
    data["schema_version"] = "1.9"
    data["from_the_future"] = {"x": [1, 2]}
    data["summary"]["new_counter"] = 3
    for result in data["results"]:
        result["new_field"] = "ünï"
        for turn in result.get("turns") or []:
            turn["new_turn_field"] = None
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    report = load_report(path)
    assert report == parse_report(json.dumps(data))
    assert report.schema_version == "1.9"
    assert [r.name for r in report.results] == [r["name"] for r in data["results"]]


@pytest.mark.parametrize("cut", [1, 100, 0.5, -200, -3, -1])
def test_a_truncated_report_is_not_json(
    tmp_path: Path, written: dict[str, object], cut: float
) -> None:
    text = json.dumps(written, indent=2).encode()
    end = int(len(text) * cut) if isinstance(cut, float) else cut
    path = tmp_path / "r.json"
    path.write_bytes(text[:end])
    with pytest.raises(ReportFormatError, match=r"r\.json: not JSON"):
        load_report(path)


@pytest.mark.parametrize("first", [True, False], ids=["results-first", "results-last"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: {**r, "passed": "maybe"}, "passed: Input should be a valid boolean"),
        (lambda r: {k: v for k, v in r.items() if k != "name"}, "name: Field required"),
        (lambda r: [r], "Input should be a valid dictionary"),
        (lambda r: None, "Input should be a valid dictionary"),
    ],
    ids=["wrong-type", "missing-field", "a-list", "null"],
)
def test_a_bad_result_in_the_middle_is_named_by_its_position(
    tmp_path: Path, written: dict[str, object], first: bool, change: object, message: str
) -> None:
    data = json.loads(json.dumps(written))
    results = data.pop("results")
    results = results * 3
    middle = len(results) // 2
    results[middle] = change(results[middle])  # type: ignore[operator]
    data = {"results": results, **data} if first else {**data, "results": results}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ReportFormatError, match=r"bad\.json: not a valid report") as info:
        load_report(path)
    assert f"results.{middle}" in str(info.value) and message in str(info.value)
    with pytest.raises(ReportFormatError) as whole:
        parse_report(json.dumps(data), str(path))
    assert str(whole.value).split(" (")[0] == str(info.value).split(" (")[0]


@pytest.mark.parametrize(
    "text",
    [
        '{"schema_version": "1", "results": [] "x": 1}',
        '{"schema_version": "1" "results": []}',
        '{"schema_version": "1", "results": [{}, ]}',
        '{"schema_version": "1", "results": [{}] } extra',
        '{"schema_version": "1", "results": [{"a": tru}]}',
        '{"schema_version": "1", results: []}',
        '{"schema_version": "1", "results": [',
        '{"schema_version": "1", "results": [{"a": "unterminated',
        "[1, 2",
        '"just a string"',
        "12",
    ],
)
@pytest.mark.parametrize("chunk", [3, 1024 * 1024])
def test_broken_json_says_not_json_or_not_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, chunk: int
) -> None:
    from multiturn_eval.reports import reader

    monkeypatch.setattr(reader, "CHUNK", chunk)
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ReportFormatError) as info:
        load_report(path)
    try:
        json.loads(text)
    except ValueError:
        assert "r.json: not JSON" in str(info.value)
    else:
        assert "r.json: not a multiturn-eval report" in str(info.value)


def test_a_result_larger_than_the_window_and_results_read_one_at_a_time(
    tmp_path: Path, written: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    from multiturn_eval.reports import reader
    from multiturn_eval.stored import StoredResults

    monkeypatch.setattr(reader, "CHUNK", 64)
    data = json.loads(json.dumps(written))
    data["results"][0]["errors"] = ["é" * 5000 + '\\"' + "x" * 3000]
    text = json.dumps(data, ensure_ascii=False)
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    report = load_report(path)
    assert isinstance(report.results, StoredResults)
    assert report.results[0].errors == data["results"][0]["errors"]
    assert report == parse_report(text)
    raw = path.read_bytes()
    for i, item in enumerate(data["results"]):  # each span is exactly one result's JSON text
        offset, length = report.results.spans[i]
        assert json.loads(raw[offset : offset + length]) == item


def test_a_report_read_back_stays_readable_when_a_new_report_replaces_it(
    tmp_path: Path, written: dict[str, object]
) -> None:
    """The writer replaces report.json (write, then rename): results read later come from
    the file that was read (a rerun or regrade writing into the directory it reads)."""
    from multiturn_eval.stored import StoredAcross

    path = tmp_path / "report.json"
    path.write_text(json.dumps(written))
    report = load_report(path)
    expected = parse_report(json.dumps(written))
    other = json.loads(json.dumps(written))
    other["results"] = other["results"][::-1] * 2
    replacement = tmp_path / "report.json.tmp"
    replacement.write_text(json.dumps(other, indent=3))
    replacement.replace(path)
    assert list(report.results) == list(expected.results)
    assert report.results[-1] == expected.results[-1]
    assert list(report.results[1:]) == list(expected.results[1:])
    assert list(StoredAcross([report.results], [(0, 1), (0, 0)])) == [
        expected.results[1],
        expected.results[0],
    ]
