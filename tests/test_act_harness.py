"""The act harness's own parts, without act: the one rewrite it makes, how it reads act's log,
and the fake GitHub API endpoints the documented workflows call (gh, @actions/artifact,
github-script). ``scripts/act-e2e`` runs the workflows themselves in act."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests import act_e2e
from tests.act_e2e import ActRun, act_workflow
from tests.docs_workflows import Workflow, marked_workflows
from tests.fakes.github_api import FakeGitHub, Token, serve

TOKEN = "ghs_harnesstest0123456789"


def _workflow(text: str) -> Workflow:
    return Workflow("w", act_e2e.ROOT / "README.md", 1, text)


# ---------------------------------------------------------------- difference 5: job-index


def test_only_the_sharded_workflow_is_rewritten_and_only_its_job_index_and_total() -> None:
    workflows = marked_workflows()
    for name, workflow in workflows.items():
        if name != "sharded":
            assert act_workflow(workflow) == workflow.text, name
    sharded = workflows["sharded"]
    before, after = sharded.text.splitlines(), act_workflow(sharded).splitlines()
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert [a.split(":")[0].strip() for a, _ in changed] == ["shard-index", "shard-total", "name"]
    index = """${{ fromJSON('{"0":0,"1":1,"2":2,"3":3}')[format('{0}', matrix.shard)] }}"""
    assert changed[0][1].endswith(f"shard-index: {index}")
    assert changed[1][1].endswith("shard-total: 4")
    assert changed[2][1].endswith(f"name: multiturn-eval-shard-{index}")


MATRIX_JOB = """\
name: m
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        MATRIX
    steps:
      - run: echo "$I of $N"
        env:
          I: ${{ strategy.job-index }}
          N: ${{ strategy.job-total }}
"""
"""A workflow whose job ``a`` has the strategy matrix ``MATRIX`` and reads its job's index and
total."""


def test_job_index_is_the_values_position_whatever_the_values() -> None:
    text = (
        MATRIX_JOB.replace("MATRIX", "os: [linux, mac]")
        + """\
  b:
    runs-on: ubuntu-latest
    steps:
      - run: echo b
"""
    )
    adapted = act_workflow(_workflow(text))
    assert """I: ${{ fromJSON('{"linux":0,"mac":1}')[format('{0}', matrix.os)] }}""" in adapted
    assert "N: 2" in adapted
    assert adapted.replace("\n", "").count("echo") == 2


@pytest.mark.parametrize(
    "matrix",
    ["os: [a, b]\n        py: [1, 2]", "include: [{os: a}]", "os: ${{ fromJSON(vars.OSES) }}"],
)
def test_a_matrix_the_rewrite_cannot_follow_stops_the_harness(matrix: str) -> None:
    with pytest.raises(SystemExit, match="one-list matrix"):
        act_workflow(_workflow(MATRIX_JOB.replace("MATRIX", matrix)))


# ------------------------------------------------------------------------- act's log


def _line(**fields: Any) -> str:
    return json.dumps({"jobID": "evals", "matrix": {}, "stage": "Main", **fields})


def _action(**fields: Any) -> str:
    """A log line of the action's step."""
    return _line(stepID=["evals"], step="multiturn-eval/multiturn-eval@v1", **fields)


def _upload(**fields: Any) -> str:
    return _line(stepID=["2"], step="actions/upload-artifact@ea16", **fields)


LOG = "\n".join(
    [
        '{"level":"info","msg":"Using docker host"}',
        _action(
            msg="PASS  a\n",
            raw_output=True,
        ),
        _action(
            command="stop-commands",
            raw="::stop-commands::tok",
            msg="  ⚙  ::stop-commands::tok",
        ),
        _action(
            msg="::error file=x.py::fake\n",
            raw_output=True,
        ),
        _action(
            command="ignored",
            raw="::tok::",
            msg="  ⚙  ::tok::",
        ),
        _action(
            command="error",
            raw="::error file=evals/a.yaml,line=19,title=t%3A x::Turn 2 failed%0Anext line",
            kvPairs={"file": "evals/a.yaml"},
            msg="  ❗  ::error ...",
        ),
        _action(
            stepResult="failure",
            msg="  ❌  Failure - Main multiturn-eval/multiturn-eval@v1",
        ),
        _action(
            command="set-output",
            name="total",
            arg="3",
            msg="  ⚙  ::set-output:: total=3",
        ),
        _action(
            command="summary",
            content="<!-- m -->\nbody",
            msg="Summary",
        ),
        _action(msg="exit with `FAILURE`: 2"),
        _action(
            stage="Post",
            command="set-output",
            name="post",
            arg="x",
            msg="post",
        ),
        _upload(
            raw_output=True,
            msg="act-e2e: owner multiturn-eval-report/report.json uid=1001 gid=1001\n",
        ),
        _upload(stepResult="success", msg="ok"),
        _line(msg="🏁  Job failed", jobResult="failure"),
        "Error: Job 'evals' failed",
    ]
)


def test_the_log_gives_results_exit_codes_outputs_summary_and_owners() -> None:
    run = ActRun.parse("t", 1, LOG)
    step = "evals"
    assert run.step_result("evals", step) == "failure"
    assert run.exit_code("evals", step) == 2
    assert run.exit_code("evals", "actions/upload-artifact@") == 0
    assert run.job_result("evals") == "failure"
    assert run.outputs("evals", "multiturn-eval/multiturn-eval@") == {"total": "3"}  # Main only
    assert run.summary("evals", step) == "<!-- m -->\nbody"
    assert run.owners("evals", "actions/upload-artifact@") == {
        "multiturn-eval-report/report.json": (1001, 1001)
    }
    assert run.step_result("evals", "nothing") is None
    assert run.exit_code("evals", "nothing") is None


def test_commands_are_read_as_githubs_runner_reads_them() -> None:
    run = ActRun.parse("t", 1, LOG)
    # the ::error inside ::stop-commands:: is text; escapes are decoded as the runner does
    assert run.errors("evals", "evals") == [("evals/a.yaml", "19")]
    (command,) = run.commands("evals", "evals")
    assert (command.message, command.properties["title"]) == ("Turn 2 failed\nnext line", "t: x")


def test_a_failure_shows_acts_own_errors_first() -> None:
    run = ActRun.parse("t", 1, LOG)
    tail = run.tail("evals", "evals")
    assert tail.splitlines()[0] == "Error: Job 'evals' failed"
    assert "exit with `FAILURE`: 2" in tail


# ---------------------------------------------------------------- the fake GitHub API


def _get(url: str, auth: str | None = f"token {TOKEN}") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.fixture
def github() -> Any:
    with serve(FakeGitHub(tokens={TOKEN: Token("github-actions[bot]")})) as fake:
        yield fake


def test_runs_are_filtered_like_githubs_newest_first(github: FakeGitHub) -> None:
    add = github.add_run
    add("o/r", 1, workflow="evals.yml", name="evals", branch="main", event="push")
    add(
        "o/r",
        2,
        workflow="evals.yml",
        name="evals",
        branch="main",
        event="push",
        conclusion="failure",
    )
    add("o/r", 3, workflow="evals.yml", name="evals", branch="main", event="push")
    add("o/r", 4, workflow="evals.yml", name="evals", branch="dev", event="push")
    add("o/r", 5, workflow="evals.yml", name="evals", branch="main", event="pull_request")
    add("o/r", 6, workflow="other.yml", name="evals", branch="main", event="push")
    url = f"{github.base_url}/repos/o/r/actions/workflows/evals.yml/runs"
    status, _, body = _get(url + "?branch=main&event=push&status=success&per_page=1")
    data = json.loads(body)
    assert status == 200 and data["total_count"] == 2
    assert [r["id"] for r in data["workflow_runs"]] == [3]
    _, _, body = _get(url + "?status=completed")
    assert [r["id"] for r in json.loads(body)["workflow_runs"]] == [5, 4, 3, 2, 1]
    _, _, body = _get(f"{github.base_url}/repos/o/r/actions/runs?event=push&branch=main")
    assert [r["id"] for r in json.loads(body)["workflow_runs"]] == [6, 3, 2, 1]


def test_pulls_by_head_owner_and_branch(github: FakeGitHub) -> None:
    github.add_pull("o/r", 8, head_sha="a" * 40, head_ref="patch-1", head_repo="forker/r")
    github.add_pull("o/r", 9, head_sha="b" * 40, head_ref="patch-1", head_repo="mallory/r")
    github.add_pull(
        "o/r", 10, head_sha="c" * 40, head_ref="patch-1", head_repo="forker/r", state="closed"
    )
    _, _, body = _get(f"{github.base_url}/repos/o/r/pulls?state=open&head=forker:patch-1")
    assert [p["number"] for p in json.loads(body)] == [8]
    _, _, body = _get(f"{github.base_url}/repos/o/r/pulls?state=all&head=forker:patch-1")
    assert [p["number"] for p in json.loads(body)] == [8, 10]


def test_an_artifact_downloads_through_a_redirect_to_its_blob(github: FakeGitHub) -> None:
    data = b"PK\x05\x06" + b"\0" * 18  # an empty zip
    artifact = github.add_artifact("o/r", 42, "multiturn-eval-report", data)
    github.add_artifact("o/r", 42, "other", b"x")
    _, _, body = _get(
        f"{github.base_url}/repos/o/r/actions/runs/42/artifacts?name=multiturn-eval-report"
    )
    listed = json.loads(body)
    assert listed["total_count"] == 1
    assert listed["artifacts"][0]["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    status, headers, _ = _get(f"{github.base_url}/repos/o/r/actions/artifacts/{artifact}/zip")
    assert status == 302
    status, _, blob = _get(headers["location"], auth=None)  # a signed URL: no token
    assert (status, blob) == (200, data)
    status, _, _ = _get(f"{github.base_url}/repos/x/y/actions/artifacts/{artifact}/zip")
    assert status == 404


@pytest.mark.parametrize(
    ("auth", "status"),
    [(f"token {TOKEN}", 200), (f"Bearer {TOKEN}", 200), (f"Basic {TOKEN}", 401), (None, 401)],
)
def test_tokens_in_either_of_githubs_schemes(
    github: FakeGitHub, auth: str | None, status: int
) -> None:
    assert _get(f"{github.base_url}/repos/o/r/pulls", auth=auth)[0] == status


def test_a_proxy_form_request_is_served_by_its_path(github: FakeGitHub) -> None:
    github.add_run("o/r", 1, workflow="evals.yml", name="evals", branch="main", event="push")
    # what gh sends through HTTP_PROXY for GH_HOST=github.localhost
    proxy = urllib.request.ProxyHandler({"http": github.base_url})
    request = urllib.request.Request(
        "http://api.github.localhost/repos/o/r/actions/workflows/evals.yml/runs",
        headers={"Authorization": f"token {TOKEN}"},
    )
    with urllib.request.build_opener(proxy).open(request) as response:
        assert [r["id"] for r in json.loads(response.read())["workflow_runs"]] == [1]
    assert github.requests[-1].path == "/repos/o/r/actions/workflows/evals.yml/runs"
