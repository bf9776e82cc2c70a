"""Facts every human-facing report shows, computed once (pure; no I/O).

The JUnit, Markdown, HTML and console renderers all need the same few
derived facts about a result: the status of a case or turn, the first reason
it failed, the checks that failed on a turn, durations and counts in words.
They live here so the reports agree with each other; pass/fail itself is
decided in :mod:`multiturn_eval.results`, never here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from ..gc_pause import with_gc_paused
from ..results import (
    CaseResult,
    RegradeInfo,
    Report,
    RunFixtures,
    Simulation,
    SimulatorInfo,
    Summary,
    TurnResult,
)
from ..types import TokenUsage, ToolInvocation

TurnStatus = Literal["passed", "failed", "error", "skipped"]

gc_paused = with_gc_paused
"""A renderer run with the cyclic garbage collector paused (:mod:`..gc_pause`)."""


STATUS_ICON: dict[str, str] = {
    "passed": "✅",
    "failed": "❌",
    "error": "⚠️",
    "skipped": "⏭️",
}
STATUS_WORD: dict[str, str] = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "skipped": "skipped",
}


def flips_line(info: RegradeInfo) -> str:
    """``regrade of report.json: 12 turns regraded; 2 passed -> failed, 1 failed -> passed; ...``"""
    line = (
        f"regrade of {info.file}: {info.turns_regraded:,} turn(s) regraded; "
        f"{info.flipped_to_failed:,} passed -> failed, {info.flipped_to_passed:,} failed -> passed"
    )
    if info.turns_not_regradable:
        line += f"; {info.turns_not_regradable:,} turn(s) not regradable"
    return line


# ------------------------------------------------------------------------ statuses


def fixtures_line(fixtures: RunFixtures) -> str:
    """The run's fixtures in one sentence (``--fixtures``): what was replayed, from
    recordings of which date and model, what was recorded, missed or left unused."""
    dates = fixtures.recorded_at
    when = ""
    if dates:
        first, last = (d[:10] for d in dates)  # ISO dates, UTC
        when = f" recorded on {first}" if first == last else f" recorded {first} to {last}"
    models = sorted({m for names in fixtures.models.values() for m in names})
    shown = f" ({', '.join(models)})" if models else ""
    parts: list[str] = []
    if fixtures.replayed or fixtures.mode == "replay":
        parts.append(
            f"Replayed from fixtures{when}{shown}: {plural(fixtures.replayed, 'model call')}"
            + (", none sent" if not fixtures.recorded else "")
        )
    if fixtures.recorded or fixtures.mode in ("record", "update"):
        files = plural(fixtures.written, "fixture file")
        calls = plural(fixtures.recorded, "model call")
        if parts:
            parts.append(f"recorded {calls} live ({files} written)")
        else:
            on = f" on {when.split()[-1]}" if when and fixtures.written else ""
            parts.append(f"Recorded {calls} live into fixtures{on}{shown}: {files} written")
    if fixtures.missed:
        parts.append(f"{plural(fixtures.missed, 'call')} not in the fixtures")
    if fixtures.unused:
        word = "dropped" if fixtures.mode == "update" else "no longer made"
        parts.append(f"{plural(fixtures.unused, 'recorded call')} {word}")
    text = "; ".join(parts) + f" ({fixtures.dir})"
    if fixtures.replayed_cost_usd:
        text += f"; recorded cost not spent: {cost(fixtures.replayed_cost_usd)}"
    return text + "."


def turn_status(turn: TurnResult) -> TurnStatus:
    if turn.skipped:
        return "skipped"
    if turn.passed:
        return "passed"
    return "error" if turn.infrastructure_error else "failed"


@dataclass(frozen=True)
class Check:
    """One failed check on a turn, in words."""

    kind: Literal["error", "tools", "metric", "skipped"]
    label: str
    text: str


def failed_checks(turn: TurnResult) -> list[Check]:
    """The reasons a turn failed, most telling first (same order as ``failed_checks()``)."""
    checks: list[Check] = []
    for error in turn.errors:
        if turn.skipped:
            checks.append(Check("skipped", "skipped", error.removeprefix("skipped: ")))
        else:
            checks.append(Check("error", "error", error))
    for detail in turn.arg_match_details:
        if detail.reason:
            checks.append(Check("tools", "tools", detail.reason))
    for metric in turn.metric_results:
        if not metric.passed:
            text = f"error: {metric.error}" if metric.error else (metric.reason or "failed")
            checks.append(Check("metric", metric.metric_name, text))
    return checks


def check_text(check: Check) -> str:
    return check.text if check.kind in ("error", "skipped") else f"{check.label}: {check.text}"


CONVERSATION_LABEL = "conversation"
"""How reports name a test case's conversation-level checks."""


def conversation_checks(case: CaseResult) -> list[Check]:
    """The failed conversation-level checks of a case (``scope: conversation`` metrics)."""
    return [
        Check(
            "metric",
            f"{CONVERSATION_LABEL} {m.metric_name}",
            f"error: {m.error}" if m.error else (m.reason or "failed"),
        )
        for m in case.metric_results
        if m.scope == CONVERSATION_LABEL and not m.passed
    ]


def conversation_lines(case: CaseResult) -> list[str]:
    """``conversation polite: score 0.2 ...`` for every failed conversation-level check."""
    return [check_text(c) for c in conversation_checks(case)]


@dataclass(frozen=True)
class FirstFailure:
    turn: TurnResult | None
    """The first failing turn; None when the case failed before any turn (or was not run)."""
    reason: str
    """``turn 2: numeric: expected 3, got 4`` or the case-level error."""
    more: int = 0
    """How many other checks failed on that turn."""


def first_failure(case: CaseResult) -> FirstFailure | None:
    """Why a case did not pass, in one line; None when it passed."""
    if case.passed:
        return None
    if case.skipped:
        return FirstFailure(None, case.errors[0] if case.errors else "not run")
    turn = case.first_failing_turn()
    conversation = conversation_checks(case)
    if turn is not None:
        checks = failed_checks(turn)
        if checks:
            return FirstFailure(
                turn,
                f"turn {turn.turn_index + 1}: {check_text(checks[0])}",
                len(checks) - 1 + len(conversation),
            )
        return FirstFailure(turn, f"turn {turn.turn_index + 1}: failed", len(conversation))
    if case.errors:
        return FirstFailure(None, case.errors[0], len(conversation))
    if conversation:
        return FirstFailure(None, check_text(conversation[0]), len(conversation) - 1)
    skipped = [t for t in case.all_turns() if t.skipped and t.errors]
    if skipped:
        return FirstFailure(None, skipped[0].errors[0])
    return FirstFailure(None, "failed")


def importance(case: CaseResult) -> tuple[int, int]:
    """Sort key for which failures to show first when space is short.

    A failed check (what the suite is about) before an infrastructure error
    before a case that was not run; then earliest failing turn. The caller
    keeps suite order among equals (``sorted`` is stable).
    """
    rank = {"failed": 0, "error": 1, "skipped": 2}.get(case.outcome, 3)
    first = case.first_failing_turn()
    return rank, first.turn_index if first is not None else 0


# --------------------------------------------------------------------------- words


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else (plural_noun or noun + 's')}"


def duration(ms: float) -> str:
    """850 ms, 12.3 s, 2m 05s, 1h 02m."""
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def judge_usage(usage: TokenUsage | None, usd: float | None) -> str | None:
    """``1,234 judge tokens, est. $0.0012`` (None when no LLM judge ran)."""
    if usage is None:
        return None
    text = f"{usage.total_tokens:,} judge tokens"
    return text + (f", est. {cost(usd)}" if usd is not None else "")


def cost(usd: float | None) -> str:
    if usd is None:
        return "n/a"
    if usd == 0:
        return "$0.00"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


_encode_string: Callable[[str], str] = json.encoder.encode_basestring
"""A string as a JSON literal (the C encoder ``json.dumps`` uses, without its overhead)."""


def value_text(value: Any) -> str:
    """A tool argument or result as compact text (JSON when it is structured)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):  # a circular structure from a tool: show its repr
        return repr(value)


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def call_text(call: ToolInvocation) -> str:
    """``subtract(a=206588, b="181001") -> 25587`` (or ``-> error: ...``); a call an MCP
    server served says which: ``get_balance(account_id="A-1") via MCP billing -> ...``."""
    args = ", ".join(f"{k}={_arg_text(v)}" for k, v in call.args.items())
    text = f"{call.name}({args})"
    if call.server:
        text += f" via MCP {call.server}"
    if call.error:
        return f"{text} -> error: {call.error}"
    if call.result is not None:
        return f"{text} -> {value_text(call.result)}"
    return text


def calls_text(calls: Iterable[ToolInvocation]) -> str:
    return "; ".join(call_text(c) for c in calls)


# ------------------------------------------------------------------------ the run


def suite_set_id(suites: Iterable[str]) -> str:
    """A stable id of the set of suite files (order and ``./`` do not matter)."""
    paths = sorted({PurePosixPath(s.replace("\\", "/")).as_posix() for s in suites})
    return hashlib.sha256("\n".join(paths).encode()).hexdigest()[:12]


_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SERVER = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?")
_SHA = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True)
class RunLinks:
    run_url: str
    artifacts_url: str
    commit_url: str | None = None


def run_links(report: Report) -> RunLinks | None:
    """Links to the GitHub Actions run recorded in the report's ``run.github`` block.

    Values that do not look like GitHub's are ignored rather than put in a link.
    """
    github = report.run.github
    if github is None:
        return None
    server = github.server_url.rstrip("/")
    repo = github.repository
    run_id = github.run_id
    if not (_SERVER.fullmatch(server) and _REPO.fullmatch(repo) and run_id.isdigit()):
        return None
    run_url = f"{server}/{repo}/actions/runs/{run_id}"
    attempt = github.run_attempt or ""
    if attempt.isdigit() and attempt != "1":
        run_url += f"/attempts/{attempt}"
    sha = report.run.git_sha
    commit_url = f"{server}/{repo}/commit/{sha}" if sha and _SHA.fullmatch(sha) else None
    return RunLinks(run_url=run_url, artifacts_url=f"{run_url}#artifacts", commit_url=commit_url)


# ------------------------------------------------------------------------ repeats


def is_flaky(case: CaseResult) -> bool:
    """The runs of a repeated case disagreed (some passed, some failed)."""
    return case.repeat is not None and case.repeat.flaky


def varying_turns(case: CaseResult) -> list[str]:
    """``["turn 3 passed 2 of 5", ...]``: the turns whose outcome varied between runs.

    A repeated case whose runs all failed the same turns has none; its
    consistently failing turns are :func:`failing_turn_counts`.
    """
    if case.repeat is None:
        return []
    varying = set(case.repeat.varying_turns)
    return [
        f"turn {c.turn_index + 1} passed {c.passed} of {c.runs}"
        for c in case.repeat.turn_pass_counts
        if c.turn_index in varying
    ] + varying_case_checks(case)


def varying_case_checks(case: CaseResult) -> list[str]:
    """``["conversation check polite passed 1 of 2"]``: the conversation-level checks
    (``scope: conversation``) whose outcome varied between the runs of a repeated case,
    and ``case-level errors in 1 of 2 runs`` when only some runs had one. A simulated
    case's runs that were invalid simulations are left out (they are not in its verdict),
    and when its runs ended differently the outcomes are said first
    (``the simulated user ended goal_met in 3, gave_up in 2 runs``)."""
    if not case.runs:
        return []
    runs = [r for r in case.runs if r.simulation is None or not r.simulation.invalid]
    out = [ended] if (ended := varying_outcomes(case)) else []
    passed: dict[str, list[bool]] = {}
    for run in runs:
        for metric in run.metric_results:
            if metric.scope == "conversation":
                passed.setdefault(metric.metric_name, []).append(metric.passed)
    out += [
        f"conversation check {name} passed {sum(flags)} of {len(flags)}"
        for name, flags in passed.items()
        if 0 < sum(flags) < len(flags)
    ]
    errored = sum(1 for run in runs if run.errors)
    if 0 < errored < len(runs):
        out.append(f"case-level errors in {errored} of {len(runs)} runs")
    return out


def varying_outcomes(case: CaseResult) -> str | None:
    """``the simulated user ended goal_met in 3, gave_up in 2 runs`` when the runs of a
    simulated case ended differently (invalid simulations not counted); else None."""
    outcomes = case.repeat.outcomes if case.repeat is not None else None
    counted = {k: n for k, n in (outcomes or {}).items() if k != "invalid_simulation"}
    if len(counted) < 2:
        return None
    return (
        "the simulated user ended "
        + ", ".join(f"{outcome} in {n}" for outcome, n in counted.items())
        + " runs"
    )


def failing_turn_counts(case: CaseResult) -> list[str]:
    """Every turn that failed in some run, with its pass count (varying or not)."""
    if case.repeat is None:
        return []
    return [
        f"turn {c.turn_index + 1} passed {c.passed} of {c.runs}"
        for c in case.repeat.turn_pass_counts
        if c.passed < c.runs
    ]


def runs_text(case: CaseResult) -> str | None:
    """``3/5 runs passed (needs 100%)``; None for a case that ran once."""
    r = case.repeat
    if r is None:
        return None
    planned = f" ({r.planned_runs} planned)" if r.planned_runs else ""
    if r.invalid_runs:
        planned += f" ({plural(r.invalid_runs, 'invalid simulation')} left out)"
    return (
        f"{r.passes}/{r.runs} runs passed{planned} "
        f"(needs {r.min_pass_rate * 100:g}%; pass^{r.runs} {'yes' if r.pass_all else 'no'}, "
        f"pass@{r.runs} {'yes' if r.pass_any else 'no'})"
    )


def repeat_reason(case: CaseResult) -> str | None:
    """One line for a repeated case: its runs, then the turns that varied (or failed)."""
    text = runs_text(case)
    if text is None:
        return None
    turns = varying_turns(case) or failing_turn_counts(case)
    return f"{text}: {', '.join(turns)}" if turns else text


def representative_run(case: CaseResult) -> int | None:
    """Which run (0-based) the case's top-level turns are; None for a case that ran once."""
    if case.runs is None:
        return None
    for run in case.runs:
        if run.passed == case.passed:
            return run.run_index
    return case.runs[0].run_index if case.runs else None


# ----------------------------------------------------------------- simulated users


def simulator_name(info: SimulatorInfo) -> str:
    """``anthropic claude-haiku-4-5``, ``python examples.support.customer:factory``."""
    what = info.model if info.model is not None else info.factory
    return f"{info.backend} {what}" if what else info.backend


def ended_text(simulation: Simulation) -> str:
    """``gave_up after 3 messages: the agent refused twice``."""
    text = f"{simulation.outcome} after {plural(simulation.user_turns, 'message')}"
    return f"{text}: {simulation.reason}" if simulation.reason else text


def simulation_line(case: CaseResult) -> str | None:
    """``simulated user (python ...): gave_up after 3 messages: ...``; None: not simulated."""
    simulation = case.simulation
    if simulation is None:
        return None
    return f"simulated user ({simulator_name(simulation.simulator)}): {ended_text(simulation)}"


def user_usage(simulation: Simulation | None) -> str | None:
    """``960 simulated-user tokens, est. $0.0012`` (None: no model simulated the user)."""
    if simulation is None or (
        not simulation.user_token_usage.total_tokens and simulation.user_cost_usd is None
    ):
        return None
    text = f"{simulation.user_token_usage.total_tokens:,} simulated-user tokens"
    usd = simulation.user_cost_usd
    return text + (f", est. {cost(usd)}" if usd is not None else "")


def run_usage(summary: Summary) -> str | None:
    """The run's simulated-user total, ``960 simulated-user tokens, est. $0.0012``; None when
    no model simulated a user (no simulated case, or only python simulators)."""
    usage, usd = summary.user_token_usage, summary.user_cost_usd
    if usage is None or (not usage.total_tokens and usd is None):
        return None
    text = f"{usage.total_tokens:,} simulated-user tokens"
    return text + (f", est. {cost(usd)}" if usd is not None else "")


# ------------------------------------------------------------------ baseline deltas

CHANGE_WORDS: dict[str, str] = {
    "regressed": "regressed",
    "fixed": "fixed",
    "still_failing": "still failing",
    "still_passing": "still passing",
    "new": "new",
    "removed": "removed",
    "not_run": "not run",
    "within_noise": "within noise",
}

CHANGE_ICON: dict[str, str] = {
    "regressed": "🔻",
    "fixed": "🔺",
    "still_failing": "❌",
    "still_passing": "✅",
    "new": "🆕",
    "removed": "➖",
    "not_run": "⏭️",
    "within_noise": "〰️",
}


def _signed(value: float, text: str) -> str:
    return ("+" if value > 0 else "−" if value < 0 else "±") + text


def delta_rate(delta: float | None) -> str:
    """A pass-rate difference in percentage points: ``−12.5 pp``."""
    return "n/a" if delta is None else _signed(delta, f"{abs(delta) * 100:.1f} pp")


def delta_count(delta: float | None) -> str:
    return "n/a" if delta is None else _signed(delta, f"{abs(round(delta)):,}")


def delta_cost(delta: float | None) -> str:
    return "n/a" if delta is None else _signed(delta, cost(abs(delta)))


def delta_duration(delta: float | None) -> str:
    return "n/a" if delta is None else _signed(delta, duration(abs(delta)))
