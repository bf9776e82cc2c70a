"""The process environment, read once by an entry point into a typed context.

Only the two entry points (``cli.main`` and ``github.action.main``) look at
the process environment; they build a :class:`RunEnvironment` from it and
pass that down. Everything below them reads this object (or its
``variables`` mapping, for ``${VAR}`` in suites and ``MULTITURN_EVAL_*``
settings), never the process's, so a test or an embedding program controls
the whole environment of a run by passing its own mapping.

``GITHUB_*`` variables are parsed here and nowhere else (:class:`GitHubContext`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SERVER = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?")


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class GitHubContext:
    """What the GitHub Actions runner says about the workflow run (all optional)."""

    actions: bool = False
    """``GITHUB_ACTIONS=true``: running as a workflow step."""
    server_url: str = "https://github.com"
    api_url: str = "https://api.github.com"
    repository: str = ""
    run_id: str = ""
    run_attempt: str = ""
    sha: str = ""
    ref: str = ""
    event_name: str = ""
    event_path: Path | None = None
    workspace: Path | None = None
    output_file: Path | None = None
    summary_file: Path | None = None

    @classmethod
    def from_mapping(cls, env: Mapping[str, str]) -> GitHubContext:
        return cls(
            actions=env.get("GITHUB_ACTIONS") == "true",
            server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
            api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
            repository=env.get("GITHUB_REPOSITORY", ""),
            run_id=env.get("GITHUB_RUN_ID", ""),
            run_attempt=env.get("GITHUB_RUN_ATTEMPT", ""),
            sha=env.get("GITHUB_SHA", ""),
            ref=env.get("GITHUB_REF", ""),
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event_path=_path(env.get("GITHUB_EVENT_PATH")),
            workspace=_path(env.get("GITHUB_WORKSPACE")),
            output_file=_path(env.get("GITHUB_OUTPUT")),
            summary_file=_path(env.get("GITHUB_STEP_SUMMARY")),
        )

    @property
    def has_run(self) -> bool:
        """Whether the run's server, repository and id look like GitHub's (safe in a link)."""
        return bool(
            _SERVER.fullmatch(self.server_url.rstrip("/"))
            and _REPO.fullmatch(self.repository)
            and self.run_id.isdigit()
        )

    @property
    def run_url(self) -> str | None:
        """The workflow run's page, or None outside a (recognisable) GitHub run."""
        if not self.has_run:
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def pr_number_from_ref(self) -> int | None:
        """The pull request of a ``refs/pull/N/merge`` ref."""
        if self.ref.startswith("refs/pull/"):
            number = self.ref.split("/")[2]
            return int(number) if number.isdigit() else None
        return None


@dataclass(frozen=True)
class RunEnvironment:
    """The environment of a run, read once at start-up."""

    variables: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Every variable, for ``${VAR}`` in suites and ``MULTITURN_EVAL_*`` settings."""
    github: GitHubContext = field(default_factory=GitHubContext)
    ci: bool = False
    """``CI`` is set (any CI service): no progress bar is assumed by tools that ask."""
    no_color: bool = False
    """``NO_COLOR`` is set (https://no-color.org)."""
    git_sha: str | None = None
    """``MULTITURN_EVAL_GIT_SHA``, else ``GITHUB_SHA``: the commit the report is for."""
    pr_number: int | None = None
    """``MULTITURN_EVAL_PR_NUMBER``, else the number in a ``refs/pull/N/...`` ref."""

    @classmethod
    def from_mapping(cls, env: Mapping[str, str]) -> RunEnvironment:
        variables = MappingProxyType(dict(env))
        github = GitHubContext.from_mapping(variables)
        raw_pr = variables.get("MULTITURN_EVAL_PR_NUMBER", "")
        return cls(
            variables=variables,
            github=github,
            ci=bool(variables.get("CI")),
            no_color=bool(variables.get("NO_COLOR")),
            git_sha=variables.get("MULTITURN_EVAL_GIT_SHA") or github.sha or None,
            pr_number=int(raw_pr) if raw_pr.isdigit() else github.pr_number_from_ref,
        )

    def get(self, name: str, default: str | None = None) -> str | None:
        """One variable (for the backends' ``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL``, ...)."""
        return self.variables.get(name, default)
