"""The baseline comparison's part of ``summary.md`` (``--baseline``): a totals row and a section.

:func:`delta_row` is the totals table's second row (this run minus the baseline);
:func:`render_comparison` the section below it: regressions first (the turn,
before -> after, the failing check), then what was fixed, the rest folded. Each
part has a row budget and a character budget, so however many cases changed the
section stays under about 30,000 characters and the comment keeps room for the
failing test cases. Escaping as in :mod:`.markdown` (:mod:`.escape`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..results import BaselineComparison, CaseChange
from . import _view as v
from .escape import md_code, md_text


@dataclass
class TotalsRow:
    """A row of the totals table: this run's totals, or the change against the baseline."""

    cases: str
    turns: str
    pass_rate: str
    tokens: str
    cost: str
    duration: str


def _counts_text(counts: dict[str, int]) -> str:
    shown = [f"{n:,} {v.CHANGE_WORDS[k]}" for k, n in counts.items() if n and k in v.CHANGE_WORDS]
    return ", ".join(shown) or "none"


def delta_row(comparison: BaselineComparison) -> TotalsRow:
    """The totals table's second row: this run minus the baseline."""
    return TotalsRow(
        cases=f"<b>Δ vs baseline</b>: {_counts_text(comparison.counts)}",
        turns=_counts_text(
            {k: n for k, n in comparison.turn_counts.items() if k in ("regressed", "fixed")}
        ),
        pass_rate=v.delta_rate(comparison.pass_rate.delta),
        tokens=v.delta_count(comparison.total_tokens.delta),
        cost=v.delta_cost(comparison.cost_usd.delta),
        duration=v.delta_duration(comparison.duration_ms.delta),
    )


#: rows per section of the baseline comparison, and the characters each section may take
#: (whatever the names and checks hold: the whole section stays under about 30,000, so
#: the comment keeps room for the failing test cases below it)
_MAX_REGRESSED, _MAX_FIXED, _MAX_OTHER = 30, 30, 50
_BUDGET_REGRESSED, _BUDGET_FIXED, _BUDGET_OTHER = 16_000, 6_000, 6_000


def _change_title(change: CaseChange) -> str:
    return f"{md_text(change.name, 120)} <sub>{md_code(change.suite, 80)}</sub>"


def _changed_turns(change: CaseChange, kind: str) -> str:
    turns = [t for t in change.turns if t.change == kind]
    if not turns:
        return "—"
    shown = ", ".join(
        f"{t.turn_index + 1} ({md_text(t.before or '—', 20)} → {md_text(t.after or '—', 20)})"
        for t in turns[:5]
    )
    return shown + (f" <i>+{len(turns) - 5} more</i>" if len(turns) > 5 else "")


def _first_turn_check(change: CaseChange) -> str:
    for turn in change.turns:
        if turn.change == "regressed" and turn.failing_check:
            return f"turn {turn.turn_index + 1}: {turn.failing_check}"
    return change.failing_check or ""


def _verdicts(change: CaseChange) -> str:
    return f"{md_text(change.before or '—', 30)} → {md_text(change.after or '—', 30)}"


def _table(
    changes: list[CaseChange],
    row: Callable[[CaseChange], str],
    head: str,
    max_rows: int,
    budget: int,
) -> str:
    """``head`` and a row per change while within ``max_rows`` and ``budget`` characters."""
    rows: list[str] = []
    used = len(head)
    for change in changes[:max_rows]:
        text = row(change)
        if used + len(text) + 1 > budget:
            break
        rows.append(text)
        used += len(text) + 1
    table = head + "\n".join(rows)
    left = len(changes) - len(rows)
    if left:
        table += (
            f"\n\n<i>{v.plural(left, 'more test case')}: every one is in report.html and "
            "report.json.</i>"
        )
    return table


def _regressed_row(c: CaseChange) -> str:
    return (
        f"| {_change_title(c)} | {_changed_turns(c, 'regressed')} | {_verdicts(c)} | "
        f"{md_text(_first_turn_check(c), 200)} |"
    )


def _fixed_row(c: CaseChange) -> str:
    return f"| {_change_title(c)} | {_changed_turns(c, 'fixed')} | {_verdicts(c)} |"


def _other_row(c: CaseChange) -> str:
    return (
        f"| {v.CHANGE_ICON[c.change]} {v.CHANGE_WORDS[c.change]} | {_change_title(c)} | "
        f"{_verdicts(c)} |"
    )


_OTHERS = ("still_failing", "within_noise", "still_passing", "new", "removed", "not_run")

#: the sections with a heading of their own: (change, title, table head, row, rows, characters)
_SECTIONS: tuple[tuple[str, str, str, Callable[[CaseChange], str], int, int], ...] = (
    (
        "regressed",
        "🔻 Regressions",
        "| Test case | Turn (before → after) | Case | What fails now |\n|:--|:--|:--|:--|\n",
        _regressed_row,
        _MAX_REGRESSED,
        _BUDGET_REGRESSED,
    ),
    (
        "fixed",
        "🔺 Fixed",
        "| Test case | Turn (before → after) | Case |\n|:--|:--|:--|\n",
        _fixed_row,
        _MAX_FIXED,
        _BUDGET_FIXED,
    ),
)


def render_comparison(comparison: BaselineComparison) -> str:
    """Regressions first (turn, before → after, the failing check), then fixed, the rest folded.

    Each section has a row budget and a character budget, so however many cases changed
    and whatever their names hold, the section stays under about 30,000 characters.
    """
    by: dict[str, list[CaseChange]] = {}
    for change in comparison.cases:
        by.setdefault(change.change, []).append(change)
    parts: list[str] = []
    for kind, title, columns, row, most, budget in _SECTIONS:
        changes = by.get(kind, [])
        if changes:
            head = f"#### {title} vs baseline ({len(changes):,})\n\n{columns}"
            parts.append(_table(changes, row, head, most, budget))
    # the most telling first: what still fails, then what is new, gone or not run
    rest = [
        c
        for k in ("still_failing", "within_noise", "new", "removed", "not_run", "still_passing")
        for c in by.get(k, [])
    ]
    if rest:
        counts = {k: len(by.get(k, [])) for k in _OTHERS}
        head = (
            f"<details>\n<summary>Other test cases vs baseline: {_counts_text(counts)}</summary>"
            "\n\n| Change | Test case | Before → after |\n|:--|:--|:--|\n"
        )
        parts.append(_table(rest, _other_row, head, _MAX_OTHER, _BUDGET_OTHER) + "\n\n</details>")
    source = md_text(comparison.file, 160)
    if comparison.run.git_sha:
        source += f" ({md_text(comparison.run.git_sha[:7])})"
    parts.append(f"<sub>Baseline: {source}. {md_text(comparison.noise, 300)}.</sub>")
    for warning in comparison.warnings[:3]:
        parts.append(f"<sub>⚠️ {md_text(warning, 300)}</sub>")
    if len(comparison.warnings) > 3:
        parts.append(f"<sub>… {len(comparison.warnings) - 3:,} more warnings in report.json</sub>")
    return "\n\n".join(parts)
