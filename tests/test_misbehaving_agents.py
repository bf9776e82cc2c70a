"""One bad test case never takes the run down; stuck user code cannot stall it.

Every family runs as the middle test case of three (healthy, bad, healthy),
each with two turns, through the real CLI with all four reports. Whatever the
bad case does, the healthy ones pass, the bad one fails (or warns) with a
readable reason, the exit code is 1 (or 0 when only a warning is due), never 3,
and every report is written and valid.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema

from multiturn_eval import case_runner, usercode
from multiturn_eval.reports.json_report import dump_json
from multiturn_eval.results import MetricResult, TurnResult
from multiturn_eval.rollup import rollup_metrics
from multiturn_eval.sanitize import json_safe
from multiturn_eval.settings import resolve_settings
from multiturn_eval.types import ToolInvocation
from tests import agents
from tests.case_results import case_result
from tests.conftest import Project

ROOT = Path(__file__).resolve().parents[1]
XSD = ROOT / "tests" / "data" / "junit" / "junit-10-with-location.xsd"
REPORT_SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
ALL = ("json", "junit", "markdown", "html")


def _case(name: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "context": context or {},
        "turns": [{"input": f"{name} 1"}, {"input": f"{name} 2"}],
    }


def run_family(
    project: Project,
    bad_context: dict[str, Any],
    *,
    factory: str = "misbehaving",
    execution: str = "",
    evaluations: str = "",
    args: tuple[str, ...] = (),
) -> tuple[int, dict[str, Any]]:
    """Run healthy / bad / healthy; check what must hold whatever the family; return the bad case."""
    cases = [_case("healthy-1"), _case("bad", bad_context), _case("healthy-2")]
    project.write(
        "suite.yaml",
        f"agent: {{backend: python, factory: 'tests.agents:{factory}'}}\n"
        + (f"execution: {{{execution}}}\n" if execution else "")
        + (f"evaluations: [{evaluations}]\n" if evaluations else "")
        + "test_cases: "
        + json.dumps(cases)
        + "\n",
    )
    result = project.run("run", "suite.yaml", *args, formats=ALL)
    assert result.code in (0, 1), result.out + result.err
    assert "Traceback" not in result.out + result.err
    out = result.report_dir
    report = result.report
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["run"]["complete"] is True
    healthy = [r for r in report["results"] if r["name"] != "bad"]
    assert [r["name"] for r in healthy] == ["healthy-1", "healthy-2"]
    assert all(r["passed"] for r in healthy), healthy
    (bad,) = [r for r in report["results"] if r["name"] == "bad"]
    assert result.code == (0 if bad["passed"] else 1)
    xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))
    assert (out / "summary.md").read_text(encoding="utf-8").strip()
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "healthy-2" in html
    # the journal written as cases finished is JSON too, one line per case
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["name"] for line in lines) == ["bad", "healthy-1", "healthy-2"]
    return result.code, bad


def turn_errors(bad: dict[str, Any]) -> list[str]:
    return [e for t in bad["turns"] for e in t["errors"]]


# --------------------------------------------------------------- raising in send()

RAISED = {
    "keyboard_interrupt": "the agent raised KeyboardInterrupt",
    "cancelled": "the agent raised asyncio.CancelledError (the run was not cancelled)",
    "system_exit": "the agent called sys.exit(0)",
    "sys_exit": "the agent called sys.exit()",
    "sys_exit_3": "the agent called sys.exit(3)",
    "sys_exit_text": "the agent called sys.exit('goodbye')",
    "generator_exit": "the agent raised GeneratorExit",
    "broken_str": "BrokenStr: <its str() raised RuntimeError>",
    "timeout": "TimeoutError: upstream took too long",
    "memory": "MemoryError: pretend",
    "recursion": "RecursionError: maximum recursion depth exceeded",
}


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
@pytest.mark.parametrize("variant", sorted(RAISED))
def test_raising_in_send_fails_that_turn_only(project: Project, variant: str, sync: bool) -> None:
    code, bad = run_family(
        project, {"misbehave": {"at": "send", "do": f"raise:{variant}", "sync": sync}}
    )
    first, second = bad["turns"]
    assert first["errors"] == [RAISED[variant]]
    assert first["infrastructure_error"] is True
    assert second["passed"] is True and second["response"] == "ok"  # the next turn was sent
    assert bad["passed"] is False and code == 1
    assert agents.CLOSED.count("bad") == 1


@pytest.mark.parametrize("factory", ["misbehaving", "misbehaving_async"])
@pytest.mark.parametrize("variant", sorted(RAISED))
def test_raising_in_the_factory_fails_that_case_only(
    project: Project, variant: str, factory: str
) -> None:
    _, bad = run_family(
        project, {"misbehave": {"at": "factory", "do": f"raise:{variant}"}}, factory=factory
    )
    expected = RAISED[variant].replace("the agent", "the factory")
    assert bad["errors"] == [f"could not open a session: {expected}"]
    assert bad["outcome"] == "error"
    assert all(t["skipped"] for t in bad["turns"])


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
@pytest.mark.parametrize("variant", sorted(RAISED))
def test_raising_in_close_is_a_warning_on_that_case(
    project: Project, variant: str, sync: bool
) -> None:
    # close() runs after the verdict: its failure is reported, the turns' outcome stands
    code, bad = run_family(
        project, {"misbehave": {"at": "close", "do": f"raise:{variant}", "sync": sync}}
    )
    assert bad["passed"] is True and code == 0
    assert f"closing the session failed: {RAISED[variant]}" in bad["warnings"]


def test_the_agents_own_timeout_error_does_not_count_as_a_session_error(project: Project) -> None:
    # two TimeoutErrors in a row would be "2 consecutive session errors" if they were timeouts
    _, bad = run_family(project, {"misbehave": {"turn": [1, 2], "do": "raise:timeout"}})
    assert turn_errors(bad) == ["TimeoutError: upstream took too long"] * 2
    assert not any(t["skipped"] for t in bad["turns"])


# ---------------------------------------------------------- replies JSON cannot hold


@pytest.mark.parametrize("family", ["args", "args_mapping", "result"])
@pytest.mark.parametrize("variant", sorted(agents.BAD_VALUES))
def test_tool_values_json_cannot_hold_are_replaced_with_a_warning(
    project: Project, family: str, variant: str
) -> None:
    _, bad = run_family(project, {"misbehave": {"do": f"{family}:{variant}"}})
    first = bad["turns"][0]
    assert first["passed"] is True and first["response"] == "ok"
    [call] = first["tool_invocations"]
    json.dumps(call, allow_nan=False)  # it is JSON now
    [warning] = [w for w in bad["warnings"] if "JSON cannot hold" in w]
    assert warning.startswith("values JSON cannot hold were replaced in the agent's reply: ")
    assert "tool_invocations[0]" in warning


@pytest.mark.parametrize(
    ("variant", "stand_in"),
    [
        ("bytes", "b'\\x00\\xffraw'"),
        ("set", [1, 2, 3]),
        ("cycle", {"name": "loop", "self": "<cycle>"}),
        ("nan", "NaN"),
        ("minus_inf", "-Infinity"),
        ("surrogate_text", "lone ? surrogate"),
        ("broken_repr", "<object of type BrokenRepr>"),
    ],
)
def test_stand_ins_say_what_the_value_was(project: Project, variant: str, stand_in: Any) -> None:
    _, bad = run_family(project, {"misbehave": {"do": f"args:{variant}"}})
    assert bad["turns"][0]["tool_invocations"][0]["args"] == {"x": stand_in}


def test_non_string_keys_and_deep_nesting(project: Project) -> None:
    _, bad = run_family(project, {"misbehave": {"do": "args_mapping:non_string_keys"}})
    args = bad["turns"][0]["tool_invocations"][0]["args"]
    assert args == {"1": "one", "(2, 3)": "tuple", "None": "none", "1.5": "float"}
    [warning] = bad["warnings"]
    assert "tool_invocations[0].args: the non-string key 1 replaced by '1'" in warning


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        ("string", "token_usage: expected TokenUsage or a mapping, got str"),
        ("list", "token_usage: expected TokenUsage or a mapping, got list"),
        ("negative", "token_usage: Value error, prompt_tokens must be >= 0"),
        ("nan", "token_usage.prompt_tokens: Input should be a finite number"),
        ("inf", "token_usage.completion_tokens: Input should be a finite number"),
        ("dict", "token_usage.prompt_tokens: Input should be a valid integer"),
        ("unknown_key", "token_usage.tokens: Extra inputs are not permitted"),
        ("total_too_small", "total_tokens must be >= prompt_tokens + completion_tokens"),
        ("constructed", "token_usage.prompt_tokens: Input should be a valid integer"),
    ],
)
def test_token_usage_of_the_wrong_type_fails_the_turn(
    project: Project, variant: str, why: str
) -> None:
    _, bad = run_family(project, {"misbehave": {"do": f"usage:{variant}"}})
    [error] = bad["turns"][0]["errors"]
    assert error.startswith("agent reply is malformed: ") and why in error
    assert bad["turns"][1]["passed"] is True


@pytest.mark.parametrize(
    ("variant", "shown"),
    [
        ("string", "'3.5'"),
        ("negative", "-1.0"),
        ("nan", "nan"),
        ("inf", "inf"),
        ("dict", "{'usd': 1}"),
        ("bool", "True"),
    ],
)
def test_cost_of_the_wrong_type_fails_the_turn(project: Project, variant: str, shown: str) -> None:
    _, bad = run_family(project, {"misbehave": {"do": f"cost:{variant}"}})
    [error] = bad["turns"][0]["errors"]
    assert error.startswith("agent reply is malformed: cost_usd: ") and error.endswith(shown)
    assert bad["cost_usd"] is None


@pytest.mark.parametrize(
    ("variant", "outcome"),
    [
        ("surrogates", ("bad ? text", None)),
        ("surrogate_string", ("plain ? string", None)),
        ("not_a_reply", (None, "agent returned int; expected TurnReply, str or a mapping")),
        ("response_not_text", (None, "agent response is bytes, not str")),
        ("invocations_not_a_list", (None, "tool_invocations: expected a list")),
        ("mapping_with_bad_keys", (None, "agent reply has unknown keys: 1")),
    ],
)
def test_malformed_replies(
    project: Project, variant: str, outcome: tuple[str | None, str | None]
) -> None:
    _, bad = run_family(project, {"misbehave": {"do": f"reply:{variant}"}})
    response, error = outcome
    first = bad["turns"][0]
    if error is None:
        assert first["response"] == response and first["passed"] is True
        assert any("lone surrogates" in w for w in bad["warnings"])
    else:
        assert len(first["errors"]) == 1 and error in first["errors"][0]


# ------------------------------------------------------------------ garbage graders

GARBAGE = {
    "string": "grader returned str 'yes'; expected GraderResult, bool or a float in [0, 1]",
    "none": "grader returned NoneType None; expected GraderResult, bool or a float in [0, 1]",
    "dict": "grader returned dict {'score': 1}; expected GraderResult",
    "nan": "grader returned nan; a score must be within [0, 1]",
    "inf": "grader returned inf; a score must be within [0, 1]",
    "seven": "grader returned 7; a score must be within [0, 1]",
    "negative": "grader returned -0.5; a score must be within [0, 1]",
    "bad_bool": "grader returned BrokenBool",
    "passed_bad_bool": "passed must be True, False or None",
    "passed_string": "grader returned GraderResult(passed='no'); passed must be True, False or None",
    "mutated_score": "grader returned GraderResult(score=7); a score must be a number within [0, 1]",
    "reason_not_text": "reason must be text or None",
    "details_not_mapping": "grader details must be a mapping, got list",
    "details_bytes": "grader details must be JSON-safe (SPEC 5): details.b is bytes of length 1",
    "details_set": "grader details must be JSON-safe (SPEC 5): details.s is a set",
    "details_nan": "grader details must be JSON-safe (SPEC 5): details.n is the float NaN",
    "details_cycle": "grader details must be JSON-safe (SPEC 5): details.self is a reference cycle",
    "details_object": "details.o is an object of type object",
    "details_deep": "details.d",
    "details_surrogates": "details.t is text with lone surrogates",
    "raise:sys_exit": "the grader called sys.exit()",
    "raise:keyboard_interrupt": "the grader raised KeyboardInterrupt",
    "raise:cancelled": "the grader raised asyncio.CancelledError (the run was not cancelled)",
    "raise:broken_str": "BrokenStr: <its str() raised RuntimeError>",
    "raise:timeout": "TimeoutError: upstream took too long",
}


@pytest.mark.parametrize("grader", ["garbage_grader", "garbage_grader_async"])
@pytest.mark.parametrize("variant", sorted(GARBAGE))
def test_a_grader_returning_garbage_fails_that_metric(
    project: Project, variant: str, grader: str
) -> None:
    _, bad = run_family(
        project,
        {"grader": variant},
        factory="scripted",
        evaluations=f"{{type: code, grader: 'tests.agents:{grader}', name: g}}",
    )
    for t in bad["turns"]:
        [metric] = t["metric_results"]
        assert metric["passed"] is False and metric["score"] is None
        assert GARBAGE[variant] in metric["error"], metric["error"]
    [rolled] = bad["metric_results"]
    assert rolled["score"] == 0.0  # errored turns count as 0


def test_grader_reason_with_surrogates_is_cleaned(project: Project) -> None:
    _, bad = run_family(
        project,
        {"grader": "reason_surrogates"},
        factory="scripted",
        evaluations="{type: code, grader: 'tests.agents:garbage_grader'}",
    )
    assert bad["passed"] is True
    assert bad["turns"][0]["metric_results"][0]["reason"] == "fine ?"


# ----------------------------------------------------------------------- stuck code


@pytest.fixture
def quick_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(case_runner, "CLOSE_TIMEOUT", 0.3)


def test_a_stuck_sync_send_is_abandoned_and_reported(project: Project) -> None:
    _, bad = run_family(project, {"misbehave": {"do": "stuck"}}, args=("--turn-timeout", "0.3"))
    first, second = bad["turns"]
    assert first["errors"] == ["timed out after 0.3 s (turn_timeout)"]
    assert second["passed"] is True
    assert (
        "send() of turn 1 still running after its timeout; its thread was abandoned"
        in (bad["warnings"])
    )


def test_a_stuck_sync_factory_is_bounded_by_session_timeout(project: Project) -> None:
    _, bad = run_family(
        project, {"misbehave": {"at": "factory", "do": "stuck"}}, execution="session_timeout: 0.3"
    )
    assert bad["errors"] == ["could not open a session: timed out after 0.3 s (session_timeout)"]
    assert bad["warnings"] == [
        "the factory still running after its timeout; its thread was abandoned"
    ]


@pytest.mark.usefixtures("quick_close")
def test_a_stuck_sync_close_is_abandoned(project: Project) -> None:
    _, bad = run_family(project, {"misbehave": {"at": "close", "do": "stuck"}})
    assert bad["warnings"] == [
        "closing the session timed out after 0.3 s",
        "close() still running after its timeout; its thread was abandoned",
    ]


@pytest.mark.parametrize("grader", ["garbage_grader", "garbage_grader_async"])
def test_a_stuck_grader_is_bounded_by_grader_timeout(project: Project, grader: str) -> None:
    _, bad = run_family(
        project,
        {"grader": "stuck"},
        factory="scripted",
        execution="grader_timeout: 0.3",
        evaluations=f"{{type: code, grader: 'tests.agents:{grader}', name: g}}",
    )
    for t in bad["turns"]:
        assert (
            t["metric_results"][0]["error"] == "grader did not finish within 0.3 s (grader_timeout)"
        )
    abandoned = [w for w in bad["warnings"] if "abandoned" in w]
    if grader == "garbage_grader":  # a sync grader's thread is left behind, and said so
        assert abandoned == [
            f"grader 'g' of turn {n} still running after its timeout; its thread was abandoned"
            for n in (1, 2)
        ]
    else:
        assert abandoned == []


def test_stuck_sync_agents_do_not_starve_healthy_ones(project: Project) -> None:
    # Before: a pool of max(4, -p) threads; 6 stuck sends held them all and every later
    # healthy case timed out waiting for a thread.
    stuck = [_case(f"stuck-{i}", {"misbehave": {"do": "stuck"}}) for i in range(6)]
    healthy = [_case(f"healthy-{i}") for i in range(6)]
    project.write(
        "suite.yaml",
        "agent: {backend: python, factory: 'tests.agents:misbehaving'}\n"
        "test_cases: " + json.dumps(stuck + healthy) + "\n",
    )
    result = project.run("run", "suite.yaml", "-p", "3", "--turn-timeout", "1")
    assert result.code == 1
    by_name = {r["name"]: r for r in result.report["results"]}
    assert all(by_name[f"healthy-{i}"]["passed"] for i in range(6)), result.out


def test_session_open_is_not_bounded_by_the_turn_timeout(project: Project) -> None:
    _, bad = run_family(
        project,
        {"misbehave": {"at": "factory", "do": "slow:0.5"}},
        factory="misbehaving_async",
        args=("--turn-timeout", "0.2"),
    )
    assert bad["passed"] is True


# ------------------------------------------------------------------- the boundary


def test_cancellation_of_the_run_is_told_apart_from_the_agents_cancelled_error() -> None:
    async def agent_cancels() -> None:
        raise asyncio.CancelledError

    async def agent_sleeps() -> None:
        await asyncio.sleep(10)

    async def main() -> tuple[str, bool]:
        try:
            await usercode.guarded(agent_cancels(), "agent")
        except usercode.UserCodeAbort as exc:
            own = str(exc)
        task = asyncio.create_task(usercode.guarded(agent_sleeps(), "agent"))
        await asyncio.sleep(0)
        task.cancel()  # the run is being cancelled: that must propagate
        try:
            await task
        except asyncio.CancelledError:
            return own, True
        return own, False

    own, propagated = asyncio.run(main())
    assert own == "the agent raised asyncio.CancelledError (the run was not cancelled)"
    assert propagated is True


def test_an_errored_metric_counts_as_zero_in_the_case_mean() -> None:
    def turn(i: int, metric: MetricResult) -> TurnResult:
        return TurnResult(turn_index=i, input="q", passed=metric.passed, metric_results=[metric])

    ok = MetricResult(metric_name="g", kind="code", score=1.0, passed=True)
    errored = MetricResult(metric_name="g", kind="code", passed=False, error="KeyError: 'x'")
    [rolled] = rollup_metrics([turn(0, ok), turn(1, errored)])
    assert (rolled.score, rolled.passed) == (0.5, False)
    [only_errors] = rollup_metrics([turn(0, errored)])
    assert only_errors.score == 0.0


@pytest.mark.parametrize("variant", sorted(agents.BAD_VALUES))
def test_json_safe_output_is_json(variant: str) -> None:
    safe, problems = json_safe({"v": agents.BAD_VALUES[variant]()})
    text = json.dumps(safe, allow_nan=False)
    text.encode("utf-8")
    assert problems or variant in ("frozenset",)  # every one of them is named
    assert all(str(p) for p in problems)


@pytest.mark.parametrize("variant", sorted(agents.BAD_VALUES))
def test_dump_json_never_raises_for_a_case_result(variant: str) -> None:
    # values that slipped past validation (built with model_construct) still dump
    call = ToolInvocation.model_construct(
        name="t\ud800",
        args={"x": agents.BAD_VALUES[variant]()},
        result=agents.BAD_VALUES[variant](),
    )
    turn = TurnResult.model_construct(
        **{**TurnResult(turn_index=0, input="q", passed=False).__dict__, "tool_invocations": [call]}
    )
    case = case_result(passed=False).model_copy(update={"turns": [turn]})
    data = json.loads(dump_json(case))
    assert data["name"] == "c"
    assert isinstance(data["turns"][0]["tool_invocations"][0]["args"], dict)
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in data["turns"][0].values())


# ----------------------------------------------------------------------- settings


@pytest.mark.parametrize("name", ["grader_timeout", "session_timeout"])
def test_new_timeouts_follow_the_precedence_chain(name: str) -> None:
    from multiturn_eval.suite import ExecutionConfig

    env = {f"MULTITURN_EVAL_{name.upper()}": "7"}
    assert getattr(resolve_settings({}, {}), name) == 60.0
    assert getattr(resolve_settings({}, env), name) == 7.0
    suite = ExecutionConfig(**{name: 3})
    assert getattr(resolve_settings({}, env, suite), name) == 3.0
    assert getattr(resolve_settings({name: 1.5}, env, suite), name) == 1.5


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan"])
def test_a_bad_grader_timeout_in_the_environment_is_a_config_error(raw: str) -> None:
    from multiturn_eval.errors import ConfigError

    with pytest.raises(ConfigError, match="MULTITURN_EVAL_GRADER_TIMEOUT"):
        resolve_settings({}, {"MULTITURN_EVAL_GRADER_TIMEOUT": raw})


def test_the_fault_harness_finds_no_fault() -> None:
    # bench/reliability/faults.py --quick: every family through the real CLI in a subprocess
    from tests.cli_probe import run_bench

    proc = run_bench("reliability/faults.py", "--quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    total = next(line for line in proc.stdout.splitlines() if line.startswith("| **total**"))
    cells = [c.strip() for c in total.strip("|").split("|")]
    tried, *faults, _seconds = cells[1:]
    assert int(tried) > 150
    assert faults == ["0"] * 5, proc.stdout
