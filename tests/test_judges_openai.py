"""LLM judges with ``backend: openai``: the real ``openai`` SDK against the fake chat-completions API.

The verdict comes back as a strict ``json_schema`` response format; the same
suite shape as tests/test_judges.py, with ``judge: {backend: openai, ...}``. What
both judge backends do alike (retries, credentials, faulting servers) is in
tests/test_judge_contract.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.chat_flavors import (
    POLITE,
    OpenAIFlavor,
    check_an_unusable_verdict,
    judge_fixtures,
    judge_suite,
)
from tests.conftest import Project
from tests.fakes._server import Malformed
from tests.fakes.openai_server import (
    API_KEY,
    Completion,
    FakeOpenAI,
    Usage,
    text,
)

MODEL = "gpt-judge-test"


FLAVOR = OpenAIFlavor()
fake, judged = judge_fixtures(FLAVOR)


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
    check_an_unusable_verdict(judged, fake, FLAVOR, suite(), reply, why)


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
    suite_text = suite(f"{{type: judge, rubric: Polite?, scale: {scale}}}")
    check_an_unusable_verdict(judged, fake, FLAVOR, suite_text, text(content), why)


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
