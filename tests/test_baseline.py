"""``--baseline``: a run compared with an earlier report; ``--fail-on regressions``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.comparison import ALPHA, MIN_DROP, compare, fisher_one_sided
from multiturn_eval.github.decisions import choose_baseline
from multiturn_eval.reports.json_report import render_json
from multiturn_eval.reports.junit import render_junit
from multiturn_eval.reports.markdown import render_markdown
from multiturn_eval.reports.reader import parse_report
from multiturn_eval.results import CaseResult, RepeatSummary, Report, TurnPassCount
from tests.conftest import Project
from tests.reports_fixtures import case, metric, not_run, report, turn
from tests.test_action_entrypoint import Runner, Step, github, runner

__all__ = ["github", "runner"]  # the fixtures, used by name


def _turn(i: int, ok: bool, text: str = "q") -> Any:
    check = metric(passed=ok, reason=None if ok else f"expected {i}, got {i + 1}")
    return turn(i, f"{text} {i}", "ans", ground_truth=str(i), metrics=[check], tokens=10)


def _case(index: int, name: str, *oks: bool, **kw: Any) -> CaseResult:
    return case(index, name, [_turn(i, ok) for i, ok in enumerate(oks)], **kw)


def _classes(current: Report, baseline: Report) -> dict[str, str]:
    return {f"{c.name}#{c.occurrence}": c.change for c in compare(current, baseline).cases}


# ------------------------------------------------------------------------ classes


#: one case of each class of change: its turns' verdicts before and after (None: no such case;
#: NOT_RUN: interrupted before it ran), and the change the comparison finds
NOT_RUN = "not run"
CHANGES: list[tuple[str, tuple[bool, ...] | None, tuple[bool, ...] | str | None, str]] = [
    ("regresses", (True, True), (True, False), "regressed"),
    ("gets-fixed", (True, False), (True, True), "fixed"),
    ("still-failing", (False,), (False,), "still_failing"),
    ("still-passing", (True,), (True,), "still_passing"),
    ("goes-away", (True,), None, "removed"),
    ("brand-new", None, (True,), "new"),
    ("interrupted-now", (True,), NOT_RUN, "not_run"),
]


def test_every_class_of_change_on_a_constructed_pair() -> None:
    before = report([_case(i, name, *oks) for i, (name, oks, _, _) in enumerate(CHANGES) if oks])
    after = report(
        [
            not_run(i, name, ["q 0"], "interrupted") if oks == NOT_RUN else _case(i, name, *oks)
            for i, (name, _, oks, _) in enumerate(CHANGES)
            if oks
        ]
    )
    comparison = compare(after, before, "base.json")
    assert {c.name: c.change for c in comparison.cases} == {
        name: change for name, _, _, change in CHANGES
    }
    assert comparison.counts == {
        "regressed": 1,
        "fixed": 1,
        "still_failing": 1,
        "still_passing": 1,
        "new": 1,
        "removed": 1,
        "not_run": 1,
        "within_noise": 0,
    }
    regressed = comparison.cases[0]
    assert [(t.turn_index, t.change) for t in regressed.turns] == [
        (0, "still_passing"),
        (1, "regressed"),
    ]
    assert regressed.turns[1].before == "passed" and regressed.turns[1].after == "failed"
    assert regressed.turns[1].failing_check == "numeric: expected 1, got 2"
    assert regressed.failing_check == "turn 2: numeric: expected 1, got 2"
    fixed = comparison.cases[1]
    assert [t.change for t in fixed.turns] == ["still_passing", "fixed"]
    assert comparison.cases[-1].name == "goes-away"  # removed ones last
    assert comparison.file == "base.json"
    assert comparison.run == before.run


def test_turns_added_or_removed_within_a_case() -> None:
    before = report([_case(0, "a", True, True, True)])
    after = report([_case(0, "a", True, True)])
    [change] = compare(after, before).cases
    assert [t.change for t in change.turns] == ["still_passing", "still_passing", "removed"]
    [change] = compare(before, after).cases
    assert [t.change for t in change.turns] == ["still_passing", "still_passing", "new"]


def test_a_legacy_single_turn_case_is_turn_0() -> None:
    before = report([_case(0, "legacy", True, legacy=True)])
    after = report([_case(0, "legacy", False, legacy=True)])
    [change] = compare(after, before).cases
    assert change.change == "regressed"
    assert [(t.turn_index, t.change) for t in change.turns] == [(0, "regressed")]


def test_reordered_cases_match_by_name_and_renamed_ones_are_removed_and_new() -> None:
    before = report([_case(0, "x", True), _case(1, "y", False), _case(2, "old-name", True)])
    after = report([_case(0, "y", True), _case(1, "new-name", True), _case(2, "x", True)])
    comparison = compare(after, before)
    assert {c.name: c.change for c in comparison.cases} == {
        "y": "fixed",
        "x": "still_passing",
        "new-name": "new",
        "old-name": "removed",
    }
    by = {c.name: c for c in comparison.cases}
    assert (by["x"].index, by["x"].baseline_index) == (2, 0)


def test_the_same_name_in_another_suite_is_another_case() -> None:
    before = report([_case(0, "a", True, suite="s1.yaml")])
    after = report([_case(0, "a", False, suite="s2.yaml")])
    assert sorted(c.change for c in compare(after, before).cases) == ["new", "removed"]


def test_duplicate_names_match_by_occurrence_with_a_warning() -> None:
    before = report([_case(0, "dup", True), _case(1, "dup", False), _case(2, "dup", True)])
    after = report([_case(0, "dup", False), _case(1, "dup", True)])
    comparison = compare(after, before)
    assert _classes(after, before) == {"dup#0": "regressed", "dup#1": "fixed", "dup#2": "removed"}
    assert any("3 test cases named 'dup'" in w and "occurrence" in w for w in comparison.warnings)
    assert any(w.startswith("this run: 2 test cases named 'dup'") for w in comparison.warnings)


def test_total_deltas() -> None:
    before = report([_case(0, "a", True), _case(1, "b", True)])
    after = report([_case(0, "a", True), _case(1, "b", False), _case(2, "c", True, True)])
    comparison = compare(after, before)
    assert comparison.pass_rate.before == 1.0
    assert comparison.pass_rate.after == pytest.approx(2 / 3)
    assert comparison.pass_rate.delta == pytest.approx(-1 / 3)
    assert comparison.total_tokens.delta == 20.0  # two more turns of 10 tokens
    assert comparison.cost_usd.delta is None  # no known cost on either side
    assert comparison.duration_ms.delta == 0.0


# ------------------------------------------------------------------------ repeats


def _repeated(index: int, name: str, passes: int, runs: int, min_rate: float = 1.0) -> CaseResult:
    base = _case(index, name, passes == runs)
    rate = passes / runs
    summary = RepeatSummary(
        runs=runs,
        passes=passes,
        pass_rate=rate,
        pass_all=passes == runs,
        pass_any=passes > 0,
        min_pass_rate=min_rate,
        flaky=0 < passes < runs,
        turn_pass_counts=[TurnPassCount(turn_index=0, passed=passes, runs=runs)],
        varying_turns=[0] if 0 < passes < runs else [],
    )
    return base.model_copy(update={"repeat": summary, "passed": rate >= min_rate})


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ((5, 5), (1, 5), "regressed"),  # p = 0.024
        ((5, 5), (2, 5), "within_noise"),  # p = 0.083: the gate flipped, within the noise
        ((5, 5), (4, 5), "within_noise"),  # one flip is never a regression
        ((10, 10), (6, 10), "regressed"),  # p = 0.043
        ((10, 10), (7, 10), "within_noise"),  # p = 0.105
        ((1, 5), (5, 5), "fixed"),
        ((2, 5), (5, 5), "within_noise"),  # nor is it a fix
        ((4, 5), (4, 5), "still_failing"),
        ((5, 5), (5, 5), "still_passing"),
        ((1, 1), (0, 5), "regressed"),  # a single run on one side: the two verdicts decide
        ((3, 3), (0, 1), "regressed"),
        ((2, 3), (1, 1), "fixed"),  # 2/3 failed its gate of 1.0; one pass now
        ((3, 3), (1, 1), "still_passing"),
        ((200, 200), (190, 200), "within_noise"),  # significant, but a drop under MIN_DROP
        ((200, 200), (170, 200), "regressed"),
    ],
)
def test_repeat_aware_noise_margin(
    before: tuple[int, int], after: tuple[int, int], expected: str
) -> None:
    old = report([_repeated(0, "r", *before)])
    new = report([_repeated(0, "r", *after)])
    [change] = compare(new, old).cases
    assert change.change == expected
    assert [t.change for t in change.turns] == [expected]
    assert change.before == f"{before[0]}/{before[1]} passed"


def test_the_gate_decides_still_passing_or_failing_within_the_noise() -> None:
    old = report([_repeated(0, "r", 5, 5, min_rate=0.6)])
    new = report([_repeated(0, "r", 3, 5, min_rate=0.6)])
    [change] = compare(new, old).cases
    assert change.change == "still_passing" and change.p_value is not None


def test_fisher_p_values() -> None:
    assert fisher_one_sided(5, 5, 1, 5) == pytest.approx(6 / 252)
    assert fisher_one_sided(5, 5, 2, 5) == pytest.approx(21 / 252)
    assert fisher_one_sided(1, 5, 5, 5, drop=False) == pytest.approx(6 / 252)
    assert fisher_one_sided(3, 5, 3, 5) > 0.5
    assert 0 < ALPHA < 1 and 0 < MIN_DROP < 1


# ---------------------------------------------------------------- report formats


def _pair() -> tuple[Report, Report]:
    before = report(
        [_case(0, "broke", True, True), _case(1, "mended", False), _case(2, "ok", True)]
    )
    after = report([_case(0, "broke", True, False), _case(1, "mended", True), _case(2, "ok", True)])
    after.baseline = compare(after, before, "base/report.json")
    return before, after


def test_the_comment_leads_with_regressions_then_fixed_then_the_rest_folded() -> None:
    _, after = _pair()
    text = render_markdown(after)
    first_line = text.splitlines()[1]
    assert "1 regression vs baseline" in first_line and "1 fixed" in first_line
    regressions = text.index("Regressions vs baseline (1)")
    fixed = text.index("Fixed vs baseline (1)")
    other = text.index("Other test cases vs baseline")
    failing = text.index("Failing test cases")
    assert regressions < fixed < other < failing
    row = text[regressions:fixed]
    assert "broke" in row and "2 (passed → failed)" in row
    assert "turn 2: numeric: expected 1, got 2" in row
    assert "<details>" in text[fixed:failing]
    assert (
        "| <b>Δ vs baseline</b>: 1 regressed, 1 fixed, 1 still passing | 1 regressed, 1 fixed | ±0.0 pp |"
        in text
    )


@pytest.mark.parametrize("name", ["plain-name", "_*[@everyone](x)|" * 40])
def test_a_comment_with_thousands_of_regressions_stays_under_the_limit(name: str) -> None:
    from multiturn_eval.reports.markdown import MAX_CHARS

    count = 2_000
    before = report([_case(i, f"{name}{i}", True, True) for i in range(count)])
    after = report([_case(i, f"{name}{i}", True, False) for i in range(count)])
    after.baseline = compare(after, before, "base.json")
    after.baseline.warnings = [name * 20] * 10
    text = render_markdown(after)
    assert len(text) < MAX_CHARS
    assert text.index(f"Regressions vs baseline ({count:,})") < text.index("Failing test cases")
    assert "more test cases: every one is in report.html and report.json" in text
    assert "@everyone" not in text


def test_without_a_baseline_the_comment_and_json_are_unchanged() -> None:
    _, after = _pair()
    plain = after.model_copy(update={"baseline": None})
    assert "baseline" not in render_markdown(plain)
    assert '"baseline"' not in render_json(plain)


def test_json_junit_and_html_carry_the_comparison() -> None:
    from multiturn_eval.reports.html import render_html

    _, after = _pair()
    data = json.loads(render_json(after))
    assert data["baseline"]["counts"]["regressed"] == 1
    assert [c["change"] for c in data["baseline"]["cases"]] == [
        "regressed",
        "fixed",
        "still_passing",
    ]
    assert list(data)[-1] == "results"
    assert parse_report(render_json(after)).baseline == after.baseline  # read back exactly
    junit = render_junit(after)
    assert 'message="regressed vs baseline (passed -&gt; failed): turn 2' in junit
    html = render_html(after)
    assert 'data-change="regressed"' in html and 'id="change"' in html
    assert "Δ vs baseline" in html


# ---------------------------------------------------------------- CLI and reader

SUITE = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric}]
test_cases:
  - name: steady
    context: {script: [{response: "1"}]}
    turns: [{input: "s", ground_truth: 1}]
  - name: flips
    context: {script: [{response: "ANSWER"}]}
    turns: [{input: "f", ground_truth: 2}]
  - name: broken
    context: {script: [{response: "0"}]}
    turns: [{input: "b", ground_truth: 3}]
"""


def _suite(project: Project, flips: str) -> None:
    project.write("suite.yaml", SUITE.replace("ANSWER", flips))


def _baseline(project: Project, flips: str) -> Path:
    _suite(project, flips)
    first = project.run("run", "suite.yaml", "-o", "base")
    assert first.code == 1  # "broken" always fails
    return project.root / "base" / "report.json"


@pytest.mark.parametrize(
    ("before", "after", "fail_on", "code"),
    [
        ("2", "9", "regressions", 1),  # flips regresses
        ("2", "2", "regressions", 0),  # only the old failure: the gate passes
        ("9", "2", "regressions", 0),  # fixed
        ("2", "2", "failures", 1),  # the default: any failure
        ("2", "9", "failures", 1),
    ],
)
def test_fail_on_exit_codes_through_the_cli(
    project: Project, before: str, after: str, fail_on: str, code: int
) -> None:
    _baseline(project, before)
    _suite(project, after)
    result = project.run(
        "run", "suite.yaml", "--baseline", "base/report.json", "--fail-on", fail_on
    )
    assert result.code == code, result.out + result.err
    assert "vs baseline base/report.json:" in result.out
    block = result.report["baseline"]
    assert block["file"] == "base/report.json"
    if before != after and before == "2":
        assert block["counts"]["regressed"] == 1
        assert "regressed: suite.yaml › flips (passed -> failed)" in result.out


BAD_BASELINES = [
    pytest.param(None, "does not exist", id="missing"),
    pytest.param("", "not JSON", id="empty"),
    pytest.param("{not json", "not JSON", id="not-json"),
    pytest.param("[1, 2]", "not a multiturn-eval report", id="a-list"),
    pytest.param('{"schema_version": "2", "results": []}', "report schema version '2'", id="v2"),
    pytest.param('{"schema_version": "1", "run": {}}', "not a valid report", id="invalid"),
]


@pytest.mark.parametrize(("content", "why"), BAD_BASELINES)
@pytest.mark.parametrize("fail_on", ["failures", "regressions"])
def test_a_missing_or_unreadable_baseline_is_a_notice_and_the_run_goes_on(
    project: Project, content: str | None, why: str, fail_on: str
) -> None:
    if content is not None:
        project.write("base.json", content)
    _suite(project, "2")
    result = project.run("run", "suite.yaml", "--baseline", "base.json", "--fail-on", fail_on)
    assert result.code == 1  # "broken" fails; without a baseline regressions acts as failures
    assert f"notice: no baseline comparison: base.json: {why}" in result.out
    if fail_on == "regressions":
        assert "without one, any failure fails the run" in result.out
    assert "baseline" not in result.report
    assert result.report["summary"]["total"] == 3


def test_fail_on_regressions_keeps_exit_2_for_configuration_errors(project: Project) -> None:
    project.write("bad.yaml", "agent: {backend: python}\ntest_cases: []\n")
    result = project.run("run", "bad.yaml", "--baseline", "x.json", "--fail-on", "regressions")
    assert result.code == 2


def test_fail_on_rejects_other_values(project: Project) -> None:
    _suite(project, "2")
    with pytest.raises(SystemExit) as exited:
        project.run("run", "suite.yaml", "--fail-on", "sometimes")
    assert exited.value.code == 2
    assert "invalid choice: 'sometimes'" in project.capsys.readouterr().err


def test_a_baseline_from_an_older_schema(project: Project) -> None:
    """A 1.0 report: no later optional fields (github, repeat, baseline), an older minor version."""
    _suite(project, "9")
    old = {
        "schema_version": "1.0",
        "run": {
            "suites": ["suite.yaml"],
            "started_at": "2024-01-01T00:00:00.000Z",
            "finished_at": "2024-01-01T00:00:01.000Z",
            "duration_ms": 1000.0,
            "complete": True,
        },
        "summary": {
            "total": 2,
            "passed": 2,
            "failed": 0,
            "skipped": 0,
            "pass_rate": 1.0,
            "turns": {"total": 2, "passed": 2, "failed": 0, "skipped": 0},
            "token_usage": {},
        },
        "results": [
            {
                "index": i,
                "name": name,
                "suite": "suite.yaml",
                "suite_name": "suite",
                "backend": "python",
                "passed": True,
                "outcome": "passed",
                "turns": [{"turn_index": 0, "input": text, "response": "1", "passed": True}],
                "some_field_from_1_7": {"ignored": True},
            }
            for i, (name, text) in enumerate([("steady", "s"), ("flips", "f")])
        ],
    }
    project.write("old.json", json.dumps(old))
    result = project.run("run", "suite.yaml", "--baseline", "old.json", "--fail-on", "regressions")
    assert result.code == 1
    block = result.report["baseline"]
    assert block["schema_version"] == "1.0"
    assert {c["name"]: c["change"] for c in block["cases"]} == {
        "steady": "still_passing",
        "flips": "regressed",
        "broken": "new",
    }


def test_regrade_with_a_baseline(project: Project) -> None:
    base = _baseline(project, "2")
    result = project.run(
        "regrade", str(base), "-o", "again", "--baseline", str(base), "--fail-on", "regressions"
    )
    assert result.code == 0, result.out + result.err
    data = json.loads((project.root / "again" / "report.json").read_text())
    assert data["baseline"]["counts"]["still_passing"] == 2
    assert data["baseline"]["counts"]["still_failing"] == 1


# ------------------------------------------------------------------------ action


def test_the_newest_of_several_baselines_is_chosen() -> None:
    def at(stamp: str) -> Report:
        made = report([_case(0, "a", True)])
        made.run.finished_at = stamp
        return made

    path, chosen, note = choose_baseline(
        [
            ("a/report.json", at("2025-01-02T00:00:00.000Z")),
            ("b/report.json", at("2025-03-01T00:00:00.000Z")),
        ]
    )
    assert path == "b/report.json" and chosen.run.finished_at.startswith("2025-03")
    assert note is not None and "2 reports match" in note and "b/report.json" in note
    assert choose_baseline([("only.json", at("x"))])[2] is None


# ------------------------------------------------------------- the Action entrypoint


def _all_green(data: dict[str, Any], finished_at: str) -> dict[str, Any]:
    """The report with every case and turn passing: a base branch where nothing failed."""
    for result in data["results"]:
        result.update(passed=True, outcome="passed", errors=[])
        for t in result.get("turns") or []:
            t.update(passed=True, errors=[], metric_results=[], tools_matched=None)
            t["arg_match_details"] = []
    data["run"]["finished_at"] = finished_at
    return data


def test_fail_on_regressions_through_the_action_entrypoint(runner: Runner) -> None:
    first = runner.run({"suite": "evals/failing.yaml"})
    assert first.code == 1
    recorded = json.loads((runner.workspace / "multiturn-eval-report/report.json").read_text())
    (runner.workspace / "baseline").mkdir()
    (runner.workspace / "baseline/report.json").write_text(json.dumps(recorded))

    def against(baseline: str, more: dict[str, str] | None = None) -> Step:
        """The step on the failing suite with ``baseline`` and fail-on: regressions."""
        inputs = {"suite": "evals/failing.yaml", "baseline": baseline, "fail-on": "regressions"}
        return runner.run({**inputs, **(more or {})})

    # the same two failures as the base branch: no regression, the step passes
    same = against("baseline/report.json")
    assert same.code == 0, same.log
    assert same.outputs["failed"] == "2"
    assert "no regression vs baseline" in same.summary

    # several downloaded artifacts: the newest base report (all green) is the baseline
    for name, stamp in [("old", "2020-01-01T00:00:00.000Z"), ("new", "2030-01-01T00:00:00.000Z")]:
        (runner.workspace / "artifacts" / name).mkdir(parents=True)
        (runner.workspace / "artifacts" / name / "report.json").write_text(
            json.dumps(_all_green(json.loads(json.dumps(recorded)), stamp))
        )
    (runner.workspace / "artifacts/old/report.json").write_text(json.dumps(recorded))
    worse = against("artifacts/*/report.json")
    assert worse.code == 1, worse.log
    notices = [n.message for n in worse.annotations("notice")]
    assert any("2 reports match; using the newest, artifacts/new/report.json" in n for n in notices)
    assert worse.summary.index("Regressions vs baseline (2)") < worse.summary.index(
        "Failing test cases"
    )
    report_data = json.loads((runner.workspace / "multiturn-eval-report/report.json").read_text())
    assert report_data["baseline"]["file"] == "artifacts/new/report.json"
    junit = (runner.workspace / "multiturn-eval-report/junit.xml").read_text()
    assert junit.count('message="regressed vs baseline') == 2

    # fail-on-failure: false still passes the step
    lenient = against("artifacts/new/report.json", {"fail-on-failure": "false"})
    assert lenient.code == 0


@pytest.mark.parametrize("baseline", ["nowhere/report.json", "nowhere/*/report.json"])
def test_a_missing_baseline_in_the_action_is_a_notice(runner: Runner, baseline: str) -> None:
    step = runner.run(
        {"suite": "evals/failing.yaml", "baseline": baseline, "fail-on": "regressions"}
    )
    assert step.code == 1  # as fail-on failures: two test cases fail
    notices = [n.message for n in step.annotations("notice")]
    assert any(n.startswith("no baseline comparison:") for n in notices), notices
    if "*" not in baseline:
        assert "no baseline comparison: nowhere/report.json: does not exist" in notices
    else:
        assert "no baseline comparison: no file matches 'nowhere/*/report.json'" in notices
    assert any("without one, any failure fails the step" in n for n in notices)
    assert not step.annotations("error")[0].message.startswith("regressed")


def test_a_bad_fail_on_input_exits_2(runner: Runner) -> None:
    step = runner.run({"suite": "evals/passing.yaml", "fail-on": "never"})
    assert step.code == 2
    assert any("'fail-on'" in (e.properties.get("title") or "") for e in step.annotations("error"))


@pytest.mark.parametrize(
    ("regressed", "failed", "complete", "fail_on", "code"),
    [
        (True, True, True, "regressions", 1),
        (False, True, True, "regressions", 0),
        (True, True, False, "regressions", 3),  # incomplete wins
        (False, False, False, "regressions", 3),
        (False, True, True, "failures", 1),
        (False, False, True, "failures", 0),
    ],
)
def test_exit_codes_combine(
    regressed: bool, failed: bool, complete: bool, fail_on: str, code: int
) -> None:
    from multiturn_eval.exit_codes import exit_code_of

    before = report([_case(0, "a", True), _case(1, "b", not failed)])
    after = report([_case(0, "a", not regressed), _case(1, "b", not failed)], complete=complete)
    after.baseline = compare(after, before)
    assert exit_code_of(after, fail_on) == code


# ------------------------------------------- reports read from files (issue 23)


def _reference_compare(current: Report, baseline: Report, skip: set[tuple[str, str]]) -> Any:
    """The comparison as it was computed before the baseline was indexed: both reports'
    results held in dicts (what the indexed walk must reproduce exactly)."""
    from multiturn_eval import comparison as c

    def keyed(results: Any) -> dict[tuple[str, str, int], CaseResult]:
        seen: dict[tuple[str, str], int] = {}
        out: dict[tuple[str, str, int], CaseResult] = {}
        for r in results:
            n = seen.get((r.suite, r.name), 0)
            seen[(r.suite, r.name)] = n + 1
            out[(r.suite, r.name, n)] = r
        return out

    now, before = keyed(current.results), keyed(baseline.results)
    before = {k: v for k, v in before.items() if k in now or (v.suite, v.name) not in skip}
    cases = [
        c._one_sided(r, k[2]) if before.get(k) is None else c._compare_case(r, before[k], k[2])
        for k, r in now.items()
    ]
    cases += [c._one_sided(r, k[2], removed=True) for k, r in before.items() if k not in now]
    return cases


def _random_pair(rng: Any) -> tuple[Report, Report, set[tuple[str, str]]]:
    names = [f"case-{i}" for i in range(12)] + ["dup", "dup"]
    base: list[CaseResult] = []
    for i in range(rng.randint(0, 14)):
        oks = [rng.random() < 0.7 for _ in range(rng.randint(1, 3))]
        base.append(_case(i, rng.choice(names), *oks, suite=rng.choice(["a.yaml", "b.yaml"])))
    now: list[CaseResult] = []
    for i, old in enumerate(base):
        roll = rng.random()
        if roll < 0.15:
            continue  # removed
        name = old.name + "-renamed" if roll < 0.3 else old.name
        oks = [rng.random() < 0.7 for _ in range(rng.randint(1, 3))]
        now.append(_case(i, name, *oks, suite=old.suite))
    for j in range(rng.randint(0, 3)):  # added
        now.append(_case(100 + j, f"new-{j}", rng.random() < 0.5, suite="a.yaml"))
    rng.shuffle(now)  # reordered
    skip = {(c.suite, c.name) for c in base if rng.random() < 0.1}
    return report(now), report(base), skip


def test_a_baseline_read_from_a_file_compares_as_both_reports_held_in_memory(
    tmp_path: Path,
) -> None:
    """Cases added, removed, renamed, reordered, duplicated, not selected: the comparison of
    two report.json files (read as indexes) equals the held-in-memory one."""
    import random

    from multiturn_eval.reports.reader import load_report
    from multiturn_eval.stored import StoredResults

    rng = random.Random(2323)
    for attempt in range(150):
        current, baseline, skip = _random_pair(rng)
        files = []
        for name, r in (("current", current), ("baseline", baseline)):
            path = tmp_path / f"{attempt}-{name}.json"
            path.write_text(render_json(r), encoding="utf-8")
            files.append(load_report(path))
        on_disk = compare(files[0], files[1], "b.json", not_selected=skip)
        assert isinstance(files[1].results, StoredResults)
        held = compare(current, baseline, "b.json", not_selected=skip)
        assert on_disk == held, attempt
        assert on_disk.cases == _reference_compare(current, baseline, skip), attempt
