"""Fault injection through the real CLI: one misbehaving test case never takes the run down.

Every family of misbehaviour in ``tests/agents.py`` (raising, ``sys.exit()``,
``KeyboardInterrupt`` or ``CancelledError`` in factory, ``send`` and
``close``; tool values JSON cannot hold; token usage and cost of the wrong
type; replies with lone surrogates; garbage and stuck graders; stuck sync
agents) is run among healthy test cases by ``multiturn-eval run`` in a
subprocess, with all four reports. For each family it counts:

- ``tried``: misbehaving test cases run;
- ``tracebacks``: runs that printed a Python traceback;
- ``hangs``: runs that did not finish within their deadline (killed);
- ``wrong exit``: exit codes other than 1 when a case failed, 0 when none did
  (3 = "the run could not complete" is always wrong here);
- ``data lost``: healthy test cases missing from report.json or not passed,
  plus misbehaving ones missing from it;
- ``bad reports``: a report missing or unreadable (report.json, junit.xml,
  summary.md, report.html).

Every number but ``tried`` must be 0; the script exits 1 otherwise.

Usage, from the repository root::

    .venv/bin/python bench/reliability/faults.py            # each bad case in its own run
    .venv/bin/python bench/reliability/faults.py --quick    # one run per family (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import agents  # noqa: E402  (the misbehaving agents live with the tests)

from bench.reliability.tally import Tally  # noqa: E402

DEADLINE = 90.0
"""Seconds one run may take before it counts as a hang."""


@dataclass
class Family:
    name: str
    contexts: list[dict[str, Any]]
    """One per misbehaving test case."""
    factory: str = "misbehaving"
    evaluations: str = ""
    execution: str = ""
    args: tuple[str, ...] = ()
    quick: bool = True


@dataclass
class Row(Tally):
    family: str
    bad_reports: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        return not (self.faults() or self.bad_reports)


RAISES = [*agents.RAISES, "sys_exit", "sys_exit_3", "sys_exit_text"]
GRADE = "{type: code, grader: 'tests.agents:%s', name: g}"


def families() -> list[Family]:
    def mis(at: str, do: str, sync: bool = True) -> dict[str, Any]:
        return {"misbehave": {"at": at, "do": do, "sync": sync}}

    values = sorted(agents.BAD_VALUES)
    return [
        Family("raise in send (sync)", [mis("send", f"raise:{v}") for v in RAISES]),
        Family("raise in send (async)", [mis("send", f"raise:{v}", False) for v in RAISES]),
        Family("raise in factory (sync)", [mis("factory", f"raise:{v}") for v in RAISES]),
        Family(
            "raise in factory (async)",
            [mis("factory", f"raise:{v}") for v in RAISES],
            factory="misbehaving_async",
        ),
        Family(
            "raise in close",
            [mis("close", f"raise:{v}", sync) for v in RAISES for sync in (True, False)],
        ),
        Family(
            "tool args/results JSON cannot hold",
            [
                mis("send", f"{kind}:{v}")
                for kind in ("args", "args_mapping", "result")
                for v in values
            ],
        ),
        Family("token_usage wrong", [mis("send", f"usage:{v}") for v in sorted(agents.BAD_USAGE)]),
        Family("cost_usd wrong", [mis("send", f"cost:{v}") for v in sorted(agents.BAD_COST)]),
        Family(
            "malformed replies",
            [
                mis("send", f"reply:{v}")
                for v in (
                    "surrogates",
                    "surrogate_string",
                    "not_a_reply",
                    "response_not_text",
                    "invocations_not_a_list",
                    "mapping_with_bad_keys",
                )
            ],
        ),
        Family(
            "garbage grader (sync)",
            [{"grader": v} for v in _garbage_variants()],
            factory="scripted",
            evaluations=GRADE % "garbage_grader",
        ),
        Family(
            "garbage grader (async)",
            [{"grader": v} for v in _garbage_variants()],
            factory="scripted",
            evaluations=GRADE % "garbage_grader_async",
        ),
        Family(
            "stuck sync send", [mis("send", "stuck")] * 6, args=("--turn-timeout", "1", "-p", "3")
        ),
        Family("stuck sync factory", [mis("factory", "stuck")] * 4, execution="session_timeout: 1"),
        Family(
            "stuck grader",
            [{"grader": "stuck"}] * 2,
            factory="scripted",
            evaluations=GRADE % "garbage_grader",
            execution="grader_timeout: 1",
        ),
        # close() is bounded by a fixed 10 s: left out of --quick to keep CI short
        Family("stuck sync close", [mis("close", "stuck")] * 2, quick=False),
    ]


def _garbage_variants() -> list[str]:
    return [
        "string", "none", "dict", "nan", "inf", "seven", "negative", "bad_bool",
        "passed_bad_bool", "passed_string", "mutated_score", "reason_not_text",
        "details_not_mapping", "details_bytes", "details_set", "details_nan", "details_cycle",
        "details_object", "details_deep", "details_surrogates", "reason_surrogates",
        "raise:sys_exit", "raise:keyboard_interrupt", "raise:cancelled", "raise:broken_str",
        "raise:system_exit", "raise:generator_exit", "raise:timeout",
    ]  # fmt: skip


def _case(name: str, context: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "context": context, "turns": [{"input": "a"}, {"input": "b"}]}


def run_once(family: Family, bad: list[dict[str, Any]], row: Row, workdir: Path) -> None:
    """One CLI run: healthy cases around each bad one; counts go into ``row``."""
    cases: list[dict[str, Any]] = [_case("healthy-0", {})]
    for i, context in enumerate(bad):
        cases += [_case(f"bad-{i}", context), _case(f"healthy-{i + 1}", {})]
    suite = workdir / "suite.yaml"
    suite.write_text(
        f"agent: {{backend: python, factory: 'tests.agents:{family.factory}'}}\n"
        + (f"execution: {{{family.execution}}}\n" if family.execution else "")
        + (f"evaluations: [{family.evaluations}]\n" if family.evaluations else "")
        + "test_cases: "
        + json.dumps(cases)
        + "\n",
        encoding="utf-8",
    )
    out = workdir / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "multiturn_eval", "run", str(suite), "-o", str(out)]
    row.tried += len(bad)
    try:
        proc = subprocess.run(
            [*command, *family.args],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
    except subprocess.TimeoutExpired:
        row.hangs += 1
        row.notes.append(f"killed after {DEADLINE:g} s")
        return
    if "Traceback (most recent call last)" in proc.stdout + proc.stderr:
        row.tracebacks += 1
        row.notes.append(proc.stderr.strip().splitlines()[-1][:200] if proc.stderr else "")
    names = {c["name"] for c in cases}
    try:
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
        results = {r["name"]: r for r in report["results"]}
    except (OSError, ValueError, KeyError):
        row.bad_reports += 1
        row.lost += len(names)
        row.wrong_exit += proc.returncode not in (0, 1)
        return
    for name in names:
        result = results.get(name)
        if result is None or (name.startswith("healthy") and not result["passed"]):
            row.lost += 1
            row.notes.append(f"{name}: {'missing' if result is None else result['errors']}")
    failed = report["summary"]["failed"]
    if proc.returncode != (1 if failed else 0):
        row.wrong_exit += 1
        row.notes.append(f"exit {proc.returncode} with {failed} failed")
    try:
        ET.parse(out / "junit.xml")
        for name in ("summary.md", "report.html"):
            if not (out / name).read_text(encoding="utf-8").strip():
                raise ValueError(name)
    except (OSError, ValueError, ET.ParseError) as exc:
        row.bad_reports += 1
        row.notes.append(f"report: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run per family (for CI)")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    started = time.perf_counter()
    for family in families():
        if args.quick and not family.quick:
            continue
        row = Row(family.name)
        t0 = time.perf_counter()
        batches = [family.contexts] if args.quick else [[c] for c in family.contexts]
        for batch in batches:
            with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
                run_once(family, batch, row, Path(tmp))
        row.seconds = time.perf_counter() - t0
        rows.append(row)
    print(render(rows, time.perf_counter() - started, quick=args.quick))
    return 0 if all(r.clean() for r in rows) else 1


def render(rows: list[Row], seconds: float, quick: bool) -> str:
    head = "| family | tried | tracebacks | hangs | wrong exit | data lost | bad reports | s |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r.family} | {r.tried} | {r.tracebacks} | {r.hangs} | {r.wrong_exit} "
            f"| {r.lost} | {r.bad_reports} | {r.seconds:.1f} |"
        )
    total = Row("total")
    for r in rows:
        for name in ("tried", "tracebacks", "hangs", "wrong_exit", "lost", "bad_reports"):
            setattr(total, name, getattr(total, name) + getattr(r, name))
    lines.append(
        f"| **total** | {total.tried} | {total.tracebacks} | {total.hangs} | {total.wrong_exit} "
        f"| {total.lost} | {total.bad_reports} | {seconds:.1f} |"
    )
    for r in rows:
        for note in r.notes[:5]:
            lines.append(f"  {r.family}: {note}")
    mode = "quick: one run per family" if quick else "one run per misbehaving test case"
    lines.append(f"{mode}; {'all clean' if total.clean() else 'FAULTS FOUND'}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
