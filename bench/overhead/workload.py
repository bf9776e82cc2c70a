"""The benchmark's workload: ConvFinQA dialogues with all-numeric answers, and the suites.

100 dialogues are drawn with ``random.Random(SEED).sample`` from the dev split
(``examples/convfinqa/data/convfinqa_dev.json``) after keeping those whose every
``executed_answers`` entry is a number (417 of 421). A turn's ground truth is
its executed answer; with tools, it expects one call of ``calculate`` with the
turn's ``turn_program`` (``bench.overhead.tools:calculate`` runs it).

One suite per backend, identical but for the ``agent:`` block. Each test case
carries its dialogue id in its ``instructions`` (the fake servers find the
dialogue by it) and, in ``context``, the answers and programs (the ``python``
agent answers from them; the other backends never read them).
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "examples" / "convfinqa" / "data" / "convfinqa_dev.json"
SEED = 14
DIALOGUES = 100
TOOL = "calculate"


@dataclass(frozen=True)
class Dialogue:
    id: str
    questions: tuple[str, ...]
    answers: tuple[float, ...]
    programs: tuple[str, ...]


def answer_text(value: float) -> str:
    """What the fake model says for an answer (the number, no binary noise)."""
    number = float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.10g}"


def numeric(record: Mapping[str, Any]) -> bool:
    return all(
        isinstance(a, int | float) and not isinstance(a, bool)
        for a in record["dialogue"]["executed_answers"]
    )


def load(n: int = DIALOGUES, seed: int = SEED, path: Path = DEV) -> list[Dialogue]:
    records = json.loads(path.read_text(encoding="utf-8"))["dev"]
    eligible = [r for r in records if numeric(r)]
    chosen = random.Random(seed).sample(eligible, n)
    return [
        Dialogue(
            id=r["id"],
            questions=tuple(r["dialogue"]["conv_questions"]),
            answers=tuple(float(a) for a in r["dialogue"]["executed_answers"]),
            programs=tuple(r["dialogue"]["turn_program"]),
        )
        for r in chosen
    ]


def long_dialogues(turns: int = 6, path: Path = DEV) -> list[Dialogue]:
    """Every all-numeric dialogue with at least ``turns`` turns, cut to that many (source order)."""
    records = json.loads(path.read_text(encoding="utf-8"))["dev"]
    return [
        Dialogue(
            id=r["id"],
            questions=tuple(r["dialogue"]["conv_questions"][:turns]),
            answers=tuple(float(a) for a in r["dialogue"]["executed_answers"][:turns]),
            programs=tuple(r["dialogue"]["turn_program"][:turns]),
        )
        for r in records
        if numeric(r) and len(r["dialogue"]["conv_questions"]) >= turns
    ]


def dump(dialogues: Sequence[Dialogue], path: Path) -> None:
    path.write_text(
        json.dumps(
            [
                {"id": d.id, "questions": d.questions, "answers": d.answers, "programs": d.programs}
                for d in dialogues
            ]
        ),
        encoding="utf-8",
    )


@contextmanager
def workload_file() -> Iterator[tuple[list[Dialogue], Path]]:
    """The benchmark's dialogues, and a temporary file holding them (for the fake servers)."""
    dialogues = load()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        dump(dialogues, path)
        yield dialogues, path


def read(path: Path) -> dict[str, Dialogue]:
    return {
        d["id"]: Dialogue(d["id"], tuple(d["questions"]), tuple(d["answers"]), tuple(d["programs"]))
        for d in json.loads(path.read_text(encoding="utf-8"))
    }


INSTRUCTIONS = "Dialogue "


def dialogue_id(system: str) -> str | None:
    """The dialogue a conversation is about, from its system prompt."""
    for line in system.splitlines():
        if line.startswith(INSTRUCTIONS):
            return line[len(INSTRUCTIONS) :].strip()
    return None


def agent_block(backend: str, url: str, tools: bool, latency: float, stats: str) -> str:
    tool_lines = f"  tools:\n    - function: bench.overhead.tools:{TOOL}\n" if tools else ""
    common = "  instructions: Answer with the number only.\n" + tool_lines
    if backend == "python":
        return (
            "agent:\n  backend: python\n  factory: bench.overhead.agent:factory\n"
            f"  options: {{latency: {latency}, stats: '{stats}'}}\n" + common
        )
    if backend == "openai":
        return (
            f"agent:\n  backend: openai\n  model: gpt-5-mini\n  base_url: '{url}/v1'\n"
            "  api_key: sk-bench\n" + common
        )
    if backend == "semantic-kernel":
        return (
            "agent:\n  backend: semantic-kernel\n  service: openai\n  model: gpt-5-mini\n"
            f"  base_url: '{url}/v1'\n  api_key: sk-bench\n" + common
        )
    if backend == "anthropic":
        return (
            f"agent:\n  backend: anthropic\n  model: claude-haiku-4-5\n  base_url: '{url}'\n"
            "  api_key: sk-ant-bench\n" + common
        )
    raise ValueError(f"unknown backend {backend!r}")


def write_suite(
    path: Path,
    dialogues: Sequence[Dialogue],
    backend: str,
    url: str,
    *,
    tools: bool,
    latency: float,
    stats: str = "",
) -> None:
    lines = [agent_block(backend, url, tools, latency, stats).rstrip("\n")]
    lines += [
        "evaluations:",
        "  - {type: standard, metric: numeric, absolute_tolerance: 0.0005}",
        "test_cases:",
    ]
    for d in dialogues:
        context = {"answers": list(d.answers), "programs": list(d.programs)}
        lines += [
            f"  - name: {json.dumps(d.id)}",
            f"    instructions: {json.dumps(INSTRUCTIONS + d.id)}",
            f"    context: {json.dumps(context)}",
            "    turns:",
        ]
        for question, answer, program in zip(d.questions, d.answers, d.programs, strict=True):
            lines += [
                f"      - input: {json.dumps(question)}",
                f"        ground_truth: {json.dumps(answer_text(answer))}",
            ]
            if tools:
                lines += [
                    "        expected_tools:",
                    f"          - {{name: {TOOL}, args: {{program: {json.dumps(program)}}}}}",
                ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
