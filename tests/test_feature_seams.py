"""Where this round's features meet: judges under regrade, repeats and the spend cap.

Each feature has its own tests; these prove the combinations a user reaches for:
regrading a judged run (no judge key, no call, verdicts reproduced; ``--rejudge``
calls again), judge usage summed over the runs of a repeated case, and a judge
model without a price under ``--max-cost``.
"""

from __future__ import annotations

import json

import pytest

from tests.agents import scripted_case
from tests.conftest import Project
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, Usage
from tests.test_judges import HAIKU, suite, verdict


@pytest.fixture
def judged(project: Project, anthropic_fake: FakeAnthropic) -> Project:
    project.env.update({"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": anthropic_fake.url})
    return project


def _verdicts(report: dict[str, object]) -> list[tuple[bool, str | None]]:
    out = []
    for case in report["results"]:  # type: ignore[attr-defined]
        for turn in case["turns"]:
            m = turn["metric_results"][0]
            out.append((m["passed"], m["reason"]))
    return out


def test_a_judged_run_regrades_without_a_judge_key_or_call(
    judged: Project, anthropic_fake: FakeAnthropic
) -> None:
    anthropic_fake.responder = lambda r: verdict(verdict="fail", reason="too curt")
    judged.write("suite.yaml", suite(cases=2, same_reply=False))
    first = judged.run("run", "suite.yaml")
    assert first.code == 1, first.out + first.err
    calls = len(anthropic_fake.messages_requests())
    assert calls == 2

    no_key = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    again = judged.run("regrade", "out/report.json", "-o", "re", env=no_key)
    assert again.code == 1, again.out + again.err
    assert len(anthropic_fake.messages_requests()) == calls  # no judge called
    regraded = json.loads((judged.root / "re" / "report.json").read_text())
    assert _verdicts(regraded) == _verdicts(first.report) == [(False, "verdict fail: too curt")] * 2
    assert "0 passed -> failed, 0 failed -> passed" in again.out
    assert "judge_token_usage" not in regraded["summary"]  # nothing was spent on judges

    anthropic_fake.responder = lambda r: verdict(verdict="pass", reason="fine now")
    rejudged = judged.run("regrade", "out/report.json", "-o", "rj", "--rejudge")
    assert rejudged.code == 0, rejudged.out + rejudged.err
    assert len(anthropic_fake.messages_requests()) == calls + 2
    report = json.loads((judged.root / "rj" / "report.json").read_text())
    assert _verdicts(report) == [(True, "verdict pass: fine now")] * 2
    assert "0 passed -> failed, 2 failed -> passed" in rejudged.out


def test_a_judge_added_since_the_report_is_not_graded_without_rejudge(
    judged: Project, anthropic_fake: FakeAnthropic
) -> None:
    judged.write("suite.yaml", suite("{type: standard, metric: contains, value: Hello}"))
    assert judged.run("run", "suite.yaml").code == 0
    judged.write("suite.yaml", suite())  # now a judge, which the report has no verdict of
    again = judged.run("regrade", "out/report.json", "-o", "re")
    assert again.code == 1
    assert anthropic_fake.messages_requests() == []
    metric = json.loads((judged.root / "re" / "report.json").read_text())["results"][0]["turns"][0][
        "metric_results"
    ][0]
    assert metric["passed"] is False and "--rejudge" in metric["error"]


def test_judge_usage_sums_over_the_runs_of_a_repeated_case(
    judged: Project, anthropic_fake: FakeAnthropic
) -> None:
    anthropic_fake.responder = lambda r: verdict(Usage(1000, 100), verdict="pass", reason="ok")
    judged.write("suite.yaml", suite(replies=("Hi.", "Bye."), same_reply=False))
    result = judged.run("run", "suite.yaml", "--repeat", "3")
    assert result.code == 0, result.out + result.err
    case = result.report["results"][0]
    # identical judge requests are one call within a run, so three runs of the same
    # replies cost two judge calls, counted once (on the run that made them)
    assert len(anthropic_fake.messages_requests()) == 2
    assert case["judge_token_usage"]["total_tokens"] == 2 * 1100
    assert result.report["summary"]["judge_token_usage"]["total_tokens"] == 2 * 1100
    assert sum(run.get("judge_cost_usd", 0) for run in case["runs"]) == pytest.approx(
        case["judge_cost_usd"]
    )


def test_an_unpriced_judge_model_with_a_spend_cap_is_a_config_error(judged: Project) -> None:
    judged.write("suite.yaml", suite(top="judge: {model: some-unpriced-model}"))
    result = judged.run("run", "suite.yaml", "--max-cost", "1")
    assert result.code == 2
    assert "judge model 'some-unpriced-model' has no known price" in result.err
    assert "suite.yaml:" in result.err
    priced = suite(top="judge: {model: some-unpriced-model}") + (
        "pricing:\n  some-unpriced-model: {input: 1, output: 1}\n"
    )
    judged.write("suite.yaml", priced)
    assert judged.run("run", "suite.yaml", "--max-cost", "1", "--dry-run").code == 0


def test_the_judges_count_towards_the_spend_cap(
    judged: Project, anthropic_fake: FakeAnthropic
) -> None:
    # Haiku 4.5 at $1 in per million: each judge call of 100,000 input tokens costs $0.10
    anthropic_fake.responder = lambda r: verdict(Usage(100_000, 0), verdict="pass", reason="ok")
    judged.write("suite.yaml", suite(cases=4, same_reply=False))
    result = judged.run("run", "suite.yaml", "--max-cost", "0.15", "-p", "1")
    assert result.code == 1, result.out + result.err
    outcomes = [r["outcome"] for r in result.report["results"]]
    assert outcomes == ["passed", "passed", "skipped", "skipped"]
    assert result.report["run"]["spend_cap"]["spent_usd"] == pytest.approx(0.2)
    assert HAIKU in json.dumps(result.report["results"][0]["turns"][0]["metric_results"][0])


def test_a_dry_run_counts_the_judge_calls_and_calls_nothing(
    judged: Project, anthropic_fake: FakeAnthropic
) -> None:
    judged.write("suite.yaml", suite(cases=3, replies=("a", "b")))
    result = judged.run("run", "suite.yaml", "--dry-run", "--repeat", "2")
    assert result.code == 0, result.out + result.err
    # 3 cases x 2 turns x 1 judge x 2 runs
    assert "LLM-judge calls: up to 12" in result.out
    assert "LLM-judge calls up to 12" in result.out
    assert anthropic_fake.messages_requests() == []


CONVERSATION_CHECKED = """\
agent:
  backend: python
  factory: tests.agents:scripted
evaluations: [{type: standard, metric: contains, value: ok}]
test_cases:
- name: rude
  context:
    script:
    - {response: "ok stupid"}
    - {response: "ok fine", tools: [{name: delete_account, args: {id: 1}}]}
  turns:
  - {input: a}
  - {input: b}
  conversation_tools:
    forbidden_tools: [delete_account]
  conversation_evaluations:
  - {type: code, grader: "tests.conversation_graders:polite"}
- name: fine
  context: {script: [{response: "ok"}, {response: "ok"}]}
  turns:
  - {input: a}
  - {input: b}
  conversation_evaluations:
  - {type: code, grader: "tests.conversation_graders:polite"}
"""


def test_a_regrade_keeps_the_conversation_level_verdicts(project: Project) -> None:
    """Every turn of 'rude' passes; its conversation checks fail it. A regrade of the
    unchanged suite must reproduce that, not pass the case on its turns alone."""
    project.write("suite.yaml", CONVERSATION_CHECKED)
    first = project.run("run", "suite.yaml")
    assert first.code == 1
    again = project.run("regrade", "out/report.json", "-o", "re")
    assert again.code == 1, again.out + again.err
    regraded = json.loads((project.root / "re" / "report.json").read_text())
    for before, after in zip(first.report["results"], regraded["results"], strict=True):
        assert after["passed"] == before["passed"]
        assert after["outcome"] == before["outcome"]
        assert after["metric_results"] == before["metric_results"]
    assert [r["passed"] for r in regraded["results"]] == [False, True]
    assert regraded["summary"]["metrics"] == first.report["summary"]["metrics"]
    assert "0 passed -> failed, 0 failed -> passed" in again.out


def _cases(n: int, value: str = "ok") -> str:
    lines = [
        "agent:",
        "  backend: python",
        "  factory: tests.agents:scripted",
        f"evaluations: [{{type: standard, metric: contains, value: {value}}}]",
        "test_cases:",
    ]
    for i in range(n):
        reply = "ok" if i else "ok then"  # case-0 alone also contains 'then'
        lines.append(
            f"  - {{name: c{i}, context: {{script: [{{response: {reply}}}]}}, turns: [{{input: q}}]}}"
        )
    return "\n".join(lines) + "\n"


def test_a_shard_compares_only_its_own_cases_with_the_baseline(project: Project) -> None:
    project.write("suite.yaml", _cases(6))
    assert project.run("run", "suite.yaml", "-o", "base").code == 0
    for i in (1, 2):
        result = project.run(
            "run",
            "suite.yaml",
            "--shard",
            f"{i}/2",
            "-o",
            f"s{i}",
            "--baseline",
            "base/report.json",
        )
        assert result.code == 0, result.out + result.err
        block = result.report["baseline"]
        assert block["counts"]["removed"] == 0  # the other shard's cases are not "removed"
        assert block["counts"]["still_passing"] == len(result.report["results"])


def test_merge_compares_with_a_baseline_and_gates_on_regressions(project: Project) -> None:
    project.write("suite.yaml", _cases(6))
    assert project.run("run", "suite.yaml", "-o", "base").code == 0
    project.write("suite.yaml", _cases(6, value="then"))  # now only c0 passes: 5 regressions
    for i in (1, 2, 3):
        project.run("run", "suite.yaml", "--shard", f"{i}/3", "-o", f"s{i}")
    shards = [f"s{i}/report.json" for i in (1, 2, 3)]
    merged = project.run(
        "merge", *shards, "-o", "m", "--baseline", "base/report.json", "--fail-on", "regressions"
    )
    assert merged.code == 1, merged.out + merged.err
    report = json.loads((project.root / "m" / "report.json").read_text())
    assert report["baseline"]["counts"]["regressed"] == 5
    assert report["baseline"]["counts"]["still_passing"] == 1
    summary = (project.root / "m" / "summary.md").read_text()
    assert "Regressions vs baseline (5)" in summary
    # the same shards against a baseline they do not regress from: fail-on regressions passes
    again = project.run(
        "merge", *shards, "-o", "m2", "--baseline", "m/report.json", "--fail-on", "regressions"
    )
    assert again.code == 0, again.out + again.err


def test_a_spend_cap_stop_fails_the_run_even_when_gating_on_regressions(
    project: Project,
) -> None:
    body = "".join(scripted_case(f"c{i}", [{"response": "ok", "cost": 0.5}]) for i in range(4))
    head = "agent: {backend: python, factory: tests.agents:scripted}\ntest_cases:\n"
    project.write("suite.yaml", head + body)
    assert project.run("run", "suite.yaml", "-o", "base").code == 0
    result = project.run(
        "run",
        "suite.yaml",
        "--max-cost",
        "1",
        "--baseline",
        "base/report.json",
        "--fail-on",
        "regressions",
    )
    assert result.report["run"]["spend_cap"]["reached"] is True
    assert result.report["baseline"]["counts"]["regressed"] == 0
    assert result.code == 1  # cases were left unrun by the budget: never a green check


def test_keep_passed_refuses_to_mix_repeat_counts(project: Project) -> None:
    project.write("suite.yaml", _cases(3, value="then"))  # c0 passes, c1 and c2 fail
    assert project.run("run", "suite.yaml", "--repeat", "3", "-o", "rep").code == 1
    mixed = project.run("run", "suite.yaml", "--rerun-failed", "rep/report.json", "--keep-passed")
    assert mixed.code == 2
    assert "ran 'c0' 3 time(s) and this run repeats each case 1 time(s)" in mixed.err
    same = project.run(
        "run", "suite.yaml", "--rerun-failed", "rep/report.json", "--keep-passed", "--repeat", "3"
    )
    assert same.code == 1, same.out + same.err
    results = same.report["results"]
    assert [r["name"] for r in results] == ["c0", "c1", "c2"]
    assert all(r["repeat"]["runs"] == 3 for r in results)
    assert same.report["summary"]["repeat"]["case_runs"] == 9


def test_a_flaky_conversation_check_is_named_in_every_report(project: Project) -> None:
    project.write(
        "graders_alt.py",
        "N = [0]\n\n\ndef alt(ctx):\n    N[0] += 1\n    return N[0] % 2 == 1\n",
    )
    project.write(
        "suite.yaml",
        """\
agent: {backend: python, factory: tests.agents:scripted}
test_cases:
- name: alt
  context: {script: [{response: ok}]}
  turns: [{input: q}]
  conversation_evaluations: [{type: code, grader: "graders_alt:alt"}]
""",
    )
    result = project.run(
        "run", "suite.yaml", "--repeat", "2", "-p", "1", formats=("json", "junit", "markdown")
    )
    assert result.code == 1
    assert result.report["results"][0]["repeat"]["flaky"] is True
    named = "conversation check alt passed 1 of 2"
    assert named in result.out
    assert named in (result.report_dir / "summary.md").read_text()
    assert named in (result.report_dir / "junit.xml").read_text()


def test_a_regrade_of_a_repeated_report_keeps_its_recorded_usage(project: Project) -> None:
    step = {"response": "ok", "usage": {"prompt_tokens": 7, "completion_tokens": 3}, "cost": 0.5}
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: tests.agents:scripted}\n"
        "evaluations: [{type: standard, metric: contains, value: ok}]\n"
        f"test_cases:\n- name: a\n  context: {{script: [{json.dumps(step)}]}}\n"
        "  turns: [{input: q}]\n",
    )
    first = project.run("run", "suite.yaml", "--repeat", "3")
    assert first.code == 0
    recorded = first.report["results"][0]
    assert recorded["token_usage"]["total_tokens"] == 30 and recorded["cost_usd"] == 1.5
    again = project.run("regrade", "out/report.json", "-o", "re")
    assert again.code == 0, again.out + again.err
    case = json.loads((project.root / "re" / "report.json").read_text())["results"][0]
    assert case["passed"] is True
    assert case["token_usage"] == recorded["token_usage"] and case["cost_usd"] == 1.5
    assert "only the run shown at case level was regraded" in again.out + json.dumps(
        json.loads((project.root / "re" / "report.json").read_text())["regrade"]
    )
