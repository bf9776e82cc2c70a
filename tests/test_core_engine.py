"""Engine behaviour with scripted Python agents (SPEC 6.1-6.5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import agents
from tests.conftest import Project

HEAD = """\
agent:
  backend: python
  factory: tests.agents:scripted
  instructions: Suite instructions.
"""


def suite(project: Project, cases: list[dict[str, Any]], head: str = HEAD, extra: str = "") -> None:
    body = json.dumps(cases)  # JSON is YAML: keeps the test data readable as Python
    project.write("suite.yaml", head + extra + "test_cases: " + body + "\n")


def case(
    name: str,
    *steps: dict[str, Any],
    truths: list[Any] | None = None,
    factory_raises: bool = False,
    **more: Any,
) -> dict[str, Any]:
    turns = []
    for i, _ in enumerate(steps):
        turn: dict[str, Any] = {"input": f"{name} turn {i + 1}"}
        if truths is not None and truths[i] is not None:
            turn["ground_truth"] = truths[i]
        turns.append(turn)
    context = {"script": list(steps), "factory_raises": factory_raises}
    return {"name": name, "context": context, "turns": turns, **more}


def test_state_is_carried_across_turns(project: Project) -> None:
    project.write(
        "suite.yaml",
        """\
agent: {backend: python, factory: "tests.agents:counter"}
evaluations: [{type: standard, metric: numeric}]
test_cases:
  - name: running-total
    turns:
      - {input: "1", ground_truth: 1}
      - {input: "2", ground_truth: 3}
      - {input: "3", ground_truth: 6}
""",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out
    [case_result] = result.report["results"]
    assert [t["response"] for t in case_result["turns"]] == ["1", "3", "6"]
    assert "response" not in case_result and "input" not in case_result  # only legacy cases flatten


def test_turns_run_in_order_on_one_session(project: Project) -> None:
    suite(
        project, [case("a", {"echo_history": True}, {"echo_history": True}, {"echo_history": True})]
    )
    result = project.run("run", "suite.yaml")
    turns = result.report["results"][0]["turns"]
    assert turns[2]["response"] == "a turn 1 | a turn 2 | a turn 3"
    assert agents.OPENED == ["a"] and agents.CLOSED == ["a"]


def test_timeout_fails_the_turn_and_the_next_turn_is_still_sent(project: Project) -> None:
    suite(
        project,
        [case("slow", {"delay": 5}, {"response": "2"}, truths=[1, 2])],
        extra="evaluations: [{type: standard, metric: numeric}]\n",
    )
    result = project.run("run", "suite.yaml", "--turn-timeout", "0.2")
    assert result.code == 1
    case_result = result.report["results"][0]
    first, second = case_result["turns"]
    assert first["errors"] == ["timed out after 0.2 s (turn_timeout)"]
    assert first["passed"] is False and first["infrastructure_error"] is True
    assert second["passed"] is True and second["response"] == "2"
    assert case_result["outcome"] == "error"
    assert agents.CLOSED == ["slow"]


def test_agent_exception_fails_only_its_turn(project: Project) -> None:
    suite(project, [case("bug", {"raise": "bug"}, {"response": "fine"})])
    result = project.run("run", "suite.yaml")
    first, second = result.report["results"][0]["turns"]
    assert first["errors"] == ["ValueError: bug in the agent"]
    assert second["response"] == "fine" and second["passed"] is True


def test_two_consecutive_session_errors_skip_the_rest(project: Project) -> None:
    suite(
        project,
        [
            case(
                "broken",
                {"raise": "session"},
                {"raise": "session"},
                {"response": "x"},
                {"response": "y"},
            ),
            case(
                "recovers",
                {"raise": "session"},
                {"response": "ok"},
                {"raise": "session"},
                {"response": "ok"},
            ),
        ],
    )
    result = project.run("run", "suite.yaml")
    broken, recovers = result.report["results"]
    assert [t["skipped"] for t in broken["turns"]] == [False, False, True, True]
    assert broken["turns"][2]["errors"] == [
        "skipped: session unrecoverable after turn 2: 2 consecutive session errors"
    ]
    assert [m for _, m in agents.SENT if m.startswith("broken")] == [
        "broken turn 1",
        "broken turn 2",
    ]
    assert [t["skipped"] for t in recovers["turns"]] == [False] * 4
    assert broken["passed"] is False and broken["skipped"] is False
    assert sorted(agents.CLOSED) == ["broken", "recovers"]


def test_dead_session_skips_the_rest_at_once(project: Project) -> None:
    suite(project, [case("dead", {"raise": "dead"}, {"response": "x"})])
    turns = project.run("run", "suite.yaml").report["results"][0]["turns"]
    assert turns[0]["errors"] == ["the agent process exited"]
    assert turns[1]["skipped"] is True
    assert "the backend reported the session dead" in turns[1]["errors"][0]


def test_factory_failure_is_contained_to_its_case(project: Project) -> None:
    suite(
        project,
        [case("no-agent", {"response": "x"}, factory_raises=True), case("fine", {"response": "x"})],
    )
    result = project.run("run", "suite.yaml")
    failed, fine = result.report["results"]
    assert failed["errors"] == ["could not open a session: RuntimeError: cannot start the agent"]
    assert failed["outcome"] == "error" and failed["turns"][0]["skipped"] is True
    assert fine["passed"] is True
    assert result.code == 1


def test_session_object_without_send(project: Project) -> None:
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'tests.agents:no_send'}\ntest_cases: [{input: x}]\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.report["results"][0]["errors"] == [
        "could not open a session: the factory returned NoSend, which has no send(message, files=()) method"
    ]


@pytest.mark.parametrize(("parallel", "expected"), [("1", 1), ("4", 4)])
def test_at_most_p_sessions_are_open_at_once(
    project: Project, parallel: str, expected: int
) -> None:
    suite(project, [case(f"c{i}", {"delay": 0.05}, {"delay": 0.05}) for i in range(12)])
    result = project.run("run", "suite.yaml", "-p", parallel)
    assert result.code == 0
    assert agents.MAX_OPEN == expected
    assert len(agents.CLOSED) == 12


def test_sync_agents_run_concurrently_without_blocking_the_loop(project: Project) -> None:
    suite(
        project,
        [case(f"c{i}", {"delay": 0.1}) for i in range(6)],
        head="agent: {backend: python, factory: 'tests.agents:scripted_sync'}\n",
    )
    result = project.run("run", "suite.yaml", "-p", "3")
    assert result.code == 0
    assert agents.MAX_OPEN == 3


def test_async_factory(project: Project) -> None:
    suite(
        project,
        [case("a", {"response": "x"})],
        head="agent: {backend: python, factory: 'tests.agents:scripted_async_factory'}\n",
    )
    assert project.run("run", "suite.yaml").code == 0


def test_results_are_in_suite_order_whatever_the_completion_order(project: Project) -> None:
    suite(project, [case(f"c{i}", {"delay": 0.02 * (5 - i)}) for i in range(5)])
    result = project.run("run", "suite.yaml", "-p", "5")
    assert [r["name"] for r in result.report["results"]] == [f"c{i}" for i in range(5)]
    assert [r["index"] for r in result.report["results"]] == list(range(5))
    finished = [
        line.split("::")[1].split()[0]
        for line in result.out.splitlines()
        if line.startswith("PASS")
    ]
    assert finished != [f"c{i}" for i in range(5)]  # they really finished out of order


def test_roll_up(project: Project) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cache_read_tokens": 2}
    suite(
        project,
        [
            case(
                "mixed",
                {"response": "1", "usage": usage, "cost": 0.5},
                {"response": "7", "usage": usage, "cost": 0.25},
                {"response": "whatever", "usage": usage},
                truths=[1, 2, None],
            ),
            case("never-graded", {"response": "x"}),
        ],
        extra="evaluations: [{type: standard, metric: numeric}]\n",
    )
    result = project.run("run", "suite.yaml")
    mixed, plain = result.report["results"]
    assert [t["passed"] for t in mixed["turns"]] == [True, False, True]
    assert [len(t["metric_results"]) for t in mixed["turns"]] == [1, 1, 0]
    [numeric] = mixed["metric_results"]
    assert (numeric["metric_name"], numeric["score"], numeric["passed"]) == ("numeric", 0.5, False)
    assert mixed["token_usage"] == {
        "prompt_tokens": 30,
        "completion_tokens": 15,
        "total_tokens": 51,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 6,
    }
    assert mixed["cost_usd"] == 0.75
    assert plain["metric_results"] == []  # a metric no turn ran is left out
    summary = result.report["summary"]
    assert (summary["total"], summary["passed"], summary["failed"], summary["pass_rate"]) == (
        2,
        1,
        1,
        0.5,
    )
    assert summary["turns"] == {"total": 4, "passed": 3, "failed": 1, "skipped": 0}
    assert summary["metrics"] == {"numeric": {"mean_score": 0.5, "passed": 0, "failed": 1}}
    assert summary["token_usage"]["total_tokens"] == 51


def test_reply_forms(project: Project) -> None:
    suite(
        project,
        [
            case(
                "forms",
                {"as": "string", "response": "plain"},
                {
                    "as": "mapping",
                    "response": "mapped",
                    "tools": [{"name": "lookup", "args": {"row": "cash"}}],
                },
                {"response": "typed", "tools": [{"name": "lookup", "args": {}}]},
            )
        ],
    )
    turns = project.run("run", "suite.yaml").report["results"][0]["turns"]
    assert [t["response"] for t in turns] == ["plain", "mapped", "typed"]
    assert turns[1]["tool_invocations"][0]["args"] == {"row": "cash"}


def test_graders_see_previous_turns_turn_config_and_case_context(project: Project) -> None:
    project.write(
        "suite.yaml",
        HEAD
        + """\
evaluations: [{type: code, grader: "tests.graders:history"}]
test_cases:
  - name: g
    context: {script: [{response: a}, {response: b}, {response: c}], doc: 7}
    turns:
      - {input: one}
      - {input: two, turn_program: "add(1, 2)"}
      - {input: three}
""",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out
    details = [t["metric_results"][0]["details"] for t in result.report["results"][0]["turns"]]
    assert [d["previous"] for d in details] == [[], ["a"], ["a", "b"]]
    assert details[1]["turn_config"] == {"turn_program": "add(1, 2)"}
    assert details[0]["case"]["doc"] == 7


def test_grader_exception_fails_that_metric_on_that_turn_only(project: Project) -> None:
    project.write(
        "suite.yaml",
        HEAD
        + """\
test_cases:
  - name: g
    context: {script: [{response: a}, {response: b}]}
    turns:
      - input: one
        evaluations: [{type: code, grader: "tests.graders:boom"}]
      - input: two
""",
    )
    result = project.run("run", "suite.yaml")
    first, second = result.report["results"][0]["turns"]
    assert first["metric_results"][0]["error"] == "KeyError: 'missing'"
    assert first["passed"] is False and second["passed"] is True


def test_factory_gets_the_case_context(project: Project) -> None:
    suite(project, [case("ctx", {"response": "x"}, instructions="Case instructions.")])
    project.run("run", "suite.yaml")
    [ctx] = agents.CONTEXTS
    assert ctx.test_case_name == "ctx"
    assert ctx.instructions == "Suite instructions.\n\nCase instructions."
    assert ctx.agent["factory"] == "tests.agents:scripted"
    with pytest.raises(TypeError):
        ctx.context["script"] = []  # type: ignore[index]


def test_files_go_with_their_turn(project: Project) -> None:
    project.write("data/chart.png", "png")
    project.write(
        "suite.yaml",
        HEAD
        + """\
test_cases:
  - context: {script: [{echo_files: true}, {echo_files: true}]}
    turns:
      - {input: a, files: [{path: data/chart.png}]}
      - {input: b}
""",
    )
    turns = project.run("run", "suite.yaml").report["results"][0]["turns"]
    assert [t["response"] for t in turns] == ["chart.png:image/png", ""]


def test_fatal_backend_error_stops_the_run(project: Project) -> None:
    suite(project, [case("first", {"raise": "fatal"}), case("second", {"response": "x"})])
    result = project.run("run", "suite.yaml")
    assert result.code == 3
    report = result.report
    assert report["run"]["complete"] is False
    assert (
        report["run"]["stop_reason"]
        == "stopped after a fatal backend error: authentication failed: invalid API key"
    )
    first, second = report["results"]
    assert first["turns"][0]["errors"] == ["authentication failed: invalid API key"]
    assert second["skipped"] is True
    assert second["errors"] == [
        "not run: stopped after a fatal backend error: authentication failed: invalid API key"
    ]
    assert agents.OPENED == ["first"]


def test_legacy_case_has_no_turns_in_the_report(project: Project) -> None:
    case = {
        "name": "legacy",
        "input": "hello",
        "ground_truth": "hi",
        "expected_tools": ["greet"],
        "context": {"script": [{"response": "hi", "tools": [{"name": "greet", "args": {}}]}]},
        "evaluations": [{"type": "standard", "metric": "equality"}],
    }
    suite(project, [case])
    result = project.run("run", "suite.yaml")
    assert result.code == 0
    [legacy] = result.report["results"]
    assert "turns" not in legacy  # SPEC 8: absent for legacy single-turn test cases
    assert (legacy["input"], legacy["response"], legacy["tools_matched"]) == ("hello", "hi", True)
    assert legacy["metric_results"][0]["passed"] is True


def test_text_utf8_cannot_encode_does_not_break_the_reports(project: Project) -> None:
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'tests.agents:surrogates'}\n"
        "test_cases: [{input: x, expected_tools: [lookup]}, {input: y}]\n",
    )
    result = project.run("run", "suite.yaml", formats=("json", "junit", "markdown", "html"))
    assert result.code == 0, result.out + result.err
    first = result.report["results"][0]
    assert first["response"] == "bad ? text"
    assert first["tool_invocations"][0]["args"] == {"row": "?"}
    assert len((result.report_dir / "results.jsonl").read_text().splitlines()) == 2
