"""``--max-cost``: the estimated spend of a run, and the cap on it.

Decisions (where SPEC and the issue leave room):

* **What counts.** :func:`spend_of` is the one place that says what a
  finished test case cost: the agent's ``cost_usd`` (summed over every run of
  a repeated case) plus what its LLM judges cost (``judge_cost_usd``, when
  the result has it) plus what its simulated user cost (``simulation.user_cost_usd``,
  every run's). A cost the backend could not price counts 0; that is
  why a priced model is required (below). Calls answered from the fixtures
  (``--fixtures replay`` / ``update``) were not made: their recorded cost
  (``fixture.replayed_cost_usd``) does not count.
* **When it stops.** Before a test case starts, the spend of the finished
  cases is compared with the cap; once it *reaches or passes* the cap no new
  case starts. Cases already running finish (their cost is added: the final
  spend may pass the cap by up to ``parallel_test_cases`` cases). Every case
  that did not start is in the reports as skipped, with the reason
  ``not started: spend cap of $X reached ($Y spent)``, so the run exits 1
  (not 3: it ended as configured, and nothing was silently dropped).
* **Scope.** The cap counts the whole run (every suite, one after another);
  a suite's ``execution.max_cost`` is the cap its own cases are checked
  against, and ``--max-cost`` (or ``MULTITURN_EVAL_MAX_COST``) wins over it.
  With ``--shard``, every shard is a run of its own: the cap is per shard.
* **Unknown prices.** With a cap, a suite on the ``anthropic``, ``openai`` or
  ``semantic-kernel`` backend whose model has no price (genai-prices' table
  for the backend's provider, or the suite's ``pricing:``), or a judge model or
  an LLM simulated user's model without one, is a configuration error (exit 2, before any call): its spend
  could not be counted. ``python`` and ``http`` agents
  price their own turns (``cost_usd`` in their reply): they are allowed,
  with a warning that only the cost they report counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import ConfigIssue

if TYPE_CHECKING:
    from .loaded import PlannedSuite
    from .results import CaseResult

#: backends whose cost the runner computes from the price table
PRICED_BACKENDS = frozenset({"anthropic", "semantic-kernel", "openai"})


def spend_of(case: CaseResult) -> float:
    """The estimated spend of one finished test case, in US dollars (agent, judges and the
    simulated user: every run's), live calls only: what a fixture answered (``--fixtures``)
    was not spent."""
    agent = sum(run.cost_usd or 0.0 for run in case.runs) if case.runs else case.cost_usd or 0.0
    user = case.simulation.user_cost_usd or 0.0 if case.simulation is not None else 0.0
    fixtures = [r.fixture for r in case.runs] if case.runs else [case.fixture]
    replayed = sum(f.replayed_cost_usd or 0.0 for f in fixtures if f is not None)
    return max(0.0, agent + (case.judge_cost_usd or 0.0) + user - replayed)


def dollars(amount: float) -> str:
    """``$5.00``, ``$0.25``; an amount that two decimals would change keeps its digits
    (``$0.002``, not ``$0.00``), so a cap is never printed as something it is not."""
    text = f"{amount:,.2f}"
    if float(text.replace(",", "")) != amount:
        text = f"{amount:,.6g}" if amount < 1 else f"{amount:,.4f}".rstrip("0")
    return "$" + text


def cap_reason(cap: float, spent: float) -> str:
    """The reason every test case the cap kept from starting carries."""
    return f"not started: spend cap of {dollars(cap)} reached (${spent:.4f} spent)"


def cap_notice(cap: float, spent: float, not_started: int) -> str:
    """The one line the console (and the Action's warning) says when the cap stopped a run."""
    return (
        f"spend cap of {dollars(cap)} reached (${spent:.4f} spent): {not_started} test "
        f"case{'s' if not_started != 1 else ''} not started (skipped)"
    )


def price_issues(plan: Sequence[PlannedSuite]) -> tuple[list[ConfigIssue], list[str]]:
    """(configuration errors, warnings) of a capped run's suites, before anything runs."""
    from .pricing import agent_provider, price_for

    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    for planned in plan:
        cap = planned.settings.max_cost
        if cap is None or not planned.indices:
            continue
        loaded = planned.loaded
        for (model, provider), (file, line, where) in loaded.judge_models.items():
            if price_for(model, loaded.suite.pricing, provider=provider) is None:
                issues.append(_unpriced("judge model", model, provider, cap, (file, line, where)))
        issues.extend(_simulator_price_issues(planned, cap))
        agent = loaded.suite.agent
        if agent.backend not in PRICED_BACKENDS:
            warnings.append(
                f"{loaded.display_path}: the spend cap ({dollars(cap)}) counts only the cost_usd "
                f"your {agent.backend} agent reports with each reply"
            )
            continue
        seller = agent_provider(agent)
        if price_for(agent.model, loaded.suite.pricing, provider=seller) is None:
            at = loaded.located(("agent", "model"))
            issues.append(_unpriced("model", agent.model, seller, cap, at))
    return issues, warnings


def _unpriced(
    what: str,
    model: str | None,
    provider: str | None,
    cap: float,
    where: tuple[str, int | None, str],
) -> ConfigIssue:
    """``model`` has no price, so the cap cannot be kept: a configuration error at ``where``
    (file, line, field)."""
    from .pricing import unpriced

    file, line, field = where
    return ConfigIssue(
        f"{what} {model!r} has no known price ({unpriced(provider)}), so a spend cap "
        f"({dollars(cap)}) cannot be kept; give its price under 'pricing:' (US dollars per "
        "million tokens: input, output), or drop --max-cost",
        file=file,
        line=line,
        field=field,
    )


def _simulator_price_issues(planned: PlannedSuite, cap: float) -> list[ConfigIssue]:
    """A capped run's LLM simulated users need a price, as its judges do (said once a model)."""
    from .pricing import judge_provider, price_for

    loaded = planned.loaded
    issues: list[ConfigIssue] = []
    seen: set[tuple[str, str]] = set()
    for index in planned.indices:
        plan = loaded.simulations.get(index)
        model = plan.simulator.model if plan is not None else None
        if plan is None or model is None:
            continue
        simulator = plan.simulator
        provider = judge_provider(simulator.backend, simulator.api_version)
        if (model, provider) in seen:
            continue
        seen.add((model, provider))
        if price_for(model, loaded.suite.pricing, provider=provider) is not None:
            continue
        own = plan.user.simulator
        where: tuple[str | int, ...] = (
            ("test_cases", index, "user", "simulator", "model")
            if own is not None and own.model is not None
            else ("user_simulator", "model")
        )
        issues.append(
            _unpriced("simulated-user model", model, provider, cap, loaded.located(where))
        )
    return issues
