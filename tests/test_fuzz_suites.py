"""Seeded fuzzing of suite files (bench/reliability/fuzz.py): no mutant may crash, hang or
end in an error that does not name its file.

In-process through ``load_suites`` (fast, hundreds of mutants), a sample through the
real CLI in subprocesses (``validate`` + ``run`` on a python agent), and the harness
itself with ``--quick``, so CI runs it. The mutants are the same on every run (fixed
seeds); counts are printed to the terminal and recorded as test properties.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from bench.reliability import fuzz

from tests.cli_probe import run_bench


@pytest.fixture
def say(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """Print a line to the terminal even while output is captured."""

    def write(line: str) -> None:
        with capsys.disabled():
            print(f"\n{line}")

    return write


def test_every_family_mutates_every_seed_differently() -> None:
    """The fuzzer is deterministic per seed and really changes its inputs."""
    first = list(fuzz.mutants(len(fuzz.FAMILIES) * 3, seed=11))
    again = list(fuzz.mutants(len(fuzz.FAMILIES) * 3, seed=11))
    assert first == again
    assert {m.family for m in first} == set(fuzz.FAMILIES)
    originals = {s.text.encode() for s in fuzz.seeds()}
    changed = [m for m in first if m.data not in originals]
    assert len(changed) >= len(first) * 0.9


def test_seeds_are_valid_suites(tmp_path: Path) -> None:
    """Mutations start from suites that load, so they probe the edges of valid input."""
    fuzz.prepare(tmp_path)
    for i, seed in enumerate(fuzz.seeds()):
        outcome = fuzz.check_in_process(
            fuzz.Mutant(i, "none", seed.name, seed.text.encode()), tmp_path
        )
        expected = "config_error" if seed.name.endswith("broken.yaml") else "loaded"
        assert outcome.kind == expected, (seed.name, outcome)


def test_fuzz_in_process(
    tmp_path: Path, record_property: Callable[[str, object], None], say: Callable[[str], None]
) -> None:
    count = 40 * len(fuzz.FAMILIES)  # 520
    tally = fuzz.fuzz(count, cli_sample=0, seed=2024, workdir=tmp_path)
    loaded, errors = sum(tally.loaded.values()), sum(tally.config_errors.values())
    summary = f"fuzz: {count} suites in-process, {loaded} loaded, {errors} config errors, {tally.bad} crashes/hangs/unlocated"
    say(summary)
    record_property("fuzz_in_process", summary)
    assert tally.bad == 0, "\n".join(tally.failures)
    assert loaded + errors == count
    assert all(tally.tried[f] == 40 for f in fuzz.FAMILIES)
    assert loaded >= count * 0.05  # some mutants stay valid: the edges of valid input are probed


def test_fuzz_through_the_cli(
    tmp_path: Path, record_property: Callable[[str, object], None], say: Callable[[str], None]
) -> None:
    fuzz.prepare(tmp_path)
    # three mutants that still load (validate 0, run 0 or 1) and three that do not (2 and 2)
    wanted = {"loaded": 3, "config_error": 3}
    codes = []
    for mutant in fuzz.mutants(400, seed=99):
        outcome = fuzz.check_in_process(mutant, tmp_path)
        kind = outcome.kind if outcome.backend in (None, "python") else "other"
        if wanted.get(kind, 0) == 0:
            continue
        wanted[kind] -= 1
        cli = fuzz.check_cli(mutant, tmp_path, outcome)
        assert not cli.problems, (mutant.family, mutant.seed, cli.problems)
        assert cli.codes[0] == (2 if kind == "config_error" else 0), (mutant, cli.codes)
        codes.append(cli.codes)
        if not any(wanted.values()):
            break
    assert len(codes) == 6
    summary = f"fuzz: {len(codes)} suites through the CLI, exit codes {codes}"
    say(summary)
    record_property("fuzz_cli", summary)


def test_fuzz_harness_quick(
    record_property: Callable[[str, object], None], say: Callable[[str], None]
) -> None:
    done = run_bench("reliability/fuzz.py", "--quick", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("fuzz: 300 suites, ") and last.endswith(" config errors, 0 failures"), (
        done.stdout
    )
    total = next(line for line in done.stdout.splitlines() if line.startswith("| total"))
    cells = [c.strip() for c in total.strip("|").split("|")]
    # crashes, hangs, unlocated, tracebacks, wrong exits: all zero; 6 suites through the CLI
    assert cells[4:7] == ["0", "0", "0"] and cells[7] == "6" and cells[8:] == ["0", "0"], total
    say(last + " (bench/reliability/fuzz.py --quick)")
    record_property("fuzz_quick", last)
