"""The GitHub Action: inputs -> install -> run -> outputs, summary, annotations, comment.

``entrypoint.sh`` runs ``python -m multiturn_eval.github``, which calls
:func:`main` with the process environment (read here once, as the CLI does).
This module is the I/O shell; what to say and do is decided by the pure
functions of :mod:`.decisions`. Order of work:

1. read the action environment and the inputs; a bad input is an ``::error::``
   naming it and exit 2, before anything runs;
2. ``install`` the suite's own requirements (``pip install``; a failure is exit 2);
3. run the suites in-process with :func:`multiturn_eval.run.run_suites` (no
   second interpreter, no argv round trip), from ``working-directory``, with
   the workspace and the working directory on ``sys.path``; everything the run
   prints sits between ``::stop-commands::`` lines so agent text cannot be read
   as a workflow command;
4. from the run's report (in memory; nothing is read back from disk): outputs
   to ``$GITHUB_OUTPUT``, ``summary.md`` as written to ``$GITHUB_STEP_SUMMARY``,
   at most 10 error annotations at the YAML lines of the failing turns, then a
   notice pointing at the summary;
5. the sticky PR comment (:mod:`.comment`); a comment that cannot be written
   is a notice or warning, never a failed step;
6. the report directory is handed to the workspace's owner (the container runs
   as root, the runner's later steps do not).

Exit status: the CLI's (0 passed, 1 failed, 2 configuration, 3 incomplete),
except that ``fail-on-failure: false`` turns 1 into 0.

``mode: merge`` (the matrix's merge job): instead of steps 2 and 3, the shard
jobs' ``report.json`` files (input ``reports``) are merged by
:func:`multiturn_eval.merge.merge_to_dir` into one report set in
``report-dir``; from there on it is the same outcome -> outputs, summary,
annotations, comment path as ``mode: run`` (exit: the merged verdict, 2 when
the merge is refused, 3 when a shard is incomplete). The shard jobs
(``shard-index``/``shard-total``) run with ``comment: never``.

Secrets (one rule, :mod:`multiturn_eval.secrets`): the API key inputs and the
token are masked in the log; they, every environment variable whose name says
it is a secret, and every secret the suites and backends use are redacted from
every report file, the step summary, annotations and the comment. The token
(and the runner's ``ACTIONS_RUNTIME_TOKEN`` and
``ACTIONS_ID_TOKEN_REQUEST_TOKEN``) are removed from the environment the
suites' own code (agents, tools, graders, ``install``) runs in.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..environment import GitHubContext, RunEnvironment
from ..errors import ConfigError, ConfigIssue, GitHubError, InputError, RateLimited
from ..exit_codes import EXIT_CONFIG, EXIT_INCOMPLETE
from ..secrets import Redactor, is_secret_value, secrets_in
from . import decisions
from .commands import ANNOTATIONS_PER_STEP, Annotation, Log, clean
from .comment import PullRequestRef, pull_request_from_event, pull_request_of_commit, upsert_comment
from .decisions import OUTPUTS
from .files import (
    append_summary,
    ensure_directory,
    first_missing,
    hand_back,
    hand_back_written,
    workspace_problem,
    write_outputs,
)
from .inputs import SECRET_INPUTS, ActionInputs, env_name, raw_input, read_inputs

if TYPE_CHECKING:
    from ..results import Report
    from ..run import RunOutcome

#: credentials the suites' code has no use for, kept out of its environment (hygiene: the
#: container's process table still has them; suites are code, run only code you trust)
_WITHHELD = frozenset(
    {env_name("github-token"), "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"}
)


@dataclass
class ActionEnv:
    """What the runner tells the action about the workflow run (read once)."""

    workspace: Path
    github: GitHubContext = field(default_factory=GitHubContext)
    event: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, environment: RunEnvironment) -> ActionEnv:
        github = environment.github
        event: Any = {}
        if github.event_path is not None:
            with contextlib.suppress(OSError, ValueError):
                event = json.loads(github.event_path.read_text(encoding="utf-8"))
        return cls(
            workspace=github.workspace or Path.cwd(),
            github=github,
            event=event if isinstance(event, dict) else {},
        )


def collect_secrets(env: Mapping[str, str]) -> list[str]:
    """Values never to show: secret inputs, and variables whose names say they are secret."""
    found = [raw_input(env, name) for name in SECRET_INPUTS]
    found += secrets_in(env)
    return [s for s in dict.fromkeys(found) if is_secret_value(s)]


def workspace_path(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace, POSIX style (for outputs and annotations)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix() or "."
    except ValueError:
        return path.as_posix()


class Action:
    def __init__(self, env: Mapping[str, str], stdout: TextIO) -> None:
        self.env = dict(env)
        self.environment = RunEnvironment.from_mapping(self.env)
        self.log = Log(stdout)
        self.context = ActionEnv.read(self.environment)
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
        unusable = workspace_problem(self.context.github.workspace)
        if unusable is not None:
            self.annotate(Annotation("error", unusable, title="multiturn-eval: GITHUB_WORKSPACE"))
            self.finish_outputs()
            return EXIT_CONFIG
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
        handback = first_missing(inputs.report_dir, self.workspace)
        self.remove_stale_reports(inputs.report_dir)
        outcome: RunOutcome | None = None
        try:
            if inputs.mode == "merge":
                code, outcome = self.merge_shards(inputs)
            else:
                code, outcome = self.install_and_run(inputs)
            if outcome is not None and outcome.spend_notice is not None:
                self.annotate(
                    Annotation(
                        "warning",
                        f"multiturn-eval: {outcome.spend_notice}",
                        title="multiturn-eval: spend cap reached",
                    )
                )
            report = outcome.report if outcome is not None else None
            markdown = outcome.markdown if outcome is not None else None
            written = (
                {fmt: self.rel(path) for fmt, path in outcome.written.items()} if outcome else {}
            )
            self.outputs.update(decisions.report_outputs(report, written))
            self.step_summary(
                decisions.step_summary(
                    report, markdown, code, self.config_issues, self.outputs["report-dir"]
                )
            )
            if report is not None:
                workdir = inputs.working_directory
                for annotation in decisions.failure_annotations(
                    report,
                    lambda suite: self.suite_file(workdir, suite),
                    self.errors_left,
                    self.outputs["report-dir"],
                ):
                    self.annotate(annotation)
            self.comment(inputs, report, markdown, code)
        finally:
            if not ensure_directory(inputs.report_dir):
                self.outputs["report-dir"] = ""
            self.finish_outputs()
            hand_back(handback, self.workspace)
            for written_dir in outcome.fixture_dirs if outcome is not None else ():
                hand_back_written(written_dir, self.workspace)  # fixtures recorded by the run
        final = decisions.final_exit_code(code, inputs.fail_on_failure)
        if final != code:
            self.log.line(
                "multiturn-eval: test cases failed, but fail-on-failure is false: the step passes"
            )
        return final

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

    def install_and_run(self, inputs: ActionInputs) -> tuple[int, RunOutcome | None]:
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
            return EXIT_CONFIG, None
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

    def run_suites(
        self, inputs: ActionInputs, env: Mapping[str, str]
    ) -> tuple[int, RunOutcome | None]:
        from ..run import RunOptions, run_suites

        options = RunOptions(
            parallel_test_cases=inputs.parallel_test_cases,
            repeat=inputs.repeat,
            report_dir=os.path.relpath(inputs.report_dir, inputs.working_directory),
            formats=("json", "junit", "markdown", "html"),
            pattern=inputs.filter or None,
            tags=tuple(inputs.tags),
            report_dir_label="input 'report-dir'",
            **self.baseline_fields(inputs),
            shard=inputs.shard,
            max_cost=inputs.max_cost,
            fixtures=inputs.fixtures,
        )
        config_error: ConfigError | None = None
        crash: BaseException | None = None
        outcome: RunOutcome | None = None
        with self.log.commands_stopped():
            try:
                outcome = run_suites(
                    inputs.suites,
                    options,
                    RunEnvironment.from_mapping(env),
                    stream=self.log.stream,
                    secrets=self.redact.secrets,
                )
                code = outcome.exit_code
                self.redact = outcome.redactor.with_secrets(self.redact.secrets)
            except ConfigError as exc:
                config_error, code = exc, EXIT_CONFIG
            except KeyboardInterrupt:
                code = EXIT_INCOMPLETE
                self.log.line("multiturn-eval: interrupted")
            except Exception as exc:  # a bug: say so, exit 3 (never 1)
                crash, code = exc, EXIT_INCOMPLETE
                self.log.line(self.redact("".join(traceback.format_exception(exc))))
            if outcome is not None:
                if outcome.write_error is not None:
                    self.log.line(self.redact(f"multiturn-eval: {outcome.write_error}"))
                if outcome.internal_error is not None:
                    crash = outcome.internal_error
                    self.log.line(self.redact("".join(traceback.format_exception(crash))))
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
            file = self.suite_file(inputs.working_directory, issue.file) if issue.file else None
            self.annotate(decisions.issue_annotation(issue, file))
        if crash is not None:
            self.annotate(
                Annotation(
                    "error",
                    f"internal error: {type(crash).__name__}: {crash} (traceback in the log)",
                    title="multiturn-eval crashed",
                )
            )
        return code, outcome

    def baseline_fields(self, inputs: ActionInputs) -> dict[str, Any]:
        """RunOptions fields for the ``baseline`` and ``fail-on`` inputs; notices for the rest.

        ``baseline`` is a path or a glob relative to the working directory (downloaded
        artifacts); of several readable matches the newest by ``run.finished_at`` is
        used, and a notice says which. No match, or nothing readable: a notice, and the
        run goes on without a comparison (``fail-on: regressions`` then acts as
        ``failures``).
        """
        from ..reports.reader import read_baseline

        fields: dict[str, Any] = {"fail_on": inputs.fail_on}
        notices: list[str] = []
        pattern = inputs.baseline
        if pattern:
            workdir = inputs.working_directory
            if any(ch in pattern for ch in "*?[") and not (workdir / pattern).exists():
                matches = sorted(glob.glob(pattern, root_dir=workdir, recursive=True))  # noqa: PTH207
            else:
                matches = [pattern]
            candidates = []
            for match in matches:
                report, notice = read_baseline(workdir / match)
                if report is not None:
                    candidates.append((match, report))
                elif notice is not None:  # named as the input names it
                    notices.append(notice.replace(str(workdir / match), match))
            if not matches:
                notices.append(f"no baseline comparison: no file matches {pattern!r}")
            if candidates:
                path, report, note = decisions.choose_baseline(candidates)
                fields.update(baseline=report, baseline_file=path)
                if note is not None:
                    notices.append(note)
        if inputs.fail_on == "regressions" and "baseline" not in fields:
            notices.append(
                "fail-on regressions needs a baseline report; without one, "
                "any failure fails the step"
            )
        for notice in notices:
            self.annotate(Annotation("notice", notice, title="multiturn-eval: baseline"))
        return fields

    def merge_shards(self, inputs: ActionInputs) -> tuple[int, RunOutcome | None]:
        """``mode: merge``: the shard reports -> one report set, as a run's outcome."""
        from ..merge import merge_to_dir, summary_line
        from ..run import RunOutcome

        os.chdir(inputs.working_directory)
        try:
            merged = merge_to_dir(
                inputs.reports,
                inputs.report_dir,
                allow_partial=inputs.allow_partial,
                **self.baseline_fields(inputs),
            )
        except ConfigError as exc:
            self.config_issues = exc.issues
            self.log.line(
                f"multiturn-eval: the shard reports cannot be merged ({len(exc.issues)}):"
            )
            for issue in exc.issues:
                self.log.line(self.redact(f"  {clean(str(issue))}"))
                self.annotate(
                    Annotation("error", str(issue), title="multiturn-eval: input 'reports' (merge)")
                )
            return EXIT_CONFIG, None
        self.log.line(self.redact(f"multiturn-eval: {summary_line(merged)}"))
        return merged.exit_code, RunOutcome(
            report=merged.report,
            written=merged.written,
            exit_code=merged.exit_code,
            report_dir=inputs.report_dir,
            redactor=self.redact,
            markdown=merged.markdown,
        )

    def step_summary(self, text: str) -> None:
        if self.context.github.summary_file is None:
            return
        with contextlib.suppress(OSError):
            append_summary(self.context.github.summary_file, self.redact(text))

    # ------------------------------------------------------------------ comment

    def pull_request(self) -> PullRequestRef:
        return pull_request_from_event(
            self.context.github.event_name,
            self.context.event,
            self.context.github.repository,
            self.env.get("MULTITURN_EVAL_PR_NUMBER"),
        )

    def comment(
        self, inputs: ActionInputs, report: Report | None, markdown: str | None, code: int
    ) -> None:
        github = self.context.github
        shard = inputs.shard
        if inputs.mode == "run" and shard is not None and shard.total > 1:
            if inputs.comment != "never":  # N shards would overwrite one sticky comment
                self.log.line(
                    f"multiturn-eval: no PR comment from shard {shard.label}: the merge job "
                    "(mode: merge) writes the one comment for the whole run"
                )
            return
        if report is not None:
            body = markdown
        elif code == EXIT_CONFIG:
            body = self.config_error_body(inputs)
        else:
            body = None
        plan = decisions.decide_comment(
            inputs.comment,
            self.pull_request(),
            event_name=github.event_name,
            token=bool(inputs.github_token),
            repository=github.repository,
            fallback_sha=github.sha,
            body=self.redact(body) if body is not None else None,
        )
        if plan is None:
            return
        if isinstance(plan, decisions.CommentSkip):
            if plan.as_notice:
                self.annotate(decisions.skip_annotation(plan))
            else:
                self.log.line(plan.message)
            return
        from .client import GitHubClient

        client = GitHubClient(github.api_url, inputs.github_token)
        try:
            number = plan.number
            if number is None and plan.sha:
                number = pull_request_of_commit(client, github.repository, plan.sha)
            if number is None:
                self.annotate(decisions.no_pull_request(plan.sha))
                return
            published = upsert_comment(
                client,
                github.repository,
                number,
                plan.body,
                truncation_note=decisions.truncation_note(github.run_url),
            )
        except GitHubError as exc:
            self.annotate(
                decisions.comment_failed(
                    exc.status, self.redact(exc.message), isinstance(exc, RateLimited)
                )
            )
            return
        self.outputs["comment-url"] = published.url
        self.log.line(
            f"multiturn-eval: PR comment {published.action} on #{number}: {published.url}"
            + (" (shortened to fit GitHub's limit)" if published.shortened else "")
        )

    def config_error_body(self, inputs: ActionInputs) -> str | None:
        """A comment saying the suites did not load (so a stale green comment does not stay)."""
        if inputs.mode == "merge":  # no suite set to name: the refusal is in the log and summary
            return None
        try:
            from ..loader import display_path
            from ..paths import expand_suites
            from ..reports.markdown import comment_marker
            from ..results import Report, RunInfo
            from ..rollup import summarize

            paths = [display_path(p) for p in expand_suites(inputs.suites)]
        except Exception:  # the suite globs themselves are the problem, or no renderer
            return None
        stub = Report(
            run=RunInfo(suites=paths, started_at="", finished_at="", duration_ms=0, complete=False),
            summary=summarize([]),
            results=[],
        )
        return decisions.config_error_body(
            comment_marker(stub), self.config_issues, self.context.github.run_url
        )

    # ------------------------------------------------------------------ outputs

    def finish_outputs(self) -> None:
        if self.context.github.output_file is None:
            return
        try:
            write_outputs(self.context.github.output_file, self.outputs)
        except OSError as exc:
            self.log.warning(f"cannot write outputs to $GITHUB_OUTPUT: {exc}")


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
