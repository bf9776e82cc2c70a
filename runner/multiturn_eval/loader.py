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

import functools
import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .case_source import CasesFile, CaseSource, TurnFileUse
from .errors import CaseReadError, ConfigError, ConfigIssue, JudgeConfigProblem, YamlSyntaxError
from .gc_pause import gc_paused
from .grading.evaluators import parse_ground_truth_number
from .grading.judges.prompt import template_problem
from .grading.judges.service import PACKAGES, merge_levels, resolve
from .imports import add_import_paths, one_argument_problem, resolve_callable
from .jsonl_source import RawLine, parse_line, read_lines
from .loaded import LoadedSuite
from .locate import CaseLineLocator, Locator, validation_issues
from .pricing import judge_provider
from .reading import FILE_KINDS, file_problem, open_binary, read_text
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
    TestCase,
)
from .tools import tool_definition_issues
from .yaml_source import Path_, YamlDocument, format_path, parse_yaml

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
    # copy on write: a list or mapping with no ${VAR} below it is returned as it is, so a
    # large suite is not held twice while it is validated (issue 23)
    if isinstance(value, dict | list):
        entries = value.items() if isinstance(value, dict) else enumerate(value)
        changed: Any = None
        for key, v in entries:
            new = _substitute(
                v, (*path, key), env, locator, issues, secrets, unused, unset_keys, keyless
            )
            if new is not v:
                if changed is None:
                    changed = dict(value) if isinstance(value, dict) else list(value)
                changed[key] = new
        return value if changed is None else changed
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

    The test cases of a ``test_cases_file`` are read line by line and checked
    as they are read (:func:`_read_cases_file`); the loaded suite keeps an
    index of them (:mod:`.case_source`), not their models.
    """
    shown = display_path(path)
    text = _read(path, shown)
    try:
        doc = parse_yaml(text)
    except YamlSyntaxError as exc:
        raise ConfigError(
            ConfigIssue(f"YAML syntax error: {exc}", file=shown, line=exc.line)
        ) from None
    del text
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
    written = data.get("test_cases") if isinstance(data, dict) else None
    if isinstance(written, list) and len(written) > ONE_BY_ONE:
        suite = _validate_one_by_one(data, written, doc, locator)
    else:
        try:
            suite = Suite.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_issues(exc, data, locator)) from None
    del data, written
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
    checks = _Checks(loaded, env, judges_called, agent_called, keyless=keyless)
    checks.suite(locator)
    if agent_called:  # regrade starts no server
        checks.issues.extend(_check_mcp_servers(loaded, locator, env))
    cases = loaded.cases = CaseSource(suite.test_cases)
    for i, case in enumerate(suite.test_cases):
        judge_calls = checks.case(case, i, locator)
        cases.add(
            case.name,
            case.tags,
            len(case.effective_turns()),
            doc.line_of(("test_cases", i)),
            judge_calls,
            max_turns=case.user.max_turns if case.user is not None else 0,
        )
    if suite.test_cases_file is not None:
        _read_cases_file(checks, suite.test_cases_file, locator, unused)
    _warn_duplicates(loaded)
    found = checks.problems()
    if found:
        raise ConfigError(found)
    return loaded


def _warn_duplicates(loaded: LoadedSuite) -> None:
    """One warning per test-case name used again (results are told apart by position)."""
    first: dict[str, int] = {}
    more = 0
    for i, name in enumerate(loaded.cases.names()):
        earlier = first.setdefault(name, i)
        if earlier == i:
            continue
        if more < MAX_DUPLICATE_WARNINGS:
            file = loaded.cases.file_of(i) or loaded.display_path
            loaded.warnings.append(
                f"{file}:{loaded.case_line(i)} test_cases[{i}]: duplicate test-case name "
                f"'{name}' (also test_cases[{earlier}]); results are told apart by position"
            )
        more += 1
    if more > MAX_DUPLICATE_WARNINGS:
        loaded.warnings.append(
            f"{loaded.display_path}: {more - MAX_DUPLICATE_WARNINGS:,} more test cases reuse a "
            f"name (the first {MAX_DUPLICATE_WARNINGS} are listed above)"
        )


MAX_DUPLICATE_WARNINGS = 20
"""Duplicate test-case names warned about one by one (then counted)."""
MAX_FILE_ISSUES = 50
"""Problems of a ``test_cases_file`` listed one by one; the rest are counted."""


class _Issues:
    """The problems found so far, those of the ``test_cases_file`` at most :data:`MAX_FILE_ISSUES`."""

    def __init__(self) -> None:
        self.items: list[ConfigIssue] = []
        self.capped: str | None = None
        """The file whose problems are bounded (the test_cases_file, once it is read)."""
        self.in_file = 0
        self.more = 0

    def append(self, issue: ConfigIssue) -> None:
        if self.capped is not None and issue.file == self.capped:
            self.in_file += 1
            if self.in_file > MAX_FILE_ISSUES:
                self.more += 1
                return
        self.items.append(issue)

    def extend(self, issues: Iterable[ConfigIssue]) -> None:
        for issue in issues:
            self.append(issue)

    def __bool__(self) -> bool:
        return bool(self.items)

    def done(self) -> list[ConfigIssue]:
        if not self.more:
            return self.items
        return [
            *self.items,
            ConfigIssue(
                f"{self.more:,} more problems in this file (the first {MAX_FILE_ISSUES} are "
                "listed above)",
                file=self.capped,
            ),
        ]


class _Checks:
    """Every check of a suite that needs the file system, an import or the environment.

    Made once per suite; :meth:`suite` checks the suite-level fields, :meth:`case`
    one test case at a time (a case of the ``test_cases_file`` is checked as its
    line is read, then dropped), keeping across cases only what later cases need:
    the graders imported, the judge files read, the judges already checked.

    The judges are checked as the cases go, but their problems are reported only
    when nothing else is wrong (a judge block is checked once the rest resolves).
    """

    def __init__(
        self,
        loaded: LoadedSuite,
        env: Mapping[str, str],
        judges_called: bool,
        agent_called: bool = True,
        *,
        keyless: bool = False,
    ) -> None:
        self.loaded = loaded
        self.env = env
        self.judges_called = judges_called
        self.agent_called = agent_called
        """False: a regrade (no simulated user is called: the recorded one is replayed)."""
        self.keyless = keyless
        """Fixtures replay or update: the fixtures answer the simulator's and the judges'
        calls, so a missing API key is not a problem."""
        self._simulation_said: set[tuple[Path_, str]] = set()
        self.issues = _Issues()
        self.judge_issues = _Issues()
        self._judge_seen: set[tuple[Path_, str]] = set()
        self._judges_done: set[tuple[Any, ...]] = set()
        self._packages: dict[str, bool] = {}
        self._keys_missing: set[str] = set()

    def problems(self) -> list[ConfigIssue]:
        return self.issues.done() or self.judge_issues.done()

    # ---------------------------------------------------------------------- suite

    def suite(self, locator: Locator) -> None:
        loaded, issues = self.loaded, self.issues
        agent, base = loaded.suite.agent, loaded.base_dir
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
        self._evaluations(loaded.suite.evaluations, ("evaluations",), locator)

    def _judge_file(self, name: str, path: Path_, template: bool, locator: Locator) -> None:
        loaded = self.loaded
        if name in loaded.judge_files:
            return
        target, shown = loaded.base_dir / name, loaded.shown(name)
        try:
            text = read_text(target)
        except ValueError as exc:
            self.issues.append(locator.issue(path, f"{exc}: {shown}"))
            return
        if template:
            problem = template_problem(text)
            if problem is not None:
                self.issues.append(locator.issue(path, f"{problem}: {shown}"))
                return
        elif not text.strip():
            self.issues.append(locator.issue(path, f"the rubric file is empty: {shown}"))
            return
        loaded.judge_files[name] = text

    def _evaluations(
        self, evaluations: Iterable[Evaluation] | None, path: Path_, locator: Locator
    ) -> None:
        loaded, issues = self.loaded, self.issues
        for j, evaluation in enumerate(evaluations or []):
            if isinstance(evaluation, JudgeEvaluation):
                if evaluation.rubric_file is not None:
                    self._judge_file(
                        evaluation.rubric_file, (*path, j, "rubric_file"), False, locator
                    )
                if evaluation.prompt_file is not None:
                    self._judge_file(
                        evaluation.prompt_file, (*path, j, "prompt_file"), True, locator
                    )
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

    # ---------------------------------------------------------------------- cases

    def case(self, case: TestCase, index: int, locator: Locator) -> int:
        """Check test case ``index`` (located by ``locator``); the LLM-judge calls it makes."""
        loaded, issues = self.loaded, self.issues
        base = loaded.base_dir
        case_path: Path_ = ("test_cases", index)
        self._evaluations(case.evaluations, (*case_path, "evaluations"), locator)
        self._evaluations(
            case.conversation_evaluations, (*case_path, "conversation_evaluations"), locator
        )
        issues.extend(_conversation_name_issues(loaded, case, index, locator))
        for t, turn in enumerate(case.effective_turns()):
            turn_path: Path_ = case_path if case.is_legacy else (*case_path, "turns", t)
            self._evaluations(turn.evaluations, (*turn_path, "evaluations"), locator)
            for f, ref in enumerate(turn.files):
                file_path = (*turn_path, "files", f)
                problem = file_problem(base / ref.path)
                if problem is not None:
                    issues.append(
                        locator.issue((*file_path, "path"), f"{problem}: {loaded.shown(ref.path)}")
                    )
                where = locator.issue(file_path, "")
                loaded.cases.turn_files.append(
                    TurnFileUse(
                        index,
                        t,
                        f,
                        ref.path,
                        ref.media_type,
                        case.is_legacy,
                        (where.file or loaded.display_path, where.line, where.test_case),
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
        if case.user is not None:
            self._simulation(case, index, locator)
        return self._case_judges(case, index, locator)

    def _simulation(self, case: TestCase, index: int, locator: Locator) -> None:
        """A simulated test case (``user:``): its simulator merged and resolved, its factory
        imported or its ``prompt_file`` read, its fidelity judge (:func:`~.simulation.check_case`);
        its plan kept in ``loaded.simulations[index]``.

        A regrade (``agent_called=False``) replays the recorded conversation: no API key is
        needed, and the fidelity judge is checked with the other judges only under ``--rejudge``.
        """
        from .simulation import check_case

        assert case.user is not None
        loaded = self.loaded
        suite = loaded.suite
        plan, problems = check_case(
            case.user,
            suite.user_simulator,
            case_path=("test_cases", index),
            has_turns=case.turns is not None,
            has_input=case.input is not None,
            base_dir=loaded.base_dir,
            env=self.env,
            suite_judge=suite.judge,
            case_judge=case.judge,
            simulator_called=self.agent_called,
            keyless=self.keyless,
        )
        said = self._simulation_said
        for problem in problems:  # a problem of user_simulator: is said once, not per case
            if (problem.path, problem.message) not in said:
                said.add((problem.path, problem.message))
                self.issues.append(locator.issue(problem.path, problem.message))
        if plan is None:
            return
        loaded.simulations[index] = plan
        key = plan.simulator.api_key
        if key is not None and is_secret_value(key):  # a key written into the suite too
            loaded.secrets.add(key)

    def _judge_add(self, where: Path_, message: str, locator: Locator) -> None:
        if (where, message) not in self._judge_seen:
            self._judge_seen.add((where, message))
            self.judge_issues.append(locator.issue(where, message))

    def _judge(
        self,
        evaluation: JudgeEvaluation,
        levels: tuple[JudgeConfig | None, ...],
        where: Path_,
        note: str,
        locator: Locator,
        marker: tuple[Any, ...],
    ) -> None:
        """Check one judge (the model is named, the API key resolves, the package is there)."""
        if marker in self._judges_done:
            return
        self._judges_done.add(marker)
        loaded = self.loaded
        try:
            judge = resolve(merge_levels(*levels, evaluation.judge), self.env, keyless=self.keyless)
        except JudgeConfigProblem as exc:
            if exc.field == "judge.api_key" and not self.judges_called:
                return  # a regrade reusing recorded verdicts calls no judge
            if exc.field == "judge.api_key":  # one missing key is said once, where first met
                if str(exc) in self._keys_missing:
                    return
                self._keys_missing.add(str(exc))
            self._judge_add((*where, *exc.field.split(".")), f"{exc}{note}", locator)
            return
        loaded.judge_endpoints.add(
            (judge.backend, judge.base_url, judge.api_key, judge.api_version)
        )
        provider = judge_provider(judge.backend, judge.api_version)
        if (judge.model, provider) not in loaded.judge_models:
            located = locator.issue(where, "")  # the file and line: the suite's, or the case's
            loaded.judge_models[(judge.model, provider)] = (
                located.file or loaded.display_path,
                located.line,
                format_path(where),
            )
        if is_secret_value(judge.api_key):  # a key written into the suite is redacted too
            loaded.secrets.add(judge.api_key)
        package = PACKAGES[judge.backend]
        if package not in self._packages:
            self._packages[package] = importlib.util.find_spec(package) is not None
        if not self._packages[package]:
            hint = (
                "pip install 'multiturn-eval[openai]'"
                if package == "openai"
                else "pip install 'anthropic>=2'"
            )
            self._judge_add(
                (*where, "judge", "backend"),
                f"the {judge.backend} judge needs the package '{package}', which is not "
                f"installed; install it with: {hint}",
                locator,
            )

    def _case_judges(self, case: TestCase, index: int, locator: Locator) -> int:
        """Every judge the case's turns (and its conversation) call, after merging their levels.

        Checks the model is named, the API key resolves (``${VAR}`` or the backend's
        environment variable), the backend's package is installed, and that
        ``use_ground_truth: true`` meets a ground truth. Checked before any agent is
        called, so a judge block that cannot work is exit 2, not a run of errored
        metrics. Returns how many judge calls one run of the case makes at most.
        """
        suite = self.loaded.suite
        case_path: Path_ = ("test_cases", index)
        calls = 0
        for j, evaluation in enumerate(case.conversation_evaluations or []):
            if not isinstance(evaluation, JudgeEvaluation):
                continue
            calls += 1
            where: Path_ = (*case_path, "conversation_evaluations", j)
            if evaluation.use_ground_truth:
                self._judge_add(
                    (*where, "use_ground_truth"),
                    "a conversation judge sees the transcript; use_ground_truth applies to "
                    "a turn's judges",
                    locator,
                )
            once = ("case", index, id(case.judge), id(evaluation))
            self._judge(evaluation, (suite.judge, case.judge, None), where, "", locator, once)
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
                calls += 1
                if evaluation.use_ground_truth is True and turn.ground_truth is None:
                    self._judge_add(
                        (*turn_path, "ground_truth"),
                        f"the judge '{evaluation.metric_name}' has use_ground_truth: true, but "
                        "this turn has no ground_truth",
                        locator,
                    )
                suite_level = level_path[0] == "evaluations"
                note = f" (for {locator.named(turn_path)})" if suite_level else ""
                # the same suite-level judge met again with no case or turn judge: checked once
                # for the whole suite; anything else once per case (the case's models are alive
                # while it is checked, so their ids tell them apart)
                marker: tuple[Any, ...] = (
                    ("suite", j)
                    if suite_level and case.judge is None and turn.judge is None
                    else ("case", index, id(case.judge), id(turn.judge), id(evaluation))
                )
                self._judge(
                    evaluation,
                    (suite.judge, case.judge, turn.judge),
                    (*level_path, j),
                    note,
                    locator,
                    marker,
                )
        if case.user is not None:
            calls += self._simulated_judges(case, index, locator)
        return calls

    def _simulated_judges(self, case: TestCase, index: int, locator: Locator) -> int:
        """The judges of a simulated case's simulated turns (the case's evaluations, else the
        suite's; judges that need a ground truth skip them, as every ground-truth check does)
        and its fidelity judge; the judge calls of those turns (``max_turns`` of them, the
        opening included; the fidelity judge's are counted apart, from its plan)."""
        assert case.user is not None
        suite = self.loaded.suite
        case_path: Path_ = ("test_cases", index)
        if case.evaluations is not None:
            level, level_path = case.evaluations, (*case_path, "evaluations")
        else:
            level, level_path = suite.evaluations, ("evaluations",)
        note = f" (for the simulated turns of {locator.named(case_path)})"
        judged = 0
        for j, evaluation in enumerate(level):
            if isinstance(evaluation, JudgeEvaluation) and evaluation.use_ground_truth is not True:
                judged += 1
                marker: tuple[Any, ...] = (  # as a scripted turn's (see _case_judges)
                    ("suite", j)
                    if level_path[0] == "evaluations" and case.judge is None
                    else ("case", index, id(case.judge), id(None), id(evaluation))
                )
                self._judge(
                    evaluation,
                    (suite.judge, case.judge, None),
                    (*level_path, j),
                    note,
                    locator,
                    marker,
                )
        plan = self.loaded.simulations.get(index)
        if plan is not None and plan.fidelity and self.judges_called:
            _fidelity_judge(
                self.loaded,
                case,
                index,
                self.env,
                lambda where, message: self._judge_add(where, message, locator),
                locator,
                reported=self.agent_called,
                keyless=self.keyless,
            )
        return judged * case.user.max_turns


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


ONE_BY_ONE = 1_000
"""A suite file writing more test cases than this has them validated one at a time, each
case's parsed YAML let go once its model is made: the parse and the models of a large
suite are not held whole at the same time (50,000 six-turn cases: a fifth less peak
memory). Smaller suites are validated in one go (the same issues, in the same order)."""


def _validate_one_by_one(
    data: dict[str, Any], written: list[Any], doc: YamlDocument, locator: Locator
) -> Suite:
    """:class:`Suite` of ``data``: everything but the test cases after the first validated
    as one model, then each further case on its own; every issue of all of them raised
    together, located as the whole suite's validation locates them."""
    issues: list[ConfigIssue] = []
    head = {**data, "test_cases": written[:1]}
    suite: Suite | None = None
    try:
        suite = Suite.model_validate(head)
    except ValidationError as exc:
        issues.extend(validation_issues(exc, head, locator))
    parsed = doc.data.get("test_cases") if isinstance(doc.data, dict) else None
    cases: list[TestCase] = []
    for i in range(1, len(written)):
        raw = written[i]
        try:
            cases.append(TestCase.model_validate(raw))
        except ValidationError as exc:
            issues.extend(validation_issues(exc, raw, locator, ("test_cases", i)))
        # what later issues still read of it: its name (Locator.written_name)
        name = raw.get("name") if isinstance(raw, dict) else None
        stub = {"name": name} if isinstance(name, str) else {}
        written[i] = stub
        if isinstance(parsed, list) and parsed is not written and i < len(parsed):
            parsed[i] = stub
    if issues or suite is None:
        raise ConfigError(issues)
    suite.test_cases.extend(cases)
    return suite


def _read_cases_file(
    checks: _Checks, name: str, locator: Locator, unused: Callable[[Path_], bool] | None
) -> None:
    """Read, validate and check ``test_cases_file`` line by line; index each case.

    One line at a time is parsed (:mod:`.jsonl_source`), has its ``${VAR}``
    replaced, is validated as a test case and checked (:meth:`_Checks.case`),
    and leaves only its index entry behind. Every problem of every line is
    reported (the first :data:`MAX_FILE_ISSUES`, then a count), each with the
    file, the line, the test case (its position in the suite) and the field.
    """
    loaded, env = checks.loaded, checks.env
    target = loaded.base_dir / name
    try:
        handle = open_binary(target)
    except ValueError as exc:
        checks.issues.append(locator.issue(("test_cases_file",), f"{exc}: {loaded.shown(name)}"))
        return
    shown = display_path(target)
    cases = loaded.cases
    cases.file = CasesFile(
        path=target.absolute(),
        shown=shown,
        reader=functools.partial(
            _file_case, shown=shown, env=env, unused=unused, keyless=checks.keyless
        ),
    )
    checks.issues.capped = checks.judge_issues.capped = shown
    first = len(cases)
    with handle:
        try:
            for raw in read_lines(handle):
                _read_case_line(checks, raw, locator, unused)
        except OSError as exc:
            checks.issues.append(
                locator.issue(("test_cases_file",), f"cannot read: {exc.strerror or exc}: {shown}")
            )
    if len(cases) == first:
        if first == 0:
            checks.issues.append(
                locator.issue(
                    ("test_cases_file",),
                    f"holds no test case (every line is blank): {loaded.shown(name)}; a suite "
                    "needs at least one test case",
                )
            )
        else:
            loaded.warnings.append(
                f"{loaded.display_path}: test_cases_file {loaded.shown(name)} holds no test case"
            )


def _read_case_line(
    checks: _Checks, raw: RawLine, outer: Locator, unused: Callable[[Path_], bool] | None
) -> None:
    loaded = checks.loaded
    cases = loaded.cases
    assert cases.file is not None
    index = len(cases)
    locator = CaseLineLocator(cases.file.shown, raw.number, index, outer)
    here: Path_ = ("test_cases", index)

    def broken(issues: Iterable[ConfigIssue]) -> None:
        checks.issues.extend(issues)
        cases.add(None, (), 0, raw.number)  # keeps the positions of the cases after it

    if raw.problem is not None:
        broken([locator.issue(here, raw.problem)])
        return
    case = _case_of_line(raw.data, locator, checks.env, loaded.secrets, unused, checks.keyless)
    if not isinstance(case, TestCase):
        broken(case)
        return
    judge_calls = checks.case(case, index, locator)
    cases.add(
        case.name,
        case.tags,
        len(case.effective_turns()),
        raw.number,
        judge_calls,
        raw.data,
        raw.offset,
        max_turns=case.user.max_turns if case.user is not None else 0,
    )


_validate_case = TestCase.model_validate
"""How a line's data becomes a test case (one name, so a test can count the models made)."""


def _file_case(
    index: int,
    line: int,
    data: bytes,
    *,
    shown: str,
    env: Mapping[str, str],
    unused: Callable[[Path_], bool] | None,
    keyless: bool = False,
) -> TestCase:
    """A case of the test_cases_file read back when it runs: parsed, substituted, validated
    as at load (it passed then, and its bytes are unchanged, so it passes again)."""
    case = _case_of_line(data, CaseLineLocator(shown, line, index), env, set(), unused, keyless)
    if not isinstance(case, TestCase):
        raise CaseReadError(f"the test case no longer loads: {case[0]}")
    return case


def _case_of_line(
    data: bytes,
    locator: CaseLineLocator,
    env: Mapping[str, str],
    secrets: set[str],
    unused: Callable[[Path_], bool] | None,
    keyless: bool = False,
) -> TestCase | list[ConfigIssue]:
    """One line of the test_cases_file parsed, its ``${VAR}`` replaced and validated: the
    test case, or its problems (located on the line). ``keyless`` (fixtures replay and
    update): an API key whose variable is unset is dropped, as in the suite file."""
    here: Path_ = ("test_cases", locator.index)
    try:
        value: Any = parse_line(data)
    except ValueError as exc:
        return [locator.issue(here, str(exc))]
    locator.data = value
    if b"$" in data or b"\\u0024" in data:
        issues: list[ConfigIssue] = []
        unset_keys: list[Path_] = []
        value = _substitute(value, here, env, locator, issues, secrets, unused, unset_keys, keyless)
        if issues:
            return issues
        for key_path in unset_keys:
            _drop({"test_cases": {locator.index: value}}, key_path)
    try:
        return _validate_case(value)
    except ValidationError as exc:
        return validation_issues(exc, value, locator, here)


def _fidelity_judge(
    loaded: LoadedSuite,
    case: TestCase,
    index: int,
    env: Mapping[str, str],
    add: Callable[[Path_, str], None],
    locator: Locator,
    *,
    reported: bool,
    keyless: bool = False,
) -> None:
    """The fidelity judge of simulated case ``index`` (``fidelity: true``): the suite's (and
    the case's) ``judge:``; its client built before the run, its price checked by ``--max-cost``.

    ``reported``: :func:`~.simulation.check_case` already said why it does not resolve (a
    run); a regrade with ``--rejudge`` calls it without having checked it there.
    """
    assert case.user is not None
    where: Path_ = ("test_cases", index, "user", "fidelity")
    try:
        judge = resolve(merge_levels(loaded.suite.judge, case.judge), env, keyless=keyless)
    except JudgeConfigProblem as exc:
        if not reported:
            add(
                where if case.user.fidelity is not None else ("user_simulator", "fidelity"),
                f"fidelity: true judges each simulated message with the suite's judge: {exc}",
            )
        return
    loaded.judge_endpoints.add((judge.backend, judge.base_url, judge.api_key, judge.api_version))
    provider = judge_provider(judge.backend, judge.api_version)
    if (judge.model, provider) not in loaded.judge_models:
        located = locator.issue(where, "")  # the suite file's line, or the case's own line
        loaded.judge_models[(judge.model, provider)] = (
            located.file or loaded.display_path,
            located.line,
            format_path(where),
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
    loaded: LoadedSuite, case: TestCase, index: int, locator: Locator
) -> list[ConfigIssue]:
    """A conversation-level metric may not share its name with a per-turn metric of its case.

    Both are test-case level ``metric_results`` and the run summary counts metrics by
    name, so a shared name would merge two different checks.
    """
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
