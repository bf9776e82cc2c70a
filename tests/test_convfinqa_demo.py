"""The README's main command: ``multiturn-eval run examples/convfinqa/suite.yaml``.

Run as a user would, in a subprocess from the repository root, with a scrubbed
environment (no API key, no proxy settings) and the network cut off: a
``sitecustomize`` refuses every socket connection that is not to the loopback
interface, and proves it was loaded by writing a marker file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from multiturn_eval.reports.writer import RENDERERS
from tests.cli_probe import run_command

REPO = Path(__file__).resolve().parents[1]

NO_NETWORK = textwrap.dedent(
    """
    import os, socket

    def _refuse(address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost")):
            return
        if isinstance(address, (str, bytes)):  # unix sockets
            return
        raise OSError("network access refused by the test: " + repr(address))

    _connect = socket.socket.connect
    _connect_ex = socket.socket.connect_ex

    def connect(self, address):
        _refuse(address)
        return _connect(self, address)

    def connect_ex(self, address):
        _refuse(address)
        return _connect_ex(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    with open(os.environ["NO_NETWORK_MARKER"], "w") as marker:
        marker.write("loaded")
    """
)


def main_command() -> list[str]:
    script = Path(sys.executable).parent / "multiturn-eval"
    if script.exists():
        return [str(script)]
    found = shutil.which("multiturn-eval")
    return [found] if found else [sys.executable, "-m", "multiturn_eval"]


def run_offline(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    guard = tmp_path / "guard"
    guard.mkdir(parents=True)
    (guard / "sitecustomize.py").write_text(NO_NETWORK, encoding="utf-8")
    marker = tmp_path / "guard-loaded"
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(guard),
        "NO_NETWORK_MARKER": str(marker),
    }
    report_dir = tmp_path / "report"
    result = run_command(
        [*main_command(), "run", "examples/convfinqa/suite.yaml", "-o", str(report_dir), *args],
        REPO,
        env,
        timeout=300,
    )
    assert marker.read_text(encoding="utf-8") == "loaded", "the network guard did not load"
    return result, report_dir


def test_main_command_runs_offline_writes_every_report_and_exits_0_or_1(tmp_path: Path) -> None:
    result, report_dir = run_offline(tmp_path)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    for name, _ in RENDERERS.values():
        assert (report_dir / name).is_file(), f"{name} was not written"
    report: dict[str, Any] = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    assert report["run"]["complete"] is True
    summary = report["summary"]
    assert summary["total"] == 20 and summary["turns"]["total"] == 77
    # a realistic mix: some turns pass, some fail, none errored or skipped
    assert 0 < summary["turns"]["passed"] < summary["turns"]["total"]
    assert summary["turns"]["skipped"] == 0
    assert summary["errored"] == 0
    assert result.returncode == (0 if summary["failed"] == 0 else 1)
    turns = [t for case in report["results"] for t in case["turns"]]
    assert all(not t["errors"] for t in turns)
    assert {m["metric_name"] for t in turns for m in t["metric_results"]} == {
        "answer",
        "turn_program_equivalence",
    }
    assert any(t["tool_invocations"] for t in turns)


def test_the_offline_run_is_deterministic(tmp_path: Path) -> None:
    first, first_dir = run_offline(tmp_path / "a")
    second, second_dir = run_offline(tmp_path / "b")

    def verdicts(report_dir: Path) -> list[Any]:
        report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
        return [
            (case["name"], [(t["passed"], t["response"]) for t in case["turns"]])
            for case in report["results"]
        ]

    assert first.returncode == second.returncode
    assert verdicts(first_dir) == verdicts(second_dir)


def test_scripts_demo_says_where_the_report_is_even_with_q(tmp_path: Path) -> None:
    """``-q`` lists no reports, so the last line must name the file itself (it used to point
    at "the reports listed above")."""
    assert (REPO / ".venv" / "bin" / "python").exists(), "scripts/demo runs in ./.venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTITURN_EVAL_")}
    for args, last in (
        (["-q", "-o", str(tmp_path / "q")], f"open {tmp_path / 'q'}/report.html in a browser"),
        (
            ["-q", "--report-dir", str(tmp_path / "j"), "--format", "json"],
            f"the reports are in {tmp_path / 'j'}/",
        ),
    ):
        done = run_command(["bash", str(REPO / "scripts" / "demo"), *args], REPO, env, timeout=600)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[-1] == f"== done (exit 1): {last}", lines[-3:]
        assert "listed above" not in done.stdout
        assert not any(line.startswith("reports: ") for line in lines)  # -q: none listed
    assert (tmp_path / "q" / "report.html").is_file()
    assert (tmp_path / "j" / "report.json").is_file()
