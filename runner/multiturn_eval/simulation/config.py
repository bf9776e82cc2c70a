"""The simulated user's configuration rules: ``user_simulator:`` and ``user:`` together.

The models (:class:`~.models.SimulatorConfig`, :class:`~.models.UserSimulatorConfig`,
:class:`~.models.UserConfig`, in :mod:`.models`) check shape and the rules local
to one block; what needs two blocks, the
environment, an import or the file system is checked by the functions below,
which return :class:`Issue` s (a path from the suite file's root and a message)
that the loader turns into located ``ConfigIssue`` s with ``locator.issue(path,
message)``. :func:`check_case` runs them all for one test case.

**Merging** (:func:`merge_simulator`): the case's ``user.simulator`` is merged key
by key over the suite's ``user_simulator`` (the case's wins), like ``judge:``
blocks; when the case names a ``backend`` other than the suite's (whose default is
``anthropic``), the suite's block is not merged at all: nothing carries over from
one backend to another. ``require_goal`` and ``fidelity`` live in ``user:``; the
suite's ``user_simulator:`` gives their defaults (``true`` and ``false``).

**After merging** (:func:`resolve_simulator`): an ``anthropic`` / ``openai``
simulator needs a ``model`` and an API key (``api_key``, else
``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``, read from the run's environment as
for the judges), its SDK installed, ``api_version`` only on ``openai`` (Azure,
with a ``base_url``) and no ``factory``; a ``python`` simulator needs a
``factory`` and none of the model keys. Defaults: ``temperature`` 0 (see
:mod:`.llm` for models that refuse one), ``max_tokens`` 1024, the usual
``retry:`` policy.

**Per test case** (:func:`case_shape_issues`): ``opening`` beside scripted
``turns:`` is an error (the first scripted input opens the conversation), and so
is a legacy ``input:`` on a simulated case (its scripted opening is ``turns:``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loaded import CaseSimulation, ResolvedSimulator
from ..suite import JudgeConfig, RetryConfig
from .models import (
    DEFAULT_BACKEND,
    DEFAULT_MAX_TOKENS,
    FLAG_KEYS,
    MODEL_KEYS,
    NOT_PYTHON,
    OPENAI_ONLY,
    PYTHON_ONLY,
    SimulatorConfig,
    UserConfig,
    UserSimulatorConfig,
)

Path_ = tuple[str | int, ...]


def step_bound(user: UserConfig) -> int:
    """The simulator steps one run takes at most (what ``--dry-run`` counts).

    ``max_turns`` less the opening, which is sent without asking. Each step is one
    structured call of an LLM simulator (two when its reply did not fit; one more,
    once per run and model, when the model refuses a temperature), and with
    ``fidelity`` one fidelity-judge call.
    """
    return user.max_turns - (1 if user.opening is not None else 0)


# ----------------------------------------------------------------------------- issues


@dataclass(frozen=True)
class Issue:
    """A configuration problem at ``path`` (from the suite file's root): a ConfigIssue to be."""

    path: Path_
    message: str


def case_shape_issues(
    user: UserConfig, case_path: Path_, *, has_turns: bool, has_input: bool
) -> list[Issue]:
    """The rules between ``user:`` and the rest of its test case."""
    issues: list[Issue] = []
    if has_input:
        issues.append(
            Issue(
                (*case_path, "input"),
                "a simulated test case (user:) has no 'input:'; give its scripted opening as "
                "'turns:' (or user.opening for one fixed first message)",
            )
        )
    if user.opening is not None and has_turns:
        issues.append(
            Issue(
                (*case_path, "user", "opening"),
                "not allowed beside 'turns:' (the first scripted input opens the "
                "conversation); remove one of them",
            )
        )
    return issues


# ---------------------------------------------------------------------------- merging


@dataclass(frozen=True)
class MergedSimulator:
    """The simulator keys of one test case after merging, and where each was set."""

    values: Mapping[str, Any]
    origins: Mapping[str, Path_]
    """The path of each key in ``values`` (the suite's block or the case's)."""
    where: Path_
    """The innermost block there is (the case's ``user.simulator``, else the suite's
    ``user_simulator``, else the case's ``user``): where a missing key is reported."""

    @property
    def backend(self) -> str:
        return str(self.values.get("backend") or DEFAULT_BACKEND)

    def at(self, key: str) -> Path_:
        """Where ``key`` was set, else where it is missing."""
        return self.origins.get(key, (*self.where, key))


def _set_keys(block: SimulatorConfig | None) -> dict[str, Any]:
    if block is None:
        return {}
    return {
        key: getattr(block, key)
        for key in block.model_fields_set
        if key not in FLAG_KEYS and getattr(block, key) is not None
    }


def merge_simulator(
    suite_block: UserSimulatorConfig | None,
    case_block: SimulatorConfig | None,
    *,
    case_path: Path_,
    suite_path: Path_ = ("user_simulator",),
) -> MergedSimulator:
    """The case's ``user.simulator`` over the suite's ``user_simulator`` (see the module doc).

    ``case_path`` is the test case's path (``("test_cases", 3)``).
    """
    user_path: Path_ = (*case_path, "user")
    own_path: Path_ = (*user_path, "simulator")
    suite_keys, case_keys = _set_keys(suite_block), _set_keys(case_block)
    if "backend" in case_keys and case_keys["backend"] != suite_keys.get(
        "backend", DEFAULT_BACKEND
    ):
        suite_keys = {}  # another backend: nothing carries over
    values = {**suite_keys, **case_keys}
    origins = {key: (*suite_path, key) for key in suite_keys}
    origins.update({key: (*own_path, key) for key in case_keys})
    if case_block is not None:
        where = own_path
    elif suite_block is not None:
        where = suite_path
    else:
        where = user_path
    return MergedSimulator(values, origins, where)


def resolve_simulator(
    merged: MergedSimulator,
    env: Mapping[str, str],
    *,
    key_needed: bool = True,
    keyless: bool = False,
) -> tuple[ResolvedSimulator | None, list[Issue]]:
    """The simulator to run, or the issues that stop it (``key_needed=False``: a regrade,
    which never calls the simulator, needs no API key; ``keyless``: fixtures replay or
    update answer its calls, so a missing key is ``""`` and its client makes no live call)."""
    from ..grading.judges.service import ENV_KEYS, ENV_URLS, PACKAGES

    values = merged.values
    issues: list[Issue] = []

    def problem(key: str, message: str) -> None:
        issues.append(Issue(merged.at(key), message))

    backend = merged.backend
    if backend == "python":
        issues.extend(Issue(merged.at(key), NOT_PYTHON) for key in MODEL_KEYS if key in values)
        factory = values.get("factory")
        if factory is None:
            problem(
                "factory",
                'backend: python needs factory: "module.path:callable" (it returns an '
                "object with next_message(conversation))",
            )
        if issues:
            return None, issues
        return ResolvedSimulator(backend="python", model=None, factory=factory), []
    if "factory" in values:
        problem("factory", PYTHON_ONLY)
    model = values.get("model")
    if model is None:
        problem(
            "model",
            "no simulated-user model: name one in user_simulator: {model: ...} or in this "
            "test case's user.simulator",
        )
    api_version = values.get("api_version")
    if api_version is not None and backend != "openai":
        problem("api_version", OPENAI_ONLY)
    base_url = values.get("base_url") or env.get(ENV_URLS[backend]) or None
    if api_version is not None and base_url is None:
        problem(
            "base_url",
            "an Azure OpenAI simulator (api_version) needs base_url: the Azure endpoint",
        )
    api_key = values.get("api_key") or env.get(ENV_KEYS[backend]) or None
    if api_key is None and keyless:
        api_key = ""
    if api_key is None and key_needed:
        problem(
            "api_key",
            f"no API key for the {backend} simulated user: set {ENV_KEYS[backend]} "
            "(or user_simulator.api_key: ${SOME_VAR})",
        )
    package = PACKAGES[backend]
    if importlib.util.find_spec(package) is None:
        hint = (
            "pip install 'multiturn-eval[openai]'"
            if package == "openai"
            else "pip install 'anthropic>=2'"
        )
        problem(
            "backend",
            f"the {backend} simulated user needs the package '{package}', which is not "
            f"installed; install it with: {hint}",
        )
    if issues:
        return None, issues
    return (
        ResolvedSimulator(
            backend=backend,  # type: ignore[arg-type]
            model=model,
            base_url=base_url,
            api_key=api_key,
            api_version=api_version,
            temperature=values.get("temperature"),
            max_tokens=values.get("max_tokens", DEFAULT_MAX_TOKENS),
            retry=values.get("retry") or RetryConfig(),
            prompt_file=values.get("prompt_file"),
        ),
        [],
    )


def effective_flags(user: UserConfig, defaults: UserSimulatorConfig | None) -> tuple[bool, bool]:
    """(require_goal, fidelity): the case's ``user:``, else the suite's default, else (true, false)."""

    def pick(key: str, default: bool) -> bool:
        own = getattr(user, key)
        if own is not None:
            return bool(own)
        suite = getattr(defaults, key, None) if defaults is not None else None
        return default if suite is None else bool(suite)

    return pick("require_goal", True), pick("fidelity", False)


# ------------------------------------------------------------ imports, files, judges


class _Probe:
    """What a factory is called with when its signature is checked (never called)."""


def factory_problem(fn: Callable[..., Any]) -> str | None:
    """Why ``fn`` cannot be called as ``factory(SimulatorContext)``, or None."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: it gets its chance
        return None
    try:
        signature.bind(_Probe())
    except TypeError as exc:
        return (
            f"the simulator factory must take one argument (a SimulatorContext); its signature "
            f"is {signature} ({exc})"
        )
    return None


def import_factory(ref: str, path: Path_) -> tuple[Callable[..., Any] | None, Issue | None]:
    """``factory: module:callable`` imported and its signature checked."""
    from ..imports import resolve_callable

    try:
        fn = resolve_callable(ref)
    except ValueError as exc:
        return None, Issue(path, str(exc))
    problem = factory_problem(fn)
    if problem is not None:
        return None, Issue(path, problem)
    return fn, None


def read_prompt_file(name: str, base_dir: Path, path: Path_) -> tuple[str | None, Issue | None]:
    """A ``prompt_file`` read (relative to the suite) and its placeholders checked."""
    from ..reading import read_text
    from .prompt import template_problem

    target = base_dir / name
    try:
        text = read_text(target)
    except ValueError as exc:
        return None, Issue(path, f"{exc}: {target}")
    problem = template_problem(text)
    if problem is not None:
        return None, Issue(path, f"{problem}: {target}")
    return text, None


def fidelity_judge_issue(
    suite_judge: JudgeConfig | None,
    case_judge: JudgeConfig | None,
    env: Mapping[str, str],
    path: Path_,
    *,
    keyless: bool = False,
) -> Issue | None:
    """``fidelity: true`` needs the suite's (or the case's) ``judge:`` to resolve."""
    from ..errors import JudgeConfigProblem
    from ..grading.judges.service import merge_levels, resolve

    try:
        resolve(merge_levels(suite_judge, case_judge), env, keyless=keyless)
    except JudgeConfigProblem as exc:
        return Issue(
            path, f"fidelity: true judges each simulated message with the suite's judge: {exc}"
        )
    return None


# --------------------------------------------------------------------------- one case


DIGEST_USER_KEYS = ("goal", "persona", "known", "unknown", "opening", "max_turns")
"""The keys of ``user:`` that decide the conversation (``require_goal`` and ``fidelity`` are
checks on it, which a regrade applies again)."""
DIGEST_SIMULATOR_KEYS = ("backend", "model", "factory", "temperature", "prompt_file")
"""The simulator's keys that decide the conversation (not its endpoint, key or retries)."""


def simulation_digest(user: UserConfig, simulator: ResolvedSimulator) -> str:
    """What decides a simulated conversation, hashed (``Simulation.digest``).

    ``regrade`` replays a recorded conversation only while this is unchanged: a case
    whose goal, persona, facts, opening, ``max_turns`` or simulator (backend, model or
    factory, temperature, prompt file) changed since the report is "not regradable:
    simulation changed".
    """
    data = user.model_dump(mode="json", include=set(DIGEST_USER_KEYS))
    data["simulator"] = {key: getattr(simulator, key) for key in DIGEST_SIMULATOR_KEYS}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def check_case(
    user: UserConfig,
    defaults: UserSimulatorConfig | None,
    *,
    case_path: Path_,
    has_turns: bool,
    has_input: bool,
    base_dir: Path,
    env: Mapping[str, str],
    suite_judge: JudgeConfig | None = None,
    case_judge: JudgeConfig | None = None,
    simulator_called: bool = True,
    keyless: bool = False,
) -> tuple[CaseSimulation | None, list[Issue]]:
    """Every load-time rule of one simulated test case (``case_path``: ``("test_cases", i)``).

    ``simulator_called=False`` (regrade: the recorded conversation is replayed) skips
    what only a call needs: the API key, the fidelity judge. ``keyless`` (fixtures replay
    and update): a missing API key of the simulator or the fidelity judge is no issue.
    """
    issues = case_shape_issues(user, case_path, has_turns=has_turns, has_input=has_input)
    merged = merge_simulator(defaults, user.simulator, case_path=case_path)
    resolved, problems = resolve_simulator(
        merged, env, key_needed=simulator_called, keyless=keyless
    )
    issues.extend(problems)
    require_goal, fidelity = effective_flags(user, defaults)
    factory: Callable[..., Any] | None = None
    template: str | None = None
    if resolved is not None and resolved.factory is not None:
        factory, issue = import_factory(resolved.factory, merged.at("factory"))
        if issue is not None:
            issues.append(issue)
    if resolved is not None and resolved.prompt_file is not None:
        template, issue = read_prompt_file(resolved.prompt_file, base_dir, merged.at("prompt_file"))
        if issue is not None:
            issues.append(issue)
    if fidelity and simulator_called:
        where = (
            (*case_path, "user", "fidelity")
            if user.fidelity is not None
            else ("user_simulator", "fidelity")
        )
        issue = fidelity_judge_issue(suite_judge, case_judge, env, where, keyless=keyless)
        if issue is not None:
            issues.append(issue)
    if issues or resolved is None:
        return None, issues
    return (
        CaseSimulation(
            user=user,
            simulator=resolved,
            require_goal=require_goal,
            fidelity=fidelity,
            factory=factory,
            template=template,
            digest=simulation_digest(user, resolved),
        ),
        [],
    )
