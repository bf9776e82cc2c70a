"""``user_simulator:`` and ``user:``: the models, the merge rule, every load-time rule.

The suite is read the way the loader reads one (``parse_yaml``, the models, the
loader's ``validation_issues`` and its locator), with the simulation's models in a
stand-in for the suite file's, so each error is checked with its file, line and
field path as a user will see it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from multiturn_eval.locate import Locator, validation_issues
from multiturn_eval.simulation import config
from multiturn_eval.simulation.config import (
    CaseSimulation,
    check_case,
    merge_simulator,
    resolve_simulator,
)
from multiturn_eval.simulation.models import SimulatorConfig, UserConfig, UserSimulatorConfig
from multiturn_eval.suite import JudgeConfig, _Strict
from multiturn_eval.yaml_source import parse_yaml
from tests import simulators

KEY = {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-openai-test"}


class _Case(_Strict):
    name: str | None = None
    turns: list[dict[str, Any]] | None = None
    input: str | None = None
    user: UserConfig | None = None
    judge: JudgeConfig | None = None


class _Suite(_Strict):
    """The part of a suite file the simulated user touches (as Suite will hold it)."""

    user_simulator: UserSimulatorConfig | None = None
    judge: JudgeConfig | None = None
    test_cases: list[_Case]


def load(
    text: str, env: dict[str, str] | None = None, base_dir: Path = Path(), *, called: bool = True
) -> tuple[list[str], list[CaseSimulation | None]]:
    """(every issue as the loader prints it, each case's plan)."""
    doc = parse_yaml(textwrap.dedent(text).lstrip("\n"))
    locator = Locator("suite.yaml", doc)
    try:
        suite = _Suite.model_validate(doc.data)
    except ValidationError as exc:
        return [str(i) for i in validation_issues(exc, doc.data, locator)], []
    issues: list[str] = []
    plans: list[CaseSimulation | None] = []
    for i, case in enumerate(suite.test_cases):
        if case.user is None:
            plans.append(None)
            continue
        plan, found = check_case(
            case.user,
            suite.user_simulator,
            case_path=("test_cases", i),
            has_turns=case.turns is not None,
            has_input=case.input is not None,
            base_dir=base_dir,
            env=KEY if env is None else env,
            suite_judge=suite.judge,
            case_judge=case.judge,
            simulator_called=called,
        )
        issues.extend(str(locator.issue(issue.path, issue.message)) for issue in found)
        plans.append(plan)
    return issues, plans


def plan_of(text: str, **kwargs: Any) -> CaseSimulation:
    issues, plans = load(text, **kwargs)
    assert issues == []
    assert plans[0] is not None
    return plans[0]


# ------------------------------------------------------------------------ good suites


def test_a_minimal_simulated_case_and_its_defaults() -> None:
    plan = plan_of(
        """
        user_simulator: {model: claude-haiku-4-5}
        test_cases:
        - name: refund
          user: {goal: Get a refund for order W123.}
        """
    )
    sim = plan.simulator
    assert (sim.backend, sim.model, sim.api_key, sim.max_tokens, sim.temperature) == (
        "anthropic",
        "claude-haiku-4-5",
        "sk-ant-test",
        1024,
        None,  # not set: the default rule (0, or none for a model that refuses one)
    )
    assert sim.retry.max_attempts == 4
    assert (plan.require_goal, plan.fidelity) == (True, False)
    assert (plan.user.max_turns, plan.user.known, plan.user.unknown, plan.user.opening) == (
        10,
        {},
        [],
        None,
    )
    assert "sk-ant-test" not in repr(sim)


def test_the_issue_example_loads() -> None:
    plan = plan_of(
        """
        user_simulator:
          backend: anthropic
          model: claude-haiku-4-5
        test_cases:
          - name: refund-broken-blender
            turns:
              - input: hi, my blender arrived broken
            user:
              goal: Get a refund to your card for order W123; accept store credit only if refused twice.
              persona: Impatient and terse; writes in lowercase.
              known: {order_id: W123, email: mia@example.com}
              unknown: [the card's last four digits]
              max_turns: 8
              simulator: {model: claude-sonnet-4-5}
        """
    )
    assert plan.simulator.model == "claude-sonnet-4-5"
    assert plan.user.known == {"order_id": "W123", "email": "mia@example.com"}
    assert plan.user.unknown == ["the card's last four digits"]
    assert plan.user.max_turns == 8


# ---------------------------------------------------------------------------- merging


def test_merge_key_by_key_the_case_wins() -> None:
    plan = plan_of(
        """
        user_simulator: {model: A, max_tokens: 200, temperature: 0.7}
        test_cases:
        - user: {goal: g, simulator: {model: B}}
        """
    )
    assert (plan.simulator.model, plan.simulator.max_tokens, plan.simulator.temperature) == (
        "B",
        200,
        0.7,
    )


def test_a_case_naming_another_backend_takes_nothing_from_the_suite() -> None:
    issues, _ = load(
        """
        user_simulator: {model: claude-haiku-4-5, max_tokens: 200, base_url: "https://proxy.example"}
        test_cases:
        - user:
            goal: g
            simulator: {backend: openai}
        """
    )
    assert issues == [
        "suite.yaml:5 test_cases[0] user.simulator.model: no simulated-user model: name one in "
        "user_simulator: {model: ...} or in this test case's user.simulator"
    ]
    plan = plan_of(
        """
        user_simulator: {model: claude-haiku-4-5, max_tokens: 200, base_url: "https://proxy.example"}
        test_cases:
        - user: {goal: g, simulator: {backend: openai, model: gpt-4o-mini}}
        """
    )
    assert (plan.simulator.backend, plan.simulator.model) == ("openai", "gpt-4o-mini")
    assert (plan.simulator.max_tokens, plan.simulator.base_url) == (1024, None)
    assert plan.simulator.api_key == "sk-openai-test"


def test_a_case_naming_the_suites_backend_merges() -> None:
    for suite_backend in ("", "backend: anthropic, "):
        plan = plan_of(
            f"""
            user_simulator: {{{suite_backend}model: A, max_tokens: 300}}
            test_cases:
            - user: {{goal: g, simulator: {{backend: anthropic}}}}
            """
        )
        assert (plan.simulator.model, plan.simulator.max_tokens) == ("A", 300)


def test_python_simulator_from_the_suite_and_an_llm_override() -> None:
    plan = plan_of(
        """
        user_simulator: {backend: python, factory: "tests.simulators:scripted"}
        test_cases:
        - user: {goal: g}
        """
    )
    assert plan.simulator.backend == "python"
    assert plan.factory is simulators.scripted
    override = plan_of(
        """
        user_simulator: {backend: python, factory: "tests.simulators:scripted"}
        test_cases:
        - user: {goal: g, simulator: {backend: anthropic, model: claude-haiku-4-5}}
        """
    )
    assert (override.simulator.backend, override.simulator.factory, override.factory) == (
        "anthropic",
        None,
        None,
    )


def test_merge_records_where_each_key_came_from() -> None:
    suite = UserSimulatorConfig(model="A", max_tokens=5)
    case = SimulatorConfig(model="B")
    merged = merge_simulator(suite, case, case_path=("test_cases", 2))
    assert merged.values == {"model": "B", "max_tokens": 5}
    assert merged.at("model") == ("test_cases", 2, "user", "simulator", "model")
    assert merged.at("max_tokens") == ("user_simulator", "max_tokens")
    assert merged.at("api_key") == ("test_cases", 2, "user", "simulator", "api_key")
    bare = merge_simulator(None, None, case_path=("test_cases", 0))
    assert bare.at("model") == ("test_cases", 0, "user", "model")


@pytest.mark.parametrize(
    ("suite_flags", "case_flags", "expected"),
    [
        ("", "", (True, False)),
        ("require_goal: false, fidelity: true, ", "", (False, True)),
        (
            "require_goal: false, fidelity: true, ",
            "require_goal: true, fidelity: false, ",
            (True, False),
        ),
        ("", "require_goal: false, ", (False, False)),
    ],
)
def test_require_goal_and_fidelity_live_in_user_with_suite_defaults(
    suite_flags: str, case_flags: str, expected: tuple[bool, bool]
) -> None:
    plan = plan_of(
        f"""
        judge: {{model: claude-haiku-4-5}}
        user_simulator: {{{suite_flags}model: A}}
        test_cases:
        - user: {{{case_flags}goal: g}}
        """
    )
    assert (plan.require_goal, plan.fidelity) == expected


# ----------------------------------------------------------------- configuration errors


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "{turns: [{input: hi}], user: {goal: g, opening: hello}}",
            "test_cases[0] user.opening: not allowed beside 'turns:' (the first scripted input "
            "opens the conversation); remove one of them",
        ),
        (
            "{input: hi, user: {goal: g}}",
            "test_cases[0] input: a simulated test case (user:) has no 'input:'; give its "
            "scripted opening as 'turns:' (or user.opening for one fixed first message)",
        ),
        (
            "{user: {goal: g, max_turns: 0}}",
            "test_cases[0] user.max_turns: must be at least 1 (the messages the simulated user "
            "may send, the opening included); got 0",
        ),
        ("{user: {goal: g, max_turns: -3}}", "test_cases[0] user.max_turns: must be at least 1"),
        (
            "{user: {goal: g, max_turns: ten}}",
            "test_cases[0] user.max_turns: input should be a valid integer",
        ),
        (
            "{user: {goal: g, max_turns: true}}",
            "test_cases[0] user.max_turns: input should be a valid integer",
        ),
        (
            "{user: {goal: g, max_turns: 2.5}}",
            "test_cases[0] user.max_turns: input should be a valid integer",
        ),
        ("{user: {persona: p}}", "test_cases[0] user.goal: required key missing"),
        (
            '{user: {goal: "   "}}',
            "test_cases[0] user.goal: is empty; say what the simulated user wants",
        ),
        (
            "{user: {goal: g, known: [a, b]}}",
            "test_cases[0] user.known: input should be a valid dictionary",
        ),
        (
            "{user: {goal: g, unknown: the card}}",
            "test_cases[0] user.unknown: input should be a valid list",
        ),
        (
            '{user: {goal: g, unknown: [the pin, " "]}}',
            "test_cases[0] user.unknown[1]: is empty; name a fact the user does not know",
        ),
        (
            '{user: {goal: g, opening: ""}}',
            "test_cases[0] user.opening: is empty; give the first message, or leave opening out",
        ),
        ("{user: {goal: g, max_turn: 3}}", "test_cases[0] user.max_turn: unknown key"),
        (
            "{user: {goal: g, simulator: {require_goal: false}}}",
            "test_cases[0] user.simulator.require_goal: belongs in user: (user.require_goal), not "
            "in user.simulator; the suite default is user_simulator.require_goal",
        ),
        (
            "{user: {goal: g, simulator: {fidelity: true}}}",
            "test_cases[0] user.simulator.fidelity: belongs in user: (user.fidelity)",
        ),
        (
            "{user: {goal: g, simulator: {backend: python, factory: 'tests.simulators:scripted', model: m}}}",
            "test_cases[0] user.simulator.model: applies to an LLM simulator (anthropic, openai), not python",
        ),
        (
            "{user: {goal: g, simulator: {backend: anthropic, factory: 'tests.simulators:scripted'}}}",
            "test_cases[0] user.simulator.factory: applies to backend: python only",
        ),
        (
            "{user: {goal: g, simulator: {backend: anthropic, api_version: '2024-10-21'}}}",
            "test_cases[0] user.simulator.api_version: applies to backend: openai (Azure) only",
        ),
        (
            "{user: {goal: g, simulator: {backend: gemini}}}",
            "test_cases[0] user.simulator.backend: must be 'anthropic', 'openai' or 'python'; got 'gemini'",
        ),
        (
            "{user: {goal: g, simulator: {base_url: proxy.local}}}",
            "test_cases[0] user.simulator.base_url: must start with http:// or https://; got 'proxy.local'",
        ),
        (
            "{user: {goal: g, simulator: {factory: 'not a reference'}}}",
            "test_cases[0] user.simulator.factory: must be of the form module.path:callable",
        ),
        (
            "{user: {goal: g, simulator: {temperature: -1}}}",
            "test_cases[0] user.simulator.temperature: must be >= 0; got -1",
        ),
        (
            "{user: {goal: g, simulator: {max_tokens: 0}}}",
            "test_cases[0] user.simulator.max_tokens: must be >= 1; got 0",
        ),
    ],
)
def test_each_error_names_its_field(case: str, expected: str) -> None:
    issues, _ = load(f"user_simulator: {{model: A}}\ntest_cases:\n- {case}\n")
    assert len(issues) == 1, issues
    assert issues[0].startswith("suite.yaml:3 " + expected), issues[0]


def test_a_suite_block_error_names_user_simulator() -> None:
    issues, _ = load(
        """
        user_simulator: {backend: python, factory: "tests.simulators:scripted", max_tokens: 5}
        test_cases: [{user: {goal: g}}]
        """
    )
    assert issues == [
        "suite.yaml:1 user_simulator.max_tokens: applies to an LLM simulator (anthropic, "
        "openai), not python"
    ]


def test_errors_found_after_merging_point_at_the_key_that_set_them() -> None:
    issues, _ = load(
        """
        user_simulator:
          backend: python
          factory: "tests.simulators:scripted"
        test_cases:
        - name: mixed
          user:
            goal: g
            simulator:
              model: claude-haiku-4-5
        """
    )
    assert issues == [
        'suite.yaml:9 test_cases[0] ("mixed") user.simulator.model: applies to an LLM '
        "simulator (anthropic, openai), not python"
    ]
    issues, _ = load(
        """
        user_simulator: {factory: "tests.simulators:scripted"}
        test_cases: [{user: {goal: g, simulator: {model: m}}}]
        """
    )
    assert issues == ["suite.yaml:1 user_simulator.factory: applies to backend: python only"]


def test_no_model_anywhere_is_said_at_the_case() -> None:
    issues, _ = load("test_cases:\n- {name: x, user: {goal: g}}\n")
    assert issues == [
        'suite.yaml:2 test_cases[0] ("x") user.model: no simulated-user model: name one in '
        "user_simulator: {model: ...} or in this test case's user.simulator"
    ]


def test_a_python_simulator_needs_a_factory() -> None:
    issues, _ = load("test_cases:\n- {user: {goal: g, simulator: {backend: python}}}\n")
    assert issues == [
        "suite.yaml:2 test_cases[0] user.simulator.factory: backend: python needs factory: "
        '"module.path:callable" (it returns an object with next_message(conversation))'
    ]


def test_the_api_key_comes_from_the_environment_or_the_block() -> None:
    suite = "user_simulator: {model: A}\ntest_cases:\n- {user: {goal: g}}\n"
    issues, _ = load(suite, env={})
    assert issues == [
        "suite.yaml:1 user_simulator.api_key: no API key for the anthropic simulated user: set "
        "ANTHROPIC_API_KEY (or user_simulator.api_key: ${SOME_VAR})"
    ]
    assert load(suite, env={}, called=False)[0] == []  # a regrade calls no simulator
    plan = plan_of(
        "user_simulator: {model: A, api_key: sk-own}\ntest_cases:\n- {user: {goal: g}}\n", env={}
    )
    assert plan.simulator.api_key == "sk-own"
    openai = plan_of(
        "user_simulator: {backend: openai, model: m}\ntest_cases:\n- {user: {goal: g}}\n",
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    assert (openai.simulator.api_key, openai.simulator.base_url) == ("k", "http://127.0.0.1:9/v1")


def test_azure_needs_its_endpoint() -> None:
    issues, _ = load(
        "user_simulator: {backend: openai, model: m, api_version: '2024-10-21'}\n"
        "test_cases:\n- {user: {goal: g}}\n"
    )
    assert issues == [
        "suite.yaml:1 user_simulator.base_url: an Azure OpenAI simulator (api_version) needs "
        "base_url: the Azure endpoint"
    ]


def test_a_missing_sdk_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = config.importlib.util.find_spec
    monkeypatch.setattr(
        config.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "openai" else real(name, *a),
    )
    issues, _ = load(
        "user_simulator: {backend: openai, model: m}\ntest_cases:\n- {user: {goal: g}}\n"
    )
    assert issues == [
        "suite.yaml:1 user_simulator.backend: the openai simulated user needs the package "
        "'openai', which is not installed; install it with: pip install 'multiturn-eval[openai]'"
    ]


@pytest.mark.parametrize(
    ("factory", "words"),
    [
        (
            "tests.nowhere:make",
            "cannot import module 'tests.nowhere': no module named 'tests.nowhere'",
        ),
        ("tests.simulators:missing", "module 'tests.simulators' has no attribute 'missing'"),
        (
            "tests.simulators:NOT_CALLABLE",
            "'tests.simulators:NOT_CALLABLE' is a int, not a callable",
        ),
        (
            "tests.simulators:no_args",
            "the simulator factory must take one argument (a SimulatorContext); its signature is ()",
        ),
        ("tests.simulators:two_args", "its signature is (ctx: 'SimulatorContext', extra: 'int')"),
    ],
)
def test_the_python_factory_is_imported_and_its_signature_checked(factory: str, words: str) -> None:
    issues, _ = load(
        f"test_cases:\n- user: {{goal: g, simulator: {{backend: python, factory: '{factory}'}}}}\n"
    )
    assert len(issues) == 1
    assert issues[0].startswith("suite.yaml:2 test_cases[0] user.simulator.factory: "), issues[0]
    assert words in issues[0]


@pytest.mark.parametrize(
    "factory",
    [
        "tests.simulators:scripted",
        "tests.simulators:async_factory",
        "tests.simulators:ScriptedUser",
    ],
)
def test_factories_that_take_a_context_load(factory: str) -> None:
    plan = plan_of(
        f"user_simulator: {{backend: python, factory: '{factory}'}}\ntest_cases: [{{user: {{goal: g}}}}]\n"
    )
    assert plan.factory is not None


def test_prompt_file_is_read_and_its_placeholders_checked(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("Goal: {{goal}}\n{{ persona }}\n{{transcript}}\n")
    (tmp_path / "odd.md").write_text("{{goal}} {{rubric}} {{transcript}}")
    (tmp_path / "blind.md").write_text("Goal: {{goal}} and nothing else")
    suite = "user_simulator: {{model: A, prompt_file: {}}}\ntest_cases: [{{user: {{goal: g}}}}]\n"
    plan = plan_of(suite.format("good.md"), base_dir=tmp_path)
    assert plan.template == "Goal: {{goal}}\n{{ persona }}\n{{transcript}}\n"
    for name, words in [
        (
            "odd.md",
            "unknown placeholder {{rubric}}; a simulated user's prompt knows {{goal}}, "
            "{{known}}, {{persona}}, {{transcript}}, {{unknown}}",
        ),
        ("blind.md", "the prompt has no {{transcript}} placeholder"),
        ("missing.md", "file not found"),
    ]:
        issues, _ = load(suite.format(name), base_dir=tmp_path)
        assert len(issues) == 1
        assert issues[0].startswith(f"suite.yaml:1 user_simulator.prompt_file: {words}"), issues[0]
        assert str(tmp_path / name) in issues[0]


def test_fidelity_needs_the_suites_judge() -> None:
    issues, _ = load(
        "user_simulator: {model: A}\ntest_cases:\n- {user: {goal: g, fidelity: true}}\n"
    )
    assert issues == [
        "suite.yaml:3 test_cases[0] user.fidelity: fidelity: true judges each simulated message "
        "with the suite's judge: no judge model: name one in judge: {model: ...} (evaluation, "
        "turn, test case or the suite's top-level judge:)"
    ]
    issues, _ = load(
        "user_simulator: {model: A, fidelity: true}\ntest_cases:\n- {user: {goal: g}}\n"
    )
    assert issues[0].startswith("suite.yaml:1 user_simulator.fidelity: fidelity: true judges")
    plan = plan_of(
        "judge: {model: J}\nuser_simulator: {model: A}\ntest_cases:\n- {user: {goal: g, fidelity: true}}\n"
    )
    assert plan.fidelity is True
    case_judge = plan_of(
        "user_simulator: {model: A}\ntest_cases:\n- {judge: {model: J}, user: {goal: g, fidelity: true}}\n"
    )
    assert case_judge.fidelity is True
    assert (
        load(
            "user_simulator: {model: A}\ntest_cases:\n- {user: {goal: g, fidelity: true}}\n",
            called=False,
        )[0]
        == []
    )


def test_every_issue_of_a_case_is_reported_at_once() -> None:
    issues, _ = load(
        """
        test_cases:
        - turns: [{input: hi}]
          user:
            goal: g
            opening: hello
            simulator: {backend: python, factory: "tests.simulators:no_args"}
        """
    )
    assert [i.split(": ", 1)[0] for i in issues] == [
        "suite.yaml:5 test_cases[0] user.opening",
        "suite.yaml:6 test_cases[0] user.simulator.factory",
    ]


def test_the_step_bound_for_dry_run() -> None:
    assert config.step_bound(UserConfig(goal="g")) == 10
    assert config.step_bound(UserConfig(goal="g", max_turns=3, opening="hi")) == 2
    assert config.step_bound(UserConfig(goal="g", max_turns=1, opening="hi")) == 0


def test_resolve_simulator_directly() -> None:
    merged = merge_simulator(
        UserSimulatorConfig(model="A", temperature=0.3), None, case_path=("test_cases", 0)
    )
    resolved, issues = resolve_simulator(merged, {"ANTHROPIC_API_KEY": "k"})
    assert issues == []
    assert resolved is not None
    assert (resolved.model, resolved.temperature, resolved.api_key) == ("A", 0.3, "k")
