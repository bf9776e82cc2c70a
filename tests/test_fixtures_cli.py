"""The fixtures' settings and commands: where the mode and the folder come from, what a run
needs in replay, ``--dry-run``, ``--max-cost``, ``fixtures check`` and the Action's input.

- Precedence as for every execution setting (one test per edge): ``--fixtures`` over
  ``execution.fixtures``, that over ``MULTITURN_EVAL_FIXTURES``, that over ``off``; the
  folder relative to the current directory on the command line and in the environment,
  to the suite file in ``execution.fixtures.dir``.
- Replay needs no API key, not even the variable a suite names for one.
- ``--dry-run`` under replay: per test case, whether a fixture exists and its calls.
- ``--max-cost`` counts live calls only: a replay never reaches the cap.
- ``fixtures check``: exit 0 clean, 1 on any finding, 2 on a usage or configuration error.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from multiturn_eval.errors import InputError
from multiturn_eval.github.inputs import read_inputs
from multiturn_eval.settings import fixtures_root, resolve_settings
from multiturn_eval.suite import ExecutionConfig
from tests.cassettes import no_network
from tests.conftest import Project
from tests.fakes import anthropic_server as fa
from tests.test_fixtures_runs import anthropic_env, echo_suite, lines, record_echo

FIXTURES = {"fixtures": {"mode": "record", "dir": "recorded"}}


def usage_error(project: Project, *argv: str) -> str:
    """The one line a usage error prints (argparse exits 2 from inside the CLI)."""
    with pytest.raises(SystemExit) as exited:
        project.run(*argv)
    assert exited.value.code == 2
    err = project.capsys.readouterr().err
    return err.split("error: ", 1)[1].split(" (see ")[0]


# ------------------------------------------------------------------ precedence


def test_the_command_line_wins_over_the_suite() -> None:
    settings = resolve_settings(
        {"fixtures": "replay"},
        {"MULTITURN_EVAL_FIXTURES": "update"},
        ExecutionConfig.model_validate(FIXTURES),
    )
    assert (settings.fixtures, settings.sources["fixtures"]) == ("replay", "cli")


def test_the_suite_wins_over_the_environment() -> None:
    settings = resolve_settings(
        {}, {"MULTITURN_EVAL_FIXTURES": "update"}, ExecutionConfig.model_validate(FIXTURES)
    )
    assert (settings.fixtures, settings.sources["fixtures"]) == ("record", "suite")


def test_the_environment_wins_over_the_default() -> None:
    settings = resolve_settings({}, {"MULTITURN_EVAL_FIXTURES": " Replay "}, None)
    assert (settings.fixtures, settings.sources["fixtures"]) == ("replay", "env")
    assert resolve_settings({}, {}, None).fixtures == "off"


def test_a_bad_mode_is_a_configuration_error_naming_where(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    result = project.run("run", "suite.yaml", env={"MULTITURN_EVAL_FIXTURES": "replya"})
    assert result.code == 2
    assert (
        "MULTITURN_EVAL_FIXTURES='replya': must be one of off, replay, record, update" in result.err
    )
    assert usage_error(project, "run", "suite.yaml", "--fixtures", "replya") == (
        "argument --fixtures: 'replya': must be one of off, replay, record, update"
    )
    project.write("bad.yaml", echo_suite(1) + "execution:\n  fixtures: {mode: replya}\n")
    suite = project.run("run", "bad.yaml")
    assert suite.code == 2 and "bad.yaml:" in suite.err and "execution.fixtures.mode" in suite.err


def test_the_folder_is_relative_to_where_it_was_given(tmp_path: Path) -> None:
    suite_dir, cwd = tmp_path / "evals", tmp_path / "work"
    in_suite = resolve_settings({}, {}, ExecutionConfig.model_validate(FIXTURES))
    assert fixtures_root(in_suite, suite_dir, cwd) == suite_dir / "recorded"
    on_cli = resolve_settings(
        {"fixtures_dir": "mine"}, {}, ExecutionConfig.model_validate(FIXTURES)
    )
    assert fixtures_root(on_cli, suite_dir, cwd) == cwd / "mine"
    in_env = resolve_settings({}, {"MULTITURN_EVAL_FIXTURES_DIR": "env-dir"}, None)
    assert fixtures_root(in_env, suite_dir, cwd) == cwd / "env-dir"
    default = resolve_settings({}, {}, None)
    assert fixtures_root(default, suite_dir, cwd) == suite_dir / "fixtures"


def test_execution_fixtures_in_the_suite_records_into_its_folder(project: Project) -> None:
    project.write(
        "evals/suite.yaml",
        echo_suite(1) + "execution:\n  fixtures: {mode: record, dir: ../recorded}\n",
    )
    with fa.FakeAnthropic(fa.echo) as fake:
        result = project.run("run", "evals/suite.yaml", env=anthropic_env(fake))
    assert result.code == 0, result.out + result.err
    assert (project.root / "recorded" / "suite" / "case-0.jsonl").is_file()
    assert result.report["run"]["fixtures"]["dir"] == "recorded"


def test_replay_needs_no_key_even_where_the_suite_names_its_variable(project: Project) -> None:
    suite = echo_suite(1).replace("  max_tokens: 64\n", "  max_tokens: 64\n  api_key: ${MY_KEY}\n")
    project.write("suite.yaml", suite)
    with fa.FakeAnthropic(fa.echo) as fake:
        env = {"MY_KEY": fa.API_KEY, "ANTHROPIC_BASE_URL": fake.url}
        assert project.run("run", "suite.yaml", "--fixtures", "record", env=env).code == 0
    live = project.run("run", "suite.yaml")
    assert live.code == 2 and "environment variable MY_KEY is not set" in live.err
    with no_network():
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay")
    assert replayed.code == 0, replayed.out + replayed.err
    record = project.run("run", "suite.yaml", "--fixtures", "record")
    assert record.code == 2 and "MY_KEY" in record.err  # a recording needs the key


# ------------------------------------------------------------------ dry run, spend cap


def test_dry_run_under_replay_says_which_cases_have_a_fixture(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    record_echo(project)
    project.write("suite.yaml", echo_suite(2))
    with no_network():
        result = project.run("run", "suite.yaml", "--fixtures", "replay", "--dry-run", "-o", "dry")
    assert result.code == 0, result.err
    assert "  fixtures (replay, fixtures): 1 of 2 fixtures found, 2 recorded calls" in result.out
    assert "    case 0: 2 calls (fixtures/suite/case-0.jsonl)" in result.out
    assert (
        "    case 1: no fixture (fixtures/suite/case-1.jsonl; every model call would miss)"
        in result.out
    )
    assert not (project.root / "dry").exists()


def test_the_spend_cap_counts_live_calls_only(project: Project) -> None:
    project.write("suite.yaml", echo_suite(3, model="claude-haiku-4-5"))
    cap = "0.000001"
    with fa.FakeAnthropic(fa.echo) as fake:
        recorded = project.run("run", "suite.yaml", "--fixtures", "record", env=anthropic_env(fake))
        assert recorded.code == 0
        live = project.run("run", "suite.yaml", "--max-cost", cap, env=anthropic_env(fake))
    assert live.code == 1
    assert live.report["run"]["spend_cap"]["not_started"] == 2  # live: the first case spent it
    with no_network():
        replayed = project.run("run", "suite.yaml", "--fixtures", "replay", "--max-cost", cap)
    assert replayed.code == 0, replayed.out + replayed.err
    spend = replayed.report["run"]["spend_cap"]
    assert (spend["reached"], spend["spent_usd"], spend["not_started"]) == (False, 0.0, 0)
    assert replayed.report["summary"]["cost_usd"] == pytest.approx(
        replayed.report["run"]["fixtures"]["replayed_cost_usd"]
    )


# ------------------------------------------------------------------ fixtures check


def test_fixtures_check_is_0_when_clean_and_1_on_each_kind_of_finding(project: Project) -> None:
    project.write("suite.yaml", echo_suite(2))
    record_echo(project)
    clean = project.run("fixtures", "check", "suite.yaml")
    assert (clean.code, clean.out) == (
        0,
        "ok: suite.yaml: 2 test cases, fixtures in fixtures/suite\n",
    )
    folder = project.root / "fixtures" / "suite"
    # case 1 renamed, a new case 2, another model, and the recordings made long ago
    suite = echo_suite(3, model="claude-sonnet-4-5").replace("name: case 1", "name: case one")
    project.write("suite.yaml", suite)
    old = (datetime.now(UTC) - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for path in folder.iterdir():
        path.write_text(path.read_text().replace(lines(path)[0]["recorded_at"], old))
    result = project.run("fixtures", "check", "suite.yaml", "--max-age", "30d")
    assert result.code == 1
    found = result.out.splitlines()
    assert found[-1] == "multiturn-eval fixtures check: 5 findings"
    # case 1's file is an orphan now (nothing reads it: it is not checked for age or models)
    assert sorted(line.split(": ")[1] for line in found[:-1]) == [
        "missing",
        "missing",
        "models",
        "orphan",
        "stale",
    ]
    assert (
        'suite.yaml: missing: test case "case one": no fixture (fixtures/suite/case-one.jsonl)'
        in found
    )
    assert any(
        "recorded with agent model claude-haiku-4-5; the suite now uses claude-sonnet-4-5" in f
        for f in found
    )
    assert not any("127.0.0.1" in f for f in found)


def test_fixtures_check_usage_and_configuration_errors_are_exit_2(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    assert usage_error(project, "fixtures", "check", "suite.yaml", "--max-age", "soon") == (
        "argument --max-age: 'soon': must be an age such as 30d, 12h or 2w (a bare number: days)"
    )
    assert "required: fixtures_command" in usage_error(project, "fixtures")
    missing = project.run("fixtures", "check", "nowhere.yaml")
    assert missing.code == 2 and "nowhere.yaml" in missing.err


def test_fixtures_check_names_a_damaged_file_and_line(project: Project) -> None:
    project.write("suite.yaml", echo_suite(1))
    project.write("fixtures/suite/case-0.jsonl", '{"kind": "meta"}\nnot json\n')
    result = project.run("fixtures", "check", "suite.yaml")
    assert result.code == 1
    assert "suite.yaml: damaged: fixtures/suite/case-0.jsonl:1" in result.out


# ------------------------------------------------------------------ the Action's input


def test_the_action_reads_the_fixtures_input(tmp_path: Path) -> None:
    env = {"INPUT_SUITE": "evals/*.yaml", "INPUT_FIXTURES": "Replay"}
    assert read_inputs(env, tmp_path).fixtures == "replay"
    assert read_inputs({"INPUT_SUITE": "x.yaml"}, tmp_path).fixtures is None
    with pytest.raises(InputError) as info:
        read_inputs({**env, "INPUT_FIXTURES": "sometimes"}, tmp_path)
    assert "fixtures" in str(info.value) and "'sometimes'" in str(info.value)
