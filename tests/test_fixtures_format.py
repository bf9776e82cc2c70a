"""The fixture file: format round trip, canonical requests, damaged files, slugs, atomic and safe writes."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.errors import CaseReadError, ConfigError
from multiturn_eval.fixtures import VOLATILE_FIELDS, canonical_request, case_slugs, read_fixture
from multiturn_eval.fixtures.canonical import Body, decode_body
from multiturn_eval.fixtures.format import (
    RecordedResponse,
    SseEvent,
    parse_fixture,
    parse_sse,
)
from multiturn_eval.fixtures.store import MAX_SLUG, _digest, base_slug, fixture_name, parse_name
from tests.cassettes import Clock, anthropic_body, call, reply, suite_fixtures, text_of


def record_case(root: Path, bodies: list[dict[str, Any]], **kwargs: Any) -> Path:
    fixtures = suite_fixtures(root, "record", **kwargs)
    cassette = fixtures.cassette(0)
    for turn, body in enumerate(bodies, start=1):
        cassette.set_turn(turn)
        call(cassette, "agent", body, reply(f"answer {turn}"))
    report = cassette.finish()
    assert report.error is None, report.error
    return fixtures.path(0)


# ------------------------------------------------------------------ the format


def test_a_recording_reads_back_as_it_was_written(tmp_path: Path) -> None:
    bodies = [
        anthropic_body("where is my refund?"),
        anthropic_body("where is my refund?", "x", "ok"),
    ]
    path = record_case(tmp_path, bodies)
    assert path == tmp_path / "support" / "refund-flow.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3  # meta, then one line per call
    meta = json.loads(lines[0])
    assert meta == {
        "case": "refund flow",
        "format": 1,
        "kind": "meta",
        "models": {"agent": ["claude-test"]},
        "recorded_at": "2025-06-01T09:30:00Z",
        "run": 1,
        "source": "recorded against a fake server in the tests",
        "version": "9.9.9",
    }
    for line in lines:  # keys sorted at every depth
        assert line == json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)
    first = json.loads(lines[1])
    assert first["side"] == "agent" and first["turn"] == 1 and first["path"] == "/v1/messages"
    assert first["request"] == bodies[0]
    assert first["response"] == {
        "status": 200,
        "body": {"type": "message", "content": [{"type": "text", "text": "answer 1"}]},
    }
    fixture = read_fixture(path)
    assert fixture is not None
    assert [c.request.body.value for c in fixture.calls] == bodies
    assert [text_of(c.response) for c in fixture.calls] == ["answer 1", "answer 2"]
    assert [c.line for c in fixture.calls] == [2, 3]


def test_every_kind_of_body_survives_the_round_trip(tmp_path: Path) -> None:
    fixtures = suite_fixtures(tmp_path, "record")
    cassette = fixtures.cassette(0)
    cassette.set_turn(1)
    events = (
        SseEvent(data='{"type":"message_start"}', event="message_start"),
        SseEvent(data="[DONE]"),
        SseEvent(data="line one\nline two", id="7", retry=1500),
        SseEvent(data="", event="ping"),
    )
    answers = [
        RecordedResponse(200, Body("json", {"a": [1, 2.5, None, True], "é": "ünïcode \u2028 sep"})),
        RecordedResponse(200, Body("text", "plain text\nwith lines")),
        RecordedResponse(200, Body("base64", "AAEC/w==")),
        RecordedResponse(204),
        RecordedResponse(200, events=events),
        RecordedResponse(400, Body("json", None)),
    ]
    for i, answer in enumerate(answers):
        call(cassette, "agent", {"n": i, "lone": "\ud800 surrogate"}, answer)
    call(cassette, "agent", Body("text", "not json"), RecordedResponse(200))
    call(cassette, "agent", Body("base64", "AP8="), RecordedResponse(200))
    call(cassette, "agent", Body.empty(), RecordedResponse(200), path="/v1/models?b=2&a=1")
    assert cassette.finish().error is None
    raw = fixtures.path(0).read_bytes()
    assert raw.decode("utf-8").count("\n") == 10  # no separator character broke a line
    assert b"\xe2\x80\xa8" not in raw  # U+2028 is escaped
    fixture = read_fixture(fixtures.path(0))
    assert fixture is not None
    assert [c.response for c in fixture.calls[: len(answers)]] == answers
    assert fixture.calls[0].request.body.value["lone"] == "\ud800 surrogate"
    assert [c.request.body for c in fixture.calls[len(answers) :]] == [
        Body("text", "not json"),
        Body("base64", "AP8="),
        Body.empty(),
    ]
    assert fixture.calls[-1].request.target == "/v1/models?a=1&b=2"


def test_server_sent_events_are_parsed_and_written_back_event_by_event() -> None:
    stream = (
        b'event: message_start\ndata: {"type": "message_start"}\n\n'
        b": a comment line\n\n"
        b"data: first\ndata: second\nid: 3\n\n"
        b"data: [DONE]\n\n"
    )
    events = parse_sse(stream)
    assert events == (
        SseEvent(data='{"type": "message_start"}', event="message_start"),
        SseEvent(data="first\nsecond", id="3"),
        SseEvent(data="[DONE]", id="3"),  # the last event id carries over, as SSE says
    )
    assert parse_sse(b"".join(e.wire() for e in events)) == events
    assert events[0].entry() == {"event": "message_start", "data": {"type": "message_start"}}
    assert events[2].entry() == {"id": "3", "text": "[DONE]"}


# ------------------------------------------------------------------ canonical requests


def test_the_canonical_request_sorts_keys_and_drops_every_volatile_field() -> None:
    body = {
        "session_id": "mte-3f2a9c",
        "turn_index": 0,
        "metadata": {"user_id": "run-1234"},
        "request_id": "req_1",
        "idempotency_key": "k-1",
        "timestamp": "2025-06-01T09:30:00Z",
        "input": "hello",
        "context": {"session_id": "kept: only top-level fields are volatile"},
    }
    canonical = canonical_request("POST", "/agent", body)
    assert canonical.body.value == {
        "turn_index": 0,
        "input": "hello",
        "context": {"session_id": "kept: only top-level fields are volatile"},
    }
    # every entry of the one table is dropped
    for volatile in VOLATILE_FIELDS:
        nested: Any = "x"
        for key in reversed(volatile.path):
            nested = {key: nested}
        assert canonical_request("POST", "/a", {**nested, "k": 1}).body.value == {"k": 1}
    other = canonical_request(
        "POST", "/agent", {**body, "session_id": "mte-other", "request_id": "2"}
    )
    assert other.key == canonical.key  # so a new session matches the recorded one
    kept = canonical_request("POST", "/v1/messages", {"metadata": {"user_id": "u", "tier": "a"}})
    assert kept.body.value == {"metadata": {"tier": "a"}}


def test_the_canonical_request_ignores_the_host_and_normalises_numbers_and_query() -> None:
    a = canonical_request(
        "post", "/v1/messages?beta=true&api-version=1", {"temperature": 0.0, "b": [1.0]}
    )
    b = canonical_request(
        "POST", "/v1/messages?api-version=1&beta=true", {"b": [1], "temperature": 0}
    )
    assert a.key == b.key and a.method == "POST" and a.query == "api-version=1&beta=true"
    # a query parameter named like a secret is never part of the request (as headers)
    secret = canonical_request("GET", "/v1/models?key=AIzaSy-secret&api_key=x&page=2", None)
    assert secret.query == "page=2"
    assert (
        canonical_request("POST", "/v1/x", {"t": 0.5}).key
        != canonical_request("POST", "/v1/x", {"t": 1}).key
    )


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """JSON-like data with what canonical requests care about: bools beside 0 and 1, whole
    floats (``-0.0``, ``1e16``), numbers written in strings (``"v1.0,"``), volatile fields,
    a secret, non-ASCII text and line breaks."""
    leaves: list[Any] = [
        True, False, 0, 1, -1, 0.0, -0.0, 1.0, 2.5, 1e16, 1e-7, 2**60, None,
        "", "v1.0, then", "3e5", "naïve ☃", "a\nb", "sk-test-secret-123", "\u2028",
    ]  # fmt: skip
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(leaves)
    if rng.random() < 0.5:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = ["a", "b", "model", "messages", "metadata", "request_id", "Z", "é", "1.0,"]
    out = {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(0, 5))}
    if depth == 0 and rng.random() < 0.3:
        out["metadata"] = {"user_id": "u-1", **({"tier": 1.0} if rng.random() < 0.5 else {})}
    return out


def same_json(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (``True`` is not ``1``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


def test_an_exchanges_body_is_canonical_exactly_as_one_read_off_the_wire() -> None:
    """The exchange point's one-dump way (the sorted text is the key) gives the same request
    as the general one (a Body parsed, redacted, pruned and dumped again), for data with every
    case that sends it the longer way: whole floats, secrets, volatile fields."""
    from multiturn_eval.fixtures.canonical import parse_canonical, same_request
    from multiturn_eval.secrets import Redactor

    rng = random.Random(20)
    redactor = Redactor(["sk-test-secret-123"])
    for i in range(3000):
        data = random_json(rng)
        redact = redactor if i % 2 else None
        fast = canonical_request("POST", "/v1/messages", data, redact)
        wire = Body("json", parse_canonical(json.dumps(data)))
        general = canonical_request("POST", "/v1/messages", wire, redact, plain=True)
        assert fast.key == general.key and same_request(fast, general), data
        assert same_json(fast.body.value, general.body.value), data
    with pytest.raises(TypeError, match="JSON cannot hold"):
        canonical_request("POST", "/v1/x", {"t": float("nan")})
    with pytest.raises(TypeError, match="JSON cannot hold"):
        canonical_request("POST", "/v1/x", {"t": {1, 2}})
    mixed = canonical_request("POST", "/v1/x", {1: "a", "b": 2})  # unsortable keys: still read
    assert mixed.body.value == {"1": "a", "b": 2}


def test_requests_match_by_their_canonical_text_whatever_the_order_of_keys(
    tmp_path: Path,
) -> None:
    """The fast key (marshal of the values, in their order) decides most matches; a body
    whose objects' keys come in another order (as an SDK sends them, or a hand edit) has
    another fast key and still matches by its canonical text, and True is never 1."""
    from multiturn_eval.fixtures.canonical import same_request

    sorted_body = {"a": 1, "b": {"c": True, "d": [1.5, "x"]}}
    shuffled = {"b": {"d": [1.5, "x"], "c": True}, "a": 1}
    a = canonical_request("POST", "/v1/messages", sorted_body)
    wire = canonical_request(
        "POST",
        "/v1/messages",
        decode_body(json.dumps(shuffled).encode(), canonical=True),
        plain=True,
    )
    assert a.fast_key != wire.fast_key and a.key == wire.key and same_request(a, wire)
    edited = CALL.replace('{"a": 1}', json.dumps(shuffled))
    (call,) = parse_fixture(f"{META}\n{edited}\n".encode(), tmp_path / "f.jsonl").calls
    assert same_request(call.request, a)
    one = canonical_request("POST", "/v1/messages", {**sorted_body, "b": {"c": 1, "d": [1.5, "x"]}})
    assert not same_request(one, a) and one.body.value == a.body.value  # == says True is 1


def test_a_replayed_json_body_is_a_fresh_exact_copy_each_time(tmp_path: Path) -> None:
    line = CALL.replace('{"ok": true}', '{"ok": true, "n": 1, "x": 1.0, "list": [{"k": "v"}]}')
    (call,) = parse_fixture(f"{META}\n{line}\n".encode(), tmp_path / "f.jsonl").calls
    first = call.body_copy()
    assert same_json(first, {"ok": True, "n": 1, "x": 1.0, "list": [{"k": "v"}]})
    first["list"][0]["k"] = "changed"
    second = call.body_copy()
    assert second["list"][0]["k"] == "v" and second is not first
    assert same_json(second, call.response.body.value)


def test_bodies_from_the_wire_are_json_only_when_strictly_json() -> None:
    assert decode_body(b'{"a": 1}') == Body("json", {"a": 1})
    assert decode_body(b"") == Body.empty()
    assert decode_body(b'{"a": NaN}') == Body("text", '{"a": NaN}')
    assert decode_body(b"   ") == Body("text", "   ")
    assert decode_body(b"\xff\xfe") == Body("base64", "//4=")
    deep = b"[" * 100_000 + b"]" * 100_000
    assert decode_body(deep).kind == "text"  # too deep to parse: matched as text, no crash


# ------------------------------------------------------------------ damaged fixtures

META = (
    '{"case": "refund flow", "format": 1, "kind": "meta", "models": {}, '
    '"recorded_at": "2025-06-01T09:30:00Z", "run": 1, "source": "s", "version": "1"}'
)
CALL = (
    '{"kind": "call", "method": "POST", "path": "/v1/messages", "request": {"a": 1}, '
    '"response": {"body": {"ok": true}, "status": 200}, "side": "agent", "turn": 1}'
)


def test_a_recorded_request_matches_canonically_and_its_response_keeps_its_numbers(
    tmp_path: Path,
) -> None:
    """One parse of a fixture line serves both readings unless it holds a whole number
    written as a float: the request is matched with ``0.0`` as ``0`` (a hand-edited or older
    recording still matches), while the recorded response keeps ``1.0`` a float (what the
    agent gets back is what was recorded)."""
    floats = CALL.replace('{"a": 1}', '{"a": 1, "temperature": 0.0}').replace(
        '{"ok": true}', '{"ok": true, "score": 1.0, "rate": 2.5}'
    )
    for line, score in ((CALL, None), (floats, 1.0)):
        fixture = parse_fixture(f"{META}\n{line}\n".encode(), tmp_path / "f.jsonl")
        (call,) = fixture.calls
        now = {"a": 1, "temperature": 0} if score is not None else {"a": 1}
        assert call.request.key == canonical_request("POST", "/v1/messages", now).key
        body = call.response.body.value
        assert body.get("score") == score and type(body.get("score")) is type(score)
        if score is not None:
            assert type(body["rate"]) is float and call.request.body.value["temperature"] == 0
            assert type(call.request.body.value["temperature"]) is int
    # hand-written forms of whole numbers match as the ints they are
    for written in ("1e3", "1E3", "1000.00", "10.0e2"):
        edited = CALL.replace('{"a": 1}', '{"a": ' + written + "}")
        (call,) = parse_fixture(f"{META}\n{edited}\n".encode(), tmp_path / "f.jsonl").calls
        assert call.request.key == canonical_request("POST", "/v1/messages", {"a": 1000}).key


def priced(rates: Any) -> str:
    """The meta entry with ``rates`` as claude-haiku-4-5's recorded prices."""
    entry = json.loads(META)
    entry["prices"] = {"anthropic": {"claude-haiku-4-5": rates}}
    return json.dumps(entry)


def test_the_meta_entrys_prices_read_back_as_written(tmp_path: Path) -> None:
    rates = {"cache_read": "0.1", "cache_write": "1.25", "input": "1", "output": "5"}
    path = tmp_path / "f.jsonl"
    path.write_text(priced(rates) + "\n" + CALL + "\n", encoding="utf-8")
    fixture = read_fixture(path)
    assert fixture is not None
    assert fixture.meta.prices == {"anthropic": {"claude-haiku-4-5": rates}}
    assert fixture.meta.entry()["prices"] == {"anthropic": {"claude-haiku-4-5": rates}}
    plain = parse_fixture(f"{META}\n{CALL}\n".encode(), path)
    assert plain.meta.prices == {} and "prices" not in plain.meta.entry()


def damaged(**changes: Any) -> str:
    entry = json.loads(CALL)
    for key, value in changes.items():
        if value is DROP:
            entry.pop(key)
        else:
            entry[key] = value
    return json.dumps(entry)


DROP = object()


@pytest.mark.parametrize(
    ("lines", "line", "field", "message"),
    [
        (
            [META, "{not json"],
            2,
            None,
            "not JSON: Expecting property name enclosed in double quotes",
        ),
        ([META, CALL, CALL[:40]], 3, None, "not JSON: Unterminated string"),
        ([META, "[1, 2]"], 2, None, "an entry is a JSON object, not an array"),
        (
            [META, '{"kind": "cassette"}'],
            2,
            "kind",
            "unknown kind 'cassette' (an entry is kind meta or call)",
        ),
        ([META, '{"side": "agent"}'], 2, "kind", "no 'kind' (an entry is kind meta or call)"),
        ([CALL], 1, "kind", "the first entry must be the meta entry (kind: meta)"),
        ([META, META], 2, "kind", "a second meta entry (only the first line is one)"),
        ([META, damaged(response=DROP)], 2, "response", "Field required"),
        ([META, damaged(side=DROP)], 2, "side", "Field required"),
        ([META, damaged(turn="1")], 2, "turn", "Input should be a valid integer"),
        (
            [META, damaged(response={"status": "200"})],
            2,
            "response.status",
            "Input should be a valid integer",
        ),
        (
            [META, damaged(response={"status": 200, "body": {}, "text": "x"})],
            2,
            "response",
            "a response holds at most one of body, text, base64, events: ['body', 'text']",
        ),
        ([META, damaged(side="robot")], 2, "side", "Input should be 'agent', 'judge' or 'user'"),
        (
            [META, damaged(path="https://api.anthropic.com/v1/messages")],
            2,
            "path",
            "String should match pattern '^/'",
        ),
        (
            [META, damaged(headers={"x-api-key": "k"})],
            2,
            "headers",
            "Extra inputs are not permitted",
        ),
        (
            [META, damaged(response={"status": 200, "events": [{"event": "x"}]})],
            2,
            "response.events.0",
            "an event holds exactly one of 'data' and 'text'",
        ),
        ([META, damaged(response={"status": 200, "base64": "%%%"})], 2, "response", "not base64"),
        ([META, '{"kind": "call", "x": NaN}'], 2, None, "not JSON: NaN is not JSON"),
        (
            [META, '{"kind": "call", "x": -1e400}'],
            2,
            None,
            "not JSON: the number -1e400 is too large for a float",
        ),
        (
            [META.replace('"format": 1', '"format": 2')],
            1,
            "format",
            "fixture format 2; this multiturn-eval reads format 1",
        ),
        (
            [META.replace("2025-06-01T09:30:00Z", "yesterday")],
            1,
            "recorded_at",
            "not a UTC time like 2025-06-01T09:30:00Z: 'yesterday'",
        ),
        (
            [META.replace('"run": 1', '"run": 0')],
            1,
            "run",
            "Input should be greater than or equal to 1",
        ),
        ([], 1, None, "an empty fixture: no meta entry"),
        (
            [priced({"input": "-1", "output": "5", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.input",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '-1'",
        ),
        (
            [priced({"input": "one", "output": "5", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.input",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): 'one'",
        ),
        (
            [priced({"input": "NaN", "output": "5", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.input",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): 'NaN'",
        ),
        (
            [priced({"input": "1", "output": "1_000", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '1_000'",
        ),
        (
            [priced({"input": "1", "output": " 1\\n", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): ' 1\\\\n'",
        ),
        (
            [priced({"input": "1", "output": "٥", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '٥'",
        ),
        (
            [priced({"input": "1", "output": "５0", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '５0'",
        ),
        (
            [priced({"input": "1", "output": "-0", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '-0'",
        ),
        (
            [priced({"input": "1", "output": "1e999999", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '1e999999'",
        ),
        (
            [priced({"input": "1", "output": "Infinity", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): 'Infinity'",
        ),
        (
            [priced({"input": "1", "output": "+1", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '+1'",
        ),
        (
            [priced({"input": "1", "output": "1.", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '1.'",
        ),
        (
            [priced({"input": "1", "output": ".5", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '.5'",
        ),
        (
            [priced({"input": "1", "output": "0x10", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.output",
            "not a price (decimal digits, such as 3 or 0.25 or 1E-7, 0 or more): '0x10'",
        ),
        (
            [priced({"input": 1, "output": "5", "cache_write": "1", "cache_read": "0"})],
            1,
            "prices.anthropic.claude-haiku-4-5.input",
            "Input should be a valid string",
        ),
        (
            [priced({"input": "1", "output": "5", "cache_write": "1"})],
            1,
            "prices.anthropic.claude-haiku-4-5.cache_read",
            "Field required",
        ),
    ],
)
def test_a_damaged_fixture_is_a_config_error_naming_file_line_and_field(
    tmp_path: Path, lines: list[str], line: int, field: str | None, message: str
) -> None:
    path = tmp_path / "refund-flow.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_fixture(path, "fixtures/support/refund-flow.jsonl")
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.field) == (
        "fixtures/support/refund-flow.jsonl",
        line,
        field,
    )
    assert issue.message.startswith(message), issue.message
    where = f"fixtures/support/refund-flow.jsonl:{line}"
    assert str(issue) == (f"{where} {field}: " if field else f"{where}: ") + issue.message


def mutations(rng: random.Random, entry: Any) -> Any:
    """``entry`` with one thing changed somewhere: a field dropped, added, retyped or
    given a boundary value."""
    out = json.loads(json.dumps(entry))
    node = out
    while isinstance(node, dict) and node and rng.random() < 0.6:
        key = rng.choice(sorted(node))
        if not isinstance(node[key], dict | list):
            break
        child = node[key]
        if isinstance(child, list):
            if not child or not isinstance(child[0], dict):
                break
            child = rng.choice(child)
        node = child
    if not isinstance(node, dict) or not node:
        return out
    key = rng.choice(sorted(node))
    choice = rng.randrange(6)
    if choice == 0:
        del node[key]
    elif choice == 1:
        added = ["extra", "headers", "text", "body", "data", "base64", "events", "request_text"]
        node[rng.choice([*added, "request_base64", "request", "query", "id", "retry"])] = "aGk="
    else:
        node[key] = rng.choice(
            [None, True, False, 0, -1, 1, 99, 100, 599, 600, 1.0, "", "x", "GET", "get", "/p",
             "p", "GET\n", "%%%", "aGk=", [], {}, [{}], {"data": 1}, "agent", "robot"]
        )  # fmt: skip
    return out


def test_the_fast_check_accepts_only_what_the_models_accept_and_reads_it_the_same() -> None:
    """Most lines skip pydantic (:func:`format._fits_call`); thousands of changed entries
    show that whatever the fast check lets through the models accept too, so a damaged
    line is never read."""
    from pydantic import ValidationError

    from multiturn_eval.fixtures import format as fmt
    from multiturn_eval.fixtures.entries import CallEntry, MetaEntry

    events = {"status": 200, "events": [{"data": {"a": 1}}, {"text": "[DONE]", "id": "7"}]}
    seeds = [
        json.loads(CALL),
        {**json.loads(CALL), "turn": None, "query": "a=1", "response": events},
        {**json.loads(CALL), "request_base64": "aGk=", "response": {"status": 204}} | {},
        json.loads(priced({"input": "1", "output": "5", "cache_write": "1", "cache_read": "0"})),
        json.loads(META),
    ]
    del seeds[2]["request"]
    rng = random.Random(11)
    fast = checked = 0
    for i in range(6000):
        seed = seeds[i % len(seeds)]
        entry = seed if i < len(seeds) else mutations(rng, seed)
        if not isinstance(entry, dict):
            continue
        is_meta = entry.get("kind") == "meta"
        accepted = fmt._fits_meta(entry) if is_meta else fmt._fits_call(entry)
        if i < len(seeds):
            assert accepted, entry  # the well-formed ones take the fast way
        if not accepted:
            continue
        fast += 1
        try:
            (MetaEntry if is_meta else CallEntry).model_validate(entry)
        except ValidationError as exc:
            raise AssertionError(f"the fast check let through {entry}: {exc}") from None
        checked += 1
    assert fast > 1000 and checked == fast


def test_a_line_reads_the_same_through_the_models(tmp_path: Path, monkeypatch: Any) -> None:
    """A line the fast check cannot vouch for is read after the models accept it, to the
    same calls and meta as the fast way."""
    from multiturn_eval.fixtures import format as fmt

    events = {"status": 200, "events": [{"data": {"a": 1}, "event": "x", "retry": 5}]}
    lines = [
        priced({"input": "1", "output": "5", "cache_write": "1", "cache_read": "0"}),
        CALL,
        json.dumps({**json.loads(CALL), "turn": None, "query": "a=1", "response": events}),
        json.dumps({**json.loads(CALL), "response": {"status": 200, "text": "plain"}}),
    ]
    data = ("\n".join(lines) + "\n").encode()
    quick = parse_fixture(data, tmp_path / "f.jsonl")
    monkeypatch.setattr(fmt, "_fits_call", lambda entry: False)
    monkeypatch.setattr(fmt, "_fits_meta", lambda entry: False)
    slow = parse_fixture(data, tmp_path / "f.jsonl")
    assert quick.meta == slow.meta and quick.calls == slow.calls
    assert [c.request.key for c in quick.calls] == [c.request.key for c in slow.calls]


def test_bytes_that_are_not_text_and_hostile_nesting_are_config_errors(tmp_path: Path) -> None:
    for data, message in [
        (META.encode() + b"\n\xff\xfe\n", ":2: not UTF-8 text (byte 0)"),
        (
            META.encode() + b"\n" + b"[" * 200_000 + b"\n",
            ":2: not a fixture entry: the JSON is nested too deeply",
        ),
    ]:
        with pytest.raises(ConfigError) as caught:
            parse_fixture(data, tmp_path / "x.jsonl", "x.jsonl")
        assert str(caught.value) == "x.jsonl" + message


def test_blank_lines_and_windows_line_ends_are_read(tmp_path: Path) -> None:
    data = (META + "\r\n\r\n" + CALL + "\r\n").encode()
    fixture = parse_fixture(data, tmp_path / "x.jsonl")
    assert [c.line for c in fixture.calls] == [3]


def test_every_damaged_fixture_of_a_run_is_named_before_any_call(tmp_path: Path) -> None:
    fixtures = suite_fixtures(tmp_path, "replay", ["one", "two", "three"])
    fixtures.directory.mkdir(parents=True)
    fixtures.path(0).write_text(META + "\n{oops\n")
    fixtures.path(2).write_text("[]\n")
    with pytest.raises(ConfigError) as caught:
        fixtures.load(range(3))
    assert [str(i) for i in caught.value.issues] == [
        "fixtures/support/one.jsonl:2: not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "fixtures/support/three.jsonl:1: an entry is a JSON object, not an array",
    ]
    # record replaces a damaged fixture (and says so) instead of refusing to run
    recording = suite_fixtures(tmp_path, "record", ["one", "two", "three"])
    recording.load(range(3))
    cassette = recording.cassette(0)
    cassette.set_turn(1)
    call(cassette, "agent", {"q": 1}, reply("fine"))
    report = cassette.finish()
    assert report.written and report.notes == (
        "replaced a damaged fixture: fixtures/support/one.jsonl:2: not JSON: Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1)",
    )
    assert read_fixture(recording.path(0)) is not None


def test_reading_a_fixture_evaluates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        META + "\n" + damaged(request={"!!python/object/apply:os.system": ["touch pwned"]}) + "\n"
    )
    fixture = read_fixture(path)
    assert fixture is not None
    assert fixture.calls[0].request.body.value == {
        "!!python/object/apply:os.system": ["touch pwned"]
    }
    assert not (Path.cwd() / "pwned").exists()


# ------------------------------------------------------------------ byte-stable re-record


def test_re_recording_an_unchanged_conversation_rewrites_nothing(tmp_path: Path) -> None:
    clock = Clock()
    bodies = [anthropic_body("hi"), anthropic_body("hi", "hello", "bye")]
    path = record_case(tmp_path, bodies, clock=clock)
    before, stat = path.read_bytes(), path.stat()
    clock.advance(days=30)
    fixtures = suite_fixtures(tmp_path, "record", clock=clock)
    cassette = fixtures.cassette(0)
    for turn, body in enumerate(bodies, start=1):
        cassette.set_turn(turn)
        call(cassette, "agent", body, reply(f"answer {turn}"))
    report = cassette.finish()
    assert not report.written and report.recorded == 2
    assert report.recorded_at == "2025-06-01T09:30:00Z"  # the date of the recording on file
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stat.st_mtime_ns
    # one changed reply is a new recording, dated now
    path2 = record_case(tmp_path, [bodies[0], {**bodies[1], "max_tokens": 512}], clock=clock)
    assert path2 == path and path.read_bytes() != before
    assert json.loads(path.read_text().splitlines()[0])["recorded_at"] == "2025-07-01T09:30:00Z"


# ------------------------------------------------------------------ slugs


HOSTILE = [
    "refund flow",
    "Refund Flow",  # the same slug on a case-insensitive filesystem
    "refund-flow",
    "refund flow",  # the same name twice
    "refund flow",
    "../../etc/passwd",
    "/absolute/path",
    'a\\b:c*d?e"f<g>h|i',
    ".hidden",
    "..",
    "",
    "   ",
    "???",
    "日本語のテスト",
    "café crème",
    "emoji 🎉 party",
    "CON",
    "nul",
    "com1",
    "LPT9",
    "foo",
    "foo.run-2",  # not the name of foo's run 2
    "x" * 300,
    "x" * 300 + "y",  # differs only past the cut
    "tab\tand\nnewline\x00nul",
    "-leading-and-trailing-",
    "refund-flow-" + "0" * 8,
]


def test_slugs_are_unique_safe_and_stable_for_hostile_names() -> None:
    slugs = case_slugs(HOSTILE)
    assert len(set(slugs)) == len(slugs)
    names = {fixture_name(s, r) for s in slugs for r in (1, 2, 3)}
    assert len(names) == 3 * len(slugs)  # no case's run file is another case's file
    for slug in slugs:
        assert re.fullmatch(r"[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?", slug), slug
        assert len(slug) <= MAX_SLUG + 9 + 9
        assert slug.split("-")[0] not in {"con", "prn", "aux", "nul", "com1", "lpt9"} or "-" in slug
        for run in (1, 2):
            assert parse_name(fixture_name(slug, run)) == (slug, run)
    assert slugs[0] == "refund-flow" and slugs[5] == "etc-passwd" and slugs[8] == "hidden"
    # nothing left of the name: its digest, whatever comes first
    assert slugs[9] == "case-" + _digest("..") and slugs[10] == "case-" + _digest("")
    assert slugs[13] == "case-" + _digest("日本語のテスト") and slugs[14] == "cafe-creme"
    assert slugs[16].startswith("con-") and slugs[20] == "foo" and slugs[21] == "foo-run-2"
    # a taken slug gets the name's digest; the same name a third time a number as well
    assert slugs[1] == "refund-flow-" + _digest("Refund Flow")
    assert slugs[2] == "refund-flow-" + _digest("refund-flow")
    assert slugs[3] == "refund-flow-" + _digest("refund flow") and slugs[4] == slugs[3] + "-2"
    # deterministic, and adding a test case renames no other's fixture
    assert case_slugs(HOSTILE) == slugs
    assert case_slugs([*HOSTILE, "refund flow", "New case"])[: len(HOSTILE)] == slugs
    assert base_slug("x" * 300) != base_slug("x" * 300 + "y")


# ------------------------------------------------------------------ atomic writes


def test_a_failure_mid_write_leaves_the_old_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = record_case(tmp_path, [anthropic_body("hi")])
    before = path.read_bytes()
    import multiturn_eval.reports.writer as writer

    real_fdopen = os.fdopen

    class Broken:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> Broken:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, text: str) -> None:
            self.handle.write(text[: len(text) // 2])
            self.handle.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, "fdopen", lambda *a, **k: Broken(real_fdopen(*a, **k)))
    fixtures = suite_fixtures(tmp_path, "record")
    cassette = fixtures.cassette(0)
    cassette.set_turn(1)
    call(cassette, "agent", anthropic_body("something else"), reply("new"))
    report = cassette.finish()
    assert report.error == (
        "fixtures/support/refund-flow.jsonl: the fixture could not be written: No space left on device"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["refund-flow.jsonl"]


def test_a_process_killed_mid_write_leaves_the_old_fixture(tmp_path: Path) -> None:
    path = record_case(tmp_path, [anthropic_body("hi")])
    before = path.read_bytes()
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        import multiturn_eval.reports.writer as writer
        from tests.cassettes import suite_fixtures, call, reply, anthropic_body

        real = os.fdopen
        class Dying:
            def __init__(self, handle): self.handle = handle
            def __enter__(self): return self
            def __exit__(self, *exc): pass
            def write(self, text):
                self.handle.write(text[: len(text) // 2]); self.handle.flush(); os._exit(9)
        writer.os.fdopen = lambda *a, **k: Dying(real(*a, **k))
        fixtures = suite_fixtures(Path({str(tmp_path)!r}), "record")
        cassette = fixtures.cassette(0)
        cassette.set_turn(1)
        call(cassette, "agent", anthropic_body("other"), reply("new"))
        cassette.finish()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parent.parent, check=False
    )
    assert done.returncode == 9
    assert path.read_bytes() == before
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    assert all(n.startswith(".refund-flow.jsonl.") and n.endswith(".tmp") for n in leftovers)
    assert read_fixture(path) is not None  # what a replay reads is the old, whole fixture


# ------------------------------------------------------------------ secrets


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("my key is sk-ant-api03-AbCdEf0123456789", "an Anthropic API key (sk-ant-…)"),
        ("sk-proj-Zx9_8yW7vU6tS5", "an OpenAI project key (sk-proj-…)"),
        ("Bearer sk-0123456789abcdefghijKLMN", "an API key (sk- and 20 or more key characters)"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "an AWS access key id (AKIA…)"),
    ],
)
def test_a_fixture_holding_a_key_is_refused_and_names_file_and_field(
    tmp_path: Path, value: str, kind: str
) -> None:
    fixtures = suite_fixtures(tmp_path, "record", ["leaky", "clean"])
    leaky, clean = fixtures.cassette(0), fixtures.cassette(1)
    for cassette in (leaky, clean):
        cassette.set_turn(1)
        call(cassette, "agent", anthropic_body("hello"), reply("hi"))
        cassette.set_turn(2)
    call(leaky, "agent", anthropic_body("hello", "hi", "and?"), reply(f"here: {value}"))
    report = leaky.finish()
    assert report.error == (
        f"fixtures/support/leaky.jsonl:3 response.body.content[0].text: holds what looks like "
        f"{kind}; the fixture was not written (keep keys out of prompts and replies, or give "
        "the value to the run as a secret so it is redacted)"
    )
    assert value not in report.error
    assert not fixtures.path(0).exists() and not report.written
    assert clean.finish().written and fixtures.path(1).exists()  # the other cases' are written


def test_a_key_in_a_request_or_an_object_key_is_refused_too(tmp_path: Path) -> None:
    fixtures = suite_fixtures(tmp_path, "record")
    cassette = fixtures.cassette(0)
    cassette.set_turn(1)
    call(cassette, "agent", anthropic_body("use sk-ant-admin01-XYZ please"), reply("no"))
    assert cassette.finish().error.startswith(  # type: ignore[union-attr]
        "fixtures/support/refund-flow.jsonl:2 request.messages[0].content: holds what looks like an Anthropic API key"
    )
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    call(cassette, "judge", {"tools": {"AKIAIOSFODNN7EXAMPLE": 1}}, reply("no"))
    error = cassette.finish().error
    assert error is not None and "AKIAIOSFODNN7EXAMPLE" not in error
    assert error.startswith(
        "fixtures/support/refund-flow.jsonl:2 request.tools (an object key): holds what looks "
        "like an AWS access key id (AKIA…)"
    )


def test_the_runs_secrets_are_redacted_and_look_alikes_are_kept(tmp_path: Path) -> None:
    secret = "hunter2-but-longer"
    fixtures = suite_fixtures(tmp_path, "record", secrets=[secret])
    cassette = fixtures.cassette(0)
    cassette.set_turn(1)
    body = anthropic_body(f"my password is {secret}")
    call(cassette, "agent", body, reply(f"I will not repeat {secret}"))
    cassette.set_turn(2)
    harmless = (
        "task-management-system-design and risk-assessment-framework, desk-0123456789abcdefghijkl"
    )
    call(cassette, "agent", anthropic_body(harmless), reply("sk- is how keys start; AKIA too"))
    report = cassette.finish()
    assert report.error is None and report.written
    text = fixtures.path(0).read_text()
    assert secret not in text and text.count("***") == 2
    assert harmless in text
    # the redacted request still matches the same request on replay
    replay = suite_fixtures(tmp_path, "replay", secrets=[secret]).cassette(0)
    replay.set_turn(1)
    assert text_of(call(replay, "agent", body)) == "I will not repeat ***"


def test_a_run_secret_the_redaction_cannot_reach_is_refused(tmp_path: Path) -> None:
    import base64

    secret = "correct-horse-battery-staple"
    fixtures = suite_fixtures(tmp_path, "record", secrets=[secret])
    cassette = fixtures.cassette(0)
    cassette.set_turn(1)
    binary = base64.b64encode(b"\x00\x01 token=" + secret.encode() + b" \xff").decode()
    call(
        cassette,
        "agent",
        anthropic_body("download it"),
        RecordedResponse(200, Body("base64", binary)),
    )
    report = cassette.finish()
    assert report.error == (
        "fixtures/support/refund-flow.jsonl:2 response.base64: holds one of the run's secrets "
        "(where the redaction could not reach it); the fixture was not written (keep keys out of "
        "prompts and replies, or give the value to the run as a secret so it is redacted)"
    )
    assert not fixtures.path(0).exists()
    # a key inside a base64 body is found as well
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    key = base64.b64encode(b"ANTHROPIC_API_KEY=sk-ant-api03-XYZXYZ").decode()
    call(cassette, "agent", Body("base64", key), reply("stored"))
    assert (cassette.finish().error or "").startswith(
        "fixtures/support/refund-flow.jsonl:2 request_base64: holds what looks like an Anthropic API key"
    )


def test_loading_can_check_every_fixture_without_holding_them(tmp_path: Path) -> None:
    path = record_case(tmp_path, [anthropic_body("hi")])
    held = suite_fixtures(tmp_path, "replay")
    held.load([0])
    checked = suite_fixtures(tmp_path, "replay")
    checked.load([0], keep=False)
    path.unlink()
    assert held.cassette(0).fixture is not None  # read once, held until its cassette
    assert checked.cassette(0).fixture is None  # read again for its cassette: gone now
    path.write_text("{broken\n")
    with pytest.raises(ConfigError):
        suite_fixtures(tmp_path, "replay").load([0], keep=False)
    # damaged between the check and its case's turn: that case's error, not the run's
    path = record_case(tmp_path, [anthropic_body("hi")])
    checked = suite_fixtures(tmp_path, "replay")
    checked.load([0], keep=False)
    path.write_text("{broken\n")
    with pytest.raises(
        CaseReadError,
        match=r"^fixtures/support/refund-flow.jsonl:1: not JSON.*changed during the run\)$",
    ):
        checked.cassette(0)
