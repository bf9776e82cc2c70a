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
renderer (``&#95;`` for ``_`` ...) and URL-encoded (``%2F``, ``+``).
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping

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


def _markdown_form(text: str) -> str:
    try:
        from .reports.markdown import md_text
    except ImportError:  # pragma: no cover - the renderer ships with the package
        return text
    return md_text(text)


def encoded_forms(secret: str) -> set[str]:
    """Every form of ``secret`` a report, log or comment may contain."""
    base = {secret}
    base.add(html.escape(secret, quote=True))
    base.add(html.escape(secret, quote=False))
    base.add(html.escape(secret, quote=True).replace("&#x27;", "&#39;"))
    base.add(_markdown_form(secret))
    base.add(urllib.parse.quote(secret, safe=""))
    base.add(urllib.parse.quote(secret))
    base.add(urllib.parse.quote_plus(secret))
    forms = set(base)
    for form in base:
        forms |= _json_forms(form)
    return {f for f in forms if f}


class Redactor:
    """Replaces every known secret, in every encoding of :func:`encoded_forms`, with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets: frozenset[str] = frozenset(s for s in secrets if s)
        forms: set[str] = set()
        for secret in self.secrets:
            forms |= encoded_forms(secret)
        # longest first, so a secret containing another is replaced whole
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
            if forms
            else None
        )

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
        return self._pattern.sub(REDACTED, text)
