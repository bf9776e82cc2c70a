"""``agent:``: the agent under test, one model per ``backend:``, its Python tools and MCP servers."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..tools.outcome import DEFAULT_MAX_TOOL_RESULT_CHARS
from .blocks import RetryConfig
from .common import CALLABLE_PATTERN, URL_PATTERN, PlainData, _Strict, at_path
from .mcp_servers import McpServerList


class ToolSpec(_Strict):
    """A Python callable offered to the model as a tool."""

    function: str = Field(pattern=CALLABLE_PATTERN, description="module.path:callable")
    name: str | None = Field(default=None, description="Default: the callable's name.")
    description: str | None = Field(default=None, description="Default: the docstring.")


class _AgentCommon(_Strict):
    model: str | None = None
    instructions: str | None = None
    instructions_file: str | None = Field(
        default=None, description="Path relative to the suite file; read at load."
    )
    temperature: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    tools: list[ToolSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_instructions(self) -> _AgentCommon:
        if self.instructions is not None and self.instructions_file is not None:
            raise at_path(
                ("instructions_file",), "give either 'instructions' or 'instructions_file'"
            )
        return self


class PythonAgent(_AgentCommon):
    """Your own agent in Python: ``factory(CaseContext) -> session``."""

    backend: Literal["python"]
    factory: str = Field(pattern=CALLABLE_PATTERN, description="module.path:callable")
    options: dict[str, PlainData] = Field(
        default_factory=dict, description="Free-form settings for your factory (CaseContext.agent)."
    )


class HttpAgent(_AgentCommon):
    """Your agent behind an HTTP endpoint: one POST per turn."""

    backend: Literal["http"]
    url: str = Field(pattern=URL_PATTERN, description="Receives one JSON POST per turn.")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, description="Seconds; default: turn_timeout.")
    retry: RetryConfig = Field(default_factory=RetryConfig)
    options: dict[str, PlainData] = Field(
        default_factory=dict, description="Sent as 'options' per request."
    )


class _ModelAgent(_AgentCommon):
    """What the model backends add: the runner runs the tools the model calls."""

    mcp_servers: McpServerList = Field(
        default_factory=list,
        description="MCP servers whose tools are offered next to agent.tools (see docs/mcp.md).",
    )
    max_tool_result_chars: int = Field(
        default=DEFAULT_MAX_TOOL_RESULT_CHARS,
        ge=1,
        description="A tool result longer than this (Python and MCP tools alike) is cut, with "
        "a marker saying how much was cut, for the model and the reports.",
    )


class AnthropicAgent(_ModelAgent):
    """Claude through the anthropic SDK's Messages API with a client-side tool loop."""

    backend: Literal["anthropic"]
    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int = Field(default=1024, ge=1)
    max_tool_rounds: int = Field(default=10, ge=1)
    prompt_caching: bool = False
    retry: RetryConfig = Field(default_factory=RetryConfig)


class SemanticKernelAgent(_ModelAgent):
    """A Semantic Kernel ChatCompletionAgent with automatic function calling."""

    backend: Literal["semantic-kernel"]
    service: Literal["openai", "azure-openai", "anthropic"]
    model: str
    base_url: str | None = None
    api_key: str | None = None
    api_version: str | None = Field(default=None, description="azure-openai only.")
    max_tool_rounds: int = Field(default=10, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _azure_only(self) -> SemanticKernelAgent:
        if self.api_version is not None and self.service != "azure-openai":
            raise at_path(("api_version",), "applies to service: azure-openai only")
        if self.service == "azure-openai" and not self.base_url:
            raise at_path(("base_url",), "service: azure-openai needs base_url (the endpoint)")
        return self


class AzureConfig(_Strict):
    """Azure OpenAI: the resource endpoint, the API version and the deployment."""

    endpoint: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="https://<resource>.openai.azure.com; default: AZURE_OPENAI_ENDPOINT.",
    )
    api_version: str | None = Field(
        default=None,
        min_length=1,
        description="Default: OPENAI_API_VERSION, else AZURE_OPENAI_API_VERSION.",
    )
    deployment: str | None = Field(default=None, min_length=1, description="Default: agent.model.")


class OpenAIAgent(_ModelAgent):
    """Any OpenAI-compatible Chat Completions endpoint through the openai SDK, with a client-side tool loop."""

    backend: Literal["openai"]
    model: str = Field(min_length=1)
    service: Literal["openai", "azure"] = Field(
        default="openai", description="azure: Azure OpenAI (also implied by an 'azure:' block)."
    )
    base_url: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="Default: OPENAI_BASE_URL, else https://api.openai.com/v1.",
    )
    api_key: str | None = Field(
        default=None, description="Default: OPENAI_API_KEY (AZURE_OPENAI_API_KEY on Azure)."
    )
    azure: AzureConfig | None = None
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description="auto, required, none, or a tool's name; applies to a turn's first request.",
    )
    extra_body: dict[str, PlainData] = Field(
        default_factory=dict,
        description="Merged into every request body (server-specific options).",
    )
    max_tool_rounds: int = Field(default=10, ge=1)
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _one_endpoint(self) -> OpenAIAgent:
        if self.azure is not None and "service" in self.model_fields_set and not self.on_azure:
            raise at_path(("azure",), "applies to service: azure only")
        if self.on_azure and self.base_url is not None:
            raise at_path(
                ("base_url",), "not used with Azure OpenAI; give the endpoint as azure.endpoint"
            )
        return self

    @property
    def on_azure(self) -> bool:
        """Azure OpenAI: ``service: azure``, or an ``azure:`` block without a ``service:``."""
        return self.service == "azure" or (
            self.azure is not None and "service" not in self.model_fields_set
        )


AgentConfig = Annotated[
    PythonAgent | HttpAgent | AnthropicAgent | SemanticKernelAgent | OpenAIAgent,
    Field(discriminator="backend"),
]
