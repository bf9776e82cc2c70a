"""Execution settings: command line > suite ``execution:`` > environment > default.

Every value remembers where it came from (``sources``), which ``-v`` prints.
Environment variables are ``MULTITURN_EVAL_<SETTING>`` (upper case), e.g.
``MULTITURN_EVAL_PARALLEL_TEST_CASES=8``. The environment is read once, by the
caller, and passed in as a mapping.

Settings a suite may set (``execution:``): ``parallel_test_cases``,
``turn_timeout``, ``session_timeout`` (opening a session, default 60 s) and
``grader_timeout`` (one code grader on one turn, default 60 s), ``repeat``
(runs of every test case, default 1), ``min_pass_rate`` (with repeats, the
share of runs a test case must pass, default 1.0) and ``max_cost`` (the spend
cap in US dollars, ``--max-cost``; no default: no cap) and ``fixtures`` (``mode``:
``off`` | ``replay`` | ``record`` | ``update``, default off; ``dir``: the root of the
fixture folders; :mod:`multiturn_eval.fixtures`). ``min_pass_rate`` is per
suite like the others: each suite's own ``execution:`` block decides its cases
(there is no command-line flag; ``MULTITURN_EVAL_MIN_PASS_RATE`` sets it for
suites that do not). Run-wide settings (command line or environment only):
``report_dir``, ``format``. When several suites run, each uses its own
``execution:`` block; suites run one after another.

``fixtures_dir`` is relative to where it was given: on the command line and in
``MULTITURN_EVAL_FIXTURES_DIR`` to the current directory, in
``execution.fixtures.dir`` to the suite file (its ``sources`` entry says which);
unset, it is ``fixtures/`` next to the suite file (:func:`fixtures_root`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from .environment import RunEnvironment
from .errors import ConfigError, ConfigIssue
from .suite import ExecutionConfig
from .suite.blocks import FixturesMode

ENV_PREFIX = "MULTITURN_EVAL_"
REPORT_FORMATS = ("json", "junit", "markdown", "html")

Source = Literal["cli", "suite", "env", "default"]

DEFAULTS: dict[str, Any] = {
    "parallel_test_cases": 1,
    "turn_timeout": 120.0,
    "session_timeout": 60.0,
    "grader_timeout": 60.0,
    "repeat": 1,
    "min_pass_rate": 1.0,
    "report_dir": "multiturn-eval-report",
    "format": REPORT_FORMATS,
    "max_cost": None,
    "fixtures": "off",
    "fixtures_dir": None,
}
#: ``--fixtures``: the modes, in the order the help lists them
FIXTURES_MODES: tuple[FixturesMode, ...] = get_args(FixturesMode)
#: the fixtures root when none is given: this folder next to the suite file
DEFAULT_FIXTURES_DIR = "fixtures"


@dataclass(frozen=True)
class RunSettings:
    parallel_test_cases: int = 1
    turn_timeout: float = 120.0
    session_timeout: float = 60.0
    """Seconds opening a test case's session (the factory, the backend's set-up) may take."""
    grader_timeout: float = 60.0
    """Seconds one code grader may take on one turn; past it that metric fails."""
    repeat: int = 1
    """Runs of every test case, each in a fresh session (``--repeat``, SPEC 6.6)."""
    min_pass_rate: float = 1.0
    """With repeats: a test case passes when passes / runs >= this (per suite)."""
    report_dir: str = "multiturn-eval-report"
    format: tuple[str, ...] = REPORT_FORMATS
    max_cost: float | None = None
    """The spend cap in US dollars (``--max-cost``, ``execution.max_cost``); None: no cap."""
    fixtures: FixturesMode = "off"
    """Recorded model traffic (``--fixtures``, ``execution.fixtures.mode``)."""
    fixtures_dir: str | None = None
    """The fixtures root as given (``--fixtures-dir``, ``execution.fixtures.dir``); None:
    ``fixtures/`` next to the suite file. Relative to where it came from: :func:`fixtures_root`."""
    sources: Mapping[str, Source] = field(default_factory=dict)
    environment: RunEnvironment = field(default_factory=RunEnvironment, repr=False)
    """The environment as read once at start-up (API keys, base URLs for the backends)."""

    @property
    def env(self) -> Mapping[str, str]:
        """The environment's variables (what a backend looks up by name)."""
        return self.environment.variables


N = TypeVar("N", int, float)


def _number(text: str, kind: Callable[[str], N], fits: Callable[[N], bool], message: str) -> N:
    """``text`` as a ``kind`` that ``fits``; else ``ValueError(message)`` (NaN never fits)."""
    try:
        value = kind(text.strip())
    except ValueError:
        raise ValueError(message) from None
    if not fits(value):
        raise ValueError(message)
    return value


def parse_positive_int(text: str) -> int:
    return _number(text, int, lambda v: 1 <= v <= 1024, "must be a whole number from 1 to 1024")


def parse_positive_float(text: str) -> float:
    return _number(text, float, lambda v: v > 0, "must be a number of seconds > 0")


def parse_rate(text: str) -> float:
    return _number(
        text, float, lambda v: 0 < v <= 1, "must be a number greater than 0 and at most 1"
    )


def parse_cost(text: str) -> float:
    """``--max-cost``: US dollars, > 0 (``$`` allowed in front)."""
    return _number(
        text.strip().removeprefix("$"),
        float,
        lambda v: 0 < v < float("inf"),
        "must be an amount of US dollars > 0, e.g. 5 or 0.50",
    )


def parse_fixtures(text: str) -> FixturesMode:
    """``--fixtures``: off, replay, record or update."""
    value = text.strip().lower()
    for mode in FIXTURES_MODES:
        if value == mode:
            return mode
    raise ValueError(f"must be one of {', '.join(FIXTURES_MODES)}")


def parse_dir(text: str) -> str:
    if not text.strip():
        raise ValueError("must be a directory")
    return text


def parse_formats(text: str | tuple[str, ...]) -> tuple[str, ...]:
    items = (
        text if isinstance(text, tuple) else tuple(p.strip() for p in text.split(",") if p.strip())
    )
    if not items:
        raise ValueError(f"give at least one of {', '.join(REPORT_FORMATS)}")
    unknown = [i for i in items if i not in REPORT_FORMATS]
    if unknown:
        raise ValueError(f"unknown format {unknown[0]!r}; choose from {', '.join(REPORT_FORMATS)}")
    return tuple(dict.fromkeys(items))


_PARSERS: dict[str, Callable[[str], Any]] = {
    "parallel_test_cases": parse_positive_int,
    "turn_timeout": parse_positive_float,
    "session_timeout": parse_positive_float,
    "grader_timeout": parse_positive_float,
    "repeat": parse_positive_int,
    "min_pass_rate": parse_rate,
    "report_dir": str,
    "format": parse_formats,
    "max_cost": parse_cost,
    "fixtures": parse_fixtures,
    "fixtures_dir": parse_dir,
}
_SUITE_SETTINGS = (
    "parallel_test_cases",
    "turn_timeout",
    "session_timeout",
    "grader_timeout",
    "repeat",
    "min_pass_rate",
    "max_cost",
    "fixtures",
    "fixtures_dir",
)
#: settings ``-v`` lists only when they are not at their default (runs without repeats
#: print what they printed before)
_QUIET_DEFAULTS = ("repeat", "min_pass_rate", "fixtures")
#: settings without a default value: not listed in ``sources`` while unset (``-v`` output)
_OPTIONAL = frozenset({"max_cost", "fixtures_dir"})


def resolve_settings(
    cli: Mapping[str, Any],
    environment: RunEnvironment | Mapping[str, str],
    suite: ExecutionConfig | None = None,
) -> RunSettings:
    """Apply the precedence chain; a bad environment value is a ConfigError naming it.

    ``cli`` holds only the options given on the command line (None means not given).
    """
    if not isinstance(environment, RunEnvironment):
        environment = RunEnvironment.from_mapping(environment)
    env = environment.variables
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    issues: list[ConfigIssue] = []
    for name, parse in _PARSERS.items():
        if cli.get(name) is not None:
            values[name], sources[name] = cli[name], "cli"
            continue
        in_suite = _suite_value(suite, name) if name in _SUITE_SETTINGS else None
        if in_suite is not None:
            values[name], sources[name] = in_suite, "suite"
            continue
        var = ENV_PREFIX + name.upper()
        raw = env.get(var)
        if raw is not None and raw.strip():
            try:
                values[name], sources[name] = parse(raw.strip()), "env"
            except ValueError as exc:
                reason = (
                    str(exc) if "must" in str(exc) or "format" in str(exc) else "not a valid value"
                )
                issues.append(ConfigIssue(f"environment variable {var}={raw!r}: {reason}"))
            continue
        values[name] = DEFAULTS[name]
        if name not in _QUIET_DEFAULTS and name not in _OPTIONAL:
            sources[name] = "default"
    if issues:
        raise ConfigError(issues)
    return RunSettings(**values, sources=sources, environment=environment)


def _suite_value(suite: ExecutionConfig | None, name: str) -> Any:
    """The suite's ``execution:`` value of a setting (None: not set there)."""
    if suite is None:
        return None
    if name in ("fixtures", "fixtures_dir"):
        block = suite.fixtures
        if block is None:
            return None
        return block.mode if name == "fixtures" else block.dir
    return getattr(suite, name)


def fixtures_mode(cli: str | None, env: Mapping[str, str], suite: Any) -> FixturesMode:
    """The fixtures mode of one suite by the precedence chain (the loader needs it before the
    settings are resolved: in replay and update an API key may be missing). ``suite``: the
    suite's ``execution.fixtures.mode`` as written. A bad value is ``off`` here; the suite's
    validation and :func:`resolve_settings` report it."""
    value = cli if cli is not None else suite if isinstance(suite, str) else None
    if value is None:
        value = env.get(ENV_PREFIX + "FIXTURES") or "off"
    try:
        return parse_fixtures(value)
    except ValueError:
        return "off"


def fixtures_root(settings: RunSettings, suite_dir: Path, start_dir: Path | None) -> Path:
    """The fixtures root of a suite: ``fixtures_dir`` taken from where it was given (the
    suite file's directory for ``execution.fixtures.dir``, else the directory the run
    started in), or ``fixtures/`` next to the suite file."""
    given = settings.fixtures_dir
    if given is None:
        return suite_dir / DEFAULT_FIXTURES_DIR
    path = Path(given).expanduser()
    if not path.is_absolute():
        base = suite_dir if settings.sources.get("fixtures_dir") == "suite" else start_dir
        path = (base or Path.cwd()) / path
    return Path(os.path.normpath(path))  # evals/../recorded is recorded (symlinks kept)
