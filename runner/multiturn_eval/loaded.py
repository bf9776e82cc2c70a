"""A loaded suite and a planned one: the data every stage after the loader takes.

:class:`LoadedSuite` is a validated suite with everything resolved at load
(instructions, imported graders, tools and factory, secrets, judge files, JSON
Schemas, simulated users); :class:`PlannedSuite` is one suite of a run with its settings and the
test cases selected. The backends, tools, graders, case runner, scheduler and
reporters take them; only :mod:`multiturn_eval.loader` fills them in.

Plain data (with lookups into the suite's own models): this module imports the
suite models, the YAML document and the settings, never the loader or a stage
that uses it, so any stage may import it without an import cycle.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .case_source import CaseSource
from .settings import RunSettings
from .suite import CodeEvaluation, Evaluation, RetryConfig, Suite, TestCase, Turn
from .suite.users import DEFAULT_MAX_TOKENS, SimulatorBackend, UserConfig
from .yaml_source import YamlDocument, format_path


@dataclass(frozen=True)
class ResolvedSimulator:
    """The simulator one test case uses, every default applied (SPEC 6.11)."""

    backend: SimulatorBackend
    model: str | None
    """None for a python simulator."""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    temperature: float | None = None
    """As configured; None: the default rule (0, or none for a model that refuses one)."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    retry: RetryConfig = field(default_factory=RetryConfig)
    prompt_file: str | None = None
    factory: str | None = None

    @property
    def endpoint(self) -> tuple[str, str | None, str, str | None] | None:
        """(backend, base_url, api_key, api_version) of an LLM simulator (its client's key)."""
        if self.backend == "python" or self.api_key is None:
            return None
        return (self.backend, self.base_url, self.api_key, self.api_version)


@dataclass(frozen=True)
class CaseSimulation:
    """What one simulated test case needs at run time, checked at load
    (:func:`multiturn_eval.simulation.config.check_case`)."""

    user: UserConfig
    simulator: ResolvedSimulator
    require_goal: bool
    fidelity: bool
    factory: Callable[..., Any] | None = None
    """The python simulator's factory, imported."""
    template: str | None = None
    """The ``prompt_file``'s text; None: the packaged template."""
    digest: str = ""
    """What decides the conversation, hashed (``Simulation.digest``: regrade's check)."""


@dataclass
class LoadedSuite:
    """A validated suite with everything resolved that the run needs."""

    path: Path
    display_path: str
    """The file as reports show it: relative to the working directory when inside it."""
    suite: Suite
    document: YamlDocument
    instructions: str | None
    graders: dict[str, Callable[..., Any]] = field(default_factory=dict)
    """grader reference -> the imported callable"""
    tools: list[Callable[..., Any]] = field(default_factory=list)
    """one callable per ``agent.tools`` entry, same order"""
    factory: Callable[..., Any] | None = None
    secrets: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    judge_files: dict[str, str] = field(default_factory=dict)
    """The judges' ``rubric_file`` / ``prompt_file`` texts, read at load (as written -> text)."""
    judge_endpoints: set[tuple[str, str | None, str, str | None]] = field(default_factory=set)
    """(backend, base_url, api_key, api_version) of every judge the suite calls: their
    clients are built before the run (as the agent backends' are)."""
    judge_models: dict[tuple[str, str], tuple[str, int | None, str]] = field(default_factory=dict)
    """Every (judge model, provider whose prices apply) the suite calls -> where it is first
    used: (file, line, field path) (``--max-cost`` needs their prices,
    :func:`multiturn_eval.spend.price_issues`)."""
    json_schemas: dict[str, Any] = field(default_factory=dict)
    """``schema_file`` (as written) -> the JSON Schema read from it at load"""
    schema_validators: dict[int, Any] = field(default_factory=dict, repr=False)
    """id(a ``metric: json`` evaluation) -> its compiled validator, made on first use
    (:func:`multiturn_eval.grading.response_checks.suite_validator`)."""
    given_dir: Path = Path()
    """The suite's directory as the command line gave it (relative paths stay relative)."""
    cases: CaseSource = field(default_factory=CaseSource)
    """Every test case of the suite -- those written in it, then its ``test_cases_file``'s:
    the index, and each case in full on demand (:mod:`multiturn_eval.case_source`). The one
    way to a loaded suite's test cases: ``suite.test_cases`` holds only the written ones."""
    simulations: dict[int, CaseSimulation] = field(default_factory=dict)
    """test-case index -> its simulated user, resolved at load (cases with ``user:``, those
    of the ``test_cases_file`` too)."""

    @property
    def name(self) -> str:
        return self.suite.name or self.path.stem

    @property
    def base_dir(self) -> Path:
        """The suite's directory, absolute (``path`` is resolved when the suite loads)."""
        return self.path.parent

    def shown(self, name: str | Path) -> Path:
        """A file of the suite's, as messages name it: under the suite path as given."""
        return self.given_dir / name

    @functools.cached_property
    def agent_mapping(self) -> dict[str, Any]:
        """The ``agent:`` block as plain data for CaseContext.agent (without the API key, nor
        the MCP servers' ``env`` and ``headers``: secrets, every value)."""
        return self.suite.agent.model_dump(
            mode="json", exclude={"api_key": True, "mcp_servers": {"__all__": {"env", "headers"}}}
        )

    def case_name(self, index: int) -> str:
        return self.cases.name(index)

    def case_line(self, index: int) -> int | None:
        """The case's line: in the suite file, or in the ``test_cases_file`` it comes from."""
        return self.cases.line(index)

    def case_file(self, index: int) -> str:
        """The file the case is written in, as shown: the suite's, or its ``test_cases_file``."""
        return self.cases.file_of(index) or self.display_path

    def located(self, path: tuple[str | int, ...]) -> tuple[str, int | None, str]:
        """(file, line, field) of a field of the suite: inside a case of the
        ``test_cases_file``, that case's line of it."""
        index = path[1] if len(path) >= 2 and path[0] == "test_cases" else None
        if isinstance(index, int) and self.cases.in_file(index):
            return self.case_file(index), self.cases.line(index), format_path(path)
        return self.display_path, self.document.line_of(path), format_path(path)

    def turn_line(self, case_index: int, turn_index: int) -> int | None:
        """The turn's line (a case of the ``test_cases_file`` is one line: that line)."""
        if self.cases.in_file(case_index):
            return self.cases.line(case_index)
        case = self.cases.materialize(case_index)  # written in the suite: at hand
        if case.is_legacy:
            return self.document.line_of(("test_cases", case_index, "input"))
        if case.user is not None and turn_index >= len(case.turns or ()):
            # a simulated turn (or the opening): the user: block wrote it
            return self.document.line_of(("test_cases", case_index, "user"))
        return self.document.line_of(("test_cases", case_index, "turns", turn_index))

    def evaluations_for(self, case: TestCase, turn: Turn) -> list[Evaluation]:
        """The innermost level that defines any: turn, else test case, else suite."""
        for level in (turn.evaluations, case.evaluations, self.suite.evaluations):
            if level is not None:
                return [e for e in level if not (isinstance(e, CodeEvaluation) and not e.enabled)]
        return []


@dataclass
class PlannedSuite:
    """One suite of a run: its resolved settings and the test cases selected (by index)."""

    loaded: LoadedSuite
    settings: RunSettings
    indices: list[int]
