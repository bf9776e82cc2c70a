"""The figures and outputs the READMEs quote are the ones the code gives today.

Each test reads the figure from the documentation itself (so editing either side
without the other fails here; :mod:`tests.docs_pages` finds it in the README or on its
page of the site): the quick start's console excerpt and counts, the ConvFinQA pass
rates of the committed subset, the console example of the reports (its suite rebuilt
here), the ``summary.md`` excerpt against the golden file, the response checks'
failure messages, and the support example's totals. Timings are
left out: they are measurements of a machine (``bench/``), not outputs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiturn_eval.grading.response_checks import evaluate_response_check, schema_validator
from multiturn_eval.reports import _view as v
from multiturn_eval.results import TurnResult
from multiturn_eval.suite import StandardEvaluation
from tests.conftest import Project
from tests.docs_pages import page, section

ROOT = Path(__file__).resolve().parents[1]
TIME = re.compile(r"\b\d+\.\d\ds\b")


def untimed(text: str) -> str:
    return TIME.sub("0.00s", text)


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "multiturn_eval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def convfinqa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("convfinqa")
    done = run_cli("run", "examples/convfinqa/suite.yaml", "-o", str(out), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    yield done.stdout, json.loads((out / "report.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- quick start


def test_the_quick_start_console_excerpt_is_what_the_demo_prints(
    convfinqa: tuple[str, dict[str, Any]],
) -> None:
    out, report = convfinqa
    quick = section("quickstart")
    excerpt = quick.split("2. **Read the console.**")[1].split("```")[1].strip("\n").splitlines()
    lines = [line.strip() for line in excerpt if line.strip() and line.strip() != "..."]
    printed = untimed(out).splitlines()
    for line in lines[:-2]:  # the case lines, as printed
        assert untimed(line) in printed, line
    summary = report["summary"]
    counts = (
        f"{summary['passed']} passed, {summary['failed']} failed "
        f"(turns: {summary['turns']['passed']}/{summary['turns']['total']} passed)"
    )
    assert lines[-2].startswith(counts + " in "), (lines[-2], counts)
    assert lines[-1] == "reports: " + ", ".join(
        f"multiturn-eval-report/{name}"
        for name in ("report.json", "junit.xml", "summary.md", "report.html")
    )
    turns = summary["turns"]["total"]
    assert f"{summary['total']} real [ConvFinQA]" in quick
    assert f"({turns} turns of numerical questions" in quick
    rate = summary["turns"]["passed"] / turns
    assert 0.4 < rate < 0.6 and "gets about\n    half of the turns right" in quick
    demo = (ROOT / "scripts" / "demo").read_text(encoding="utf-8")
    assert "gets about half of the turns right" in demo  # the script's own comment agrees


def test_the_convfinqa_figures_of_the_committed_subset(
    convfinqa: tuple[str, dict[str, Any]],
) -> None:
    _, report = convfinqa
    turns = [t for case in report["results"] for t in case["turns"]]

    def passed(metric: str) -> int:
        return sum(
            1
            for t in turns
            for m in t["metric_results"]
            if m["metric_name"] == metric and m["passed"]
        )

    def share(n: int, total: int) -> str:
        return f"{n}/{total} ({100 * n / total:.1f}%)"

    answer, grader = passed("answer"), passed("turn_program_equivalence")
    every = sum(1 for t in turns if t["passed"])
    cases = report["results"]
    dialogues_answer = sum(
        1
        for case in cases
        if all(
            m["passed"]
            for t in case["turns"]
            for m in t["metric_results"]
            if m["metric_name"] == "answer"
        )
    )
    dialogues_all = sum(1 for case in cases if case["passed"])
    example = (ROOT / "examples" / "convfinqa" / "README.md").read_text(encoding="utf-8")
    rows = {
        "turns: answer correct": share(answer, len(turns)),
        "turns: program grader passed": share(grader, len(turns)),
        "turns: every check passed (answer, tools, grader)": share(every, len(turns)),
        "dialogues: every answer correct": share(dialogues_answer, len(cases)),
        "dialogues: every check passed": share(dialogues_all, len(cases)),
    }
    for label, figure in rows.items():
        assert f"| {label} | {figure} |" in example, (label, figure)
    assert f"answers {100 * answer / len(turns):.1f}% of the example's {len(turns)} turns" in (
        section("convfinqa").replace("\n", " ")
    )


def test_the_convfinqa_dev_split_from_json_lines_is_what_the_docs_show(tmp_path: Path) -> None:
    """The page's commands, run as written (from a directory holding ``examples/``):
    what they print is the page's output block, timings aside."""
    text = section("convfinqa").split("## The whole dev split from JSON Lines")[1]
    commands = text.split("```bash\n")[1].split("```")[0]
    shown = text.split("```text\n")[1].split("```")[0]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = str(Path(sys.executable).parent)  # python and multiturn-eval of this environment
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env = {k: v for k, v in env.items() if not k.startswith("MULTITURN_EVAL_")}
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", commands.replace("python ", f"{sys.executable} ", 1)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    # run exits 1 (the baseline fails most dialogues); pipefail hands that to bash
    assert done.returncode == 1, done.stdout
    assert untimed(done.stdout).splitlines() == untimed(shown).splitlines()
    report = json.loads((tmp_path / "dev" / "report" / "report.json").read_text(encoding="utf-8"))
    assert len(report["results"]) == 421
    first = report["results"][0]
    assert (first["file"], first["line"]) == ("dev/convfinqa_dev.jsonl", 1)


# ---------------------------------------------------------------------------- the console

DEMO_AGENT = """\
from multiturn_eval import TokenUsage, ToolInvocation, TurnReply


class Session:
    def send(self, message, files=()):
        if message == "boom":
            raise RuntimeError("backend exploded")
        if "diff" in message:
            call = ToolInvocation(name="math-subtract", args={"a": 206588, "b": "181,001"}, result=25000)
            return TurnReply(
                response="The difference is 25,000.",
                tool_invocations=[call],
                token_usage=TokenUsage(prompt_tokens=100, completion_tokens=30),
            )
        return TurnReply(response="206588", token_usage=TokenUsage(prompt_tokens=40, completion_tokens=10))


def make(ctx):
    return Session()
"""

DEMO_SUITE = """\
name: demo
agent: {backend: python, factory: "readme_demo_agent:make"}
evaluations:
  - {type: standard, metric: numeric}
test_cases:
  - name: passes
    turns:
      - input: what is the net cash?
        ground_truth: "206588"
  # the agent calls its tool with the number as text,
  # and writes the answer with thousands separators:
  # both checks of turn 2 fail
  - name: fails
    turns:
      - input: what is the net cash?
        ground_truth: "206588"
      - input: what is the diff?
        ground_truth: "25587"
        expected_tools:
          - {name: subtract, args: {b: {regex: "181001"}}}
  # the agent raises
  - name: errors
    turns:
      - {input: boom, ground_truth: "1"}
"""


def test_the_console_example_is_what_the_console_prints(tmp_path: Path) -> None:
    (tmp_path / "readme_demo_agent.py").write_text(DEMO_AGENT, encoding="utf-8")
    (tmp_path / "suite.yaml").write_text(DEMO_SUITE, encoding="utf-8")
    done = run_cli("run", "suite.yaml", "-o", "out", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    block = page("reports/console.md").split("```text\n")[1].split("```")[0]
    assert untimed(block) == untimed(done.stdout)


def test_the_summary_md_excerpt_is_the_golden_file() -> None:
    text = section("reports")
    excerpt = text.split("### ❌ ")[1].split("\n---\n")[0]
    golden = (ROOT / "tests" / "golden" / "summary.md").read_text(encoding="utf-8").splitlines()
    lines = ["### ❌ " + excerpt.splitlines()[0], *excerpt.splitlines()[1:]]
    at = 0
    for line in (line for line in lines if line.strip()):
        assert line in golden[at:], line  # every line of the excerpt, in the golden file's order
        at = golden.index(line, at) + 1


# ------------------------------------------------------------------------ response checks

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"price": {"type": "number"}, "sku": {"type": "string"}},
            },
        },
        "total": {"type": "number"},
    },
}

#: metric name -> the reply the README's example describes
REPLIES = {
    "refund_policy": "Refunds reach your card within a week, per our refund policy.",
    "no_rudeness": (
        "That is a STUPID question, but here goes nothing, really, and the answer is longer "
        "than the excerpt the message quotes."
    ),
    "bare_number": "it is 42",
    "order_json": '```json\n{"items": [{"price": 1, "sku": 2}, {"price": "3"}]}\n```',
    "json": '{"status": "ok""total": 3}',
}


def _examples() -> list[tuple[str, str]]:
    """(the YAML of each evaluation, the failure line) of the response-check examples."""
    text = section("checks").split("\n## Response checks\n")[1].split("\n## ")[0]
    blocks = re.findall(r"```yaml\n(.*?)```\n```\n(.*?)```", text, re.S)
    out = []
    for config, messages in blocks:
        specs = yaml.safe_load(config)
        by_name = {s.get("name", s["metric"]): s for s in specs}
        for line in messages.strip().splitlines():
            name = line.removeprefix("✗ ").split(":")[0]
            spec = by_name.get(name) or {"type": "standard", "metric": name}
            out.append((json.dumps(spec), line))
    return out


@pytest.mark.parametrize(("config", "line"), _examples())
def test_the_response_check_examples_are_the_messages_the_checks_give(
    config: str, line: str
) -> None:
    spec = json.loads(config)
    if spec.pop("schema_file", None):
        spec["schema"] = ORDER_SCHEMA
    evaluation = StandardEvaluation.model_validate(spec)
    validator = schema_validator(ORDER_SCHEMA) if "schema" in spec else None
    metric = evaluate_response_check(
        evaluation, REPLIES[evaluation.metric_name], validator=validator
    )
    turn = TurnResult(turn_index=0, input="q", passed=False, metric_results=[metric])
    assert [f"✗ {v.check_text(c)}" for c in v.failed_checks(turn)] == [line]


def test_every_response_check_example_is_checked() -> None:
    assert len(_examples()) == len(REPLIES)


# ----------------------------------------------------------------------------- examples


def test_the_support_example_totals(project: Project) -> None:
    readme = (ROOT / "examples" / "support" / "README.md").read_text(encoding="utf-8")
    claimed = re.search(r"All (\d+) test cases pass \((\d+) turns\)", readme)
    assert claimed is not None
    done = run_cli(
        "run", "examples/support/suite.yaml", "-o", str(project.root / "out"), "--format", "json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((project.root / "out" / "report.json").read_text())["summary"]
    assert (summary["total"], summary["turns"]["total"]) == tuple(map(int, claimed.groups()))
    assert summary["passed"] == summary["total"]
