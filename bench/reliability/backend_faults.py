"""Backend fault families, run through the CLI against the fake servers: does anything escape?

    python bench/reliability/backend_faults.py            # every family x 20 trials, -p 20
    python bench/reliability/backend_faults.py --quick    # 2 trials each (CI: tests/test_backend_faults.py)
    python bench/reliability/backend_faults.py --trials 5 --backends http anthropic

For each backend (``anthropic``, ``semantic-kernel`` with ``service: openai``,
``http``) one suite holds ``trials`` test cases per fault family, each of two
turns: turn 1 meets the fault, turn 2 must get the fake's ordinary reply
("fine"). The fake server (in this process, on 127.0.0.1) answers by the
turn's input, so the cases can run in parallel (all at once, up to 64). The suite
runs once, through ``python -m multiturn_eval run`` in a fresh process, with
``--turn-timeout`` (default 1.5 s).

Families: ``malformed`` (200s that are not the API's reply shape, cycling
through a catalogue: HTML, wrong shape, null content/choices/message, unknown
blocks, truncated, non-UTF-8, empty, a JSON array, a 50 MB body, and a body
just under the 10 MB cap holding 200,000-600,000 tiny blocks, choices or tool
invocations, which the SDKs took 10-120 s of event-loop CPU to parse),
``storm`` (529 with ``retry-after: 1`` on every attempt), ``slow headers``
(no response for 60 s), ``slow drip`` (the body 4 bytes per 0.2 s), ``huge
slow body`` (50 MB, chunked, 64 KiB per 0.05 s).

The table counts, per family: trials; tracebacks (a ``Traceback`` in the
run's output, counted once per family in that run); hangs (a turn longer
than ``turn_timeout + 5 s``, or the run killed after its own generous
limit); wrong exit codes (the run must exit 1: every case fails turn 1);
lost results (a case missing from report.json, a turn 1 without an error,
or a turn 2 without the reply "fine"); and for the time families, how long
past ``turn_timeout`` the slowest turn 1 ended (negative: the retry policy
gave up before the deadline). Every count must be 0. Numbers go in
``bench/reliability/README.md``; nothing here is timed in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes import anthropic_server as fa  # noqa: E402
from tests.fakes import http_agent as fh  # noqa: E402
from tests.fakes import openai_server as fo  # noqa: E402
from tests.fakes._server import Drip, FakeServer, Huge, Request, Response, Slow  # noqa: E402

from bench.reliability.tally import Tally  # noqa: E402

BACKENDS = ("anthropic", "semantic-kernel", "http")
FAMILIES = ("malformed", "storm", "slow headers", "slow drip", "huge slow body")
TIMED = ("storm", "slow headers", "slow drip", "huge slow body")

HTML = "<html>\x1b[31m<title>502 Bad Gateway</title>\n" + "x" * 3000 + "</html>"
COMMON_MALFORMED: list[Any] = [
    Response(200, HTML, content_type="text/html"),
    Response(200, '{"id": "cut", "content": ['),
    Response(200, b'{"x": "\xff\xfe"}'),
    Response(200, b""),
    Response(200, "[1, 2]"),
    Response(200, {"hello": "world"}),
    Response(200, "[" * 50_000 + "]" * 50_000),
    Huge(),
    Huge(chunked=True),
]
MALFORMED: dict[str, list[Any]] = {
    "anthropic": [
        *COMMON_MALFORMED,
        Response(200, {"type": "message", "content": None, "usage": {}}),
        Response(
            200,
            {"type": "message", "content": [{"type": "hologram"}], "usage": {"input_tokens": 1}},
        ),
        Response(200, {"type": "message", "content": [{"type": "text", "text": "x"}]}),
        Response(200, {"type": "message", "content": [{"type": "text", "text": ""}] * 300_000}),
    ],
    "semantic-kernel": [
        *COMMON_MALFORMED,
        Response(200, {"choices": []}),
        Response(200, {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}),
        Response(200, {"choices": [{"message": {"content": 5}}] * 3}),
        Response(200, {"choices": [{"message": {"role": "assistant", "content": ""}}] * 200_000}),
    ],
    "http": [
        *COMMON_MALFORMED,
        Response(200, {"response": 42}),
        Response(200, {"response": "x", "tool_invocations": [1, 2]}),
        Response(200, {"response": "x", "token_usage": "lots", "cost_usd": "1"}),
        Response(200, {"response": "x", "tool_invocations": [{"name": "t"}] * 600_000}),
    ],
}


def _storm(kind: str) -> Any:
    if kind == "anthropic":
        return fa.ApiError(529, "overloaded_error", "Overloaded", {"retry-after": "1"})
    if kind == "semantic-kernel":
        return fo.ErrorReply(529, "Overloaded", headers={"retry-after": "1"})
    return Response(529, "busy", headers={"retry-after": "1"}, content_type="text/plain")


def fault_reply(kind: str, family: str, index: int) -> Any:
    if family == "malformed":
        catalogue = MALFORMED[kind]
        return catalogue[index % len(catalogue)]
    if family == "storm":
        return _storm(kind)
    if family == "slow headers":
        return Slow(60)
    if family == "slow drip":
        return Drip(chunk=4, interval=0.2)
    return Huge(interval=0.05, chunked=True)


def fine(kind: str) -> Any:
    return {"anthropic": fa.text("fine"), "semantic-kernel": fo.text("fine")}.get(
        kind, fh.AgentReply("fine")
    )


def last_input(kind: str, request: Request) -> str:
    body = request.body if isinstance(request.body, dict) else {}
    if kind == "http":
        return str(body.get("input", ""))
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def responder(kind: str) -> Callable[[Request], Any]:
    def respond(request: Request) -> Any:
        said = last_input(kind, request)
        if said.startswith("fault|"):
            _, family, index = said.split("|")
            return fault_reply(kind, family, int(index))
        return fine(kind)

    return respond


def server_for(kind: str) -> FakeServer:
    if kind == "anthropic":
        return fa.FakeAnthropic(responder(kind))
    if kind == "semantic-kernel":
        return fo.FakeOpenAI(responder(kind))
    return fh.FakeHttpAgent(responder(kind))


def agent_block(kind: str, server: Any) -> str:
    if kind == "anthropic":
        return f"  backend: anthropic\n  model: claude-haiku-4-5\n  base_url: {server.url}\n"
    if kind == "semantic-kernel":
        return (
            "  backend: semantic-kernel\n  service: openai\n  model: gpt-4o-mini\n"
            f"  base_url: {server.base_url}\n"
        )
    return f"  backend: http\n  url: {server.endpoint}\n"


@dataclass
class Row(Tally):
    backend: str
    family: str
    past: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


def run_backend(
    kind: str, families: tuple[str, ...], trials: int, turn_timeout: float
) -> list[Row]:
    rows = {f: Row(kind, f) for f in families}
    with server_for(kind) as server, tempfile.TemporaryDirectory() as tmp:
        cases = []
        for family in families:
            for i in range(trials):
                cases.append(
                    f"  - name: {family.replace(' ', '-')}-{i}\n    turns:\n"
                    f'      - input: "fault|{family}|{i}"\n      - input: next\n'
                )
        suite = Path(tmp) / "faults.yaml"
        suite.write_text(
            "agent:\n"
            + agent_block(kind, server)
            + "  retry: {max_attempts: 10}\ntest_cases:\n"
            + "".join(cases)
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(ROOT)]),
            "ANTHROPIC_API_KEY": fa.API_KEY,
            "OPENAI_API_KEY": fo.API_KEY,
        }
        command = [sys.executable, "-m", "multiturn_eval", "run", str(suite)]
        parallel = min(64, max(1, trials * len(families)))  # every case at once
        command += ["--turn-timeout", str(turn_timeout), "-p", str(parallel)]
        command += ["-o", str(Path(tmp) / "out"), "--format", "json"]
        limit = 60 + 4 * turn_timeout * len(families)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=limit, env=env, cwd=tmp
            )
        except subprocess.TimeoutExpired:
            for row in rows.values():
                row.tried, row.hangs = trials, trials
            return list(rows.values())
        output = done.stdout + done.stderr
        try:
            report = json.loads((Path(tmp) / "out" / "report.json").read_text())
            results = {r["name"]: r for r in report["results"]}
        except (OSError, ValueError, KeyError):
            results = {}
        for family, row in rows.items():
            row.tried = trials
            row.tracebacks = int("Traceback" in output)
            row.wrong_exit = int(done.returncode != 1)
            for i in range(trials):
                result = results.get(f"{family.replace(' ', '-')}-{i}")
                turns = (result or {}).get("turns") or []
                if len(turns) != 2 or not turns[0]["errors"] or turns[1].get("response") != "fine":
                    row.lost += 1
                    continue
                seconds = turns[0]["duration_ms"] / 1000
                if max(seconds, turns[1]["duration_ms"] / 1000) > turn_timeout + 5:
                    row.hangs += 1
                if family in TIMED:
                    row.past.append(seconds - turn_timeout)
                if len(row.examples) < 3 and turns[0]["errors"][0] not in row.examples:
                    row.examples.append(turns[0]["errors"][0])
    return list(rows.values())


def table(rows: list[Row], turn_timeout: float) -> str:
    lines = [
        f"turn_timeout = {turn_timeout:g} s",
        "",
        "| backend | family | tried | tracebacks | hangs | wrong exit codes | lost results "
        "| ended past turn_timeout (max) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        past = f"{max(row.past):+.3f} s" if row.past else "-"
        lines.append(
            f"| {row.backend} | {row.family} | {row.tried} | {row.tracebacks} | {row.hangs} "
            f"| {row.wrong_exit} | {row.lost} | {past} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 trials per family (for CI)")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--turn-timeout", type=float, default=1.5)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("-v", "--verbose", action="store_true", help="show example turn errors")
    args = parser.parse_args(argv)
    trials = args.trials or (2 if args.quick else 20)
    started = time.monotonic()
    rows: list[Row] = []
    for kind in args.backends:
        rows += run_backend(kind, tuple(args.families), trials, args.turn_timeout)
    print(table(rows, args.turn_timeout))
    print(f"\n{time.monotonic() - started:.0f} s in all")
    if args.verbose:
        for row in rows:
            for example in row.examples:
                print(f"  {row.backend} / {row.family}: {example}")
    bad = sum(r.faults() for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
