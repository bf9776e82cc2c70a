"""``--max-cost``: the estimated spend of a run, and the cap on it.

Decisions (where SPEC and the issue leave room):

* **What counts.** :func:`spend_of` is the one place that says what a
  finished test case cost: the agent's ``cost_usd`` (summed over every run of
  a repeated case) plus what its LLM judges cost (``judge_cost_usd``, when
  the result has it). A cost the backend could not price counts 0; that is
  why a priced model is required (below).
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
  for the backend's provider, or the suite's ``pricing:``), or a judge model
  without one, is a configuration error (exit 2, before any call): its spend
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
    """The estimated spend of one finished test case, in US dollars (agent and judges)."""
    agent = sum(run.cost_usd or 0.0 for run in case.runs) if case.runs else case.cost_usd or 0.0
    return agent + (case.judge_cost_usd or 0.0)


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
    from .pricing import agent_provider, price_for, unpriced

    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    for planned in plan:
        cap = planned.settings.max_cost
        if cap is None or not planned.indices:
            continue
        loaded = planned.loaded
        for (model, provider), (file, line, where) in loaded.judge_models.items():
            if price_for(model, loaded.suite.pricing, provider=provider) is None:
                issues.append(
                    ConfigIssue(
                        f"judge model {model!r} has no known price ({unpriced(provider)}), so "
                        f"a spend cap ({dollars(cap)}) cannot be kept; give its price under "
                        "'pricing:' (US dollars per million tokens: input, output), or drop "
                        "--max-cost",
                        file=file,
                        line=line,
                        field=where,
                    )
                )
        agent = loaded.suite.agent
        if agent.backend not in PRICED_BACKENDS:
            warnings.append(
                f"{loaded.display_path}: the spend cap ({dollars(cap)}) counts only the cost_usd "
                f"your {agent.backend} agent reports with each reply"
            )
            continue
        seller = agent_provider(agent)
        if price_for(agent.model, loaded.suite.pricing, provider=seller) is None:
            issues.append(
                ConfigIssue(
                    f"model {agent.model!r} has no known price ({unpriced(seller)}), so a "
                    f"spend cap ({dollars(cap)}) cannot be kept; give its price under "
                    "'pricing:' (US dollars per million tokens: input, output), or drop "
                    "--max-cost",
                    file=loaded.display_path,
                    line=loaded.document.line_of(("agent", "model")),
                    field="agent.model",
                )
            )
    return issues, warnings
