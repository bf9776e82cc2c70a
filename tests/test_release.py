"""The release: one version story, an image every user can pull, tags moved last.

- The package version, the major tag the release workflow makes from it and
  every ``@vN`` / ``:vN`` reference to this action, its image or its git tags
  in ``README.md`` and ``docs/**/*.md`` agree (SPEC 1 and 9: ``uses: ...@v1``,
  a moving ``v1`` tag).
- The release workflow's own shell runs here, as written in the workflow: the
  tag check, the anonymous pull of the pushed image (against a stand-in
  ``docker`` that records what it was asked), and the pin step that points
  ``action.yml`` at the image and moves the tags (against a local bare
  repository as ``origin``).
- Order: nothing that cannot be undone (PyPI, the tags) runs before the
  anonymous pull has passed.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiturn_eval import __version__
from tests.action_template import check_manifest

ROOT = Path(__file__).resolve().parent.parent
RELEASE: dict[Any, Any] = yaml.safe_load(
    (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
)
JOBS: dict[str, Any] = RELEASE["jobs"]
DIGEST = "sha256:" + "ab" * 32

#: a version reference: ``...@v1`` or ``...:v1`` (not ``v1.2.3``), with what stands before it
REFERENCE = re.compile(r"(?P<prefix>[^\s`\"'(<>]*)[@:]v(?P<major>\d+)(?![\w.])")
#: ``owner/name`` or ``owner/name/path``: another project's action (actions/checkout@v4)
OTHER_ACTION = re.compile(r"[\w.-]+/[\w.-]+(?:/[\w./-]*)?")


def step(job: str, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        s for s in JOBS[job]["steps"] if s.get("name") == name or s.get("id") == name
    ]
    assert len(found) == 1, (job, name)
    return found[0]


def bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A ``run:`` script as the runner runs it on Linux: ``bash -e {0}`` (plus pipefail)."""
    return subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def our_references(text: str) -> list[tuple[int, str, int]]:
    """(line, reference, major) of every ``@vN``/``:vN`` naming this project."""
    found = []
    for match in REFERENCE.finditer(text):
        prefix = match.group("prefix")
        if "multiturn-eval/multiturn-eval" not in prefix and OTHER_ACTION.fullmatch(prefix):
            continue  # another project's action: its own versions
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group(0), int(match.group("major"))))
    return found


# ---------------------------------------------------------------------- the version


def test_the_tag_check_accepts_the_package_version_and_names_its_major(tmp_path: Path) -> None:
    script = step("check", "version")["run"]
    output = tmp_path / "output"
    done = bash(script, {"GITHUB_REF_NAME": f"v{__version__}", "GITHUB_OUTPUT": str(output)}, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    major = f"v{__version__.split('.')[0]}"
    assert output.read_text().splitlines() == [f"version={__version__}", f"major={major}"]
    assert JOBS["check"]["outputs"]["major"] == "${{ steps.version.outputs.major }}"

    for wrong in ("v0.1.0", f"v{__version__}.1", "v9.9.9"):
        output.write_text("")
        done = bash(script, {"GITHUB_REF_NAME": wrong, "GITHUB_OUTPUT": str(output)}, ROOT)
        assert done.returncode == 1, wrong
        assert f"::error::tag {wrong} does not match the package version {__version__}" in (
            done.stdout
        )
        assert output.read_text() == ""


def test_one_version_story_package_major_tag_and_every_doc_reference() -> None:
    assert re.fullmatch(r"[1-9]\d*\.\d+\.\d+", __version__), __version__  # SPEC: @v1, not @v0
    major = int(__version__.split(".")[0])
    tags = RELEASE[True]["push"]["tags"]  # `on:`, which YAML 1.1 reads as true
    assert tags == ["v[0-9]+.[0-9]+.[0-9]+"]
    references = {path: our_references(path.read_text(encoding="utf-8")) for path in docs()}
    kinds = {re.sub(r"[@:]v\d+$", "", ref) for refs in references.values() for _, ref, _ in refs}
    # uses:, the image and a git install are all there (the test reads real references)
    assert {"multiturn-eval/multiturn-eval", "ghcr.io/multiturn-eval/multiturn-eval"} <= kinds
    assert any("git+https://" in kind for kind in kinds), kinds
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {ref}"
        for path, refs in references.items()
        for line, ref, ref_major in refs
        if ref_major != major
    ]
    assert wrong == [], f"the package is {__version__}: every reference should say v{major}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("uses: multiturn-eval/multiturn-eval@v1", [(1, "multiturn-eval/multiturn-eval@v1", 1)]),
        (
            "  ghcr.io/multiturn-eval/multiturn-eval:v2 run",
            [(1, "ghcr.io/multiturn-eval/multiturn-eval:v2", 2)],
        ),
        ("A released `@v0` pulls", [(1, "@v0", 0)]),
        ('"x @ git+https://...@v3"', [(1, "git+https://...@v3", 3)]),
        ("uses: actions/checkout@v4\nuses: dawidd6/action-download-artifact@v6", []),
        ("uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0", []),
        ("tag v1.0.0 and schema 1.2", []),
    ],
)
def test_references_are_told_apart(text: str, expected: list[tuple[int, str, int]]) -> None:
    assert our_references(text) == expected


# ---------------------------------------------------------- an image everyone can pull


def test_nothing_irreversible_runs_before_the_anonymous_pull() -> None:
    public = JOBS["public"]
    assert public["needs"] == "image"
    assert public["permissions"] == {}  # no token: the pull is anonymous by construction
    assert "public" in JOBS["pypi"]["needs"]
    assert "public" in JOBS["pin"]["needs"]
    # the only jobs that can write anything are the ones that must
    writers = {
        name: {k: v for k, v in job.get("permissions", {}).items() if v == "write"}
        for name, job in JOBS.items()
    }
    assert writers == {
        "check": {},
        "image": {"packages": "write"},
        "public": {},
        "pypi": {"id-token": "write"},
        "pin": {"contents": "write"},
        "docs": {},
        "pages": {"pages": "write", "id-token": "write"},  # tests/test_docs_site.py
    }
    assert RELEASE["permissions"] == {}


class FakeDocker:
    """A ``docker`` on PATH that logs its calls and fails ``pull`` a given number of times."""

    def __init__(self, root: Path, failures: int, error: str) -> None:
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.log = root / "docker.log"
        self.count = root / "pulls"
        self.count.write_text("0")
        script = self.bin / "docker"
        script.write_text(
            "#!/bin/bash\n"
            f'echo "$* | DOCKER_CONFIG=$DOCKER_CONFIG | '
            f'$(ls -A "${{DOCKER_CONFIG:-/nonexistent}}" 2>/dev/null | wc -l)" >> {self.log}\n'
            'if [ "$1" = pull ]; then\n'
            f"  n=$(( $(cat {self.count}) + 1 )); echo $n > {self.count}\n"
            f'  if [ "$n" -le {failures} ]; then echo "{error}" >&2; exit 1; fi\n'
            '  echo "ghcr.io/octo/calc@sha256:abab"\n'
            "fi\n"
        )
        script.chmod(0o755)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


def run_public_step(tmp_path: Path, docker: FakeDocker, owner_type: str) -> Any:
    pull = step("public", "Pull the pushed image anonymously")
    env = {k: str(v) for k, v in pull["env"].items() if not str(v).startswith("${{")}
    env.update(
        {
            "PATH": f"{docker.bin}:{os.environ['PATH']}",
            "IMAGE": f"ghcr.io/octo/calc@{DIGEST}",
            "OWNER": "Octo",
            "OWNER_TYPE": owner_type,
            "PACKAGE": "Calc",
            "RETRY_SECONDS": "0",
            "DOCKER_CONFIG": str(tmp_path / "logged-in"),  # as if a login had happened
        }
    )
    (tmp_path / "logged-in").mkdir()
    (tmp_path / "logged-in" / "config.json").write_text('{"auths": {"ghcr.io": {}}}')
    return bash(pull["run"], env, tmp_path)


def test_a_private_image_stops_the_release_saying_how_to_make_it_public(tmp_path: Path) -> None:
    docker = FakeDocker(tmp_path, failures=99, error="Error response from daemon: denied")
    done = run_public_step(tmp_path, docker, "Organization")
    assert done.returncode == 1
    calls = docker.calls()
    attempts = int(step("public", "Pull the pushed image anonymously")["env"]["ATTEMPTS"])
    assert 3 <= attempts <= 10  # a brief wait for propagation, not a long one
    assert calls[0].startswith("logout ghcr.io |")
    pulls = [c for c in calls if c.startswith("pull ")]
    assert len(pulls) == attempts
    for call in calls:  # a fresh, empty docker configuration: no stored credentials
        _, config, entries = call.split(" | ")
        assert config != f"DOCKER_CONFIG={tmp_path / 'logged-in'}" and entries == "0", call
    assert all(f"ghcr.io/octo/calc@{DIGEST}" in c for c in pulls)
    [error] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert "title=The released image is not public" in error
    assert "https://github.com/orgs/Octo/packages/container/calc/settings" in error
    assert "Change visibility" in error and "re-run the failed jobs" in error
    assert "denied" in done.stdout  # what the registry said
    assert "gh api /orgs/Octo/packages/container/calc --jq .visibility" in done.stdout

    user = FakeDocker(tmp_path / "user", failures=99, error="unauthorized")
    done = run_public_step(tmp_path / "user", user, "User")
    assert "https://github.com/users/Octo/packages/container/calc/settings" in done.stdout


def test_a_package_that_turns_public_while_the_step_waits_passes(tmp_path: Path) -> None:
    docker = FakeDocker(tmp_path, failures=2, error="manifest unknown")
    done = run_public_step(tmp_path, docker, "Organization")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len([c for c in docker.calls() if c.startswith("pull ")]) == 3
    assert "pulled anonymously" in done.stdout and "::error" not in done.stdout


# -------------------------------------------------------------------- moving the tags


def git(*args: str, cwd: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout


def test_the_pin_step_points_action_yml_at_the_image_and_moves_both_tags(tmp_path: Path) -> None:
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    (work / "action.yml").write_text((ROOT / "action.yml").read_text(encoding="utf-8"))
    git("add", "action.yml", cwd=work)
    git("commit", "-q", "-m", "release candidate", cwd=work)
    git("remote", "add", "origin", str(origin), cwd=work)
    version, major = f"v{__version__}", f"v{__version__.split('.')[0]}"
    git("tag", "-a", version, "-m", "the pushed tag", cwd=work)
    git("tag", "-a", major, "-m", "the previous release", cwd=work)
    git("push", "-q", "origin", "main", version, major, cwd=work)
    before = git("rev-parse", f"{version}^{{commit}}", cwd=work).strip()

    pin = step("pin", "Point action.yml at the image by digest; move the tags")
    image = f"docker://ghcr.io/octo/calc@{DIGEST}"
    done = bash(
        pin["run"],
        {
            "IMAGE": image,
            "VERSION": version,
            "MAJOR": major,
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(tmp_path),
        },
        work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pushed = {
        tag: git("rev-parse", f"{tag}^{{commit}}", cwd=origin).strip() for tag in (version, major)
    }
    assert pushed[version] == pushed[major] != before
    released = git("show", f"{version}:action.yml", cwd=origin)
    assert yaml.safe_load(released)["runs"] == {"using": "docker", "image": image}
    assert check_manifest(released) == []  # the released manifest still loads in the runner
    assert git("show", "-s", "--format=%an", pushed[version], cwd=origin).strip() == (
        "github-actions[bot]"
    )
