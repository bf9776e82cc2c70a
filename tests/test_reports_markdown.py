"""summary.md: golden files, GitHub-flavoured rendering (cmarkgfm), hostile text, size."""

from __future__ import annotations

import html
import re
import textwrap
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from multiturn_eval import cli
from multiturn_eval.reports.markdown import (
    MAX_BLOCKS,
    MAX_CHARS,
    comment_marker,
    md_text,
    render_markdown,
)
from multiturn_eval.reports.writer import write_reports
from multiturn_eval.results import Report
from multiturn_eval.secrets import Redactor

from .reports_fixtures import (
    GITHUB_ENV,
    call,
    case,
    check_golden,
    failing_report,
    interrupted_report,
    large_report,
    metric,
    not_run,
    report,
    sample_report,
    turn,
    with_github,
)

RUN_URL = "https://github.com/acme/agents/actions/runs/4242"
OUR_LINKS = {
    RUN_URL,
    RUN_URL + "#artifacts",
    "https://github.com/acme/agents/commit/0123456789abcdef0123456789abcdef01234567",
}
# what GitHub shows: GFM with its extensions; raw HTML kept (GitHub keeps a sanitised
# subset, <details>/<summary>/<b>/<br> among it), so any markup that got through shows up
GFM_EXTENSIONS = ["table", "autolink", "strikethrough", "tagfilter"]
ALLOWED_TAGS = {
    "h3", "h4", "p", "table", "thead", "tbody", "tr", "th", "td", "details", "summary",
    "b", "i", "br", "code", "a", "sub", "blockquote", "strong",
}  # fmt: skip


def gfm(markdown: str) -> str:
    return cmarkgfm.markdown_to_html_with_extensions(
        markdown, options=Options.CMARK_OPT_UNSAFE, extensions=GFM_EXTENSIONS
    )


@dataclass
class Table:
    header: int = 0
    rows: list[list[str]] = field(default_factory=list)


class Page(HTMLParser):
    """The rendered comment as a reader sees it: tags, links, text, tables."""

    def __init__(self, rendered: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.texts: list[str] = []
        self.tables: list[Table] = []
        self.details_depth = 0
        self.details_max = 0
        self.details_balanced = True
        self._cells: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_head = False
        self.comments: list[str] = []
        self.feed(rendered)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")
        elif tag == "details":
            self.details_depth += 1
            self.details_max = max(self.details_max, self.details_depth)
        elif tag == "table":
            self.tables.append(Table())
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._cells = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.details_depth -= 1
            self.details_balanced &= self.details_depth >= 0
        elif tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None and self._cells is not None:
            self._cells.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._cells is not None:
            if self._in_head:
                self.tables[-1].header = len(self._cells)
            else:
                self.tables[-1].rows.append(self._cells)
            self._cells = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    @property
    def text(self) -> str:
        return "".join(self.texts)


def check_well_formed(markdown: str, *, links: set[str] | None = None) -> Page:
    """What every summary.md must satisfy once GitHub renders it."""
    assert len(markdown) < MAX_CHARS
    assert markdown.splitlines()[0].startswith("<!-- multiturn-eval:")
    for line in markdown.splitlines():
        assert not line.lstrip().startswith("::"), f"workflow command at line start: {line[:80]}"
    assert "\x00" not in markdown and "\x1b" not in markdown
    page = Page(gfm(markdown))
    assert set(page.tags) <= ALLOWED_TAGS, set(page.tags) - ALLOWED_TAGS
    assert page.details_balanced and page.details_depth == 0
    assert page.details_max <= 1  # no <details> ever opened inside another
    assert set(page.hrefs) <= (links or set()), page.hrefs
    for table in page.tables:
        assert table.header in (3, 5, 6)
        for row in table.rows:
            assert len(row) == table.header, row
    # nothing a reader's GitHub would turn into a notification, link or image
    text = page.text
    assert not re.search(r"(?<![\w`])@[A-Za-z0-9]", text), "mention"
    assert not re.search(r"#[0-9]|\bGH-[0-9]", text, re.IGNORECASE), "issue reference"
    assert not re.search(r"[a-z]://|\bwww\.", text, re.IGNORECASE), "autolinkable URL"
    return page


# ------------------------------------------------------------------------- goldens


def test_golden_sample_with_github_links() -> None:
    markdown = render_markdown(with_github(sample_report(), GITHUB_ENV))
    check_golden("summary.md", markdown)
    check_well_formed(markdown, links=OUR_LINKS)


def test_golden_interrupted_without_github() -> None:
    markdown = render_markdown(interrupted_report())
    check_golden("summary-interrupted.md", markdown)
    check_well_formed(markdown)


# --------------------------------------------------------------------------- layout


def test_marker_verdict_and_totals_come_first() -> None:
    rep = sample_report()
    lines = render_markdown(rep).splitlines()
    assert lines[0] == comment_marker(rep)
    assert lines[1] == "### ❌ multiturn-eval: 5 of 7 test cases failed"
    assert lines[3].startswith("| Test cases | Turns | Pass rate | Tokens | Est. cost | Duration |")
    page = Page(gfm("\n".join(lines)))
    totals = page.tables[0]
    assert totals.rows == [
        [
            "7: 2 passed, 5 failed (2 with errors)",
            "13: 6 passed, 6 failed, 1 skipped",
            "28.6%",
            "2,570",
            "$0.0101",
            "1m 12s",
        ]
    ]


def test_comment_marker_names_the_suite_set_stably() -> None:
    one = report([case(0, "a", [turn(0, "q", "a")])], ["evals/a.yaml", "evals/b.yaml"])
    same = report([case(0, "a", [turn(0, "q", "a")])], ["./evals/b.yaml", "evals/a.yaml"])
    other = report([case(0, "a", [turn(0, "q", "a")])], ["evals/a.yaml"])
    assert comment_marker(one) == comment_marker(same)
    assert comment_marker(one) != comment_marker(other)
    assert re.fullmatch(r"<!-- multiturn-eval:[0-9a-f]{12} -->", comment_marker(one))


def test_each_failing_case_has_a_details_block_with_a_per_turn_table() -> None:
    page = Page(gfm(render_markdown(sample_report())))
    # totals, suites, then one table per failing case (refund-policy ... Broken_session)
    assert len(page.tables) == 2 + 5
    double = next(t for t in page.tables if any("2014" in c for r in t.rows for c in r))
    assert double.header == 5
    assert [r[0] for r in double.rows] == ["1 ✅", "2 ❌", "3 ✅"]
    turn2 = double.rows[1]
    assert turn2[1] == "and the difference from 2014?"
    assert turn2[2] == "50920tools: subtract"
    assert "The difference is 51,000 | roughly. cc @\u200boctocat </details>" in turn2[3]
    assert 'math-subtract(a=233715, b="182,795") -> 51000' in turn2[3]
    assert "tools: subtract: no call matched" in turn2[4]
    assert "numeric: expected 50920 (±0.5), got 51" in turn2[4]
    assert double.rows[0][4] == ""  # passing turns: nothing failed


def test_failures_lead_with_failed_checks_then_errors() -> None:
    markdown = render_markdown(sample_report())
    order = [
        markdown.index(name)
        for name in (
            "refund-policy",
            "tone-grader",
            "Double&#95;AAPL&#95;2015",
            "Slow&#95;backend",
            "Broken&#95;session",
        )
    ]
    # failed checks (support-bot's come first: the first failing turn is earlier) then errors
    assert order == sorted(order)


def test_passing_test_cases_are_summarised_not_listed() -> None:
    markdown = render_markdown(sample_report())
    assert "✅ 2 test cases passed (3 turns); not listed." in markdown
    assert "Single&#95;JKHY&#95;2009" not in markdown
    assert "greeting" not in markdown


def test_all_passed() -> None:
    passing = report([case(i, f"c{i}", [turn(0, "q", "a")]) for i in range(3)])
    markdown = render_markdown(passing)
    assert markdown.splitlines()[1] == "### ✅ multiturn-eval: all 3 test cases passed"
    assert "<details>" not in markdown
    check_well_formed(markdown)


def test_interrupted_run_says_so_and_counts_not_run() -> None:
    markdown = render_markdown(interrupted_report())
    assert markdown.splitlines()[1].startswith(
        "### ⚠️ multiturn-eval: run incomplete (interrupted by SIGTERM)"
    )
    assert "1 not run" in markdown
    assert "⏭️ 1 test case not run: not run&#58; interrupted by SIGTERM" not in markdown
    assert "⏭️ 1 test case not run: not run: interrupted by SIGTERM" in markdown


def test_links_to_the_run_and_its_artifacts_only_with_github_variables() -> None:
    rep = sample_report()
    assert "https://" not in render_markdown(rep)
    page = Page(gfm(render_markdown(with_github(rep, GITHUB_ENV))))
    assert set(page.hrefs) == OUR_LINKS
    retried = render_markdown(with_github(rep, {**GITHUB_ENV, "GITHUB_RUN_ATTEMPT": "2"}))
    assert f"({RUN_URL}/attempts/2#artifacts)" in retried


@pytest.mark.parametrize(
    "bad",
    [
        {"GITHUB_REPOSITORY": "acme/agents)[x](https://evil.example"},
        {"GITHUB_SERVER_URL": "javascript:alert(1)"},
        {"GITHUB_RUN_ID": "42 onmouseover=x"},
    ],
)
def test_odd_github_variables_make_no_link(bad: dict[str, str]) -> None:
    markdown = render_markdown(with_github(sample_report(), {**GITHUB_ENV, **bad}))
    assert "](" not in markdown
    check_well_formed(markdown)


# ---------------------------------------------------------------------- hostile text

CORPUS = [
    "pipe | in | the | reply",
    "two\nlines\n\n| fake | row |\n|---|---|\n| x | y |",
    "</details></summary></td></tr></table><details open><summary>fake",
    "<script>alert(1)</script><iframe src=//evil.example></iframe>",
    '<img src="http://evil.example/x.png" onerror="alert(1)">',
    "![tracking](http://evil.example/pixel.png)",
    "[click me](https://evil.example) and [ref][1]\n\n[1]: https://evil.example",
    "<https://evil.example> <mailto:someone@evil.example>",
    "bare https://evil.example/path, www.evil.example and someone@evil.example",
    "hello @octocat and @acme/security-team, cc @@double",
    "fixes #123, see acme/agents#1 and GH-42 and gh-7",
    "`code` and ``double`` and ```fence``` and a lone ` backtick",
    "::error::pwned\n::set-output name=x::y\n  ::warning file=a::b",
    "**bold** _em_ ~~strike~~ $x^2$ $$y$$ <b>bold tag</b>",
    "&lt;script&gt; &#64;octocat &amp; &#x3C;img&#x3E;",
    "back\\slash \\| escaped pipe \\",
    "nul\x00 bell\x07 esc\x1b[31mred\x1b[0m osc\x1b]0;title\x07 c1\x9b",
    "right-to-left \u202eمرحبا بالعالم\u202c and שלום, isolate \u2066x\u2069",
    "emoji 🧪👩‍💻🏳️‍🌈 and zero\u200bwidth",
    "<!-- a comment --> and --> and <!--",
    "# heading\n> quote\n- list item\n1. numbered\n===\n---",
    "carriage\r\nreturns\rand\u2028line\u2029separators",
    "x" * 100_000,
]


def hostile_report(payload: str) -> Report:
    """The payload everywhere an agent (or a suite in a pull request) controls text."""
    hostile = case(
        0,
        f"case {payload[:200]}",
        [
            turn(
                0,
                payload,
                payload,
                ground_truth=payload,
                tools=[call(f"tool{payload[:50]}", payload, arg=payload)],
                expected_tools=[(f"expected{payload[:50]}", None, f"no call matched: {payload}")],
                metrics=[
                    metric("equality", False, f"got {payload}"),
                    metric(
                        f"grader{payload[:40]}", False, None, error=f"Boom: {payload}", kind="code"
                    ),
                ],
                line=3,
            ),
            turn(1, payload, None, errors=[f"BackendError: {payload}"], infrastructure_error=True),
            turn(2, payload, None, errors=[f"skipped: {payload}"], skipped=True),
        ],
        suite_name=f"suite {payload[:100]}",
        suite=f"evals/{payload[:60]}.yaml",
        errors=[f"could not open a session: {payload}"],
    )
    return report(
        [hostile, not_run(1, payload[:100], [payload], payload)],
        complete=False,
        stop_reason=f"stopped after a fatal backend error: {payload}",
    )


@pytest.mark.parametrize("payload", CORPUS, ids=range(len(CORPUS)))
def test_hostile_text_cannot_break_out(payload: str) -> None:
    markdown = render_markdown(with_github(hostile_report(payload), GITHUB_ENV))
    page = check_well_formed(markdown, links=OUR_LINKS)
    # the turn table still has its three turn rows, whatever the payload held
    turn_tables = [t for t in page.tables if t.header == 5 and t.rows[0][0] == "1 ❌"]
    assert len(turn_tables) == 1
    assert [r[0] for r in turn_tables[0].rows] == ["1 ❌", "2 ⚠️", "3 ⏭️"]
    assert len(page.tables) == 3  # totals, suites, the one failing case
    # no markup of the payload's own survived: only our HTML comment (the marker)
    assert page.comments == [comment_marker(hostile_report(payload))[4:-3]]


@pytest.mark.parametrize(
    "payload",
    [p for p in CORPUS if "\n" not in p and "\r" not in p and len(p) < 300],
)
def test_hostile_text_reads_the_same_once_rendered(payload: str) -> None:
    """Escaping is faithful: a reader sees the agent's text, minus controls and bidi overrides."""
    cell = md_text(payload)
    rendered = Page(gfm(f"| a |\n|---|\n| {cell} |\n")).tables[0].rows[0][0]
    expected = re.sub(
        "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]",
        "",
        payload.replace("\x1b[31m", "").replace("\x1b[0m", "").replace("\x1b]0;title\x07", ""),
    )
    assert rendered.replace("\u200b", "") == expected.replace("\u200b", "")


def test_long_replies_are_cut_with_a_marker() -> None:
    markdown = render_markdown(failing_report(1, response="y" * 100_000, turns=1))
    assert "y" * 600 in markdown and "y" * 601 not in markdown
    assert "… [99,400 more characters cut; the whole text is in report.html]" in markdown


def test_rtl_text_and_emoji_survive() -> None:
    markdown = render_markdown(failing_report(1, response="مرحبا שלום 🧪👩‍💻", turns=1))
    assert "مرحبا שלום 🧪👩‍💻" in Page(gfm(markdown)).text


# ----------------------------------------------------------------------------- size


def test_two_thousand_failures_stay_under_the_limit() -> None:
    markdown = render_markdown(with_github(failing_report(2000), GITHUB_ENV))
    page = check_well_formed(markdown, links=OUR_LINKS)
    assert len(markdown) < 60_000
    assert markdown.splitlines()[1] == "### ❌ multiturn-eval: 2,000 of 2,000 test cases failed"
    assert Page(gfm(markdown)).tables[0].rows[0][0] == "2,000: 0 passed, 2,000 failed"
    full = markdown.count("<details>\n<summary>❌")
    listed = len(page.tables[-1].rows) if page.tables[-1].header == 3 else 0
    omitted = 2000 - full - listed
    assert full == MAX_BLOCKS and listed >= 50 and omitted > 0
    assert f"**{omitted:,} more failing test cases not shown**" in markdown
    assert f"[run artifacts]({RUN_URL}#artifacts)" in markdown
    assert "`report.html`" in markdown
    # the most important first: suite order among equals, so case-0000 leads
    assert markdown.index("case-0000") < markdown.index("case-0001")


def test_two_thousand_huge_hostile_failures_stay_under_the_limit() -> None:
    payload = "|<b>@octocat</b>|" * 6_000  # ~100 KB of text that escapes to 6x its size
    markdown = render_markdown(failing_report(2000, response=payload, turns=4))
    check_well_formed(markdown)
    assert "more failing test cases not shown" in markdown
    assert "in the report directory" in markdown


def test_one_enormous_test_case_is_shown_tighter_not_dropped() -> None:
    payload = "&" * 5_000
    many = failing_report(1, response=payload, turns=60)
    markdown = render_markdown(many)
    check_well_formed(markdown)
    assert "<details>\n<summary>❌" in markdown
    assert "more failing test case" not in markdown


def test_large_run_renders_compactly() -> None:
    markdown = render_markdown(large_report(1000, 4))
    page = check_well_formed(markdown)
    full = markdown.count("<details>\n<summary>❌")
    listed = len(page.tables[-1].rows) if page.tables[-1].header == 3 else 0
    match = re.search(r"\*\*([0-9,]+) more failing test cases? not shown\*\*", markdown)
    omitted = int(match.group(1).replace(",", "")) if match else 0
    assert full >= 20
    assert full + listed + omitted == 100


# ---------------------------------------------------------------- writer and the CLI


def test_secrets_are_redacted_before_escaping_could_split_them(tmp_path: Path) -> None:
    secret = "sk-live_ab*cd|ef"
    leaky = failing_report(1, response=f"my key is {secret} ok", turns=1)
    written = write_reports(
        leaky, tmp_path, ["markdown", "html", "junit", "json"], Redactor([secret])
    )
    for fmt, path in written.items():
        text = path.read_text(encoding="utf-8")
        shown = Page(gfm(text)).text if fmt == "markdown" else text
        assert "my key is *** ok" in shown, fmt
        for piece in ("sk-live", "ab&#42;cd", "&#95;ab", "live_ab"):
            assert piece not in text, (path.name, piece)


def test_writer_passes_the_environment_to_the_markdown(tmp_path: Path) -> None:
    written = write_reports(
        with_github(sample_report(), GITHUB_ENV), tmp_path, ["markdown"], Redactor()
    )
    assert RUN_URL in written["markdown"].read_text(encoding="utf-8")


def test_run_writes_all_four_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``multiturn-eval run`` end to end on the python backend: every report, by default."""
    (tmp_path / "r4_e2e_agent.py").write_text(
        textwrap.dedent(
            """
            from multiturn_eval import TokenUsage, ToolInvocation, TurnReply

            class Session:
                def send(self, message, files=()):
                    if "boom" in message:
                        raise RuntimeError("backend exploded")
                    if "diff" in message:
                        return TurnReply(
                            response="The difference is 51,000 @octocat </details> | ![x](http://e/x)",
                            tool_invocations=[ToolInvocation(name="math-subtract", args={"a": 1, "b": "2"})],
                            token_usage=TokenUsage(prompt_tokens=100, completion_tokens=20),
                        )
                    return TurnReply(response="206588", token_usage=TokenUsage(prompt_tokens=50))

            def make(ctx):
                return Session()
            """
        )
    )
    (tmp_path / "suite.yaml").write_text(
        textwrap.dedent(
            """
            name: e2e
            agent: {backend: python, factory: "r4_e2e_agent:make"}
            evaluations: [{type: standard, metric: numeric}]
            test_cases:
              - name: passes
                turns:
                  - {input: what is net cash?, ground_truth: "206588"}
              - name: fails
                turns:
                  - {input: what is net cash?, ground_truth: "206588"}
                  - input: what is the diff?
                    ground_truth: "25587"
                    expected_tools: [{name: subtract, args: {b: {regex: "3"}}}]
              - name: errors
                turns:
                  - {input: boom, ground_truth: "1"}
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "suite.yaml", "-o", "out"], env=dict(GITHUB_ENV, NO_COLOR="1"))
    out = capsys.readouterr().out
    assert code == 1
    names = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert {"report.json", "junit.xml", "summary.md", "report.html"} <= set(names)
    assert "reports: out/report.json, out/junit.xml, out/summary.md, out/report.html" in out
    markdown = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    page = check_well_formed(markdown, links={RUN_URL, RUN_URL + "#artifacts"})
    assert markdown.splitlines()[1] == "### ❌ multiturn-eval: 2 of 3 test cases failed"
    assert "tools: subtract: no call matched" in page.text
    assert "<code>suite.yaml:9</code>" in markdown
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert '<testcase classname="e2e" name="fails" file="suite.yaml"' in junit
    assert (
        '<error type="InfrastructureError" message="turn 1: RuntimeError: backend exploded">'
        in junit
    )
    page_html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "@octocat </details>" not in page_html
    assert html.escape("@octocat </details>") in page_html  # the static rows for readers without JS
    assert "@octocat \\u003c/details\\u003e" in page_html  # the JSON the script draws from
