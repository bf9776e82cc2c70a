"""A secret made of digits (an account number, a numeric token) inside a number of a result.

The redaction of reports is textual, and a numeric secret can sit inside a
JSON *number*: ``{"account": 12345678}`` in a tool's arguments. Replacing the
digits in the text made ``report.json`` unreadable (``"account": ***``) while
the stored result kept the number, secret and all. Now such a number becomes
the string ``"***"`` in the result's data, and the runner's own typed numbers
(durations, counts, costs) are left whole in ``report.json`` and ``junit.xml``.

Each file of every run is checked as its readers read it: ``report.json`` by
``json`` and the report's JSON Schema, ``results.jsonl`` line by line,
``junit.xml`` by the JUnit XSD and junitparser, and no file holds the secret.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema
from junitparser import JUnitXml

from multiturn_eval.reports.reader import load_report
from multiturn_eval.reports.writer import ProgressWriter, build_report, write_reports
from multiturn_eval.results import CaseResult
from multiturn_eval.run import RunOptions, run_suites
from multiturn_eval.secrets import REDACTED, Redactor, redact_values, redacted_model

from . import agents
from .case_results import case_result

ROOT = Path(__file__).resolve().parents[1]
XSD = Path(__file__).parent / "data" / "junit" / "junit-10-with-location.xsd"
FORMATS = ("json", "junit", "markdown", "html")


def run_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    secret: str,
    step: dict[str, Any],
    *,
    grader: bool = True,
) -> dict[str, Any]:
    """Run one scripted case playing ``step`` with ``secret`` in ``MY_API_KEY``; check that
    every report file reads and holds no secret; return ``report.json``'s data."""
    agents.reset()
    monkeypatch.chdir(tmp_path)
    evaluations = 'evaluations: [{type: code, grader: "tests.graders:history"}]\n' if grader else ""
    (tmp_path / "s.yaml").write_text(
        "name: numbers\nagent: {backend: python, factory: tests.agents:scripted}\n"
        + evaluations
        + "test_cases:\n"
        + agents.scripted_case("acct", [step], ["{input: pay, expected_tools: [pay]}"])
    )
    run_suites(
        ["s.yaml"],
        RunOptions(report_dir="out", formats=FORMATS),
        {"MY_API_KEY": secret},
        secrets=[secret],
    )
    out = tmp_path / "out"
    for path in sorted(out.iterdir()):
        assert secret not in path.read_text(encoding="utf-8"), f"{path.name} holds the secret"
    report = json.loads((out / "report.json").read_text())
    jsonschema.validate(report, json.loads((ROOT / "schemas" / "report.schema.json").read_text()))
    assert load_report(out / "report.json").results[0].name == "acct"
    for line in (out / "results.jsonl").read_text().splitlines():
        CaseResult.model_validate_json(line)
    xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))
    for suite in JUnitXml.fromfile(str(out / "junit.xml")):
        assert isinstance(suite.time, float)
        for case in suite:
            assert isinstance(case.time, float)
    return report


def invocation(report: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = report["results"][0]["turns"][0]["tool_invocations"][0]
    return call


NUMBERS = [
    pytest.param("12345678", 12345678, id="digits"),
    pytest.param("12345678", 123456789, id="prefix-of-a-number"),
    pytest.param("12345678", 912345678, id="suffix-of-a-number"),
    pytest.param("12345678", 91234567890, id="middle-of-a-number"),
    pytest.param("12345678", -12345678, id="negative-number"),
    pytest.param("-1234567", -1234567, id="negative-secret"),
    pytest.param("1234.5678", 1234.5678, id="decimal-point"),
    pytest.param("12345678", 12345678.25, id="integer-part-of-a-float"),
    pytest.param("25e+300", 1.25e300, id="exponent"),
    pytest.param("12345678", 10**30 + 12345678, id="huge-integer"),
]


@pytest.mark.parametrize(("secret", "number"), NUMBERS)
def test_a_number_holding_a_numeric_secret_becomes_redacted_text_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str, number: float
) -> None:
    step = {
        "response": "paid",
        "tools": [
            {
                "name": "pay",
                "args": {"account": number, "to": {"iban": [7, number]}, "note": f"from {secret}"},
                "result": number,
            }
        ],
    }
    call = invocation(run_with(tmp_path, monkeypatch, secret, step))
    assert call["args"] == {"account": REDACTED, "to": {"iban": [7, REDACTED]}, "note": "from ***"}
    assert call["result"] == REDACTED


@pytest.mark.parametrize(
    ("args", "result", "expected_args", "expected_result"),
    [
        pytest.param({"a": 12345678}, None, {"a": REDACTED}, None, id="argument"),
        pytest.param({}, 12345678, {}, REDACTED, id="scalar-result"),
        pytest.param({}, [1, [2, 12345678]], {}, [1, [2, REDACTED]], id="nested-list"),
        pytest.param({}, {"a": {"b": 12345678}}, {}, {"a": {"b": REDACTED}}, id="nested-object"),
        pytest.param({"12345678": 1}, None, {REDACTED: 1}, None, id="object-key"),
        pytest.param({"n": 12345678.0}, None, {"n": REDACTED}, None, id="whole-float"),
    ],
)
def test_every_place_of_a_free_form_value_is_redacted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: dict[str, Any],
    result: Any,
    expected_args: dict[str, Any],
    expected_result: Any,
) -> None:
    step = {"response": "ok", "tools": [{"name": "pay", "args": args, "result": result}]}
    call = invocation(run_with(tmp_path, monkeypatch, "12345678", step))
    assert (call["args"], call["result"]) == (expected_args, expected_result)


def test_a_grader_detail_holding_the_number_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tests.graders:history`` puts the case's context (the script, numbers and all) in
    its metric's ``details``: a free-form value of the runner's own result."""
    step = {"response": "ok", "tools": [{"name": "pay", "args": {"a": 12345678}}]}
    report = run_with(tmp_path, monkeypatch, "12345678", step)
    details = report["results"][0]["turns"][0]["metric_results"][0]["details"]
    assert details["case"]["script"][0]["tools"][0]["args"] == {"a": REDACTED}


def test_the_runners_typed_numbers_are_kept_and_the_files_stay_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token counts and a cost whose digits spell the secret are the runner's own typed
    numbers: kept as they are (``***`` there would break the file), in ``report.json``,
    the stored result and the summary's totals, while the tool's argument is redacted."""
    step = {
        "response": "ok",
        "tools": [{"name": "pay", "args": {"a": 12345678}}],
        "usage": {"prompt_tokens": 12345678, "completion_tokens": 1, "total_tokens": 12345679},
        "cost": 12345678.5,
    }
    agents.reset()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "name: numbers\nagent: {backend: python, factory: tests.agents:scripted}\ntest_cases:\n"
        + agents.scripted_case("acct", [step], ["{input: pay}"])
    )
    run_suites(
        ["s.yaml"],
        RunOptions(report_dir="out", formats=FORMATS),
        {"MY_API_KEY": "12345678"},
        secrets=["12345678"],
    )
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    turn = report["results"][0]["turns"][0]
    assert turn["tool_invocations"][0]["args"] == {"a": REDACTED}
    assert turn["token_usage"]["prompt_tokens"] == 12345678
    assert turn["cost_usd"] == 12345678.5
    assert report["summary"]["token_usage"]["prompt_tokens"] == 12345678
    stored = CaseResult.model_validate_json((tmp_path / "out" / "results.jsonl").read_text())
    assert stored.turns is not None and stored.turns[0].cost_usd == 12345678.5
    xmlschema.XMLSchema(str(XSD)).validate(str(tmp_path / "out" / "junit.xml"))


def test_numbers_without_a_secret_and_other_secrets_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = {
        "response": "ok",
        "tools": [{"name": "pay", "args": {"a": 1234567, "b": 2.5, "c": True, "d": None}}],
    }
    call = invocation(run_with(tmp_path, monkeypatch, "12345678", step))
    assert call["args"] == {"a": 1234567, "b": 2.5, "c": True, "d": None}


def _case(args: dict[str, Any], turn_ms: float = 0.0) -> CaseResult:
    turn = {"turn_index": 0, "input": "q", "passed": True, "duration_ms": turn_ms}
    tools = [{"name": "t", "args": args}]
    return case_result(duration_ms=12345678.5, turns=[{**turn, "tool_invocations": tools}])


def test_redacted_model_has_a_fast_path_and_puts_typed_values_back() -> None:
    redact = Redactor(["12345678"])
    case = _case({"x": 12345678}, turn_ms=912345678.0)
    text = case.model_dump_json()
    clean, model = redacted_model(CaseResult, text, redact)
    assert model is not None and model.turns is not None
    assert model.duration_ms == 12345678.5 and model.turns[0].duration_ms == 912345678.0
    assert model.turns[0].tool_invocations[0].args == {"x": REDACTED}
    assert json.loads(clean)["turns"][0]["tool_invocations"][0]["args"] == {"x": REDACTED}
    plain = CaseResult.model_validate({**case.model_dump(), "turns": None, "duration_ms": 1.0})
    same = plain.model_dump_json()
    assert redacted_model(CaseResult, same, redact) == (same, None)


def test_keeping_numbers_redacts_everything_but_whole_number_matches() -> None:
    redact = Redactor(["12345678", "s3cr3t-12345"])
    assert redact.keeping_numbers('{"d": 12345678.5, "s": "s3cr3t-12345"}') == (
        '{"d": 12345678.5, "s": "***"}'
    )
    assert redact('{"d": 12345678.5}') == '{"d": ***.5}'


def test_redact_values_maps_each_replacement_to_its_original() -> None:
    data, replaced = redact_values(
        {"a": [1, 12345678, "x12345678"], "k": True}, Redactor(["12345678"])
    )
    assert data == {"a": [1, REDACTED, "x***"], "k": True}
    assert replaced == {("a", 1): 12345678, ("a", 2): "x12345678"}


@pytest.mark.parametrize("writer", ["final", "snapshot"])
def test_a_numeric_secret_in_the_runs_own_text_is_redacted_in_every_write(
    tmp_path: Path, writer: str
) -> None:
    """The run's text (a stop reason) and a result handed in unredacted, through the final
    writing and through the progress snapshot: the secret is gone, numbers stay whole."""
    redact = Redactor(["12345678"])
    report = build_report(
        ["s.yaml"],
        [_case({"n": 12345678})],
        started_at="2026-12-03T00:00:00.000Z",
        started=0.0,
        complete=writer == "final",
        stop_reason="stopped by job 12345678",
    )
    if writer == "final":
        write_reports(report, tmp_path, FORMATS, redact)
    else:
        ProgressWriter(tmp_path, redact, lambda: report, interval=0).case_finished(
            report.results[0]
        )
    for path in tmp_path.iterdir():
        assert "12345678" not in path.read_text().replace("12345678.5", ""), path.name
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["run"]["stop_reason"] == "stopped by job ***"
    assert data["results"][0]["duration_ms"] == 12345678.5
    assert data["results"][0]["turns"][0]["tool_invocations"][0]["args"] == {"n": REDACTED}


@pytest.mark.parametrize("secret", ["passed", "duration_ms", "tool_invocations", "failed"])
def test_a_secret_spelling_one_of_the_results_own_names_keeps_the_result_readable(
    secret: str,
) -> None:
    """A (very unlucky) secret equal to a field name or a literal of the result: the model's
    own names and literals stay, the agent's texts holding it are redacted."""
    case = case_result(
        passed=False,
        turns=[
            {
                "turn_index": 0,
                "input": f"say {secret}",
                "passed": False,
                "duration_ms": 1.5,
                "tool_invocations": [{"name": "t", "args": {secret: 12345678, "x": secret}}],
            }
        ],
    )
    text = case.model_dump_json()
    clean, model = redacted_model(CaseResult, text, Redactor([secret, "12345678"]))
    assert model is not None and model.turns is not None
    turn = model.turns[0]
    assert turn.input == "say ***" and turn.duration_ms == 1.5 and model.outcome == "failed"
    assert turn.tool_invocations[0].args == {REDACTED: REDACTED, "x": REDACTED}
    assert CaseResult.model_validate_json(clean) == model
