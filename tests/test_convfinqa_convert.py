"""``examples/convfinqa/convert.py``: ConvFinQA records -> a suite that validates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.convfinqa import convert
from examples.convfinqa.graders import execute_program

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "convfinqa"
DEV = EXAMPLE / "data" / "convfinqa_dev.json"
SUBSET = EXAMPLE / "data" / "convfinqa_subset.json"

#: records with the dataset's quirks (ids measured on the dev split)
YES_NO = "Double_AES/2002/page_46.pdf"  # a "no" answer from greater(#0, #1)
PERCENT_LITERAL = "Single_PM/2017/page_38.pdf-2"  # "13.4%" alone and in divide(932, 13.4%)
DUPLICATE_COLUMNS = "Double_STT/2008/page_83.pdf"  # "2008 annual average (1)" and "(2)"
STRING_CELLS = "Single_AES/2003/page_52.pdf-2"  # a "location" column of text


def records(path: Path = DEV) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads(path.read_text(encoding="utf-8"))["dev"]}


def run_convert(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "convert.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def validate(*suites: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    return subprocess.run(
        [sys.executable, "-m", "multiturn_eval", "validate", *map(str, suites)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def test_the_committed_suites_are_what_the_converter_writes(tmp_path: Path) -> None:
    for name, agent in (("suite.yaml", "baseline"), ("suite-claude.yaml", "claude")):
        committed = EXAMPLE / name
        # the header records the command; regenerate with the same arguments
        argv = (
            committed.read_text(encoding="utf-8").splitlines()[3].split("convert.py ", 1)[1].split()
        )
        out = argv.index("-o") + 1
        argv[out] = str(tmp_path / name)
        result = run_convert(*argv)
        assert result.returncode == 0, result.stderr
        fresh = (tmp_path / name).read_text(encoding="utf-8").splitlines()
        assert fresh[4:] == committed.read_text(encoding="utf-8").splitlines()[4:], (
            f"{name} is out of date: regenerate it with the command in its header"
        )
        given = argv[argv.index("--agent") + 1] if "--agent" in argv else "baseline"
        assert given == agent


def test_both_example_suites_validate() -> None:
    result = validate(EXAMPLE / "suite.yaml", EXAMPLE / "suite-claude.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: examples/convfinqa/suite.yaml: 20 test cases, 77 turns" in result.stdout
    assert "ok: examples/convfinqa/suite-claude.yaml: 20 test cases, 77 turns" in result.stdout


def test_the_claude_suite_has_the_same_tools_graders_and_turns() -> None:
    baseline, claude = load(EXAMPLE / "suite.yaml"), load(EXAMPLE / "suite-claude.yaml")
    assert claude["agent"]["backend"] == "anthropic"
    assert claude["agent"]["model"].startswith("claude-")
    assert baseline["agent"]["backend"] == "python"
    assert claude["agent"]["tools"] == baseline["agent"]["tools"]
    assert claude["agent"]["instructions"] == baseline["agent"]["instructions"]
    assert claude["evaluations"] == baseline["evaluations"]
    assert claude["test_cases"] == baseline["test_cases"]


def test_every_dev_record_converts_and_the_suite_validates(tmp_path: Path) -> None:
    out = tmp_path / "all.yaml"
    result = run_convert(str(DEV), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "421 test cases, 1490 turns" in result.stderr
    checked = validate(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_suite_shape_for_one_dialogue(tmp_path: Path) -> None:
    out = tmp_path / "one.yaml"
    result = run_convert(str(SUBSET), "--ids", "Single_MRO/2007/page_134.pdf-1", "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    schema = os.path.relpath(REPO / "schemas" / "suite.schema.json", tmp_path)
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={schema}"
    suite = load(out)
    assert suite["agent"]["factory"] == "examples.convfinqa.baseline_agent:factory"
    assert suite["evaluations"][0] == yaml.safe_load(
        "{type: standard, metric: numeric, name: answer, absolute_tolerance: 0.0005, "
        "relative_tolerance: 0.005, accept_percent: true, accept_thousands_separators: true}"
    )
    assert (
        suite["evaluations"][1]["grader"] == "examples.convfinqa.graders:turn_program_equivalence"
    )
    (case,) = suite["test_cases"]
    assert case["name"] == "Single_MRO/2007/page_134.pdf-1"
    assert case["context"]["table"]["2007"]["weighted average exercise price per share"] == 60.94
    # the document as an analyst gets it: text, then the table as Markdown, then text
    assert "marathon grants stock options" in case["instructions"]
    assert (
        "| weighted average exercise price per share | 60.94 | 37.84 | 25.14 |"
        in case["instructions"]
    )
    turns = case["turns"]
    assert [t["ground_truth"] for t in turns] == [60.94, 25.14, 35.8, 25.14, 1.42403]
    assert turns[0]["expected_tools"] == ["lookup"]
    assert turns[0]["turn_program"] == "60.94"
    assert turns[2]["expected_tools"] == [
        {"name": "subtract", "args": {"a": {"fuzzy": "60.94"}, "b": {"fuzzy": "25.14"}}}
    ]
    # turn 4 re-reads a value turn 2 already read: nothing new to call
    assert "expected_tools" not in turns[3]
    # turn 5 repeats turn 3's subtraction: only the division is new; #0 is not asserted
    assert turns[4]["expected_tools"] == [{"name": "divide", "args": {"b": {"fuzzy": "25.14"}}}]
    assert turns[4]["turn_program"] == "subtract(60.94, 25.14), divide(#0, 25.14)"


def test_expected_tools_rules() -> None:
    table = {"2009": {"sales": 3060.0}, "2008": {"sales": 3195.0}}

    def expect(program: str, *earlier: str) -> Any:
        return convert.expected_tools(
            execute_program(program, table), [execute_program(p, table) for p in earlier], table
        )

    assert expect("3060") == ["lookup"]
    assert expect("2.5") == []  # only in the text: no tool to expect
    assert expect("3060", "3060") == []  # read already
    assert expect("add(3060, 3195)") == ["add"]  # either operand order is fine
    assert expect("add(1, 2), add(#0, 3)") == [{"name": "add", "count": 2}]
    assert expect("multiply(2.5, const_1000), divide(#0, 3195)") == [
        {"name": "divide", "args": {"b": {"fuzzy": "3195"}}},
        "multiply",
    ]
    assert expect("divide(932, 13.4%)") == [
        {"name": "divide", "args": {"a": {"fuzzy": "932"}, "b": {"fuzzy": "0.134"}}}
    ]
    assert expect("greater(3060, 3195)") == [
        {"name": "greater", "args": {"a": {"fuzzy": "3060"}, "b": {"fuzzy": "3195"}}}
    ]
    assert expect("subtract(3060, const_m1)", "subtract(3060, const_m1)") == []


def test_unusual_records_convert_without_errors(tmp_path: Path) -> None:
    out = tmp_path / "odd.yaml"
    ids = ",".join([YES_NO, PERCENT_LITERAL, DUPLICATE_COLUMNS, STRING_CELLS])
    result = run_convert(str(DEV), "--ids", ids, "-o", str(out))
    assert result.returncode == 0, result.stderr
    checked = validate(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    cases = {c["name"]: c for c in load(out)["test_cases"]}
    assert list(cases) == ids.split(",")

    yes_no = next(t for t in cases[YES_NO]["turns"] if t["ground_truth"] == "no")
    assert yes_no["evaluations"][0] == yaml.safe_load(
        "{type: standard, metric: equality, name: answer, case_insensitive: true, "
        "strip_whitespace: true, strip_punctuation: true}"
    )
    assert yes_no["evaluations"][1]["type"] == "code"
    assert yes_no["expected_tools"] == [{"name": "greater"}]  # both operands are earlier steps

    percent = cases[PERCENT_LITERAL]["turns"]
    assert percent[1]["turn_program"] == "13.4%" and percent[1]["ground_truth"] == 0.134
    assert percent[2]["ground_truth"] == pytest.approx(6955.22388)

    columns = cases[DUPLICATE_COLUMNS]["context"]["table"]
    assert "2008 annual average (1)" in columns and "2008 annual average (2)" in columns

    table = cases[STRING_CELLS]["context"]["table"]
    assert "united states" in table["location"].values()
    assert "| kelvin |" in cases[STRING_CELLS]["instructions"]


def test_a_seeded_sample_is_reproducible_and_in_source_order(tmp_path: Path) -> None:
    for name in ("a", "b"):
        result = run_convert(
            str(DEV),
            "--n",
            "5",
            "--seed",
            "3",
            "-o",
            str(tmp_path / f"{name}.yaml"),
            "--records-out",
            str(tmp_path / f"{name}.json"),
        )
        assert result.returncode == 0, result.stderr
    first = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["dev"]
    assert first == json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))["dev"]
    order = list(records())
    positions = [order.index(r["id"]) for r in first]
    assert len(first) == 5 and positions == sorted(positions)


def test_the_committed_subset_is_the_seeded_sample() -> None:
    sample = convert.select(list(records().values()), 20, 6)
    assert [r["id"] for r in sample] == list(records(SUBSET))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--ids", "Single_MRO/2007/page_134.pdf-9"],
            "no record has id 'Single_MRO/2007/page_134.pdf-9'; did you mean",
        ),
        (["--ids", "x", "--n", "2"], "give either --ids or --n/--seed"),
        (["--seed", "2"], "--seed needs --n"),
        (["--n", "0"], "--n must be between 1 and 421"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_convert(str(DEV), *args, "-o", str(tmp_path / "x.yaml"))
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_a_missing_or_malformed_source_is_a_clear_error(tmp_path: Path) -> None:
    result = run_convert(str(tmp_path / "nope.json"), "-o", str(tmp_path / "x.yaml"))
    assert result.returncode == 2 and "file not found" in result.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dev": [{"id": "r1", "doc": {"table": {}}}]}), encoding="utf-8")
    result = run_convert(str(bad), "-o", str(tmp_path / "x.yaml"))
    assert result.returncode == 2
    assert "record 'r1': missing dialogue.conv_questions" in result.stderr


def test_the_committed_suites_match_the_json_schema_their_first_line_names() -> None:
    for name in ("suite.yaml", "suite-claude.yaml"):
        first = (EXAMPLE / name).read_text(encoding="utf-8").splitlines()[0]
        schema = (EXAMPLE / first.split("$schema=", 1)[1]).resolve()
        assert schema == REPO / "schemas" / "suite.schema.json"
        checked = subprocess.run(
            [
                sys.executable,
                "-m",
                "check_jsonschema",
                "--schemafile",
                str(schema),
                str(EXAMPLE / name),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_jsonl_holds_the_yaml_suites_test_cases_one_per_line(tmp_path: Path) -> None:
    inline, lines = tmp_path / "inline.yaml", tmp_path / "cases" / "subset.jsonl"
    assert run_convert(str(SUBSET), "-o", str(inline)).returncode == 0
    result = run_convert(str(SUBSET), "--jsonl", str(lines), "-o", str(tmp_path / "suite.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().endswith(": 20 test cases, 77 turns")
    suite = load(tmp_path / "suite.yaml")
    assert suite["test_cases_file"] == "cases/subset.jsonl" and "test_cases" not in suite
    assert {k: v for k, v in load(inline).items() if k != "test_cases"} == {
        k: v for k, v in suite.items() if k != "test_cases_file"
    }
    written = [json.loads(text) for text in lines.read_text(encoding="utf-8").splitlines()]
    assert written == load(inline)["test_cases"]
    checked = validate(tmp_path / "suite.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "20 test cases (from " in checked.stdout


def test_a_bad_record_leaves_no_jsonl_behind(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    good = records(SUBSET)["Single_MRO/2007/page_134.pdf-1"]
    bad.write_text(
        json.dumps({"dev": [good, {"id": "r1", "doc": {"table": {}}}]}), encoding="utf-8"
    )
    out = tmp_path / "cases.jsonl"
    result = run_convert(str(bad), "--jsonl", str(out), "-o", str(tmp_path / "x.yaml"))
    assert result.returncode == 2 and "record 'r1'" in result.stderr
    assert list(tmp_path.iterdir()) == [bad]


def _verdicts(report: Path) -> list[Any]:
    """A report's results without what differs between two runs or two files (timings, the
    suite's path, a case's file and lines)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k not in ("suite", "file", "line") and not k.startswith("duration")
            }
        return [strip(v) for v in value] if isinstance(value, list) else value

    return [strip(case) for case in json.loads(report.read_text(encoding="utf-8"))["results"]]


def test_the_jsonl_suite_gives_the_yaml_suites_verdicts(tmp_path: Path) -> None:
    """What the docs say of the dev split from JSON Lines, on the committed subset: the same
    report case for case and turn for turn; only a case's file and line differ."""
    assert run_convert(str(SUBSET), "-o", str(tmp_path / "inline.yaml")).returncode == 0
    assert (
        run_convert(
            str(SUBSET), "--jsonl", str(tmp_path / "cases.jsonl"), "-o", str(tmp_path / "s.yaml")
        ).returncode
        == 0
    )
    reports = {}
    for suite in ("inline.yaml", "s.yaml"):
        out = tmp_path / f"out-{suite}"
        done = subprocess.run(
            [sys.executable, "-m", "multiturn_eval", "run", str(tmp_path / suite), "-qo", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("MULTITURN_EVAL_")},
            check=False,
        )
        assert done.returncode == 1, done.stderr  # the baseline fails some dialogues
        reports[suite] = out / "report.json"
    inline, from_file = _verdicts(reports["inline.yaml"]), _verdicts(reports["s.yaml"])
    assert len(inline) == 20 and inline == from_file
    lines = [c["line"] for c in json.loads(reports["s.yaml"].read_text())["results"]]
    assert lines == list(range(1, 21))
