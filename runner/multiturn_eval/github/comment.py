"""The sticky pull-request comment: which PR, find our earlier comment, update or create.

Which pull request (first that applies):

1. ``MULTITURN_EVAL_PR_NUMBER`` in the step's environment (e.g. in a
   ``workflow_run`` job that knows the number from an artifact);
2. the event: ``pull_request.number`` for ``pull_request*`` events when the
   base repository is ``$GITHUB_REPOSITORY``; the issue number of an
   ``issue_comment`` on a PR; ``workflow_run.pull_requests[0]``;
3. ``GET /repos/{repo}/commits/{sha}/pulls``: an open PR containing the commit
   (``pull_request.head.sha`` or ``workflow_run.head_sha``, else ``$GITHUB_SHA``).

``comment: auto`` comments only when the workflow runs for a pull request
(``pull_request*``, ``issue_comment`` on a PR, or ``workflow_run`` of one);
``always`` also looks up the PR of the commit on other events (``push``).

Our comment is the one whose first line is the report's hidden marker (it
identifies the suite set, so two steps with different suites keep two
comments) *and* whose author is the token's user. A ``GITHUB_TOKEN`` cannot
ask who it is (``GET /user`` answers 403), so then any bot author counts: a
person's comment is never taken over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import GitHubError
from .client import GitHubClient

PR_EVENTS = frozenset(
    {"pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment"}
)
#: GitHub refuses comment bodies over 65,536 characters (422)
MAX_BODY = 65_536


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


@dataclass(frozen=True)
class PullRequestRef:
    is_pr_run: bool
    """the workflow runs for a pull request (``comment: auto`` comments)"""
    number: int | None = None
    head_sha: str | None = None
    read_only: bool = False
    """a ``pull_request`` event from a fork: the token cannot write"""
    source: str = ""


def pull_request_from_event(
    event_name: str,
    payload: Mapping[str, Any],
    repository: str,
    override: str | None = None,
) -> PullRequestRef:
    """What the event (and ``MULTITURN_EVAL_PR_NUMBER``) says about the pull request."""
    number: int | None = None
    head_sha: str | None = None
    is_pr_run = False
    read_only = False
    source = ""
    if event_name in PR_EVENTS:
        pr = _get(payload, "pull_request")
        is_pr_run = isinstance(pr, Mapping)
        base_repo = _get(pr, "base", "repo", "full_name")
        head_repo = _get(pr, "head", "repo", "full_name")
        head_sha = _get(pr, "head", "sha")
        if isinstance(_get(pr, "number"), int) and (
            not repository or not base_repo or base_repo.lower() == repository.lower()
        ):
            number, source = pr["number"], "the event"
        # a fork's pull_request (not pull_request_target) gets a read-only token
        fork = head_repo is None or (
            isinstance(base_repo, str) and head_repo.lower() != base_repo.lower()
        )
        read_only = is_pr_run and fork and event_name != "pull_request_target"
    elif event_name == "issue_comment" and _get(payload, "issue", "pull_request") is not None:
        is_pr_run = True
        if isinstance(_get(payload, "issue", "number"), int):
            number, source = payload["issue"]["number"], "the event"
    elif event_name == "workflow_run":
        run = _get(payload, "workflow_run")
        is_pr_run = _get(run, "event") in PR_EVENTS
        head_sha = _get(run, "head_sha")
        for pr in _get(run, "pull_requests") or []:
            # entries carry the base repository's API url only; PRs of other repos are skipped
            base_url = _get(pr, "base", "repo", "url")
            ours = not isinstance(base_url, str) or base_url.lower().endswith(
                "/repos/" + repository.lower()
            )
            if ours and isinstance(_get(pr, "number"), int):
                number, source = pr["number"], "the workflow_run event"
                break
    if override and override.strip().isdigit():
        number, source, is_pr_run = int(override.strip()), "MULTITURN_EVAL_PR_NUMBER", True
    return PullRequestRef(
        is_pr_run=is_pr_run,
        number=number,
        head_sha=head_sha if isinstance(head_sha, str) else None,
        read_only=read_only,
        source=source,
    )


def pull_request_of_commit(client: GitHubClient, repository: str, sha: str) -> int | None:
    """An open pull request of ``repository`` containing the commit, if any."""
    pulls, _ = client.request("GET", f"/repos/{repository}/commits/{sha}/pulls?per_page=100")
    candidates = [
        p
        for p in pulls or []
        if isinstance(p, Mapping)
        and isinstance(p.get("number"), int)
        and (
            _get(p, "base", "repo", "full_name") in (None, repository)
            or str(_get(p, "base", "repo", "full_name")).lower() == repository.lower()
        )
    ]
    open_ones = [p for p in candidates if p.get("state", "open") == "open"]
    chosen = (open_ones or candidates)[:1]
    return int(chosen[0]["number"]) if chosen else None


# --------------------------------------------------------------------------- body


def first_line(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def shorten(body: str, limit: int, note: str) -> str:
    """``body`` cut at a line end to at most ``limit`` characters, note appended.

    The first line (the marker) is always kept; ``<details>`` blocks and code
    fences left open by the cut are closed so the rest of the page renders.
    """
    if len(body) <= limit:
        return body
    tail = f"\n\n{note}\n"
    room = max(limit - len(tail) - 200, len(first_line(body)) + 1)
    cut = body[:room]
    newline = cut.rfind("\n")
    cut = cut[: newline + 1] if newline > 0 else cut
    closers = ""
    if cut.count("```") % 2:
        closers += "\n```\n"
    open_details = len(re.findall(r"<details\b", cut)) - cut.count("</details>")
    closers += "\n</details>\n" * max(open_details, 0)
    return (cut + closers + tail)[:limit]


def minimal(body: str, note: str) -> str:
    """The marker, the verdict line and the note: the last resort after repeated 422s."""
    lines = [line for line in body.split("\n") if line.strip()]
    return "\n".join(lines[:2]) + f"\n\n{note}\n"


def attempts(body: str, note: str) -> list[str]:
    """Bodies to try in turn: whole (within 65,536), half, a quarter, the minimal one.

    GitHub answers 422 "body is too long" even under 65,536 characters when it
    counts the text differently (bytes, entities), so each retry halves.
    """
    first = shorten(body, MAX_BODY, note)
    tries = [first, shorten(body, len(first) // 2, note), shorten(body, len(first) // 4, note)]
    tries.append(minimal(body, note))
    return [
        t for i, t in enumerate(tries) if t not in tries[:i] and (i == 0 or len(t) < len(first))
    ]


# ---------------------------------------------------------------------- publishing

Action = Literal["created", "updated"]


@dataclass(frozen=True)
class Published:
    action: Action
    url: str
    comment_id: int
    shortened: bool = False


def token_login(client: GitHubClient) -> str | None:
    """The token's user, or None for installation tokens (``GITHUB_TOKEN``)."""
    try:
        user, _ = client.request("GET", "/user")
    except GitHubError:
        return None
    login = _get(user, "login")
    return login if isinstance(login, str) and login else None


def is_ours(comment: Mapping[str, Any], marker: str, login: str | None) -> bool:
    if first_line(str(comment.get("body") or "")) != marker:
        return False
    author = _get(comment, "user", "login")
    if login is not None:
        return bool(author == login)
    return bool(_get(comment, "user", "type") == "Bot")


def find_own_comment(
    client: GitHubClient, repository: str, number: int, marker: str, login: str | None
) -> Mapping[str, Any] | None:
    for comment in client.paginate(f"/repos/{repository}/issues/{number}/comments?per_page=100"):
        if isinstance(comment, Mapping) and is_ours(comment, marker, login):
            return comment
    return None


def upsert_comment(
    client: GitHubClient,
    repository: str,
    number: int,
    body: str,
    *,
    truncation_note: str,
) -> Published:
    """Update our earlier comment on the PR, or create one; GitHubError when neither works."""
    marker = first_line(body)
    login = token_login(client)
    existing = find_own_comment(client, repository, number, marker, login)
    last_error: GitHubError | None = None
    for attempt in attempts(body, truncation_note):
        try:
            if existing is not None:
                data, _ = client.request(
                    "PATCH",
                    f"/repos/{repository}/issues/comments/{existing['id']}",
                    {"body": attempt},
                )
                action: Action = "updated"
            else:
                data, _ = client.request(
                    "POST", f"/repos/{repository}/issues/{number}/comments", {"body": attempt}
                )
                action = "created"
        except GitHubError as exc:
            if exc.too_long:
                last_error = exc
                continue
            raise
        return Published(
            action=action,
            url=str(_get(data, "html_url") or ""),
            comment_id=int(_get(data, "id") or 0),
            shortened=attempt != body,
        )
    assert last_error is not None
    raise last_error
