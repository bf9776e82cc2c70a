"""``user_simulator:`` and ``user:``: a simulated user (SPEC 6.11).

``user_simulator:`` (the suite's defaults) and a test case's ``user:`` with its
``simulator:`` override. These models check shape and the rules local to one
block; what needs two blocks, the environment, an import or the file system
(merging, API keys, the factory, ``prompt_file``, ``opening`` beside ``turns:``)
is checked at load by :mod:`multiturn_eval.simulation.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .blocks import JudgeConfig
from .common import CALLABLE_PATTERN, ScalarText, _Strict, at_path

SimulatorBackend = Literal["anthropic", "openai", "python"]
DEFAULT_BACKEND = "anthropic"
DEFAULT_MAX_TOKENS = 1024
DEFAULT_MAX_TURNS = 10
MODEL_KEYS = (
    "model",
    "base_url",
    "api_key",
    "api_version",
    "temperature",
    "max_tokens",
    "retry",
    "prompt_file",
)
"""The keys of an LLM simulator (``anthropic`` / ``openai``); a ``python`` one takes none."""
NOT_PYTHON = "applies to an LLM simulator (anthropic, openai), not python"
PYTHON_ONLY = "applies to backend: python only"
OPENAI_ONLY = "applies to backend: openai (Azure) only"
FLAG_KEYS = ("require_goal", "fidelity")
"""Keys of ``user:`` whose suite default is in ``user_simulator:`` (not in ``user.simulator``)."""


# ----------------------------------------------------------------------------- models


class SimulatorConfig(JudgeConfig):
    """The simulated user's model, or your own Python simulator; every key optional here.

    The connection keys are the judges' (``model``, ``base_url``, ``api_key``,
    ``api_version``, ``max_tokens``, ``retry``). A test case's ``user.simulator`` is
    merged key by key over the suite's ``user_simulator`` (the case's wins); a case
    naming another backend takes nothing from the suite's block.
    """

    backend: SimulatorBackend | None = Field(  # type: ignore[assignment]
        default=None, description="anthropic (default) | openai | python."
    )
    temperature: float | None = Field(
        default=None,
        ge=0,
        description="Default: 0 (left out for a model that refuses a temperature).",
    )
    prompt_file: str | None = Field(
        default=None,
        min_length=1,
        description="Replaces the packaged prompt template (path relative to the suite).",
    )
    factory: str | None = Field(
        default=None,
        pattern=CALLABLE_PATTERN,
        description=(
            "backend: python: module.path:callable, called once per run of a test case with a "
            "SimulatorContext; returns an object with next_message(conversation)."
        ),
    )

    @model_validator(mode="after")
    def _fits_backend(self) -> SimulatorConfig:
        if self.backend == "python":
            for key in MODEL_KEYS:
                if key in self.model_fields_set and getattr(self, key) is not None:
                    raise at_path((key,), NOT_PYTHON)
        elif self.backend is not None:
            if self.factory is not None:
                raise at_path(("factory",), PYTHON_ONLY)
            if self.api_version is not None and self.backend != "openai":
                raise at_path(("api_version",), OPENAI_ONLY)
        return self


class UserSimulatorConfig(SimulatorConfig):
    """The suite's ``user_simulator:``: the simulated users' defaults."""

    require_goal: bool | None = Field(
        default=None,
        description="Default of every user.require_goal (default true).",
    )
    fidelity: bool | None = Field(
        default=None,
        description="Default of every user.fidelity (default false).",
    )


class UserConfig(_Strict):
    """A simulated user (``user:``): it talks to the agent after the scripted ``turns``."""

    goal: str = Field(
        min_length=1,
        description="What the user wants; never sent to the agent.",
    )
    persona: str | None = Field(default=None, description="Who the user is and how they write.")
    known: dict[str, Any] = Field(
        default_factory=dict,
        description="Facts the user gives only when asked (name: value).",
    )
    unknown: list[ScalarText] = Field(
        default_factory=list,
        description="Facts the user does not know and must say so when asked.",
    )
    opening: ScalarText | None = Field(
        default=None,
        description=(
            "A fixed first user message (counts toward max_turns); only on a test case "
            "without scripted turns."
        ),
    )
    max_turns: int = Field(
        default=DEFAULT_MAX_TURNS,
        strict=True,
        description=(
            "Messages the simulated user may send (the opening included, scripted turns not); "
            "at least 1."
        ),
    )
    simulator: SimulatorConfig | None = Field(
        default=None, description="This test case's override of the suite's user_simulator."
    )
    require_goal: bool | None = Field(
        default=None,
        description=(
            "The metric user_goal passes only when the user ended with goal_met; false turns "
            "it off. Default: user_simulator.require_goal, else true."
        ),
    )
    fidelity: bool | None = Field(
        default=None,
        description=(
            "Judge every simulated message against the goal, persona, known and unknown facts "
            "with the suite's judge; a run that breaks them is invalid_simulation. Default: "
            "user_simulator.fidelity, else false."
        ),
    )

    @field_validator("simulator", mode="before")
    @classmethod
    def _flags_belong_to_user(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            for key in FLAG_KEYS:
                if key in value:
                    raise at_path(
                        (key,),
                        f"belongs in user: (user.{key}), not in user.simulator; the suite "
                        f"default is user_simulator.{key}",
                    )
        return value

    @model_validator(mode="after")
    def _check(self) -> UserConfig:
        if not self.goal.strip():
            raise at_path(("goal",), "is empty; say what the simulated user wants")
        if self.opening is not None and not self.opening.strip():
            raise at_path(("opening",), "is empty; give the first message, or leave opening out")
        for i, fact in enumerate(self.unknown):
            if not fact.strip():
                raise at_path(("unknown", i), "is empty; name a fact the user does not know")
        if self.max_turns < 1:
            raise at_path(
                ("max_turns",),
                "must be at least 1 (the messages the simulated user may send, the opening "
                f"included); got {self.max_turns}",
            )
        return self
