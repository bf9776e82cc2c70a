"""Simulated users (``user:``) and MCP servers in test cases read from JSON Lines.

The examples/support suites are split into the suite file (everything but
``test_cases:``) and a ``test_cases_file`` holding the same cases, one JSON
object a line: they validate, dry-run and run as their YAML forms do (the same
verdicts, conversations, tool calls and bounds), and a problem of a line --
its simulated user's, its fidelity judge's price, a tool name no MCP server
offers -- is located at that line of the file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiturn_eval import cli
from tests.conftest import Project
from tests.test_support_example import MCP_SUITE, SIMULATED, support_model

FILE = "cases.jsonl"


def split(suite: Path, into: Path, *, edit: tuple[str, str] = ("", "")) -> list[dict[str, Any]]:
    """``suite`` written to ``into``/suite.yaml with its test cases moved to ``into``/cases.jsonl
    (``edit``: one replacement in the suite file's text); the cases, as the file holds them."""
    text = suite.read_text()
    head, _, _ = text.partition("\ntest_cases:\n")
    cases = yaml.safe_load(text)["test_cases"]
    if edit[0]:
        assert edit[0] in head
        head = head.replace(*edit)
    into.mkdir(parents=True, exist_ok=True)
    (into / "suite.yaml").write_text(head + f"\ntest_cases_file: {FILE}\n")
    (into / FILE).write_text("".join(json.dumps(c) + "\n" for c in cases))
    return cases


def copied(suite: Path, into: Path, *, edit: tuple[str, str] = ("", "")) -> None:
    """``suite`` as written (its cases in YAML) at ``into``/suite.yaml, with the same edit."""
    into.mkdir(parents=True, exist_ok=True)
    (into / "suite.yaml").write_text(
        suite.read_text().replace(*edit) if edit[0] else suite.read_text()
    )


def run(
    capsys: pytest.CaptureFixture[str], suite: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*args[:1], str(suite), *args[1:]], env=env or {})
    captured = capsys.readouterr()
    return code, captured.out, captured.err


_WHERE = {"line", "file", "duration_ms", "suite", "started_at", "finished_at", "startup_ms"}


def verdicts(value: Any) -> Any:
    """A report's results without where each case is written or how long it took."""
    if isinstance(value, dict):
        return {k: verdicts(v) for k, v in value.items() if k not in _WHERE}
    if isinstance(value, list):
        return [verdicts(v) for v in value]
    return value


def report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data


# ---------------------------------------------------------------- simulated users


@pytest.fixture
def simulated_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The simulated-users suite twice in the test's folder: jsonl/ (split) and yaml/ (as written)."""
    monkeypatch.chdir(tmp_path)
    split(SIMULATED, tmp_path / "jsonl")
    copied(SIMULATED, tmp_path / "yaml")
    return tmp_path


def test_simulated_cases_from_json_lines_run_as_their_yaml_form(
    simulated_forms: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = simulated_forms
    results = {}
    for form in ("yaml", "jsonl"):
        code, out, err = run(
            capsys, tmp_path / form / "suite.yaml", "run", "-o", f"out-{form}", "-p", "4"
        )
        assert code == 0, (out, err)
        results[form] = report(tmp_path / f"out-{form}")["results"]
    assert verdicts(results["jsonl"]) == verdicts(results["yaml"])
    simulated = [c["simulation"]["outcome"] for c in results["jsonl"]]
    assert simulated == ["goal_met", "gave_up", "max_turns", "goal_met"]
    # where: each case and each of its turns, scripted or simulated, is its line of the file
    assert [(c["file"], c["line"]) for c in results["jsonl"]] == [
        (f"jsonl/{FILE}", n) for n in (1, 2, 3, 4)
    ]
    assert {t["line"] for t in results["jsonl"][1]["turns"]} == {2}
    assert [t["source"] for t in results["jsonl"][1]["turns"]][:2] == ["scripted", "simulated"]


def test_a_simulated_json_lines_suite_validates_and_dry_runs_as_its_yaml_form(
    simulated_forms: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = simulated_forms
    code, out, _ = run(capsys, tmp_path / "jsonl" / "suite.yaml", "validate")
    assert (code, out) == (0, f"ok: jsonl/suite.yaml: 4 test cases (from jsonl/{FILE}), 1 turns\n")
    code, out, _ = run(capsys, tmp_path / "yaml" / "suite.yaml", "validate")
    assert (code, out) == (0, "ok: yaml/suite.yaml: 4 test cases, 1 turns\n")
    shown = {}
    for form in ("yaml", "jsonl"):
        code, out, err = run(
            capsys, tmp_path / form / "suite.yaml", "run", "--dry-run", "-v", "--repeat", "2"
        )
        assert code == 0, err
        shown[form] = out.replace(f"jsonl/{FILE}:", "line ").replace("jsonl/", "yaml/")
    # the same bounds from the index and the simulations as from the models (lines apart)
    lines_of_yaml = [line for line in shown["yaml"].splitlines() if "(line " not in line]
    lines_of_jsonl = [line for line in shown["jsonl"].splitlines() if "(line " not in line]
    assert lines_of_jsonl == lines_of_yaml
    assert "up to 6 simulated messages" in shown["jsonl"]  # max_turns of the first case
    assert "a customer who does not know her card digits gets no refund (line 3)" in shown["jsonl"]


HEAD = """\
agent: {backend: python, factory: "tests.agents:scripted"}
user_simulator: {backend: python, factory: "tests.simulators:scripted"}
test_cases_file: cases.jsonl
"""


def _lines(project: Project, *cases: dict[str, Any], head: str = HEAD) -> None:
    project.write("suite.yaml", head)
    (project.root / FILE).write_text("".join(json.dumps(c) + "\n" for c in cases))


GOOD: dict[str, Any] = {"name": "fine", "user": {"goal": "g"}}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({"name": "x", "user": {"goal": "g", "max_turns": 0}}, "user.max_turns"),
        ({"name": "x", "input": "hi", "user": {"goal": "g"}}, "user"),
        (
            {"name": "x", "user": {"goal": "g", "simulator": {"factory": "nowhere.at_all:f"}}},
            "user.simulator.factory",
        ),
        (
            {"name": "x", "user": {"goal": "g", "simulator": {"fidelity": True}}},
            "user.simulator.fidelity: belongs in user: (user.fidelity)",
        ),
        (
            {
                "name": "x",
                "user": {"goal": "g", "simulator": {"factory": "tests.simulators:two_args"}},
            },
            "user.simulator.factory: the simulator factory must take one argument",
        ),
        (
            {"name": "x", "user": {"goal": "g", "fidelity": True}},
            "user.fidelity: fidelity: true judges each simulated message with the suite's judge",
        ),
    ],
)
def test_a_simulated_users_problem_is_located_at_its_line(
    project: Project, case: dict[str, Any], message: str
) -> None:
    _lines(project, GOOD, GOOD, case)
    result = project.run("validate", "suite.yaml", env={"ANTHROPIC_API_KEY": ""})
    assert result.code == 2, result.err
    found = [line for line in result.err.splitlines() if message in line]
    assert found, result.err
    assert all(line.lstrip().startswith(f'{FILE}:3 test_cases[2] ("x")') for line in found), found


def test_a_problem_of_user_simulator_is_said_once_at_the_suite_file(project: Project) -> None:
    head = HEAD.replace("tests.simulators:scripted", "nowhere.at_all:f")
    _lines(project, GOOD, {**GOOD, "name": "again"}, head=head)
    result = project.run("validate", "suite.yaml")
    assert result.code == 2
    said = [line for line in result.err.splitlines() if "user_simulator.factory" in line]
    assert len(said) == 1 and said[0].lstrip().startswith("suite.yaml:2"), result.err


def test_an_unpriced_simulator_or_fidelity_judge_of_a_line_is_located_there(
    project: Project,
) -> None:
    head = (
        "agent: {backend: python, factory: 'tests.agents:scripted'}\n"
        "judge: {backend: anthropic, model: judge-without-price}\n"
        "test_cases_file: cases.jsonl\n"
    )
    simulator = {"backend": "anthropic", "model": "simulator-without-price"}
    _lines(
        project,
        {"name": "scripted", "turns": [{"input": "q"}]},
        {"name": "sim", "user": {"goal": "g", "simulator": simulator, "fidelity": True}},
        head=head,
    )
    result = project.run("run", "suite.yaml", "--max-cost", "1", env={"ANTHROPIC_API_KEY": "sk-x"})
    assert result.code == 2, result.err
    errors = result.err.splitlines()
    model = [e for e in errors if "'simulator-without-price' has no known price" in e]
    assert model and model[0].lstrip().startswith(f"{FILE}:2 test_cases[1].user.simulator.model:")
    judge = [e for e in errors if "'judge-without-price' has no known price" in e]
    assert judge and judge[0].lstrip().startswith(f"{FILE}:2 test_cases[1].user.fidelity:")
    assert not (project.root / "out").exists()


def _simulated(name: str, goal: str, *said: Any, turns: int = 0) -> dict[str, Any]:
    """A simulated case of the file: ``turns`` scripted turns, then ``said`` by the simulator."""
    done = {"message": None, "done": True, "outcome": "goal_met", "reason": "done"}
    return {
        "name": name,
        "context": {"script": [], "say": [*said, done]},
        **({"turns": [{"input": f"scripted {t}"} for t in range(turns)]} if turns else {}),
        "user": {"goal": goal},
    }


def test_regrade_replays_a_simulated_case_of_the_file_and_refuses_a_changed_one(
    project: Project,
) -> None:
    from tests import agents, simulators

    simulators.reset()
    cases = [_simulated("one", "g1", "hello", "thanks"), _simulated("two", "g2", "hi", turns=1)]
    _lines(project, *cases)
    first = project.run("run", "suite.yaml")
    assert first.code == 0, first.err
    before = report(first.report_dir)["results"]
    assert [[t["source"] for t in c["turns"]] for c in before] == [
        ["simulated", "simulated"],
        ["scripted", "simulated"],
    ]
    simulators.reset()
    agents.reset()
    again = project.run("regrade", "out/report.json", "-o", "again")
    assert again.code == 0, again.err
    assert simulators.CONTEXTS == [] and agents.SENT == []  # replayed: nothing called
    after = report(again.report_dir)["results"]
    assert verdicts(after) == verdicts(before)
    cases[1]["user"]["goal"] = "another goal"  # the second line's simulation changed
    _lines(project, *cases)
    changed = project.run("regrade", "out/report.json", "-o", "changed")
    results = report(changed.report_dir)["results"]
    assert results[0]["outcome"] == "passed"
    assert results[1]["skipped"] and results[1]["errors"] == ["not regradable: simulation changed"]


# -------------------------------------------------------------------- MCP servers


def _mcp_env(url: str) -> dict[str, str]:
    from tests.fakes import anthropic_server as fa

    return {
        "ANTHROPIC_API_KEY": fa.API_KEY,
        "ANTHROPIC_BASE_URL": url,
        # the python whose site has the mcp package, first on the server's PATH
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": os.environ.get("HOME", "/"),
    }


#: the example's server, wherever the suite is written
SERVER = ("args: [billing_server.py]", f"args: [{MCP_SUITE.parent / 'billing_server.py'}]")


def test_an_mcp_suite_from_json_lines_runs_and_validates_as_its_yaml_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes import anthropic_server as fa

    monkeypatch.chdir(tmp_path)
    split(MCP_SUITE, tmp_path / "jsonl", edit=SERVER)
    copied(MCP_SUITE, tmp_path / "yaml", edit=SERVER)
    results = {}
    with fa.FakeAnthropic(support_model) as fake:
        env = _mcp_env(fake.url)
        for form in ("yaml", "jsonl"):
            suite = tmp_path / form / "suite.yaml"
            code, out, err = run(capsys, suite, "run", "-o", f"out-{form}", "-p", "3", env=env)
            assert code == 0, (out, err)
            results[form] = report(tmp_path / f"out-{form}")
            code, out, err = run(capsys, suite, "validate", "--mcp", env=env)
            assert code == 0, err
            assert "offers 2 of its 2 tools: lookup_order, issue_refund" in out
    assert verdicts(results["jsonl"]["results"]) == verdicts(results["yaml"]["results"])
    calls = [
        (c["name"], c.get("server"))
        for t in results["jsonl"]["results"][0]["turns"]
        for c in t["tool_invocations"]
    ]
    assert calls == [
        ("verify_identity", None),
        ("lookup_order", "billing"),
        ("issue_refund", "billing"),
    ]
    (server,) = results["jsonl"]["run"]["mcp_servers"]
    assert (server["name"], server["starts"]) == ("billing", 3)


def test_validate_mcp_locates_a_lines_unknown_tool_name_at_that_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = split(MCP_SUITE, tmp_path, edit=SERVER)
    cases[1]["turns"][0]["expected_tools"].append("refund_twice")
    cases[2]["conversation_tools"] = {"forbidden_tools": ["wipe_order"]}
    (tmp_path / FILE).write_text("".join(json.dumps(c) + "\n" for c in cases))
    code, out, err = run(
        capsys, tmp_path / "suite.yaml", "validate", "--mcp", env=_mcp_env("http://127.0.0.1:9")
    )
    assert code == 2, (out, err)
    errors = [e.strip() for e in err.splitlines()]
    assert any(
        e.startswith(f"{FILE}:2 test_cases[1].turns[0].expected_tools[2]:")
        and "'refund_twice' matches no tool" in e
        for e in errors
    ), errors
    assert any(
        e.startswith(f"{FILE}:3 test_cases[2].conversation_tools.forbidden_tools[0]:")
        and "'wipe_order'" in e
        for e in errors
    ), errors
