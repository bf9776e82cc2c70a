"""``type: judge`` on a turn (:func:`judge_turn`) or on a whole conversation (:func:`judge_conversation`).

The metric (``kind: judge``):

- ``passed``: pass_fail: the verdict is ``pass``; 0-1 and 1-5: the score >= threshold
  (defaults 0.5 and 3);
- ``score`` and ``threshold`` are normalised to [0, 1] like every other metric
  (1-5: ``(score - 1) / 4``, so a 4 is 0.75 and the default threshold 3 is 0.5); the
  judge's own value is in ``details.score`` (or ``details.verdict``), its reason in
  ``details.reason``, and ``reason`` says both: ``judge: 4/5 (threshold 3): ...``;
- a reply that does not fit the verdict schema, a refusal, or a call that failed
  after its retries: ``error`` (with an excerpt), ``passed: false``, never a pass.

Before calling, the regrade hook (:data:`~multiturn_eval.grading.recorded.RECORDED_JUDGEMENTS`)
is asked for a recorded verdict; one found is used as it is, with no call and no
judge usage counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...backends.chat import priced
from ...errors import JudgeConfigProblem, VerdictProblem
from ...pricing import judge_provider, price_for
from ...results import MetricResult
from ...suite import JudgeConfig, JudgeEvaluation, ModelPrice
from ...types import ConversationContext, TokenUsage
from ..recorded import RECORDED_JUDGEMENTS, JudgeKey
from .prompt import JudgedTexts, TranscriptTurn, packaged_template, render
from .service import JUDGES, JudgeService, merge_levels, resolve
from .verdict import check_verdict


@dataclass
class JudgeResult:
    metric: MetricResult
    usage: TokenUsage | None = None
    """The judge tokens this metric spent (zero when de-duplicated; None: no call)."""
    cost_usd: float | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JudgeTexts:
    """The rubric and prompt template texts, as read at load (paths -> text)."""

    files: Mapping[str, str]

    def rubric(self, spec: JudgeEvaluation) -> str:
        if spec.rubric is not None:
            return spec.rubric
        assert spec.rubric_file is not None
        return self.files[spec.rubric_file]

    def template(self, spec: JudgeEvaluation) -> str:
        if spec.prompt_file is None:
            return packaged_template()
        return self.files[spec.prompt_file]


@dataclass(frozen=True)
class Judging:
    """Where a judge evaluation is graded: the texts read at load, the ``judge:`` blocks that
    apply (outermost first: the suite's, the case's, the turn's), the environment its key
    and base URL come from, and the suite's ``pricing:``."""

    texts: JudgeTexts
    levels: Sequence[JudgeConfig | None]
    env: Mapping[str, str]
    pricing: Mapping[str, ModelPrice] | None


def _error(
    spec: JudgeEvaluation, message: str, details: dict[str, Any] | None = None
) -> MetricResult:
    return MetricResult(
        metric_name=spec.metric_name,
        kind="judge",
        score=None,
        threshold=_normalised_threshold(spec),
        passed=False,
        error=message,
        details=details,
    )


def _normalised_threshold(spec: JudgeEvaluation) -> float | None:
    threshold = spec.effective_threshold
    if threshold is None:
        return None
    return (threshold - 1) / 4 if spec.scale == "1-5" else threshold


def _shown(value: float) -> str:
    return f"{value:g}"


async def _judge(
    spec: JudgeEvaluation,
    judging: Judging,
    key: JudgeKey,
    prompt_args: JudgedTexts,
    service: JudgeService | None,
) -> JudgeResult:
    texts, env, pricing = judging.texts, judging.env, judging.pricing
    recorded = RECORDED_JUDGEMENTS.get()
    if recorded is not None:
        found = recorded.lookup(key)
        if found is not None:
            return JudgeResult(found)
        return JudgeResult(  # a regrade without --rejudge calls no judge
            _error(
                spec,
                "not regraded: the report has no verdict of this LLM judge here; "
                "run regrade with --rejudge to call the judge",
            )
        )
    from ...fixtures.cassette import current_cassette

    cassette = current_cassette()  # replay and update answer from the fixtures: no key needed
    keyless = cassette is not None and cassette.mode in ("replay", "update")
    try:
        judge = resolve(merge_levels(*judging.levels, spec.judge), env, keyless=keyless)
    except JudgeConfigProblem as exc:  # the loader checks this first; kept for direct callers
        return JudgeResult(_error(spec, str(exc)))
    prompt = render(
        texts.template(spec), rubric=texts.rubric(spec), scale=spec.scale, **prompt_args
    )
    request = judge.request(spec.scale, prompt)
    own = service is None and JUDGES.get() is None
    active = service or JUDGES.get() or JudgeService()
    try:
        outcome, fresh = await active.judge(request, judge.retry)
    finally:
        if own:
            await active.aclose()
    details: dict[str, Any] = {"judge_model": judge.model, "judge_backend": judge.backend}
    if not fresh:
        details["deduplicated"] = True
    usage: TokenUsage | None = None
    cost: float | None = None
    if outcome.reply is not None:
        usage = outcome.reply.usage if fresh else TokenUsage()
        cost = priced(
            price_for(
                judge.model, pricing, provider=judge_provider(judge.backend, judge.api_version)
            ),
            [usage],
        )
    warnings = list(outcome.notes) if fresh else []
    if outcome.error is not None:
        return JudgeResult(_error(spec, outcome.error, details), usage, cost, warnings)
    assert outcome.reply is not None
    if outcome.reply.problem is not None:
        return JudgeResult(
            _error(spec, f"unusable judge reply: {outcome.reply.problem}", details),
            usage,
            cost,
            warnings,
        )
    try:
        verdict = check_verdict(outcome.reply.data, spec.scale)
    except VerdictProblem as exc:
        return JudgeResult(
            _error(spec, f"unusable judge reply: {exc}", details), usage, cost, warnings
        )
    details["reason"] = verdict.reason
    threshold = spec.effective_threshold
    if spec.scale == "pass_fail":
        details["verdict"] = verdict.raw
        passed = verdict.raw == "pass"
        head = f"verdict {verdict.raw}"
    else:
        assert isinstance(verdict.raw, float) and threshold is not None
        details["score"] = verdict.raw
        passed = verdict.raw >= threshold
        of = "/5" if spec.scale == "1-5" else " of 0-1"
        head = f"score {_shown(verdict.raw)}{of} (threshold {_shown(threshold)})"
    details["scale"] = spec.scale
    metric = MetricResult(
        metric_name=spec.metric_name,
        kind="judge",
        score=verdict.score,
        threshold=_normalised_threshold(spec),
        passed=passed,
        reason=f"{head}: {verdict.reason}",
        details=details,
    )
    return JudgeResult(metric, usage, cost, warnings)


async def judge_turn(
    spec: JudgeEvaluation,
    judging: Judging,
    *,
    key: JudgeKey,
    turn_input: str,
    reply: str,
    ground_truth: str | None,
    service: JudgeService | None = None,
) -> JudgeResult:
    """Judge one turn's reply (``judging.levels``: the suite's, the case's and the turn's blocks).

    The reference answer is the turn's ``ground_truth`` unless ``use_ground_truth: false``.
    """
    reference = ground_truth if spec.use_ground_truth is not False else None
    prompt_args: JudgedTexts = {"input": turn_input, "reply": reply, "reference": reference}
    return await _judge(spec, judging, key, prompt_args, service)


async def judge_conversation(
    spec: JudgeEvaluation,
    judging: Judging,
    *,
    key: JudgeKey,
    transcript: Sequence[TranscriptTurn],
    service: JudgeService | None = None,
) -> JudgeResult:
    """Judge a whole conversation (``judging.levels``: the suite's and the case's blocks)."""
    return await _judge(spec, judging, key, {"transcript": transcript}, service)


@dataclass
class ConversationJudging:
    """What a test case's conversation-level judges need, and the usage they spent.

    Built once per test case by the case runner; ``judging.levels`` are the suite's and
    the test case's ``judge:`` blocks (a conversation judge has no turn level).
    """

    judging: Judging
    suite: str
    case_index: int
    usages: list[TokenUsage] = field(default_factory=list)
    costs: list[float | None] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    async def judge(self, spec: JudgeEvaluation, ctx: ConversationContext) -> MetricResult:
        transcript = [
            TranscriptTurn(
                input=turn.input,
                response=turn.response,
                note=(turn.errors[0] if turn.errors else ("skipped" if turn.skipped else None)),
            )
            for turn in ctx.turns
        ]
        judged = await judge_conversation(
            spec,
            self.judging,
            key=JudgeKey(self.suite, self.case_index, None, spec.metric_name),
            transcript=transcript,
        )
        if judged.usage is not None:
            self.usages.append(judged.usage)
            self.costs.append(judged.cost_usd)
        self.warnings.extend(judged.warnings)
        return judged.metric
