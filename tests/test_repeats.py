"""``--repeat K`` (SPEC 6.6): K fresh sessions per test case, pass^K / pass@K, flaky turns named.

The agent is :mod:`tests.flaky_agents`: seeded random (or scripted per
session) right and wrong answers, so the expected pass counts are computed
from the same draws the agent makes, whatever order ``-p`` runs them in.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from multiturn_eval.results import CaseResult, Report
from multiturn_eval.rollup import aggregate_runs, gate_passed
from tests import agents, flaky_agents
from tests.case_results import case_result
from tests.conftest import Project

ROOT = Path(__file__).resolve().parent.parent
XSD = ROOT / "tests" / "data" / "junit" / "junit-10-with-location.xsd"
FORMATS = ("json", "junit", "markdown", "html")

HEAD = """\
agent: {backend: python, factory: "tests.flaky_agents:flaky"}
evaluations: [{type: standard, metric: numeric}]
"""


@pytest.fixture(autouse=True)
def _fresh_agent() -> Iterator[None]:
    flaky_agents.reset()
    yield
    flaky_agents.reset()


def flaky_case(name: str, answers: list[int], **context: Any) -> dict[str, Any]:
    return {
        "name": name,
        "context": {"answers": answers, **context},
        "turns": [{"input": f"{name} q{i + 1}", "ground_truth": a} for i, a in enumerate(answers)],
    }


def write_suite(
    project: Project, cases: list[dict[str, Any]], execution: dict[str, Any] | None = None
) -> None:
    extra = f"execution: {json.dumps(execution)}\n" if execution else ""
    project.write("suite.yaml", HEAD + extra + "test_cases: " + json.dumps(cases) + "\n")


def expected_counts(context: dict[str, Any], case: str, runs: int, turns: int) -> list[int]:
    """How many of ``runs`` sessions the agent answers each turn right in (its own draws)."""
    return [
        sum(flaky_agents.turn_is_right(context, case, n, t) for n in range(runs))
        for t in range(turns)
    ]


def read(out: Path) -> dict[str, str]:
    return {
        name: (out / name).read_text(encoding="utf-8")
        for name in ("report.json", "junit.xml", "summary.md", "report.html")
    }


# ------------------------------------------------------------------- the verdict


SEEDED = {"seed": 7, "pass_probability": {"1": 0.5}}


def test_seeded_flaky_agent_pass_hat_k_below_pass_at_k_and_the_varying_turn_is_named(
    project: Project,
) -> None:
    k = 8
    counts = expected_counts(SEEDED, "coin", k, 3)
    assert 0 < counts[1] < k and counts[0] == counts[2] == k  # the seed makes turn 2 vary
    write_suite(
        project,
        [flaky_case("steady", [1, 2, 3]), flaky_case("coin", [4, 5, 6], **SEEDED)],
    )
    result = project.run("run", "suite.yaml", "--repeat", str(k), "-p", "3", formats=FORMATS)
    assert result.code == 1, result.out  # min_pass_rate 1.0: the flaky case fails

    report = Report.model_validate_json((result.report_dir / "report.json").read_text())
    steady, coin = report.results
    assert steady.repeat is not None and coin.repeat is not None
    assert (steady.repeat.pass_all, steady.repeat.pass_any, steady.repeat.flaky) == (
        True,
        True,
        False,
    )
    assert steady.passed
    assert [c.passed for c in coin.repeat.turn_pass_counts] == counts
    assert coin.repeat.passes == counts[1] and coin.repeat.runs == k
    assert (coin.repeat.pass_all, coin.repeat.pass_any, coin.repeat.flaky) == (False, True, True)
    assert coin.repeat.varying_turns == [1]
    assert not coin.passed and coin.outcome == "failed"
    totals = report.summary.repeat
    assert totals is not None
    assert (totals.pass_all, totals.pass_any, totals.flaky, totals.case_runs) == (1, 2, 1, 2 * k)
    assert totals.pass_all_rate is not None and totals.pass_any_rate is not None
    assert totals.pass_all_rate < totals.pass_any_rate
    # summary counts stay test cases
    assert (report.summary.total, report.summary.passed, report.summary.failed) == (2, 1, 1)

    # every run is kept, with its own turns; the top level is a failing run
    assert coin.runs is not None and [r.run_index for r in coin.runs] == list(range(k))
    assert sum(r.passed for r in coin.runs) == counts[1]
    assert all(len(r.turns) == 3 for r in coin.runs)
    assert coin.turns is not None and not coin.turns[1].passed

    named = f"turn 2 passed {counts[1]} of {k}"
    files = read(result.report_dir)
    assert named in result.out  # the console's case line
    assert f"{counts[1]}/{k} runs" in result.out
    junit = ET.fromstring(files["junit.xml"])
    [failure] = junit.iter("failure")
    assert (
        named in failure.attrib["message"]
        and f"{counts[1]}/{k} runs passed" in (failure.attrib["message"])
    )
    assert named in (failure.text or "")
    assert "#### Flaky" in files["summary.md"]
    flaky_section = files["summary.md"].split("#### Flaky", 1)[1]
    assert "coin" in flaky_section and named in flaky_section and "steady" not in flaky_section
    assert f"pass^{k}" in files["summary.md"] and f"pass@{k}" in files["summary.md"]
    assert named in files["report.html"]
    xmlschema.XMLSchema(XSD).validate(files["junit.xml"])


def test_a_flaky_case_that_passes_the_gate_is_still_listed_as_flaky(project: Project) -> None:
    write_suite(
        project,
        [flaky_case("wobbly", [1, 2, 3], fail_in_sessions={"2": [0]})],
        execution={"min_pass_rate": 0.75},
    )
    result = project.run("run", "suite.yaml", "--repeat", "4", formats=FORMATS)
    assert result.code == 0, result.out
    files = read(result.report_dir)
    [case] = json.loads(files["report.json"])["results"]
    assert case["passed"] and case["repeat"]["flaky"] and case["repeat"]["passes"] == 3
    # the top level is a passing run when the case passed (run 0 failed here)
    assert all(t["passed"] for t in case["turns"])
    assert "#### Flaky" in files["summary.md"] and "turn 3 passed 3 of 4" in files["summary.md"]
    junit = ET.fromstring(files["junit.xml"])
    [testcase] = junit.iter("testcase")
    assert testcase.find("failure") is None and testcase.find("error") is None
    flaky = testcase.find("flakyFailure")
    assert flaky is not None and "turn 3 passed 3 of 4" in flaky.attrib["message"]
    out = testcase.find("system-out")
    assert out is not None and "flaky" in (out.text or "")
    xmlschema.XMLSchema(XSD).validate(files["junit.xml"])
    assert "flaky: turn 3 passed 3 of 4" in result.out


@pytest.mark.parametrize(
    ("runs", "failing", "rate", "passes_gate"),
    [
        (5, [3, 4], 0.6, True),  # 3/5 exactly at the rate
        (5, [3, 4], 0.61, False),  # just below it
        (5, [3, 4], 0.59, True),
        (5, [3, 4], 1.0, False),  # the default: every run must pass
        (10, [0, 1, 2], 0.7, True),  # 7/10 exactly
        (10, [0, 1, 2, 3], 0.7, False),  # 6/10 just below
        (3, [1], 0.6666666666666666, True),  # 2/3 at a rate written as a float
        (3, [1], 0.6667, False),
        (4, [0, 1, 2, 3], 0.01, False),  # no run passed: pass@K false fails any gate
        (4, [], 1.0, True),
    ],
)
def test_min_pass_rate_edges(
    project: Project, runs: int, failing: list[int], rate: float, passes_gate: bool
) -> None:
    write_suite(
        project,
        [flaky_case("edge", [1, 2], fail_in_sessions={"1": failing})],
        execution={"min_pass_rate": rate},
    )
    result = project.run("run", "suite.yaml", "--repeat", str(runs), formats=("json", "junit"))
    assert result.code == (0 if passes_gate else 1), result.out
    [case] = result.report["results"]
    assert case["passed"] is passes_gate
    assert case["repeat"]["passes"] == runs - len(failing)
    assert case["repeat"]["min_pass_rate"] == rate
    junit = ET.fromstring((result.report_dir / "junit.xml").read_text())
    assert (junit.find(".//failure") is None) is passes_gate


def test_gate_passed_is_exact_at_the_edge() -> None:
    for runs in range(1, 60):
        for passes in range(runs + 1):
            rate = passes / runs
            if passes:
                assert gate_passed(passes, runs, rate), (passes, runs)
            if passes < runs:
                assert not gate_passed(passes, runs, (passes + 1) / runs), (passes, runs)


# ------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("cli", "suite", "env", "runs"),
    [
        (["--repeat", "2"], {"repeat": 3}, {"MULTITURN_EVAL_REPEAT": "4"}, 2),
        ([], {"repeat": 3}, {"MULTITURN_EVAL_REPEAT": "4"}, 3),
        ([], None, {"MULTITURN_EVAL_REPEAT": "4"}, 4),
    ],
)
def test_repeat_precedence_cli_suite_env(
    project: Project, cli: list[str], suite: dict[str, Any] | None, env: dict[str, str], runs: int
) -> None:
    write_suite(project, [flaky_case("a", [1])], execution=suite)
    result = project.run("run", "suite.yaml", *cli, env=env)
    assert result.code == 0, result.out
    [case] = result.report["results"]
    assert case["repeat"]["runs"] == runs and len(case["runs"]) == runs
    assert flaky_agents.SESSIONS == {"a": runs}


def test_min_pass_rate_from_the_environment_unless_the_suite_says(project: Project) -> None:
    env = {"MULTITURN_EVAL_MIN_PASS_RATE": "0.5"}
    cases = [flaky_case("half", [1], fail_in_sessions={"0": [0]})]
    write_suite(project, cases)
    assert project.run("run", "suite.yaml", "--repeat", "2", env=env).code == 0
    flaky_agents.reset()
    write_suite(project, cases, execution={"min_pass_rate": 1.0})
    assert project.run("run", "suite.yaml", "--repeat", "2", env=env).code == 1


@pytest.mark.parametrize("value", ["0", "-1", "1025", "x", "1.5", ""])
def test_bad_repeat_on_the_command_line_is_a_usage_error(project: Project, value: str) -> None:
    write_suite(project, [flaky_case("a", [1])])
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        project.run("run", "suite.yaml", "--repeat", value)
    assert exited.value.code == 2
    [line] = project.capsys.readouterr().err.splitlines()
    assert "argument --repeat" in line and "must be a whole number from 1 to 1024" in line
    assert flaky_agents.SESSIONS == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("repeat", 0),
        ("repeat", 1025),
        ("repeat", "many"),
        ("repeat", 2.5),
        ("min_pass_rate", 0),
        ("min_pass_rate", -0.5),
        ("min_pass_rate", 1.01),
        ("min_pass_rate", "most"),
    ],
)
def test_bad_execution_values_are_located_config_errors(
    project: Project, field: str, value: Any
) -> None:
    write_suite(project, [flaky_case("a", [1])], execution={field: value})
    result = project.run("run", "suite.yaml")
    assert result.code == 2, result.out
    assert "suite.yaml:3" in result.err and field in result.err, result.err
    assert "Traceback" not in result.err and flaky_agents.SESSIONS == {}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MULTITURN_EVAL_REPEAT", "0"),
        ("MULTITURN_EVAL_REPEAT", "three"),
        ("MULTITURN_EVAL_MIN_PASS_RATE", "0"),
        ("MULTITURN_EVAL_MIN_PASS_RATE", "1.5"),
        ("MULTITURN_EVAL_MIN_PASS_RATE", "nan"),
        ("MULTITURN_EVAL_MIN_PASS_RATE", "half"),
    ],
)
def test_bad_environment_values_are_config_errors_naming_the_variable(
    project: Project, variable: str, value: str
) -> None:
    write_suite(project, [flaky_case("a", [1])])
    result = project.run("run", "suite.yaml", env={variable: value})
    assert result.code == 2
    assert variable in result.err and "Traceback" not in result.err
    assert flaky_agents.SESSIONS == {}


# ------------------------------------------------------------------- K = 1


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Timestamps and durations fixed, so two runs can be compared byte for byte."""
    import multiturn_eval.reports.writer as writer

    monkeypatch.setattr(time, "perf_counter", lambda: 1000.0)
    monkeypatch.setattr(writer, "now_iso", lambda: "2026-01-01T00:00:00.000Z")


def test_repeat_1_writes_the_same_bytes_as_no_repeat(project: Project, frozen_clock: None) -> None:
    cases = [
        flaky_case("steady", [1, 2]),
        flaky_case("broken", [1, 2], fail_in_sessions={"1": [0]}),
        {"name": "legacy", "context": {"answers": [3]}, "input": "x", "ground_truth": 3},
    ]
    write_suite(project, cases, execution={"parallel_test_cases": 1})  # same lines as below
    plain = project.run("run", "suite.yaml", "-o", "plain", formats=FORMATS)
    flaky_agents.reset()
    repeat = project.run("run", "suite.yaml", "-o", "once", "--repeat", "1", formats=FORMATS)
    flaky_agents.reset()
    write_suite(
        project, cases, execution={"repeat": 1, "min_pass_rate": 0.5, "parallel_test_cases": 1}
    )
    suite_once = project.run("run", "suite.yaml", "-o", "suite", formats=FORMATS)
    assert plain.code == repeat.code == suite_once.code == 1
    assert read(plain.report_dir) == read(repeat.report_dir) == read(suite_once.report_dir)
    assert plain.out == repeat.out.replace("once/", "plain/")
    for case in plain.report["results"]:
        assert "repeat" not in case and "runs" not in case
    assert "repeat" not in plain.report["summary"]
    assert "mean_cost_per_case_run" not in plain.report["summary"]


# ------------------------------------------------------------------- scheduling


@pytest.mark.parametrize("parallel", [1, 2, 7])
def test_runs_share_the_parallel_limit_and_runs_of_a_case_overlap(
    project: Project, parallel: int
) -> None:
    # with -p > 1 every session waits until min(-p, 6) were open at once (or 5 s)
    wait = min(parallel, 6) if parallel > 1 else 0
    write_suite(
        project,
        [flaky_case(name, [1, 2], wait_for_open=wait) for name in ("a", "b")],
    )
    result = project.run("run", "suite.yaml", "--repeat", "3", "-p", str(parallel))
    assert result.code == 0, result.out
    # never more sessions than -p; -p > K: all six runs of "a" and "b" in flight together
    assert flaky_agents.MAX_OPEN == min(parallel, 6)
    assert flaky_agents.SESSIONS == {"a": 3, "b": 3}
    assert [c["name"] for c in result.report["results"]] == ["a", "b"]  # suite order
    for case in result.report["results"]:
        assert [r["run_index"] for r in case["runs"]] == [0, 1, 2]


def test_every_run_gets_a_fresh_session(project: Project) -> None:
    steps = [{"echo_history": True}] * 3
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'tests.agents:scripted'}\ntest_cases: "
        + json.dumps(
            [
                {
                    "name": "chat",
                    "context": {"script": steps},
                    "turns": [{"input": f"m{i}"} for i in range(3)],
                }
            ]
        )
        + "\n",
    )
    result = project.run("run", "suite.yaml", "--repeat", "4", "-p", "4")
    assert result.code == 0, result.out
    [case] = result.report["results"]
    for run in case["runs"]:
        assert [t["response"] for t in run["turns"]] == ["m0", "m0 | m1", "m0 | m1 | m2"]
    assert agents.OPENED == ["chat"] * 4 and agents.CLOSED == ["chat"] * 4


def test_every_flaky_session_saw_only_its_own_messages(project: Project) -> None:
    write_suite(project, [flaky_case("c", [1, 2, 3], delay=0.01)])
    assert project.run("run", "suite.yaml", "--repeat", "5", "-p", "5").code == 0
    assert sorted(n for _, n, _ in flaky_agents.HISTORIES) == list(range(5))
    for _, _, history in flaky_agents.HISTORIES:
        assert history == ["c q1", "c q2", "c q3"]


def test_tokens_and_cost_sum_over_every_run(project: Project) -> None:
    write_suite(project, [flaky_case("a", [1, 2]), flaky_case("b", [1])])
    result = project.run("run", "suite.yaml", "--repeat", "3")
    summary = result.report["summary"]
    a, _ = result.report["results"]
    assert a["token_usage"]["total_tokens"] == 3 * 2 * 15
    assert a["cost_usd"] == pytest.approx(3 * 2 * 0.001)
    assert summary["token_usage"]["total_tokens"] == 3 * 3 * 15
    assert summary["cost_usd"] == pytest.approx(9 * 0.001)
    assert summary["mean_cost_per_case_run"] == pytest.approx(9 * 0.001 / 6)
    assert summary["repeat"]["case_runs"] == 6 and summary["repeat"]["runs_per_case"] == 3
    assert summary["turns"]["total"] == 3  # turn counts are of the runs shown, per case
    assert a["duration_ms"] == pytest.approx(sum(r["duration_ms"] for r in a["runs"]))


def test_the_report_schema_accepts_repeated_and_single_run_reports(project: Project) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    write_suite(project, [flaky_case("a", [1, 2], fail_in_sessions={"0": [1]})])
    once = project.run("run", "suite.yaml", "-o", "once")
    jsonschema.validate(once.report, schema)
    flaky_agents.reset()
    many = project.run("run", "suite.yaml", "-o", "many", "--repeat", "3")
    jsonschema.validate(many.report, schema)


# ------------------------------------------------------------------- aggregation


def _run(passed: list[bool], cost: float | None = 0.5) -> CaseResult:
    from multiturn_eval.results import TurnResult
    from multiturn_eval.rollup import case_outcome

    turns = [
        TurnResult(turn_index=i, input=f"t{i}", passed=p, errors=[] if p else ["bad"])
        for i, p in enumerate(passed)
    ]
    ok = all(passed)
    return case_result(
        passed=ok,
        outcome=case_outcome(ok, False, turns, []),
        turns=turns,
        cost_usd=cost,
        duration_ms=10.0,
    )


def test_aggregate_shows_the_first_failing_run_or_the_first_passing_one() -> None:
    runs = [_run([True, True]), _run([True, False]), _run([False, True])]
    failed = aggregate_runs(runs)
    assert not failed.passed and failed.turns is not None
    assert [t.passed for t in failed.turns] == [True, False]  # run 1, the first failing one
    assert failed.repeat is not None and failed.repeat.varying_turns == [0, 1]
    passed = aggregate_runs(list(reversed(runs)), min_pass_rate=0.3)
    assert passed.passed and passed.outcome == "passed"
    assert passed.turns is not None and all(t.passed for t in passed.turns)  # run 2
    assert passed.cost_usd == pytest.approx(1.5) and passed.duration_ms == pytest.approx(30.0)


def test_aggregate_of_an_unfinished_case_counts_the_finished_runs() -> None:
    combined = aggregate_runs([_run([True]), None, _run([True]), None])
    assert combined.repeat is not None
    assert (combined.repeat.runs, combined.repeat.planned_runs, combined.passed) == (2, 4, True)
    assert combined.runs is not None and [r.run_index for r in combined.runs] == [0, 2]
    assert any("only 2 of 4 runs finished" in w for w in combined.warnings)
    with pytest.raises(ValueError, match="at least one finished run"):
        aggregate_runs([None, None])


def test_unknown_costs_stay_unknown() -> None:
    combined = aggregate_runs([_run([True], cost=None), _run([True], cost=None)])
    assert combined.cost_usd is None


# ------------------------------------------------------------------- interrupted


def test_an_interrupt_during_repeats_still_writes_every_report(tmp_path: Path) -> None:
    marker = tmp_path / "slow-run-started"
    cases = [
        flaky_case("quick", [1, 2]),
        flaky_case("halfway", [1, 2], slow_sessions=[1], marker=str(marker)),
        flaky_case("never", [1]),
    ]
    (tmp_path / "suite.yaml").write_text(HEAD + "test_cases: " + json.dumps(cases) + "\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runner")]),
    }
    env.pop("MULTITURN_EVAL_REPORT_DIR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "multiturn_eval", "run", "suite.yaml", "--repeat", "3", "-o", "out"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the slow run never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, (out, err)
    assert b"Traceback" not in err
    report = Report.model_validate_json((tmp_path / "out" / "report.json").read_text())
    assert not report.run.complete
    quick, halfway, never = report.results
    assert quick.passed and quick.repeat is not None and quick.repeat.runs == 3
    assert halfway.repeat is not None
    assert (halfway.repeat.runs, halfway.repeat.planned_runs) == (1, 3)
    assert any("only 1 of 3 runs finished" in w for w in halfway.warnings)
    assert never.skipped and never.repeat is None
    for name in ("junit.xml", "summary.md", "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    ET.fromstring((tmp_path / "out" / "junit.xml").read_text())
    assert "1/1 runs passed (3 planned)" in (tmp_path / "out" / "report.html").read_text()


# ------------------------------------------------------------------- report.html


def _flaky_html(project: Project) -> str:
    write_suite(
        project,
        [
            flaky_case("steady", [1, 2]),
            flaky_case("wobbly", [1, 2, 3], fail_in_sessions={"1": [1, 2]}),
        ],
    )
    result = project.run("run", "suite.yaml", "--repeat", "4", formats=("json", "html"))
    assert result.code == 1, result.out
    return (result.report_dir / "report.html").read_text(encoding="utf-8")


def test_html_has_a_block_per_run_and_a_pass_rate_strip_without_javascript(
    project: Project,
) -> None:
    from tests.test_reports_html import Elements

    page = _flaky_html(project)
    parsed = Elements(page)
    runs = [a for a in parsed.all("details") if "run" in (a.get("class") or "").split()]
    assert len(runs) == 2 * 4
    assert [a["class"] for a in runs[4:]] == [
        "run passed",
        "run failed",
        "run failed",
        "run passed",
    ]
    assert [("open" in a) for a in runs[4:]] == [False, True, False, False]  # first failing run
    strip = [a["class"] for a in parsed.all("li") if a.get("title")]
    assert strip[-3:] == ["all", "some", "all"]
    assert 'title="turn 2 passed 2 of 4 runs"' in page
    assert "2/4 runs passed" in page and "varied: turn 2 passed 2 of 4" in page
    # every run's turns as static HTML (outside <noscript>), so they read without JS
    outside = re.sub(r"<noscript>.*?</noscript>", "", page, flags=re.DOTALL)
    assert outside.count('<section class="turn') == (2 + 3) * 4
    for _tag, attrs in parsed.elements:
        for name in ("src", "href", "action"):
            value = attrs.get(name)
            assert value is None or value.startswith("data:")


def test_html_runs_open_in_a_browser_without_javascript(project: Project) -> None:
    from tests.test_reports_html import _browser_missing, _driver

    missing = _browser_missing()
    if missing:
        pytest.skip(missing)
    from selenium.webdriver.common.by import By

    page = _flaky_html(project)
    path = project.root / "page.html"
    path.write_text(page, encoding="utf-8")
    driver = _driver(project.root / "profile", javascript=False)
    try:
        driver.get(path.as_uri())
        driver.find_element(By.CSS_SELECTOR, "#case-1 > summary").click()
        runs = driver.find_elements(By.CSS_SELECTOR, "#case-1 details.run")
        assert len(runs) == 4
        open_turns = runs[1].find_elements(By.CSS_SELECTOR, "section.turn")
        assert [t.is_displayed() for t in open_turns] == [True, True, True]
        closed = runs[0].find_elements(By.CSS_SELECTOR, "section.turn")
        assert not any(t.is_displayed() for t in closed)
        runs[0].find_element(By.CSS_SELECTOR, "summary").click()
        assert all(t.is_displayed() for t in closed)
        cells = driver.find_elements(By.CSS_SELECTOR, "#case-1 .strip li")
        assert [c.text for c in cells] == ["turn 1: 4/4", "turn 2: 2/4", "turn 3: 4/4"]
    finally:
        driver.quit()


# ------------------------------------------------------------------- golden files


def repeated_report() -> Report:
    """A hand-built repeated run (no clock): a steady case, a flaky failing one, a flaky
    passing one within its gate, and a case every run of which fails the same turn."""
    from tests.reports_fixtures import case, metric, report, turn

    def numeric(ok: bool, got: str, want: str) -> list[Any]:
        text = f"expected {want}, got {got}"
        return [
            metric("numeric", ok, text if ok else f"{text}: off by 1", score=1.0 if ok else 0.0)
        ]

    def run(name: str, index: int, answers: list[str], truths: list[str], **kw: Any) -> CaseResult:
        turns = [
            turn(
                i,
                f"question {i + 1}",
                got,
                ground_truth=want,
                metrics=numeric(got == want, got, want),
                line=10 + 4 * index + i,
                tokens=50,
                cost_usd=0.0005,
            )
            for i, (got, want) in enumerate(zip(answers, truths, strict=True))
        ]
        return case(index, name, turns, line=9 + 4 * index, **kw)

    truths = ["1", "2", "3"]
    steady = [run("steady", 0, truths, truths) for _ in range(4)]
    flaky = [run("flaky", 1, ["1", "2", got], truths) for got in ("3", "4", "3", "4")]
    within = [run("within", 2, ["1", got, "3"], truths) for got in ("2", "2", "9", "2")]
    broken = [run("broken", 3, ["0", "2", "3"], truths) for _ in range(4)]
    results = [
        aggregate_runs(steady),
        aggregate_runs(flaky),
        aggregate_runs(within, min_pass_rate=0.75),
        aggregate_runs(broken),
    ]
    return report(results)


def test_golden_repeated_junit_and_summary() -> None:
    from multiturn_eval.reports.junit import render_junit
    from multiturn_eval.reports.markdown import render_markdown
    from tests.reports_fixtures import check_golden

    rep = repeated_report()
    junit = render_junit(rep)
    xmlschema.XMLSchema(XSD).validate(junit)
    check_golden("junit-repeat.xml", junit)
    check_golden("summary-repeat.md", render_markdown(rep))


def test_a_fatal_backend_error_during_repeats_stops_the_run_and_keeps_the_finished_runs(
    project: Project,
) -> None:
    steps = [{"response": "ok"}, {"raise": "fatal"}]
    cases = [
        {"name": "first", "context": {"script": [{"response": "ok"}]}, "turns": [{"input": "x"}]},
        {"name": "dies", "context": {"script": steps}, "turns": [{"input": "a"}, {"input": "b"}]},
        {"name": "after", "context": {"script": []}, "turns": [{"input": "y"}]},
    ]
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'tests.agents:scripted'}\ntest_cases: "
        + json.dumps(cases)
        + "\n",
    )
    result = project.run("run", "suite.yaml", "--repeat", "3", formats=FORMATS)
    assert result.code == 3, result.out
    first, dies, after = result.report["results"]
    assert first["repeat"]["runs"] == 3 and first["passed"]
    assert dies["repeat"]["runs"] == 1 and dies["repeat"]["planned_runs"] == 3
    assert not dies["passed"] and dies["outcome"] == "error"
    assert after["skipped"] and "repeat" not in after
    assert agents.OPENED == ["first"] * 3 + ["dies"]  # nothing started after the fatal error
    assert not result.report["run"]["complete"]


def test_junit_readers_count_a_flaky_case_within_its_gate_as_passed(tmp_path: Path) -> None:
    import xunitparser
    from junitparser import JUnitXml

    from multiturn_eval.reports.junit import render_junit

    path = tmp_path / "junit.xml"
    path.write_text(render_junit(repeated_report()), encoding="utf-8")
    cases = {c.name: c.is_passed for suite in JUnitXml.fromfile(str(path)) for c in suite}
    assert cases == {"steady": True, "flaky": False, "within": True, "broken": False}
    with path.open() as handle:
        suite, _ = xunitparser.parse(handle)
    assert {t.methodname: t.result for t in suite} == {
        "steady": "success",
        "flaky": "failure",
        "within": "success",
        "broken": "failure",
    }
