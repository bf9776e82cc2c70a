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
