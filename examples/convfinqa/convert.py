"""Turn ConvFinQA records into a multiturn-eval suite.

Usage (from the repository root)::

    python examples/convfinqa/convert.py SOURCE.json [--n N --seed S | --ids ID,ID...]
        [--agent baseline|claude] [--records-out RECORDS.json] [--jsonl CASES.jsonl] -o OUT.yaml

``SOURCE.json`` holds records in the processed ConvFinQA shape (see
``data/README.md``): ``{"dev": [record, ...]}``, any other single-key mapping
of a list, or a bare list. Without ``--n``/``--ids`` every record is converted.
``--n N --seed S`` takes a seeded random sample of N records (kept in source
order); ``--ids`` takes the named ones, in the order given.
``--records-out`` also writes the chosen records (that is how
``data/convfinqa_subset.json`` was made). ``--jsonl CASES.jsonl`` writes the
test cases as JSON Lines instead (one test case per line, the same shape as in
YAML), written one record at a time, and the suite ``OUT.yaml`` takes them with
``test_cases_file:`` (relative to its directory): the form for a whole split,
which the runner reads as a stream.

What a record becomes (one test case per dialogue, named by its id):

- ``instructions``: the document as an analyst would get it -- the text before
  the table, the table rendered as Markdown, the text after it;
- ``context.table``: the table itself (``{column: {row: value}}``), which the
  ``lookup`` and ``table_*`` tools read through ``CaseContext``;
- one turn per question, with ``ground_truth`` = the executed answer (the
  exact value of the turn's program, not the human-rounded ``conv_answers``),
  ``turn_program`` kept as a turn key for the ``turn_program_equivalence``
  grader, and ``expected_tools`` derived from the program:

  * a turn whose program is a bare number from the table expects a ``lookup``
    (a number that is only in the text expects no tool);
  * each new step expects a call of its operation; ``subtract``, ``divide``,
    ``exp`` and ``greater`` assert their literal operands fuzzily
    (``{a: {fuzzy: "206588"}, b: {fuzzy: "181001"}}``); ``add`` and
    ``multiply`` assert the name only (with ``count``), because their operands
    may come in either order; an operand that is an earlier step's result
    (``#0``) is not asserted (the agent may pass it rounded) -- the grader
    checks those values;
  * steps (and bare values) an earlier turn already computed or read are not
    expected again: ConvFinQA programs repeat earlier steps, and an agent
    should reuse them. The grader accepts them from earlier turns.

- evaluations: a ``numeric`` check named ``answer`` (``accept_percent``, so
  ``14.1%`` matches 0.14136, ``absolute_tolerance: 0.0005`` and
  ``relative_tolerance: 0.005``: answers rounded to three significant figures
  or to one decimal of a percent pass) plus the program grader; a yes/no turn
  gets an ``equality`` check named ``answer`` instead (a numeric check is
  refused on a non-numeric ground truth).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script: make `examples.convfinqa` importable
    sys.path.insert(0, str(REPO_ROOT))

from examples.convfinqa.graders import (  # noqa: E402
    COMMUTATIVE_OPS,
    ProgramError,
    ProgramResult,
    execute_program,
    format_value,
    values_match,
)
from examples.convfinqa.tools import TOOL_NAMES  # noqa: E402

PACKAGE = "examples.convfinqa"
GRADER = f"{PACKAGE}.graders:turn_program_equivalence"

#: the numeric check: see the module docstring and the example's README for the measurements
ANSWER_NUMERIC: dict[str, Any] = {
    "type": "standard",
    "metric": "numeric",
    "name": "answer",
    "absolute_tolerance": 0.0005,
    "relative_tolerance": 0.005,
    "accept_percent": True,
    "accept_thousands_separators": True,
}
ANSWER_YES_NO: dict[str, Any] = {
    "type": "standard",
    "metric": "equality",
    "name": "answer",
    "case_insensitive": True,
    "strip_whitespace": True,
    "strip_punctuation": True,
}
PROGRAM_CHECK: dict[str, Any] = {"type": "code", "grader": GRADER}

INSTRUCTIONS = """\
You are a financial analyst. A user asks you questions, one at a time, about one page of a
company's SEC filing, given below: its text and a table. Questions often refer to earlier
ones ("what about in 2008?", "what is the difference?", "what percentage change does this
represent?").

Use the tools: read table cells with lookup(row, column) and do every calculation with the
arithmetic tools (add, subtract, multiply, divide, exp, greater; table_sum, table_average,
table_max, table_min for a whole row), one operation per call. Reuse numbers and results
from earlier turns instead of looking them up or computing them again.

Reply with the final answer only, without units or explanation: a number such as 25587, a
ratio or percentage change as a decimal (0.14136) or a percentage (14.14%), and yes or no
for yes/no questions.
"""

AGENTS: dict[str, dict[str, Any]] = {
    "baseline": {
        "name": "convfinqa-baseline",
        "description": "answered by the offline rule-based baseline agent (no API key, no network)",
        "agent": {
            "backend": "python",
            "factory": f"{PACKAGE}.baseline_agent:factory",
        },
    },
    "claude": {
        "name": "convfinqa-claude",
        "description": "answered by Claude through the anthropic backend (needs ANTHROPIC_API_KEY)",
        "agent": {
            "backend": "anthropic",
            "model": "claude-sonnet-4-5",
            "temperature": 0,
            "max_tokens": 1024,
            "prompt_caching": True,
        },
    },
}


class ConvertError(Exception):
    """A source file or record that cannot be converted (exit code 2)."""


# ------------------------------------------------------------------------- records


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records of a ConvFinQA JSON file (``{"dev": [...]}``, ``{"train": [...]}`` or a list)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConvertError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConvertError(f"{path}: cannot read JSON: {exc}") from None
    if isinstance(data, Mapping):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise ConvertError(
                f"{path}: expected a list of records or a mapping with one list (like 'dev')"
            )
        data = lists[0]
    if not isinstance(data, list) or not all(isinstance(r, Mapping) for r in data):
        raise ConvertError(f"{path}: expected a list of record objects")
    return [dict(r) for r in data]


def select(
    records: Sequence[dict[str, Any]],
    n: int | None = None,
    seed: int | None = None,
    ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """All records, a seeded sample of ``n`` (in source order), or the ``ids`` in that order."""
    if ids:
        by_id = {str(r.get("id")): r for r in records}
        chosen = []
        for record_id in ids:
            if record_id not in by_id:
                close = difflib.get_close_matches(record_id, list(by_id), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConvertError(f"no record has id {record_id!r}{hint}")
            chosen.append(by_id[record_id])
        return chosen
    if n is None:
        return list(records)
    if not 1 <= n <= len(records):
        raise ConvertError(f"--n must be between 1 and {len(records)}, got {n}")
    picked = set(random.Random(seed).sample(range(len(records)), n))
    return [r for i, r in enumerate(records) if i in picked]


def _field(record: Mapping[str, Any], *path: str) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            raise ConvertError(f"record {record.get('id', '?')!r}: missing {'.'.join(path)}")
        value = value[key]
    return value


# ------------------------------------------------------------------------ document


def _cell_text(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_value(value)
    return str(value)


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def render_table(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The table as Markdown: row labels down the left, column headers across the top."""
    columns = list(table)
    rows: dict[str, None] = {}
    for cells in table.values():
        for label in cells:
            rows.setdefault(label, None)
    lines = [
        "| " + " | ".join(["row"] + [_md(c) or "(blank)" for c in columns]) + " |",
        "|" + " --- |" * (len(columns) + 1),
    ]
    for row in rows:
        shown = [_md(_cell_text(table[c][row])) if row in table[c] else "" for c in columns]
        lines.append("| " + " | ".join([_md(row) or "(blank)", *shown]) + " |")
    return "\n".join(lines)


def _paragraph(text: str) -> str:
    """Text wrapped at 100 columns (the source has each text on one long line)."""
    lines = [" ".join(line.split()) for line in str(text).strip().splitlines()]
    return "\n".join(
        textwrap.fill(line, width=100, break_long_words=False, break_on_hyphens=False)
        for line in lines
    )


def document_text(record: Mapping[str, Any]) -> str:
    table = _field(record, "doc", "table")
    parts = [f"Document {record['id']} (a page of an SEC filing):", ""]
    pre = _paragraph(_field(record, "doc", "pre_text"))
    post = _paragraph(_field(record, "doc", "post_text"))
    if pre:
        parts += [pre, ""]
    if table:
        parts += ["Table:", "", render_table(table), ""]
    if post:
        parts += [post, ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------- turns


def _yaml_number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 1e15 else value


def _cell_values(table: Mapping[str, Mapping[str, Any]]) -> list[float]:
    return [
        float(v)
        for cells in table.values()
        for v in cells.values()
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]


def expected_tools(
    gold: ProgramResult,
    earlier: Sequence[ProgramResult],
    table: Mapping[str, Mapping[str, Any]],
) -> list[Any]:
    """The tool calls a turn needs (see the module docstring)."""
    known_values = [v for g in earlier for v in [g.value, *(s.value for s in g.steps)]]
    if not gold.steps:
        if any(values_match(known, gold.value) for known in known_values):
            return []  # already read or computed in an earlier turn
        in_table = any(values_match(v, gold.value) for v in _cell_values(table))
        return ["lookup"] if in_table else []
    done = {_step_key(s.op, s.operands) for g in earlier for s in g.steps}
    expected: list[Any] = []
    counts: dict[str, int] = {}
    for step in gold.steps:
        if _step_key(step.op, step.operands) in done:
            continue
        done.add(_step_key(step.op, step.operands))
        if step.op in COMMUTATIVE_OPS or step.op.startswith("table_"):
            counts[step.op] = counts.get(step.op, 0) + 1
            continue
        args = {
            name: {"fuzzy": format_value(operand)}
            for name, operand, ref in zip(("a", "b"), step.operands, step.refs, strict=True)
            if ref is None
        }
        entry: dict[str, Any] = {"name": step.op}
        if args:
            entry["args"] = _Flow({k: _Flow(v) for k, v in args.items()})
        if entry not in expected:
            expected.append(entry)
    for op, count in counts.items():
        expected.append(op if count == 1 else {"name": op, "count": count})
    return _FlowList(expected) if all(isinstance(e, str) for e in expected) else expected


def _step_key(op: str, operands: Sequence[Any]) -> tuple[Any, ...]:
    rounded = tuple(round(v, 6) if isinstance(v, float) else v for v in operands)
    if op in COMMUTATIVE_OPS:
        rounded = tuple(sorted(rounded, key=repr))
    return (op, *rounded)


def convert_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """One record -> one test case mapping."""
    record_id = str(_field(record, "id"))
    table = _field(record, "doc", "table")
    if not isinstance(table, Mapping):
        raise ConvertError(f"record {record_id!r}: doc.table is not a mapping")
    questions = _field(record, "dialogue", "conv_questions")
    programs = _field(record, "dialogue", "turn_program")
    answers = _field(record, "dialogue", "executed_answers")
    if not (len(questions) == len(programs) == len(answers)) or not questions:
        raise ConvertError(
            f"record {record_id!r}: conv_questions, turn_program and executed_answers "
            f"must have the same non-zero length ({len(questions)}, {len(programs)}, {len(answers)})"
        )
    turns: list[dict[str, Any]] = []
    earlier: list[ProgramResult] = []
    for index, (question, program, answer) in enumerate(
        zip(questions, programs, answers, strict=True)
    ):
        try:
            gold = execute_program(str(program), table)
        except ProgramError as exc:
            raise ConvertError(f"record {record_id!r} turn {index + 1}: {exc}") from None
        turn: dict[str, Any] = {"input": " ".join(str(question).split())}
        if isinstance(answer, str):
            turn["ground_truth"] = answer.strip().lower()
        else:
            turn["ground_truth"] = _yaml_number(float(answer))
        tools = expected_tools(gold, earlier, table)
        if tools:
            turn["expected_tools"] = tools
        if isinstance(answer, str):
            turn["evaluations"] = [dict(ANSWER_YES_NO), dict(PROGRAM_CHECK)]
        turn["turn_program"] = str(program)
        turns.append(turn)
        earlier.append(gold)
    kind = "double" if record_id.startswith("Double_") else "single"
    return {
        "name": record_id,
        "tags": _FlowList(["convfinqa", kind]),
        "instructions": document_text(record),
        "context": {"table": {str(c): dict(cells) for c, cells in table.items()}},
        "turns": turns,
    }


def build_suite(
    records: Sequence[Mapping[str, Any]], agent: str = "baseline", cases_file: str | None = None
) -> dict[str, Any]:
    """The suite; its test cases inline, or (``cases_file``) taken from that JSON Lines file."""
    preset = AGENTS[agent]
    agent_block = dict(preset["agent"])
    agent_block["instructions"] = INSTRUCTIONS
    agent_block["tools"] = [{"function": f"{PACKAGE}.tools:{name}"} for name in TOOL_NAMES]
    suite: dict[str, Any] = {
        "name": preset["name"],
        "agent": agent_block,
        "evaluations": [dict(ANSWER_NUMERIC), dict(PROGRAM_CHECK)],
        "execution": {"parallel_test_cases": 4},
    }
    if cases_file is None:
        suite["test_cases"] = [convert_record(r) for r in records]
    else:
        suite["test_cases_file"] = cases_file
    return suite


def write_jsonl(records: Sequence[Mapping[str, Any]], path: Path) -> int:
    """Each record's test case as one line of JSON (the shape YAML gets); the turns written."""
    turns = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")  # a record that fails leaves no half file
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as handle:
            for record in records:  # one at a time: a whole split is never one document
                case = convert_record(record)
                turns += len(case["turns"])
                handle.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return turns


# ---------------------------------------------------------------------------- YAML


class _Flow(dict[str, Any]):
    """A mapping written in flow style: ``{a: {fuzzy: '60.94'}}``."""


class _FlowList(list[Any]):
    """A list written in flow style: ``[convfinqa, single]``."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(
    _Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True)
)
_Dumper.add_representer(
    _FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)


def dump_suite(suite: Mapping[str, Any], header: Sequence[str]) -> str:
    body = yaml.dump(
        suite, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, indent=2
    )
    return "".join(f"{line}\n" for line in header) + body


def header_lines(out: Path, source: str, count: int, agent: str, argv: Sequence[str]) -> list[str]:
    schema = REPO_ROOT / "schemas" / "suite.schema.json"
    relative = os.path.relpath(schema, out.resolve().parent).replace(os.sep, "/")
    return [
        f"# yaml-language-server: $schema={relative}",
        f"# ConvFinQA: {count} dialogue{'s' if count != 1 else ''} from {source}, "
        f"{AGENTS[agent]['description']}.",
        "# Generated by examples/convfinqa/convert.py (edit the converter, not this file):",
        "#   python examples/convfinqa/convert.py " + " ".join(argv),
    ]


# ----------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="convert.py", description="Turn ConvFinQA records into a multiturn-eval suite."
    )
    parser.add_argument("source", type=Path, help="ConvFinQA JSON ({'dev': [...]} or a list)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="suite file to write")
    parser.add_argument("--n", type=int, help="convert a seeded random sample of N dialogues")
    parser.add_argument("--seed", type=int, help="seed of the --n sample (default 0)")
    parser.add_argument("--ids", help="comma-separated record ids to convert, in this order")
    parser.add_argument(
        "--agent",
        choices=sorted(AGENTS),
        default="baseline",
        help="baseline: the offline python agent (default); claude: the anthropic backend",
    )
    parser.add_argument("--records-out", type=Path, help="also write the chosen records as JSON")
    parser.add_argument(
        "--jsonl",
        type=Path,
        metavar="CASES.jsonl",
        help="write the test cases to this JSON Lines file (one per line) and a suite that "
        "reads it with test_cases_file:",
    )
    args = parser.parse_args(args_list)
    if args.ids and (args.n is not None or args.seed is not None):
        parser.error("give either --ids or --n/--seed, not both")
    if args.seed is not None and args.n is None:
        parser.error("--seed needs --n")
    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids else None
    cases_file = None
    if args.jsonl is not None:  # as the suite names it: relative to the suite's directory
        cases_file = os.path.relpath(args.jsonl.resolve(), args.output.resolve().parent)
        cases_file = cases_file.replace(os.sep, "/")
    try:
        records = select(load_records(args.source), args.n, args.seed or 0, ids)
        suite = build_suite(records, args.agent, cases_file)
        turns = (
            write_jsonl(records, args.jsonl)
            if args.jsonl is not None
            else sum(len(case["turns"]) for case in suite["test_cases"])
        )
    except ConvertError as exc:
        print(f"convert.py: error: {exc}", file=sys.stderr)
        return 2
    source = args.source.as_posix()
    text = dump_suite(suite, header_lines(args.output, source, len(records), args.agent, args_list))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    if args.records_out is not None:
        args.records_out.parent.mkdir(parents=True, exist_ok=True)
        args.records_out.write_text(
            json.dumps({"dev": records}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    written = f"{args.output} and {args.jsonl}" if args.jsonl is not None else f"{args.output}"
    print(f"wrote {written}: {len(records)} test cases, {turns} turns", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
