"""examples/support ships fixtures for its judged suite: CI runs a judged suite with no key.

``examples/support/fixtures/suite-judged/`` holds the LLM judge's calls of
``suite-judged.yaml``, recorded against the project's fake Anthropic server
(``tests/fakes/anthropic_server.py``; their meta entries say so in ``source``)
until a real key records them. These tests (run by ``scripts/test``, so by
``.ci/run``):

- replay the judged suite through the CLI with no API key and no network:
  every judge call answered from the fixtures, the suite green;
- re-record it against the fake into a copy of the fixtures: not one byte may
  change. A change to the suite, the judge prompt or the request format fails
  here until the fixtures are recorded again:
  ``UPDATE_FIXTURES=1 pytest tests/test_support_fixtures.py`` (docs/fixtures.md
  says how to record them against Claude instead);
- ``fixtures check`` finds nothing to say about them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import cli
from multiturn_eval.environment import RunEnvironment
from multiturn_eval.run import RunOptions, run_suites
from tests.cassettes import no_network
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, agreeable_judge

REPO = Path(__file__).resolve().parents[1]
SUITE = Path("examples/support/suite-judged.yaml")
FIXTURES = REPO / "examples" / "support" / "fixtures"
SOURCE = (
    "recorded against the project's fake Anthropic server (tests/fakes/anthropic_server.py), "
    "not a real model: record them with a key for real verdicts (docs/fixtures.md)"
)
UPDATE = os.environ.get("UPDATE_FIXTURES") == "1"


def record(root: Path, out: Path) -> Any:
    """``run --fixtures record`` of the judged suite against a fresh fake (deterministic)."""
    with FakeAnthropic(agreeable_judge) as fake:
        outcome = run_suites(
            [SUITE],
            RunOptions(
                fixtures="record",
                fixtures_dir=str(root),
                fixtures_source=SOURCE,
                report_dir=str(out),
                formats=("json",),
            ),
            RunEnvironment.from_mapping(
                {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
            ),
        )
        assert len(fake.messages_requests()) == 4
    return outcome


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def test_the_judged_example_replays_with_no_key_and_no_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    out = tmp_path / "out"
    with no_network() as attempts:
        code = cli.main(
            [
                "run",
                str(SUITE),
                "--fixtures",
                "replay",
                "-o",
                str(out),
                "--format",
                "json,markdown",
            ],
            env={},
        )
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert attempts == []
    report = json.loads((out / "report.json").read_text())
    fixtures = report["run"]["fixtures"]
    assert (fixtures["mode"], fixtures["replayed"], fixtures["missed"]) == ("replay", 4, 0)
    assert fixtures["dir"] == "examples/support/fixtures"
    assert fixtures["models"] == {"judge": ["claude-haiku-4-5"]}
    judged = [m for c in report["results"] for t in c["turns"] for m in t["metric_results"]]
    assert [m["passed"] for m in judged if m["kind"] == "judge"] == [True, True, True]
    assert report["summary"]["judge_token_usage"]["total_tokens"] == 4 * 230
    assert "Replayed from fixtures recorded on" in (out / "summary.md").read_text()


def test_the_examples_fixtures_are_labelled_as_recorded_against_the_fake() -> None:
    files = sorted((FIXTURES / "suite-judged").glob("*.jsonl"))
    assert [f.name for f in files] == [
        "refund-after-verification.jsonl",
        "stays-polite-with-an-angry-customer.jsonl",
    ]
    for file in files:
        meta = json.loads(file.read_text().splitlines()[0])
        assert meta["source"] == SOURCE


def test_re_recording_the_example_against_the_fake_changes_no_byte(
    tmp_path: Path, in_repo: None
) -> None:
    copy = tmp_path / "fixtures"
    if FIXTURES.exists():
        shutil.copytree(FIXTURES, copy)
    outcome = record(copy, tmp_path / "out")
    assert outcome.exit_code == 0
    committed = {p.name: p.read_bytes() for p in (FIXTURES / "suite-judged").glob("*.jsonl")}
    now = {p.name: p.read_bytes() for p in (copy / "suite-judged").glob("*.jsonl")}
    if UPDATE and now != committed:
        shutil.rmtree(FIXTURES, ignore_errors=True)
        shutil.copytree(copy, FIXTURES)
        committed = now
    assert now == committed, (
        "the judged example's requests changed: record its fixtures again with "
        "UPDATE_FIXTURES=1 pytest tests/test_support_fixtures.py"
    )
    written = outcome.report.run.fixtures
    assert written is not None and (UPDATE or written.written == 0)  # nothing was rewritten


def test_fixtures_check_finds_nothing_wrong_with_them(
    capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code = cli.main(["fixtures", "check", str(SUITE)], env={})
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert printed.out == (
        "ok: examples/support/suite-judged.yaml: 2 test cases, fixtures in "
        "examples/support/fixtures/suite-judged\n"
    )
