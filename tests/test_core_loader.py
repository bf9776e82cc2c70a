"""One test per configuration rule of SPEC 4: every error names file, line, test case and field."""

from __future__ import annotations

import pytest

from tests import agents
from tests.conftest import Project

HEAD = """\
agent:
  backend: python
  factory: tests.agents:scripted
"""


def config_errors(project: Project, body: str, env: dict[str, str] | None = None) -> list[str]:
    project.write("suite.yaml", HEAD + body)
    result = project.run("validate", "suite.yaml", env=env)
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    lines = [line.strip() for line in result.err.splitlines()[1:]]
    assert lines, result.err
    return lines


def one_error(project: Project, body: str, env: dict[str, str] | None = None) -> str:
    errors = config_errors(project, body, env)
    assert len(errors) == 1, errors
    return errors[0]


def test_valid_suite_validates(project: Project) -> None:
    project.write(
        "suite.yaml",
        HEAD
        + """\
test_cases:
  - name: legacy
    input: hello
    ground_truth: hi there
    expected_tools: [greet]
  - name: multi
    tags: [smoke]
    instructions: Extra text.
    context: {table: {"2009": {cash: 206588}}}
    turns:
      - input: what is the cash?
        ground_truth: 206588
        expected_tools: [lookup]
      - input: difference?
        ground_truth: "25587"
        expected_tools:
          - lookup
          - name: subtract
            args: {a: {fuzzy: "206588"}, b: {regex: "181001(\\\\.0+)?"}, c: 3}
            count: 1
        turn_program: subtract(206588, 181001)
""",
    )
    result = project.run("validate", "suite.yaml")
    assert result.code == 0, result.err
    assert result.out == "ok: suite.yaml: 2 test cases, 3 turns\n"


def turn_key(key: str) -> str:
    """A suite body whose one turn has the key ``key`` (at line 8)."""
    return f"test_cases:\n  - name: a\n    turns:\n      - input: x\n        {key}: []\n"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("test_case:\n  - input: x\n", "4 test_case: unknown key; did you mean 'test_cases'?"),
        (
            "test_cases:\n  - name: a\n    input: x\n    tag: [x]\n",
            "7 test_cases[0] (\"a\") tag: unknown key; did you mean 'tags'?",
        ),
        (
            "  modle: x\ntest_cases:\n  - input: x\n",
            "4 agent.modle: unknown key; did you mean 'model'?",
        ),
        (
            turn_key("ground_truht"),
            "8 test_cases[0] (\"a\") turns[0].ground_truht: unknown turn key; did you mean 'ground_truth'?",
        ),
        (
            turn_key("expected_tool"),
            "8 test_cases[0] (\"a\") turns[0].expected_tool: unknown turn key; did you mean 'expected_tools'?",
        ),
        (
            turn_key("evaluation"),
            "8 test_cases[0] (\"a\") turns[0].evaluation: unknown turn key; did you mean 'evaluations'?",
        ),
    ],
)
def test_a_misspelled_key_is_an_error_that_names_the_key_meant(
    project: Project, body: str, error: str
) -> None:
    """The error, after ``suite.yaml:``: the line, where the key is, and the key it means."""
    assert one_error(project, body) == "suite.yaml:" + error


@pytest.mark.parametrize(
    ("evaluation", "message"),
    [
        (
            "{type: code, grader: 'tests.graders:exact', case_insensitive: true}",
            "evaluations[0].case_insensitive: 'case_insensitive' is not a key of a code evaluation "
            "(type: code); it is a key of a standard evaluation (type: standard) with metric: "
            "equality, contains, not_contains or regex",
        ),
        (
            "{type: judge, rubric: r, absolute_tolerance: 1}",
            "evaluations[0].absolute_tolerance: 'absolute_tolerance' is not a key of a judge "
            "evaluation (type: judge); it is a key of a standard evaluation (type: standard) "
            "with metric: numeric",
        ),
        (
            "{type: standard, metric: equality, grader: 'a:b'}",
            "evaluations[0].grader: 'grader' is not a key of a standard evaluation "
            "(type: standard); it is a key of a code evaluation (type: code)",
        ),
        (
            "{type: code, grader: 'tests.graders:exact', treshold: 0.5}",
            "evaluations[0].treshold: unknown key; did you mean 'threshold'?",
        ),
    ],
)
def test_a_key_of_another_evaluation_type_says_where_it_belongs(
    project: Project, evaluation: str, message: str
) -> None:
    error = one_error(project, f"evaluations:\n  - {evaluation}\ntest_cases:\n  - input: x\n")
    assert error == f"suite.yaml:5 {message}"


def test_a_key_of_another_backend_says_where_it_belongs(project: Project) -> None:
    error = one_error(project, "  url: http://x\ntest_cases:\n  - input: x\n")
    assert error == (
        "suite.yaml:4 agent.url: 'url' is not a key of the python agent (backend: python); "
        "it is a key of the http agent (backend: http)"
    )


def test_a_key_of_every_agent_names_the_agents_not_their_shared_base(project: Project) -> None:
    error = one_error(project, "test_cases:\n  - input: x\n    tools: []\n")
    assert error == (
        "suite.yaml:6 test_cases[0] tools: 'tools' is not a key of a test case; it is a key of "
        "an agent.mcp_servers entry, the python agent (backend: python), the http agent (backend: http), the anthropic "
        "agent (backend: anthropic), the semantic-kernel agent (backend: semantic-kernel), "
        "the openai agent (backend: openai)"
    )


def test_the_key_hints_know_every_model_of_the_suite_format() -> None:
    """suite.MODELS, which the hints walk, holds every public model of the suite package."""
    import importlib
    import pkgutil

    from pydantic import BaseModel

    from multiturn_eval import suite

    defined = {
        obj
        for info in pkgutil.iter_modules(suite.__path__, suite.__name__ + ".")
        for obj in vars(importlib.import_module(info.name)).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseModel)
        and obj.__module__.startswith(suite.__name__)
        and not obj.__name__.startswith("_")
    } | {suite.Suite}
    assert len(defined) > 20
    assert set(suite.MODELS) == defined
    assert len(suite.MODELS) == len(defined)


def test_an_unknown_key_is_never_suggested_as_itself() -> None:
    """Every key of the suite format, written where it is not valid, in every model."""
    from multiturn_eval import suite as models
    from multiturn_eval.key_hints import all_keys, describe, unknown_key_message

    places: dict[str, tuple[str | int, ...]] = {
        "StandardEvaluation": ("evaluations", 0, "standard"),
        "CodeEvaluation": ("evaluations", 0, "code"),
        "JudgeEvaluation": ("test_cases", 0, "turns", 0, "evaluations", 1, "judge"),
        "PythonAgent": ("agent", "python"),
        "HttpAgent": ("agent", "http"),
        "OpenAIAgent": ("agent", "openai"),
        "ExecutionConfig": ("execution",),
        "TestCase": ("test_cases", 3),
        "ExpectedTool": ("test_cases", 0, "turns", 2, "expected_tools", 1, "tool-spec"),
        "JudgeConfig": ("judge",),
        "Suite": (),
    }
    for name, location in places.items():
        model = getattr(models, name)
        assert describe(model) and not describe(model).startswith(name), name
        for key in all_keys():
            if key in model.model_fields:
                continue
            message = unknown_key_message(key, location)
            assert f"did you mean '{key}'" not in message, (name, key, message)
            assert message.startswith(("unknown key", f"'{key}' is not a key of ")), message


def test_other_turn_keys_become_turn_config(project: Project) -> None:
    project.write(
        "suite.yaml",
        HEAD
        + "test_cases:\n  - turns:\n      - input: x\n        turn_program: subtract(1, 2)\n        weight: 3\n",
    )
    from multiturn_eval.loader import load_suite

    loaded = load_suite(project.root / "suite.yaml", {})
    turn = loaded.suite.test_cases[0].effective_turns()[0]
    assert turn.turn_config == {"turn_program": "subtract(1, 2)", "weight": 3}


#: a suite body (after HEAD) and the one located error it gets, exactly
ONE_ERROR = [
    pytest.param(
        "test_cases:\n  - input: x\n    turns:\n      - input: y\n",
        "suite.yaml:5 test_cases[0] input: a test case has either 'input' or 'turns', not both",
        id="input-and-turns-together",
    ),
    pytest.param(
        "test_cases:\n  - name: e\n    turns: []\n",
        "suite.yaml:6 test_cases[0] (\"e\") turns: is empty; give at least one turn, or use 'input:'",
        id="empty-turns",
    ),
    pytest.param(
        "test_cases:\n  - input: x\n    expected_tools:\n      - {name: a, count: 0}\n",
        "suite.yaml:7 test_cases[0] expected_tools[0].count: must be >= 1; got 0",
        id="expected-tool-count-must-be-positive",
    ),
    pytest.param(
        "test_cases:\n  - input: x\n    expected_tools:\n      - {name: a, args: {b: {fuzzy: '1', regex: '1'}}}\n",
        "suite.yaml:7 test_cases[0] expected_tools[0].args.b: a matcher mapping has exactly one key, "
        "'fuzzy' or 'regex'; got 'fuzzy', 'regex'",
        id="matcher-with-two-keys",
    ),
    pytest.param(
        "test_cases:\n  - name: Single_JKHY\n    turns:\n      - input: x\n        expected_tools:\n"
        "          - name: subtract\n            args: {b: {regex: '(181001'}}\n",
        'suite.yaml:10 test_cases[0] ("Single_JKHY") turns[0].expected_tools[0].args.b.regex: '
        "cannot compile: missing ), unterminated subpattern at position 0",
        id="regex-compiled-at-load",
    ),
    pytest.param(
        "evaluations:\n  - {type: standard, metric: numeric, absolute_tolerance: -1}\ntest_cases:\n  - input: x\n",
        "suite.yaml:5 evaluations[0].absolute_tolerance: must be >= 0; got -1",
        id="negative-tolerance",
    ),
    pytest.param(
        "evaluations:\n  - {type: standard, metric: equality, relative_tolerance: 1}\ntest_cases:\n  - input: x\n",
        "suite.yaml:5 evaluations[0].relative_tolerance: applies to another metric, not to 'equality'",
        id="flag-of-the-other-metric",
    ),
]


@pytest.mark.parametrize(("body", "message"), ONE_ERROR)
def test_a_suite_error_is_located_and_said(project: Project, body: str, message: str) -> None:
    assert one_error(project, body) == message


def test_neither_input_nor_turns(project: Project) -> None:
    error = one_error(project, "test_cases:\n  - name: e\n")
    assert "test_cases[0] (\"e\") turns: a test case needs 'turns'" in error


@pytest.mark.parametrize("key", ["ground_truth", "expected_tools", "files", "retrieval_context"])
def test_legacy_keys_beside_turns(project: Project, key: str) -> None:
    value = "x" if key == "ground_truth" else "[]"
    error = one_error(project, f"test_cases:\n  - turns:\n      - input: y\n    {key}: {value}\n")
    assert (
        error
        == f"suite.yaml:7 test_cases[0] {key}: not allowed beside 'turns'; put it on the turn it belongs to"
    )


def test_expected_tool_item_shape(project: Project) -> None:
    error = one_error(project, "test_cases:\n  - input: x\n    expected_tools:\n      - {nam: a}\n")
    assert "test_cases[0] expected_tools[0].nam: unknown key; did you mean 'name'?" in error


def test_unknown_evaluation_type_and_metric(project: Project) -> None:
    errors = config_errors(
        project,
        "evaluations:\n  - {type: standrd, metric: numeric}\n  - {type: standard, metric: bleu}\n"
        "test_cases:\n  - input: x\n",
    )
    assert errors[0].startswith(
        "suite.yaml:5 evaluations[0]: unknown type 'standrd'; expected one of"
    )
    assert (
        errors[1]
        == "suite.yaml:6 evaluations[1].metric: must be 'equality', 'numeric', 'contains', 'not_contains', 'regex' or 'json'; got 'bleu'"
    )


@pytest.mark.parametrize(
    ("grader", "message"),
    [
        (
            "nowhere.mod:fn",
            "cannot import module 'nowhere.mod': no module named 'nowhere' (looked in ",
        ),
        ("tests.graders:missing", "module 'tests.graders' has no attribute 'missing'"),
        ("tests.graders:NOT_CALLABLE", "'tests.graders:NOT_CALLABLE' is a int, not a callable"),
    ],
)
def test_code_grader_imported_at_load(project: Project, grader: str, message: str) -> None:
    error = one_error(
        project,
        f"test_cases:\n  - name: g\n    input: x\n    evaluations:\n      - type: code\n        grader: {grader}\n",
    )
    assert error.startswith(f'suite.yaml:9 test_cases[0] ("g") evaluations[0].grader: {message}')


def test_a_module_not_found_says_where_it_was_looked_for(project: Project) -> None:
    """Run from another directory, ``mypkg.agents`` is not found: the hint says why."""
    project.write("repo/mypkg/__init__.py", "")
    project.write("repo/mypkg/agents.py", "def make(ctx):\n    return None\n")
    project.write(
        "repo/suites/s.yaml",
        "agent: {backend: python, factory: 'mypkg.agents:make'}\ntest_cases: [{input: x}]\n",
    )
    suites = (project.root / "repo" / "suites").resolve()
    result = project.run("validate", "repo/suites/s.yaml")
    assert result.code == 2
    line = result.err.splitlines()[1].strip()
    assert line.startswith(
        "repo/suites/s.yaml:1 agent.factory: cannot import module 'mypkg.agents': no module "
        "named 'mypkg' (looked in /"
    ), line
    looked = line.partition("(looked in ")[2].partition(" and the interpreter's")[0].split(", ")
    assert str(suites) in looked and str(project.root.resolve()) in looked, looked
    assert line.endswith(
        "and the interpreter's own directories; the suite file's directory and the current "
        "directory are always on the path: run from the directory that holds 'mypkg', usually "
        "the repository root, or add it to PYTHONPATH)"
    ), line
    assert "site-packages" not in line
    import os

    os.chdir(project.root / "repo")  # from the repository root it is found
    assert project.run("validate", "suites/s.yaml").code == 0


def test_a_module_missing_inside_a_found_package_names_the_package(project: Project) -> None:
    project.write("pkg_without_nothere/__init__.py", "")
    project.write(
        "s.yaml",
        "agent: {backend: python, factory: 'pkg_without_nothere.nothere:make'}\ntest_cases: [{input: x}]\n",
    )
    result = project.run("validate", "s.yaml")
    assert result.err.splitlines()[1].strip() == (
        "s.yaml:1 agent.factory: cannot import module 'pkg_without_nothere.nothere': no module named "
        f"'pkg_without_nothere.nothere' (package 'pkg_without_nothere' at {project.root / 'pkg_without_nothere'} has no 'nothere')"
    )


FACTORIES = """\
from tests.agents import ScriptedSession


def none():
    return ScriptedSession(None)


def two(ctx, extra):
    return ScriptedSession(ctx)


def keyword_only(*, ctx):
    return ScriptedSession(ctx)


def optional_extra(ctx, extra=1):
    return ScriptedSession(ctx)


def star(*args):
    return ScriptedSession(args[0])


async def coroutine(ctx):
    return ScriptedSession(ctx)


class Session(ScriptedSession):
    pass


def grader_none():
    return True


def grader_star(*args, **kwargs):
    return True
"""


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        ("none", "none() cannot take it (too many positional arguments)"),
        ("two", "two(ctx, extra) cannot take it (missing a required argument: 'extra')"),
        ("keyword_only", "keyword_only(*, ctx) cannot take it (too many positional arguments)"),
    ],
)
def test_a_factory_that_cannot_take_the_case_context_is_a_config_error(
    project: Project, factory: str, problem: str
) -> None:
    project.write("factories.py", FACTORIES)
    project.write(
        "suite.yaml",
        f"agent:\n  backend: python\n  factory: factories:{factory}\ntest_cases:\n  - input: x\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 2, result.out + result.err
    assert result.err.splitlines()[1].strip() == (
        "suite.yaml:3 agent.factory: the factory is called with one argument, the test case's "
        f"CaseContext; {problem}"
    )
    assert agents.OPENED == [] and not (project.root / "out").exists()


@pytest.mark.parametrize("factory", ["optional_extra", "star", "coroutine", "Session"])
def test_factories_that_take_one_argument_load(project: Project, factory: str) -> None:
    project.write("factories.py", FACTORIES)
    project.write(
        "suite.yaml",
        f"agent:\n  backend: python\n  factory: factories:{factory}\n"
        "test_cases:\n  - {input: x, context: {script: [{response: ok}]}}\n",
    )
    result = project.run("run", "suite.yaml")
    assert result.code == 0, result.out + result.err


def test_a_grader_that_cannot_take_its_context_is_a_config_error(project: Project) -> None:
    project.write("factories.py", FACTORIES)
    errors = config_errors(
        project,
        "evaluations:\n  - {type: code, grader: 'factories:grader_star', name: ok}\n"
        "test_cases:\n  - name: g\n    turns: [{input: x}]\n"
        "    conversation_evaluations: [{type: code, grader: 'factories:grader_none'}]\n",
    )
    assert errors == [
        'suite.yaml:9 test_cases[0] ("g") conversation_evaluations[0].grader: a grader is '
        "called with one argument, its GraderContext (a ConversationContext in "
        "conversation_evaluations); grader_none() cannot take it (too many positional arguments)"
    ]


def test_factory_imported_at_load(project: Project) -> None:
    err = project.rejected(
        "agent:\n  backend: python\n  factory: tests.agents:nope\ntest_cases:\n  - input: x\n"
    )
    assert "suite.yaml:3 agent.factory: module 'tests.agents' has no attribute 'nope'" in err


def test_files_must_exist(project: Project) -> None:
    error = one_error(
        project,
        "test_cases:\n  - turns:\n      - input: x\n        files: [{path: data/chart.png}]\n",
    )
    assert error.startswith("suite.yaml:7 test_cases[0] turns[0].files[0].path: file not found: ")


def test_instructions_file_must_exist(project: Project) -> None:
    err = project.rejected(
        HEAD + "  instructions_file: prompts/analyst.md\ntest_cases:\n  - input: x\n"
    )
    assert "suite.yaml:4 agent.instructions_file: file not found: " in err


def test_unset_variable_names_the_field(project: Project) -> None:
    error = one_error(project, "  options: {key: '${MY_TOKEN}'}\ntest_cases:\n  - input: x\n")
    assert error == "suite.yaml:4 agent.options.key: environment variable MY_TOKEN is not set"


def test_variables_are_substituted(project: Project) -> None:
    project.write("suite.yaml", HEAD + "test_cases:\n  - name: ${CASE}-$${literal}\n    input: x\n")
    from multiturn_eval.loader import load_suite

    loaded = load_suite(project.root / "suite.yaml", {"CASE": "hello"})
    assert loaded.case_name(0) == "hello-${literal}"


def test_substitution_copies_only_what_it_changes(project: Project) -> None:
    """${VAR} in one test case: that case gets the value, the others and the raw document
    are untouched (what has no variable is validated as parsed, not copied first)."""
    cases = "".join(
        f"  - name: {'${CASE}' if i == 3 else f'c{i}'}\n    turns: [{{input: q{i}}}, {{input: r}}]\n"
        for i in range(6)
    )
    project.write("suite.yaml", HEAD + "test_cases:\n" + cases)
    from multiturn_eval.loader import load_suite

    loaded = load_suite(project.root / "suite.yaml", {"CASE": "from-env"})
    assert [loaded.case_name(i) for i in range(6)] == ["c0", "c1", "c2", "from-env", "c4", "c5"]
    raw = loaded.document.data["test_cases"]
    assert [c["name"] for c in raw] == ["c0", "c1", "c2", "${CASE}", "c4", "c5"]
    assert [t.input for t in loaded.cases.materialize(5).turns or []] == ["q5", "r"]


def test_numeric_evaluation_needs_numeric_ground_truth(project: Project) -> None:
    error = one_error(
        project,
        "evaluations: [{type: standard, metric: numeric}]\ntest_cases:\n  - input: x\n    ground_truth: yes\n",
    )
    assert error == (
        "suite.yaml:7 test_cases[0] ground_truth: 'yes' is not a number, but the 'numeric' evaluation "
        "compares numbers; give this turn its own evaluations (e.g. metric: equality)"
    )


def test_yaml_syntax_error_gives_the_line(project: Project) -> None:
    error = one_error(project, "test_cases:\n  - input: [unclosed\n  - input: y\n")
    assert error.startswith("suite.yaml:6: YAML syntax error:")


def test_duplicate_keys_are_errors(project: Project) -> None:
    error = one_error(project, "test_cases:\n  - input: x\n    input: y\n")
    assert error == "suite.yaml:6: YAML syntax error: duplicate key 'input' (first at line 5)"


def test_not_a_mapping(project: Project) -> None:
    err = project.rejected("- just\n- a list\n")
    assert "suite.yaml:1: a suite file is a YAML mapping" in err


def test_missing_file(project: Project) -> None:
    result = project.run("validate", "nope.yaml")
    assert result.code == 2
    assert "nope.yaml: suite file not found" in result.err


def test_all_errors_of_a_file_are_reported_together(project: Project) -> None:
    errors = config_errors(
        project,
        "test_cases:\n  - turns: []\n  - input: x\n    tags: nope\n  - input: y\n    expected_tools: [{name: a, count: 0}]\n",
    )
    assert len(errors) == 3


def test_errors_of_several_files_are_reported_together(project: Project) -> None:
    project.write("a.yaml", HEAD + "test_cases: []\n")
    project.write("b.yaml", HEAD + "test_cases:\n  - turns: []\n")
    result = project.run("validate", "a.yaml", "b.yaml")
    assert result.code == 2
    assert "a.yaml:4 test_cases: is empty" in result.err
    assert "b.yaml:5 test_cases[0] turns: is empty" in result.err


def test_duplicate_names_are_warned_not_rejected(project: Project) -> None:
    project.write(
        "suite.yaml", HEAD + "test_cases:\n  - {name: a, input: x}\n  - {name: a, input: y}\n"
    )
    result = project.run("validate", "suite.yaml")
    assert result.code == 0
    assert (
        "warning: suite.yaml:6 test_cases[1]: duplicate test-case name 'a' (also test_cases[0])"
        in result.out
    )


def test_yes_no_stay_text(project: Project) -> None:
    project.write(
        "suite.yaml",
        HEAD
        + "test_cases:\n  - {input: is it?, ground_truth: yes}\n  - {input: 3, ground_truth: 0.5}\n"
        + "  - {input: when?, ground_truth: 2024-10-21}\n",
    )
    from multiturn_eval.loader import load_suite

    cases = load_suite(project.root / "suite.yaml", {}).suite.test_cases
    assert cases[0].ground_truth == "yes"
    assert (cases[1].input, cases[1].ground_truth) == ("3", "0.5")
    assert cases[2].ground_truth == "2024-10-21"


def test_duplicate_metric_names_in_one_list(project: Project) -> None:
    error = one_error(
        project,
        "evaluations:\n  - {type: standard, metric: numeric}\n  - {type: standard, metric: numeric}\ntest_cases:\n  - input: x\n",
    )
    assert "evaluations[1].name: metric name 'numeric' is already used by evaluations[0]" in error


@pytest.mark.parametrize("checked", [False, True], ids=["model-issues", "checks-after"])
@pytest.mark.parametrize("cases", [3, 1_201], ids=["validated-whole", "validated-one-by-one"])
def test_a_large_suite_says_the_same_issues_as_a_small_one(
    project: Project, cases: int, checked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``loader.ONE_BY_ONE`` written test cases each case is validated on its own and
    its parsed YAML let go: the issues (the header's, the first case's, a late case's, and
    a check after validation that names the case) are those of the suite validated in one
    go, in the same order."""
    from multiturn_eval import loader

    late = cases - 1
    # model issues: the header's, the first case's, a late one's; checks after: a missing
    # file of a late turn (named with its case's written name)
    bad = "    files: [{path: missing.png}]\n" if checked else "    ground_truht: 1\n"
    body = "test_cases:\n" if checked else "execution:\n  turn_timeout: -1\ntest_cases:\n"
    for i in range(cases):
        extra = bad if i in (0, late) else ""
        body += f"  - name: case-{i}\n    input: hi {i}\n{extra}"
    assert (cases > loader.ONE_BY_ONE) == (cases == 1_201)  # each path is taken once
    errors = config_errors(project, body)
    monkeypatch.setattr(loader, "ONE_BY_ONE", 10**9)  # the same suite validated in one go
    assert config_errors(project, body) == errors
    word = "missing.png" if checked else "ground_truht"
    assert any(f'test_cases[{late}] ("case-{late}")' in e and word in e for e in errors)
    assert any('test_cases[0] ("case-0")' in e and word in e for e in errors)
    assert checked or any("turn_timeout" in e for e in errors)
