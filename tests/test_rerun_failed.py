"""``--rerun-failed REPORT.json`` and ``--keep-passed``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import agents
from tests.agents import scripted_case
from tests.conftest import CliResult, Project

SUITE = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric}]
test_cases:
"""


def case(name: str, response: str = "1", step: dict[str, Any] | None = None) -> str:
    return scripted_case(name, [step or {"response": response}], ["{input: q, ground_truth: 1}"])


def first_run(project: Project) -> Path:
    """Five cases: pass, fail, pass, error, pass."""
    project.write(
        "suite.yaml",
        SUITE
        + case("p0")
        + case("f1", "2")
        + case("p2")
        + case("e3", step={"raise": "bug"})
        + case("p4"),
    )
    result = project.run("run", "suite.yaml", "-o", "first")
    assert result.code == 1
    assert [r["outcome"] for r in result.report["results"]] == [
        "passed",
        "failed",
        "passed",
        "error",
        "passed",
    ]
    return project.root / "first" / "report.json"


def fix_everything(project: Project) -> None:
    project.write(
        "suite.yaml", SUITE + case("p0") + case("f1") + case("p2") + case("e3") + case("p4")
    )


def keep_passed(project: Project, report: Path | str, out: str) -> CliResult:
    """`run suite.yaml --rerun-failed REPORT --keep-passed -o OUT`."""
    return project.run(
        "run", "suite.yaml", "--rerun-failed", str(report), "--keep-passed", "-o", out
    )


def test_only_failed_and_errored_cases_run_again(project: Project) -> None:
    report = first_run(project)
    fix_everything(project)
    agents.reset()
    result = project.run("run", "suite.yaml", "--rerun-failed", str(report), "-o", "again")
    assert result.code == 0, result.err
    assert [(r["name"], r["outcome"]) for r in result.report["results"]] == [
        ("f1", "passed"),
        ("e3", "passed"),
    ]
    assert sorted(agents.OPENED) == ["e3", "f1"]  # no session for the cases that passed


def test_keep_passed_gives_a_complete_report_in_suite_order(project: Project) -> None:
    report = first_run(project)
    earlier = json.loads(report.read_text())
    fix_everything(project)
    result = keep_passed(project, report, "again")
    assert result.code == 0, result.err
    results = result.report["results"]
    assert [(r["index"], r["name"], r["outcome"]) for r in results] == [
        (0, "p0", "passed"),
        (1, "f1", "passed"),
        (2, "p2", "passed"),
        (3, "e3", "passed"),
        (4, "p4", "passed"),
    ]
    # the passed ones are the earlier report's results, as they were
    assert results[0] == earlier["results"][0] and results[4] == earlier["results"][4]
    assert result.report["summary"]["total"] == 5
    assert result.report["summary"]["passed"] == 5


def test_skipped_cases_of_a_capped_or_interrupted_run_are_run_again(project: Project) -> None:
    report = first_run(project)
    data = json.loads(report.read_text())
    data["results"][2].update(passed=False, skipped=True, outcome="skipped")
    report.write_text(json.dumps(data))
    result = project.run("run", "suite.yaml", "--rerun-failed", str(report), "-o", "again")
    assert [r["name"] for r in result.report["results"]] == ["f1", "p2", "e3"]


def test_a_case_the_report_does_not_know_runs_too(project: Project) -> None:
    report = first_run(project)
    project.write("suite.yaml", (project.root / "suite.yaml").read_text() + case("new5"))
    result = project.run("run", "suite.yaml", "--rerun-failed", str(report), "-o", "again")
    assert [r["name"] for r in result.report["results"]] == ["f1", "e3", "new5"]


def test_a_renamed_case_counts_as_new(
    project: Project,
) -> None:
    report = first_run(project)
    text = (project.root / "suite.yaml").read_text().replace("name: p2", "name: p2-renamed")
    project.write("suite.yaml", text)
    result = project.run("run", "suite.yaml", "--rerun-failed", str(report), "-o", "again")
    assert [r["name"] for r in result.report["results"]] == ["f1", "p2-renamed", "e3"]


def test_nothing_to_rerun_is_a_configuration_error(project: Project) -> None:
    project.write("suite.yaml", SUITE + case("p0"))
    assert project.run("run", "suite.yaml", "-o", "first").code == 0
    result = project.run("run", "suite.yaml", "--rerun-failed", "first/report.json")
    assert result.code == 2
    assert "nothing to run again" in result.err
    # with --keep-passed the earlier results make a complete report on their own
    kept = keep_passed(project, "first/report.json", "k")
    assert kept.code == 0
    assert [r["name"] for r in kept.report["results"]] == ["p0"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("{not json", "not JSON"),
        ('{"a": 1}', "not a multiturn-eval report"),
        ('{"schema_version": "2", "run": {}}', "schema version"),
        ('{"schema_version": "1", "run": {}}', "not a valid report"),
    ],
)
def test_a_bad_earlier_report_is_a_configuration_error_naming_it(
    project: Project, content: str | None, message: str
) -> None:
    project.write("suite.yaml", SUITE + case("p0"))
    if content is not None:
        project.write("earlier.json", content)
    result = project.run("run", "suite.yaml", "--rerun-failed", "earlier.json")
    assert result.code == 2
    assert "--rerun-failed" in result.err and "earlier.json" in result.err
    assert message in result.err


def test_keep_passed_without_rerun_failed_is_refused(project: Project) -> None:
    project.write("suite.yaml", SUITE + case("p0"))
    result = project.run("run", "suite.yaml", "--keep-passed")
    assert result.code == 2
    assert "--keep-passed needs --rerun-failed" in result.err


def test_a_kept_report_merges_like_a_full_run(project: Project) -> None:
    report = first_run(project)
    fix_everything(project)
    whole = project.run("run", "suite.yaml", "-o", "whole")
    kept = keep_passed(project, report, "again")
    assert [(r["name"], r["outcome"]) for r in kept.report["results"]] == [
        (r["name"], r["outcome"]) for r in whole.report["results"]
    ]
    assert kept.report["summary"]["turns"] == whole.report["summary"]["turns"]


def test_keep_passed_on_shards_merges_into_the_complete_report(project: Project) -> None:
    report = first_run(project)
    fix_everything(project)
    paths = []
    for number in (1, 2, 3):
        result = project.run(
            "run",
            "suite.yaml",
            "--rerun-failed",
            str(report),
            "--keep-passed",
            "--shard",
            f"{number}/3",
            "-o",
            f"s{number}",
        )
        assert result.code == 0, result.err
        paths.append(f"s{number}/report.json")
    merged = project.run("merge", *paths, "-o", "merged")
    assert merged.code == 0, merged.err
    data = json.loads((project.root / "merged" / "report.json").read_text())
    assert [(r["name"], r["outcome"]) for r in data["results"]] == [
        ("p0", "passed"),
        ("f1", "passed"),
        ("p2", "passed"),
        ("e3", "passed"),
        ("p4", "passed"),
    ]


@pytest.mark.parametrize("layout", ["as-written", "jq-sorted", "results-first"])
def test_the_selection_and_kept_results_come_from_an_index_of_the_report(
    project: Project, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier report, in any layout, is read as an index: the kept results are read
    from its file when asked for, and equal what reading it whole gives."""
    from multiturn_eval.loaded import PlannedSuite
    from multiturn_eval.loader import load_suites
    from multiturn_eval.reports.reader import parse_report
    from multiturn_eval.scheduler import rerun_selection
    from multiturn_eval.stored import KeptResults

    report = first_run(project)
    data = json.loads(report.read_text())
    if layout == "jq-sorted":
        report.write_text(json.dumps(data, indent=4, sort_keys=True))
    elif layout == "results-first":
        report.write_text(json.dumps({"results": data.pop("results"), **data}))
    whole = parse_report(report.read_text())
    monkeypatch.chdir(project.root)
    loaded = load_suites([Path("suite.yaml")], {})
    once = SimpleNamespace(repeat=1)  # the one setting the selection reads
    plan = [PlannedSuite(s, once, list(range(len(s.cases)))) for s in loaded]  # type: ignore[arg-type]
    kept = rerun_selection(plan, report, keep_passed=True)
    assert isinstance(kept, KeptResults)
    assert plan[0].indices == [1, 3]
    assert sorted(kept) == [(0, 0), (0, 2), (0, 4)]
    assert [kept[k] for k in sorted(kept)] == [whole.results[i] for i in (0, 2, 4)]
    assert dict(kept.restricted([(0, 2)])) == {(0, 2): whole.results[2]}


def test_keep_passed_into_the_directory_of_the_report_it_reruns(project: Project) -> None:
    """`-o` the earlier report's own directory: the new report.json replaces the one the
    kept results are read from while the run writes; they are still the earlier ones."""
    report = first_run(project)
    earlier = json.loads(report.read_text())
    fix_everything(project)
    result = keep_passed(project, report, "first")
    assert result.code == 0, result.err
    again = json.loads(report.read_text())
    assert [r["outcome"] for r in again["results"]] == ["passed"] * 5
    assert [again["results"][i] for i in (0, 2, 4)] == [earlier["results"][i] for i in (0, 2, 4)]
