"""Matching a run against its fixture: order rules, every miss class with its message, update, exchange."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.errors import BackendError
from multiturn_eval.fixtures import (
    Change,
    read_fixture,
    rerecord_command,
    use_cassette,
    with_fixtures,
)
from multiturn_eval.fixtures.cassette import FixtureMissError, Miss, exact_filter
from multiturn_eval.fixtures.format import RecordedResponse
from multiturn_eval.scheduler import Selection
from tests.cassettes import Clock, anthropic_body, call, reply, suite_fixtures, text_of

NAMES = ("refund flow", "refund flow (escalated)")
CMD = "multiturn-eval run 'suites/support.yaml' --fixtures update -k '[r]efund flow'"
TOOLS = [
    {
        "name": "lookup_order",
        "description": "Find an order",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }
]
B1 = anthropic_body("where is my refund?", tools=TOOLS)
B2 = anthropic_body("where is my refund?", "answer 1", "it was order 42", tools=TOOLS)
B3 = anthropic_body(
    "where is my refund?", "answer 1", "it was order 42", "answer 2", "thanks", tools=TOOLS
)
JUDGE = {
    "model": "judge-m",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Rubric: polite. Reply: answer 2"}],
}


def converse(cassette: Any, bodies: list[dict[str, Any]], start: int = 1) -> list[Any]:
    out = []
    for turn, body in enumerate(bodies, start=start):
        cassette.set_turn(turn)
        out.append(call(cassette, "agent", body, reply(f"answer {turn}")))
    return out


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A three-turn recording of "refund flow" with a judge call on turn 2."""
    cassette = suite_fixtures(tmp_path, "record", NAMES).cassette(0)
    converse(cassette, [B1, B2])
    call(cassette, "judge", JUDGE, reply("pass"))
    converse(cassette, [B3], start=3)
    assert cassette.finish().written
    return tmp_path


def replay(root: Path, **kwargs: Any) -> Any:
    return suite_fixtures(root, "replay", NAMES, **kwargs).cassette(0)


def message(result: Any) -> str:
    assert isinstance(result, Miss), result
    return result.message


# ------------------------------------------------------------------ replay


def test_an_unchanged_conversation_replays_every_call_and_leaves_nothing_unused(
    recorded: Path,
) -> None:
    cassette = replay(recorded)
    answers = converse(cassette, [B1, B2])
    call(cassette, "judge", JUDGE)
    answers += converse(cassette, [B3], start=3)
    assert [text_of(a) for a in answers] == ["answer 1", "answer 2", "answer 3"]
    report = cassette.finish()
    assert (report.replayed, report.recorded, report.missed, report.unused) == (4, 0, 0, ())
    assert not report.written and report.recorded_at == "2025-06-01T09:30:00Z"
    assert report.models == {"agent": ("claude-test",), "judge": ("judge-m",)}
    assert [cassette.turn_replayed(t) for t in (1, 2, 3, 4)] == [True, True, True, None]


def test_the_agent_side_is_matched_in_order_and_judges_by_request(tmp_path: Path) -> None:
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    same = anthropic_body("ping")
    cassette.set_turn(1)
    call(cassette, "agent", same, reply("first"))
    call(cassette, "agent", same, reply("second"))  # the same request twice: two recordings
    for n in (1, 2, 3):
        call(cassette, "judge", {"rubric": n}, reply(f"verdict {n}"))
    cassette.finish()
    again = suite_fixtures(tmp_path, "replay").cassette(0)
    again.set_turn(1)
    for n in (3, 1, 2, 1):  # judges in any order, one recording answering a request again
        assert text_of(call(again, "judge", {"rubric": n})) == f"verdict {n}"
    assert [text_of(call(again, "agent", same)) for _ in range(2)] == ["first", "second"]
    assert message(call(again, "agent", same)).endswith(
        "an extra call: the recording (fixtures/support/refund-flow.jsonl) holds 2 agent calls. "
        "Re-record this test case: multiturn-eval run 'suites/support.yaml' --fixtures update -k 'refund flow'"
    )


def test_agent_calls_made_concurrently_may_finish_in_another_order(recorded: Path) -> None:
    cassette = replay(recorded)
    cassette.set_turn(2)
    assert text_of(call(cassette, "agent", B2)) == "answer 2"  # B1's recording is still there
    assert text_of(call(cassette, "agent", B1)) == "answer 1"
    assert text_of(call(cassette, "agent", B3)) == "answer 3"
    assert cassette.finish().missed == 0


# ------------------------------------------------------------------ every miss class, exactly


@pytest.mark.parametrize(
    ("bodies", "expected"),
    [
        (
            [anthropic_body("where is my refund?", tools=TOOLS, system="Be terse.")],
            "turn 1, agent call 1 (POST /v1/messages): the instructions changed: system: recorded "
            '"You are a support agent." / now "Be terse." (compared with fixtures/support/refund-flow.jsonl:2)',
        ),
        (
            [
                anthropic_body(
                    "where is my refund?",
                    tools=[
                        {
                            **TOOLS[0],
                            "input_schema": {
                                "type": "object",
                                "properties": {"order_id": {"type": "integer"}},
                            },
                        }
                    ],
                )
            ],
            'turn 1, agent call 1 (POST /v1/messages): a tool\'s schema changed (tool "lookup_order"): '
            'tools[0].input_schema.properties.order_id.type: recorded "string" / now "integer" '
            "(compared with fixtures/support/refund-flow.jsonl:2)",
        ),
        (
            [anthropic_body("where is my refund?", tools=TOOLS, temperature=0.5)],
            "turn 1, agent call 1 (POST /v1/messages): the model or its parameters changed: "
            "temperature: recorded (absent) / now 0.5 (compared with fixtures/support/refund-flow.jsonl:2)",
        ),
        (
            [anthropic_body("where is my refund?", tools=TOOLS, model="claude-next")],
            "turn 1, agent call 1 (POST /v1/messages): the model or its parameters changed: "
            'model: recorded "claude-test" / now "claude-next" (compared with fixtures/support/refund-flow.jsonl:2)',
        ),
        (
            [B1, anthropic_body("where is my refund?", "answer 1", "it was order 43", tools=TOOLS)],
            "turn 2, agent call 2 (POST /v1/messages): the conversation content changed: "
            'messages[2].content: recorded "it was order 42" / now "it was order 43" '
            "(compared with fixtures/support/refund-flow.jsonl:3)",
        ),
        (
            [B1, B2, B3, anthropic_body("one more")],
            "turn 4, agent call 4 (POST /v1/messages): an extra call: the recording "
            "(fixtures/support/refund-flow.jsonl) holds 3 agent calls",
        ),
    ],
    ids=["instructions", "tool-schema", "parameters", "model", "content", "extra-call"],
)
def test_every_miss_class_has_its_exact_message(
    recorded: Path, bodies: list[dict[str, Any]], expected: str
) -> None:
    cassette = replay(recorded)
    results = converse(cassette, bodies)
    assert all(not isinstance(r, Miss) for r in results[:-1])
    assert message(results[-1]) == (
        f'not in the fixtures: test case "refund flow", run 1, {expected}. '
        f"Re-record this test case: {CMD}"
    )
    report = cassette.finish()
    assert report.missed == 1 and report.misses[0].message == message(results[-1])
    assert report.unused == ()  # what the failed case did not reach is not "no longer made"


def test_a_call_no_longer_made_is_reported_not_failed(recorded: Path) -> None:
    cassette = replay(recorded)
    converse(cassette, [B1, B2])  # neither the judge nor turn 3 any more
    report = cassette.finish()
    assert report.missed == 0
    assert [u.change for u in report.unused] == [Change.NO_LONGER_MADE] * 2
    assert [u.message for u in report.unused] == [
        "recorded judge call 1 (turn 2, POST /v1/messages, fixtures/support/refund-flow.jsonl:4) is no longer made",
        "recorded agent call 3 (turn 3, POST /v1/messages, fixtures/support/refund-flow.jsonl:5) is no longer made",
    ]


def test_a_judge_miss_is_compared_with_the_closest_recording(recorded: Path) -> None:
    cassette = replay(recorded)
    cassette.set_turn(2)
    changed = {
        **JUDGE,
        "messages": [{"role": "user", "content": "Rubric: polite. Reply: answer 2, changed"}],
    }
    assert message(call(cassette, "judge", changed)) == (
        'not in the fixtures: test case "refund flow", run 1, turn 2, judge call 1 (POST /v1/messages): '
        'the conversation content changed: messages[0].content: recorded "Rubric: polite. Reply: '
        'answer 2" / now "Rubric: polite. Reply: answer 2, changed" (compared with '
        f"fixtures/support/refund-flow.jsonl:4). Re-record this test case: {CMD}"
    )
    assert message(call(cassette, "user", {"goal": "x"})) == (
        'not in the fixtures: test case "refund flow", run 1, turn 2, user call 1 (POST /v1/messages): '
        "an extra call: the recording (fixtures/support/refund-flow.jsonl) holds no user call. "
        f"Re-record this test case: {CMD}"
    )
    # a judge miss does not end the agent's session
    assert text_of(call(cassette, "agent", B1)) == "answer 1"


def test_after_an_agent_miss_the_session_has_left_the_recording(recorded: Path) -> None:
    cassette = replay(recorded)
    results = converse(cassette, [B1, {**B2, "max_tokens": 1}, B3])
    assert isinstance(results[1], Miss) and results[1].change is Change.PARAMETERS
    assert message(results[2]) == (
        'not in the fixtures: test case "refund flow", run 1, turn 3, agent call 3 (POST /v1/messages): '
        "after an earlier miss: the session left the recording at turn 2, agent call 2. "
        f"Re-record this test case: {CMD}"
    )
    assert results[2].change is Change.DIVERGED
    assert [cassette.turn_replayed(t) for t in (1, 2, 3)] == [True, False, False]


def test_openai_system_messages_are_instructions_and_the_path_is_part_of_the_match(
    tmp_path: Path,
) -> None:
    chat = {
        "model": "gpt-x",
        "messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}],
    }
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    cassette.set_turn(1)
    call(cassette, "agent", chat, reply("hello"), path="/v1/chat/completions")
    cassette.finish()
    changed = {
        **chat,
        "messages": [{"role": "system", "content": "Be brief."}, chat["messages"][1]],
    }

    def replayed(body: Any, path: str) -> Any:
        """The agent call ``body`` to ``path`` against a fresh replay of the recording."""
        return call(suite_fixtures(tmp_path, "replay").cassette(0), "agent", body, path=path)

    miss = replayed(changed, "/v1/chat/completions")
    assert miss.change is Change.INSTRUCTIONS
    assert (
        miss.difference.describe() == 'messages[0].content: recorded "Be kind." / now "Be brief."'
    )
    moved = replayed(chat, "/openai/v1/chat/completions")
    assert moved.change is Change.PARAMETERS
    assert (
        moved.difference.describe()
        == '(path): recorded "/v1/chat/completions" / now "/openai/v1/chat/completions"'
    )


def test_a_long_value_is_shown_around_its_first_difference(tmp_path: Path) -> None:
    long_text = "The customer says: " + "blah " * 60 + "and the refund is 40 USD. " + "more " * 40
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    call(cassette, "agent", anthropic_body(long_text), reply("ok"))
    cassette.finish()
    miss = call(
        suite_fixtures(tmp_path, "replay").cassette(0),
        "agent",
        anthropic_body(long_text.replace("40", "45")),
    )
    recorded, now = miss.difference.describe().split(": recorded ")[1].split(" / now ")
    assert recorded.startswith('"…') and recorded.endswith('…"') and "refund is 40 USD" in recorded
    assert now.startswith('"…') and "refund is 45 USD" in now
    assert len(recorded) < 90


def test_a_run_that_was_never_recorded_misses_with_the_repeat_in_the_command(
    recorded: Path,
) -> None:
    fixtures = suite_fixtures(recorded, "replay", NAMES, repeat=3)
    assert text_of(call(fixtures.cassette(0, 1), "agent", B1)) == "answer 1"
    cassette = fixtures.cassette(0, 3)
    cassette.set_turn(1)
    assert message(call(cassette, "agent", B1)) == (
        'not in the fixtures: test case "refund flow", run 3, turn 1, agent call 1 (POST /v1/messages): '
        "no recording: fixtures/support/refund-flow.run-3.jsonl does not exist. Re-record this test case: "
        f"{CMD} --repeat 3"
    )
    assert call(cassette, "judge", JUDGE).change is Change.NO_RECORDING
    assert fixtures.summary(0, 3) == [(1, True, 4), (2, False, 0), (3, False, 0)]


# ------------------------------------------------------------------ update


def test_update_keeps_what_matches_adds_what_is_new_and_drops_what_is_gone(recorded: Path) -> None:
    clock = Clock()
    clock.advance(days=3)
    before = (recorded / "support" / "refund-flow.jsonl").read_text().splitlines()
    # keep: nothing changed, so nothing is written
    cassette = suite_fixtures(recorded, "update", NAMES, clock=clock).cassette(0)
    converse(cassette, [B1, B2])
    call(cassette, "judge", JUDGE)
    converse(cassette, [B3], start=3)
    report = cassette.finish()
    assert (report.replayed, report.recorded, report.written, report.notes) == (4, 0, False, ())
    # add: a fourth turn goes live and is appended; drop: the judge is not called any more
    cassette = suite_fixtures(recorded, "update", NAMES, clock=clock).cassette(0)
    b4 = anthropic_body("one more question")
    results = converse(cassette, [B1, B2, B3, b4])
    assert [text_of(r) for r in results] == ["answer 1", "answer 2", "answer 3", "answer 4"]
    report = cassette.finish()
    assert (report.replayed, report.recorded, report.missed, report.written) == (3, 1, 0, True)
    assert [u.side for u in report.unused] == ["judge"]
    assert report.notes == (
        "re-recorded from turn 4, agent call 4: an extra call: the recording "
        "(fixtures/support/refund-flow.jsonl) holds 3 agent calls",
        "dropped 1 recording no longer used",
    )
    after = (recorded / "support" / "refund-flow.jsonl").read_text().splitlines()
    assert after[1:3] == before[1:3] and after[3] == before[4]  # kept lines stay byte for byte
    assert json.loads(after[4])["request"] == b4 and len(after) == 5
    assert json.loads(after[0])["recorded_at"] == "2025-06-04T09:30:00Z"


def test_update_re_records_the_whole_case_from_its_first_miss(recorded: Path) -> None:
    cassette = suite_fixtures(recorded, "update", NAMES).cassette(0)
    b2 = anthropic_body("where is my refund?", "answer 1", "it was order 43", tools=TOOLS)
    lives: list[int] = []

    def live(n: int) -> RecordedResponse:
        lives.append(n)
        return reply(f"live {n}")

    cassette.set_turn(1)
    assert text_of(call(cassette, "agent", B1, lambda: live(1))) == "answer 1"  # replayed
    cassette.set_turn(2)
    assert text_of(call(cassette, "agent", b2, lambda: live(2))) == "live 2"
    assert (
        text_of(call(cassette, "judge", JUDGE, lambda: live(99))) == "pass"
    )  # same request: replayed
    cassette.set_turn(3)
    # even a request identical to a recording goes live now: it follows a changed call
    assert text_of(call(cassette, "agent", B3, lambda: live(3))) == "live 3"
    assert lives == [2, 3]
    report = cassette.finish()
    assert report.notes[0].startswith(
        "re-recorded from turn 2, agent call 2: the conversation content changed: messages[2].content: "
        'recorded "it was order 42" / now "it was order 43"'
    )
    fixture = read_fixture(recorded / "support" / "refund-flow.jsonl")
    assert fixture is not None
    assert [(c.side, c.turn, text_of(c.response)) for c in fixture.calls] == [
        ("agent", 1, "answer 1"),
        ("agent", 2, "live 2"),
        ("judge", 2, "pass"),
        ("agent", 3, "live 3"),
    ]


def test_update_without_a_key_says_a_key_is_needed(recorded: Path) -> None:
    cassette = suite_fixtures(recorded, "update", NAMES, live=False).cassette(0)
    results = converse(cassette, [B1, {**B2, "temperature": 1}])
    assert text_of(results[0]) == "answer 1"
    assert message(results[1]) == (
        "not in the fixtures (--fixtures update records it live, which needs the API key; none is set): "
        'test case "refund flow", run 1, turn 2, agent call 2 (POST /v1/messages): the model or its '
        "parameters changed: temperature: recorded (absent) / now 1 (compared with "
        f"fixtures/support/refund-flow.jsonl:3). Re-record this test case: {CMD}"
    )
    assert results[1].needs_key
    before = (recorded / "support" / "refund-flow.jsonl").read_bytes()
    report = cassette.finish()
    # the fixture is kept whole: an update that could not record a call drops nothing
    assert not report.written and report.unused == ()
    assert report.notes == ("the fixture was not rewritten: 1 call could not be recorded",)
    assert (recorded / "support" / "refund-flow.jsonl").read_bytes() == before


def test_retried_statuses_are_never_recorded_and_an_interrupted_case_writes_nothing(
    tmp_path: Path,
) -> None:
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    cassette.set_turn(1)
    call(cassette, "agent", B1, reply("overloaded", status=529))
    call(cassette, "agent", B1, reply("rate limited", status=429))
    call(cassette, "agent", B1, reply("finally"))
    call(cassette, "agent", B2, reply("bad request", status=400))  # a real answer: recorded
    assert cassette.finish().recorded == 2
    fixture = read_fixture(suite_fixtures(tmp_path, "replay").path(0))
    assert fixture is not None and [text_of(c.response) for c in fixture.calls] == [
        "finally",
        "bad request",
    ]
    interrupted = suite_fixtures(tmp_path, "record").cassette(0)
    call(interrupted, "agent", B3, reply("half"))
    report = interrupted.finish(completed=False)
    assert not report.written and report.unused == ()
    assert read_fixture(suite_fixtures(tmp_path, "replay").path(0)) == fixture
    assert interrupted.finish() is report  # once per cassette


# ------------------------------------------------------------------ the re-record command


HOSTILE_NAMES = [
    "refund flow",
    "refund flow (escalated)",
    "it's [urgent]",
    "50% off*",
    "what?",
    "!^]-\\",
    "with 'single' and \"double\" quotes; rm -rf /",
    "$(reboot) `id`",
    "-k",
    "!",
    "^",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_command_selects_exactly_that_case_and_survives_the_shell(name: str) -> None:
    command = rerecord_command("suites/my suite's.yaml", name, HOSTILE_NAMES)
    argv = shlex.split(command)
    assert argv[:6] == [
        "multiturn-eval",
        "run",
        "suites/my suite's.yaml",
        "--fixtures",
        "update",
        "-k",
    ]
    pattern = argv[6]
    selection = Selection(pattern=pattern)
    chosen = [n for n in HOSTILE_NAMES if selection.matches(n, [])]
    assert chosen == [name]
    # a real shell reads the same words
    echoed = subprocess.run(
        ["sh", "-c", command.replace("multiturn-eval", "printf '%s\\n'", 1)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert echoed == argv[1:]


def test_the_name_index_says_what_comparing_every_pair_says() -> None:
    """Whether a name is part of another, from the index (each suite's names indexed once
    for its re-record commands), is what comparing it with every name says: hostile names,
    short ones, names inside names, duplicates."""
    import random

    from multiturn_eval.fixtures.cassette import NameIndex

    rng = random.Random(5)
    alphabet = "ab c*[?-_é"
    for _ in range(200):
        names = [
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 9)))
            for _ in range(rng.randrange(1, 30))
        ]
        names += HOSTILE_NAMES[: rng.randrange(len(HOSTILE_NAMES))]
        index = NameIndex(names)
        for name in names:
            assert exact_filter(name, index) == exact_filter(name, names), (name, names)
            assert rerecord_command("s.yaml", name, index) == rerecord_command(
                "s.yaml", name, names
            )


def test_exact_filter_of_names_made_of_glob_characters() -> None:
    """``^ ] - \\`` are made single-character classes (``[^]`` is just ``^``); a name of
    nothing but ``!`` cannot be (``[!...]`` negates): ``[]!]`` there, which also takes ``]``."""
    assert exact_filter("!^]-\\", ["!^]-\\ 2"]) == "![^]]-\\"
    assert exact_filter("^", ["^^"]) == "[^]"
    assert exact_filter("-", ["a-b"]) == "[-]"
    assert exact_filter("!!", ["!!!"]) == "[]!]!"
    names = ["!!", "!!!", "a!!", "]!"]
    assert [n for n in names if Selection(pattern=exact_filter("!!", names)).matches(n, [])] == [
        "!!",
        "]!",
    ]


def test_exact_filter_keeps_plain_names_plain() -> None:
    assert exact_filter("refund flow", ["refund flow", "other"]) == "refund flow"
    assert exact_filter("refund flow", ["refund flow", "refund flow 2"]) == "[r]efund flow"
    assert exact_filter("a*b", []) == "a[*]b"


def test_an_equal_judge_recording_in_another_key_order_is_used_before_one_is_reused(
    tmp_path: Path,
) -> None:
    """The same judge request recorded twice, the second line hand-edited so its keys come in
    another order: two calls get the two answers (the second is found by its text, unused),
    a third reuses one."""
    from multiturn_eval.fixtures.cassette import Cassette, Replay
    from multiturn_eval.fixtures.format import parse_fixture

    meta = {
        "kind": "meta",
        "format": 1,
        "case": "c",
        "run": 1,
        "version": "v",
        "recorded_at": "2025-06-01T09:30:00Z",
        "source": "s",
        "models": {"judge": ["m"]},
    }

    def entry(request: dict[str, Any], answer: str) -> str:
        return json.dumps(
            {
                "kind": "call",
                "side": "judge",
                "turn": 1,
                "method": "POST",
                "path": "/v1/messages",
                "request": request,
                "response": {"status": 200, "body": {"answer": answer}},
            }
        )

    text = "\n".join(
        [
            json.dumps(meta),
            entry({"a": 1, "model": "m"}, "first"),
            entry({"model": "m", "a": 1}, "second"),
        ]
    )
    path = tmp_path / "c.jsonl"
    cassette = Cassette(
        mode="replay",
        case="c",
        run=1,
        path=path,
        shown="c.jsonl",
        command="x",
        fixture=parse_fixture(text.encode(), path),
    )
    cassette.set_turn(1)
    answers = []
    for _ in range(3):
        decision = cassette.begin(
            "judge", cassette.canonical("POST", "/v1/messages", {"a": 1, "model": "m"})
        )
        assert isinstance(decision, Replay)
        answers.append((decision.call.response.body.value["answer"], decision.call.line))
    assert answers[:2] == [("first", 2), ("second", 3)]
    assert answers[2] in answers[:2]


# ------------------------------------------------------------------ the exchange wrapper


class Backend:
    """An exchange point that answers from a script and counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, side: str, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        self.calls.append((side, path, dict(body)))
        await asyncio.sleep(0)
        return 200, {"content": [{"type": "text", "text": f"live {len(self.calls)}"}]}


def test_the_exchange_wrapper_records_then_replays_without_calling_inner(tmp_path: Path) -> None:
    inner = Backend()

    async def run(mode: str) -> list[Any]:
        fixtures = suite_fixtures(tmp_path, mode)  # type: ignore[arg-type]
        exchange = with_fixtures(inner, mode=mode)  # type: ignore[arg-type]
        cassette = fixtures.cassette(0)
        out = []
        with use_cassette(cassette):
            cassette.set_turn(1)
            out.append(await exchange("agent", "/v1/messages", B1))
            out.append(await exchange("judge", "/v1/messages", JUDGE))
        cassette.finish()
        return out

    recorded = asyncio.run(run("record"))
    assert len(inner.calls) == 2
    replayed = asyncio.run(run("replay"))
    assert replayed == recorded and len(inner.calls) == 2
    # what the caller gets is its own copy: changing it changes no later replay
    replayed[0][1]["content"].clear()
    assert asyncio.run(run("replay")) == recorded


def test_the_exchange_wrapper_raises_a_miss_and_refuses_calls_outside_a_case(
    recorded: Path,
) -> None:
    inner = Backend()
    exchange = with_fixtures(inner, mode="replay")

    async def run() -> None:
        cassette = replay(recorded)
        with use_cassette(cassette):
            cassette.set_turn(1)
            with pytest.raises(FixtureMissError) as caught:
                await exchange("agent", "/v1/messages", {**B1, "model": "claude-next"})
        assert isinstance(caught.value, BackendError) and not caught.value.retryable
        assert caught.value.miss is not None and caught.value.miss.change is Change.PARAMETERS
        assert str(caught.value) == caught.value.miss.message
        with pytest.raises(FixtureMissError, match="a request made outside any test case"):
            await exchange("judge", "/v1/messages", JUDGE)

    asyncio.run(run())
    assert inner.calls == []


def test_a_judge_call_shared_between_cases_lands_in_every_cases_fixture(tmp_path: Path) -> None:
    inner = Backend()
    cache: dict[str, asyncio.Future[tuple[int, Any]]] = {}

    async def deduplicated(side: str, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        key = json.dumps(body, sort_keys=True)
        if key not in cache:  # concurrent identical requests share one in-flight call
            cache[key] = asyncio.ensure_future(inner(side, path, body))
        return await cache[key]

    async def run(mode: str, names: tuple[str, ...], indices: list[int]) -> list[Any]:
        fixtures = suite_fixtures(tmp_path, mode, names)  # type: ignore[arg-type]
        exchange = with_fixtures(deduplicated, mode=mode)  # type: ignore[arg-type]

        async def one(index: int) -> Any:
            cassette = fixtures.cassette(index)
            with use_cassette(cassette):
                cassette.set_turn(1)
                result = await exchange("judge", "/v1/messages", JUDGE)
            assert cassette.finish().missed == 0
            return result

        return await asyncio.gather(*(one(i) for i in indices))

    both = asyncio.run(run("record", NAMES, [0, 1]))
    assert len(inner.calls) == 1 and both[0] == both[1]
    cache.clear()
    alone = asyncio.run(run("replay", NAMES, [1]))  # -k the second case alone
    assert alone == [both[1]] and len(inner.calls) == 1


def test_the_exchange_wrapper_refuses_bodies_json_cannot_hold_and_keeps_none_of_them(
    tmp_path: Path,
) -> None:
    async def odd(side: str, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        return 200, {"when": object()}  # a reply JSON cannot hold

    async def run() -> None:
        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        exchange = with_fixtures(odd, mode="record")
        with use_cassette(cassette):
            cassette.set_turn(1)
            with pytest.raises(TypeError, match="a request body JSON cannot hold"):
                await exchange("agent", "/v1/messages", {"tags": {1, 2}})
            with pytest.raises(TypeError, match="a request body JSON cannot hold"):
                await exchange("agent", "/v1/messages", {"t": float("nan")})
            status, data = await exchange("agent", "/v1/messages", {"q": 1})
            assert status == 200 and "when" in data  # passed on, not recorded
            with pytest.raises(ValueError, match="unknown side 'robot'"):
                await exchange("robot", "/v1/messages", {"q": 1})
        report = cassette.finish()
        assert (report.recorded, report.error) == (0, None)

    asyncio.run(run())
