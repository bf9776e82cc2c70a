"""What a request's tokens cost (SPEC 6.8): genai-prices' table, overridable in the suite.

Where a price comes from, first match wins:

1. the suite's ``pricing:`` (US dollars per million tokens: input, output and,
   optionally, 5-minute cache writes and cache hits), by the exact model id,
   then by its family (``claude-sonnet-4-5`` prices ``claude-sonnet-4-5-20250929``);
2. `genai-prices <https://github.com/pydantic/genai-prices>`_, pydantic's
   maintained table of provider prices, the data bundled in the installed
   package (pinned in ``pyproject.toml``: upgrading the package updates the
   prices). It knows the model ids and snapshots of each provider, cache reads
   and writes, prices that changed on a date, and long-context tiers;
3. nothing: ``cost_usd`` stays None (a guess would be worse than nothing), and
   ``--max-cost`` refuses such an agent or judge model (:mod:`multiturn_eval.spend`).

Decisions:

* **Per request.** :meth:`Price.cost` prices ONE request's usage: a tier is
  chosen by that request's input (claude-sonnet-4-5 above 200K input tokens,
  GPT-5.4 above 272K), so a turn's cost is the sum of its requests' costs, never
  the cost of their summed usage (two 150K requests are not one 300K request).
* **The provider comes from the backend**, not from the model's name:
  ``anthropic`` -> Anthropic, ``openai`` -> OpenAI (Azure OpenAI with
  ``service: azure``), ``semantic-kernel`` -> its ``service``, a judge -> its
  ``backend`` (Azure with ``api_version``). A model the provider does not list
  has no price, even if another provider sells one of that name; genai-prices
  itself lets Azure fall back to OpenAI's and Anthropic's prices. An
  OpenAI-compatible server at another ``base_url`` is priced as OpenAI
  (a self-hosted model is not in OpenAI's table, so it stays unpriced). Only a
  caller that names no provider gets genai-prices' guess from the model id.
* **No network, ever.** genai-prices can download newer prices (its opt-in
  ``UpdatePrices``); nothing here starts it, and prices are looked up in a
  table built from the bundled data only (:func:`_table`), so even another
  library in the same process that does fetch cannot change a run's prices.
* **Imported lazily.** The table is about 70 ms of imports: it is loaded the
  first time a model is not covered by the suite's ``pricing:``, never by
  ``validate``, ``schema`` or runs of ``python`` and ``http`` agents.
* **Usage mapping.** ``TokenUsage.prompt_tokens`` is uncached input on every
  backend; genai-prices counts input with the cached parts included::

      input_tokens = prompt + cache_creation + cache_read
      cache_write_tokens = cache_creation      (5-minute writes: the runner sends no others)
      cache_read_tokens = cache_read
      output_tokens = completion               (reasoning tokens are a part of it)

  A cache-read or cache-write count the table has no separate price for is
  priced as input (OpenAI models before GPT-5.6 report no writes).
* **A replay prices at the recording's prices.** Recording a fixture writes, in its
  meta entry, the table's per-million-token rates of each model its calls name, when
  the model has one flat rate per kind of token (no long-context tier, no other
  priced unit our usage could reach: :func:`flat_rates` checks the four rates give
  exactly the table's cost). ``--fixtures replay`` prices its calls at those rates
  (:meth:`RunPrices.use_recorded`, for a provider and model every fixture of the
  run agrees on), so it never reads the table: no genai-prices import (about 60 ms),
  and the "recorded cost not spent" is what the calls cost when they were
  recorded. A model without recorded rates (a tier, an older fixture, fixtures that
  disagree) is priced from the table as in any run; a suite's ``pricing:`` always wins.
* Standard rates only: no batch, flex or priority tiers, no regional multipliers.
* A suite price without ``cache_write`` / ``cache_read`` uses Anthropic's usual
  multipliers of the input price (1.25x and 0.1x), as ``ModelPrice`` documents.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .suite import ModelPrice, OpenAIAgent, SemanticKernelAgent
from .types import TokenUsage

if TYPE_CHECKING:
    from genai_prices import Usage
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelInfo, Provider, TieredPrices
    from genai_prices.types import ModelPrice as TableModelPrice

    from .suite import AgentConfig

#: the multipliers of the input price a suite price defaults to
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1

#: semantic-kernel's ``service`` -> the provider whose prices apply
_SK_PROVIDERS = {"openai": "openai", "azure-openai": "azure", "anthropic": "anthropic"}


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens, the same for every request (a suite's ``pricing:``)."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def cost(self, usage: TokenUsage) -> float | None:
        """What one request's ``usage`` costs, in US dollars (None: it cannot be priced)."""
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


@dataclass(frozen=True, kw_only=True)
class TablePrice(Price):
    """A model's entry in genai-prices.

    The four rates above are its base rates on the day it was looked up (below
    any long-context tier), for the dry run's bound and for people to read;
    :meth:`cost` is genai-prices' own calculation, which also picks the tier the
    request's input reaches and the price in force on the request's day.
    """

    provider: str
    """genai-prices' provider id (``anthropic``, ``openai``, ``azure``, ...)"""
    model_id: str
    """genai-prices' id of the model (``claude-sonnet-4-5`` for ``claude-sonnet-4-5-20250929``)"""
    tiered: bool
    """Some rate depends on the request's input tokens (a long-context tier)."""
    info: ModelInfo = field(repr=False, compare=False)
    source: Provider = field(repr=False, compare=False)

    def cost(self, usage: TokenUsage) -> float | None:
        from genai_prices.types import ModelPrice as TableModelPrice

        try:
            request = table_usage(usage)
            prices = self.info.prices
            if isinstance(prices, TableModelPrice):  # one price, whatever the date
                return _resolved(prices)(request)
            # prices that change on a date: the one in force now, as genai-prices picks it
            return _resolved(self.info.get_prices(datetime.now(UTC)))(request)
        except (ValueError, ArithmeticError):  # counts the table refuses (negative ones)
            return None


#: the four rates a fixture's meta entry records, in this order
RATE_NAMES = ("input", "output", "cache_write", "cache_read")
_MILLION = Decimal(1_000_000)


@dataclass(frozen=True, kw_only=True)
class RecordedPrice(Price):
    """A model's flat rates as a fixture recorded them (from genai-prices, on the day of the
    recording): what a replay prices its calls at. :meth:`cost` is genai-prices' own
    arithmetic for a flat price (each count times its rate, in Decimal, summed), so a
    replayed call costs exactly what it cost when it was recorded."""

    provider: str
    model_id: str
    rates: tuple[Decimal, Decimal, Decimal, Decimal]
    """input, output, cache_write, cache_read: US dollars per million tokens"""

    @classmethod
    def from_rates(cls, provider: str, model: str, rates: Mapping[str, str]) -> RecordedPrice:
        values = tuple(Decimal(rates[name]) for name in RATE_NAMES)
        return cls(
            input=float(values[0]),
            output=float(values[1]),
            cache_write=float(values[2]),
            cache_read=float(values[3]),
            provider=provider,
            model_id=model,
            rates=(values[0], values[1], values[2], values[3]),
        )

    def cost(self, usage: TokenUsage) -> float | None:
        counts = (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cache_creation_tokens,
            usage.cache_read_tokens,
        )
        if min(counts) < 0:  # as the table refuses them
            return None
        total = Decimal(0)
        for rate, count in zip(self.rates, counts, strict=True):
            total += rate * count / _MILLION
        return float(total)


def flat_rates(price: TablePrice) -> dict[str, str] | None:
    """``price``'s four rates as a fixture records them (decimal text), or None when they do
    not price every request exactly as the table does (a tier, another priced unit)."""
    if price.tiered:
        return None
    from genai_prices.types import ModelPrice as TableModelPrice

    now = price.info.get_prices(datetime.now(UTC))
    base = now.input_mtok
    output = now.output_mtok
    if not isinstance(base, Decimal) or not isinstance(output, Decimal):
        return None
    write, read = now.cache_write_mtok, now.cache_read_mtok
    rates = {
        "input": base,
        "output": output,
        "cache_write": write if write is not None else base,
        "cache_read": read if read is not None else base,
    }
    if not all(isinstance(rate, Decimal) and rate >= 0 for rate in rates.values()):
        return None
    text = {name: str(rates[name]) for name in RATE_NAMES}
    recorded = RecordedPrice.from_rates(price.provider, price.model_id, text)
    # the same cost as the table's own calculation, one kind of token at a time and together
    probes = [
        TokenUsage(prompt_tokens=1_234_567),
        TokenUsage(completion_tokens=765_432),
        TokenUsage(cache_creation_tokens=345_678),
        TokenUsage(cache_read_tokens=456_789),
        TokenUsage(
            prompt_tokens=1_001,
            completion_tokens=2_003,
            cache_creation_tokens=3_005,
            cache_read_tokens=4_007,
        ),
    ]
    table = price.info.prices
    if not isinstance(table, TableModelPrice):  # dated prices: today's, as the table picks
        table = now
    calculate = _resolved(table)
    try:
        if any(calculate(table_usage(u)) != recorded.cost(u) for u in probes):
            return None
    except (ValueError, ArithmeticError):
        return None
    return text


class RunPrices:
    """One run's prices as fixtures see them (:func:`run_prices`): the table prices it looked
    up, which a recording writes down, and the recorded ones a replay prices at."""

    def __init__(self) -> None:
        self.recorded: dict[tuple[str, str], RecordedPrice] = {}
        """(provider, model) -> the fixtures' rates (:meth:`use_recorded`)"""
        self.looked_up: dict[tuple[str, str], TablePrice] = {}
        """(model, provider) -> the table's price, as this run asked for it"""
        self._flat: dict[tuple[str, str], dict[str, str] | None] = {}
        """(model, provider) -> its :func:`flat_rates`, worked out once a run"""

    def recordable(self, models: Iterable[str]) -> dict[str, dict[str, dict[str, str]]]:
        """provider -> model -> rates, for those of ``models`` (a fixture's) whose table price
        this run looked up and that have flat rates (:func:`flat_rates`)."""
        wanted = set(models)
        out: dict[str, dict[str, dict[str, str]]] = {}
        for key, price in list(self.looked_up.items()):
            model, provider = key
            if model in wanted:
                if key not in self._flat:  # each fixture written asks again
                    self._flat[key] = flat_rates(price)
                rates = self._flat[key]
                if rates is not None:
                    out.setdefault(provider, {})[model] = rates
        return out

    def use_recorded(self, found: Mapping[tuple[str, str], Iterable[tuple[str, ...]]]) -> None:
        """Price (provider, model) at the rates the fixtures recorded, where every fixture
        that names it recorded the same four (``found``: the distinct rate tuples, in
        :data:`RATE_NAMES` order); the others stay the table's."""
        for (provider, model), rates in found.items():
            distinct = set(rates)
            if len(distinct) == 1:
                named = dict(zip(RATE_NAMES, distinct.pop(), strict=True))
                self.recorded[provider, model] = RecordedPrice.from_rates(provider, model, named)


_RUN: ContextVar[RunPrices | None] = ContextVar("multiturn_eval_run_prices", default=None)


def current_run_prices() -> RunPrices | None:
    """The running run's prices (None outside :func:`run_prices`)."""
    return _RUN.get()


@contextlib.contextmanager
def run_prices() -> Iterator[RunPrices]:
    """The scope of one run's :class:`RunPrices` (``run_suites``): :func:`price_for` consults
    its recorded prices and notes its table lookups; outside it, neither."""
    prices = RunPrices()
    token = _RUN.set(prices)
    try:
        yield prices
    finally:
        _RUN.reset(token)


def table_usage(usage: TokenUsage) -> Usage:
    """One request's usage as genai-prices counts it (the mapping in the module docstring:
    its input includes the cached parts).

    Counts that are whole numbers, none negative (every usage the runner makes) are
    stored as genai-prices' ``Usage.__init__`` stores them once it has checked them (its
    check of each, a tenth of a request's price, passes them unchanged); any other
    goes through that check.
    """
    from genai_prices import Usage

    counts = {
        "input_tokens": usage.prompt_tokens + usage.cache_creation_tokens + usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_creation_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "output_tokens": usage.completion_tokens,
    }
    if all(type(v) is int and v >= 0 for v in counts.values()) and _plain_usage():
        made = object.__new__(Usage)
        vars(made).update(counts)
        return made
    return Usage(**counts)


@functools.cache
def _plain_usage() -> bool:
    """genai-prices' ``Usage`` keeps checked whole counts as they are, in its ``__dict__``
    (what :func:`table_usage` relies on; checked once, on a sample, when first priced)."""
    from genai_prices import Usage

    try:
        sample = {"input_tokens": 3, "cache_write_tokens": 0, "output_tokens": 2}
        return vars(Usage(**sample)) == sample
    except Exception:  # another genai-prices: its own constructor then
        return False


_RESOLVED: dict[int, tuple[object, Callable[[Usage], float]]] = {}
"""id(ModelPrice) -> (the ModelPrice, its calculation): the part of genai-prices'
``ModelPrice.calc_price`` that is the same for every request, done once per price."""


def _resolved(price: TableModelPrice) -> Callable[[Usage], float]:
    """``price``'s calculation of one request's usage, its per-price work done once.

    genai-prices' ``ModelPrice.calc_price`` resolves the price's units, validates them and
    works out which unit's count includes which (the order of its decomposition) on every
    call: about two thirds of its 120-140 us, and all of it depends on the price alone.
    This does that once and runs the rest of the same calculation per request, with
    genai-prices' own functions: each priced unit's count read from the usage (its
    inference of counts not reported included) less the counts of the units inside it, a
    negative one refused; each unit's rate (the tier that request's input reaches) times
    its count, summed in Decimal. Where genai-prices lacks the private helpers this uses
    (another version), its public ``calc_price`` is used whole. ``tests/test_pricing.py``
    checks the two agree over the table's models.
    """
    entry = _RESOLVED.get(id(price))
    if entry is not None and entry[0] is price:
        return entry[1]
    calculate: Callable[[Usage], float]
    try:
        from genai_prices._usage import subtract_usage_values
        from genai_prices.decompose import _usage_value, is_descendant_or_self
        from genai_prices.types import (
            TieredPrices,
            _collect_resolved_model_prices,
            calc_unit_price,
        )
        from genai_prices.units import _get_registry
        from genai_prices.validation import validate_priced_units
    except ImportError:  # pragma: no cover - another genai-prices: its whole calculation

        def calculate(usage: Usage) -> float:
            return float(price.calc_price(usage)["total_price"])

    else:
        registry = _get_registry()
        units = _collect_resolved_model_prices(price, registry)
        validate_priced_units(tuple(unit for unit, _ in units), registry)
        tiered = any(isinstance(rate, TieredPrices) for _, rate in units)
        # genai-prices' compute_leaf_values: the most specific units first, each less the
        # units it includes (``requests`` is counted apart: one per request)
        by_key = {unit.usage_key: unit for unit, _ in units if unit.usage_key != "requests"}
        order = sorted(by_key.values(), key=lambda unit: (-len(unit.dimensions), unit.usage_key))
        plan = [
            (
                unit.usage_key,
                tuple(
                    inner.usage_key
                    for inner in order
                    if inner is not unit and is_descendant_or_self(unit, inner)
                ),
            )
            for unit in order
        ]
        per_request = any(unit.usage_key == "requests" for unit, _ in units)

        # A count the usage does not report is inferred by genai-prices (``Usage.__getattr__``:
        # 0, or an error when a more specific count was reported without it), from nothing but
        # which counts were reported above 0: worked out once per such set, not per request.
        inferred: dict[tuple[str, frozenset[str]], Any] = {}

        def inferred_count(usage: Usage, key: str, positive: frozenset[str]) -> Any:
            known = inferred.get((key, positive))
            if known is None:
                try:
                    known = _usage_value(usage, key)
                except ValueError as exc:
                    known = exc
                inferred[(key, positive)] = known
            if isinstance(known, ValueError):
                raise ValueError(*known.args)
            return known

        # (key, rate, per, flat rate): a flat rate (a Decimal, not tiers) times a whole count
        # is done here with calc_unit_price's own Decimal operations, in the same order
        rates = [
            (unit.usage_key, rate, unit.per, rate if isinstance(rate, Decimal) else None)
            for unit, rate in units
        ]

        def calculate(usage: Usage) -> float:
            values = vars(usage)  # what __init__ stored (validated; a None is never stored)
            positive: frozenset[str] | None = None  # the counts reported above 0
            counts: dict[str, Any] = {}
            for key, inner in plan:
                if key in values:
                    count = values[key]
                else:
                    if positive is None:
                        positive = frozenset(k for k, v in values.items() if v)
                    count = inferred_count(usage, key, positive)
                less = [counts[k] for k in inner]
                if type(count) is int and all(type(v) is int for v in less):
                    count -= sum(less)  # subtract_usage_values of whole counts
                else:
                    count = subtract_usage_values(count, less)
                if count < 0:
                    raise ValueError(f"{key} less the counts it includes is negative")
                counts[key] = count
            if per_request:
                counts["requests"] = 1
            threshold = usage.input_tokens if tiered else 0
            total = Decimal(0)
            for key, rate, per, flat in rates:
                count = counts[key]
                if flat is not None and type(count) is int:
                    total += flat * Decimal(count) / per
                else:
                    total += calc_unit_price(rate, count, threshold, per)
            return float(total)

    _RESOLVED[id(price)] = (price, calculate)
    return calculate


def model_family(model: str) -> str:
    """``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``, ``gpt-5.4-2026-03-05`` ->
    ``gpt-5.4`` (lower case, suffixes dropped): how the suite's ``pricing:`` keys match."""
    family = model.strip().lower()
    for suffix in _SUFFIXES:
        family = suffix.sub("", family)
    return family


_SUFFIXES = (
    re.compile(r"\[1m\]$"),  # the 1M-context variant name some tools use
    re.compile(r"-(latest|\d{8}|\d{4}-\d{2}-\d{2})$"),  # -20250929, -latest, -2026-03-17
    re.compile(r"-0$"),  # claude-sonnet-4-0 is claude-sonnet-4
)


def agent_provider(agent: AgentConfig) -> str | None:
    """The provider whose prices apply to an agent's requests; None for the backends that
    price their own turns (``python``, ``http``)."""
    if isinstance(agent, OpenAIAgent):
        return "azure" if agent.on_azure else "openai"
    if isinstance(agent, SemanticKernelAgent):
        return _SK_PROVIDERS[agent.service]
    return "anthropic" if agent.backend == "anthropic" else None


def judge_provider(backend: str, api_version: str | None = None) -> str:
    """The provider whose prices apply to a judge's calls (an ``api_version``: Azure OpenAI)."""
    return "azure" if backend == "openai" and api_version is not None else backend


def price_for(
    model: str | None,
    overrides: Mapping[str, ModelPrice] | None = None,
    *,
    provider: str | None = None,
) -> Price | None:
    """The price of ``model`` bought from ``provider``: the suite's exact key, its family key,
    then, in a run that replays fixtures, the rates they recorded (:class:`RunPrices`), then
    genai-prices' table (``provider`` None: genai-prices guesses it from the model id)."""
    if not model:
        return None
    overrides = overrides or {}
    if model in overrides:
        return Price.from_model_price(overrides[model])
    family = model_family(model)
    for key, given in overrides.items():
        if model_family(key) == family:
            return Price.from_model_price(given)
    run = _RUN.get()
    if run is None or provider is None:
        return _table_price(model.strip(), provider)
    recorded = run.recorded.get((provider, model))
    if recorded is not None:
        return recorded
    table = _table_price(model.strip(), provider)
    if table is not None:
        run.looked_up[model, provider] = table
    return table


def cost_usd(
    model: str | None,
    usage: TokenUsage,
    overrides: Mapping[str, ModelPrice] | None = None,
    *,
    provider: str | None = None,
) -> float | None:
    """The cost of one request's ``usage`` on ``model``; None when the price is unknown."""
    price = price_for(model, overrides, provider=provider)
    return None if price is None else price.cost(usage)


def table_version() -> str:
    """The installed genai-prices version: which table the prices come from."""
    from genai_prices import __version__

    return __version__


def unpriced(provider: str | None) -> str:
    """Where a model without a price was looked for, for an error message:
    ``not in genai-prices 0.2.3 for openai``."""
    where = f" for {provider}" if provider else ""
    return f"not in genai-prices {table_version()}{where}"


@functools.cache
def _table() -> DataSnapshot:
    """The bundled price data, in a table of our own: genai-prices' global one is replaced
    by whatever an ``UpdatePrices`` in the process downloads."""
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


@functools.lru_cache(maxsize=512)
def _table_price(model: str, provider: str | None) -> TablePrice | None:
    try:
        source, info = _table().find_provider_model(model, None, provider, None)
    except LookupError:  # an unknown provider, or a model the provider does not list
        return None
    rates = info.get_prices(datetime.now(UTC))
    input_rate, output_rate = rates.input_mtok, rates.output_mtok
    if input_rate is None and output_rate is None:
        return None  # priced per image, second or request, not per token
    base_input = _base(input_rate)
    read, write = rates.cache_read_mtok, rates.cache_write_mtok
    tiered = any(_is_tiered(rate) for rate in (input_rate, output_rate, read, write))
    return TablePrice(
        input=base_input,
        output=_base(output_rate),
        cache_write=base_input if write is None else _base(write),
        cache_read=base_input if read is None else _base(read),
        provider=source.id,
        model_id=info.id,
        tiered=tiered,
        info=info,
        source=source,
    )


def _base(rate: Decimal | TieredPrices | None) -> float:
    if rate is None:
        return 0.0
    return float(rate if isinstance(rate, Decimal) else rate.base)


def _is_tiered(rate: Decimal | TieredPrices | None) -> bool:
    return rate is not None and not isinstance(rate, Decimal)
