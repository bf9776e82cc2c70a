"""``--max-cost``: the real anthropic SDK against the fake server, with priced usage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from multiturn_eval.results import CaseResult, CaseRun
from multiturn_eval.spend import spend_of
from tests.agents import scripted_case
from tests.conftest import Project
from tests.fakes._server import Request, Slow
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, Usage, text

#: $1 per million input tokens, output free: every reply of 100,000 input tokens costs $0.10
PRICED = """\
agent:
  backend: anthropic
  model: claude-test-1
  max_tokens: 256
pricing:
  claude-test-1: {input: 1, output: 0}
%s
test_cases:
"""


def cases(n: int, turns: int = 1) -> str:
    body = ", ".join(["{input: hello}"] * turns)
    return "".join(f"  - {{name: case-{i}, turns: [{body}]}}\n" for i in range(n))


def answer(request: Request) -> object:
    return text("ok", Usage(100_000, 0))


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(answer) as server:
        yield server


@pytest.fixture
def env(project: Project, fake: FakeAnthropic) -> dict[str, str]:
    project.env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
    return project.env


def test_the_cap_stops_new_cases_and_skips_the_rest_with_the_reason(
    project: Project, fake: FakeAnthropic, env: dict[str, str]
) -> None:
    project.write("suite.yaml", PRICED % "" + cases(10))
    result = project.run(
        "run", "suite.yaml", "--max-cost", "0.25", "-p", "1", formats=("json", "markdown")
    )
    assert result.code == 1, result.err
    summary = (result.report_dir / "summary.md").read_text()
    assert "Spend cap of $0.25 reached ($0.3000 spent): 7 test cases not started." in summary
    # $0.10 per case: after three cases $0.30 >= $0.25, so the fourth does not start
    assert len(fake.messages_requests()) == 3
    report = result.report
    outcomes = [r["outcome"] for r in report["results"]]
    assert outcomes == ["passed"] * 3 + ["skipped"] * 7
    for skipped in report["results"][3:]:
        assert skipped["errors"] == ["not started: spend cap of $0.25 reached ($0.3000 spent)"]
        assert all(t["skipped"] for t in skipped["turns"])
    assert report["run"]["complete"] is True
    assert report["run"]["spend_cap"] == {
        "max_cost_usd": 0.25,
        "spent_usd": pytest.approx(0.3),
        "reached": True,
        "not_started": 7,
    }
    assert report["summary"]["skipped"] == 7
    notice = [line for line in result.out.splitlines() if "spend cap" in line and "reached" in line]
    assert notice[-1] == (
        "multiturn-eval: spend cap of $0.25 reached ($0.3000 spent): 7 test cases not started "
        "(skipped)"
    )


def test_a_cap_never_reached_changes_nothing_but_the_record(
    project: Project, fake: FakeAnthropic, env: dict[str, str]
) -> None:
    project.write("suite.yaml", PRICED % "" + cases(3))
    result = project.run("run", "suite.yaml", "--max-cost", "5")
    assert result.code == 0, result.err
    assert len(fake.messages_requests()) == 3
    cap = result.report["run"]["spend_cap"]
    assert (cap["reached"], cap["not_started"]) == (False, 0)
    assert "  spend cap: $5.00" in result.out.splitlines()
    assert "reached" not in result.out


@pytest.mark.parametrize(
    ("execution", "extra_env", "args"),
    [
        ("execution: {max_cost: 0.15}", {}, []),
        ("", {"MULTITURN_EVAL_MAX_COST": "0.15"}, []),
        ("execution: {max_cost: 100}", {}, ["--max-cost", "$0.15"]),  # the command line wins
    ],
)
def test_the_cap_comes_from_the_suite_the_environment_or_the_command_line(
    project: Project,
    fake: FakeAnthropic,
    env: dict[str, str],
    execution: str,
    extra_env: dict[str, str],
    args: list[str],
) -> None:
    project.write("suite.yaml", PRICED % execution + cases(5))
    result = project.run("run", "suite.yaml", *args, env=extra_env)
    assert result.code == 1, result.err
    assert len(fake.messages_requests()) == 2
    assert result.report["run"]["spend_cap"]["max_cost_usd"] == 0.15


def test_the_cap_counts_the_whole_run_across_suites(
    project: Project, fake: FakeAnthropic, env: dict[str, str]
) -> None:
    project.write("a.yaml", PRICED % "" + cases(2))
    project.write("b.yaml", PRICED % "" + cases(3))
    result = project.run("run", "a.yaml", "b.yaml", "--max-cost", "0.3")
    assert result.code == 1
    assert [r["outcome"] for r in result.report["results"]] == ["passed"] * 3 + ["skipped"] * 2


UNPRICED = """\
agent: {backend: anthropic, model: claude-unreleased-9}
%s
test_cases:
  - {name: a, turns: [{input: hi}]}
"""


@pytest.mark.parametrize(
    ("execution", "args", "extra_env"),
    [
        ("", ["--max-cost", "1"], {}),
        ("execution: {max_cost: 1}", [], {}),
        ("", [], {"MULTITURN_EVAL_MAX_COST": "1"}),
        ("pricing: {claude-other-1: {input: 1, output: 1}}", ["--max-cost", "1"], {}),
    ],
)
def test_an_unknown_price_with_a_cap_is_a_configuration_error_before_any_call(
    project: Project,
    fake: FakeAnthropic,
    env: dict[str, str],
    execution: str,
    args: list[str],
    extra_env: dict[str, str],
) -> None:
    project.write("suite.yaml", UNPRICED % execution)
    result = project.run("run", "suite.yaml", *args, env=extra_env)
    assert result.code == 2
    assert fake.messages_requests() == []
    assert "suite.yaml:1 agent.model: model 'claude-unreleased-9' has no known price" in result.err
    assert "pricing:" in result.err
    assert not (project.root / "out").exists()


def test_an_unknown_price_without_a_cap_still_runs(
    project: Project, fake: FakeAnthropic, env: dict[str, str]
) -> None:
    project.write("suite.yaml", UNPRICED % "")
    assert project.run("run", "suite.yaml").code == 0


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", "", "$"])
def test_bad_cap_values_are_usage_errors(project: Project, value: str) -> None:
    project.write("suite.yaml", UNPRICED % "")
    with pytest.raises(SystemExit) as exit_info:
        project.run("run", "suite.yaml", f"--max-cost={value}")
    assert exit_info.value.code == 2
    err = project.capsys.readouterr().err
    assert "--max-cost" in err and "US dollars > 0" in err


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan"])
def test_bad_cap_values_in_the_environment_or_suite_are_config_errors(
    project: Project, value: str
) -> None:
    project.write("suite.yaml", UNPRICED % "")
    result = project.run("run", "suite.yaml", env={"MULTITURN_EVAL_MAX_COST": value})
    assert result.code == 2
    assert "MULTITURN_EVAL_MAX_COST" in result.err
    project.write("bad.yaml", UNPRICED % f"execution: {{max_cost: {value}}}")
    result = project.run("run", "bad.yaml")
    assert result.code == 2
    assert "execution.max_cost" in result.err


PYTHON = """\
agent: {backend: python, factory: "tests.agents:scripted"}
test_cases:
"""


def test_python_agents_are_capped_by_the_cost_they_report(project: Project) -> None:
    steps = [{"response": "ok", "cost": 0.5}]
    project.write("suite.yaml", PYTHON + "".join(scripted_case(f"c{i}", steps) for i in range(4)))
    result = project.run("run", "suite.yaml", "--max-cost", "1")
    assert result.code == 1
    assert "counts only the cost_usd your python agent reports" in result.out
    assert [r["outcome"] for r in result.report["results"]] == [
        "passed",
        "passed",
        "skipped",
        "skipped",
    ]


def test_spend_of_counts_every_run_of_a_repeated_case_and_unknown_costs_as_zero() -> None:
    base = {
        "index": 0,
        "name": "c",
        "suite": "s.yaml",
        "suite_name": "s",
        "backend": "python",
        "passed": True,
        "outcome": "passed",
    }
    assert spend_of(CaseResult(**base)) == 0.0
    assert spend_of(CaseResult(**base, cost_usd=0.25)) == 0.25
    runs = [CaseRun(run_index=i, passed=True, outcome="passed", cost_usd=0.1) for i in range(3)]
    runs.append(CaseRun(run_index=3, passed=True, outcome="passed"))
    assert spend_of(CaseResult(**base, cost_usd=0.1, runs=runs)) == pytest.approx(0.3)


def test_cases_already_running_when_the_cap_is_reached_finish(
    project: Project, env: dict[str, str]
) -> None:
    def slow_for_case_1(request: Request) -> object:
        last = request.body["messages"][-1]["content"]
        said = last if isinstance(last, str) else last[-1].get("text", "")
        reply = text("ok", Usage(100_000, 0))
        return Slow(2.0, reply) if said == "slow" else reply

    with FakeAnthropic(slow_for_case_1) as server:
        project.env["ANTHROPIC_BASE_URL"] = server.url
        body = "".join(
            f"  - {{name: case-{i}, turns: [{{input: {'slow' if i == 1 else 'fast'}}}]}}\n"
            for i in range(6)
        )
        project.write("suite.yaml", PRICED % "" + body)
        # two workers: case 0 (fast) reaches the cap while case 1 (slow) is still running
        result = project.run("run", "suite.yaml", "--max-cost", "0.05", "-p", "2")
        assert result.code == 1, result.err
        assert len(server.messages_requests()) == 2
    outcomes = [r["outcome"] for r in result.report["results"]]
    assert outcomes == ["passed", "passed"] + ["skipped"] * 4
    cap = result.report["run"]["spend_cap"]
    assert cap["spent_usd"] == pytest.approx(0.2)  # past the cap by the case that was running
    assert cap["not_started"] == 4


def test_with_repeats_the_cap_is_checked_before_each_cases_first_run(
    project: Project, fake: FakeAnthropic, env: dict[str, str]
) -> None:
    """A started case runs all its K runs (its verdict needs them); the next case does not
    start once the runs so far cost the cap. -p 1: case-0's two runs cost $0.20 >= $0.15."""
    project.write("suite.yaml", PRICED % "" + cases(3))
    result = project.run("run", "suite.yaml", "--max-cost", "0.15", "--repeat", "2", "-p", "1")
    assert result.code == 1
    outcomes = [r["outcome"] for r in result.report["results"]]
    assert outcomes == ["passed", "skipped", "skipped"]
    first = result.report["results"][0]
    assert first["repeat"]["runs"] == 2 and len(first["runs"]) == 2
    assert first["cost_usd"] == pytest.approx(0.2)
    assert "spend cap of $0.15 reached" in result.report["results"][1]["errors"][0]
    assert len(fake.requests) == 2
    assert result.report["run"]["spend_cap"]["spent_usd"] == pytest.approx(0.2)
