"""A fake GitHub REST API on 127.0.0.1 for the action's PR comment (real wire format).

The action's own client talks to it over HTTP exactly as to ``api.github.com``
(``Authorization: Bearer``, ``application/vnd.github+json``), so the tests
prove the requests, not a mock's idea of them. Endpoints:

- ``GET /user``: the token's user for a personal token; 403 "Resource not
  accessible by integration" for an installation token (``GITHUB_TOKEN``),
  as GitHub answers;
- ``GET /repos/{owner}/{repo}/issues/{n}/comments``: ``per_page`` (default 30,
  max 100, and never more than :attr:`FakeGitHub.page_cap`, so a test can force
  many pages) and ``page``, with GitHub's ``Link`` header (``next``, ``last``);
- ``POST /repos/{owner}/{repo}/issues/{n}/comments`` and
  ``PATCH /repos/{owner}/{repo}/issues/comments/{id}``: a body over 65,536
  characters is GitHub's 422 "body is too long"; a token without write access
  gets 403 "Resource not accessible by integration";
- ``GET /repos/{owner}/{repo}/commits/{sha}/pulls``: the pull requests set in
  :attr:`FakeGitHub.commit_pulls`;
- ``GET /repos/{owner}/{repo}/pulls``: :meth:`FakeGitHub.add_pull`'s pull
  requests, filtered by ``state`` (default open) and ``head`` (``owner:branch``),
  paginated;
- ``GET /repos/{owner}/{repo}/actions/runs`` and
  ``.../actions/workflows/{file or id}/runs``: :meth:`FakeGitHub.add_run`'s
  runs, newest first, filtered by ``branch``, ``event`` and ``status`` (a status
  or a conclusion, as GitHub reads it), paginated, as ``workflow_runs``;
- ``GET /repos/{owner}/{repo}/actions/runs/{id}/artifacts`` (``name`` filter)
  and ``GET .../actions/artifacts/{id}/zip``: :meth:`FakeGitHub.add_artifact`'s
  artifacts; the download is GitHub's 302 to a blob URL
  (``/_fake/blobs/{id}``, unauthenticated like a signed URL) serving the zip.

Tokens are read from ``Authorization: Bearer ...`` and ``token ...`` (both are
GitHub's). Request targets in absolute form (``GET http://host/path``, as sent
to an HTTP proxy) are served by their path, so ``gh`` can reach this server
with ``GH_HOST=github.localhost`` and ``HTTP_PROXY`` pointing here.

Failures are scripted: :meth:`FakeGitHub.fail_next` queues an answer (status,
headers, message) for the next matching requests, e.g. a primary rate limit
(403 with ``x-ratelimit-remaining: 0``) or a secondary one (429 with
``retry-after``). Unknown or missing tokens get 401 "Bad credentials". Every
request is recorded in :attr:`FakeGitHub.requests`.

Run it standalone (the container end-to-end script does)::

    python tests/fakes/github_api.py --port-file PORT --token ghs_x:bot:write \\
        --commit-pulls SHA=7

``GET /_fake/state`` then answers the comments and requests as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

MAX_BODY = 65_536
DOCS = "https://docs.github.com/rest"


@dataclass
class Token:
    login: str
    kind: str = "bot"
    """"bot" (an installation token such as GITHUB_TOKEN) or "user" (a personal token)"""
    write: bool = True


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    headers: dict[str, str]
    body: Any


@dataclass
class Scripted:
    method: str
    path_pattern: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    times: int = 1


@dataclass
class FakeGitHub:
    tokens: dict[str, Token] = field(default_factory=dict)
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    commit_pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    artifacts: dict[int, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    page_cap: int = 100
    max_body: int = MAX_BODY
    """bodies longer than this get 422 (lower it to act like GitHub counting bytes)"""
    base_url: str = ""
    _scripted: list[Scripted] = field(default_factory=list)
    _next_id: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ scripting

    def fail_next(
        self,
        method: str,
        path_pattern: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str = "",
        times: int = 1,
    ) -> None:
        self._scripted.append(
            Scripted(method, path_pattern, status, dict(headers or {}), message, times)
        )

    def add_comment(self, repo: str, number: int, body: str, login: str, kind: str = "Bot") -> int:
        with self._lock:
            return self._create(repo, number, body, login, kind)["id"]  # type: ignore[no-any-return]

    def add_pull(
        self,
        repo: str,
        number: int,
        *,
        head_sha: str,
        head_ref: str,
        head_repo: str,
        state: str = "open",
    ) -> dict[str, Any]:
        """A pull request into ``repo`` from ``head_repo``'s branch ``head_ref``."""
        owner = head_repo.split("/")[0]
        pull = {
            "number": number,
            "state": state,
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "head": {
                "label": f"{owner}:{head_ref}",
                "ref": head_ref,
                "sha": head_sha,
                "repo": {"full_name": head_repo, "owner": {"login": owner}},
            },
            "base": {"ref": "main", "repo": {"full_name": repo}},
        }
        self.pulls.setdefault(repo, []).append(pull)
        return pull

    def add_run(
        self,
        repo: str,
        run_id: int,
        *,
        workflow: str,
        name: str,
        branch: str,
        event: str,
        conclusion: str | None = "success",
        head_sha: str = "0" * 40,
    ) -> dict[str, Any]:
        """A workflow run of ``.github/workflows/<workflow>``; later runs are newer."""
        count = sum(len(r) for r in self.runs.values())
        run = {
            "id": run_id,
            "name": name,
            "path": f".github/workflows/{workflow}",
            "workflow_id": abs(hash(workflow)) % 10**6,
            "head_branch": branch,
            "head_sha": head_sha,
            "event": event,
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "run_number": count + 1,
            "created_at": f"2026-01-01T00:{count // 60:02d}:{count % 60:02d}Z",
        }
        self.runs.setdefault(repo, []).append(run)
        return run

    def add_artifact(self, repo: str, run_id: int, name: str, data: bytes) -> int:
        """An artifact of a run, ``data`` the zip GitHub serves for it; returns its ID."""
        with self._lock:
            self._next_id += 1
            artifact_id = self._next_id
        self.artifacts[artifact_id] = (
            {
                "id": artifact_id,
                "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}",
                "name": name,
                "size_in_bytes": len(data),
                "url": f"{self.base_url}/repos/{repo}/actions/artifacts/{artifact_id}",
                "archive_download_url": f"{self.base_url}/repos/{repo}/actions/artifacts/{artifact_id}/zip",
                "expired": False,
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-04-01T00:00:00Z",
                "workflow_run": {"id": run_id, "repository_id": 1},
                "_repo": repo,
            },
            data,
        )
        return artifact_id

    def issue_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return self.comments.get((repo, number), [])

    def calls(self, method: str, pattern: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    def state(self) -> dict[str, Any]:
        return {
            "comments": {f"{r}#{n}": cs for (r, n), cs in self.comments.items()},
            "requests": [asdict(r) for r in self.requests],
        }

    # ------------------------------------------------------------------- helpers

    def _create(self, repo: str, number: int, body: str, login: str, kind: str) -> dict[str, Any]:
        self._next_id += 1
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        comment = {
            "id": self._next_id,
            "node_id": f"IC_{self._next_id}",
            "url": f"{self.base_url}/repos/{repo}/issues/comments/{self._next_id}",
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{self._next_id}",
            "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "body": body,
            "user": {"login": login, "id": abs(hash(login)) % 10**8, "type": kind},
            "author_association": "NONE" if kind == "Bot" else "MEMBER",
            "created_at": now,
            "updated_at": now,
        }
        self.comments.setdefault((repo, number), []).append(comment)
        return comment

    def _scripted_for(self, method: str, path: str) -> Scripted | None:
        for entry in self._scripted:
            if entry.method == method and re.search(entry.path_pattern, path) and entry.times > 0:
                entry.times -= 1
                return entry
        return None

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], auth: str | None, body: Any
    ) -> tuple[int, dict[str, str], Any]:
        if path == "/_fake/state":
            return 200, {}, self.state()
        blob = re.fullmatch(r"/_fake/blobs/(\d+)", path)
        if blob and method == "GET":
            found = self.artifacts.get(int(blob.group(1)))
            if found is None:
                return 404, {}, {"message": "BlobNotFound", "documentation_url": DOCS}
            return 200, {"content-type": "application/zip"}, found[1]
        scripted = self._scripted_for(method, path)
        if scripted is not None:
            return (
                scripted.status,
                scripted.headers,
                {"message": scripted.message or "scripted failure", "documentation_url": DOCS},
            )
        scheme, _, credential = (auth or "").strip().partition(" ")
        token = (
            self.tokens.get(credential.strip()) if scheme.lower() in ("bearer", "token") else None
        )
        if token is None:
            return 401, {}, {"message": "Bad credentials", "documentation_url": DOCS}
        if path == "/user" and method == "GET":
            if token.kind == "bot":
                return 403, {}, _forbidden()
            return 200, {}, {"login": token.login, "id": 1, "type": "User"}

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", path)
        if m and method == "GET":
            return self._list(m.group(1), int(m.group(2)), query, path)
        if m and method == "POST":
            if not token.write:
                return 403, {}, _forbidden()
            problem = _body_problem(body, self.max_body)
            if problem:
                return 422, {}, problem
            with self._lock:
                comment = self._create(
                    m.group(1),
                    int(m.group(2)),
                    body["body"],
                    token.login,
                    "Bot" if token.kind == "bot" else "User",
                )
            return 201, {"location": comment["url"]}, comment

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", path)
        if m and method == "PATCH":
            if not token.write:
                return 403, {}, _forbidden()
            found = [
                c
                for (repo, _), cs in self.comments.items()
                if repo == m.group(1)
                for c in cs
                if c["id"] == int(m.group(2))
            ]
            if not found:
                return 404, {}, {"message": "Not Found", "documentation_url": DOCS}
            if found[0]["user"]["login"] != token.login:
                return 403, {}, _forbidden()
            problem = _body_problem(body, self.max_body)
            if problem:
                return 422, {}, problem
            found[0]["body"] = body["body"]
            found[0]["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            return 200, {}, found[0]

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-fA-F]+)/pulls", path)
        if m and method == "GET":
            return 200, {}, self.commit_pulls.get(m.group(2), [])

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls", path)
        if m and method == "GET":
            state = query.get("state", ["open"])[0]
            head = query.get("head", [None])[0]
            found = [
                p
                for p in self.pulls.get(m.group(1), [])
                if state in ("all", p["state"]) and (head is None or p["head"]["label"] == head)
            ]
            return self._page(found, query, path)

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions(?:/workflows/([^/]+))?/runs", path)
        if m and method == "GET":
            runs = [
                r
                for r in reversed(self.runs.get(m.group(1), []))
                if m.group(2) in (None, r["path"].rsplit("/", 1)[1], str(r["workflow_id"]))
                and query.get("branch", [r["head_branch"]])[0] == r["head_branch"]
                and query.get("event", [r["event"]])[0] == r["event"]
                and query.get("status", [r["status"]])[0] in (r["status"], r["conclusion"])
            ]
            status, headers, chunk = self._page(runs, query, path)
            return status, headers, {"total_count": len(runs), "workflow_runs": chunk}

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions/runs/(\d+)/artifacts", path)
        if m and method == "GET":
            name = query.get("name", [None])[0]
            found = [
                {k: v for k, v in a.items() if k != "_repo"}
                for a, _ in self.artifacts.values()
                if a["_repo"] == m.group(1)
                and a["workflow_run"]["id"] == int(m.group(2))
                and name in (None, a["name"])
            ]
            status, headers, chunk = self._page(found, query, path)
            return status, headers, {"total_count": len(found), "artifacts": chunk}

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/actions/artifacts/(\d+)/zip", path)
        if m and method == "GET":
            artifact = self.artifacts.get(int(m.group(2)))
            if artifact is None or artifact[0]["_repo"] != m.group(1):
                return 404, {}, {"message": "Not Found", "documentation_url": DOCS}
            return 302, {"location": f"{self.base_url}/_fake/blobs/{m.group(2)}"}, b""
        return 404, {}, {"message": "Not Found", "documentation_url": DOCS}

    def _list(
        self, repo: str, number: int, query: dict[str, list[str]], path: str
    ) -> tuple[int, dict[str, str], Any]:
        return self._page(self.comments.get((repo, number), []), query, path)

    def _page(
        self, items: list[dict[str, Any]], query: dict[str, list[str]], path: str
    ) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
        per_page = min(int(query.get("per_page", ["30"])[0]), 100, self.page_cap)
        page = int(query.get("page", ["1"])[0])
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        if page < last:
            links.append(_link(self.base_url + path, per_page, page + 1, "next"))
            links.append(_link(self.base_url + path, per_page, last, "last"))
        if page > 1:
            links.append(_link(self.base_url + path, per_page, 1, "first"))
            links.append(_link(self.base_url + path, per_page, page - 1, "prev"))
        return 200, ({"link": ", ".join(links)} if links else {}), chunk


def _link(url: str, per_page: int, page: int, rel: str) -> str:
    return f'<{url}?{urlencode({"per_page": per_page, "page": page})}>; rel="{rel}"'


def _forbidden() -> dict[str, str]:
    return {
        "message": "Resource not accessible by integration",
        "documentation_url": f"{DOCS}/issues/comments#create-an-issue-comment",
    }


def _body_problem(body: Any, limit: int) -> dict[str, Any] | None:
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return {
            "message": 'Invalid request.\n\n"body" wasn\'t supplied.',
            "documentation_url": DOCS,
        }
    if len(body["body"]) > limit:
        return {
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": f"body is too long (maximum is {MAX_BODY} characters)",
                }
            ],
            "documentation_url": f"{DOCS}/issues/comments#create-an-issue-comment",
        }
    return None


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            query = parse_qs(split.query)
            auth = self.headers.get("authorization")
            if split.path != "/_fake/state":
                fake.requests.append(
                    Recorded(
                        self.command,
                        split.path,
                        query,
                        auth,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
            status, headers, payload = fake.handle(self.command, split.path, query, auth, body)
            raw = isinstance(payload, bytes)
            data = payload if raw else json.dumps(payload).encode()
            self.send_response(status)
            if not raw:
                self.send_header("content-type", "application/json; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-github-api-version-selected", "2022-11-28")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

    return Handler


@contextmanager
def serve(fake: FakeGitHub | None = None, port: int = 0) -> Iterator[FakeGitHub]:
    fake = fake or FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(fake))
    server.daemon_threads = True
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, help="write the chosen port here")
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN:LOGIN_OR_bot:write|read",
        help="e.g. ghs_abc:bot:write (an installation token acting as github-actions[bot])",
    )
    parser.add_argument(
        "--commit-pulls", action="append", default=[], metavar="SHA=NUMBER[,NUMBER]"
    )
    parser.add_argument("--repository", default="octo/calc")
    args = parser.parse_args()
    fake = FakeGitHub()
    for spec in args.token:
        token, who, access = spec.split(":")
        kind = "bot" if who == "bot" else "user"
        fake.tokens[token] = Token(
            "github-actions[bot]" if who == "bot" else who, kind, access == "write"
        )
    for spec in args.commit_pulls:
        sha, _, numbers = spec.partition("=")
        fake.commit_pulls[sha] = [
            {"number": int(n), "state": "open", "base": {"repo": {"full_name": args.repository}}}
            for n in numbers.split(",")
        ]
    with serve(fake, args.port) as running:
        port = running.base_url.rsplit(":", 1)[1]
        if args.port_file:
            args.port_file.write_text(port)
        print(f"fake GitHub API on {running.base_url}", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()


# ------------------------------------------------------------- the runner's side


def _unescape(text: str, prop: bool = False) -> str:
    if prop:
        text = text.replace("%3A", ":").replace("%2C", ",")
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


@dataclass(frozen=True)
class Command:
    name: str
    properties: dict[str, str]
    message: str


def runner_commands(log: str) -> list[Command]:
    """The workflow commands the GitHub runner would act on in a step's output.

    As the runner does: lines split at ``\\r``, ``\\n`` or ``\\r\\n``; a line is a
    command when it starts with ``::`` after leading whitespace; between
    ``::stop-commands::TOKEN`` and ``::TOKEN::`` nothing is a command.
    """
    commands: list[Command] = []
    stopped: str | None = None
    for raw in re.split(r"\r\n|\r|\n", log):
        line = raw.lstrip()
        if not line.startswith("::"):
            continue
        end = line.find("::", 2)
        if end < 0:
            continue
        head, data = line[2:end], line[end + 2 :]
        name, _, props_text = head.partition(" ")
        if stopped is not None:
            if name == stopped and not props_text:
                stopped = None
            continue
        if name == "stop-commands":
            stopped = data
            continue
        props = {}
        for pair in props_text.split(","):
            key, sep, value = pair.partition("=")
            if sep:
                props[key.strip()] = _unescape(value, prop=True)
        commands.append(Command(name, props, _unescape(data)))
    return commands


def parse_output_file(text: str) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` as the runner reads it (``name=value`` and heredoc forms)."""
    outputs: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"output {name!r}: delimiter {delimiter!r} never closed")
            i += 1
            outputs[name] = "\n".join(value)
        else:
            name, _, single = line.partition("=")
            outputs[name] = single
    return outputs
