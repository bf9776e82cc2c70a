"""The benchmark's one tool: run a ConvFinQA turn program (no table operations in the dev split)."""

from __future__ import annotations

from examples.convfinqa.graders import execute_program


def calculate(program: str) -> float:
    """Run a turn program such as ``subtract(60.94, 25.14), divide(#0, 25.14)``.

    Args:
        program: The ConvFinQA program of the turn.
    """
    value = execute_program(program).value
    return float(value)
