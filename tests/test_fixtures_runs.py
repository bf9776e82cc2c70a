"""``--fixtures`` end to end: record through the real SDKs against the fake servers, stop the
servers, replay with no API key and no network (``no_network`` fails any ``connect``).

Every caller: the ``anthropic``, ``openai`` and ``semantic-kernel`` backends, the ``http``
backend, LLM judges (a call two cases share lands in both fixtures), python agents that
call a model themselves (``openai.AsyncOpenAI``; a sync agent streaming server-sent events
through ``httpx``). Then what a run does with its fixtures: ``-p 8`` recording cases
concurrently, ``--repeat 3``, ``update`` keeping, adding and dropping entries (and without
a key), a fixture that would hold a secret, a damaged fixture, the byte-stable re-record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import tool_funcs
from tests.cassettes import no_network, openai_sse
from tests.chat_flavors import FLAVORS, Flavor, cli_suite
from tests.conftest import CliResult, Project
from tests.fakes import anthropic_server as fa
from tests.fakes import openai_server as fo
from tests.fakes._server import Request, Response
from tests.fakes.http_agent import AgentReply, FakeHttpAgent
from tests.test_chat_backends import analyst

each = pytest.mark.parametrize("flavor", FLAVORS, ids=str)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def responses(result: CliResult) -> list[list[str | None]]:
    return [[t["response"] for t in case["turns"]] for case in result.report["results"]]


def base_url_only(env: dict[str, str]) -> dict[str, str]:
    """The environment of a replay: the endpoint as recorded (the server now stopped), no key
    (for ``openai`` the base URL decides the request's shape: a custom server gets
    ``max_tokens``, OpenAI ``max_completion_tokens``)."""
    return {k: v for k, v in env.items() if "KEY" not in k}


@pytest.fixture(autouse=True)
def _tools() -> Iterator[None]:
    tool_funcs.reset()
    yield
    tool_funcs.reset()


# ------------------------------------------------------------------ every chat backend


@each
def test_a_chat_backend_records_then_replays_with_no_key_and_no_network(
    flavor: Flavor, project: Project
) -> None:
    project.write("suite.yaml", cli_suite(flavor))
    with flavor.server() as fake:
        fake.responder = flavor.responder(analyst)
        env = flavor.env(fake)
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env)
        assert recorded.code == 0, recorded.out + recorded.err
        reached = len(flavor.requests(fake))
    fixture = project.root / "fixtures" / "suite" / "revenue.jsonl"
    entries = lines(fixture)
    assert entries[0]["kind"] == "meta" and entries[0]["models"] == {"agent": [flavor.cli_model]}
    assert [e["turn"] for e in entries[1:]] == [1, 1, 2, 2] and reached == 4
    text = fixture.read_text()
    assert flavor.key not in text and "127.0.0.1" not in text  # no header, no host
    run = recorded.report["run"]["fixtures"]
    assert (run["mode"], run["recorded"], run["replayed"], run["written"]) == ("record", 4, 0, 1)

    with no_network() as attempts:
        replayed = project.run(
            "run",
            "suite.yaml",
            "--fixtures",
            "replay",
            env=base_url_only(env),
            formats=("json", "markdown"),
        )
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == []
    assert responses(replayed) == responses(recorded)
    case = replayed.report["results"][0]
    assert [t["replayed"] for t in case["turns"]] == [True, True]
    assert (
        case["fixture"]["replayed"] == 4
        and case["fixture"]["file"] == "fixtures/suite/revenue.jsonl"
    )
    run = replayed.report["run"]["fixtures"]
    assert (run["mode"], run["replayed"], run["recorded"], run["missed"]) == ("replay", 4, 0, 0)
    assert run["models"] == {"agent": [flavor.cli_model]}
    assert run["replayed_cost_usd"] == pytest.approx(replayed.report["summary"]["cost_usd"])
    summary = (project.root / "out" / "summary.md").read_text()
    date = run["recorded_at"][0][:10]
    assert f"Replayed from fixtures recorded on {date} ({flavor.cli_model})" in summary
    assert "recorded cost not spent" in summary


def test_a_body_with_integer_keys_from_the_suite_replays(project: Project) -> None:
    """YAML keeps ``logit_bias: {50256: -100, 9: 5}`` as integer keys; the request sends them
    as strings, the fixture holds them as strings, and the replay matches (a body's keys
    are compared as JSON strings, not sorted as numbers)."""
    project.write(
        "suite.yaml",
        "agent: {backend: openai, model: gpt-4o-mini,"
        " extra_body: {logit_bias: {50256: -100, 9: 5, 10: 1}}}\n"
        "test_cases:\n  - {name: refund, turns: [{input: where is my refund?}, {input: and?}]}\n",
    )
    with fo.FakeOpenAI(lambda request: fo.text("done")) as fake:
        env = {"OPENAI_API_KEY": fo.API_KEY, "OPENAI_BASE_URL": fake.client_url}
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env)
        assert recorded.code == 0, recorded.out + recorded.err
        sent = [request.body["logit_bias"] for request in fake.requests]
    assert sent == [{"50256": -100, "9": 5, "10": 1}] * 2
    entries = lines(project.root / "fixtures" / "suite" / "refund.jsonl")
    assert [e["request"]["logit_bias"] for e in entries[1:]] == [
        {"10": 1, "50256": -100, "9": 5}
    ] * 2
    with no_network() as attempts:
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", env=base_url_only(env))
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == []
    run = replayed.report["run"]["fixtures"]
    assert (run["replayed"], run["missed"]) == (2, 0)


def test_reports_without_fixtures_have_no_fixture_fields(project: Project) -> None:
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: tests.agents:scripted}\n"
        "test_cases:\n  - {name: one, turns: [{input: hi}]}\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 0
    text = json.dumps(result.report)
    assert '"replayed"' not in text and '"fixture' not in text


# ------------------------------------------------------------------ python agents, http


def openai_suite(factory: str, base_url: str, cases: int = 2) -> str:
    listed = "".join(
        f"  - name: case {i}\n    turns:\n      - input: hello from case {i}\n"
        f"      - input: and again, case {i}\n"
        for i in range(cases)
    )
    return (
        f"agent:\n  backend: python\n  factory: {factory}\n"
        f"  options: {{base_url: '{base_url}'}}\ntest_cases:\n{listed}"
    )


def test_a_python_agent_using_the_openai_sdk_itself_records_and_replays(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fo.FakeOpenAI(fo.echo) as fake:
        project.write(
            "suite.yaml", openai_suite("tests.fixture_agents:openai_agent", fake.base_url)
        )
        monkeypatch.setenv("OPENAI_API_KEY", fo.API_KEY)  # the agent's own code reads it
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", "-p", "2")
        assert recorded.code == 0, recorded.out + recorded.err
        assert len(fake.chat_requests()) == 4
    monkeypatch.delenv("OPENAI_API_KEY")
    assert responses(recorded) == [
        ["hello from case 0", "and again, case 0"],
        ["hello from case 1", "and again, case 1"],
    ]
    first = lines(project.root / "fixtures" / "suite" / "case-0.jsonl")
    assert [(e["side"], e["path"], e["turn"]) for e in first[1:]] == [
        ("agent", "/v1/chat/completions", 1),
        ("agent", "/v1/chat/completions", 2),
    ]
    with no_network() as attempts:
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", "-p", "2")
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == [] and responses(replayed) == responses(recorded)
    assert replayed.report["run"]["fixtures"]["replayed"] == 4


def test_a_sync_python_agent_streaming_sse_through_httpx_is_replayed_event_by_event(
    project: Project,
) -> None:
    words = {"hello": ["Hel", "lo", " there"], "bye": ["Good", "bye"]}

    def stream(request: Request) -> Response:
        said = request.body["messages"][-1]["content"]
        return Response(200, openai_sse(words[said]), content_type="text/event-stream")

    suite = (
        "agent:\n  backend: python\n  factory: tests.fixture_agents:streaming_agent\n"
        "  options: {{base_url: '{url}'}}\ntest_cases:\n"
        "  - name: streams\n    turns:\n      - {{input: hello}}\n      - {{input: bye}}\n"
    )
    with fo.FakeOpenAI(stream, api_key=None) as fake:
        project.write("suite.yaml", suite.format(url=fake.base_url))
        recorded = project.run("run", "suite.yaml", "--fixtures", "record")
        assert recorded.code == 0, recorded.out + recorded.err
    assert responses(recorded) == [["Hello there", "Goodbye"]]
    entries = lines(project.root / "fixtures" / "suite" / "streams.jsonl")
    events = entries[1]["response"]["events"]
    assert [e.get("data", {}).get("choices", [{}])[0].get("delta") for e in events[:-1]] == [
        {"content": "Hel"},
        {"content": "lo"},
        {"content": " there"},
    ]
    assert events[-1] == {"text": "[DONE]"}
    with no_network() as attempts:
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay")
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == [] and responses(replayed) == [["Hello there", "Goodbye"]]


def test_the_http_backend_records_without_the_session_id_and_replays(project: Project) -> None:
    def answer(request: Request) -> AgentReply:
        return AgentReply(f"echo: {request.body['input']} (turn {request.body['turn_index']})")

    suite = (
        "agent:\n  backend: http\n  url: {url}/agent\n  headers: {{authorization: 'Bearer ${{AGENT_TOKEN}}'}}\n"
        "test_cases:\n  - name: talks\n    context: {{account: 7}}\n"
        "    turns:\n      - {{input: one}}\n      - {{input: two}}\n"
    )
    token = "agent-token-5b0c8e2d41f9"
    with FakeHttpAgent(answer) as fake:
        project.write("suite.yaml", suite.format(url=fake.url))
        recorded = project.run(
            "run", "suite.yaml", "--fixtures", "record", env={"AGENT_TOKEN": token}
        )
        assert recorded.code == 0, recorded.out + recorded.err
        assert len(fake.requests) == 2
    fixture = project.root / "fixtures" / "suite" / "talks.jsonl"
    entries = lines(fixture)
    assert [e["path"] for e in entries[1:]] == ["/agent", "/agent"]
    assert all("session_id" not in e["request"] for e in entries[1:])  # volatile: dropped
    assert entries[1]["request"]["context"] == {"account": 7}
    assert token not in fixture.read_text()
    with no_network() as attempts:
        replayed = project.run(
            "run", "suite.yaml", "--fixtures", "replay", env={"AGENT_TOKEN": "another-token-0000"}
        )
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == [] and responses(replayed) == [["echo: one (turn 0)", "echo: two (turn 1)"]]


# ------------------------------------------------------------------ judges


JUDGED = """\
agent: {{backend: python, factory: tests.agents:scripted}}
judge: {{backend: {backend}, model: {model}}}
test_cases:
{cases}
"""


def judged_case(name: str, said: str) -> str:
    return (
        f"  - name: {name}\n    context: {{script: [{{response: '{said}'}}]}}\n"
        "    turns:\n      - input: Where is my parcel?\n        evaluations:\n"
        "          - {type: judge, name: polite, rubric: The reply is polite.}\n"
    )


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_judges_record_and_replay_with_no_key(project: Project, backend: str) -> None:
    cases = judged_case("first", "On its way, thank you!") + judged_case("second", "Tomorrow.")
    if backend == "anthropic":
        server: Any = fa.FakeAnthropic(lambda r: fa.verdict(verdict="pass", reason="Polite."))
        model = "claude-haiku-4-5"
    else:
        server = fo.FakeOpenAI(
            lambda r: fo.text(json.dumps({"verdict": "pass", "reason": "Polite."}))
        )
        model = "gpt-5-mini"
    project.write("suite.yaml", JUDGED.format(backend=backend, model=model, cases=cases))
    with server as fake:
        env = (
            {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}
            if backend == "anthropic"
            else {"OPENAI_API_KEY": fo.API_KEY, "OPENAI_BASE_URL": fake.base_url}
        )
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=env)
        assert recorded.code == 0, recorded.out + recorded.err
    entries = lines(project.root / "fixtures" / "suite" / "first.jsonl")
    assert [e["side"] for e in entries[1:]] == ["judge"]
    assert entries[0]["models"] == {"judge": [model]}
    with no_network() as attempts:
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", env=base_url_only(env))
    assert replayed.code == 0, replayed.out + replayed.err
    assert attempts == []
    verdicts = [c["turns"][0]["metric_results"][0] for c in replayed.report["results"]]
    assert [(m["passed"], m["details"]["reason"]) for m in verdicts] == [(True, "Polite.")] * 2
    assert (
        replayed.report["summary"]["judge_token_usage"]
        == recorded.report["summary"]["judge_token_usage"]
    )
    # with no key, a judge's call that is not in the fixtures is refused, never sent
    project.write(
        "suite.yaml",
        JUDGED.format(backend=backend, model=model, cases=cases.replace("polite.", "kind.")),
    )
    with no_network() as attempts:
        missed = project.run("run", "suite.yaml", "--fixtures", "replay", env=base_url_only(env))
    assert missed.code == 1 and attempts == []
    error = missed.report["results"][0]["turns"][0]["metric_results"][0]["error"]
    assert error.startswith('not in the fixtures: test case "first", run 1, turn 1, judge call 1')


def test_a_judge_call_two_cases_share_is_made_once_and_lands_in_both_fixtures(
    project: Project,
) -> None:
    same = judged_case("first", "Same reply.") + judged_case("second", "Same reply.")
    project.write(
        "suite.yaml", JUDGED.format(backend="anthropic", model="claude-haiku-4-5", cases=same)
    )
    with fa.FakeAnthropic(lambda r: fa.verdict(verdict="pass", reason="Fine.")) as fake:
        env = {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", "-p", "2", env=env)
        assert recorded.code == 0, recorded.out + recorded.err
        assert len(fake.messages_requests()) == 1  # one live call for both cases
    folder = project.root / "fixtures" / "suite"
    first, second = lines(folder / "first.jsonl"), lines(folder / "second.jsonl")
    assert first[1:] == second[1:]  # the same call, in each case's own fixture
    shared = [
        c["name"]
        for c in recorded.report["results"]
        if c["turns"][0]["metric_results"][0]["details"].get("deduplicated", False)
    ]
    assert len(shared) == 1  # one case made the call (which one: the scheduler's order)
    with no_network():  # the case that did not make the call replays alone
        alone = project.run("run", "suite.yaml", "--fixtures", "replay", "-k", shared[0], env={})
    assert alone.code == 0, alone.out + alone.err
    assert alone.report["results"][0]["turns"][0]["replayed"] is True


# ------------------------------------------------------------------ a run's fixtures


def echo_suite(cases: int, model: str = "claude-haiku-4-5") -> str:
    listed = "".join(
        f"  - name: case {i}\n    turns:\n      - input: message {i}\n      - input: again {i}\n"
        for i in range(cases)
    )
    return (
        f"agent:\n  backend: anthropic\n  model: {model}\n  max_tokens: 64\ntest_cases:\n{listed}"
    )


def anthropic_env(fake: fa.FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}


def record_echo(project: Project, *extra: str) -> CliResult:
    """``run suite.yaml --fixtures record`` against a fresh (deterministic) echoing fake
    Anthropic server; the run must pass."""
    with fa.FakeAnthropic(fa.echo) as fake:
        result = project.run(
            "run", "suite.yaml", "--fixtures", "record", *extra, env=anthropic_env(fake)
        )
    assert result.code == 0, result.out + result.err
    return result


def test_eight_cases_recorded_concurrently_each_get_their_own_calls(project: Project) -> None:
    project.write("suite.yaml", echo_suite(12))
    with fa.FakeAnthropic(fa.echo) as fake:
        recorded = project.run(
            "run", "suite.yaml", "--fixtures", "record", "-p", "8", env=anthropic_env(fake)
        )
        assert recorded.code == 0, recorded.out + recorded.err
        assert len(fake.messages_requests()) == 24
    folder = project.root / "fixtures" / "suite"
    for i in range(12):
        entries = lines(folder / f"case-{i}.jsonl")
        said = [e["request"]["messages"][-1]["content"][0]["text"] for e in entries[1:]]
        assert said == [f"message {i}", f"again {i}"]
        assert [e["response"]["body"]["content"][0]["text"] for e in entries[1:]] == said
    with no_network():
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", "-p", "8", env={})
    assert replayed.code == 0, replayed.out + replayed.err
    assert responses(replayed) == [[f"message {i}", f"again {i}"] for i in range(12)]


def test_repeat_3_records_one_file_per_run_and_a_fourth_run_misses(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    record_echo(project, "--repeat", "3")
    folder = project.root / "fixtures" / "suite"
    assert sorted(p.name for p in folder.iterdir()) == [
        "case-0.jsonl",
        "case-0.run-2.jsonl",
        "case-0.run-3.jsonl",
    ]
    assert [lines(folder / n)[0]["run"] for n in sorted(p.name for p in folder.iterdir())] == [
        1,
        2,
        3,
    ]
    with no_network():
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", "--repeat", "3", env={})
        assert replayed.code == 0, replayed.out + replayed.err
        assert replayed.report["results"][0]["repeat"]["passes"] == 3
        four = project.run("run", "suite.yaml", "--fixtures", "replay", "--repeat", "4", env={})
    assert four.code == 1
    runs = four.report["results"][0]["runs"]
    assert [r["passed"] for r in runs] == [True, True, True, False]
    error = runs[3]["turns"][0]["errors"][0]
    assert error.startswith('not in the fixtures: test case "case 0", run 4, turn 1, agent call 1')
    assert "fixtures/suite/case-0.run-4.jsonl does not exist" in error
    assert error.endswith(
        "Re-record this test case: multiturn-eval run 'suite.yaml' --fixtures update -k 'case 0' --repeat 4"
    )


def test_merge_of_replayed_shards_keeps_the_runs_fixtures_summary(project: Project) -> None:
    """Sharded replay (the Action's matrix), then merge: the merged report's
    ``run.fixtures`` counts every shard's calls, as a one-job replay would."""
    project.write("suite.yaml", echo_suite(4))
    record_echo(project)
    with no_network():
        whole = project.run("run", "suite.yaml", "--fixtures", "replay", "-o", "whole", env={})
        for shard in (1, 2):
            one = project.run(
                "run", "suite.yaml", "--fixtures", "replay", "--shard", f"{shard}/2",
                "-o", f"shard-{shard}", env={},
            )  # fmt: skip
            assert one.code == 0, one.out + one.err
            assert 0 < one.report["run"]["fixtures"]["replayed"] < 8
    merged = project.run("merge", "shard-1/report.json", "shard-2/report.json", "-o", "merged")
    assert merged.code == 0, merged.out + merged.err
    fixtures = json.loads((project.root / "merged" / "report.json").read_text())["run"]["fixtures"]
    assert fixtures == whole.report["run"]["fixtures"]
    assert fixtures["replayed"] == 8 and fixtures["mode"] == "replay"


def test_record_of_an_unchanged_conversation_rewrites_no_byte(project: Project) -> None:
    project.write("suite.yaml", echo_suite(2))
    folder = project.root / "fixtures" / "suite"
    before: dict[str, bytes] = {}
    for attempt in range(2):
        result = record_echo(project)  # a fresh, deterministic server each time
        now = {p.name: p.read_bytes() for p in folder.iterdir()}
        if attempt == 0:
            before = now
            for path in folder.iterdir():  # an old date: kept, since nothing changed
                text = path.read_text().replace(
                    lines(path)[0]["recorded_at"], "2020-01-02T03:04:05Z"
                )
                path.write_text(text)
                before[path.name] = path.read_bytes()
        else:
            assert now == before
            assert result.report["run"]["fixtures"]["written"] == 0
            assert result.report["run"]["fixtures"]["recorded_at"] == ["2020-01-02T03:04:05Z"] * 2


def test_update_keeps_what_matches_adds_what_is_new_and_drops_what_is_gone(
    project: Project,
) -> None:
    project.write("suite.yaml", echo_suite(1))
    fixture = project.root / "fixtures" / "suite" / "case-0.jsonl"
    with fa.FakeAnthropic(fa.echo) as fake:
        env = anthropic_env(fake)
        assert project.run("run", "suite.yaml", "--fixtures", "record", env=env).code == 0
        kept = lines(fixture)[1]
        # a third turn: the first two are replayed, the new one recorded live
        project.write("suite.yaml", echo_suite(1).rstrip("\n") + "\n      - input: third 0\n")
        added = project.run("run", "suite.yaml", "--fixtures", "update", env=env)
        assert added.code == 0, added.out + added.err
        assert len(fake.messages_requests()) == 3
        assert [t["replayed"] for t in added.report["results"][0]["turns"]] == [True, True, False]
        entries = lines(fixture)
        assert entries[1] == kept and len(entries) == 4
        # back to one turn: the recordings of turns 2 and 3 are dropped
        project.write(
            "suite.yaml",
            "agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n  max_tokens: 64\n"
            "test_cases:\n  - name: case 0\n    turns:\n      - input: message 0\n",
        )
        dropped = project.run("run", "suite.yaml", "--fixtures", "update", env=env)
        assert dropped.code == 0, dropped.out + dropped.err
        assert len(fake.messages_requests()) == 3  # nothing live: turn 1 matched
    entries = lines(fixture)
    assert entries[1:] == [kept]
    case = dropped.report["results"][0]
    assert len(case["fixture"]["unused"]) == 2 and case["fixture"]["written"] is True
    assert "fixtures: dropped 2 recordings no longer used" in case["warnings"]


def test_update_without_a_key_says_a_key_is_needed_and_keeps_the_fixture(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    fixture = project.root / "fixtures" / "suite" / "case-0.jsonl"
    record_echo(project)
    before = fixture.read_bytes()
    project.write("suite.yaml", echo_suite(1).replace("again 0", "changed 0"))
    with no_network():
        result = project.run("run", "suite.yaml", "--fixtures", "update", env={})
    assert result.code == 1
    turns = result.report["results"][0]["turns"]
    assert turns[0]["passed"] and turns[0]["replayed"] is True
    assert turns[1]["errors"][0].startswith(
        "not in the fixtures (--fixtures update records it live, which needs the API key; "
        'none is set): test case "case 0", run 1, turn 2, agent call 2'
    )
    assert fixture.read_bytes() == before


def test_a_fixture_that_would_hold_a_key_is_refused_and_the_other_cases_are_written(
    project: Project,
) -> None:
    leaked = "sk-ant-api03-" + "Q" * 40
    suite = echo_suite(2).replace("again 1", f"my key is {leaked}")
    project.write("suite.yaml", suite)
    folder = project.root / "fixtures" / "suite"
    with fa.FakeAnthropic(fa.echo) as fake:
        result = project.run("run", "suite.yaml", "--fixtures", "record", env=anthropic_env(fake))
    assert result.code == 1
    good, bad = result.report["results"]
    assert good["passed"] and (folder / "case-0.jsonl").is_file()
    assert not (folder / "case-1.jsonl").exists()
    assert bad["outcome"] == "error" and not bad["passed"]
    refusal = bad["fixture"]["error"]
    assert refusal.startswith(
        "fixtures/suite/case-1.jsonl:3 request.messages[2].content[0].text: holds what looks "
        "like an Anthropic API key"
    )
    assert refusal in bad["errors"]
    assert leaked not in refusal
    assert all(leaked not in p.read_text() for p in folder.iterdir())


def test_a_damaged_fixture_is_exit_2_naming_file_and_line_before_any_call(project: Project) -> None:
    project.write("suite.yaml", echo_suite(2))
    record_echo(project)
    fixture = project.root / "fixtures" / "suite" / "case-1.jsonl"
    entries = fixture.read_text().splitlines()
    entries[2] = entries[2][:40]  # a hand edit cut the second call short
    fixture.write_text("\n".join(entries) + "\n")
    with fa.FakeAnthropic(fa.echo) as fake:
        result = project.run(
            "run", "suite.yaml", "--fixtures", "replay", "-o", "again", env=anthropic_env(fake)
        )
        assert fake.requests == []  # no call at all, not even case 0's
    assert result.code == 2
    assert "fixtures/suite/case-1.jsonl:3" in result.err
    assert not (project.root / "again").exists()  # a configuration error: no report at all
