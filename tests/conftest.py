"""Shared fixtures: a temporary project directory and an in-process CLI runner."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from multiturn_eval import cli
from tests import agents
from tests.fakes.anthropic_server import FakeAnthropic


@dataclass
class CliResult:
    code: int
    out: str
    err: str
    report_dir: Path

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.report_dir / "report.json").read_text())
        return data


class Project:
    """A temporary working directory holding suites; runs the CLI in-process."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys
        self.env: dict[str, str] = {}

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def run(
        self, *argv: str, env: dict[str, str] | None = None, formats: Sequence[str] = ("json",)
    ) -> CliResult:
        args = list(argv)
        if args and args[0] == "run":
            if "-o" not in args:
                args += ["-o", "out"]
            if "--format" not in args and formats:
                args += ["--format", ",".join(formats)]
        self.capsys.readouterr()
        code = cli.main(args, env={**self.env, **(env or {})})
        captured = self.capsys.readouterr()
        out_dir = self.root / (args[args.index("-o") + 1] if "-o" in args else "out")
        return CliResult(code, captured.out, captured.err, out_dir)

    def ran(self, text: str, *argv: str, **kw: Any) -> CliResult:
        """``run`` of suite.yaml written as ``text`` (``argv``, ``kw``: as :meth:`run`'s)."""
        self.write("suite.yaml", text)
        return self.run("run", "suite.yaml", *argv, **kw)

    def rejected(self, text: str) -> str:
        """``validate`` of suite.yaml written as ``text``: its error output, once it is known
        the suite was rejected as a configuration error (exit 2) without a traceback."""
        self.write("suite.yaml", text)
        result = self.run("validate", "suite.yaml")
        assert result.code == 2, result.out + result.err
        assert "Traceback" not in result.err
        return result.err


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Project]:
    monkeypatch.chdir(tmp_path)
    agents.reset()
    yield Project(tmp_path, capsys)
    agents.reset()


@pytest.fixture
def retiring_sonnet_4_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's table of deprecated models as anthropic 2.14 had it (2.15 dropped these
    entries once the models were retired): the tests check our warning, not the SDK's data."""
    from anthropic._data import DEPRECATED_MODELS

    for model in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"):
        monkeypatch.setitem(DEPRECATED_MODELS, model, "November 30th, 2026")


@pytest.fixture
def anthropic_fake() -> Iterator[FakeAnthropic]:
    """A fake Anthropic Messages API on 127.0.0.1, for the tests' whole run."""
    with FakeAnthropic() as server:
        yield server
