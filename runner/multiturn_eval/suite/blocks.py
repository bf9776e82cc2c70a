"""The settings blocks: ``execution:``, ``pricing:``, ``judge:`` and ``retry:``.

``execution:`` is the suite's share of the run settings (:mod:`multiturn_eval.settings`
says which wins); ``pricing:`` the prices that win over genai-prices'; ``judge:``
(at every level) the model that grades judge evaluations; ``retry:`` (an agent's or
a judge's) the retries of transient provider errors.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import URL_PATTERN, _Strict

FixturesMode = Literal["off", "replay", "record", "update"]


class FixturesConfig(_Strict):
    """Recorded model traffic (``--fixtures``, ``--fixtures-dir``; docs/fixtures.md)."""

    mode: FixturesMode | None = Field(
        default=None,
        description=(
            "off (default): every call live; replay: every model call answered from the "
            "fixtures, no API key needed, nothing sent; record: every call live, the selected "
            "test cases' fixtures rewritten; update: replay what matches, record the rest."
        ),
    )
    dir: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "The root holding one folder per suite (DIR/<suite file stem>/), relative to the "
            "suite file (default: fixtures/ next to it)."
        ),
    )


class ExecutionConfig(_Strict):
    """Run settings; the command line overrides them, they override the environment."""

    parallel_test_cases: int | None = Field(default=None, ge=1, le=1024)
    turn_timeout: float | None = Field(default=None, gt=0)
    session_timeout: float | None = Field(
        default=None, gt=0, description="Seconds opening a session may take (default 60)."
    )
    grader_timeout: float | None = Field(
        default=None, gt=0, description="Seconds one code grader may take on a turn (default 60)."
    )
    repeat: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Runs of every test case, each in a fresh session (default 1; --repeat).",
    )
    min_pass_rate: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "With repeat > 1: a test case passes when passes / runs >= this (0 < rate <= 1, "
            "default 1.0: every run must pass). Per suite."
        ),
    )
    max_cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Spend cap in US dollars (as --max-cost): once the estimated spend reaches it, "
            "no new test case starts."
        ),
    )
    fixtures: FixturesConfig | None = Field(
        default=None, description="Recorded model traffic: mode and directory (--fixtures)."
    )


class ModelPrice(_Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0, description="Default: 1.25 x input.")
    cache_read: float | None = Field(default=None, ge=0, description="Default: 0.1 x input.")


class RetryConfig(_Strict):
    """Capped retries of transient provider errors (429, 529, 5xx, connection errors)."""

    max_attempts: int = Field(
        default=4, ge=1, le=20, description="Attempts in all, first included."
    )
    initial_delay: float = Field(default=1.0, ge=0, description="Seconds before the first retry.")
    max_delay: float = Field(default=20.0, ge=0, description="Cap on one backoff wait.")
    max_retry_after: float = Field(
        default=60.0, ge=0, description="Cap on an honoured retry-after; longer waits give up."
    )


class JudgeConfig(_Strict):
    """The model that grades a ``type: judge`` evaluation; every key optional at every level.

    Levels merge key by key, innermost wins: the evaluation's own ``judge:``, then the
    turn's, the test case's, the suite's top-level ``judge:``. After merging, ``model``
    is required; ``backend`` defaults to anthropic, ``temperature`` to 0, ``max_tokens``
    to 1024, ``api_key`` to ANTHROPIC_API_KEY / OPENAI_API_KEY.
    """

    backend: Literal["anthropic", "openai"] | None = Field(
        default=None, description="Default: anthropic."
    )
    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="Default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL, else the provider's.",
    )
    api_key: str | None = Field(
        default=None, description="Default: ANTHROPIC_API_KEY / OPENAI_API_KEY."
    )
    api_version: str | None = Field(
        default=None,
        description="openai only: an Azure OpenAI api-version (base_url is the Azure endpoint).",
    )
    temperature: float | None = Field(default=None, ge=0, description="Default: 0.")
    max_tokens: int | None = Field(default=None, ge=1, description="Default: 1024.")
    retry: RetryConfig | None = None
