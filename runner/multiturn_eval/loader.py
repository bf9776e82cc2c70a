"""Suite files -> validated suites, or every problem of a file at once.

Each problem becomes a :class:`ConfigIssue` with the file, line, test case and
field path, e.g.::

    suite.yaml:41 test_cases[3] ("Single_JKHY") turns[2].expected_tools[0].args.b.regex: cannot compile: ...

Order of work, all before any agent is called:

1. parse YAML keeping a line for every field (:mod:`yaml_source`);
2. replace ``${VAR}`` from the environment (unset: an error naming the field);
   values put into ``api_key`` or ``headers`` are remembered as secrets;
3. validate with the pydantic models (:mod:`suite`);
4. check what needs the file system or an import: ``instructions_file``,
   ``files``, tools, graders, the python factory; and that a ``numeric``
   evaluation only meets numeric ground truths;
5. check the MCP servers as far as can be done without starting one
   (:func:`~multiturn_eval.tools.mcp_servers.check.load_problems`); every value
   of their ``env`` and ``headers`` is a secret.

Where a problem is and how it is worded: :mod:`.locate`; how files are read
(bounded, never blocking): :mod:`.reading`; what the result holds:
:class:`~multiturn_eval.loaded.LoadedSuite`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import ConfigError, ConfigIssue, JudgeConfigProblem, YamlSyntaxError
from .grading.evaluators import parse_ground_truth_number
from .grading.judges.prompt import template_problem
from .grading.judges.service import PACKAGES, merge_levels, resolve
from .imports import add_import_paths, one_argument_problem, resolve_callable
from .loaded import LoadedSuite
from .locate import Locator, validation_issues
from .pricing import judge_provider
from .reading import FILE_KINDS, file_problem, read_text
from .secrets import is_secret_name, is_secret_value
from .settings import fixtures_mode
from .simulation.record import USER_GOAL
from .suite import (
    CodeEvaluation,
    Evaluation,
    JudgeConfig,
    JudgeEvaluation,
    StandardEvaluation,
    Suite,
)
from .tools import tool_definition_issues
from .yaml_source import Path_, format_path, parse_yaml

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # outside the cwd; a symlink loop
        return str(path)


# --------------------------------------------------------------------- substitution


def _judge_block(path: Path_) -> bool:
    """Whether ``path`` lies inside a ``judge:`` block (the suite's, a test case's, a
    turn's or an evaluation's; never a ``context`` key that happens to be called judge)."""
    for k in range(len(path)):
        if path[k] != "judge":
            continue
        if k == 0 or (path[0] == "test_cases" and (k == 2 or (k == 4 and path[2] == "turns"))):
            return True
        if k >= 2 and isinstance(path[k - 1], int) and path[k - 2] in _EVALUATION_LISTS:
            return True
    return False


_EVALUATION_LISTS = ("evaluations", "conversation_evaluations")
_MCP_SECRET = ("env", "headers")


def _simulator_block(path: Path_) -> bool:
    """Whether ``path`` lies inside ``user_simulator:`` or a test case's ``user.simulator``."""
    return path[:1] == ("user_simulator",) or (
        len(path) >= 4 and path[0] == "test_cases" and path[2:4] == ("user", "simulator")
    )


def unused_blocks(*, agent_called: bool, judges_called: bool) -> Callable[[Path_], bool] | None:
    """Which fields a run will not use, so that their variables (``${VAR}``) need not be set.

    ``regrade`` calls no agent (the ``agent:`` block is not used), no simulated user
    (``user_simulator:`` and ``user.simulator``: the recorded conversation is replayed)
    and, without ``--rejudge``, no judge (the ``judge:`` blocks are not used). An unset
    variable there is left as written (``${OPENAI_API_KEY}``) instead of being
    an error; everything regrade does use (inputs, ground truths, evaluations,
    ``context``) must still resolve.
    """
    if agent_called and judges_called:
        return None

    def unused(path: Path_) -> bool:
        return (not agent_called and (path[:1] == ("agent",) or _simulator_block(path))) or (
            not judges_called and _judge_block(path)
        )

    return unused


def _written_mode(data: Any) -> Any:
    """``execution.fixtures.mode`` as written in the suite (None: not there)."""
    for key in ("execution", "fixtures", "mode"):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _drop(data: Any, path: Path_) -> None:
    """Remove the field at ``path`` (an API key left without its variable)."""
    *parents, last = path
    for key in parents:
        data = data[key]
    data.pop(last, None)


def _key_field(path: Path_) -> bool:
    """An API key: ``agent.api_key``, any ``judge:`` block's, a simulated user's
    (``user_simulator.api_key``, a test case's ``user.simulator.api_key``)."""
    return path in (("agent", "api_key"), ("user_simulator", "api_key")) or (
        len(path) >= 2 and path[-2:] in (("judge", "api_key"), ("simulator", "api_key"))
    )


def _substitute(
    value: Any,
    path: Path_,
    env: Mapping[str, str],
    locator: Locator,
    issues: list[ConfigIssue],
    secrets: set[str],
    unused: Callable[[Path_], bool] | None = None,
    unset_keys: list[Path_] | None = None,
    keyless: bool = False,
) -> Any:
    """``${VAR}`` replaced from ``env`` everywhere. ``keyless`` (fixtures replay and update):
    an API key whose variable is unset is put in ``unset_keys`` (the loader drops it)."""
    if isinstance(value, dict):
        return {
            k: _substitute(
                v, (*path, k), env, locator, issues, secrets, unused, unset_keys, keyless
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            _substitute(v, (*path, i), env, locator, issues, secrets, unused, unset_keys, keyless)
            for i, v in enumerate(value)
        ]
    if not isinstance(value, str) or "$" not in value:
        return value
    secret_field = (
        (len(path) >= 2 and path[0] == "agent" and path[1] in ("api_key", "headers"))
        or (len(path) >= 2 and path[-1] == "api_key" and path[-2] == "judge")
        or (path[-1:] == ("api_key",) and _simulator_block(path))
        # an MCP server's env and headers: every value (and so every variable in it) is secret
        or (len(path) >= 5 and path[:2] == ("agent", "mcp_servers") and path[3] in _MCP_SECRET)
    )

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        if name not in env:
            if unused is not None and unused(path):
                return match.group(0)  # not used by this run: left as written
            if keyless and unset_keys is not None and _key_field(path):
                unset_keys.append(path)  # replayed calls need no key
                return ""
            issues.append(locator.issue(path, f"environment variable {name} is not set"))
            return ""
        replacement = env[name]
        if (secret_field or is_secret_name(name)) and is_secret_value(replacement):
            secrets.add(replacement)
        return replacement

    return _VAR.sub(replace, value)


# --------------------------------------------------------------------------- loading


def _read(path: Path, shown: str) -> str:
    try:
        return read_text(path)
    except ValueError as exc:
        message = str(exc)
        if message.startswith("file not found"):
            message = "suite " + message
        elif message == FILE_KINDS[0][1]:
            message = "is a directory, not a suite file"
        raise ConfigError(ConfigIssue(message, file=shown)) from None


def load_suite(
    path: Path,
    env: Mapping[str, str],
    *,
    judges_called: bool = True,
    agent_called: bool = True,
    fixtures: str | None = None,
) -> LoadedSuite:
    """Load and validate one suite file; raise ConfigError with all its problems.

    ``env`` is the environment as the entry point read it (for ``${VAR}``).
    ``judges_called=False`` (``regrade`` without ``--rejudge``, which reuses the
    recorded verdicts): an LLM judge's API key need not resolve, nor the
    variables of its ``judge:`` blocks. ``agent_called=False`` (``regrade``):
    the variables (``${VAR}``) of the ``agent:`` block need not be set (:func:`unused_blocks`).
    ``fixtures``: the ``--fixtures`` mode given on the command line; when the suite's mode
    (by the settings' precedence) is ``replay`` or ``update``, a judge's API key may be
    missing (a replayed call needs none; an update without one says so on its misses).
    """
    shown = display_path(path)
    text = _read(path, shown)
    try:
        doc = parse_yaml(text)
    except YamlSyntaxError as exc:
        raise ConfigError(
            ConfigIssue(f"YAML syntax error: {exc}", file=shown, line=exc.line)
        ) from None
    locator = Locator(shown, doc)
    if not isinstance(doc.data, dict):
        kind = "empty" if doc.data is None else f"a {type(doc.data).__name__}"
        raise ConfigError(
            ConfigIssue(
                f"a suite file is a YAML mapping (agent:, test_cases:, ...); this one is {kind}",
                file=shown,
                line=1,
            )
        )
    issues: list[ConfigIssue] = []
    secrets: set[str] = set()
    unused = unused_blocks(agent_called=agent_called, judges_called=judges_called)
    # replay and update answer from the fixtures: a key may be missing, ${VAR} of one too
    keyless = fixtures_mode(fixtures, env, _written_mode(doc.data)) in ("replay", "update")
    unset_keys: list[Path_] = []
    data = _substitute(doc.data, (), env, locator, issues, secrets, unused, unset_keys, keyless)
    if issues:
        raise ConfigError(issues)
    for key_path in unset_keys:  # an API key whose variable is unset: no key (the default's)
        _drop(data, key_path)
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_issues(exc, data, locator)) from None
    loaded = LoadedSuite(
        path=path.absolute(),  # a turn's files are read later, whatever the cwd is by then
        given_dir=path.parent,
        display_path=shown,
        suite=suite,
        document=doc,
        instructions=suite.agent.instructions,
        secrets=secrets,
    )
    add_import_paths([path.parent, Path.cwd()])
    issues.extend(_resolve(loaded, locator))
    issues.extend(
        _check_simulations(loaded, locator, env, simulator_called=agent_called, keyless=keyless)
    )
    if agent_called:  # regrade starts no server
        issues.extend(_check_mcp_servers(loaded, locator, env))
    if not issues:
        issues.extend(
            _check_judges(loaded, locator, env, judges_called, agent_called, keyless=keyless)
        )
    if issues:
        raise ConfigError(issues)
    return loaded


def _check_simulations(
    loaded: LoadedSuite,
    locator: Locator,
    env: Mapping[str, str],
    *,
    simulator_called: bool,
    keyless: bool = False,
) -> list[ConfigIssue]:
    """Every simulated test case (``user:``): its simulator merged and resolved, its factory
    imported or its ``prompt_file`` read, its fidelity judge (:func:`~.simulation.check_case`).

    ``simulator_called=False`` (regrade replays the recorded conversation): no API key is
    needed, and the fidelity judge is checked with the other judges only under ``--rejudge``.
    ``keyless`` (fixtures replay and update): the fixtures answer the simulator's and the
    fidelity judge's calls, so a missing API key is not a problem.
    """
    from .simulation import check_case

    suite = loaded.suite
    issues: list[ConfigIssue] = []
    said: set[tuple[Path_, str]] = set()
    for i, case in enumerate(suite.test_cases):
        if case.user is None:
            continue
        plan, problems = check_case(
            case.user,
            suite.user_simulator,
            case_path=("test_cases", i),
            has_turns=case.turns is not None,
            has_input=case.input is not None,
            base_dir=loaded.base_dir,
            env=env,
            suite_judge=suite.judge,
            case_judge=case.judge,
            simulator_called=simulator_called,
            keyless=keyless,
        )
        for problem in problems:  # a problem of user_simulator: is said once, not per case
            if (problem.path, problem.message) not in said:
                said.add((problem.path, problem.message))
                issues.append(locator.issue(problem.path, problem.message))
        if plan is None:
            continue
        loaded.simulations[i] = plan
        key = plan.simulator.api_key
        if key is not None and is_secret_value(key):  # a key written into the suite too
            loaded.secrets.add(key)
    return issues


def _resolve(loaded: LoadedSuite, locator: Locator) -> list[ConfigIssue]:
    suite, base = loaded.suite, loaded.base_dir
    issues: list[ConfigIssue] = []
    agent = suite.agent
    if agent.instructions_file is not None:
        target = base / agent.instructions_file
        try:
            loaded.instructions = read_text(target)
        except ValueError as exc:
            issues.append(
                locator.issue(
                    ("agent", "instructions_file"),
                    f"{exc}: {loaded.shown(agent.instructions_file)}",
                )
            )
    for i, tool in enumerate(agent.tools):
        try:
            loaded.tools.append(resolve_callable(tool.function))
        except ValueError as exc:
            issues.append(locator.issue(("agent", "tools", i, "function"), str(exc)))
    if len(loaded.tools) == len(agent.tools):  # all imported: check them as tools (tools.py)
        issues.extend(
            locator.issue(p, m) for p, m in tool_definition_issues(agent.tools, loaded.tools)
        )
    factory = getattr(agent, "factory", None)
    if factory is not None:
        try:
            loaded.factory = resolve_callable(factory)
        except ValueError as exc:
            issues.append(locator.issue(("agent", "factory"), str(exc)))
        else:
            problem = one_argument_problem(
                loaded.factory,
                "the factory is called with one argument, the test case's CaseContext",
            )
            if problem is not None:
                issues.append(locator.issue(("agent", "factory"), problem))

    judge_files: dict[str, str] = {}

    def read_judge_file(name: str, path: Path_, template: bool) -> None:
        if name in judge_files:
            return
        target, shown = base / name, loaded.shown(name)
        try:
            text = read_text(target)
        except ValueError as exc:
            issues.append(locator.issue(path, f"{exc}: {shown}"))
            return
        if template:
            problem = template_problem(text)
            if problem is not None:
                issues.append(locator.issue(path, f"{problem}: {shown}"))
                return
        elif not text.strip():
            issues.append(locator.issue(path, f"the rubric file is empty: {shown}"))
            return
        judge_files[name] = text

    def check_evaluations(evaluations: Iterable[Evaluation] | None, path: Path_) -> None:
        for j, evaluation in enumerate(evaluations or []):
            if isinstance(evaluation, JudgeEvaluation):
                if evaluation.rubric_file is not None:
                    read_judge_file(evaluation.rubric_file, (*path, j, "rubric_file"), False)
                if evaluation.prompt_file is not None:
                    read_judge_file(evaluation.prompt_file, (*path, j, "prompt_file"), True)
            if (
                isinstance(evaluation, StandardEvaluation)
                and evaluation.schema_file is not None
                and evaluation.schema_file not in loaded.json_schemas
            ):
                problem = _read_schema(loaded, evaluation.schema_file)
                if isinstance(problem, str):
                    issues.append(locator.issue((*path, j, "schema_file"), problem))
            if isinstance(evaluation, CodeEvaluation) and evaluation.grader not in loaded.graders:
                try:
                    grader = resolve_callable(evaluation.grader)
                except ValueError as exc:
                    issues.append(locator.issue((*path, j, "grader"), str(exc)))
                    continue
                problem = one_argument_problem(
                    grader,
                    "a grader is called with one argument, its GraderContext (a "
                    "ConversationContext in conversation_evaluations)",
                )
                if problem is not None:
                    issues.append(locator.issue((*path, j, "grader"), problem))
                    continue
                loaded.graders[evaluation.grader] = grader

    check_evaluations(suite.evaluations, ("evaluations",))
    names: dict[str, int] = {}
    for i, case in enumerate(suite.test_cases):
        case_path: Path_ = ("test_cases", i)
        name = loaded.case_name(i)
        if name in names:
            loaded.warnings.append(
                f"{loaded.display_path}:{loaded.case_line(i)} test_cases[{i}]: duplicate test-case name "
                f"'{name}' (also test_cases[{names[name]}]); results are told apart by position"
            )
        names.setdefault(name, i)
        check_evaluations(case.evaluations, (*case_path, "evaluations"))
        check_evaluations(case.conversation_evaluations, (*case_path, "conversation_evaluations"))
        issues.extend(_conversation_name_issues(loaded, i, locator))
        for t, turn in enumerate(case.effective_turns()):
            turn_path: Path_ = case_path if case.is_legacy else (*case_path, "turns", t)
            check_evaluations(turn.evaluations, (*turn_path, "evaluations"))
            for f, ref in enumerate(turn.files):
                problem = file_problem(base / ref.path)
                if problem is not None:
                    issues.append(
                        locator.issue(
                            (*turn_path, "files", f, "path"), f"{problem}: {loaded.shown(ref.path)}"
                        )
                    )
            if (
                turn.ground_truth is not None
                and parse_ground_truth_number(turn.ground_truth) is None
            ):
                for evaluation in loaded.evaluations_for(case, turn):
                    if (
                        isinstance(evaluation, StandardEvaluation)
                        and evaluation.metric == "numeric"
                    ):
                        issues.append(
                            locator.issue(
                                (*turn_path, "ground_truth"),
                                f"{turn.ground_truth!r} is not a number, but the '{evaluation.metric_name}' "
                                "evaluation compares numbers; give this turn its own evaluations "
                                "(e.g. metric: equality)",
                            )
                        )
    loaded.judge_files = judge_files
    return issues


def _check_mcp_servers(
    loaded: LoadedSuite, locator: Locator, env: Mapping[str, str]
) -> list[ConfigIssue]:
    """The agent's MCP servers, checked without starting any; their secrets noted."""
    agent = loaded.suite.agent
    specs = getattr(agent, "mcp_servers", None)
    if not specs:
        return []
    from .suite import server_configs
    from .tools.mcp_servers import mcp_secrets
    from .tools.mcp_servers.check import load_problems

    loaded.secrets |= mcp_secrets(specs)
    python_tools = {
        spec.name or getattr(fn, "__name__", "")
        for spec, fn in zip(agent.tools, loaded.tools, strict=False)
    }
    problems = load_problems(
        server_configs(specs, loaded.base_dir), env=env, python_tools=python_tools
    )
    return [locator.issue(("agent", "mcp_servers", *where), why) for where, why in problems]


def _check_judges(
    loaded: LoadedSuite,
    locator: Locator,
    env: Mapping[str, str],
    judges_called: bool = True,
    agent_called: bool = True,
    *,
    keyless: bool = False,
) -> list[ConfigIssue]:
    """Every judge a turn (or a conversation) will call, after merging its levels.

    Checks the model is named, the API key resolves (``${VAR}`` or the backend's
    environment variable), the backend's package is installed, and that
    ``use_ground_truth: true`` meets a ground truth. Checked before any agent is
    called, so a judge block that cannot work is exit 2, not a run of errored metrics.
    """
    import importlib.util

    suite = loaded.suite
    issues: list[ConfigIssue] = []
    seen: set[tuple[Path_, str]] = set()
    done: set[tuple[int, int, int]] = set()
    packages: dict[str, bool] = {}
    keys_missing: set[str] = set()

    def add(where: Path_, message: str) -> None:
        if (where, message) not in seen:
            seen.add((where, message))
            issues.append(locator.issue(where, message))

    def check(
        evaluation: JudgeEvaluation,
        levels: tuple[JudgeConfig | None, ...],
        where: Path_,
        note: str,
    ) -> None:
        marker = (*(id(level) for level in levels[1:]), id(evaluation))
        if marker in done:
            return
        done.add(marker)  # type: ignore[arg-type]
        try:
            judge = resolve(merge_levels(*levels, evaluation.judge), env, keyless=keyless)
        except JudgeConfigProblem as exc:
            if exc.field == "judge.api_key" and not judges_called:
                return  # a regrade reusing recorded verdicts calls no judge
            if exc.field == "judge.api_key":  # one missing key is said once, where first met
                if str(exc) in keys_missing:
                    return
                keys_missing.add(str(exc))
            add((*where, *exc.field.split(".")), f"{exc}{note}")
            return
        loaded.judge_endpoints.add(
            (judge.backend, judge.base_url, judge.api_key, judge.api_version)
        )
        provider = judge_provider(judge.backend, judge.api_version)
        loaded.judge_models.setdefault((judge.model, provider), where)
        if is_secret_value(judge.api_key):  # a key written into the suite is redacted too
            loaded.secrets.add(judge.api_key)
        package = PACKAGES[judge.backend]
        if package not in packages:
            packages[package] = importlib.util.find_spec(package) is not None
        if not packages[package]:
            hint = (
                "pip install 'multiturn-eval[openai]'"
                if package == "openai"
                else "pip install 'anthropic>=2'"
            )
            add(
                (*where, "judge", "backend"),
                f"the {judge.backend} judge needs the package '{package}', which is not "
                f"installed; install it with: {hint}",
            )

    for i, case in enumerate(suite.test_cases):
        case_path: Path_ = ("test_cases", i)
        for j, evaluation in enumerate(case.conversation_evaluations or []):
            if not isinstance(evaluation, JudgeEvaluation):
                continue
            where: Path_ = (*case_path, "conversation_evaluations", j)
            if evaluation.use_ground_truth:
                add(
                    (*where, "use_ground_truth"),
                    "a conversation judge sees the transcript; use_ground_truth applies to "
                    "a turn's judges",
                )
            check(evaluation, (suite.judge, case.judge, None), where, "")
        for t, turn in enumerate(case.effective_turns()):
            turn_path: Path_ = case_path if case.is_legacy else (*case_path, "turns", t)
            if turn.evaluations is not None:
                level, level_path = turn.evaluations, (*turn_path, "evaluations")
            elif case.evaluations is not None:
                level, level_path = case.evaluations, (*case_path, "evaluations")
            else:
                level, level_path = suite.evaluations, ("evaluations",)
            for j, evaluation in enumerate(level):
                if not isinstance(evaluation, JudgeEvaluation):
                    continue
                if evaluation.use_ground_truth is True and turn.ground_truth is None:
                    add(
                        (*turn_path, "ground_truth"),
                        f"the judge '{evaluation.metric_name}' has use_ground_truth: true, but "
                        "this turn has no ground_truth",
                    )
                note = f" (for {format_path(turn_path)})" if level_path[0] == "evaluations" else ""
                check(evaluation, (suite.judge, case.judge, turn.judge), (*level_path, j), note)
        if case.user is None:
            continue
        # the simulated turns: the case's evaluations, else the suite's (judges that need a
        # ground truth skip them, as every ground-truth check does)
        if case.evaluations is not None:
            level, level_path = case.evaluations, (*case_path, "evaluations")
        else:
            level, level_path = suite.evaluations, ("evaluations",)
        note = f" (for the simulated turns of {format_path(case_path)})"
        for j, evaluation in enumerate(level):
            if isinstance(evaluation, JudgeEvaluation) and evaluation.use_ground_truth is not True:
                check(evaluation, (suite.judge, case.judge, None), (*level_path, j), note)
        plan = loaded.simulations.get(i)
        if plan is not None and plan.fidelity and judges_called:
            _fidelity_judge(loaded, i, env, add, reported=agent_called, keyless=keyless)
    return issues


def _fidelity_judge(
    loaded: LoadedSuite,
    index: int,
    env: Mapping[str, str],
    add: Callable[[Path_, str], None],
    *,
    reported: bool,
    keyless: bool = False,
) -> None:
    """The fidelity judge of a simulated case (``fidelity: true``): the suite's (and the
    case's) ``judge:``; its client built before the run, its price checked by ``--max-cost``.

    ``reported``: :func:`~.simulation.check_case` already said why it does not resolve (a
    run); a regrade with ``--rejudge`` calls it without having checked it there.
    """
    case = loaded.suite.test_cases[index]
    assert case.user is not None
    try:
        judge = resolve(merge_levels(loaded.suite.judge, case.judge), env, keyless=keyless)
    except JudgeConfigProblem as exc:
        if not reported:
            where: Path_ = (
                ("test_cases", index, "user", "fidelity")
                if case.user.fidelity is not None
                else ("user_simulator", "fidelity")
            )
            add(
                where, f"fidelity: true judges each simulated message with the suite's judge: {exc}"
            )
        return
    loaded.judge_endpoints.add((judge.backend, judge.base_url, judge.api_key, judge.api_version))
    provider = judge_provider(judge.backend, judge.api_version)
    loaded.judge_models.setdefault(
        (judge.model, provider), ("test_cases", index, "user", "fidelity")
    )
    if is_secret_value(judge.api_key):
        loaded.secrets.add(judge.api_key)


def _read_schema(loaded: LoadedSuite, name: str) -> str | None:
    """Read and check a ``schema_file`` into ``loaded.json_schemas``; the problem, if any."""
    from .suite import json_schema_problem

    target, shown = loaded.base_dir / name, loaded.shown(name)
    try:
        text = read_text(target)
    except ValueError as exc:
        return f"{exc}: {shown}"
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}: {shown}"
    problem = json_schema_problem(schema)
    if problem is not None:
        where, why = problem
        inside = f" at {format_path(where)}" if where else ""
        return f"{why}{inside}: {shown}"
    loaded.json_schemas[name] = schema
    return None


def _conversation_name_issues(
    loaded: LoadedSuite, index: int, locator: Locator
) -> list[ConfigIssue]:
    """A conversation-level metric may not share its name with a per-turn metric of its case.

    Both are test-case level ``metric_results`` and the run summary counts metrics by
    name, so a shared name would merge two different checks.
    """
    case = loaded.suite.test_cases[index]
    if not case.conversation_evaluations:
        return []
    per_turn = {
        e.metric_name for turn in case.effective_turns() for e in loaded.evaluations_for(case, turn)
    }
    if case.conversation_tools is not None:
        per_turn.add("conversation_tools")  # the metric name of conversation_tools
    if case.user is not None:
        per_turn.add(USER_GOAL)  # the simulated user's metric
    return [
        locator.issue(
            ("test_cases", index, "conversation_evaluations", j, "name"),
            f"metric name '{e.metric_name}' is also a per-turn metric (or conversation_tools"
            f"{', user_goal' if case.user is not None else ''}) of this test case; "
            "give the conversation evaluation a distinct 'name:'",
        )
        for j, e in enumerate(case.conversation_evaluations)
        if e.metric_name in per_turn
    ]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic data.

    Loading a 1,000-case suite allocates hundreds of thousands of objects and
    no cycles; the collector's passes over them took half the load time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_suites(
    paths: Sequence[Path],
    env: Mapping[str, str],
    *,
    judges_called: bool = True,
    agent_called: bool = True,
    fixtures: str | None = None,
) -> list[LoadedSuite]:
    """Load every file; raise one ConfigError listing the problems of all of them."""
    loaded: list[LoadedSuite] = []
    errors: list[ConfigError] = []
    with gc_paused():
        for path in paths:
            try:
                loaded.append(
                    load_suite(
                        path,
                        env,
                        judges_called=judges_called,
                        agent_called=agent_called,
                        fixtures=fixtures,
                    )
                )
            except ConfigError as exc:
                errors.append(exc)
    if errors:
        raise ConfigError.merge(errors)
    return loaded
