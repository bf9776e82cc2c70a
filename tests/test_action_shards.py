"""The Action on a matrix, as GitHub runs it: shard jobs, then one merge job.

``entrypoint.sh`` in a subprocess against the fake GitHub API (the harness of
``tests/test_action_entrypoint.py``): three shard jobs with ``comment: never``
(their 0-based ``shard-index`` as ``strategy.job-index`` gives it), their
report directories as ``actions/download-artifact`` lays them out, then a job
with ``mode: merge`` that posts the one sticky comment, writes the
annotations and exits with the merged verdict.
"""

from __future__ import annotations

import json
import shutil

from tests.fakes.github_api import FakeGitHub
from tests.test_action_entrypoint import Runner, comments, github, runner, writes

__all__ = ["github", "runner"]  # the fixtures, used by name


def shard_jobs(runner: Runner, suite: str, total: int = 3) -> list[int]:
    codes = []
    for index in range(total):
        step = runner.run(
            {
                "suite": suite,
                "shard-index": str(index),
                "shard-total": str(total),
                "comment": "never",
                "report-dir": f"job-{index}/multiturn-eval-report",
            }
        )
        codes.append(step.code)
        # what actions/download-artifact puts in the merge job's workspace
        target = runner.workspace / "shards" / f"multiturn-eval-shard-{index}"
        shutil.copytree(runner.workspace / f"job-{index}" / "multiturn-eval-report", target)
    return codes


def test_three_shard_jobs_then_a_merge_job_posting_one_comment(
    runner: Runner, github: FakeGitHub
) -> None:
    codes = shard_jobs(runner, "evals/failing.yaml")
    assert comments(github) == []  # comment: never in every shard job
    assert writes(github) == []
    assert sorted(codes)[-1] == 1  # the shard with a failing case fails its job

    merge = runner.run({"mode": "merge", "reports": "shards/*/report.json", "report-dir": "merged"})
    assert merge.code == 1, merge.log  # the merged verdict
    out = merge.outputs
    assert (out["total"], out["passed"], out["failed"]) == ("3", "1", "2")
    assert out["json-report"] == "merged/report.json"
    [comment] = comments(github)
    assert writes(github) == ["POST /repos/octo/calc/issues/7/comments"]
    assert out["comment-url"] == comment["html_url"]

    # the same as one unsharded run: verdicts, order, annotations, comment marker
    whole = runner.run({"suite": "evals/failing.yaml", "comment": "never", "report-dir": "whole"})
    merged_report = json.loads((runner.workspace / "merged" / "report.json").read_text())
    whole_report = json.loads((runner.workspace / "whole" / "report.json").read_text())
    assert [(r["name"], r["outcome"]) for r in merged_report["results"]] == [
        (r["name"], r["outcome"]) for r in whole_report["results"]
    ]
    assert merged_report["summary"] == whole_report["summary"]
    located = [(e.properties["file"], e.properties["line"]) for e in merge.annotations("error")]
    assert located == [
        (e.properties["file"], e.properties["line"]) for e in whole.annotations("error")
    ]
    assert located == [("evals/failing.yaml", "19"), ("evals/failing.yaml", "26")]
    marker = (runner.workspace / "whole" / "summary.md").read_text().split("\n", 1)[0]
    assert comment["body"].startswith(marker + "\n")
    assert merge.summary.startswith(marker)

    # a second matrix run of the same suites updates the same comment
    again = runner.run({"mode": "merge", "reports": "shards/*/report.json", "report-dir": "m2"})
    assert again.code == 1
    assert [c["id"] for c in comments(github)] == [comment["id"]]


def test_a_passing_matrix_merges_to_exit_0(runner: Runner, github: FakeGitHub) -> None:
    assert shard_jobs(runner, "evals/passing.yaml", total=2) == [0, 0]
    merge = runner.run({"mode": "merge", "reports": "shards/*/report.json"})
    assert merge.code == 0, merge.log
    assert merge.outputs["total"] == "2"
    assert len(comments(github)) == 1


def test_a_missing_shard_fails_the_merge_job_naming_it_and_posts_nothing(
    runner: Runner, github: FakeGitHub
) -> None:
    shard_jobs(runner, "evals/failing.yaml")
    shutil.rmtree(runner.workspace / "shards" / "multiturn-eval-shard-1")
    merge = runner.run({"mode": "merge", "reports": "shards/*/report.json"})
    assert merge.code == 2, merge.log
    [error] = merge.annotations("error")
    assert "shard 2/3 missing" in error.message
    assert "multiturn-eval-shard-0" in error.message
    assert comments(github) == []
    partial = runner.run(
        {"mode": "merge", "reports": "shards/*/report.json", "allow-partial": "true"}
    )
    assert partial.code == 3, partial.log
    assert "shard 2/3 missing" in partial.summary
    [comment] = comments(github)
    assert "shard 2/3 missing" in comment["body"]


def test_bad_shard_and_merge_inputs_exit_2_naming_the_input(runner: Runner) -> None:
    for inputs, name in [
        ({"suite": "evals/passing.yaml", "shard-index": "0"}, "shard-total"),
        ({"suite": "evals/passing.yaml", "shard-index": "3", "shard-total": "3"}, "shard-index"),
        ({"suite": "evals/passing.yaml", "shard-index": "x", "shard-total": "3"}, "shard-index"),
        ({"suite": "evals/passing.yaml", "shard-index": "0", "shard-total": "0"}, "shard-total"),
        ({"suite": "evals/passing.yaml", "max-cost": "-1"}, "max-cost"),
        ({"mode": "merge"}, "reports"),
        ({"mode": "combine", "suite": "evals/passing.yaml"}, "mode"),
        ({"mode": "merge", "reports": "x", "allow-partial": "yes"}, "allow-partial"),
    ]:
        step = runner.run(inputs)
        assert step.code == 2, (inputs, step.log)
        [error] = step.annotations("error")
        assert error.properties["title"] == f"multiturn-eval: invalid input '{name}'", inputs


COSTLY_AGENT = """\
class Session:
    def send(self, message):
        return {"response": "ok", "cost_usd": 0.5}


def make_session(context):
    return Session()
"""

COSTLY_SUITE = """\
agent: {backend: python, factory: "agents.costly:make_session"}
test_cases:
""" + "".join(f"  - {{name: c{i}, turns: [{{input: hi}}]}}\n" for i in range(4))


def test_max_cost_skips_the_rest_fails_the_step_and_warns(runner: Runner) -> None:
    (runner.workspace / "agents" / "costly.py").write_text(COSTLY_AGENT)
    (runner.workspace / "evals" / "costly.yaml").write_text(COSTLY_SUITE)
    step = runner.run({"suite": "evals/costly.yaml", "max-cost": "1", "comment": "never"})
    assert step.code == 1, step.log
    assert (step.outputs["total"], step.outputs["passed"]) == ("4", "2")
    [warning] = [w for w in step.annotations("warning") if "spend cap" in w.message]
    assert warning.message == (
        "multiturn-eval: spend cap of $1.00 reached ($1.0000 spent): 2 test cases not started "
        "(skipped)"
    )
    report = json.loads((step.workspace / step.outputs["json-report"]).read_text())
    assert [r["outcome"] for r in report["results"]] == ["passed", "passed", "skipped", "skipped"]


def test_a_shard_job_never_comments_even_when_asked(runner: Runner, github: FakeGitHub) -> None:
    step = runner.run(
        {"suite": "evals/failing.yaml", "shard-index": "0", "shard-total": "2", "comment": "always"}
    )
    assert step.code in (0, 1), step.log
    assert "no PR comment from shard 1/2" in step.log
    assert comments(github) == []
    whole = runner.run({"suite": "evals/failing.yaml", "shard-index": "0", "shard-total": "1"})
    assert whole.code == 1
    assert len(comments(github)) == 1  # one shard of one is the whole run
