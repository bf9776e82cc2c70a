"""Keeping secrets and hostile control characters out of everything written.

The secret rules and :class:`Redactor` live in :mod:`multiturn_eval.secrets`;
they are re-exported here for the renderers.
"""

from __future__ import annotations

import re

from ..secrets import REDACTED, Redactor

__all__ = ["REDACTED", "Redactor", "strip_control"]

# escape sequences first (CSI such as colours, OSC such as window titles), so they go
# whole rather than leaving "[31m" behind once the ESC character alone is removed
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (keeps tab and newline)."""
    return _CONTROL.sub("", text)
