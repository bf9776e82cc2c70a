"""The report directory is checked before any agent call; the console survives ``| head``;
usage errors are one line.

- A report directory that cannot be used (a file, a path under a file, a place
  nobody can write to) is a configuration error (exit 2) naming where it came
  from (``-o/--report-dir`` or ``MULTITURN_EVAL_REPORT_DIR``); no agent is
  called and no directory is left behind.
- ``multiturn-eval run ... | head -1``: the reader goes away, the run does not:
  it finishes, writes every report, and exits with the verdict (0 or 1), with
  no ``BrokenPipeError`` traceback.
- ``-p four``, ``--turn-timeout abc``, ``--format xml`` ...: one line naming
  the option once and saying what it takes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from multiturn_eval import cli
from multiturn_eval.results import Report
from tests import agents
from tests.cli_probe import repo_env, run_command

ROOT = Path(__file__).resolve().parent.parent

SUITE = """\
agent: {backend: python, factory: 'tests.agents:scripted'}
test_cases:
  - {name: one, input: hi}
"""


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """A directory nobody may write to: chmod for a user, a read-only tmpfs for root."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"root, and cannot mount a read-only tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def bad_dir(kind: str, tmp_path: Path, stack: contextlib.ExitStack) -> str:
    if kind == "a file":
        (tmp_path / "taken").write_text("not a directory")
        return "taken"
    if kind == "under a file":
        (tmp_path / "taken").write_text("not a directory")
        return "taken/reports"
    if kind == "deep under a file":
        (tmp_path / "taken").write_text("not a directory")
        return "taken/a/b/c"
    if kind == "under /proc/self":
        return "/proc/self/multiturn-eval-reports"
    if kind == "under /sys":
        return "/sys/multiturn-eval-reports/deeper"
    if kind == "read-only":
        return str(stack.enter_context(read_only_dir(tmp_path / "ro")))
    if kind == "under read-only":
        return str(stack.enter_context(read_only_dir(tmp_path / "ro")) / "new" / "reports")
    raise ValueError(kind)


KINDS = (
    "a file",
    "under a file",
    "deep under a file",
    "under /proc/self",
    "under /sys",
    "read-only",
    "under read-only",
)


@pytest.fixture
def suite_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path`` as the working directory, holding ``suite.yaml`` (SUITE); agents reset."""
    monkeypatch.chdir(tmp_path)
    agents.reset()
    (tmp_path / "suite.yaml").write_text(SUITE)
    return tmp_path


@pytest.mark.parametrize("source", ["-o", "--report-dir", "MULTITURN_EVAL_REPORT_DIR"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("suite_dir")
def test_an_unusable_report_dir_is_exit_2_before_any_agent_call(
    kind: str,
    source: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with contextlib.ExitStack() as stack:
        where = bad_dir(kind, tmp_path, stack)
        before = tree(tmp_path)
        if source == "MULTITURN_EVAL_REPORT_DIR":
            argv, env = ["run", "suite.yaml"], {source: where}
        else:
            argv, env = ["run", "suite.yaml", source, where], {}
        code = cli.main(argv, env=env)
        err = capsys.readouterr().err
        after = tree(tmp_path)
    assert code == 2, err
    named = "MULTITURN_EVAL_REPORT_DIR" if source.isupper() else "-o/--report-dir"
    assert named in err and repr(where) in err, err
    assert "Traceback" not in err
    assert agents.OPENED == [], "an agent was called"
    assert after == before, f"left behind: {sorted(after - before)}"
    if where.startswith(("/proc", "/sys")):
        assert not Path(where).exists()


@pytest.mark.usefixtures("suite_dir")
def test_an_empty_report_dir_option_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "suite.yaml", "-o", " "], env={}) == 2
    assert "-o/--report-dir ' ': give a directory" in capsys.readouterr().err
    assert agents.OPENED == []


@pytest.mark.usefixtures("suite_dir")
def test_a_missing_nested_report_dir_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the check must not refuse what it can make (so the failures above are not just "absent")
    assert cli.main(["run", "suite.yaml", "-o", "a/b/c"], env={}) == 0
    assert (tmp_path / "a" / "b" / "c" / "report.json").is_file()
    assert agents.OPENED == ["one"]


WANDERER = """\
import os
from pathlib import Path

os.chdir(Path(__file__).parent.parent / "elsewhere")  # at import, while the suite loads


class Session:
    def send(self, message, files=()):
        os.chdir(Path(__file__).parent.parent / "elsewhere" / "deeper")  # and again on every turn
        return "|".join(f.path.read_text().strip() for f in files) or message


def make(ctx):
    return Session()
"""


def test_relative_paths_are_taken_from_where_the_run_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent (or a module it imports) that changes the working directory moves nothing:
    the reports go to the ``-o`` the user gave, a turn's files are found, and the console
    names the reports as the user wrote them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "wanderer.py").write_text(WANDERER)
    (tmp_path / "suites" / "note.txt").write_text("a note")
    (tmp_path / "suites" / "suite.yaml").write_text(
        "agent: {backend: python, factory: 'wanderer:make'}\n"
        "evaluations: [{type: standard, metric: equality}]\n"
        "test_cases:\n"
        "  - name: moves\n"
        "    turns:\n"
        "      - {input: hi, ground_truth: hi}\n"
        "      - {input: file, ground_truth: a note, files: [{path: note.txt}]}\n"
    )
    code = cli.main(["run", "suites/suite.yaml", "-o", "out/reports"], env={})
    out, err = capsys.readouterr()
    assert code == 0, out + err
    reports = tmp_path / "out" / "reports"
    assert {p.name for p in reports.iterdir()} >= {"report.json", "junit.xml", "report.html"}
    assert not (tmp_path / "elsewhere" / "out").exists()
    assert not (tmp_path / "elsewhere" / "deeper" / "out").exists()
    assert "reports: out/reports/report.json, out/reports/junit.xml" in out
    report = Report.model_validate_json((reports / "report.json").read_text())
    assert report.results[0].suite == "suites/suite.yaml"


# ------------------------------------------------------------------------ | head -1

PIPE_SUITE = """\
agent: {backend: python, factory: 'tests.slow_agents:make_session'}
evaluations: [{type: standard, metric: equality}]
test_cases:
"""


@pytest.mark.parametrize(("failing", "verdict"), [(0, 0), (3, 1)])
def test_a_reader_that_closes_early_does_not_stop_the_run(
    failing: int, verdict: int, tmp_path: Path
) -> None:
    cases = [
        f"  - {{name: case-{i}, context: {{delay: 0.004}}, "
        f"turns: [{{input: hi, ground_truth: {'nope' if i < failing else 'ok'}}}]}}\n"
        for i in range(150)
    ]
    (tmp_path / "suite.yaml").write_text(PIPE_SUITE + "".join(cases))
    command = (
        f"{sys.executable} -m multiturn_eval run suite.yaml -o out 2>stderr.txt | head -1; "
        'exit "${PIPESTATUS[0]}"'
    )
    done = run_command(["bash", "-c", command], tmp_path, repo_env())
    err = (tmp_path / "stderr.txt").read_text()
    assert done.returncode == verdict, err
    assert done.stdout == "multiturn-eval: 150 test cases from suite.yaml\n"
    for bad in ("Traceback", "BrokenPipeError", "Exception ignored"):
        assert bad not in err, err
    out = tmp_path / "out"
    report = Report.model_validate_json((out / "report.json").read_text())
    assert report.run.complete is True
    assert (report.summary.total, report.summary.failed) == (150, failing)
    assert len((out / "results.jsonl").read_text().splitlines()) == 150
    testcases = list(ET.parse(out / "junit.xml").getroot().iter("testcase"))
    assert len(testcases) == 150
    assert sum(1 for t in testcases if t.find("failure") is not None) == failing
    assert (out / "summary.md").read_text().startswith("<!-- multiturn-eval")
    assert "case-149" in (out / "report.html").read_text()


# ------------------------------------------------------------------------ usage errors

USAGE = [
    (["-p", "four"], "-p/--parallel-test-cases", "a whole number"),
    (["-p", "0"], "-p/--parallel-test-cases", "a whole number"),
    (["-p", "-1"], "-p/--parallel-test-cases", "a whole number"),
    (["-p", "1.5"], "-p/--parallel-test-cases", "a whole number"),
    (["-p", "5000"], "-p/--parallel-test-cases", "a whole number"),
    (["--parallel-test-cases", ""], "-p/--parallel-test-cases", "a whole number"),
    (["--turn-timeout", "abc"], "--turn-timeout", "a number of seconds"),
    (["--turn-timeout", "0"], "--turn-timeout", "a number of seconds"),
    (["--turn-timeout", "-3"], "--turn-timeout", "a number of seconds"),
    (["--turn-timeout", "nan"], "--turn-timeout", "a number of seconds"),
    (["--turn-timeout", "1s"], "--turn-timeout", "a number of seconds"),
    (["--format", "xml"], "--format", "json, junit, markdown, html"),
    (["--format", "json,xml"], "--format", "json, junit, markdown, html"),
    (["--format", "JSON"], "--format", "json, junit, markdown, html"),
    (["--format", ","], "--format", "json, junit, markdown, html"),
    (["--format", ""], "--format", "json, junit, markdown, html"),
]


@pytest.mark.parametrize(("args", "option", "says"), USAGE, ids=lambda v: repr(v))
@pytest.mark.usefixtures("suite_dir")
def test_a_bad_option_value_is_one_line_naming_the_option_once(
    args: list[str],
    option: str,
    says: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(["run", "suite.yaml", *args], env={})
    assert raised.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    [line] = lines
    assert line.startswith("multiturn-eval run: error: ")
    assert line.count(option) == 1 and says in line, line
    assert captured.out == "" and agents.OPENED == []
