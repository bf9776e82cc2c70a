"""Token pricing: the built-in table, model-id families, suite overrides, unknown models."""

from __future__ import annotations

import pytest

from multiturn_eval.pricing import (
    ANTHROPIC_PRICES,
    BUILTIN_PRICES,
    OPENAI_PRICES,
    cost_usd,
    model_family,
    price_for,
)
from multiturn_eval.suite import ModelPrice
from multiturn_eval.types import TokenUsage

USAGE = TokenUsage(
    prompt_tokens=1_000_000,
    completion_tokens=1_000_000,
    cache_creation_tokens=1_000_000,
    cache_read_tokens=1_000_000,
)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("Claude-Opus-4-5", "claude-opus-4-5"),
        ("claude-sonnet-4-6[1m]", "claude-sonnet-4-6"),
        ("gpt-5.4-mini-2026-03-17", "gpt-5.4-mini"),
        ("GPT-5-mini", "gpt-5-mini"),
        ("gpt-5.5", "gpt-5.5"),
    ],
)
def test_model_family(model: str, family: str) -> None:
    assert model_family(model) == family


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # input + output + 5m cache write + cache read, a million tokens each
        ("claude-sonnet-4-5-20250929", 3 + 15 + 3.75 + 0.30),
        ("claude-haiku-4-5-20251001", 1 + 5 + 1.25 + 0.10),
        ("claude-opus-4-5", 5 + 25 + 6.25 + 0.50),
        ("claude-opus-4-1-20250805", 15 + 75 + 18.75 + 1.50),
        ("claude-3-5-haiku-20241022", 0.80 + 4 + 1 + 0.08),
        ("claude-sonnet-5", 2 + 10 + 2.50 + 0.20),
        # OpenAI: input + output + cache write (0 before GPT-5.6) + cached input
        ("gpt-5-mini", 0.25 + 2.00 + 0 + 0.025),
        ("gpt-5-mini-2025-08-07", 0.25 + 2.00 + 0 + 0.025),
        ("gpt-5.4", 2.50 + 15 + 0 + 0.25),
        ("gpt-5.4-mini", 0.75 + 4.50 + 0 + 0.075),
        ("gpt-5.4-nano", 0.20 + 1.25 + 0 + 0.02),
        ("gpt-5.5", 5 + 30 + 0 + 0.50),
        ("gpt-5.3-codex", 1.75 + 14 + 0 + 0.175),
        ("gpt-5.6-terra", 2 + 12 + 2.50 + 0.20),
    ],
)
def test_builtin_prices(model: str, expected: float) -> None:
    assert cost_usd(model, USAGE) == pytest.approx(expected)


def test_each_token_kind_has_its_own_rate() -> None:
    usage = TokenUsage(prompt_tokens=1200, completion_tokens=300, cache_read_tokens=5000)
    # Sonnet 4.5: 1200 * 3 + 300 * 15 + 5000 * 0.30, per million
    assert cost_usd("claude-sonnet-4-5", usage) == pytest.approx((3600 + 4500 + 1500) / 1e6)


@pytest.mark.parametrize(
    "model", ["gpt-4o-mini", "gpt-4o", "gpt-4.1", "o3", "llama3.1:8b", "gpt-5.4-pro", "gpt-6"]
)
def test_openai_models_without_a_confirmed_price_have_none(model: str) -> None:
    assert price_for(model) is None


def test_unknown_model_has_no_price() -> None:
    assert price_for("gpt-4o-mini") is None
    assert cost_usd("claude-sonnet-9-9", USAGE) is None
    assert cost_usd(None, USAGE) is None


def test_suite_price_overrides_and_prices_unknown_models() -> None:
    overrides = {
        "claude-sonnet-4-5": ModelPrice(input=1, output=2, cache_write=3, cache_read=4),
        "gpt-4o-mini": ModelPrice(input=0.15, output=0.60),
    }
    assert cost_usd("claude-sonnet-4-5-20250929", USAGE, overrides) == pytest.approx(10)
    # cache prices default to 1.25x and 0.1x of the input price
    assert cost_usd("gpt-4o-mini", USAGE, overrides) == pytest.approx(
        0.15 + 0.60 + 0.15 * 1.25 + 0.015
    )
    # untouched models keep the built-in price
    assert cost_usd("claude-haiku-4-5", USAGE, overrides) == pytest.approx(7.35)


def test_exact_suite_key_wins_over_a_family_key() -> None:
    overrides = {
        "claude-sonnet-4-5": ModelPrice(input=1, output=1),
        "claude-sonnet-4-5-20250929": ModelPrice(input=2, output=2, cache_write=0, cache_read=0),
    }
    usage = TokenUsage(prompt_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5-20250929", usage, overrides) == pytest.approx(2)


def test_table_prices_are_consistent() -> None:
    assert BUILTIN_PRICES == {**ANTHROPIC_PRICES, **OPENAI_PRICES}
    for family, price in BUILTIN_PRICES.items():
        assert price.output > price.input > price.cache_read >= 0, family
    for family, price in ANTHROPIC_PRICES.items():
        if family != "claude-3-haiku":  # the page lists $0.30, not 1.25 x $0.25
            assert price.cache_write == pytest.approx(price.input * 1.25), family
    for family, price in OPENAI_PRICES.items():  # cached input is a tenth of input
        assert price.cache_read == pytest.approx(price.input * 0.1), family
        if not family.startswith("gpt-5.6"):  # cache writes are billed from GPT-5.6 on
            assert price.cache_write == 0, family
