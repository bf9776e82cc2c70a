"""A signal while MCP servers start or are called ends the run cleanly (the real CLI).

While a ``scope: run`` server is still starting, the console still says why the run
stopped and which reports it wrote; while servers hang in calls, stderr gets no asyncio
noise ("Loop ... that handles pid N is closed", "Event loop is closed" tracebacks).
The server is ``tests/mcp_servers/bare.py`` (no SDK: it starts at once).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.chat_flavors import FLAVORS, Turn, U
from tests.test_mcp_backends import cli_process, servers, written_pid
from tests.test_mcp_servers import wait_gone

BARE = Path(__file__).resolve().parent / "mcp_servers" / "bare.py"
FLAVOR = FLAVORS[0]
NOISE = ("Traceback", "Exception ignored", "is closed")

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def bare(name: str, *args: str, **extra: Any) -> str:
    lines = [
        f"    - name: {name}",
        f"      command: {sys.executable}",
        f"      args: {json.dumps([str(BARE), *args])}",
    ]
    lines += [f"      {key}: {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def suite(entries: str, cases: int) -> str:
    header = FLAVOR.agent.split("  instructions:")[0]
    return (
        header
        + servers(entries)
        + "test_cases:\n"
        + "".join(f"  - name: case-{i}\n    input: go {i}\n" for i in range(cases))
    )


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_runs_server_starts_prints_the_stop_and_the_reports(
    signame: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    entry = bare("slow", "--init-delay", "60", scope="run", env={"BARE_PID_FILE": str(pid_file)})
    (tmp_path / "suite.yaml").write_text(suite(entry, 1))
    with FLAVOR.server() as fake:
        with cli_process(FLAVOR, fake, tmp_path, "run", "suite.yaml", "-o", "out") as cli:
            pid = written_pid(pid_file)
            time.sleep(0.3)  # initialize sent, unanswered
            cli.send_signal(getattr(signal, signame))
            out, err = cli.communicate(timeout=60)
        assert FLAVOR.requests(fake) == []
    assert cli.returncode == 3, out + err
    assert "multiturn-eval: 1 test case from suite.yaml" in out
    assert "1 not run" in out and f"INCOMPLETE: interrupted by {signame}" in out, out
    assert "reports: out/report.json" in out, out
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["run"]["complete"] is False
    assert written["run"]["stop_reason"] == f"interrupted by {signame}"
    assert wait_gone([pid]) == []


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_during_hanging_calls_leaves_no_asyncio_noise(
    signame: str, tmp_path: Path
) -> None:
    """Five runs at once (the noise came in some runs only), each of two cases at -p 2 hung
    in its own server's call: every run exits 3 with nothing of asyncio on stderr."""
    runs = 5
    hung = threading.Semaphore(0)

    def answer(last: Turn) -> tuple[str, Any, U]:
        hung.release()
        return "call", ("hang", {}), U()

    (tmp_path / "suite.yaml").write_text(suite(bare("own"), 2))
    with FLAVOR.server() as fake:
        fake.responder = FLAVOR.responder(answer)
        clis = [
            cli_process(FLAVOR, fake, tmp_path, "run", "suite.yaml", "-p", "2", "-o", f"out{i}")
            for i in range(runs)
        ]
        try:
            for _ in range(2 * runs):
                assert hung.acquire(timeout=60), "the cases never reached their hung call"
            time.sleep(0.2)  # the calls reach the servers
            for cli in clis:
                cli.send_signal(getattr(signal, signame))
            ended = [cli.communicate(timeout=60) for cli in clis]
        finally:
            for cli in clis:
                if cli.poll() is None:
                    cli.kill()
                    cli.wait(10)
    assert [cli.returncode for cli in clis] == [3] * runs, ended
    noisy = [(i, err) for i, (_, err) in enumerate(ended) if any(n in err for n in NOISE)]
    assert noisy == [], f"{len(noisy)} of {runs} runs: {noisy}"
