"""Edges of the pipeline found in review: each once broke a run or a report."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from multiturn_eval import stored
from multiturn_eval.errors import ConfigError
from multiturn_eval.reports.reader import load_report, parse_report
from multiturn_eval.run import RunOptions, run_suites
from multiturn_eval.secrets import Redactor
from multiturn_eval.tools import Tool, ToolSet
from multiturn_eval.types import CaseContext

from . import agents

DATA = Path(__file__).parent / "data" / "pipeline"


@pytest.fixture
def mixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agents.reset()
    shutil.copy(DATA / "mixed.yaml", tmp_path / "mixed.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("short", ["x", "ab", "key", "12345"])
def test_a_short_key_is_not_a_secret_and_leaves_the_reports_readable(
    mixed: Path, short: str
) -> None:
    """``ANTHROPIC_API_KEY=x`` (a local proxy) must not turn every 'x' into '***'."""
    assert not Redactor([short]).active
    outcome = run_suites(
        ["mixed.yaml"], RunOptions(report_dir="out"), {"MY_API_KEY": short}, secrets=[short]
    )
    report = load_report(mixed / "out" / "report.json")  # would fail on "inde***"
    assert report == outcome.report
    assert "***" not in (mixed / "out" / "summary.md").read_text()


@pytest.mark.parametrize(
    "report_dir",
    ["a" * 300, "deep/" + "b" * 300 + "/c"],
    ids=["name-too-long", "component-too-long"],
)
def test_a_report_dir_the_os_refuses_is_a_usage_error(mixed: Path, report_dir: str) -> None:
    with pytest.raises(ConfigError, match="cannot write reports there: File name too long"):
        run_suites(["mixed.yaml"], RunOptions(report_dir=report_dir), {})
    assert agents.OPENED == []
    assert not (mixed / "deep").exists()


def test_a_full_disk_under_the_progress_files_does_not_stop_the_run(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """results.jsonl is the run's store: once it cannot be written, the results that
    finish later are kept in memory, and every report still holds every test case."""
    real = stored.ResultFile.append
    calls = {"n": 0}

    def failing(self: stored.ResultFile, text: str, newline: bool = True) -> tuple[int, int]:
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(28, "No space left on device")
        return real(self, text, newline)

    monkeypatch.setattr(stored.ResultFile, "append", failing)
    outcome = run_suites(["mixed.yaml"], RunOptions(report_dir="out"), {})
    assert outcome.exit_code == 1  # the verdict, not 3
    assert outcome.report.run.complete
    assert [c.name for c in outcome.report.results] == [
        "legacy-pass",
        "legacy-fail",
        "multi",
        "bug",
    ]
    assert any("progress files stopped: No space left on device" in w for w in outcome.warnings)
    assert len((mixed / "out" / "results.jsonl").read_text().splitlines()) == 1
    assert load_report(mixed / "out" / "report.json") == outcome.report


def _raise_enospc(text: str) -> int:
    raise OSError(28, "No space left on device")


def test_a_later_minor_version_with_new_fields_is_read(mixed: Path) -> None:
    run_suites(["mixed.yaml"], RunOptions(report_dir="out", formats=("json",)), {})
    data = json.loads((mixed / "out" / "report.json").read_text())
    data["schema_version"] = "1.4"
    data["run"]["shard"] = {"index": 1, "total": 3}
    data["summary"]["metrics"]["numeric"]["median"] = 0.5
    data["results"][2]["turns"][0]["judge_token_usage"] = {"prompt_tokens": 1}
    data["results"][2]["turns"][0]["metric_results"][0]["verdict"] = "ok"
    report = parse_report(json.dumps(data))
    assert [c.name for c in report.results] == ["legacy-pass", "legacy-fail", "multi", "bug"]
    assert report.results[2].turns is not None
    assert report.results[2].turns[0].metric_results[0].metric_name == "numeric"


def _exits(a: float) -> float:
    """Exit the process (a tool's bug)."""
    sys.exit(0)


def _interrupts(a: float) -> float:
    """Raise KeyboardInterrupt (a tool's bug)."""
    raise KeyboardInterrupt


async def _cancels(a: float) -> float:
    """Raise CancelledError itself (a tool's bug)."""
    raise asyncio.CancelledError


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_exits, "the tool called sys.exit(0)"),
        (_interrupts, "the tool raised KeyboardInterrupt"),
        (_cancels, "the tool raised asyncio.CancelledError (the run was not cancelled)"),
    ],
)
def test_a_tool_that_exits_fails_its_call_even_in_a_task_of_its_own(
    fn: object, message: str
) -> None:
    """Semantic Kernel runs tool calls with asyncio.gather: each in its own task, from which
    asyncio re-raises SystemExit/KeyboardInterrupt out of the whole run."""
    toolset = ToolSet([Tool.from_function(fn)])  # type: ignore[arg-type]
    case = CaseContext(test_case_name="c")
    name = toolset.tools[0].name

    async def main() -> list[object]:
        return await asyncio.gather(toolset.call(name, {"a": 1}, case))

    (outcome,) = asyncio.run(main())
    assert outcome.is_error  # type: ignore[attr-defined]
    assert outcome.invocation.error == message  # type: ignore[attr-defined]


def test_a_cancelled_turn_still_cancels_its_tool_call() -> None:
    async def slow(a: float) -> float:
        """Sleep."""
        await asyncio.sleep(30)
        return a

    toolset = ToolSet([Tool.from_function(slow)])
    case = CaseContext(test_case_name="c")

    async def main() -> None:
        async with asyncio.timeout(0.05):
            await asyncio.gather(toolset.call("slow", {"a": 1}, case))

    with pytest.raises(TimeoutError):
        asyncio.run(main())


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize(
    "suite",
    [
        "a" * 300 + ".yaml",
        "a" * 300 + "*.yaml",
        "dir/" + "b" * 300 + "/*.yaml",
        "\x01*",
        "[",
        "*.nothing",
    ],
    ids=["long-name", "long-glob", "long-component-glob", "control-glob", "bracket", "no-match"],
)
def test_odd_suite_arguments_are_usage_errors(
    mixed: Path, capsys: pytest.CaptureFixture[str], command: str, suite: str
) -> None:
    from multiturn_eval import cli

    code = cli.main([command, suite, *(["-o", "out"] if command == "run" else [])], env={})
    err = capsys.readouterr().err
    assert code == 2, err
    assert "configuration error" in err
    assert "Traceback" not in err
    assert agents.OPENED == []


def test_system_exit_escaping_into_the_run_is_exit_3_with_reports(mixed: Path) -> None:
    """A caller's callback (or anything unguarded) calling sys.exit() must not end the
    process with its code: the run stops, what finished is reported, exit 3."""
    seen: list[str] = []

    def on_result(result: object) -> None:
        seen.append("x")
        if len(seen) == 2:
            sys.exit(0)

    outcome = run_suites(["mixed.yaml"], RunOptions(report_dir="out"), {}, on_result=on_result)
    assert outcome.exit_code == 3
    assert outcome.report.run.complete is False
    assert "SystemExit(0) escaped into the run" in (outcome.report.run.stop_reason or "")
    assert sum(not r.skipped for r in outcome.report.results) >= 1
    assert load_report(mixed / "out" / "report.json") == outcome.report


# ------------------------------------------------------------ found in the second review


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("import sys\nsys.exit(0)\n", "called sys.exit(0)"),
        ("import sys\nsys.exit(2)\n", "called sys.exit(2)"),
        (
            "import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n",
            "called sys.exit(2)",
        ),
        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),
    ],
    ids=["exit-0", "exit-2", "argparse", "keyboard-interrupt"],
)
@pytest.mark.parametrize("where", ["factory", "grader", "tool"])
def test_a_module_that_exits_while_imported_is_a_located_config_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: str,
    said: str,
    where: str,
) -> None:
    from multiturn_eval import cli

    module = f"exits_{where}_{abs(hash(body)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(body)
    factory = f"{module}:f" if where == "factory" else "tests.agents:scripted"
    lines = ["agent:", "  backend: python", f"  factory: {factory}"]
    if where == "tool":
        lines += ["  tools:", f"    - function: {module}:f"]
    if where == "grader":
        lines += ["evaluations:", f"  - {{type: code, grader: '{module}:f'}}"]
    lines += ["test_cases:", "  - {name: a, input: hi}"]
    (tmp_path / "suite.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["run", "suite.yaml", "-o", "out"], env={})
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"importing module '{module}' {said}" in err
    assert "suite.yaml:" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        ("3,14", 314, False),  # a European decimal is not a thousands separator
        ("1,2,3", "123", False),
        ("12_34", 1234, False),
        ("1,234,567", 1234567, True),
        ("206_588", 206588, True),
        ("206\u202f588", 206588, True),
        ("1e309", "2e309", False),  # out of range: compared as text, not as two infinities
        ("1e309", "1e309", True),
    ],
)
def test_fuzzy_thousands_separators_come_before_groups_of_three(
    expected: str, actual: object, equal: bool
) -> None:
    from multiturn_eval.grading.matchers import fuzzy_equal

    assert fuzzy_equal(expected, actual) is equal


@pytest.mark.parametrize(
    ("expected", "actual"),
    [(float("nan"), 10**400), (10**400, float("nan")), (1.5, 10**400), (10**400, 10**400 + 1)],
)
def test_a_literal_with_a_huge_int_is_compared_not_crashed(
    expected: object, actual: object
) -> None:
    from multiturn_eval.grading.matchers import literal_equal

    assert literal_equal(expected, actual) is False


def test_an_errored_metric_counts_as_zero_in_the_summary_mean_for_legacy_cases() -> None:
    from multiturn_eval.results import CaseResult, MetricResult
    from multiturn_eval.rollup import summarize

    def case(index: int, metric: MetricResult) -> CaseResult:
        return CaseResult(
            index=index,
            name=f"c{index}",
            suite="s.yaml",
            suite_name="s",
            backend="python",
            passed=metric.passed,
            outcome="passed" if metric.passed else "failed",
            metric_results=[metric],
            input="hi",
        )

    good = MetricResult(metric_name="g", kind="code", score=1.0, passed=True)
    broken = MetricResult(metric_name="g", kind="code", passed=False, error="ValueError: x")
    summary = summarize([case(0, good), case(1, broken)])
    assert summary.metrics["g"].mean_score == 0.5
    assert (summary.metrics["g"].passed, summary.metrics["g"].failed) == (1, 1)


def test_a_compressed_reply_is_capped_as_it_is_decoded() -> None:
    import gzip

    import httpx2

    from multiturn_eval.backends.wire import ReplyTooLarge, response_hook

    bomb = gzip.compress(b" " * (8 * 1024 * 1024))  # 8 KB on the wire
    seen: list[int] = []

    def check(data: object) -> None:
        seen.append(1)

    async def main() -> None:
        transport = httpx2.MockTransport(
            lambda r: httpx2.Response(200, content=bomb, headers={"content-encoding": "gzip"})
        )
        hooks = {"response": [response_hook(check, limit=1024 * 1024)]}
        async with httpx2.AsyncClient(transport=transport, event_hooks=hooks) as client:
            await client.get("http://127.0.0.1/")

    with pytest.raises(ReplyTooLarge, match="decompresses to more than 1 MB"):
        asyncio.run(main())
    assert seen == []  # refused before anything parsed it


def test_deep_values_get_their_ancestors_line_not_one_of_their_own() -> None:
    from multiturn_eval.yaml_source import LINE_DEPTH, parse_yaml

    doc = parse_yaml(
        "a:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(40)) + "    " * 21 + "x: 1\n"
    )
    assert max(len(path) for path in doc.lines) <= LINE_DEPTH
    deep = ("a", *(f"k{i}" for i in range(30)))
    assert doc.line_of(deep) == LINE_DEPTH  # the deepest recorded ancestor's line


def test_an_async_agent_that_ignores_its_cancellation_is_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn is bounded even when the agent swallows CancelledError: it is left running,
    the case says so, the next turn is sent, and the run ends (it does not wait for it)."""
    import time

    agents.reset()
    (tmp_path / "suite.yaml").write_text(
        "agent: {backend: python, factory: 'tests.agents:stubborn'}\n"
        "execution: {turn_timeout: 0.3}\n"
        "test_cases:\n"
        "  - name: stubborn\n"
        "    context: {script: [{}, {response: 'two'}]}\n"
        "    turns: [{input: stubborn one}, {input: two, ground_truth: two}]\n"
        "  - name: healthy\n"
        "    context: {script: [{response: 'ok'}]}\n"
        "    turns: [{input: hi, ground_truth: ok}]\n"
    )
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    outcome = run_suites(
        ["suite.yaml"],
        RunOptions(report_dir="out", parallel_test_cases=2),
        {},
    )
    assert time.monotonic() - started < 15  # a hang detector only (the agent would take 20 s)
    stuck, healthy = outcome.report.results
    assert healthy.passed
    assert stuck.turns is not None
    assert stuck.turns[0].errors == ["timed out after 0.3 s (turn_timeout)"]
    assert stuck.turns[1].response == "two"  # the next turn was still sent
    assert any(
        "send() of turn 1 ignored its cancellation and is still running" in w
        for w in stuck.warnings
    )
