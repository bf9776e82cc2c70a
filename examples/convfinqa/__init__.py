"""ConvFinQA end to end: converter, tools, graders and an offline baseline agent.

Run from the repository root so that ``examples.convfinqa.tools:lookup`` and
friends import: ``multiturn-eval run examples/convfinqa/suite.yaml``.
"""
