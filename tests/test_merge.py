"""``multiturn-eval merge``: N shard reports -> the report an unsharded run writes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.merge import merge_reports
from multiturn_eval.results import CaseResult, Report, RunInfo, ShardInfo
from multiturn_eval.rollup import summarize
from multiturn_eval.sharding import ShardItem, assign, case_keys, split_id
from tests.agents import scripted_case
from tests.conftest import Project

SUITE = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric}]
test_cases:
"""


def random_case(rng: random.Random, i: int) -> str:
    turns = rng.randint(1, 4)
    steps: list[dict[str, Any]] = []
    body = []
    for _ in range(turns):
        kind = rng.random()
        if kind < 0.1:
            steps.append({"raise": "bug"})  # an errored turn
        else:
            steps.append({"response": "1"})
        truth = 1 if rng.random() < 0.75 else 2
        body.append(f"{{input: q, ground_truth: {truth}}}")
    name = f"case-{rng.randint(0, 10**6)}" if rng.random() < 0.9 else "same-name"
    return (
        f"  - {{name: {name}, context: {{script: {json.dumps(steps)}}}, "
        f"turns: [{', '.join(body)}]}}\n"
    )


def write_random_suites(project: Project, rng: random.Random) -> list[str]:
    names = []
    for s in range(rng.randint(1, 3)):
        name = f"suite{s}.yaml"
        cases = "".join(random_case(rng, i) for i in range(rng.randint(1, 12)))
        project.write(name, SUITE + cases)
        names.append(name)
    return names


def verdicts(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (r["suite"], r["index"], r["name"], r["outcome"], r["passed"], r["errors"])
        for r in report["results"]
    ]


def timeless_summary(report: dict[str, Any]) -> dict[str, Any]:
    return dict(report["summary"])


def run_shards(project: Project, suites: list[str], total: int, prefix: str = "s") -> list[str]:
    paths = []
    for number in range(1, total + 1):
        result = project.run(
            "run", *suites, "--shard", f"{number}/{total}", "-o", f"{prefix}{number}"
        )
        assert result.code in (0, 1), result.err
        paths.append(f"{prefix}{number}/report.json")
    return paths


def test_merging_shards_equals_the_unsharded_run_over_random_suites(project: Project) -> None:
    rng = random.Random(20261201)
    for iteration in range(30):
        suites = write_random_suites(project, rng)
        total = rng.randint(1, 6)
        whole = project.run("run", *suites, "-o", f"whole{iteration}", "-p", str(rng.randint(1, 4)))
        assert whole.code in (0, 1), whole.err
        shards = run_shards(project, suites, total, prefix=f"i{iteration}s")
        rng.shuffle(shards)  # the order of the files does not matter
        merged = project.run("merge", *shards, "-o", f"merged{iteration}")
        assert merged.code == whole.code, (iteration, merged.out, merged.err)
        report = json.loads((project.root / f"merged{iteration}" / "report.json").read_text())
        expected = whole.report
        assert verdicts(report) == verdicts(expected), iteration
        assert timeless_summary(report) == timeless_summary(expected), iteration
        assert report["run"]["complete"] is True
        assert report["run"]["suites"] == expected["run"]["suites"]
        assert "shard" not in report["run"]


def test_merge_writes_every_format_and_one_summary_line(project: Project) -> None:
    project.write(
        "a.yaml", SUITE + random_case(random.Random(1), 0) * 1 + random_case(random.Random(2), 1)
    )
    shards = run_shards(project, ["a.yaml"], 2)
    result = project.run("merge", *shards, "-o", "merged")
    assert result.code in (0, 1)
    assert result.out.startswith("multiturn-eval: merged: 2 test cases")
    names = {p.name for p in (project.root / "merged").iterdir()}
    assert {"report.json", "junit.xml", "summary.md", "report.html"} <= names


def test_a_glob_of_downloaded_artifacts_is_accepted(project: Project) -> None:
    project.write("a.yaml", SUITE + "".join(random_case(random.Random(i), i) for i in range(5)))
    run_shards(project, ["a.yaml"], 3, prefix="artifacts/shard-")
    result = project.run("merge", "artifacts/*/report.json", "-o", "merged")
    assert result.code in (0, 1), result.err
    assert "5 test cases" in result.out


# ----------------------------------------------------------------------- refusals


@pytest.fixture
def three_shards(project: Project) -> list[str]:
    project.write("a.yaml", SUITE + "".join(random_case(random.Random(i), i) for i in range(9)))
    return run_shards(project, ["a.yaml"], 3)


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def refused(project: Project, *args: str) -> str:
    result = project.run("merge", *args, "-o", "merged")
    assert result.code == 2, (result.out, result.err)
    assert "configuration error" in result.err
    assert not (project.root / "merged").exists()  # nothing written
    return result.err


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "shard 3/3 missing"),
        ("duplicate", "shard 2/3 is given more than once"),
        ("changed-suite", "suite a.yaml differs between the shards"),
        ("other-split", "shards of different splits"),
        ("other-total", "shards of different splits"),
        ("not-a-shard", "not a shard report"),
        ("not-json", "not JSON"),
        ("no-file", "does not exist"),
        ("same-case-twice", "is in two reports"),
        ("other-suites", "ran the suites"),
    ],
)
def test_merge_refuses_shards_that_do_not_make_one_run_naming_the_files(
    project: Project, three_shards: list[str], case: str, expected: str
) -> None:
    s1, s2, s3 = three_shards
    args = [s1, s2, s3]
    root = project.root
    named = [s3]
    if case == "missing":
        args = [s1, s2]
        named = [s1, s2]
    elif case == "duplicate":
        (root / "copy").mkdir()
        (root / "copy" / "report.json").write_text((root / s2).read_text())
        args = [s1, s2, "copy/report.json", s3]
        named = [s2, "copy/report.json"]
    elif case == "changed-suite":
        project.write("a.yaml", (root / "a.yaml").read_text() + "# edited between the jobs\n")
        project.run("run", "a.yaml", "--shard", "3/3", "-o", "s3")
    elif case == "other-split":
        project.write("a.yaml", (root / "a.yaml").read_text() + random_case(random.Random(99), 9))
        project.run("run", "a.yaml", "--shard", "3/3", "-o", "s3")
    elif case == "other-total":
        project.run("run", "a.yaml", "--shard", "3/4", "-o", "s3")
    elif case == "not-a-shard":
        project.run("run", "a.yaml", "-o", "s3")
    elif case == "not-json":
        (root / s3).write_text("{not json")
    elif case == "no-file":
        args = [s1, s2, "nowhere/report.json"]
        named = ["nowhere/report.json"]
    elif case == "same-case-twice":
        first = json.loads((root / s1).read_text())["results"][0]
        _edit(root / s3, lambda d: d["results"].append(first))
        named = [s1, s3]
    elif case == "other-suites":
        _edit(root / s3, lambda d: d["run"].update(suites=["b.yaml"]))
    err = refused(project, *args)
    assert expected in err
    for name in named:
        assert name in err, (name, err)


def test_allow_partial_marks_the_merged_report_incomplete_in_every_format(
    project: Project, three_shards: list[str]
) -> None:
    s1, s2, _ = three_shards
    result = project.run("merge", s1, s2, "-o", "merged", "--allow-partial")
    assert result.code == 3, result.err
    assert "INCOMPLETE" in result.out and "3/3 missing" in result.out
    out = project.root / "merged"
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["complete"] is False
    assert report["run"]["missing_shards"] == [3]
    assert "shard 3/3 missing" in report["run"]["stop_reason"]
    expected = len(json.loads((project.root / s1).read_text())["results"]) + len(
        json.loads((project.root / s2).read_text())["results"]
    )
    assert report["summary"]["total"] == expected
    for name in ("summary.md", "report.html", "junit.xml"):
        assert "3/3 missing" in (out / name).read_text(), name


def test_an_interrupted_shard_makes_the_merge_exit_3(
    project: Project, three_shards: list[str]
) -> None:
    s1, s2, s3 = three_shards
    _edit(
        project.root / s2,
        lambda d: d["run"].update(complete=False, stop_reason="interrupted by SIGTERM"),
    )
    result = project.run("merge", s1, s2, s3, "-o", "merged")
    assert result.code == 3
    report = json.loads((project.root / "merged" / "report.json").read_text())
    assert report["run"]["complete"] is False
    assert "shard 2/3 did not complete (interrupted by SIGTERM)" in report["run"]["stop_reason"]


def test_the_shards_spend_caps_add_up_in_the_merged_report(project: Project) -> None:
    steps, turns = [{"response": "1", "cost": 0.5}], ["{input: q, ground_truth: 1}"]
    project.write("a.yaml", SUITE + "".join(scripted_case(f"c{i}", steps, turns) for i in range(8)))
    paths = []
    for number in (1, 2):
        result = project.run(
            "run", "a.yaml", "--shard", f"{number}/2", "--max-cost", "1", "-o", f"s{number}"
        )
        assert result.code == 1
        paths.append(f"s{number}/report.json")
    merged = project.run("merge", *paths, "-o", "merged")
    assert merged.code == 1
    report = json.loads((project.root / "merged" / "report.json").read_text())
    assert report["run"]["spend_cap"] == {
        "max_cost_usd": 2.0,
        "spent_usd": 2.0,
        "reached": True,
        "not_started": 4,
    }
    assert report["summary"]["skipped"] == 4


def _result(suite: str, index: int, rng: random.Random) -> CaseResult:
    outcome = rng.choice(["passed", "passed", "failed", "error", "skipped"])
    return CaseResult(
        index=index,
        name=f"case-{rng.randint(0, 9)}",  # duplicate names on purpose
        suite=suite,
        suite_name=suite.removesuffix(".yaml"),
        backend="python",
        passed=outcome == "passed",
        skipped=outcome == "skipped",
        outcome=outcome,
        cost_usd=rng.choice([None, 0.01]),
    )


def test_merge_reports_restores_suite_order_for_any_split() -> None:
    """The pure merge over 300 random suite sets, split as the runner splits them."""
    rng = random.Random(7)
    for _ in range(300):
        suites = [f"dir/s{i}.yaml" for i in rng.sample(range(20), rng.randint(1, 4))]
        results = [_result(s, i, rng) for s in suites for i in range(rng.randint(0, 15))]
        total = rng.randint(1, 9)
        keys = {}
        for s in suites:
            mine = [r for r in results if r.suite == s]
            keys.update(
                zip(
                    ((r.suite, r.index) for r in mine),
                    case_keys(s, [r.name for r in mine]),
                    strict=True,
                )
            )
        items = [ShardItem(keys[(r.suite, r.index)], rng.randint(1, 12)) for r in results]
        shards = assign(items, total)
        sid = split_id(items, total)
        reports = []
        for number in range(total):
            mine = [r for r, sh in zip(results, shards, strict=True) if sh == number]
            rng.shuffle(mine)  # completion order; the merge sorts
            reports.append((f"shard-{number}", _shard(suites, number + 1, total, mine, sid)))
        rng.shuffle(reports)
        merged = merge_reports(reports)
        assert merged.results == results
        assert merged.summary == summarize(results)
        assert merged.run.complete and merged.run.missing_shards is None
        assert merged.run.duration_ms == (total - 1) * 60_000


def _shard(
    suites: list[str], number: int, total: int, mine: list[CaseResult], split_id: str = "x"
) -> Report:
    """Shard ``number`` of ``total`` (of split ``split_id``) holding the results ``mine``."""
    run = RunInfo(
        suites=suites,
        started_at="2026-12-01T10:00:00.000Z",
        finished_at=f"2026-12-01T10:0{number - 1}:00.000Z",
        duration_ms=1.0,
        complete=True,
        shard=ShardInfo(index=number, total=total, split_id=split_id),
        suite_hashes={s: "sha256:x" for s in suites},
    )
    return Report(run=run, summary=summarize(mine), results=mine)


def test_shards_read_from_files_merge_as_the_same_shards_in_memory(tmp_path: Path) -> None:
    """merge over report.json files (read as indexes, results read back one at a time) gives
    the report the in-memory merge gives, for shards given in any order."""
    from multiturn_eval.merge import load_shards
    from multiturn_eval.reports.json_report import render_json
    from multiturn_eval.stored import StoredAcross

    rng = random.Random(23)
    for attempt in range(40):
        suites = [f"s{i}.yaml" for i in rng.sample(range(6), rng.randint(1, 3))]
        results = [_result(s, i, rng) for s in suites for i in range(rng.randint(0, 9))]
        total = rng.randint(1, 5)
        placed = [rng.randrange(total) for _ in results]
        reports = []
        for number in range(total):
            mine = [r for r, sh in zip(results, placed, strict=True) if sh == number]
            rng.shuffle(mine)
            reports.append((f"shard-{number}", _shard(suites, number + 1, total, mine)))
        rng.shuffle(reports)
        paths = []
        for name, report in reports:
            path = tmp_path / f"{attempt}-{name}.json"
            path.write_text(render_json(report), encoding="utf-8")
            paths.append(path)
        from_files = merge_reports(load_shards(paths))
        in_memory = merge_reports([(str(p), r) for p, (_, r) in zip(paths, reports, strict=True)])
        assert isinstance(from_files.results, StoredAcross)
        assert from_files.results == results == in_memory.results
        assert list(from_files.results[1:-1]) == results[1:-1]
        assert render_json(from_files) == render_json(in_memory)


def test_the_same_case_in_two_shard_files_is_refused_naming_both(tmp_path: Path) -> None:
    from multiturn_eval.errors import ConfigError
    from multiturn_eval.merge import load_shards
    from multiturn_eval.reports.json_report import render_json

    rng = random.Random(5)
    case = _result("s.yaml", 3, rng)
    paths = []
    for number in (1, 2):
        mine = [case, _result("s.yaml", 10 + number, rng)]
        path = tmp_path / f"shard{number}.json"
        path.write_text(render_json(_shard(["s.yaml"], number, 2, mine)))
        paths.append(path)
    with pytest.raises(
        ConfigError, match=r"index 3\) is in two reports: .*shard1\.json, .*shard2\.json"
    ):
        merge_reports(load_shards(paths))
