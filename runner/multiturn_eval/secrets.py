"""Which values are secret, and the one :class:`Redactor` that keeps them out of every output.

One rule, used by the loader (``${VAR}`` substitution), the ``http`` backend
(header values), the model backends (API keys from the environment) and the
GitHub Action (its inputs and environment):

- a value put into ``agent.api_key`` or ``agent.headers`` from ``${VAR}``, a
  value of an environment variable whose *name* looks secret
  (:data:`SECRET_NAME`: ``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
  ``*CREDENTIAL*``, ``*AUTH*``, ``*COOKIE*``), a header value whose name looks
  secret, the action's key and token inputs, and the API key a backend uses;
- at least :data:`MIN_SECRET_LENGTH` characters long (shorter values would
  blank out ordinary words in the reports).

Where nothing else knows a value is secret (a key written literally into a
suite), nothing can redact it: keep keys in the environment.

:class:`Redactor` replaces a secret in every form a report can hold it:
as it is, JSON-escaped (at any depth of JSON-in-JSON, ASCII-only or not), HTML
escaped (``&amp;``, ``&#39;``, ``&#x27;`` ...), escaped by the Markdown
renderer (``&#95;`` for ``_`` ...), URL-encoded (``%2F``, ``+``) and as Python's
``repr`` writes it (``\\'`` and ``\\\\``: a grader's reason quotes the reply with
``!r``). A secret that was *cut* before it could be redacted (a reason or an
error message shortened to ``…`` or ``...`` while the run went on) is
replaced too: the start of any form, at least :data:`MIN_SECRET_LENGTH`
characters long, right before a cut mark.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from .reports.escape import md_text

REDACTED = "***"

#: environment variable or header names whose values are secrets
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.IGNORECASE
)
#: shortest value treated as a secret (shorter ones would blank out ordinary words)
MIN_SECRET_LENGTH = 6
#: how deep JSON-in-JSON escaping is followed (a report inside a tool result inside a report)
JSON_DEPTH = 4


def is_secret_name(name: str) -> bool:
    """Whether a variable or header called ``name`` holds a secret."""
    return SECRET_NAME.search(name) is not None


def is_secret_value(value: str | None) -> bool:
    """Whether ``value`` is long enough to be redacted."""
    return value is not None and len(value.strip()) >= MIN_SECRET_LENGTH


def secrets_in(values: Mapping[str, str]) -> list[str]:
    """The values of the secret-looking names of ``values`` (environment, headers)."""
    return [
        value.strip()
        for name, value in values.items()
        if is_secret_name(name) and is_secret_value(value)
    ]


def _json_forms(text: str) -> set[str]:
    forms: set[str] = set()
    current = {text}
    for _ in range(JSON_DEPTH):
        escaped = set()
        for value in current:
            for ascii_only in (False, True):
                escaped.add(json.dumps(value, ensure_ascii=ascii_only)[1:-1])
        escaped -= forms | current
        if not escaped:
            break
        forms |= escaped
        current = escaped
    return forms


def _repr_forms(text: str) -> set[str]:
    """``text`` as it appears inside ``repr()`` of a longer string, whichever quotes it chose."""
    forms = {repr(text)[1:-1], repr(text + '"')[1:-2]}  # double quotes / single, ' escaped
    if '"' not in text:
        forms.add(repr("'" + text)[2:-1])  # inside double quotes: ' not escaped
    return forms


def encoded_forms(secret: str) -> set[str]:
    """Every form of ``secret`` a report, log or comment may contain."""
    base = {secret}
    base.add(html.escape(secret, quote=True))
    base.add(html.escape(secret, quote=False))
    base.add(html.escape(secret, quote=True).replace("&#x27;", "&#39;"))
    base.add(md_text(secret))
    base.add(urllib.parse.quote(secret, safe=""))
    base.add(urllib.parse.quote(secret))
    base.add(urllib.parse.quote_plus(secret))
    forms = set(base)
    for form in base:
        forms |= _json_forms(form)
    # a reason quoting the reply with !r (the reply may hold the secret JSON-escaped), then
    # written into report.json: repr of every form so far, and their JSON forms
    for form in list(forms):
        for quoted in _repr_forms(form) - forms:
            forms.add(quoted)
            forms |= _json_forms(quoted)
    return {f for f in forms if f}


class Redactor:
    """Replaces every known secret, in every encoding of :func:`encoded_forms`, with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # shorter values are left alone, whoever calls them secret: ``ANTHROPIC_API_KEY=x``
        # (a local proxy) must not turn every "x" of every report into "***"
        self.secrets: frozenset[str] = frozenset(s for s in secrets if is_secret_value(s))
        forms: set[str] = set()
        for secret in self.secrets:
            forms |= encoded_forms(secret)
        # one trie-shaped pattern (a secret has dozens of forms sharing their starts): the
        # longest form wins, so a secret containing another is replaced whole
        self._pattern = re.compile(_trie_pattern(forms)) if forms else None
        # forms by their first characters: what is left of a secret cut before it was redacted
        self._by_start: dict[str, list[str]] = {}
        for form in forms:
            if len(form) > MIN_SECRET_LENGTH:
                self._by_start.setdefault(form[:MIN_SECRET_LENGTH], []).append(form)
        self._starts = re.compile(_trie_pattern(set(self._by_start))) if self._by_start else None
        self._longest = max((len(f) for f in forms), default=0)

    @property
    def active(self) -> bool:
        """True when there is any secret to redact."""
        return self._pattern is not None

    def with_secrets(self, more: Iterable[str]) -> Redactor:
        """A redactor for these secrets and ``more``."""
        extra = frozenset(s for s in more if s)
        return self if extra <= self.secrets else Redactor(self.secrets | extra)

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        text = self._pattern.sub(REDACTED, text)
        if self._starts is not None and ("…" in text or "..." in text):
            text = self._cut_secrets(text, self._starts)
        return text

    def _cut_secrets(self, text: str, starts: re.Pattern[str]) -> str:
        """Replace the start of a secret right before a cut mark (``…``, ``...``)."""
        out: list[str] = []
        pos = 0
        for start in starts.finditer(text):
            if start.start() < pos:
                continue
            cut = _CUT_MARK.search(text, start.start(), start.start() + self._longest + 3)
            if cut is None:
                continue
            left = text[start.start() : cut.start()]
            if any(f.startswith(left) for f in self._by_start[start.group()]):
                out += [text[pos : start.start()], REDACTED]
                pos = cut.start()
        out.append(text[pos:])
        return "".join(out)


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words`` (longest first), shaped as their prefix tree."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _emit(trie)


def _emit(node: dict[str, Any]) -> str:
    branches = []
    for ch in sorted(k for k in node if k):
        child = node[ch]
        run = [ch]
        while len(child) == 1 and "" not in child:  # a chain: no branching, no recursion
            (ch, child), *_ = child.items()
            run.append(ch)
        rest = _emit(child) if any(child) or len(child) > 1 else ""
        branches.append(re.escape("".join(run)) + rest)
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word may end here: the longer ones are tried first (greedy ?)
        return f"(?:{body})?"
    return body


_CUT_MARK = re.compile(r"…|\.\.\.")


def redact_json(value: Any, redact: Redactor) -> Any:
    """``value`` (parsed JSON) with every string and object key redacted; the same object
    when the redactor has nothing to redact."""
    if not redact.active:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k): redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, redact) for v in value]
    return value
