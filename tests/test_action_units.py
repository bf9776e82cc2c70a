"""The action's pieces one by one: escaping, outputs, inputs, annotations, PR, REST client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from multiturn_eval.errors import GitHubError, InputError, RateLimited
from multiturn_eval.github import action as action_module
from multiturn_eval.github.annotations import rank_annotations
from multiturn_eval.github.client import GitHubClient
from multiturn_eval.github.commands import Annotation, escape_data, escape_property, format_command
from multiturn_eval.github.comment import (
    MAX_BODY,
    attempts,
    is_ours,
    pull_request_from_event,
    pull_request_of_commit,
    shorten,
    upsert_comment,
)
from multiturn_eval.github.files import append_summary, format_output, write_outputs
from multiturn_eval.github.inputs import INPUTS, env_name, read_inputs
from multiturn_eval.results import CaseResult, MetricResult, Report, RunInfo, TurnResult
from multiturn_eval.rollup import summarize
from tests.fakes.github_api import (
    FakeGitHub,
    Token,
    parse_output_file,
    runner_commands,
    serve,
)

REPO = "octo/calc"
TOKEN = "ghs_unit0123456789"

# ------------------------------------------------------------------ workflow commands


def test_escaping_follows_the_runner_rules() -> None:
    assert escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = format_command(
        "error",
        {"file": "evals/a,b.yaml", "line": 3, "title": "x: y", "col": None},
        "1\n::warning::x",
    )
    assert line == "::error file=evals/a%2Cb.yaml,line=3,title=x%3A y::1%0A::warning::x"
    [command] = runner_commands(line)
    assert (command.name, command.properties, command.message) == (
        "error",
        {"file": "evals/a,b.yaml", "line": "3", "title": "x: y"},
        "1\n::warning::x",
    )


def test_annotation_text_loses_control_characters_and_stays_one_line() -> None:
    hostile = "ok\r::error::injected\x1b[31m red \x07bell\n::notice::two"
    line = Annotation("warning", hostile, title="t\r::error::x").command()
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    commands = runner_commands(line)
    assert [c.name for c in commands] == ["warning"]
    assert commands[0].message == "ok\n::error::injected red bell\n::notice::two"


def test_stop_commands_in_the_simulated_runner() -> None:
    log = "::stop-commands::tok\n::error::no\n  ::tok::\n::error::yes\n"
    assert [c.message for c in runner_commands(log)] == ["yes"]


# ---------------------------------------------------------------------- env files


def test_outputs_use_fresh_random_delimiters_that_no_value_can_close(tmp_path: Path) -> None:
    path = tmp_path / "out"
    tricky = "line 1\nghadelimiter_abc\nname=evil\n"
    write_outputs(path, {"a": tricky, "b": "", "c": "plain"})
    text = path.read_text()
    delimiters = [line.split("<<", 1)[1] for line in text.splitlines() if "<<" in line]
    assert len(set(delimiters)) == 3 and all(len(d) > 40 for d in delimiters)
    assert parse_output_file(text) == {"a": tricky, "b": "", "c": "plain"}


def test_a_delimiter_found_in_the_value_is_drawn_again() -> None:
    tokens = iter(["same", "other"])
    text = format_output("x", "ghadelimiter_same", lambda: next(tokens))
    assert text == "x<<ghadelimiter_other\nghadelimiter_same\nghadelimiter_other\n"


def test_step_summary_is_kept_under_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "summary"
    big = ("é" * 99 + "\n") * 12_000  # about 2.4 MB of UTF-8
    assert append_summary(path, big) is True
    data = path.read_bytes()
    assert len(data) < 1024 * 1024
    assert data.decode("utf-8").endswith("see the reports._\n")
    assert append_summary(tmp_path / "small", "# ok") is False


# -------------------------------------------------------------------------- inputs


def _ws(tmp_path: Path) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "requirements.txt").write_text("x\n")
    return tmp_path


def test_inputs_defaults_and_lists(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    env = {
        "INPUT_SUITE": "evals/a.yaml\n evals/b*.yaml ,evals/c d.yaml\n",
        "INPUT_TAGS": "smoke, nightly\nslow",
        "INPUT_INSTALL": "requirements.txt numpy>=2 ./wheels/x-1.0-py3-none-any.whl --pre",
        "INPUT_PARALLEL-TEST-CASES": " 4 ",
        "INPUT_FAIL-ON-FAILURE": "False",
        "INPUT_COMMENT": "Never",
    }
    inputs = read_inputs(env, ws)
    assert inputs.suites == ["evals/a.yaml", "evals/b*.yaml", "evals/c d.yaml"]
    assert inputs.tags == ["smoke", "nightly", "slow"]
    assert inputs.install == [
        "-r",
        "requirements.txt",
        "numpy>=2",
        "./wheels/x-1.0-py3-none-any.whl",
        "--pre",
    ]
    assert (inputs.parallel_test_cases, inputs.fail_on_failure, inputs.comment) == (
        4,
        False,
        "never",
    )
    assert inputs.working_directory == ws.resolve()
    assert inputs.report_dir == ws.resolve() / "multiturn-eval-report"
    assert inputs.filter is None and inputs.github_token == ""


def test_every_input_is_read_from_its_hyphenated_variable(tmp_path: Path) -> None:
    class Recording(dict[str, str]):
        seen: ClassVar[set[str]] = set()

        def get(self, key: str, default: Any = None) -> Any:
            self.seen.add(key)
            return super().get(key, default)

    env = Recording(INPUT_SUITE="a.yaml")
    read_inputs(env, _ws(tmp_path))
    assert {env_name(name) for name in INPUTS} <= Recording.seen
    assert "INPUT_PARALLEL-TEST-CASES" in Recording.seen


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"INPUT_SUITE": " \n , "}, "input 'suite': is required"),
        ({"INPUT_PARALLEL-TEST-CASES": "4.5"}, "input 'parallel-test-cases': '4.5' is not a whole"),
        ({"INPUT_PARALLEL-TEST-CASES": "2000"}, "from 1 to 1024"),
        ({"INPUT_COMMENT": "yes"}, "input 'comment': 'yes' is not one of auto, always, never"),
        ({"INPUT_FAIL-ON-FAILURE": "1"}, "input 'fail-on-failure': '1' is not a boolean"),
        ({"INPUT_WORKING-DIRECTORY": "missing"}, "'missing' is not a directory"),
        ({"INPUT_WORKING-DIRECTORY": "/etc"}, "'/etc' is outside the workspace"),
        ({"INPUT_REPORT-DIR": "../out"}, "input 'report-dir': '../out' must be a directory inside"),
        ({"INPUT_REPORT-DIR": "."}, "input 'report-dir': '.' must be a directory inside"),
        ({"INPUT_REPORT-DIR": "requirements.txt"}, "is a file, not a directory"),
        (
            {"INPUT_INSTALL": "reqs/dev.txt"},
            "input 'install': requirements file 'reqs/dev.txt' not",
        ),
    ],
)
def test_each_bad_input_is_named(tmp_path: Path, env: dict[str, str], problem: str) -> None:
    with pytest.raises(InputError) as caught:
        read_inputs({"INPUT_SUITE": "a.yaml", **env}, _ws(tmp_path))
    assert len(caught.value.problems) == 1
    assert problem in str(caught.value.problems[0])


# --------------------------------------------------------------------- annotations


def _turn(
    index: int, passed: bool, *, line: int | None = None, error: str | None = None
) -> TurnResult:
    metrics = (
        []
        if passed or error
        else [
            MetricResult(
                metric_name="numeric", kind="standard", passed=False, reason=f"wrong {index}"
            )
        ]
    )
    return TurnResult(
        turn_index=index,
        line=line,
        input=f"question {index}",
        response=None if error else f"answer {index}",
        ground_truth=str(index),
        metric_results=metrics,
        passed=passed,
        errors=[error] if error else [],
        infrastructure_error=bool(error),
    )


def _case(
    index: int, turns: list[TurnResult], outcome: str, suite: str = "evals/a.yaml"
) -> CaseResult:
    return CaseResult(
        index=index,
        name=f"case-{index}",
        suite=suite,
        suite_name="a",
        line=10 * index + 1,
        backend="python",
        passed=outcome == "passed",
        outcome=outcome,
        turns=turns,
    )


def _report(results: list[CaseResult]) -> Report:
    run = RunInfo(
        suites=["evals/a.yaml"], started_at="", finished_at="", duration_ms=0, complete=True
    )
    return Report(run=run, summary=summarize(results), results=results)


def test_annotations_rank_first_failures_then_errors_then_the_rest_within_budget() -> None:
    results = [
        _case(
            0, [_turn(0, True, line=2), _turn(1, False, line=3), _turn(2, False, line=4)], "failed"
        ),
        _case(1, [_turn(0, False, line=12, error="TurnTimeout: 60 s")], "error"),
        _case(2, [_turn(0, True, line=22)], "passed"),
        _case(
            3,
            [_turn(0, False, line=32), _turn(1, False, line=33)],
            "failed",
            suite="/elsewhere/b.yaml",
        ),
    ]
    ranked = rank_annotations(
        _report(results), lambda s: None if s.startswith("/") else s, budget=3
    )
    where = [(a.file, a.line) for a in ranked.annotations]
    assert where == [("evals/a.yaml", 3), (None, 32), ("evals/a.yaml", 12)]
    assert ranked.omitted == 2
    first = ranked.annotations[0]
    assert first.title == "a › case-0 › turn 2"
    assert first.message.splitlines() == [
        "Turn 2 failed: numeric: wrong 1",
        "input:    'question 1'",
        "expected: '1'",
        "got:      'answer 1'",
    ]
    assert "TurnTimeout" in ranked.annotations[2].message
    everything = rank_annotations(_report(results), lambda s: s)
    assert len(everything.annotations) == 5 and everything.omitted == 0


def test_a_case_without_turn_details_is_annotated_at_its_line() -> None:
    case = _case(0, [], "error").model_copy(update={"errors": ["the factory raised ValueError"]})
    [annotation] = rank_annotations(_report([case]), lambda s: s).annotations
    assert (annotation.line, annotation.message) == (
        1,
        "Test case failed: the factory raised ValueError",
    )


# -------------------------------------------------------------------- pull request


def _pr(event: str, **pr: Any) -> dict[str, Any]:
    base = {
        "number": 5,
        "head": {"sha": "h" * 40, "repo": {"full_name": pr.pop("head", REPO)}},
        "base": {"repo": {"full_name": pr.pop("base", REPO)}},
    }
    return {"pull_request": base}


@pytest.mark.parametrize(
    ("event_name", "payload", "expected"),
    [
        ("pull_request", _pr("pull_request"), (True, 5, "h" * 40, False)),
        ("pull_request", _pr("pull_request", head="fork/calc"), (True, 5, "h" * 40, True)),
        ("pull_request_target", _pr("x", head="fork/calc"), (True, 5, "h" * 40, False)),
        ("pull_request", _pr("pull_request", base="someone/else"), (True, None, "h" * 40, True)),
        (
            "pull_request",
            {
                "pull_request": {
                    "number": 5,
                    "head": {"sha": "s", "repo": None},
                    "base": {"repo": {"full_name": REPO}},
                }
            },
            (True, 5, "s", True),
        ),
        (
            "issue_comment",
            {"issue": {"number": 8, "pull_request": {"url": "x"}}},
            (True, 8, None, False),
        ),
        ("issue_comment", {"issue": {"number": 8}}, (False, None, None, False)),
        (
            "workflow_run",
            {
                "workflow_run": {
                    "event": "pull_request",
                    "head_sha": "w" * 40,
                    "pull_requests": [
                        {
                            "number": 3,
                            "base": {"repo": {"url": "https://api.github.com/repos/fork/calc"}},
                        },
                        {
                            "number": 4,
                            "base": {"repo": {"url": f"https://api.github.com/repos/{REPO}"}},
                        },
                    ],
                }
            },
            (True, 4, "w" * 40, False),
        ),
        (
            "workflow_run",
            {"workflow_run": {"event": "pull_request", "head_sha": "w", "pull_requests": []}},
            (True, None, "w", False),
        ),
        ("push", {"after": "x"}, (False, None, None, False)),
    ],
)
def test_pull_request_from_the_event(
    event_name: str, payload: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    ref = pull_request_from_event(event_name, payload, REPO)
    assert (ref.is_pr_run, ref.number, ref.head_sha, ref.read_only) == expected


def test_pr_number_from_the_environment_wins() -> None:
    ref = pull_request_from_event("push", {}, REPO, override=" 12 ")
    assert (ref.is_pr_run, ref.number, ref.source) == (True, 12, "MULTITURN_EVAL_PR_NUMBER")


def test_ours_means_our_marker_and_our_author() -> None:
    marker = "<!-- multiturn-eval:abc -->"
    bot = {"body": marker + "\nx", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    person = {"body": marker + "\nx", "user": {"login": "alice", "type": "User"}}
    other = {"body": "<!-- multiturn-eval:def -->\nx", "user": bot["user"]}
    assert is_ours(bot, marker, None) and not is_ours(person, marker, None)
    assert not is_ours(other, marker, None)
    assert is_ours(person, marker, "alice") and not is_ours(bot, marker, "alice")


def test_shorten_keeps_the_marker_and_closes_what_it_cut() -> None:
    body = "<!-- m -->\n### verdict\n<details>\n<summary>x</summary>\n\n```\n" + "line\n" * 5000
    short = shorten(body, 1000, "NOTE")
    assert len(short) <= 1000
    assert short.startswith("<!-- m -->\n### verdict\n")
    assert short.count("```") % 2 == 0 and short.count("<details>") == short.count("</details>")
    assert short.rstrip().endswith("NOTE")
    assert shorten("short", 1000, "NOTE") == "short"
    tries = attempts(body + "x" * MAX_BODY, "NOTE")
    assert [len(t) <= MAX_BODY for t in tries] == [True] * len(tries)
    assert [len(t) for t in tries] == sorted((len(t) for t in tries), reverse=True)
    assert tries[-1] == "<!-- m -->\n### verdict\n\nNOTE\n"


# -------------------------------------------------------------------- REST client


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(tokens={TOKEN: Token("github-actions[bot]", "bot")})
    with serve(fake) as running:
        yield running


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _client(fake: FakeGitHub, clock: Clock, **kw: Any) -> GitHubClient:
    return GitHubClient(fake.base_url, TOKEN, sleep=clock.sleep, clock=lambda: clock.now, **kw)


def test_pagination_follows_link_headers(github: FakeGitHub) -> None:
    for i in range(7):
        github.add_comment(REPO, 1, f"c{i}", "someone")
    github.page_cap = 3
    client = _client(github, Clock())
    bodies = [c["body"] for c in client.paginate(f"/repos/{REPO}/issues/1/comments?per_page=100")]
    assert bodies == [f"c{i}" for i in range(7)]
    assert len(github.requests) == 3


def test_a_link_to_another_host_is_not_followed_with_the_token(github: FakeGitHub) -> None:
    client = _client(github, Clock())
    with pytest.raises(GitHubError, match="refusing to send the token"):
        client.request("GET", "https://evil.example/repos/x")
    assert github.requests == []


def test_primary_rate_limit_waits_until_reset(github: FakeGitHub) -> None:
    clock = Clock()
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock.now) + 20)}
    github.fail_next("GET", "/user", 403, headers=headers, message="API rate limit exceeded")
    github.tokens[TOKEN] = Token("me", "user")
    user, _ = _client(github, clock).request("GET", "/user")
    assert user["login"] == "me" and clock.slept == [21.0]


def test_secondary_rate_limit_honours_retry_after_and_gives_up_past_the_cap(
    github: FakeGitHub,
) -> None:
    clock = Clock()
    github.fail_next(
        "GET", "/pulls", 403, headers={"retry-after": "7"}, message="secondary rate limit"
    )
    github.fail_next("GET", "/pulls", 429, headers={}, message="slow down")
    github.commit_pulls["abc"] = [{"number": 3, "state": "open"}]
    assert pull_request_of_commit(_client(github, clock), REPO, "abc") == 3
    assert clock.slept == [7.0, 60.0]
    github.fail_next("GET", "/pulls", 429, headers={"retry-after": "3600"})
    with pytest.raises(RateLimited, match="waiting 3600 s"):
        _client(github, Clock()).request("GET", f"/repos/{REPO}/commits/abc/pulls")
    github.fail_next("GET", "/pulls", 429, headers={"retry-after": "50"}, times=3)
    with pytest.raises(RateLimited):  # the total wait is bounded too
        _client(github, Clock(), max_wait_total=100).request(
            "GET", f"/repos/{REPO}/commits/abc/pulls"
        )


def test_server_errors_are_retried_twice_then_reported(github: FakeGitHub) -> None:
    clock = Clock()
    github.fail_next("GET", "/pulls", 502, times=2)
    assert pull_request_of_commit(_client(github, clock), REPO, "abc123") is None
    assert clock.slept == [1.0, 2.0]
    github.fail_next("GET", "/pulls", 503, times=3, message="unavailable")
    with pytest.raises(GitHubError) as caught:
        _client(github, Clock()).request("GET", f"/repos/{REPO}/commits/x/pulls")
    assert caught.value.status == 503 and "unavailable" in str(caught.value)


def test_an_unreachable_api_is_an_error_not_a_hang() -> None:
    client = GitHubClient("http://127.0.0.1:9", TOKEN, timeout=2, sleep=lambda s: None)
    with pytest.raises(GitHubError, match="cannot reach"):
        client.request("GET", "/user")


def test_upsert_creates_then_updates_and_a_422_shortens(github: FakeGitHub) -> None:
    client = _client(github, Clock())
    body = "<!-- multiturn-eval:x -->\n### verdict\n" + "row\n" * 3000
    first = upsert_comment(client, REPO, 2, body, truncation_note="NOTE")
    assert (first.action, first.shortened) == ("created", False)
    github.max_body = 5000
    second = upsert_comment(client, REPO, 2, body + "more\n", truncation_note="NOTE")
    assert (second.action, second.comment_id, second.shortened) == (
        "updated",
        first.comment_id,
        True,
    )
    [comment] = github.issue_comments(REPO, 2)
    assert len(comment["body"]) <= 5000 and comment["body"].endswith("NOTE\n")
    github.max_body = 10
    with pytest.raises(GitHubError) as caught:
        upsert_comment(client, REPO, 2, body, truncation_note="NOTE")
    assert caught.value.too_long


def test_forbidden_is_raised_with_githubs_message(github: FakeGitHub) -> None:
    github.tokens[TOKEN].write = False
    with pytest.raises(GitHubError) as caught:
        upsert_comment(_client(github, Clock()), REPO, 2, "<!-- m -->\nx", truncation_note="N")
    assert caught.value.status == 403
    assert caught.value.message == "Resource not accessible by integration"


# ------------------------------------------------------------------------ helpers


def test_secrets_are_collected_from_inputs_and_secret_looking_variables() -> None:
    env = {
        "INPUT_GITHUB-TOKEN": "ghs_tokenvalue123",
        "INPUT_ANTHROPIC-API-KEY": "sk-ant-xyz12345",
        "MY_SERVICE_PASSWORD": "hunter2hunter2",
        "AWS_SECRET_ACCESS_KEY": "abcdefgh12345",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "SHORT_KEY": "abc",
    }
    found = action_module.collect_secrets(env)
    assert set(found) == {"ghs_tokenvalue123", "sk-ant-xyz12345", "hunter2hunter2", "abcdefgh12345"}


def test_hand_back_chowns_what_was_written_to_the_workspace_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("x")
    start = action_module.first_missing(ws / "out" / "reports", ws)  # before the run
    assert start == ws / "out"
    (ws / "out" / "reports").mkdir(parents=True)
    (ws / "out" / "reports" / "report.json").write_text("{}")
    owner = os.stat_result((0o40755, 0, 0, 0, 1001, 121, 0, 0, 0, 0))
    real_stat = Path.stat
    monkeypatch.setattr(
        Path, "stat", lambda self, **kw: owner if self == ws else real_stat(self, **kw)
    )
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    changed: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "lchown", lambda p, u, g: changed.append((str(p), u, g)))
    action_module.hand_back(start, ws)
    assert sorted(changed) == [
        (str(ws / "out"), 1001, 121),
        (str(ws / "out" / "reports"), 1001, 121),
        (str(ws / "out" / "reports" / "report.json"), 1001, 121),
    ]
    changed.clear()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root: nothing to hand back
    action_module.hand_back(start, ws)
    assert changed == []


def test_workspace_paths_are_relative_and_posix(tmp_path: Path) -> None:
    assert action_module.workspace_path(tmp_path / "a" / "b.json", tmp_path) == "a/b.json"
    assert action_module.workspace_path(tmp_path, tmp_path) == "."
    assert action_module.workspace_path(Path("/elsewhere/x"), tmp_path) == "/elsewhere/x"
