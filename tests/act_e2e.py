"""The documentation's workflows run in a real Actions runner (nektos/act), as a user copies them.

``scripts/act-e2e`` starts the Docker engine and builds the stand-in actions, then runs
``python -m tests.act_e2e``. Each workflow marked ``<!-- workflow: NAME -->`` in README.md
or docs/ (:mod:`tests.docs_workflows`) is written unchanged into a throwaway repository
(``octo/calc``, with the sample suites and agent of ``tests/data/action/workspace``) and
run by act from an event JSON (``tests/data/act/events/``), in host mode
(``-P ubuntu-latest=-self-hosted``), the action built by act from this checkout's
``Dockerfile``, against the fake GitHub API (``tests/fakes/github_api.py``) and act's
artifact server. The checks read the results from outside: act's JSON log (step results,
exit codes, ``$GITHUB_OUTPUT`` values, the step summary, the step's output as the runner
parses workflow commands from it), the fake API's recorded requests and comments, and the
artifacts act stored.

How act differs from GitHub's runner, and what the harness does about it (the product and
the documented workflows are not changed to suit act):

1. ``uses: OWNER/multiturn-eval@v1`` and third-party actions would be cloned from
   github.com, which CI cannot reach: ``--local-repository`` points ours at a clean copy of
   this checkout (its tracked and new files), and each third-party action at a stand-in
   built at run time (``tests/data/act/standins/``: the same inputs and outputs, on the
   client libraries the real actions are built on, bundled with ncc like them). An action
   without a stand-in stops the harness. ``actions/checkout`` of the workflow's own
   repository is done by act itself (it copies the working tree), as for every act user.
2. In host mode act gives every step its own process environment, the Docker action's
   container included, where GitHub's runner gives a container only the runner's and the
   step's variables: act runs with a clean environment holding only what the harness names
   (``PATH``, ``HOME``, the Docker host, the proxy settings below).
3. act hands the host's ``PATH`` to the container, replacing the image's own. The harness
   leaves it so on purpose: the entrypoint calls the image's interpreter by its absolute
   path, so a foreign ``PATH`` (as a job-level ``PATH`` or a ``PATH=`` line in
   ``GITHUB_ENV`` gives on GitHub) must not break the action, and these runs prove it.
4. act passes host paths (``GITHUB_WORKSPACE``, ``GITHUB_OUTPUT``, the event file, ``HOME``)
   into the container but mounts the workspace elsewhere and the file-command directory not
   at all: ``--container-options`` mounts act's cache directory (which holds them) and
   ``HOME`` at their host paths, and ``--network host`` lets the container reach the fake
   API on 127.0.0.1 as GitHub's containers reach api.github.com.
5. act has no ``strategy.job-index`` / ``strategy.job-total`` (nektos/act#5976): in a job
   whose matrix is one list, the harness rewrites exactly these two expressions into the
   values GitHub gives (the position of ``matrix.<key>`` in the list, and its length);
   every other byte of the workflow is unchanged (checked).
6. ``gh`` talks to ``GH_HOST``'s ``https://.../api/v3`` or, for ``github.localhost``, to
   ``http://api.github.localhost``: ``GH_HOST=github.localhost`` and ``HTTP_PROXY`` at the
   fake API (which serves proxy-form requests), ``NO_PROXY=127.0.0.1`` for everything else.
7. act removes a job's workspace copy when the job ends: the upload-artifact stand-in logs
   the owner of every file it uploads (``act-e2e: owner ...``), read by the ownership check.
   act runs as the unprivileged user 1001 when the harness is root (GitHub's runner user;
   the action's container still runs as root), so "handed back to the workspace's owner"
   can fail.
8. Another workflow run's artifacts come from the REST API, which act does not have: the
   harness registers the artifacts act stored (``--artifact-server-path``) as runs and
   artifacts of the fake API, which serves them as GitHub does (302 to a blob URL).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.docs_workflows import ROOT, Workflow, marked_workflows
from tests.fakes.github_api import Command, FakeGitHub, Token, runner_commands, serve

DATA = ROOT / "tests" / "data" / "act"
WORKSPACE = ROOT / "tests" / "data" / "action" / "workspace"
OURS = "multiturn-eval/multiturn-eval"
REPO = "octo/calc"
TOKEN = "ghs_acte2einstallationtoken0123456789"
ANTHROPIC_KEY = "sk-ant-acte2e-0123456789abcdefghij"
STANDINS = ("actions/upload-artifact", "actions/download-artifact", "actions/github-script")
OUTPUTS = set(yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["outputs"])


# ----------------------------------------------------------------------------- act's log


@dataclass
class ActRun:
    """One act invocation: its exit status and its JSON log."""

    label: str
    code: int
    entries: list[dict[str, Any]]
    text: str

    @classmethod
    def parse(cls, label: str, code: int, text: str) -> ActRun:
        entries = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return cls(label, code, entries, text)

    def _of(
        self,
        job: str,
        step: str | None = None,
        matrix: dict[str, Any] | None = None,
        stages: tuple[str, ...] = ("Main",),
    ) -> Iterator[dict[str, Any]]:
        """The entries of a job, or of one of its steps (by ``id:``, or the start of its name
        or ``uses:``) in the given stages."""
        for e in self.entries:
            if e.get("jobID") != job or (matrix is not None and e.get("matrix") != matrix):
                continue
            if step is not None:
                ids = e.get("stepID") or e.get("stepid") or []
                if step not in ids and not str(e.get("step", "")).startswith(step):
                    continue
                if e.get("stage", "Main") not in stages:
                    continue
            yield e

    def matrices(self, job: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        for e in self._of(job):
            if e.get("matrix") not in seen:
                seen.append(e.get("matrix") or {})
        return seen

    def job_result(self, job: str, matrix: dict[str, Any] | None = None) -> str | None:
        results = [e["jobResult"] for e in self._of(job, matrix=matrix) if "jobResult" in e]
        return results[-1] if results else None

    def step_result(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> str | None:
        results = [e["stepResult"] for e in self._of(job, step, matrix) if "stepResult" in e]
        return results[-1] if results else None

    def exit_code(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> int | None:
        """The Docker action's exit code: act says ``exit with `FAILURE`: N``; success is 0."""
        for e in self._of(job, step, matrix):
            found = re.search(r"exit with `FAILURE`: (\d+)", str(e.get("msg", "")))
            if found:
                return int(found.group(1))
        return 0 if self.step_result(job, step, matrix) == "success" else None

    def outputs(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> dict[str, str]:
        return {
            e["name"]: e.get("arg", "")
            for e in self._of(job, step, matrix)
            if e.get("command") == "set-output"
        }

    def summary(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> str:
        return "".join(
            str(e.get("content", ""))
            for e in self._of(job, step, matrix)
            if e.get("command") == "summary"
        )

    def log(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> str:
        """The step's output as the runner received it (command lines as printed)."""
        lines = []
        for e in self._of(job, step, matrix):
            if "raw" in e:
                lines.append(str(e["raw"]).rstrip("\n"))
            elif e.get("raw_output"):
                lines.append(str(e.get("msg", "")).rstrip("\n"))
        return "\n".join(lines)

    def commands(self, job: str, step: str, matrix: dict[str, Any] | None = None) -> list[Command]:
        """The workflow commands GitHub's runner would act on (stop-commands respected)."""
        return runner_commands(self.log(job, step, matrix))

    def errors(
        self, job: str, step: str, matrix: dict[str, Any] | None = None
    ) -> list[tuple[str | None, str | None]]:
        return [
            (c.properties.get("file"), c.properties.get("line"))
            for c in self.commands(job, step, matrix)
            if c.name == "error"
        ]

    def owners(self, job: str, step: str) -> dict[str, tuple[int, int]]:
        owners = {}
        for line in self.log(job, step).splitlines():
            found = re.fullmatch(r"act-e2e: owner (.+) uid=(\d+) gid=(\d+)", line.strip())
            if found:
                owners[found.group(1)] = (int(found.group(2)), int(found.group(3)))
        return owners

    def tail(self, job: str | None = None, step: str | None = None, lines: int = 40) -> str:
        """The last log lines (of one step or job when given, every stage) for a failure
        message, after act's own errors (an action it could not load, a bad workflow)."""
        if job is None:
            chosen = self.text.splitlines()
        else:
            chosen = [
                f"[{e.get('jobID')}{e.get('matrix') or ''} {e.get('step', '')}] "
                + str(e.get("msg", "")).rstrip()
                for e in self._of(job, step, stages=("Pre", "Main", "Post"))
            ]
        errors = [
            line
            for line in self.text.splitlines()
            if line.startswith("Error:") or ('"level":"error"' in line and '"command"' not in line)
        ]
        shown = chosen[-lines:]
        return "\n".join([*(e for e in errors[-5:] if e not in shown), *shown])


# ------------------------------------------------------------------------------ checks


class Checks:
    """ok / FAIL lines; a failure shows the evidence (log lines) under it."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def __call__(
        self, scenario: str, ok: bool, what: str, evidence: Callable[[], str] | str = ""
    ) -> bool:
        print(("ok   " if ok else "FAIL ") + f"{scenario}: {what}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(f"{scenario}: {what}")
            shown = evidence() if callable(evidence) else evidence
            if shown:
                print("     | " + shown.replace("\n", "\n     | "), flush=True)
        return ok


# ----------------------------------------------------------------------------- harness


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uses(workflow_text: str) -> set[str]:
    return set(re.findall(r"^\s*-?\s*uses:\s*([^\s#]+)", workflow_text, re.M))


def act_workflow(workflow: Workflow) -> str:
    """The workflow as act can run it: difference 5 (strategy.job-index/job-total) only."""
    text = workflow.text
    if "strategy.job-" not in text:
        return text
    data = workflow.data()
    out_lines = text.split("\n")
    jobs_with = [n for n, j in data["jobs"].items() if "strategy.job-" in yaml.safe_dump(j)]
    for name in jobs_with:
        matrix = data["jobs"][name].get("strategy", {}).get("matrix", {})
        axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
        if len(axes) != 1 or not isinstance(next(iter(axes.values())), list) or "include" in matrix:
            raise SystemExit(
                f"act-e2e: job {name}: strategy.job-index needs a one-list matrix here"
            )
        key, values = next(iter(axes.items()))
        index = json.dumps({str(v): i for i, v in enumerate(values)}, separators=(",", ":"))
        # the job's own lines: from "  name:" to the next job key
        start = next(
            i for i, line in enumerate(out_lines) if re.match(rf"^  {re.escape(name)}:", line)
        )
        end = next(
            (
                i
                for i in range(start + 1, len(out_lines))
                if re.match(r"^  [A-Za-z0-9_-]+:", out_lines[i])
            ),
            len(out_lines),
        )
        for i in range(start, end):
            out_lines[i] = (
                out_lines[i]
                .replace(
                    "${{ strategy.job-index }}",
                    f"${{{{ fromJSON('{index}')[format('{{0}}', matrix.{key})] }}}}",
                )
                .replace("${{ strategy.job-total }}", str(len(values)))
            )
    adapted = "\n".join(out_lines)
    if "strategy.job-" in adapted:
        raise SystemExit(
            "act-e2e: a strategy.job-* expression is left that the harness cannot rewrite"
        )
    return adapted


@dataclass
class Harness:
    act: Path
    work: Path
    docker_host: str
    standins: Path
    fake: FakeGitHub
    checks: Checks
    uid: int | None
    """run act as this user (from root; None: as we are)"""
    groups: list[int]
    """and with these supplementary groups (the Docker socket's)"""
    workflows: dict[str, Workflow]
    action: Path = field(init=False)
    cache: Path = field(init=False)
    home: Path = field(init=False)
    artifacts: Path = field(init=False)
    artifact_port: int = field(init=False)
    calls: Path = field(init=False)
    timings: dict[str, float] = field(default_factory=dict)
    _repos: int = 0

    def __post_init__(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.work.chmod(0o755)  # act may run as another user (difference 7)
        self.action = self.work / "action"
        self.cache = self.work / "act-cache"
        self.home = self.work / "home"
        self.artifacts = self.work / "artifacts"
        self.calls = self.home / "calls.log"
        for d in (self.cache, self.home, self.artifacts):
            d.mkdir(parents=True, exist_ok=True)
        self.artifact_port = _free_port()
        self._copy_action()
        if self.uid is not None:
            for d in (self.cache, self.home, self.artifacts):
                os.chown(d, self.uid, self.uid)

    def _copy_action(self) -> None:
        """This checkout as a clone of the action's repository has it: tracked and new files."""
        listed = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, listed):
            source = ROOT / name
            if source.is_file():
                target = self.action / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)

    # ------------------------------------------------------------------- repositories

    def repo(self, files: dict[str, Path | str], workflows: dict[str, str]) -> Path:
        """A fresh clone of octo/calc holding FILES and .github/workflows/WORKFLOWS."""
        self._repos += 1
        root = self.work / "repos" / f"r{self._repos}"
        root.mkdir(parents=True)
        for name, content in {
            **files,
            **{f".github/workflows/{k}": v for k, v in workflows.items()},
        }.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                if content.is_dir():
                    shutil.copytree(content, path, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(content, path)
            else:
                path.write_text(content, encoding="utf-8")
        git = [
            "git",
            "-c",
            "user.name=octo",
            "-c",
            "user.email=octo@example.com",
            "-c",
            "init.defaultBranch=main",
        ]
        for args in (
            ["init", "-q"],
            ["remote", "add", "origin", f"https://github.com/{REPO}.git"],
            ["add", "-A"],
            ["commit", "-q", "-m", "calc"],
        ):
            subprocess.run([*git, *args], cwd=root, check=True, capture_output=True)
        if self.uid is not None:
            for path in [root, *root.rglob("*")]:
                os.lchown(path, self.uid, self.uid)
        return root

    def workspace(self, *suites: str | tuple[str, Path]) -> dict[str, Path | str]:
        """The sample agent and the named suites (file names of the sample workspace, or
        (name, path) pairs) under evals/."""
        files: dict[str, Path | str] = {"agents": WORKSPACE / "agents"}
        for suite in suites:
            name, path = suite if isinstance(suite, tuple) else (suite, WORKSPACE / "evals" / suite)
            files[f"evals/{name}"] = path
        return files

    # ---------------------------------------------------------------------------- act

    def run(
        self,
        label: str,
        repo: Path,
        event_name: str,
        event: dict[str, Any],
        workflow_file: str,
        run_id: int,
    ) -> ActRun:
        text = (repo / ".github" / "workflows" / workflow_file).read_text(encoding="utf-8")
        local = []
        for uses in sorted(_uses(text)):
            action = uses.partition("@")[0]
            if action == OURS:
                local.append(f"{uses}={self.action}")
            elif action in STANDINS:
                local.append(f"{uses}={self.standins / action.split('/')[1]}")
            elif action == "actions/checkout":
                continue  # act copies the working tree itself (difference 1)
            else:
                raise SystemExit(
                    f"act-e2e: no stand-in for {uses} (add one under tests/data/act/standins/)"
                )
        event_path = self.work / "events" / f"{label}.json"
        event_path.parent.mkdir(parents=True, exist_ok=True)
        event_path.write_text(json.dumps(event), encoding="utf-8")
        args = [
            str(self.act),
            event_name,
            "--eventpath",
            str(event_path),
            "--workflows",
            f".github/workflows/{workflow_file}",
            "--platform",
            "ubuntu-latest=-self-hosted",
            *[x for item in local for x in ("--local-repository", item)],
            "--action-cache-path",
            str(self.cache),
            "--artifact-server-path",
            str(self.artifacts),
            "--artifact-server-addr",
            "127.0.0.1",
            "--artifact-server-port",
            str(self.artifact_port),
            "--container-options",
            f"--network host -v {self.cache}:{self.cache} -v {self.home}:{self.home}",
            "--env",
            f"GITHUB_API_URL={self.fake.base_url}",
            "--env",
            f"GITHUB_RUN_ID={run_id}",
            "--secret",
            f"GITHUB_TOKEN={TOKEN}",
            "--secret",
            f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}",
            "--json",
        ]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "DOCKER_HOST": self.docker_host,
            "ACT_DISABLE_VERSION_CHECK": "1",
            "GH_HOST": "github.localhost",
            "HTTP_PROXY": self.fake.base_url,
            "NO_PROXY": "127.0.0.1",
            "GH_NO_UPDATE_NOTIFIER": "1",
            "CALCULATOR_CALL_LOG": str(self.calls),
            "LANG": "C.UTF-8",
        }
        prefix = []
        if self.uid is not None:
            groups = ",".join(map(str, self.groups))
            prefix = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}"]
            prefix.append(f"--groups={groups}" if groups else "--clear-groups")
        started = time.monotonic()
        done = subprocess.run(
            [*prefix, *args],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=1200,
        )
        self.timings[label] = time.monotonic() - started
        (self.work / "logs").mkdir(exist_ok=True)
        (self.work / "logs" / f"{label}.jsonl").write_text(
            done.stdout + done.stderr, encoding="utf-8"
        )
        print(f"== {label}: act exit {done.returncode} in {self.timings[label]:.1f}s", flush=True)
        return ActRun.parse(label, done.returncode, done.stdout + done.stderr)

    def artifact(self, run_id: int, name: str) -> bytes | None:
        """The zip act's artifact server stored for RUN_ID's artifact NAME."""
        path = self.artifacts / str(run_id) / name / f"{name}.zip"
        return path.read_bytes() if path.is_file() else None


def _zip_names(data: bytes | None) -> set[str]:
    if not data:
        return set()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return set(z.namelist())


def _zip_member(data: bytes | None, member: str) -> str:
    if not data:
        return ""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(member).decode("utf-8") if member in z.namelist() else ""


def _zip_text(data: bytes | None) -> str:
    if not data:
        return ""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return "".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())


def _event(name: str, **changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(
        (DATA / "events" / f"{name}.json").read_text(encoding="utf-8")
    )
    event.update(changes)
    return event


# --------------------------------------------------------------------------- scenarios

Scenario = Callable[[Harness], None]


def quick_pr(h: Harness) -> None:
    """The quick start on a pull request: a failing, a passing, a broken and a leaky suite."""
    workflow = h.workflows["quick-pr"]
    event = _event("pull_request")
    number = event["pull_request"]["number"]
    ok = h.checks
    job, step, upload = "evals", "evals", "actions/upload-artifact@"
    posts_before = len(h.fake.calls("POST", "/comments$"))

    def comments() -> list[dict[str, Any]]:
        return h.fake.issue_comments(REPO, number)

    # --- failing: exit 1, annotations, the comment, the artifact, ownership
    repo = h.repo(h.workspace("failing.yaml"), {"evals.yml": act_workflow(workflow)})
    run = h.run("quick-pr-failing", repo, "pull_request", event, "evals.yml", 1001)
    name = "quick-pr/failing"
    ok(
        name,
        run.exit_code(job, step) == 1,
        f"the action step exits 1 (got {run.exit_code(job, step)})",
        lambda: run.tail(job, step),
    )
    ok(
        name,
        run.step_result(job, step) == "failure"
        and run.job_result(job) == "failure"
        and run.code != 0,
        "the step, the job and act fail",
        lambda: run.tail(),
    )
    outputs = run.outputs(job, step)
    ok(
        name,
        set(outputs) == OUTPUTS,
        f"all ten outputs: {sorted(outputs)}",
        lambda: run.tail(job, step),
    )
    ok(
        name,
        (
            outputs.get("total"),
            outputs.get("passed"),
            outputs.get("failed"),
            outputs.get("pass-rate"),
        )
        == ("3", "1", "2", "0.3333"),
        f"counts {outputs}",
    )
    ok(
        name,
        outputs.get("report-dir") == "multiturn-eval-report"
        and outputs.get("json-report") == "multiturn-eval-report/report.json",
        "workspace-relative report paths",
    )
    errors = run.errors(job, step)
    ok(
        name,
        errors == [("evals/failing.yaml", "19"), ("evals/failing.yaml", "26")],
        f"::error annotations at the failing turns' lines: {errors}",
        lambda: run.log(job, step),
    )
    commands = run.commands(job, step)
    names = {c.name for c in commands}
    # the agent prints ::error/::warning lines and replies with more (agents/calculator.py)
    hostile = [
        c
        for c in commands
        if c.properties.get("file") == "evil.py"
        or c.message.startswith(("pwned", "also pwned", "printed", "and again"))
    ]
    ok(
        name,
        names <= {"error", "notice", "warning", "add-mask"} and not hostile,
        f"the agent's text is never read as a workflow command: {sorted(names)}, {hostile}",
        lambda: run.log(job, step),
    )
    summary = run.summary(job, step)
    ok(
        name,
        summary.startswith("<!-- multiturn-eval:") and "2 of 3 test cases failed" in summary,
        "the step summary is the PR comment's text",
        summary[:400],
    )
    ours = [c for c in comments() if c["body"].split("\n", 1)[0] == summary.split("\n", 1)[0]]
    ok(
        name,
        len(ours) == 1
        and ours[0]["user"]["login"] == "github-actions[bot]"
        and outputs.get("comment-url") == ours[0]["html_url"],
        f"one sticky comment on #{number} by github-actions[bot], its URL the comment-url output",
        lambda: json.dumps(comments(), indent=1)[:1500],
    )
    ok(name, h.calls.exists(), "the agent was called (the call log exists)")
    files = _zip_names(h.artifact(1001, "multiturn-eval-report"))
    ok(
        name,
        run.step_result(job, upload) == "success"
        and {"report.json", "junit.xml", "summary.md", "report.html"} <= files,
        f"the report directory uploaded as artifact multiturn-eval-report: {sorted(files)}",
        lambda: run.tail(job, upload),
    )
    owners = run.owners(job, upload)
    workspace_owner = owners.pop("workspace", None)
    ok(
        name,
        workspace_owner is not None
        and workspace_owner[0] != 0  # else a root-owned file would pass
        and bool(owners)
        and set(owners.values()) == {workspace_owner}
        and (h.uid is None or workspace_owner == (h.uid, h.uid)),
        f"report files owned by the workspace's owner {workspace_owner}: {owners}",
        lambda: run.log(job, upload),
    )

    # --- the same again: the comment is updated, not duplicated
    run = h.run("quick-pr-failing-again", repo, "pull_request", event, "evals.yml", 1002)
    ours_again = [c for c in comments() if c["body"].split("\n", 1)[0] == summary.split("\n", 1)[0]]
    patched = h.fake.calls("PATCH", r"/issues/comments/\d+$")
    ok(
        "quick-pr/failing-again",
        run.exit_code(job, step) == 1
        and len(ours_again) == 1
        and bool(ours)
        and any(r.path.endswith(f"/{ours[0]['id']}") for r in patched),
        "a second run updates the same comment",
        lambda: run.tail(job, step),
    )

    # --- passing: exit 0, the job passes
    h.calls.unlink(missing_ok=True)
    repo = h.repo(h.workspace("passing.yaml"), {"evals.yml": act_workflow(workflow)})
    run = h.run("quick-pr-passing", repo, "pull_request", event, "evals.yml", 1003)
    name = "quick-pr/passing"
    outputs = run.outputs(job, step)
    ok(
        name,
        run.exit_code(job, step) == 0 and run.job_result(job) == "success" and run.code == 0,
        f"exit 0 and a passing job (step exit {run.exit_code(job, step)}, job {run.job_result(job)})",
        lambda: run.tail(),
    )
    ok(
        name,
        set(outputs) == OUTPUTS
        and outputs.get("pass-rate") == "1"
        and outputs.get("failed") == "0",
        f"every output, pass-rate 1: {outputs}",
    )
    ok(name, run.errors(job, step) == [], "no error annotation", lambda: run.log(job, step))
    ok(
        name,
        outputs.get("comment-url", "").startswith(f"https://github.com/{REPO}/pull/{number}#"),
        "its own sticky comment (another suite set)",
    )

    # --- broken: exit 2, the annotation at the bad line, no agent called
    h.calls.unlink(missing_ok=True)
    repo = h.repo(h.workspace("broken.yaml"), {"evals.yml": act_workflow(workflow)})
    run = h.run("quick-pr-broken", repo, "pull_request", event, "evals.yml", 1004)
    name = "quick-pr/broken"
    ok(
        name,
        run.exit_code(job, step) == 2 and run.job_result(job) == "failure",
        f"exit 2 (got {run.exit_code(job, step)})",
        lambda: run.tail(job, step),
    )
    errors = run.errors(job, step)
    ok(
        name,
        errors == [("evals/broken.yaml", "10")],
        f"the configuration error annotated at its line: {errors}",
        lambda: run.log(job, step),
    )
    ok(name, not h.calls.exists(), "no agent called")
    ok(
        name,
        run.step_result(job, upload) == "success",
        "the upload step still runs (if: !cancelled())",
        lambda: run.tail(job, upload),
    )

    # --- leaky: the secrets the agent repeats never reach the comment, summary or artifact
    repo = h.repo(h.workspace("leaky.yaml"), {"evals.yml": act_workflow(workflow)})
    run = h.run("quick-pr-leaky", repo, "pull_request", event, "evals.yml", 1005)
    name = "quick-pr/leaky"
    summary = run.summary(job, step)
    report = _zip_member(h.artifact(1005, "multiturn-eval-report"), "report.json")
    leaked_into = [
        where
        for where, text in (
            ("the summary", summary),
            ("the comments", json.dumps(comments())),
            ("the artifact", _zip_text(h.artifact(1005, "multiturn-eval-report"))),
        )
        if ANTHROPIC_KEY in text or TOKEN in text
    ]
    ok(
        name,
        run.exit_code(job, step) == 1 and "key=***" in report and not leaked_into,
        f"the API key and the token the agent repeats are *** (leaked into: {leaked_into})",
        summary[:600],
    )
    posts = len(h.fake.calls("POST", "/comments$")) - posts_before
    ok("quick-pr", posts == 4, f"comments created: failing, passing, broken, leaky ({posts})")


def baseline(h: Harness) -> None:
    """Compare with the base branch: a push run uploads the report, a PR run downloads it."""
    workflow = act_workflow(h.workflows["baseline"])
    ok = h.checks
    job, step = "evals", "evals"
    base_suite = ("calc.yaml", DATA / "suites" / "calc-base.yaml")
    pr_suite = ("calc.yaml", WORKSPACE / "evals" / "failing.yaml")

    # --- the base branch: a push runs the suites and uploads report.json
    repo = h.repo(h.workspace(base_suite), {"evals.yml": workflow})
    run = h.run("baseline-push", repo, "push", _event("push_main"), "evals.yml", 2001)
    name = "baseline/push"
    base_report = h.artifact(2001, "multiturn-eval-report")
    ok(
        name,
        run.step_result(job, "Find the base branch") is None and run.exit_code(job, step) == 1,
        "on push: no lookup, the suites run (one case fails on main)",
        lambda: run.tail(job),
    )
    ok(name, "report.json" in _zip_names(base_report), "the report uploaded", lambda: run.tail(job))
    # GitHub keeps that run and its artifact: the fake API serves them (difference 8), with
    # runs the lookup must not pick: a failed push, a pull request's run, another branch
    h.fake.add_run(REPO, 1999, workflow="evals.yml", name="evals", branch="main", event="push")
    h.fake.add_run(REPO, 2001, workflow="evals.yml", name="evals", branch="main", event="push")
    h.fake.add_run(
        REPO,
        2002,
        workflow="evals.yml",
        name="evals",
        branch="main",
        event="push",
        conclusion="failure",
    )
    h.fake.add_run(
        REPO, 2003, workflow="evals.yml", name="evals", branch="main", event="pull_request"
    )
    h.fake.add_run(REPO, 2004, workflow="evals.yml", name="evals", branch="release", event="push")
    h.fake.add_run(REPO, 2005, workflow="other.yml", name="evals", branch="main", event="push")
    if base_report:
        h.fake.add_artifact(REPO, 2001, "multiturn-eval-report", base_report)

    # --- a pull request that breaks a passing case: regressed, exit 1
    event = _event("pull_request")
    repo = h.repo(h.workspace(pr_suite), {"evals.yml": workflow})
    run = h.run("baseline-regressed", repo, "pull_request", event, "evals.yml", 2010)
    name = "baseline/regressed"
    lookups = [r for r in h.fake.requests if r.path.endswith("/actions/workflows/evals.yml/runs")]
    ok(
        name,
        bool(lookups)
        and lookups[-1].query.get("branch") == ["main"]
        and lookups[-1].query.get("event") == ["push"]
        and lookups[-1].query.get("status") == ["success"],
        f"gh looked the run up by branch (from env:, github.base_ref), event and status: "
        f"{[r.query for r in lookups]}",
        lambda: run.tail(job, "Find the base branch"),
    )
    ok(
        name,
        run.outputs(job, "base").get("run-id") == "2001",
        f"the base branch's latest successful push run: {run.outputs(job, 'base')}",
        lambda: run.tail(job, "Find the base branch"),
    )
    downloads = h.fake.calls("GET", r"/actions/artifacts/\d+/zip$")
    ok(
        name,
        run.step_result(job, "actions/download-artifact@") == "success"
        and bool(downloads)
        and "digest validation failed" not in run.log(job, "actions/download-artifact@"),
        "its artifact downloaded with run-id and the token",
        lambda: run.tail(job, "actions/download-artifact@"),
    )
    summary = run.summary(job, step)
    ok(
        name,
        run.exit_code(job, step) == 1
        and "regress" in summary.lower()
        and "buggy-multiply" in summary,
        f"fail-on regressions: exit 1 for the regressed case (exit {run.exit_code(job, step)})",
        summary[:800],
    )

    # --- a pull request that fixes nothing and breaks nothing: a failing case, exit 0
    repo = h.repo(h.workspace(base_suite), {"evals.yml": workflow})
    run = h.run("baseline-unchanged", repo, "pull_request", event, "evals.yml", 2011)
    name = "baseline/unchanged"
    outputs = run.outputs(job, step)
    ok(
        name,
        run.exit_code(job, step) == 0 and outputs.get("failed") == "1",
        f"a case still failing is no regression: exit 0 with failed={outputs.get('failed')}",
        lambda: run.tail(job, step),
    )

    # --- no successful run on the base branch: no baseline, a notice, as --fail-on failures
    h.fake.runs[REPO] = [r for r in h.fake.runs.get(REPO, []) if r["id"] not in (1999, 2001)]
    repo = h.repo(h.workspace(base_suite), {"evals.yml": workflow})
    run = h.run("baseline-none", repo, "pull_request", event, "evals.yml", 2012)
    name = "baseline/none"
    notices = [c.message for c in run.commands(job, step) if c.name == "notice"]
    ok(
        name,
        run.outputs(job, "base").get("run-id") == ""
        and run.step_result(job, "actions/download-artifact@") in (None, "skipped"),
        "no run found: the download is skipped",
        lambda: run.tail(job),
    )
    ok(
        name,
        run.exit_code(job, step) == 1 and any("no baseline" in n for n in notices),
        f"without a baseline a failing case fails the step, with a notice: {notices}",
        lambda: run.log(job, step),
    )


def sharded(h: Harness) -> None:
    """Four shard jobs upload their reports; the merge job merges them and comments once."""
    workflow = h.workflows["sharded"]
    adapted = act_workflow(workflow)
    ok = h.checks
    name = "sharded"
    changed = [
        (a, b)
        for a, b in zip(workflow.text.splitlines(), adapted.splitlines(), strict=True)
        if a != b
    ]
    ok(
        name,
        len(changed) == 3 and all("strategy.job-" in a for a, _ in changed),
        f"only the strategy.job-index/job-total expressions are rewritten for act ({len(changed)} lines)",
        "\n".join(f"- {a}\n+ {b}" for a, b in changed),
    )
    event = _event("pull_request", number=9)
    event["pull_request"]["number"] = 9
    posts_before = len(h.fake.calls("POST", r"/issues/9/comments$"))
    repo = h.repo(h.workspace("failing.yaml", "passing.yaml"), {"evals.yml": adapted})
    run = h.run("sharded", repo, "pull_request", event, "evals.yml", 3001)
    shards = run.matrices("shard")
    ok(
        name,
        sorted(m.get("shard") for m in shards) == [0, 1, 2, 3],
        f"four shard jobs: {shards}",
        lambda: run.tail(),
    )
    stored = sorted(p.name for p in (h.artifacts / "3001").glob("multiturn-eval-shard-*"))
    ok(
        name,
        stored == [f"multiturn-eval-shard-{i}" for i in range(4)],
        f"each shard uploaded its report under its own name: {stored}",
        lambda: run.tail("shard"),
    )
    totals = []
    for i in range(4):
        with contextlib.suppress(Exception):
            report = json.loads(
                zipfile.ZipFile(
                    io.BytesIO(h.artifact(3001, f"multiturn-eval-shard-{i}") or b"")
                ).read("report.json")
            )
            totals.append(
                (
                    report["run"]["shard"]["index"],
                    report["run"]["shard"]["total"],
                    report["summary"]["total"],
                )
            )
    ok(
        name,
        sorted(t[:2] for t in totals) == [(i, 4) for i in range(1, 5)]
        and sum(t[2] for t in totals) == 5,
        f"shards 1-4 of 4 (the CLI counts from 1), 5 cases between them: {totals}",
    )
    job, step = "merge", "multiturn-eval/multiturn-eval@"
    outputs = run.outputs(job, step)
    ok(
        name,
        run.exit_code(job, step) == 1
        and run.job_result(job) == "failure"
        and (outputs.get("total"), outputs.get("failed")) == ("5", "2"),
        f"the merge job's verdict is the whole run's: exit {run.exit_code(job, step)}, {outputs}",
        lambda: run.tail(job),
    )
    errors = run.errors(job, step)
    ok(
        name,
        sorted(errors) == [("evals/failing.yaml", "19"), ("evals/failing.yaml", "26")],
        f"the merge job annotates the failing turns: {errors}",
        lambda: run.log(job, step),
    )
    posts = len(h.fake.calls("POST", r"/issues/9/comments$")) - posts_before
    comments = h.fake.issue_comments(REPO, 9)
    ok(
        name,
        posts == 1 and len(comments) == 1 and "2 of 5 test cases failed" in comments[0]["body"],
        f"one comment for the whole run, from the merge job ({posts} created)",
        lambda: json.dumps(comments)[:1000],
    )
    merged = _zip_names(h.artifact(3001, "multiturn-eval-report"))
    ok(
        name,
        {"report.json", "junit.xml", "summary.md", "report.html"} <= merged,
        f"the merged reports uploaded: {sorted(merged)}",
        lambda: run.tail(job),
    )


def _pull_request_run(h: Harness, run_id: int, head: dict[str, Any]) -> None:
    """A failed pull_request run of evals.yml on the fork's head (what GitHub would list)."""
    h.fake.add_run(
        REPO,
        run_id,
        workflow="evals.yml",
        name="evals",
        branch=head["ref"],
        event="pull_request",
        conclusion="failure",
        head_sha=head["sha"],
    )


FORK_MARKER = "<!-- multiturn-eval: evals comment -->"
DECOY_PR = 88  # pull requests: 7 quick-pr and baseline, 8 the fork's, 9 sharded
ZWSP = "\u200b"


def fork(h: Harness) -> None:
    """A fork's PR runs the suites read-only; a workflow_run job posts the comment."""
    ok = h.checks
    event = _event("pull_request_fork")
    pr = event["pull_request"]
    number, head = pr["number"], pr["head"]
    # the fork's PR, and a decoy: another fork's PR from a branch of the same name
    h.fake.add_pull(
        REPO,
        number,
        head_sha=head["sha"],
        head_ref=head["ref"],
        head_repo=head["repo"]["full_name"],
    )
    h.fake.add_pull(
        REPO, DECOY_PR, head_sha="b" * 40, head_ref=head["ref"], head_repo="mallory/calc"
    )
    # another bot's comment that starts like ours must never be touched
    other = h.fake.add_comment(REPO, number, FORK_MARKER + "\nnot ours", "other-bot[bot]")
    other_body = h.fake.issue_comments(REPO, number)[0]["body"]

    repo = h.repo(h.workspace("failing.yaml"), {"evals.yml": act_workflow(h.workflows["fork-pr"])})
    run = h.run("fork-pr", repo, "pull_request", event, "evals.yml", 4001)
    name = "fork-pr"
    job, step = "evals", "multiturn-eval/multiturn-eval@"
    report = h.artifact(4001, "multiturn-eval-report")
    ok(
        name,
        run.exit_code(job, step) == 1 and "summary.md" in _zip_names(report),
        "the PR's run fails on the failing suite and uploads its reports",
        lambda: run.tail(job),
    )
    ok(
        name,
        not h.fake.calls("POST", rf"/issues/{number}/comments$"),
        "and writes no comment itself",
    )
    _pull_request_run(h, 4001, head)
    if report:
        h.fake.add_artifact(REPO, 4001, "multiturn-eval-report", report)

    comment_workflow = act_workflow(h.workflows["fork-comment"])
    wr = _event("workflow_run")
    wr["workflow_run"].update(
        id=4001,
        head_sha=head["sha"],
        head_branch=head["ref"],
        head_repository={
            "full_name": head["repo"]["full_name"],
            "owner": {"login": head["repo"]["full_name"].split("/")[0]},
        },
    )
    repo = h.repo({}, {"evals-comment.yml": comment_workflow})
    run = h.run("fork-comment", repo, "workflow_run", wr, "evals-comment.yml", 4002)
    name = "fork-comment"
    job = "comment"
    mine = [
        c
        for c in h.fake.issue_comments(REPO, number)
        if c["user"]["login"] == "github-actions[bot]"
    ]
    summary = _zip_member(report, "summary.md")
    ok(
        name,
        run.job_result(job) == "success" and len(mine) == 1,
        f"one comment by github-actions[bot] on #{number}, the PR found by the run's head commit and repository",
        lambda: run.tail(job),
    )
    ok(
        name,
        not h.fake.issue_comments(REPO, DECOY_PR),
        "nothing on the decoy PR with the same branch name",
    )
    body = mine[0]["body"] if mine else ""
    ok(
        name,
        "test cases failed" in summary
        and body.replace(ZWSP, "") == (FORK_MARKER + "\n" + summary).replace(ZWSP, ""),
        "the body is the artifact's summary.md under the recipe's marker",
        body[:500],
    )
    ok(
        name,
        h.fake.issue_comments(REPO, number)[0]["body"] == other_body
        and h.fake.issue_comments(REPO, number)[0]["id"] == other,
        "another bot's comment with the same first line is left alone",
    )

    # --- a hostile artifact: the PR's code can write anything there
    hostile = ("@octocat ping #1 see https://evil.example/x " * 3000) + "\n"
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        z.writestr("summary.md", "<!-- multiturn-eval:forged -->\n" + hostile)
        z.writestr("pr-number", "1\n")
    _pull_request_run(h, 4003, head)
    h.fake.add_artifact(REPO, 4003, "multiturn-eval-report", data.getvalue())
    wr["workflow_run"]["id"] = 4003
    run = h.run("fork-comment-hostile", repo, "workflow_run", wr, "evals-comment.yml", 4004)
    name = "fork-comment/hostile"
    mine = [
        c
        for c in h.fake.issue_comments(REPO, number)
        if c["user"]["login"] == "github-actions[bot]"
    ]
    body = mine[0]["body"] if mine else ""
    ok(
        name,
        run.job_result(job) == "success"
        and len(mine) == 1
        and body.startswith(FORK_MARKER + "\n")
        and "forged" in body,
        "the same comment updated (found by marker and author), on the event's PR",
        lambda: run.tail(job),
    )
    ok(name, not h.fake.issue_comments(REPO, 1), "never the PR number the artifact names")
    ok(
        name,
        len(body) <= 60_000 * 1.1 + len(FORK_MARKER) + 1,
        f"bounded ({len(body):,} characters from {len(hostile):,})",
    )
    ok(
        name,
        "@octocat" not in body and "#1 " not in body and "https://evil" not in body,
        "it mentions, references and links no one",
        body[:300],
    )

    # --- a cancelled run: the job does not run
    wr["workflow_run"]["conclusion"] = "cancelled"
    before = len(h.fake.requests)
    run = h.run("fork-comment-cancelled", repo, "workflow_run", wr, "evals-comment.yml", 4005)
    ok(
        "fork-comment/cancelled",
        run.code == 0 and len(h.fake.requests) == before,
        "a cancelled run: the comment job is skipped, no request",
        lambda: run.tail(),
    )


EXAMPLES = ROOT / "examples"


def fixtures_pr(h: Harness) -> None:
    """A judged suite replayed from its committed fixtures, with no secret in the workflow:
    on a pull request from the repository and on one from a fork."""
    workflow = act_workflow(h.workflows["fixtures-pr"])
    files: dict[str, Path | str] = {
        "examples/__init__.py": EXAMPLES / "__init__.py",
        "examples/support": EXAMPLES / "support",
        "evals/suite-judged.yaml": EXAMPLES / "support" / "suite-judged.yaml",
        "evals/fixtures/suite-judged": EXAMPLES / "support" / "fixtures" / "suite-judged",
    }
    _fixtures_pr_run(h, h.repo(files, {"evals.yml": workflow}), "pull_request", 5001)
    _fixtures_pr_run(h, h.repo(files, {"evals.yml": workflow}), "pull_request_fork", 5002)


def _fixtures_pr_run(h: Harness, repo: Path, event_name: str, run_id: int) -> None:
    ok = h.checks
    fork = event_name == "pull_request_fork"
    label = "fixtures-pr/fork" if fork else "fixtures-pr"
    event = _event(event_name)
    number = event["pull_request"]["number"]
    before = [c["id"] for c in h.fake.issue_comments(REPO, number)]
    run = h.run(label.replace("/", "-"), repo, "pull_request", event, "evals.yml", run_id)
    job, step = "evals", "evals"
    outputs = run.outputs(job, step)
    ok(
        label,
        run.exit_code(job, step) in (0, None)
        and run.job_result(job) == "success"
        and (outputs.get("total"), outputs.get("passed")) == ("2", "2"),
        f"the judged suite passes from its fixtures, with no key: {outputs}",
        lambda: run.tail(job),
    )
    report = _zip_member(h.artifact(run_id, "multiturn-eval-report"), "report.json")
    fixtures = json.loads(report)["run"].get("fixtures", {}) if report else {}
    ok(
        label,
        (fixtures.get("mode"), fixtures.get("replayed"), fixtures.get("missed"))
        == ("replay", 4, 0),
        f"every judge call replayed, none missed: {fixtures}",
    )
    summary = run.summary(job, step)
    ok(
        label,
        "Replayed from fixtures recorded on" in summary and ANTHROPIC_KEY not in run.text,
        "the step summary says the calls were replayed; no key in the log",
        lambda: summary[:600],
    )
    new = [c for c in h.fake.issue_comments(REPO, number) if c["id"] not in before]
    if fork:
        ok(label, not new, "a fork's PR: no comment (a read-only token), the step still passes")
    else:
        ok(
            label,
            any("Replayed from fixtures recorded on" in c["body"] for c in new),
            "the PR comment says so too",
        )


# Every marked workflow is run by one of these (tests/test_docs_workflows.py checks it).
SCENARIOS: dict[str, Scenario] = {
    "quick-pr": quick_pr,
    "baseline": baseline,
    "sharded": sharded,
    "fork-pr": fork,
    "fork-comment": fork,
    "fixtures-pr": fixtures_pr,
}
# Marked workflows act cannot run, with the reason.
NOT_RUN: dict[str, str] = {
    "fixtures-refresh": (
        "it records live (fixtures: update calls the model with a real API key, which CI has "
        "not), then pushes a branch to github.com and opens a pull request there; its parts "
        "are tested on their own: update (tests/test_fixtures_runs.py), the Action's fixtures "
        "input (tests/test_action_entrypoint.py), zizmor audits the workflow"
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.act_e2e", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--act", type=Path, required=True, help="the act binary")
    parser.add_argument("--docker-host", required=True, help="the engine act uses (DOCKER_HOST)")
    parser.add_argument("--standins", type=Path, required=True, help="the built stand-in actions")
    parser.add_argument("--work", type=Path, required=True, help="an empty scratch directory")
    parser.add_argument("--only", action="append", default=[], help="a workflow name (repeatable)")
    parser.add_argument("--as-uid", type=int, help="run act as this user (the harness is root)")
    parser.add_argument(
        "--act-group", type=int, action="append", default=[], help="a supplementary group for act"
    )
    args = parser.parse_args(argv)
    workflows = marked_workflows()
    missing = set(workflows) - set(SCENARIOS) - set(NOT_RUN)
    if missing:
        print(f"act-e2e: no scenario for the marked workflows {sorted(missing)}", file=sys.stderr)
        return 1
    chosen: list[Scenario] = []
    for name, scenario in SCENARIOS.items():
        if (not args.only or name in args.only) and scenario not in chosen:
            chosen.append(scenario)
    checks = Checks()
    fake = FakeGitHub(tokens={TOKEN: Token("github-actions[bot]", "bot", True)})
    started = time.monotonic()
    with serve(fake) as running:
        harness = Harness(
            args.act,
            args.work,
            args.docker_host,
            args.standins,
            running,
            checks,
            args.as_uid,
            args.act_group,
            workflows,
        )
        for scenario in chosen:
            try:
                scenario(harness)
            except (
                Exception
            ) as exc:  # a scenario that crashes is a failed check, and the rest still run
                checks(
                    scenario.__name__, False, f"the scenario crashed: {type(exc).__name__}: {exc}"
                )
    timings = ", ".join(f"{k} {v:.0f}s" for k, v in harness.timings.items())
    print(f"act runs: {timings}")
    print(
        f"act-e2e: {checks.passed} passed, {len(checks.failed)} failed in {time.monotonic() - started:.0f}s"
    )
    for failed in checks.failed:
        print(f"  FAILED {failed}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
