"""The offline baseline agent: follow-ups from the session's history, real tool calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

from examples.convfinqa.baseline_agent import factory

from multiturn_eval import CaseContext, TurnReply

TABLE: dict[str, dict[str, Any]] = {
    "2009": {
        "net cash from operating activities": 206588.0,
        "net cash used in investing activities": -86011.0,
        "total debt": 300.0,
        "total assets": 1500.0,
    },
    "2008": {
        "net cash from operating activities": 181001.0,
        "net cash used in investing activities": -59294.0,
        "total debt": 250.0,
        "total assets": 1250.0,
    },
    "2007": {
        "net cash from operating activities": 161000.0,
        "net cash used in investing activities": -50000.0,
        "total debt": 200.0,
        "total assets": 1000.0,
    },
}
ALL_TOOLS = [
    {"function": f"examples.convfinqa.tools:{name}"}
    for name in ("lookup", "add", "subtract", "multiply", "divide", "greater")
]


def session(tools: list[dict[str, str]] | None = None) -> Any:
    agent = {"backend": "python", "tools": ALL_TOOLS if tools is None else tools}
    return factory(
        CaseContext(
            test_case_name="Single_JKHY/2009/page_28.pdf-3",
            agent=MappingProxyType(agent),
            context=MappingProxyType({"table": TABLE}),
        )
    )


def calls(reply: TurnReply) -> list[tuple[str, dict[str, Any], Any]]:
    return [(c.name, dict(c.args), c.result) for c in reply.tool_invocations]


def test_the_jkhy_dialogue_value_follow_up_difference_and_percentage_change() -> None:
    agent = session()
    first = agent.send("what is the net cash from operating activities in 2009?")
    assert calls(first) == [
        (
            "lookup",
            {"row": "net cash from operating activities", "column": "2009"},
            {"row": "net cash from operating activities", "column": "2009", "value": 206588.0},
        )
    ]
    assert first.response.endswith("206588")

    second = agent.send("what about in 2008?")  # same row, another column
    assert calls(second)[0][1] == {"row": "net cash from operating activities", "column": "2008"}
    assert second.response.endswith("181001")

    third = agent.send("what is the difference?")  # the last two values
    assert calls(third) == [("subtract", {"a": 206588.0, "b": 181001.0}, 25587.0)]
    assert third.response == "206588 - 181001 = 25587"

    fourth = agent.send("what percentage change does this represent?")  # reuses the change
    ((name, args, result),) = calls(fourth)
    assert (name, args) == ("divide", {"a": 25587.0, "b": 181001.0})
    assert result == 0.141363859868
    assert fourth.response == "25587 / 181001 = 0.14136"
    for reply in (first, second, third, fourth):
        assert all(c.error is None and c.duration_ms is not None for c in reply.tool_invocations)


def test_a_change_between_two_named_years_reads_both_and_subtracts_earlier_from_later() -> None:
    reply = session().send("what was the change in total debt from 2007 to 2009?")
    assert [c[0] for c in calls(reply)] == ["lookup", "lookup", "subtract"]
    assert calls(reply)[2][1] == {"a": 300.0, "b": 200.0}
    assert reply.response.endswith("= 100")


def test_sum_and_ratio_of_earlier_values() -> None:
    agent = session()
    agent.send("what was the total debt in 2009?")
    agent.send("and in 2008?")
    total = agent.send("what is the sum of these two years?")
    assert calls(total) == [("add", {"a": 300.0, "b": 250.0}, 550.0)]
    agent.send("what were total assets in 2009?")
    ratio = agent.send("what portion of total assets does the 2009 debt represent?")
    assert calls(ratio)[-1][0] == "divide"


def test_literal_arithmetic_on_the_previous_answer() -> None:
    agent = session()
    agent.send("what was the total debt in 2009?")
    reply = agent.send("what is that times 1000?")
    assert calls(reply) == [("multiply", {"a": 300.0, "b": 1000.0}, 300000.0)]


def test_without_a_needed_tool_the_agent_says_so_and_gives_no_number() -> None:
    agent = session(tools=[{"function": "examples.convfinqa.tools:lookup"}])
    agent.send("what is the net cash from operating activities in 2009?")
    agent.send("what about in 2008?")
    reply = agent.send("what is the difference?")
    assert reply.tool_invocations == []
    assert reply.response == "I would need the 'subtract' tool, which this suite does not offer."


def test_a_failed_lookup_is_recorded_with_its_error_and_the_reply_has_no_number() -> None:
    agent = factory(
        CaseContext(
            test_case_name="gaps",
            context=MappingProxyType({"table": {"2009": {"goodwill": 7.0}, "2008": {"debt": 2.0}}}),
        )
    )
    reply = agent.send("what was goodwill in 2008?")
    (call,) = reply.tool_invocations
    assert (call.name, call.args) == ("lookup", {"row": "goodwill", "column": "2008"})
    assert call.error == (
        "TableLookupError: the table has no value for row 'goodwill' in column '2008'"
    )
    assert reply.response == "I could not work this out: the lookup tool failed."


def test_an_unanswerable_first_question_has_no_number_in_the_reply() -> None:
    reply = session().send("what is the difference?")
    assert reply.tool_invocations == []
    assert not any(ch.isdigit() for ch in reply.response)


def test_sessions_do_not_share_history() -> None:
    first = session()
    first.send("what was the total debt in 2009?")
    first.send("and in 2008?")
    second = session()
    assert not any(ch.isdigit() for ch in second.send("what is the difference?").response)


def test_the_whole_dev_split_gets_the_same_verdicts_whatever_the_hash_seed(tmp_path: Path) -> None:
    """The agent ranks table rows by the words they share with the question, held in sets
    (whose order follows the per-process str hash): its scores must not depend on that order.
    Hash seed 1 made one turn of the dev split fail when weights were summed as floats."""
    repo = Path(__file__).resolve().parents[1]
    source = "examples/convfinqa/data/convfinqa_dev.json"
    cases, suite = tmp_path / "dev.jsonl", tmp_path / "suite.yaml"
    convert = [sys.executable, "examples/convfinqa/convert.py", source, "--jsonl", str(cases)]
    converted = subprocess.run(
        [*convert, "-o", str(suite)], cwd=repo, capture_output=True, text=True, check=False
    )
    assert converted.returncode == 0, converted.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTITURN_EVAL_")}
    verdicts = []
    for seed in ("0", "1"):
        out = tmp_path / f"out-{seed}"
        done = subprocess.run(
            [sys.executable, "-m", "multiturn_eval", "run", str(suite), "-q", "-o", str(out)],
            cwd=repo,
            env={**env, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1, done.stderr  # the baseline fails most dialogues
        results = json.loads((out / "report.json").read_text(encoding="utf-8"))["results"]
        verdicts.append([[t["passed"] for t in case["turns"]] for case in results])
    assert len(verdicts[0]) == 421 and verdicts[0] == verdicts[1]
