"""LLM judges with ``backend: openai``: the real ``openai`` SDK against the fake chat-completions API.

The verdict comes back as a strict ``json_schema`` response format; the same
suite shape as tests/test_judges.py, with ``judge: {backend: openai, ...}``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.chat_flavors import POLITE, OpenAIFlavor, judge_fixtures, judge_suite
from tests.conftest import Project
from tests.fakes._server import Malformed
from tests.fakes.openai_server import (
    API_KEY,
    Completion,
    ErrorReply,
    FakeOpenAI,
    Usage,
    rate_limited,
    server_error,
    text,
    unauthorized,
)

MODEL = "gpt-judge-test"


fake, judged = judge_fixtures(OpenAIFlavor())


def suite(
    evaluation: str = POLITE,
    *,
    judge: str = f"{{backend: openai, model: {MODEL}, retry: {{initial_delay: 0}}}}",
    cases: int = 1,
) -> str:
    """:func:`tests.chat_flavors.judge_suite` with ``judge`` as the suite's judge (each case
    its own reply)."""
    return judge_suite(evaluation, top=f"judge: {judge}", cases=cases, same_reply=False)


def answer(**fields: Any) -> Completion:
    return text(json.dumps(fields), Usage(300, 40))


def metric(report: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = report["results"][0]["turns"][0]["metric_results"][0]
    return result


@pytest.mark.parametrize(
    ("scale", "reply", "passed", "score"),
    [
        ("pass_fail", {"verdict": "pass"}, True, 1.0),
        ("pass_fail", {"verdict": "fail"}, False, 0.0),
        ("0-1", {"score": 0.9}, True, 0.9),
        ("0-1", {"score": 0.1}, False, 0.1),
        ("1-5", {"score": 5}, True, 1.0),
        ("1-5", {"score": 1}, False, 0.0),
    ],
)
def test_each_scale_through_a_strict_json_schema(
    judged: Project, fake: FakeOpenAI, scale: str, reply: dict[str, Any], passed: bool, score: float
) -> None:
    fake.script(answer(**reply, reason="Short and kind."))
    judged.write("suite.yaml", suite(f"{{type: judge, rubric: Polite?, scale: {scale}}}"))
    result = judged.run("run", "suite.yaml")
    assert result.code == (0 if passed else 1), result.out + result.err
    got = metric(result.report)
    assert got["passed"] is passed and got["score"] == pytest.approx(score)
    assert got["reason"].endswith(": Short and kind.")
    assert got["details"]["judge_backend"] == "openai"
    (request,) = fake.chat_requests()
    body = request.body
    schema = body["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["strict"] is True
    properties = schema["json_schema"]["schema"]["properties"]
    assert set(properties) == {"verdict" if scale == "pass_fail" else "score", "reason"}
    assert schema["json_schema"]["schema"]["additionalProperties"] is False
    assert body["model"] == MODEL and body["temperature"] == 0
    assert body["max_completion_tokens"] == 1024
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


BAD = [
    pytest.param(
        text('{"verdict": "pass", "reason": "ok"} I hope that helps!'),
        "is not one JSON object",
        id="extra-text",
    ),
    pytest.param(text("PASS"), "is not one JSON object", id="free-text"),
    pytest.param(
        Completion(content=None, refusal="I can't grade that."), "the judge refused", id="refusal"
    ),
    pytest.param(Completion(content=None), "has no content", id="no-content"),
    pytest.param(
        text('{"verdict": "pa', finish_reason="length"),
        "cut off (finish_reason: length)",
        id="cut-off",
    ),
    pytest.param(text('["pass", "ok"]'), "the verdict is an array", id="array"),
    pytest.param(
        text('{"verdict": 1, "reason": "ok"}'), "not 'pass' or 'fail'", id="verdict-number"
    ),
    pytest.param(
        text('{"verdict": "pass", "reason": "ok", "score": 1}'),
        "unexpected key 'score'",
        id="extra-key",
    ),
    pytest.param(text('{"verdict": "pass", "reason": null}'), "reason is null", id="reason-null"),
    pytest.param(Malformed(), "not a chat completion", id="not-json"),
]


@pytest.mark.parametrize(("reply", "why"), BAD)
def test_a_reply_that_does_not_fit_is_a_metric_error(
    judged: Project, fake: FakeOpenAI, reply: Any, why: str
) -> None:
    fake.script(reply)
    judged.write("suite.yaml", suite())
    result = judged.run("run", "suite.yaml")
    assert result.code == 1, result.out + result.err
    got = metric(result.report)
    assert got["passed"] is False and got["score"] is None
    assert why in got["error"], got["error"]
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    ("scale", "content", "why"),
    [
        ("1-5", '{"score": 6, "reason": "x"}', "outside the scale 1-5"),
        ("1-5", '{"score": 2.5, "reason": "x"}', "not a whole number"),
        ("0-1", '{"score": "0.5", "reason": "x"}', "score is a string"),
        ("0-1", '{"score": 2, "reason": "x"}', "outside the scale 0-1"),
    ],
)
def test_an_out_of_range_score_is_a_metric_error(
    judged: Project, fake: FakeOpenAI, scale: str, content: str, why: str
) -> None:
    fake.script(text(content))
    judged.write("suite.yaml", suite(f"{{type: judge, rubric: Polite?, scale: {scale}}}"))
    got = metric(judged.run("run", "suite.yaml").report)
    assert why in got["error"] and got["passed"] is False


def test_429_and_5xx_are_retried(judged: Project, fake: FakeOpenAI) -> None:
    fake.script(rate_limited("0"), server_error(502), answer(verdict="pass", reason="ok"))
    judged.write("suite.yaml", suite())
    result = judged.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    assert len(fake.chat_requests()) == 3


def test_retries_are_capped(judged: Project, fake: FakeOpenAI) -> None:
    fake.responder = lambda r: server_error(500)
    judged.write(
        "suite.yaml",
        suite(
            judge=f"{{backend: openai, model: {MODEL}, retry: {{max_attempts: 2, initial_delay: 0}}}}"
        ),
    )
    result = judged.run("run", "suite.yaml")
    assert result.code == 1
    assert len(fake.chat_requests()) == 2
    assert "gave up after 2 attempts" in metric(result.report)["error"]


@pytest.mark.parametrize("status", [401, 403])
def test_a_401_or_403_stops_the_run_with_exit_3(
    judged: Project, fake: FakeOpenAI, status: int
) -> None:
    if status == 401:
        judged.env["OPENAI_API_KEY"] = "sk-revoked-openai-judge-000"
    else:
        fake.script(ErrorReply(403, "You are not allowed to use this model", "permission_error"))
    judged.write("suite.yaml", suite(cases=4))
    result = judged.run("run", "suite.yaml", "-p", "1")
    assert result.code == 3, result.out + result.err
    assert len(fake.requests) == 1
    stop = result.report["run"]["stop_reason"]
    assert f"the judge's OpenAI-compatible API refused the credentials ({status}" in stop
    assert "OPENAI_API_KEY or judge.api_key" in stop
    assert "sk-revoked-openai-judge-000" not in json.dumps(result.report) + result.err


def test_an_azure_endpoint_with_api_version(judged: Project, fake: FakeOpenAI) -> None:
    fake.script(answer(verdict="pass", reason="ok"))
    judged.write(
        "suite.yaml",
        suite(
            judge=(
                f"{{backend: openai, model: my-deployment, base_url: '{fake.azure_endpoint}', "
                "api_version: '2024-10-21'}"
            )
        ),
    )
    result = judged.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err
    (request,) = fake.chat_requests()
    assert request.path == "/openai/deployments/my-deployment/chat/completions"
    assert request.query["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == API_KEY


def test_an_unpriced_openai_judge_has_usage_but_no_cost(judged: Project, fake: FakeOpenAI) -> None:
    fake.responder = lambda r: text(
        json.dumps({"verdict": "pass", "reason": "ok"}), Usage(300, 40, cached_tokens=100)
    )
    judged.write("suite.yaml", suite())
    report = judged.run("run", "suite.yaml").report
    usage = report["results"][0]["turns"][0]["judge_token_usage"]
    # OpenAI counts cached tokens inside prompt_tokens; here they are apart, as priced
    assert usage["prompt_tokens"] == 200 and usage["cache_read_tokens"] == 100
    assert usage["completion_tokens"] == 40
    assert "judge_cost_usd" not in report["summary"]


def test_a_suite_price_prices_an_openai_judge(judged: Project, fake: FakeOpenAI) -> None:
    fake.responder = lambda r: answer(verdict="pass", reason="ok")
    judged.write(
        "suite.yaml",
        suite() + f"pricing:\n  {MODEL}: {{input: 2, output: 8}}\n",
    )
    report = judged.run("run", "suite.yaml").report
    assert report["summary"]["judge_cost_usd"] == pytest.approx((300 * 2 + 40 * 8) / 1e6)


def test_no_openai_key_is_a_config_error(judged: Project, fake: FakeOpenAI) -> None:
    del judged.env["OPENAI_API_KEY"]
    judged.write("suite.yaml", suite())
    result = judged.run("validate", "suite.yaml")
    assert result.code == 2
    assert "no API key for the openai judge: set OPENAI_API_KEY" in result.err
    assert fake.requests == []


def test_an_unauthorized_reply_is_not_retried(judged: Project, fake: FakeOpenAI) -> None:
    fake.script(unauthorized())
    judged.write("suite.yaml", suite())
    assert judged.run("run", "suite.yaml").code == 3
    assert len(fake.requests) == 1


def test_a_huge_reply_is_capped_and_an_error(judged: Project, fake: FakeOpenAI) -> None:
    from tests.fakes._server import Huge

    fake.script(Huge(size=12 * 1024 * 1024, chunked=True))
    judged.write("suite.yaml", suite())
    result = judged.run("run", "suite.yaml")
    assert result.code == 1
    error = metric(result.report)["error"]
    assert "not a chat completion" in error and "10 MB" in error, error


def test_a_missing_openai_package_is_a_config_error(
    judged: Project, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a)
    )
    judged.write("suite.yaml", suite())
    result = judged.run("validate", "suite.yaml")
    assert result.code == 2
    assert "the openai judge needs the package 'openai', which is not installed" in result.err
    assert "pip install 'multiturn-eval[openai]'" in result.err
    assert fake.requests == []
