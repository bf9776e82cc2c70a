"""``summary.md``: the PR comment body (and the job summary), from ``templates/summary.md.j2``.

Layout: a hidden marker naming the suite set (:func:`comment_marker`, so the
action finds and updates its own sticky comment), a one-line verdict, a totals
table, each failing test case in a ``<details>`` block with a per-turn table,
the passing test cases as one line, and links to the workflow run. With
``--baseline``, a totals row and a section for the comparison
(:mod:`.md_comparison`).

**Agent text is hostile.** Responses, tool arguments, inputs and names are
escaped by :func:`~.escape.md_text`, which is safe both inside a table cell and inside
raw HTML (``<summary>``), because it uses only HTML character references:

- ``& < >`` and every character Markdown or GFM gives meaning inline
  (``\\ ` * _ [ ] | ~ $``) become character references, so no tag, code span,
  emphasis, link, image, table pipe or math can start;
- agent text never starts a line (every line it is on starts with the
  report's own text, and its newlines become ``<br>``), so it cannot start a
  block (heading, quote, list) or a workflow command (``::error::``);
- a zero-width space goes after every ``@``, after ``#``/``GH-`` before a
  number, inside ``://`` and after ``www`` (GitHub resolves mentions, issue
  references and autolinks on the rendered text, where references are already
  decoded), so nobody is notified and no URL or e-mail address is linked;
- newlines become ``<br>``; control characters, ANSI escapes and bidi
  overrides are removed; long text is cut with a marker saying how much is
  left and where to read it whole (``report.html``, ``report.json``).

**Size.** GitHub rejects comments over 65,536 characters; this stays under
:data:`MAX_CHARS` however many test cases fail: the verdict, totals and links
always; then failing test cases in full (at most :data:`MAX_BLOCKS`), most
important first (a failed check, then an infrastructure error; the earliest
failing turn first; suite order among equals), then one table row for each
further failure while room is left, then
a count of what was left out and where to find it.

**Simulated users** (``user:``): a failing simulated test case's block is its
transcript instead of the turn table -- a paragraph per turn with the user's
message (scripted or simulated), the agent's reply, its tool calls and what
failed on that turn -- then how the simulated user ended; the totals get a
"Simulated users" row (their tokens and cost, apart from the agent's and the
judges').

**Repeats** (``--repeat K``, K > 1): the totals table gets pass^K, pass@K,
flaky and mean-cost-per-run columns; a "Flaky" section lists every test case
whose runs disagreed, passing the gate or not, with its pass rate and the turns
whose outcome varied ("turn 3 passed 2 of 5"); a failing case's block says how
many runs passed, and its turn table is the first failing run. Runs without
repeats render exactly as before.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..results import CaseResult, RegradeInfo, Report, TurnResult
from ..spend import dollars
from ..types import TokenUsage
from . import _view as v
from .escape import md_code, md_text
from .md_comparison import TotalsRow, delta_row, render_comparison

MAX_CHARS = 60_000
"""The comment stays strictly below this (GitHub's hard limit is 65,536)."""

MAX_BLOCKS = 50
"""At most this many failing test cases in full; further ones get a table row each."""

_BLOCK_MAX = 12_000
"""One failing test case's block may not take more than this; bigger ones are shown tighter."""


@dataclass(frozen=True)
class _Limits:
    """How many characters of each piece of agent text a block shows."""

    input: int
    expected: int
    got: int
    tools: int
    check: int
    checks: int
    """at most this many failed checks per turn"""
    rows: int
    """at most this many turn rows per test case"""


_NORMAL = _Limits(input=300, expected=300, got=600, tools=300, check=400, checks=4, rows=24)
_TIGHT = _Limits(input=80, expected=80, got=160, tools=100, check=160, checks=2, rows=6)


def _link(label: str, url: str) -> str:
    # our own URLs only (validated in _view.run_links); the label is our own text
    return f"[{label}]({url})"


# ---------------------------------------------------------------------------- the view


@dataclass
class _Row:
    turn: str
    input: str
    expected: str
    got: str
    failed: str


@dataclass
class _Block:
    icon: str
    title: str
    reason: str
    where: str
    stats: str
    errors: list[str]
    rows: list[_Row]
    conversation: list[str] = field(default_factory=list)
    """Failed conversation-level checks (conversation_evaluations, conversation_tools)."""
    simulation: str = ""
    """A simulated case: who played the user and how it ended."""
    chat: list[str] = field(default_factory=list)
    """A simulated case: the transcript, one paragraph per turn (instead of ``rows``)."""
    misses: list[str] = field(default_factory=list)
    """Model calls not in the fixtures (``--fixtures``), each in full."""
    rerecord: str = ""
    """The command that re-records the case, when a call missed."""


@dataclass
class _CompactRow:
    title: str
    where: str
    reason: str


@dataclass
class _Totals(TotalsRow):
    extra_rows: list[Any] = field(default_factory=list)
    """Room for a baseline-delta row (SPEC 6.7, later)."""
    repeat_head: str = ""
    """With repeats: the extra header cells (``| pass^K | ...``); empty otherwise."""
    repeat_align: str = ""
    repeat_cells: str = ""
    repeat_blank: str = ""
    """With repeats: empty cells that pad the baseline-delta row to the header's width."""


@dataclass
class _SuiteRow:
    name: str
    total: str
    passed: str
    failed: str
    skipped: str


def comment_marker(report: Report) -> str:
    """The hidden first line naming the suite set: ``<!-- multiturn-eval:1a2b3c4d5e6f -->``.

    The id depends only on the sorted suite paths, so every run of the same
    suites (on any commit, any shard) carries the same marker.
    """
    return f"<!-- multiturn-eval:{v.suite_set_id(report.run.suites)} -->"


def _verdict(report: Report) -> str:
    verdict = _run_verdict(report)
    if report.baseline is None:
        return verdict
    regressed = report.baseline.counts.get("regressed", 0)
    fixed = report.baseline.counts.get("fixed", 0)
    head = (
        f"🔻 {v.plural(regressed, 'regression')} vs baseline"
        if regressed
        else "no regression vs baseline"
    )
    if fixed:
        head += f", {fixed:,} fixed"
    return f"{verdict} · {head}"


def _run_verdict(report: Report) -> str:
    s = report.summary
    if not report.run.complete:
        reason = md_text(report.run.stop_reason or "interrupted", 200)
        if s.total == s.skipped:
            return f"⚠️ multiturn-eval: run incomplete ({reason}): no test case finished"
        counts = [f"{s.failed:,} failed"] if s.failed else []
        counts += [f"{s.passed:,} passed", f"{s.skipped:,} not run"]
        return (
            f"⚠️ multiturn-eval: run incomplete ({reason}): "
            f"{', '.join(counts)} of {v.plural(s.total, 'test case')}"
        )
    if s.total == 0:
        return "⚪ multiturn-eval: no test case was selected"
    if s.failed:
        skipped = f", {s.skipped:,} not run" if s.skipped else ""
        return (
            f"❌ multiturn-eval: {s.failed:,} of {v.plural(s.total, 'test case')} failed{skipped}"
        )
    if s.skipped:
        return f"⚠️ multiturn-eval: {s.skipped:,} of {v.plural(s.total, 'test case')} not run"
    if s.total == 1:
        return "✅ multiturn-eval: the test case passed"
    return f"✅ multiturn-eval: all {s.total:,} test cases passed"


def _totals(report: Report) -> _Totals:
    s = report.summary
    cases = [f"{s.passed:,} passed"]
    if s.failed:
        errored = f" ({s.errored:,} with errors)" if s.errored else ""
        cases.append(f"{s.failed:,} failed{errored}")
    if s.skipped:
        cases.append(f"{s.skipped:,} not run")
    turns = [f"{s.turns.passed:,} passed"]
    if s.turns.failed:
        turns.append(f"{s.turns.failed:,} failed")
    if s.turns.skipped:
        turns.append(f"{s.turns.skipped:,} skipped")
    usage = s.token_usage
    tokens = f"{usage.total_tokens:,}"
    cached = usage.cache_read_tokens + usage.cache_creation_tokens
    if cached:
        tokens += f" ({cached:,} cached)"
    extra: list[Any] = []
    if report.baseline is not None:
        extra.append(delta_row(report.baseline))
    totals = _Totals(
        extra_rows=extra,
        cases=f"{s.total:,}: " + ", ".join(cases),
        turns=f"{s.turns.total:,}: " + ", ".join(turns),
        pass_rate=v.rate(s.pass_rate),
        tokens=tokens,
        cost=v.cost(s.cost_usd),
        duration=v.duration(report.run.duration_ms),
    )
    r = s.repeat
    if r is not None:
        k = r.runs_per_case
        totals.repeat_head = f" pass^{k} | pass@{k} | Flaky | Cost per case run |"
        totals.repeat_align = "--:|--:|--:|--:|"
        invalid = (
            f"<br><sub>{v.plural(r.invalid_runs, 'invalid simulated run')} left out</sub>"
            if r.invalid_runs
            else ""
        )
        totals.repeat_cells = (
            f" {r.pass_all:,} ({v.rate(r.pass_all_rate)}){invalid} | {r.pass_any:,} "
            f"({v.rate(r.pass_any_rate)}) | {r.flaky:,} | {v.cost(s.mean_cost_per_case_run)} |"
        )
        totals.repeat_blank = "  |" * 4
    # the simulated users' and the LLM judges' own rows: not in the agent's totals
    if s.user_token_usage is not None and v.run_usage(s):
        totals.extra_rows.append(_apart("Simulated users", s.user_token_usage, s.user_cost_usd))
    if s.judge_token_usage is not None:
        totals.extra_rows.append(_apart("LLM judges", s.judge_token_usage, s.judge_cost_usd))
    return totals


def _apart(who: str, usage: TokenUsage, usd: float | None) -> _Totals:
    """A totals row of tokens and cost counted apart from the agent's."""
    return _Totals(
        cases=f"{who} (not in the totals above)",
        turns="",
        pass_rate="",
        tokens=f"{usage.total_tokens:,}",
        cost=v.cost(usd),
        duration="",
    )


#: at most this many flaky test cases listed in the comment (report.html lists them all)
MAX_FLAKY = 50


#: the most failing test cases the comment can show: whole blocks, then table rows of at
#: least 12 characters each within MAX_CHARS (the rest are only counted)
MAX_SHOWN_FAILURES = MAX_BLOCKS + MAX_CHARS // 12 + 1


@dataclass
class _Scan:
    """What the comment needs of every result, gathered in one pass (issue 23).

    No result is kept: the failing ones are kept as (importance, position), at most
    :data:`MAX_SHOWN_FAILURES` of them, and read again when the comment is built.
    """

    failing: int = 0
    first_failing: list[tuple[tuple[int, int], int]] = field(default_factory=list)
    skipped: int = 0
    first_skip_reason: str = ""
    passed_turns: int = 0
    flaky: list[str] = field(default_factory=list)
    flaky_count: int = 0
    suite_rows: list[_SuiteRow] = field(default_factory=list)

    def flaky_lines(self) -> list[str]:
        """The "Flaky" section: every test case whose runs disagreed, passing or failing."""
        lines = list(self.flaky)
        if self.flaky_count > MAX_FLAKY:
            lines.append(f"- <i>{self.flaky_count - MAX_FLAKY:,} more in report.html</i>")
        return lines


def _scan(report: Report) -> _Scan:
    scan = _Scan()
    heap: list[tuple[tuple[int, int], int]] = []  # the kept failures, negated: a max-heap
    counts: dict[str, list[int]] = {path: [0, 0, 0, 0] for path in report.run.suites}
    names: dict[str, str] = {}
    for position, case in enumerate(report.results):
        if case.skipped:
            if not scan.skipped:
                scan.first_skip_reason = case.errors[0] if case.errors else "not run"
            scan.skipped += 1
        elif case.passed:
            scan.passed_turns += len(case.all_turns())
        else:
            scan.failing += 1
            # sorted by importance, ties in report order: keep the smallest (importance, position)
            a, b = v.importance(case)
            item = ((-a, -b), -position)
            if len(heap) < MAX_SHOWN_FAILURES:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        if v.is_flaky(case):
            scan.flaky_count += 1
            if len(scan.flaky) < MAX_FLAKY:
                scan.flaky.append(
                    f"- {v.STATUS_ICON[case.outcome]} {_case_title(case)} · "
                    f"{md_text(v.repeat_reason(case) or '', 400)} · {_where(case)}"
                )
        row = counts.setdefault(case.suite, [0, 0, 0, 0])
        names.setdefault(case.suite, case.suite_name)
        row[0] += 1
        row[1 if case.passed else 3 if case.skipped else 2] += 1
    scan.first_failing = [((-a, -b), -p) for (a, b), p in heap]
    if len(report.run.suites) >= 2:  # a row per suite file (one suite: the totals say it all)
        scan.suite_rows = [
            _SuiteRow(
                name=f"{md_text(names.get(path, path), 80)} ({md_code(path, 120)})",
                total=f"{row[0]:,}",
                passed=f"{row[1]:,}",
                failed=f"{row[2]:,}",
                skipped=f"{row[3]:,}",
            )
            for path, row in counts.items()
        ]
    return scan


def render_regrade(info: RegradeInfo) -> str:
    """The regrade's line: how many verdicts flipped each way."""
    text = (
        f"**Regrade** of {md_text(info.file, 160)}: {v.plural(info.turns_regraded, 'turn')} "
        f"graded again on the recorded replies, no agent called; "
        f"{info.flipped_to_failed:,} passed → failed, {info.flipped_to_passed:,} failed → passed"
    )
    if info.turns_not_regradable:
        text += f"; {v.plural(info.turns_not_regradable, 'turn')} not regradable"
    for note in info.notes:
        text += f"<br><sub>{md_text(note, 200)}</sub>"
    return text


def _case_title(case: CaseResult) -> str:
    return f"{md_text(case.suite_name, 80)} › {md_text(case.name, 160)}"


def _where(case: CaseResult) -> str:
    return md_code(case.location, 200)


def _cell_checks(turn: TurnResult, limits: _Limits) -> str:
    checks = v.failed_checks(turn)
    parts = [
        f"<b>{md_text(check.label, 60)}</b>: {md_text(check.text, limits.check)}"
        for check in checks[: limits.checks]
    ]
    if len(checks) > limits.checks:
        parts.append(f"<i>+{len(checks) - limits.checks} more</i>")
    return "<br>".join(parts)


def _turn_row(turn: TurnResult, limits: _Limits) -> _Row:
    status = v.turn_status(turn)
    expected = md_text(turn.ground_truth, limits.expected) if turn.ground_truth is not None else ""
    tools = [d.expected_tool for d in turn.arg_match_details]
    if tools:
        names = ", ".join(tools)
        expected += ("<br>" if expected else "") + f"tools: {md_text(names, limits.tools)}"
    if status == "skipped":
        got = "<i>not sent</i>"
    elif turn.response is None:
        got = "<i>no reply</i>"
    else:
        got = md_text(turn.response, limits.got)
    if turn.tool_invocations:
        got += f"<br>🔧 {md_text(v.calls_text(turn.tool_invocations), limits.tools)}"
    return _Row(
        turn=f"{turn.turn_index + 1} {v.STATUS_ICON[status]}",
        input=md_text(turn.input, limits.input),
        expected=expected or "—",
        got=got,
        failed=_cell_checks(turn, limits) if status != "passed" else "",
    )


def _rows(case: CaseResult, limits: _Limits) -> list[_Row]:
    """A row per turn; long runs of passing turns folded into one row."""
    turns = case.all_turns()
    if case.skipped:
        return []
    rows: list[_Row] = []
    keep = len(turns) <= limits.rows
    run: list[TurnResult] = []

    def flush() -> None:
        if not run:
            return
        if len(run) == 1:
            rows.append(_turn_row(run[0], limits))
        else:
            first, last = run[0].turn_index + 1, run[-1].turn_index + 1
            rows.append(_Row(f"{first}–{last} ✅", f"<i>{len(run)} turns passed</i>", "", "", ""))
        run.clear()

    for turn in turns:
        if turn.passed and not keep:
            run.append(turn)
            continue
        flush()
        rows.append(_turn_row(turn, limits))
    flush()
    if len(rows) > limits.rows:
        hidden = len(rows) - limits.rows
        rows = [
            *rows[: limits.rows],
            _Row("…", f"<i>{hidden} more rows in report.html</i>", "", "", ""),
        ]
    return rows


def _chat_turn(turn: TurnResult, limits: _Limits) -> str:
    """One turn of a transcript: the user's line, the agent's, what failed there."""
    status = v.turn_status(turn)
    who = turn.source or "scripted"
    lines = [
        f"<b>{turn.turn_index + 1}</b> {v.STATUS_ICON[status]} 👤 <b>user</b> <i>({who})</i>: "
        + md_text(turn.input, limits.input)
    ]
    if status == "skipped":
        lines.append("🤖 <b>agent</b>: <i>not sent</i>")
    elif turn.response is None:
        lines.append("🤖 <b>agent</b>: <i>no reply</i>")
    else:
        lines.append("🤖 <b>agent</b>: " + md_text(turn.response, limits.got))
    if turn.tool_invocations:
        lines.append(f"🔧 {md_text(v.calls_text(turn.tool_invocations), limits.tools)}")
    if status != "passed":
        lines.append("✗ " + _cell_checks(turn, limits))
    return "<br>".join(lines)


def _chat(case: CaseResult, limits: _Limits) -> list[str]:
    """A simulated case's transcript: every turn up to the block's row limit, then the end."""
    if case.skipped or case.simulation is None:
        return []
    turns = case.all_turns()
    shown = [_chat_turn(t, limits) for t in turns[: limits.rows]]
    if len(turns) > limits.rows:
        shown.append(f"<i>… {len(turns) - limits.rows} more turns in report.html</i>")
    shown.append(f"🏁 <b>ended</b>: {md_text(v.ended_text(case.simulation), limits.check)}")
    return shown


def _block(case: CaseResult, limits: _Limits) -> _Block:
    first = v.first_failure(case)
    turns = case.all_turns()
    passed = sum(1 for t in turns if t.passed)
    stats = f"{passed} of {v.plural(len(turns), 'turn')} passed · {v.duration(case.duration_ms)}"
    runs = v.runs_text(case)
    shown = v.representative_run(case)
    if runs is not None and shown is not None:
        stats = f"{md_text(runs)} · turns of run {shown + 1}: " + stats
    if case.token_usage.total_tokens:
        stats += f" · {case.token_usage.total_tokens:,} tokens"
    judged = v.judge_usage(case.judge_token_usage, case.judge_cost_usd)
    if judged:
        stats += f" · {judged}"
    users = v.user_usage(case.simulation)
    if users:
        stats += f" · {users}"
    reason = first.reason if first is not None else "failed"
    repeat = v.repeat_reason(case)
    if repeat is not None:
        reason = f"{repeat}; first failure: {reason}"
    more = f" <i>(+{first.more} more)</i>" if first is not None and first.more else ""
    turn_errors = {e for t in turns for e in t.errors}
    return _Block(
        icon=v.STATUS_ICON[case.outcome],
        title=_case_title(case),
        reason=md_text(reason, limits.check) + more,
        where=_where(case),
        stats=stats,
        # case-level errors (a session that never opened); turn errors are in the table
        errors=[
            md_text(e, limits.check)
            for e in case.errors
            if e not in turn_errors and (case.fixture is None or e not in case.fixture.misses)
        ][:3],  # a fixture miss is shown whole, with its re-record command, below
        rows=[] if case.simulation is not None else _rows(case, limits),
        simulation=_simulation_text(case, limits),
        chat=_chat(case, limits),
        conversation=[
            f"<b>{md_text(c.label, 60)}</b>: {md_text(c.text, limits.check)}"
            for c in v.conversation_checks(case)[: limits.checks]
        ],
        **_misses(case, limits),
    )


def _misses(case: CaseResult, limits: _Limits) -> dict[str, Any]:
    """The block's fixture misses, whole (the first difference and the re-record command
    are the point of them), the command once, as code."""
    fixture = case.fixture
    if fixture is None or not fixture.misses:
        return {}
    command = fixture.rerecord or ""
    tail = f". Re-record this test case: {command}"
    shown = []
    for message in fixture.misses[: limits.checks]:
        text = message.removeprefix("not in the fixtures: ")
        shown.append(md_text(text.removesuffix(tail) if command else text, limits.check * 4))
    return {"misses": shown, "rerecord": md_code(command, 600) if command else ""}


def _simulation_text(case: CaseResult, limits: _Limits) -> str:
    simulation = case.simulation
    if simulation is None:
        return ""
    return (
        f"<b>Simulated user</b> ({md_text(v.simulator_name(simulation.simulator), 120)}) · "
        f"goal: {md_text(simulation.goal, limits.input)}"
    )


def _compact_row(case: CaseResult) -> _CompactRow:
    first = v.first_failure(case)
    reason = first.reason if first else "failed"
    repeat = v.repeat_reason(case)
    if repeat is not None:
        reason = f"{repeat}; first failure: {reason}"
    return _CompactRow(
        title=f"{v.STATUS_ICON[case.outcome]} {_case_title(case)}",
        where=_where(case),
        reason=md_text(reason, 160 if repeat is None else 320),
    )


# --------------------------------------------------------------------------- rendering


@functools.cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Markdown: every value is escaped by md_text before it gets here
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _render_block(case: CaseResult) -> str:
    template = _templates().get_template("failure.md.j2")
    text = template.render(case=_block(case, _NORMAL))
    if len(text) > _BLOCK_MAX:
        text = template.render(case=_block(case, _TIGHT))
    return text.rstrip("\n")


def _footer(report: Report, links: v.RunLinks | None) -> str:
    parts = [f"multiturn-eval {md_text(report.run.version or '')}".rstrip()]
    suites = report.run.suites
    shown = ", ".join(md_code(s, 120) for s in suites[:8])
    if len(suites) > 8:
        shown += f" and {len(suites) - 8} more"
    if shown:
        parts.append(shown)
    sha = report.run.git_sha
    if sha:
        short = md_text(sha[:7])
        parts.append(_link(short, links.commit_url) if links and links.commit_url else short)
    if links:
        parts.append(_link("workflow run", links.run_url))
        parts.append(_link("full reports (artifacts)", links.artifacts_url))
    return " · ".join(parts)


def _omitted_note(count: int, links: v.RunLinks | None) -> str:
    where = (
        f"in the {_link('run artifacts', links.artifacts_url)}"
        if links
        else "in the report directory"
    )
    return (
        f"**{v.plural(count, 'more failing test case')} not shown** "
        f"(a comment is limited to {MAX_CHARS:,} characters): every failure is in "
        f"`report.html`, `junit.xml` and `report.json` {where}."
    )


def _fixtures_line(report: Report) -> str:
    fixtures = report.run.fixtures
    return f"🎞️ {md_text(v.fixtures_line(fixtures), 1200)}" if fixtures is not None else ""


def _scope_notice(report: Report) -> str:
    """A shard's partial view, and a spend cap that kept test cases from starting."""
    parts = []
    shard = report.run.shard
    if shard is not None and shard.total > 1:
        parts.append(
            f"This is shard {shard.index}/{shard.total} of a split run: "
            "`multiturn-eval merge` the shard reports for the whole result."
        )
    cap = report.run.spend_cap
    if cap is not None and cap.reached and cap.not_started:
        parts.append(
            f"Spend cap of {dollars(cap.max_cost_usd)} reached (${cap.spent_usd:.4f} spent): "
            f"{v.plural(cap.not_started, 'test case')} not started."
        )
    return " ".join(parts)


@v.gc_paused
def render_markdown(report: Report) -> str:
    """The comment body; a report made in GitHub Actions links to its workflow run."""
    links = v.run_links(report)
    scan = _scan(report)
    s = report.summary
    page: dict[str, Any] = {
        "marker": comment_marker(report),
        "verdict": _verdict(report),
        "totals": _totals(report),
        "suites": scan.suite_rows,
        "notice": " ".join(
            n
            for n in (
                f"The run did not complete ({md_text(report.run.stop_reason or 'interrupted', 300)}): "
                "test cases that did not finish are reported as not run."
                if not report.run.complete
                else "",
                _scope_notice(report),
            )
            if n
        ),
        "fixtures": _fixtures_line(report),
        "regrade": render_regrade(report.regrade) if report.regrade is not None else "",
        "comparison": render_comparison(report.baseline) if report.baseline is not None else "",
        "blocks": [],
        "compact": [],
        "compact_title": "",
        "omitted": "",
        "passed_line": (
            f"✅ {v.plural(s.passed, 'test case')} passed "
            f"({v.plural(scan.passed_turns, 'turn')}); "
            "not listed."
            if s.passed and scan.failing
            else ""
        ),
        "skipped_line": (
            f"⏭️ {v.plural(scan.skipped, 'test case')} not run: "
            + md_text(scan.first_skip_reason, 200)
            if scan.skipped
            else ""
        ),
        "footer": _footer(report, links),
        "flaky": scan.flaky_lines(),
    }
    template = _templates().get_template("summary.md.j2")
    if not scan.failing:
        return template.render(page)
    failing_count = scan.failing
    # the most important failures, read again one at a time (no more can be shown)
    failing = (report.results[i] for _, i in sorted(scan.first_failing))

    # The fixed part with every section present and the longest counts: the rest is the budget.
    worst = dict(page, blocks=[""], compact=[_CompactRow("", "", "")])
    worst["compact_title"] = f"{failing_count:,} more failing test cases (first failure each)"
    worst["omitted"] = _omitted_note(failing_count, links)
    budget = MAX_CHARS - len(template.render(worst)) - 64
    blocks: list[str] = []
    compact: list[_CompactRow] = []
    used = 0
    for case in failing:
        if not compact and len(blocks) < MAX_BLOCKS:
            # whole blocks while they fit, then one table row per further failure
            block = _render_block(case)
            if used + len(block) + 2 <= budget:
                blocks.append(block)
                used += len(block) + 2
                continue
        row = _compact_row(case)
        size = len(row.title) + len(row.where) + len(row.reason) + 12
        if used + size > budget:
            break
        compact.append(row)
        used += size
    shown = len(blocks) + len(compact)
    while True:
        omitted = failing_count - len(blocks) - len(compact)
        page.update(
            blocks=blocks,
            compact=compact,
            compact_title=(
                f"{v.plural(len(compact), 'more failing test case')} (first failure each)"
                if compact
                else ""
            ),
            omitted=_omitted_note(omitted, links) if omitted else "",
        )
        text = template.render(page)
        if len(text) < MAX_CHARS or shown == 0:
            return text
        # a safety net: the budget above is conservative, so this is not expected to run
        if compact:
            compact.pop()
        else:
            blocks.pop()
        shown -= 1


def stream_markdown(report: Report) -> Iterator[str]:
    """:func:`render_markdown`'s text (at most 65,536 characters: one piece)."""
    yield render_markdown(report)
