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

Decisions:

* A model missing from the table has no price: ``cost_usd`` stays None (a
  guess would be worse than nothing). Not in the table on purpose: Opus 5.5
  and Haiku 5.5 (their cache prices, and Haiku 5.5's prompt-length tiers,
  were not confirmed from Anthropic's own pages when this was written). Add
  them, or any other model (an OpenAI one for ``semantic-kernel``), under
  ``pricing:`` in the suite.
* The 1-hour cache write rate, long-context surcharges (Sonnet 4/4.5 above
  200K input tokens), batch discounts and regional multipliers are not
  modelled: the runner sends 5-minute ``cache_control`` blocks, synchronously.
* Model ids resolve to their family: ``claude-sonnet-4-5-20250929``,
  ``claude-sonnet-4-5-latest`` and ``claude-sonnet-4-5`` share one price; the
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

#: model family -> price (see the module docstring for sources)
BUILTIN_PRICES: dict[str, Price] = {
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

_SUFFIXES = (
    re.compile(r"\[1m\]$"),  # the 1M-context variant name some tools use
    re.compile(r"-(latest|\d{8})$"),  # -20250929, -latest
    re.compile(r"-0$"),  # claude-sonnet-4-0 is claude-sonnet-4
)


def model_family(model: str) -> str:
    """``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5`` (lower case, suffixes dropped)."""
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
