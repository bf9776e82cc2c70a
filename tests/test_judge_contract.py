"""What every LLM judge backend does alike, tested once for ``anthropic`` and ``openai``.

Each test runs the CLI in-process on a suite whose agent is the scripted python
agent and whose judge talks to the backend's fake server on 127.0.0.1
(:func:`tests.chat_flavors.judge_fixtures`), through the real SDK on both of its
transports: retries, credentials, faulting and hostile servers. What only one
backend does (its wire format, its verdict replies) is in
``tests/test_judges.py`` (anthropic) and ``tests/test_judges_openai.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.chat_flavors import (
    POLITE,
    AnthropicFlavor,
    Flavor,
    OpenAIFlavor,
    judge_fixtures,
    judge_suite,
)
from tests.conftest import Project
from tests.fakes._server import Drop, Huge, Slow

pytestmark = pytest.mark.parametrize("flavor", [AnthropicFlavor(), OpenAIFlavor()], ids=str)

fake, judged = judge_fixtures()


def suite(flavor: Flavor, evaluation: str = POLITE, *, cases: int = 1, **retry: float) -> str:
    """A suite judged by ``flavor``'s judge (``retry``: its retry settings), each case its own
    reply."""
    return judge_suite(evaluation, top=flavor.judge(**retry), cases=cases, same_reply=False)


def metric(report: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = report["results"][0]["turns"][0]["metric_results"][0]
    return result


@pytest.mark.parametrize(
    ("scale", "extra", "reply", "passed", "score", "threshold", "head"),
    [
        ("pass_fail", "", {"verdict": "pass"}, True, 1.0, None, "verdict pass"),
        ("pass_fail", "", {"verdict": "fail"}, False, 0.0, None, "verdict fail"),
        ("0-1", "", {"score": 0.7}, True, 0.7, 0.5, "score 0.7 of 0-1 (threshold 0.5)"),
        ("0-1", "", {"score": 0.3}, False, 0.3, 0.5, "score 0.3 of 0-1 (threshold 0.5)"),
        (
            "0-1",
            ", threshold: 0.8",
            {"score": 0.7},
            False,
            0.7,
            0.8,
            "score 0.7 of 0-1 (threshold 0.8)",
        ),
        ("0-1", "", {"score": 0}, False, 0.0, 0.5, "score 0 of 0-1"),
        ("1-5", "", {"score": 4}, True, 0.75, 0.5, "score 4/5 (threshold 3)"),
        ("1-5", "", {"score": 3}, True, 0.5, 0.5, "score 3/5 (threshold 3)"),
        ("1-5", "", {"score": 2}, False, 0.25, 0.5, "score 2/5 (threshold 3)"),
        ("1-5", ", threshold: 5", {"score": 4}, False, 0.75, 1.0, "score 4/5 (threshold 5)"),
        ("1-5", "", {"score": 5.0}, True, 1.0, 0.5, "score 5/5"),
        ("1-5", "", {"score": 1}, False, 0.0, 0.5, "score 1/5 (threshold 3)"),
    ],
)
def test_each_scale_gives_a_verdict_score_and_reason(
    judged: Project,
    fake: Any,
    flavor: Flavor,
    scale: str,
    extra: str,
    reply: dict[str, Any],
    passed: bool,
    score: float,
    threshold: float | None,
    head: str,
) -> None:
    fake.script(flavor.verdict(**reply, reason="It greets the user."))
    evaluation = f"{{type: judge, rubric: Polite?, scale: {scale}{extra}}}"
    judged.write("suite.yaml", suite(flavor, evaluation))
    result = judged.run("run", "suite.yaml")
    assert result.code == (0 if passed else 1), result.out + result.err
    got = metric(result.report)
    assert got["kind"] == "judge"
    assert got["passed"] is passed
    assert got["score"] == pytest.approx(score)
    assert got["threshold"] == (pytest.approx(threshold) if threshold is not None else None)
    assert got["reason"].startswith(head) and got["reason"].endswith(": It greets the user.")
    assert got["details"]["reason"] == "It greets the user."
    assert got["details"]["scale"] == scale
    assert got["details"]["judge_backend"] == flavor.name
    (request,) = flavor.requests(fake)
    flavor.check_judge_request(request, scale)


#: what the fake's 401 (a revoked key) and 403 (:meth:`Flavor.unauthorized`) replies say
REFUSALS = {
    ("anthropic", 401): "invalid x-api-key",
    ("anthropic", 403): "no access to this model",
    ("openai", 401): "Incorrect API key provided",
    ("openai", 403): "Incorrect API key provided",
}


def refused(flavor: Flavor, status: int) -> str:
    """The stop reason of a run whose judge's credentials were refused with ``status``."""
    return (
        f"stopped after a fatal backend error: the judge's {flavor.judge_api} refused the "
        f"credentials ({status}: {REFUSALS[flavor.name, status]}); check {flavor.key_variable} "
        "or judge.api_key"
    )


def test_429_and_5xx_are_retried_then_the_verdict_counts(
    judged: Project, fake: Any, flavor: Flavor
) -> None:
    fake.script(
        flavor.fakes.rate_limited("0"),
        flavor.fakes.server_error(503),
        flavor.verdict(verdict="pass", reason="ok"),
    )
    judged.write("suite.yaml", suite(flavor))
    result = judged.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    assert len(flavor.requests(fake)) == 3
    turn = result.report["results"][0]["turns"][0]
    assert any("judge attempt 1 failed" in w and "429" in w for w in turn["warnings"])
    # only the call that answered is billed
    assert turn["judge_token_usage"]["prompt_tokens"] == flavor.verdict_usage[0]


def test_retries_are_capped_then_the_metric_errors(
    judged: Project, fake: Any, flavor: Flavor
) -> None:
    fake.responder = lambda r: flavor.fakes.server_error(500)
    judged.write("suite.yaml", suite(flavor, max_attempts=3))
    result = judged.run("run", "suite.yaml")
    assert result.code == 1
    assert len(flavor.requests(fake)) == 3
    error = metric(result.report)["error"]
    assert "the judge call failed" in error and "gave up after 3 attempts" in error


def test_a_retry_after_longer_than_the_cap_is_not_waited_for(
    judged: Project, fake: Any, flavor: Flavor
) -> None:
    fake.script(flavor.long_retry_after())
    judged.write("suite.yaml", suite(flavor))
    result = judged.run("run", "suite.yaml")
    assert result.code == 1
    assert len(flavor.requests(fake)) == 1
    assert "longer than retry.max_retry_after" in metric(result.report)["error"]


def test_a_dropped_connection_is_retried(judged: Project, fake: Any, flavor: Flavor) -> None:
    fake.script(Drop(), flavor.verdict(verdict="pass", reason="ok"))
    judged.write("suite.yaml", suite(flavor))
    result = judged.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    assert len(flavor.requests(fake)) == 2


def test_a_judge_slower_than_turn_timeout_is_a_metric_error(
    judged: Project, fake: Any, flavor: Flavor
) -> None:
    fake.responder = lambda r: Slow(5, flavor.verdict(verdict="pass", reason="late"))
    judged.write("suite.yaml", suite(flavor, max_attempts=2))
    result = judged.run("run", "suite.yaml", "--turn-timeout", "0.5")
    assert result.code == 1, result.out + result.err
    got = metric(result.report)
    assert got["passed"] is False and "timed out" in got["error"], got["error"]
    assert len(flavor.requests(fake)) <= 2  # capped: max_attempts within the turn's time


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_huge_judge_reply_is_capped_and_an_error(
    judged: Project, fake: Any, flavor: Flavor, chunked: bool
) -> None:
    fake.script(Huge(size=12 * 1024 * 1024, chunked=chunked))
    judged.write("suite.yaml", suite(flavor))
    result = judged.run("run", "suite.yaml")
    assert result.code == 1
    error = metric(result.report)["error"]
    assert flavor.not_a_reply in error and "10 MB" in error, error


def test_a_401_from_the_judge_stops_the_run_with_exit_3(
    judged: Project, fake: Any, flavor: Flavor
) -> None:
    judged.env[flavor.key_variable] = "sk-revoked-judge-key-000"
    judged.write("suite.yaml", suite(flavor, cases=6))
    result = judged.run("run", "suite.yaml", "-p", "1")
    assert result.code == 3, result.out + result.err
    assert len(fake.requests) == 1  # the first 401 stopped the run
    stop = result.report["run"]["stop_reason"]
    assert stop == refused(flavor, 401)
    assert "Traceback" not in result.err
    leaked = result.out + result.err + json.dumps(result.report)
    assert "sk-revoked-judge-key-000" not in leaked
    cases = result.report["results"]
    assert [c["outcome"] for c in cases[1:]] == ["skipped"] * 5


def test_a_403_from_the_judge_stops_the_run_too(judged: Project, fake: Any, flavor: Flavor) -> None:
    reply, _ = flavor.unauthorized(403)
    fake.script(reply)
    judged.write("suite.yaml", suite(flavor, cases=2))
    result = judged.run("run", "suite.yaml", "-p", "1")
    assert result.code == 3
    assert len(fake.requests) == 1
    assert result.report["run"]["stop_reason"] == refused(flavor, 403)


def test_the_transport_is_aiohttp_when_installed_else_httpx(
    flavor: Flavor, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from multiturn_eval.grading.judges import clients

    sdk = importlib.import_module(flavor.name)
    monkeypatch.setattr(clients, "TRANSPORT", "auto")
    assert "Aiohttp" in type(clients.http_client(sdk)).__mro__[1].__name__
    monkeypatch.setattr(clients, "TRANSPORT", "httpx")
    assert type(clients.http_client(sdk)).__name__ == "_DefaultAsyncHttpxClient"
    monkeypatch.setattr(clients, "TRANSPORT", "auto")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # no aiohttp here
    assert type(clients.http_client(sdk)).__name__ == "_DefaultAsyncHttpxClient"
