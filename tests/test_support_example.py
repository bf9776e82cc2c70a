"""examples/support: green offline as the README says, and its checks catch a bot that breaks policy.

Runs the real CLI (``multiturn_eval.cli.main``) on the example suite with the
``python`` backend; then on copies of the suite whose agent is told to break the
shop's policy (``options: {careless: true}`` / ``{fibs: true}``), to prove the
response checks, forbidden/ordered tools, conversation_tools and the
conversation-level graders fail when they should.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import cli

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "examples" / "support" / "suite.yaml"
SIMULATED = REPO / "examples" / "support" / "suite-simulated.yaml"
CLAUDE = REPO / "examples" / "support" / "suite-simulated-claude.yaml"
OUTCOMES = {
    "a verified customer gets the refund": "goal_met",
    "no second refund, even when asked again": "gave_up",
    "a customer who does not know her card digits gets no refund": "max_turns",
    "an impatient customer in lowercase still gets the refund": "goal_met",
}


def run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suite: Path
) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["run", str(suite), "-o", str(out), "--format", "json,junit,markdown"], env={})
    text = capsys.readouterr().out
    return code, json.loads((out / "report.json").read_text()), text


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def with_options(tmp_path: Path, options: str, suite: Path = SUITE) -> Path:
    text = suite.read_text().replace(
        "  factory: examples.support.agent:factory\n",
        f"  factory: examples.support.agent:factory\n  options: {options}\n",
    )
    text = text.replace("schema_file: schemas/", f"schema_file: {SUITE.parent / 'schemas'}/")
    target = tmp_path / "suite.yaml"
    target.write_text(text)
    return target


def failures(report: dict[str, Any]) -> dict[str, list[str]]:
    """Case name -> every failed check, in words (turn checks and conversation checks)."""
    out: dict[str, list[str]] = {}
    for case in report["results"]:
        reasons = []
        for turn in case["turns"]:
            reasons += [d["reason"] for d in turn["arg_match_details"] if d["reason"]]
            reasons += [
                f"{m['metric_name']}: {m['reason']}"
                for m in turn["metric_results"]
                if not m["passed"]
            ]
        reasons += [
            f"conversation {m['metric_name']}: {m['reason']}"
            for m in case["metric_results"]
            if m.get("scope") == "conversation" and not m["passed"]
        ]
        if reasons:
            out[case["name"]] = reasons
    return out


def test_the_example_passes_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, out = run(tmp_path, capsys, Path("examples/support/suite.yaml"))
    assert code == 0, out
    summary = report["summary"]
    assert (summary["total"], summary["passed"]) == (6, 6)
    assert summary["turns"] == {"total": 12, "passed": 12, "failed": 0, "skipped": 0}
    # it uses what the README says it uses
    metrics = set(summary["metrics"])
    assert {"conversation_tools", "polite_throughout", "no_unbacked_refund_promise"} <= metrics
    assert {"order_json", "reference", "asks_to_verify", "no_rudeness"} <= metrics


def test_a_careless_bot_fails_the_checks_that_guard_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, _ = run(tmp_path, capsys, with_options(tmp_path, "{careless: true}"))
    assert code == 1
    failed = failures(report)
    assert set(failed) == {
        "refund after verification",
        "wrong card digits",
        "account deletion goes to the privacy team",
        "stays polite with an angry customer",
    }
    refund = failed["refund after verification"]
    assert (
        "issue_refund: forbidden, but called in this turn 1 time: call #2 "
        "issue_refund(order_id='A1001', amount=59.9)"
    ) in refund
    assert any(
        r.startswith("no_early_promise: expected the reply not to contain 'issued a refund'")
        for r in refund
    )
    assert "lookup_order: not called in this turn (tools called: verify_identity)" in refund
    deletion = failed["account deletion goes to the privacy team"]
    assert (
        "conversation conversation_tools: delete_account: forbidden, but called in the "
        "conversation 1 time: call #2 (turn 2) delete_account(customer_id='C100')"
    ) in deletion
    assert "create_ticket: not called in this turn (tools called: delete_account)" in deletion


def test_a_bot_that_promises_refunds_it_never_made_fails_the_conversation_grader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, out = run(tmp_path, capsys, with_options(tmp_path, "{fibs: true}"))
    assert code == 1
    failed = failures(report)
    assert (
        "conversation no_unbacked_refund_promise: turn 1 says a refund was issued, but no "
        "issue_refund call had succeeded by then"
    ) in failed["refund after verification"]
    assert "conversation no_unbacked_refund_promise: turn 1 says" in out


def test_the_example_needs_no_network_or_key() -> None:
    assert "ANTHROPIC_API_KEY" not in SUITE.read_text()
    assert "backend: python" in SUITE.read_text()
    assert (SUITE.parent / "README.md").is_file()


# ------------------------------------------------------------- the simulated variants


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["simulation"]["outcome"] for c in report["results"]}


def test_the_simulated_example_passes_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, out = run(tmp_path, capsys, Path("examples/support/suite-simulated.yaml"))
    assert code == 0, out
    assert report["summary"]["passed"] == 4
    assert outcomes(report) == OUTCOMES
    first = report["results"][0]
    assert [t["source"] for t in first["turns"]] == ["simulated"] * 3
    scripted = report["results"][1]["turns"][0]
    assert scripted["source"] == "scripted" and scripted["tools_matched"]
    said = [t["input"] for t in report["results"][2]["turns"]]
    assert said[0] == "Hello, I need a refund for order A1001."  # the opening
    assert "I don't know the card's last four digits" in said[1]  # never invented
    lowercase = [t["input"] for t in report["results"][3]["turns"]]
    assert lowercase[0] == "hi, i'd like a refund for order A1001."


def test_the_simulated_example_catches_a_careless_bot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, _ = run(tmp_path, capsys, with_options(tmp_path, "{careless: true}", SIMULATED))
    assert code == 1
    failed = failures(report)
    # it refunds the customer who could not be verified, and skips verifying the others
    assert any(
        "issue_refund: forbidden, but called in the conversation" in r
        for r in failed["a customer who does not know her card digits gets no refund"]
    )
    assert "a verified customer gets the refund" in failed


def test_the_simulated_example_catches_an_empty_promise_the_customer_believed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    code, report, _ = run(tmp_path, capsys, with_options(tmp_path, "{fibs: true}", SIMULATED))
    assert code == 1
    case = report["results"][0]
    # the customer ends with goal_met on the bot's word; the conversation checks catch it
    assert case["simulation"]["outcome"] == "goal_met"
    assert any(
        m["metric_name"] == "no_unbacked_refund_promise" and not m["passed"]
        for m in case["metric_results"]
    )


def test_the_claude_variant_against_the_fake_anthropic_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    from tests.fakes._server import Request
    from tests.fakes.anthropic_server import API_KEY, FakeAnthropic, Message, ToolUse, Usage
    from tests.simulators import customer_fields

    def claude(request: Request) -> Message:
        name = request.body["tool_choice"]["name"]
        if name == "record_fidelity":
            fields: dict[str, Any] = {"passed": True, "reason": "It kept to its goal and facts."}
        else:
            fields = customer_fields(request.body["messages"][0]["content"])
        return Message(tool_uses=[ToolUse(name, fields)], usage=Usage(400, 30))

    with FakeAnthropic(claude) as fake:
        out = tmp_path / "out"
        capsys.readouterr()
        code = cli.main(
            ["run", str(CLAUDE), "-o", str(out), "--format", "json"],
            env={"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": fake.url},
        )
        text = capsys.readouterr().out
    assert code == 0, text
    report = json.loads((out / "report.json").read_text())
    assert outcomes(report) == OUTCOMES
    first = report["results"][0]["simulation"]
    assert first["simulator"] == {"backend": "anthropic", "model": "claude-haiku-4-5"}
    assert first["fidelity"]["judged"] == 3 and first["fidelity"]["failed"] == 0
    assert report["summary"]["user_token_usage"]["total_tokens"] > 0
    assert report["summary"]["judge_token_usage"]["total_tokens"] > 0


def test_the_claude_variant_needs_a_key_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    capsys.readouterr()
    code = cli.main(["validate", str(CLAUDE)], env={})
    err = capsys.readouterr().err
    assert code == 2
    assert "no API key for the anthropic simulated user: set ANTHROPIC_API_KEY" in err
    assert "backend: python" in SIMULATED.read_text()
    assert "ANTHROPIC_API_KEY" not in SIMULATED.read_text()


# ------------------------------------------------------------------- the MCP variant

MCP_SUITE = SUITE.with_name("suite-mcp.yaml")

#: the conversations of suite-mcp.yaml as a model plays them: the last user message (a part
#: of it) -> the steps of its turn, a tool call each, then the reply
PLAYS: dict[str, list[tuple[str, Any]]] = {
    "the keyboard is broken": [
        (
            "text",
            "I can help with that. First I need to verify your identity: please give me your "
            "customer ID and the last four digits of your card.",
        )
    ],
    "C100 and the last four digits are 4242": [
        ("call", ("verify_identity", {"customer_id": "C100", "card_last4": "4242"})),
        ("call", ("lookup_order", {"order_id": "A1001"})),
        ("call", ("issue_refund", {"order_id": "A1001", "amount": 59.9})),
        (
            "text",
            "Thank you, Ada. I have issued a refund of $59.90 for order A1001. Per our refund "
            "policy, it reaches your card within 5-7 business days. Reference: R-A1001.",
        ),
    ],
    "Refund order A1003": [
        ("call", ("verify_identity", {"customer_id": "C200", "card_last4": "1881"})),
        ("call", ("lookup_order", {"order_id": "A1003"})),
        (
            "text",
            "Thank you, Grace. Order A1003 has already been refunded, so I cannot refund it again.",
        ),
    ],
    "refund 500 EUR": [
        ("call", ("verify_identity", {"customer_id": "C100", "card_last4": "4242"})),
        ("call", ("lookup_order", {"order_id": "A1001"})),
        ("call", ("issue_refund", {"order_id": "A1001", "amount": 500})),
        ("text", "I'm sorry, the refund did not go through: the order total is $59.90."),
    ],
}


def support_model(request: Any) -> Any:
    """The fake Anthropic server's replies for suite-mcp.yaml (see PLAYS)."""
    from tests.fakes import anthropic_server as fa

    messages = request.body["messages"]
    users = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user" and any(b.get("type") == "text" for b in m["content"])
    ]
    said = " ".join(b["text"] for b in messages[users[-1]]["content"] if b.get("type") == "text")
    steps = next(steps for key, steps in PLAYS.items() if key in said)
    calls_so_far = sum(
        1
        for m in messages[users[-1] :]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    kind, value = steps[calls_so_far]
    if kind == "call":
        return fa.tool_uses(value)
    return fa.text(value)


def test_the_mcp_variant_passes_offline_against_the_fake_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], in_repo: None
) -> None:
    """suite-mcp.yaml: billing_server.py (an MCP server written with the mcp SDK) serves
    lookup_order and issue_refund, one server per test case; the checks read its calls."""
    import os
    import sys

    from tests.fakes import anthropic_server as fa

    with fa.FakeAnthropic(support_model) as fake:
        env = {
            "ANTHROPIC_API_KEY": fa.API_KEY,
            "ANTHROPIC_BASE_URL": fake.url,
            # the python whose site has the mcp package, first on the server's PATH
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "HOME": os.environ.get("HOME", "/"),
        }
        out = tmp_path / "out"
        code = cli.main(
            ["run", "examples/support/suite-mcp.yaml", "-o", str(out), "-p", "3"], env=env
        )
        text = capsys.readouterr().out
    assert code == 0, text
    report = json.loads((out / "report.json").read_text())
    assert (report["summary"]["total"], report["summary"]["passed"]) == (3, 3)
    calls = {
        case["name"]: [
            (c["name"], c.get("server"), c["error"])
            for t in case["turns"]
            for c in t["tool_invocations"]
        ]
        for case in report["results"]
    }
    assert calls["refund after verification"] == [
        ("verify_identity", None, None),
        ("lookup_order", "billing", None),
        ("issue_refund", "billing", None),
    ]
    refused = calls["a refund the billing system refuses"]
    assert refused[2][:2] == ("issue_refund", "billing")
    assert "500.0 is more than the order total 59.9" in (refused[2][2] or "")  # an isError result
    (server,) = report["run"]["mcp_servers"]
    assert (server["name"], server["scope"], server["starts"]) == ("billing", "case", 3)
    offered = {t["name"] for t in fake.messages_requests()[0].body["tools"]}
    assert offered == {"verify_identity", "create_ticket", "lookup_order", "issue_refund"}
    assert "MCP server billing (stdio): one per test case" in text
    # validate --mcp: the server started once, its tools listed, the suite's tool names found
    assert cli.main(["validate", "--mcp", "examples/support/suite-mcp.yaml"], env=env) == 0
    listed = capsys.readouterr().out
    assert "offers 2 of its 2 tools: lookup_order, issue_refund" in listed
