"""Token pricing: genai-prices' table per request, the provider from the backend, suite
overrides, unknown models, and no network."""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval.fixtures.values import is_rate
from multiturn_eval.pricing import (
    RATE_NAMES,
    Price,
    RecordedPrice,
    RunPrices,
    TablePrice,
    _resolved,
    _table,
    _table_price,
    agent_provider,
    cost_usd,
    flat_rates,
    judge_provider,
    model_family,
    price_for,
    table_usage,
    table_version,
)
from multiturn_eval.suite import ModelPrice, Suite
from multiturn_eval.types import TokenUsage
from tests.cli_probe import run_probe
from tests.conftest import Project
from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, text
from tests.fakes.anthropic_server import Usage as AnthropicUsage

MILLION = 1_000_000


def rates(model: str, provider: str | None) -> tuple[float, float, float, float]:
    """(input, 5-minute cache write, cache read, output) in US dollars per million tokens,
    each measured by pricing a request of 100,000 tokens of that kind alone (below every
    long-context tier)."""
    price = price_for(model, provider=provider)
    assert price is not None, model
    kinds = ("prompt_tokens", "cache_creation_tokens", "cache_read_tokens", "completion_tokens")
    measured = [price.cost(TokenUsage(**{kind: 100_000})) for kind in kinds]
    assert all(m is not None for m in measured)
    return tuple(round(m * 10, 6) for m in measured if m is not None)  # type: ignore[return-value]


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


# ------------------------------------------------------------------ the table's prices


@pytest.mark.parametrize(
    ("model", "input", "cached", "output"),
    [  # OpenAI's published prices: input / cached input / output, per million tokens
        ("gpt-4o-mini", 0.15, 0.075, 0.60),
        ("gpt-4o", 2.50, 1.25, 10.00),
        ("gpt-4.1", 2.00, 0.50, 8.00),
        ("gpt-4.1-mini", 0.40, 0.10, 1.60),
        ("o3", 2.00, 0.50, 8.00),
        # the ones the old hand-kept table had, unchanged in genai-prices
        ("gpt-5-mini", 0.25, 0.025, 2.00),
        ("gpt-5-mini-2025-08-07", 0.25, 0.025, 2.00),
        ("gpt-5.4", 2.50, 0.25, 15.00),
        ("gpt-5.4-mini", 0.75, 0.075, 4.50),
        ("gpt-5.4-mini-2026-03-17", 0.75, 0.075, 4.50),
        ("gpt-5.4-nano", 0.20, 0.02, 1.25),
        ("gpt-5.5", 5.00, 0.50, 30.00),
        ("gpt-5.3-codex", 1.75, 0.175, 14.00),
    ],
)
def test_openai_models_come_out_of_the_table(
    model: str, input: float, cached: float, output: float
) -> None:
    measured_input, write, read, measured_output = rates(model, "openai")
    assert (measured_input, read, measured_output) == pytest.approx((input, cached, output))
    # OpenAI bills no cache writes before GPT-5.6 (and reports none): a count is input
    assert write == pytest.approx(input)


@pytest.mark.parametrize(
    ("model", "expected"),
    [  # input, 5-minute cache write, cache read, output
        ("claude-sonnet-4-5-20250929", (3, 3.75, 0.30, 15)),
        ("claude-sonnet-4-5-latest", (3, 3.75, 0.30, 15)),
        ("claude-haiku-4-5-20251001", (1, 1.25, 0.10, 5)),
        ("claude-opus-4-5", (5, 6.25, 0.50, 25)),
        ("claude-opus-4-1-20250805", (15, 18.75, 1.50, 75)),
        ("claude-3-5-haiku-20241022", (0.80, 1, 0.08, 4)),
        ("claude-3-haiku", (0.25, 0.30, 0.03, 1.25)),
        ("claude-sonnet-5", (2, 2.50, 0.20, 10)),
        ("claude-sonnet-5-5", (2, 2.50, 0.10, 10)),
        ("claude-fable-5-1", (10, 12.50, 0.25, 50)),
        ("claude-sonnet-4-6[1m]", (3, 3.75, 0.30, 15)),
        ("Claude-Opus-4-5", (5, 6.25, 0.50, 25)),
    ],
)
def test_anthropic_models_come_out_of_the_table(
    model: str, expected: tuple[float, float, float, float]
) -> None:
    assert rates(model, "anthropic") == pytest.approx(expected)


def test_gpt_5_6_terra_bills_cache_writes() -> None:
    assert rates("gpt-5.6-terra", "openai") == pytest.approx((2, 2.50, 0.20, 12))


def test_each_token_kind_has_its_own_rate_in_one_request() -> None:
    usage = TokenUsage(prompt_tokens=1200, completion_tokens=300, cache_read_tokens=5000)
    # Sonnet 4.5: 1200 * 3 + 300 * 15 + 5000 * 0.30, per million
    expected = (3600 + 4500 + 1500) / 1e6
    assert cost_usd("claude-sonnet-4-5", usage, provider="anthropic") == pytest.approx(expected)


def test_the_rates_shown_are_what_a_request_costs() -> None:
    """A table price's four rates (the dry run's bound uses ``output``) agree with its own
    calculation for every Anthropic and OpenAI model without a long-context tier."""
    checked = 0
    for provider in ("anthropic", "openai"):
        for info in next(p for p in _table().providers if p.id == provider).models:
            price = price_for(info.id, provider=provider)
            if not isinstance(price, TablePrice) or price.tiered:
                continue
            checked += 1
            usage = TokenUsage(
                prompt_tokens=1000, completion_tokens=700, cache_read_tokens=300
            )  # no writes: some models price them per TTL
            flat = Price(price.input, price.output, price.cache_write, price.cache_read)
            assert price.cost(usage) == pytest.approx(flat.cost(usage), abs=1e-12), info.id
    assert checked > 50


# ------------------------------------------------------------------ tiers: per request


LONG = TokenUsage(prompt_tokens=250_000, completion_tokens=1_000)
HALF = TokenUsage(prompt_tokens=150_000, completion_tokens=1_000)


def sonnet_4_5() -> Price:
    price = price_for("claude-sonnet-4-5-20250929", provider="anthropic")
    assert price is not None
    return price


def test_a_250k_token_request_is_priced_at_the_long_context_price() -> None:
    # above 200K input tokens: $6 input, $22.50 output per million (not $3 / $15)
    assert sonnet_4_5().cost(LONG) == pytest.approx(250_000 * 6 / 1e6 + 1_000 * 22.5 / 1e6)


def test_a_turn_of_two_150k_requests_is_priced_at_the_normal_price() -> None:
    price = sonnet_4_5()
    per_request = [price.cost(HALF), price.cost(HALF)]
    assert sum(c for c in per_request if c is not None) == pytest.approx(
        2 * (150_000 * 3 / 1e6 + 1_000 * 15 / 1e6)
    )
    # what pricing the turn's summed usage (300K input "in one request") would wrongly say
    summed = price.cost(HALF + HALF)
    assert summed == pytest.approx(300_000 * 6 / 1e6 + 2_000 * 22.5 / 1e6)


def test_the_tier_counts_cached_input_and_prices_cache_tokens_at_its_rates() -> None:
    price = sonnet_4_5()
    # 50K uncached + 200K read from the cache: 250K input, so every rate is the long one
    read = TokenUsage(prompt_tokens=50_000, cache_read_tokens=200_000, completion_tokens=1_000)
    assert price.cost(read) == pytest.approx((50_000 * 6 + 200_000 * 0.60 + 1_000 * 22.5) / 1e6)
    written = TokenUsage(prompt_tokens=50_000, cache_creation_tokens=200_000)
    assert price.cost(written) == pytest.approx((50_000 * 6 + 200_000 * 7.50) / 1e6)
    # exactly 200K is still the normal price; one more token is not
    assert price.cost(TokenUsage(prompt_tokens=200_000)) == pytest.approx(0.6)
    assert price.cost(TokenUsage(prompt_tokens=200_001)) == pytest.approx(200_001 * 6 / 1e6)


def test_openai_long_context_tier_starts_above_272k_input_tokens() -> None:
    price = price_for("gpt-5.4", provider="openai")
    assert price is not None
    assert price.cost(TokenUsage(prompt_tokens=272_000)) == pytest.approx(272_000 * 2.5 / 1e6)
    assert price.cost(TokenUsage(prompt_tokens=272_001)) == pytest.approx(272_001 * 5 / 1e6)


def test_a_flat_price_is_the_same_per_request_or_summed() -> None:
    flat = price_for("claude-haiku-4-5", provider="anthropic")
    assert flat is not None and not getattr(flat, "tiered", True)
    assert flat.cost(LONG) == pytest.approx((250_000 * 1 + 1_000 * 5) / 1e6)


@pytest.mark.parametrize(
    "usage",
    [
        TokenUsage(),
        TokenUsage(prompt_tokens=10**15, completion_tokens=10**15),  # huge: still a number
    ],
)
def test_extreme_usage_is_still_priced(usage: TokenUsage) -> None:
    cost = sonnet_4_5().cost(usage)
    assert cost is not None and cost >= 0 and cost == cost * 1  # finite, not NaN


def test_usage_the_table_refuses_is_unpriced_not_a_crash() -> None:
    hostile = TokenUsage.model_construct(prompt_tokens=-5)  # bypasses TokenUsage's checks
    assert sonnet_4_5().cost(hostile) is None


USAGES = [
    TokenUsage(),
    TokenUsage(prompt_tokens=1_200, completion_tokens=50),
    TokenUsage(prompt_tokens=900, completion_tokens=7, cache_read_tokens=4_000),
    TokenUsage(prompt_tokens=10, completion_tokens=1, cache_creation_tokens=3_000),
    TokenUsage(prompt_tokens=150_000, completion_tokens=900, cache_read_tokens=60_000),
    TokenUsage(prompt_tokens=272_001, completion_tokens=3, cache_creation_tokens=1),
    TokenUsage(prompt_tokens=10**12, completion_tokens=10**12, cache_read_tokens=10**9),
]


def test_a_request_costs_what_genai_prices_own_calculation_says() -> None:
    """The per-price work done once (:func:`multiturn_eval.pricing._resolved`) changes no
    cost: every model the anthropic, openai and azure tables sell, flat and tiered, with
    usages below and above the tiers, costs exactly what ``ModelInfo.calc_price`` says."""
    from datetime import UTC, datetime

    checked = 0
    for provider in ("anthropic", "openai", "azure"):
        source = next(p for p in _table().providers if p.id == provider)
        for info in source.models:
            price = _table_price(info.id, provider)
            if price is None:
                continue
            for usage in USAGES:
                engine = price.info.calc_price(
                    table_usage(usage), price.source, genai_request_timestamp=datetime.now(UTC)
                )
                assert price.cost(usage) == float(engine.total_price), (info.id, usage)
                assert price.cost(usage) == price.cost(usage)  # the kept part is reused
                checked += 1
    assert checked > 300


def test_recorded_flat_rates_cost_exactly_what_the_table_says() -> None:
    """What a fixture records (:func:`flat_rates`) prices every request of a flat-priced
    model exactly as the table does, so a replay's cost is the recording's to the last bit;
    a model with a long-context tier records nothing (the table prices it)."""
    import random

    rng = random.Random(7)
    usages = [*USAGES]
    for _ in range(40):
        usages.append(
            TokenUsage(
                prompt_tokens=rng.randrange(0, 150_000),
                completion_tokens=rng.randrange(0, 30_000),
                cache_creation_tokens=rng.choice([0, rng.randrange(0, 40_000)]),
                cache_read_tokens=rng.choice([0, rng.randrange(0, 40_000)]),
            )
        )
    flat = tiered = 0
    for provider in ("anthropic", "openai", "azure"):
        source = next(p for p in _table().providers if p.id == provider)
        for info in source.models:
            price = _table_price(info.id, provider)
            if price is None:
                continue
            found = flat_rates(price)
            if found is None:
                tiered += 1
                continue
            flat += 1
            assert sorted(found) == sorted(RATE_NAMES)
            assert all(is_rate(text) for text in found.values()), found  # read back as written
            recorded = RecordedPrice.from_rates(provider, info.id, found)
            for usage in usages:
                assert recorded.cost(usage) == price.cost(usage), (info.id, usage)
    assert flat > 100 and tiered > 5, (flat, tiered)
    sonnet = _table_price("claude-sonnet-4-5", "anthropic")
    assert sonnet is not None and sonnet.tiered and flat_rates(sonnet) is None
    haiku = _table_price("claude-haiku-4-5", "anthropic")
    assert haiku is not None
    assert flat_rates(haiku) == {
        "input": "1",
        "output": "5",
        "cache_write": "1.25",
        "cache_read": "0.1",
    }


def test_a_run_prices_at_recorded_rates_only_where_every_fixture_agrees() -> None:
    one = ("1", "5", "1.25", "0.1")
    run = RunPrices()
    run.use_recorded(
        {
            ("anthropic", "claude-haiku-4-5"): [one],
            ("openai", "gpt-4o-mini"): [("0.15", "0.6", "0.15", "0.075"), one],  # disagree
        }
    )
    assert set(run.recorded) == {("anthropic", "claude-haiku-4-5")}
    price = run.recorded["anthropic", "claude-haiku-4-5"]
    assert price.cost(TokenUsage(prompt_tokens=MILLION, completion_tokens=MILLION)) == 6.0


@pytest.mark.parametrize("seed", range(5))
def test_a_requests_table_usage_is_the_one_genai_prices_makes(seed: int) -> None:
    """:func:`table_usage` stores whole counts without genai-prices' constructor: the same
    ``Usage`` as the constructor makes, on random counts (zeros and huge ones included)."""
    import random

    from genai_prices import Usage

    rng = random.Random(seed)
    for _ in range(200):
        fields = {
            key: rng.choice([0, 1, rng.randrange(10**6), 10**15])
            for key in ("prompt_tokens", "completion_tokens", "cache_creation_tokens")
        }
        fields["cache_read_tokens"] = rng.choice([0, 7, 10**9])
        usage = TokenUsage(**fields)
        made = table_usage(usage)
        built = Usage(
            input_tokens=usage.prompt_tokens
            + usage.cache_creation_tokens
            + usage.cache_read_tokens,
            cache_write_tokens=usage.cache_creation_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            output_tokens=usage.completion_tokens,
        )
        assert type(made) is Usage and vars(made) == vars(built)
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "input_audio_tokens"):
            assert getattr(made, key) == getattr(built, key)  # inferred ones too
    hostile = TokenUsage.model_construct(prompt_tokens=-5, completion_tokens=True)
    with pytest.raises(ValueError):
        table_usage(hostile)  # genai-prices' own check, as before


def test_random_requests_cost_what_genai_prices_own_calculation_says() -> None:
    """The same on random usages, each model of the anthropic and openai tables."""
    import random
    from datetime import UTC, datetime

    rng = random.Random(7)
    for provider in ("anthropic", "openai"):
        source = next(p for p in _table().providers if p.id == provider)
        for info in source.models:
            price = _table_price(info.id, provider)
            if price is None:
                continue
            for _ in range(5):
                usage = TokenUsage(
                    prompt_tokens=rng.choice([0, rng.randrange(300_000), 10**13]),
                    completion_tokens=rng.randrange(20_000),
                    cache_creation_tokens=rng.choice([0, rng.randrange(50_000)]),
                    cache_read_tokens=rng.choice([0, rng.randrange(400_000)]),
                )
                engine = price.info.calc_price(
                    table_usage(usage), price.source, genai_request_timestamp=datetime.now(UTC)
                )
                assert price.cost(usage) == float(engine.total_price), (info.id, usage)


def test_a_count_not_reported_is_inferred_as_genai_prices_infers_it() -> None:
    """A count the usage leaves out is 0, or an error when a count inside it was reported
    (cache reads without input tokens): the same answer as genai-prices' own calculation,
    every time (it is worked out once per set of reported counts)."""
    from datetime import UTC, datetime

    from genai_prices import Usage

    price = _table_price("claude-sonnet-4-5", "anthropic")
    assert price is not None
    calculate = _resolved(price.info.get_prices(datetime.now(UTC)))
    for usage in (
        Usage(output_tokens=10),  # no input reported: inferred 0
        Usage(input_tokens=100, output_tokens=10),  # no cache counts: inferred 0
        Usage(input_tokens=5, cache_read_tokens=0, output_tokens=1),
    ):
        engine = price.info.calc_price(
            usage, price.source, genai_request_timestamp=datetime.now(UTC)
        )
        assert calculate(usage) == calculate(usage) == float(engine.total_price)
    refused = Usage(cache_read_tokens=50, output_tokens=1)  # inside input, input not reported
    with pytest.raises(ValueError) as engine_error:
        price.info.calc_price(refused, price.source, genai_request_timestamp=datetime.now(UTC))
    for _ in range(2):
        with pytest.raises(ValueError) as ours:
            calculate(refused)
        assert str(ours.value) == str(engine_error.value)


# ------------------------------------------------------------------ providers


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-sonnet-4-5", "openai"),  # OpenAI does not sell Claude
        ("gpt-4o", "anthropic"),
        ("llama3.1:8b", "openai"),  # a self-hosted model behind an OpenAI-compatible server
        ("gpt-6", "openai"),
        ("claude-sonnet-9-9", "anthropic"),
        ("claude-mythos-5", "anthropic"),  # not in genai-prices 0.2.3
        ("claude-test-1", "anthropic"),
        ("gpt-4o", "no-such-provider"),
        ("", "openai"),
        (None, "openai"),
    ],
)
def test_a_model_the_provider_does_not_list_has_no_price(model: str | None, provider: str) -> None:
    assert price_for(model, provider=provider) is None
    assert cost_usd(model, TokenUsage(prompt_tokens=10), provider=provider) is None


def test_azure_prices_openai_models() -> None:
    price = price_for("gpt-4o", provider="azure")
    assert isinstance(price, TablePrice) and price.provider == "azure"
    assert rates("gpt-4o", "azure") == pytest.approx((2.50, 2.50, 1.25, 10.00))


def test_without_a_provider_genai_prices_guesses_it_from_the_model_id() -> None:
    guessed = price_for("gpt-4o-mini")
    assert isinstance(guessed, TablePrice) and guessed.provider == "openai"
    assert price_for("llama3.1:8b") is None


@pytest.mark.parametrize(
    ("config", "provider"),
    [
        ({"backend": "anthropic", "model": "m"}, "anthropic"),
        ({"backend": "openai", "model": "m"}, "openai"),
        ({"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"}, "openai"),
        ({"backend": "openai", "model": "m", "service": "azure"}, "azure"),
        (
            {
                "backend": "openai",
                "model": "m",
                "azure": {"endpoint": "https://x.openai.azure.com"},
            },
            "azure",
        ),
        ({"backend": "semantic-kernel", "service": "openai", "model": "m"}, "openai"),
        (
            {
                "backend": "semantic-kernel",
                "service": "azure-openai",
                "model": "m",
                "base_url": "https://x",
            },
            "azure",
        ),
        ({"backend": "semantic-kernel", "service": "anthropic", "model": "m"}, "anthropic"),
        ({"backend": "python", "factory": "tests.agents:scripted"}, None),
        ({"backend": "http", "url": "http://127.0.0.1:1/"}, None),
    ],
)
def test_the_provider_comes_from_the_backend(
    config: dict[str, object], provider: str | None
) -> None:
    suite = Suite.model_validate({"agent": config, "test_cases": [{"input": "hi"}]})
    assert agent_provider(suite.agent) == provider


def test_a_judges_provider_comes_from_its_backend() -> None:
    assert judge_provider("anthropic") == "anthropic"
    assert judge_provider("openai") == "openai"
    assert judge_provider("openai", "2024-10-21") == "azure"


# ------------------------------------------------------------------ the suite's pricing:


def test_suite_price_overrides_the_table_and_prices_unknown_models() -> None:
    overrides = {
        "claude-sonnet-4-5": ModelPrice(input=1, output=2, cache_write=3, cache_read=4),
        "gpt-4o-mini": ModelPrice(input=0.15, output=0.60),
        "my-finetune-v2": ModelPrice(input=0.5, output=1.5),
    }
    both = TokenUsage(
        prompt_tokens=MILLION,
        completion_tokens=MILLION,
        cache_creation_tokens=MILLION,
        cache_read_tokens=MILLION,
    )
    # the override wins over the table, for the dated id too, on any provider
    for provider in ("anthropic", None):
        assert cost_usd(
            "claude-sonnet-4-5-20250929", both, overrides, provider=provider
        ) == pytest.approx(10)
    # it is flat: a 250K request is not long-context priced
    assert cost_usd("claude-sonnet-4-5", LONG, overrides) == pytest.approx(0.25 + 0.002)
    # cache prices default to 1.25x and 0.1x of the input price (not the table's 0.075)
    assert cost_usd("gpt-4o-mini", both, overrides, provider="openai") == pytest.approx(
        0.15 + 0.60 + 0.15 * 1.25 + 0.015
    )
    assert cost_usd("my-finetune-v2", both, overrides, provider="openai") == pytest.approx(
        0.5 + 1.5 + 0.625 + 0.05
    )
    # untouched models keep the table's price
    assert cost_usd("claude-haiku-4-5", both, overrides, provider="anthropic") == pytest.approx(
        1 + 5 + 1.25 + 0.10
    )


def test_exact_suite_key_wins_over_a_family_key() -> None:
    overrides = {
        "claude-sonnet-4-5": ModelPrice(input=1, output=1),
        "claude-sonnet-4-5-20250929": ModelPrice(input=2, output=2, cache_write=0, cache_read=0),
    }
    usage = TokenUsage(prompt_tokens=MILLION)
    assert cost_usd("claude-sonnet-4-5-20250929", usage, overrides) == pytest.approx(2)


# ------------------------------------------------------------------ no network


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every connection and name lookup fails (and is recorded); the caches are emptied
    so the table is read again under the ban."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    _table.cache_clear()
    _table_price.cache_clear()
    yield attempts
    _table.cache_clear()
    _table_price.cache_clear()


def test_prices_need_no_network(no_network: list[object]) -> None:
    for model, provider in (("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "azure"), ("o3", None)):
        price = price_for(model, provider=provider)
        assert price is not None and price.cost(LONG) is not None
    assert no_network == []
    assert not [t for t in threading.enumerate() if t.name.startswith("genai_prices")]


def test_prices_another_library_downloads_do_not_change_a_run(no_network: list[object]) -> None:
    """genai-prices' UpdatePrices swaps its global table for a downloaded one; the
    runner's prices come from the bundled data whatever a library in the process does."""
    import copy
    from decimal import Decimal

    from genai_prices import Usage, calc_price, data_snapshot
    from genai_prices.data import providers
    from genai_prices.types import ModelPrice as TableModelPrice

    changed = copy.deepcopy(providers)
    anthropic = next(p for p in changed if p.id == "anthropic")
    for info in anthropic.models:
        info.prices = TableModelPrice(input_mtok=Decimal(1000), output_mtok=Decimal(1000))
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(changed, from_auto_update=True))
    try:
        downloaded = calc_price(
            Usage(input_tokens=MILLION), "claude-haiku-4-5", provider_id="anthropic"
        )
        assert float(downloaded.total_price) == 1000  # the global table did change
        assert rates("claude-haiku-4-5", "anthropic") == pytest.approx((1, 1.25, 0.10, 5))
    finally:
        data_snapshot.set_custom_snapshot(None)


# ------------------------------------------------------------------ whole runs, fresh processes

#: the CLI in a fresh interpreter with every connection and name lookup that is not to the
#: loopback interface refused (and recorded), every thread start recorded
PROBE = textwrap.dedent(
    """
    import json, socket, sys, threading

    refused, threads = [], []

    def loopback(host):
        return isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost"))

    def guard(address):
        host = address[0] if isinstance(address, tuple) else address
        if not isinstance(address, (str, bytes)) and not loopback(host):
            refused.append(repr(address))
            raise OSError("network access refused by the test")

    _connect, _connect_ex, _getaddrinfo = (
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo
    )
    socket.socket.connect = lambda self, address: (guard(address), _connect(self, address))[1]
    socket.socket.connect_ex = lambda self, a: (guard(a), _connect_ex(self, a))[1]

    def getaddrinfo(host, *args, **kwargs):
        guard((host.decode() if isinstance(host, bytes) else host, 0))
        return _getaddrinfo(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
    _start = threading.Thread.start

    def start(self):
        threads.append(self.name)
        return _start(self)

    threading.Thread.start = start

    from multiturn_eval.cli import main

    code = main(sys.argv[1:])
    print("\\nPROBE " + json.dumps({
        "code": code, "refused": refused, "threads": threads,
        "genai_prices": "genai_prices" in sys.modules,
        "httpx2": "httpx2" in sys.modules,
    }))
    """
)

CLAUDE_SUITE = """\
agent: {backend: anthropic, model: claude-sonnet-4-5-20250929, max_tokens: 2000}
test_cases:
  - {name: long, turns: [{input: read this long document}]}
"""


def probe(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return run_probe(PROBE, cwd, argv, env)


def test_a_priced_run_with_a_spend_cap_touches_no_network(tmp_path: Path) -> None:
    """The whole CLI, the real anthropic SDK against the fake server: the table is loaded,
    the long-context request priced by it, the cap accepted, and nothing beyond loopback
    is looked up or connected to, nor is genai-prices' updater thread started."""
    (tmp_path / "suite.yaml").write_text(CLAUDE_SUITE)
    reply = text("done", AnthropicUsage(input_tokens=250_000, output_tokens=1_000))
    with FakeAnthropic(lambda request: reply) as fake:
        env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
        result = probe(
            tmp_path,
            "run",
            "suite.yaml",
            "-o",
            "out",
            "--max-cost",
            "5",
            "--format",
            "json",
            env=env,
        )
        assert len(fake.messages_requests()) == 1
    assert result["code"] == 0, result
    assert result["genai_prices"] is True  # the table was used (so the checks below can fail)
    assert result["refused"] == []
    assert not [name for name in result["threads"] if name.startswith("genai_prices")]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    expected = 250_000 * 6 / 1e6 + 1_000 * 22.5 / 1e6  # the long-context rates
    assert report["results"][0]["turns"][0]["cost_usd"] == pytest.approx(expected)
    assert report["summary"]["cost_usd"] == pytest.approx(expected)


HAIKU_SUITE = """\
agent: {backend: anthropic, model: %s, max_tokens: 2000}
test_cases:
  - {name: refund, turns: [{input: where is my refund?}, {input: and the fee?}]}
"""


def cost_of(cwd: Path) -> float:
    report = json.loads((cwd / "out" / "report.json").read_text())
    cost: float = report["summary"]["cost_usd"]
    return cost


@pytest.mark.parametrize("model", ["claude-haiku-4-5", "claude-sonnet-4-5"])
def test_a_replay_prices_at_the_rates_its_fixture_recorded_and_reads_no_table(
    tmp_path: Path, model: str
) -> None:
    """Recording writes a flat-priced model's rates into the fixture's meta entry; the replay
    prices its calls at them without importing genai-prices (nor httpx2), to the same cost.
    Rates edited in the fixture are what the replay charges (they are read, not ignored);
    a fixture without them, or a model with a long-context tier, is priced from the table."""
    (tmp_path / "suite.yaml").write_text(HAIKU_SUITE % model)
    argv = ("run", "suite.yaml", "-o", "out", "--format", "json")
    reply = text("done", AnthropicUsage(input_tokens=1_000, output_tokens=100))
    with FakeAnthropic(lambda request: reply) as fake:
        env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
        recorded = probe(tmp_path, *argv, "--fixtures", "record", env=env)
    assert recorded["code"] == 0, recorded
    recorded_cost = cost_of(tmp_path)
    assert recorded_cost > 0
    fixture = tmp_path / "fixtures" / "suite" / "refund.jsonl"
    lines = fixture.read_text().splitlines()
    meta = json.loads(lines[0])
    table = _table_price(model, "anthropic")
    assert table is not None

    def replay() -> dict[str, Any]:
        return probe(tmp_path, *argv, "--fixtures", "replay", env={"ANTHROPIC_BASE_URL": fake.url})

    if table.tiered:
        assert "prices" not in meta
        replayed = replay()
        assert replayed["code"] == 0, replayed
        assert replayed["genai_prices"] is True and cost_of(tmp_path) == recorded_cost
        return
    assert meta["prices"] == {"anthropic": {model: flat_rates(table)}}
    replayed = replay()
    assert replayed["code"] == 0, replayed
    assert (replayed["genai_prices"], replayed["httpx2"]) == (False, False)
    assert cost_of(tmp_path) == recorded_cost

    rates = meta["prices"]["anthropic"][model]
    meta["prices"]["anthropic"][model] = {k: str(Decimal(v) * 3) for k, v in rates.items()}
    fixture.write_text("\n".join([json.dumps(meta, sort_keys=True), *lines[1:]]) + "\n")
    replayed = replay()
    assert replayed["code"] == 0 and replayed["genai_prices"] is False, replayed
    assert cost_of(tmp_path) == pytest.approx(3 * recorded_cost)

    del meta["prices"]
    fixture.write_text("\n".join([json.dumps(meta, sort_keys=True), *lines[1:]]) + "\n")
    replayed = replay()
    assert replayed["code"] == 0 and replayed["genai_prices"] is True, replayed
    assert cost_of(tmp_path) == recorded_cost


PYTHON_SUITE = """\
agent: {backend: python, factory: tests.agents:scripted}
test_cases:
  - input: hello
"""

OVERRIDDEN_SUITE = """\
agent: {backend: anthropic, model: claude-in-house-1}
pricing:
  claude-in-house-1: {input: 1, output: 2}
test_cases:
  - input: hello
"""

OVERRIDDEN_JUDGE_SUITE = """\
agent: {backend: python, factory: tests.agents:scripted}
judge: {backend: anthropic, model: claude-in-house-1}
pricing:
  claude-in-house-1: {input: 1, output: 2}
evaluations:
  - {type: judge, rubric: is it polite?}
test_cases:
  - input: hello
"""


@pytest.mark.parametrize(
    ("suite", "argv"),
    [
        (CLAUDE_SUITE, ["validate", "suite.yaml"]),
        (OVERRIDDEN_JUDGE_SUITE, ["run", "suite.yaml", "-o", "out"]),
        (PYTHON_SUITE, ["validate", "suite.yaml"]),
        (PYTHON_SUITE, ["run", "suite.yaml", "-o", "out", "--max-cost", "1"]),
        (OVERRIDDEN_SUITE, ["run", "suite.yaml", "-o", "out", "--max-cost", "1"]),
    ],
)
def test_runs_that_need_no_table_price_never_import_it(
    tmp_path: Path, suite: str, argv: list[str]
) -> None:
    (tmp_path / "suite.yaml").write_text(suite)
    with FakeAnthropic(lambda request: text("hi")) as fake:
        env = {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url}
        result = probe(tmp_path, *argv, env=env)
    assert result["code"] in (0, 1), result
    assert result["genai_prices"] is False


# ------------------------------------------------------------------ --max-cost and the dry run


CAPPED = """\
agent: {backend: openai, model: %s, max_tokens: 100000}
%s
test_cases:
  - {name: a, turns: [{input: hi}, {input: and?}]}
"""


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1-mini", "o3", "gpt-4o-2024-08-06"])
def test_a_cap_accepts_the_common_openai_models_and_bounds_their_spend(
    project: Project, model: str
) -> None:
    project.write("suite.yaml", CAPPED % (model, ""))
    result = project.run("run", "suite.yaml", "--dry-run", "--max-cost", "1")
    assert result.code == 0, result.err
    output = {"gpt-4o-mini": 0.60, "gpt-4.1-mini": 1.60, "o3": 8.00, "gpt-4o-2024-08-06": 10.00}
    bound = 2 * 100_000 * output[model] / 1e6  # two calls x max_tokens x the output price
    assert f"  output-token bound: ${bound:,.2f} " in result.out


def test_a_cap_refuses_a_model_the_backends_provider_does_not_sell(project: Project) -> None:
    project.write("suite.yaml", CAPPED % ("claude-sonnet-4-5", ""))
    result = project.run("run", "suite.yaml", "--dry-run", "--max-cost", "1")
    assert result.code == 2
    assert (
        "suite.yaml:1 agent.model: model 'claude-sonnet-4-5' has no known price (not in "
        f"genai-prices {table_version()} for openai), so a spend cap ($1.00) cannot be kept"
    ) in result.err


def test_a_cap_takes_the_suites_price_for_a_model_no_table_has(project: Project) -> None:
    project.write(
        "suite.yaml", CAPPED % ("llama3.1:8b", "pricing: {llama3.1:8b: {input: 0, output: 0}}")
    )
    result = project.run("run", "suite.yaml", "--dry-run", "--max-cost", "1")
    assert result.code == 0, result.err
    assert "  output-token bound: $0.00 " in result.out


JUDGED = """\
agent: {backend: python, factory: tests.agents:scripted}
judge: {backend: %s, model: %s, api_key: sk-test-key-0123456789%s}
evaluations:
  - {type: judge, rubric: is it polite?}
test_cases:
  - input: hello
"""


@pytest.mark.parametrize(
    ("backend", "model", "extra", "priced"),
    [
        ("openai", "gpt-4.1-mini", "", True),
        (
            "openai",
            "gpt-4o",
            ", base_url: 'https://x.openai.azure.com', api_version: '2024-10-21'",
            True,
        ),
        ("anthropic", "claude-haiku-4-5", "", True),
        ("openai", "claude-haiku-4-5", "", False),  # an OpenAI judge: OpenAI's prices
        ("anthropic", "gpt-4.1-mini", "", False),
    ],
)
def test_a_judges_price_comes_from_its_backends_provider(
    project: Project, backend: str, model: str, extra: str, priced: bool
) -> None:
    project.write("suite.yaml", JUDGED % (backend, model, extra))
    result = project.run("run", "suite.yaml", "--dry-run", "--max-cost", "1")
    if priced:
        assert result.code == 0, result.err
    else:
        assert result.code == 2
        seller = "openai" if backend == "openai" else "anthropic"
        assert f"judge model '{model}' has no known price (not in genai-prices " in result.err
        assert f" for {seller}), so a spend cap" in result.err
