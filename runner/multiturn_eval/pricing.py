"""What a turn's tokens cost (SPEC 6.8): a built-in price table, overridable in the suite.

Prices are US dollars per million tokens: base input, output, 5-minute cache
writes and cache hits. ``TokenUsage`` maps onto them one to one (the
``anthropic`` backend puts the API's uncached ``input_tokens`` into
``prompt_tokens``)::

    cost = (prompt * input + completion * output
            + cache_creation * cache_write + cache_read * cache_read_price) / 1e6

Sources (read 2026-11-30):

* https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing":
  Fable/Mythos 5 and 5.1, Opus 4.1 to 5) and its zh-CN edition
  https://platform.claude.com/docs/zh-CN/about-claude/pricing (Opus 3 to 4.6,
  Sonnet 3.7 to 4.6, Haiku 3 to 4.5);
* the model overview pages
  https://platform.claude.com/docs/en/models/sonnet-5/overview and
  .../sonnet-5-5/overview (Sonnet 5 and 5.5: $2 input, $2.50 5m write, $10
  output). The Sonnet 5.5 overview says $0.20 for cache hits; several pricing
  trackers report Anthropic cut it to $0.10 on 2026-10-07, which is the value
  used here (the pricing page is the reference: check it if you rely on it).

OpenAI models (:data:`OPENAI_PRICES`, for the ``openai`` backend and
``semantic-kernel`` on ``service: openai``/``azure-openai``), read 2026-12-01
from GitHub's published per-token price list for the models it serves, which
lists OpenAI's own API rates (input, cached input, output and, from GPT-5.6 on,
cache writes):
https://github.com/github/docs/blob/main/data/tables/copilot/models-and-pricing.yml
(its Anthropic rows agree with the Anthropic table above to the cent). OpenAI's
own page, https://developers.openai.com/api/docs/pricing, could not be read
when this was written: check it if you rely on these. Only the default tier
is modelled (GPT-5.4 and 5.5 up to 272K input tokens, GPT-5.6 Luna up to
200K); longer prompts cost more. Models before GPT-5 mini (gpt-4o,
gpt-4o-mini, gpt-4.1, o3, ...) are not in the table on purpose: their prices
were not confirmed from a page readable here; they cost ``null`` unless the
suite's ``pricing:`` names them. OpenAI reports ``prompt_tokens`` with the
cached part included; the backends move it to ``cache_read_tokens``, so the
formula below holds for both providers. OpenAI models before GPT-5.6 charge
nothing for cache writes (``cache_write`` = 0).

Decisions:

* A model missing from the table has no price: ``cost_usd`` stays None (a
  guess would be worse than nothing). Not in the table on purpose: Opus 5.5
  and Haiku 5.5 (their cache prices, and Haiku 5.5's prompt-length tiers,
  were not confirmed from Anthropic's own pages when this was written). Add
  them, or any other model, under ``pricing:`` in the suite.
* The 1-hour cache write rate, long-context surcharges (Sonnet 4/4.5 above
  200K input tokens), batch discounts and regional multipliers are not
  modelled: the runner sends 5-minute ``cache_control`` blocks, synchronously.
* Model ids resolve to their family: ``claude-sonnet-4-5-20250929``,
  ``claude-sonnet-4-5-latest`` and ``claude-sonnet-4-5`` share one price (as
  do OpenAI snapshots such as ``gpt-5.4-mini-2026-03-17``); the
  suite's ``pricing:`` keys resolve the same way, and an exact key wins over a
  family key.
* A suite price without ``cache_write`` / ``cache_read`` uses Anthropic's usual
  multipliers of the input price (1.25x and 0.1x), as ``ModelPrice`` documents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .suite import ModelPrice
from .types import TokenUsage

#: the multipliers of the input price a suite price defaults to
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def cost(self, usage: TokenUsage) -> float:
        return (
            usage.prompt_tokens * self.input
            + usage.completion_tokens * self.output
            + usage.cache_creation_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        ) / 1_000_000

    @classmethod
    def from_model_price(cls, price: ModelPrice) -> Price:
        return cls(
            input=price.input,
            output=price.output,
            cache_write=price.cache_write
            if price.cache_write is not None
            else price.input * CACHE_WRITE_FACTOR,
            cache_read=price.cache_read
            if price.cache_read is not None
            else price.input * CACHE_READ_FACTOR,
        )


def _p(input: float, cache_write: float, cache_read: float, output: float) -> Price:
    # argument order as the pricing page's columns: input, 5m write, hits, output
    return Price(input=input, output=output, cache_write=cache_write, cache_read=cache_read)


_FABLE_51 = _p(10, 12.50, 0.25, 50)
_FABLE_5 = _p(10, 12.50, 1, 50)
_OPUS_45 = _p(5, 6.25, 0.50, 25)
_OPUS_4 = _p(15, 18.75, 1.50, 75)
_SONNET_4 = _p(3, 3.75, 0.30, 15)
_SONNET_5 = _p(2, 2.50, 0.20, 10)

#: Anthropic model family -> price (see the module docstring for sources)
ANTHROPIC_PRICES: dict[str, Price] = {
    "claude-fable-5-1": _FABLE_51,
    "claude-mythos-5-1": _FABLE_51,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5": _OPUS_45,
    "claude-opus-4-8": _OPUS_45,
    "claude-opus-4-7": _OPUS_45,
    "claude-opus-4-6": _OPUS_45,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-3-opus": _OPUS_4,
    "claude-sonnet-5-5": _p(2, 2.50, 0.10, 10),
    "claude-sonnet-5": _SONNET_5,
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-3-7-sonnet": _SONNET_4,
    "claude-haiku-4-5": _p(1, 1.25, 0.10, 5),
    "claude-3-5-haiku": _p(0.80, 1, 0.08, 4),
    "claude-3-haiku": _p(0.25, 0.30, 0.03, 1.25),
}


def _o(input: float, cached: float, output: float, cache_write: float = 0) -> Price:
    # argument order as GitHub's table: input, cached input, output (cache write from GPT-5.6)
    return Price(input=input, output=output, cache_write=cache_write, cache_read=cached)


#: OpenAI model family -> price, default tier (see the module docstring for the source)
OPENAI_PRICES: dict[str, Price] = {
    "gpt-5-mini": _o(0.25, 0.025, 2.00),
    "gpt-5.3-codex": _o(1.75, 0.175, 14.00),
    "gpt-5.4": _o(2.50, 0.25, 15.00),
    "gpt-5.4-mini": _o(0.75, 0.075, 4.50),
    "gpt-5.4-nano": _o(0.20, 0.02, 1.25),
    "gpt-5.5": _o(5.00, 0.50, 30.00),
    "gpt-5.6-luna": _o(0.20, 0.02, 1.20, 0.25),
    "gpt-5.6-sol": _o(5.00, 0.50, 30.00, 6.25),
    "gpt-5.6-terra": _o(2.00, 0.20, 12.00, 2.50),
}

#: every built-in price, by model family
BUILTIN_PRICES: dict[str, Price] = {**ANTHROPIC_PRICES, **OPENAI_PRICES}

_SUFFIXES = (
    re.compile(r"\[1m\]$"),  # the 1M-context variant name some tools use
    re.compile(r"-(latest|\d{8}|\d{4}-\d{2}-\d{2})$"),  # -20250929, -latest, -2026-03-17
    re.compile(r"-0$"),  # claude-sonnet-4-0 is claude-sonnet-4
)


def model_family(model: str) -> str:
    """``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``, ``gpt-5.4-2026-03-05`` ->
    ``gpt-5.4`` (lower case, suffixes dropped)."""
    family = model.strip().lower()
    for suffix in _SUFFIXES:
        family = suffix.sub("", family)
    return family


def price_for(model: str | None, overrides: Mapping[str, ModelPrice] | None = None) -> Price | None:
    """The price of ``model``: the suite's exact key, its family key, then the table."""
    if not model:
        return None
    overrides = overrides or {}
    if model in overrides:
        return Price.from_model_price(overrides[model])
    family = model_family(model)
    for key, price in overrides.items():
        if model_family(key) == family:
            return Price.from_model_price(price)
    return BUILTIN_PRICES.get(family)


def cost_usd(
    model: str | None, usage: TokenUsage, overrides: Mapping[str, ModelPrice] | None = None
) -> float | None:
    """The cost of ``usage`` on ``model``; None when the price is unknown."""
    price = price_for(model, overrides)
    return None if price is None else price.cost(usage)
