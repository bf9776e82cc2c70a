"""An action manifest read the way GitHub's runner reads it, for the tests.

The runner does not read ``action.yml`` as plain YAML: it loads it as a
*template* against its own schema, ``src/Runner.Worker/action_yaml.json`` in
actions/runner (vendored here as ``tests/data/actions-runner/action_yaml.json``,
MIT licence beside it, from commit 258d6c857db3519913f7deb6004b60172f8043ae;
the file itself last changed in fee24199, 2022). Its reader,
``src/Sdk/DTObjectTemplating/ObjectTemplating/TemplateReader.cs``, splits
*every* string -- mapping keys included -- into literal text and ``${{ }}``
expressions (``ParseScalar``), parses each expression against the contexts the
schema allows at that place (``ExpressionToken.IsValidExpression``), and fails
the whole action at "Set up job" when one does not fit: ``Unrecognized
named-value: 'strategy'`` for a context not allowed there,
``Unrecognized function`` likewise, ``A template expression is not allowed in
this context`` where the schema allows no context at all.

A place's contexts are its definition's ``context`` list joined with its
parents' (``DefinitionInfo``); functions appear in the list as ``name(min,max)``;
the expression language's own functions (``ExpressionConstants``: ``contains``,
``startsWith``, ``format``, ...) are always callable. One exception: a scalar
that is nothing but ``${{ 'a string literal' }}`` is read as that literal, so
it is allowed anywhere (the documented way to write ``${{`` as text).

This module follows those rules closely enough to say where an expression is
allowed, which named-values (contexts) and functions it uses and with how many
arguments; it does not evaluate anything. It also checks the manifest's shape
as the reader does: unknown keys where the schema lists the keys (``runs`` of a
Docker action, ``outputs.<id>``), ``one-of`` resolved by the keys present,
required keys, duplicate keys (case-insensitive), and scalar types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "actions-runner" / "action_yaml.json"

#: ExpressionConstants.WellKnownFunctions (name, lower case -> min and max arguments)
WELL_KNOWN_FUNCTIONS = {
    "case": (3, 255),
    "contains": (2, 2),
    "endswith": (2, 2),
    "format": (1, 255),
    "join": (1, 2),
    "startswith": (2, 2),
    "tojson": (1, 1),
    "fromjson": (1, 1),
}

#: TemplateSchema's built-in definitions
_BUILTIN: dict[str, dict[str, Any]] = {
    "null": {"null": {}},
    "boolean": {"boolean": {}},
    "number": {"number": {}},
    "string": {"string": {}},
    "sequence": {"sequence": {"item-type": "any"}},
    "mapping": {"mapping": {"loose-key-type": "string", "loose-value-type": "any"}},
    "any": {"one-of": ["null", "boolean", "number", "string", "sequence", "mapping"]},
}
_KINDS = ("null", "boolean", "number", "string", "sequence", "mapping")
_YAML_KINDS = {
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:bool": "boolean",
    "tag:yaml.org,2002:int": "number",
    "tag:yaml.org,2002:float": "number",
}
_LITERAL_KEYWORDS = {"null", "true", "false", "NaN", "Infinity"}
_BOUNDARY = set("([)],.!><=&|")


def load_schema(path: Path = SCHEMA_FILE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8-sig"))
    return data


@dataclass(frozen=True)
class Problem:
    """What the runner would refuse, where: the key path and the line (1-based) of the value."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, {self.path}: {self.message}"


@dataclass(frozen=True)
class Expression:
    """One ``${{ }}``: its text, the named-values it reads and the functions it calls."""

    text: str
    named_values: tuple[str, ...]
    functions: tuple[tuple[str, int], ...]
    """(name, number of arguments)"""
    syntax_error: str | None = None


def split_template(raw: str) -> tuple[list[tuple[bool, str]], str | None]:
    """``raw`` as ParseScalar splits it: (is_expression, text) segments, or an error."""
    segments: list[tuple[bool, str]] = []
    start = raw.find("${{")
    i = 0
    while i < len(raw):
        if i == start:
            end = -1
            in_string = False
            i += 3
            while i < len(raw):
                if raw[i] == "'":
                    in_string = not in_string  # '' inside a string flips twice: still inside
                elif not in_string and raw[i] == "}" and raw[i - 1] == "}":
                    end = i
                    i += 1
                    break
                i += 1
            if end < start:
                return segments, "the expression is not closed: '${{' without '}}'"
            segments.append((True, raw[start + 3 : end - 1]))
            start = raw.find("${{", i)
        elif start < 0:
            segments.append((False, raw[i:]))
            break
        else:
            segments.append((False, raw[i:start]))
            i = start
    return segments, None


def _legal_keyword(word: str) -> bool:
    if not word or not (word[0].isascii() and (word[0].isalpha() or word[0] == "_")):
        return False
    return all(c.isascii() and (c.isalnum() or c in "_-") for c in word[1:])


def analyse(text: str) -> Expression:
    """The named-values and function calls of one expression (LexicalAnalyzer's tokens)."""
    named: list[str] = []
    calls: list[tuple[str, int]] = []
    # open brackets: [kind, function name, separators seen, any token inside]
    stack: list[list[Any]] = []
    last: str | None = None
    pending = ""  # the function whose "(" comes next
    i = 0

    def fail(message: str) -> Expression:
        return Expression(text, tuple(named), tuple(calls), message)

    def token(kind: str) -> None:
        nonlocal last
        if stack and kind not in ("end-params", "end-group", "end-index"):
            stack[-1][3] = True
        last = kind

    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "(":
            if last == "function":
                stack.append(["params", pending, 0, False])
            else:
                token("group")
                stack.append(["group", None, 0, False])
            last = "start"
            i += 1
        elif c == "[":
            token("index")
            stack.append(["index", None, 0, False])
            last = "start"
            i += 1
        elif c in ")]":
            if not stack:
                return fail(f"unexpected {c!r}")
            kind, name, separators, inside = stack.pop()
            if (c == "]") != (kind == "index"):
                return fail(f"unexpected {c!r}")
            if kind == "params":
                calls.append((name, separators + 1 if inside else 0))
            token("end")
            i += 1
        elif c == ",":
            if not stack or stack[-1][0] != "params":
                return fail("unexpected ','")
            stack[-1][2] += 1
            last = "separator"
            i += 1
        elif c == "'":
            j = i + 1
            while True:
                j = text.find("'", j)
                if j < 0:
                    return fail("unclosed string literal")
                if text[j + 1 : j + 2] == "'":
                    j += 2
                    continue
                break
            token("literal")
            i = j + 1
        elif c in "!><=&|":
            two = text[i : i + 2]
            if two in ("!=", ">=", "<=", "==", "&&", "||"):
                i += 2
            elif c in "!><":
                i += 1
            else:
                return fail(f"unexpected operator {two!r}")
            token("operator")
        elif c == "." and last not in (None, "separator", "start", "operator"):
            last = "dereference"
            i += 1
        elif c == "*":
            token("literal")
            i += 1
        else:
            j = i + 1
            number = c.isdigit() or c in "+-."
            while (
                j < len(text)
                and not text[j].isspace()
                and (text[j] not in _BOUNDARY or (number and text[j] == "."))
            ):
                j += 1
            word = text[i:j]
            i = j
            if number:
                token("literal")
                continue
            if not _legal_keyword(word):
                return fail(f"unexpected symbol {word!r}")
            if last == "dereference":
                token("property")
            elif word in _LITERAL_KEYWORDS:
                token("literal")
            elif text[j:].lstrip().startswith("("):
                token("function")
                pending = word
            else:
                named.append(word)
                token("named-value")
    if stack:
        return fail("unclosed bracket")
    return Expression(text, tuple(named), tuple(calls))


class TemplateReader:
    """Reads a manifest against the runner's schema, collecting every :class:`Problem`."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.definitions: dict[str, dict[str, Any]] = {**_BUILTIN, **schema["definitions"]}
        self.problems: list[Problem] = []

    def read(self, text: str, root: str = "action-root") -> list[Problem]:
        self.problems = []
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            self.problems.append(Problem("(file)", 1, "the file is empty"))
        else:
            self.value(node, root, (), "")
        return self.problems

    # ----------------------------------------------------------------- schema

    def kinds(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        """The structure definitions behind ``name`` (``one-of`` flattened)."""
        definition = self.definitions[name]
        if "one-of" in definition:
            return [kind for member in definition["one-of"] for kind in self.kinds(member)]
        return [(kind, definition[kind]) for kind in _KINDS if kind in definition]

    def context(self, name: str, parent: tuple[str, ...]) -> tuple[str, ...]:
        own = self.definitions[name].get("context") or []
        return tuple(dict.fromkeys([*parent, *own])) if own else parent

    # ---------------------------------------------------------------- reading

    def problem(self, node: yaml.Node, path: str, message: str) -> None:
        self.problems.append(Problem(path or "(root)", node.start_mark.line + 1, message))

    def template(self, node: yaml.ScalarNode, context: tuple[str, ...], path: str) -> bool:
        """Check the expressions of a string; True when it is an expression (not a literal)."""
        raw = str(node.value)
        if "${{" not in raw:
            return False
        segments, error = split_template(raw)
        if error is not None:
            self.problem(node, path, error)
            return True
        named = {c.lower() for c in context if "(" not in c}
        functions: dict[str, tuple[int, int]] = dict(WELL_KNOWN_FUNCTIONS)
        for item in context:
            if "(" in item:
                fname, _, arity = item.partition("(")
                least, _, most = arity.rstrip(")").partition(",")
                functions[fname.lower()] = (int(least), 255 if most == "MAX" else int(most))
        allowed = ", ".join(context) or "none (plain text only)"
        before = len(self.problems)
        for is_expression, text in segments:
            if not is_expression:
                continue
            shown = "${{" + text + "}}"
            if not text.strip():
                self.problem(node, path, f"{shown}: an empty expression")
                continue
            expression = analyse(text)
            if expression.syntax_error:
                self.problem(node, path, f"{shown}: {expression.syntax_error}")
            for value in expression.named_values:
                if value.lower() not in named:
                    self.problem(
                        node,
                        path,
                        f"{shown}: unrecognized named-value {value!r} "
                        f"(contexts allowed here: {allowed})",
                    )
            for fname, count in expression.functions:
                if fname.lower() not in functions:
                    self.problem(
                        node,
                        path,
                        f"{shown}: unrecognized function {fname!r} "
                        f"(contexts allowed here: {allowed})",
                    )
                    continue
                low, high = functions[fname.lower()]
                if not low <= count <= high:
                    self.problem(
                        node, path, f"{shown}: {fname}() takes {low}-{high} arguments, not {count}"
                    )
        if len(self.problems) > before:
            return True  # the runner stops at the first fault of a string
        if len(segments) == 1 and _is_string_literal(segments[0][1]):
            return False  # ${{ 'text' }} alone is the literal text
        if not context:
            self.problem(
                node,
                path,
                "a template expression is not allowed here (the runner allows ${{ }} only in "
                "inputs.<id>.default and a Docker action's runs.args and runs.env)",
            )
        return True

    def value(self, node: yaml.Node, name: str, parent: tuple[str, ...], path: str) -> None:
        context = self.context(name, parent)
        kinds = self.kinds(name)
        if isinstance(node, yaml.ScalarNode):
            self.scalar(node, kinds, context, path)
        elif isinstance(node, yaml.SequenceNode):
            sequences = [body for kind, body in kinds if kind == "sequence"]
            if not sequences:
                self.problem(node, path, "a sequence is not allowed here")
                return
            for index, item in enumerate(node.value):
                self.value(item, sequences[0]["item-type"], context, f"{path}[{index}]")
        elif isinstance(node, yaml.MappingNode):
            mappings = [body for kind, body in kinds if kind == "mapping"]
            if not mappings:
                self.problem(node, path, "a mapping is not allowed here")
                return
            self.mapping(node, mappings, context, path)

    def scalar(
        self,
        node: yaml.ScalarNode,
        kinds: list[tuple[str, dict[str, Any]]],
        context: tuple[str, ...],
        path: str,
    ) -> None:
        yaml_kind = "string" if node.style else _YAML_KINDS.get(node.tag, "string")
        if yaml_kind == "string" and self.template(node, context, path):
            return
        if any(kind == yaml_kind for kind, _ in kinds) and yaml_kind != "string":
            return
        text = "" if yaml_kind == "null" else str(node.value)
        for kind, body in kinds:  # a non-string scalar is converted where a string fits
            if kind == "string" and (text or not body.get("require-non-empty")):
                return
        wanted = "/".join(sorted({kind for kind, _ in kinds}))
        self.problem(node, path, f"unexpected value {text!r} (expected {wanted})")

    def mapping(
        self,
        node: yaml.MappingNode,
        mappings: list[dict[str, Any]],
        context: tuple[str, ...],
        path: str,
    ) -> None:
        candidates = list(mappings)
        loose_key: str | None = candidates[0].get("loose-key-type")
        loose_value: str = candidates[0].get("loose-value-type") or "any"
        well_known = len(candidates) > 1 or bool(candidates[0].get("properties")) or not loose_key
        seen: set[str] = set()
        expression_key = False
        for key_node, value_node in node.value:
            key = str(key_node.value)
            where = f"{path}.{key}" if path else key
            if isinstance(key_node, yaml.ScalarNode) and self.template(
                key_node, context, f"{where} (key)"
            ):
                expression_key = True
                if context:
                    self.value(value_node, "any" if well_known else loose_value, context, where)
                continue
            if key.lower() in seen:
                self.problem(key_node, where, f"{key!r} is already defined")
                continue
            seen.add(key.lower())
            if well_known:
                value_type = _match_key(candidates, key)
                if value_type is not None:
                    self.value(value_node, value_type, context, where)
                    continue
            if loose_key:
                if not key and self.definitions[loose_key].get("string", {}).get(
                    "require-non-empty"
                ):
                    self.problem(key_node, where, "an empty key")
                self.value(value_node, loose_value, context, where)
                continue
            known = sorted({p for m in candidates for p in m.get("properties", {})})
            self.problem(key_node, where, f"unexpected key {key!r} (known: {', '.join(known)})")
        if len(candidates) > 1:
            self.problem(node, path, "cannot tell which of its kinds this is from its keys")
        elif not expression_key:
            for prop, spec in candidates[0].get("properties", {}).items():
                if isinstance(spec, dict) and spec.get("required") and prop.lower() not in seen:
                    self.problem(node, path, f"required key {prop!r} is missing")


def _match_key(candidates: list[dict[str, Any]], key: str) -> str | None:
    """TemplateSchema.TryMatchKey: the key's type; narrows a one-of to the kinds that have it."""
    found = [m for m in candidates if key in m.get("properties", {})]
    if not found:
        return None
    candidates[:] = found
    spec = found[0]["properties"][key]
    return str(spec["type"] if isinstance(spec, dict) else spec)


def _is_string_literal(text: str) -> bool:
    """TemplateReader.IsExpressionString: the expression is one quoted string and nothing else."""
    trimmed = text.strip()
    if len(trimmed) < 2 or trimmed[0] != "'" or trimmed[-1] != "'":
        return False
    inner = trimmed[1:-1]
    return "'" not in inner.replace("''", "")


def check_manifest(text: str, schema: Mapping[str, Any] | None = None) -> list[Problem]:
    """Every problem the runner would find loading ``text`` as an action manifest."""
    return TemplateReader(schema or load_schema()).read(text)
