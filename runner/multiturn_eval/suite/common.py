"""What every section of the suite format shares: strict models, located errors, text scalars.

See :mod:`multiturn_eval.suite` for the rules the models keep.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, WithJsonSchema
from pydantic_core import PydanticCustomError

from ..scalars import number_text, plain_numbers

AT_PATH_ERROR = "multiturn_eval_at_path"
CALLABLE_PATTERN = r"^[\w.]+:[\w.]+$"
"""``module.path:callable`` (tools, graders, factories); the loader words its error."""
URL_PATTERN = r"^(https?://|\$\{)"
"""A URL; or a ``${VAR}`` the run leaves as written (regrade calls no agent), which is
also how an editor sees the suite file before any substitution."""

#: discriminator tags that pydantic puts into error locations; the loader drops them
UNION_TAGS = frozenset(
    {
        "fuzzy-matcher",
        "regex-matcher",
        "literal-matcher",
        "tool-name",
        "tool-spec",
        "standard",
        "code",
        "judge",
        "python",
        "http",
        "anthropic",
        "semantic-kernel",
        "openai",
        "str",
        "int",
        "float",
    }
)


def at_path(path: tuple[str | int, ...], message: str) -> PydanticCustomError:
    """An error located ``path`` below the model that raises it."""
    return PydanticCustomError(AT_PATH_ERROR, "{message}", {"message": message, "path": path})


def _suggest(word: str, known: list[str]) -> str:
    """``; did you mean 'x'?`` when ``word`` looks like a slip for the known key x, else ``""``."""
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return f"; did you mean '{match[0]}'?" if match else ""


def _scalar_to_str(value: Any) -> Any:
    """YAML reads ``ground_truth: 1.10`` as a number; the suite means the text as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_text(value)
    return value


ScalarText = Annotated[
    str,
    BeforeValidator(_scalar_to_str),
    WithJsonSchema({"type": ["string", "number", "boolean"]}),
]

PlainData = Annotated[Any, AfterValidator(plain_numbers)]
"""Free-form data: numbers in it are plain int / float (see :mod:`.scalars`)."""


class _Strict(BaseModel):
    """Unknown keys are errors; a loaded suite does not change."""

    model_config = ConfigDict(extra="forbid", frozen=True)
