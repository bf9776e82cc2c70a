"""The action's contract: action.yml vs the code and the docs, the Dockerfile, the workflows.

- every input of action.yml is read by the code (with the same default) and
  documented in the action's pages of the docs; every output is written (the
  entrypoint tests check the real ``$GITHUB_OUTPUT``) and documented;
- action.yml and the workflows validate against GitHub's schemas
  (``check-jsonschema`` with its vendored schemas, offline);
- the Dockerfile follows the rules for a Docker action (hadolint clean, base
  image as ``ARG BASE_IMAGE``, no ``WORKDIR``/``USER``, no ``# syntax=``,
  exec-form ``ENTRYPOINT``, multi-stage, every backend);
- the shell scripts pass shellcheck, and ``entrypoint.sh`` runs under bash
  (dash drops the ``INPUT_*`` variables with hyphens).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiturn_eval.github.action import OUTPUTS
from multiturn_eval.github.inputs import INPUTS
from tests import docs_pages

ROOT = Path(__file__).resolve().parent.parent
ACTION: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
BIN = Path(sys.executable).parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _tool(name: str) -> str:
    found = BIN / name if (BIN / name).exists() else shutil.which(name)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed (CI must have it)")
        pytest.skip(f"{name} is not installed")
    return str(found)


def _docs_action_section() -> str:
    """The GitHub Action's pages (``docs/action/``), as the site shows them."""
    return docs_pages.section("action")


def _table_rows(section: str, heading: str) -> dict[str, str]:
    """First-column names of the Markdown table under ``## heading``."""
    part = section.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z-]+)` \|.*$", part, re.M)}


def test_action_yml_declares_the_spec_inputs_and_outputs() -> None:
    assert ACTION["runs"] == {"using": "docker", "image": "Dockerfile"}
    assert ACTION["branding"]["icon"] and ACTION["branding"]["color"]
    assert list(ACTION["inputs"]) == list(INPUTS)
    assert list(ACTION["outputs"]) == list(OUTPUTS)
    for name, spec in {**ACTION["inputs"], **ACTION["outputs"]}.items():
        assert len(spec.get("description", "")) > 20, f"{name} needs a description"
    assert ACTION["inputs"]["suite"]["required"] is True


def test_the_code_uses_the_same_defaults_as_action_yml() -> None:
    for name, spec in ACTION["inputs"].items():
        default = spec.get("default")
        if name == "github-token":
            assert default == "${{ github.token }}"
        elif name == "suite":
            assert default is None
        else:
            assert str(default) == INPUTS[name], name


def test_every_input_and_output_is_documented_in_the_docs() -> None:
    section = _docs_action_section()
    inputs = _table_rows(section, "Inputs")
    outputs = _table_rows(section, "Outputs")
    assert list(inputs) == list(ACTION["inputs"])
    assert list(outputs) == list(ACTION["outputs"])
    for name, spec in ACTION["inputs"].items():
        default = str(spec.get("default", ""))
        if default and name != "parallel-test-cases":
            assert f"`{default}`" in inputs[name], f"documented default of {name}"
    for needed in (
        "pull-requests: write",
        "actions/upload-artifact",
        "if: ${{ !cancelled() }}",
        "workflow_run",
        "Resource not accessible by integration",
        "anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}",
    ):
        assert needed in section, needed


def test_action_yml_and_workflows_pass_githubs_schemas() -> None:
    checks = [
        ["--builtin-schema", "vendor.github-actions", str(ROOT / "action.yml")],
        ["--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
    ]
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "release.yml"}
    for args in checks:
        done = subprocess.run(
            [_tool("check-jsonschema"), *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_ci_runs_the_container_end_to_end_and_release_pins_the_image() -> None:
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    steps = [s.get("run", "") for job in ci["jobs"].values() for s in job["steps"]]
    assert any("scripts/container-e2e" in s for s in steps)
    assert any("scripts/test" in s for s in steps)
    assert any(s.get("uses") == "./" for s in ci["jobs"]["action"]["steps"])
    release = (ROOT / ".github/workflows/release.yml").read_text()
    for needed in (
        "linux/amd64,linux/arm64",
        "ghcr.io",
        "pypa/gh-action-pypi-publish",
        "id-token: write",
        "image: '$IMAGE'",
        "steps.build.outputs.digest",
    ):
        assert needed in release, needed


# ---------------------------------------------------------------------- Dockerfile


def test_dockerfile_follows_the_docker_action_rules() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    instructions = [line.split()[0].upper() for line in lines if line and not line.startswith("#")]
    assert not any(line.lower().startswith("# syntax") for line in lines)
    assert "ARG BASE_IMAGE=python:3.12-slim" in lines
    assert instructions[0] == "ARG"  # the base is chosen before the first FROM
    assert "WORKDIR" not in instructions and "USER" not in instructions
    assert instructions.count("FROM") == 2
    assert re.search(r"^COPY --from=build /opt/multiturn-eval /opt/multiturn-eval$", text, re.M)
    assert re.search(r"^ENTRYPOINT \[\"/entrypoint\.sh\"\]$", text, re.M)
    assert "optional-dependencies']['all']" in text  # every backend
    assert "--no-cache-dir" in text


def test_hadolint_is_clean() -> None:
    done = subprocess.run(
        [_tool("hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerignore_keeps_only_what_the_image_needs() -> None:
    text = (ROOT / ".dockerignore").read_text()
    assert "\n*\n" in text  # everything is ignored, then the needed paths let back in
    for needed in ("!pyproject.toml", "!README.md", "!runner/", "!entrypoint.sh"):
        assert needed in text


def test_entrypoint_is_bash_executable_and_hands_over_to_the_image_python() -> None:
    path = ROOT / "entrypoint.sh"
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n")
    # the image's interpreter by absolute path (the venv the Dockerfile builds), never a
    # `python` looked up on PATH, which the job's environment may replace
    assert "python=${MULTITURN_EVAL_PYTHON:-/opt/multiturn-eval/bin/python}\n" in text
    assert 'exec "$python" -m multiturn_eval.github "$@" 2>&1\n' in text
    assert not re.search(r"^[^#]*\bexec python", text, re.M)
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "python3 -m venv /opt/multiturn-eval " in dockerfile
    assert os.access(path, os.X_OK)
    if (ROOT / ".git").exists() and shutil.which("git"):
        mode = subprocess.run(
            ["git", "ls-files", "-s", "entrypoint.sh"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if mode:  # committed: the executable bit travels with the checkout
            assert mode[0] == "100755"


def test_bash_keeps_hyphenated_input_variables_where_sh_may_not() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "INPUT_FAIL-ON-FAILURE": "false"}
    script = "exec python3 -c \"import os; print(os.environ.get('INPUT_FAIL-ON-FAILURE'))\""
    done = subprocess.run(
        ["/bin/bash", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "false"


def test_shell_scripts_pass_shellcheck() -> None:
    scripts = [ROOT / "entrypoint.sh", ROOT / "scripts" / "container-e2e", ROOT / ".ci" / "run"]
    scripts += [ROOT / "scripts" / "act-e2e", ROOT / "scripts" / "lib" / "docker-engine.sh"]
    done = subprocess.run(
        [_tool("shellcheck"), *map(str, scripts)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
