"""The action as GitHub runs it: ``entrypoint.sh`` in a subprocess, against a fake GitHub API.

Each test copies the sample workspace (``tests/data/action/workspace``: a tiny
calculator agent and passing, failing, broken and leaky suites), then runs
``entrypoint.sh`` with the ``INPUT_*`` variables (hyphens kept, defaults filled
in from ``action.yml`` as the runner does), the ``GITHUB_*`` variables, the
event file and the ``$GITHUB_OUTPUT`` / ``$GITHUB_STEP_SUMMARY`` files the
runner provides. The log is read the way the runner reads it
(:func:`runner_commands`), so an agent reply that smuggles a workflow command
would show up as one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import time
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pytest
import yaml

from tests.fakes.github_api import (
    Command,
    FakeGitHub,
    Token,
    parse_output_file,
    runner_commands,
    serve,
)

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "entrypoint.sh"
SAMPLE = ROOT / "tests" / "data" / "action" / "workspace"
REPO = "octo/calc"
TOKEN = "ghs_installationtoken0123456789"
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"
MERGE_SHA = "fedcba9876543210fedcba9876543210fedcba98"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def pr_event(number: int = 7, head_repo: str = REPO, base_repo: str = REPO) -> dict[str, Any]:
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"sha": HEAD_SHA, "ref": "feature", "repo": {"full_name": head_repo}},
            "base": {"sha": "b" * 40, "ref": "main", "repo": {"full_name": base_repo}},
        },
        "repository": {"full_name": base_repo},
    }


@dataclass
class Step:
    code: int
    log: str
    outputs: dict[str, str]
    summary: str
    workspace: Path

    @property
    def commands(self) -> list[Command]:
        return runner_commands(self.log)

    def annotations(self, level: str) -> list[Command]:
        return [c for c in self.commands if c.name == level]


class StepEnvironment(TypedDict, total=False):
    """How :meth:`Runner.prepare` sets a step up beyond its inputs (its keyword arguments)."""

    event_name: str
    event: dict[str, Any] | None
    env: dict[str, str] | None
    without: tuple[str, ...]


class Runner:
    """Plays the GitHub runner for a Docker action, minus the container."""

    def __init__(self, root: Path, fake: FakeGitHub, python_bin: Path | None = None) -> None:
        self.root = root
        self.fake = fake
        self.workspace = root / "workspace"
        shutil.copytree(SAMPLE, self.workspace, ignore=shutil.ignore_patterns("__pycache__"))
        self.files = root / "file_commands"
        self.files.mkdir()
        self.home = root / "home"
        self.home.mkdir()
        self.python_bin = python_bin or Path(sys.executable).parent
        self.count = 0

    def run(self, inputs: dict[str, str], **how: Unpack[StepEnvironment]) -> Step:
        """Run the entrypoint with ``inputs`` to its end (killed after 180 s)."""
        process, output, summary = self.start(inputs, **how)
        with process:
            try:
                stdout, _ = process.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        return self.step(process.returncode, stdout, output, summary)

    def start(
        self, inputs: dict[str, str], **how: Unpack[StepEnvironment]
    ) -> tuple[subprocess.Popen[bytes], Path, Path]:
        """Start the entrypoint with ``inputs`` in the environment :meth:`prepare` makes, its
        stderr into its stdout; also the step's output and summary files."""
        environment, output, summary = self.prepare(inputs, **how)
        process = subprocess.Popen(
            [str(ENTRYPOINT)],
            cwd=self.workspace,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return process, output, summary

    def step(self, code: int, stdout: bytes, output: Path, summary: Path) -> Step:
        return Step(
            code=code,
            log=stdout.decode("utf-8", errors="replace"),
            outputs=parse_output_file(output.read_text(encoding="utf-8")),
            summary=summary.read_text(encoding="utf-8"),
            workspace=self.workspace,
        )

    def prepare(
        self,
        inputs: dict[str, str],
        *,
        event_name: str = "pull_request",
        event: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        without: tuple[str, ...] = (),
    ) -> tuple[dict[str, str], Path, Path]:
        self.count += 1
        output = self.files / f"set_output_{self.count}"
        summary = self.files / f"step_summary_{self.count}"
        output.touch()
        summary.touch()
        event_path = self.root / f"event_{self.count}.json"
        event_path.write_text(json.dumps(pr_event() if event is None else event), encoding="utf-8")
        environment = {
            # the image's interpreter is /opt/multiturn-eval/bin/python; here, the test's own
            "MULTITURN_EVAL_PYTHON": str(self.python_bin / "python"),
            "PATH": f"{self.python_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.fake.base_url,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_SHA": MERGE_SHA,
            "GITHUB_REF": "refs/pull/7/merge",
            "RUNNER_TEMP": str(self.root),
        }
        # the runner sets every declared input, with action.yml's default when not given
        for name, spec in ACTION["inputs"].items():
            value = inputs.get(name, str(spec.get("default", "")))
            if value == "${{ github.token }}":
                value = TOKEN
            environment["INPUT_" + name.upper()] = value
        environment.update(env or {})
        for name in without:
            del environment[name]
        return environment, output, summary


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(tokens={TOKEN: Token("github-actions[bot]", "bot", write=True)})
    with serve(fake) as running:
        yield running


@pytest.fixture
def runner(tmp_path: Path, github: FakeGitHub) -> Runner:
    return Runner(tmp_path, github)


def comments(fake: FakeGitHub, number: int = 7) -> list[dict[str, Any]]:
    return fake.issue_comments(REPO, number)


def writes(fake: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake.requests if r.method in ("POST", "PATCH")]


# ---------------------------------------------------------------------- the runs


def test_failing_suite_fails_the_step_annotates_turns_and_keeps_one_comment(
    runner: Runner, github: FakeGitHub
) -> None:
    first = runner.run({"suite": "evals/failing.yaml"})
    assert first.code == 1, first.log
    out = first.outputs
    assert (out["total"], out["passed"], out["failed"], out["pass-rate"]) == (
        "3",
        "1",
        "2",
        "0.3333",
    )
    assert out["report-dir"] == "multiturn-eval-report"
    for name, file in [
        ("json-report", "report.json"),
        ("junit-report", "junit.xml"),
        ("markdown-report", "summary.md"),
        ("html-report", "report.html"),
    ]:
        if out[name]:  # every renderer the package has
            assert out[name] == f"multiturn-eval-report/{file}"
            assert (runner.workspace / out[name]).is_file()
    assert out["json-report"] and out["markdown-report"]

    # annotations at the YAML line of each failing turn, most important first
    errors = first.annotations("error")
    assert [(e.properties["file"], e.properties["line"]) for e in errors] == [
        ("evals/failing.yaml", "19"),
        ("evals/failing.yaml", "26"),
    ]
    assert errors[0].properties["title"] == "calculator-failing › buggy-multiply › turn 2"
    assert "multiply: not called in this turn" in errors[0].message
    assert (
        "expected: '20'" in errors[0].message
        and "got:      'The answer is 9.'" in errors[0].message
    )
    notices = first.annotations("notice")
    assert any("2 of 3 test cases failed" in n.message for n in notices)

    # hostile agent text (in replies and printed to stdout/stderr) never becomes a command
    assert "pwned" in first.log and "printed to stderr" in first.log
    for command in first.commands:
        assert command.name in ("error", "notice", "warning", "add-mask"), command
        assert not command.properties.get("file", "").startswith("evil"), command
        assert "printed by the agent" not in command.message
    assert len(errors) == 2

    # the summary is summary.md, the comment too (with links to the run)
    marker = (runner.workspace / out["markdown-report"]).read_text().split("\n", 1)[0]
    assert marker.startswith("<!-- multiturn-eval:") and marker.endswith("-->")
    assert first.summary.startswith(marker)
    [comment] = comments(github)
    assert comment["body"].startswith(marker + "\n")
    assert "https://github.com/octo/calc/actions/runs/4242" in comment["body"]
    assert "@octocat" not in comment["body"]  # mentions defused by the renderer
    assert out["comment-url"] == comment["html_url"]
    assert writes(github) == ["POST /repos/octo/calc/issues/7/comments"]
    # the installation token cannot say who it is; GitHub's API was asked properly
    post = github.calls("POST")[0]
    assert post.authorization == f"Bearer {TOKEN}"
    assert post.headers["accept"] == "application/vnd.github+json"
    assert post.headers["x-github-api-version"] == "2022-11-28"

    # second run: the same comment is updated, no new one
    second = runner.run({"suite": "evals/failing.yaml"})
    assert second.code == 1
    assert [c["id"] for c in comments(github)] == [comment["id"]]
    assert writes(github)[-1] == f"PATCH /repos/octo/calc/issues/comments/{comment['id']}"
    assert second.outputs["comment-url"] == comment["html_url"]


def test_passing_suite_exits_0_and_writes_every_output(runner: Runner, github: FakeGitHub) -> None:
    step = runner.run({"suite": "evals/passing.yaml", "parallel-test-cases": "2"})
    assert step.code == 0, step.log
    assert set(step.outputs) == set(ACTION["outputs"])  # every declared output is written
    assert (step.outputs["total"], step.outputs["failed"], step.outputs["pass-rate"]) == (
        "2",
        "0",
        "1",
    )
    assert step.annotations("error") == []
    assert step.summary.startswith("<!-- multiturn-eval:")
    report = json.loads((step.workspace / step.outputs["json-report"]).read_text())
    # the PR's head commit and number reach the report (not the merge commit)
    assert (report["run"]["git_sha"], report["run"]["pr_number"]) == (HEAD_SHA, 7)
    assert len(comments(github)) == 1


def test_a_judged_suite_replays_its_fixtures_with_no_key(
    runner: Runner, github: FakeGitHub
) -> None:
    """``fixtures: replay`` and no API key input: what a fork's pull request can run."""
    examples = runner.workspace / "examples"
    shutil.copytree(
        ROOT / "examples" / "support",
        examples / "support",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "examples" / "__init__.py", examples / "__init__.py")
    step = runner.run(
        {"suite": "examples/support/suite-judged.yaml", "fixtures": "replay"},
        env={"ANTHROPIC_API_KEY": ""},
    )
    assert step.code == 0, step.log
    assert (step.outputs["total"], step.outputs["passed"]) == ("2", "2")
    report = json.loads((step.workspace / step.outputs["json-report"]).read_text())
    assert (report["run"]["fixtures"]["mode"], report["run"]["fixtures"]["replayed"]) == (
        "replay",
        4,
    )
    assert "Replayed from fixtures recorded on" in step.summary
    assert "Replayed from fixtures recorded on" in comments(github)[0]["body"]


def test_broken_suite_exits_2_with_an_annotation_at_the_bad_line(
    runner: Runner, github: FakeGitHub, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.log"
    # an earlier passing step left its reports in the same directory: they must not be reused
    assert runner.run({"suite": "evals/passing.yaml"}).code == 0
    [passing_comment] = comments(github)
    step = runner.run({"suite": "evals/broken.yaml"}, env={"CALCULATOR_CALL_LOG": str(calls)})
    assert step.code == 2, step.log
    assert "removed reports of an earlier run" in step.log
    assert not calls.exists()  # no agent was called
    [error] = step.annotations("error")
    assert (error.properties["file"], error.properties["line"]) == ("evals/broken.yaml", "10")
    assert "ground_truht" in error.message and "ground_truth" in error.message
    assert "configuration error" in step.summary
    assert "passed" not in step.summary
    # the sticky comment says so too, instead of an earlier green result staying up
    first, comment = comments(github)
    assert first == passing_comment  # the passing suite's comment is another suite set's
    assert comment["body"].startswith("<!-- multiturn-eval:")
    assert "configuration error" in comment["body"]
    assert (step.outputs["total"], step.outputs["json-report"]) == ("", "")


def test_fork_pull_request_skips_the_comment_with_a_notice_and_still_fails(
    runner: Runner, github: FakeGitHub
) -> None:
    step = runner.run({"suite": "evals/failing.yaml"}, event=pr_event(head_repo="forker/calc"))
    assert step.code == 1
    assert any("fork" in n.message.lower() for n in step.annotations("notice"))
    assert writes(github) == [] and step.outputs["comment-url"] == ""
    assert step.summary.startswith("<!-- multiturn-eval:")  # the results are in the summary


def test_read_only_token_gets_a_notice_not_a_failure(runner: Runner, github: FakeGitHub) -> None:
    github.tokens[TOKEN].write = False
    step = runner.run({"suite": "evals/passing.yaml"})
    assert step.code == 0, step.log
    notices = [n.message for n in step.annotations("notice")]
    assert any("Resource not accessible by integration" in n for n in notices), notices
    assert any("pull-requests: write" in n for n in notices)
    assert step.annotations("error") == [] and comments(github) == []


def test_rate_limits_are_waited_out(runner: Runner, github: FakeGitHub) -> None:
    github.fail_next(
        "GET",
        r"/issues/7/comments$",
        429,
        headers={"retry-after": "1"},
        message="You have exceeded a secondary rate limit.",
    )
    github.fail_next(
        "POST",
        r"/issues/7/comments$",
        403,
        headers={
            "x-ratelimit-remaining": "0",
            "x-ratelimit-limit": "5000",
            "x-ratelimit-reset": str(int(time.time())),
        },
        message="API rate limit exceeded for installation ID 1.",
    )
    step = runner.run({"suite": "evals/passing.yaml"})
    assert step.code == 0, step.log
    assert len(comments(github)) == 1
    assert len(github.calls("POST")) == 2 and len(github.calls("GET", "/comments$")) == 2


def test_a_rate_limit_too_long_to_wait_for_is_a_warning_not_a_failure(
    runner: Runner, github: FakeGitHub
) -> None:
    github.fail_next(
        "POST", r"/issues/7/comments$", 429, headers={"retry-after": "3600"}, message="slow down"
    )
    step = runner.run({"suite": "evals/passing.yaml"})
    assert step.code == 0, step.log
    [warning] = step.annotations("warning")
    assert "rate limited by GitHub" in warning.message and "3600 s" in warning.message
    assert comments(github) == [] and step.outputs["comment-url"] == ""


def test_a_body_github_finds_too_long_is_retried_shorter(
    runner: Runner, github: FakeGitHub
) -> None:
    github.max_body = 1500  # as if GitHub counted the text differently from us
    step = runner.run({"suite": "evals/failing.yaml"})
    assert step.code == 1
    [comment] = comments(github)
    assert len(comment["body"]) <= 1500
    assert comment["body"].startswith("<!-- multiturn-eval:")
    assert "cut to fit GitHub's size limit" in comment["body"]
    assert len(github.calls("POST")) >= 2
    assert "shortened" in step.log


def test_earlier_comment_is_found_on_a_later_page_and_nobody_elses_is_touched(
    runner: Runner, github: FakeGitHub
) -> None:
    first = runner.run({"suite": "evals/passing.yaml"})
    [ours] = comments(github)
    marker = ours["body"].split("\n", 1)[0]
    github.comments[(REPO, 7)].clear()
    # a person quoting our marker, other bots, then ours on page 3 (2 per page)
    person = github.add_comment(REPO, 7, marker + "\nquoted by a person", "alice", "User")
    github.add_comment(REPO, 7, "<!-- other-bot -->\nhello", "other-bot[bot]")
    github.add_comment(REPO, 7, "LGTM", "bob", "User")
    github.add_comment(
        REPO, 7, "<!-- multiturn-eval:000000000000 -->\nanother suite set", "github-actions[bot]"
    )
    own = github.add_comment(REPO, 7, marker + "\nold result", "github-actions[bot]")
    github.page_cap = 2
    step = runner.run({"suite": "evals/passing.yaml"})
    assert first.code == step.code == 0
    by_id = {c["id"]: c for c in comments(github)}
    assert len(by_id) == 5
    assert by_id[person]["body"].endswith("quoted by a person")
    assert by_id[own]["body"].startswith(marker) and "old result" not in by_id[own]["body"]
    assert writes(github)[-1] == f"PATCH /repos/octo/calc/issues/comments/{own}"
    pages = [r.query.get("page", ["1"])[0] for r in github.calls("GET", "/issues/7/comments$")]
    assert pages[-3:] == ["1", "2", "3"]


def test_a_personal_token_matches_comments_by_its_own_login(
    runner: Runner, github: FakeGitHub
) -> None:
    github.tokens["ghp_personaltoken0123456789"] = Token("carol", "user")
    runner.run({"suite": "evals/passing.yaml", "github-token": "ghp_personaltoken0123456789"})
    [ours] = comments(github)
    assert ours["user"]["login"] == "carol"
    github.add_comment(REPO, 7, ours["body"], "github-actions[bot]")  # same marker, other author
    runner.run({"suite": "evals/passing.yaml", "github-token": "ghp_personaltoken0123456789"})
    assert writes(github)[-1] == f"PATCH /repos/octo/calc/issues/comments/{ours['id']}"


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"suite": ""}, ["suite"]),
        (
            {"suite": "evals/passing.yaml", "parallel-test-cases": "0", "comment": "sometimes"},
            ["parallel-test-cases", "comment"],
        ),
        ({"suite": "evals/passing.yaml", "fail-on-failure": "yes"}, ["fail-on-failure"]),
        ({"suite": "evals/passing.yaml", "working-directory": "../.."}, ["working-directory"]),
        ({"suite": "evals/passing.yaml", "report-dir": "/tmp/elsewhere"}, ["report-dir"]),
        ({"suite": "evals/passing.yaml", "install": "missing-requirements.txt"}, ["install"]),
    ],
)
def test_bad_inputs_exit_2_naming_the_input(
    runner: Runner, github: FakeGitHub, inputs: dict[str, str], named: list[str]
) -> None:
    step = runner.run(inputs)
    assert step.code == 2, step.log
    errors = step.annotations("error")
    assert [e.properties["title"] for e in errors] == [
        f"multiturn-eval: invalid input '{name}'" for name in named
    ]
    assert not (runner.workspace / "multiturn-eval-report").exists()
    assert github.requests == []


# ------------------------------------------------------- the job's environment


def _impostor_pythons(directory: Path) -> Path:
    """``python`` and ``python3`` that are not the action's (as a job's PATH may hold)."""
    directory.mkdir()
    for name in ("python", "python3"):
        script = directory / name
        script.write_text("#!/bin/sh\necho 'not the action interpreter' >&2\nexit 97\n")
        script.chmod(0o755)
    return directory


@pytest.mark.parametrize(
    "path",
    [
        "{impostors}:/usr/local/bin:/usr/bin:/bin",  # a job-level `env: PATH:` of the host
        "/home/runner/.local/bin:/opt/hostedtoolcache/Python/3.12.3/x64/bin",  # GITHUB_ENV PATH=
        "",
    ],
    ids=["impostor-python-first", "host-paths-only", "empty"],
)
def test_a_job_level_path_cannot_break_the_action(
    runner: Runner, tmp_path: Path, path: str
) -> None:
    # The runner passes the job's environment into the container, PATH included: the
    # entrypoint runs its own interpreter by absolute path, whatever PATH says.
    impostors = _impostor_pythons(tmp_path / "impostors")
    step = runner.run(
        {"suite": "evals/passing.yaml", "comment": "never"},
        env={"PATH": path.format(impostors=impostors)},
    )
    assert step.code == 0, step.log
    assert "not the action interpreter" not in step.log
    assert set(step.outputs) == set(ACTION["outputs"])
    assert (step.outputs["total"], step.outputs["failed"]) == ("2", "0")


def test_without_its_interpreter_the_entrypoint_says_which_one_it_wanted(
    runner: Runner, tmp_path: Path
) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    step = runner.run({"suite": "evals/passing.yaml"}, env={"MULTITURN_EVAL_PYTHON": str(missing)})
    assert step.code == 2
    [error] = step.annotations("error")
    assert error.properties["title"] == "multiturn-eval: no interpreter"
    assert str(missing) in error.message and "MULTITURN_EVAL_PYTHON" in error.message
    # unset, it is the image's virtual environment (the one the Dockerfile builds)
    default = Path("/opt/multiturn-eval/bin/python")
    if default.exists():
        pytest.skip("this machine has the image's interpreter path")
    step = runner.run({"suite": "evals/passing.yaml"}, without=("MULTITURN_EVAL_PYTHON",))
    assert step.code == 2
    [error] = step.annotations("error")
    assert error.message.startswith(f"{default} is not an executable file")


@pytest.mark.parametrize("workspace", [None, "/nonexistent/github/workspace", "file"])
def test_a_missing_workspace_is_named_as_such(
    runner: Runner, github: FakeGitHub, workspace: str | None
) -> None:
    if workspace == "file":
        workspace = str(runner.workspace / "evals" / "passing.yaml")
    step = runner.run(
        {"suite": "evals/passing.yaml", "working-directory": "evals"},
        env={} if workspace is None else {"GITHUB_WORKSPACE": workspace},
        without=("GITHUB_WORKSPACE",) if workspace is None else (),
    )
    assert step.code == 2, step.log
    [error] = step.annotations("error")
    assert error.properties["title"] == "multiturn-eval: GITHUB_WORKSPACE"
    assert "GITHUB_WORKSPACE" in error.message
    assert ("is not set" if workspace is None else "not a directory") in error.message
    assert "working-directory" not in step.log and "report-dir" not in error.message
    assert set(step.outputs) == set(ACTION["outputs"])
    assert all(value == "" for value in step.outputs.values()), step.outputs
    assert github.requests == []
    assert not (runner.workspace / "multiturn-eval-report").exists()


@pytest.mark.parametrize("report_dir", ["multiturn-eval-report", "out/nested/reports"])
def test_after_a_configuration_error_the_report_dir_output_names_a_directory_that_exists(
    runner: Runner, report_dir: str
) -> None:
    step = runner.run({"suite": "evals/broken.yaml", "report-dir": report_dir, "comment": "never"})
    assert step.code == 2, step.log
    assert step.outputs["report-dir"] == report_dir
    directory = runner.workspace / step.outputs["report-dir"]
    assert directory.is_dir() and list(directory.iterdir()) == []  # no report: none was written
    assert step.outputs["json-report"] == step.outputs["html-report"] == ""

    # a suite glob matching nothing is a configuration error of its own: the same holds
    step = runner.run({"suite": "evals/none-*.yaml", "report-dir": "empty", "comment": "never"})
    assert step.code == 2, step.log
    assert (runner.workspace / step.outputs["report-dir"]).is_dir()


def test_fail_on_failure_false_passes_the_step_but_reports_the_failures(runner: Runner) -> None:
    step = runner.run({"suite": "evals/failing.yaml", "fail-on-failure": "false"})
    assert step.code == 0
    assert step.outputs["failed"] == "2"
    assert len(step.annotations("error")) == 2


def test_working_directory_and_workspace_are_on_the_import_path(runner: Runner) -> None:
    # cwd is evals/, the agent package is at the workspace root
    step = runner.run(
        {
            "suite": "*.yaml",
            "working-directory": "evals",
            "filter": "buggy*",
            "tags": "",
            "comment": "never",
        }
    )
    assert step.code == 2  # broken.yaml is among *.yaml
    step = runner.run(
        {"suite": "failing.yaml, passing.yaml", "working-directory": "evals", "filter": "buggy*"}
    )
    assert step.code == 1, step.log
    assert step.outputs["total"] == "1"
    assert step.outputs["json-report"] == "evals/multiturn-eval-report/report.json"
    [error] = step.annotations("error")
    assert error.properties["file"] == "evals/failing.yaml"


def test_tags_select_test_cases(runner: Runner) -> None:
    step = runner.run({"suite": "evals/passing.yaml", "tags": "smoke", "comment": "never"})
    assert step.code == 0
    assert step.outputs["total"] == "1"


def test_push_comments_only_with_always_and_finds_the_pr_of_the_commit(
    runner: Runner, github: FakeGitHub
) -> None:
    push = {"ref": "refs/heads/feature", "after": MERGE_SHA, "repository": {"full_name": REPO}}
    github.commit_pulls[MERGE_SHA] = [
        {"number": 9, "state": "open", "base": {"repo": {"full_name": REPO}}}
    ]
    step = runner.run(
        {"suite": "evals/passing.yaml"},
        event_name="push",
        event=push,
        env={"GITHUB_REF": "refs/heads/feature"},
    )
    assert step.code == 0 and github.requests == []
    step = runner.run(
        {"suite": "evals/passing.yaml", "comment": "always"},
        event_name="push",
        event=push,
        env={"GITHUB_REF": "refs/heads/feature"},
    )
    assert step.code == 0
    assert len(comments(github, 9)) == 1
    assert github.calls("GET", f"/commits/{MERGE_SHA}/pulls")


def test_secrets_never_reach_reports_summary_or_comment(runner: Runner, github: FakeGitHub) -> None:
    key = "sk-ant-api03-secretvalue-0123456789"
    step = runner.run(
        {"suite": "evals/leaky.yaml", "anthropic-api-key": key},
        env={"ACTIONS_RUNTIME_TOKEN": "eyJruntime.token.value"},
    )
    assert step.code == 1
    report_dir = runner.workspace / step.outputs["report-dir"]
    # the agent saw the key (so it could leak it) but never the GitHub or runtime token
    response = json.loads((report_dir / "report.json").read_text())["results"][0]["turns"][0]
    assert response["response"] == "key=*** token=no-token runtime=no-runtime-token"
    for path in report_dir.iterdir():
        assert key not in path.read_text(encoding="utf-8"), path
    assert key not in step.summary and key not in comments(github)[0]["body"]
    assert TOKEN not in step.summary
    masks = [c.message for c in step.commands if c.name == "add-mask"]
    assert key in masks and TOKEN in masks
    for command in step.commands:
        if command.name != "add-mask":
            assert key not in command.message


def test_a_cancelled_job_still_leaves_reports_outputs_and_the_comment(
    runner: Runner, github: FakeGitHub
) -> None:
    process, output, summary = runner.start({"suite": "evals/slow.yaml"})
    assert process.stdout is not None
    seen = b""
    for line in process.stdout:  # the quick test case is done, the slow one is running
        seen += line
        if b"slow::quick" in line:
            break
    process.send_signal(signal.SIGTERM)  # what cancelling the job does to the container
    rest, _ = process.communicate(timeout=60)
    step = runner.step(process.returncode, seen + rest, output, summary)
    assert step.code == 3, step.log
    assert (step.outputs["total"], step.outputs["passed"]) == ("2", "1")
    report = json.loads((runner.workspace / step.outputs["json-report"]).read_text())
    assert report["run"]["complete"] is False and "SIGTERM" in report["run"]["stop_reason"]
    assert step.summary.startswith("<!-- multiturn-eval:")
    [comment] = comments(github)
    assert "incomplete" in comment["body"]


def test_an_agent_stuck_past_its_timeout_does_not_hold_the_step(runner: Runner) -> None:
    (runner.workspace / "evals" / "stuck.yaml").write_text(
        "agent: {backend: python, factory: 'agents.slow:make_blocking_session'}\n"
        "execution: {turn_timeout: 0.5}\n"
        "test_cases:\n  - {name: stuck, input: wait 600, ground_truth: done}\n"
    )
    step = runner.run({"suite": "evals/stuck.yaml", "comment": "never"})  # 180 s limit
    assert step.code == 1, step.log
    assert step.outputs["failed"] == "1"
    [error] = step.annotations("error")
    assert "timeout" in error.message.lower() or "timed out" in error.message.lower()


# ---------------------------------------------------------------------- install


def _wheel(directory: Path) -> Path:
    """A one-module wheel: ``mte_fixture_dep.make_session`` (an echo agent)."""
    name, version = "mte_fixture_dep", "1.0"
    dist = f"{name}-{version}"
    files = {
        f"{name}/__init__.py": (
            "class _Echo:\n"
            "    def send(self, message):\n"
            "        return 'installed: ' + message\n\n"
            "def make_session(context):\n"
            "    return _Echo()\n"
        ),
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _throwaway_python(root: Path) -> Path:
    """A venv that sees the development packages but installs into itself (not .venv)."""
    target = root / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    [own_site] = list(target.glob("lib/python3*/site-packages"))
    dev_sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (own_site / "_dev.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in dev_sites)
    )
    return target / "bin"


def test_install_puts_the_suites_requirements_in_before_the_run(
    tmp_path: Path, github: FakeGitHub
) -> None:
    runner = Runner(tmp_path, github, python_bin=_throwaway_python(tmp_path))
    _wheel(runner.workspace / "wheels")
    (runner.workspace / "requirements-eval.txt").write_text(
        "--no-index\n./wheels/mte_fixture_dep-1.0-py3-none-any.whl\n"
    )
    (runner.workspace / "evals" / "installed.yaml").write_text(
        "agent: {backend: python, factory: 'mte_fixture_dep:make_session'}\n"
        "evaluations: [{type: standard, metric: equality}]\n"
        "test_cases:\n"
        "  - {name: echo, input: hi, ground_truth: 'installed: hi'}\n"
    )
    step = runner.run(
        {"suite": "evals/installed.yaml", "install": "requirements-eval.txt", "comment": "never"}
    )
    assert step.code == 0, step.log
    assert "Successfully installed mte-fixture-dep-1.0" in step.log
    groups = [c.name for c in step.commands if c.name in ("group", "endgroup")]
    assert groups == ["group", "endgroup"]
    assert not list(
        (Path(sys.executable).parent.parent).glob("lib/python3*/site-packages/mte_fixture_dep")
    )

    failed = runner.run(
        {"suite": "evals/installed.yaml", "install": "--no-index no-such-package-here"}
    )
    assert failed.code == 2
    [error] = failed.annotations("error")
    assert error.properties["title"] == "multiturn-eval: input 'install'"


# ------------------------------------------------------------------- ownership


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_written_files_are_handed_back_to_the_workspace_owner(runner: Runner) -> None:
    for path in [runner.workspace, *runner.workspace.rglob("*")]:
        os.chown(path, 1234, 1234)
    step = runner.run(
        {"suite": "evals/passing.yaml", "report-dir": "out/eval-reports", "comment": "never"}
    )
    assert step.code == 0
    written = [runner.workspace / "out", *sorted((runner.workspace / "out").rglob("*"))]
    assert len(written) >= 4
    assert {(p.stat().st_uid, p.stat().st_gid) for p in written} == {(1234, 1234)}
    assert not list(runner.workspace.rglob("__pycache__"))  # no root-owned bytecode either
