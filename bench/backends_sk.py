"""The ``semantic-kernel`` row of the backend benchmark (``bench/backends.py``).

    python bench/backends_sk.py                        # python, anthropic and semantic-kernel
    python bench/backends_sk.py semantic-kernel --repeats 1

Same suite and measurement as ``bench/backends.py`` (200 cases x 4 turns,
``-p 32``, every turn a numeric ground truth and an expected tool with
arguments). The Semantic Kernel agent (``service: openai``) talks to
``tests/fakes/openai_server.py`` (responder ``tool-then-answer``: a
``tool_calls`` reply, one Python tool call through the Semantic Kernel plugin,
then the answer: two HTTP requests per turn, as on ``anthropic``), run as its
own process so its CPU is not counted.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.backends import BACKENDS, Setup, main, tool_then_answer


def semantic_kernel_setup() -> Setup:
    # the fake calls tools-subtract(a=1, b=1), Semantic Kernel's name for the tool
    return tool_then_answer(
        textwrap.dedent(
            """\
            agent:
              backend: semantic-kernel
              service: openai
              model: gpt-4o-mini
              base_url: "{url}"
              instructions: Use the tools for arithmetic.
              tools:
                - function: tests.tool_funcs:subtract
            """
        ),
        "tests.fakes.openai_server",
        {"OPENAI_API_KEY": "sk-test-openai-0123456789"},
    )


BACKENDS.setdefault("semantic-kernel", semantic_kernel_setup)

if __name__ == "__main__":
    main()
