"""The action's inputs: read from ``INPUT_*`` variables and validated here.

The runner passes every input as ``INPUT_<NAME>`` with the name upper-cased and
hyphens kept (``INPUT_PARALLEL-TEST-CASES``), and does not enforce
``required:``, so this module checks everything itself and reports each
problem naming the input. Values are trimmed (as ``@actions/core`` does).

Decisions where action.yml leaves room:

- ``suite``, ``tags`` and ``install`` are lists: one item per line, or
  separated by commas (``suite``, ``tags``) or whitespace (``tags``,
  ``install``). A suite path may contain spaces; a package specifier may not.
- ``suite`` and ``report-dir`` are relative to ``working-directory``, which is
  relative to the workspace. The report directory must be inside the workspace,
  so a later ``actions/upload-artifact`` step can collect it.
- ``install`` items naming an existing file, or ending in ``.txt``, are
  requirements files (``pip install -r``); everything else is handed to
  ``pip install`` as a package specifier, path or pip option.
- ``fail-on-failure`` accepts the YAML 1.2 booleans ``true``/``True``/``TRUE``
  and ``false``/``False``/``FALSE`` (as ``core.getBooleanInput``); so does
  ``allow-partial``.
- ``shard-index`` / ``shard-total`` are 0-based, as ``${{ strategy.job-index }}``
  and ``${{ strategy.job-total }}`` give them (``--shard`` on the command line
  is 1-based): both or neither. ``shard-total: 1`` is the whole suite.
- ``mode: merge`` runs no suite: ``reports`` (globs, one per line or
  comma-separated, relative to ``working-directory``) are the shard jobs'
  downloaded ``report.json`` files; ``suite`` is not needed then.
- ``baseline`` is a path or a glob (``**`` allowed) relative to
  ``working-directory``; it is resolved when the run starts (a missing one is a
  notice, never an error). ``fail-on`` is ``failures`` or ``regressions``
  (case-insensitive). ``fail-on-failure: false`` still turns exit 1 into a
  passing step whichever ``fail-on`` is.
- ``fixtures`` is ``off``, ``replay``, ``record`` or ``update`` (any case); empty leaves it
  to the suite's ``execution.fixtures.mode`` (else ``MULTITURN_EVAL_FIXTURES``, else off).
  In replay the API key inputs may be empty: nothing is sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import InputError, InputProblem
from ..settings import parse_cost, parse_fixtures, parse_positive_int
from ..sharding import ShardSpec, shard_spec

_T = TypeVar("_T")
CommentMode = Literal["auto", "always", "never"]
Mode = Literal["run", "merge"]

#: every input action.yml declares, with the default the runner fills in (None: none)
INPUTS: dict[str, str | None] = {
    "suite": None,
    "parallel-test-cases": "",
    "repeat": "",
    "report-dir": "multiturn-eval-report",
    "filter": "",
    "tags": "",
    "comment": "auto",
    "github-token": None,  # ${{ github.token }}, filled in by the runner
    "anthropic-api-key": "",
    "openai-api-key": "",
    "install": "",
    "working-directory": ".",
    "fail-on-failure": "true",
    "baseline": "",
    "fail-on": "failures",
    "mode": "run",
    "shard-index": "",
    "shard-total": "",
    "max-cost": "",
    "fixtures": "",
    "reports": "",
    "allow-partial": "false",
}
SECRET_INPUTS = ("github-token", "anthropic-api-key", "openai-api-key")

_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")
_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2")


def env_name(name: str) -> str:
    return "INPUT_" + name.replace(" ", "_").upper()


@dataclass(frozen=True)
class ActionInputs:
    suites: list[str]
    working_directory: Path
    """absolute"""
    report_dir: Path
    """absolute, inside the workspace"""
    parallel_test_cases: int | None = None
    repeat: int | None = None
    """``repeat``: runs of every test case (empty: the suite's ``execution.repeat``, else 1)."""
    filter: str | None = None
    tags: list[str] = field(default_factory=list)
    comment: CommentMode = "auto"
    github_token: str = ""
    anthropic_api_key: str = ""
    openai_api_key: str = ""
    install: list[str] = field(default_factory=list)
    """arguments for ``pip install`` (run in the working directory), files as ``-r FILE``"""
    fail_on_failure: bool = True
    baseline: str | None = None
    """a path or glob relative to ``working_directory`` (resolved by the action)"""
    fail_on: Literal["failures", "regressions"] = "failures"
    mode: Mode = "run"
    shard: ShardSpec | None = None
    """``shard-index`` (0-based) of ``shard-total``."""
    max_cost: float | None = None
    fixtures: str | None = None
    """``fixtures``: off, replay, record or update (empty: the suite's, else off)."""
    reports: list[str] = field(default_factory=list)
    """``mode: merge``: globs of shard report.json files, relative to the working directory."""
    allow_partial: bool = False


def raw_input(env: Mapping[str, str], name: str) -> str:
    value = env.get(env_name(name))
    if value is None:
        value = INPUTS.get(name) or ""
    return value.strip()


def _split(text: str, separators: str) -> list[str]:
    return [part.strip() for part in re.split(separators, text) if part.strip()]


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _whole_number(env: Mapping[str, str], name: str, problems: list[InputProblem]) -> int | None:
    """Input ``name`` as a whole number from 1 to 1024 (None: not given, or a problem noted)."""
    text = raw_input(env, name)
    if not text:
        return None
    try:
        return parse_positive_int(text)
    except ValueError:
        problems.append(InputProblem(name, f"{text!r} is not a whole number from 1 to 1024"))
        return None


def _parsed(
    env: Mapping[str, str],
    name: str,
    parse: Callable[[str], _T],
    problems: list[InputProblem],
) -> _T | None:
    """Input ``name`` through the setting's own parser (None: not given, or a problem noted:
    ``'abc' must be ...``)."""
    text = raw_input(env, name)
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        problems.append(InputProblem(name, f"{text!r} {exc}"))
        return None


def _choice(
    env: Mapping[str, str], name: str, choices: tuple[str, ...], problems: list[InputProblem]
) -> str:
    """Input ``name``, one of ``choices`` in any case; the first (the default) when not given
    or not one of them (a problem noted)."""
    value = raw_input(env, name).lower() or choices[0]
    if value in choices:
        return value
    problems.append(
        InputProblem(name, f"{raw_input(env, name)!r} is not one of {', '.join(choices)}")
    )
    return choices[0]


def read_inputs(env: Mapping[str, str], workspace: Path) -> ActionInputs:
    """Every input, checked; raises InputError listing all problems at once."""
    problems: list[InputProblem] = []
    root = workspace.resolve()

    mode = raw_input(env, "mode").lower() or "run"
    if mode not in ("run", "merge"):
        problems.append(
            InputProblem("mode", f"{raw_input(env, 'mode')!r} is not one of run, merge")
        )
        mode = "run"
    suites = _split(raw_input(env, "suite"), r"[\n,]")
    reports = _split(raw_input(env, "reports"), r"[\n,]")
    if mode == "run" and not suites:
        problems.append(InputProblem("suite", "is required: give one or more suite files or globs"))
    if mode == "merge" and not reports:
        problems.append(
            InputProblem(
                "reports",
                "is required with mode: merge: give the shard jobs' report.json files "
                "(a glob such as shards/*/report.json)",
            )
        )
    shard = _shard(raw_input(env, "shard-index"), raw_input(env, "shard-total"), problems)
    max_cost = _parsed(env, "max-cost", parse_cost, problems)
    fixtures = _parsed(env, "fixtures", parse_fixtures, problems)
    partial_text = raw_input(env, "allow-partial") or "false"
    if partial_text not in _TRUE + _FALSE:
        problems.append(
            InputProblem("allow-partial", f"{partial_text!r} is not a boolean (true or false)")
        )

    workdir_text = raw_input(env, "working-directory") or "."
    workdir = (root / workdir_text).resolve()
    workdir_ok = False
    if not _inside(workdir, root):
        problems.append(
            InputProblem("working-directory", f"{workdir_text!r} is outside the workspace")
        )
    elif not workdir.is_dir():
        problems.append(
            InputProblem(
                "working-directory", f"{workdir_text!r} is not a directory in the workspace"
            )
        )
    else:
        workdir_ok = True

    report_text = raw_input(env, "report-dir") or "multiturn-eval-report"
    report_dir = (workdir / report_text).resolve()
    if not workdir_ok:
        pass  # relative to a working directory that is itself wrong: one error is enough
    elif not _inside(report_dir, root) or report_dir == root:
        problems.append(
            InputProblem(
                "report-dir",
                f"{report_text!r} must be a directory inside the workspace "
                "(so actions/upload-artifact can collect it)",
            )
        )
    elif report_dir.exists() and not report_dir.is_dir():
        problems.append(InputProblem("report-dir", f"{report_text!r} is a file, not a directory"))

    parallel = _whole_number(env, "parallel-test-cases", problems)
    repeat = _whole_number(env, "repeat", problems)
    comment = _choice(env, "comment", ("auto", "always", "never"), problems)

    fail_text = raw_input(env, "fail-on-failure") or "true"
    if fail_text not in _TRUE + _FALSE:
        problems.append(
            InputProblem("fail-on-failure", f"{fail_text!r} is not a boolean (true or false)")
        )

    fail_on = _choice(env, "fail-on", ("failures", "regressions"), problems)

    install: list[str] = []
    for item in _split(raw_input(env, "install"), r"\s+"):
        candidate = workdir / item
        is_archive = item.lower().endswith(_ARCHIVE_SUFFIXES)
        if item.startswith("-") or is_archive:
            install.append(item)
        elif candidate.is_file():
            install += ["-r", item]
        elif item.endswith(".txt"):
            problems.append(
                InputProblem("install", f"requirements file {item!r} not found in {workdir_text!r}")
            )
        else:
            install.append(item)

    if problems:
        raise InputError(problems)
    return ActionInputs(
        suites=suites,
        working_directory=workdir,
        report_dir=report_dir,
        parallel_test_cases=parallel,
        repeat=repeat,
        filter=raw_input(env, "filter") or None,
        tags=_split(raw_input(env, "tags"), r"[\s,]+"),
        comment=comment,  # type: ignore[arg-type]  # checked above
        github_token=raw_input(env, "github-token"),
        anthropic_api_key=raw_input(env, "anthropic-api-key"),
        openai_api_key=raw_input(env, "openai-api-key"),
        install=install,
        fail_on_failure=fail_text in _TRUE,
        baseline=raw_input(env, "baseline") or None,
        fail_on=fail_on,  # type: ignore[arg-type]  # checked above
        mode=mode,  # type: ignore[arg-type]  # checked above
        shard=shard,
        max_cost=max_cost,
        fixtures=fixtures,
        reports=reports,
        allow_partial=partial_text in _TRUE,
    )


def _shard(index: str, total: str, problems: list[InputProblem]) -> ShardSpec | None:
    """``shard-index`` (0-based, ``strategy.job-index``) of ``shard-total``; both or neither."""
    if not index and not total:
        return None
    if not index or not total:
        given, missing = ("shard-index", "shard-total") if index else ("shard-total", "shard-index")
        problems.append(InputProblem(missing, f"is needed with {given} (give both, or neither)"))
        return None
    if not index.isdigit():
        problems.append(
            InputProblem(
                "shard-index", f"{index!r} is not a whole number (0-based, as strategy.job-index)"
            )
        )
        return None
    if not total.isdigit():
        problems.append(
            InputProblem("shard-total", f"{total!r} is not a whole number (strategy.job-total)")
        )
        return None
    try:
        return shard_spec(int(index), int(total))
    except ValueError as exc:
        name = "shard-total" if "total" in str(exc) else "shard-index"
        problems.append(InputProblem(name, str(exc)))
        return None
