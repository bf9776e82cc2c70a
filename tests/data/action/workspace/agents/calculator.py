"""A tiny calculator agent for the action's sample suites (``python`` backend).

It answers "what is 2 + 3?" and follow-ups such as "and that * 4?" (the last
result), and records each arithmetic step as a tool invocation. A test case can
make it buggy (``context: {buggy_multiply: true}`` adds instead of
multiplying) or hostile (a message containing "shout" gets a reply full of
workflow commands, mentions and markup, and the agent also prints such lines to
stdout and stderr), which is what the failing suite uses. A message containing
"leak" is answered with the API key and the action's token as the agent sees
them (the leaky suite checks they never reach a report or comment). With
``CALCULATOR_CALL_LOG`` set, every message is appended to that file.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

_NUMBER = r"-?\d+(?:\.\d+)?"
_EXPR = re.compile(rf"({_NUMBER}|that)\s*([-+*])\s*({_NUMBER})")
HOSTILE = (
    "::error file=evil.py,line=1::pwned\r::warning::also pwned\n"
    "::stop-commands::guess\n@octocat <img src=x onerror=alert(1)> [click](https://evil.example)"
)


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value


class CalculatorSession:
    def __init__(self, context: dict[str, Any]) -> None:
        self.buggy_multiply = bool(context.get("buggy_multiply"))
        self.last: float | None = None

    def send(self, message: str) -> dict[str, Any]:
        log = os.environ.get("CALCULATOR_CALL_LOG")
        if log:
            with Path(log).open("a", encoding="utf-8") as handle:
                handle.write(message + "\n")
        if "shout" in message:
            print("::error::printed by the agent\r::warning::and again", flush=True)
            print("::error::printed to stderr", file=sys.stderr, flush=True)
            return {"response": HOSTILE}
        if "leak" in message:
            key = os.environ.get("ANTHROPIC_API_KEY", "no-key")
            token = os.environ.get("INPUT_GITHUB-TOKEN", "no-token")
            runtime = os.environ.get("ACTIONS_RUNTIME_TOKEN", "no-runtime-token")
            return {"response": f"key={key} token={token} runtime={runtime}"}
        match = _EXPR.search(message)
        if match is None:
            return {"response": "I can only do arithmetic."}
        left_text, op, right_text = match.groups()
        if left_text == "that":
            if self.last is None:
                return {"response": "There is nothing to refer to yet."}
            left = self.last
        else:
            left = float(left_text)
        right = float(right_text)
        if op == "+":
            name, value = "add", left + right
        elif op == "-":
            name, value = "subtract", left - right
        elif self.buggy_multiply:
            name, value = "add", left + right
        else:
            name, value = "multiply", left * right
        self.last = value
        call = {"name": name, "args": {"a": _number(left), "b": _number(right)}, "result": value}
        return {"response": f"The answer is {_number(value)}.", "tool_invocations": [call]}


def make_session(context: Any) -> CalculatorSession:
    return CalculatorSession(dict(context.context))
