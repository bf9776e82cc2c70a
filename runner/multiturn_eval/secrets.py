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
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

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
        return self._sub(REDACTED, text)

    def keeping_numbers(self, text: str) -> str:
        """``self(text)`` for a report rendered from data that went through
        :func:`redacted_model`: a match made only of number characters (``12345678``,
        ``-1.5e3``) is left as it is.

        Such a match can only be one of the runner's own typed numbers there (a
        duration, a count, a cost: free-form numbers holding a secret are already
        ``"***"``, and so is every string holding one), and ``***`` in its place
        would make the file unreadable (``"duration_ms": ***.5``, JUnit
        ``time="***"``, the HTML report's embedded JSON). A duration or a count
        whose digits happen to spell a numeric secret is not the secret: it came
        from the runner's clock or the model's usage.
        """
        return self._sub(_keep_numbers, text)

    def _sub(self, replace: str | Callable[[re.Match[str]], str], text: str) -> str:
        if self._pattern is None:
            return text
        text = self._pattern.sub(replace, text)
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


_NUMBER = re.compile(r"[-+.0-9eE]+")


def _keep_numbers(match: re.Match[str]) -> str:
    text = match.group()
    return text if _NUMBER.fullmatch(text) else REDACTED


#: a JSON path: object keys and list indexes, from the top
JSONPath = tuple[str | int, ...]


def redact_values(value: Any, redact: Redactor) -> tuple[Any, dict[JSONPath, Any]]:
    """``value`` (parsed JSON) redacted structurally, and what was replaced where.

    Strings and object keys are redacted as :func:`redact_json` does; a number
    whose JSON text holds a secret (an account number or a numeric token in a
    tool's arguments or result) becomes the string ``"***"``: a number cannot be
    redacted in part. The second value maps the path of every replaced string or
    number (keys as they are after redaction) to its original value, and the
    path of every renamed key to ``Renamed(its original name)``.
    """
    replaced: dict[JSONPath, Any] = {}

    def walk(node: Any, path: JSONPath) -> Any:
        if isinstance(node, str):
            clean = redact(node)
            if clean != node:
                replaced[path] = node
            return clean
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, int | float):
            if any(redact(form) != form for form in _number_forms(node)):
                replaced[path] = node
                return REDACTED
            return node
        if isinstance(node, dict):
            out = {}
            for key, item in node.items():
                clean_key = redact(key)
                if clean_key != key:
                    replaced[(*path, clean_key)] = Renamed(key)
                out[clean_key] = walk(item, (*path, clean_key))
            return out
        if isinstance(node, list):
            return [walk(item, (*path, i)) for i, item in enumerate(node)]
        return node

    return walk(value, ()), replaced


class Renamed(str):
    """The original name of an object key :func:`redact_values` redacted."""

    __slots__ = ()


def _number_forms(number: int | float) -> set[str]:
    """The texts a report may write ``number`` as (Python's ``json``: ``1.5e-07``; pydantic's:
    ``1.5e-7``)."""
    return {json.dumps(number), to_json(number).decode()}


M = TypeVar("M", bound=BaseModel)

#: how many times :func:`redacted_model` puts typed values back and validates again
_RESTORE_PASSES = 8


def redacted_model(model_type: type[M], text: str, redact: Redactor) -> tuple[str, M | None]:
    """(``text`` with every secret replaced, the ``model_type`` it reads as).

    ``text`` is the JSON of a ``model_type`` (a test case's result, a report's
    run and summary). ``(text, None)`` when it holds no secret: the common case
    costs one pass of the pattern, nothing is parsed.

    When the text's redaction still reads as the model, that. When a secret
    matched inside JSON syntax (a numeric secret inside a number:
    ``"account": ***``), the parsed value is redacted by :func:`redact_values`
    instead, and a value the model then refuses is one of its own typed fields
    (a duration, a count, a score, a literal): that one is put back as it was
    (see :meth:`Redactor.keeping_numbers` for why that is no leak), while
    free-form values (tool arguments and results, a metric's details) keep
    their ``"***"``.

    A key the model refuses (a secret spelling one of its own field names, such
    as ``passed``) gets its name back the same way. Should the model still refuse
    the value (two keys of one object redacted to the same name), the text is
    returned unredacted with its model: the output pass over every report file
    is then the only redaction.
    """
    clean = redact(text)
    if clean == text:
        return text, None
    try:
        return clean, model_type.model_validate_json(clean)
    except ValueError:
        pass
    data, replaced = redact_values(json.loads(text), redact)
    for _ in range(_RESTORE_PASSES):
        clean = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        try:
            return clean, model_type.model_validate_json(clean)
        except ValidationError as exc:
            if not _put_back(data, replaced, exc):
                break
    return text, model_type.model_validate_json(text)


def _put_back(data: Any, replaced: dict[JSONPath, Any], error: ValidationError) -> bool:
    """Put back the replaced values (and key names) the model refused; whether there was any.

    A key the model refuses (``extra_forbidden`` at its redacted name: one of the
    model's own field names held the secret) gets its name back, and the values
    recorded under it move with it.
    """
    put = False
    for detail in error.errors():
        loc = detail["loc"]
        for end in range(len(loc), 0, -1):  # a union adds its members' names after the path
            path = tuple(loc[:end])
            if path not in replaced:
                continue
            *parents, last = path
            node = data
            for step in parents:
                node = node[step]
            original = replaced.pop(path)
            if isinstance(original, Renamed):
                node[str(original)] = node.pop(last)
                moved = (*parents, str(original))
                for inner in [p for p in replaced if p[: len(path)] == path]:
                    replaced[(*moved, *inner[len(path) :])] = replaced.pop(inner)
            else:
                node[last] = original
            put = True
            break
    return put
