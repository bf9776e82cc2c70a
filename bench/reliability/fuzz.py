"""Seeded fuzzer for suite files: mutate valid suites, load them, and demand a clean outcome.

Every mutant must either load or end in a ``ConfigError`` whose every issue names
the file; through the real CLI, ``validate`` must exit 0 or 2 and ``run`` 0, 1 or
2 (2 exactly when ``validate`` said 2), with no traceback on stderr and within a
time limit. Anything else is counted as a failure and printed.

    python bench/reliability/fuzz.py                  # 5,000 mutants, 100 through the CLI
    python bench/reliability/fuzz.py --quick          # 300 mutants, 6 through the CLI (CI)
    python bench/reliability/fuzz.py --count 20000 --cli-sample 300 --seed 7

Seeds: the ConvFinQA example cut to two test cases, the test suites' own suite
files, and small hand-written suites that use every feature (legacy and
multi-turn cases, matchers, graders, tools, files, instructions_file, anchors
and merge keys, ``${VAR}``). Families of mutations: bytes, lines, indentation,
tags, anchors/aliases (bombs included), scalar types, keys, nesting, encodings,
document markers, regexes, references (callables, hostile files: ``/dev/zero``,
a FIFO, a directory, a 65 MiB sparse file) and splices of two seeds.

``tests/test_fuzz_suites.py`` imports this module (500 mutants in-process, a
CLI sample) and runs ``--quick`` so CI runs the harness itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "runner") not in sys.path:
    sys.path.insert(0, str(ROOT / "runner"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from multiturn_eval.errors import ConfigError  # noqa: E402
from multiturn_eval.loader import display_path, load_suites  # noqa: E402
from multiturn_eval.reading import MAX_FILE_BYTES  # noqa: E402

IN_PROCESS_LIMIT = 10.0
"""Seconds one in-process load may take before it counts as a hang."""
CLI_LIMIT = 20.0
"""Seconds one CLI command may take before it counts as a hang."""

# ------------------------------------------------------------------------------ seeds

AGENT_MODULE = '''\
"""The fuzzer's agent, tools and grader (written next to the mutated suites)."""


class Echo:
    def send(self, message, files=()):
        return {
            "response": str(message)[:200],
            "tool_invocations": [{"name": "lookup", "args": {"q": str(message)[:200], "n": 1}}],
        }


def make_session(ctx):
    return Echo()


def lookup(q: str, n: int = 1) -> str:
    """Look q up."""
    return q


def grade(ctx):
    return 1.0


CONSTANT = 3
'''

HAND_WRITTEN = {
    "legacy": """\
agent:
  backend: python
  factory: fuzz_agent:make_session
test_cases:
  - name: legacy
    input: hello
    ground_truth: hello
    expected_tools: [lookup]
""",
    "multi-turn": """\
name: fuzz-multi
agent:
  backend: python
  factory: fuzz_agent:make_session
  instructions: You are a test agent.
  tools:
    - function: fuzz_agent:lookup
      description: Look it up.
evaluations:
  - type: standard
    metric: equality
    case_insensitive: true
  - type: code
    grader: fuzz_agent:grade
    threshold: 0.5
execution:
  parallel_test_cases: 2
  turn_timeout: 5
test_cases:
  - name: first
    tags: [smoke, fuzz]
    instructions: Extra text.
    context: {table: {"2009": {cash: 206588}}, user: "${FUZZ_USER}"}
    turns:
      - input: what is the cash?
        ground_truth: what is the cash?
        expected_tools:
          - lookup
          - name: lookup
            args: {q: {fuzzy: "What is the cash?"}, n: 1}
            count: 1
        turn_program: lookup(cash)
      - input: "206,588"
        ground_truth: "206588"
        evaluations:
          - {type: standard, metric: numeric, absolute_tolerance: 0.5, accept_thousands_separators: true}
        expected_tools:
          - {name: lookup, args: {q: {regex: "206,?588(\\\\.0+)?"}}}
        retrieval_context: ["cash was 206,588"]
  - name: second
    input: bye
    ground_truth: bye
""",
    "anchors": """\
agent: &agent
  backend: python
  factory: fuzz_agent:make_session
evaluations: &evals
  - {type: standard, metric: equality}
test_cases:
  - &case
    name: a
    turns:
      - input: one
        ground_truth: one
  - <<: *case
    name: b
  - name: c
    turns:
      - {input: two, ground_truth: two, evaluations: *evals}
""",
    "files": """\
agent:
  backend: python
  factory: fuzz_agent:make_session
  instructions_file: prompt.md
pricing:
  my-model: {input: 1.0, output: 2.0}
test_cases:
  - name: with-file
    turns:
      - input: look at this
        files: [{path: chart.png, media_type: image/png}]
      - input: and this
        files:
          - path: notes.txt
""",
}

HOSTILE_VALUES = [
    "[]",
    "{}",
    "[1, 2]",
    "{a: 1}",
    "null",
    "~",
    "true",
    "yes",
    "-1",
    "0",
    "1e999",
    ".nan",
    "-.inf",
    "9" * 400,
    "'" + "x" * 5_000 + "'",
    '"\\u0000"',
    '"\\x07"',
    "*undefined",
    "&a x",
    "2024-10-21",
    "0x1F",
    "1:30",
    "=",
    "<<",
    "'${FUZZ_UNSET}'",
    "'${FUZZ_USER}'",
    "$$",
    "|\n  block",
    ">-\n  folded",
    "? x",
    "- a\n- b",
    "'unterminated",
    '"bad \\q escape"',
    "[unclosed",
    "{a: 1",
    "@at",
    "`tick",
    "%percent",
    "!",
    "&",
    "*",
    "a: b: c",
    '""',
    "''",
    "\U0001f600",
    "\u202e",
    "\u2028",
    "\ufeff",
    "12\u00a0345",
    "-",
    "--- x",
]
HOSTILE_KEYS = [
    "1",
    "~",
    "[a]",
    "{a: 1}",
    ".nan",
    "true",
    "<<",
    "input",
    "turns",
    "ground_truht",
    "expected_tool",
    "evaluation",
    "'a b'",
    '"\\t"',
    "é",
    "? [x]\n  ",
    "''",
    "agent",
    "test_cases",
    "-",
    "?",
    "name:",
]
TAGS = [
    "!!int",
    "!!float",
    "!!bool",
    "!!timestamp",
    "!!binary",
    "!!str",
    "!!null",
    "!!set",
    "!!omap",
    "!!pairs",
    "!foo",
    "!!python/object:os.system",
    "!!python/name:builtins.print",
    "!<tag:x,2024:y>",
    "!",
    "!!map",
    "!!seq",
    "!!merge",
    "!!value",
    "!!yaml",
]
PATTERNS = [
    "(a+)+$",
    "(",
    "[",
    "a{99999999999}",
    "(?:a{1000}){1000}",
    "(?:(?:a{65535}){65535}){65535}",
    "(?<=a+)b",
    "\\p{L}",
    "[[:alpha:]]",
    "(?P<x>a)(?P<x>b)",
    "\\1",
    "(?V1)a",
    "*",
    "a**",
    "(" * 300 + ")" * 300,
    "x" * 2_000,
    "(?i)",
    "\\",
    "(?#",
    "[a-\\d]",
]
REFERENCES = [
    "os:getcwd",
    "nope:x",
    "a.b",
    "x:",
    ":x",
    "fuzz_agent:NOT_THERE",
    "fuzz_agent:CONSTANT",
    "fuzz_agent",
    "fuzz_agent:make_session:x",
    "fuzz agent:x",
    "..:x",
    "fuzz_agent:Echo.send",
    "multiturn_eval.nope:x",
    "'  '",
    "fuzz_agent:lookup",
]
HOSTILE_PATHS = [
    "/dev/zero",
    "/dev/urandom",
    "/dev/null",
    "pipe",
    "adir",
    "missing.md",
    "huge.bin",
    "loop",
    "prompt.md/x",
    "../../../../etc/passwd",
    "''",
    "/",
    ".",
    '"nul\\0byte"',
]


@dataclass(frozen=True)
class Seed:
    name: str
    text: str


def seeds() -> list[Seed]:
    out = [Seed(f"hand:{name}", text) for name, text in HAND_WRITTEN.items()]
    convfinqa = (ROOT / "examples" / "convfinqa" / "suite.yaml").read_text(encoding="utf-8")
    starts = [m.start() for m in re.finditer(r"^- name: ", convfinqa, re.MULTILINE)]
    out.append(Seed("convfinqa:2-cases", convfinqa[: starts[2]] if len(starts) > 2 else convfinqa))
    for path in sorted((ROOT / "tests" / "data").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "backend: python" in text:  # their own factories are not importable from here
            text = re.sub(r"(factory:\s*)\S+", r"\1fuzz_agent:make_session", text)
        out.append(Seed(f"tests:{path.relative_to(ROOT / 'tests' / 'data')}", text))
    return out


# -------------------------------------------------------------------------- mutations

_KEY_LINE = re.compile(
    r"^(?P<indent>[ \t]*(?:- )?)(?P<key>[^\s:#\-][^:#]*?):(?P<sep>[ \t]+|$)(?P<value>.*)$"
)


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _structural(rng: random.Random, lines: list[str]) -> int:
    """A line index, most often one holding a key."""
    keyed = [i for i, line in enumerate(lines) if _KEY_LINE.match(line)]
    if keyed and rng.random() < 0.85:
        return rng.choice(keyed)
    return rng.randrange(len(lines))


def _set_value(rng: random.Random, text: str, value: str) -> str:
    lines = _lines(text)
    i = _structural(rng, lines)
    m = _KEY_LINE.match(lines[i])
    if m:
        lines[i] = f"{m['indent']}{m['key']}: {value}"
    else:
        lines[i] = lines[i] + " " + value
    return "\n".join(lines)


def m_bytes(rng: random.Random, text: str) -> bytes:
    data = bytearray(text.encode("utf-8"))
    for _ in range(rng.randint(1, 8)):
        if not data:
            break
        at = rng.randrange(len(data))
        op = rng.randrange(4)
        junk = rng.choice(
            [
                b"\x00",
                b"\xff",
                b"\t",
                b"'",
                b'"',
                b"[",
                b"{",
                b":",
                b"-",
                b"\r",
                b"&",
                b"*",
                b"!",
                b"#",
                b"|",
                b"\xc3",
                b"%",
                b"\x85",
            ]
        )
        if op == 0:
            data[at] = rng.randrange(256)
        elif op == 1:
            data[at:at] = junk
        elif op == 2:
            del data[at : at + rng.randint(1, 20)]
        else:
            data[at:at] = data[at : at + rng.randint(1, 40)] * rng.randint(1, 5)
    return bytes(data)


def m_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    for _ in range(rng.randint(1, 4)):
        i = _structural(rng, lines)
        op = rng.randrange(5)
        if op == 0 and len(lines) > 1:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            lines = lines[: i + 1]
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return "\n".join(lines)


def m_indent(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    for _ in range(rng.randint(1, 3)):
        i = _structural(rng, lines)
        body = lines[i].lstrip(" \t")
        indent = len(lines[i]) - len(body)
        choice = rng.randrange(4)
        if choice == 0:
            lines[i] = "\t" + lines[i]
        elif choice == 1:
            lines[i] = " " * max(0, indent + rng.choice([-3, -2, -1, 1, 2, 3])) + body
        elif choice == 2:
            lines[i] = lines[i][:indent].replace("  ", "\t", 1) + body
        else:
            lines[i] = body
    return "\n".join(lines)


def m_tags(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    i = _structural(rng, lines)
    m = _KEY_LINE.match(lines[i])
    tag = rng.choice(TAGS)
    if m:
        value = m["value"] or rng.choice(["x", "1", "[1]", "{a: 1}", ""])
        lines[i] = f"{m['indent']}{m['key']}: {tag} {value}"
    else:
        lines[i] = f"{tag} {lines[i]}"
    return "\n".join(lines)


def _bomb(rng: random.Random) -> str:
    levels, width = rng.choice([(9, 10), (6, 10), (20, 2), (3, 1000), (4, 50)])
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "{" + ", ".join(lines) + "}"


def m_anchors(rng: random.Random, text: str) -> str:
    choice = rng.randrange(6)
    if choice == 0:
        return _set_value(rng, text, _bomb(rng))
    if choice == 1:
        return _set_value(rng, text, rng.choice(["*nothing", "&self [*self]", "&m {a: *m}"]))
    if choice == 2:
        anchored = _set_value(rng, text, "&fz " + rng.choice(["x", "[1, 2]", "{a: 1}", "1"]))
        return _set_value(rng, anchored, "*fz")
    if choice == 3:
        return _set_value(
            rng,
            text,
            "{<<: "
            + rng.choice(["1", "x", "[1]", "*fz", "{a: 1}", "[{a: 1}, {b: 2}]", "null"])
            + "}",
        )
    if choice == 4:
        lines = _lines(text)
        i = _structural(rng, lines)
        m = _KEY_LINE.match(lines[i])
        if m:
            lines.insert(
                i + 1, f"{m['indent']}<<: *{rng.choice(['agent', 'case', 'evals', 'nothing'])}"
            )
        return "\n".join(lines)
    return _set_value(rng, text, "&" + "a" * rng.choice([1, 100, 5000]) + " x")


def m_types(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 3)):
        text = _set_value(rng, text, rng.choice(HOSTILE_VALUES))
    return text


def m_keys(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    for _ in range(rng.randint(1, 3)):
        i = _structural(rng, lines)
        m = _KEY_LINE.match(lines[i])
        if not m:
            continue
        op = rng.randrange(4)
        if op == 0:
            key = rng.choice(HOSTILE_KEYS)
        elif op == 1:
            key = m["key"][:-1] or "x"
        elif op == 2:
            key = m["key"] + rng.choice(["s", "_", "x", "\u00e9", " "])
        else:
            lines.insert(i + 1, lines[i])  # a duplicate key
            continue
        lines[i] = f"{m['indent']}{key}:{m['sep']}{m['value']}"
    return "\n".join(lines)


def m_nesting(rng: random.Random, text: str) -> str:
    n = rng.choice([5, 50, 95, 99, 100, 101, 150, 999, 1001, 5_000, 50_000])
    shape = rng.randrange(3)
    if shape == 0:
        value = "[" * n + "]" * n
    elif shape == 1:
        value = "{a: " * n + "1" + "}" * n
    else:
        value = "[{a: " * (n // 2) + "1" + "}]" * (n // 2)
    return _set_value(rng, text, value)


def m_encoding(rng: random.Random, text: str) -> bytes:
    choice = rng.randrange(8)
    if choice == 0:
        return b"\xef\xbb\xbf" + text.encode()
    if choice == 1:
        return text.replace("\n", "\r\n").encode()
    if choice == 2:
        return text.replace("\n", "\r").encode()
    if choice == 3:
        return text.encode(rng.choice(["utf-16", "utf-16-le", "utf-32", "latin-1"]), "replace")
    data = text.encode()
    at = rng.randrange(len(data) + 1)
    junk = rng.choice(
        [
            b"\xff",
            b"\xc3",
            b"\xed\xa0\x80",
            b"\x00",
            b"\x1b[31m",
            "\ufffe".encode(),
            "\u2028".encode(),
            "\u0085".encode(),
            "\u200d".encode(),
            "\u202e".encode(),
            b"\xf4\x90\x80\x80",
        ]
    )
    return data[:at] + junk + data[at:]


def m_documents(rng: random.Random, text: str) -> str:
    choice = rng.randrange(6)
    if choice == 0:
        return text + "\n---\n" + text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        return "%YAML 1.2\n---\n" + text
    if choice == 2:
        return "%TAG ! tag:example.com,2024:\n---\n" + text
    if choice == 3:
        lines = _lines(text)
        lines.insert(
            rng.randrange(len(lines) + 1), rng.choice(["...", "---", "--- |", "%YAML 1.1"])
        )
        return "\n".join(lines)
    if choice == 4:
        return "--- " + text
    return text + "\n...\n" + rng.choice(["", "junk", "---\n"])


def m_regex(rng: random.Random, text: str) -> str:
    pattern = rng.choice(PATTERNS).replace("'", "''")
    matcher = rng.choice(
        [
            f"{{regex: '{pattern}'}}",
            f"{{fuzzy: '{pattern}'}}",
            f"{{regex: '{pattern}', fuzzy: x}}",
            "{regex: [a]}",
            "{regex: 1}",
            "{fuzzy: {a: 1}}",
        ]
    )
    if "args:" in text and rng.random() < 0.7:
        return re.sub(
            r"(args:\s*\{)(\s*\w+:)", lambda m: f"{m[1]}{m[2]} {matcher}, zz:", text, count=1
        )
    lines = _lines(text)
    for i, line in enumerate(lines):
        if re.match(r"^\s*- input:", line):
            indent = line.index("-") + 2
            lines.insert(
                i + 1, " " * indent + f"expected_tools: [{{name: lookup, args: {{q: {matcher}}}}}]"
            )
            break
    return "\n".join(lines)


def m_references(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        ref = rng.choice(REFERENCES)
        key = rng.choice(["factory", "grader", "function"])
        if f"{key}:" in text:
            return re.sub(rf"({key}:\s*)\S+", lambda m: m[1] + ref, text, count=1)
        return _set_value(rng, text, ref)
    target = rng.choice(HOSTILE_PATHS)
    if "instructions_file:" in text and rng.random() < 0.5:
        return re.sub(r"(instructions_file:\s*)\S+", lambda m: m[1] + target, text, count=1)
    if "path:" in text and rng.random() < 0.6:
        return re.sub(r"(path:\s*)[^,}\s]+", lambda m: m[1] + target, text, count=1)
    lines = _lines(text)
    for i, line in enumerate(lines):
        if line.startswith("  factory:") or line.startswith("  backend:"):
            lines.insert(i + 1, f"  instructions_file: {target}")
            break
    return "\n".join(lines)


def m_splice(rng: random.Random, text: str, other: str) -> str:
    a, b = _lines(text), _lines(other)
    return "\n".join(a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :])


FAMILIES: dict[str, Any] = {
    "bytes": m_bytes,
    "lines": m_lines,
    "indentation": m_indent,
    "tags": m_tags,
    "anchors": m_anchors,
    "types": m_types,
    "keys": m_keys,
    "nesting": m_nesting,
    "encoding": m_encoding,
    "documents": m_documents,
    "regex": m_regex,
    "references": m_references,
    "splice": m_splice,
}


@dataclass(frozen=True)
class Mutant:
    index: int
    family: str
    seed: str
    data: bytes


def mutants(count: int, seed: int = 0) -> Iterator[Mutant]:
    """``count`` mutants, the families taken in turn; the same ``seed`` gives the same ones."""
    rng = random.Random(seed)
    pool = seeds()
    names = list(FAMILIES)
    for index in range(count):
        family = names[index % len(names)]
        base = rng.choice(pool)
        if family == "splice":
            out: str | bytes = m_splice(rng, base.text, rng.choice(pool).text)
        else:
            out = FAMILIES[family](rng, base.text)
            if rng.random() < 0.25 and isinstance(out, str):  # now and then a second family
                second = rng.choice([n for n in names if n not in ("splice", "bytes", "encoding")])
                out = FAMILIES[second](rng, out)
        data = out.encode("utf-8", "surrogatepass") if isinstance(out, str) else out
        yield Mutant(index, family, base.name, data)


# ----------------------------------------------------------------------------- checks


def prepare(workdir: Path) -> None:
    """The files the seeds refer to, and the hostile ones the mutations point at."""
    (workdir / "fuzz_agent.py").write_text(AGENT_MODULE, encoding="utf-8")
    (workdir / "prompt.md").write_text("You are a test agent.\n", encoding="utf-8")
    (workdir / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    (workdir / "notes.txt").write_text("notes\n", encoding="utf-8")
    (workdir / "adir").mkdir(exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkfifo(workdir / "pipe")
    with (workdir / "huge.bin").open("wb") as handle:  # sparse
        handle.truncate(MAX_FILE_BYTES + 1)
    for a, b in (("loop", "loop2"), ("loop2", "loop")):
        with contextlib.suppress(FileExistsError):
            (workdir / a).symlink_to(b)


ENV = {
    "FUZZ_USER": "alice",
    "HOME": "/nonexistent",
    "PATH": os.environ.get("PATH", ""),
    # the dual-backend seeds; nothing listens there, and the CLI runs only python-backend suites
    "ANTHROPIC_FAKE_URL": "http://127.0.0.1:9",
    "ANTHROPIC_FAKE_KEY": "fuzz-key",
    "OPENAI_FAKE_URL": "http://127.0.0.1:9/v1",
    "OPENAI_FAKE_KEY": "fuzz-key",
}


@dataclass
class Outcome:
    kind: str
    """loaded | config_error | crash | hang | unlocated"""
    detail: str = ""
    backend: str | None = None


class _Hang(BaseException):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def check_in_process(mutant: Mutant, workdir: Path) -> Outcome:
    """Load one mutant with ``load_suites``: it loads or raises a located ConfigError."""
    path = workdir / f"m{mutant.index:06d}.yaml"
    path.write_bytes(mutant.data)
    shown = display_path(path)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, IN_PROCESS_LIMIT)
    try:
        loaded = load_suites([path], ENV)
    except ConfigError as exc:
        files = {issue.file for issue in exc.issues}
        if files != {shown} or not exc.issues:
            return Outcome(
                "unlocated", f"issues name {sorted(map(str, files))}, not {shown}: {exc}"
            )
        if any("\n" in issue.message for issue in exc.issues):
            return Outcome("unlocated", f"a message spans lines: {exc.issues[0].message!r}")
        return Outcome("config_error", str(exc.issues[0]))
    except _Hang:
        return Outcome("hang", f"load took more than {IN_PROCESS_LIMIT:g} s")
    except BaseException as exc:  # a crash is what the fuzzer looks for
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if "multiturn_eval" in f.filename
        ]
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        return Outcome(
            "crash",
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}{where}",
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        path.unlink()
    return Outcome("loaded", backend=loaded[0].suite.agent.backend)


def _cli(args: list[str], workdir: Path) -> tuple[int | None, str]:
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(ROOT)])}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "multiturn_eval", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=CLI_LIMIT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stderr


@dataclass
class CliOutcome:
    problems: list[str] = field(default_factory=list)
    hang: bool = False
    traceback: bool = False
    wrong_exit: bool = False
    codes: tuple[int | None, ...] = ()


def check_cli(mutant: Mutant, workdir: Path, in_process: Outcome) -> CliOutcome:
    """``validate`` then (on the python backend, or when it must fail anyway) ``run``."""
    path = workdir / f"cli{mutant.index:06d}.yaml"
    path.write_bytes(mutant.data)
    result = CliOutcome()
    try:
        code, err = _cli(["validate", str(path)], workdir)
        codes = [code]
        runs = in_process.kind == "config_error" or in_process.backend == "python"
        if runs and code is not None:
            out = workdir / f"out{mutant.index:06d}"
            run_code, run_err = _cli(
                ["run", str(path), "-o", str(out), "--format", "json", "--turn-timeout", "5"],
                workdir,
            )
            codes.append(run_code)
            err += run_err
            if run_code is not None and (
                run_code not in (0, 1, 2) or (code == 2) != (run_code == 2)
            ):
                result.wrong_exit = True
                result.problems.append(f"run exited {run_code} (validate {code})")
        if None in codes:
            result.hang = True
            result.problems.append(f"a command took more than {CLI_LIMIT:g} s")
        if code is not None and code not in (0, 2):
            result.wrong_exit = True
            result.problems.append(f"validate exited {code}")
        if "Traceback" in err:
            result.traceback = True
            result.problems.append("traceback on stderr: " + err.strip().splitlines()[-1][:200])
        result.codes = tuple(codes)
    finally:
        path.unlink()
    return result


# ------------------------------------------------------------------------------ report


@dataclass
class Tally:
    tried: Counter[str] = field(default_factory=Counter)
    loaded: Counter[str] = field(default_factory=Counter)
    config_errors: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    hangs: Counter[str] = field(default_factory=Counter)
    unlocated: Counter[str] = field(default_factory=Counter)
    cli: Counter[str] = field(default_factory=Counter)
    tracebacks: Counter[str] = field(default_factory=Counter)
    wrong_exit: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def bad(self) -> int:
        return sum(
            sum(c.values())
            for c in (self.crashes, self.hangs, self.unlocated, self.tracebacks, self.wrong_exit)
        )


def fuzz(count: int, cli_sample: int, seed: int = 0, workdir: Path | None = None) -> Tally:
    tally = Tally()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mte-fuzz-")))
        prepare(workdir)
        every = max(1, count // cli_sample) if cli_sample else 0
        for mutant in mutants(count, seed):
            family = mutant.family
            tally.tried[family] += 1
            outcome = check_in_process(mutant, workdir)
            {
                "loaded": tally.loaded,
                "config_error": tally.config_errors,
                "crash": tally.crashes,
                "hang": tally.hangs,
                "unlocated": tally.unlocated,
            }[outcome.kind][family] += 1
            if outcome.kind in ("crash", "hang", "unlocated"):
                tally.failures.append(
                    f"#{mutant.index} {family} ({mutant.seed}) {outcome.kind}: {outcome.detail}"
                )
            if every and mutant.index % every == 0 and sum(tally.cli.values()) < cli_sample:
                tally.cli[family] += 1
                cli = check_cli(mutant, workdir, outcome)
                tally.hangs[family] += cli.hang
                tally.tracebacks[family] += cli.traceback
                tally.wrong_exit[family] += cli.wrong_exit
                for problem in cli.problems:
                    tally.failures.append(
                        f"#{mutant.index} {family} ({mutant.seed}) CLI: {problem}"
                    )
    return tally


def _rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def table(tally: Tally, seconds: float) -> str:
    header = (
        "family",
        "tried",
        "loaded",
        "config errors",
        "crashes",
        "hangs",
        "unlocated",
        "CLI runs",
        "tracebacks",
        "wrong exits",
    )
    rows = []
    for family in FAMILIES:
        rows.append(
            (
                family,
                tally.tried[family],
                tally.loaded[family],
                tally.config_errors[family],
                tally.crashes[family],
                tally.hangs[family],
                tally.unlocated[family],
                tally.cli[family],
                tally.tracebacks[family],
                tally.wrong_exit[family],
            )
        )
    totals = ("total", *(sum(row[i] for row in rows) for i in range(1, len(header))))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, totals, strict=True)]

    def line(cells: tuple[Any, ...]) -> str:
        return (
            "| "
            + " | ".join(
                str(c).ljust(w) if i == 0 else str(c).rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    out = [
        line(header),
        "|"
        + "|".join(("-" * (w + 1) + ":") if i else "-" * (w + 2) for i, w in enumerate(widths))
        + "|",
    ]
    out += [line(row) for row in rows] + [line(totals)]
    out.append(
        f"\n{totals[1]} suites in {seconds:.1f} s; peak RSS {_rss_mib(resource.RUSAGE_SELF):.0f} MiB in-process, "
        f"{_rss_mib(resource.RUSAGE_CHILDREN):.0f} MiB for the largest CLI child"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=5_000, help="mutants loaded in-process")
    parser.add_argument(
        "--cli-sample", type=int, default=100, help="of which this many also through the CLI"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true", help="300 mutants, 6 through the CLI (for CI)"
    )
    parser.add_argument(
        "--memory-limit-mib",
        type=int,
        default=3_072,
        help="address-space cap (a runaway allocation fails instead of swapping)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.cli_sample = 300, 6
    limit = args.memory_limit_mib * 1024 * 1024
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    started = time.monotonic()
    tally = fuzz(args.count, args.cli_sample, args.seed)
    print(table(tally, time.monotonic() - started))
    for failure in tally.failures[:50]:
        print("FAIL", failure)
    print(
        f"fuzz: {sum(tally.tried.values())} suites, {sum(tally.config_errors.values())} config errors, {tally.bad} failures"
    )
    return 1 if tally.bad else 0


if __name__ == "__main__":
    sys.exit(main())
