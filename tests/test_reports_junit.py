"""junit.xml: golden file, schema validity, read back by junitparser, hostile text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from junitparser import Attr, Error, Failure, IntAttr, JUnitXml, Skipped, TestCase

from multiturn_eval.reports.junit import TEXT_LIMIT, render_junit
from multiturn_eval.results import Report

from .reports_fixtures import (
    case,
    check_golden,
    failing_report,
    interrupted_report,
    large_report,
    metric,
    report,
    sample_report,
    turn,
)

XSD = Path(__file__).parent / "data" / "junit" / "junit-10-with-location.xsd"


class LocatedCase(TestCase):  # type: ignore[misc]
    """junitparser's TestCase plus the ``file``/``line`` attributes we write."""

    file = Attr()
    line = IntAttr()


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def parse(report: Report, schema: xmlschema.XMLSchema) -> JUnitXml:
    text = render_junit(report)
    schema.validate(text)  # raises with the offending element when invalid
    return JUnitXml.fromstring(text)


def cases_of(xml: JUnitXml) -> list[LocatedCase]:
    return [c for suite in xml for c in suite.iterchildren(LocatedCase)]


def test_golden_sample() -> None:
    check_golden("junit.xml", render_junit(sample_report()))


def test_golden_interrupted() -> None:
    check_golden("junit-interrupted.xml", render_junit(interrupted_report()))


def test_one_testsuite_per_suite_file_one_testcase_per_test_case(
    schema: xmlschema.XMLSchema,
) -> None:
    xml = parse(sample_report(), schema)
    suites = list(xml)
    assert [s.name for s in suites] == ["convfinqa-smoke", "support-bot"]
    assert [s.tests for s in suites] == [4, 3]
    assert [(s.failures, s.errors, s.skipped) for s in suites] == [(1, 2, 0), (2, 0, 0)]
    cases = cases_of(xml)
    assert [(c.classname, c.name, c.file, c.line) for c in cases] == [
        ("convfinqa-smoke", "Single_JKHY_2009", "evals/convfinqa.yaml", 12),
        ("convfinqa-smoke", "Double_AAPL_2015", "evals/convfinqa.yaml", 21),
        ("convfinqa-smoke", "Slow_backend", "evals/convfinqa.yaml", 36),
        ("convfinqa-smoke", "Broken_session", "evals/convfinqa.yaml", 43),
        ("support-bot", "refund-policy", "evals/support.yaml", 8),
        ("support-bot", "greeting", "evals/support.yaml", 13),
        ("support-bot", "tone-grader", "evals/support.yaml", 17),
    ]
    # time is in seconds: the fixture's Slow_backend took 60.815 s
    assert cases[2].time == pytest.approx(60.815)
    root = ET.fromstring(render_junit(sample_report()))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("7", "3", "2")


def test_failure_names_first_failing_turn_and_lists_every_turn(
    schema: xmlschema.XMLSchema,
) -> None:
    cases = {c.name: c for c in cases_of(parse(sample_report(), schema))}
    assert cases["Single_JKHY_2009"].is_passed
    (failure,) = cases["Double_AAPL_2015"].result
    assert isinstance(failure, Failure)
    assert failure.message.startswith("turn 2: tools: subtract: no call matched")
    shown = [
        "turn 1/3 (line 23): PASSED",
        "turn 2/3 (line 26): FAILED",
        "turn 3/3 (line 33): PASSED",
        # the failing turn in detail: input, expected, got, the tool call, every failed check
        "input:      and the difference from 2014?",
        "expected:   50920",
        "got:        The difference is 51,000 | roughly. cc @octocat </details>",
        'tool call:  math-subtract(a=233715, b="182,795") -> 51000',
        "✗ tools: subtract: no call matched",
        "✗ numeric: expected 50920 (±0.5), got 51",
    ]
    assert [line for line in shown if line not in failure.text] == [], failure.text
    (grader,) = cases["tone-grader"].result
    assert (
        grader.message == "turn 1: graders.tone:polite: error: ZeroDivisionError: division by zero"
    )


def test_infrastructure_problems_are_errors_not_failures(schema: xmlschema.XMLSchema) -> None:
    cases = {c.name: c for c in cases_of(parse(sample_report(), schema))}
    (timeout,) = cases["Slow_backend"].result
    assert isinstance(timeout, Error)
    assert timeout.message == "turn 1: timed out after 60 s (turn_timeout)"
    assert "turn 2/2 (line 40): PASSED" in timeout.text
    (broken,) = cases["Broken_session"].result
    assert isinstance(broken, Error)
    assert "turn 3/3 (line 47): SKIPPED: session unrecoverable after turn 2" in broken.text


def test_failed_check_outranks_an_infrastructure_error(schema: xmlschema.XMLSchema) -> None:
    mixed = case(
        0,
        "mixed",
        [
            turn(0, "a", None, errors=["BackendError: 503"], infrastructure_error=True),
            turn(1, "b", "x", ground_truth="y", metrics=[metric("equality", False, "differs")]),
        ],
    )
    (result,) = cases_of(parse(report([mixed]), schema))[0].result
    assert isinstance(
        result, Failure
    )  # a <failure>, though the message names the first failing turn
    assert result.message == "turn 1: BackendError: 503"
    assert "✗ equality: differs" in result.text


def test_not_run_test_cases_are_skipped(schema: xmlschema.XMLSchema) -> None:
    xml = parse(interrupted_report(), schema)
    (suite,) = list(xml)
    assert (suite.tests, suite.skipped, suite.failures, suite.errors) == (2, 1, 0, 0)
    finished, never = cases_of(xml)
    assert finished.is_passed
    (skipped,) = never.result
    assert isinstance(skipped, Skipped)
    assert skipped.message == "not run: interrupted by SIGTERM"


def test_a_suite_with_no_selected_test_case_is_an_empty_testsuite(
    schema: xmlschema.XMLSchema,
) -> None:
    only = case(0, "only", [turn(0, "q", "a")])
    xml = parse(report([only], ["evals/convfinqa.yaml", "evals/empty.yaml"]), schema)
    assert [(s.name, s.tests) for s in xml] == [("convfinqa-smoke", 1), ("evals/empty.yaml", 0)]


HOSTILE = (
    "nul\x00 bell\x07 vt\x0b ff\x0c esc\x1b[31mred\x1b[0m c1\x85 "
    "nonchar\ufffe\uffff lone\ud800surrogate "
    "</failure></testcase><testcase name='pwned'/> ]]> <![CDATA[x]]> & \"quotes\" 'single' "
    "right-to-left \u202eتجربة emoji 🧪👩‍💻"
)


def test_hostile_text_is_escaped_and_xml_forbidden_characters_removed(
    schema: xmlschema.XMLSchema,
) -> None:
    bad = case(
        0,
        HOSTILE,
        [
            turn(
                0,
                HOSTILE,
                HOSTILE,
                ground_truth=HOSTILE,
                tools=[],
                metrics=[metric("equality", False, f"got {HOSTILE}")],
            )
        ],
        suite_name=HOSTILE,
        suite="evals/\x00odd.yaml",
    )
    text = render_junit(report([bad]))
    text.encode("utf-8")  # no lone surrogate survives
    xml = parse(report([bad]), schema)
    (only,) = cases_of(xml)
    assert len(cases_of(xml)) == 1  # the injected </testcase><testcase> stayed text
    expected_clean = (
        "nul bell vt ff escred c1 nonchar lone\ufffd"
        "surrogate </failure></testcase><testcase name='pwned'/> ]]> <![CDATA[x]]> & \"quotes\" "
        "'single' right-to-left \u202eتجربة emoji 🧪👩‍💻"
    )
    assert only.name == expected_clean
    assert only.classname == expected_clean
    assert only.file == "evals/odd.yaml"
    (failure,) = only.result
    assert f"got:        {expected_clean}" in failure.text
    assert failure.message == f"turn 1: equality: got {expected_clean}"
    for forbidden in ("\x00", "\x07", "\x0b", "\x1b", "\ufffe", "\ud800"):
        assert forbidden not in text


def test_long_replies_are_cut_with_a_marker(schema: xmlschema.XMLSchema) -> None:
    reply = "x" * 100_000
    (only,) = cases_of(parse(failing_report(1, response=reply, turns=1), schema))
    (failure,) = only.result
    assert "x" * TEXT_LIMIT in failure.text
    assert "x" * (TEXT_LIMIT + 1) not in failure.text
    assert f"[{100_000 - TEXT_LIMIT:,} more characters cut; the whole text is in report.json]" in (
        failure.text
    )


def test_multiline_values_stay_under_their_label(schema: xmlschema.XMLSchema) -> None:
    (only,) = cases_of(parse(failing_report(1, response="line one\nline two", turns=1), schema))
    (failure,) = only.result
    assert "got:        line one\n              line two" in failure.text


def test_large_run_is_valid(schema: xmlschema.XMLSchema) -> None:
    xml = parse(large_report(300, 4), schema)
    cases = cases_of(xml)
    assert len(cases) == 300
    assert sum(1 for c in cases if not c.is_passed) == 30


# ----------------------------------------------------------- third-party JUnit readers
#
# CI dashboards read junit.xml with their own parsers. Three independent Python
# readers (the dev extra installs them) must each see every test case with its
# outcome, and a skipped case's reason: junit2html shows a <skipped> element's
# *text* and only falls back to the word "skipped", junitparser and xunitparser
# read the ``message`` attribute, so we write the reason in both places.

Read = tuple[str, str, str | None]
"""(test-case name, outcome, the reason a reader shows for a skipped case)"""


def _read_junitparser(text: str, tmp_path: Path) -> list[Read]:
    out: list[Read] = []
    for suite in JUnitXml.fromstring(text):
        for tc in suite:
            results = list(tc.result)
            kinds = {type(r) for r in results}
            outcome = (
                "skipped"
                if Skipped in kinds
                else "error"
                if Error in kinds
                else "failed"
                if Failure in kinds
                else "passed"
            )
            reason = results[0].message if outcome == "skipped" else None
            out.append((tc.name, outcome, reason))
    return out


def _read_xunitparser(text: str, tmp_path: Path) -> list[Read]:
    import io

    import xunitparser

    suite, _ = xunitparser.parse(io.StringIO(text))
    names = {"success": "passed", "failure": "failed", "error": "error", "skipped": "skipped"}
    return [
        (tc.methodname, names[tc.result], tc.message if tc.result == "skipped" else None)
        for tc in suite
    ]


def _read_junit2html(text: str, tmp_path: Path) -> list[Read]:
    from junit2htmlreport.parser import Junit

    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    out: list[Read] = []
    for suite in Junit(str(path)).suites:
        for tc in suite.all():
            outcome = str(tc.outcome())  # it has no separate "error": errors are failures
            out.append((tc.name, outcome, tc.skipped if outcome == "skipped" else None))
    return out


READERS = {
    "junitparser": _read_junitparser,
    "xunitparser": _read_xunitparser,
    "junit2html": _read_junit2html,
}


def _hostile_report() -> Report:
    # junit2html reads U+FFFD (our stand-in for a lone surrogate) back as "?": leave it out
    hostile = HOSTILE.replace("\ud800", "")
    failing = turn(
        0, hostile, hostile, ground_truth="x", metrics=[metric("equality", False, hostile)]
    )
    return report(
        [
            case(0, hostile, [failing]),
            case(1, "skipped <&> case", [turn(0, "q", None, skipped=True)], skipped=True),
        ]
    )


@pytest.mark.parametrize("which", ["sample", "interrupted", "hostile"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_third_party_readers_see_every_case_its_outcome_and_skip_reason(
    reader: str, which: str, tmp_path: Path
) -> None:
    from multiturn_eval.reports import _view as v
    from multiturn_eval.reports.escape import xml_clean

    source = {
        "sample": sample_report,
        "interrupted": interrupted_report,
        "hostile": _hostile_report,
    }[which]()
    got = READERS[reader](render_junit(source), tmp_path)
    expected: list[Read] = []
    for c in source.results:
        outcome = "passed" if c.passed else c.outcome
        if reader == "junit2html" and outcome == "error":
            outcome = "failed"
        first = v.first_failure(c)
        reason = (first.reason if first is not None else "failed") if outcome == "skipped" else None
        expected.append((xml_clean(c.name), outcome, reason))
    assert got == expected
