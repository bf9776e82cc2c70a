"""A small GitHub REST client (stdlib ``urllib``: no extra dependency).

It talks to ``$GITHUB_API_URL`` (GitHub Enterprise Server included), follows
``Link: <...>; rel="next"`` pagination only within that API, and handles
failures with bounded waits:

- rate limits (HTTP 403 or 429 with ``x-ratelimit-remaining: 0`` or a
  ``retry-after`` header): wait as told, if that is at most ``max_wait``
  seconds, for at most ``max_wait_total`` seconds over the client's life;
- 5xx answers and dropped connections: up to two retries, 1 s then 2 s apart.

Everything else is raised as :class:`GitHubError` with the status and GitHub's
own message (e.g. "Resource not accessible by integration").
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from email.message import Message
from typing import Any

from .._version import __version__
from ..errors import GitHubError, RateLimited

_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def _message_of(body: bytes) -> str:
    try:
        data = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return body.decode("utf-8", errors="replace")[:300] or "(no message)"
    if not isinstance(data, dict):
        return str(data)[:300]
    message = str(data.get("message", ""))
    details = [
        str(e.get("message") or e.get("code"))
        for e in data.get("errors") or []
        if isinstance(e, dict)
    ]
    return "; ".join(p for p in [message, *details] if p) or "(no message)"


def _lower(headers: Message | Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        max_wait: float = 60.0,
        max_wait_total: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_wait = max_wait
        self.waited = 0.0
        self.max_wait_total = max_wait_total
        self.sleep = sleep
        self.clock = clock

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.api_url + path

    def _open(self, method: str, url: str, body: Any | None) -> tuple[int, dict[str, str], bytes]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", f"multiturn-eval/{__version__}")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, _lower(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, _lower(exc.headers), exc.read()

    def _rate_limit_wait(
        self, status: int, headers: Mapping[str, str], payload: bytes
    ) -> float | None:
        """Seconds to wait before retrying, or None when this is not a rate limit."""
        if status not in (403, 429):
            return None
        retry_after = headers.get("retry-after", "")
        if retry_after.strip().isdigit():
            return float(retry_after)
        if headers.get("x-ratelimit-remaining") == "0":
            reset = headers.get("x-ratelimit-reset", "")
            if reset.strip().isdigit():
                return max(float(reset) - self.clock(), 0.0) + 1.0
            return 60.0
        if status == 429 or "rate limit" in _message_of(payload).lower():
            return 60.0  # GitHub: "wait for at least one minute before retrying"
        return None

    def request(
        self, method: str, path: str, body: Any | None = None
    ) -> tuple[Any, dict[str, str]]:
        """(decoded JSON, lower-cased headers) of a 2xx answer; GitHubError otherwise."""
        url = self.url(path)
        if not url.startswith(self.api_url + "/"):
            raise GitHubError(0, f"refusing to send the token outside {self.api_url}: {url}")
        transient = 0
        while True:
            try:
                status, headers, payload = self._open(method, url, body)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if transient >= 2:
                    reason = getattr(exc, "reason", exc)
                    raise GitHubError(0, f"cannot reach {self.api_url}: {reason}") from None
                transient += 1
                self.sleep(float(transient))
                continue
            if 200 <= status < 300:
                return (json.loads(payload) if payload.strip() else None), headers
            wait = self._rate_limit_wait(status, headers, payload)
            if wait is not None:
                if wait > self.max_wait or self.waited + wait > self.max_wait_total:
                    raise RateLimited(
                        status,
                        f"rate limited by GitHub; retrying would mean waiting {wait:.0f} s "
                        f"(limit {self.max_wait:.0f} s)",
                        headers,
                    )
                self.waited += wait
                self.sleep(wait)
                continue
            if status >= 500 and transient < 2:
                transient += 1
                self.sleep(float(transient))
                continue
            raise GitHubError(status, _message_of(payload), headers)

    def paginate(self, path: str) -> Iterator[Any]:
        """Every item of a list endpoint, page after page (``Link`` rel="next")."""
        url: str | None = self.url(path)
        while url is not None:
            items, headers = self.request("GET", url)
            if not isinstance(items, list):
                raise GitHubError(0, f"expected a list from {url}")
            yield from items
            match = _NEXT.search(headers.get("link", ""))
            url = match.group(1) if match else None
