"""What replaying from fixtures costs per model request, and how large fixtures are (issue 20).

    python bench/fixtures.py                 # tools on and off, median of 3
    python bench/fixtures.py --repeats 1 --tools on

Workload: the 100 ConvFinQA dialogues of ``bench/overhead`` (all-numeric
answers, fixed seed), each a conversation through the real ``anthropic`` SDK
(``AsyncAnthropic``) in one process: with tools every turn is a ``tool_use``
reply (``calculate(program)``) then the answer, two requests; without, one.
The model is an ``httpx2.MockTransport`` answering in the Messages API's
shape, so nothing but the client side is measured:

* **SDK alone**: the SDK against the mock, no fixtures (CPU per request:
  building the request, HTTP machinery, parsing the reply into its models);
* **record**: the same through ``AsyncFixtureTransport`` in record mode, then
  the fixtures written (one file per dialogue);
* **replay**: the fixtures read (``SuiteFixtures.load``, timed apart), then the
  same conversations through ``AsyncFixtureTransport`` in replay mode, the
  mock gone: what replay adds per request is replay minus SDK alone;
* **bytes per turn**: the fixtures' size over the turns they hold.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import httpx2  # noqa: E402

from bench.overhead.workload import Dialogue, answer_text, load  # noqa: E402
from multiturn_eval.fixtures import AsyncFixtureTransport, SuiteFixtures, use_cassette  # noqa: E402

SYSTEM = "Dialogue {id}\nAnswer with the number only."
TOOL = {
    "name": "calculate",
    "description": "Evaluate a ConvFinQA program such as subtract(5, 3), divide(#0, 3).",
    "input_schema": {
        "type": "object",
        "properties": {"program": {"type": "string", "description": "The program to run."}},
        "required": ["program"],
    },
}


def reply_for(
    body: dict[str, Any], dialogues: dict[str, Dialogue], counter: list[int]
) -> dict[str, Any]:
    dialogue = dialogues[body["system"].splitlines()[0].removeprefix("Dialogue ")]
    turn = (
        sum(1 for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str))
        - 1
    )
    last = body["messages"][-1]["content"]
    counter[0] += 1
    n = counter[0]
    usage = {"input_tokens": 900 + 40 * turn, "output_tokens": 12}
    if body.get("tools") and isinstance(last, str):
        content: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"toolu_{n:06d}",
                "name": "calculate",
                "input": {"program": dialogue.programs[turn]},
            }
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": answer_text(dialogue.answers[turn])}]
        stop = "end_turn"
    return {
        "id": f"msg_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def mock(dialogues: dict[str, Dialogue]) -> httpx2.MockTransport:
    counter = [0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=reply_for(json.loads(request.content), dialogues, counter))

    return httpx2.MockTransport(handler)


async def converse(
    client: anthropic.AsyncAnthropic, dialogue: Dialogue, tools: bool, cassette: Any
) -> int:
    """One dialogue, as the anthropic backend's tool loop sends it; the number of requests."""
    history: list[dict[str, Any]] = []
    requests = 0
    with use_cassette(cassette):
        for turn, question in enumerate(dialogue.questions, start=1):
            if cassette is not None:
                cassette.set_turn(turn)
            history.append({"role": "user", "content": question})
            while True:
                kwargs: dict[str, Any] = {"tools": [TOOL]} if tools else {}
                message = await client.messages.create(
                    model="claude-haiku-4-5",
                    max_tokens=1024,
                    system=SYSTEM.format(id=dialogue.id),
                    messages=history,
                    **kwargs,  # type: ignore[arg-type]
                )
                requests += 1
                blocks = [b.model_dump(exclude_none=True) for b in message.content]
                history.append({"role": "assistant", "content": blocks})
                uses = [b for b in message.content if b.type == "tool_use"]
                if not uses:
                    break
                history.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": u.id, "content": "1.0"}
                            for u in uses
                        ],
                    }
                )
    return requests


def client_for(transport: httpx2.AsyncBaseTransport) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="sk-ant-bench",
        base_url="http://model.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def measure(dialogues: list[Dialogue], tools: bool, root: Path) -> dict[str, float]:
    by_id = {d.id: d for d in dialogues}
    names = [d.id for d in dialogues]

    def suite(mode: str) -> SuiteFixtures:
        return SuiteFixtures(
            mode=mode,
            root=root,
            suite_file=Path("convfinqa.yaml"),
            suite_shown="convfinqa.yaml",  # type: ignore[arg-type]
            case_names=names,
            live=True,
            source="recorded against bench/fixtures.py's mock",
        )

    async def run(
        make_transport: Callable[[], httpx2.AsyncBaseTransport], fixtures: SuiteFixtures | None
    ) -> int:
        client = client_for(make_transport())
        total = 0
        for i, dialogue in enumerate(dialogues):
            cassette = fixtures.cassette(i) if fixtures is not None else None
            total += await converse(client, dialogue, tools, cassette)
            if cassette is not None:
                report = cassette.finish()
                assert report.missed == 0 and report.error is None, report
        return total

    sdk_cpu, requests = timed(lambda: asyncio.run(run(lambda: mock(by_id), None)))
    recording = suite("record")
    record_cpu, _ = timed(
        lambda: asyncio.run(
            run(lambda: AsyncFixtureTransport(mock(by_id), mode="record"), recording)
        )
    )
    replaying = suite("replay")
    load_cpu, _ = timed(lambda: replaying.load(range(len(dialogues))))
    replay_cpu, replayed = timed(
        lambda: asyncio.run(run(lambda: AsyncFixtureTransport(mode="replay"), replaying))
    )
    assert replayed == requests
    files = sorted(recording.directory.glob("*.jsonl"))
    size = sum(p.stat().st_size for p in files)
    turns = sum(len(d.questions) for d in dialogues)
    return {
        "requests": requests,
        "turns": turns,
        "sdk_ms": 1000 * sdk_cpu / requests,
        "record_ms": 1000 * record_cpu / requests,
        "replay_ms": 1000 * replay_cpu / requests,
        "added_ms": 1000 * (replay_cpu - sdk_cpu) / requests,
        "load_ms_per_file": 1000 * load_cpu / len(files),
        "bytes_per_turn": size / turns,
        "bytes_total": size,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", choices=("on", "off", "both"), default="both")
    args = parser.parse_args(argv)
    dialogues = load()
    for tools in {"on": [True], "off": [False], "both": [True, False]}[args.tools]:
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(measure(dialogues, tools, Path(tmp)))
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"tools {'on ' if tools else 'off'}: {median['requests']:.0f} requests, {median['turns']:.0f} turns | "
            f"CPU/request: SDK alone {median['sdk_ms']:.3f} ms, record {median['record_ms']:.3f} ms, "
            f"replay {median['replay_ms']:.3f} ms (fixtures add {median['added_ms']:+.3f} ms) | "
            f"load {median['load_ms_per_file']:.3f} ms/file | {median['bytes_per_turn']:.0f} bytes/turn "
            f"({median['bytes_total'] / 1024:.0f} KiB)"
        )


if __name__ == "__main__":
    main()
