"""The runner's CPU per request against the bare SDK's own, on one workload (issue 23 item 4).

    python -m bench.overhead.bare                          # openai and anthropic, 3 pairs each
    python -m bench.overhead.bare --backends openai --repeats 5

For each backend, alternating: one whole CLI run of :mod:`bench.overhead.run`'s workload
(100 ConvFinQA dialogues, tools off, ``-p 8``, zero latency, the fake server in its own
process), then the **bare SDK** on the same dialogues: a fresh interpreter holding one
``openai.AsyncOpenAI`` (``chat.completions.create``) or ``anthropic.AsyncAnthropic``
(``messages.create``) client, its retries off, sending every dialogue's turns in order,
8 dialogues at a time, the history growing as the runner's does (system prompt, each
question, each answer), and doing nothing else: no checks, no grading, no reports. Both
are measured the same way: the server reads the client process's CPU (``/proc/PID/stat``)
as each request arrives; CPU per request is the steady state, from the request at 10% of
the run to the last one. The difference is what the runner adds per request (its
scheduler, the chat core, the wire check, grading, the console) on top of the SDK's own
cost; the target is at most 0.5 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.backends import child_json  # noqa: E402
from bench.overhead.run import PARALLEL, PROTOCOL, child_env, control, one_run, server  # noqa: E402
from bench.overhead.workload import INSTRUCTIONS, workload_file  # noqa: E402

BARE = """
import asyncio, json, os, sys, urllib.request
dialogues = json.load(open({workload!r}))
url = {url!r}
urllib.request.urlopen(urllib.request.Request(
    url + f"/_bench/watch?pid={{os.getpid()}}", method="POST", data=b""), timeout=10).read()
if {backend!r} == "openai":
    import openai
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=url + "/v1", max_retries=0)
    async def ask(system, history):
        reply = await client.chat.completions.create(
            model="gpt-5-mini", messages=[{{"role": "system", "content": system}}, *history])
        return reply.choices[0].message.content
else:
    import anthropic
    client = anthropic.AsyncAnthropic(api_key="sk-ant-bench", base_url=url, max_retries=0)
    async def ask(system, history):
        reply = await client.messages.create(
            model="claude-haiku-4-5", max_tokens=1024, messages=history,
            system=[{{"type": "text", "text": system}}])
        return "".join(b.text for b in reply.content if b.type == "text")

async def dialogue(d):
    system = "Answer with the number only.\\n\\n" + {instructions!r} + d["id"]
    history = []
    for question in d["questions"]:
        history.append({{"role": "user", "content": question}})
        history.append({{"role": "assistant", "content": await ask(system, history)}})

async def main():
    queue = list(reversed(dialogues))
    async def worker():
        while queue:
            await dialogue(queue.pop())
    await asyncio.gather(*(worker() for _ in range({parallel})))
    await client.close()

asyncio.run(main())
print(json.dumps({{"ok": True}}))
"""


def steady(stats: dict[str, Any]) -> float:
    """CPU ms per request from the request at 10% of the run to the last (as one_run)."""
    samples = [c for c in stats.get("cpu") or [] if c is not None]
    start = len(samples) // 10
    if len(samples) <= start + 1:
        return math.nan
    return (samples[-1] - samples[start]) / (len(samples) - 1 - start) * 1000


def bare_run(backend: str, workload: Path) -> dict[str, float]:
    """The bare SDK on the workload: its CPU per request and the requests it made."""
    with server(PROTOCOL[backend], workload, 0.0) as url, tempfile.TemporaryDirectory() as tmp:
        code = BARE.format(
            workload=str(workload),
            url=url,
            backend=backend,
            instructions=INSTRUCTIONS,
            parallel=PARALLEL,
        )
        child_json(code, child_env(), Path(tmp), f"bare {backend}: ")
        stats = control(url, "/_bench/stats")
        if stats["problem_count"]:
            raise SystemExit(f"bare {backend}: history problems: {stats['problems']}")
        return {"cpu_per_request_ms": steady(stats), "requests": stats["requests"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--backends", nargs="*", default=["openai", "anthropic"], choices=["openai", "anthropic"]
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with workload_file() as (dialogues, workload):
        print(f"{len(dialogues)} ConvFinQA dialogues, tools off, -p {PARALLEL}, 0 ms latency\n")
        print(
            "| backend | pair | runner CPU/request | bare SDK CPU/request | runner - SDK | load |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for backend in args.backends:
            runner, bare = [], []
            for i in range(args.repeats):
                r = one_run(backend, workload, 0.0, False, len(dialogues))["cpu_per_request_ms"]
                b = bare_run(backend, workload)["cpu_per_request_ms"]
                runner.append(r)
                bare.append(b)
                print(
                    f"| {backend} | {i + 1} | {r:.2f} ms | {b:.2f} ms | {r - b:+.2f} ms | "
                    f"{os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
            r, b = statistics.median(runner), statistics.median(bare)
            print(f"| {backend} | median | {r:.2f} ms | {b:.2f} ms | {r - b:+.2f} ms | |")
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
