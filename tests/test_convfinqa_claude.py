"""``suite-claude.yaml`` end to end: the real anthropic client against a fake Messages API.

A scripted "Claude" answers one dialogue of the committed suite the way a good
analyst would (look up, subtract, reuse the change, divide); the run proves
that the suite's tools reach the model without their CaseContext parameter,
that ``lookup`` reads the test case's table through it, that the document is
in the system prompt, and that every check -- answer, expected tools, the
program grader with a step reused from an earlier turn -- passes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_probe import run_command
from tests.fakes._server import Request
from tests.fakes.anthropic_server import (
    API_KEY,
    FakeAnthropic,
    Message,
    last_user_blocks,
    text,
    tool_uses,
)

REPO = Path(__file__).resolve().parents[1]
CASE = "Single_MRO/2007/page_134.pdf-1"
ROW = "weighted average exercise price per share"

#: question -> the tool call a careful analyst makes for it
PLAN: dict[str, tuple[str, dict[str, Any]]] = {
    "what was the weighted average exercise price per share in 2007?": (
        "lookup",
        {"row": ROW, "column": "2007"},
    ),
    "and what was it in 2005?": ("lookup", {"row": ROW, "column": "2005"}),
    "what was, then, the change over the years?": ("subtract", {"a": 60.94, "b": 25.14}),
    "what was the weighted average exercise price per share in 2005?": (
        "lookup",
        {"row": "Weighted average exercise price", "column": "2005"},
    ),
    "and how much does that change represent in relation to this 2005 weighted average "
    "exercise price?": ("divide", {"a": 35.8, "b": 25.14}),
}


def analyst(request: Request) -> Message:
    blocks = last_user_blocks(request)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        content = results[0]["content"]
        body = content if isinstance(content, str) else content[0]["text"]
        value = json.loads(body)
        number = value["value"] if isinstance(value, dict) else value
        return text(f"{number}")
    question = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
    name, args = PLAN[question]
    return tool_uses((name, args))


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(analyst) as server:
        yield server


def test_claude_suite_runs_one_dialogue_through_the_anthropic_backend(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    report_dir = tmp_path / "report"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake.url,
    }
    command = [
        sys.executable,
        "-m",
        "multiturn_eval",
        "run",
        "examples/convfinqa/suite-claude.yaml",
    ]
    done = run_command([*command, "-k", CASE, "-o", str(report_dir), "--format", "json"], REPO, env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    (case,) = report["results"]
    assert case["name"] == CASE and case["backend"] == "anthropic"
    assert [t["passed"] for t in case["turns"]] == [True] * 5
    # lookup read the case's table through the CaseContext the runner injected
    first_call = case["turns"][0]["tool_invocations"][0]
    assert first_call["name"] == "lookup"
    assert first_call["args"] == {"row": ROW, "column": "2007"}
    assert first_call["result"]["value"] == 60.94
    # the last turn divides only: the subtraction is reused from turn 3
    program = next(
        m
        for m in case["turns"][4]["metric_results"]
        if m["metric_name"] == "turn_program_equivalence"
    )
    assert program["reason"] == "all 2 program steps reproduced (reused #0 from turn 3 call #1)"

    first = fake.messages_requests()[0].body
    assert first["model"] == "claude-sonnet-4-5"
    lookup_tool = next(t for t in first["tools"] if t["name"] == "lookup")
    assert set(lookup_tool["input_schema"]["properties"]) == {"row", "column"}
    assert {t["name"] for t in first["tools"]} == {
        "lookup", "add", "subtract", "multiply", "divide", "exp", "greater",
        "table_sum", "table_average", "table_max", "table_min",
    }  # fmt: skip
    system = " ".join(block["text"] for block in first["system"])
    assert "Reply with the final answer only" in system
    assert f"| {ROW} | 60.94 | 37.84 | 25.14 |" in system
