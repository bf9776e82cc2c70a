"""The documentation's workflows are marked, found wherever they live, and all run in act.

The extractor (``tests/docs_workflows.py``) is what the act harness and zizmor
read, so these tests pin down that it finds every workflow a user could copy,
keeps its text unchanged, and keeps working when a block moves from the README
into the ``docs/`` site.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import docs_workflows
from tests.docs_workflows import MarkerError, marked_workflows, unmarked_workflows

ROOT = docs_workflows.ROOT

QUICK = """\
name: evals
on:
  pull_request:
jobs:
  evals:
    runs-on: ubuntu-latest
    steps:
      - run: echo hi
"""


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_every_workflow_in_the_readme_and_docs_carries_a_marker() -> None:
    unmarked = unmarked_workflows()
    assert not unmarked, "workflows without a <!-- workflow: NAME --> marker: " + ", ".join(
        b.where for b in unmarked
    )
    names = set(marked_workflows())
    assert {"quick-pr", "baseline", "fork-pr", "fork-comment", "sharded"} <= names


def test_every_marked_workflow_is_run_by_the_act_harness() -> None:
    from tests import act_e2e

    names = set(marked_workflows())
    covered = set(act_e2e.SCENARIOS) | set(act_e2e.NOT_RUN)
    assert not names - covered, f"marked workflows act neither runs nor lists: {names - covered}"
    assert not covered - names, f"the act harness names workflows the docs lack: {covered - names}"
    assert not set(act_e2e.SCENARIOS) & set(act_e2e.NOT_RUN)
    for name, reason in act_e2e.NOT_RUN.items():
        assert len(reason) > 20, f"{name}: say why act cannot run it"


def test_ci_audits_the_extracted_workflows_and_runs_them_in_act() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m tests.docs_workflows extract" in ci
    assert re.search(r"zizmor --offline \S+/\*\.yml", ci)
    assert ci.index("scripts/container-e2e") < ci.index("scripts/act-e2e")


def test_marked_workflows_pass_githubs_workflow_schema(tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "check-jsonschema"
    found = str(tool) if tool.exists() else shutil.which("check-jsonschema")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("check-jsonschema is not installed (CI must have it)")
        pytest.skip("check-jsonschema is not installed")
    paths = docs_workflows.extract(tmp_path)
    done = subprocess.run(
        [found, "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_extracted_text_is_the_block_exactly(tmp_path: Path) -> None:
    written = docs_workflows.extract(tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert written
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert f"```yaml\n{text}```" in readme or any(
            text in p.read_text(encoding="utf-8") for p in docs_workflows.doc_files()
        ), path.name


def test_a_block_moved_into_the_docs_site_is_still_found(tmp_path: Path) -> None:
    _write(tmp_path, "README.md", "# project\n\nSee the docs.\n")
    indented = textwrap.indent(f"<!-- workflow: quick-pr -->\n```yaml\n{QUICK}```\n", "    ")
    _write(
        tmp_path,
        "docs/guide/action.md",
        f"# The action\n\n!!! example\n\n{indented}\nText after.\n",
    )
    _write(tmp_path, "docs/index.md", f"<!-- workflow: other -->\n~~~yml\n{QUICK}~~~\n")
    found = marked_workflows(tmp_path)
    assert set(found) == {"quick-pr", "other"}
    assert found["quick-pr"].text == QUICK  # the admonition's indentation is gone
    assert found["quick-pr"].where.endswith("docs/guide/action.md:7")  # its first line
    assert found["quick-pr"].data()["jobs"]["evals"]["runs-on"] == "ubuntu-latest"


def test_a_workflow_without_a_marker_is_found(tmp_path: Path) -> None:
    _write(tmp_path, "README.md", f"# x\n\n```yaml\n{QUICK}```\n\n```yaml\nsuite: a.yaml\n```\n")
    unmarked = unmarked_workflows(tmp_path)
    assert [b.where.rsplit(":", 1)[1] for b in unmarked] == ["4"]  # the suite is no workflow
    _write(tmp_path, "README.md", f"# x\n\n```yaml\n'on': push\n{QUICK.split(chr(10), 3)[3]}```\n")
    assert len(unmarked_workflows(tmp_path)) == 1  # `on` quoted or not


@pytest.mark.parametrize(
    ("readme", "problem"),
    [
        ("<!-- workflow: a -->\n```yaml\nsuite: x.yaml\n```\n", "no workflow"),
        (
            f"<!-- workflow: a -->\n```yaml\n{QUICK}```\n<!-- workflow: a -->\n```yaml\n{QUICK}```\n",
            "already marked",
        ),
        (f"<!-- workflow: a -->\n\n```yaml\n{QUICK}```\n", "not followed by"),
        (f"<!-- workflow: Bad Name -->\n```yaml\n{QUICK}```\n", "malformed marker"),
    ],
)
def test_marker_mistakes_are_errors_naming_the_place(
    tmp_path: Path, readme: str, problem: str
) -> None:
    _write(tmp_path, "README.md", readme)
    with pytest.raises(MarkerError, match=problem) as caught:
        marked_workflows(tmp_path)
    assert "README.md:" in str(caught.value)


def test_the_command_line_extracts_and_refuses_unmarked_workflows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert docs_workflows.main(["extract", str(tmp_path / "out")]) == 0
    assert sorted(p.stem for p in (tmp_path / "out").iterdir()) == sorted(marked_workflows())
    assert docs_workflows.main(["list"]) == 0
    assert "quick-pr\tREADME.md:" in capsys.readouterr().out

    project = tmp_path / "project"
    _write(project, "README.md", f"```yaml\n{QUICK}```\n")
    assert docs_workflows.main(["--root", str(project), "extract", str(tmp_path / "x")]) == 1
    assert (
        "README.md:2: a workflow without a <!-- workflow: NAME --> marker"
        in capsys.readouterr().out
    )
    assert not (tmp_path / "x").exists()
    _write(project, "README.md", "<!-- workflow: a -->\n```yaml\nsuite: x\n```\n")
    assert docs_workflows.main(["--root", str(project), "list"]) == 1
    assert "no workflow" in capsys.readouterr().err


# ----------------------------------------------------------------- what zizmor cannot see

USES = re.compile(r"^\s*-?\s*uses:\s*(?P<ref>\S+)(?:\s+#\s*(?P<comment>.*))?$", re.M)
OURS = "multiturn-eval/multiturn-eval"


def _steps(workflow: docs_workflows.Workflow) -> list[tuple[str, dict[str, Any]]]:
    return [
        (job_name, step)
        for job_name, job in workflow.data()["jobs"].items()
        for step in job.get("steps", [])
    ]


def test_third_party_actions_are_pinned_to_one_commit_with_its_version_everywhere() -> None:
    pins: dict[str, set[str]] = {}
    for block in docs_workflows.all_blocks():
        if not block.is_yaml:
            continue
        for match in USES.finditer(block.text):
            action, _, ref = match.group("ref").partition("@")
            if action.startswith("./") or action == OURS:
                continue
            assert re.fullmatch(r"[0-9a-f]{40}", ref), (
                f"{block.where}: {action}@{ref} is not a commit"
            )
            version = (match.group("comment") or "").split()[:1]
            assert version and re.fullmatch(r"v\d+(\.\d+)*", version[0]), (
                f"{block.where}: {action}@{ref} needs its release in a comment (# v1.2.3)"
            )
            pins.setdefault(action, set()).add(f"{ref} {version[0]}")
    assert {"actions/checkout", "actions/upload-artifact", "actions/download-artifact"} <= set(pins)
    assert {a: p for a, p in pins.items() if len(p) > 1} == {}, "one pin per action"


def test_checkouts_keep_no_credentials_and_scripts_expand_no_expressions() -> None:
    for workflow in marked_workflows().values():
        for job, step in _steps(workflow):
            where = f"{workflow.where} job {job}"
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, where
            assert "${{" not in step.get("run", ""), f"{where}: an expression inside run:"


def _comments(step: dict[str, Any]) -> bool:
    uses = str(step.get("uses", ""))
    inputs = step.get("with", {})
    if uses.startswith(OURS + "@"):
        return inputs.get("comment", "auto") != "never" and "shard-index" not in inputs
    return uses.startswith("actions/github-script@") and "createComment" in inputs.get("script", "")


def _opens_pull_request(step: dict[str, Any]) -> bool:
    """A step that pushes a branch and opens a pull request (the fixtures' refresh job)."""
    script = str(step.get("run", ""))
    return "git push" in script and "gh pr create" in script


def test_only_the_jobs_that_comment_may_write_to_pull_requests() -> None:
    for workflow in marked_workflows().values():
        data = workflow.data()
        assert data.get("permissions") == {}, f"{workflow.where}: permissions: {{}} at the top"
        for name, job in data["jobs"].items():
            granted = job.get("permissions")
            assert isinstance(granted, dict), f"{workflow.where}: job {name} names its permissions"
            steps = job.get("steps", [])
            comments = any(_comments(step) for step in steps)
            opens = any(_opens_pull_request(step) for step in steps)
            writes = granted.get("pull-requests") == "write"
            assert writes == (comments or opens), (
                f"{workflow.where}: job {name} comments={comments}"
            )
            assert set(granted.values()) <= {"read", "write"}
            written = [k for k, v in granted.items() if v == "write"]
            # a job that opens a pull request pushes its branch first: contents, nothing else
            allowed = [["contents", "pull-requests"]] if opens else [[], ["pull-requests"]]
            assert sorted(written) in allowed, f"{workflow.where}: job {name} writes {written}"
