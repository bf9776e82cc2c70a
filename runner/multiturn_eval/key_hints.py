"""What an unknown key in a suite file was meant to be (the loader's ``unknown key`` messages).

A key is unknown *where it is written*: ``case_insensitive`` is a key of a
standard evaluation, so under ``type: code`` it is unknown. The hint is
worked out from the model the mapping stands for (found by walking the suite
models along pydantic's error location, whose union tags say which member of a
union was tried):

1. a close match among *that model's* keys, never the key itself:
   ``modle`` under ``agent:`` -> ``did you mean 'model'?``;
2. else, when the key is valid in other models, where:
   ``'case_insensitive' is not a key of a code evaluation (type: code); it is
   a key of a standard evaluation (type: standard)``;
3. else a close match among every key of the suite format (the model could
   not be told), still never the key itself.
"""

from __future__ import annotations

import difflib
import functools
import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

#: how a model is named in a message when it has no discriminating ``type:``/``backend:``
_NAMES = {
    "Suite": "the top level of a suite",
    "TestCase": "a test case",
    "Turn": "a turn",
    "ExpectedTool": "an expected tool",
    "ConversationTools": "conversation_tools",
    "ExecutionConfig": "execution",
    "JudgeConfig": "a judge block",
    "RetryConfig": "retry",
    "FileRef": "a files entry",
    "ToolSpec": "an agent.tools entry",
    "McpServerSpec": "an agent.mcp_servers entry",
    "ModelPrice": "a pricing entry",
    "AzureConfig": "agent.azure",
    "FuzzyMatcher": "a fuzzy matcher",
    "RegexMatcher": "a regex matcher",
    "UserConfig": "a simulated user (user:)",
    "UserSimulatorConfig": "user_simulator",
    "SimulatorConfig": "user.simulator",
}
#: discriminator fields, and the noun of the models they tell apart
_DISCRIMINATORS = {"type": "evaluation", "backend": "agent"}


def _models() -> list[type[BaseModel]]:
    from .suite import MODELS

    return list(MODELS)


@functools.cache
def all_keys() -> tuple[str, ...]:
    """Every key of the suite format, in any mapping."""
    return tuple(sorted({k for model in _models() for k in model.model_fields}))


def _tag_of(model: type[BaseModel]) -> tuple[str, str] | None:
    """(field, value) of a model's one-value ``type:`` / ``backend:`` literal, if it has one."""
    for key in _DISCRIMINATORS:
        field = model.model_fields.get(key)
        if field is not None and get_origin(field.annotation) is Literal:
            values = get_args(field.annotation)
            if len(values) == 1:
                return key, str(values[0])
    return None


def describe(model: type[BaseModel]) -> str:
    """``a code evaluation (type: code)``, ``the http agent (backend: http)``, ``a test case``."""
    tag = _tag_of(model)
    if tag is not None:
        key, value = tag
        noun = _DISCRIMINATORS[key]
        return (
            f"a {value} {noun} ({key}: {value})"
            if key == "type"
            else f"the {value} {noun} ({key}: {value})"
        )
    return _NAMES.get(model.__name__, model.__name__)


def _metrics_taking(model: type[BaseModel], key: str) -> str:
    """`` with metric: equality, ...`` for a standard evaluation's per-metric flags."""
    from .suite import METRIC_FLAGS, StandardEvaluation

    if model is not StandardEvaluation:
        return ""
    metrics = [metric for metric, flags in METRIC_FLAGS.items() if key in flags]
    if not metrics or len(metrics) == len(METRIC_FLAGS):
        return ""
    shown = ", ".join(metrics[:-1]) + (" or " if len(metrics) > 1 else "") + metrics[-1]
    return f" with metric: {shown}"


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and a lone ``| None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _union_member(annotation: Any, tag: str) -> Any:
    """The member of a union that pydantic's location tag ``tag`` names, if any."""
    for member in get_args(annotation):
        if get_origin(member) is Annotated and any(
            getattr(meta, "tag", None) == tag for meta in get_args(member)[1:]
        ):
            return get_args(member)[0]
        inner = _unwrap(member)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            found = _tag_of(inner)
            if found is not None and found[1] == tag:
                return inner
    return None


def _step(annotation: Any, item: str | int) -> Any:
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(item) if isinstance(item, str) else None
        return None if field is None else field.annotation
    origin = get_origin(annotation)
    if origin is list and isinstance(item, int):
        return get_args(annotation)[0]
    if origin is dict and isinstance(item, str):
        return get_args(annotation)[1]
    if origin in (Union, types.UnionType) and isinstance(item, str):
        return _union_member(annotation, item)
    return None


def model_at(location: Sequence[str | int]) -> type[BaseModel] | None:
    """The suite model of the mapping at pydantic's raw error ``location`` (tags kept)."""
    from .suite import Suite

    current: Any = Suite
    for item in location:
        step = _step(current, item)
        if step is None:
            # a tag pydantic adds for a union the walk already resolved (or a plain
            # union member such as 'str'): skip it rather than give up
            continue
        current = step
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _close(key: str, known: Sequence[str]) -> str | None:
    matches = [m for m in difflib.get_close_matches(key, known, n=3, cutoff=0.75) if m != key]
    # two swapped letters ('modle') mean the key with the same letters ('model'),
    # even when a shorter key ('mode') scores higher
    swapped = [m for m in matches if sorted(m) == sorted(key)]
    matches = swapped or matches
    return matches[0] if matches else None


def unknown_key_message(key: Any, location: Sequence[str | int]) -> str:
    """The message for key ``key`` that is not allowed in the mapping at ``location``.

    ``location`` is pydantic's error location of the key's parent (union tags kept).
    Starts with ``unknown key; did you mean '...'?`` when a key was probably misspelt.
    """
    if not isinstance(key, str):
        return "unknown key"
    model = model_at(location)
    if model is not None:
        match = _close(key, list(model.model_fields))
        if match is not None:
            return f"unknown key; did you mean '{match}'?"
        owners = [m for m in _models() if key in m.model_fields and m is not model]
        tag = _tag_of(model)
        if tag is not None:  # an agent's key: the other agents first (not an mcp_servers entry)
            siblings = [m for m in owners if (_tag_of(m) or ("",))[0] == tag[0]]
            owners = siblings or owners
        if owners:
            where = ", ".join(describe(m) + _metrics_taking(m, key) for m in owners)
            return f"'{key}' is not a key of {describe(model)}; it is a key of {where}"
    match = _close(key, all_keys())
    return f"unknown key; did you mean '{match}'?" if match else "unknown key"
