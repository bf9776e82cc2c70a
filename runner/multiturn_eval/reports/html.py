"""``report.html``: one self-contained page to debug a run (SPEC 8).

- **Self-contained**: CSS and JavaScript are inline, there is no font, image
  or other URL, and a Content-Security-Policy (``default-src 'none'``, the
  script and style allowed by their SHA-256 only) stops the page from making
  any request even if agent text were to slip through as markup.
- **A row per test case** (``<details>``): the summary line shows the verdict,
  turns passed, duration and the first failure, so the page reads without
  JavaScript. Opening a row shows every turn: input, expected, the whole
  response, tool calls with arguments and results, and each check's outcome
  and reason.
- **Bounded at 50,000 test cases**: up to :data:`FULL_CASES` test cases every
  case has its row; beyond, failures first: the first :data:`DETAILED_FAILURES`
  failing cases have their full row (its summary line readable without
  JavaScript, static turns within :data:`STATIC_TURNS` as for any page), the
  other failing ones a line each (their first failure, plain HTML), and the
  passing and not-run cases are counted per suite (all are in ``report.json``
  and ``junit.xml``): 23 MB at 50,000 failing six-turn cases. Row ids stay the
  case's position in the report. The page is streamed, each row built as its
  case is read.
- **Fast with thousands of test cases**: turn details are embedded once as
  JSON (``<script type="application/json">``, with ``<``, ``>`` and ``&``
  written as ``\\u003c`` etc. so no ``</script>`` can end it) and drawn when a
  row is first opened, with ``textContent`` only. For readers without
  JavaScript, test cases (failing ones first, up to :data:`STATIC_TURNS` turns
  in all) carry the same details as static HTML inside ``<noscript>``.
- **Tracebacks**: where your code (agent, factory, tool, grader) raised, each
  in a folded ``<details>`` under its turn (or its test case, for the factory
  and conversation graders), your frames only.
- **Filter and search**: "only failures" and a search by suite or test-case
  name (hidden without JavaScript, where the rows are all shown).

- **Simulated users** (``user:``): a simulated case's row, opened, shows the
  simulated user (its simulator, goal, how it ended, its tokens) and the
  conversation as a chat -- the user's messages (scripted or simulated) and the
  agent's replies, each turn's tool calls and failed checks under the reply --
  as static HTML (no script needed), up to :data:`CHAT_TURNS` turns in all; the
  turn details follow as for any case. The totals get a "Simulated users" row.

- **Repeats** (``--repeat K``): a repeated case's row also says ``3/5 runs``
  and the turns that varied; opened, it shows the verdict over its runs, a
  per-turn pass-rate strip (a cell per turn: ``2/5``, coloured all / some /
  none), and a ``<details>`` per run (the first failing run open), each with
  that run's turns as static HTML -- so every run reads without JavaScript.
  Past :data:`STATIC_RUN_TURNS` turns in all, a run's block gives its outcome
  and first failure only (its turns are in ``report.json``). The turns drawn
  by the script are the case's representative run, as elsewhere.

Agent text is escaped by jinja2's autoescape (static parts) and never parsed
as HTML (the script); control characters and ANSI escapes are removed from
what is shown. Long replies are kept whole (in a scrolling box).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError

from ..results import CaseResult, Report, TurnResult, UserTraceback
from . import _view as v
from .escape import clean, cut

STATIC_TURNS = 400
"""Turns also written as static HTML for readers without JavaScript (failing test cases first)."""

STATIC_RUN_TURNS = 2_000
"""Turns of the runs of repeated test cases written out per run (in suite order)."""

CHAT_TURNS = 2_000
"""Turns of simulated test cases drawn as a conversation (in suite order; the rest: report.json)."""

_REASON_LIMIT = 400
_TEMPLATES = Path(__file__).with_name("templates")
_CASE_TURNS = TypeAdapter(list[TurnResult])
#: where the turn data goes in the rendered template (streamed in its place)
_DATA_MARK = "\x00multiturn-eval-turn-data\x00"

FULL_CASES = 2_000
"""Up to this many test cases the page has every case's row; beyond, see :class:`_Plan`."""

DETAILED_FAILURES = 1_000
"""Beyond :data:`FULL_CASES`, the failing cases with a full row (the rest: a line each)."""
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class _Assets:
    css: Markup
    js: Markup
    csp: str


@functools.cache
def _assets() -> _Assets:
    css = (_TEMPLATES / "report.css").read_text(encoding="utf-8")
    js = (_TEMPLATES / "report.js").read_text(encoding="utf-8")

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    csp = (
        f"default-src 'none'; script-src {digest(js)}; style-src {digest(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return _Assets(css=Markup(css), js=Markup(js), csp=csp)


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2")


# ---------------------------------------------------------------------------- the view


def _turn_meta(turn: TurnResult) -> str:
    parts = []
    if turn.line:
        parts.append(f"line {turn.line}")
    if not turn.skipped:
        parts.append(v.duration(turn.duration_ms))
    if turn.token_usage.total_tokens:
        parts.append(f"{turn.token_usage.total_tokens:,} tokens")
    if turn.cost_usd is not None:
        parts.append(f"${turn.cost_usd:.4f}")
    judged = v.judge_usage(turn.judge_token_usage, turn.judge_cost_usd)
    if judged:
        parts.append(judged)
    if turn.replayed is not None:
        parts.append("replayed from the fixture" if turn.replayed else "not replayed")
    return " · ".join(parts)


def _checks(turn: TurnResult) -> list[dict[str, str]]:
    """Every check with its outcome (the same list the script draws)."""
    out = [{"cls": "warn" if turn.skipped else "fail", "text": clean(e)} for e in turn.errors]
    for detail in turn.arg_match_details:
        if detail.reason:
            out.append({"cls": "fail", "text": clean(detail.reason)})
        else:
            call = (
                ""
                if detail.matched_call_index is None
                else f" call #{detail.matched_call_index + 1}"
            )
            out.append({"cls": "pass", "text": clean(f"{detail.expected_tool}: matched{call}")})
    for metric in turn.metric_results:
        why = (
            f"error: {metric.error}"
            if metric.error
            else (metric.reason or ("passed" if metric.passed else "failed"))
        )
        text = f"{metric.metric_name}: {why}"
        if metric.kind == "code" and metric.score is not None:
            threshold = f", threshold {metric.threshold:g}" if metric.threshold is not None else ""
            text += f" (score {metric.score:g}{threshold})"
        out.append({"cls": "pass" if metric.passed else "fail", "text": clean(text)})
    out.extend({"cls": "warn", "text": clean(w)} for w in turn.warnings)
    return out


def _pretty(value: Any) -> str:
    """Like the script's ``JSON.stringify(value, null, 2)``; strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):  # a circular structure from a tool
        return repr(value)


def _tracebacks(tracebacks: list[UserTraceback] | None) -> list[dict[str, str]]:
    """Each traceback of your code: where it raised, and the text (drawn folded)."""
    return [{"where": clean(t.where), "text": clean(t.traceback)} for t in tracebacks or []]


def _static_turn(turn: TurnResult, total: int) -> dict[str, Any]:
    status = v.turn_status(turn)
    fields: list[dict[str, Any]] = [{"label": "Input", "text": clean(turn.input), "empty": False}]
    if turn.ground_truth is not None:
        fields.append({"label": "Expected", "text": clean(turn.ground_truth), "empty": False})
    if status == "skipped":
        fields.append({"label": "Response", "text": "not sent", "empty": True})
    elif turn.response is None:
        fields.append({"label": "Response", "text": "no reply", "empty": True})
    else:
        fields.append({"label": "Response", "text": clean(turn.response), "empty": False})
    calls = [
        {
            "n": i + 1,
            "name": clean(call.name),
            "server": clean(call.server) if call.server else None,
            "args": clean(_pretty(call.args)),
            "result": (
                clean(f"error: {call.error}")
                if call.error
                else None
                if call.result is None
                else clean(_pretty(call.result))
            ),
        }
        for i, call in enumerate(turn.tool_invocations)
    ]
    return {
        "status": status,
        "word": v.STATUS_WORD[status],
        "title": f"Turn {turn.turn_index + 1} of {total}",
        "meta": _turn_meta(turn),
        "fields": fields,
        "calls": calls,
        "checks": _checks(turn),
        "tracebacks": _tracebacks(turn.tracebacks),
    }


def _chat(case: CaseResult, budget: list[int]) -> dict[str, Any] | None:
    """A simulated case as a conversation: the user's and the agent's messages, each turn's
    failed checks under the agent's reply, how it ended (static HTML: no script needed)."""
    simulation = case.simulation
    if simulation is None:
        return None
    turns = case.all_turns()
    shown = len(turns) <= budget[0]
    if shown:
        budget[0] -= len(turns)
    messages = []
    for turn in turns if shown else []:
        status = v.turn_status(turn)
        if status == "skipped":
            reply, empty = "not sent", True
        elif turn.response is None:
            reply, empty = "no reply", True
        else:
            reply, empty = clean(turn.response), False
        messages.append(
            {
                "n": turn.turn_index + 1,
                "source": turn.source or "scripted",
                "input": clean(turn.input),
                "reply": reply,
                "empty": empty,
                "status": status,
                "word": v.STATUS_WORD[status],
                "calls": clean(v.calls_text(turn.tool_invocations)),
                "checks": [c for c in _checks(turn) if c["cls"] != "pass"],
            }
        )
    usage = v.user_usage(simulation)
    return {
        "line": clean(v.simulation_line(case) or ""),
        "goal": clean(simulation.goal),
        "usage": clean(usage or ""),
        "messages": messages,
        "omitted": not shown,
        "ended": clean(v.ended_text(simulation)),
    }


def _case_view(case: CaseResult, index: int, static: bool) -> dict[str, Any]:
    turns = case.all_turns()
    first = v.first_failure(case)
    passed = sum(1 for t in turns if t.passed)
    stats = [f"{passed}/{len(turns)} turns", v.duration(case.duration_ms)]
    where = [case.location, f"backend {case.backend}"]
    if case.model:
        where.append(f"model {case.model}")
    if case.tags:
        where.append("tags " + ", ".join(case.tags))
    if case.token_usage.total_tokens:
        where.append(f"{case.token_usage.total_tokens:,} tokens")
    if case.cost_usd is not None:
        where.append(v.cost(case.cost_usd))
    judged = v.judge_usage(case.judge_token_usage, case.judge_cost_usd)
    if judged:
        where.append(judged)
    turn_errors = {e for t in turns for e in t.errors}
    notes = [{"cls": "fail", "text": clean(e)} for e in case.errors if e not in turn_errors]
    notes += [{"cls": "fail", "text": clean(text)} for text in v.conversation_lines(case)]
    notes += [
        {"cls": "warn", "text": clean(w)}
        for w in case.warnings
        if not any(w in t.warnings for t in turns)
    ]
    reason = ""
    if first is not None:
        reason, left = cut(clean(first.reason), _REASON_LIMIT)
        if left:
            reason += "…"
        if first.more:
            reason += f" (+{first.more} more)"
        repeat = v.repeat_reason(case)
        if repeat is not None:
            reason = f"{repeat}; first failure: {reason}"
    return {
        "i": index,
        "outcome": case.outcome,
        "word": v.STATUS_WORD[case.outcome],
        "suite_name": clean(case.suite_name),
        "name": clean(case.name),
        "search": clean(f"{case.suite_name} {case.name}").lower(),
        "stats": " · ".join(stats),
        "reason": reason,
        "where": clean(" · ".join(where)),
        "notes": notes,
        # a legacy case's are its one turn's (drawn with the turn)
        "tracebacks": _tracebacks(case.tracebacks) if case.turns is not None else [],
        "has_turns": bool(turns) and not case.skipped,
        "static_turns": [_static_turn(t, len(turns)) for t in turns] if static else [],
        "repeat": None,
        "chat": None,
    }


def _repeat_view(case: CaseResult, budget: list[int]) -> dict[str, Any] | None:
    """A repeated case's runs: the verdict line, the pass-rate strip, a block per run."""
    r = case.repeat
    if r is None or case.runs is None:
        return None
    strip = []
    for count in r.turn_pass_counts:
        cls = "all" if count.passed == count.runs else "none" if count.passed == 0 else "some"
        strip.append(
            {
                "cls": cls,
                "label": f"{count.turn_index + 1}: {count.passed}/{count.runs}",
                "title": f"turn {count.turn_index + 1} passed {count.passed} of {count.runs} runs",
            }
        )
    shown = v.representative_run(case)
    runs = []
    for run in case.runs:
        turns = run.turns
        static = len(turns) <= budget[0]
        if static:
            budget[0] -= len(turns)
        failing = next((t for t in turns if not t.passed and not t.skipped), None)
        reason = ""
        if failing is not None:
            checks = v.failed_checks(failing)
            why = v.check_text(checks[0]) if checks else "failed"
            reason = f"turn {failing.turn_index + 1}: {why}"
        elif run.errors and not run.passed:
            reason = run.errors[0]
        reason, left = cut(clean(reason), _REASON_LIMIT)
        passed = sum(1 for t in turns if t.passed)
        runs.append(
            {
                "n": run.run_index + 1,
                "outcome": run.outcome,
                "word": v.STATUS_WORD[run.outcome],
                "stats": f"{passed}/{len(turns)} turns · {v.duration(run.duration_ms)}"
                + (" · also shown below" if run.run_index == shown else ""),
                "reason": reason + ("…" if left else ""),
                "open": not run.passed and run.run_index == shown,
                "turns": [_static_turn(t, len(turns)) for t in turns] if static else [],
                "omitted": not static,
            }
        )
    varying = v.varying_turns(case)
    return {
        "text": v.runs_text(case) or "",
        "varying": ("varied: " + ", ".join(varying)) if varying else "",
        "strip": strip,
        "runs": runs,
        "shown": "" if shown is None else f"The turns below the runs are run {shown + 1}'s.",
    }


@dataclass
class _Plan:
    """Which test cases the page shows how, from one pass over the results (issue 23).

    Up to :data:`FULL_CASES` test cases, every case has its row, as always. Beyond,
    the page stays bounded: the first :data:`DETAILED_FAILURES` failing cases
    (failed or error) have their full row, the other failing ones a line each, and
    the passing and not-run cases are counted per suite (they are in
    ``report.json`` and ``junit.xml``).
    """

    total: int = 0
    large: bool = False
    detailed: list[int] = field(default_factory=list)
    """Positions of the cases with a full row, in report order (small: every case)."""
    static: set[int] = field(default_factory=set)
    """Positions of the cases that also get static turn details (failing first)."""
    lines: int = 0
    """Failing cases shown as one line (large reports)."""
    suites: dict[str, list[Any]] = field(default_factory=dict)
    """suite path -> [suite name, passed, not run, first not-run reason] (large reports)."""


def _plan(report: Report) -> _Plan:
    plan = _Plan(total=len(report.results))
    plan.large = plan.total > FULL_CASES
    failing, passing = array("q"), array("q")  # (position, turns) pairs, flat
    for i, case in enumerate(report.results):
        bad = not case.passed and not case.skipped
        if plan.large:
            if bad:
                if len(plan.detailed) < DETAILED_FAILURES:
                    plan.detailed.append(i)
                else:
                    plan.lines += 1
                    continue
            else:
                row = plan.suites.setdefault(case.suite, [case.suite_name, 0, 0, ""])
                if case.skipped:
                    if not row[2]:
                        row[3] = case.errors[0] if case.errors else "not run"
                    row[2] += 1
                else:
                    row[1] += 1
                continue
        else:
            plan.detailed.append(i)
        if not case.skipped:
            (failing if bad else passing).extend((i, len(case.turns or ()) or 1))
    # static turn details: failing cases first, then passing ones, within STATIC_TURNS
    left = STATIC_TURNS
    for pairs in (failing, passing):
        for k in range(0, len(pairs), 2):
            i, count = pairs[k], pairs[k + 1]
            if count > left:
                continue
            plan.static.add(i)
            left -= count
    return plan


def _shown(report: Report, plan: _Plan) -> Iterator[tuple[int, CaseResult]]:
    """(position, case) of the cases with a full row, read one at a time."""
    if plan.large:
        for i in plan.detailed:
            yield i, report.results[i]
    else:
        yield from enumerate(report.results)


def _turn_json(case: CaseResult) -> str:
    """A case's turns as JSON, safe inside ``<script type="application/json">``."""
    turns = case.all_turns()
    try:
        raw = _CASE_TURNS.dump_json(turns, exclude_none=True).decode("utf-8")
    except PydanticSerializationError:  # lone surrogates from an agent: not UTF-8
        raw = json.dumps(
            _CASE_TURNS.dump_python(turns, mode="json", exclude_none=True), ensure_ascii=False
        )
        raw = _SURROGATES.sub("\ufffd", raw)
    return raw.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _line_view(case: CaseResult) -> dict[str, str]:
    """A failing case beyond the detailed ones: one line (its first failure)."""
    first = v.first_failure(case)
    reason = ""
    if first is not None:
        reason, left = cut(clean(first.reason), _REASON_LIMIT)
        reason += "…" if left else ""
    return {
        "outcome": case.outcome,
        "word": v.STATUS_WORD[case.outcome],
        "suite_name": clean(case.suite_name),
        "name": clean(case.name),
        "where": clean(case.location),
        "reason": reason,
    }


def _lines(report: Report, plan: _Plan) -> Iterator[dict[str, str]]:
    detailed = set(plan.detailed)
    for i, case in enumerate(report.results):
        if not case.passed and not case.skipped and i not in detailed:
            yield _line_view(case)


def _verdict(report: Report) -> tuple[str, str]:
    s = report.summary
    if not report.run.complete:
        return (
            "incomplete",
            f"Run incomplete: {s.failed:,} failed, {s.passed:,} passed, {s.skipped:,} not run of {v.plural(s.total, 'test case')}",
        )
    if s.total == 0:
        return "incomplete", "No test case was selected"
    if s.failed:
        return "failed", f"{s.failed:,} of {v.plural(s.total, 'test case')} failed"
    if s.skipped:
        return "incomplete", f"{s.skipped:,} of {v.plural(s.total, 'test case')} not run"
    return "passed", f"All {v.plural(s.total, 'test case')} passed"


def _regrade_line(report: Report) -> str:
    if report.regrade is None:
        return ""
    return " ".join([v.flips_line(report.regrade) + ".", *report.regrade.notes])


def _baseline_view(
    report: Report,
) -> tuple[list[dict[str, str]], dict[str, str] | None, dict[tuple[str, int], Any]]:
    """The filter's choices, the totals' delta row and each case's change (by suite, index)."""
    comparison = report.baseline
    if comparison is None:
        return [], None, {}
    by_key = {(c.suite, c.index): c for c in comparison.cases if c.index is not None}
    choices = [
        {"value": k, "label": f"{v.CHANGE_WORDS[k]} ({n:,})"}
        for k, n in comparison.counts.items()
        if n and k in v.CHANGE_WORDS and k != "removed"
    ]
    shown = ", ".join(
        f"{n:,} {v.CHANGE_WORDS[k]}"
        for k, n in comparison.counts.items()
        if n and k in v.CHANGE_WORDS
    )
    delta = {
        "cases": clean(f"Δ vs baseline: {shown or 'none'}"),
        "turns": clean(
            f"{comparison.turn_counts.get('regressed', 0):,} regressed, "
            f"{comparison.turn_counts.get('fixed', 0):,} fixed"
        ),
        "pass_rate": v.delta_rate(comparison.pass_rate.delta),
        "tokens": v.delta_count(comparison.total_tokens.delta),
        "cost": v.delta_cost(comparison.cost_usd.delta),
        "duration": v.delta_duration(comparison.duration_ms.delta),
    }
    return choices, delta, by_key


def _change(view: dict[str, Any], case: CaseResult, by_key: dict[tuple[str, int], Any]) -> None:
    """A change badge on a case's row (none without a baseline)."""
    view["change"] = ""
    change = by_key.get((case.suite, case.index))
    if change is None:
        return
    view["change"] = change.change
    view["change_word"] = v.CHANGE_WORDS[change.change]
    view["change_title"] = clean(f"{change.before or '—'} → {change.after or '—'}")


def render_html(report: Report) -> str:
    return "".join(stream_html(report))


def stream_html(report: Report) -> Iterator[str]:
    """``report.html`` in pieces, each case's row built as it is read (no list of them)."""
    assets = _assets()
    s = report.summary
    verdict_class, verdict = _verdict(report)
    plan = _plan(report)
    changes, delta, by_key = _baseline_view(report)

    data: list[str] = []  # each shown case's turns, written after the rows

    def cases() -> Iterator[dict[str, Any]]:
        budget, chat_budget = [STATIC_RUN_TURNS], [CHAT_TURNS]
        for i, case in _shown(report, plan):
            view = _case_view(case, i, i in plan.static)  # id="case-<position in the report>"
            view["chat"] = _chat(case, chat_budget)
            repeat = _repeat_view(case, budget)
            if repeat is not None:
                view["repeat"] = repeat
                assert case.repeat is not None
                view["stats"] += f" · {case.repeat.passes}/{case.repeat.runs} runs"
                if case.repeat.invalid_runs:
                    view["stats"] += f" ({case.repeat.invalid_runs} invalid left out)"
                if case.repeat.flaky:
                    view["stats"] += " · flaky"
            _change(view, case, by_key)
            # the shown cases only (at most FULL_CASES); a large report's by position
            data.append(f'"{i}":{_turn_json(case)}' if plan.large else _turn_json(case))
            yield view

    turns = [f"{s.turns.passed:,} passed"]
    if s.turns.failed:
        turns.append(f"{s.turns.failed:,} failed")
    if s.turns.skipped:
        turns.append(f"{s.turns.skipped:,} skipped")
    case_counts = [f"{s.passed:,} passed"]
    if s.failed:
        case_counts.append(
            f"{s.failed:,} failed" + (f" ({s.errored:,} with errors)" if s.errored else "")
        )
    if s.skipped:
        case_counts.append(f"{s.skipped:,} not run")
    meta = [", ".join(report.run.suites), f"started {report.run.started_at}"]
    if report.run.git_sha:
        meta.append(f"commit {report.run.git_sha[:12]}")
    if report.run.pr_number is not None:
        meta.append(f"PR #{report.run.pr_number}")
    page = {
        "csp": assets.csp,
        "css": assets.css,
        "js": assets.js,
        "title": f"multiturn-eval: {verdict}",
        "verdict": verdict,
        "verdict_class": verdict_class,
        "meta": clean(" · ".join(meta)),
        "totals": {
            "cases": f"{s.total:,}: " + ", ".join(case_counts),
            "turns": f"{s.turns.total:,}: " + ", ".join(turns),
            "pass_rate": v.rate(s.pass_rate),
            "tokens": f"{s.token_usage.total_tokens:,}",
            "cost": v.cost(s.cost_usd),
            "duration": v.duration(report.run.duration_ms),
            "judge": None
            if s.judge_token_usage is None
            else {
                "tokens": f"{s.judge_token_usage.total_tokens:,}",
                "cost": v.cost(s.judge_cost_usd),
            },
            "users": None
            if s.user_token_usage is None or not v.run_usage(s)
            else {
                "tokens": f"{s.user_token_usage.total_tokens:,}",
                "cost": v.cost(s.user_cost_usd),
            },
        },
        "notice": (
            clean(
                f"The run did not complete ({report.run.stop_reason or 'interrupted'}): "
                "test cases that did not finish are shown as not run."
            )
            if not report.run.complete
            else ""
        ),
        "regrade": clean(_regrade_line(report)),
        "fixtures": clean(v.fixtures_line(report.run.fixtures)) if report.run.fixtures else "",
        "failures": f"{s.failed:,}",
        "changes": changes,
        "delta": delta,
        "cases": cases(),
        "no_cases": not plan.total,
        "large": _large_view(plan) if plan.large else None,
        "lines": _lines(report, plan),
        "footer": f"multiturn-eval {report.run.version or ''}".rstrip()
        + " · the complete data is in report.json",
        "data": Markup(_DATA_MARK),
    }
    for piece in _template().generate(page):
        if _DATA_MARK in piece:  # the shown cases' turns, gathered as their rows were made
            before, _, after = piece.partition(_DATA_MARK)
            # an array of every case's turns, or for a large report an object of the
            # shown ones' by position (the script reads data[i] either way)
            opening, closing = "{}" if plan.large else "[]"
            yield before + opening
            for n, shown in enumerate(data):
                yield ("," if n else "") + shown
            yield closing + after
        else:
            yield piece


def _large_view(plan: _Plan) -> dict[str, Any]:
    shown = len(plan.detailed)
    suites = [
        {
            "name": clean(f"{name} ({path})"),
            "text": ", ".join(
                part
                for part in (
                    f"{passed:,} passed" if passed else "",
                    clean(f"{skipped:,} not run ({cut(reason, 200)[0]})") if skipped else "",
                )
                if part
            ),
        }
        for path, (name, passed, skipped, reason) in plan.suites.items()
    ]
    return {
        "notice": (
            f"This run has {plan.total:,} test cases: the page shows the failing ones "
            f"({shown + plan.lines:,}), the first {shown:,} in full"
            + (f" and {plan.lines:,} more a line each" if plan.lines else "")
            + "; the passing and not-run ones are counted per suite below "
            "(every test case is in report.json and junit.xml)."
        ),
        "lines": plan.lines,
        "suites": suites,
    }
