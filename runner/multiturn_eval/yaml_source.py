"""YAML text -> plain data plus a map from field path to line number (pure).

Booleans follow YAML 1.2 (only ``true``/``false``), so ``ground_truth: yes``
stays the text "yes" instead of becoming ``True`` as in YAML 1.1, and dates are
not recognised (``2024-10-21`` stays text). Duplicate keys
in one mapping are errors (the second would silently win otherwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import YamlSyntaxError

Path_ = tuple[Any, ...]
"""A field path: mapping keys (usually str) and list indexes."""

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """SafeLoader with YAML 1.2 booleans."""


# YAML 1.2 core schema: no yes/no/on/off booleans and no implicit timestamps
# (an unquoted 2024-10-21 stays the text "2024-10-21", as an api_version or an answer)
_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp"}
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


@dataclass
class YamlDocument:
    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    """1-based line of each value; for mapping keys, the line of the key."""

    def line_of(self, path: Path_) -> int | None:
        """The line of ``path``, or of its closest ancestor that exists."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


def parse_yaml(text: str) -> YamlDocument:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise YamlSyntaxError(message or str(exc), mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), None) from None
    finally:
        loader.dispose()
    doc = YamlDocument(data=None)
    if node is None:
        return doc
    constructor = _Loader("")  # only its constructor half is used
    doc.data = _build(node, (), doc.lines, constructor)
    return doc


def _build(node: yaml.Node, path: Path_, lines: dict[Path_, int], loader: Any) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # handles '<<' merge keys
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise YamlSyntaxError(
                    f"mapping keys must be plain scalars, got {type(key).__name__}",
                    key_node.start_mark.line + 1,
                )
            if key in result:
                raise YamlSyntaxError(
                    f"duplicate key {key!r} (first at line {lines[(*path, key)]})",
                    key_node.start_mark.line + 1,
                )
            lines[(*path, key)] = key_node.start_mark.line + 1
            result[key] = _build(value_node, (*path, key), lines, loader)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), lines, loader) for i, item in enumerate(node.value)]
    if node.tag == _STR_TAG:  # most scalars: skip the constructor's dispatch
        return node.value
    return loader.construct_object(node, deep=True)


_STR_TAG = "tag:yaml.org,2002:str"
