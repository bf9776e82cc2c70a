"""Test cases from JSON Lines (``test_cases_file:``, SPEC 4; issue 23 item 2).

Each broken line is one located error (file, line, test case, field), all of a
file's errors at once (bounded), exit 2; a good file runs like the same cases
written in YAML, from a loaded suite that indexes its file's cases instead of
holding them.
"""

from __future__ import annotations

import json
import random
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import loader
from multiturn_eval.errors import CaseReadError, ConfigError
from multiturn_eval.jsonl_source import MAX_LINE_BYTES
from multiturn_eval.loader import MAX_FILE_ISSUES, load_suite
from multiturn_eval.suite import TestCase
from tests.conftest import Project
from tests.test_hostile_suites import FILE_KINDS, _make

HEAD = "agent:\n  backend: python\n  factory: tests.agents:scripted\n"
FILE = "data/cases.jsonl"


def line(**case: Any) -> str:
    return json.dumps(case)


def write(
    project: Project,
    lines: Sequence[str] | bytes,
    *,
    before: str = "",
    inline: str = "",
    name: str = FILE,
) -> None:
    """suite.yaml (``HEAD``, ``before``, ``inline`` test cases, then the file) and the file."""
    project.write("suite.yaml", HEAD + before + inline + f"test_cases_file: {name}\n")
    data = lines if isinstance(lines, bytes) else "".join(f"{text}\n" for text in lines).encode()
    path = project.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def errors(project: Project, command: str = "validate") -> list[str]:
    result = project.run(command, "suite.yaml")
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    return [text.strip() for text in result.err.splitlines()[1:]]


def one_error(project: Project, lines: Sequence[str] | bytes) -> str:
    write(project, lines)
    found = errors(project)
    assert len(found) == 1, found
    return found[0]


GOOD = line(name="good", turns=[{"input": "q"}])


# --------------------------------------------------------------- broken lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"name": "a", "turns": [{"input": "q"}]',
            "the line is not JSON: Expecting ',' delimiter at column 40",
        ),
        ('{"name": "a" "turns": []}', "the line is not JSON: Expecting ',' delimiter at column 14"),
        (
            "{'name': 'a'}",
            "the line is not JSON: Expecting property name enclosed in double quotes at column 2",
        ),
        ('{"turns": [{"input": "q"}]} {"x": 1}', "the line is not JSON: Extra data at column 29"),
        (
            '[{"input": "q"}]',
            'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is an array',
        ),
        (
            '"a string"',
            'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is a string',
        ),
        (
            "42",
            'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is a number',
        ),
        ("null", 'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is null'),
        (
            "true",
            'a test case is a JSON object ({"name": ..., "turns": [...]}); this line is a boolean',
        ),
        (
            "# a comment",
            "JSON has no comments: every line of a JSON Lines file is one test case (a JSON object); remove this line (blank lines are skipped)",
        ),
        (
            "  # indented",
            "JSON has no comments: every line of a JSON Lines file is one test case (a JSON object); remove this line (blank lines are skipped)",
        ),
        ('{"input": NaN}', "NaN is not JSON (Python writes it, JSON has no such number); quote it"),
        (
            '{"input": -Infinity}',
            "-Infinity is not JSON (Python writes it, JSON has no such number); quote it",
        ),
        (
            '{"input": "q", "input": "r"}',
            "duplicate key 'input' in one object (JSON keeps only the last)",
        ),
        (
            '{"turns": [{"input": "q", "context": 1, "context": 2}]}',
            "duplicate key 'context' in one object (JSON keeps only the last)",
        ),
        (
            '{"input": ' + "1" * 101 + "}",
            "a number written with 101 characters is too long (at most 100); write it as a string to keep it as text",
        ),
        (
            '{"input": 1.' + "5" * 100 + "}",
            "a number written with 102 characters is too long (at most 100); write it as a string to keep it as text",
        ),
        (
            '{"input": "\\ud800"}',
            "the line holds a lone surrogate escape (such as \\ud800), which is not a character; write the character itself, or a proper pair of escapes",
        ),
        (
            '{"input": "x", "context": {"\\uDFFF": 1}}',
            "the line holds a lone surrogate escape (such as \\ud800), which is not a character; write the character itself, or a proper pair of escapes",
        ),
    ],
)
def test_a_broken_line_is_a_located_error(project: Project, text: str, expected: str) -> None:
    error = one_error(project, [GOOD, "", text])
    assert error == f"{FILE}:3 test_cases[1]: {expected}"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b'{"input": "caf\xe9"}\n',
            "the line is not UTF-8 text: byte 0xe9 at column 15 (invalid continuation byte)",
        ),
        (
            b'{"input": "\xff"}\n',
            "the line is not UTF-8 text: byte 0xff at column 12 (invalid start byte)",
        ),
        (
            b'{"input": "\xc3\xa9\xed\xa0\x80"}\n',
            "the line is not UTF-8 text: byte 0xed at column 13 (invalid continuation byte)",
        ),
    ],
)
def test_invalid_utf8_names_the_line_and_column(
    project: Project, data: bytes, expected: str
) -> None:
    error = one_error(project, GOOD.encode() + b"\n" + data)
    assert error == f"{FILE}:2 test_cases[1]: {expected}"


def test_a_utf16_file_is_refused_once_at_its_first_line(project: Project) -> None:
    text = (GOOD + "\n" + GOOD + "\n").encode("utf-16")
    assert one_error(project, text) == (
        f"{FILE}:1 test_cases[0]: the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
        "save it as UTF-8"
    )


@pytest.mark.parametrize("depth", [101, 1_000, 100_000])
def test_deep_nesting_is_refused_without_a_recursion_error(project: Project, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    error = one_error(project, [GOOD, '{"input": "q", "context": {"x": ' + deep + "}}"])
    assert error == f"{FILE}:2 test_cases[1]: nesting deeper than 100 levels of arrays and objects"


def test_nesting_up_to_the_limit_loads(project: Project) -> None:
    deep = "[" * 98 + "]" * 98  # the case object, the context object, 98 arrays: 100 levels
    write(project, [GOOD, '{"input": "q", "context": {"x": ' + deep + "}}"])
    assert project.run("validate", "suite.yaml").code == 0


def test_a_huge_line_is_refused_without_being_held(project: Project) -> None:
    huge = '{"input": "' + "x" * (MAX_LINE_BYTES + 10) + '"}'
    write(project, [GOOD, huge, GOOD])
    assert errors(project) == [
        f"{FILE}:2 test_cases[1]: the line is {len(huge):,} bytes, over the 8 MiB limit of one "
        "test case"
    ]


def test_a_line_of_exactly_the_limit_loads(project: Project) -> None:
    body = '{"input": "'
    exact = body + "x" * (MAX_LINE_BYTES - len(body) - 2) + '"}'
    assert len(exact.encode()) == MAX_LINE_BYTES
    write(project, [exact, GOOD])
    result = project.run("validate", "suite.yaml")
    assert result.code == 0, result.err


# ----------------------------------------------------------- the schema, per line


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            {"name": "a", "turns": [{"input": "q"}, {"input": "r", "ground_truht": "x"}]},
            "test_cases[1] (\"a\") turns[1].ground_truht: unknown turn key; did you mean 'ground_truth'?",
        ),
        (
            {"name": "a", "tag": ["x"], "input": "q"},
            "test_cases[1] (\"a\") tag: unknown key; did you mean 'tags'?",
        ),
        (
            {"name": "a", "input": "q", "turns": [{"input": "r"}]},
            "test_cases[1] (\"a\") input: a test case has either 'input' or 'turns', not both",
        ),
        (
            {"name": "a", "turns": []},
            "test_cases[1] (\"a\") turns: is empty; give at least one turn, or use 'input:'",
        ),
        (
            {
                "turns": [
                    {"input": "q", "expected_tools": [{"name": "t", "args": {"b": {"regex": "("}}}]}
                ]
            },
            "test_cases[1] turns[0].expected_tools[0].args.b.regex: cannot compile: missing ), unterminated subpattern at position 0",
        ),
        (
            {"name": 3, "input": "q"},
            "test_cases[1] name: input should be a valid string",
        ),
        (
            {
                "name": "a",
                "turns": [
                    {
                        "input": "q",
                        "evaluations": [
                            {"type": "standard", "metric": "equality", "absolute_tolerance": 1}
                        ],
                    }
                ],
            },
            "test_cases[1] (\"a\") turns[0].evaluations[0].absolute_tolerance: applies to another metric, not to 'equality'",
        ),
    ],
)
def test_each_line_is_validated_as_a_yaml_test_case(
    project: Project, case: dict[str, Any], expected: str
) -> None:
    error = one_error(project, [GOOD, json.dumps(case)])
    assert error == f"{FILE}:2 {expected}"
    # the same case written in YAML: the same message, at the suite's line
    project.write(
        "suite.yaml", HEAD + "test_cases:\n  - {input: x}\n  - " + json.dumps(case) + "\n"
    )
    result = project.run("validate", "suite.yaml")
    assert [e.strip() for e in result.err.splitlines()[1:]] == [f"suite.yaml:6 {expected}"]


def test_a_numeric_check_on_a_text_answer_is_located_in_the_file(project: Project) -> None:
    write(
        project,
        [GOOD, line(name="n", turns=[{"input": "q", "ground_truth": "yes"}])],
        before="evaluations: [{type: standard, metric: numeric}]\n",
    )
    assert errors(project) == [
        f"{FILE}:2 test_cases[1] (\"n\") turns[0].ground_truth: 'yes' is not a number, but the "
        "'numeric' evaluation compares numbers; give this turn its own evaluations (e.g. metric: "
        "equality)"
    ]


def test_variables_are_replaced_and_an_unset_one_is_located(project: Project) -> None:
    write(
        project,
        [
            line(name="a", input="${GREETING} there"),
            line(name="b", input="cost $$5"),
            '{"name": "c", "input": "\\u0024{MISSING}"}',  # an escaped $ is a $ too
            line(name="d", input="${MISSING}"),
        ],
    )
    project.env = {"GREETING": "hello"}
    assert errors(project) == [
        f'{FILE}:3 test_cases[2] ("c") input: environment variable MISSING is not set',
        f'{FILE}:4 test_cases[3] ("d") input: environment variable MISSING is not set',
    ]
    write(project, [line(name="a", input="${GREETING} there"), line(name="b", input="cost $$5")])
    loaded = load_suite(project.root / "suite.yaml", {"GREETING": "hello"})
    assert [loaded.cases.materialize(i).input for i in range(2)] == ["hello there", "cost $5"]


def test_a_judge_key_left_unset_in_a_line_is_no_error_under_fixtures_replay(
    project: Project,
) -> None:
    """As in the suite file: replay answers the judge from the fixtures, so a case's
    ``judge.api_key: ${VAR}`` whose variable is unset is dropped, not an error; without
    fixtures it is the located error it always was."""
    judged = line(
        name="judged",
        input="q",
        judge={"api_key": "${JUDGE_KEY}"},
        evaluations=[{"type": "judge", "rubric": "Polite."}],
    )
    write(project, [GOOD, judged], before="judge: {backend: anthropic, model: claude-haiku-4-5}\n")
    assert errors(project) == [
        f'{FILE}:2 test_cases[1] ("judged") judge.api_key: environment variable JUDGE_KEY '
        "is not set"
    ]
    result = project.run("validate", "suite.yaml", env={"MULTITURN_EVAL_FIXTURES": "replay"})
    assert result.code == 0, (result.out, result.err)
    loaded = load_suite(project.root / "suite.yaml", {}, fixtures="replay")
    case = loaded.cases.materialize(1)  # read back the same way when it runs
    assert case.judge is not None and "api_key" not in case.judge.model_fields_set


def test_turn_files_must_exist_relative_to_the_suite(project: Project) -> None:
    project.write("data/chart.png", "png")
    write(
        project,
        [
            line(name="ok", turns=[{"input": "q", "files": [{"path": "data/chart.png"}]}]),
            line(name="gone", turns=[{"input": "q", "files": [{"path": "data/gone.png"}]}]),
        ],
    )
    assert errors(project) == [
        f'{FILE}:2 test_cases[1] ("gone") turns[0].files[0].path: file not found: data/gone.png'
    ]


def test_every_problem_of_the_file_at_once_bounded(project: Project) -> None:
    broken = ["{"] * (MAX_FILE_ISSUES + 30)
    write(project, [GOOD, *broken, line(name="x", tag=[])])
    found = errors(project)
    assert len(found) == MAX_FILE_ISSUES + 1
    assert (
        found[0]
        == f"{FILE}:2 test_cases[1]: the line is not JSON: Expecting property name enclosed in double quotes at column 2"
    )
    assert found[MAX_FILE_ISSUES - 1].startswith(
        f"{FILE}:{MAX_FILE_ISSUES + 1} test_cases[{MAX_FILE_ISSUES}]:"
    )
    assert (
        found[-1]
        == f"{FILE}: 31 more problems in this file (the first {MAX_FILE_ISSUES} are listed above)"
    )


def test_the_suite_files_errors_and_the_lines_errors_come_together(project: Project) -> None:
    write(
        project,
        [line(name="a", input="q", evaluations=[{"type": "code", "grader": "tests.nope:g"}]), "[]"],
        before="  instructions_file: gone.md\n",
    )
    found = errors(project)
    assert found[0] == "suite.yaml:4 agent.instructions_file: file not found: gone.md"
    assert found[1].startswith(f'{FILE}:1 test_cases[0] ("a") evaluations[0].grader: ')
    assert found[2].startswith(f"{FILE}:2 test_cases[1]: a test case is a JSON object")


def test_a_suite_level_problem_a_file_case_meets_is_located_in_the_suite(
    project: Project,
) -> None:
    write(
        project,
        [GOOD, line(name="j", turns=[{"input": "q"}])],
        before="evaluations: [{type: judge, name: tone, rubric: polite, judge: {backend: openai}}]\n",
    )
    (error,) = errors(project)
    assert error == (
        "suite.yaml:4 evaluations[0].judge.model: no judge model: name one in judge: {model: ...} "
        "(evaluation, turn, test case or the suite's top-level judge:) "
        f"(for test_cases[0].turns[0], {FILE}:1)"
    )


# --------------------------------------------------------------- the file itself


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    "hostile_file", sorted(set(FILE_KINDS) - {"too big"}), indirect=["hostile_file"]
)
def test_hostile_test_cases_files(
    project: Project, hostile_file: tuple[str, Path], command: str
) -> None:
    kind, path = hostile_file
    ref = path.relative_to(project.root)
    project.write("suite.yaml", HEAD + f"test_cases_file: '{ref}'\n")
    expected = FILE_KINDS[kind].replace("is a directory", "is a directory, not a file")
    assert errors(project, command) == [f"suite.yaml:4 test_cases_file: {expected}: {ref}"]


@pytest.fixture
def hostile_file(request: pytest.FixtureRequest, project: Project) -> Iterator[tuple[str, Path]]:
    yield request.param, _make(request.param, project.root / "hostile")


def test_a_file_of_nul_bytes_is_one_huge_line(project: Project) -> None:
    path = project.root / "zeros.jsonl"
    with path.open("wb") as handle:  # sparse: no disk space used
        handle.truncate(MAX_LINE_BYTES * 3)
    project.write("suite.yaml", HEAD + "test_cases_file: zeros.jsonl\n")
    assert errors(project) == [
        f"zeros.jsonl:1 test_cases[0]: the line is {MAX_LINE_BYTES * 3:,} bytes, over the 8 MiB "
        "limit of one test case"
    ]


def test_an_empty_file_is_no_test_case(project: Project) -> None:
    write(project, b"\n  \n\r\n")
    assert errors(project) == [
        f"suite.yaml:4 test_cases_file: holds no test case (every line is blank): {FILE}; a "
        "suite needs at least one test case"
    ]
    write(project, b"", inline="test_cases: [{input: x}]\n")
    result = project.run("validate", "suite.yaml")
    assert result.code == 0
    assert (
        result.out.splitlines()[0]
        == f"warning: suite.yaml: test_cases_file {FILE} holds no test case"
    )


def test_neither_test_cases_nor_a_file_is_an_error(project: Project) -> None:
    project.write("suite.yaml", HEAD)
    assert errors(project) == [
        "suite.yaml:1 test_cases: required key missing (or test_cases_file: a JSON Lines file "
        "of test cases)"
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gone.jsonl", "file not found: gone.jsonl"),
        ("data/gone.jsonl", "file not found: data/gone.jsonl"),
        ("''", "is a directory, not a file: ."),
        ("data", "is a directory, not a file: data"),
        ("3", "input should be a valid string"),
        ("[a.jsonl, b.jsonl]", "input should be a valid string"),
        ("{path: a.jsonl}", "input should be a valid string"),
        ("true", "input should be a valid string"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_test_cases_file_that_is_not_a_file_name_is_located(
    project: Project, value: str, expected: str, command: str
) -> None:
    (project.root / "data").mkdir()
    project.write("suite.yaml", HEAD + f"test_cases_file: {value}\n")
    assert errors(project, command) == [f"suite.yaml:4 test_cases_file: {expected}"]
    assert not (project.root / "out").exists()


def test_blank_lines_crlf_and_a_utf8_bom_are_fine(project: Project) -> None:
    data = (
        b"\xef\xbb\xbf" + GOOD.encode() + b"\r\n\r\n   \n" + line(name="second", input="q").encode()
    )
    write(project, data)  # no line ending at the end either
    loaded = load_suite(project.root / "suite.yaml", {})
    assert [(e.name, e.line) for e in loaded.cases] == [("good", 1), ("second", 4)]
    assert loaded.cases.materialize(1).input == "q"
    assert loaded.cases.materialize(0).turns is not None


def test_numbers_keep_the_text_they_were_written_with(project: Project) -> None:
    write(
        project,
        [
            '{"name": "n", "turns": [{"input": 1.10, "ground_truth": 1.10}, '
            '{"input": "q", "ground_truth": -0}, {"input": 1e3, "ground_truth": 1.5E+2}, '
            '{"input": "r", "ground_truth": 25587}]}'
        ],
    )
    case = load_suite(project.root / "suite.yaml", {}).cases.materialize(0)
    assert case.turns is not None
    assert [(t.input, t.ground_truth) for t in case.turns] == [
        ("1.10", "1.10"),
        ("q", "-0"),
        ("1e3", "1.5E+2"),
        ("r", "25587"),
    ]


def test_a_leading_zero_is_not_json(project: Project) -> None:
    error = one_error(project, ['{"input": 007}'])
    assert (
        error
        == f"{FILE}:1 test_cases[0]: the line is not JSON: Expecting ',' delimiter at column 12"
    )


def test_context_numbers_are_plain_numbers(project: Project) -> None:
    write(project, [line(name="c", input="q", context={"table": {"2009": 206588.10, "n": 7}})])
    case = load_suite(project.root / "suite.yaml", {}).cases.materialize(0)
    value = case.context["table"]["2009"]
    assert type(value) is float and value == 206588.1
    assert type(case.context["table"]["n"]) is int


# ------------------------------------------------------------------- mutants

RICH = line(
    name="rich",
    tags=["a", "b"],
    context={"table": {"2009": 206588.1, "rows": [1, 2, {"x": None}]}, "note": "caf\u00e9 \u2603"},
    turns=[
        {
            "input": "what is 2 - 1?",
            "ground_truth": 1.10,
            "expected_tools": [{"name": "subtract", "args": {"a": {"fuzzy": "2"}, "b": 1}}],
        },
        {"input": "and 3?", "ground_truth": "3", "files": []},
    ],
)


def _mutant(rng: random.Random, data: bytes) -> bytes:
    """``data`` with one of: a byte replaced, a byte removed, bytes inserted, a cut."""
    at = rng.randrange(len(data))
    kind = rng.randrange(4)
    if kind == 0:
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if kind == 1:
        return data[:at] + data[at + 1 :]
    if kind == 2:
        return (
            data[:at]
            + rng.choice([b"{", b"[", b'"', b"\\", b",", b"\xff", b"\x00", b"\r"])
            + data[at:]
        )
    return data[:at]


@pytest.mark.parametrize("seed", range(4))
def test_every_mutant_line_loads_or_is_located_on_its_own_line(project: Project, seed: int) -> None:
    """Each mutant of a good line is a line of one file between good lines: every problem
    found is located at a mutant's line and its position, and the good lines load."""
    rng = random.Random(seed)
    good = RICH.encode()
    mutants = [_mutant(rng, good).replace(b"\n", b" ") for _ in range(60)]
    data = b"".join(m + b"\n" + good + b"\n" for m in mutants)
    write(project, data)
    try:
        loaded = load_suite(project.root / "suite.yaml", {})
    except ConfigError as exc:
        issues = list(exc.issues)
    else:
        issues = []
        assert len(loaded.cases) == 2 * len(mutants)
    mutant_lines = {2 * i + 1 for i in range(len(mutants))}
    for issue in issues:
        if issue.line is None:  # the count after MAX_FILE_ISSUES
            assert issue.file == FILE and "more problems in this file" in issue.message
            continue
        assert issue.file == FILE and issue.line in mutant_lines, str(issue)
        assert issue.test_case is not None
        assert issue.test_case.startswith(f"test_cases[{issue.line - 1}]"), str(issue)
    # and every good line, read back, is the rich case
    write(project, b"".join(good + b"\n" for _ in range(3)))
    loaded = load_suite(project.root / "suite.yaml", {})
    assert [loaded.cases.materialize(i).name for i in range(3)] == ["rich"] * 3


# ------------------------------------------------------------------ running them

SCRIPTED = "agent: {backend: python, factory: 'tests.agents:scripted'}\n"


def scripted(name: str, *responses: str, tags: Sequence[str] = (), truth: str = "1") -> str:
    return line(
        name=name,
        tags=list(tags),
        context={"script": [{"response": r} for r in responses]},
        turns=[{"input": f"q{t}", "ground_truth": truth} for t in range(len(responses))],
    )


def test_a_mixed_suite_runs_the_written_cases_first_then_the_files(project: Project) -> None:
    project.write(
        "suite.yaml",
        SCRIPTED
        + "evaluations: [{type: standard, metric: equality}]\n"
        + "test_cases:\n"
        + "  - {name: written, context: {script: [{response: '1'}]}, turns: [{input: q, ground_truth: '1'}]}\n"
        + f"test_cases_file: {FILE}\n",
    )
    (project.root / "data").mkdir()
    (project.root / FILE).write_text(
        scripted("first", "1", "1") + "\n\n" + scripted("second", "1", "2", tags=["t"]) + "\n"
    )
    result = project.run("run", "suite.yaml", formats=("json", "junit", "markdown", "html"))
    assert result.code == 1, result.err
    cases = result.report["results"]
    assert [(c["index"], c["name"], c["suite"], c.get("file"), c["line"]) for c in cases] == [
        (0, "written", "suite.yaml", None, 4),
        (1, "first", "suite.yaml", FILE, 1),
        (2, "second", "suite.yaml", FILE, 3),
    ]
    assert [t["line"] for t in cases[2]["turns"]] == [3, 3]  # one line holds the whole case
    assert cases[2]["tags"] == ["t"] and cases[2]["turns"][1]["passed"] is False
    assert "file" not in cases[0]  # a written case's report is as before
    junit = (result.report_dir / "junit.xml").read_text()
    assert f'name="second" file="{FILE}"' in junit and 'line="3"' in junit
    assert 'name="written" file="suite.yaml"' in junit
    assert f"<code>{FILE}:3</code>" in (result.report_dir / "summary.md").read_text()
    assert f"{FILE}:3" in (result.report_dir / "report.html").read_text()
    console = project.run("run", "suite.yaml", "-o", "again").out
    assert f"suite::second ({FILE}:3)" in console


def test_validate_counts_the_files_cases(project: Project) -> None:
    write(
        project, [scripted("a", "1", "1"), scripted("b", "1")], inline="test_cases: [{input: x}]\n"
    )
    result = project.run("validate", "suite.yaml")
    assert result.code == 0, result.err
    assert result.out == f"ok: suite.yaml: 3 test cases (2 from {FILE}), 4 turns\n"
    write(project, [scripted("a", "1", "1")])
    assert (
        project.run("validate", "suite.yaml").out
        == f"ok: suite.yaml: 1 test case (from {FILE}), 2 turns\n"
    )


def test_dry_run_lists_the_files_cases_from_the_index(project: Project) -> None:
    write(
        project,
        [scripted("a", "1", "1", tags=["smoke"]), scripted("b", "1")],
        inline="test_cases: [{name: w, input: x}]\n",
    )
    result = project.run("run", "suite.yaml", "--dry-run", "-v")
    assert result.code == 0, result.err
    assert result.out.splitlines()[1:] == [
        "suite.yaml (python): 3 test cases, 4 turns",
        "  python calls: 4",
        "  test cases:",
        "    w (line 4): 1 turn",
        f"    a ({FILE}:1): 2 turns, tags: smoke",
        f"    b ({FILE}:2): 1 turn",
        "total: 3 test cases, 4 turns; calls per backend: python 4",
    ]
    assert not (project.root / "out").exists()


def test_duplicate_names_across_the_suite_and_the_file_are_warned_about(project: Project) -> None:
    write(
        project,
        [scripted("a", "1"), scripted("w", "1")],
        inline="test_cases: [{name: w, input: x}]\n",
    )
    result = project.run("validate", "suite.yaml")
    assert result.code == 0
    assert result.out.splitlines()[0] == (
        f"warning: {FILE}:2 test_cases[2]: duplicate test-case name 'w' (also test_cases[0]); "
        "results are told apart by position"
    )


def test_many_duplicate_names_are_counted_after_twenty(project: Project) -> None:
    write(project, [scripted("same", "1")] * 30)
    out = project.run("validate", "suite.yaml").out.splitlines()
    warnings = [w for w in out if w.startswith("warning:")]
    assert len(warnings) == 21
    assert warnings[-1] == (
        "warning: suite.yaml: 9 more test cases reuse a name (the first 20 are listed above)"
    )


def test_rerun_failed_reruns_the_files_failed_cases(project: Project) -> None:
    numeric = "evaluations: [{type: standard, metric: numeric}]\n"
    write(project, [scripted("p", "1"), scripted("f", "2"), scripted("p2", "1")], before=numeric)
    first = project.run("run", "suite.yaml", "-o", "first")
    assert first.code == 1
    write(project, [scripted("p", "1"), scripted("f", "1"), scripted("p2", "1")], before=numeric)
    again = project.run(
        "run", "suite.yaml", "--rerun-failed", "first/report.json", "--keep-passed", "-o", "again"
    )
    assert again.code == 0, again.err
    assert [(c["name"], c["outcome"]) for c in again.report["results"]] == [
        ("p", "passed"),
        ("f", "passed"),
        ("p2", "passed"),
    ]
    assert "suite::f" in again.out and "suite::p2" not in again.out  # only f ran again


def test_an_unpriced_judge_in_a_file_case_is_located_in_the_file(project: Project) -> None:
    judged = line(
        name="j",
        turns=[
            {
                "input": "q",
                "evaluations": [
                    {
                        "type": "judge",
                        "name": "tone",
                        "rubric": "polite",
                        "judge": {"model": "some-unpriced-model", "api_key": "sk-test-0123456789"},
                    }
                ],
            }
        ],
    )
    write(project, [scripted("a", "1"), judged])
    result = project.run("run", "suite.yaml", "--max-cost", "1")
    assert result.code == 2
    assert (
        f"{FILE}:2 test_cases[1].turns[0].evaluations[0]: judge model 'some-unpriced-model' has no known price"
        in result.err
    )
    dry = project.run("run", "suite.yaml", "--dry-run")
    assert "LLM-judge calls: up to 1 " in dry.out


def test_a_line_edited_during_the_run_fails_that_case_only(project: Project) -> None:
    """The factory of the first case rewrites the second case's line (same length)."""
    project.write(
        "editor_agent_jsonl.py",
        f'''
        from pathlib import Path
        from tests.agents import scripted

        def factory(ctx):
            if ctx.test_case_name == "a":
                path = Path("{FILE}")
                lines = path.read_text().splitlines(keepends=True)
                lines[1] = lines[1].replace('"q0"', '"Q0"')
                path.write_text("".join(lines))
            return scripted(ctx)
        ''',
    )
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'editor_agent_jsonl:factory'}\n"
        + f"test_cases_file: {FILE}\n",
    )
    (project.root / "data").mkdir()
    (project.root / FILE).write_text(
        "\n".join([scripted("a", "1"), scripted("b", "1"), scripted("c", "1")]) + "\n"
    )
    result = project.run(
        "run", "suite.yaml", "-p", "1", formats=("json", "junit", "markdown", "html")
    )
    assert result.code == 1, result.err
    cases = result.report["results"]
    assert [(c["name"], c["outcome"]) for c in cases] == [
        ("a", "passed"),
        ("b", "error"),
        ("c", "passed"),
    ]
    assert cases[1]["errors"] == [
        f"the test case at {FILE}:2 changed since the suite was loaded (the file was edited "
        "during the run); run again"
    ]
    assert cases[1]["turns"] == [] and cases[1]["line"] == 2 and cases[1]["file"] == FILE


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"input": "q"', "the line is not JSON: Expecting ',' delimiter at column 14"),
        (b'{"input": "q", "bogus": 1}', "bogus: unknown key"),
        (b'{"input": "${NOT_SET_ANYWHERE}"}', "input: environment variable NOT_SET_ANYWHERE"),
    ],
)
def test_the_reader_of_a_file_case_raises_a_located_case_read_error(
    project: Project, data: bytes, expected: str
) -> None:
    """What ``materialize`` does with a line that no longer loads (its bytes were checked
    first): one CaseReadError naming the file, the line and the field, which fails that case."""
    write(project, [GOOD, GOOD])
    loaded = load_suite(project.root / "suite.yaml", {})
    assert loaded.cases.file is not None
    with pytest.raises(CaseReadError) as caught:
        loaded.cases.file.reader(1, 2, data)
    assert str(caught.value).startswith(f"the test case no longer loads: {FILE}:2 test_cases[1]"), (
        str(caught.value)
    )
    assert expected in str(caught.value)


def test_a_file_case_survives_a_relative_path_and_a_changed_directory(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project, [scripted("a", "1")])
    loaded = load_suite(Path("suite.yaml"), {})
    monkeypatch.chdir(project.root / "data")
    assert loaded.cases.materialize(0).name == "a"


# --------------------------------------------------------- the index, not the models


def test_loading_the_file_never_holds_its_models_at_once(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 2_000
    write(project, [scripted(f"case-{i}", "1", "1", tags=["t"]) for i in range(count)])
    alive: list[weakref.ref[TestCase]] = []
    most = 0
    validate = loader._validate_case

    def counting(data: Any) -> TestCase:
        nonlocal most
        case = validate(data)
        alive.append(weakref.ref(case))
        most = max(most, sum(1 for ref in alive if ref() is not None))
        return case

    monkeypatch.setattr(loader, "_validate_case", counting)
    loaded = load_suite(project.root / "suite.yaml", {})
    assert len(alive) == count  # each line validated once
    assert most <= 2  # the one being checked (and the previous, not yet released)
    assert not any(ref() is not None for ref in alive)  # the loaded suite holds none
    assert len(loaded.cases) == count and loaded.suite.test_cases == []
    entries = list(loaded.cases)
    assert [e.name for e in entries[:2]] == ["case-0", "case-1"]
    assert entries[5].tags == ("t",) and entries[5].turns == 2 and entries[5].line == 6
    assert entries[5].tags is entries[6].tags  # one tuple per tag set
    case = loaded.cases.materialize(1_500)
    assert case.name == "case-1500" and len(alive) == count + 1


# -------------------------------------------------- the same selection either way


def _random_cases(rng: random.Random) -> list[dict[str, Any]]:
    names = [f"c{rng.randrange(40)}" for _ in range(rng.randrange(1, 40))]  # duplicates too
    return [
        {
            "name": name,
            "tags": rng.sample(["smoke", "slow", "x"], rng.randrange(0, 3)),
            "turns": [{"input": f"q{t}"} for t in range(rng.randrange(1, 7))],
        }
        for name in names
    ]


def _plan(
    root: Path, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any]
) -> list[tuple[int, str]] | dict[str, Any]:
    from multiturn_eval.environment import RunEnvironment
    from multiturn_eval.errors import ConfigError
    from multiturn_eval.interrupts import InterruptGuard
    from multiturn_eval.run import RunOptions, _Pipeline

    monkeypatch.chdir(root)
    pipeline = _Pipeline(
        RunOptions(**args), RunEnvironment.from_mapping({}), InterruptGuard(), None, None
    )
    try:
        (planned,) = pipeline.plan(["suite.yaml"])
    except ConfigError as exc:
        return {"error": [i.message for i in exc.issues]}
    chosen = [(i, planned.loaded.case_name(i)) for i in planned.indices]
    return {"chosen": chosen, "shard": pipeline.shard_info and pipeline.shard_info["shard"]}


@pytest.mark.parametrize("seed", range(25))
def test_selections_are_the_same_from_yaml_and_from_jsonl(
    project: Project, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    from multiturn_eval.sharding import parse_shard

    rng = random.Random(seed)
    cases = _random_cases(rng)
    yaml_dir, jsonl_dir = project.root / "yaml", project.root / "jsonl"
    yaml_dir.mkdir()
    (jsonl_dir / "data").mkdir(parents=True)
    (yaml_dir / "suite.yaml").write_text(
        SCRIPTED + "test_cases:\n" + "".join(f"  - {json.dumps(c)}\n" for c in cases)
    )
    (jsonl_dir / "suite.yaml").write_text(SCRIPTED + "test_cases_file: data/cases.jsonl\n")
    (jsonl_dir / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    total = rng.randrange(1, 5)
    selections: list[dict[str, Any]] = [
        {},
        {"pattern": f"c{rng.randrange(10)}*"},
        {"pattern": "c1"},
        {"tags": ("smoke",)},
        {"tags": ("slow", "x"), "pattern": "*"},
        *({"shard": parse_shard(f"{i}/{total}")} for i in range(1, total + 1)),
        {"shard": parse_shard(f"1/{total}"), "tags": ("x",), "repeat": 2},
    ]
    for args in selections:
        from_yaml = _plan(yaml_dir, monkeypatch, args)
        from_jsonl = _plan(jsonl_dir, monkeypatch, args)
        assert from_yaml == from_jsonl, args
