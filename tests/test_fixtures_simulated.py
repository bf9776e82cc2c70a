"""``--fixtures`` with simulated users, through the real anthropic SDK against the fake server.

The fake plays every model: the agent (``backend: anthropic``, or the scripted python agent
when a test changes the agent's replies), the simulated customer (the LLM simulator's
forced ``user_turn`` tool) and the fidelity judge (``record_fidelity``). A simulated
conversation is recorded, replayed with the server stopped, no key and ``connect`` refused,
and re-recorded byte for byte. When the agent's reply at a turn is no longer the one the
recorded user answered, the replay stops: "diverged at turn k" and the first difference,
as the case's error in every report, never a user turn answering a reply never given.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cassettes import no_network
from tests.conftest import CliResult, Project
from tests.fakes import anthropic_server as fa
from tests.fakes._server import Request

REPLY = "REPLY#"
"""What marks an agent's reply in the simulated user's prompt (the fake counts them)."""


def prompt_of(request: Request) -> str:
    content = request.body["messages"][0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def play(ends_after: int = 3) -> Any:
    """The fake as agent, customer and fidelity judge (deterministic: the same request, the
    same answer). The customer asks question n after the agent's n-1st reply and ends with
    goal_met once it has seen ``ends_after`` replies."""

    def respond(request: Request) -> fa.Message:
        name = (request.body.get("tool_choice") or {}).get("name")
        if name == "record_fidelity":
            fields: dict[str, Any] = {"passed": True, "reason": "kept to its goal"}
            return fa.Message(tool_uses=[fa.ToolUse(name, fields)], usage=fa.Usage(500, 30))
        if name == "user_turn":
            prompt = prompt_of(request)
            seen = prompt.count(REPLY)
            goal = "refund" if "refund" in prompt else "other"
            if seen >= ends_after:
                fields = {"message": None, "done": True, "outcome": "goal_met", "reason": "done"}
            else:
                fields = {
                    "message": f"{goal} question {seen + 1}",
                    "done": False,
                    "outcome": None,
                    "reason": None,
                }
            return fa.Message(tool_uses=[fa.ToolUse(name, fields)], usage=fa.Usage(300, 20))
        said = request.body["messages"][-1]["content"]
        said = said if isinstance(said, str) else said[-1].get("text", "")
        return fa.text(f"{REPLY} answer to {said}", fa.Usage(100, 10))

    return respond


def suite(
    *,
    agent: str = "{backend: anthropic, model: claude-haiku-4-5, max_tokens: 256}",
    cases: int = 1,
    max_turns: int = 5,
    fidelity: bool = False,
    context: str = "",
) -> str:
    lines = [
        f"agent: {agent}",
        "user_simulator: {backend: anthropic, model: claude-haiku-4-5, retry: {initial_delay: 0}"
        + (", fidelity: true" if fidelity else "")
        + "}",
        "judge: {backend: anthropic, model: claude-haiku-4-5}",
        "test_cases:",
    ]
    for i in range(cases):
        lines += [
            f"- name: customer {i}",
            *([f"  context: {context}"] if context else []),
            "  user:",
            f"    goal: Get a refund for order W{100 + i}.",
            f"    known: {{order_id: W{100 + i}}}",
            f"    max_turns: {max_turns}",
        ]
    return "\n".join(lines) + "\n"


def env_of(fake: fa.FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}


KEYLESS = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
"""A replay's environment: no key, and an endpoint nothing listens on."""


def entries(project: Project, name: str = "customer-0.jsonl") -> list[dict[str, Any]]:
    path = project.root / "fixtures" / "suite" / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def transcript(result: CliResult, case: int = 0) -> list[tuple[str, str | None]]:
    turns = result.report["results"][case]["turns"]
    return [(t["input"], t["response"]) for t in turns]


def replay(project: Project, *extra: str, **kwargs: Any) -> tuple[CliResult, list[Any]]:
    with no_network() as attempts:
        result = project.run("run", "suite.yaml", "--fixtures", "replay", *extra, **kwargs)
    return result, attempts


# ------------------------------------------------------------------ record, replay, re-record


def test_a_simulated_conversation_records_and_replays_with_no_key_and_no_network(
    project: Project,
) -> None:
    project.write("suite.yaml", suite(fidelity=True))
    with fa.FakeAnthropic(play()) as fake:
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env_of(fake))
        made = len(fake.requests)
    assert recorded.code == 0, recorded.out + recorded.err
    case = recorded.report["results"][0]
    assert case["simulation"]["outcome"] == "goal_met" and case["simulation"]["user_turns"] == 3
    calls = entries(project)[1:]
    sides = [(e["side"], e["turn"]) for e in calls]
    # each turn: the customer's call for it, then the agent's; then its closing call (turn 4,
    # no message) and the fidelity judge's verdicts (the conversation's)
    assert sides[:6] == [
        ("user", 1),
        ("agent", 1),
        ("user", 2),
        ("agent", 2),
        ("user", 3),
        ("agent", 3),
    ]
    assert sides[6] == ("user", 4)
    assert set(sides[7:]) == {("judge", None)} and len(sides[7:]) == 4  # each step judged
    assert made == len(calls)
    assert entries(project)[0]["models"] == {
        "agent": ["claude-haiku-4-5"],
        "judge": ["claude-haiku-4-5"],
        "user": ["claude-haiku-4-5"],
    }

    replayed, attempts = replay(project, env=KEYLESS, formats=("json", "markdown"))
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == []
    assert transcript(replayed) == transcript(recorded)
    again = replayed.report["results"][0]
    assert again["simulation"]["outcome"] == "goal_met"
    assert again["simulation"]["fidelity"] == case["simulation"]["fidelity"]
    assert [t["replayed"] for t in again["turns"]] == [True, True, True]
    fixtures = replayed.report["run"]["fixtures"]
    assert (fixtures["replayed"], fixtures["missed"], fixtures["unused"]) == (len(calls), 0, 0)
    # the recorded cost that was not spent: the agent's, the customer's and the judge's
    summary = replayed.report["summary"]
    spent = summary["cost_usd"] + summary["judge_cost_usd"] + summary["user_cost_usd"]
    assert fixtures["replayed_cost_usd"] > 0
    assert fixtures["replayed_cost_usd"] == pytest.approx(spent)


def test_re_recording_an_unchanged_simulated_conversation_rewrites_no_byte(
    project: Project,
) -> None:
    # no fidelity judge here: its verdicts are asked for all at once, and the fake numbers
    # its message ids in arrival order (a real server's ids differ on every call anyway)
    project.write("suite.yaml", suite())
    fixture = project.root / "fixtures" / "suite" / "customer-0.jsonl"
    written = []
    for _ in range(2):
        with fa.FakeAnthropic(play()) as fake:
            result = project.run("run", "suite.yaml", "--fixtures", "record", env=env_of(fake))
        assert result.code == 0, result.out
        written.append(fixture.read_bytes())
    assert written[0] == written[1]
    assert result.report["results"][0]["fixture"]["written"] is False


# ------------------------------------------------------------------ divergence

SCRIPTED = "{backend: python, factory: tests.agents:scripted}"


def scripted_context(*replies: str) -> str:
    return json.dumps({"script": [{"response": f"{REPLY} {r}"} for r in replies]})


def record_scripted(
    project: Project, *replies: str, max_turns: int = 5, code: int = 0
) -> CliResult:
    project.write(
        "suite.yaml",
        suite(agent=SCRIPTED, context=scripted_context(*replies), max_turns=max_turns),
    )
    with fa.FakeAnthropic(play()) as fake:
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env_of(fake))
    assert recorded.code == code, recorded.out + recorded.err
    return recorded


def test_an_agent_reply_that_changed_stops_the_replay_diverged_at_that_turn(
    project: Project,
) -> None:
    record_scripted(project, "one", "two", "three")
    # your agent now answers turn 2 otherwise: the customer's turn-3 call answers another reply
    project.write(
        "suite.yaml", suite(agent=SCRIPTED, context=scripted_context("one", "TWO!", "three"))
    )
    result, attempts = replay(project, env=KEYLESS, formats=("json", "markdown", "junit", "html"))
    assert attempts == []
    assert result.code == 1
    case = result.report["results"][0]
    assert case["outcome"] == "error"
    assert len(case["turns"]) == 2  # no turn 3 answering a reply that was never given
    assert case["simulation"]["outcome"] == "diverged"
    [error] = [e for e in case["errors"] if "diverged" in e]
    assert error.startswith(
        'not in the fixtures: test case "customer 0", run 1, turn 3, user call 3 '
        "(POST /v1/messages): diverged at turn 3: the simulated user's request is not the "
        "recorded one"
    )
    # the first difference, recorded vs now, and the command that re-records the case
    assert "messages[0].content: recorded " in error and "two" in error and "TWO!" in error
    assert "(compared with fixtures/suite/customer-0.jsonl:" in error
    assert error.endswith(
        "Re-record this test case: multiturn-eval run 'suite.yaml' --fixtures update -k 'customer 0'"
    )
    assert case["simulation"]["reason"].startswith("diverged at turn 3: ")
    assert case["fixture"]["misses"] == [error]
    summary = (result.report_dir / "summary.md").read_text()
    assert "diverged at turn 3" in summary
    for name in ("junit.xml", "report.html"):
        assert "diverged at turn 3" in (result.report_dir / name).read_text(), name
    assert "diverged at turn 3" in result.out  # the console
    # the fixture is left as it was: a replay writes nothing
    assert [e["turn"] for e in entries(project)[1:] if e["side"] == "user"] == [1, 2, 3, 4]


def test_a_recording_that_ends_early_stops_at_the_first_turn_it_does_not_hold(
    project: Project,
) -> None:
    record_scripted(project, "one", "two", "three", "four", max_turns=2, code=1)  # max_turns
    project.write(
        "suite.yaml",
        suite(agent=SCRIPTED, context=scripted_context("one", "two", "three", "four")),
    )
    result, attempts = replay(project, env=KEYLESS)
    assert attempts == [] and result.code == 1
    case = result.report["results"][0]
    assert case["simulation"]["outcome"] == "diverged" and len(case["turns"]) == 2
    [error] = [e for e in case["errors"] if "diverged" in e]
    assert (
        "diverged at turn 3: the recording (fixtures/suite/customer-0.jsonl) ends at turn 2: "
        "it holds no simulated-user call for turn 3" in error
    )


def test_update_after_a_divergence_rerecords_from_that_turn_and_then_replays_clean(
    project: Project,
) -> None:
    record_scripted(project, "one", "two", "three")
    old = entries(project)
    project.write(
        "suite.yaml", suite(agent=SCRIPTED, context=scripted_context("one", "TWO!", "three"))
    )
    with fa.FakeAnthropic(play()) as fake:
        updated = project.run("run", "suite.yaml", "--fixtures", "update", env=env_of(fake))
        live = [prompt_of(r) for r in fake.requests]
    assert updated.code == 0, updated.out + updated.err
    case = updated.report["results"][0]
    assert case["simulation"]["outcome"] == "goal_met"
    # turns 1 and 2 came from the fixture; the customer went live from turn 3 on
    assert len(live) == 2 and all("TWO!" in p for p in live)
    assert [t["replayed"] for t in case["turns"]] == [True, True, False]
    assert any(
        n.startswith("re-recorded from turn 3, user call 3: diverged at turn 3")
        for n in case["fixture"]["notes"]
    ), case["fixture"]["notes"]
    new = entries(project)
    assert new[1:3] == old[1:3]  # what still matches is kept as it was
    assert new != old

    result, attempts = replay(project, env=KEYLESS)
    assert attempts == [] and result.code == 0, result.out
    assert transcript(result) == transcript(updated)


def test_update_after_a_divergence_with_no_key_says_a_key_is_needed(project: Project) -> None:
    record_scripted(project, "one", "two", "three")
    before = (project.root / "fixtures" / "suite" / "customer-0.jsonl").read_bytes()
    project.write(
        "suite.yaml", suite(agent=SCRIPTED, context=scripted_context("one", "TWO!", "three"))
    )
    with no_network() as attempts:
        result = project.run("run", "suite.yaml", "--fixtures", "update", env=KEYLESS)
    assert attempts == [] and result.code == 1
    [error] = [e for e in result.report["results"][0]["errors"] if "diverged" in e]
    assert "which needs the API key; none is set" in error
    assert (project.root / "fixtures" / "suite" / "customer-0.jsonl").read_bytes() == before


def test_four_at_once_each_simulated_case_replays_its_own_conversation(project: Project) -> None:
    project.write("suite.yaml", suite(cases=6))
    with fa.FakeAnthropic(play(ends_after=2)) as fake:
        recorded = project.run(
            "run", "suite.yaml", "--fixtures", "record", "-p", "4", env=env_of(fake)
        )
    assert recorded.code == 0, recorded.out + recorded.err
    for i in range(6):
        users = [e for e in entries(project, f"customer-{i}.jsonl")[1:] if e["side"] == "user"]
        assert users and all(f"W{100 + i}" in json.dumps(e["request"]) for e in users)
    result, attempts = replay(project, "-p", "4", env=KEYLESS)
    assert attempts == [] and result.code == 0, result.out
    for i in range(6):
        assert transcript(result, i) == transcript(recorded, i)
    assert result.report["run"]["fixtures"]["missed"] == 0


# ------------------------------------------------------------------ a python simulator


def python_customer_suite(base_url: str, *replies: str) -> str:
    context = json.dumps(
        {"base_url": base_url, "script": [{"response": f"{REPLY} {r}"} for r in replies]}
    )
    return (
        f"agent: {SCRIPTED}\n"
        "user_simulator: {backend: python, factory: tests.fixture_agents:http_customer}\n"
        "test_cases:\n"
        f"- name: customer 0\n  context: {context}\n"
        "  user: {goal: Get a refund for order W100., max_turns: 4}\n"
    )


def test_a_python_simulators_own_httpx_calls_are_the_users_and_diverge_likewise(
    project: Project,
) -> None:
    with fa.FakeAnthropic(fa.echo, api_key=None) as fake:  # the simulator sends no key
        project.write("suite.yaml", python_customer_suite(fake.url, "one", "two"))
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env_of(fake))
        url = fake.url
    assert recorded.code == 0, recorded.out + recorded.err
    assert [(e["side"], e["turn"]) for e in entries(project)[1:]] == [("user", 1), ("user", 2)]
    assert transcript(recorded)[1] == ("customer, after: REPLY# one", "REPLY# two")

    result, attempts = replay(project, env=KEYLESS)
    assert attempts == [] and result.code == 0, result.out
    assert transcript(result) == transcript(recorded)

    project.write("suite.yaml", python_customer_suite(url, "uno", "two"))
    result, attempts = replay(project, env=KEYLESS)
    assert attempts == [] and result.code == 1
    case = result.report["results"][0]
    assert case["simulation"]["outcome"] == "diverged" and len(case["turns"]) == 1
    [error] = [e for e in case["errors"] if "diverged" in e]
    assert "turn 2, user call 2 (POST /v1/messages): diverged at turn 2: " in error
    assert 'recorded "customer, after: REPLY# one" / now "customer, after: REPLY# uno"' in error


# ------------------------------------------------------------------------ fixtures check


def test_fixtures_check_knows_the_simulated_users_and_the_fidelity_judges_models(
    project: Project,
) -> None:
    """A simulated case's fixture holds the simulator's calls (side user) and the fidelity
    judge's (side judge): ``fixtures check`` expects those models, so a fresh recording
    is clean and a changed simulator or judge model is a finding before any replay."""
    project.write("suite.yaml", suite(fidelity=True))
    with fa.FakeAnthropic(play()) as fake:
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env_of(fake))
    assert recorded.code == 0, recorded.out + recorded.err
    clean = project.run("fixtures", "check", "suite.yaml", env=KEYLESS)
    assert clean.code == 0, clean.out + clean.err
    for old, new, side in [
        (
            "user_simulator: {backend: anthropic, model: claude-haiku-4-5",
            "user_simulator: {backend: anthropic, model: claude-sonnet-4-5",
            "user",
        ),
        (
            "judge: {backend: anthropic, model: claude-haiku-4-5}",
            "judge: {backend: anthropic, model: claude-sonnet-4-5}",
            "judge",
        ),
    ]:
        project.write("suite.yaml", suite(fidelity=True).replace(old, new))
        changed = project.run("fixtures", "check", "suite.yaml", env=KEYLESS)
        assert changed.code == 1, changed.out + changed.err
        assert (
            f"recorded with {side} model claude-haiku-4-5; the suite now uses claude-sonnet-4-5"
            in changed.out
        ), changed.out
