"""``run --dry-run``: what a run would do, with nothing called and nothing written.

The suites are loaded and validated exactly as for a run (so a configuration
error is still exit 2), and the selection is the run's (``-k``, ``--tag``,
``--rerun-failed``, ``--shard``). No backend is created, no factory, agent,
tool or grader is called, the report directory is not created. Exit 0.

Per suite it prints the test cases, turns and model calls: every turn is at
least one call (``repeat`` times); a simulated test case (``user:``) has up to
``max_turns`` turns after its scripted ones, each one simulated-user call (an LLM
simulator: the opening is sent without one) and, with ``fidelity: true``, one
fidelity-judge call; the case's judges run on every one of them; a model backend with tools may make up to
``max_tool_rounds + 1`` calls per turn (the tool rounds and the final
reply), which is the upper figure. ``python`` and ``http`` agents get one
call (``send`` / POST) per turn; what they do behind it is theirs.

The spend bound: upper calls x ``max_tokens`` x the model's output price.
It is rough on purpose: input tokens (which grow with each turn of a
conversation) are not counted, so it is not a ceiling of the bill; it tells
whether a ``--max-cost`` is far above or within reach of what the run's
output alone may cost. A suite with no bound (a ``python`` or ``http`` agent
prices its own replies; a model backend without ``max_tokens``) says why,
and then no headroom is claimed: the cap line says the headroom is unknown,
never "$0.00 ... leaves headroom".

With ``-v`` every selected test case is listed under its suite (name, line,
turns, tags), in the order the run would start them.

With ``--fixtures`` (replay, record, update), every selected test case says
whether its fixture exists and how many recorded calls it holds (per run with
``--repeat``), and the suite how many calls the fixtures cover; the fixtures
are read (a damaged one is exit 2, as for a run), nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .environment import RunEnvironment
from .exit_codes import EXIT_OK
from .spend import dollars

if TYPE_CHECKING:
    from .fixtures.cassette import SuiteFixtures
    from .loaded import PlannedSuite
    from .run import RunOptions


@dataclass(frozen=True)
class SuitePlan:
    suite: str
    backend: str
    model: str | None
    cases: int
    turns: int
    repeat: int
    min_calls: int
    max_calls: int
    output_bound_usd: float | None
    """Upper calls x max_tokens x output price; None when unknown (no price, no max_tokens)."""
    max_cost: float | None
    judge_calls: int = 0
    """LLM-judge calls at most (per judged turn and per conversation judge, ``repeat`` times;
    identical requests are made once, so a run may make fewer)."""
    simulated_cases: int = 0
    """Test cases with a simulated user (``user:``): their turns are bounded by ``max_turns``."""
    user_calls: int = 0
    """Simulated-user model calls at most, one per simulated message (an LLM simulator; a
    reply that does not fit is asked for once more, so a run may make up to twice this)."""
    fidelity_calls: int = 0
    """Fidelity-judge calls at most: one per simulated message of a ``fidelity: true`` case
    (included in ``judge_calls``)."""
    no_bound: str | None = None
    """Why there is no output-token bound (None: there is one)."""
    cases_shown: tuple[str, ...] = ()
    """``-v``: one line per selected test case."""
    fixture_lines: tuple[str, ...] = ()
    """``--fixtures``: the suite's fixtures, then one line per selected test case (and run)."""


def fixture_lines(planned: PlannedSuite, fixtures: SuiteFixtures) -> tuple[str, ...]:
    """Whether each selected test case (each run) has a fixture, and the calls it holds."""
    loaded = planned.loaded
    repeat = max(1, planned.settings.repeat)
    lines: list[str] = []
    held = have = wanted = 0
    for index in planned.indices:
        for run, exists, calls in fixtures.summary(index, repeat):
            which = f", run {run}" if repeat > 1 else ""
            file = fixtures.shown(index, run)
            wanted += 1
            if exists:
                have += 1
                held += calls
                lines.append(
                    f"    {loaded.case_name(index)}{which}: {_plural(calls, 'call')} ({file})"
                )
            else:
                what = "every model call would miss" if fixtures.mode == "replay" else "recorded"
                lines.append(f"    {loaded.case_name(index)}{which}: no fixture ({file}; {what})")
    head = (
        f"  fixtures ({fixtures.mode}, {fixtures.shown_root}): {have} of "
        f"{_plural(wanted, 'fixture')} found, {_plural(held, 'recorded call')}"
    )
    return (head, *lines)


def suite_plan(planned: PlannedSuite, fixtures: SuiteFixtures | None = None) -> SuitePlan:
    from .pricing import agent_provider, judge_provider, price_for
    from .simulation import step_bound
    from .spend import PRICED_BACKENDS

    loaded = planned.loaded
    agent = loaded.suite.agent
    repeat = max(1, planned.settings.repeat)
    cases = loaded.cases  # the index and the simulations: no test case is read
    turns = sum(cases.turn_bound(i) for i in planned.indices)
    calls = turns * repeat
    scripted_calls = sum(cases.turns(i) for i in planned.indices) * repeat
    judge_calls = sum(cases.entry(i).judge_calls for i in planned.indices)
    user_calls = fidelity_calls = simulated = 0
    user_bound: float | None = 0.0
    for i in planned.indices:
        plan = loaded.simulations.get(i)
        if plan is None:
            continue
        simulated += 1
        steps = step_bound(plan.user)
        if plan.fidelity:
            fidelity_calls += steps
        if plan.simulator.backend == "python":
            continue
        user_calls += steps
        price = price_for(
            plan.simulator.model,
            loaded.suite.pricing,
            provider=judge_provider(plan.simulator.backend, plan.simulator.api_version),
        )
        if price is None:
            user_bound = None
        elif user_bound is not None:
            user_bound += 2 * steps * repeat * plan.simulator.max_tokens * price.output / 1e6
    judge_calls += fidelity_calls
    rounds = getattr(agent, "max_tool_rounds", None)
    tools = agent.tools or getattr(agent, "mcp_servers", None)  # an MCP server's tools too
    per_turn = rounds + 1 if agent.backend in PRICED_BACKENDS and tools and rounds else 1
    bound: float | None = None
    provider = agent_provider(agent)
    price = (
        price_for(agent.model, loaded.suite.pricing, provider=provider)
        if provider is not None
        else None
    )
    if price is not None and agent.max_tokens:
        bound = calls * per_turn * agent.max_tokens * price.output / 1_000_000
    if bound is not None and simulated:
        bound = None if user_bound is None else bound + user_bound
    return SuitePlan(
        no_bound=(
            "no price for a simulated-user model"
            if user_bound is None and price is not None and agent.max_tokens
            else _no_bound(agent.backend, agent.model, price is not None, agent.max_tokens)
        )
        if bound is None
        else None,
        cases_shown=tuple(_case_line(planned, i) for i in planned.indices),
        suite=loaded.display_path,
        backend=agent.backend,
        model=agent.model,
        cases=len(planned.indices),
        turns=turns,
        repeat=repeat,
        min_calls=scripted_calls if simulated else calls,
        max_calls=calls * per_turn,
        output_bound_usd=bound,
        max_cost=planned.settings.max_cost,
        judge_calls=judge_calls * repeat,
        simulated_cases=simulated,
        user_calls=user_calls * repeat,
        fidelity_calls=fidelity_calls * repeat,
        fixture_lines=fixture_lines(planned, fixtures) if fixtures is not None else (),
    )


def _no_bound(backend: str, model: str | None, priced: bool, max_tokens: int | None) -> str:
    from .spend import PRICED_BACKENDS

    if backend not in PRICED_BACKENDS:
        return f"a {backend} agent's spend is the cost_usd it reports"
    if not priced:
        return f"no price for {model}"
    return "no max_tokens"


def _case_line(planned: PlannedSuite, index: int) -> str:
    loaded = planned.loaded
    entry = loaded.cases.entry(index)
    if entry.file is not None:  # a case of the test_cases_file: its file and line
        where = f" ({entry.file}:{entry.line})"
    else:
        where = f" (line {entry.line})" if entry.line else ""
    tags = f", tags: {', '.join(entry.tags)}" if entry.tags else ""
    turns = _plural(entry.turns, "turn")
    plan = loaded.simulations.get(index)
    if plan is not None:
        turns = f"{turns} + up to {_plural(plan.user.max_turns, 'simulated message')}"
    return f"{entry.name}{where}: {turns}{tags}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def render(
    plans: Sequence[SuitePlan], header: Sequence[str] = (), *, verbose: bool = False
) -> list[str]:
    lines = ["multiturn-eval: dry run: no agent, tool or grader is called; no report is written"]
    lines += list(header)
    for p in plans:
        model = f", {p.model}" if p.model else ""
        repeat = f", each run {p.repeat} times" if p.repeat > 1 else ""
        turns = _plural(p.turns, "turn")
        if p.simulated_cases:
            turns = f"up to {turns} ({_plural(p.simulated_cases, 'simulated test case')})"
        lines.append(
            f"{p.suite} ({p.backend}{model}): {_plural(p.cases, 'test case')}, {turns}{repeat}"
        )
        why = [
            *(["tool rounds"] if p.max_calls > p.turns * p.repeat else []),
            *(["simulated turns"] if p.simulated_cases else []),
        ]
        calls = (
            f"{p.min_calls:,}"
            if p.min_calls == p.max_calls
            else f"{p.min_calls:,} to {p.max_calls:,} ({', '.join(why)})"
        )
        lines.append(f"  {p.backend} calls: {calls}")
        if p.user_calls:
            lines.append(
                f"  simulated-user calls: up to {p.user_calls:,} (one per simulated message, "
                f"max_turns; {p.user_calls * 2:,} if every reply is asked for twice)"
            )
        if p.judge_calls:
            fidelity = (
                f"; {p.fidelity_calls:,} of them the fidelity judge's" if p.fidelity_calls else ""
            )
            lines.append(
                f"  LLM-judge calls: up to {p.judge_calls:,} (identical requests are made once; "
                f"not in the output-token bound{fidelity})"
            )
        if p.output_bound_usd is not None:
            lines.append(
                f"  output-token bound: {dollars(p.output_bound_usd)} "
                "(max_tokens x output price on every call; input tokens not counted)"
            )
        elif p.max_cost is not None and p.cases:
            lines.append(f"  output-token bound: none ({p.no_bound})")
        lines += list(p.fixture_lines)
        if verbose and p.cases_shown:
            lines.append("  test cases:")
            lines += [f"    {case}" for case in p.cases_shown]
    per_backend: dict[str, list[int]] = {}
    for p in plans:
        counts = per_backend.setdefault(p.backend, [0, 0])
        counts[0] += p.min_calls
        counts[1] += p.max_calls
    total_cases = sum(p.cases for p in plans)
    total_turns = sum(p.turns for p in plans)
    calls_text = ", ".join(
        f"{name} {lo:,}" + (f"-{hi:,}" if hi != lo else "")
        for name, (lo, hi) in per_backend.items()
    )
    judged = sum(p.judge_calls for p in plans)
    users = sum(p.user_calls for p in plans)
    lines.append(
        f"total: {_plural(total_cases, 'test case')}, {_plural(total_turns, 'turn')}; "
        f"calls per backend: {calls_text or 'none'}"
        + (f"; simulated-user calls up to {users:,}" if users else "")
        + (f"; LLM-judge calls up to {judged:,}" if judged else "")
    )
    caps = sorted({p.max_cost for p in plans if p.max_cost is not None})
    if caps:
        lines.append(_cap_line(caps[0], plans))
    return lines


def _cap_line(cap: float, plans: Sequence[SuitePlan]) -> str:
    """The spend cap against the bound; no headroom is claimed for what has no bound."""
    running = [p for p in plans if p.cases]
    known = [p for p in running if p.output_bound_usd is not None]
    unknown = [p for p in running if p.output_bound_usd is None]
    bound = sum(p.output_bound_usd or 0.0 for p in known)
    line = f"spend cap: {dollars(cap)}"
    if not unknown:
        verdict = (
            "the cap leaves headroom over that bound"
            if bound < cap
            else "the run may reach the cap (then the remaining test cases are skipped)"
        )
        return f"{line}; rough output-token bound {dollars(bound)}: {verdict}"
    if known:
        line += (
            f"; rough output-token bound {dollars(bound)} for {', '.join(p.suite for p in known)}"
        )
    reasons = ", ".join(f"{p.suite} ({p.no_bound})" for p in unknown)
    return f"{line}; no bound for {reasons}, so the headroom is unknown"


def dry_run(
    paths: Sequence[str | Path], options: RunOptions, environment: RunEnvironment, out: TextIO
) -> int:
    """Plan the run as :func:`multiturn_eval.run.run_suites` would, print it, exit 0."""
    from .interrupts import InterruptGuard
    from .run import _Pipeline

    pipeline = _Pipeline(options, environment, InterruptGuard(), None, None)
    plan = pipeline.plan(paths)
    header: list[str] = []
    if pipeline.shard_info is not None:
        shard = pipeline.shard_info["shard"]
        header.append(
            f"shard {shard['index']}/{shard['total']} (split {shard['split_id']}): "
            "the test cases below are this shard's"
        )
    if pipeline.kept:
        header.append(f"--keep-passed: {_plural(len(pipeline.kept), 'passed result')} carried over")
    for planned in plan:
        for warning in planned.loaded.warnings:
            header.append(f"warning: {warning}")
    plans = [suite_plan(p, pipeline.fixtures.get(i)) for i, p in enumerate(plan)]
    for line in render(plans, header, verbose=options.verbosity > 0):
        out.write(line + "\n")
    return EXIT_OK
