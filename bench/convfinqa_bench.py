"""ConvFinQA measurements behind the numbers in examples/convfinqa/README.md.

Usage (from the repository root)::

    python bench/convfinqa_bench.py [DEV.json]

``DEV.json`` defaults to the committed dev split,
``examples/convfinqa/data/convfinqa_dev.json``. Prints a Markdown report:

1. the program executor's agreement with ``executed_answers``, turn by turn
   (exact equality after the dataset's rounding to 5 decimals);
2. how the dataset's own human-written ``conv_answers`` fare under the suites'
   ``answer`` check (the tolerance's justification);
3. the offline baseline agent's accuracy, measured by running the real CLI
   (``multiturn-eval run ... --format json``) on the committed 20-dialogue
   suite and on a suite converted from the whole file: per turn and per
   dialogue, for the answer alone and for every check (answer, expected tools,
   program grader), plus the wall time of each run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from examples.convfinqa.convert import ANSWER_NUMERIC, ANSWER_YES_NO  # noqa: E402
from examples.convfinqa.graders import execute_program  # noqa: E402

from multiturn_eval.grading.evaluators import evaluate_equality, evaluate_numeric  # noqa: E402
from multiturn_eval.suite import StandardEvaluation  # noqa: E402

DEFAULT_DEV = REPO / "examples" / "convfinqa" / "data" / "convfinqa_dev.json"
SUITE = REPO / "examples" / "convfinqa" / "suite.yaml"


def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "n/a"


def executor_agreement(records: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    agree = total = 0
    misses: list[str] = []
    for record in records:
        dialogue = record["dialogue"]
        for i, (program, answer) in enumerate(
            zip(dialogue["turn_program"], dialogue["executed_answers"], strict=True)
        ):
            total += 1
            try:
                value: Any = execute_program(program, record["doc"]["table"]).value
            except ValueError as exc:
                value = f"error: {exc}"
            if value == answer:
                agree += 1
            else:
                misses.append(
                    f"{record['id']} turn {i + 1}: {program!r} -> {value!r}, expected {answer!r}"
                )
    return agree, total, misses


def human_answers(records: list[dict[str, Any]]) -> tuple[int, int]:
    numeric = StandardEvaluation(**ANSWER_NUMERIC)
    yes_no = StandardEvaluation(**ANSWER_YES_NO)
    passed = total = 0
    for record in records:
        dialogue = record["dialogue"]
        for human, executed in zip(
            dialogue["conv_answers"], dialogue["executed_answers"], strict=True
        ):
            total += 1
            if isinstance(executed, str):
                result = evaluate_equality(yes_no, str(human), executed)
            else:
                result = evaluate_numeric(numeric, str(human), repr(executed))
            passed += result.passed
    return passed, total


def run_suite(suite: Path, report_dir: Path) -> tuple[dict[str, Any], float, int]:
    command = [sys.executable, "-m", "multiturn_eval", "run", str(suite), "-o", str(report_dir)]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--format", "json", "-q"], cwd=REPO, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    report: dict[str, Any] = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    return report, elapsed, done.returncode


def accuracy(report: dict[str, Any]) -> dict[str, tuple[int, int]]:
    turns = answer_turns = program_turns = all_turns = 0
    dialogues = answer_dialogues = all_dialogues = 0
    for case in report["results"]:
        dialogues += 1
        case_answers = case_all = True
        for turn in case["turns"]:
            turns += 1
            metrics = {m["metric_name"]: m["passed"] for m in turn["metric_results"]}
            answer_ok = bool(metrics.get("answer"))
            answer_turns += answer_ok
            program_turns += bool(metrics.get("turn_program_equivalence"))
            all_turns += bool(turn["passed"])
            case_answers &= answer_ok
            case_all &= bool(turn["passed"])
        answer_dialogues += case_answers
        all_dialogues += case_all
    return {
        "turns: answer correct": (answer_turns, turns),
        "turns: program grader passed": (program_turns, turns),
        "turns: every check passed": (all_turns, turns),
        "dialogues: every answer correct": (answer_dialogues, dialogues),
        "dialogues: every check passed": (all_dialogues, dialogues),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dev", nargs="?", type=Path, default=DEFAULT_DEV, help="ConvFinQA dev JSON")
    args = parser.parse_args(argv)
    records: list[dict[str, Any]] = json.loads(args.dev.read_text(encoding="utf-8"))["dev"]
    turns = sum(len(r["dialogue"]["turn_program"]) for r in records)
    print(f"# ConvFinQA measurements ({args.dev.name}: {len(records)} dialogues, {turns} turns)\n")

    agree, total, misses = executor_agreement(records)
    print(f"Program executor vs executed_answers: {pct(agree, total)} of turns agree exactly.")
    for miss in misses[:20]:
        print(f"  - {miss}")
    passed, total = human_answers(records)
    print(f"Human conv_answers passing the suites' answer check: {pct(passed, total)}.\n")

    with tempfile.TemporaryDirectory(prefix="convfinqa-bench-") as tmp:
        full_suite = Path(tmp) / "convfinqa-full.yaml"
        subprocess.run(
            [sys.executable, str(REPO / "examples" / "convfinqa" / "convert.py"), str(args.dev),
             "-o", str(full_suite)],
            cwd=REPO, check=True, capture_output=True, text=True,
        )  # fmt: skip
        runs = {
            "committed subset (suite.yaml)": run_suite(SUITE, Path(tmp) / "subset"),
            f"full split ({args.dev.name})": run_suite(full_suite, Path(tmp) / "full"),
        }
    names = list(runs)
    print("Baseline agent (offline, rule-based), measured with `multiturn-eval run`:\n")
    print("| measure | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    scores = {name: accuracy(report) for name, (report, _, _) in runs.items()}
    for measure in scores[names[0]]:
        print(f"| {measure} | " + " | ".join(pct(*scores[n][measure]) for n in names) + " |")
    print(
        "| run time (wall, CLI start to exit) | "
        + " | ".join(f"{runs[n][1]:.2f} s" for n in names)
        + " |"
    )
    print("| exit code | " + " | ".join(str(runs[n][2]) for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
