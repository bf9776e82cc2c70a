"""Pydantic models of the suite file (SPEC 4).

Unknown keys are errors everywhere except inside a turn, where they are kept as
``turn_config`` for graders; a turn key that looks like a misspelling of a known
one (``ground_truht``) is still an error that suggests the known key.

The models only check shape and local rules. Whatever needs the file system or
an import (``instructions_file``, ``files``, tools, graders, the python
factory) is checked by :mod:`multiturn_eval.loader`, which also turns every
validation error into a located :class:`~multiturn_eval.errors.ConfigIssue`.

Errors that belong to a sub-field are raised with :func:`at_path`, which the
loader appends to the location pydantic reports, so a message points at the
exact key (``test_cases[3].ground_truth``) rather than at its parent.

The models live in one module per section of the file:

=====================  ====================================================
:mod:`.agents`         ``agent:`` (one model per ``backend:``, ``tools:``)
:mod:`.mcp_servers`    ``agent.mcp_servers:`` (MCP servers as tool sources)
:mod:`.cases`          ``test_cases:``, their turns, ``files:``, ``conversation_tools:``
:mod:`.evaluations`    ``evaluations:`` (standard, code, judge)
:mod:`.tool_checks`    ``expected_tools:`` and argument matchers
:mod:`.blocks`         ``execution:``, ``pricing:``, ``judge:``, ``retry:``
:mod:`.users`          ``user_simulator:`` and a test case's ``user:`` (simulated users)
:mod:`.common`         what they share (strict models, :func:`at_path`, text scalars)
=====================  ====================================================

This module is the import surface (``from multiturn_eval.suite import Suite``)
and holds the top level, :class:`Suite`; :data:`MODELS` lists every model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .agents import (
    AgentConfig,
    AnthropicAgent,
    AzureConfig,
    HttpAgent,
    OpenAIAgent,
    PythonAgent,
    SemanticKernelAgent,
    ToolSpec,
)
from .blocks import ExecutionConfig, FixturesConfig, JudgeConfig, ModelPrice, RetryConfig
from .cases import (
    CONVERSATION_KEYS,
    TURN_KEYS,
    ConversationTools,
    FileRef,
    TestCase,
    Turn,
    likely_misspellings,
)
from .common import (
    AT_PATH_ERROR,
    CALLABLE_PATTERN,
    UNION_TAGS,
    URL_PATTERN,
    PlainData,
    ScalarText,
    _Strict,
    at_path,
)
from .evaluations import (
    DEFAULT_THRESHOLDS,
    METRIC_FLAGS,
    RESPONSE_CHECKS,
    CodeEvaluation,
    Evaluation,
    JudgeEvaluation,
    JudgeScale,
    StandardEvaluation,
    _unique_metric_names,
    json_schema_problem,
)
from .mcp_servers import McpServerList, McpServerSpec, server_configs
from .tool_checks import (
    MAX_REGEX_SIZE,
    ArgMatcher,
    ArgsMode,
    ExpectedTool,
    ExpectedToolItem,
    FuzzyMatcher,
    RegexMatcher,
    ToolOrder,
    compile_regex,
)
from .users import SimulatorConfig, UserConfig, UserSimulatorConfig

__all__ = [
    "AT_PATH_ERROR",
    "CALLABLE_PATTERN",
    "CONVERSATION_KEYS",
    "DEFAULT_THRESHOLDS",
    "MAX_REGEX_SIZE",
    "METRIC_FLAGS",
    "MODELS",
    "RESPONSE_CHECKS",
    "TURN_KEYS",
    "UNION_TAGS",
    "URL_PATTERN",
    "AgentConfig",
    "AnthropicAgent",
    "ArgMatcher",
    "ArgsMode",
    "AzureConfig",
    "CodeEvaluation",
    "ConversationTools",
    "Evaluation",
    "ExecutionConfig",
    "ExpectedTool",
    "ExpectedToolItem",
    "FileRef",
    "FixturesConfig",
    "FuzzyMatcher",
    "HttpAgent",
    "JudgeConfig",
    "JudgeEvaluation",
    "JudgeScale",
    "McpServerList",
    "McpServerSpec",
    "ModelPrice",
    "OpenAIAgent",
    "PlainData",
    "PythonAgent",
    "RegexMatcher",
    "RetryConfig",
    "ScalarText",
    "SemanticKernelAgent",
    "SimulatorConfig",
    "StandardEvaluation",
    "Suite",
    "TestCase",
    "ToolOrder",
    "ToolSpec",
    "Turn",
    "UserConfig",
    "UserSimulatorConfig",
    "at_path",
    "compile_regex",
    "json_schema_problem",
    "likely_misspellings",
    "server_configs",
]


def _cases_required(schema: dict[str, Any]) -> None:
    """The editor schema's share of ``_has_cases``: test_cases, test_cases_file or both."""
    schema["anyOf"] = [{"required": ["test_cases"]}, {"required": ["test_cases_file"]}]


class Suite(_Strict):
    """A suite file."""

    model_config = ConfigDict(json_schema_extra=_cases_required)

    name: str | None = Field(default=None, description="Default: the file name without extension.")
    agent: AgentConfig
    evaluations: list[Evaluation] = Field(default_factory=list)
    judge: JudgeConfig | None = Field(
        default=None, description="Default judge settings of every type: judge evaluation."
    )
    user_simulator: UserSimulatorConfig | None = Field(
        default=None,
        description=(
            "The simulated users' model (or your Python simulator) and defaults; a test "
            "case's user.simulator is merged over it key by key."
        ),
    )
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Prices by model id (US dollars per million tokens), winning over genai-prices.",
    )
    test_cases: list[TestCase] = Field(
        default_factory=list,
        description="The test cases written in the suite file (run before test_cases_file's).",
    )
    test_cases_file: str | None = Field(
        default=None,
        description=(
            "A JSON Lines file of test cases (one JSON object per line, the schema of a "
            "test_cases item), relative to the suite file; read as a stream, after test_cases."
        ),
    )
    """Where the loader reads more test cases from. Code after the loader never reads
    ``test_cases`` itself: ``LoadedSuite.cases`` holds every test case of the suite, the
    written ones and the file's (:mod:`multiturn_eval.case_source`)."""

    @field_validator("test_cases")
    @classmethod
    def _not_empty(cls, value: list[TestCase]) -> list[TestCase]:
        if not value:
            raise ValueError("is empty; a suite needs at least one test case")
        return value

    @model_validator(mode="after")
    def _has_cases(self) -> Suite:
        if self.test_cases_file is None and "test_cases" not in self.model_fields_set:
            raise at_path(
                ("test_cases",),
                "required key missing (or test_cases_file: a JSON Lines file of test cases)",
            )
        return self

    @field_validator("evaluations")
    @classmethod
    def _check_names(cls, value: list[Evaluation] | None) -> list[Evaluation] | None:
        return _unique_metric_names(value)


MODELS: tuple[type[BaseModel], ...] = (
    FuzzyMatcher,
    RegexMatcher,
    ExpectedTool,
    StandardEvaluation,
    CodeEvaluation,
    RetryConfig,
    JudgeConfig,
    JudgeEvaluation,
    FileRef,
    Turn,
    ConversationTools,
    SimulatorConfig,
    UserSimulatorConfig,
    UserConfig,
    TestCase,
    ToolSpec,
    McpServerSpec,
    PythonAgent,
    HttpAgent,
    AnthropicAgent,
    SemanticKernelAgent,
    AzureConfig,
    OpenAIAgent,
    ExecutionConfig,
    FixturesConfig,
    ModelPrice,
    Suite,
)
"""Every model of the suite format, in the order of the file's sections (as unknown-key
messages list the models a key belongs to)."""
