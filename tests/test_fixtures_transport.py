"""The fixture transports through real clients and SDKs against local fake servers.

Record against a fake server, stop it, replay: the answers are the same and
no connection is even attempted (``no_network`` fails any ``connect``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from multiturn_eval.fixtures import (
    AsyncFixtureTransport,
    FixtureTransport,
    httpx1,
    intercept_httpx,
    read_fixture,
    transport,
    use_cassette,
)
from multiturn_eval.fixtures.canonical import Body
from multiturn_eval.fixtures.cassette import Cassette, Live, Mode
from multiturn_eval.fixtures.format import RecordedResponse
from tests.cassettes import no_network, openai_sse, suite_fixtures
from tests.fakes._server import Drop, FakeServer, Request, Response, Slow
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, echo, overloaded, text
from tests.fakes.openai_server import API_KEY as OPENAI_KEY
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import echo as openai_echo

STOPPED = "http://127.0.0.1:9"  # nothing listens there: a live call could not even connect


def anthropic_client(base_url: str, mode: Mode, retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=API_KEY,
        base_url=base_url,
        max_retries=retries,
        http_client=httpx2.AsyncClient(transport=AsyncFixtureTransport(mode=mode)),
    )


async def two_turns(
    client: anthropic.AsyncAnthropic, cassette: Cassette, tag: str = ""
) -> list[str]:
    history: list[dict[str, Any]] = []
    answers = []
    with use_cassette(cassette):
        for turn, said in enumerate(
            [f"where is my refund?{tag}", f"it was order 42{tag}"], start=1
        ):
            cassette.set_turn(turn)
            history.append({"role": "user", "content": said})
            message = await client.messages.create(
                model="claude-test",
                max_tokens=64,
                messages=history,  # type: ignore[arg-type]
                metadata={"user_id": f"session-{id(history)}"},  # volatile: differs every run
            )
            answer = message.content[0].text  # type: ignore[union-attr]
            history.append({"role": "assistant", "content": answer})
            answers.append(answer)
    return answers


def test_the_anthropic_sdk_records_then_replays_with_the_server_stopped(tmp_path: Path) -> None:
    with FakeAnthropic(echo) as fake:
        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        recorded = asyncio.run(two_turns(anthropic_client(fake.url, "record"), cassette))
        assert cassette.finish().recorded == 2
        reached = len(fake.requests)
    assert recorded == ["where is my refund?", "it was order 42"] and reached == 2
    text_on_disk = (tmp_path / "support" / "refund-flow.jsonl").read_text()
    for header_value in (API_KEY, "anthropic-version", "x-api-key", "127.0.0.1", "session-"):
        assert header_value not in text_on_disk  # no header, no host, no volatile field
    with no_network() as attempts:  # another base_url: the host is not part of the match
        cassette = suite_fixtures(tmp_path, "replay").cassette(0)
        replayed = asyncio.run(two_turns(anthropic_client(STOPPED, "replay"), cassette))
        report = cassette.finish()
    assert replayed == recorded and attempts == []
    assert (report.replayed, report.missed, report.unused) == (2, 0, ())
    assert len(fake.requests) == reached  # zero requests reached the server


def test_a_miss_is_refused_at_once_and_the_sdk_does_not_retry_it(tmp_path: Path) -> None:
    with FakeAnthropic(echo) as fake:
        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        asyncio.run(two_turns(anthropic_client(fake.url, "record"), cassette))
        cassette.finish()
    cassette = suite_fixtures(tmp_path, "replay").cassette(0)

    async def changed() -> None:
        with use_cassette(cassette):
            cassette.set_turn(1)
            await anthropic_client(STOPPED, "replay", retries=3).messages.create(
                model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hello?"}]
            )

    with no_network() as attempts, pytest.raises(anthropic.NotFoundError) as caught:
        asyncio.run(changed())
    assert attempts == []
    (miss,) = cassette.misses  # one miss, not one per retry
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "not_in_fixtures", "message": miss.message},
    }
    assert miss.message.startswith(
        'not in the fixtures: test case "refund flow", run 1, turn 1, agent call 1 (POST /v1/messages): '
        'the conversation content changed: messages[0].content: recorded "where is my refund?" / now "hello?"'
    )


# ------------------------------------------------------------------ streams


def anthropic_sse(words: list[str]) -> bytes:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n"

    message = {
        "id": "msg_stream_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    parts = [
        event("message_start", {"type": "message_start", "message": message}),
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ": keep-alive comment\n\n",
        event("ping", {"type": "ping"}),
    ]
    parts += [
        event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
        )
        for w in words
    ]
    parts += [
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(words)},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]
    return "".join(parts).encode()


def test_an_sse_stream_is_recorded_and_replayed_event_by_event(tmp_path: Path) -> None:
    words = ["Your ", "refund ", "is ", "on ", "its ", "way."]

    def streamed(request: Request) -> Response:
        return Response(200, anthropic_sse(words), content_type="text/event-stream")

    async def stream(base_url: str, mode: Mode) -> tuple[list[str], str, list[bytes]]:
        cassette = suite_fixtures(tmp_path, mode).cassette(0)
        client = anthropic_client(base_url, mode)
        with use_cassette(cassette):
            cassette.set_turn(1)
            events = await client.messages.create(
                model="claude-test",
                max_tokens=64,
                stream=True,
                messages=[{"role": "user", "content": "status?"}],
            )
            kinds, said = [], ""
            async for event in events:
                kinds.append(event.type)
                if event.type == "content_block_delta":
                    said += event.delta.text  # type: ignore[union-attr]
            # the raw chunks as a client reads them off the transport
            raw = httpx2.AsyncClient(transport=AsyncFixtureTransport(mode=mode), base_url=base_url)
            async with raw.stream(
                "POST",
                "/v1/messages",
                json={
                    "model": "claude-test",
                    "max_tokens": 64,
                    "stream": True,
                    "messages": [{"role": "user", "content": "status?"}],
                },
                headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"},
            ) as response:
                chunks = [chunk async for chunk in response.aiter_raw()]
        assert cassette.finish().missed == 0
        return kinds, said, chunks

    with FakeAnthropic(streamed) as fake:
        live_kinds, live_text, _ = asyncio.run(stream(fake.url, "record"))
    fixture = read_fixture(tmp_path / "support" / "refund-flow.jsonl")
    assert fixture is not None
    stored = fixture.calls[0].response.entry()["events"]
    assert [e.get("event") for e in stored][:4] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
    ]
    assert stored[3] == {
        "event": "content_block_delta",
        "data": {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Your "},
        },
    }
    with no_network() as attempts:
        kinds, said, chunks = asyncio.run(stream(STOPPED, "replay"))
    assert attempts == []
    assert (kinds, said) == (live_kinds, live_text) and said == "Your refund is on its way."
    assert (
        len(chunks) == len(stored) == 6 + len(words)
    )  # one event per chunk (the comment is dropped)
    assert all(chunk.endswith(b"\n\n") and chunk.count(b"\n\n") == 1 for chunk in chunks)


def test_the_sync_openai_sdk_streams_through_the_sync_httpx2_transport(tmp_path: Path) -> None:
    def run(base_url: str, mode: Mode) -> str:
        cassette = suite_fixtures(tmp_path, mode).cassette(0)
        client = openai.OpenAI(
            api_key=OPENAI_KEY,
            base_url=base_url + "/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=FixtureTransport(mode=mode)),
        )
        with use_cassette(cassette):
            cassette.set_turn(1)
            stream = client.chat.completions.create(
                model="gpt-test", stream=True, messages=[{"role": "user", "content": "hi"}]
            )
            said = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
        assert cassette.finish().missed == 0
        return said

    with FakeOpenAI(
        lambda r: Response(200, openai_sse(["Hel", "lo", "!"]), content_type="text/event-stream")
    ) as fake:
        assert run(fake.url, "record") == "Hello!"
    stored = read_fixture(tmp_path / "support" / "refund-flow.jsonl")
    assert stored is not None and stored.calls[0].response.entry()["events"][-1] == {
        "text": "[DONE]"
    }
    with no_network():
        assert run(STOPPED, "replay") == "Hello!"


# ------------------------------------------------------------------ httpx (the other library)


class JsonEcho(FakeServer):
    """Answers every request with its JSON body, gzip-compressed when the client accepts it."""

    def __init__(self) -> None:
        super().__init__(self.answer)

    def answer(self, request: Request) -> Response:
        body = json.dumps({"echo": request.body, "path": request.path}).encode()
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(200, gzip.compress(body), headers={"content-encoding": "gzip"})
        return Response(200, body)


def test_httpx_clients_sync_and_async_record_and_replay(tmp_path: Path) -> None:
    def sync_run(base_url: str, mode: Mode) -> list[Any]:
        cassette = suite_fixtures(tmp_path, mode, ("sync case", "async case")).cassette(0)
        with (
            httpx.Client(transport=httpx1.FixtureTransport(mode=mode), base_url=base_url) as client,
            use_cassette(cassette),
        ):
            cassette.set_turn(1)
            out = [client.post("/tools/lookup", json={"order": 42}).json()]
            cassette.set_turn(2)
            out.append(client.get("/tools/status?verbose=1&order=42").json())
        assert cassette.finish().missed == 0
        return out

    async def async_run(base_url: str, mode: Mode) -> Any:
        cassette = suite_fixtures(tmp_path, mode, ("sync case", "async case")).cassette(1)
        async with httpx.AsyncClient(
            transport=httpx1.AsyncFixtureTransport(mode=mode), base_url=base_url
        ) as client:
            with use_cassette(cassette):
                cassette.set_turn(1)
                result = (await client.post("/tools/lookup", json={"order": 7})).json()
        assert cassette.finish().missed == 0
        return result

    with JsonEcho() as server:
        live = sync_run(server.url, "record")
        live_async = asyncio.run(async_run(server.url, "record"))
    assert live == [
        {"echo": {"order": 42}, "path": "/tools/lookup"},
        {"echo": None, "path": "/tools/status"},
    ]
    stored = read_fixture(tmp_path / "support" / "sync-case.jsonl")
    assert stored is not None
    assert stored.calls[1].request.target == "/tools/status?order=42&verbose=1"
    assert stored.calls[0].response.body.value == live[0]  # decoded: the gzip is gone
    with no_network() as attempts:
        assert sync_run(STOPPED, "replay") == live
        assert asyncio.run(async_run(STOPPED, "replay")) == live_async
    assert attempts == []


# ------------------------------------------------------------------ concurrency


def test_eight_cases_recording_at_once_through_one_client_each_get_their_own_traffic(
    tmp_path: Path,
) -> None:
    names = tuple(f"case {i}" for i in range(8))

    async def run(base_url: str, mode: Mode) -> list[list[str]]:
        suite = suite_fixtures(tmp_path, mode, names)
        client = anthropic_client(base_url, mode)  # one client, one transport for all cases

        async def one(i: int) -> list[str]:
            cassette = suite.cassette(i)
            await asyncio.sleep(0.001 * (7 - i))  # interleave the cases' calls
            answers = await two_turns(client, cassette, tag=f" [{i}]")
            assert cassette.finish().missed == 0
            return answers

        return await asyncio.gather(*(one(i) for i in range(8)))

    with FakeAnthropic(echo) as fake:
        live = asyncio.run(run(fake.url, "record"))
    assert len(fake.requests) == 16
    for i in range(8):
        fixture = read_fixture(tmp_path / "support" / f"case-{i}.jsonl")
        assert fixture is not None and fixture.meta.case == f"case {i}"
        said = [c.request.body.value["messages"][-1]["content"] for c in fixture.calls]
        assert said == [f"where is my refund? [{i}]", f"it was order 42 [{i}]"]
    with no_network():
        assert asyncio.run(run(STOPPED, "replay")) == live


# ------------------------------------------------------------------ a python agent's own clients


def test_intercept_httpx_catches_clients_made_before_the_run(tmp_path: Path) -> None:
    original_async = httpx2.AsyncHTTPTransport.__dict__["handle_async_request"]
    original_sync = httpx.HTTPTransport.__dict__["handle_request"]

    def agent_clients(base_url: str) -> tuple[openai.AsyncOpenAI, httpx.Client]:
        # what an agent module makes at import time, long before the run
        return openai.AsyncOpenAI(
            api_key=OPENAI_KEY, base_url=base_url + "/v1", max_retries=0
        ), httpx.Client(base_url=base_url)

    def run(base_url: str, mode: Mode) -> list[Any]:
        client, tools = agent_clients(base_url)
        cassette = suite_fixtures(tmp_path, mode).cassette(0)

        async def agent() -> list[Any]:
            with use_cassette(cassette):
                cassette.set_turn(1)
                reply = await client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": "hi"}]
                )
                # sync code in a thread that carries the case's context (as usercode runs it)
                looked_up = await asyncio.to_thread(
                    lambda: tools.post(
                        "/v1/chat/completions",
                        json={
                            "model": "gpt-test",
                            "messages": [{"role": "user", "content": "tool"}],
                        },
                        headers={"authorization": f"Bearer {OPENAI_KEY}"},
                    ).json()
                )
            return [reply.choices[0].message.content, looked_up["choices"][0]["message"]["content"]]

        with intercept_httpx(mode):
            assert httpx2.AsyncHTTPTransport.__dict__["handle_async_request"] is not original_async
            result = asyncio.run(agent())
        report = cassette.finish()
        assert report.missed == 0 and report.replayed + report.recorded == 2
        return result

    with FakeOpenAI(openai_echo) as fake:
        live = run(fake.url, "record")
        reached = len(fake.requests)
    assert live == ["hi", "tool"] and reached == 2
    with no_network() as attempts:
        assert run(STOPPED, "replay") == live
    assert attempts == []
    # undone: the default transports are as they were
    assert httpx2.AsyncHTTPTransport.__dict__["handle_async_request"] is original_async
    assert httpx.HTTPTransport.__dict__["handle_request"] is original_sync
    assert transport.intercepting() is None


HTTPX_LATE = """
import json, sys
from multiturn_eval.fixtures.transport import intercept_httpx
before = "httpx" in sys.modules
with intercept_httpx("replay"):
    imported_by_patch = "httpx" in sys.modules
    import httpx  # as a python agent's tool might, during the run
    refused = httpx.get("http://127.0.0.1:9/v1/x")  # outside any test case: refused in replay
    status, kind = refused.status_code, refused.json()["error"]["type"]
restored = not hasattr(httpx.HTTPTransport.handle_request, "__wrapped__")
print("PROBE " + json.dumps([before, imported_by_patch, status, kind, restored]))
"""


def test_httpx_imported_during_the_run_is_intercepted_and_not_imported_before(
    tmp_path: Path,
) -> None:
    """A run that never uses ``httpx`` does not import it (a replay's start-up), and one
    that imports it while the fixtures intercept gets its transports patched at once: a
    request to a closed port is answered by the fixtures (refused), never sent."""
    from tests.cli_probe import run_probe

    result = run_probe(HTTPX_LATE, tmp_path, ())
    assert result == [False, False, 404, "not_in_fixtures", True]


HTTPX2_LATE = """
import json, sys
from multiturn_eval.fixtures import intercept_httpx
from multiturn_eval.fixtures.intercept import intercepting
before = "httpx2" in sys.modules
with intercept_httpx("replay"):
    not_yet = "httpx2" in sys.modules
    import httpx2  # as a python agent's SDK would, during the run
    refused = httpx2.get("http://127.0.0.1:9/v1/x")  # outside any test case: refused in replay
    status, kind = refused.status_code, refused.json()["error"]["type"]
    mode = intercepting()
restored = not hasattr(httpx2.HTTPTransport.handle_request, "__wrapped__")
print("PROBE " + json.dumps([before, not_yet, status, kind, mode, restored, intercepting()]))
"""


def test_a_run_that_imports_no_httpx2_is_intercepted_once_it_does(tmp_path: Path) -> None:
    """The run's interception (``fixtures.intercept``) imports neither library (a replay of a
    chat backend never needs them); the first import of ``httpx2`` during the block gets the
    patched transports before its first request, and leaving the block undoes it."""
    from tests.cli_probe import run_probe

    result = run_probe(HTTPX2_LATE, tmp_path, ())
    assert result == [False, False, 404, "not_in_fixtures", "replay", True, None]


TRANSPORT_FIRST = """
import json, sys
from multiturn_eval.fixtures import intercept_httpx
before = "httpx2" in sys.modules
with intercept_httpx("replay"):
    if sys.argv[1] == "module":
        from multiturn_eval.fixtures.transport import AsyncFixtureTransport
    else:  # the package's lazy name
        from multiturn_eval.fixtures import AsyncFixtureTransport
    import httpx2
    patched = hasattr(httpx2.HTTPTransport.handle_request, "__wrapped__")
    refused = httpx2.get("http://127.0.0.1:9/v1/x")  # outside any test case: refused in replay
    status, kind = refused.status_code, refused.json()["error"]["type"]
print("PROBE " + json.dumps([before, patched, status, kind]))
"""


@pytest.mark.parametrize("how", ["module", "package"])
def test_the_transports_module_imported_first_in_the_block_is_still_intercepted(
    tmp_path: Path, how: str
) -> None:
    """Importing the fixtures' transports (which import ``httpx2`` first thing) as the first
    thing inside the block: the patch waits for that import to finish, then is in place
    before any request (it used to find the module half made, and stay off)."""
    from tests.cli_probe import run_probe

    result = run_probe(TRANSPORT_FIRST, tmp_path, (how,))
    assert result == [False, True, 404, "not_in_fixtures"]


def test_intercept_httpx_nests_and_refuses_a_second_mode() -> None:
    with intercept_httpx("replay"):
        with intercept_httpx("replay"):
            assert transport.intercepting() == "replay"
        assert transport.intercepting() == "replay"
        with (
            pytest.raises(ValueError, match="already intercepted for mode 'replay', not 'record'"),
            intercept_httpx("record"),
        ):
            pass
        assert transport.intercepting() == "replay"
    assert transport.intercepting() is None


def test_a_request_outside_any_test_case_is_refused_in_replay_and_live_otherwise(
    tmp_path: Path,
) -> None:
    with JsonEcho() as server:
        results: dict[str, Any] = {}

        def bare_thread(mode: Mode) -> None:  # a thread that does not carry the case's context
            with httpx2.Client(transport=FixtureTransport(mode=mode)) as client:
                results[mode] = client.post(server.url + "/x", json={"a": 1})

        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        with use_cassette(cassette):
            for mode in ("replay", "record"):
                thread = threading.Thread(target=bare_thread, args=(mode,))
                thread.start()
                thread.join()
        assert cassette.finish().recorded == 0  # neither request belonged to the case
    refused = results["replay"]
    assert refused.status_code == 404 and refused.headers["x-should-retry"] == "false"
    assert refused.json()["error"]["message"].startswith(
        "not in the fixtures: a request made outside any test case (POST /x)"
    )
    assert results["record"].json() == {"echo": {"a": 1}, "path": "/x"}
    assert len(server.requests) == 1


# ------------------------------------------------------------------ what is not recorded


def test_retried_statuses_broken_connections_and_cut_streams_are_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run(base_url: str) -> Cassette:
        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        async with httpx2.AsyncClient(
            transport=AsyncFixtureTransport(mode="record"), base_url=base_url
        ) as client:
            with use_cassette(cassette):
                cassette.set_turn(1)
                body = {
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "hi"}],
                }
                headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
                assert (
                    await client.post("/v1/messages", json=body, headers=headers)
                ).status_code == 529
                with pytest.raises(httpx2.RemoteProtocolError):
                    await client.post("/v1/messages", json=body, headers=headers)
                async with client.stream(
                    "POST", "/v1/messages", json=body, headers=headers
                ) as response:
                    async for _ in response.aiter_bytes():
                        break  # the client stops reading: a replay would get half a reply
                monkeypatch.setattr(transport, "MAX_RECORDED_BYTES", 10)
                big = await client.post("/v1/messages", json=body, headers=headers)
                assert big.json()["content"][0]["text"] == "too big to keep"  # passed on whole
                monkeypatch.undo()
                ok = await client.post("/v1/messages", json=body, headers=headers)
                assert ok.json()["content"][0]["text"] == "kept"
        return cassette

    with FakeAnthropic() as fake:
        fake.script(
            overloaded(),
            Drop(),
            Response(200, b'{"content": [' + b" " * 100_000 + b"]}"),
            text("too big to keep"),
            text("kept"),
        )
        cassette = asyncio.run(run(fake.url))
    report = cassette.finish()
    assert report.recorded == 1
    fixture = read_fixture(tmp_path / "support" / "refund-flow.jsonl")
    assert fixture is not None and len(fixture.calls) == 1
    assert fixture.calls[0].response.body.value["content"][0]["text"] == "kept"


def test_a_replay_reads_its_fixture_once_before_any_call(tmp_path: Path) -> None:
    cassette = suite_fixtures(tmp_path, "record").cassette(0)
    cassette.set_turn(1)
    decision = cassette.begin("agent", cassette.canonical("POST", "/v1/x", {"q": 1}))
    assert isinstance(decision, Live)
    cassette.complete(decision.slot, RecordedResponse(200, Body("json", {"a": 1})))
    cassette.finish()
    path = tmp_path / "support" / "refund-flow.jsonl"

    async def replay() -> Any:
        replaying = suite_fixtures(tmp_path, "replay").cassette(0)
        path.unlink()  # read when the cassette was made: no call reads the file again
        async with httpx2.AsyncClient(
            transport=AsyncFixtureTransport(), base_url=STOPPED
        ) as client:
            with use_cassette(replaying):
                replaying.set_turn(1)
                return (await client.post("/v1/x", json={"q": 1})).json()

    with no_network():
        assert asyncio.run(replay()) == {"a": 1}


def test_a_stream_the_client_stops_reading_keeps_what_it_read_and_a_broken_one_nothing(
    tmp_path: Path,
) -> None:
    events = [f'data: {{"n": {i}}}\n\n'.encode() for i in range(5)]

    class Events(httpx2.AsyncByteStream):  # one event per chunk, as a server flushes them
        def __init__(self, broken: bool) -> None:
            self.broken = broken

        async def __aiter__(self) -> Any:
            for event in events[:2] if self.broken else events:
                yield event
            if self.broken:
                raise httpx2.ReadError("connection reset by peer")

    def handler(request: httpx2.Request) -> httpx2.Response:
        broken = request.url.path == "/broken"
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Events(broken)
        )

    async def run(mode: Mode) -> list[bytes]:
        cassette = suite_fixtures(tmp_path, mode).cassette(0)
        inner = httpx2.MockTransport(handler) if mode == "record" else None
        async with httpx2.AsyncClient(
            transport=AsyncFixtureTransport(inner, mode=mode), base_url=STOPPED
        ) as client:
            with use_cassette(cassette):
                cassette.set_turn(1)
                read: list[bytes] = []
                async with client.stream("POST", "/events", json={}) as response:
                    async for chunk in response.aiter_raw():
                        read.append(chunk)
                        if b'"n": 1' in b"".join(read):
                            break  # the client has what it wanted
                if mode == "record":
                    with pytest.raises(httpx2.ReadError):
                        async with client.stream("POST", "/broken", json={}) as response:
                            await response.aread()
        cassette.finish()
        return read

    asyncio.run(run("record"))
    fixture = read_fixture(tmp_path / "support" / "refund-flow.jsonl")
    assert fixture is not None and len(fixture.calls) == 1  # the broken stream: nothing
    stored = fixture.calls[0].response.entry()["events"]
    assert stored == [{"data": {"n": 0}}, {"data": {"n": 1}}]  # what the client read
    with no_network():
        again = asyncio.run(run("replay"))
    assert again == [b'data: {"n":0}\n\n', b'data: {"n":1}\n\n']


def test_re_recording_against_a_deterministic_server_keeps_the_file_byte_for_byte(
    tmp_path: Path,
) -> None:
    def record_three_runs() -> list[bytes]:
        suite = suite_fixtures(tmp_path, "record", repeat=3)
        with FakeAnthropic(echo) as fake:  # a fresh server: the same message ids each time
            for run in (1, 2, 3):
                cassette = suite.cassette(0, run)
                asyncio.run(
                    two_turns(anthropic_client(fake.url, "record"), cassette, tag=f" #{run}")
                )
                cassette.finish()
        return [suite.path(0, run).read_bytes() for run in (1, 2, 3)]

    first = record_three_runs()
    names = sorted(p.name for p in (tmp_path / "support").iterdir())
    assert names == ["refund-flow.jsonl", "refund-flow.run-2.jsonl", "refund-flow.run-3.jsonl"]
    assert [json.loads(f.splitlines()[0])["run"] for f in first] == [1, 2, 3]
    assert record_three_runs() == first
    with no_network():
        suite = suite_fixtures(tmp_path, "replay", repeat=3)
        for run in (1, 2, 3):
            cassette = suite.cassette(0, run)
            answers = asyncio.run(
                two_turns(anthropic_client(STOPPED, "replay"), cassette, tag=f" #{run}")
            )
            assert answers[0] == f"where is my refund? #{run}" and cassette.finish().missed == 0


def test_a_server_that_never_answers_times_out_and_records_nothing(tmp_path: Path) -> None:
    async def run(url: str) -> Cassette:
        cassette = suite_fixtures(tmp_path, "record").cassette(0)
        async with httpx2.AsyncClient(
            transport=AsyncFixtureTransport(mode="record"), base_url=url, timeout=0.2
        ) as client:
            with use_cassette(cassette):
                cassette.set_turn(1)
                with pytest.raises(httpx2.ReadTimeout):
                    await client.post("/v1/messages", json={"q": 1})
        return cassette

    with FakeServer(lambda request: Slow(30)) as server:
        report = asyncio.run(run(server.url)).finish()
    assert (report.recorded, report.written) == (0, True)
    fixture = read_fixture(tmp_path / "support" / "refund-flow.jsonl")
    assert fixture is not None and fixture.calls == []


@pytest.mark.parametrize("library", ["httpx2 sync", "httpx async"])
def test_intercept_httpx_covers_the_other_default_transports(tmp_path: Path, library: str) -> None:
    def run(url: str, mode: Mode) -> Any:
        cassette = suite_fixtures(tmp_path, mode).cassette(0)

        async def agent() -> Any:
            with use_cassette(cassette):
                cassette.set_turn(1)
                if library == "httpx2 sync":
                    with httpx2.Client(base_url=url) as client:
                        return client.post("/lookup", json={"order": 1}).json()
                async with httpx.AsyncClient(base_url=url) as client:
                    return (await client.post("/lookup", json={"order": 1})).json()

        with intercept_httpx(mode):
            result = asyncio.run(agent())
        assert cassette.finish().missed == 0
        return result

    with JsonEcho() as server:
        live = run(server.url, "record")
    with no_network():
        assert run(STOPPED, "replay") == live == {"echo": {"order": 1}, "path": "/lookup"}
