"""Response checks: contains, not_contains, regex, json (issue 11 part 1).

A matrix of (check, reply) -> (verdict, reason fragment), bad configurations as
located config errors (exit 2), and the checks end to end through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.grading.matchers import RegexBudget
from multiturn_eval.grading.response_checks import evaluate_response_check, schema_validator
from multiturn_eval.suite import StandardEvaluation
from tests.conftest import Project


def check(metric: str, **options: Any) -> StandardEvaluation:
    return StandardEvaluation.model_validate({"type": "standard", "metric": metric, **options})


ORDER_SCHEMA = {
    "type": "object",
    "required": ["order_id", "items"],
    "properties": {
        "order_id": {"type": "string", "pattern": "^A[0-9]+$"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku", "price"],
                "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
            },
        },
        "status": {"enum": ["open", "refunded"]},
    },
    "additionalProperties": False,
}

# (options, reply, passed, reason fragment)
MATRIX: list[tuple[dict[str, Any], str, bool, str]] = [
    # ---- contains: case, lists, any/all, unicode
    (
        {"metric": "contains", "value": "refund"},
        "Your refund is on its way.",
        True,
        "found 'refund' at character 6: 'Your «refund» is on its way.'",
    ),
    (
        {"metric": "contains", "value": "Refund"},
        "Your refund is on its way.",
        False,
        "expected the reply to contain 'Refund'; reply: 'Your refund is on its way.'; it would pass with case_insensitive: true",
    ),
    (
        {"metric": "contains", "value": "Refund", "case_insensitive": True},
        "Your REFUND is on its way.",
        True,
        "found 'Refund' (ignoring case) at character 6: 'Your «REFUND» is",
    ),
    (
        {"metric": "contains", "value": ["refund", "14 days"]},
        "A refund takes 14 days.",
        True,
        "found all of 'refund', '14 days'; the first at character 3",
    ),
    (
        {"metric": "contains", "value": ["refund", "30 days", "policy"]},
        "A refund takes 14 days.",
        False,
        "expected the reply to contain '30 days', 'policy' (2 of 3 texts)",
    ),
    (
        {"metric": "contains", "value": ["30 days", "14 days"], "mode": "any"},
        "A refund takes 14 days.",
        True,
        "found '14 days' at character 16",
    ),
    (
        {"metric": "contains", "value": ["30 days", "60 days"], "mode": "any"},
        "A refund takes 14 days.",
        False,
        "expected the reply to contain one of '30 days', '60 days'; none found",
    ),
    (
        {"metric": "contains", "value": "café"},
        "Visit the cafe\u0301 today",
        True,
        "found 'café' at character 11",
    ),  # NFC: composed == decomposed
    (
        {"metric": "contains", "value": "straße", "case_insensitive": True},
        "WELCOME TO STRASSE 5",
        True,
        "(ignoring case) at character 12: 'WELCOME TO «STRASSE» 5'",
    ),  # full case folding
    (
        {"metric": "contains", "value": "ÉCOLE", "case_insensitive": True},
        "une école",
        True,
        "«école»",
    ),
    (
        {"metric": "contains", "value": "日本"},
        "東京は日本の首都です",
        True,
        "found '日本' at character 4: '東京は«日本»の首都です'",
    ),
    (
        {"metric": "contains", "value": "refund"},
        "",
        False,
        "expected the reply to contain 'refund'; the reply is empty",
    ),
    ({"metric": "contains", "value": 14}, "It takes 14 days", True, "found '14'"),
    ({"metric": "contains", "value": "x" * 5}, "a" * 300, False, "reply: '" + "a" * 100 + "…'"),
    # ---- not_contains
    (
        {"metric": "not_contains", "value": "password"},
        "I cannot help with that.",
        True,
        "none of 'password' in the reply",
    ),
    (
        {"metric": "not_contains", "value": "password"},
        "Sure, your password is hunter2, keep it safe and do not share it",
        False,
        "expected the reply not to contain 'password'; found 'password' at character 12: 'Sure, your «password» is hunter2, keep it safe and do not sha…'",
    ),
    (
        {"metric": "not_contains", "value": ["ssn", "password"], "case_insensitive": True},
        "Your PASSWORD is set",
        False,
        "expected the reply not to contain 'password' (ignoring case) (1 of 2 texts); found 'password' at character 6",
    ),
    (
        {"metric": "not_contains", "value": ["ssn", "password"], "mode": "any"},
        "Your password is set",
        True,
        "'ssn' absent (mode: any)",
    ),
    (
        {"metric": "not_contains", "value": ["ssn", "password"], "mode": "any"},
        "ssn and password",
        False,
        "expected at least one of 'ssn', 'password' to be absent; all appear, first 'ssn' at character 1",
    ),
    (
        {"metric": "not_contains", "value": "σοφία", "case_insensitive": True},
        "Η ΣΟΦΊΑ",
        False,
        "found 'σοφία' at character 3: 'Η «ΣΟΦΊΑ»'",
    ),
    # ---- regex
    (
        {"metric": "regex", "pattern": r"\b\d{2} days\b"},
        "A refund takes 14 days.",
        True,
        "/\\b\\d{2} days\\b/ matched at character 16: 'A refund takes «14 days».'",
    ),
    (
        {"metric": "regex", "pattern": r"order #A\d+"},
        "I found your order.",
        False,
        "expected a match for /order #A\\d+/ in the reply: 'I found your order.'",
    ),
    (
        {"metric": "regex", "pattern": r"ORDER #a\d+", "case_insensitive": True},
        "see order #A17",
        True,
        "/ORDER #a\\d+/i matched at character 5",
    ),
    (
        {"metric": "regex", "pattern": r"\d+", "fullmatch": True},
        "42",
        True,
        "the whole reply matches /\\d+/",
    ),
    (
        {"metric": "regex", "pattern": r"\d+", "fullmatch": True},
        "it is 42",
        False,
        "expected the whole reply to match /\\d+/ (fullmatch: true); reply: 'it is 42'; it matches only part of it, at character 7: 'it is «42»'",
    ),
    ({"metric": "regex", "pattern": r"^\w+$"}, "ünïcödé", True, "matched at character 1"),
    (
        {"metric": "regex", "pattern": "x"},
        "",
        False,
        "expected a match for /x/; the reply is empty",
    ),
    # ---- json: syntax, fences
    ({"metric": "json"}, '{"a": 1}', True, "the reply is valid JSON (an object)"),
    ({"metric": "json"}, "[1, 2]", True, "valid JSON (an array)"),
    (
        {"metric": "json"},
        '{"a": 1,, "b": 2}',
        False,
        'expected JSON; not valid JSON: Expecting property name enclosed in double quotes at line 1, column 9: \'{"a": 1,«,» "b": 2}\'',
    ),
    ({"metric": "json"}, '{"a": NaN}', False, "not valid JSON: NaN is not JSON"),
    ({"metric": "json"}, "", False, "expected JSON; the reply is empty"),
    (
        {"metric": "json"},
        'Here:\n```json\n{"a": 1}\n```',
        False,
        "set strip_code_fence: true to parse its inside",
    ),
    (
        {"metric": "json", "strip_code_fence": True},
        'Here:\n```json\n{"a": 1}\n```\nthanks',
        True,
        "valid JSON (inside the fenced block) (an object)",
    ),
    (
        {"metric": "json", "strip_code_fence": True},
        '```\n{"a": }\n```',
        False,
        "expected JSON (inside the fenced block); not valid JSON: Expecting value at line 1, column 7: '```\\n{\"a\": «}»\\n```'",
    ),
    (
        {"metric": "json", "strip_code_fence": True},
        '{"no": "fence"}',
        True,
        "the reply is valid JSON (an object)",
    ),
    (
        {"metric": "json", "strip_code_fence": True},
        "```json\n```",
        False,
        "expected JSON; the fenced block is empty",
    ),
    # ---- json: schema failures name the path
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"order_id": "A17", "items": [{"sku": "k", "price": 3.5}]}',
        True,
        "matches the schema",
    ),
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"order_id": "A17", "items": [{"sku": "k", "price": 3}, {"sku": "m", "price": "3"}]}',
        False,
        "does not match the schema: at $.items[1].price: '3' is not of type 'number'",
    ),
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"order_id": "B1", "items": []}',
        False,
        "at $.order_id: 'B1' does not match '^A[0-9]+$'",
    ),
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"items": []}',
        False,
        "at $: 'order_id' is a required property",
    ),
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"order_id": "A1", "items": [], "status": "lost", "x": 1}',
        False,
        "(and 1 more schema error)",
    ),
    (
        {"metric": "json", "schema": ORDER_SCHEMA},
        '{"order_id": "A1", "items": [{"price": 1}]}',
        False,
        "at $.items[0]: 'sku' is a required property",
    ),
    (
        {
            "metric": "json",
            "schema": {"type": "object", "properties": {"e-mail": {"type": "string"}}},
        },
        '{"e-mail": 5}',
        False,
        "at $[\"e-mail\"]: 5 is not of type 'string'",
    ),
    (
        {"metric": "json", "schema": {"type": "string", "format": "email"}},
        '"not-an-email"',
        False,
        "is not a 'email'",
    ),
]


@pytest.mark.parametrize(
    ("options", "reply", "passed", "fragment"),
    MATRIX,
    ids=[f"{i}-{m[0]['metric']}" for i, m in enumerate(MATRIX)],
)
def test_response_check_matrix(
    options: dict[str, Any], reply: str, passed: bool, fragment: str
) -> None:
    spec = check(**options)
    validator = schema_validator(spec.json_schema) if spec.json_schema is not None else None
    result = evaluate_response_check(spec, reply, budget=RegexBudget(), validator=validator)
    assert result.passed is passed, result.reason
    assert result.score == (1.0 if passed else 0.0)
    assert result.kind == "standard"
    assert fragment in (result.reason or ""), result.reason


def test_the_matrix_is_big_enough() -> None:
    assert len(MATRIX) >= 25


def test_a_runaway_regex_fails_in_bounded_time_and_says_so() -> None:
    spec = check("regex", pattern="(a+)+$")
    result = evaluate_response_check(spec, "a" * 50_000 + "b", budget=RegexBudget(0.05))
    assert not result.passed
    assert result.reason == (
        "regex /(a+)+$/ did not finish within 0.05 s on the 50,001-character reply (a pattern "
        "with nested repeats, such as (a+)+, can take exponential time)"
    )
    spent = RegexBudget(0)
    result = evaluate_response_check(check("regex", pattern="a"), "a", budget=spent)
    assert not result.passed
    assert "was not tried on the 1-character reply" in (result.reason or "")


def test_schema_errors_are_listed_in_details() -> None:
    spec = check("json", schema=ORDER_SCHEMA)
    result = evaluate_response_check(
        spec, '{"order_id": 1, "items": "x"}', validator=schema_validator(ORDER_SCHEMA)
    )
    assert result.details is not None
    paths = sorted(e["path"] for e in result.details["schema_errors"])
    assert paths == ["$.items", "$.order_id"]


# ------------------------------------------------------------------ load-time errors


def checked_by(evaluation: str) -> str:
    """A suite of one turn of the scripted agent, checked by ``evaluation`` (at line 6)."""
    return f"""\
agent: {{backend: python, factory: "tests.agents:scripted"}}
test_cases:
  - turns:
      - input: q
        evaluations:
          - {evaluation}
"""


BAD_CONFIGS: list[tuple[str, str]] = [
    (
        '{type: standard, metric: regex, pattern: "(unclosed"}',
        "suite.yaml:6 test_cases[0] turns[0].evaluations[0].pattern: cannot compile: missing ), unterminated subpattern at position 0",
    ),
    (
        "{type: standard, metric: regex}",
        "suite.yaml:6 test_cases[0] turns[0].evaluations[0].pattern: required key missing: metric 'regex' needs a pattern",
    ),
    (
        '{type: standard, metric: regex, pattern: "(?:a{1000}){1000}"}',
        "evaluations[0].pattern: cannot compile: its counted repeats unroll to more than 100,000 items",
    ),
    (
        "{type: standard, metric: contains}",
        "evaluations[0].value: required key missing: metric 'contains' needs a value",
    ),
    (
        "{type: standard, metric: contains, value: []}",
        "evaluations[0].value: is an empty list; give at least one text",
    ),
    (
        '{type: standard, metric: not_contains, value: ["a", ""]}',
        "evaluations[0].value[1]: is empty; an empty text is found in every reply",
    ),
    (
        "{type: standard, metric: contains, value: x, mode: some}",
        "evaluations[0].mode: must be 'all' or 'any'; got 'some'",
    ),
    (
        "{type: standard, metric: contains, value: x, pattern: y}",
        "evaluations[0].pattern: applies to another metric, not to 'contains'",
    ),
    (
        "{type: standard, metric: json, value: x}",
        "evaluations[0].value: applies to another metric, not to 'json'",
    ),
    (
        "{type: standard, metric: equality, schema: {type: object}}",
        "evaluations[0].schema: applies to another metric, not to 'equality'",
    ),
    (
        "{type: standard, metric: json, schema: {type: objekt}}",
        "suite.yaml:6 test_cases[0] turns[0].evaluations[0].schema.type: is not a valid JSON Schema: 'objekt' is not valid under any of the given schemas",
    ),
    (
        "{type: standard, metric: json, schema: {properties: {a: {minimum: low}}}}",
        "evaluations[0].schema.properties.a.minimum: is not a valid JSON Schema: 'low' is not of type 'number'",
    ),
    (
        "{type: standard, metric: json, schema: {type: object}, schema_file: s.json}",
        "evaluations[0].schema_file: give either 'schema' or 'schema_file'",
    ),
    (
        "{type: standard, metric: json, schema_file: missing.json}",
        "suite.yaml:6 test_cases[0] turns[0].evaluations[0].schema_file: file not found: ",
    ),
    (
        "{type: standard, metric: json, schema_file: broken.json}",
        "evaluations[0].schema_file: is not JSON: Expecting value at line 1, column 10: ",
    ),
    (
        "{type: standard, metric: json, schema_file: invalid.json}",
        "evaluations[0].schema_file: is not a valid JSON Schema: 'many' is not of type 'array' at required: ",
    ),
    ("{type: standard, metric: regex, pattern: a, fullmatch: maybe}", "evaluations[0].fullmatch: "),
]


@pytest.mark.parametrize(("evaluation", "message"), BAD_CONFIGS)
def test_bad_response_checks_are_located_config_errors(
    project: Project, evaluation: str, message: str
) -> None:
    project.write("broken.json", '{"type": }')
    project.write("invalid.json", '{"required": "many"}')
    project.write("suite.yaml", checked_by(evaluation))
    result = project.run("run", "suite.yaml")
    assert result.code == 2
    assert message in result.err, result.err
    assert "Traceback" not in result.err
    assert not (result.report_dir / "report.json").exists()


# ------------------------------------------------------------------------- end to end


def test_response_checks_end_to_end(project: Project) -> None:
    project.write("order.schema.json", json.dumps(ORDER_SCHEMA))
    script = [
        {"response": "Refunds take 14 days, per our refund policy."},
        {"response": '```json\n{"order_id": "A17", "items": [{"sku": "k", "price": "9"}]}\n```'},
        {"raise": "bug"},
    ]
    evaluations = [
        {"type": "standard", "metric": "contains", "value": ["refund policy", "14 days"]},
        {"type": "standard", "metric": "not_contains", "value": "sorry", "name": "no_apology"},
    ]
    case = {
        "name": "support",
        "context": {"script": script},
        "turns": [
            {"input": "refund?", "evaluations": evaluations},
            {
                "input": "order as json",
                "evaluations": [
                    {
                        "type": "standard",
                        "metric": "json",
                        "strip_code_fence": True,
                        "schema_file": "order.schema.json",
                    }
                ],
            },
            {
                "input": "again",
                "evaluations": [{"type": "standard", "metric": "regex", "pattern": "A\\d+"}],
            },
        ],
    }
    project.write(
        "suite.yaml",
        'agent: {backend: python, factory: "tests.agents:scripted"}\ntest_cases:\n  - '
        + json.dumps(case)
        + "\n",
    )
    result = project.run("run", "suite.yaml", formats=("json", "junit", "markdown"))
    assert result.code == 1
    turns = result.report["results"][0]["turns"]
    assert [m["passed"] for m in turns[0]["metric_results"]] == [True, True]
    assert turns[0]["passed"] is True
    (schema,) = turns[1]["metric_results"]
    assert schema["metric_name"] == "json"
    assert "at $.items[0].price: '9' is not of type 'number'" in schema["reason"]
    (regex,) = turns[2]["metric_results"]
    assert regex == {
        "metric_name": "regex",
        "kind": "standard",
        "score": 0.0,
        "threshold": None,
        "passed": False,
        "error": None,
        "reason": "no reply to check: ValueError: bug in the agent",
        "details": None,
    }
    assert "json: the reply (inside the fenced block) is JSON but does not match" in result.out
    junit = (result.report_dir / "junit.xml").read_text()
    assert "at $.items[0].price" in junit
    summary = (result.report_dir / "summary.md").read_text()
    assert "regex</b>: no reply to check" in summary
    metrics = result.report["summary"]["metrics"]
    assert metrics["contains"] == {"mean_score": 1.0, "passed": 1, "failed": 0}
    assert metrics["regex"]["failed"] == 1


def test_the_suite_schema_knows_the_new_keys() -> None:
    schema = json.loads(
        (Path(__file__).resolve().parents[1] / "schemas" / "suite.schema.json").read_text()
    )
    standard = schema["$defs"]["StandardEvaluation"]["properties"]
    for key in (
        "value",
        "mode",
        "pattern",
        "fullmatch",
        "strip_code_fence",
        "schema",
        "schema_file",
    ):
        assert key in standard
    assert set(standard["metric"]["enum"]) >= {"contains", "not_contains", "regex", "json"}
