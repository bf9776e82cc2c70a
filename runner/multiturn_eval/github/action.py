"""The GitHub Action: inputs -> install -> run -> outputs, summary, annotations, comment.

``entrypoint.sh`` runs ``python -m multiturn_eval.github``, which calls
:func:`main` with the process environment. Order of work:

1. read the action environment and the inputs; a bad input is an ``::error::``
   naming it and exit 2, before anything runs;
2. ``install`` the suite's own requirements (``pip install``; a failure is exit 2);
3. run the suites in-process with the CLI's ``run`` command (no second
   interpreter start-up), from ``working-directory``, with the workspace and
   the working directory on ``sys.path``; everything the run prints sits
   between ``::stop-commands::`` lines so agent text cannot be read as a
   workflow command;
4. from ``report.json``: outputs to ``$GITHUB_OUTPUT``, ``summary.md`` to
   ``$GITHUB_STEP_SUMMARY``, at most 10 error annotations at the YAML lines of
   the failing turns, then a notice pointing at the summary;
5. the sticky PR comment (:mod:`.comment`); a comment that cannot be written
   is a notice or warning, never a failed step;
6. the report directory is handed to the workspace's owner (the container runs
   as root, the runner's later steps do not).

Exit status: the CLI's (0 passed, 1 failed, 2 configuration, 3 incomplete),
except that ``fail-on-failure: false`` turns 1 into 0.

Secrets: the API key inputs and the token are masked in the log, redacted from
every report file, the step summary, annotations and the comment, together
with any environment variable whose name says it is a secret (``*_KEY``,
``*TOKEN*``, ...). The token (and the runner's ``ACTIONS_RUNTIME_TOKEN`` and
``ACTIONS_ID_TOKEN_REQUEST_TOKEN``) are removed from the environment the
suites' own code (agents, tools, graders, ``install``) runs in.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError, ConfigIssue, GitHubError, InputError, RateLimited
from ..reports.redact import Redactor
from ..results import Report
from .annotations import rank_annotations
from .commands import ANNOTATIONS_PER_STEP, Annotation, Log, clean
from .comment import PullRequestRef, pull_request_from_event, pull_request_of_commit, upsert_comment
from .files import append_summary, write_outputs
from .inputs import SECRET_INPUTS, ActionInputs, env_name, raw_input, read_inputs

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3
OUTPUTS = (
    "total",
    "passed",
    "failed",
    "pass-rate",
    "report-dir",
    "json-report",
    "junit-report",
    "markdown-report",
    "html-report",
    "comment-url",
)
REPORT_FILES = {
    "json-report": "report.json",
    "junit-report": "junit.xml",
    "markdown-report": "summary.md",
    "html-report": "report.html",
}
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_MIN_SECRET = 8
#: credentials the suites' code has no use for, kept out of its environment (hygiene: the
#: container's process table still has them; suites are code, run only code you trust)
_WITHHELD = frozenset(
    {env_name("github-token"), "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"}
)


@dataclass
class ActionEnv:
    """What the runner tells the action about the workflow run (read once)."""

    workspace: Path
    event_name: str = ""
    event: Mapping[str, Any] = field(default_factory=dict)
    repository: str = ""
    api_url: str = "https://api.github.com"
    server_url: str = "https://github.com"
    sha: str = ""
    output_file: Path | None = None
    summary_file: Path | None = None

    @classmethod
    def read(cls, env: Mapping[str, str]) -> ActionEnv:
        event: Any = {}
        event_path = env.get("GITHUB_EVENT_PATH", "")
        if event_path:
            with contextlib.suppress(OSError, ValueError):
                event = json.loads(Path(event_path).read_text(encoding="utf-8"))
        return cls(
            workspace=Path(env.get("GITHUB_WORKSPACE") or Path.cwd()),
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event=event if isinstance(event, dict) else {},
            repository=env.get("GITHUB_REPOSITORY", ""),
            api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
            server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
            sha=env.get("GITHUB_SHA", ""),
            output_file=Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None,
            summary_file=(
                Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None
            ),
        )


def collect_secrets(env: Mapping[str, str]) -> list[str]:
    """Values never to show: secret inputs, and variables whose names say they are secret."""
    found = [raw_input(env, name) for name in SECRET_INPUTS]
    for name, value in env.items():
        if _SECRET_NAME.search(name) and len(value.strip()) >= _MIN_SECRET:
            found.append(value.strip())
    return [s for s in dict.fromkeys(found) if len(s) >= _MIN_SECRET]


def workspace_path(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace, POSIX style (for outputs and annotations)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix() or "."
    except ValueError:
        return path.as_posix()


class Action:
    def __init__(self, env: Mapping[str, str], stdout: TextIO) -> None:
        self.env = dict(env)
        self.log = Log(stdout)
        self.context = ActionEnv.read(self.env)
        self.workspace = self.context.workspace.resolve()
        self.redact = Redactor(collect_secrets(self.env))
        self.outputs: dict[str, str] = dict.fromkeys(OUTPUTS, "")
        self.errors_left = ANNOTATIONS_PER_STEP
        self.config_issues: list[ConfigIssue] = []

    # ------------------------------------------------------------------ helpers

    def annotate(self, annotation: Annotation) -> None:
        if annotation.level == "error":
            if self.errors_left <= 0:
                return
            self.errors_left -= 1
        self.log.annotate(
            Annotation(
                annotation.level,
                self.redact(annotation.message),
                self.redact(annotation.title) if annotation.title else None,
                annotation.file,
                annotation.line,
            )
        )

    def rel(self, path: Path) -> str:
        return workspace_path(path, self.workspace)

    def suite_file(self, workdir: Path, suite: str) -> str | None:
        """A result's suite path (relative to the working directory) for ``file=``."""
        path = Path(suite)
        full = path if path.is_absolute() else workdir / path
        rel = self.rel(full)
        return None if rel.startswith("/") else rel

    # -------------------------------------------------------------------- steps

    def run(self) -> int:
        try:
            inputs = read_inputs(self.env, self.workspace)
        except InputError as exc:
            for problem in exc.problems:
                self.annotate(
                    Annotation(
                        "error",
                        str(problem),
                        title=f"multiturn-eval: invalid input '{problem.input}'",
                    )
                )
            self.finish_outputs()
            return EXIT_CONFIG
        for name in SECRET_INPUTS:
            value = raw_input(self.env, name)
            if value:
                self.log.mask(value)

        self.outputs["report-dir"] = self.rel(inputs.report_dir)
        handback = _first_missing(inputs.report_dir, self.workspace)
        self.remove_stale_reports(inputs.report_dir)
        try:
            code = self.install_and_run(inputs)
            report = self.read_report(inputs)
            if report is not None:
                self.report_outputs(report, inputs)
            if code == EXIT_CONFIG and report is None:
                self.summary_config_error()
            elif report is None:
                self.summary_no_report(code)
            else:
                self.step_summary(inputs)
                self.failure_annotations(report, inputs)
            self.comment(inputs, report, code)
        finally:
            self.finish_outputs()
            hand_back(handback, self.workspace)
        if code == EXIT_FAILED and not inputs.fail_on_failure:
            self.log.line(
                "multiturn-eval: test cases failed, but fail-on-failure is false: the step passes"
            )
            return EXIT_OK
        return code

    def remove_stale_reports(self, report_dir: Path) -> None:
        """Reports of an earlier run in this workspace must not pass for this run's.

        A run stopped by a configuration error writes no report, so an old
        ``report.json`` left in the directory (an earlier step, a self-hosted
        runner's workspace) would otherwise give the outputs, summary and
        comment of a different run. Only the files the runner writes are removed.
        """
        from ..reports.writer import RENDERERS, ProgressWriter

        names = [name for name, _ in RENDERERS.values()]
        journal = getattr(ProgressWriter, "JOURNAL", None)
        if isinstance(journal, str):
            names.append(journal)
        removed = []
        for name in names:
            path = report_dir / name
            if path.is_file():
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(name)
        if removed:
            self.log.line(
                f"multiturn-eval: removed reports of an earlier run from "
                f"{self.rel(report_dir)}/: {', '.join(removed)}"
            )

    def run_env(self, inputs: ActionInputs) -> dict[str, str]:
        """The environment the suites' code runs in (also set as ``os.environ``)."""
        env = {k: v for k, v in self.env.items() if k not in _WITHHELD}
        if inputs.anthropic_api_key:
            env["ANTHROPIC_API_KEY"] = inputs.anthropic_api_key
        if inputs.openai_api_key:
            env["OPENAI_API_KEY"] = inputs.openai_api_key
        pr = self.pull_request()
        if pr.number is not None and not env.get("MULTITURN_EVAL_PR_NUMBER"):
            env["MULTITURN_EVAL_PR_NUMBER"] = str(pr.number)
        if pr.head_sha and not env.get("MULTITURN_EVAL_GIT_SHA"):
            env["MULTITURN_EVAL_GIT_SHA"] = pr.head_sha  # the PR's head, not the merge commit
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return env

    def install_and_run(self, inputs: ActionInputs) -> int:
        env = self.run_env(inputs)
        for name in set(os.environ) - set(env):
            del os.environ[name]
        os.environ.update(env)
        sys.dont_write_bytecode = True  # no root-owned __pycache__ in the workspace
        os.chdir(inputs.working_directory)
        for path in (self.workspace, inputs.working_directory):
            if str(path) not in sys.path:
                sys.path.insert(0, str(path))
        if inputs.install and not self.install(inputs):
            return EXIT_CONFIG
        return self.run_suites(inputs, env)

    def install(self, inputs: ActionInputs) -> bool:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--no-cache-dir",
            "--progress-bar",
            "off",
            *inputs.install,
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(4, "--root-user-action=ignore")
        title = "multiturn-eval: pip install " + " ".join(inputs.install)
        with (
            self.log.group(title),
            self.log.commands_stopped(),
            subprocess.Popen(
                command,
                cwd=inputs.working_directory,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            ) as process,
        ):
            assert process.stdout is not None
            for line in process.stdout:
                self.log.line(self.redact(line.rstrip("\n")))
        returncode = process.wait()
        if returncode != 0:
            self.annotate(
                Annotation(
                    "error",
                    f"pip install failed (exit {returncode}); see the log above",
                    title="multiturn-eval: input 'install'",
                )
            )
            return False
        import importlib

        importlib.invalidate_caches()
        return True

    def cli_argv(self, inputs: ActionInputs) -> list[str]:
        argv = [
            "run",
            "-o",
            os.path.relpath(inputs.report_dir, inputs.working_directory),
            "--format",
            "json,junit,markdown,html",
        ]
        if inputs.parallel_test_cases is not None:
            argv += ["-p", str(inputs.parallel_test_cases)]
        if inputs.filter:
            argv += ["-k", inputs.filter]
        for tag in inputs.tags:
            argv += ["--tag", tag]
        return [*argv, "--", *inputs.suites]

    def run_suites(self, inputs: ActionInputs, env: dict[str, str]) -> int:
        from .. import cli

        argv = self.cli_argv(inputs)
        config_error: ConfigError | None = None
        crash: BaseException | None = None
        with self.log.commands_stopped():
            try:
                args = cli.build_parser().parse_args(argv)
                code = cli.cmd_run(args, env, self.log.stream)
            except ConfigError as exc:
                config_error, code = exc, EXIT_CONFIG
            except SystemExit as exc:  # argparse: a usage error was printed
                code = exc.code if isinstance(exc.code, int) else EXIT_CONFIG
            except KeyboardInterrupt:
                code = EXIT_INCOMPLETE
                self.log.line("multiturn-eval: interrupted")
            except Exception as exc:  # a bug: say so, exit 3 (never 1)
                crash, code = exc, EXIT_INCOMPLETE
                self.log.line(self.redact("".join(traceback.format_exception(exc))))
            if config_error is not None:
                count = len(config_error.issues)
                self.log.line(
                    f"multiturn-eval: configuration error{'s' if count != 1 else ''} ({count}):"
                )
                for issue in config_error.issues:
                    self.log.line(self.redact(f"  {clean(str(issue))}"))
        with contextlib.suppress(ValueError):  # the run's handler was removed: ours again
            signal.signal(signal.SIGTERM, _terminate)
        self.config_issues = config_error.issues if config_error else []
        for issue in self.config_issues:
            self.annotate(self.issue_annotation(issue, inputs))
        if crash is not None:
            self.annotate(
                Annotation(
                    "error",
                    f"internal error: {type(crash).__name__}: {crash} (traceback in the log)",
                    title="multiturn-eval crashed",
                )
            )
        elif code == EXIT_CONFIG and config_error is None:
            self.annotate(
                Annotation(
                    "error", "configuration or usage error; see the log", title="multiturn-eval"
                )
            )
        return code

    def issue_annotation(self, issue: ConfigIssue, inputs: ActionInputs) -> Annotation:
        file = self.suite_file(inputs.working_directory, issue.file) if issue.file else None
        where = " ".join(p for p in (issue.test_case, issue.field) if p)
        return Annotation(
            "error",
            f"{where}: {issue.message}" if where else issue.message,
            title="multiturn-eval: configuration error",
            file=file,
            line=issue.line if file else None,
        )

    def read_report(self, inputs: ActionInputs) -> Report | None:
        """report.json (after redacting every report file), or None when there is none."""
        files = sorted(inputs.report_dir.rglob("*")) if inputs.report_dir.is_dir() else []
        for path in files:
            if not path.is_file() or path.is_symlink():
                continue
            with contextlib.suppress(OSError, UnicodeDecodeError):
                text = path.read_text(encoding="utf-8")
                redacted = self.redact(text)
                if redacted != text:
                    path.write_text(redacted, encoding="utf-8")
        try:
            return Report.model_validate_json(
                (inputs.report_dir / "report.json").read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            return None

    def report_outputs(self, report: Report, inputs: ActionInputs) -> None:
        s = report.summary
        self.outputs.update(
            {
                "total": str(s.total),
                "passed": str(s.passed),
                "failed": str(s.failed),
                "pass-rate": "" if s.pass_rate is None else f"{round(s.pass_rate, 4):g}",
            }
        )
        for output, name in REPORT_FILES.items():
            path = inputs.report_dir / name
            if path.is_file():
                self.outputs[output] = self.rel(path)

    def markdown(self, report_dir: Path) -> str | None:
        try:
            return self.redact((report_dir / "summary.md").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None

    def step_summary(self, inputs: ActionInputs) -> None:
        if self.context.summary_file is None:
            return
        body = self.markdown(inputs.report_dir)
        if body is None:
            body = (
                "### multiturn-eval\n\n"
                f"No `summary.md` was written; see `{self.outputs['report-dir']}`.\n"
            )
        with contextlib.suppress(OSError):
            append_summary(self.context.summary_file, body)

    def summary_config_error(self) -> None:
        if self.context.summary_file is None:
            return
        lines = ["### ❌ multiturn-eval: configuration error (no agent was called)", ""]
        lines += [f"- {_md_text(str(issue))}" for issue in self.config_issues]
        if len(lines) == 2:
            lines.append("See the step's log.")
        with contextlib.suppress(OSError):
            append_summary(self.context.summary_file, self.redact("\n".join(lines)) + "\n")

    def summary_no_report(self, code: int) -> None:
        if self.context.summary_file is None:
            return
        text = (
            f"### ⚠️ multiturn-eval: no report was written (exit {code})\n\n"
            "The run stopped before writing its reports; the step's log says why.\n"
        )
        with contextlib.suppress(OSError):
            append_summary(self.context.summary_file, text)

    def failure_annotations(self, report: Report, inputs: ActionInputs) -> None:
        workdir = inputs.working_directory
        ranked = rank_annotations(
            report, lambda suite: self.suite_file(workdir, suite), self.errors_left
        )
        for annotation in ranked.annotations:
            self.annotate(annotation)
        if not report.results or report.summary.failed == 0:
            return
        shown = len(ranked.annotations)
        more = (
            f"; {ranked.omitted} more failing turn{'s' if ranked.omitted != 1 else ''} "
            "not annotated (GitHub shows 10 per step)"
            if ranked.omitted
            else ""
        )
        self.annotate(
            Annotation(
                "notice",
                f"{report.summary.failed} of {report.summary.total} test cases failed; "
                f"{shown} failing turn{'s' if shown != 1 else ''} annotated{more}. "
                f"Every failure is in the job summary and in {self.outputs['report-dir']}/ "
                "(report.html, junit.xml, report.json).",
                title="multiturn-eval",
            )
        )

    # ------------------------------------------------------------------ comment

    def pull_request(self) -> PullRequestRef:
        return pull_request_from_event(
            self.context.event_name,
            self.context.event,
            self.context.repository,
            self.env.get("MULTITURN_EVAL_PR_NUMBER"),
        )

    def comment(self, inputs: ActionInputs, report: Report | None, code: int) -> None:
        if inputs.comment == "never":
            return
        pr = self.pull_request()
        if inputs.comment == "auto" and not pr.is_pr_run:
            self.log.line(
                f"multiturn-eval: no PR comment ({self.context.event_name or 'no'} event is not "
                "a pull request; comment: always also comments on the commit's pull request)"
            )
            return
        if pr.read_only:
            self.annotate(
                Annotation(
                    "notice",
                    "Pull request from a fork: its token is read-only, so no PR comment was "
                    "written; the results are in the job summary. See the README "
                    "('Fork pull requests') for the pull_request + workflow_run split.",
                    title="multiturn-eval: comment skipped",
                )
            )
            return
        if not inputs.github_token:
            self.annotate(
                Annotation(
                    "notice",
                    "github-token is empty: no PR comment was written.",
                    title="multiturn-eval: comment skipped",
                )
            )
            return
        if not self.context.repository:
            self.annotate(
                Annotation(
                    "notice",
                    "GITHUB_REPOSITORY is not set: no PR comment.",
                    title="multiturn-eval: comment skipped",
                )
            )
            return
        body = self.comment_body(inputs, report, code)
        if body is None:
            self.annotate(
                Annotation(
                    "notice",
                    "No summary.md was written, so there is nothing to comment.",
                    title="multiturn-eval: comment skipped",
                )
            )
            return
        from .client import GitHubClient

        client = GitHubClient(self.context.api_url, inputs.github_token)
        try:
            number = pr.number
            sha = pr.head_sha or self.context.sha
            if number is None and sha:
                number = pull_request_of_commit(client, self.context.repository, sha)
            if number is None:
                self.annotate(
                    Annotation(
                        "notice",
                        f"No open pull request found for commit {sha[:12] or '(unknown)'}: "
                        "no PR comment.",
                        title="multiturn-eval: comment skipped",
                    )
                )
                return
            published = upsert_comment(
                client,
                self.context.repository,
                number,
                body,
                truncation_note=self.truncation_note(),
            )
        except GitHubError as exc:
            self.comment_failed(exc)
            return
        self.outputs["comment-url"] = published.url
        self.log.line(
            f"multiturn-eval: PR comment {published.action} on #{number}: {published.url}"
            + (" (shortened to fit GitHub's limit)" if published.shortened else "")
        )

    def comment_failed(self, exc: Any) -> None:
        status = getattr(exc, "status", 0)
        message = self.redact(str(getattr(exc, "message", exc)))
        if status in (401, 403, 404) and not isinstance(exc, RateLimited):
            hint = (
                "the token cannot write PR comments. Give the job `permissions: "
                "pull-requests: write` (fork PRs never get it; see the README)"
            )
            self.annotate(
                Annotation(
                    "notice",
                    f"No PR comment: {message} (HTTP {status}); {hint}.",
                    title="multiturn-eval: comment skipped",
                )
            )
        else:
            self.annotate(
                Annotation(
                    "warning",
                    f"Could not write the PR comment: {message}",
                    title="multiturn-eval: comment failed",
                )
            )

    def run_url(self) -> str | None:
        run_id = self.env.get("GITHUB_RUN_ID", "")
        if not (run_id.isdigit() and self.context.repository):
            return None
        return (
            f"{self.context.server_url.rstrip('/')}/{self.context.repository}/actions/runs/{run_id}"
        )

    def truncation_note(self) -> str:
        url = self.run_url()
        where = f"[the workflow run]({url})" if url else "the workflow run"
        return (
            "> [!NOTE]\n> This comment was cut to fit GitHub's size limit. Every result is in "
            f"the job summary and the report artifacts of {where}."
        )

    def comment_body(self, inputs: ActionInputs, report: Report | None, code: int) -> str | None:
        if report is None:
            if code != EXIT_CONFIG:
                return None
            return self.config_error_body(inputs)
        # summary.md already links to this run: the CLI rendered it with the GITHUB_* variables
        return self.markdown(inputs.report_dir)

    def config_error_body(self, inputs: ActionInputs) -> str | None:
        """A comment saying the suites did not load (so a stale green comment does not stay)."""
        try:
            from ..cli import expand_suites
            from ..loader import display_path
            from ..reports.markdown import comment_marker
            from ..results import RunInfo, summarize

            paths = [display_path(p) for p in expand_suites(inputs.suites)]
        except Exception:  # the suite globs themselves are the problem, or no renderer
            return None
        stub = Report(
            run=RunInfo(suites=paths, started_at="", finished_at="", duration_ms=0, complete=False),
            summary=summarize([]),
            results=[],
        )
        lines = [comment_marker(stub), "### ❌ multiturn-eval: configuration error", ""]
        lines.append("The suites did not load, so no agent was called:")
        lines.append("")
        lines += [f"- {_md_text(str(issue))}" for issue in self.config_issues]
        url = self.run_url()
        if url:
            lines += ["", f"[workflow run]({url})"]
        return self.redact("\n".join(lines) + "\n")

    # ------------------------------------------------------------------ outputs

    def finish_outputs(self) -> None:
        if self.context.output_file is None:
            return
        try:
            write_outputs(self.context.output_file, self.outputs)
        except OSError as exc:
            self.log.warning(f"cannot write outputs to $GITHUB_OUTPUT: {exc}")


def _md_text(text: str) -> str:
    try:
        from ..reports.markdown import md_text

        return md_text(text, 500)
    except ImportError:  # pragma: no cover - the renderer ships with the package
        return clean(text, 500).replace("<", "&lt;").replace("@", "@\u200b")


def _first_missing(path: Path, workspace: Path) -> Path:
    """The outermost directory of ``path`` the run will create (``path`` if it exists)."""
    current = path
    while current.parent != current and workspace in current.parents:
        if current.parent.exists():
            break
        current = current.parent
    return current


def _walk(root: Path) -> Iterator[Path]:
    yield root
    if root.is_dir() and not root.is_symlink():
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (*dirnames, *filenames):
                yield Path(dirpath) / name


def hand_back(root: Path, workspace: Path) -> None:
    """Give what the action wrote to the workspace's owner (we run as root in a container)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not root.exists():
        return
    try:
        owner = workspace.stat()
    except OSError:
        return
    if owner.st_uid == 0 and owner.st_gid == 0:
        return
    for path in _walk(root):
        with contextlib.suppress(OSError):
            os.lchown(path, owner.st_uid, owner.st_gid)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a cancelled job) stops the action like Ctrl-C


def main(env: Mapping[str, str] | None = None, stdout: TextIO | None = None) -> int:
    # As the container's PID 1, the action would ignore SIGTERM without a handler. The run
    # installs its own (reports of what finished are written, exit 3) and restores SIG_DFL
    # afterwards, so this is set again after it.
    signal.signal(signal.SIGTERM, _terminate)
    action = Action(os.environ if env is None else env, stdout or sys.stdout)
    try:
        return action.run()
    except KeyboardInterrupt:
        action.log.line("multiturn-eval: interrupted")
        return EXIT_INCOMPLETE
