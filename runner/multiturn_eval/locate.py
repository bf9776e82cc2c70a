"""Where a problem in a suite file is: field paths and pydantic's errors as located issues.

Every configuration error names the file, the line and the field
(``suite.yaml:41 test_cases[3] ("Single_JKHY") turns[2].expected_tools[0].args.b.regex:
cannot compile: ...``): :class:`Locator` makes one such
:class:`~multiturn_eval.errors.ConfigIssue` from a field path, and
:func:`validation_issues` turns a pydantic ``ValidationError`` into them, each
message in words (an unknown key says what it was meant to be,
:mod:`multiturn_eval.key_hints`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from .errors import ConfigIssue
from .suite import AT_PATH_ERROR, CALLABLE_PATTERN, UNION_TAGS, URL_PATTERN
from .yaml_source import Path_, YamlDocument, format_path


class Locator:
    """Turns field paths into ConfigIssues for one file."""

    def __init__(self, file: str, doc: YamlDocument) -> None:
        self.file = file
        self.doc = doc

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of ``path`` (or of its closest ancestor that has one)."""
        return self.doc.line_of(tuple(path))

    def named(self, path: Sequence[str | int]) -> str:
        """``path`` as a message names it inside another field's message."""
        return format_path(path)

    def written_name(self, index: int) -> str | None:
        """The name test case ``index`` writes, as written (None: none, or not text)."""
        cases = self.doc.data.get("test_cases") if isinstance(self.doc.data, dict) else None
        if isinstance(cases, list) and index < len(cases) and isinstance(cases[index], dict):
            raw = cases[index].get("name")
            return raw if isinstance(raw, str) else None
        return None

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        path = tuple(path)
        test_case = None
        rest: Sequence[str | int] = path
        if len(path) >= 2 and path[0] == "test_cases" and isinstance(path[1], int):
            index = path[1]
            name = self.written_name(index)
            test_case = f"test_cases[{index}]" + (f' ("{name}")' if name else "")
            rest = path[2:]
        return ConfigIssue(
            message=message,
            file=self.file,
            line=self.line_of(path),
            test_case=test_case,
            field=format_path(rest) or None,
        )


class CaseLineLocator(Locator):
    """Locates the fields of the one test case on one line of a JSON Lines file.

    Its paths are the suite's (``("test_cases", index, "turns", 2, ...)``, ``index``
    the case's position in the suite); each is on the case's line of the file. A
    path outside the case (a suite-level evaluation a turn uses) is the suite
    file's: ``outer`` locates it.
    """

    def __init__(self, file: str, line: int, index: int, outer: Locator | None = None) -> None:
        super().__init__(file, YamlDocument(data=None))
        self.line = line
        self.index = index
        self.outer = outer
        self.data: Any = None
        """The line's data once parsed (the case's name labels its errors)."""

    def _inside(self, path: Sequence[str | int]) -> bool:
        return len(path) >= 2 and path[0] == "test_cases" and path[1] == self.index

    def line_of(self, path: Sequence[str | int]) -> int | None:
        if self.outer is not None and not self._inside(path):
            return self.outer.line_of(path)
        return self.line

    def named(self, path: Sequence[str | int]) -> str:
        return f"{format_path(path)}, {self.file}:{self.line}"

    def written_name(self, index: int) -> str | None:
        raw = self.data.get("name") if isinstance(self.data, dict) else None
        return raw if isinstance(raw, str) and index == self.index else None

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        if self.outer is not None and not self._inside(path):
            return self.outer.issue(path, message)
        return super().issue(path, message)


def _clean_loc(loc: Sequence[str | int], data: Any) -> list[str | int]:
    """Drop pydantic's union tags from a location by walking the data alongside it."""
    out: list[str | int] = []
    current = data
    for item in loc:
        present = (isinstance(current, dict) and item in current) or (
            isinstance(current, list) and isinstance(item, int) and 0 <= item < len(current)
        )
        if present:
            out.append(item)
            current = current[item]
        elif isinstance(item, str) and item in UNION_TAGS:
            continue
        else:
            out.append(item)
            current = None
    return out


_PATTERN_WORDS = {
    CALLABLE_PATTERN: "must be of the form module.path:callable (e.g. my_agents.support:make_session)",
    URL_PATTERN: "must start with http:// or https://",
}
"""The patterns of the suite models' string fields, said in words (a regex helps nobody)."""


def _message(error: Mapping[str, Any], key: str | int | None) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        from .key_hints import unknown_key_message

        return unknown_key_message(key, tuple(error["loc"])[:-1])
    if kind == "missing":
        return "required key missing"
    if kind == "union_tag_invalid":
        expected = ctx.get("expected_tags", "")
        key = str(ctx.get("discriminator", "value")).strip("'")
        return f"unknown {key} {ctx.get('tag')!r}; expected one of {expected}"
    if kind == "union_tag_not_found":
        return f"required key {ctx.get('discriminator', '')} missing"
    bounds = {
        "greater_than_equal": ">=",
        "greater_than": ">",
        "less_than_equal": "<=",
        "less_than": "<",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()), "")
        shown = f"{limit:g}" if isinstance(limit, int | float) else limit
        return f"must be {bounds[kind]} {shown}; got {error.get('input')!r}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}; got {error.get('input')!r}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        form = _PATTERN_WORDS.get(pattern, f"must match the pattern {pattern}")
        return f"{form}; got {error.get('input')!r}"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message[:1].lower() + message[1:] if message[:2] != message[:2].upper() else message


_KEY_KINDS = {int: "a number", float: "a number", bool: "a boolean", type(None): "null"}


def validation_issues(
    exc: ValidationError, data: Any, locator: Locator, prefix: Path_ = ()
) -> list[ConfigIssue]:
    """Every error of a suite model's validation of ``data``, located (one issue each).

    Union tags leave the path, :func:`~multiturn_eval.suite.at_path` errors point at
    their sub-field, a misspelt key is reported once (not also as the key it stands
    for, missing), and a non-text mapping key gets the key's own line. ``prefix`` is
    where ``data`` sits in a suite (``("test_cases", 7)`` for a test case validated on
    its own, as a line of a JSON Lines file is).
    """
    issues: list[tuple[Path_, str]] = []
    seen: set[tuple[Path_, str]] = set()
    key_lines: dict[Path_, Path_] = {}
    for error in exc.errors(include_url=False):
        loc = [*prefix, *_clean_loc(error["loc"], data)]
        if prefix:
            error = {**error, "loc": (*prefix, *error["loc"])}
        if error["type"] == "invalid_key" or (loc and loc[-1] == "[key]"):
            # a non-text mapping key: point at the mapping, name the key, take the key's line
            key = error.get("input")
            loc = loc[:-1] if loc[-1] == "[key]" else loc
            parent = tuple(loc[:-1])
            message = (
                f"key {key!r} is {_KEY_KINDS.get(type(key), 'not text')}, "
                f"but keys here must be text; quote it ('{key}':)"
            )
            key_lines[parent] = (*parent, key)
            loc = list(parent)
        elif error["type"] == AT_PATH_ERROR:
            ctx = error.get("ctx") or {}
            loc = [*loc, *ctx.get("path", ())]
            message = str(ctx.get("message", error["msg"]))
        else:
            message = _message(error, loc[-1] if loc else None)
        key = (tuple(loc), message)
        if key not in seen:
            seen.add(key)
            issues.append((tuple(loc), message))
    # a misspelt key also makes the key it stands for "missing": report the typo only
    suggested = {
        (*loc[:-1], m.rsplit("'", 2)[-2])
        for loc, m in issues
        if m.startswith("unknown key; did you mean")
    }
    out = []
    for where, m in issues:
        if m == "required key missing" and where in suggested:
            continue
        issue = locator.issue(where, m)
        if m.startswith("key ") and where in key_lines:
            issue = dataclasses.replace(issue, line=locator.line_of(key_lines[where]))
        out.append(issue)
    return out
