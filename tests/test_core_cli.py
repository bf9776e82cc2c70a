"""The command line: exit codes, precedence (one test per edge), selection, schemas, interruption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from multiturn_eval import __version__, cli
from multiturn_eval.schema import render
from tests import agents
from tests.cli_probe import CLI
from tests.conftest import Project

ROOT = Path(__file__).resolve().parents[1]

SUITE = """\
agent: {backend: python, factory: "tests.agents:scripted"}
evaluations: [{type: standard, metric: numeric}]
%s
test_cases:
"""


def cases(n: int, delay: float = 0.05, **extra: Any) -> str:
    lines = []
    for i in range(n):
        script = json.dumps([{"response": "1", "delay": delay}])
        tags = json.dumps(extra.get("tags", {}).get(i, []))
        lines.append(
            f"  - {{name: case-{i}, tags: {tags}, context: {{script: {script}}}, turns: [{{input: q, ground_truth: 1}}]}}"
        )
    return "\n".join(lines) + "\n"


def write(project: Project, execution: str = "", n: int = 8, **extra: Any) -> None:
    project.write("suite.yaml", SUITE % execution + cases(n, **extra))


# ----------------------------------------------------------------------------- exit codes


def test_exit_0_when_everything_passes(project: Project) -> None:
    write(project, n=2)
    result = project.run("run", "suite.yaml")
    assert result.code == 0
    assert (result.report_dir / "report.json").stat().st_mode & 0o777 == 0o644


def test_exit_1_when_a_case_fails(project: Project) -> None:
    project.write(
        "suite.yaml",
        SUITE % "" + "  - {context: {script: [{response: '2'}]}, input: q, ground_truth: 1}\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 1
    assert "expected 1 (±1e-06), got 2" in result.out


def test_exit_2_for_usage_errors(project: Project) -> None:
    write(project, n=1)
    with pytest.raises(SystemExit) as raised:
        project.run("run", "suite.yaml", "-p", "zero")
    assert raised.value.code == 2
    assert project.run("run", "missing.yaml").code == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "suite.yaml", "--repeats", "2"],
            "multiturn-eval run: error: unrecognized arguments: --repeats 2; "
            "did you mean '--repeat'? (see 'multiturn-eval run --help')",
        ),
        (
            ["run", "suite.yaml", "--repeats=2"],
            "multiturn-eval run: error: unrecognized arguments: --repeats=2; "
            "did you mean '--repeat'?",
        ),
        (
            ["run", "suite.yaml", "--formt", "json"],
            "unrecognized arguments: --formt json; did you mean '--format'?",
        ),
        (
            ["regrade", "r.json", "-o", "x", "--grader-timout", "3"],
            "multiturn-eval regrade: error: unrecognized arguments: --grader-timout 3; "
            "did you mean '--grader-timeout'?",
        ),
        # a prefix that fits two options: argparse names both (its abbreviations are kept)
        (
            ["run", "suite.yaml", "--rep", "2"],
            "multiturn-eval run: error: ambiguous option: --rep could match --report-dir, --repeat",
        ),
        # nothing close: no guess
        (
            ["run", "suite.yaml", "--zzzz"],
            "multiturn-eval run: error: unrecognized arguments: --zzzz (see",
        ),
        (["validate", "suite.yaml", "--repeat", "2"], "unrecognized arguments: --repeat 2 (see"),
    ],
)
def test_a_misspelt_option_gets_a_did_you_mean(
    project: Project, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    write(project, n=1)
    with pytest.raises(SystemExit) as raised:
        cli.main(argv, env={})
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_unambiguous_prefix_of_an_option_is_that_option(project: Project) -> None:
    write(project, n=1)
    args = cli.build_parser().parse_args_suggesting(["run", "suite.yaml", "--repea", "3"])
    assert args.repeat == 3


def test_no_agent_is_called_when_the_configuration_is_bad(project: Project) -> None:
    write(project, n=1)
    project.write(
        "bad.yaml", "agent: {backend: python, factory: 'tests.agents:scripted'}\ntest_cases: []\n"
    )
    result = project.run("run", "suite.yaml", "bad.yaml")
    assert result.code == 2
    assert agents.OPENED == []
    assert not (project.root / "out").exists()


def test_exit_2_when_the_selection_is_empty(project: Project) -> None:
    write(project, n=2)
    result = project.run("run", "suite.yaml", "-k", "nothing*")
    assert result.code == 2
    assert "no test case matches" in result.err


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "multiturn_eval", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"multiturn-eval {__version__}"


# ------------------------------------------------------------------------------ precedence


def test_cli_beats_suite(project: Project) -> None:
    write(project, "execution: {parallel_test_cases: 3}")
    project.run("run", "suite.yaml", "-p", "2")
    assert agents.MAX_OPEN == 2


def test_suite_beats_environment(project: Project) -> None:
    write(project, "execution: {parallel_test_cases: 3}")
    project.run("run", "suite.yaml", env={"MULTITURN_EVAL_PARALLEL_TEST_CASES": "4"})
    assert agents.MAX_OPEN == 3


def test_environment_beats_default(project: Project) -> None:
    write(project)
    project.run("run", "suite.yaml", env={"MULTITURN_EVAL_PARALLEL_TEST_CASES": "4"})
    assert agents.MAX_OPEN == 4


def test_default(project: Project) -> None:
    write(project)
    project.run("run", "suite.yaml")
    assert agents.MAX_OPEN == 1


def test_turn_timeout_follows_the_same_chain(project: Project) -> None:
    project.write("suite.yaml", SUITE % "execution: {turn_timeout: 0.3}" + cases(1, delay=2))
    result = project.run("run", "suite.yaml", env={"MULTITURN_EVAL_TURN_TIMEOUT": "0.1"})
    assert result.report["results"][0]["turns"][0]["errors"] == [
        "timed out after 0.3 s (turn_timeout)"
    ]
    result = project.run("run", "suite.yaml", "--turn-timeout", "0.2")
    assert result.report["results"][0]["turns"][0]["errors"] == [
        "timed out after 0.2 s (turn_timeout)"
    ]


def test_bad_environment_value_is_a_config_error(project: Project) -> None:
    write(project, n=1)
    result = project.run("run", "suite.yaml", env={"MULTITURN_EVAL_PARALLEL_TEST_CASES": "many"})
    assert result.code == 2
    assert "MULTITURN_EVAL_PARALLEL_TEST_CASES='many'" in result.err


def test_verbose_shows_where_settings_came_from(project: Project) -> None:
    write(project, "execution: {parallel_test_cases: 3}", n=1)
    result = project.run("run", "suite.yaml", "-v", env={"MULTITURN_EVAL_TURN_TIMEOUT": "9"})
    assert "parallel_test_cases=3 (suite)" in result.out
    assert "turn_timeout=9.0 (env)" in result.out
    assert "report_dir='out' (cli)" in result.out


def test_report_dir_from_environment(project: Project) -> None:
    write(project, n=1)
    project.capsys.readouterr()
    from multiturn_eval import cli

    code = cli.main(
        ["run", "suite.yaml", "--format", "json"], env={"MULTITURN_EVAL_REPORT_DIR": "elsewhere"}
    )
    assert code == 0
    assert (project.root / "elsewhere" / "report.json").is_file()


# ------------------------------------------------------------------------------- selection


def test_filter_by_glob_and_substring(project: Project) -> None:
    write(project, n=12)
    assert [
        r["name"] for r in project.run("run", "suite.yaml", "-k", "case-1*").report["results"]
    ] == ["case-1", "case-10", "case-11"]
    assert [
        r["name"] for r in project.run("run", "suite.yaml", "-k", "se-2").report["results"]
    ] == ["case-2"]


def test_filter_by_tags_any_of(project: Project) -> None:
    write(project, n=4, tags={1: ["smoke"], 2: ["slow"], 3: ["smoke", "slow"]})
    result = project.run("run", "suite.yaml", "--tag", "smoke", "--tag", "nightly")
    assert [r["name"] for r in result.report["results"]] == ["case-1", "case-3"]


# -------------------------------------------------------------------------------- console


def test_console_lines_and_quiet(project: Project) -> None:
    project.write(
        "suite.yaml",
        SUITE % ""
        + "  - {name: good, context: {script: [{response: '1'}]}, input: q, ground_truth: 1}\n"
        + "  - {name: bad, context: {script: [{response: 'It is 7'}]}, turns: [{input: q, ground_truth: 1}]}\n",
    )
    result = project.run("run", "suite.yaml")
    lines = result.out.splitlines()
    assert any(line.startswith("PASS  suite::good  1/1 turns") for line in lines)
    assert any(line.startswith("FAIL  suite::bad  0/1 turns") for line in lines)
    assert "      got:      It is 7" in lines
    assert lines[-2].startswith("1 passed, 1 failed (turns: 1/2 passed) in ")
    quiet = project.run("run", "suite.yaml", "-q").out.splitlines()
    assert not any(line.startswith("PASS") for line in quiet)
    assert any(line.startswith("FAIL  suite::bad") for line in quiet)


# --------------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("kind", ["suite", "report"])
def test_committed_schemas_are_current(kind: str) -> None:
    committed = (ROOT / "schemas" / f"{kind}.schema.json").read_text(encoding="utf-8")
    assert committed == render(kind), "regenerate with: python -m multiturn_eval.schema"


def test_schema_command_prints_the_schema(project: Project) -> None:
    result = project.run("schema", "suite")
    assert result.code == 0
    assert json.loads(result.out)["title"] == "multiturn-eval suite"


def test_report_validates_against_its_schema(project: Project) -> None:
    project.write(
        "suite.yaml",
        SUITE % ""
        + "  - {name: legacy, context: {script: [{response: '1'}]}, input: q, ground_truth: 1}\n"
        + "  - {name: multi, context: {script: [{raise: bug}, {response: '2', tools: [{name: t, args: {a: [1]}}]}]},"
        + " turns: [{input: q, ground_truth: 1}, {input: r, ground_truth: 1, expected_tools: [t]}]}\n",
    )
    report = project.run("run", "suite.yaml").report
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)


def test_suites_validate_against_the_suite_schema(project: Project) -> None:
    import yaml

    schema = json.loads((ROOT / "schemas" / "suite.schema.json").read_text())
    write(project, "execution: {parallel_test_cases: 2, turn_timeout: 5}", n=2)
    jsonschema.validate(yaml.safe_load((project.root / "suite.yaml").read_text()), schema)
    for path in sorted((ROOT / "examples").rglob("suite*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"agent": {"backend": "python", "factory": "a:b"}, "test_cases": [], "x": 1}, schema
        )


SCHEMA_HEAD = "agent: {backend: python, factory: 'tests.agents:scripted'}\n"


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ("test_cases: [{turns: [{input: q, ground_truht: a}]}]", False),
        ("test_cases: [{turns: [{input: q, expected_tool: [t]}]}]", False),
        ("test_cases: [{turns: [{input: q, evaluation: []}]}]", False),
        ("test_cases: [{turns: [{input: q, Ground_truth: a}]}]", False),
        ("test_cases: [{turns: [{input: q, ground-truth: a}]}]", False),
        ("test_cases: [{turns: [{input: q, ground_truth: a, turn_program: 'f(1)'}]}]", True),
        ("test_cases: [{turns: [{input: q, weight: 3, note: x}]}]", True),
        ("evaluations: [{type: standard, metric: contains}]\ntest_cases: [{input: q}]", False),
        (
            "evaluations: [{type: standard, metric: not_contains, value: null}]\n"
            "test_cases: [{input: q}]",
            False,
        ),
        (
            "evaluations: [{type: standard, metric: contains, value: refund}]\n"
            "test_cases: [{input: q}]",
            True,
        ),
        ("evaluations: [{type: standard, metric: regex}]\ntest_cases: [{input: q}]", False),
        (
            "evaluations: [{type: standard, metric: regex, pattern: 'a+'}]\n"
            "test_cases: [{input: q}]",
            True,
        ),
        (
            "evaluations: [{type: standard, metric: equality, relative_tolerance: 1}]\n"
            "test_cases: [{input: q}]",
            False,
        ),
        (
            "evaluations: [{type: standard, metric: numeric, relative_tolerance: 1}]\n"
            "test_cases: [{input: q}]",
            True,
        ),
        (
            "evaluations: [{type: standard, metric: json, schema: {type: object}}]\n"
            "test_cases: [{input: q}]",
            True,
        ),
        (
            "evaluations: [{type: standard, metric: contains, value: a, schema: {}}]\n"
            "test_cases: [{input: q}]",
            False,
        ),
    ],
)
def test_the_editor_schema_rejects_what_the_cli_rejects(
    project: Project, body: str, valid: bool
) -> None:
    """Small documents, judged by the schema (jsonschema) and by ``validate``: the same verdict."""
    import yaml

    schema = json.loads((ROOT / "schemas" / "suite.schema.json").read_text())
    text = SCHEMA_HEAD + body + "\n"
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(text)))
    project.write("suite.yaml", text)
    result = project.run("validate", "suite.yaml")
    assert (result.code == 0) is valid, result.err
    assert (not errors) is valid, [e.message for e in errors]


def test_every_misspelling_the_schema_lists_is_one_the_cli_rejects(project: Project) -> None:
    from multiturn_eval.suite import TURN_KEYS, likely_misspellings

    listed = likely_misspellings(TURN_KEYS)
    assert "ground_truht" in listed and "expected_tool" in listed and "evaluation" in listed
    assert not set(listed) & set(TURN_KEYS)
    turns = ", ".join(f"{{input: q, '{key}': 1}}" for key in listed)
    err = project.rejected(SCHEMA_HEAD + f"test_cases: [{{turns: [{turns}]}}]\n")
    assert err.count("unknown turn key; did you mean") == len(listed)


def test_a_url_may_be_a_variable_in_the_editor_schema() -> None:
    schema = json.loads((ROOT / "schemas" / "suite.schema.json").read_text())
    doc = {"agent": {"backend": "http", "url": "${AGENT_URL}"}, "test_cases": [{"input": "q"}]}
    jsonschema.validate(doc, schema)
    doc["agent"]["url"] = "localhost:8080/chat"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_the_wheel_ships_the_schemas(tmp_path: Path) -> None:
    """Built from a copy of the sources (a build leaves build/ and *.egg-info behind)."""
    import shutil
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "runner", source / "runner", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "schemas", source / "schemas")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = tmp_path.glob("multiturn_eval-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for kind in ("suite", "report"):
            shipped = archive.read(f"multiturn_eval/schemas/{kind}.schema.json").decode()
            assert shipped == render(kind)


def test_the_installed_package_has_the_schemas() -> None:
    from importlib.resources import files

    for kind in ("suite", "report"):
        shipped = files("multiturn_eval").joinpath(f"schemas/{kind}.schema.json")
        assert shipped.read_text(encoding="utf-8") == render(kind)


# ---------------------------------------------------------------------------- interruption


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_run_leaves_a_valid_report_and_exits_3(
    tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "suite.yaml").write_text(
        SUITE % ""
        + "  - {name: quick, context: {script: [{response: '1'}]}, turns: [{input: q, ground_truth: 1}]}\n"
        + "  - {name: slow, context: {script: [{response: '1', delay: 60}]}, turns: [{input: q, ground_truth: 1}]}\n"
        + "  - {name: never, context: {script: [{response: '1'}]}, turns: [{input: q, ground_truth: 1}]}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [*CLI, "run", "suite.yaml", "-o", "out", "--format", "json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    for line in proc.stdout:
        if line.startswith("PASS  suite::quick") or time.monotonic() > deadline:
            break
    time.sleep(0.2)  # the slow case is now in flight
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run"]["complete"] is False
    assert report["run"]["stop_reason"] == f"interrupted by {sig.name}"
    quick, slow, never = report["results"]
    assert quick["passed"] is True
    for result in (slow, never):
        assert result["skipped"] is True
        assert result["errors"] == [f"not run: interrupted by {sig.name}"]
    assert report["summary"]["skipped"] == 2
    assert "INCOMPLETE" in out
    journal = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in journal] == ["quick"]  # written as it finished
    jsonschema.validate(report, json.loads((ROOT / "schemas" / "report.schema.json").read_text()))


def test_a_stuck_sync_agent_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "agent: {backend: python, factory: 'tests.agents:scripted_sync'}\n"
        "test_cases:\n  - {name: stuck, context: {script: [{delay: 120}]}, input: q}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [*CLI, "run", "suite.yaml", "--turn-timeout", "0.2", "-o", "out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["results"][0]["errors"] == ["timed out after 0.2 s (turn_timeout)"]
