"""``multiturn-eval fixtures check SUITE...``: the suites' fixtures checked, no model called.

Loads the suites as a replay run would (no API key needed, an unset key
variable allowed), takes each suite's fixture folder (``--fixtures-dir``, else
the suite's ``execution.fixtures.dir``, else ``MULTITURN_EVAL_FIXTURES_DIR``,
else ``fixtures/`` next to the suite file) and its runs (``--repeat``, else
the suite's ``execution.repeat``), and prints every finding of
:func:`multiturn_eval.fixtures.check_fixtures`: fixtures of test cases that no
longer exist, test cases without fixtures, fixtures recorded for another
name, recordings older than ``--max-age``, models that differ from the
suite's (the agent's model for the model backends; each case's judge models),
damaged files. Exit 0 when clean, 1 on any finding (a CI step), 2 on a usage
or configuration error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

from .environment import RunEnvironment
from .exit_codes import EXIT_FAILED, EXIT_OK
from .loaded import LoadedSuite

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhw]?)\s*$", re.IGNORECASE)
_UNITS = {"": "days", "d": "days", "h": "hours", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """``--max-age``: ``30d``, ``12h``, ``2w``; a bare number is days."""
    match = _AGE.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError("must be an age such as 30d, 12h or 2w (a bare number: days)")
    return timedelta(**{_UNITS[match.group(2).lower()]: float(match.group(1))})


def case_models(loaded: LoadedSuite, index: int) -> dict[str, set[str]]:
    """The models test case ``index`` calls, per side (what its fixture should hold)."""
    from .grading.judges.service import merge_levels
    from .spend import PRICED_BACKENDS
    from .suite import JudgeEvaluation

    suite = loaded.suite
    case = loaded.cases.materialize(index)
    models: dict[str, set[str]] = {}
    if suite.agent.backend in PRICED_BACKENDS and suite.agent.model:
        models["agent"] = {suite.agent.model}
    judges: set[str] = set()
    for turn in case.effective_turns():
        for evaluation in loaded.evaluations_for(case, turn):
            if isinstance(evaluation, JudgeEvaluation):
                merged = merge_levels(suite.judge, case.judge, turn.judge, evaluation.judge)
                judges.add(str(merged.get("model")))
    for evaluation in case.conversation_evaluations or []:
        if isinstance(evaluation, JudgeEvaluation):
            judges.add(str(merge_levels(suite.judge, case.judge, evaluation.judge).get("model")))
    plan = loaded.simulations.get(index)
    if plan is not None:  # a simulated case: its simulated turns' judges, fidelity, simulator
        level = case.evaluations if case.evaluations is not None else suite.evaluations
        for evaluation in level:  # as the loader counts them (ground-truth judges skip them)
            if isinstance(evaluation, JudgeEvaluation) and evaluation.use_ground_truth is not True:
                merged = merge_levels(suite.judge, case.judge, evaluation.judge)
                judges.add(str(merged.get("model")))
        if plan.fidelity:
            judges.add(str(merge_levels(suite.judge, case.judge).get("model")))
        if plan.simulator.model:  # None: a python simulator (its calls are its own)
            models["user"] = {plan.simulator.model}
    if judges:
        models["judge"] = judges
    return models


def cmd_fixtures_check(
    paths: Sequence[str],
    environment: RunEnvironment,
    out: TextIO,
    fixtures_dir: str | None = None,
    max_age: timedelta | None = None,
    repeat: int | None = None,
) -> int:
    """Print every finding; exit 1 when there is one (a ConfigError is the caller's: exit 2)."""
    from .fixtures import ExpectedCase, case_slugs, check_fixtures, suite_dir
    from .loader import load_suites
    from .paths import expand_suites
    from .settings import fixtures_root, resolve_settings

    suites = load_suites(
        expand_suites(paths),
        environment.variables,
        judges_called=False,  # no judge and no agent is called: their keys need not be set
        agent_called=False,
        fixtures="replay",
    )
    now = datetime.now(UTC)
    start = Path.cwd()
    found = 0
    for loaded in suites:
        settings = resolve_settings(
            {"fixtures_dir": fixtures_dir, "repeat": repeat}, environment, loaded.suite.execution
        )
        root = fixtures_root(settings, loaded.base_dir, start)
        names = list(loaded.cases.names())
        cases = [
            ExpectedCase(name, slug, max(1, settings.repeat), case_models(loaded, i))
            for i, (name, slug) in enumerate(zip(names, case_slugs(names), strict=True))
        ]
        directory = suite_dir(root, loaded.path)
        shown = _shown(directory, start)
        findings = check_fixtures(directory, cases, now=now, max_age=max_age, shown=shown)
        for finding in findings:
            out.write(f"{loaded.display_path}: {finding.kind}: {finding.message}\n")
        found += len(findings)
        if not findings:
            out.write(f"ok: {loaded.display_path}: {len(cases)} test cases, fixtures in {shown}\n")
    if found:
        out.write(f"multiturn-eval fixtures check: {found} finding{'s' * (found != 1)}\n")
        return EXIT_FAILED
    return EXIT_OK


def _shown(path: Path, start: Path) -> str:
    try:
        return path.relative_to(start).as_posix()
    except ValueError:
        return str(path)
