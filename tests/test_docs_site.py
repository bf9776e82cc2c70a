"""The README as a front door and the reference site under docs/, as their readers get them.

- Every page under ``docs/`` is in ``mkdocs.yml``'s nav and every nav entry is a page
  (``mkdocs build --strict`` in ``scripts/test`` says so too, for the pages it builds).
- The README is read on GitHub, not built: every relative link in it (and every image)
  names a file of the repository, and an anchor names a heading of that file, as
  GitHub spells heading ids. Links from the site to the repository's other files are
  absolute (they must work on the site and on GitHub) and name files that exist.
- The site builds with ``--strict`` with the network refused, shows what it includes
  from the README, and asks no third party for anything when a reader opens it.
- The release workflow publishes the site it builds, with the requirements of the
  ``dev`` extra, from one job that holds the Pages permissions and nothing else.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pymdownx.slugs import slugify

from tests import docs_pages
from tests.docs_workflows import FENCE, ROOT
from tests.test_convfinqa_demo import NO_NETWORK
from tests.test_release import JOBS, bash, step

DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: a link to a file of this repository, as the site's pages write one
REPO_LINK = re.compile(
    r"https://github\.com/multiturn-eval/multiturn-eval/(?P<kind>blob|tree)/main/(?P<path>[^)#\s>]*)"
)
#: an inline link or image: ``[text](target)``, ``![alt](target)``
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
GITHUB_SLUG = slugify(case="lower")
SHA_PIN = re.compile(r"^[\w-]+/[\w-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml read as data: its ``!!python/...`` tags (the slugify function) as None."""


_IgnoreTags.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)


def mkdocs_config() -> dict[str, Any]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.load(text, Loader=_IgnoreTags)  # a loader that builds nothing
    return loaded


def nav_pages(entries: Any) -> list[str]:
    """Every page the nav names, depth first."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {entries!r}")


def unfenced(path: Path) -> list[str]:
    """The lines of a Markdown file outside its fenced code blocks."""
    lines, fence = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        found = FENCE.match(line)
        if fence:
            if found and found["fence"][0] == fence[0] and len(found["fence"]) >= len(fence):
                fence = "" if not found["info"] else fence
            continue
        if found:
            fence = found["fence"]
            continue
        lines.append(line)
    return lines


def prose(path: Path) -> str:
    """A Markdown file without its code blocks and code spans (no links there)."""
    return re.sub(r"(`+).+?\1", "", "\n".join(unfenced(path)))


def heading_ids(path: Path) -> set[str]:
    """The ids GitHub gives the headings of a Markdown file (duplicates get -1, -2, ...)."""
    ids: set[str] = set()
    for line in unfenced(path):
        heading = re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if heading:
            text = re.sub(r"`([^`]*)`", r"\1", heading.group(1))
            slug, n = GITHUB_SLUG(text, "-"), 0
            while (f"{slug}-{n}" if n else slug) in ids:
                n += 1
            ids.add(f"{slug}-{n}" if n else slug)
    return ids


# ------------------------------------------------------------------------------ the nav


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = mkdocs_config()
    assert config["docs_dir"] == "docs" and config["site_dir"] == "site"
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), "a page listed twice in the nav"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages, (
        f"not in the nav: {sorted(set(pages) - set(listed))}; "
        f"in the nav but missing: {sorted(set(listed) - set(pages))}"
    )
    assert listed[0] == "index.md"


def test_no_page_carries_a_snippet_marker_the_build_would_drop() -> None:
    """pymdownx.snippets removes every line holding a part marker, also on a page itself."""
    for path in sorted(DOCS.rglob("*.md")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not docs_pages.PART_MARKER.search(line), f"{path}:{n}: {line}"


def test_the_site_and_its_output_stay_out_of_git() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/site/" in ignored


# ---------------------------------------------------------------------------- the links


def test_every_relative_link_of_the_readme_resolves_in_the_repository() -> None:
    targets = [m["target"] for m in LINK.finditer(prose(README))]
    relative = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert len(relative) >= 20, relative  # the README links into the docs
    problems = []
    for target in relative:
        file, _, anchor = target.partition("#")
        path = (ROOT / file).resolve() if file else README
        if not path.is_relative_to(ROOT) or not path.exists():
            problems.append(f"{target}: no such file in the repository")
        elif anchor and path.suffix == ".md" and anchor not in heading_ids(path):
            problems.append(f"{target}: {path.relative_to(ROOT)} has no heading #{anchor}")
        elif anchor and path.suffix != ".md":
            problems.append(f"{target}: an anchor into a file that is not Markdown")
    assert problems == []
    linked = {t.partition("#")[0] for t in relative}
    assert {"docs/index.md", "docs/action/index.md", "docs/suite-format.md"} <= linked


def test_links_from_the_docs_into_the_repository_name_files_that_exist() -> None:
    found = []
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        for match in REPO_LINK.finditer(prose(path)):
            target = ROOT / match["path"]
            is_there = target.is_dir() if match["kind"] == "tree" else target.is_file()
            found.append((path.relative_to(ROOT).as_posix(), match["path"], is_there))
    assert len(found) >= 10, found
    assert [(page, target) for page, target, there in found if not there] == []


def test_the_link_checker_finds_a_broken_link_and_a_missing_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## `summary.md`: the comment\n\n```\n# not a heading\n```\n")
    assert heading_ids(page) == {"title", "summarymd-the-comment"}
    page.write_text("see [a](missing.md) and `[b](in-code.md)`\n\n```\n[c](fenced.md)\n```\n")
    assert [m["target"] for m in LINK.finditer(prose(page))] == ["missing.md"]


# -------------------------------------------------------------------------- the site


class _Requests(HTMLParser):
    """What a browser fetches from a page: scripts, stylesheets, images, icons, frames."""

    FETCHED: ClassVar[set[str]] = {
        "stylesheet",
        "icon",
        "preload",
        "prefetch",
        "preconnect",
        "modulepreload",
    }

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.repository_facts = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "video", "audio") and a.get("src"):
            self.urls.append(a["src"] or "")
        if tag == "link" and self.FETCHED & set((a.get("rel") or "").split()):
            self.urls.append(a.get("href") or "")
        if a.get("data-md-component") == "source" or "mermaid" in (a.get("class") or ""):
            self.repository_facts = True  # Material would call api.github.com / unpkg.com


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as scripts/test builds it (--strict), with every connection refused."""
    tmp = tmp_path_factory.mktemp("site")
    guard = tmp / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(NO_NETWORK, encoding="utf-8")
    marker = tmp / "guard-loaded"
    built = tmp / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(built)],
        cwd=ROOT,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(guard),
            "NO_NETWORK_MARKER": str(marker),
            "NO_MKDOCS_2_WARNING": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.read_text(encoding="utf-8") == "loaded", "the network guard did not load"
    assert "WARNING" not in done.stderr, done.stderr
    return built


def test_the_site_builds_offline_with_every_page(site: Path) -> None:
    for page in nav_pages(mkdocs_config()["nav"]):
        source = Path(page)
        folder = source.parent if source.stem == "index" else source.with_suffix("")
        assert (site / folder / "index.html").is_file(), page


def test_the_site_shows_the_parts_it_includes_from_the_readme(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    action = (site / "action" / "index.html").read_text(encoding="utf-8")
    agent = (site / "python-agent" / "index.html").read_text(encoding="utf-8")
    for html in (home, action, agent):
        assert "8&lt;" not in html and "--8<--" not in html  # every include was expanded
    assert "Clone and run the demo." in home and "yaml-language-server" in agent
    assert "persist-credentials" in action and "a configuration problem" in action
    quick = docs_pages.snippet("README.md", "quick-pr")
    assert "<!-- workflow: quick-pr -->" in quick and "--8<--" not in quick


def test_a_reader_of_the_site_asks_no_third_party_for_anything(site: Path) -> None:
    outside = []
    for html in sorted(site.rglob("*.html")):
        parser = _Requests()
        parser.feed(html.read_text(encoding="utf-8"))
        assert not parser.repository_facts, html
        outside += [f"{html.relative_to(site)}: {u}" for u in parser.urls if "//" in u]
    assert outside == []
    for css in site.rglob("*.css"):
        assert not re.search(r"url\(['\"]?(https?:)?//", css.read_text(encoding="utf-8")), css


# ------------------------------------------------------------------------ the release


def test_the_release_publishes_the_site_it_builds(tmp_path: Path) -> None:
    docs, pages = JOBS["docs"], JOBS["pages"]
    assert docs["permissions"] == {"contents": "read"}
    assert docs["steps"][0]["with"] == {"persist-credentials": False}
    build = step("docs", "Build the site")["run"]
    test_script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in build and "mkdocs build --strict" in test_script
    [upload] = [s for s in docs["steps"] if "upload-pages-artifact" in s.get("uses", "")]
    assert upload["with"] == {"path": "site/"}
    # the requirements it installs are the dev extra's, read from pyproject.toml as the job does
    done = bash(step("docs", "requirements")["run"], {"RUNNER_TEMP": str(tmp_path)}, ROOT)
    assert done.returncode == 0, done.stderr
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [r for r in dev["optional-dependencies"]["dev"] if r.startswith("mkdocs")]
    assert (tmp_path / "docs-requirements.txt").read_text().splitlines() == wanted
    assert {r.split(">=")[0] for r in wanted} == {"mkdocs", "mkdocs-material"}
    # deployed only once the release is out, by the one job holding the Pages permissions
    assert set(pages["needs"]) == {"docs", "pin"}
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in pages["steps"]] == ["actions/deploy-pages"]
    release = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    for action in ("actions/upload-pages-artifact", "actions/deploy-pages"):
        [line] = [ln.strip() for ln in release.splitlines() if f"uses: {action}@" in ln]
        assert SHA_PIN.match(line.removeprefix("- ").removeprefix("uses: ")), line
    releasing = docs_pages.page("development/releasing.md")
    assert "GitHub Actions" in releasing and "github-pages" in releasing and "`v*`" in releasing


# --------------------------------------------------------------------------- the README


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 320, "the reference belongs in docs/, not the README"
    for needed in ("scripts/demo", "scripts/test", "<!-- workflow: quick-pr -->", "test_cases:"):
        assert needed in text, needed
    for part in ("intro", "quickstart", "python-agent", "quick-pr"):
        assert docs_pages.snippet("README.md", part).strip(), part
