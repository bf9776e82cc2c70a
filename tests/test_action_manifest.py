"""action.yml as GitHub's runner loads it: ``${{ }}`` only where the runner's schema allows it.

The runner evaluates ``${{ }}`` in every string of an action's manifest while
loading it ("Set up job"), and accepts an expression only where its manifest
schema gives the value a context. actions/runner,
``src/Runner.Worker/action_yaml.json`` (vendored in ``tests/data/actions-runner/``)::

    "input": {"mapping": {"properties": {"default": "input-default-context"},
                          "loose-key-type": "non-empty-string", "loose-value-type": "any"}},
    "input-default-context": {"context": ["github", "strategy", "matrix", "job", "runner",
                                          "hashFiles(1,255)"], "string": {}},
    "container-runs": {"mapping": {"properties": {"using": ..., "image": ...,
                                                  "args": "container-runs-args",
                                                  "env": "container-runs-env", ...}}},
    "container-runs-args": {"sequence": {"item-type": "container-runs-context"}},
    "container-runs-context": {"context": ["inputs"], "string": {}},
    "container-runs-env": {"context": ["inputs"], "mapping": {...}},

So in a Docker action: ``inputs.<id>.default`` may use ``github``, ``strategy``,
``matrix``, ``job``, ``runner`` and ``hashFiles()``; ``runs.args`` and
``runs.env`` may use ``inputs``; nothing else may hold an expression at all --
not a description, not ``runs.image``, not a key. (``outputs.<id>.value`` has a
context too, for composite actions; a Docker action's outputs have no value.)
Anything else fails every ``uses:`` of the action with "Unrecognized
named-value: 'strategy'", which is what the shard inputs' descriptions did
(issue 18). :mod:`tests.action_template` reads a manifest by those rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.action_template import (
    SCHEMA_FILE,
    Problem,
    check_manifest,
    load_schema,
    split_template,
)

ROOT = Path(__file__).resolve().parent.parent
ACTION_TEXT = (ROOT / "action.yml").read_text(encoding="utf-8")
SCHEMA = load_schema()

#: the shard inputs as action.yml had them before issue 18 (act and GitHub refuse these)
OLD_SHARD_INPUTS = """\
  shard-index:
    description: >-
      Run only this shard of the suites: 0-based, as `${{ strategy.job-index }}` gives it (the
      CLI's `--shard I/N` counts from 1). Give it with `shard-total`. A shard job writes no PR
      comment: the `mode: merge` job does.
    required: false
    default: ""
  shard-total:
    description: The number of shards, as `${{ strategy.job-total }}` gives it.
    required: false
    default: ""
"""

#: what GitHub's metadata syntax documents for an action's top level (the runner reads
#: name, description, inputs, outputs and runs, and accepts other keys as they are)
TOP_LEVEL_KEYS = {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
INPUT_KEYS = {"description", "required", "default", "deprecationMessage"}


def manifest(inputs: str = "", runs: str = "", outputs: str = "", top: str = "") -> str:
    """A small Docker action manifest with the given parts (YAML text, 2-space indent)."""
    return (
        "name: t\ndescription: t\n"
        + top
        + "inputs:\n  suite:\n    description: s\n"
        + inputs
        + "outputs:\n  total:\n    description: n\n"
        + outputs
        + "runs:\n  using: docker\n  image: Dockerfile\n"
        + runs
    )


def messages(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems]


# ---------------------------------------------------------------- action.yml itself


def test_action_yml_loads_as_the_runner_loads_it() -> None:
    assert messages(check_manifest(ACTION_TEXT)) == []


def test_the_old_shard_descriptions_fail_at_their_lines_naming_the_context() -> None:
    start = ACTION_TEXT.index("  shard-index:\n")
    end = ACTION_TEXT.index("  max-cost:\n")
    old = ACTION_TEXT[:start] + OLD_SHARD_INPUTS + ACTION_TEXT[end:]
    problems = check_manifest(old)
    first_line = ACTION_TEXT[:start].count("\n") + 2  # the description line of shard-index
    assert [(p.path, p.line) for p in problems] == [
        ("inputs.shard-index.description", first_line),
        ("inputs.shard-total.description", first_line + 7),
    ]
    for problem in problems:
        assert "unrecognized named-value 'strategy'" in problem.message
        assert "plain text" in problem.message
    # (in the action.yml of issue 18, lines 99 and 106: the lines act reported)


def test_action_yml_has_the_shape_of_a_docker_action() -> None:
    action: dict[str, Any] = yaml.safe_load(ACTION_TEXT)
    assert set(action) <= TOP_LEVEL_KEYS, set(action) - TOP_LEVEL_KEYS
    container = SCHEMA["definitions"]["container-runs"]["mapping"]["properties"]
    assert action["runs"]["using"] == "docker"
    assert set(action["runs"]) <= set(container)
    assert isinstance(action["runs"]["image"], str) and action["runs"]["image"]
    for name, spec in action["inputs"].items():
        assert set(spec) <= INPUT_KEYS, (name, set(spec) - INPUT_KEYS)
        assert all(isinstance(v, str | bool) for v in spec.values()), name
    for name, spec in action["outputs"].items():
        assert set(spec) == {"description"}, name  # a Docker action's outputs have no value


def test_the_vendored_schema_says_what_the_docstrings_quote() -> None:
    definitions = SCHEMA["definitions"]
    assert definitions["input"]["mapping"]["properties"] == {"default": "input-default-context"}
    assert definitions["input-default-context"]["context"] == [
        "github",
        "strategy",
        "matrix",
        "job",
        "runner",
        "hashFiles(1,255)",
    ]
    assert definitions["container-runs-args"] == {
        "sequence": {"item-type": "container-runs-context"}
    }
    assert definitions["container-runs-context"]["context"] == ["inputs"]
    assert definitions["container-runs-env"]["context"] == ["inputs"]
    contexts = {name for name, d in definitions.items() if "context" in d}
    # every other place with a context belongs to composite actions' steps or outputs
    assert contexts - {
        "input-default-context",
        "container-runs-env",
        "container-runs-context",
    } == {
        "output-value",
        "string-steps-context",
        "boolean-steps-context",
        "step-env",
        "step-if",
        "step-with",
    }
    assert SCHEMA_FILE.with_name("LICENSE").read_text().startswith("The MIT License")


# ---------------------------------------------------------------- where ${{ }} may go


@pytest.mark.parametrize(
    "text",
    [
        manifest(inputs="  token:\n    default: ${{ github.token }}\n"),
        manifest(inputs="  t:\n    default: ${{ GitHub.Token }}\n"),  # names are case-insensitive
        manifest(inputs="  k:\n    default: key-${{ hashFiles('**/*.lock', 'x') }}\n"),
        manifest(inputs="  s:\n    default: ${{ strategy.job-index }}/${{ strategy.job-total }}\n"),
        manifest(inputs="  m:\n    default: ${{ matrix.python || runner.os }}-${{ job.status }}\n"),
        manifest(inputs="  j:\n    default: ${{ toJSON(github.event) }}\n"),
        manifest(inputs="  p:\n    default: ${{ github.event.inputs.strategy }}\n"),  # a property
        manifest(inputs="  q:\n    default: \"${{ format('{0} secrets.X', github.sha) }}\"\n"),
        manifest(runs="  args: ['${{ inputs.suite }}', '--x=${{ fromJSON(inputs.suite) }}']\n"),
        manifest(runs="  env:\n    SUITE: ${{ inputs.suite }}\n"),
        # ${{ 'literal' }} alone is the literal text: the documented way to write ${{ as text
        manifest(top="author: \"${{ '${{ github.token }}' }}\"\n"),
        manifest(inputs="  d:\n    description: plain strategy.job-index and ${ not {{ }}\n"),
    ],
    ids=lambda text: text.split("description: n\n", 1)[0][-60:].strip().replace("\n", " | "),
)
def test_allowed_expressions_load(text: str) -> None:
    assert messages(check_manifest(text)) == []


@pytest.mark.parametrize(
    ("text", "path", "needle"),
    [
        # a description allows no context at all: the bug of issue 18, and its relatives
        (
            manifest(inputs="  i:\n    description: as `${{ strategy.job-index }}` gives it\n"),
            "inputs.i.description",
            "unrecognized named-value 'strategy'",
        ),
        (
            manifest(inputs="  i:\n    description: ${{ github.token }}\n"),
            "inputs.i.description",
            "unrecognized named-value 'github'",
        ),
        (
            manifest(inputs="  i:\n    description: Token, e.g. ${{ secrets.X }}\n"),
            "inputs.i.description",
            "unrecognized named-value 'secrets'",
        ),
        (
            manifest(outputs="  o:\n    description: see ${{ 'x' }}\n"),
            "outputs.o.description",
            "not allowed here",
        ),
        (
            manifest(top="author: ${{ secrets.X }}\n"),
            "author",
            "unrecognized named-value 'secrets'",
        ),
        (
            manifest(top="branding:\n  icon: ${{ github.actor }}\n"),
            "branding.icon",
            "'github'",
        ),
        # a default takes github, strategy, matrix, job, runner, hashFiles -- nothing else
        (
            manifest(inputs="  t:\n    default: ${{ secrets.GITHUB_TOKEN }}\n"),
            "inputs.t.default",
            "unrecognized named-value 'secrets'",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ inputs.suite }}\n"),
            "inputs.t.default",
            "'inputs'",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ env.HOME }}\n"),
            "inputs.t.default",
            "'env'",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ always() }}\n"),
            "inputs.t.default",
            "unrecognized function 'always'",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ hashFiles() }}\n"),
            "inputs.t.default",
            "hashFiles() takes 1-255 arguments, not 0",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ contains('a') }}\n"),
            "inputs.t.default",
            "contains() takes 2-2 arguments, not 1",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ github.token\n"),
            "inputs.t.default",
            "not closed",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ }}\n"),
            "inputs.t.default",
            "empty expression",
        ),
        (
            manifest(inputs='  t:\n    default: "${{ \'unclosed }}"\n'),
            "inputs.t.default",
            "not closed",
        ),
        (
            manifest(inputs="  t:\n    default: ${{ github.sha ] }}\n"),
            "inputs.t.default",
            "unexpected ']'",
        ),
        # runs: args and env take inputs only; image and the rest take nothing
        (
            manifest(runs="  args: ['${{ github.token }}']\n"),
            "runs.args[0]",
            "unrecognized named-value 'github' (contexts allowed here: inputs)",
        ),
        (
            manifest(runs="  env:\n    K: ${{ secrets.KEY }}\n"),
            "runs.env.K",
            "'secrets'",
        ),
        (
            manifest(runs="  entrypoint: ${{ inputs.suite }}\n"),
            "runs.entrypoint",
            "'inputs'",
        ),
        (
            manifest(runs="  env:\n    K: ${{ strategy.job-index }}\n"),
            "runs.env.K",
            "'strategy'",
        ),
        # keys are read as templates too
        (
            manifest(inputs="  ${{ github.actor }}:\n    description: x\n"),
            "inputs.${{ github.actor }} (key)",
            "'github'",
        ),
    ],
)
def test_expressions_where_the_runner_refuses_them_are_named_by_path_and_line(
    text: str, path: str, needle: str
) -> None:
    problems = check_manifest(text)
    assert len(problems) == 1, messages(problems)
    [problem] = problems
    assert problem.path == path
    assert needle in problem.message, problem.message
    # the line is the one holding the offending value (or key): the only line with ${{
    [line] = [n for n, text_line in enumerate(text.splitlines(), 1) if "${{" in text_line]
    assert problem.line == line


@pytest.mark.parametrize(
    ("text", "path", "needle"),
    [
        (manifest(runs="  steps: []\n"), "runs.steps", "unexpected key 'steps'"),
        (manifest(outputs="  o:\n    descripton: x\n"), "outputs.o.descripton", "unexpected key"),
        (
            "name: t\ndescription: t\nruns:\n  using: docker\n  image:\n",
            "runs.image",
            "unexpected value ''",
        ),
        (
            manifest(inputs="  Suite:\n    description: again\n"),
            "inputs.Suite",
            "already defined",
        ),
        ("name: t\nruns:\n  using: docker\n", "runs", "cannot tell which"),
        ("name: [a]\nruns: {using: docker, image: x}\n", "name", "sequence is not allowed"),
    ],
)
def test_the_manifest_shape_is_read_as_the_runner_reads_it(
    text: str, path: str, needle: str
) -> None:
    problems = check_manifest(text)
    assert [p.path for p in problems] == [path], messages(problems)
    assert needle in problems[0].message


def test_hostile_manifests_are_read_in_full_without_a_false_alarm() -> None:
    huge = "word " * 200_000  # a 1 MB description: plain text is fine
    deep = "branding:\n" + "".join("  " * (d + 1) + f"k{d}:\n" for d in range(200))
    deep += "  " * 201 + "leaf: plain\n"
    braces = "{{ }} } { $ {{ ${ { '}}' ''"
    text = manifest(
        inputs=f'  h:\n    description: {huge}\n  b:\n    description: "{braces}"\n',
        top=deep,
    )
    assert messages(check_manifest(text)) == []
    many = "".join(
        f"  i{n}:\n    description: x ${{{{ strategy.job-index }}}}\n" for n in range(50)
    )
    problems = check_manifest(manifest(inputs=many))
    assert len(problems) == 50  # every one reported, none stops the reading
    assert len({p.line for p in problems}) == 50


def test_template_splitting_follows_the_runner() -> None:
    assert split_template("a ${{ x }} b ${{ 'y}}' }}c") == (
        [(False, "a "), (True, " x "), (False, " b "), (True, " 'y}}' "), (False, "c")],
        None,
    )
    assert split_template("${{ x")[1] is not None
    assert split_template("no expression") == ([(False, "no expression")], None)
