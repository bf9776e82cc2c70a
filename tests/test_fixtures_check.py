"""``fixtures check``: missing, orphan, renamed, stale, models, damaged -- without any model call."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from multiturn_eval.fixtures import ExpectedCase, case_slugs, check_fixtures
from tests.cassettes import T0, Clock, anthropic_body, call, reply, suite_fixtures


def record(
    root: Path,
    names: tuple[str, ...],
    index: int,
    *,
    runs: int = 1,
    clock: Clock | None = None,
    model: str = "claude-test",
) -> None:
    fixtures = suite_fixtures(root, "record", names, clock=clock, repeat=runs)
    for run in range(1, runs + 1):
        cassette = fixtures.cassette(index, run)
        cassette.set_turn(1)
        call(cassette, "agent", anthropic_body("hi", model=model), reply("hello"))
        call(cassette, "judge", {"model": "judge-m", "prompt": "rate it"}, reply("pass"))
        assert cassette.finish().error is None


def expected(
    names: tuple[str, ...], runs: int = 1, agent: str = "claude-test"
) -> list[ExpectedCase]:
    return [
        ExpectedCase(name, slug, runs, {"agent": [agent], "judge": ["judge-m"]})
        for name, slug in zip(names, case_slugs(list(names)), strict=True)
    ]


def check(root: Path, cases: list[ExpectedCase], **kwargs: object) -> list[tuple[str, str]]:
    findings = check_fixtures(
        root / "support", cases, now=T0 + timedelta(days=40), shown="fixtures/support", **kwargs
    )  # type: ignore[arg-type]
    return [(f.kind, f.message) for f in findings]


def test_fixtures_that_match_the_suite_have_no_findings(tmp_path: Path) -> None:
    names = ("refund flow", "Refund Flow")
    for i in range(2):
        record(tmp_path, names, i, runs=2)
    assert check(tmp_path, expected(names, runs=2), max_age=timedelta(days=90)) == []
    # fewer runs asked for than recorded: the extra run's fixture is no finding
    assert check(tmp_path, expected(names, runs=1)) == []


def test_every_kind_of_finding(tmp_path: Path) -> None:
    old = ("refund flow", "gone case", "renamed", "other model")
    clock = Clock()
    for i in range(4):
        record(tmp_path, old, i, clock=clock, model="claude-old" if i == 3 else "claude-test")
    folder = tmp_path / "support"
    (folder / "renamed.jsonl").rename(folder / "renamed-again.jsonl")
    (folder / "damaged.jsonl").write_text('{"kind": "meta"}\n')
    (folder / "Not A Slug.jsonl").write_text((folder / "refund-flow.jsonl").read_text())
    (folder / "notes.txt").write_text("not a fixture")
    (folder / "sub.jsonl").mkdir()
    now = ("refund flow", "renamed again", "other model", "new case", "damaged")
    cases = expected(now, runs=1)
    cases[3] = ExpectedCase("new case", "new-case", 2)
    assert check(tmp_path, cases, max_age=timedelta(days=30)) == [
        ("missing", 'test case "new case": no fixture (fixtures/support/new-case.jsonl)'),
        (
            "missing",
            'test case "new case", run 2: no fixture (fixtures/support/new-case.run-2.jsonl)',
        ),
        (
            "orphan",
            'fixtures/support/Not A Slug.jsonl: a fixture no test case of the suite reads (recorded for "refund flow")',
        ),
        ("damaged", "fixtures/support/damaged.jsonl:1 format: Field required"),
        (
            "orphan",
            'fixtures/support/gone-case.jsonl: a fixture no test case of the suite reads (recorded for "gone case")',
        ),
        (
            "stale",
            "fixtures/support/other-model.jsonl: recorded 2025-06-01 (40 days ago), older than the maximum age of 30 days",
        ),
        (
            "models",
            "fixtures/support/other-model.jsonl: recorded with agent model claude-old; the suite now uses claude-test",
        ),
        (
            "stale",
            "fixtures/support/refund-flow.jsonl: recorded 2025-06-01 (40 days ago), older than the maximum age of 30 days",
        ),
        (
            "renamed",
            'fixtures/support/renamed-again.jsonl: recorded for test case "renamed", now read by test case "renamed again"',
        ),
        (
            "stale",
            "fixtures/support/renamed-again.jsonl: recorded 2025-06-01 (40 days ago), older than the maximum age of 30 days",
        ),
    ]


def test_a_suite_without_a_fixture_folder_misses_every_case(tmp_path: Path) -> None:
    names = ("a", "b")
    assert [kind for kind, _ in check(tmp_path, expected(names))] == ["missing", "missing"]


def test_sides_the_suite_names_no_model_for_are_not_compared(tmp_path: Path) -> None:
    names = ("python agent",)
    record(tmp_path, names, 0, model="whatever-the-agent-uses")
    assert (
        check(tmp_path, [ExpectedCase("python agent", "python-agent", 1, {"judge": ["judge-m"]})])
        == []
    )
    assert check(
        tmp_path, [ExpectedCase("python agent", "python-agent", 1, {"judge": ["judge-2"]})]
    ) == [
        (
            "models",
            "fixtures/support/python-agent.jsonl: recorded with judge model judge-m; the suite now uses judge-2",
        ),
    ]
