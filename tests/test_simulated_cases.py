"""Simulated test cases end to end with python simulators: the CLI on suites with ``user:``.

The agent is the scripted python agent (``tests.agents:scripted``: one reply per turn
from ``context.script``), the simulated user :class:`tests.simulators.ScriptedUser`
(``context.say``: its messages and its end, in order; ``context.runs``: one such list
per run of ``--repeat``). Each test reads what a user reads: ``report.json``, the
exit code, summary.md, junit.xml.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests import agents, conversation_graders, simulators
from tests.conftest import CliResult, Project

HEAD = """\
agent: {backend: python, factory: tests.agents:scripted}
user_simulator: {backend: python, factory: tests.simulators:scripted}
"""


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    simulators.reset()
    yield
    simulators.reset()


def end(
    outcome: str = "goal_met", message: str | None = None, reason: str = "done"
) -> dict[str, Any]:
    return {"message": message, "done": True, "outcome": outcome, "reason": reason}


def case(
    name: str = "sim",
    *,
    say: list[Any] | None = None,
    runs: list[list[Any]] | None = None,
    script: list[dict[str, Any]] | None = None,
    user: str = "",
    turns: list[str] | None = None,
    extra: str = "",
) -> str:
    context: dict[str, Any] = {"script": script or []}
    if say is not None:
        context["say"] = say
    if runs is not None:
        context["runs"] = runs
    lines = [f"- name: {name}", f"  context: {json.dumps(context)}"]
    if turns:
        lines.append("  turns:")
        lines += [f"  - input: {json.dumps(t)}" for t in turns]
    lines.append(f"  user: {{goal: get a refund for W123{', ' + user if user else ''}}}")
    if extra:
        lines += ["  " + line for line in textwrap.dedent(extra).strip().splitlines()]
    return "\n".join(lines) + "\n"


def suite(*cases: str, top: str = "") -> str:
    return HEAD + top + "test_cases:\n" + "".join(cases)


def replies(*texts: str) -> list[dict[str, Any]]:
    return [{"response": t} for t in texts]


def ran_case(
    project: Project, *argv: str, formats: Sequence[str] = ("json",), **fields: Any
) -> CliResult:
    """``run`` (``argv``, ``formats``) of a suite of one simulated case, :func:`case` of
    ``fields``."""
    return project.ran(suite(case(**fields)), *argv, formats=formats)


def only(report: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = report["results"][0]
    return result


def metric(case_result: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((m for m in case_result["metric_results"] if m["metric_name"] == name), None)


# --------------------------------------------------------------- the conversation


def test_scripted_turns_first_then_the_simulated_user_takes_over(project: Project) -> None:
    result = ran_case(
        project,
        turns=["hi, my blender arrived broken"],
        say=["order W123, please refund it", end(message="thanks!", reason="refunded")],
        script=replies("Sorry! Which order?", "Refund issued for W123.", "Bye."),
    )
    assert result.code == 0, result.out + result.err
    c = only(result.report)
    assert [(t["input"], t["source"], t["response"]) for t in c["turns"]] == [
        ("hi, my blender arrived broken", "scripted", "Sorry! Which order?"),
        ("order W123, please refund it", "simulated", "Refund issued for W123."),
        ("thanks!", "simulated", "Bye."),  # a message given with done is still sent
    ]
    assert [m for _, m in agents.SENT] == [t["input"] for t in c["turns"]]
    sim = c["simulation"]
    assert (sim["outcome"], sim["reason"], sim["user_turns"]) == ("goal_met", "refunded", 2)
    assert sim["simulator"] == {
        "backend": "python",
        "model": None,
        "factory": "tests.simulators:scripted",
    }
    assert sim["goal"] == "get a refund for W123"
    user_goal = metric(c, "user_goal")
    assert user_goal is not None and user_goal["passed"] and user_goal["scope"] == "conversation"
    # the simulated user saw the scripted turn (and the agent's reply to it) first
    first_seen = simulators.SEEN[0][2]
    assert [(m.role, m.text) for m in first_seen] == [
        ("user", "hi, my blender arrived broken"),
        ("agent", "Sorry! Which order?"),
    ]
    # nothing of the goal or the facts reaches the agent: only the messages
    assert all("W123" not in m or m.startswith("order") or m == "thanks!" for _, m in agents.SENT)


@pytest.mark.parametrize(
    ("say", "passed", "outcome", "reason"),
    [
        (["hi", end("goal_met")], True, "goal_met", "the simulated user ended with goal_met: done"),
        (["hi", end("gave_up", reason="refused")], False, "gave_up", "gave_up: refused"),
        (["hi", end("out_of_scope")], False, "out_of_scope", "ended with out_of_scope"),
        (["a", "b", "c"], False, "max_turns", "sent 2 messages (max_turns) without ending"),
    ],
)
def test_each_outcome_decides_user_goal(
    project: Project, say: list[Any], passed: bool, outcome: str, reason: str
) -> None:
    result = ran_case(project, formats=("json", "junit"), say=say, user="max_turns: 2")
    c = only(result.report)
    assert c["simulation"]["outcome"] == outcome
    assert c["passed"] is passed
    assert result.code == (0 if passed else 1)
    user_goal = metric(c, "user_goal")
    assert user_goal is not None and user_goal["passed"] is passed
    assert reason in user_goal["reason"]
    if outcome == "max_turns":
        assert len(c["turns"]) == 2  # the simulator is not asked a third time
        assert len(simulators.SEEN) == 2
    junit = (result.report_dir / "junit.xml").read_text()
    assert outcome in junit  # JUnit names the outcome


def test_an_end_before_any_message_is_an_invalid_simulation(project: Project) -> None:
    c = only(ran_case(project, say=[end("goal_met")]).report)
    assert c["simulation"]["outcome"] == "invalid_simulation"
    assert "before any message was sent: nothing was tested" in c["simulation"]["reason"]
    assert c["outcome"] == "error"


def test_done_without_a_message_ends_at_once(project: Project) -> None:
    c = only(ran_case(project, say=["refund W123", end(reason="it is refunded")]).report)
    assert [t["input"] for t in c["turns"]] == ["refund W123"]
    assert c["simulation"]["user_turns"] == 1
    assert c["simulation"]["silent_end"] is True
    assert c["passed"]


def test_require_goal_false_leaves_user_goal_out(project: Project) -> None:
    result = ran_case(project, say=["hi", end("gave_up")], user="require_goal: false")
    c = only(result.report)
    assert result.code == 0 and c["passed"]
    assert metric(c, "user_goal") is None
    assert c["simulation"]["outcome"] == "gave_up"


def test_the_suite_default_of_require_goal_applies(project: Project) -> None:
    top = "user_simulator: {backend: python, factory: tests.simulators:scripted, require_goal: false}\n"
    text = suite(case(say=["hi", end("gave_up")])).replace(HEAD.splitlines()[1] + "\n", top)
    assert project.ran(text).code == 0


def test_the_opening_is_the_first_message_and_counts_toward_max_turns(project: Project) -> None:
    c = only(
        ran_case(project, say=["second", "third"], user="opening: hello there, max_turns: 2").report
    )
    assert [(t["input"], t["source"]) for t in c["turns"]] == [
        ("hello there", "scripted"),
        ("second", "simulated"),
    ]
    assert c["simulation"]["outcome"] == "max_turns"
    assert c["simulation"]["user_turns"] == 2
    assert len(simulators.SEEN) == 1  # the opening is sent without asking


def test_two_session_errors_end_the_conversation_as_agent_error(project: Project) -> None:
    result = ran_case(
        project, say=["one", "two", "three"], script=[{"raise": "session"}, {"raise": "session"}]
    )
    c = only(result.report)
    assert result.code == 1
    assert c["simulation"]["outcome"] == "agent_error"
    assert "2 consecutive session errors" in c["simulation"]["reason"]
    assert len(c["turns"]) == 2
    assert c["turns"][0]["errors"] == ["the agent lost its connection"]


def test_a_dead_session_in_the_scripted_turns_never_reaches_the_simulator(project: Project) -> None:
    c = only(ran_case(project, turns=["hi", "again"], say=["x"], script=[{"raise": "dead"}]).report)
    assert c["simulation"]["outcome"] == "agent_error"
    assert "in the scripted turns" in c["simulation"]["reason"]
    assert simulators.SEEN == []
    assert [t["skipped"] for t in c["turns"]] == [False, True]
    assert {t["source"] for t in c["turns"]} == {"scripted"}


def test_a_simulator_that_raises_is_invalid_and_errors_the_case(project: Project) -> None:
    result = ran_case(
        project, formats=("json", "junit", "markdown"), say=["hello", {"raise": "no more ideas"}]
    )
    c = only(result.report)
    assert result.code == 1
    assert c["outcome"] == "error"  # the simulator's fault, not a failed check of the agent
    assert c["simulation"]["outcome"] == "invalid_simulation"
    assert c["errors"] == [
        "invalid_simulation: the simulated user (python tests.simulators:scripted): "
        "next_message() raised ValueError: no more ideas"
    ]
    user_goal = metric(c, "user_goal")
    assert user_goal is not None and not user_goal["passed"]
    assert user_goal["error"].startswith("not judged: the simulation is invalid")
    assert c["turns"][0]["passed"]  # the agent's turn itself passed
    assert c["tracebacks"][0]["where"] == "the simulator's next_message()"
    junit = (result.report_dir / "junit.xml").read_text()
    assert '<error type="InfrastructureError"' in junit
    assert "invalid_simulation" in junit


def test_a_factory_that_fails_is_invalid_without_a_turn(project: Project) -> None:
    top = "user_simulator: {backend: python, factory: tests.simulators:broken_factory}\n"
    c = only(project.ran(suite(case(say=[])).replace(HEAD.splitlines()[1] + "\n", top)).report)
    assert c["simulation"]["outcome"] == "invalid_simulation"
    assert "the factory failed: RuntimeError: the factory is broken" in c["simulation"]["reason"]
    assert c["turns"] == [] and c["outcome"] == "error"


def test_a_simulator_that_never_answers_is_bounded_by_the_turn_timeout(project: Project) -> None:
    result = ran_case(project, "--turn-timeout", "0.3", say=["hello", {"sleep": 3}])
    c = only(result.report)
    assert c["simulation"]["outcome"] == "invalid_simulation"
    assert "gave no answer within 0.3 s (turn_timeout) for turn 2" in c["simulation"]["reason"]
    assert any(
        "the simulator's next_message()" in w and "thread was abandoned" in w for w in c["warnings"]
    ), c["warnings"]


# ------------------------------------------------------------------------- checks


def test_the_cases_evaluations_run_on_every_simulated_turn(project: Project) -> None:
    text = suite(
        case(
            turns=["hi"],
            say=["refund please", end(message="ok", reason="fine")],
            script=replies("Hello, stupid.", "Done.", "Bye."),
            extra="""
            evaluations:
            - {type: standard, metric: not_contains, name: polite, value: [stupid]}
            - {type: standard, metric: equality, name: exact}
            """,
        )
    ).replace('  - input: "hi"\n', '  - input: "hi"\n    ground_truth: "Hello."\n')
    result = project.ran(text)
    c = only(result.report)
    names = [[m["metric_name"] for m in t["metric_results"]] for t in c["turns"]]
    # the response check on every turn; the ground-truth check only where there is one
    assert names == [["polite", "exact"], ["polite"], ["polite"]]
    assert not c["turns"][0]["passed"] and c["turns"][1]["passed"]
    assert result.code == 1


def test_conversation_checks_see_the_simulated_conversation(project: Project) -> None:
    script = [
        {"response": "checking", "tools": [{"name": "lookup_order", "args": {"id": "W123"}}]},
        {"response": "refunded", "tools": [{"name": "issue_refund", "args": {"id": "W123"}}]},
    ]
    text = suite(
        case(
            say=["where is W123", end(message="great", reason="refunded")],
            script=script,
            extra="""
            conversation_tools:
              tool_order: in_order
              expected_tools: [lookup_order, {name: issue_refund, count: 1, max_count: 1}]
            conversation_evaluations:
            - {type: code, grader: "tests.conversation_graders:record"}
            """,
        )
    )
    project.write("suite.yaml", text)
    conversation_graders.SEEN.clear()
    c = only(project.run("run", "suite.yaml").report)
    seen = conversation_graders.SEEN[-1]
    assert [t.input for t in seen.turns] == ["where is W123", "great"]
    tools = metric(c, "conversation_tools")
    assert tools is not None and tools["passed"], tools
    assert [m["metric_name"] for m in c["metric_results"] if m.get("scope") == "conversation"] == [
        "conversation_tools",
        "record",
        "user_goal",
    ]


def test_a_failing_simulated_case_is_a_transcript_in_summary_md(project: Project) -> None:
    result = ran_case(
        project,
        formats=("json", "markdown", "html"),
        turns=["hi"],
        say=["refund W123 @everyone", end("gave_up", message="forget it", reason="no")],
        script=replies("hello", "**no** refunds <b>today</b>", "bye"),
    )
    md = (result.report_dir / "summary.md").read_text()
    assert "<b>Simulated user</b> (python tests.simulators:scripted)" in md
    assert "👤 <b>user</b> <i>(scripted)</i>: hi" in md
    assert "👤 <b>user</b> <i>(simulated)</i>: refund W123 @\u200beveryone" in md  # no ping
    assert "&#42;&#42;no&#42;&#42; refunds &lt;b&gt;today&lt;/b&gt;" in md  # agent text inert
    assert "🏁 <b>ended</b>: gave&#95;up after 2 messages: no" in md
    assert "| Turn | Input |" not in md  # the transcript replaces the turn table
    html = (result.report_dir / "report.html").read_text()
    assert 'class="chat"' in html and html.count('class="msg user"') == 3
    assert "&lt;b&gt;today&lt;/b&gt;" in html and "<b>today</b>" not in html


def test_a_case_with_user_and_no_simulated_fields_writes_none_of_them(project: Project) -> None:
    text = json.dumps(
        project.ran(
            "agent: {backend: python, factory: tests.agents:scripted}\n"
            "test_cases:\n- name: plain\n  turns: [{input: hi}]\n"
        ).report
    )
    for key in ("simulation", '"source"', "user_token_usage", "user_cost_usd"):
        assert key not in text


# ------------------------------------------------------------------------ repeats


def test_each_run_simulates_afresh_and_a_flaky_case_names_the_outcomes(project: Project) -> None:
    runs = [["hi", end("goal_met")], ["hi", end("gave_up", reason="refused")], ["hi", end()]]
    result = ran_case(project, "--repeat", "3", formats=("json", "markdown"), runs=runs, say=None)
    c = only(result.report)
    assert [ctx.run_index for ctx in simulators.CONTEXTS] == [0, 1, 2]
    assert [r["simulation"]["outcome"] for r in c["runs"]] == ["goal_met", "gave_up", "goal_met"]
    repeat = c["repeat"]
    assert (repeat["passes"], repeat["runs"], repeat["flaky"]) == (2, 3, True)
    assert repeat["outcomes"] == {"goal_met": 2, "gave_up": 1}
    md = (result.report_dir / "summary.md").read_text()
    assert "the simulated user ended goal&#95;met in 2, gave&#95;up in 1 runs" in md
    assert "conversation check user&#95;goal passed 2 of 3" in md


def test_an_invalid_run_is_left_out_of_pass_k_with_the_count_shown(project: Project) -> None:
    runs = [["hi", end("goal_met")], [{"raise": "broken"}], ["hi", end("goal_met")]]
    result = ran_case(project, "--repeat", "3", formats=("json", "markdown"), runs=runs, say=None)
    c = only(result.report)
    repeat = c["repeat"]
    assert (repeat["passes"], repeat["runs"], repeat["invalid_runs"]) == (2, 2, 1)
    assert repeat["pass_all"] and not repeat["flaky"]
    assert c["passed"] and result.code == 0
    assert len(c["runs"]) == 3  # every run is still reported
    assert "1 invalid simulated run left out" in (result.report_dir / "summary.md").read_text()
    assert result.report["summary"]["repeat"]["invalid_runs"] == 1
    assert "2/2 runs (1 invalid left out)" in result.out


def test_a_case_whose_runs_are_all_invalid_errors(project: Project) -> None:
    result = ran_case(project, "--repeat", "2", runs=[[{"raise": "broken"}]], say=None)
    c = only(result.report)
    assert result.code == 1
    assert (c["passed"], c["outcome"]) == (False, "error")
    assert c["repeat"]["invalid_runs"] == 2 and c["repeat"]["runs"] == 0
    assert "all 2 runs were invalid simulations" in c["errors"][-1]


# ------------------------------------------------------------------------ regrade


def test_regrade_replays_the_recorded_conversation_without_the_simulator(project: Project) -> None:
    first = ran_case(
        project,
        turns=["hi"],
        say=["refund W123", end(message="thanks", reason="refunded")],
        script=replies("hello", "refunded, you moron", "bye"),
    )
    assert first.code == 0
    recorded = [t["input"] for t in only(first.report)["turns"]]
    simulators.reset()
    agents.reset()
    # the suite gains a response check that the recorded second reply fails
    text = (
        (project.root / "suite.yaml")
        .read_text()
        .replace(
            "  user:",
            "  evaluations: [{type: standard, metric: not_contains, name: polite, value: [moron]}]\n"
            "  user:",
        )
    )
    project.write("suite.yaml", text)
    result = project.run("regrade", "out/report.json", "-o", "rg")
    report = json.loads((project.root / "rg" / "report.json").read_text())
    c = only(report)
    assert simulators.CONTEXTS == [] and simulators.SEEN == []  # no simulator was made
    assert agents.SENT == []  # nor any agent called
    assert [t["input"] for t in c["turns"]] == recorded
    assert [t["source"] for t in c["turns"]] == ["scripted", "simulated", "simulated"]
    assert c["simulation"]["outcome"] == "goal_met"
    assert [t["passed"] for t in c["turns"]] == [True, False, True]
    assert report["regrade"]["flipped_to_failed"] == 1
    assert result.code == 1


def test_a_changed_user_block_is_not_regradable(project: Project) -> None:
    assert ran_case(project, say=["refund W123", end()]).code == 0
    text = (project.root / "suite.yaml").read_text()
    project.write("suite.yaml", text.replace("get a refund for W123", "get a refund for W999"))
    result = project.run("regrade", "out/report.json", "-o", "rg")
    c = only(json.loads((project.root / "rg" / "report.json").read_text()))
    assert c["skipped"] and c["errors"] == ["not regradable: simulation changed"]
    assert "simulation" not in c
    assert result.code == 1


def test_changing_a_check_flag_keeps_the_case_regradable(project: Project) -> None:
    assert ran_case(project, say=["hi", end("gave_up")]).code == 1
    text = (project.root / "suite.yaml").read_text()
    project.write("suite.yaml", text.replace("W123}", "W123, require_goal: false}"))
    result = project.run("regrade", "out/report.json", "-o", "rg")
    c = only(json.loads((project.root / "rg" / "report.json").read_text()))
    assert c["passed"] and result.code == 0
    assert c["simulation"]["outcome"] == "gave_up"


# ---------------------------------------------------------------------- parallel


def test_eight_simulated_cases_at_once_keep_their_own_conversations(project: Project) -> None:
    cases = [
        case(
            f"case{i}",
            say=[f"message from {i}", end(message=f"bye from {i}", reason=f"r{i}")],
            script=replies(f"reply to {i}", f"last reply to {i}"),
        )
        for i in range(16)
    ]
    result = project.ran(suite(*cases), "-p", "8")
    assert result.code == 0, result.out
    assert agents.MAX_OPEN > 1
    for i, c in enumerate(result.report["results"]):
        assert c["name"] == f"case{i}"
        assert [t["input"] for t in c["turns"]] == [f"message from {i}", f"bye from {i}"]
        assert [t["response"] for t in c["turns"]] == [f"reply to {i}", f"last reply to {i}"]
        assert c["simulation"]["reason"] == f"r{i}"


# ---------------------------------------------------------------------- validate


@pytest.mark.parametrize(
    ("case_text", "message"),
    [
        (
            "- name: x\n  turns: [{input: hi}]\n  user: {goal: g, opening: hello}\n",
            "test_cases[0] (\"x\") user.opening: not allowed beside 'turns:'",
        ),
        (
            "- name: x\n  user: {goal: g, max_turns: 0}\n",
            'test_cases[0] ("x") user.max_turns: must be at least 1',
        ),
        (
            "- name: x\n  input: hi\n  user: {goal: g}\n",
            'test_cases[0] ("x") input: a simulated test case (user:) has no',
        ),
        (
            "- name: x\n  user: {goal: g, simulator: {fidelity: true}}\n",
            "user.simulator.fidelity: belongs in user: (user.fidelity)",
        ),
        (
            "- name: x\n  user: {goal: g, simulator: {backend: anthropic}}\n",
            "user.simulator.model: no simulated-user model",
        ),
        (
            "- name: x\n  user: {goal: g, fidelity: true}\n",
            "user.fidelity: fidelity: true judges each simulated message with the suite's judge",
        ),
        (
            "- name: x\n  user: {goal: g, simulator: {factory: tests.simulators:two_args}}\n",
            "user.simulator.factory: the simulator factory must take one argument",
        ),
    ],
)
def test_validate_locates_every_simulated_user_error(
    project: Project, case_text: str, message: str
) -> None:
    project.write("suite.yaml", HEAD + "test_cases:\n" + case_text)
    result = project.run("validate", "suite.yaml", env={"ANTHROPIC_API_KEY": ""})
    assert result.code == 2, result.err
    assert message in result.err
    assert "suite.yaml:" in result.err  # file and line
    assert simulators.CONTEXTS == [] and agents.OPENED == []


def test_dry_run_bounds_simulated_turns_and_fidelity_calls_by_max_turns(
    project: Project,
) -> None:
    project.write(
        "suite.yaml",
        suite(
            case(user='opening: "hi", max_turns: 3, fidelity: true'),
            top="judge: {backend: anthropic, model: claude-haiku-4-5}\n"
            "evaluations:\n- {type: judge, rubric: The reply is polite.}\n",
        ),
    )
    result = project.run(
        "run", "suite.yaml", "--dry-run", "--repeat", "2", env={"ANTHROPIC_API_KEY": "sk-x"}
    )
    assert result.code == 0, result.err
    # per run: a judged turn for each of the 3 messages (the opening too), and a fidelity
    # call for each of the 2 the simulator writes; a python simulator makes no model call
    assert "LLM-judge calls: up to 10 " in result.out
    assert "4 of them the fidelity judge's" in result.out
    assert "simulated-user calls" not in result.out
    assert simulators.CONTEXTS == [] and agents.OPENED == []


# -------------------------------------------------------------------------- docs


def _blocks(kind: str) -> list[str]:
    from tests import docs_pages

    section = docs_pages.section("simulated-users")
    return re.findall(rf"^```{kind}\n(.*?)^```$", section, re.M | re.S)


def test_the_docs_show_the_packaged_prompt_template() -> None:
    from multiturn_eval.simulation.prompt import packaged_template
    from tests import docs_pages

    assert packaged_template() in docs_pages.section("simulated-users")


def test_the_docs_suite_example_is_a_valid_suite() -> None:
    from multiturn_eval.suite import Suite
    from multiturn_eval.yaml_source import parse_yaml

    example = _blocks("yaml")[0]
    data = parse_yaml("agent: {backend: python, factory: a:b}\n" + example).data
    suite = Suite.model_validate(data)
    assert suite.user_simulator is not None and suite.user_simulator.model == "claude-haiku-4-5"
    user = suite.test_cases[0].user
    assert user is not None and user.max_turns == 8 and user.simulator is not None


def test_the_docs_python_simulator_works_as_written(project: Project) -> None:
    project.write("my_tests/__init__.py", "")
    project.write("my_tests/customers.py", _blocks("python")[0])
    script = replies("Which order?", "Refund issued for W123.", "Bye.")
    result = project.ran(
        "agent: {backend: python, factory: tests.agents:scripted}\n"
        + _blocks("yaml")[1]
        + "test_cases:\n"
        + f"- name: docs\n  context: {{script: {json.dumps(script)}}}\n"
        + "  user: {goal: refund, known: {order_id: W123}}\n"
    )
    assert result.code == 0, result.out + result.err
    c = only(result.report)
    assert [t["input"] for t in c["turns"]] == [
        "I'd like a refund for order W123.",
        "It is order W123.",
        "Thanks!",
    ]
