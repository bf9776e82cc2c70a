"""Hostile and near-valid suite files, hostile agent values (issue 10).

Every bad input here must end as one located configuration error (exit 2, no
traceback, no hang, bounded memory) or, for values an agent sends, as a failed
check that says why. Each family is parametrized over many members.
"""

from __future__ import annotations

import os
import re
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import yaml_source
from multiturn_eval.errors import ConfigError
from multiturn_eval.grading import matchers
from multiturn_eval.grading.matchers import RegexBudget, check_tools, fuzzy_equal, match_value
from multiturn_eval.loader import load_suite
from multiturn_eval.reading import MAX_FILE_BYTES
from multiturn_eval.suite import ExpectedTool, RegexMatcher
from multiturn_eval.types import ToolInvocation
from multiturn_eval.yaml_source import MAX_DEPTH, parse_yaml
from tests.conftest import CliResult, Project

HEAD = "agent:\n  backend: python\n  factory: tests.agents:scripted\n"
CASE = "test_cases:\n  - input: x\n"


def write(project: Project, text: str | bytes, name: str = "suite.yaml") -> Path:
    """Write exactly these bytes (Project.write dedents, which would hide tabs)."""
    path = project.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def config_error(project: Project, *argv: str) -> list[str]:
    """Run the CLI; it must exit 2 with located one-line errors and no traceback."""
    result = project.run(*argv)
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert lines[0].startswith("multiturn-eval: configuration error"), result.err
    return [line.strip() for line in lines[1:]]


def one_error(project: Project, text: str | bytes, command: str = "validate") -> str:
    write(project, text)
    errors = config_error(project, command, "suite.yaml")
    assert len(errors) == 1, errors
    return errors[0]


# ------------------------------------------------------------------- nesting depth


def _deep_block_mapping(levels: int) -> str:
    """``levels`` nested block mappings, indented below a ``deep:`` key at column 7."""
    pad = " " * 8
    return "".join(pad + "  " * i + f"k{i}:\n" for i in range(levels)) + pad + "  " * levels + "v\n"


def _deep_block_list(levels: int) -> str:
    pad = " " * 8
    return "".join(pad + "  " * i + "-\n" for i in range(levels)) + pad + "  " * levels + "v\n"


DEEP = {
    "flow lists": lambda n: "[" * n + "]" * n,
    "flow mappings": lambda n: "{a: " * n + "1" + "}" * n,
    "flow mixed": lambda n: "[{a: " * (n // 2) + "1" + "}]" * (n // 2),
    "block mappings": lambda n: "\n" + _deep_block_mapping(n),
    "block lists": lambda n: "\n" + _deep_block_list(n),
}


DEPTHS = [
    (shape, levels)
    for shape in sorted(DEEP)
    # block nesting needs indentation that grows with depth: its text is quadratic
    for levels in [MAX_DEPTH + 1, 600, 2_000, *([] if shape.startswith("block") else [200_000])]
]


@pytest.mark.parametrize(("shape", "levels"), DEPTHS)
def test_deep_nesting_is_a_located_error(project: Project, shape: str, levels: int) -> None:
    error = one_error(
        project, HEAD + CASE + "    context:\n      deep: " + DEEP[shape](levels) + "\n"
    )
    assert re.match(r"suite\.yaml:\d+: YAML syntax error: nesting deeper than 100 levels", error)


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_nesting_up_to_the_limit_loads(project: Project, shape: str) -> None:
    # the suite mapping, test_cases, the case and context are 4 levels already
    inner = MAX_DEPTH - 4 - (1 if shape == "flow mixed" else 0)
    write(project, HEAD + CASE + "    context:\n      deep: " + DEEP[shape](inner) + "\n")
    assert project.run("validate", "suite.yaml").code == 0


# --------------------------------------------------------------------------- tags

BAD_TAGS = [
    ("!!int x", "'x' is not a valid !!int value"),
    ("!!int 1.5", "'1.5' is not a valid !!int value"),
    ("!!float x", "'x' is not a valid !!float value"),
    ("!!bool x", "'x' is not a valid !!bool value"),
    ("!!bool 2", "'2' is not a valid !!bool value"),
    ("!!timestamp x", "tag !!timestamp is not supported"),
    ("!!timestamp 2024-10-21", "tag !!timestamp is not supported"),
    ("!!binary aGVsbG8=", "tag !!binary is not supported"),
    ("!!set {a, b}", "tag !!set is not supported"),
    ("!!omap [a: 1]", "tag !!omap is not supported"),
    ("!!pairs [a: 1]", "tag !!pairs is not supported"),
    ("!foo x", "tag !foo is not supported"),
    ("!foo {a: 1}", "tag !foo is not supported"),
    ("!!python/object:os.system x", "tag !!python/object:os.system is not supported"),
    ("!!python/name:os.system ''", "tag !!python/name:os.system is not supported"),
    ("!!python/tuple [1, 2]", "tag !!python/tuple is not supported"),
    ("!<tag:example.com,2024:x> y", "tag tag:example.com,2024:x is not supported"),
    ("!!merge x", "tag !!merge is not supported"),
    ("!!str [a]", "tag !!str is not supported"),
    ("!!map [a]", "tag !!map is not supported"),
    ("!!seq {a: 1}", "tag !!seq is not supported"),
]


@pytest.mark.parametrize(("value", "expected"), BAD_TAGS)
def test_bad_tags_are_located_errors(project: Project, value: str, expected: str) -> None:
    error = one_error(
        project, HEAD + "test_cases:\n  - input: x\n    context: {v: " + value + "}\n"
    )
    assert error.startswith("suite.yaml:6: YAML syntax error: "), error
    assert expected in error


@pytest.mark.parametrize(
    ("value", "loaded"),
    [
        ("!!str 123", "123"),
        ("!!int '7'", 7),
        ("!!int 0x1F", 31),
        ("!!float 1", 1.0),
        ("!!bool true", True),
        ("!!null x", None),
        ("! 12", "12"),
        ("!!map {a: 1}", {"a": 1}),
        ("!!seq [1]", [1]),
        ("=", "="),
        ("<<", "<<"),
        ("yes", "yes"),
        ("2024-10-21", "2024-10-21"),
        ("'.nan'", ".nan"),
    ],
)
def test_plain_data_tags_load(value: str, loaded: Any) -> None:
    assert parse_yaml("v: " + value + "\n").data == {"v": loaded}


# ----------------------------------------------------------------- merge keys


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("1", "int 1"),
        ("x", "str 'x'"),
        ("null", "null"),
        ("[1]", "a list holding other values"),
        ("[{a: 1}, 2]", "a list holding other values"),
        ("[[a]]", "a list holding other values"),
        ("*s", "str 'text'"),
    ],
)
def test_merge_key_needs_mappings(project: Project, value: str, got: str) -> None:
    error = one_error(
        project,
        HEAD
        + "test_cases:\n  - input: x\n    context:\n      s: &s text\n      m:\n        <<: "
        + value
        + "\n",
    )
    assert error == (
        "suite.yaml:9: YAML syntax error: the merge key '<<' takes a mapping or a list of "
        f"mappings; got {got}"
    )


def test_merge_keys_follow_the_yaml_rules() -> None:
    doc = parse_yaml(
        "base: &b {model: a, temperature: 0}\n"
        "more: &m {model: m, max_tokens: 5}\n"
        "agent:\n  <<: [*b, *m]\n  model: own\n"
    )
    # written keys win over merged ones; earlier merged mappings win over later ones
    assert doc.data["agent"] == {"model": "own", "temperature": 0, "max_tokens": 5}
    assert doc.line_of(("agent", "model")) == 5
    assert doc.line_of(("agent", "temperature")) == 4


# -------------------------------------------------------------- aliases and bombs


def _laughs(levels: int, width: int = 10, open_: str = "[", close: str = "]") -> str:
    lines = [f"l0: &l0 {open_}" + ", ".join(["lol"] * width) + close]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} {open_}" + ", ".join([f"*l{i - 1}"] * width) + close)
    return "\n".join(lines) + "\n"


BOMBS = {
    "billion laughs (lists)": "  context:\n"
    + "".join("    " + line + "\n" for line in _laughs(9).splitlines()),
    "wide and shallow": "  context:\n    a: &a ["
    + ",".join(["x"] * 1000)
    + "]\n    b: ["
    + ",".join(["*a"] * 1000)
    + "]\n",
    "billion laughs (mappings)": "  context:\n"
    + "    m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}\n"
    + "".join(
        f"    m{i}: &m{i} {{" + ", ".join(f"k{k}: *m{i - 1}" for k in range(10)) + "}\n"
        for i in range(1, 9)
    ),
    "merge keys": "  context:\n"
    + "    m0: &m0 {a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n"
    + "".join(
        f"    m{i}: &m{i} {{" + ", ".join(f"k{k}: *m{i - 1}" for k in range(10)) + "}\n"
        for i in range(1, 9)
    ),
}


@pytest.fixture(params=["validate", "run"])
def command(request: pytest.FixtureRequest) -> str:
    """Each test that takes ``command`` runs once with ``validate`` and once with ``run``."""
    name: str = request.param
    return name


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_alias_bombs_are_refused(project: Project, bomb: str, command: str) -> None:
    text = HEAD + "test_cases:\n- input: x\n" + BOMBS[bomb]
    error = one_error(project, text, command)
    assert re.match(
        r"suite\.yaml:\d+: YAML syntax error: aliases repeat more than [\d,]+ nodes \(at alias \*\w+\)",
        error,
    ), error


def test_aliases_within_the_budget_load(project: Project) -> None:
    evals = "  - &evals [{type: standard, metric: equality}]\n"
    cases = "".join(
        f"  - {{input: q{i}, ground_truth: a, evaluations: *evals}}\n" for i in range(300)
    )
    write(
        project,
        HEAD
        + "test_cases:\n"
        + evals.replace("  - &evals", "  - input: x\n    evaluations: &evals")
        + cases,
    )
    assert project.run("validate", "suite.yaml").code == 0


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ("{a: *nothing}", "alias *nothing refers to no anchor: &nothing must be defined before it"),
        ("{a: *later, b: &later 1}", "alias *later refers to no anchor"),
        ("&self [*self]", "alias *self is inside the node it refers to"),
        ("&self {a: {b: *self}}", "alias *self is inside the node it refers to"),
        ("{a: &k [1], *k : 2}", "mapping keys must be plain scalars, got list (alias *k)"),
    ],
)
def test_bad_aliases_are_located_errors(project: Project, context: str, expected: str) -> None:
    error = one_error(project, HEAD + CASE + "    context: " + context + "\n")
    assert error.startswith("suite.yaml:6: YAML syntax error: ")
    assert expected in error


@pytest.mark.parametrize(
    "values",
    [
        "[" + ", ".join(["1"] * 3_000) + "]",
        "{" + ", ".join(f"k{i}: {i}" for i in range(3_000)) + "}",
        "\n" + "".join("        - [a, b, c]\n" for i in range(1_500)),
    ],
)
def test_a_file_with_too_many_values_is_refused(
    project: Project, monkeypatch: pytest.MonkeyPatch, values: str
) -> None:
    monkeypatch.setattr(yaml_source, "MAX_NODES", 1_000)  # 2,000,000 takes seconds to reach
    error = one_error(project, HEAD + CASE + "    context:\n      many: " + values + "\n")
    assert re.fullmatch(
        r"suite\.yaml:\d+: YAML syntax error: the file holds more than 1,000 values \(scalars, "
        r"lists and mappings\) plus one per 8 characters of text \([\d,]+ values in its first "
        r"[\d,]+ characters\); split it into several suite files, or put the test cases in a "
        r"JSON Lines file \(test_cases_file:\)",
        error,
    ), error


@pytest.mark.parametrize("cases", [40, 400])
def test_a_large_suite_loads_past_the_fixed_count_of_values(
    project: Project, monkeypatch: pytest.MonkeyPatch, cases: int
) -> None:
    """Written out case by case (the bench's six-turn case: about 9 characters a value), a
    suite may hold far more than MAX_NODES values; only a file dense with values is refused."""
    monkeypatch.setattr(yaml_source, "MAX_NODES", 1_000)
    turn = (
        "      - input: what is the difference in year {t}?\n"
        '        ground_truth: "25587"\n'
        "        expected_tools:\n"
        "          - {{name: subtract, args: {{a: {{fuzzy: '206,588'}}, b: 181001}}}}\n"
    )
    body = "".join(
        f"  - name: case-{i}\n    tags: [bench]\n    turns:\n"
        + "".join(turn.format(t=t) for t in range(6))
        for i in range(cases)
    )
    text = HEAD + "test_cases:\n" + body
    document = parse_yaml(text)
    assert len(document.data["test_cases"]) == cases
    assert document.data["test_cases"][-1]["turns"][5]["expected_tools"][0]["args"]["b"] == 181001
    assert 116 * cases > 1_000  # values: past the fixed count
    write(project, text)
    loaded = load_suite(project.root / "suite.yaml", {})
    assert [loaded.case_name(i) for i in range(len(loaded.cases))] == [
        f"case-{i}" for i in range(cases)
    ]
    many = "    context: {many: [" + ", ".join(["1"] * 2_000) + "]}\n"
    dense = text.replace("  - name: case-0\n", "  - name: case-0\n" + many, 1)
    with pytest.raises(yaml_source.YamlSyntaxError, match="plus one per 8 characters"):
        parse_yaml(dense)


def _composed_lines(node: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    """PyYAML's own node tree: each value's line (a mapping's value: its key's line)."""
    import yaml

    if len(path) > yaml_source.LINE_DEPTH:
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "<<":
                return  # merge keys: not in this oracle
            child = (*path, yaml.safe_load(yaml.serialize(key)))
            out[child] = key.start_mark.line + 1
            _composed_lines(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[(*path, i)] = item.start_mark.line + 1
            _composed_lines(item, (*path, i), out)


YAML_FILES = sorted(
    p
    for root in (Path(__file__).parent / "data", Path(__file__).parents[1] / "examples")
    for p in root.rglob("*.yaml")
    if "&" not in p.read_text(encoding="utf-8")  # no anchors (aliases share nodes)
)


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_every_value_keeps_its_line_although_most_get_no_entry(path: Path) -> None:
    """A value on its parent's line is not indexed (line_of gives the ancestor's); every
    value's line is still the one PyYAML's node tree gives it."""
    import yaml

    text = path.read_text(encoding="utf-8")
    document = parse_yaml(text)
    expected: dict[tuple[Any, ...], int] = {(): yaml.compose(text).start_mark.line + 1}
    _composed_lines(yaml.compose(text), (), expected)
    assert {p: document.line_of(p) for p in expected} == expected
    assert len(document.lines) <= len(expected)


# ------------------------------------------------------------------ numbers, keys


@pytest.mark.parametrize(
    "number",
    [
        "9" * 5_000,
        "9" * 101,
        "0x" + "f" * 200,
        "1" + ":59" * 200_000,
        "1." + "5" * 200,
        "-" + "1_0" * 60,
    ],
)
def test_huge_numbers_are_refused(project: Project, number: str) -> None:
    error = one_error(project, HEAD + "test_cases:\n  - input: " + number + "\n")
    assert error == (
        f"suite.yaml:5: YAML syntax error: a number written with {len(number):,} characters is "
        "too long (at most 100); quote it to keep it as text"
    )


def test_a_long_quoted_number_is_text(project: Project) -> None:
    write(project, HEAD + "test_cases:\n  - input: x\n    ground_truth: '" + "9" * 5_000 + "'\n")
    assert project.run("validate", "suite.yaml").code == 0


@pytest.mark.parametrize(
    ("body", "line", "expected"),
    [
        (
            "? [a, b]\n: 1\n" + CASE,
            4,
            "YAML syntax error: mapping keys must be plain scalars, got a list",
        ),
        (
            "? {a: 1}\n: 1\n" + CASE,
            4,
            "YAML syntax error: mapping keys must be plain scalars, got a mapping",
        ),
        ("[a]: 1\n" + CASE, 4, "YAML syntax error: mapping keys must be plain scalars, got a list"),
        (".nan: 1\n" + CASE, 4, "YAML syntax error: a mapping key cannot be NaN; quote it"),
        (CASE + "    context: {.NaN: 1}\n", 6, "YAML syntax error: a mapping key cannot be NaN"),
        ("1: 2\n" + CASE, 4, "key 1 is a number, but keys here must be text; quote it ('1':)"),
        ("1.5: 2\n" + CASE, 4, "key 1.5 is a number, but keys here must be text"),
        ("true: 2\n" + CASE, 4, "key True is a boolean, but keys here must be text"),
        ("~: 2\n" + CASE, 4, "key None is null, but keys here must be text"),
        (CASE + "    context: {2009: 1}\n", 6, "test_cases[0] context: key 2009 is a number"),
        (
            "test_cases:\n  - turns:\n      - input: x\n        7: y\n",
            7,
            "test_cases[0] turns[0]: key 7 is a number",
        ),
        (CASE + "    input: y\n", 6, "YAML syntax error: duplicate key 'input' (first at line 5)"),
        (
            CASE + "    context: {1: a, 1.0: b}\n",
            6,
            "YAML syntax error: duplicate key 1.0 (first at line 6)",
        ),
    ],
)
def test_bad_keys_are_located_errors(project: Project, body: str, line: int, expected: str) -> None:
    error = one_error(project, HEAD + body)
    assert error.startswith(f"suite.yaml:{line}"), error
    assert expected in error, error


def test_numbers_as_keys_deep_inside_context_still_load(project: Project) -> None:
    # ConvFinQA tables: {2009: {...}} below the first level of context stays as it was
    write(project, HEAD + CASE + "    context: {table: {2009: 206588}}\n")
    assert project.run("validate", "suite.yaml").code == 0


# ----------------------------------------------------- syntax errors, tabs, bytes


@pytest.mark.parametrize(
    ("body", "line", "column"),
    [
        ("test_cases:\n\t- input: x\n", 5, 1),
        ("test_cases:\n  - input: x\n\t  ground_truth: y\n", 6, 1),
        ("test_cases:\n  - input: x\n  \tground_truth: y\n", 6, 3),
        ("test_cases:\n  - turns:\n    \t- input: x\n", 6, 5),
    ],
)
def test_tab_indentation_is_named(project: Project, body: str, line: int, column: int) -> None:
    error = one_error(project, HEAD + body)
    assert error.startswith(
        f"suite.yaml:{line}: YAML syntax error: a tab character at line {line}, column {column}: "
        "YAML indentation must use spaces"
    )


@pytest.mark.parametrize(
    ("body", "line", "expected"),
    [
        (
            'test_cases:\n  - input: "abc\n    turns: x\n',
            7,
            "while scanning a quoted scalar that starts at line 5, column 12: "
            "found unexpected end of stream at line 7, column 1",
        ),
        (
            "test_cases:\n  - input: [unclosed\n  - input: y\n",
            6,
            "while parsing a flow sequence that starts at line 5, column 12: "
            "did not find expected ',' or ']' at line 6, column 10",
        ),
        (
            "test_cases:\n  - input: {a: 1\n\n\n  - input: y\n",
            8,
            "while parsing a flow mapping that starts at line 5, column 12: "
            "did not find expected ',' or '}' at line 8, column 10",
        ),
        ("test_cases:\n  - input: x\n   bad: y\n", 6, "at line 6, column "),
        (
            "test_cases: *\n",
            4,
            "while scanning an alias: did not find expected alphabetic or numeric character at line 4, column 14",
        ),
        (
            "test_cases: &\n",
            4,
            "while scanning an anchor: did not find expected alphabetic or numeric character at line 4, column 14",
        ),
        ("test_cases:\n  - input: 'a' b\n", 5, "at line 5, column "),
        (
            "test_cases:\n  - input: x\n%TAG ! x\n",
            7,
            "did not find expected <document start> at line 7, column 1",
        ),
    ],
)
def test_syntax_errors_name_start_and_stop(
    project: Project, body: str, line: int, expected: str
) -> None:
    error = one_error(project, HEAD + body)
    assert error.startswith(f"suite.yaml:{line}: YAML syntax error: "), error
    assert expected in error, error


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\ufffe", "\x85\x00"])
def test_control_characters_are_located(project: Project, char: str) -> None:
    error = one_error(project, HEAD + "test_cases:\n  - input: é" + char + "\n")
    shown = f"U+{ord(char.strip(chr(0x85)) or char):04X}"
    assert error.startswith(
        f"suite.yaml:5: YAML syntax error: character {shown} at line 5, column "
    ), error


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (HEAD.encode() + b"test_cases:\n  - input: \xff\xfe\n", "byte 0xff at line 5, column 12"),
        (HEAD.encode() + b"test_cases:\n  - input: caf\xc3\n", "byte 0xc3 at line 5, column 15"),
        (
            HEAD.encode() + b"test_cases:\n  - input: \xed\xa0\x80\n",
            "byte 0xed at line 5, column 12",
        ),
        ("\ufeff".encode("utf-16-le") + (HEAD + CASE).encode("utf-16-le"), "it is UTF-16"),
        ((HEAD + CASE).encode("utf-16"), "it is UTF-16"),
        (
            HEAD.encode() + b"test_cases:\n  - input: x\n" + b"\x80" * 10,
            "byte 0x80 at line 6, column 1",
        ),
    ],
)
def test_invalid_utf8_names_the_place(project: Project, data: bytes, expected: str) -> None:
    error = one_error(project, data)
    assert error.startswith("suite.yaml: is not UTF-8 text: "), error
    assert expected in error, error


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff" + HEAD + CASE,  # a UTF-8 byte-order mark
        (HEAD + CASE).replace("\n", "\r\n"),  # Windows line ends
        (HEAD + CASE).replace("\n", "\r"),  # old Mac line ends
        "---\n" + HEAD + CASE + "...\n",  # explicit document markers
        "%YAML 1.1\n---\n" + HEAD + CASE,
        "# only a comment first\n\n" + HEAD + CASE + "# and last",
        HEAD + CASE.rstrip("\n"),  # no final newline
    ],
)
def test_near_valid_encodings_load(project: Project, text: str) -> None:
    write(project, text)
    result = project.run("validate", "suite.yaml")
    assert result.code == 0, result.err
    assert result.out == "ok: suite.yaml: 1 test case, 1 turns\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (HEAD + CASE + "---\nname: other\n", 6),
        (HEAD + CASE + "---\n", 6),
        ("---\n" + HEAD + CASE + "--- \n" + HEAD + CASE, 7),
        (HEAD + CASE + "...\n---\n", 7),
    ],
)
def test_several_documents_are_one_error(project: Project, text: str, line: int) -> None:
    error = one_error(project, text)
    assert error == (
        f"suite.yaml:{line}: YAML syntax error: a suite file holds one YAML document; a second "
        f"one starts at line {line} (remove the '---' or split the file)"
    )


@pytest.mark.parametrize(
    "text", ["", "\n\n", "# nothing\n", "---\n", "~\n", "42\n", "- a\n", "'text'\n"]
)
def test_not_a_mapping_at_all(project: Project, text: str) -> None:
    error = one_error(project, text)
    assert error.startswith("suite.yaml:1: a suite file is a YAML mapping"), error


# ------------------------------------------------------------ references in words

REFERENCE_FIELDS = [
    ("agent.factory", "agent:\n  backend: python\n  factory: {ref}\n" + CASE, 3),
    (
        "agent.tools[0].function",
        HEAD + "  tools:\n    - function: {ref}\n" + CASE,
        5,
    ),
    (
        "evaluations[0].grader",
        HEAD + "evaluations:\n  - type: code\n    grader: {ref}\n" + CASE,
        6,
    ),
]


@pytest.mark.parametrize(
    "ref",
    [
        "tests.agents.scripted",
        "tests/agents.py:scripted",
        "scripted",
        "a:b:c",
        "a b:c",
        "':x'",
        "'x:'",
        "'tests.agents:'",
        "'mod:func()'",
    ],
)
@pytest.mark.parametrize(("field", "template", "line"), REFERENCE_FIELDS)
def test_callable_references_are_explained_in_words(
    project: Project, field: str, template: str, line: int, ref: str
) -> None:
    error = one_error(project, template.replace("{ref}", ref))
    shown = ref.strip("'")
    assert error == (
        f"suite.yaml:{line} {field}: must be of the form module.path:callable "
        f"(e.g. my_agents.support:make_session); got {shown!r}"
    ), error


def test_http_url_is_explained_in_words(project: Project) -> None:
    error = one_error(project, "agent:\n  backend: http\n  url: ftp://x\n" + CASE)
    assert error == "suite.yaml:3 agent.url: must start with http:// or https://; got 'ftp://x'"


# --------------------------------------------------------------- hostile files


def _make(kind: str, path: Path) -> Path:
    """Create a hostile file system entry at ``path``; return the path to give."""
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink loop":
        other = path.with_name(path.name + ".other")
        path.symlink_to(other)
        other.symlink_to(path)
    elif kind == "dangling symlink":
        path.symlink_to(path.with_name("gone"))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "/dev/urandom":
        path.symlink_to("/dev/urandom")
    elif kind == "too big":
        with path.open("wb") as handle:  # sparse: no disk space used
            handle.truncate(MAX_FILE_BYTES + 1)
    elif kind == "not a directory":
        path.write_text("x")
        return path / "inside"
    return path


FILE_KINDS = {
    "directory": "is a directory",
    "symlink loop": "is a loop of symbolic links",
    "dangling symlink": "file not found",
    "fifo": "is a FIFO (named pipe), not a regular file",
    "socket": "is a socket, not a regular file",
    "/dev/zero": "is a character device, not a regular file",
    "/dev/urandom": "is a character device, not a regular file",
    "too big": f"is {MAX_FILE_BYTES + 1:,} bytes, over the 64 MiB limit",
    "not a directory": "file not found (a part of the path is not a directory)",
}


@pytest.fixture(params=sorted(FILE_KINDS))
def hostile_file(request: pytest.FixtureRequest, project: Project) -> Iterator[tuple[str, Path]]:
    """Each kind of :data:`FILE_KINDS`, made: (the kind, its path)."""
    kind = request.param
    yield kind, _make(kind, project.root / "hostile")


def test_hostile_suite_paths(
    project: Project, hostile_file: tuple[str, Path], command: str
) -> None:
    kind, path = hostile_file
    errors = config_error(project, command, str(path.relative_to(project.root)))
    expected = FILE_KINDS[kind].replace("is a directory", "is a directory, not a suite file")
    expected = expected.replace("file not found", "suite file not found")
    shown = "gone" if kind == "dangling symlink" else path.relative_to(project.root)  # resolved
    assert errors == [f"{shown}: {expected}"]


def test_hostile_instructions_file(
    project: Project, hostile_file: tuple[str, Path], command: str
) -> None:
    kind, path = hostile_file
    ref = path.relative_to(project.root)
    write(project, HEAD + f"  instructions_file: {ref}\n" + CASE)
    errors = config_error(project, command, "suite.yaml")
    expected = FILE_KINDS[kind].replace("is a directory", "is a directory, not a file")
    assert errors == [f"suite.yaml:4 agent.instructions_file: {expected}: {ref}"]


def test_hostile_turn_files(project: Project, hostile_file: tuple[str, Path], command: str) -> None:
    kind, path = hostile_file
    ref = path.relative_to(project.root)
    write(
        project,
        HEAD + f"test_cases:\n  - turns:\n      - input: x\n        files: [{{path: '{ref}'}}]\n",
    )
    errors = config_error(project, command, "suite.yaml")
    expected = FILE_KINDS[kind].replace("is a directory", "is a directory, not a file")
    assert errors == [f"suite.yaml:7 test_cases[0] turns[0].files[0].path: {expected}: {ref}"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_suite(project: Project) -> None:
    path = write(project, HEAD + CASE)
    path.chmod(0)
    try:
        assert config_error(project, "validate", "suite.yaml") == [
            "suite.yaml: cannot read: permission denied"
        ]
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_suite_through_a_symlink_loads(project: Project) -> None:
    write(project, HEAD + CASE, "real.yaml")
    (project.root / "link.yaml").symlink_to("real.yaml")
    result = project.run("validate", "link.yaml")
    assert result.code == 0, result.err


def test_load_suite_raises_config_error_naming_the_file(project: Project) -> None:
    path = _make("fifo", project.root / "pipe.yaml")
    with pytest.raises(ConfigError) as caught:
        load_suite(path, {})
    assert [i.file for i in caught.value.issues] == ["pipe.yaml"]


# --------------------------------------------------------------- regex matchers

EVIL = [
    ("(a+)+$", "a" * 50_000 + "b"),
    ("(a|aa)+$", "a" * 50_000 + "b"),
    ("(x+x+)+y", "x" * 50_000),
    ("(a|a?)+$", "a" * 50_000 + "b"),
    ("(?:a+)+b", "a" * 50_000),
]


@pytest.fixture
def quick_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shorter bounds so the family runs fast; the messages say which bound applied."""
    monkeypatch.setattr(matchers, "REGEX_TIMEOUT", 0.05)
    monkeypatch.setattr(matchers, "REGEX_TURN_BUDGET", 0.2)


def _call(name: str, **args: Any) -> ToolInvocation:
    return ToolInvocation(name=name, args=args)


@pytest.mark.parametrize(("pattern", "value"), EVIL)
def test_runaway_regex_fails_the_check_and_says_so(
    quick_regex: None, pattern: str, value: str
) -> None:
    expected = ExpectedTool(name="lookup", args={"q": {"regex": pattern}})
    matched, details = check_tools([expected], [_call("lookup", q=value)])
    assert matched is False
    reason = details[0].reason or ""
    assert f"did not finish within 0.05 s on a {len(value):,}-character value" in reason, reason
    assert reason.startswith("lookup: no call matched; closest call #1: arg 'q' regex /")
    assert match_value(RegexMatcher(regex=pattern), value) is False


def test_runaway_regex_message_with_the_default_bound() -> None:
    outcome = RegexBudget().run(RegexMatcher(regex="(a+)+$"), "a" * 50_000 + "b")
    assert outcome == (
        "regex /(a+)+$/ did not finish within 1 s on a 50,001-character value (a pattern with "
        "nested repeats, such as (a+)+, can take exponential time)"
    )


def test_a_turn_has_one_regex_budget(quick_regex: None) -> None:
    expected = ExpectedTool(name="lookup", args={"q": {"regex": "(a+)+$"}}, count=20)
    calls = [_call("lookup", q="a" * 50_000 + "b") for _ in range(20)]
    matched, details = check_tools([expected], calls)
    assert matched is False
    assert "expected at least 20 matching calls, got 0" in (details[0].reason or "")
    budget = RegexBudget()
    outcomes = [budget.run(RegexMatcher(regex="(a+)+$"), "a" * 50_000 + "b") for _ in range(20)]
    skipped = [o for o in outcomes if isinstance(o, str) and "was not tried" in o]
    assert skipped, outcomes  # the budget ran out before the 20th match
    assert skipped[-1] == (
        "regex /(a+)+$/ was not tried on a 50,001-character value: this turn's regex matches "
        "already used their 0.2 s budget"
    )


@pytest.mark.parametrize(
    ("pattern", "value", "verdict"),
    [
        ("181001(\\.0+)?", "181001.00", True),
        ("181001(\\.0+)?", "181001.5", False),
        ("[[a]", "[", True),  # re semantics (no nested sets)
        ("[a&&b]", "&", True),  # re semantics (no set operations)
        ("a|ab", "ab", True),  # a full match tries every branch
        ("(?i)ABC", "abc", True),
        ("\\d+", "٣٤", True),  # Unicode digits, as in re
        ("a" * 1000, "a" * 1000, True),
    ],
)
def test_regex_keeps_re_semantics(pattern: str, value: str, verdict: bool) -> None:
    assert match_value(RegexMatcher(regex=pattern), value) is verdict
    assert (re.fullmatch(pattern, value) is not None) is verdict


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("(181001", "cannot compile: missing ), unterminated subpattern at position 0"),
        (
            "(?:a{1000}){1000}",
            "cannot compile: its counted repeats unroll to more than 100,000 items",
        ),
        ("(?:(?:a{65535}){65535}){65535}", "cannot compile: its counted repeats unroll"),
        ("(?:x{1000}|y){200}", "cannot compile: its counted repeats unroll"),
        ("(?=(?:a{400}){400})", "cannot compile: its counted repeats unroll"),
        ("a{4294967296}", "cannot compile: the repetition number is too large"),
        ("(" * 5_000 + ")" * 5_000, "cannot compile: its groups nest too deeply"),
        ("\\p{Greek}", "cannot compile: bad escape \\p at position 0"),
        ("(?<=a+)b", "cannot compile: look-behind requires fixed-width pattern"),
        (
            "[[:alpha:]]",
            "cannot compile: Possible nested set at position 1; Python's re and the regex engine",
        ),
    ],
)
def test_hostile_patterns_are_refused_at_load(
    project: Project, pattern: str, expected: str
) -> None:
    quoted = pattern.replace("'", "''")
    error = one_error(
        project,
        HEAD + "test_cases:\n  - turns:\n      - input: x\n        expected_tools:\n"
        f"          - {{name: lookup, args: {{q: {{regex: '{quoted}'}}}}}}\n",
    )
    assert error.startswith(
        "suite.yaml:8 test_cases[0] turns[0].expected_tools[0].args.q.regex: " + expected
    ), error


def test_runaway_regex_in_a_real_run(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matchers, "REGEX_TIMEOUT", 0.05)
    value = "a" * 50_000 + "b"
    write(
        project,
        HEAD
        + "test_cases:\n  - name: evil\n    context:\n      script:\n"
        + f"        - {{response: ok, tools: [{{name: lookup, args: {{q: '{value}'}}}}]}}\n"
        + "    turns:\n      - input: x\n        expected_tools:\n"
        + "          - {name: lookup, args: {q: {regex: '(a+)+$'}}}\n",
    )
    result: CliResult = project.run("run", "suite.yaml")
    assert result.code == 1, result.err
    turn = result.report["results"][0]["turns"][0]
    assert turn["passed"] is False and turn["tools_matched"] is False
    reason = turn["arg_match_details"][0]["reason"]
    assert "regex /(a+)+$/ did not finish within 0.05 s on a 50,001-character value" in reason


# ------------------------------------------------------------ fuzzy separators

SEPARATORS = {
    "comma": ",",
    "underscore": "_",
    "space": " ",
    "no-break space": "\u00a0",
    "narrow no-break space": "\u202f",
}


@pytest.mark.parametrize("sep", sorted(SEPARATORS))
@pytest.mark.parametrize(
    ("grouped", "plain"),
    [
        ("206{s}588", "206588"),
        ("1{s}234{s}567", "1234567"),
        ("-25{s}587", "-25587"),
        ("1{s}234.5", "1234.5"),
        ("12{s}000%", "120"),
        ("999{s}999{s}999{s}999", "999999999999"),
    ],
)
def test_fuzzy_reads_thousands_separators(sep: str, grouped: str, plain: str) -> None:
    written = grouped.replace("{s}", SEPARATORS[sep])
    assert fuzzy_equal(plain, written) and fuzzy_equal(written, plain)
    assert fuzzy_equal(written.replace(SEPARATORS[sep], ","), written)


@pytest.mark.parametrize("sep", ["space", "no-break space"])
@pytest.mark.parametrize(
    ("written", "other"),
    [
        ("12{s}34", "1234"),  # not a group of three: two numbers
        ("2009{s}206588", "2009206588"),  # a year beside a number
        ("206{s}5880", "2065880"),
        ("206{s}{s}588", "206588"),  # two spaces are not a separator
        ("206{s}", "206"),  # trailing space is whitespace, not a separator: equal
    ],
)
def test_fuzzy_spaces_are_separators_only_between_groups_of_three(
    sep: str, written: str, other: str
) -> None:
    text = written.replace("{s}", SEPARATORS[sep])
    assert fuzzy_equal(other, text) is (written == "206{s}")
