"""``multiturn-eval regrade``: the current suite's checks on a report's recorded replies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.grading.recorded import RECORDED_JUDGEMENTS, JudgeKey
from multiturn_eval.regrade import Regrader
from multiturn_eval.reports.reader import load_report
from tests.conftest import Project

REPO = Path(__file__).resolve().parent.parent

#: a mixed suite: multi-turn and legacy cases, numeric and equality checks, tool assertions,
#: a code grader, an agent error, and a case whose session died (turns skipped)
MIXED = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations:
  - {type: standard, metric: numeric, absolute_tolerance: TOL}
  - {type: code, grader: "tests.graders:history"}
test_cases:
  - name: sums
    context:
      script:
        - {response: "10.4", tools: [{name: add, args: {a: 4, b: 6}}]}
        - {response: "20"}
        - {response: "31"}
    turns:
      - {input: "first", ground_truth: 10, tools: [{name: add}]}
      - {input: "second", ground_truth: 20}
      - {input: "third", ground_truth: 30}
  - name: exact
    context: {script: [{response: "7"}]}
    input: "legacy"
    ground_truth: 7
  - name: broken
    context:
      script: [{response: "1"}, {raise: bug}, {response: "3"}]
    turns:
      - {input: "b1", ground_truth: 1}
      - {input: "b2", ground_truth: 2}
      - {input: "b3", ground_truth: 3}
  - name: dies
    context:
      script: [{raise: dead}, {response: "2"}]
    turns:
      - {input: "d1", ground_truth: 1}
      - {input: "d2", ground_truth: 2}
  - name: never-opens
    context: {factory_raises: true}
    turns:
      - {input: "n1", ground_truth: 1}
"""


def mixed(project: Project, tolerance: float = 0.5) -> None:
    project.write("suite.yaml", MIXED.replace("TOL", str(tolerance)))


def verdicts(report: dict[str, Any]) -> list[Any]:
    """Every verdict of a report: per case and per turn, with each metric's outcome."""
    out: list[Any] = []
    for case in report["results"]:
        turns = case.get("turns") or [case]
        out.append(
            (
                case["name"],
                case["passed"],
                case["outcome"],
                case["errors"],
                [
                    (
                        t.get("passed", case["passed"]),
                        t.get("skipped", case.get("skipped", False)),
                        t.get("tools_matched"),
                        [(m["metric_name"], m["passed"], m["score"]) for m in t["metric_results"]],
                        t.get("errors", []),
                    )
                    for t in turns
                ],
            )
        )
    return out


@pytest.fixture
def no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every factory the suites may name raises if called: a regrade calls no agent."""
    from examples.convfinqa import baseline_agent

    from tests import agents

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("an agent factory was called during a regrade")

    monkeypatch.setattr(agents, "scripted", refuse)
    monkeypatch.setattr(baseline_agent, "factory", refuse)


def regrade(project: Project, *argv: str) -> Any:
    return project.run("regrade", *argv)


def test_unchanged_mixed_suite_reproduces_every_verdict(project: Project, request: Any) -> None:
    mixed(project)
    first = project.run("run", "suite.yaml")
    assert first.code == 1
    request.getfixturevalue("no_agent")
    again = regrade(project, "out/report.json", "-o", "regraded", "--format", "json,markdown")
    assert again.code == 1, again.out + again.err
    original = first.report
    regraded = json.loads((project.root / "regraded/report.json").read_text())
    assert verdicts(regraded) == verdicts(original)
    assert regraded["summary"] == original["summary"] | {
        "token_usage": regraded["summary"]["token_usage"]
    }
    assert regraded["regrade"]["flipped_to_failed"] == 0
    assert regraded["regrade"]["flipped_to_passed"] == 0
    assert regraded["regrade"]["turns_not_regradable"] == 0
    assert "0 passed -> failed, 0 failed -> passed" in again.out
    summary = (project.root / "regraded/summary.md").read_text()
    assert "0 passed → failed" in summary


@pytest.mark.parametrize(
    "agent",
    [
        'agent: {backend: http, url: "${AGENT_URL}", headers: {Authorization: "Bearer ${AGENT_TOKEN}"}}',
        "agent: {backend: openai, model: gpt-4o, api_key: '${OPENAI_API_KEY}', "
        "base_url: '${OPENAI_BASE}/v1'}",
        "agent: {backend: anthropic, model: '${MODEL}', api_key: '${ANTHROPIC_KEY}'}",
    ],
)
def test_regrade_needs_none_of_the_agents_variables(
    project: Project, request: Any, agent: str
) -> None:
    mixed(project)
    first = project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    # the suite now reaches its agent through variables this environment does not set
    project.write("suite.yaml", agent + "\n" + MIXED.replace("TOL", "0.5").split("\n", 1)[1])
    again = regrade(project, "out/report.json", "-o", "regraded")
    assert again.code == 1, again.out + again.err
    regraded = json.loads((project.root / "regraded/report.json").read_text())
    assert verdicts(regraded) == verdicts(first.report)
    # a variable the regrade itself uses still has to be set
    project.write(
        "suite.yaml",
        agent + "\n" + MIXED.replace("TOL", "'${TOLERANCE}'").split("\n", 1)[1],
    )
    refused = regrade(project, "out/report.json", "-o", "refused")
    assert refused.code == 2
    assert "evaluations[0].absolute_tolerance: environment variable TOLERANCE is not set" in (
        refused.err
    )
    assert "AGENT_URL" not in refused.err and "OPENAI_API_KEY" not in refused.err


def test_regrade_needs_a_judge_blocks_variables_only_with_rejudge(
    project: Project, request: Any
) -> None:
    mixed(project)
    project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    head = 'judge: {backend: openai, model: gpt-4o-mini, api_key: "${JUDGE_KEY}"}\n'
    project.write("suite.yaml", head + MIXED.replace("TOL", "0.5"))
    assert regrade(project, "out/report.json", "-o", "regraded").code == 1
    rejudged = regrade(project, "out/report.json", "-o", "rejudged", "--rejudge")
    assert rejudged.code == 2
    assert "judge.api_key: environment variable JUDGE_KEY is not set" in rejudged.err


def test_a_run_still_needs_the_agents_variables(project: Project) -> None:
    project.write(
        "suite.yaml",
        'agent: {backend: http, url: "${AGENT_URL}"}\ntest_cases: [{input: x}]\n',
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 2
    assert "suite.yaml:1 agent.url: environment variable AGENT_URL is not set" in result.err


def test_changing_a_tolerance_flips_exactly_the_expected_turns(
    project: Project, request: Any
) -> None:
    mixed(project, tolerance=0.5)  # sums: 10.4 vs 10 passes, 31 vs 30 fails
    first = project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    mixed(project, tolerance=1.0)  # now 31 vs 30 passes too
    wider = regrade(project, "out/report.json", "-o", "wider")
    report = json.loads((project.root / "wider/report.json").read_text())
    before = {
        (c["name"], i): v
        for c, *_ in [(c,) for c in first.report["results"]]
        for i, v in enumerate(_turn_passes(c))
    }
    after = {(c["name"], i): v for c in report["results"] for i, v in enumerate(_turn_passes(c))}
    flipped = {key for key in before if before[key] != after[key]}
    assert flipped == {("sums", 2)}
    assert after[("sums", 2)] is True
    assert report["regrade"]["flipped_to_passed"] == 1
    assert report["regrade"]["flipped_to_failed"] == 0
    assert "1 failed -> passed" in wider.out

    mixed(project, tolerance=0.1)  # now 10.4 vs 10 fails too
    narrower = regrade(project, "out/report.json", "-o", "narrower")
    report = json.loads((project.root / "narrower/report.json").read_text())
    after = {(c["name"], i): v for c in report["results"] for i, v in enumerate(_turn_passes(c))}
    assert {key for key in before if before[key] != after[key]} == {("sums", 0)}
    assert report["regrade"]["flipped_to_failed"] == 1
    assert narrower.code == 1


def _turn_passes(case: dict[str, Any]) -> list[bool]:
    return [t["passed"] for t in case["turns"]] if case.get("turns") else [case["passed"]]


@pytest.mark.parametrize(
    ("edit", "turn", "reason"),
    [
        (("second", "second, reworded"), 1, "input changed since the report"),
        (("first", "FIRST"), 0, "input changed since the report"),
    ],
)
def test_a_changed_input_is_not_regradable(
    project: Project, request: Any, edit: tuple[str, str], turn: int, reason: str
) -> None:
    mixed(project)
    project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    text = (project.root / "suite.yaml").read_text()
    (project.root / "suite.yaml").write_text(
        text.replace(f'input: "{edit[0]}"', f'input: "{edit[1]}"')
    )
    result = regrade(project, "out/report.json", "-o", "again")
    report = json.loads((project.root / "again/report.json").read_text())
    case = next(c for c in report["results"] if c["name"] == "sums")
    assert case["skipped"] is True and case["outcome"] == "skipped"
    assert case["errors"] == [f"not regradable: {reason} (turn {turn + 1})"]
    for t in case["turns"][:turn]:
        assert not t["skipped"]  # earlier turns are graded
    assert case["turns"][turn]["errors"] == [f"not regradable: {reason}"]
    for t in case["turns"][turn + 1 :]:
        assert t["skipped"] and "an earlier turn's input changed" in t["errors"][0]
        assert t["metric_results"] == []
    assert report["regrade"]["turns_not_regradable"] == 3 - turn
    assert "SKIP  suite::sums" in result.out  # the console shows the case as the report does
    assert f"not regradable: {reason} (turn {turn + 1})" in result.out
    journal = (project.root / "again/results.jsonl").read_text().splitlines()
    line = next(json.loads(j) for j in journal if '"sums"' in j)
    assert line["skipped"] and line["errors"] == case["errors"]  # as the report says


def test_cases_and_turns_not_in_the_report_are_not_regradable(
    project: Project, request: Any
) -> None:
    mixed(project)
    project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    text = MIXED.replace("TOL", "0.5").replace(
        '      - {input: "third", ground_truth: 30}\n',
        '      - {input: "third", ground_truth: 30}\n      - {input: "fourth", ground_truth: 40}\n',
    )
    text += '  - name: brand-new\n    input: "new"\n    ground_truth: 1\n'
    (project.root / "suite.yaml").write_text(text)
    regrade(project, "out/report.json", "-o", "again")
    report = json.loads((project.root / "again/report.json").read_text())
    by_name = {c["name"]: c for c in report["results"]}
    new = by_name["brand-new"]
    assert new["skipped"] and new["errors"] == ["not regradable: not in the report"]
    sums = by_name["sums"]
    assert sums["turns"][3]["errors"] == ["not regradable: not in the report"]
    assert [t["skipped"] for t in sums["turns"]] == [False, False, False, True]
    assert sums["errors"] == ["not regradable: not in the report (turn 4)"]


def test_the_convfinqa_example_regrades_to_the_same_verdicts(
    project: Project, request: Any
) -> None:
    shutil.copytree(REPO / "examples", project.root / "examples")
    suite = "examples/convfinqa/suite.yaml"
    first = project.run("run", suite)
    assert first.report["summary"]["total"] == 20
    request.getfixturevalue("no_agent")
    again = regrade(project, "out/report.json", "-o", "regraded")
    assert again.code == first.code
    regraded = json.loads((project.root / "regraded/report.json").read_text())
    assert verdicts(regraded) == verdicts(first.report)
    assert regraded["regrade"]["turns_regraded"] == first.report["summary"]["turns"]["total"]


def test_recorded_judgements_are_offered_unless_rejudge(project: Project) -> None:
    mixed(project)
    project.run("run", "suite.yaml")
    regrader = Regrader(load_report(project.root / "out/report.json"), "out/report.json")
    assert RECORDED_JUDGEMENTS.get() is None  # outside a regrade judges are always called
    from multiturn_eval.backends.replay import CaseMarks

    key = ("suite.yaml", "sums", 0)
    assert regrader.state.recorded[key].name == "sums"
    regrader.state.marks[("suite.yaml", 0)] = CaseMarks(key, regrader.state.recorded)
    from multiturn_eval.regrade import _Recorded

    lookup = _Recorded(regrader.state)
    found = lookup.lookup(JudgeKey("suite.yaml", 0, 2, "numeric"))
    assert found is not None and found.passed is False
    assert lookup.lookup(JudgeKey("suite.yaml", 0, 2, "no-such-metric")) is None
    assert lookup.lookup(JudgeKey("suite.yaml", 9, 0, "numeric")) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("not json", "not JSON"),
        ('{"results": []}', "no schema_version"),
        ('{"schema_version": "2", "results": []}', "schema version '2'"),
    ],
)
def test_an_unreadable_report_is_a_config_error(
    project: Project, content: str | None, message: str
) -> None:
    mixed(project)
    if content is not None:
        project.write("bad.json", content)
    result = regrade(project, "bad.json", "--suite", "suite.yaml", "-o", "again")
    assert result.code == 2
    assert "cannot regrade" in result.err and message in result.err


SEEN: list[object] = []


async def peek_judgements(ctx: Any) -> bool:
    """A grader that notes what a judge would see: the recorded verdicts, or None."""
    lookup = RECORDED_JUDGEMENTS.get()
    SEEN.append(
        None
        if lookup is None
        else lookup.lookup(JudgeKey("suite.yaml", 0, ctx.turn_index, "numeric"))
    )
    return True


JUDGED = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations:
  - {type: standard, metric: numeric}
  - {type: code, grader: "tests.test_regrade:peek_judgements"}
test_cases:
  - name: one
    context: {script: [{response: "1"}, {response: "5"}]}
    turns:
      - {input: "a", ground_truth: 1}
      - {input: "b", ground_truth: 2}
"""


@pytest.mark.parametrize("rejudge", [False, True])
def test_graders_see_the_recorded_verdicts_unless_rejudge(
    project: Project, request: Any, rejudge: bool
) -> None:
    project.write("suite.yaml", JUDGED)
    project.run("run", "suite.yaml")
    assert SEEN == [None, None]  # a live run: judges are always called
    SEEN.clear()
    request.getfixturevalue("no_agent")
    flag = ["--rejudge"] if rejudge else []
    result = regrade(project, "out/report.json", "-o", "again", *flag)
    assert result.code == 1
    if rejudge:
        assert SEEN == [None, None]
    else:
        assert [getattr(m, "passed", None) for m in SEEN] == [True, False]
    report = json.loads((project.root / "again/report.json").read_text())
    assert report["regrade"]["rejudge"] is rejudge
    SEEN.clear()


def test_a_changed_code_grader_flips_its_turns(project: Project, request: Any) -> None:
    project.write("suite.yaml", JUDGED)
    project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    project.write(
        "suite.yaml",
        JUDGED.replace("tests.test_regrade:peek_judgements", "tests.graders:boom"),
    )
    regrade(project, "out/report.json", "-o", "again")
    report = json.loads((project.root / "again/report.json").read_text())
    turns = report["results"][0]["turns"]
    assert [t["passed"] for t in turns] == [False, False]
    assert "KeyError" in turns[0]["metric_results"][1]["error"]
    assert report["regrade"]["flipped_to_failed"] == 1
    assert report["regrade"]["flipped_to_passed"] == 0
    SEEN.clear()


DUPLICATES = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric}]
test_cases:
  - name: same
    context: {script: [{response: "1"}]}
    turns: [{input: "first of the name", ground_truth: 1}]
  - name: other
    context: {script: [{response: "3"}]}
    turns: [{input: "o", ground_truth: 2}]
  - name: same
    context: {script: [{response: "2"}, {response: "9"}]}
    turns: [{input: "second of the name", ground_truth: 2}, {input: "x", ground_truth: 9}]
"""


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_duplicate_names_are_replayed_by_occurrence(
    project: Project, request: Any, parallel: str
) -> None:
    project.write(
        "suite.yaml",
        DUPLICATES.replace(
            "test_cases:", f"execution: {{parallel_test_cases: {parallel}}}\ntest_cases:"
        ),
    )
    first = project.run("run", "suite.yaml")
    request.getfixturevalue("no_agent")
    regrade(project, "out/report.json", "-o", "again")
    report = json.loads((project.root / "again/report.json").read_text())
    assert verdicts(report) == verdicts(first.report)
    assert report["regrade"]["turns_not_regradable"] == 0


def test_a_repeated_report_regrades_the_run_shown(project: Project, request: Any) -> None:
    mixed(project)
    project.run("run", "suite.yaml")
    data = json.loads((project.root / "out/report.json").read_text())
    for case in data["results"]:  # as --repeat 2 would write it
        passed = case["passed"]
        case["repeat"] = {
            "runs": 2,
            "passes": 2 if passed else 0,
            "pass_rate": 1.0 if passed else 0.0,
            "pass_all": passed,
            "pass_any": passed,
            "min_pass_rate": 1.0,
            "flaky": False,
        }
        case["runs"] = []
    (project.root / "out/report.json").write_text(json.dumps(data))
    request.getfixturevalue("no_agent")
    result = regrade(project, "out/report.json", "-o", "again")
    report = json.loads((project.root / "again/report.json").read_text())
    assert verdicts(report) == verdicts(data)
    assert all("repeat" not in c and "runs" not in c for c in report["results"])
    assert report["regrade"]["notes"] == [
        "5 repeated test case(s): only the run shown at case level was regraded"
    ]
    assert "only the run shown at case level" in (project.root / "again/summary.md").read_text()
    assert "only the run shown at case level" in (project.root / "again/report.html").read_text()
    assert result.code == 1
